"""The report's fixed wording: figure captions and how to read the report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mfu_sweep.present.figures.theme import INTERVAL_TEXT
from mfu_sweep.present.group_metric import GroupMetrics
from mfu_sweep.present.report.blocks import Block, Bullets, Heading

FIGURE_CAPTIONS = {
    "vs-flops": (
        "{metric} against GEMM size per dtype and mode. Points: one per shape, its median time (the median of the "
        "pass medians when swept in several passes); bars: {bars}; lines: roofline-with-overhead fits (with their "
        "95% bootstrap band when a panel has at most two devices; a fit whose parameters the shapes do not "
        "constrain is not drawn, and the legend says so); strip along the top: the device that leads "
        "significantly (blank: ambiguous); vertical lines: crossovers (one per change of leader, from the data), "
        "interval shaded, labelled with their pair. The {metric} axis is logarithmic where the values span more "
        "than a decade (unless --y-scale says otherwise)."),
    "roofline": (
        "Achieved TFLOP/s against arithmetic intensity, one point per shape (bars: {bars}). Dotted: the spec roof "
        "min(peak TFLOP/s, memory bandwidth × intensity) (only the flat peak when the spec has no bandwidth); "
        "dashed: the fitted roof min(P, W × intensity) (overhead t0 left out; a ceiling the shapes do not "
        "constrain is left out); diamonds: ridge points where the slanted and flat parts meet (open: spec, "
        "filled: fit)."),
    "first-call": (
        "Time to first result: the first call's time (left) and its ratio to the steady median (right) per device "
        "and mode, one point per shape (the median over passes, bars: range over passes); for torch.compile this "
        "includes compilation (the compile tax)."),
    "speedup": (
        "torch.compile speedup over eager (eager time / compiled time) per shape; above 1× compiled code is "
        "faster; bars combine both time intervals."),
    "status": (
        "Status of every record by GEMM size: failures (timeout, oom, mismatch, error) stand out against grey "
        "ok dots."),
    "time-to-steps": (
        "Time to N steps against N (log-log): the measured step where step files are given (95% interval over "
        "the runs), else the GEMM sum of a swept model family (GEMMs only, interval over the passes); one line "
        "per device, mode (eager solid, compile dashed) and compile cache (markers filled: cold, hollow: warm), "
        "its interval shaded; dotted vertical lines: where the leader changes (compile against eager, and "
        "between devices), interval shaded. A series that did not finish has no line: ▲ at N = 1 marks the time "
        "limit its first step ran past, and the legend says why."),
    "heatmap": (
        "{metric} over the m × n grid at fixed k; grey cells failed (T/O timeout, OOM out of memory, ERR error, "
        "n/a unsupported)."),
}


def caption(stem: str, metric: str, bars: str = INTERVAL_TEXT["ci"], switched: Sequence[str] = ()) -> str:
    """The caption of a figure written by :func:`mfu_sweep.present.figures.plot.make_figures`.

    ``bars`` says what the error bars are, as the legend says it (:func:`~mfu_sweep.present.report.numbers.bars_text`);
    ``switched`` names the dtypes and modes (``"fp32 · eager"``) the vs-flops panels draw in TFLOP/s because a
    device there has no peak.
    """
    name = "MFU" if metric == "mfu" else "Throughput (TFLOP/s)"
    base = "heatmap" if stem.startswith("heatmap-") else "vs-flops" if stem.endswith("-vs-flops") else stem
    if base == "vs-flops" and switched and metric == "mfu":
        name += f" (TFLOP/s in the {', '.join(switched)} panels: a device there has no peak)"
    return FIGURE_CAPTIONS.get(base, stem).format(metric=name, bars=bars)


def figure_metric(stem: str, metrics: GroupMetrics, metric: str) -> str:
    """The metric a report figure draws: a heatmap's (``heatmap-<label>-<dtype>-<mode>-k<k>``) is its dtype
    and mode's, every other ``metric``, the one asked for."""
    if stem.startswith("heatmap-"):
        *_, dtype, mode, _k = stem.split("-")
        return metrics.of(dtype, mode)
    return metric


# --------------------------------------------------------------------------- building the report


def method_blocks(settings: Mapping[str, object]) -> list[Block]:
    """The closing section: how to read the report, with the analysis settings it used."""
    st = settings
    return [Heading(2, "How to read this"), Bullets((
        "MFU is achieved TFLOP/s over the peak TFLOP/s of the dtype; the peak's kind (vendor spec, estimated, "
        "override) is stated per series. An estimated peak makes MFU an estimate too.",
        "One shape is one value everywhere (tables, figures, analysis.json): its median time, or with several "
        "passes (sweep --repeats) the median of the pass medians. Its interval is the range over passes; with "
        "one pass, the stored 95% confidence interval of the median time (distribution-free, from the raw "
        "samples), else the interquartile range of its samples.",
        "The roofline fit is t = t0 + roof(F/P, B/W), fitted on log median time with a robust loss; intervals "
        f"are {st.get('fit_n_boot', '?')}-resample bootstrap percentiles (seed {st.get('seed', '?')}). A fit "
        "whose shapes pin down none of P, W and t0 is not constrained: its numbers are shown with that note, "
        "but the figures draw no curve for it.",
        f"Comparisons decide one of four verdicts per FLOP band (Holm over the bands and runs of adjacent bands, "
        f"alpha {st.get('alpha', '?')}): a device leads (by MFU: runs closer to its own peak; by TFLOP/s: is "
        "faster) only beyond the margin (default 2%) with confidence, "
        "the two are the same within it when two one-sided tests say so, else ambiguous. Only measured shapes "
        "are evidence (shapes both measured, or one side's shapes against the other's prediction there). The "
        "test is against "
        "run-to-run variation when both devices were swept in several passes (method runs), else against the "
        "scatter of the band's shapes (method shapes: run-to-run variation not measured, so a slow drift of the "
        "machine during a sweep can pass for a lead); each verdict names its method.",
        "Each comparison's short summary gives the share of the FLOP range both devices cover, on a log scale, "
        "where each leads, where the two are the same within the margin, or neither: every shape stands for the "
        "stretch halfway to its neighbouring FLOP counts, with the verdicts above; and the longest lead.",
    ))]
