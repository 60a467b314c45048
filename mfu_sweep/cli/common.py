"""What every command module shares: one-line domain errors, the invocation's argv, option callbacks.

Nothing here defines a command; :mod:`mfu_sweep.cli` builds the group from the
command modules.
"""

from __future__ import annotations

import functools
import io
import math
import os
import select
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click

from mfu_sweep.util.errors import BackendError, with_hint
from mfu_sweep.util.outputs import OutputError, check_suffix, os_error_message


def domain_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for Click commands: domain errors become ``Error: <message>``, never a traceback.

    The library's validation errors are ``ValueError`` subclasses whose messages
    name the field and the bad value; :class:`BackendError` says why a device
    is unusable (a hint on what to try is added where it has none). Both become
    ``click.ClickException`` (exit code 1). An ``OSError`` that reaches here (a
    disk filling up mid-run) is worded by ``mfu_sweep.util.outputs.os_error_message``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:  # the reader of our output went away (| head): ArgvGroup ends quietly
            raise
        except BackendError as exc:
            raise click.ClickException(with_hint(str(exc))) from None
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            if exc.filename is None:
                raise click.ClickException(f"{exc.strerror or exc}") from None
            raise click.ClickException(os_error_message(exc, exc.filename)) from None

    return wrapper


MEASURE_INSTALL = ("python -m pip install '.[measure]' in the mfu-sweep checkout (as the README installs it), or "
                   "install the torch build for your machine (CUDA, ROCm, CPU; pytorch.org) into this environment "
                   "first")


def require_torch(what: str) -> None:
    """One line, before anything runs, when torch is not installed: an analysis-only install measures nothing.

    Only looks for the package (``find_spec``); the sweep's parent process stays torch-free.
    """
    import importlib.util

    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise click.ClickException(f"{what} needs torch to open a device, and this environment has none (an "
                                   f"analysis-only install); add the measuring part: {MEASURE_INSTALL}")


EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C stopped
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head`'s yes


class ArgvGroup(click.Group):
    """A group that remembers the arguments it was invoked with, for the result's ``run.argv``, and ends
    every command the way a shell tool does.

    ``sys.argv`` would be wrong for in-process callers (CliRunner, notebooks):
    it holds the host program's command line, not this invocation's. Ctrl-C ends a command with
    ``interrupted`` and exit status 130 (Click would say ``Aborted!`` and exit 1); a closed output pipe
    (``mfu-sweep compare ... | head``) ends it silently with 141, as a tool killed by SIGPIPE; text
    that the terminal's encoding cannot show (a file name that is not UTF-8) is printed with backslash
    escapes instead of failing.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
                stream.reconfigure(errors="backslashreplace")
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _quiet_echo("\ninterrupted")
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            _broken_pipe()

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:  # --help and --version print while the arguments are parsed
            ctx = super().make_context(info_name, list(args), parent=parent, **extra)
        except BrokenPipeError:
            _broken_pipe()
        ctx.meta["mfu_sweep.argv"] = ["mfu-sweep", *args]
        return ctx


def _broken_pipe() -> NoReturn:
    """End quietly with 141 when our output's reader has gone; any other closed pipe is an error."""
    if not _output_closed():
        raise click.ClickException("a pipe to a worker or a helper process closed early") from None
    _silence_output()
    raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None


def _quiet_echo(message: str) -> None:
    try:
        click.echo(message, err=True)
    except OSError:  # stderr is gone too
        pass


def _output_closed() -> bool:
    """Whether stdout or stderr is a pipe whose reader has gone (poll reports an error on it)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (OSError, ValueError, AttributeError):  # CliRunner's streams have no descriptor
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(event & select.POLLERR for _, event in poller.poll(0)):
            return True
    return False


def _silence_output() -> None:
    """Point stdout and stderr at /dev/null, so flushing them at exit cannot raise again (Python's advice)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass
    os.close(devnull)


def invoked_argv() -> list[str]:
    """This invocation's command line as ``mfu-sweep ...`` (falls back to ``sys.argv`` outside click)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and "mfu_sweep.argv" in ctx.meta:
        return list(ctx.meta["mfu_sweep.argv"])
    return ["mfu-sweep", *sys.argv[1:]]


def positive_float(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"{value!r} must be a positive number", ctx=ctx, param=param)
    return value


def json_output(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Option callback of a JSON file to write: ``out.csv`` is refused before any work (``check_suffix``)."""
    if value is not None:
        try:
            check_suffix(value, ".json", "JSON", param.opts[0])
        except OutputError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def label_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Option callback of a series label: one line of text with something in it (the file name made from it is
    :func:`mfu_sweep.util.names.safe_name`'s; the label itself goes into the JSON as given)."""
    from mfu_sweep.util.names import has_control

    if value is not None and (not value.strip() or has_control(value)):
        raise click.BadParameter(f"{ascii(value)} must be one line of printable text (no control characters or "
                                 "bidirectional overrides) and not blank", ctx=ctx, param=param)
    return value


# --spec-file, shared by every command that looks up peak specs
spec_file_option = click.option("--spec-file", type=str, default=None, metavar="FILE",
                                help="TOML with extra or replacement [[chip]] entries (as in specs/chips.toml).")


ALLOW_INVALID = "mfu_sweep.allow_invalid"


def _allow_invalid(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[ALLOW_INVALID] = True
    return value


# --allow-invalid, shared by every command that reads result files (fit, compare, export, merge, plot, report,
# predict); read through invalid_note(), so no command's signature changes
allow_invalid_option = click.option(
    "--allow-invalid", is_flag=True, expose_value=False, callback=_allow_invalid,
    help="Read result files that fail `mfu-sweep validate` by dropping the records (and sweeps of a merged file) "
         "that fail, with a note naming how many and the first problem. Default: refuse such a file.")


def result_files(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The result files a command reads (``FILES...``), with ``--allow-invalid`` for those that fail validation."""
    return click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))(allow_invalid_option(fn))


def invalid_note() -> Callable[[str], None] | None:
    """How this command's readers treat a file that fails validation: None (refuse it, the library's default)
    or, under ``--allow-invalid``, a callback that prints the library's note on what was dropped."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or not ctx.meta.get(ALLOW_INVALID):
        return None
    return lambda note: click.echo(f"note: {note}", err=True)


def echo_incomplete(sweeps: Any) -> None:
    """A ``note:`` on stderr for every incomplete (interrupted) sweep among ``sweeps``."""
    from mfu_sweep.records.summaries import incomplete_reason

    for reason in filter(None, map(incomplete_reason, sweeps)):
        click.echo(f"note: {reason}", err=True)


def _margin(ctx: click.Context, param: click.Parameter, value: str | None) -> float:
    from mfu_sweep.analysis.verdicts.margin import MarginError, parse_margin

    try:
        return parse_margin(value)
    except MarginError as exc:  # one line, naming the option and the value
        raise click.ClickException(f"--margin: {exc}") from None


# --margin, shared by compare (bands), the fleet view and the leaderboards
margin_option = click.option(
    "--margin", default="2%", show_default=True, metavar="FRACTION|PERCENT", callback=_margin,
    help="Practical-equivalence margin: a ratio within 1 +- margin is 'the same', never a lead; a lead must be "
         "beyond it with confidence. 0 restores a pure difference test; at most 50%.")


# --seed of a bootstrap, shared by fit, compare and export
seed_option = click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
                           help="Seed of the bootstrap.")


# --fail-on of compare's leaderboards and fleet view (mfu_sweep.cli.board); here so that building the command
# line does not import the fleet statistics (and scipy.stats) before a command needs them
gate_option = click.option(
    "--fail-on", "fail_on", type=click.Choice(["slower", "ambiguous"]), default=None,
    help="Exit 1 (after the output, with one 'gate:' line) when a device is slower than the rest or its "
         "--baseline by more than --margin; 'ambiguous' also fails a device some band cannot show within the "
         "margin. For Slurm epilogs and CI steps; needs a replicate run, --baseline or more than 4 devices.")


class DtypeChoice(click.Choice):
    """The tool's dtypes as a choice that also takes torch's names (``bfloat16``, ``torch.float32``, ``half``),
    each given back as the tool's own (:func:`mfu_sweep.gemm.dtypes.canonical_dtype`)."""

    def __init__(self) -> None:
        from mfu_sweep.gemm.dtypes import DTYPES

        super().__init__(list(DTYPES))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from mfu_sweep.gemm.dtypes import canonical_dtype

        try:
            return canonical_dtype(str(value))
        except ValueError:
            return super().convert(value, param, ctx)  # Click's own message, listing the choices


def dtype_aliases(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Option callback: torch's names of dtypes (``bfloat16``) as the tool's (``bf16``); other text stays as given,
    for the option's own check (e.g. "matches no records", naming the dtypes present)."""
    from mfu_sweep.gemm.dtypes import canonical_dtype

    def one(text: str | None) -> str | None:
        if text is None:
            return None
        try:
            return canonical_dtype(text)
        except ValueError:
            return text

    return tuple(one(v) for v in value) if isinstance(value, tuple) else one(value)


# --no-cache of compare (mfu_sweep.cli.board.fleet_inputs): here so that building the command imports no analysis
no_cache_option = click.option(
    "--no-cache", is_flag=True,
    help="With many files (the fleet gate), neither read nor write the cache of per-file digests in "
         "$XDG_CACHE_HOME/mfu-sweep (default ~/.cache/mfu-sweep); every file is read and validated again.")
