"""What ``sweep`` decides before it opens a device: ``--resume`` settings from the file, ``--dry-run``.

``--resume`` re-reads the command stored in the file (``run.argv``) and runs with
its settings; options that say how to measure must agree with it, else a
one-line error says which one differs; options that choose what to measure
(shapes, dtypes, modes) may be given again and replace the file's. ``--dry-run`` prints the shapes, passes and a time
range from :mod:`mfu_sweep.measure.estimate` and exits.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

# Options a resumed run may set itself: they change where or how it reports, not what it measures.
RESUME_OWN = frozenset({"resume", "force", "quiet", "output", "dry_run", "start_timeout_s",
                        "refine_against", "until", "refine_budget", "refine_pair"})
# Options that choose what to measure: given again, they replace the file's choice (a resume may add
# shapes, dtypes or modes); the records already in the file are kept. Every other option says how to
# measure and must agree with the file's command.
RESUME_SELECTION = frozenset({"shape_specs", "shape_file", "families", "min_flop", "max_flop", "points", "align",
                              "dtypes", "modes",
                              "device"})  # e.g. cpu for auto: the sweep checks the device is the file's own
# Given again, any of these replaces all of them: `--shape-file next.csv --resume` measures the file's
# shapes, not the stored square family as well (whose records are in the file already).
SHAPE_SELECTION = frozenset({"shape_specs", "shape_file", "families", "min_flop", "max_flop", "points", "align"})
RESUMED = "mfu_sweep.resumed"


def _stored_command(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The ``mfu-sweep sweep`` arguments stored in a sweep file (``run.argv``, without the program and command)
    and the file's settings."""
    from mfu_sweep.records.journal import resume_problem
    from mfu_sweep.records.results import load_sweeps, read_json

    if not path.exists():
        raise click.ClickException(f"cannot resume {str(path)!r}: no such file; drop --resume to start it")
    problem = resume_problem(path, read_json(path, fold=False))
    if problem:
        raise click.ClickException(f"cannot resume {str(path)!r}: {problem}")
    sweeps = load_sweeps([path])
    if len(sweeps) != 1:
        raise click.ClickException(f"cannot resume {str(path)!r}: it is a merged file; resume one sweep file")
    argv = [str(a) for a in sweeps[0].run.get("argv") or []]
    if "sweep" not in argv[:3]:
        raise click.ClickException(f"cannot resume {str(path)!r}: it was not written by `mfu-sweep sweep` "
                                   f"(run.argv={shlex.join(argv)!r}); start a new file")
    return argv[argv.index("sweep") + 1:], dict(sweeps[0].settings)


def recorded_defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """Parameter values a file's settings record, for options its command left at their default.

    Defaults change between versions (``--repeats`` defaulted to 1 before passes
    existed); the file's own record of what ran wins over today's default.
    """
    from mfu_sweep.records.results import sweep_repeats

    timing = settings.get("timing") or {}
    out: dict[str, Any] = {"repeats": sweep_repeats(settings)}
    for param, key in (("budget_s", "budget_s"), ("target_ci", "target_rel_ci"), ("min_samples", "min_samples"),
                       ("max_samples", "max_samples")):
        if key in timing:
            out[param] = timing[key]
    for key in ("seed", "cache", "threads", "timer", "compile_mode", "isolate", "timeout_s"):
        if key in settings:
            out[key] = settings[key]
    for param in ("dtypes", "modes"):
        if settings.get(param):
            out[param] = tuple(settings[param])
    return out


def _flag(param: click.Parameter) -> str:
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else str(param.name)


def resumed_params(ctx: click.Context, output: str | None, default_output: Path) -> dict[str, Any] | None:
    """The parameters to run with under ``--resume``: the file's, plus this command line's own (see RESUME_OWN).

    Returns None when this call is itself the resumed run. Raises a one-line
    error when an option given here differs from the file's command.
    """
    if ctx.meta.get(RESUMED):
        return None
    path = Path(output) if output else default_output
    stored, settings = _stored_command(path)
    try:
        old = ctx.command.make_context("sweep", list(stored), parent=ctx.parent)
    except click.ClickException as exc:
        raise click.ClickException(f"cannot resume {str(path)!r}: its stored command `mfu-sweep sweep "
                                   f"{shlex.join(stored)}` does not parse here ({exc.format_message()}); "
                                   f"start a new file") from None
    for name, value in recorded_defaults(settings).items():
        if name in old.params and old.get_parameter_source(name) == ParameterSource.DEFAULT:
            old.params[name] = value
    chosen = {}
    for param in ctx.command.params:
        name = str(param.name)
        given = ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
        if not given or name in RESUME_OWN or ctx.params[name] == old.params.get(name):
            continue
        if name in RESUME_SELECTION:
            chosen[name] = ctx.params[name]
            continue
        raise click.ClickException(
            f"cannot resume {str(path)!r}: {_flag(param)}={ctx.params[name]!r} differs from its "
            f"settings.{name}={old.params.get(name)!r} (its command: mfu-sweep sweep {shlex.join(stored)}); "
            f"drop {_flag(param)} to continue with the file's settings, or start a new file with -o")
    ctx.meta[RESUMED] = True
    own = {k: ctx.params[k] for k in RESUME_OWN if k in ctx.params}
    fresh = {}
    if chosen.keys() & SHAPE_SELECTION:
        defaults = ctx.command.make_context("sweep", [], parent=ctx.parent).params
        fresh = {k: v for k, v in defaults.items() if k in SHAPE_SELECTION}
    return {**old.params, **fresh, **chosen, **own, "output": str(path)}


