"""``mfu-sweep predict --steps`` and ``predict STEPS.json``: time to N steps on the terminal.

The tables are the report's (:mod:`mfu_sweep.present.report.steps`), printed as aligned text. A step file
(``mfu-sweep steps``) names its model, step kind and dtype: :func:`predict_from_step_files` checks the
options against them and prints the measured step, with the GEMM sum of sweeps beside it where given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from mfu_sweep.analysis.steps.costs import INCOMPLETE
from mfu_sweep.analysis.steps.time_to_n import STEPS_LEFT_OUT, StepsResult
from mfu_sweep.gemm.workloads import WorkloadGemm
from mfu_sweep.present.report.blocks import Table
from mfu_sweep.present.report.steps import method_note, of_which_table, payoff_table, series_table, times_table


def text_table(table: Table) -> str:
    """A table as left-aligned text columns, two spaces apart."""
    rows = [table.header, *table.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(table.header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def echo_steps(result: StepsResult, gemms: Sequence[WorkloadGemm] | None, as_json: bool) -> None:
    """Print ``result`` (text or JSON); exit 1 when no series has an answer (every one is incomplete).

    ``gemms``: the GEMM sum's workload (None for a measured step)."""
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    else:
        _echo_text(result, gemms)
    if all(t.state == INCOMPLETE for t in result.series):
        if result.measured:
            raise click.ClickException(f"no series of {result.family} has a run to time ({result.series[0].why})")
        raise click.ClickException(
            f"no series measured every shape of {result.family} with a first call ({result.series[0].why}); "
            f"sweep them with `mfu-sweep sweep --shapes {result.family} --mode eager --mode compile`")


def _heading(result: StepsResult, gemms: Sequence[WorkloadGemm] | None) -> str:
    if result.measured:
        params = (result.model or {}).get("params")
        size = f"{params / 1e6:.3g}M parameters, " if params else ""
        return (f"{result.family}  {result.dtype}, {result.step_kind} step: time to N steps, measured ({size}each run "
                "a fresh process)")
    calls = sum(g.count for g in gemms or ())
    distinct = len({g.shape for g in gemms or ()})
    what = "" if result.step_kind == "train" else ", forward pass only (inference)"
    return (f"{result.family}  {result.dtype}: time to N steps, GEMMs only{what} ({distinct} distinct shapes, "
            f"{calls} calls per step)")


def _echo_text(result: StepsResult, gemms: Sequence[WorkloadGemm] | None) -> None:
    click.echo(_heading(result, gemms))
    click.echo(text_table(series_table(result)))
    click.echo("\ntime to N steps (first step + (N - 1) steady steps):")
    click.echo(text_table(times_table(result)))
    for note in result.notes:
        click.echo(f"note: {note}")
    if result.break_evens:
        click.echo("\nbreak-even: from which N compile finishes first (against eager):")
        for b in result.break_evens:
            click.echo(f"  - {b.sentence(max(result.steps))}")
    if result.crossings:
        click.echo("\nwhere the leader changes in N:")
        for c in result.crossings:
            click.echo(f"  - {c.sentence()}")
    if result.of_which and result.gemm_sum is not None:
        click.echo(f"\nof which GEMMs: the GEMM sum of {result.gemm_sum.family} from the sweeps (the step's "
                   "breakdown, not its time):")
        click.echo(text_table(of_which_table(result)))
    for p in result.payoffs:
        cache = f", {p.compile.cache} cache" if p.compile.cache else ""
        click.echo(f"\nper shape, {p.compile.label} {p.compile.dtype}{cache}: calls until compile pays")
        click.echo(text_table(payoff_table(p, limit=len(p.shapes))))
    click.echo(f"\n{method_note(result)}")
    if not result.measured:
        click.echo("Not included:")
        for item in STEPS_LEFT_OUT:
            click.echo(f"  - {item}")


def _check_against_files(files: Sequence[Any], kind: str | None, dtype: str | None, ignored: Sequence[str]) -> None:
    """One line when an option contradicts the step files (they name their model, step kind and dtype)."""
    first = files[0]
    if ignored:
        verb = "does" if len(ignored) == 1 else "do"
        raise click.UsageError(f"{' and '.join(ignored)} {verb} not apply to step files: {first.source} names its "
                               f"model ({first.model.spec}); give --model with sweep files alone")
    for option, asked, have in (("--kind", kind, first.step_kind), ("--dtype", dtype, first.dtype)):
        if asked is not None and asked != have:
            raise click.UsageError(f"{option} {asked}: {first.source} measured a {have} step" if option == "--kind"
                                   else f"{option} {asked}: {first.source} measured {have}")


def predict_from_step_files(files: Sequence[Any], sweeps: Sequence[Any], *, kind: str | None, dtype: str | None,
                            mode: str | None, steps: Sequence[str], n_boot: int, seed: int, exclude: bool,
                            as_json: bool, ignored: Sequence[str]) -> None:
    """``predict`` given step files: the measured step of their one model, the sweeps' GEMM sum beside it."""
    from mfu_sweep.analysis.steps.counts import parse_steps
    from mfu_sweep.analysis.steps.measured import one_model, predict_measured

    one_model(files)
    _check_against_files(files, kind, dtype, ignored)
    result = predict_measured(files, sweeps, modes=None if mode is None else (mode,),
                              steps=parse_steps(steps) if steps else None, n_boot=n_boot, seed=seed,
                              exclude=exclude)
    echo_steps(result, None, as_json)
