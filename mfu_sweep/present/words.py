"""Words that match the metric, for every table and caption that names a lead.

By MFU each device is measured against its own peak: a lead means "closer to its own peak" (higher MFU),
never "faster" — a B200 can run 37% faster than an H100 and still sit further from its peak. By TFLOP/s a
lead is "faster". The sentence phrase is the analysis' own (:func:`~mfu_sweep.analysis.verdicts.comparison.
metric_words`), and so is a band's verdict (:meth:`~mfu_sweep.analysis.verdicts.bands.Band.call`, which the
report, export and ``compare`` print alike), so sentences, tables and figures say the same thing.
"""

from __future__ import annotations

from mfu_sweep.analysis.verdicts.comparison import metric_name, metric_words
from mfu_sweep.analysis.verdicts.margin import lead_words

__all__ = ["ahead_words", "metric_name", "metric_phrase", "metric_words"]


def ahead_words(metric: str) -> tuple[str, str]:
    """Ahead of and behind a reference, as column names: ``("higher MFU", "lower MFU")`` or ``("faster", "slower")``
    (the words of :func:`~mfu_sweep.analysis.verdicts.margin.lead_words`, the metric named by MFU)."""
    ahead, behind = lead_words(metric)
    return (f"{ahead} MFU", f"{behind} MFU") if metric == "mfu" else (ahead, behind)


def metric_phrase(metric: str) -> str:
    """The metric with what it measures, for a heading: ``"MFU (each against its own peak)"`` or
    ``"TFLOP/s (speed)"``."""
    return "MFU (each against its own peak)" if metric == "mfu" else "TFLOP/s (speed)"

