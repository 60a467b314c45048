"""What every command module shares: one-line domain errors, the invocation's argv, option callbacks.

Nothing here defines a command; :mod:`mfu_sweep.cli` builds the group from the
command modules.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import Any

import click

from mfu_sweep.errors import BackendError, with_hint
from mfu_sweep.outputs import OutputError, check_suffix, os_error_message


def domain_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for Click commands: domain errors become ``Error: <message>``, never a traceback.

    The library's validation errors are ``ValueError`` subclasses whose messages
    name the field and the bad value; :class:`BackendError` says why a device
    is unusable (a hint on what to try is added where it has none). Both become
    ``click.ClickException`` (exit code 1). An ``OSError`` that reaches here (a
    disk filling up mid-run) is worded by ``mfu_sweep.outputs.os_error_message``.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BackendError as exc:
            raise click.ClickException(with_hint(str(exc))) from None
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            if exc.filename is None:
                raise click.ClickException(f"{exc.strerror or exc}") from None
            raise click.ClickException(os_error_message(exc, exc.filename)) from None

    return wrapper


class ArgvGroup(click.Group):
    """A group that remembers the arguments it was invoked with, for the result's ``run.argv``.

    ``sys.argv`` would be wrong for in-process callers (CliRunner, notebooks):
    it holds the host program's command line, not this invocation's.
    """

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        ctx = super().make_context(info_name, list(args), parent=parent, **extra)
        ctx.meta["mfu_sweep.argv"] = ["mfu-sweep", *args]
        return ctx


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
    from mfu_sweep.summaries import incomplete_reason

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
