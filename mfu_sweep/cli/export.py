"""The ``export`` command: records, fits, crossovers, bands or time to N steps as a table, or nvbench JSON.

A thin wrapper over :mod:`mfu_sweep.present.export.tables` and :mod:`mfu_sweep.present.export.nvbench`.
"""

from __future__ import annotations

import click

from mfu_sweep.cli.common import domain_errors, invoked_argv, margin_option, result_files, seed_option
from mfu_sweep.cli.progress import load_files
from mfu_sweep.util.outputs import OutputError, check_output_file, is_stdout, table_format


def _write_or_echo(text: str, output: str | None, force: bool) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    from mfu_sweep.records.results import write_text_atomic

    write_text_atomic(check_output_file(output, force), text)  # -o -: standard output
    if not is_stdout(output):
        click.echo(f"wrote {output}", err=True)


@click.command()
@result_files
@click.option("--format", "fmt", type=click.Choice(["csv", "markdown", "latex", "nvbench"]), default=None,
              help="csv: tidy, full precision; markdown or latex: numbers rounded to their uncertainty; nvbench: "
                   "the records as nvbench JSON for nvbench's scripts (-o FILE.json, samples in FILE.json-bin/). "
                   "Default: the format -o's suffix names (.csv, .md, .tex), else csv; a --format that "
                   "contradicts -o's suffix is refused.")
@click.option("--what", type=click.Choice(["records", "fits", "crossovers", "bands", "steps"]), default="records",
              show_default=True,
              help="records: one row per measured shape and pass; fits: the roofline fit of each series; "
                   "crossovers: where the leader changes; bands: compare's verdict per FLOP band; steps: time to "
                   "N steps of the model family the records hold (sweep --shapes llm:...).")
@click.option("--metric", type=click.Choice(["mfu", "tflops"]), default="mfu", show_default=True,
              help="Metric of the comparison (--what crossovers or bands).")
@margin_option
@click.option("--fit-n-boot", type=click.IntRange(2, 100_000), default=200, show_default=True,
              help="Bootstrap resamples of each roofline fit (--what fits or crossovers).")
@seed_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="File to write [stdout; - is stdout too].")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@domain_errors
def export(files: tuple[str, ...], fmt: str | None, what: str, metric: str, margin: float, fit_n_boot: int, seed: int,
           output: str | None, force: bool) -> None:
    """Export records, fits or crossovers as tidy CSV, Markdown or a LaTeX (booktabs) table.

    CSV keeps full precision, one row per record/fit/crossover. Markdown and
    LaTeX round every number to its uncertainty (first significant digit of
    the 95% interval's half-width, two if that digit is 1). The LaTeX output is
    a tabular for \\input inside your own table environment.

    The format follows -o's suffix (.csv, .md, .tex) unless --format says it;
    -o table.csv --format latex is refused, as is -o x.json (not a table).
    --format nvbench writes the records as nvbench JSON (one benchmark per
    dtype and mode, one state per shape) that nvbench_compare.py reads.

    \b
    Example:
        mfu-sweep export sweeps/*.json -o records.csv
        mfu-sweep export sweeps/all.json --what fits -o paper/fits.tex
        mfu-sweep export sweeps/all.json --format markdown --what crossovers
        mfu-sweep export sweeps/all.json --what bands --metric tflops --margin 1% -o bands.csv
        mfu-sweep export sweeps/amd-epyc-cpu.json --format nvbench -o amd-epyc-cpu.nvbench.json
    """
    from mfu_sweep.present.export.tables import NO_CROSSOVER, export_table

    if fmt == "nvbench":
        from mfu_sweep.present.export.nvbench import export_nvbench

        if is_stdout(output):
            raise OutputError("-o - means standard output, but --format nvbench writes a JSON file and a folder of "
                              "sample times beside it: give -o FILE.json")

        click.echo(export_nvbench(files, what, output, force, invoked_argv()), err=True)
        return

    kw = {"records": {}, "fits": {"n_boot": fit_n_boot}, "crossovers": {"fit_n_boot": fit_n_boot, "margin": margin},
          "bands": {"margin": margin}, "steps": {}}[what]
    fmt = table_format(output, fmt)
    if output is not None:
        check_output_file(output, force)  # before the fits, which take a while
    text = export_table(load_files(files), what, fmt, metric=metric, seed=seed, **kw)
    _write_or_echo(text, output, force)
    if what == "crossovers" and (NO_CROSSOVER in text or len(text.splitlines()) == 1):  # CSV: the header alone
        click.echo(f"note: {NO_CROSSOVER}; the table has no rows", err=True)
