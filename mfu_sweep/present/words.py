"""Words that match the metric, for every table and caption that names a lead.

By MFU each device is measured against its own peak: a lead means "closer to its own peak" (higher MFU),
never "faster" — a B200 can run 37% faster than an H100 and still sit further from its peak. By TFLOP/s a
lead is "faster". The sentence phrase is the analysis' own (:func:`~mfu_sweep.analysis.verdicts.comparison.
metric_words`), so sentences, tables and figures say the same thing.
"""

from __future__ import annotations

from typing import Any

from mfu_sweep.analysis.verdicts.comparison import metric_name, metric_words
from mfu_sweep.analysis.verdicts.margin import margin_words

__all__ = ["ahead_words", "band_call", "metric_name", "metric_phrase", "metric_words"]


def ahead_words(metric: str) -> tuple[str, str]:
    """Ahead of and behind a reference, as column names: ``("higher MFU", "lower MFU")`` or ``("faster", "slower")``."""
    return ("higher MFU", "lower MFU") if metric == "mfu" else ("faster", "slower")


def metric_phrase(metric: str) -> str:
    """The metric with what it measures, for a heading: ``"MFU (each against its own peak)"`` or
    ``"TFLOP/s (speed)"``."""
    return "MFU (each against its own peak)" if metric == "mfu" else "TFLOP/s (speed)"


def band_call(band: Any, a: str, b: str, metric: str) -> str:
    """One FLOP band's verdict in the words of its metric.

    ``"<a> higher MFU"`` (MFU) or ``"<a> faster"`` (TFLOP/s) for a lead, ``"the same within 2%"`` or
    ``"ambiguous"``; ``band`` is a :class:`~mfu_sweep.analysis.verdicts.bands.Band`.
    """
    if band.verdict:
        return f"{a if band.verdict > 0 else b} {ahead_words(metric)[0]}"
    return f"the same within {margin_words(band.margin)}" if band.same else "ambiguous"
