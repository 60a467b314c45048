"""SYNTHETIC pairs of devices whose two sides measured their OWN shape lists. Every number here is MADE UP.

What real published tables do (issue 35): each side sweeps its own list of shapes (two AMD chips tuned on
their own LLM layer shapes, a batched table against an unbatched log), and at one FLOP count a skinny GEMM
runs at a very different fraction of peak than a square one. The log speed of a shape here is

* a roofline with overhead in FLOPs and bytes (``t = t0 + max(F / P, B / W)``), plus
* an aspect effect at equal FLOPs of up to ``aspect`` (log 2: the skinniest shapes run at half the speed of
  square ones), curved in the spread of ``log2 M, N, K``, plus a smaller effect of K against sqrt(M N)
  (split-K kernels) and of the batch, plus
* a per-shape offset drawn uniformly in ``[-offset, offset]`` (the part no smooth surface explains: alignment,
  the kernel a library picks), the same on both devices (``common``) or each its own, plus
* ``noise`` per shape and device, and a planted log ``lead`` of device a everywhere.

Shapes are drawn log-uniformly (multiples of 64 from 256 to 8192; batch 1, 2 or 4 with ``batched``), each
side preferring its own aspects: side a keeps a drawn shape with weight ``exp(prefer * spread)`` (skinny), side
b with ``exp(-prefer * spread)`` (square); a share ``matched`` of each side's list is common to both. Pairing by
FLOPs then sets skinny shapes of a against square ones of b and "finds" a lead for b.

:func:`split_table` makes two such sides out of two REAL published series that measured the same shapes (the
values stay theirs), and :func:`split_goals` scores a comparison of them against its matched shapes alone.

Never write this into ``sweeps/`` or ``plots/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.verdicts.comparison import LN_TERA, Comparison
from mfu_sweep.analysis.verdicts.curves import PassCurve

SIZES = np.arange(256, 8192 + 1, 64)
MIN_MATCHED = 5  # bands with at least this many exact matches are scored against them (issue 35)


@dataclass(frozen=True)
class AspectModel:
    n_shapes: int = 250  # per side
    matched: float = 0.0  # share of each side's shapes both measured
    prefer: float = 3.0  # how strongly each side prefers its own aspects (0: the same population)
    aspect: float = math.log(2.0)  # speed lost by the skinniest shapes against square ones of equal FLOPs
    offset: float = 0.1  # per-shape offsets no smooth surface explains
    common: bool = True
    noise: float = 0.02
    lead: float = 0.0  # log lead of a everywhere
    batched: bool = False


def log_speed(dims: np.ndarray) -> np.ndarray:
    """The smooth part of the log TFLOP/s of shapes ``dims`` (rows batch, M, N, K), aspect effect excluded."""
    b, m, n, k = dims.T
    flops = 2 * b * m * n * k
    nbytes = 2 * b * (m * k + k * n + m * n)
    t = 5e-6 + np.maximum(flops / 600e12, nbytes / 2e12)
    return np.log(flops / t) - LN_TERA


def aspect_effect(dims: np.ndarray, size: float) -> np.ndarray:
    """Log speed lost to the shape's aspect at equal FLOPs: up to ``size`` for the skinniest shapes."""
    logs = np.log2(dims[:, 1:])
    spread = logs.std(axis=1) / 2.357  # 2.357: the spread of (256, 8192, 8192), the skinniest
    split_k = np.tanh(logs[:, 2] - logs[:, :2].mean(axis=1)) * 0.15
    return -size * spread**1.5 + split_k * size / math.log(2) - 0.05 * np.log2(dims[:, 0])


def _spread(dims: np.ndarray) -> np.ndarray:
    return np.log2(dims[:, 1:]).std(axis=1)


def _draw(rng: np.random.Generator, n: int, batched: bool) -> np.ndarray:
    b = rng.choice([1, 2, 4], n) if batched else np.ones(n, dtype=int)
    return np.column_stack([b, rng.choice(SIZES, (n, 3))]).astype(float)


def _side(rng: np.random.Generator, n: int, sign: float, prefer: float, batched: bool) -> np.ndarray:
    out: list[np.ndarray] = []
    while sum(len(x) for x in out) < n:
        cand = _draw(rng, 4 * n, batched)
        w = np.exp(sign * prefer * (_spread(cand) - 1.0))
        out.append(cand[rng.random(len(cand)) < w / w.max()])
    return np.concatenate(out)[:n]


def name_of(row: np.ndarray) -> str:
    b, m, n, k = (int(v) for v in row)
    return f"{b}x{m}x{n}x{k}" if b > 1 else f"{m}x{n}x{k}"


