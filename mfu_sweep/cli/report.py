"""The ``plot`` and ``report`` commands: figures and the one-shot report from result files.

Registered on the main group by :mod:`mfu_sweep.cli`. The logic
lives in :mod:`mfu_sweep.present.figures.plot` and :mod:`mfu_sweep.present.report.write`; this module parses
options, checks the output directory and prints what it wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from mfu_sweep.cli.common import allow_invalid_option, domain_errors, dtype_aliases, echo_incomplete
from mfu_sweep.cli.contended import exclude_option
from mfu_sweep.cli.progress import load_inputs, step
from mfu_sweep.present import FIGURE_KINDS
from mfu_sweep.util.manifest import left_note

METRIC_CHOICE = click.Choice(["mfu", "tflops"])


def _use_agg() -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)


REPORT_FILES = ("index.md", "index.html", "analysis.json", "figures")
FORCE = click.option("--force", is_flag=True,
                     help="Overwrite files an earlier run left in the output directory. A report replaces only "
                          "files a report wrote there (listed in its .mfu-sweep-manifest) and names the others.")


def output_dir(path: str, force: bool = False, products: tuple[str, ...] = ()) -> Path:
    """Create ``path`` if needed and check it takes ``products`` (``mfu_sweep.util.outputs``); a one-line error."""
    from mfu_sweep.util.outputs import check_output_dir

    return check_output_dir(path, force, products)


def selection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--metric``, ``--y-scale``, ``--dtype``, ``--mode``, ``--n-boot``, ``--seed``, ``--exclude-contended`` and
    ``--allow-invalid``, shared by ``plot`` and ``report``."""
    fn = click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True,
                      help="Seed of the bootstrap resamples (fits and comparisons).")(fn)
    fn = click.option("--n-boot", type=click.IntRange(2, 100_000), default=200, show_default=True,
                      help="Bootstrap resamples of each roofline fit.")(fn)
    fn = click.option("--mode", "modes", multiple=True, metavar="MODE",
                      help="Only this mode (eager, compile); repeat for several. Default: all.")(fn)
    fn = click.option("--dtype", "dtypes", multiple=True, metavar="DTYPE", callback=dtype_aliases,
                      help="Only this dtype (fp32, bf16 ... or torch's name, bfloat16); repeat for several. "
                           "Default: all.")(fn)
    fn = click.option("--y-scale", type=click.Choice(["auto", "log", "linear"]), default="auto", show_default=True,
                      help="MFU / TFLOP/s axis of the vs-FLOPs figure; auto: log when the values span more "
                           "than a decade.")(fn)
    fn = click.option("--metric", type=METRIC_CHOICE, default="mfu", show_default=True,
                      help="What the y axes and comparisons use: mfu (fraction of peak; report: TFLOP/s for a "
                           "dtype and mode where a device has no peak, with a note) or tflops.")(fn)
    return allow_invalid_option(exclude_option(fn))


def _load(files: tuple[str, ...], dtypes: tuple[str, ...], modes: tuple[str, ...],
          exclude_contended: bool = False, then: Callable[[], Any] | None = None) -> tuple[list[Any], list[Any]]:
    """The selected sweeps, their labels checked (one device per label) before anything is created, and the
    step files (``mfu-sweep steps``) among the files, with the runs of the dtypes and modes selected.

    ``then`` (the output check) runs once the files are read and selected, before the imports that take
    seconds (matplotlib, scipy) and the work.
    """
    from mfu_sweep.analysis.ground.series import check_labels
    from mfu_sweep.analysis.sources.runs import label_collisions, pooling_problems
    from mfu_sweep.cli.contended import apply
    from mfu_sweep.records.step_files import select_runs
    from mfu_sweep.records.summaries import filter_sweeps

    loaded, step_files = load_inputs(files)
    step_files = select_runs(step_files, dtypes, modes)
    sweeps = apply(filter_sweeps(loaded, dtypes, modes), exclude_contended) if loaded else []
    check_labels(sweeps)
    if then is not None:
        then()
    echo_incomplete(sweeps)
    for note in [*pooling_problems(sweeps), *label_collisions(sweeps)]:
        click.echo(f"note: {note}", err=True)
    return sweeps, step_files


def _nothing_to_draw(sweeps: list, metric: str, kinds: tuple[str, ...], step_files: list) -> None:
    """Refuse, before any fitting, a plot whose --figure kinds these sweeps give no figure of."""
    from mfu_sweep.present.figures.arrange import figure_stems

    asked = " ".join(f"--figure {k}" for k in kinds) or "any figure"
    others = figure_stems(sweeps, metric=metric, kinds=None, step_files=step_files)
    hint = f"; they give: {', '.join(others)}" if others else ""
    what = "files" if step_files else "sweeps"
    raise click.ClickException(f"nothing to draw: these {what} give no figure for {asked}{hint}")


def _wrote(paths: list[Path]) -> None:
    for p in paths:
        click.echo(f"wrote {p}")


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", default="out/plots", show_default=True, type=click.Path(),
              help="Directory for the figures (created if missing; out/ is gitignored, the committed plots/ is "
                   "the reference run's).")
@click.option("--format", "formats", multiple=True, type=click.Choice(["png", "pdf", "svg"]),
              help="File format; repeat for several. Default: png.")
@click.option("--figure", "kinds", multiple=True, type=click.Choice(FIGURE_KINDS),
              help="Only this kind of figure; repeat for several. Default: all the sweeps support.")
