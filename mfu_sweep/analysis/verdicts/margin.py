"""The practical-equivalence margin every verdict shares: ``compare``'s bands, the fleet view, the leaderboards;
and :class:`VerdictSettings`, the margin with the other settings of a verdict, chosen once and handed down.

A difference smaller than the margin is never called a lead: a band is *a faster* or *b faster* only when
the ratio a/b is beyond ``1 +- margin`` with confidence, *the same* when it is within ``1 +- margin`` with
confidence (two one-sided tests), else *ambiguous*. ``margin=0`` is the pure difference test (no "same").
One constant and one validation, here, so every view reads "the same within 2%" the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_MARGIN = 0.02  # 2%: below what one pass can tell from a whole-sweep offset between two runs
MAX_MARGIN = 0.5


class MarginError(ValueError):
    """A margin outside [0, 50%]; the message names the value."""


def check_margin(margin: float) -> float:
    """``margin`` (a fraction, 0.02 = 2%) if it lies in ``[0, MAX_MARGIN]``, else :class:`MarginError`."""
    if not isinstance(margin, (int, float)) or not math.isfinite(margin) or not 0 <= margin <= MAX_MARGIN:
        raise MarginError(f"margin={margin!r} must be between 0 and {MAX_MARGIN:g} (0% to {MAX_MARGIN:.0%}), "
                          f"e.g. 0.02 or 2%")
    return float(margin)


def parse_margin(text: str | float) -> float:
    """``"2%"``, ``"0.02"`` or ``0.02`` -> 0.02, checked by :func:`check_margin`."""
    if isinstance(text, (int, float)):
        return check_margin(float(text))
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise MarginError(f"margin={text!r} is not a number; give a fraction (0.02) or a percentage (2%)") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_MARGIN:
        raise MarginError(f"margin={text!r} must be between 0 and {MAX_MARGIN:g} (0% to {MAX_MARGIN:.0%}), "
                          f"e.g. 0.02 or 2%")
    return value


def log_margin(margin: float) -> float:
    """The margin on the log-ratio scale the tests use: ``log(1 + margin)``."""
    return math.log1p(check_margin(margin))


def lead_words(metric: str) -> tuple[str, str]:
    """What ahead and behind are called by the metric, in every view: ("faster", "slower") by TFLOP/s,
    ("higher", "lower") by MFU (a fraction of each device's own peak: higher MFU is not faster)."""
    return ("higher", "lower") if metric == "mfu" else ("faster", "slower")


def margin_words(margin: float) -> str:
    """``0.02 -> "2%"``, ``0.015 -> "1.5%"``."""
    return f"{margin * 100:.3g}%"


@dataclass(frozen=True)
class VerdictSettings:
    """How a ``compare`` asks for its verdicts, chosen once and handed down by name to the leaderboards, the fleet
    view and every pair: the family-wise error ``alpha``, the practical-equivalence ``margin`` (checked here, so
    :class:`MarginError` on a bad one), ``min_run`` (the leaderboards' runs, ``refine``'s leanings), and the pairs'
    fitted rooflines (``use_fit``, ``fit_n_boot`` bootstrap resamples, ``seed``)."""

    alpha: float = 0.05
    margin: float = DEFAULT_MARGIN
    min_run: int = 2
    seed: int = 0
    use_fit: bool = True
    fit_n_boot: int = 200

    def __post_init__(self) -> None:
        object.__setattr__(self, "margin", check_margin(self.margin))

    @property
    def delta(self) -> float:
        """The margin on the log-ratio scale the tests use (:func:`log_margin`)."""
        return math.log1p(self.margin)
