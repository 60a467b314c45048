"""SYNTHETIC calibration cases for the statistics. Every number here is MADE UP.

The cases are the layouts users create: two sweeps with unequal passes (1/2/3/5
against each other), per-pass offsets, a slow drift with passes in FLOP order
or shuffled, imported single-value data (one row, no passes) against multi-pass
sweeps, and fleets of 2, 3, 4 and 8 devices. Each case is scored over many
seeds by calling the library functions directly (never the CLI per seed):

* the false-lead rate: the share of seeds in which identical chips get a band
  verdict (pairs, through compare's calls: :func:`compare_arrays`), or in
  which a healthy device is called ahead or behind in a band or flagged for a
  run (fleets);
* the coverage of every interval the JSON reports: per shape (``ratio_low`` /
  ``ratio_high``), per band (compare's ``bands[]`` and leaderboard
  ``cells[].low/high``), data crossovers
  (``low_flops`` / ``high_flops``) and fits (``*_ci``).

:func:`max_false` is the binomial threshold the tests use: the most false
leads allowed in ``n`` seeds such that a method whose true false-lead rate is
10% passes with probability at most 5%. ``tests/test_calibration.py`` runs a
small set; ``benchmarks/calibration.py`` runs them all with more seeds and
prints the table of the docs (docs/statistics-calibration.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom
from synthetic import NoiseModel, log_ratio_seed_crossover, synthetic_pairs
from synthetic_fleet import fleet_docs

from mfu_sweep.analysis.fleet.leaderboard import Leaderboard, leaderboard
from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.verdicts.curves import _Raw
from mfu_sweep.records.results import parse_document

ALPHA = 0.05
BUG_RATE = 0.10  # a false-lead rate the tests must catch ...
CATCH = 0.95  # ... with at least this probability
# Accepted mean coverage of a nominal 95% interval, as tight as the seeds resolve (docs/statistics-calibration.md,
# "How the thresholds were chosen"): a true 90% interval is >= 3 standard errors under every lower bound.
COVERAGE = (0.94, 0.985)  # fleet band intervals (leaderboard cells)
POINT_COVERAGE = (0.925, 0.975)  # compare's per-shape intervals (points[].ratio_low/high)
BAND_COVERAGE = (0.94, 0.99)  # compare's band intervals (bands[]; signed-rank and random-effects: conservative)

# SYNTHETIC noise models beyond tests/synthetic.py's (log time; 0.01 is about 1%)
PASS_OFFSETS = NoiseModel("per-pass offsets 1%", shape_shift=0.01, pass_shift=0.01)
PER_SHAPE_5 = NoiseModel("per-shape 5%", shape_shift=0.05)
PER_SHAPE_2 = NoiseModel("per-shape 2%", shape_shift=0.02)
DRIFT = NoiseModel("drift", shape_shift=0.005, drift=0.02, drift_len=4.0)


def max_false(n: int, bug: float = BUG_RATE, catch: float = CATCH) -> int:
    """Most false leads allowed in ``n`` seeds so that a true rate of ``bug`` exceeds it with probability >= ``catch``.

    The largest ``c`` with ``P(Binomial(n, bug) <= c) <= 1 - catch``; e.g. 200
    seeds allow 12 (6%): a 10% bug shows 12 or fewer with probability 0.038.
    """
    c = int(binom.ppf(1 - catch, n, bug))
    while c >= 0 and binom.cdf(c, n, bug) > 1 - catch:
        c -= 1
    if c < 0:
        raise ValueError(f"{n} seeds cannot catch a {bug:.0%} false-lead rate with probability {catch}")
    return c


# -- pairs: two SYNTHETIC sweeps of identical chips, compared as compare_series does -----------------------------


@dataclass(frozen=True)
class PairCase:
    """Two SYNTHETIC identical chips measured in ``passes`` = (passes of a, passes of b).

    One pass on a side is a file without a pass index or an imported table of
    one value per shape. ``shuffle``: every pass in its own random order
    (``sweep --repeats``), else all passes in FLOP order.
    """

    name: str
    model: NoiseModel
    passes: tuple[int, int]
    shuffle: bool = True
    n_shapes: int = 48

    def draw(self, seeds: int, seed: int, truth: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray, np.ndarray]:
        """(log FLOPs, truth, log speed of a per (seed, pass, shape), the same of b)."""
        p = synthetic_pairs(self.model, seeds=seeds, truth=truth, repeats=max(self.passes), shuffle=self.shuffle,
                            seed=seed, n_shapes=self.n_shapes)
        ra, rb = self.passes
        return p.log10_flops * math.log(10), p.truth, p.pass_values("a")[:, :ra], p.pass_values("b")[:, :rb]


@dataclass(frozen=True)
class CrossScore:
    seeds: int
    found: int  # seeds whose data crossovers are the planted pattern (a->b, b->a)
    covered: int  # crossovers (of the found seeds) whose [low_flops, high_flops] holds the true crossing
    wrong: int  # seeds with a lead for the wrong chip, away from the planted steps

    @property
    def coverage(self) -> float:
        return self.covered / max(2 * self.found, 1)


def score_crossovers(case: PairCase, seeds: int, seed: int = 0, size: float = math.log(1.1)) -> CrossScore:
    """The seed's pattern (a leads 1-100 GFLOP, b 0.1-1 TFLOP, a above) and compare's data crossover intervals."""
    x10 = np.linspace(6.0, 13.0, case.n_shapes)
    truth = log_ratio_seed_crossover(x10, size)
    x, _, va, vb = case.draw(seeds, seed, truth)
    found = covered = wrong = 0
    for s in range(seeds):
        _, bands, _, cross = compare_arrays(x, va[s], vb[s])
        wrong += any(b.verdict != 0 and b.verdict * np.sign(np.mean(truth[b.start:b.stop])) < 0 for b in bands)
        if [(c.from_label, c.to_label) for c in cross] == [("a", "b"), ("b", "a")]:
            found += 1
            covered += sum(c.low_flops <= 10**t <= c.high_flops for c, t in zip(cross, (11.0, 12.0), strict=True))
    return CrossScore(seeds, found, covered, wrong)


# -- fleets: every device against the median of the others (mfu_sweep.analysis.fleet.leaderboard) ------------

FLEET_FLOPS = tuple(float(f) for f in np.geomspace(1e6, 2e12, 25))


@dataclass(frozen=True)
class FleetCase:
    """``n_devices`` SYNTHETIC devices, per-shape run-to-run noise ``shape_noise``; ``slow`` as in fleet_docs.

    ``margin`` is the leaderboard's practical-equivalence margin (0: the pure difference test the first
    cases were written for); a device whose true ratio stays within it is healthy, and any lead it gets is false.
    """

    name: str
    n_devices: int
    shape_noise: float = 0.03
    slow: tuple[tuple[int, tuple[float, float, float]], ...] = ()
    margin: float = 0.0
    flops: tuple[float, ...] = FLEET_FLOPS

    def board(self, seed: int) -> Leaderboard:
        docs = fleet_docs(self.n_devices, flops=self.flops, shape_noise=self.shape_noise, slow=dict(self.slow),
                          seed=seed)
        series = group_series([sw for d in docs for sw in parse_document(d, validate=False)])
        return leaderboard(list(series.values()), "tflops", alpha=ALPHA, margin=self.margin)

    def true_log_ratio(self, labels: Sequence[str], flops: np.ndarray) -> np.ndarray:
        """(devices, shapes): true log ratio of each device to the median of the *others* (computed here)."""
        truth = np.zeros((self.n_devices, len(flops)))
        for rank, (factor, lo, hi) in self.slow:
            truth[rank] = np.where((flops >= lo) & (flops <= hi), -math.log(factor), 0.0)
        ref = np.array([np.median(np.delete(truth, d, axis=0), axis=0) for d in range(self.n_devices)])
        order = [int(lbl.rsplit(".r", 1)[1]) for lbl in labels]
        return (truth - ref)[order]


@dataclass(frozen=True)
class FleetScore:
    seeds: int
    false_flags: int  # seeds where a healthy device (true ratio within the margin everywhere) got a verdict or a run
    cells: int
    covered: int  # band cells whose [low, high] holds the true band ratio
    slow_found: int  # seeds where every slow device is behind in a band it is slow in
    called: int = 0  # seeds where any device got a band verdict or a run

    @property
    def coverage(self) -> float:
        return self.covered / max(self.cells, 1)


def score_fleet(case: FleetCase, seeds: int, seed: int = 0) -> FleetScore:
    slow_ranks = {r for r, _ in case.slow}
    false_flags = cells = covered = found = called = 0
    for s in range(seed, seed + seeds):
        lb = case.board(s)
        flops = np.array([e.flops for e in lb.evidence[lb.devices[0]]])  # the shapes' own FLOPs, all devices alike
        truth = case.true_log_ratio(lb.labels, flops)
        row = {lbl: i for i, lbl in enumerate(lb.labels)}
        healthy = {lbl for lbl in lb.labels if np.all(np.abs(truth[row[lbl]]) <= math.log1p(case.margin))}
        flagged = {c.label for c in lb.cells if c.verdict != 0} | {r.label for r in lb.runs}
        false_flags += bool(flagged & healthy)
        called += bool(flagged)
        hits = 0
        for c in lb.cells:
            band = lb.bands[c.band]
            inside = (flops >= band.low_flops) & (flops < band.high_flops)
            true_ratio = math.exp(float(np.mean(truth[row[c.label], inside])))
            cells += 1
            covered += c.low <= true_ratio <= c.high
            hits += c.verdict < 0 and true_ratio < 1 and int(c.label.rsplit(".r", 1)[1]) in slow_ranks
        found += hits > 0
    return FleetScore(seeds, false_flags, cells, covered, found, called)


# -- fits: the 95% intervals of P, W and t0 (mfu_sweep.analysis.fits.fit) ------------------------------------

FIT_TRUTH = {"p_tflops": 600.0, "w_tbs": 2.0, "t0_s": 2e-6}


@dataclass(frozen=True)
class FitScore:
    seeds: int
    covered: dict[str, int]  # per parameter, fits whose interval holds the truth
    unconstrained: int  # fits with a parameter the data do not constrain (its interval is not counted)

    def coverage(self, name: str) -> float:
        return self.covered[name] / max(self.seeds - self.unconstrained, 1)


def score_fit(model: NoiseModel, repeats: int, seeds: int, *, shuffle: bool = True, n_boot: int = 100,
              seed: int = 0) -> FitScore:
    """Fit one SYNTHETIC chip per seed (24 shapes, 1 MFLOP - 10 TFLOP) and count intervals holding the truth."""
    from synthetic import make_sweep_doc

    from mfu_sweep.analysis.fits.fit import fit_series

    covered = dict.fromkeys(FIT_TRUTH, 0)
    unconstrained = 0
    for s in range(seed, seed + seeds):
        doc = make_sweep_doc("chip", flops=list(np.geomspace(1e6, 1e13, 24)), seed=100 + s, noise_model=model,
                             repeats=repeats, shuffle=shuffle, n_samples=10, P_tflops=600.0, W_tbs=2.0, t0_s=2e-6)
        [series] = group_series(parse_document(doc, validate=False)).values()
        fit = fit_series(series, n_boot=n_boot, seed=s, cache=False)
        if not all(fit.constrained.values()):
            unconstrained += 1
            continue
        for k, value in FIT_TRUTH.items():
            lo, hi = getattr(fit, k + "_ci")
            covered[k] += lo <= value <= hi
    return FitScore(seeds, covered, unconstrained)


# -- what compare reports: band verdicts, per-shape points, crossovers (mfu_sweep.analysis.verdicts.bands) ---------


def compare_arrays(log_flops: np.ndarray, values_a: np.ndarray, values_b: np.ndarray,
                   margin: float = 0.0) -> tuple[str, list, list, list]:
    """The data part of :func:`mfu_sweep.analysis.verdicts.pair.compare_series` on arrays (same calls, same order):
    method, band verdicts, per-shape points and data crossovers of a over b. ``margin`` 0 is the pure
    difference test these calibrations were written for (the default 2% margin only turns leads into "same"
    or ambiguous, so false leads can only fall)."""
    from mfu_sweep.analysis.verdicts import segments as band_segments
    from mfu_sweep.analysis.verdicts.bands import band_verdicts, run_variance
    from mfu_sweep.analysis.verdicts.evidence import choose_method

    flops = np.exp(log_flops)
    raw = [_Raw(float(f), f"s{i}", values_a[:, i], values_b[:, i], 0.0, "matched", None) for i, f in enumerate(flops)]
    method = choose_method(values_a, values_b)
    run_var = run_variance(flops, values_a, values_b, np.zeros(len(flops))) if method == "runs" else None
    bands = band_verdicts(flops, values_a, values_b, alpha=ALPHA, run_var=run_var, margin=margin)
    points = band_segments.points(raw, bands, "a", "b", method, ALPHA, run_var)
    return method, bands, points, band_segments.crossovers(raw, bands, "a", "b", method)


@dataclass(frozen=True)
class CompareScore:
    seeds: int
    false_leads: int  # seeds with a band verdict between identical chips (or against the planted sign)
    point_coverage: float  # mean share of shapes whose ratio_low/ratio_high holds the true ratio
    bands: int
    covered: int  # bands whose [low, high] holds the true log ratio of the band
    methods: frozenset[str]

    @property
    def band_coverage(self) -> float:
        return self.covered / max(self.bands, 1)


def score_compare(case: PairCase, seeds: int, seed: int = 0, size: float = 0.0) -> CompareScore:
    """Compare's verdicts and intervals for identical chips (``size`` 0) or a uniform lead of ``size``."""
    x, truth, va, vb = case.draw(seeds, seed, np.full(case.n_shapes, float(size)))
    wrong = n_bands = covered = 0
    cover, methods = [], set()
    for s in range(seeds):
        method, bands, points, _ = compare_arrays(x, va[s], vb[s])
        methods.add(method)
        wrong += any(b.verdict != 0 and (size == 0 or b.verdict != np.sign(size)) for b in bands)
        for b in bands:
            n_bands += 1
            covered += b.low <= float(np.mean(truth[b.start:b.stop])) <= b.high
        ratio = np.exp(truth)
        cover.append(np.mean([p.ratio_low <= r <= p.ratio_high for p, r in zip(points, ratio, strict=True)]))
    return CompareScore(seeds, wrong, float(np.mean(cover)), n_bands, covered, frozenset(methods))