@FORCE
@selection_options
@domain_errors
def plot(files: tuple[str, ...], output: str, formats: tuple[str, ...], kinds: tuple[str, ...], force: bool,
         metric: str, y_scale: str, dtypes: tuple[str, ...], modes: tuple[str, ...], n_boot: int, seed: int,
         exclude_contended: bool) -> None:
    """Draw the figures of result files: MFU vs FLOPs, roofline, first call,
    compile speedup, MFU heatmaps of m x n grids, a status overview, and
    time to N steps (of the measured step in step files of `mfu-sweep
    steps`, or of a swept model family's GEMMs).

    Each device keeps one colour in every figure. Figures are written as
    <output>/<name>.<format>; the same sweeps give byte-identical files.

    \b
    Example:
        mfu-sweep plot sweeps/*.json -o my-plots/
        mfu-sweep plot a.json b.json --format png --format pdf --dtype bf16
        mfu-sweep plot sweeps/h100.json --metric tflops --mode compile
        mfu-sweep plot sweeps/published/*.json --figure vs-flops --figure roofline -o out/published-plots
        mfu-sweep plot steps.json --figure steps -o out/steps-plots
    """
    _use_agg()
    sweeps, step_files = _load(files, dtypes, modes, exclude_contended)
    from mfu_sweep.present.figures.arrange import figure_stems

    suffixes = formats or ("png",)
    stems = figure_stems(sweeps, metric=metric, kinds=kinds or None, step_files=step_files)
    if not stems:
        _nothing_to_draw(sweeps, metric, kinds, step_files)
    out = output_dir(output, force, tuple(f"{stem}.{fmt}" for stem in stems for fmt in suffixes))
    from mfu_sweep.present.figures.arrange import blank_notes, make_figures, save_figure
    from mfu_sweep.present.report.write import analyse

    if sweeps:
        click.echo("fitting and comparing series ...", err=True)
    analysis = analyse(sweeps, metric, seed=seed, fit_n_boot=n_boot, switch=False)
    for note in [*analysis.skipped, *blank_notes(sweeps, metric, kinds=kinds or None)]:
        click.echo(f"note: {note}", err=True)
    figures = make_figures(sweeps, metric=metric, fits=analysis.fits, comparisons=analysis.comparisons,
                           kinds=kinds or None, y_scale=y_scale, step_files=step_files, exclude=exclude_contended)
    output_dir(output, force, tuple(f"{name}.{fmt}" for name in figures for fmt in suffixes))  # leaderboards
    try:
        for name, fig in figures.items():
            _wrote(save_figure(fig, out, name, suffixes))
    except OSError as exc:
        raise click.ClickException(f"cannot write figures to {output!r} ({exc.strerror or exc})") from None


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", default="report", show_default=True, type=click.Path(),
              help="Directory for index.md, index.html, analysis.json and figures/.")
@FORCE
@click.option("--detail", is_flag=True,
              help="Draw every figure (each device's curves, every m x n heatmap); those beyond the report's "
                   "choice are written to figures/ and linked, not embedded.")
@selection_options
@domain_errors
def report(files: tuple[str, ...], output: str, force: bool, detail: bool, metric: str, y_scale: str,
           dtypes: tuple[str, ...], modes: tuple[str, ...], n_boot: int, seed: int, exclude_contended: bool) -> None:
    """Fit, compare and plot result files in one go, and write a report:
    index.md (figures beside it in figures/), a self-contained index.html
    (figures embedded, no external files) and analysis.json.

    The page opens with who leads where: per dtype and mode a strip naming
    each FLOP band's leader and a sentence on where the leader changes, by
    MFU where every device has a peak, else by TFLOP/s (a note says so),
    then the notes that change the reading. Per series: device and provenance, peak source, MFU range and best shape,
    fitted roofline with intervals, crossovers and verdicts, compile tax and
    pass rate. Per compared pair: a one-line summary (the share of the shared
    FLOP range, log scale, where each side leads, and the longest lead), then
    the lead segments. With many devices or many m x n grids the page
    draws a choice (flagged and slowest devices, a few heatmaps) and says
    what it left out; --detail draws the rest beside it. Step files of
    `mfu-sweep steps` add time to N steps of the measured step (alone:
    the report is that section and its figure).

    \b
    Example:
        mfu-sweep report sweeps/*.json -o report/
        mfu-sweep report node/*.json --detail -o report-node/
        mfu-sweep report a.json b.json --dtype bf16 --metric tflops -o report-bf16/
        mfu-sweep report steps.json cpu-sweep.json -o report-steps/
    """
    _use_agg()
    sweeps, step_files = _load(files, dtypes, modes, exclude_contended,
                               then=lambda: output_dir(output, force, REPORT_FILES))
    out = Path(output)
    from mfu_sweep.present.report.write import analyse, write_report

    click.echo("fitting and comparing series ...", err=True)
    with step("fitting", "series") as bar:
        analysis = analyse(sweeps, metric, seed=seed, fit_n_boot=n_boot, progress=bar)
    for note in analysis.skipped:
        click.echo(f"note: {note}", err=True)
    try:
        with step("drawing", "figure") as bar:
            paths = write_report(sweeps, out, analysis=analysis, y_scale=y_scale, detail=detail, progress=bar,
                                 step_files=step_files, exclude_contended=exclude_contended)
        _wrote(paths)
        left = left_note(out, REPORT_FILES)  # --force removed only what a report wrote: name the rest
        if left:
            click.echo(f"note: {left}", err=True)
    except OSError as exc:
        raise click.ClickException(f"cannot write the report to {output!r} ({exc.strerror or exc})") from None
