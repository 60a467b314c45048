"""The statistics against libraries that compute the same thing: scipy and statsmodels as oracles.

Every test here draws SYNTHETIC inputs (made-up numbers, seeded) and asks one of the tool's statistics and an
independent library implementation of the same statistic for the same answer:

* Holm's adjusted p-values (``verdicts.evidence.holm``, every family of band, run and fleet verdicts) against
  ``statsmodels.stats.multitest.multipletests(method="holm")``;
* the signed-rank test of a band (``band_tests.signed_rank_p``): its exact sign-flip null against
  ``scipy.stats.wilcoxon(method="exact")``, its normal form (ties, zeros, more than 30 shapes) against
  ``wilcoxon(method="asymptotic", correction=True, zero_method="pratt")``;
* the random-effects band mean (``band_tests.random_effects``): DerSimonian-Laird's between-shape variance and
  Hartung-Knapp's standard error against ``statsmodels.stats.meta_analysis.combine_effects(method_re="chi2")``;
* the distribution-free interval of a median (``stats.median_ci_indices``, every record's ``ci_s`` and the
  fleet's per-shape errors) and the seeds a calibration test allows (``calibration_cases.max_false``) against
  ``scipy.stats.binom`` and ``scipy.stats.binomtest``.

Each states the slip it catches: a wrong multiplier, null, continuity correction, tie or zero rule, moment
estimator or binomial tail moves an answer by far more than the tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
from calibration_cases import max_false
from scipy.stats import binom, binomtest, wilcoxon

from mfu_sweep.analysis.verdicts.band_tests import random_effects, signed_rank_p
from mfu_sweep.analysis.verdicts.evidence import holm
from mfu_sweep.util.stats import median_ci_indices

multitest = pytest.importorskip("statsmodels.stats.multitest")
meta_analysis = pytest.importorskip("statsmodels.stats.meta_analysis")


def test_holm_is_statsmodels_holm() -> None:
    """Families of 1-40 p-values, ties and ones included: the adjusted p-values equal statsmodels' to 1e-12 (an
    off-by-one multiplier, a missing running maximum or a cap other than 1 moves some by a whole p-value)."""
    rng = np.random.default_rng(52)
    for m in [*range(1, 12), 20, 40]:
        for _ in range(5):  # statsmodels takes ~20 ms a call
            p = rng.uniform(0, 1, m) ** rng.uniform(0.5, 6)  # many small ones, as in a family with leads
            if m > 3:
                p[rng.integers(0, m, 2)] = p[0]  # ties
                p[rng.integers(0, m)] = 1.0
            want = multitest.multipletests(p, method="holm")[1]
            np.testing.assert_allclose(holm(p), want, rtol=0, atol=1e-12)


def test_exact_signed_rank_is_scipys_exact_wilcoxon() -> None:
    """2-30 distinct nonzero shapes (a band of one pass): the exact sign-flip p-value equals scipy's exact
    Wilcoxon p-value to 1e-12, in both directions, and the sign is the side the ranks lean to (a one-sided
    tail, a DP counting the wrong sums or a null of n - 1 shapes misses by a factor of 2 or more)."""
    rng = np.random.default_rng(7)
    for n in range(2, 31):
        rows = rng.normal(rng.uniform(-1, 1, (20, 1)), 1.0, (20, n))
        p, sign = signed_rank_p(rows)
        for row, got, s in zip(rows, p, sign, strict=True):
            res = wilcoxon(row, method="exact")
            assert got == pytest.approx(res.pvalue, abs=1e-12), (n, row)
            ranks = np.argsort(np.argsort(np.abs(row))) + 1
            assert s == np.sign(np.sum(np.sign(row) * ranks))


@pytest.mark.parametrize("case", ["ties", "zeros", "many shapes"])
def test_normal_signed_rank_is_scipys_corrected_asymptotic_wilcoxon(case: str) -> None:
    """Ties (values rounded), zeros (a shape both sides ran alike) or more than 30 shapes: the normal p-value with
    one rank step of continuity correction and the conditional variance equals scipy's asymptotic Wilcoxon with
    its continuity correction and Pratt's zeros (ranked, then dropped) to 1e-10 (no correction, the tie-free
    variance or zeros dropped before ranking moves it by 1e-3 or more)."""
    rng = np.random.default_rng({"ties": 1, "zeros": 2, "many shapes": 3}[case])
    for _ in range(60):
        n = int(rng.integers(31, 200)) if case == "many shapes" else int(rng.integers(6, 30))
        d = rng.normal(rng.uniform(-0.5, 0.5), 1.0, n)
        if case == "ties":
            d = np.round(d, 1)
        elif case == "zeros":
            d[rng.integers(0, n, max(1, n // 5))] = 0.0
        if not d.any():
            continue
        got = float(signed_rank_p(d)[0][0])
        want = wilcoxon(d, method="asymptotic", correction=True, zero_method="pratt").pvalue
        assert got == pytest.approx(want, rel=1e-10, abs=1e-12), (case, d)


def test_random_effects_band_mean_is_dersimonian_laird_with_hartung_knapp() -> None:
    """Bands of 3-40 shapes with their own run-to-run variances, shapes scattering beyond them (Cochran's Q above
    n - 1) or agreeing: the band mean and its standard error equal statsmodels' DerSimonian-Laird random-effects
    mean and the larger of Hartung-Knapp's and the random-effects standard error (df n - 1), or the
    fixed-effect mean and its standard error where Q <= n - 1. A term dropped from the moment estimator's
    denominator (sum w - sum w^2 / sum w) moves tau^2, so the mean and its error (issue 52)."""
    rng = np.random.default_rng(11)
    hetero_seen = homo_seen = 0
    for _ in range(400):
        n = int(rng.integers(3, 41))
        v = rng.uniform(1e-5, 4e-4, n) * rng.choice([1.0, 10.0], n)  # unequal variances: the weights matter
        tau = rng.choice([0.0, 0.005, 0.02, 0.05])
        d = rng.normal(0.0, np.sqrt(v + tau**2))
        mu, se, df = (float(x[0]) for x in random_effects(d, v, np.full(n, 4.0)))
        with np.errstate(invalid="ignore"):  # statsmodels takes the root of a negative tau^2 where Q < n - 1
            res = meta_analysis.combine_effects(d, v, method_re="chi2")
        if res.q > n - 1:
            hetero_seen += 1
            assert mu == pytest.approx(res.mean_effect_re, rel=1e-9, abs=1e-12)
            assert se == pytest.approx(max(res.sd_eff_w_re_hksj, res.sd_eff_w_re), rel=1e-9)
            assert df == n - 1
        else:
            homo_seen += 1
            assert res.tau2 <= 0.0  # statsmodels leaves the moment estimate untruncated
            assert mu == pytest.approx(res.mean_effect_fe, rel=1e-9, abs=1e-12)
            assert se == pytest.approx(res.sd_eff_w_fe, rel=1e-9)
    assert hetero_seen > 100 and homo_seen > 50  # both branches were asked


def test_median_interval_indices_are_the_binomial_quantiles() -> None:
    """Every sample count up to 3,000 and some far beyond, at 90/95/99%: the interval ``[x[l], x[n-1-l]]`` has
    ``l`` the largest count with ``P(Binomial(n, 1/2) <= l) <= (1 - confidence) / 2`` (scipy's CDF), capped at the
    middle (one index too far and the interval covers less than it says; too near and it is wider)."""
    for confidence in (0.90, 0.95, 0.99):
        tail = (1 - confidence) / 2
        for n in [*range(1, 3001), 10_007, 65_536, 250_001]:
            lo, hi = median_ci_indices(n, confidence)
            assert hi == n - 1 - lo and 0 <= lo <= (n - 1) // 2
            if lo < (n - 1) // 2:  # not capped: the next index would leave more than the tail out
                assert binom.cdf(lo + 1, n, 0.5) > tail, (n, confidence)
            assert lo == 0 or binom.cdf(lo, n, 0.5) <= tail * (1 + 1e-9), (n, confidence)


@pytest.mark.parametrize("bug", [0.10, 0.25])
def test_allowed_false_leads_are_a_one_sided_binomial_test(bug: float) -> None:
    """``max_false(n, bug)``, the false leads a calibration test allows in n seeds, is the largest count at which
    scipy's one-sided binomial test still rejects a true rate of ``bug`` at 5% (one more and a method with that
    rate passes more often than 1 time in 20)."""
    for n in (40, 60, 100, 150, 200, 300, 400, 1000):
        c = max_false(n, bug)
        assert binomtest(c, n, bug, alternative="less").pvalue <= 0.05, (n, c)
        assert binomtest(c + 1, n, bug, alternative="less").pvalue > 0.05, (n, c)