def draw_sides(model: AspectModel, rng: np.random.Generator) -> tuple[dict[str, float], dict[str, float]]:
    """``{shape name: log TFLOP/s}`` of side a and side b (one value per shape), drawn from ``model``."""
    n_common = int(round(model.matched * model.n_shapes))
    common = _draw(rng, n_common, model.batched)
    sides = [np.concatenate([common, _side(rng, model.n_shapes - n_common, s, model.prefer, model.batched)])
             for s in (1.0, -1.0)]
    names = [[name_of(r) for r in dims] for dims in sides]
    every = sorted(set(names[0]) | set(names[1]))
    index = {n: i for i, n in enumerate(every)}
    offsets = [rng.uniform(-model.offset, model.offset, len(every)) for _ in range(2)]
    if model.common:
        offsets[1] = offsets[0]
    out = []
    for k, (dims, nm) in enumerate(zip(sides, names, strict=True)):
        base = log_speed(dims) + aspect_effect(dims, model.aspect)
        y = base + offsets[k][[index[n] for n in nm]] + model.noise * rng.standard_normal(len(nm))
        out.append(dict(zip(nm, y + (model.lead if k == 0 else 0.0), strict=True)))
    return out[0], out[1]


def curve(label: str, values: dict[str, float], passes: int = 1, pass_sd: float = 0.0,
          rng: np.random.Generator | None = None) -> PassCurve:
    """A :class:`PassCurve` (TFLOP/s, no peak) of ``{shape: log TFLOP/s}``: one pass, or ``passes`` passes each
    off by normal run-to-run noise of sd ``pass_sd`` per (pass, shape)."""
    shapes = {}
    for name, y in values.items():
        dims = [float(v) for v in name.split("x")]
        flops = 2 * math.prod(dims)
        noise = pass_sd * rng.standard_normal(passes) if rng is not None else np.zeros(passes)
        shapes[name] = (flops, math.log(flops) - LN_TERA - y - noise)
    fs = sorted({f for f, _ in shapes.values()})
    by_f = {f: np.mean([v for g, v in shapes.values() if g == f], axis=0) for f in fs}
    return PassCurve(label=label, log_peak=0.0, passes=tuple(range(passes)), pass_indexed=passes > 1,
                     shapes=shapes, log_f=np.log(fs), log_t=np.column_stack([by_f[f] for f in fs]))


def aspect_calls(model: AspectModel, seeds: int, seed: int = 0, **kw: object) -> list[list[tuple[int, float, float]]]:
    """Per seed, per band of compare's real path (shapes matched or predicted by
    :func:`mfu_sweep.analysis.verdicts.matching.match_shapes`, tested by
    :func:`mfu_sweep.analysis.verdicts.bands.bands_and_runs`): (state, median log10 FLOPs, weight of matched
    shapes). ``kw`` goes to ``bands_and_runs`` (``margin``)."""
    from mfu_sweep.analysis.verdicts.bands import bands_and_runs
    from mfu_sweep.analysis.verdicts.matching import match_shapes, terms_of

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(seeds):
        va, vb = draw_sides(model, rng)
        pts = match_shapes(curve("a", va), curve("b", vb)).points
        bands, _ = bands_and_runs([p.flops for p in pts], np.column_stack([p.values_a for p in pts]),
                                  np.column_stack([p.values_b for p in pts]), model=terms_of(pts), **kw)
        out.append([(b.state, math.log10(b.median_flops), b.split.weight_matched if b.split else 1.0)
                    for b in bands])
    return out


def split_table(sa: Series, sb: Series, matched: float, rng: np.random.Generator,
                adversarial: bool = True) -> tuple[Series, Series]:
    """Two sides with their own shape lists made from two REAL series that measured the same shapes, by
    hiding shapes: a share ``matched`` stays on both sides, and each other shape stays on one side only
    (``adversarial``: the skinnier half on side a, the squarer half on side b; else at random). The values
    are the series' own; only which side keeps which shape is made up here."""
    names = sorted({str(r.shape) for r in sa.records} & {str(r.shape) for r in sb.records})
    dims = [n.split(":")[0] for n in names]  # a layout suffix (DeepBench's tn rows: "1760x16x1760:tn") has no size
    rows = np.array([[float(v) for v in ("1x" + n if n.count("x") == 2 else n).split("x")]
                     for n in dims]).reshape(-1, 4)
    skinny = _spread(rows) + np.log2(rows[:, 0])
    keep = rng.random(len(names)) < matched
    rest = np.flatnonzero(~keep)
    to_a = (skinny[rest] > np.median(skinny[rest])) if adversarial else rng.random(len(rest)) < 0.5
    side_a = {names[i] for i in np.flatnonzero(keep)} | {names[i] for i in rest[to_a]}
    side_b = {names[i] for i in np.flatnonzero(keep)} | {names[i] for i in rest[~to_a]}
    return (replace(sa, records=tuple(r for r in sa.records if str(r.shape) in side_a)),
            replace(sb, records=tuple(r for r in sb.records if str(r.shape) in side_b)))


def split_goals(c: Comparison, margin: float) -> tuple[int, int, float]:
    """Scored against the matched shapes alone, per band with at least ``MIN_MATCHED`` of them: (bands scored,
    bands with a lead the matched shapes do not show beyond the margin, largest |log(band ratio / the
    matched shapes' geometric mean)|)."""
    delta = math.log1p(margin)
    scored, against, worst = 0, 0, 0.0
    for band in c.bands:
        d = [math.log(p.ratio) for p in c.points[band.start:band.stop] if p.method == "matched"]
        if len(d) < MIN_MATCHED:
            continue
        scored += 1
        mean = float(np.mean(d))
        against += bool(band.verdict) and mean * band.verdict <= delta
        worst = max(worst, abs(band.estimate - mean))
    return scored, against, worst