def print_dry_run(tasks: Sequence[Any], repeats: int, timing: Any, isolate: str, output: Path, peaks: dict[str, float],
                  records: Sequence[Any], device: str) -> None:
    """The ``--dry-run`` report: device, shapes, passes, output, the device time and the wall time.

    ``records``: those of the file a ``--resume`` continues (none for a new file): what the plan
    finds done there, and the per-shape costs they measured.
    """
    from mfu_sweep.measure.estimate import estimate_sweep, measured_costs
    from mfu_sweep.util.text import counted

    done = {(r.run_pass, r.key) for r in records}
    est = estimate_sweep(tasks, repeats, timing, peaks, isolate, done, measured_costs(records))
    shapes = _first_shapes(tasks, 12)
    shown = ", ".join(shapes) + (f", ... and {est.shapes - 12} more" if est.shapes > 12 else "")
    click.echo("dry run: nothing is measured or written")
    click.echo(f"device: {device}")
    flops = f"{est.min_flops:.3g}" if est.min_flops == est.max_flops else f"{est.min_flops:.3g} to {est.max_flops:.3g}"
    click.echo(f"shapes: {est.shapes} ({flops} FLOP): {shown}")
    click.echo(f"dtypes: {', '.join(est.dtypes)}; modes: {', '.join(est.modes)}")
    order = ("" if len(tasks) < 2 else ", each in its own shuffled order" if repeats > 1 else ", in a shuffled order")
    found = (f", {est.in_file} already in the file" if est.in_file else ", none in the file yet" if records else "")
    kept = f"; the file's {counted(est.kept, 'other record')} stay as they are" if est.kept else ""
    click.echo(f"passes: {repeats} over the {'shapes' if est.shapes > 1 else 'shape'}{order}: "
               f"{counted(est.planned, 'measurement')}{found}{kept}")
    click.echo(f"output: {output}")
    click.echo(f"estimated time: {_time_range(est.low_s, est.high_s)} ({est.basis})")
    if est.measurements:
        each = est.per_shape
        click.echo(f"  device time {_time_range(est.device_low_s, est.device_high_s)} (first calls, "
                   f"warm-up, timing loops); around it {counted(est.workers, 'worker start')}, and per shape "
                   f"{each.setup_s * 1e3:.0f} ms of inputs and check and {each.overhead_s * 1e3:.0f} ms of the "
                   f"sweep's own overhead ({each.basis})")


def _first_shapes(tasks: Sequence[Any], most: int) -> list[str]:
    """The first ``most`` distinct shapes of ``tasks`` (a million-shape plan names twelve, and lists none)."""
    seen: dict[str, None] = {}
    for t in tasks:
        seen.setdefault(str(t.shape))
        if len(seen) == most:
            break
    return list(seen)


def _time_range(low: float, high: float) -> str:
    from mfu_sweep.util.progress import format_duration

    a, b = format_duration(low), format_duration(high)
    return a if a == b else f"{a} to {b}"


def dry_run_peaks(on_cpu: bool, threads: int | None, chip: str | None, spec_file: str | None,
                  peak_tflops: float | None, dtypes: Sequence[str]) -> dict[str, float]:
    """Peak TFLOP/s per dtype known without opening the device (for the estimate)."""
    if peak_tflops:
        return dict.fromkeys(dtypes, peak_tflops)
    if chip:
        from mfu_sweep.specs import load_chips

        return dict(load_chips(spec_file)[chip].peak_tflops)
    if on_cpu:
        from mfu_sweep.specs.cpu import estimate_cpu_peak

        return dict(estimate_cpu_peak(threads).tflops)
    return {}


def check_resume_device(path: Path, backend: str) -> None:
    """``--resume --dry-run``: refuse a device of another backend than the file's (``backend``: the one asked
    for, ``auto`` resolved), as the real resume does once its device opens."""
    from mfu_sweep.records.results import load_sweeps

    if not path.exists():
        return
    own = load_sweeps([path])[0].device.get("backend")
    if own != backend:
        raise click.ClickException(f"cannot resume {str(path)!r}: its device.backend={own!r} differs from the "
                                   f"device asked for ({backend}); resume it on a {own} device, or start a new "
                                   "file with -o")


def records_done(path: Path) -> list[Any]:
    """The records already in ``path``, journal included (none when it does not exist)."""
    from mfu_sweep.records.results import load_sweeps

    if not path.exists():
        return []
    return [r for s in load_sweeps([path]) for r in s.records]
