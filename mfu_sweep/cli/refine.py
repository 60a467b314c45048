"""``mfu-sweep refine`` (propose the next shapes and passes) and the options of ``sweep``'s refinement loop."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from mfu_sweep.cli.common import domain_errors
from mfu_sweep.util.text import counted

EXIT_NOTHING_PROPOSED = 3  # settled or looks spent: scripts loop `while mfu-sweep refine ...; do ...; done`


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Shape file to write (CSV: batch,m,n,k,family,passes) for every device to sweep; - writes it "
                   "to standard output (the other lines then go to stderr).")
@click.option("--target", type=click.FloatRange(min=1.0, min_open=True), default=1.5, show_default=True,
              help="Crossover interval to reach, as high/low FLOPs.")
@click.option("--looks", type=click.IntRange(1, 100), default=None,
              help="Looks (the first sweep plus refinement rounds) planned before any data; each look's verdicts "
                   "are tested at alpha/looks, so all of them together keep alpha. Fix it once, before the "
                   "first round; later rounds keep it [8].")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Family-wise error over all looks.")
@click.option("--metric", type=click.Choice(["mfu", "tflops"]), default="mfu", show_default=True,
              help="What the verdicts compare, as in `mfu-sweep compare`.")
@click.option("--a", "a", default=None, help="First series: LABEL, or LABEL/DTYPE[/MODE] to compare across dtypes.")
@click.option("--b", "b", default=None, help="Second series, as --a.")
@click.option("--bends", is_flag=True,
              help="One device alone: place shapes where its curve bends (roofline knee, wave steps).")
@click.option("--max-shapes", type=click.IntRange(1, 1000), default=24, show_default=True,
              help="New shapes per round, at most (widest open regions first).")
@click.option("--force", is_flag=True, help="Overwrite an existing shape file.")
@domain_errors
def refine(files: tuple[str, ...], output: str, target: float, looks: int | None, alpha: float, metric: str,
           a: str | None, b: str | None, bends: bool, max_shapes: int, force: bool) -> None:
    """Propose the shapes and passes that most narrow what a comparison leaves open.

    Reads sweeps of two or more devices (sweep or merged files), compares them
    at this look's share of alpha, and writes a shape file with new shapes
    inside crossover intervals wider than --target and where an ambiguous
    stretch leans both ways, plus more passes where the shapes are already
    dense and run-to-run spread is what stops the verdict; none where the
    verdict is settled. Every device then runs the same file into its own
    result file (the command is printed), and refine runs again. Exit status:
    0 a shape file was written, 3 nothing left to propose (settled, or the
    planned looks are used up), 1 an error.

    \b
    Example:
        mfu-sweep refine sweeps/h100.json sweeps/mi300x.json -o next.csv
        mfu-sweep sweep --device cuda --shape-file next.csv --resume -o sweeps/h100.json
        mfu-sweep refine sweeps/cpu.json --a cpu/fp32 --b cpu/bf16 -o next.csv
    """
    from mfu_sweep.analysis.refine.plan import plan_refinement, write_shape_file
    from mfu_sweep.records.results import load_sweeps
    from mfu_sweep.util.outputs import check_output_file, is_stdout

    sweeps = load_sweeps(files)
    check_output_file(output, force)  # before the comparisons, which take a while
    err = is_stdout(output)  # -o -: the shape file goes to standard output, every other line to stderr
    plan = plan_refinement(sweeps, target=target, looks=looks, alpha=alpha, metric=metric,
                           a=a, b=b, bends_only=bends, max_shapes=max_shapes)
    for note in plan.skipped:
        click.echo(f"note: {note}", err=True)
    for comp in plan.comparisons:
        click.echo(comp.sentence(), err=err)
    for region in plan.regions:
        click.echo(f"open: {region.describe()}", err=err)
    click.echo(plan.sentence(), err=err)
    if plan.status != "open":
        kept = "left as it was" if not err and Path(output).exists() else "not written"
        click.echo(f"{output} {kept}: no shape to propose (status {plan.status}; exit {EXIT_NOTHING_PROPOSED})",
                   err=True)
        sys.exit(EXIT_NOTHING_PROPOSED)
    commands, fixed = sweep_commands(sweeps, output), imported_labels(sweeps)
    note = imported_note(fixed, output, compared_options(plan.comparisons))
    header = [f"run on every device: {cmd}" for cmd in commands] + [note] * bool(fixed)
    write_shape_file(output, plan, header)
    click.echo(f"wrote {'standard output' if err else output} ({counted(len(plan.proposals), 'row')})"
               + ("; on every device:" if commands else ""), err=err)
    for cmd in commands:
        click.echo(f"  {cmd}", err=err)
    if fixed:
        click.echo(f"note: {note}", err=err)


def imported_labels(sweeps: Sequence[Any]) -> list[str]:
    """Labels of imported sweeps (published tables, other tools' logs): they cannot be measured again."""
    from mfu_sweep.records.results import is_published

    return list(dict.fromkeys(s.label for s in sweeps if is_published(s.device)))


def imported_note(labels: Sequence[str], shape_file: str, options: str = "") -> str:
    """What to do with the proposals where a side is imported: measure them on a device of one's own
    (``options``: the ``--dtype``/``--mode`` of the compared pair, :func:`compared_options`)."""
    return (f"{', '.join(labels)} {'is' if len(labels) == 1 else 'are'} imported (published data) and cannot "
            f"be measured again; sweep {shape_file} on a device of your own (e.g. mfu-sweep sweep --device cuda"
            f"{options} --shape-file {shape_file} -o mine.json) and compare that with the imported file")


def compared_options(comparisons: Sequence[Any]) -> str:
    """`` --dtype D --mode M`` of the compared pairs (both of a pair compared across dtypes or modes, ``a|b``)."""
    dtypes = sorted({d for c in comparisons for d in c.dtype.split("|")})
    modes = sorted({m for c in comparisons for m in c.mode.split("|")})
    return "".join(f" --dtype {d}" for d in dtypes) + "".join(f" --mode {m}" for m in modes)


def sweep_commands(sweeps: Sequence[Any], shape_file: str) -> list[str]:
    """One ``sweep --shape-file ... --resume`` command per device, with its dtypes, modes and threads.

    A sweep file is resumed in place; a device read from a merged file is named by
    its label, since a merged file cannot be resumed: its own sweep file must be.
    Imported sweeps get no command: a published table cannot be measured again.
    """
    from mfu_sweep.records.results import is_published

    out = []
    measured = [s for s in sweeps if not is_published(s.device)]
    for source in dict.fromkeys(s.source for s in measured):
        mine = [s for s in measured if s.source == source]
        for label in dict.fromkeys(s.label for s in mine):
            own = [s for s in mine if s.label == label]
            dtypes = sorted({r.dtype for s in own for r in s.records})
            modes = sorted({r.mode for s in own for r in s.records})
            opts = "".join(f" --dtype {d}" for d in dtypes) + "".join(f" --mode {m}" for m in modes)
            threads = own[0].settings.get("threads")
            opts += f" --threads {threads}" if threads else ""
            target = shlex.quote(source) if len(mine) == 1 else f"<{label}'s own sweep file>"
            backend = shlex.quote(str(own[0].device.get("backend", "auto")))  # copied into a shell: quoted
            out.append(f"mfu-sweep sweep --device {backend}{opts} --shape-file {shlex.quote(shape_file)} --resume "
                       f"-o {target}")
    return out


# -- sweep's refinement loop -------------------------------------------------------------


def refine_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``sweep``'s one-machine refinement loop."""
    for option in reversed([
        click.option("--refine-against", "refine_against", multiple=True, type=click.Path(dir_okay=False),
                     help="After the sweep, refine against this other device's result file (repeatable): "
                          "measure where the crossovers are still wider than --until, until settled."),
        click.option("--until", "until", default=None, metavar="crossover-width=X|bend-width=X",
                     help="When the refinement loop stops: every crossover (or, alone, every bend) narrower "
                          "than X (high/low FLOPs) [crossover-width=1.5 with --refine-against]."),
        click.option("--refine-budget", "refine_budget", default=None, metavar="DURATION",
                     help="Device time for the sweep and its refinement rounds together, e.g. 20m, 90s, 1h "
                          "[30m]; a round that would not fit is not started."),
        click.option("--refine-pair", "refine_pair", default=None, metavar="A,B",
                     help="The pair to refine, as compare's --a/--b (LABEL or LABEL/DTYPE[/MODE]), e.g. "
                          "cpu/fp32,cpu/bf16 for two dtypes of this device."),
    ]):
        fn = option(fn)
    return fn


DEFAULT_LOOP_BUDGET = "30m"


def loop_settings(refine_against: tuple[str, ...], until: str | None, refine_budget: str | None,
                  refine_pair: str | None) -> Any:
    """The loop's settings, or None when no loop option is given (validated before any measuring)."""
    from mfu_sweep.workflow.loop import LoopSettings, parse_duration, parse_until

    if not (refine_against or until or refine_budget or refine_pair):
        return None
    kind, width = parse_until(until or "crossover-width=1.5")
    if kind == "crossover-width" and not (refine_against or refine_pair):
        raise click.BadParameter("crossover-width needs --refine-against OTHER.json or --refine-pair A,B; "
                                 "use bend-width=X to refine this device alone", param_hint="--until")
    a = b = None
    if refine_pair:
        a, _, b = refine_pair.partition(",")
        if not (a and b):
            raise click.BadParameter(f"{refine_pair!r} must be A,B", param_hint="--refine-pair")
    for path in refine_against:
        if not Path(path).exists():
            raise click.BadParameter(f"{path!r}: no such file", param_hint="--refine-against")
    return LoopSettings(target=width, budget_s=parse_duration(refine_budget or DEFAULT_LOOP_BUDGET),
                        others=tuple(refine_against), bends=kind == "bend-width", a=a, b=b)


def run_loop(settings: Any, plan: Any, measure_plan: Callable[[Any], Any], spent_s: float) -> None:
    """Run the refinement loop after the first sweep; ``measure_plan(sweep_plan)`` runs one resumed sweep."""
    from mfu_sweep.workflow.loop import refine_loop

    template = {(t.dtype, t.mode): t for t in plan.tasks}

    def measure(rows: Sequence[Any]) -> Any:
        tasks = [replace(t, shape=shape, family=family, passes=passes)
                 for shape, family, passes in rows for t in template.values()]
        repeats = max([plan.repeats, *(p for _, _, p in rows)])
        return measure_plan(replace(plan, tasks=tasks, resume=True, force=False, repeats=repeats))

    result = refine_loop(Path(plan.output), settings, measure, spent_s,
                         notify=lambda line: click.echo(f"refine: {line}", err=True))
    click.echo(result.sentence())
