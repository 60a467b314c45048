"""``mfu-sweep repair FILE``: fold the intact records of a damaged journal into its result file.

A sweep killed at the wrong moment, a disk error or an editor can leave a line in the journal beside a
result file (``.FILE.journal``) that does not parse; every reader then refuses the file, naming the line.
``repair`` keeps every intact record: it folds them into ``FILE`` (written atomically, under the file's
one-writer lock, so never while a sweep writes it), removes the journal and says which lines it dropped
and why. The library part is :func:`mfu_sweep.records.journal.plan_repair`.
"""

from __future__ import annotations

import os

import click

from mfu_sweep.cli.common import domain_errors
from mfu_sweep.util.text import counted


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@domain_errors
def repair(file: str) -> None:
    """Fold the intact records of FILE's journal into FILE and say what was dropped.

    A sweep keeps a journal (.FILE.journal) beside its file while it runs;
    every reader folds it in. A journal line that does not parse (before the
    last, which a kill may cut short) makes every command refuse FILE, naming
    the line: `--allow-invalid` reads past it, and repair mends the file for
    good. It folds every intact record FILE lacks into FILE (atomically, under
    FILE's lock: never while a sweep writes it), removes the journal, and
    names each dropped line and why. A journal of another run (another
    run.id) is never folded: repair says so and leaves it. FILE is then
    validated.

    \b
    Example:
        mfu-sweep repair sweeps/my-cpu.json
        mfu-sweep sweep --resume -o sweeps/my-cpu.json
    """
    from mfu_sweep.records import journal
    from mfu_sweep.records.results import ResultError, read_json, validate_file, write_json_atomic
    from mfu_sweep.util.filelock import output_lock
    from mfu_sweep.util.outputs import check_name, check_output_file, is_stdout

    if not is_stdout(file) and not os.path.lexists(check_name(file)):  # before the check makes its folder
        raise ResultError(f"{file!r}: no such file")
    check_output_file(file, force=True, stdout="repair rewrites FILE in place; name the file")
    with output_lock(file) as lock:
        if lock.note:
            click.echo(f"note: {lock.note}", err=True)
        data = read_json(file, fold=False)
        if not isinstance(data, dict) or not isinstance(data.get("records"), list):
            raise ResultError(f"{file!r} is no sweep file (a merged file has no journal): nothing to repair")
        plan = journal.plan_repair(file, data)
        if plan is None:
            click.echo(f"{file}: no journal beside it ({journal.journal_path(file).name}): nothing to repair")
            return
        if plan.refused:
            raise click.ClickException(plan.refused)
        write_json_atomic(file, {**data, "records": [*data["records"], *plan.records]})
        journal.discard(file)
    click.echo(f"{file}: folded {counted(len(plan.records), 'record')} of its journal into it"
               + (f"; dropped {_dropped(plan.dropped)}" if plan.dropped else "; nothing dropped"))
    problems = validate_file(file)
    if problems:
        more = f" (and {counted(len(problems) - 1, 'more problem')})" if len(problems) > 1 else ""
        raise click.ClickException(f"{file}: INVALID after the repair: {problems[0]}{more}; --allow-invalid reads "
                                   "the records that pass")
    click.echo(f"{file}: ok")


def _dropped(dropped: tuple[tuple[int, str], ...]) -> str:
    what = {"not JSON": "not JSON", "not a record line": "JSON but no record",
            "cut short": "cut short: the shape in flight, measured again on --resume"}
    return "; ".join(f"line {n} ({what.get(why, why)})" for n, why in dropped)
