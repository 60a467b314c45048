"""SYNTHETIC pairs of devices for the band verdicts (mfu_sweep.analysis.verdicts.bands). Every number here is MADE UP.

Shapes are a mamf-finder-like grid of M, N, K (many aspect ratios per FLOP
count). Values are log speeds per (seed, pass, shape), vectorised over seeds:

* ``offset``: each shape's systematic log offset, drawn uniformly in
  ``[-offset, offset]`` (0.2 is up to about 20%); ``common=True`` applies the
  same offset to both devices (two copies of one device's shapes), else each
  device draws its own (a shape x device interaction, symmetric about zero);
* ``shape_noise``: normal log noise per (pass, shape, device), what one
  shape's median moves by from run to run;
* ``pass_noise``: normal log offset per (pass, device), every shape of a pass;
* ``drift``/``drift_len``: an AR(1) drift per device along the FLOP order of
  each pass (shapes swept in FLOP order);
* ``lead``/``lead_share``: a planted log lead of device a, drawn uniformly in
  ``lead`` (e.g. (0.02, 0.05)) on a random ``lead_share`` of the shapes.

Never write this into ``sweeps/`` or ``plots/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAMF_SIZES = (256, 512, 1024, 2048, 4096, 8192)


def grid_flops(sizes: Sequence[int] = MAMF_SIZES) -> np.ndarray:
    """Sorted FLOP counts ``2 M N K`` of every (M, N, K) from ``sizes``."""
    s = np.asarray(sizes, dtype=float)
    return np.sort((2 * s[:, None, None] * s[None, :, None] * s[None, None, :]).ravel())


@dataclass(frozen=True)
class PairModel:
    offset: float = 0.2
    common: bool = True
    shape_noise: float = 0.02
    pass_noise: float = 0.0
    drift: float = 0.0
    drift_len: float = 4.0
    lead: tuple[float, float] = (0.0, 0.0)
    lead_share: float = 0.0
    lead_band: tuple[float, float] | None = None  # FLOP range of the planted lead (None: everywhere)


def _ar1(shape: tuple[int, ...], sd: float, corr_len: float, rng: np.random.Generator) -> np.ndarray:
    phi = float(np.exp(-1.0 / corr_len))
    eps = rng.standard_normal(shape)
    out = np.empty(shape)
    out[..., 0] = sd * eps[..., 0]
    for i in range(1, shape[-1]):
        out[..., i] = phi * out[..., i - 1] + sd * np.sqrt(1 - phi**2) * eps[..., i]
    return out


def draw_pair(model: PairModel, flops: np.ndarray, *, seeds: int, repeats: int = 1,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log speeds of a and b, each ``(seeds, repeats, shapes)``, and the planted log lead ``(seeds, shapes)``."""
    n = len(flops)
    off_a = rng.uniform(-model.offset, model.offset, (seeds, 1, n))
    off_b = off_a if model.common else rng.uniform(-model.offset, model.offset, (seeds, 1, n))
    out = []
    for off in (off_a, off_b):
        v = off + model.shape_noise * rng.standard_normal((seeds, repeats, n))
        v = v + model.pass_noise * rng.standard_normal((seeds, repeats, 1))
        if model.drift:
            v = v + _ar1((seeds, repeats, n), model.drift, model.drift_len, rng)
        out.append(v)
    lead = np.zeros((seeds, n))
    if model.lead_share:
        inside = np.ones(n, dtype=bool) if model.lead_band is None else (
            (flops >= model.lead_band[0]) & (flops < model.lead_band[1]))
        on = (rng.random((seeds, n)) < model.lead_share) & inside
        lead = np.where(on, rng.uniform(*model.lead, (seeds, n)), 0.0)
    return out[0] + lead[:, None, :], out[1], lead


