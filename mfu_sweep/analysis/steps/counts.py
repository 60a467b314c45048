"""Which step counts N to show: ``--steps 100``, ``1,10,100,1000`` or a range ``1-10000``.

A range ``lo-hi`` is the 1-2-5 sequence from ``lo`` to ``hi`` with both ends (1, 2, 5, 10, 20, ...), evenly
spaced on the log axis the time-to-N figure uses. Without ``--steps``, :func:`auto_steps` spans the decades
that hold every break-even and crossover found.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MAX_STEPS = 10**9  # a billion steps: beyond any training run, and still exact as a float
ONE_TWO_FIVE = (1, 2, 5)


class StepsError(ValueError):
    """Time to N steps cannot be predicted as asked; the message names the field and the value."""


def _count(token: str, text: str) -> int:
    try:
        value = float(token)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value == int(value) and 1 <= value <= MAX_STEPS):
        raise StepsError(f"--steps {text!r}: {token!r} is not a whole number of steps from 1 to {MAX_STEPS:g}")
    return int(value)


def one_two_five(lo: int, hi: int) -> list[int]:
    """The 1-2-5 sequence from ``lo`` to ``hi``, both ends included."""
    out = {lo, hi}
    decade = 10 ** int(math.floor(math.log10(lo)))
    while decade <= hi:
        out.update(d * decade for d in ONE_TWO_FIVE if lo <= d * decade <= hi)
        decade *= 10
    return sorted(out)


def parse_steps(texts: str | Iterable[str]) -> tuple[int, ...]:
    """Step counts from ``--steps`` values: whole numbers and ``lo-hi`` ranges, comma-separated, sorted.

    >>> parse_steps("100")
    (100,)
    >>> parse_steps(["1,10", "1e3"])
    (1, 10, 1000)
    >>> parse_steps("1-100")
    (1, 2, 5, 10, 20, 50, 100)
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    out: set[int] = set()
    for text in texts:
        tokens = [t.strip() for t in str(text).split(",")]
        if not any(tokens):
            raise StepsError(f"--steps {text!r}: give step counts, e.g. 100, 1,10,100 or 1-10000")
        for token in filter(None, tokens):
            lo, sep, hi = token.partition("-")
            if not sep or not lo.strip() or lo.strip().lower().endswith("e"):  # one count: 100, -5, 1e-3
                out.add(_count(token, text))
                continue
            a, b = _count(lo.strip(), text), _count(hi.strip(), text)
            if b < a:
                raise StepsError(f"--steps {text!r}: the range {token!r} ends below its start")
            out.update(one_two_five(a, b))
    return tuple(sorted(out))


def auto_steps(marks: Iterable[float], least: int = 1000, most: int = 10**7) -> tuple[int, ...]:
    """Decades 1, 10, ... up to ten times the largest finite mark (a break-even), at least ``least``."""
    finite = [m for m in marks if math.isfinite(m) and m > 0]
    top = max([least, *(10 * m for m in finite)])
    top = min(most, 10 ** math.ceil(math.log10(top)))
    return tuple(one_two_five(1, top))
