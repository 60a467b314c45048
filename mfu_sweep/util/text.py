"""Wording shared by messages at every stage (ground: no torch, no Click)."""

from __future__ import annotations

import re

_WIDE_SPACE = re.compile(r"[^\S\n\r\t\f\v]")  # a space other than ' ': no-break, thin, ideographic ...


def quoted(text: str) -> str:
    """``text`` in quotes for a message, as ``repr`` quotes it, but with Unicode spaces shown as spaces: a
    name read from a spreadsheet (``'Intel(R) Xeon Phi(TM)\\xa07250F'``) reads as it looks there."""
    return repr(_WIDE_SPACE.sub(" ", text))


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``counted(1, "core")`` is ``"1 core"``, 2 gives ``"2 cores"``;
    ``plural`` where adding an s is wrong (``counted(2, "pass", "passes")``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {plural or noun + 's'}"


SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def format_flops(value: float) -> str:
    """``1.1e9 -> "1.1 GFLOP"``: two significant digits, SI prefix, no exponent."""
    scale, prefix = next(((s, p) for s, p in SI if abs(value) >= s * 0.9995), SI[-1])
    v = float(f"{value / scale:.2g}")
    text = f"{v:.0f}" if v >= 10 else f"{v:g}"
    return f"{text} {prefix}FLOP"