def band_calls(model: PairModel, flops: np.ndarray, seeds: int, repeats: int = 1, seed: int = 0,
               **kw: object) -> np.ndarray:
    """(seeds, bands) band states of :func:`mfu_sweep.analysis.verdicts.bands.band_verdicts` on SYNTHETIC draws of
    ``model`` (run-to-run variance from the passes when there are several): +1/-1 a lead, 2 the same within the
    margin, 0 ambiguous; ``kw`` goes to ``band_verdicts`` (``margin``, ``merge``)."""
    from mfu_sweep.analysis.verdicts.bands import band_verdicts, run_variance

    va, vb, _ = draw_pair(model, flops, seeds=seeds, repeats=repeats, rng=np.random.default_rng(seed))
    out = []
    for s in range(seeds):
        rv = run_variance(flops, va[s], vb[s]) if repeats > 1 else None
        out.append([b.state for b in band_verdicts(flops, va[s], vb[s], run_var=rv, **kw)])
    return np.array(out)


def grid_names(sizes: Sequence[int] = MAMF_SIZES) -> tuple[list[str], np.ndarray]:
    """Names ``MxNxK`` and FLOP counts of every (M, N, K) from ``sizes``, sorted by FLOPs (as :func:`grid_flops`)."""
    names = [(2.0 * m * n * k, f"{m}x{n}x{k}") for m in sizes for n in sizes for k in sizes]
    names.sort()
    return [n for _, n in names], np.array([f for f, _ in names])


def disjoint_calls(model: PairModel, sizes: Sequence[int], seeds: int, seed: int = 0, **kw: object) -> np.ndarray:
    """(seeds, bands) band states when a and b measured DISJOINT halves of one SYNTHETIC grid (each shape drawn
    to a or b at random), tested through compare's real path: each side's shapes against the other side's
    prediction there (:func:`mfu_sweep.analysis.verdicts.matching.match_shapes`). One value per shape (no
    passes); ``model``'s offsets are the systematic shape effects, the same population on both sides."""
    from synthetic_aspect import curve

    from mfu_sweep.analysis.verdicts.bands import bands_and_runs
    from mfu_sweep.analysis.verdicts.matching import match_shapes, terms_of

    names, flops = grid_names(sizes)
    rng = np.random.default_rng(seed)
    va, vb, _ = draw_pair(model, flops, seeds=seeds, rng=rng)
    out = []
    for s in range(seeds):
        to_a = rng.random(len(names)) < 0.5
        ca = curve("a", {n: float(va[s][0, i]) for i, n in enumerate(names) if to_a[i]})
        cb = curve("b", {n: float(vb[s][0, i]) for i, n in enumerate(names) if not to_a[i]})
        pts = match_shapes(ca, cb).points
        bands, _ = bands_and_runs([p.flops for p in pts], np.column_stack([p.values_a for p in pts]),
                                  np.column_stack([p.values_b for p in pts]), model=terms_of(pts), **kw)
        out.append([b.state for b in bands])
    width = max(len(r) for r in out)
    return np.array([r + [0] * (width - len(r)) for r in out])


def seed_like(leads: Sequence[float], per_decade: float = 4.0, repeats: int = 3, noise: float = 0.02,
              lead: float = 0.10, span: tuple[float, float] = (1e7, 1e13), seeds: int = 100, seed: int = 0,
              width: float = 0.25, **kw: object) -> tuple[np.ndarray, list]:
    """SYNTHETIC seed-like pair: one square shape per FLOP count, ``per_decade`` of them per decade over ``span``,
    ``repeats`` passes with ``noise`` (log sd) per (pass, shape, device); a leads by ``lead`` within ``width``
    decades of each FLOP count in ``leads``. Returns the FLOP grid and, per seed, the band verdicts."""
    from mfu_sweep.analysis.verdicts.bands import band_verdicts, run_variance

    n = int(round(np.log10(span[1] / span[0]) * per_decade)) + 1
    flops = np.geomspace(*span, n)
    x = np.log10(flops)
    truth = np.zeros(n)
    for c in leads:
        truth[np.abs(x - np.log10(c)) <= width + 1e-9] = np.log1p(lead)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(seeds):
        va = truth + noise * rng.standard_normal((repeats, n))
        vb = noise * rng.standard_normal((repeats, n))
        out.append(band_verdicts(flops, va, vb, run_var=run_variance(flops, va, vb), **kw))
    return flops, out
