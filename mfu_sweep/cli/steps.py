"""``mfu-sweep predict --steps``: time to N steps on the terminal.

The tables are the report's (:mod:`mfu_sweep.present.report_steps`), printed as aligned text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from mfu_sweep.analysis.steps.costs import INCOMPLETE
from mfu_sweep.analysis.steps.time_to_n import STEPS_LEFT_OUT, StepsResult
from mfu_sweep.present.blocks import Table
from mfu_sweep.present.report_steps import METHOD_NOTE, payoff_table, series_table, times_table
from mfu_sweep.workloads import WorkloadGemm


def text_table(table: Table) -> str:
    """A table as left-aligned text columns, two spaces apart."""
    rows = [table.header, *table.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(table.header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def echo_steps(result: StepsResult, gemms: Sequence[WorkloadGemm], as_json: bool) -> None:
    """Print ``result`` (text or JSON); exit 1 when no series has an answer (every one is incomplete)."""
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1))
    else:
        _echo_text(result, gemms)
    if all(t.state == INCOMPLETE for t in result.series):
        raise click.ClickException(
            f"no series measured every shape of {result.family} with a first call ({result.series[0].why}); "
            f"sweep them with `mfu-sweep sweep --shapes {result.family} --mode eager --mode compile`")


def _echo_text(result: StepsResult, gemms: Sequence[WorkloadGemm]) -> None:
    calls = sum(g.count for g in gemms)
    distinct = len({g.shape for g in gemms})
    click.echo(f"{result.family}  {result.dtype}: time to N steps, GEMMs only ({distinct} distinct shapes, "
               f"{calls} calls per step)")
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
    for p in result.payoffs:
        cache = f", {p.compile.cache} cache" if p.compile.cache else ""
        click.echo(f"\nper shape, {p.compile.label} {p.compile.dtype}{cache}: calls until compile pays")
        click.echo(text_table(payoff_table(p, limit=len(p.shapes))))
    click.echo(f"\n{METHOD_NOTE} {1 - result.alpha:.0%} intervals, {result.n_boot} draws, seed {result.seed}.")
    click.echo("Not included:")
    for item in STEPS_LEFT_OUT:
        click.echo(f"  - {item}")
