"""The one-shot report: fit, compare and plot sweeps, then write ``index.md`` and a self-contained ``index.html``.

:func:`analyse` runs the analysis once (series, roofline fits, pairwise
comparisons) so that figures and text agree; :func:`write_report` renders
it::

    from mfu_sweep.present.report.write import write_report
    from mfu_sweep.records.results import load_sweeps

    write_report(load_sweeps(["sweeps/a.json", "sweeps/b.json"]), "report/")

The HTML embeds every figure as a base64 PNG and a small inline stylesheet:
no scripts, no external files. Every text taken from a result file is
escaped.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from mfu_sweep import __version__
from mfu_sweep.analysis.fits.fit import RooflineFit, fit_groups
from mfu_sweep.analysis.fits.parallel import run_tasks
from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
from mfu_sweep.analysis.fleet.leaderboard import HANDFUL, Leaderboard, leaderboards, many_devices
from mfu_sweep.analysis.fleet.spread import replicate_spreads
from mfu_sweep.analysis.fleet.view import FleetView, fleets_json, replicate_fleets
from mfu_sweep.analysis.ground.series import Series, SeriesKey, group_series, with_peak
from mfu_sweep.analysis.ground.summary import SeriesSummary
from mfu_sweep.analysis.verdicts.compare import Comparison, compare_pairs, compile_pairs, format_flops
from mfu_sweep.present.export.tables import significant
from mfu_sweep.present.figures.arrange import blank_notes, heatmap_stem, make_figures, save_figure
from mfu_sweep.present.figures.choice import FigureChoice, choose_figures
from mfu_sweep.present.figures.theme import peak_kind
from mfu_sweep.present.group_metric import GroupMetrics, group_metrics
from mfu_sweep.present.machine_facts import machine_facts, machine_json
from mfu_sweep.present.report.blocks import Block, Bullets, FigureRef, Heading, Para, Table
from mfu_sweep.present.report.caveats import caveats
from mfu_sweep.present.report.compare import comparison_blocks, comparison_facts
from mfu_sweep.present.report.fleet import board_blocks, fleet_blocks, is_board_figure
from mfu_sweep.present.report.leads import lead_blocks
from mfu_sweep.present.report.numbers import (
    bars_text,
    best_cell,
    fit_facts,
    fit_marks,
    fitted_p_cell,
    interval_kinds,
    mfu_range_cell,
    performance_facts,
    summaries_json,
)
from mfu_sweep.present.report.numbers import summaries as summarise_all
from mfu_sweep.present.report.render import to_html, to_markdown
from mfu_sweep.present.report.steps import steps_blocks, steps_json, steps_only_blocks
from mfu_sweep.present.report.text import caption, figure_metric, method_blocks
from mfu_sweep.records.results import Record, Sweep, write_json_atomic
from mfu_sweep.records.step_files import StepFile
from mfu_sweep.records.summaries import summary_line
from mfu_sweep.specs import Peak
from mfu_sweep.util.outputs import staged
from mfu_sweep.util.text import counted

# Figures in the report are for screens; ``mfu-sweep plot`` writes 300 dpi for print.
REPORT_DPI = 200


@dataclass(frozen=True)
class Analysis:
    """Everything figures and report show, computed once.

    Attributes
    ----------
    series:
        ``SeriesKey -> Series`` (``mfu_sweep.analysis.ground.series.group_series``).
    fits:
        Roofline fits of the series that have enough shapes.
    unfitted:
        ``SeriesKey -> reason`` for the others.
    comparisons:
        One per pair of series with the same dtype and mode.
    compare_notes:
        Pairs that could not be compared, and why.
    compile_comparisons:
        Compile series key -> eager vs compile in TFLOP/s (``mfu_sweep.analysis.verdicts.compare.compare_across``),
        for every device and dtype measured in both modes: where compiling pays.
    metric:
        ``"mfu"`` or ``"tflops"``: what the comparisons rank, asked for.
    metrics:
        What each dtype and mode is compared by (:mod:`mfu_sweep.present.group_metric`): ``metric``, except
        TFLOP/s for a dtype and mode where MFU would leave a device out for want of a peak.
    settings:
        Seed, bootstrap sizes and alpha used.
    fleets:
        Fleet views of the replicate runs (``mfu_sweep.analysis.fleet.view``).
    leaderboards, leaderboard_notes:
        With many devices, one leaderboard per dtype and mode (``mfu_sweep.analysis.fleet.leaderboard``)
        instead of the pairwise comparisons, and what it left out.
    skipped:
        With ``metric="mfu"``, a note per dtype and mode compared by TFLOP/s for want of a peak, then the peak
        notes of the series (``mfu_sweep.analysis.ground.series.Series.notes``); also the first of ``compare_notes``.
    step_files, exclude_contended:
        Step files (``mfu-sweep steps``) whose measured steps the time-to-N section and figure show, and
        whether their contended runs are left out (:func:`write_report` sets them).
    """

    series: Mapping[SeriesKey, Series]
    fits: Mapping[SeriesKey, RooflineFit]
    unfitted: Mapping[SeriesKey, str]
    comparisons: tuple[Comparison, ...]
    compare_notes: tuple[str, ...] = ()
    compile_comparisons: Mapping[SeriesKey, Comparison] = field(default_factory=dict)
    metric: str = "mfu"
    settings: Mapping[str, object] = field(default_factory=dict)
    fleets: tuple[FleetView, ...] = ()
    leaderboards: tuple[Leaderboard, ...] = ()
    leaderboard_notes: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    metrics: GroupMetrics = field(default_factory=lambda: GroupMetrics("mfu"))
    step_files: tuple[StepFile, ...] = ()
    exclude_contended: bool = False

    @cached_property
    def summaries(self) -> Mapping[SeriesKey, SeriesSummary]:
        """:func:`~mfu_sweep.analysis.ground.summary.summarise` of every series, once for the tables and the JSON."""
        return summarise_all(self.series)


def analyse(sweeps: Sequence[Sweep], metric: str = "mfu", *, seed: int = 0, fit_n_boot: int = 200,
            alpha: float = 0.05, pairwise: bool | None = None,
            progress: Callable[[int, int], None] | None = None, switch: bool = True) -> Analysis:
    """Group, fit and compare ``sweeps``.

    Parameters
    ----------
    sweeps:
        From ``mfu_sweep.records.results.load_sweeps``.
    metric:
        ``"mfu"`` or ``"tflops"`` for the comparisons; with ``"mfu"``, a dtype and mode where some device has
        no peak is compared by TFLOP/s (:func:`~mfu_sweep.present.group_metric.group_metrics`), not left out.
    seed, fit_n_boot, alpha:
        Bootstrap seed and size of the fits, and the interval level ``1 - alpha`` of fits and comparisons.
    pairwise:
        Compare every pair (True) or rank the devices per FLOP band (False); None (default): pairs
        unless some dtype and mode has more than ``HANDFUL`` devices.
    progress:
        ``progress(done, total)`` as the series are fitted.
    switch:
        With ``metric="mfu"``, compare a dtype and mode where some device has no peak by TFLOP/s (True, the
        report), or leave such a device out with a note (False: ``plot``, whose figures keep the metric asked for).
    """
    if metric not in ("mfu", "tflops"):
        raise ValueError(f"metric={metric!r} must be one of mfu, tflops")
    series = group_series(sweeps)
    pairwise = not many_devices(series) if pairwise is None else pairwise
    if switch:  # MFU needs a peak: a dtype and mode without one is ranked by TFLOP/s
        chosen = group_metrics(series, metric)
        parts = chosen.split(series)
        skipped = [*chosen.notes, *(n for k in sorted(series) for n in series[k].notes)]
    else:
        chosen = GroupMetrics(metric)
        kept, skipped = with_peak(series, metric)
        parts = {metric: kept}
    ranking: dict[str, Any] = {"boards": [], "notes": []}

    def rank() -> None:  # leaderboards and fleet views need no fits: they run while the workers fit
        for by, part in ([] if pairwise else parts.items()):
            boards, notes = leaderboards(part, by, alpha=alpha)
            ranking["boards"] += boards
            ranking["notes"] += notes
        ranking["fleets"] = replicate_fleets(series, boards=ranking["boards"], alpha=alpha)

    fits, unfitted = fit_groups(series, n_boot=fit_n_boot, seed=seed, alpha=alpha,
                                copy_bandwidth=measured_copy_bandwidth(sweeps), progress=progress, meanwhile=rank)
    order = list(dict.fromkeys((k.dtype, k.mode) for k in sorted(series)))  # as one call would give them
    boards: list[Leaderboard] = sorted(ranking["boards"], key=lambda b: order.index((b.dtype, b.mode)))
    board_notes: list[str] = ranking["notes"]
    if pairwise:
        comparisons, notes = [], []
        for by, part in parts.items():
            found, why = compare_pairs(part, fits, by, seed=seed, alpha=alpha, use_fit=True)
            comparisons += found
            notes += why
        comparisons.sort(key=lambda c: order.index((c.dtype, c.mode)))
        compiled, compile_notes = compile_pairs(sweeps, series, seed=seed, alpha=alpha)
    else:
        comparisons, notes, compiled = [], [], {}
        compile_notes = [f"more than {HANDFUL} devices of one dtype and mode: ranked per FLOP band, no pairwise "
                         "or per-device eager vs compile comparisons (mfu-sweep compare --a/--b for one pair)"]
    fleets = ranking["fleets"]
    return Analysis(series=series, fits=fits, unfitted=unfitted, comparisons=tuple(comparisons),
                    compare_notes=tuple(skipped + notes + compile_notes), skipped=tuple(skipped),
                    compile_comparisons=compiled, metric=metric, metrics=chosen,
                    settings={"seed": seed, "fit_n_boot": fit_n_boot, "alpha": alpha, "pairwise": pairwise},
                    fleets=tuple(fleets), leaderboards=tuple(boards), leaderboard_notes=tuple(board_notes))


# --------------------------------------------------------------------------- facts per series


def peak_text(peak: Peak, dtype: str) -> str:
    """E.g. ``"989 TFLOP/s, memory 3.35 TB/s (vendor spec); source: ..."``."""
    tf = peak.for_dtype(dtype)
    bw = f", memory {significant(peak.memory_bandwidth_tbs)} TB/s" if peak.memory_bandwidth_tbs else ""
    value = f"{significant(tf)} TFLOP/s" if tf else f"no {dtype} figure"
    return f"{value}{bw} ({peak_kind(peak)}); source: {peak.source or 'not given'}"


def _records_index(sweeps: Sequence[Sweep]) -> dict[SeriesKey, list[tuple[Sweep, Record]]]:
    """Every (sweep, record) by series key, in one pass (looking each key up in all sweeps is N²)."""
    out: dict[SeriesKey, list[tuple[Sweep, Record]]] = {}
    for sw in sweeps:
        for r in sw.records:
            out.setdefault(SeriesKey(sw.label, r.dtype, r.series_mode), []).append((sw, r))
    return out


def compile_facts(records: Sequence[Record]) -> list[tuple[str, str]]:
    """The compile tax: median first-call/steady ratio, total first-call and compile time."""
    ratios = [r.first_call_ratio for r in records if r.first_call_ratio is not None]
    first = [r.first_call_s for r in records if r.first_call_s is not None]
    comp = [r.compile_s for r in records if r.compile_s is not None]
    rows = []
    if ratios:
        rows.append(("first call / steady median", f"median {significant(statistics.median(ratios))}× "
                     f"(range {significant(min(ratios))}× to {significant(max(ratios))}×, {len(ratios)} shapes)"))
    if first:
        rows.append(("first-call time",
                     f"total {significant(sum(first))} s, median {significant(statistics.median(first))} s"))
    rows.append(("compile time", f"total {significant(sum(comp))} s over {len(comp)} shapes" if comp
                 else "not recorded (eager, or the backend does not report it)"))
    return rows


def provenance_facts(sweeps: Sequence[Sweep]) -> list[tuple[str, str]]:
    """Device and run provenance of the sweeps behind one series (one row group per sweep)."""
    rows = []
    for sw in sweeps:
        d, run, env, tool = sw.device, sw.run, sw.environment, sw.tool
        prefix = f"run {str(run.get('id', '?'))[:12]}: " if len(sweeps) > 1 else ""
        rows += [
            (f"{prefix}device", f"{d.get('name', '?')} (backend {d.get('backend', '?')}, chip {d.get('chip')}, "
                                f"index {d.get('index', 0)})"),
            (f"{prefix}tool",
             f"{tool.get('name', '?')} {tool.get('version', '?')}, git {run.get('git_sha') or 'unknown'}"),
            (f"{prefix}run", f"id {run.get('id', '?')} on host {run.get('host', '?')}, "
                             + (f"{run['started_at']} to {run.get('finished_at') or 'unfinished'}"
                                if run.get("started_at") else "date not recorded by its source")),
            (f"{prefix}software", f"torch {env.get('torch', 'n/a')}, python {env.get('python', 'n/a')}"),
            (f"{prefix}file", sw.source or "<data>"),
        ]
    return rows


def failed_rows(records: Sequence[Record], limit: int = 30) -> list[list[str]]:
    """Shape, FLOPs, status and error text of the records that are not ok."""
    bad = sorted((r for r in records if r.status != "ok"), key=lambda r: (r.flops, r.shape))
    rows = [[str(r.shape), format_flops(r.flops), r.status, _short(r.error or "")] for r in bad[:limit]]
    if len(bad) > limit:
        rows.append(["…", "", "", f"and {len(bad) - limit} more (see the result file)"])
    return rows


def _short(text: str, n: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


# --------------------------------------------------------------------------- document model



def _series_rows(index: Mapping[SeriesKey, object]) -> list[SeriesKey]:
    """The series of every record (``_records_index``'s keys) in report order, eager before compile."""
    return sorted(index, key=lambda k: (k.label, k.dtype, k.mode != "eager", k.mode))


def _summary_table(analysis: Analysis, index: Mapping[SeriesKey, list[tuple[Sweep, Record]]]) -> Table:
    rows = []
    for key in _series_rows(index):
        recs = [r for _, r in index[key]]
        s = analysis.series.get(key)
        fit = analysis.fits.get(key)
        peak = s.peak if s else index[key][0][0].peak
        summary = analysis.summaries.get(key)
        rows.append((str(key), peak_kind(peak), summary_line(recs), mfu_range_cell(summary), best_cell(summary),
                     fitted_p_cell(fit)))
    return Table(("series", "peak", "pass rate", "MFU range", "best TFLOP/s", "fitted P, TFLOP/s [95%]"),
                 tuple(rows))


def _series_blocks(analysis: Analysis, index: Mapping[SeriesKey, list[tuple[Sweep, Record]]],
                   labels: Collection[str] | None = None) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Series")]
    rows = _series_rows(index)
    if labels is not None and len(shown := [k for k in rows if k.label in labels]) < len(rows):
        rest = len(rows) - len(shown)
        blocks.append(Para(f"The {len(shown)} series of the devices the figures draw; the other {rest} are in the "
                           "summary table and analysis.json (report --detail describes every one)."))
        rows = shown
    for key in rows:
        pairs = index[key]
        recs = [r for _, r in pairs]
        own = list({id(sw): sw for sw, _ in pairs}.values())
        blocks.append(Heading(3, str(key)))
        facts = provenance_facts(own)
        facts.append(("peak", peak_text(own[0].peak, key.dtype)))
        facts += machine_facts(own[0].peak, recs)
        facts.append(("pass rate", summary_line(recs)))
        facts += performance_facts(analysis.summaries.get(key), analysis.metric)
        fit = analysis.fits.get(key)
        facts += fit_facts(fit) if fit else [("roofline fit", analysis.unfitted.get(key, "no usable records"))]
        facts += compile_facts(recs)
        if key in analysis.compile_comparisons:
            facts.append(("where compiling pays", analysis.compile_comparisons[key].sentence()))
        facts += comparison_facts(key, analysis.comparisons)
        blocks.append(Table(("", ""), tuple(facts), css="kv"))
        bad = failed_rows(recs)
        if bad:
            blocks.append(Para("Records that are not ok:"))
            blocks.append(Table(("shape", "FLOP", "status", "error"), tuple(tuple(r) for r in bad)))
    return blocks


def build_report(sweeps: Sequence[Sweep], analysis: Analysis, figures: Sequence[str], *,
                 linked: Collection[str] = (), choice_note: str | None = None,
                 series_labels: Collection[str] | None = None, blank: Sequence[str] = ()) -> list[Block]:
    """The report as blocks (headings, paragraphs, tables, figures); see ``to_markdown`` and ``to_html``.

    It opens with who leads where (:func:`~mfu_sweep.present.report.leads.lead_blocks`: a band strip and
    a sentence per dtype and mode, then the notes that change the reading), before any table of files or
    pass rates. ``linked`` figures are links at the end of the figures, not embedded; ``choice_note`` says
    which figures were left out (:meth:`~mfu_sweep.present.figures.choice.FigureChoice.sentence`), ``blank``
    which were not drawn for want of values (:func:`~mfu_sweep.present.figures.arrange.blank_notes`);
    ``series_labels`` limits the per-series sections to those devices (None: every one).
    """
    if not sweeps:  # step files alone
        return steps_only_blocks(analysis.step_files, figures, analysis.exclude_contended)
    labels = sorted({sw.label for sw in sweeps})
    blocks: list[Block] = [
        Heading(1, "mfu-sweep report"),
        Para(f"{counted(len(sweeps), 'sweep')} of {counted(len(labels), 'device')} (files under Sources, below). "
             f"Written by mfu-sweep {__version__}."),
    ]
    if any(sw.device.get("synthetic") or sw.device.get("backend") == "synthetic" for sw in sweeps):
        blocks.append(Para("SYNTHETIC DATA: some sweeps were generated, not measured.", css="warn"))
    blocks += lead_blocks(analysis.comparisons, analysis.leaderboards, [v.sentence() for v in analysis.fleets],
                          [*analysis.compare_notes, *analysis.leaderboard_notes, *blank], analysis.metric,
                          caveats(sweeps, analysis.summaries, analysis.metrics, analysis.leaderboards,
                                  analysis.exclude_contended))
    index = _records_index(sweeps)
    blocks += [Heading(2, "Summary"), _summary_table(analysis, index)]
    if any(fit_marks(f) for f in analysis.fits.values() if f.is_constrained):
        blocks.append(Para("*: P is no ceiling there (a poor fit, P below the best measured shape or above the "
                           "peak; mfu-sweep fit marks it the same); the series' notes say more."))
    blocks += fleet_blocks(analysis.fleets, figures)
    blocks += _spread_blocks(sweeps, analysis.series)
    blocks += board_blocks(analysis.leaderboards, (), figures, analysis.fleets)
    if analysis.comparisons:  # with none, the first section already says there is nothing to compare
        blocks += comparison_blocks(analysis.comparisons, ())
    blocks += steps_blocks(sweeps, step_files=analysis.step_files, exclude=analysis.exclude_contended)
    blocks.append(Heading(2, "Figures"))
    if choice_note:
        blocks.append(Para(choice_note))
    bars = bars_text(interval_kinds(analysis.series.values()))
    shown = [stem for stem in figures if not is_board_figure(stem)]
    switched = [f"{d} · {m}" for (d, m), by in analysis.metrics.by_group.items() if by != analysis.metric]

    def ref(stem: str, embed: bool = True) -> FigureRef:
        drawn_in = figure_metric(stem, analysis.metrics, analysis.metric)
        return FigureRef(stem, caption(stem, drawn_in, bars, switched), embed=embed)

    blocks += [ref(stem) for stem in shown if stem not in linked]
    if linked:
        blocks.append(Para(f"Detail: {len(linked)} more figures, in figures/ beside this page:"))
        blocks += [ref(stem, embed=False) for stem in shown if stem in linked]
    blocks += _series_blocks(analysis, index, series_labels)
    blocks += _source_blocks(sweeps, analysis.step_files)
    blocks += method_blocks(analysis.settings)
    return blocks


def _source_blocks(sweeps: Sequence[Sweep], step_files: Sequence[StepFile] = ()) -> list[Block]:
    """Where the sweeps (and step files) come from: one line per file, with the devices it holds."""
    files: dict[str, list[str]] = {}
    for sw in [*sweeps, *step_files]:
        files.setdefault(sw.source or "data given in code", []).append(sw.label)
    return [Heading(2, "Sources"),
            Bullets(tuple(f"{path}: {', '.join(dict.fromkeys(labels))}" for path, labels in sorted(files.items())))]


def _spread_blocks(sweeps: Sequence[Sweep], series: Mapping[SeriesKey, Series]) -> list[Block]:
    """Spread across the devices of one chip, for torchrun replicate runs (labels ``<label>.r<rank>``)."""
    spreads = replicate_spreads(sweeps, series)
    if not spreads:
        return []
    return [Heading(2, "Spread across devices (replicate runs)"), Bullets(tuple(s.sentence() for s in spreads))]


# --------------------------------------------------------------------------- rendering


def analysis_json(analysis: Analysis) -> dict[str, Any]:
    """Fits, comparisons and notes as JSON (the numbers behind the report)."""
    return {
        "tool": {"name": "mfu-sweep", "version": __version__},
        "metric": analysis.metric, "metrics": analysis.metrics.to_json(), "settings": dict(analysis.settings),
        "series": summaries_json(analysis.summaries),
        "fits": [analysis.fits[k].to_json() for k in sorted(analysis.fits)],
        "unfitted": {str(k): v for k, v in sorted(analysis.unfitted.items())},
        "comparisons": [c.to_json() for c in analysis.comparisons],
        "compile_comparisons": [c.to_json() for _, c in sorted(analysis.compile_comparisons.items())],
        "compare_notes": list(analysis.compare_notes),
        "fleets": fleets_json(analysis.fleets, analysis.leaderboards),
        "leaderboards": [b.to_json() for b in analysis.leaderboards],
        "leaderboard_notes": list(analysis.leaderboard_notes),
    }


def write_report(sweeps: Sequence[Sweep], directory: str | Path, *, analysis: Analysis | None = None,
                 metric: str = "mfu", y_scale: str = "auto", detail: bool = False,
                 progress: Callable[[int, int], None] | None = None, step_files: Sequence[StepFile] = (),
                 exclude_contended: bool = False) -> list[Path]:
    """Analyse (unless ``analysis`` is given), draw and write ``index.md``, ``index.html``,
    ``analysis.json`` and ``figures/*.png`` under ``directory``; return the paths written.

    The report draws the figures :func:`~mfu_sweep.present.figures.choice.choose_figures` picks
    (every one for a few devices and grids); ``detail`` draws every figure, and the ones beyond
    the choice are linked from the page, not embedded. ``y_scale`` is passed to
    :func:`~mfu_sweep.present.figures.arrange.make_figures`; ``progress(done, total)`` counts figures saved.
    ``step_files`` add their measured steps (without sweeps, the report is their time-to-N section alone).
    """
    analysis = replace(analysis or analyse(sweeps, metric), step_files=tuple(step_files),
                       exclude_contended=exclude_contended)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with staged(out, REPORT_PRODUCTS) as stage:  # an interrupted report leaves the old one (or none), not half
        written = _write_products(sweeps, stage, analysis, y_scale, detail, progress)
    return [out / path.relative_to(stage) for path in written]


REPORT_PRODUCTS = ("figures", "analysis.json", "index.md", "index.html")  # in the order they replace the old ones


def _write_products(sweeps: Sequence[Sweep], out: Path, analysis: Analysis, y_scale: str, detail: bool,
                    progress: Callable[[int, int], None] | None) -> list[Path]:
    """Draw and write the report's files into the new directory ``out``; the paths written."""
    fig_dir = out / "figures"
    fig_dir.mkdir()
    choice = choose_figures(sweeps, analysis.fleets)
    figures = make_figures(sweeps, metric=analysis.metric, fits=analysis.fits, comparisons=analysis.comparisons,
                           fleets=analysis.fleets, boards=analysis.leaderboards, y_scale=y_scale,
                           choice=None if detail else choice, metrics=analysis.metrics,
                           step_files=analysis.step_files, exclude=analysis.exclude_contended)
    blank = blank_notes(sweeps, analysis.metric, metrics=analysis.metrics, heatmaps=None if detail else choice.heatmaps)
    linked = set() if not detail else set(figures) - set(make_figure_stems(choice, figures))
    _ = analysis.summaries  # once, here: the JSON's and the text's workers would each compute it again
    # the JSON, the text and each figure are independent: forked workers share the cores, longest first
    tasks: list[Callable[[], Any]] = [
        partial(_write_analysis, out / "analysis.json", analysis, sweeps),
        partial(build_report, sweeps, analysis, list(figures), linked=linked,
                choice_note=None if detail else choice.sentence(len({sw.label for sw in sweeps})),
                series_labels=None if detail else choice.labels, blank=blank),
        *(partial(save_figure, fig, fig_dir, stem, ("png",), dpi=REPORT_DPI) for stem, fig in figures.items())]
    _, blocks, *saved = run_tasks(tasks, progress=_figures_done(progress, len(tasks) - len(figures), len(figures)))
    written = [path for paths in saved for path in paths]
    images = {path.stem: path.read_bytes() for path in written if path.stem not in linked}
    md, page = out / "index.md", out / "index.html"
    md.write_text(to_markdown(blocks), encoding="utf-8")
    page.write_text(to_html(blocks, images), encoding="utf-8")
    return [*written, md, page, out / "analysis.json"]


def _write_analysis(path: Path, analysis: Analysis, sweeps: Sequence[Sweep]) -> None:
    write_json_atomic(path, {**analysis_json(analysis), "machine": machine_json(sweeps),
                             "steps": steps_json(sweeps, step_files=analysis.step_files,
                                                 exclude=analysis.exclude_contended)})


def _figures_done(progress: Callable[[int, int], None] | None, before: int, n: int
                  ) -> Callable[[int, int], None] | None:
    """``progress(figures saved, n)`` from the progress of tasks whose first ``before`` are not figures."""
    if progress is None:
        return None
    return lambda done, _: progress(done - before, n) if done > before else None


def make_figure_stems(choice: FigureChoice, figures: Mapping[str, Any]) -> list[str]:
    """The stems of ``figures`` the choice embeds: all but the heatmaps it did not choose."""
    chosen = {heatmap_stem(*grid) for grid in choice.heatmaps}
    return [stem for stem in figures if not stem.startswith("heatmap-") or stem in chosen]
