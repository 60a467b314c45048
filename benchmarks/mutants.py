"""Mutation run over the statistics: single-line slips in mfu_sweep/analysis/, each against the tests that catch it.

Run:  make mutants    (or: .venv/bin/python benchmarks/mutants.py [--only ID ...] [--group SET ...]
      [--under PATH ...] [--without TEST_FILE ...] [--timeout 600] [--list])

Not part of CI: each mutant runs a narrow test selection (``pytest -x``, so a
killed mutant stops at the first failing test) in a copy of the tree in a
temporary directory, with a per-mutant timeout; the checkout is never edited.
It prints a survival table (Markdown), the one in docs/statistics-calibration.md.

A mutant is *killed* when its tests fail (or time out), *survived* when they
pass, *stale* when its line is no longer in the source (the list needs an
update; the run fails). ``equivalent`` marks mutants argued to change no output
that matters; they are run and reported but not counted against the goal.

The ``named`` set are the slips that survived the suite before (issue notes:
wrong pass count in the Welch variance, no leave-one-out reference, 50% band
intervals) and the near misses; the ``fresh`` set was chosen by rule, one slip
per function of the verdict, interval and leaderboard code (a wrong count,
quantile, comparison, or a dropped correction), before running it; ``bands``
are two slips in compare's band verdicts. The per-shape ones moved to the band
verdicts when the per-shape verdict path was removed. ``audit`` are the slips a
second audit found surviving or caught only by the golden file (the drift
factor, the random-effects df, the pass-offset ddof, 90% band intervals, the
per-pass minimum, the fit bootstrap without shape resampling); ``weak`` are
slips the weak tests it listed let through; ``round5-fits`` are slips of the
stacked fits, the bootstrap, the physical bounds, the parallel chunks and the
importers' identity (issue 38, part 1), each run first against the property
test of tests/test_properties_fits.py or tests/test_properties_identity.py
written for it; ``round5-verdicts`` (issue 38, part 2) are slips designed from
the code of the pairing of unmatched shapes, the band runs and their inherited
leads, the crossover intervals, the run-to-run model, the fleet flag and gate
and refine's regions before their tests were read, each run first against
tests/test_properties_verdicts.py or tests/test_properties_fleet.py where one
was written for it; ``round6`` (benchmarks/mutants_round6.py) are the kinds issue 52 found surviving (the
local model's span, the calibrated band test, the moment estimator, the fleet's df, p-values and predicted
errors, the steps bootstrap, the repeat key, tritonbench's mode, the block-scale rule), each run first against
its property or oracle test. No selection runs the golden test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants_round6 import ROWS as ROUND6  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# sweeps/ and data/ are copied: tests read the published imports and the real excerpts in them
SKIP = (".git", ".venv", ".venv-xla", "plots", "site", "out", "build", "__pycache__", ".pytest_cache",
        ".ruff_cache", ".whl")

# Narrow test selections, each a separate pytest run (a -k applies to one run only), the most likely
# killer first: pytest -x stops at the first failure, and the next selection runs only if all passed.
# No selection runs the golden test (test_compare_json_golden): a mutant must fail a statement about the
# statistics, never only a byte-for-byte file.
CAL, VAR = "tests/test_calibration.py", "tests/test_variance_model.py"
COMPARE = ("tests/test_compare.py", "-k", "not golden")
EVIDENCE = (("tests/test_compare.py", "-k", "holm"), ("tests/test_run_side.py",), (VAR,),
            (CAL, "-k", "compare_band or crossover"), ("tests/test_bands.py",))
LEADERBOARD = ((CAL, "-k", "fleet or band"), ("tests/test_leaderboard.py",))
BANDS = ((VAR,), (CAL, "-k", "crossover or compare_band"), ("tests/test_bands.py",), COMPARE)
SEGMENTS = (("tests/test_bands.py",), (CAL, "-k", "crossover or compare_band"), COMPARE)
PAIR = (COMPARE,)
FITS = ((VAR, "-k", "fit"), (CAL, "-k", "fit"), ("tests/test_fit.py",))
# round5-fits: the stacked fits, the bootstrap, the physical bounds, the parallel chunks and the importers' identity;
# each mutant runs the property test written for it first (tests/test_properties_*.py), then its package's tests
PF, PI = "tests/test_properties_fits.py", "tests/test_properties_identity.py"
R5_FITS = FITS + (("tests/test_parallel.py",),)
R5_IDENT = (("tests/test_import_identity.py",), ("tests/test_identity.py",))
# round5-verdicts: the pairing of unmatched shapes, the band tests and the runs' claims, the crossover intervals, the
# run-to-run evidence model, the fleet flag and gate, and refine's regions; each runs its property test first
# (tests/test_properties_verdicts.py, tests/test_properties_fleet.py), then its package's tests
PV, PFL = "tests/test_properties_verdicts.py", "tests/test_properties_fleet.py"
R5_VERD = (("tests/test_compare_unmatched.py",), ("tests/test_bands.py",), (CAL, "-k", "compare_band or crossover"),
           (VAR,), ("tests/test_run_side.py",), COMPARE)
R5_FLEET = (("tests/test_fleet_gate.py",), ("tests/test_leaderboard.py",), ("tests/test_compare_fleet.py",),
            (CAL, "-k", "fleet or band"))
R5_REFINE = (("tests/test_refine.py",), ("tests/test_refine_cpu.py",))



def _first(first: tuple[str, ...], rest: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    """``rest`` with the selection expected to kill a mutant run first."""
    return (first, *rest)


def _fits(k: str) -> tuple[tuple[str, ...], ...]:
    return _first((PF, "-k", k), R5_FITS)


def _ident(k: str) -> tuple[tuple[str, ...], ...]:
    return _first((PI, "-k", k), R5_IDENT)


def _verd(k: str) -> tuple[tuple[str, ...], ...]:
    return _first((PV, "-k", k), R5_VERD)


def _fleet(k: str) -> tuple[tuple[str, ...], ...]:
    return _first((PFL, "-k", k), R5_FLEET)


def _refine(k: str) -> tuple[tuple[str, ...], ...]:
    return _first((PV, "-k", k), R5_REFINE)


@dataclass(frozen=True)
class Mutant:
    id: str
    group: str  # one of GROUPS
    path: str
    old: str
    new: str
    tests: tuple[tuple[str, ...], ...]
    what: str
    equivalent: str = ""  # why it changes nothing that matters, when it is argued to


E, V, P = ("mfu_sweep/analysis/verdicts/evidence.py", "mfu_sweep/analysis/verdicts/curves.py",
           "mfu_sweep/analysis/verdicts/pair.py")
B, BS = "mfu_sweep/analysis/verdicts/bands.py", "mfu_sweep/analysis/verdicts/segments.py"
BT = "mfu_sweep/analysis/verdicts/band_tests.py"
RT, XF = "mfu_sweep/analysis/verdicts/run_test.py", "mfu_sweep/analysis/verdicts/fit_crossings.py"
FE, FC = "mfu_sweep/analysis/fleet/evidence.py", "mfu_sweep/analysis/fleet/cells.py"
R = "mfu_sweep/analysis/fits/roofline.py"
FI, BA, LS = "mfu_sweep/analysis/fits/fit.py", "mfu_sweep/analysis/fits/batch.py", "mfu_sweep/analysis/fits/lsq.py"
PH, PA = "mfu_sweep/analysis/fits/physical.py", "mfu_sweep/analysis/fits/parallel.py"
ID, GR = "mfu_sweep/importers/identity.py", "mfu_sweep/importers/grouping.py"
MA, FG, FV = ("mfu_sweep/analysis/verdicts/matching.py", "mfu_sweep/analysis/fleet/gate.py",
              "mfu_sweep/analysis/fleet/view.py")
RG = "mfu_sweep/analysis/refine/regions.py"
GATE_SLOWER = "if any(c.verdict < 0 for c in cells) or any(r.direction < 0 for r in board.runs_of.get(label, ())):"
FLEET_RUNS_P = "p = lead_p(med, median_se(np.sqrt(ev.var)[:, None], count), ev.dof[:, None], log_margin(margin))"
STACK_SETTLED = "settled = None if first.settled is None else [p.settled for p in problems]"
USABLE = 'text = value.strip().lower().removeprefix("gpu-")'
# the runs test's interval (run_test.runs_test; the local model's t test has the same line after other ones)
RUNS_HALF = "half = float(student_t.ppf(1 - level / 2, df)) * math.sqrt(var)"  # the t interval of runs and the model

GROUPS = ("named", "fresh", "bands", "audit", "weak", "round5-fits", "round5-verdicts", "round6")
MUTANTS = (
    # -- named: survived an older suite, or nearly (the per-shape ones retargeted to the band verdicts) --
    Mutant("welch-pass-count", "named", BT, "va, vb = sa.var / sa.n_runs, sb.var / sb.n_runs",
           "va, vb = sa.var / sa.n_runs, sb.var / sa.n_runs", _first((CAL, "-k", "compare_band and per-shape"), BANDS),
           "Welch variance of b over a's pass count"),
    Mutant("no-leave-one-out", "named", FE, "        ref = rest_median(grid.values)\n",
           "        ref = np.broadcast_to(np.nanmedian(grid.values, axis=0), grid.values.shape)\n", LEADERBOARD,
           "reference = median over all devices, the device included"),
    Mutant("band-50-percent", "named", FC, "half = t_ppf(1 - alpha / 2, dof) * se",
           "half = t_ppf(0.75, dof) * se", LEADERBOARD, "fleet band intervals at 50% instead of 95%"),
    Mutant("t-to-normal", "named", RT, RUNS_HALF, "half = float(norm.ppf(1 - level / 2)) * math.sqrt(var)",
           _first((CAL, "-k", "compare_band"), BANDS), "band interval (runs) with a normal instead of a t quantile"),
    Mutant("no-pass-offsets", "named", BT,
           "parts = [(max(excess, 0.0), max(df, 1.0)), (a.common, a.common_df), (b.common, b.common_df)]",
           "parts = [(max(excess, 0.0), max(df, 1.0))]", _first((CAL, "-k", "compare_band"), BANDS),
           "band variance without the pass-offset terms"),
    Mutant("no-pass-autocorrelation", "named", E, "rho = _pass_autocorrelation(v, mean, pooled, RUN_LAGS)",
           "rho = np.eye(1, len(mean))[0]", _first((CAL, "-k", "compare_band and drift"), EVIDENCE),
           "runs: passes' autocorrelation along FLOPs switched off"),
    # -- fresh: one slip per function, by rule --
    Mutant("holm-off-by-one", "fresh", E, "(m - np.arange(m)) * p[order]", "(m - np.arange(m) - 1) * p[order]",
           EVIDENCE, "Holm multipliers m-1 .. 0"),
    Mutant("min-run-strict", "fresh", E, "if supports[start] and stop - start >= min_run:",
           "if supports[start] and stop - start > min_run:", EVIDENCE + LEADERBOARD,
           "run rule needs min_run + 1 FLOP counts"),
    Mutant("decide-2alpha", "fresh", FC, "verdict = np.where(p_lead < alpha, np.sign(est), 0)",
           "verdict = np.where(p_lead < 2 * alpha, np.sign(est), 0)", LEADERBOARD, "fleet lead at 2 alpha"),
    Mutant("satterthwaite-df", "fresh", BT, "df = var**2 / (va**2 / sa.df + vb**2 / sb.df)",
           "df = var**2 / (va**2 / sa.df + vb**2 / sa.df)", _first((VAR, "-k", "quiet_many_pass"), BANDS),
           "point df (runs) with a's df twice"),
    Mutant("pool-df-n", "fresh", E, "    df = np.where(np.isfinite(var), n_runs - 1, 0.0)\n    v = ",
           "    df = np.where(np.isfinite(var), n_runs, 0.0)\n    v = ", EVIDENCE,
           "pooled variance df R instead of R - 1"),
    Mutant("var-over-n", "fresh", E, "var = np.nansum((v - mean) ** 2, axis=0) / (n - 1)",
           "var = np.nansum((v - mean) ** 2, axis=0) / n", EVIDENCE, "pass variance divided by R"),
    Mutant("offsets-not-over-passes", "fresh", E, "return float(np.var(offsets, ddof=1)) / len(offsets),",
           "return float(np.var(offsets, ddof=1)),", _first((VAR, "-k", "pass_offsets"), EVIDENCE),
           "pass-offset variance of one pass, not of the mean"),
    Mutant("one-sided-p", "fresh", RT,
           "z = est - shift\n        return (float(2 * student_t.sf(abs(z) / math.sqrt(var), df))",
           "z = est - shift\n        return (float(student_t.sf(abs(z) / math.sqrt(var), df))",
           _first((CAL, "-k", "compare_band"), BANDS),
           "band p-value (runs) one-sided"),
    Mutant("mad-unscaled", "fresh", FE, "spread = MAD_TO_SIGMA * _row_medians(", "spread = _row_medians(", LEADERBOARD,
           "MAD without the 1.4826 normal factor"),
    Mutant("resid-no-dof-correction", "fresh", FE, "* np.sqrt(k / (k - 1))",
           "* 1.0", LEADERBOARD, "band-mean residuals not corrected for the mean's df"),
    Mutant("band-se-all-shapes", "fresh", FC, "np.sqrt(ev.var[dev] / n)", "np.sqrt(ev.var[dev] / len(ev.band_of))",
           LEADERBOARD, "band standard error over all shapes, not the band's"),
    Mutant("runs-no-holm", "fresh", FC, "adj[valid] = holm(p[valid])", "adj[valid] = p[valid]", LEADERBOARD,
           "per-shape runs without Holm"),
    Mutant("ref-se-k", "fresh", FE, "/ np.sqrt(np.maximum(k - 1, 1))", "/ np.sqrt(np.maximum(k, 1))", LEADERBOARD,
           "reference median's se over k devices, not the k - 1 others"),
    Mutant("crossover-interval-collapsed", "fresh", BS, "lo, hi = bands[e0 - 1].median_flops, bands[s1].median_flops",
           "lo, hi = bands[e0 - 1].median_flops, bands[e0 - 1].median_flops", SEGMENTS,
           "data crossover interval of zero width"),
    Mutant("fit-crossover-alpha", "fresh", XF, "axis=1), 1 - alpha))", "axis=1), alpha))",
           ((PV, "-k", "kept_or_noted"), ("tests/test_compare.py", "-k", "fit_crossover"), *PAIR),
           "fit band's critical value at the alpha quantile"),
    # -- band verdicts (compare's verdict per FLOP band) --
    Mutant("band-no-correlation", "bands", RT, "parts = [(se**2, df), *_correlated(sides, run_var, s, e, used)]",
           "parts = [(se**2, df)]", _first((CAL, "-k", "compare_band"), BANDS),
           "band mean tested against independent shapes only (no drift, no offsets)"),
    Mutant("band-no-holm", "bands", B, "holm([min(rows[k][0], rows[k][2]) for k in keys])",
           "np.array([min(rows[k][0], rows[k][2]) for k in keys])", _first((CAL, "-k", "compare_band"), BANDS),
           "band verdicts without Holm over the bands"),
    # -- audit: the second audit's survivors and the slips only the golden file caught (held out before) --
    Mutant("drift-factor-dropped", "audit", RT, "p, sign = signed_rank_p(x - s, drift)",
           "p, sign = signed_rank_p(x - s)", _first((VAR, "-k", "one_pass_under_drift"), BANDS),
           "one-pass signed-rank null variance without the drift factor"),
    Mutant("re-df-n", "audit", BT, "resid_df = n - 1 - slope_df", "resid_df = n - slope_df", BANDS,
           "random-effects band mean on n instead of n - 1 df"),
    Mutant("offsets-ddof-0", "audit", E, "np.var(offsets, ddof=1)", "np.var(offsets, ddof=0)",
           _first((VAR, "-k", "pass_offsets"), EVIDENCE), "pass-offset variance with ddof 0"),
    Mutant("band-90-percent", "audit", RT, RUNS_HALF,
           "half = float(student_t.ppf(1 - level, df)) * math.sqrt(var)",
           _first((CAL, "-k", "compare_band"), BANDS), "band interval (runs) at 90% instead of 95%"),
    Mutant("per-pass-minimum", "audit", V, "math.log(float(np.median(runs[p])))",
           "math.log(float(np.min(runs[p])))", ((VAR, "-k", "jittery"), COMPARE),
           "a pass's value is the minimum of its samples, not the median"),
    Mutant("boot-no-shape-resampling", "audit", R, "idx = np.sort(rng.integers(0, n, (n_boot, n)), axis=1)",
           "idx = np.tile(np.arange(n), (n_boot, 1))", FITS, "fit bootstrap without resampling shapes"),
    # -- weak: slips the weak tests of the audit let through --
    Mutant("cells-99-percent", "weak", FC, "half = t_ppf(1 - alpha / 2, dof) * se",
           "half = t_ppf(0.995, dof) * se", LEADERBOARD, "fleet band intervals at 99% instead of 95%"),
    Mutant("hl-90-percent", "weak", BT, "z = norm.ppf(1 - alpha / 2) * math.sqrt(drift)",
           "z = norm.ppf(1 - alpha) * math.sqrt(drift)", _first((CAL, "-k", "compare_band"), BANDS),
           "band interval (one pass, Hodges-Lehmann) at 90%"),
    Mutant("points-90-percent", "weak", BS, "q = student_t.ppf(1 - alpha / 2, df)", "q = student_t.ppf(1 - alpha, df)",
           _first((CAL, "-k", "compare_band"), SEGMENTS), "per-shape intervals at 90%"),
    # -- round5-fits: issue #38 part 1, designed from the code and docs of fits/ and the importers' identity
    #    before reading their tests; batched fits, bootstrap, physical bounds, parallel chunks, identity --
    Mutant("stack-settled-first", "round5-fits", BA, STACK_SETTLED,
           "settled = None if first.settled is None else first.settled", _fits("stacked_fits"),
           "a stacked bootstrap stops every problem on the first problem's rule (asked with all rows)"),
    Mutant("stack-settled-shared", "round5-fits", BA, STACK_SETTLED,
           "settled = None if first.settled is None else [first.settled] * len(problems)", _fits("stacked_fits"),
           "every group of a stacked bootstrap asks the first problem's stop rule (one shared state)"),
    Mutant("stack-key-no-settings", "round5-fits", BA, "len(self.log_f), self.settings, self.settled is None)",
           "len(self.log_f), self.settled is None)", _fits("different_settings"),
           "problems of different solver settings (loss, f_scale) stacked under the first one's"),
    Mutant("max-cells-ignored", "round5-fits", BA,
           "if chunk and (i < 0 or sum(problems[j].cells for j in [*chunk, i]) > max_cells):",
           "if chunk and i < 0:", _fits("max_cells"), "stacked solves not split at MAX_CELLS rows x shapes"),
    Mutant("members-off-by-one", "round5-fits", LS, "bounds = np.flatnonzero(np.diff(groups[order])) + 1",
           "bounds = np.flatnonzero(np.diff(groups[order]))", _fits("stacked_fits"),
           "group boundaries one row early: each group's first row acts with the previous group"),
    Mutant("prune-global-min", "round5-fits", LS, "prune[1] * np.min(state.cost[m])", "prune[1] * np.min(state.cost)",
           _fits("stacked_fits"), "starting points pruned against the lowest cost of all stacked groups"),
    Mutant("settle-all-rows", "round5-fits", LS, "if not done[m].all() and ask(x[m]):",
           "if not done[m].all() and ask(x):", _fits("stacked_fits"),
           "each group's stop rule asked with every stacked row"),
    Mutant("settle-any-group", "round5-fits", LS, "    return bool(done.all())", "    return bool(done.any())",
           _fits("stacked_fits"), "a stacked solve stops when any row is done, not every group"),
    Mutant("bound-held-sign", "round5-fits", LS, "held = (at_low & (grad > 0)) | (at_high & (grad < 0))",
           "held = (at_low & (grad < 0)) | (at_high & (grad > 0))", _fits("start_at_a_bound"),
           "a parameter at a bound held when the gradient points into the box"),
    Mutant("boot-counts-no-duplicates", "round5-fits", R,
           "minlength=n_boot * n).reshape(n_boot, n).astype(float)",
           "minlength=n_boot * n).reshape(n_boot, n).clip(max=1).astype(float)",
           _first(("tests/test_fit.py", "-k", "matches_scipy"), R5_FITS),
           "a shape drawn twice by the bootstrap weighs once"),
    Mutant("boot-skip-last-shape", "round5-fits", R, "idx = np.sort(rng.integers(0, n, (n_boot, n)), axis=1)",
           "idx = np.sort(rng.integers(0, n - 1, (n_boot, n)), axis=1)", _fits("every_shape_alike"),
           "the bootstrap never draws the largest shape"),
    Mutant("boot-no-sample-resampling", "round5-fits", R,
           "draws[rows] = np.log(_median_last(stack.ravel().take(picks)))",
           "draws[rows] = np.log(_median_last(stack))[:, None]", _fits("resampled_medians"),
           "the bootstrap resamples shapes but not the samples within a shape"),
    Mutant("pass-shift-normal", "round5-fits", R, ".standard_t(n_passes - 1, n_boot)", ".standard_normal(n_boot)",
           _fits("mean_of_r_passes"), "pass-level shifts normal, not Student's t with R - 1 df"),
    Mutant("pass-shift-no-sqrt-r", "round5-fits", R,
           "spread = float(np.std(pass_offsets(data), ddof=1)) / math.sqrt(n_passes)",
           "spread = float(np.std(pass_offsets(data), ddof=1))", _fits("mean_of_r_passes"),
           "pass-level shift of one pass, not of the mean of R passes"),
    Mutant("pass-shift-shared-stream", "round5-fits", R, "default_rng([seed, PASS_STREAM, _content_word(data)])",
           "default_rng([seed, PASS_STREAM])", _fits("independent"),
           "two series fitted with one seed get the same pass shifts"),
    Mutant("shift-sign-flip", "round5-fits", R, "out[:, 1:3] -= shift[:, None]", "out[:, 1:3] += shift[:, None]",
           _fits("scales_the_time"), "a pass shift moves P and W up with t0 (sign flip)"),
    Mutant("settle-tol-wide", "round5-fits", R, "def __init__(self, alpha: float, tol: float = 1e-3)",
           "def __init__(self, alpha: float, tol: float = 1e-1)", _fits("interval_rule"),
           "bootstrap stops when its quantiles move less than 10%, not 0.1%"),
    Mutant("interval-90", "round5-fits", FI, "lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])",
           "lo, hi = np.quantile(values, [alpha, 1 - alpha])", _fits("bootstrap_percentiles"),
           "fit intervals at 90% instead of 95%"),
    Mutant("cache-key-no-passes", "round5-fits", FI, "    for p in data.passes:\n        h.update(p.tobytes())\n",
           "", _fits("cached_fit"), "fit cache key ignores which pass each sample came from"),
    Mutant("bounded-low-min", "round5-fits", FI, "lower[2] = max(lower[2], math.log(plausible.low_tbs))",
           "lower[2] = min(lower[2], math.log(plausible.low_tbs))", _fits("plausible_range"),
           "the plausible range's lower end never bounds W"),
    Mutant("at-prior-tolerance", "round5-fits", FI, "_robust_cost(best, y, data, opts) * (1 + 1e-4)",
           "_robust_cost(best, y, data, opts) * (1 + 1e-1)", _fits("unconstrained_w"),
           "an unconstrained W moved to the copy (else spec) bandwidth even when the fit gets 10% worse"),
    Mutant("groups-copy-key", "round5-fits", FI,
           "items = [(series[k], (copy_bandwidth or {}).get(k.label)) for k in keys]",
           "items = [(series[k], (copy_bandwidth or {}).get(str(k))) for k in keys]", _fits("stacked_fits"),
           "fit_groups looks the copy bandwidth up by series key, not label (never found)"),
    Mutant("skip-reason-default-min", "round5-fits", FI,
           'skipped[key] = why_unfittable(series[key], kw.get("min_shapes", MIN_SHAPES))',
           "skipped[key] = why_unfittable(series[key])", _fits("skipped_series"),
           "fit_groups says why a series was skipped against the default min_shapes"),
    Mutant("bw-high-min", "round5-fits", PH, "top = max(x for x in (spec_tbs, copy_tbs) if x)",
           "top = min(x for x in (spec_tbs, copy_tbs) if x)", _fits("holds_the_measured_copy"),
           "plausible upper end from the smaller of spec and copy bandwidth"),
    Mutant("tie-mean-spread", "round5-fits", PH, "spread = float(np.exp(np.max(np.abs(y - (slope * x + icpt)))))",
           "spread = float(np.exp(np.mean(np.abs(y - (slope * x + icpt)))))", _fits("unties"),
           "bytes 'tied' to FLOPs by the mean, not the largest, departure from the power law"),
    Mutant("progress-chunk-start", "round5-fits", PA, "                progress(b, len(items))\n        return out",
           "                progress(a, len(items))\n        return out", _fits("progress"),
           "progress of one process reports each chunk's start, never the total"),
    Mutant("placeholder-uuid-usable", "round5-fits", ID,
           'if not re.fullmatch(r"[0-9a-f]{32}", digits) or digits in PLACEHOLDER_UUIDS:',
           'if not re.fullmatch(r"[0-9a-f]{32}", digits):', _ident("placeholder"),
           "a placeholder uuid (GPU-XX, zeros) is an identity"),
    Mutant("uuid-not-normalised", "round5-fits", ID, "    return text\n", "    return value.strip()\n",
           _ident("spelling"), "a uuid kept as printed (case, GPU- prefix): one GPU's two spellings are two GPUs"),
    Mutant("uuid-gpu-prefix", "round5-fits", ID, USABLE, 'text = value.strip().lower().removeprefix("GPU-")',
           _ident("spelling"), "a GPU- prefixed uuid never usable (an upper-case prefix removed after lower-casing)"),
    Mutant("pci-bus-decimal", "round5-fits", ID, "{bus:02x}:", "{bus:02d}:", _ident("pci_bus_id"),
           "PCI bus id written in decimal, not hex"),
    Mutant("pci-device-for-bus", "round5-fits", ID, 'bus = _int(props.get("pci_bus_id"))',
           'bus = _int(props.get("pci_device_id"))', _ident("pci_bus_id"), "the PCI bus read from pci_device_id"),
    Mutant("sm-arch-minor-dropped", "round5-fits", ID, 'arch = f"sm_{major}{minor}"', 'arch = f"sm_{major}0"',
           _ident("nvidia_architecture"), "an NVIDIA architecture without its minor version (sm_86 read as sm_80)"),
    Mutant("one-device-name-only", "round5-fits", ID, 'for key in ("name", "uuid"):', 'for key in ("name",):',
           _ident("names_two_gpus"), "a log of two GPUs of one model (two uuids) taken for one device"),
    Mutant("short-uuid-fixed-8", "round5-fits", GR, "        out[u] = d[:n]\n", "        out[u] = d[:SHORT_UUID]\n",
           _ident("differ_in_uuid"), "default labels keep 8 uuid digits even where two GPUs share them"),
    Mutant("one-gpu-none-uuid", "round5-fits", GR,
           "return len(parts) > 1 and len(uuids) == 1 and None not in uuids",
           "return len(parts) > 1 and len(uuids) == 1", _ident("without_a_uuid"),
           "sources without a uuid merged as one GPU"),
    Mutant("contradict-name-ignored", "round5-fits", GR,
           'return dev.name if key == "name" else getattr(dev.identity, key)',
           "return getattr(dev.identity, key, None)",
           _ident("describe_differently"), "one uuid with two names in two sources accepted"),
    # -- round5-verdicts: issue #38 part 2, designed from the code and docs of verdicts/, fleet/ and refine/
    #    before reading their tests; pairing of unmatched shapes, inherited leads, crossover intervals, the
    #    run-to-run evidence model, the fleet flag and gate, refine's regions --
    Mutant("pair-reach-wide", "round5-verdicts", MA, "MAX_REACH = 3.5", "MAX_REACH = 12.0", _verd("hidden_shapes"),
           "an unmatched shape predicted from the other side's shapes up to 12 octaves away (tolerance widened)"),
    Mutant("pair-off-span", "round5-verdicts", MA, "if float(np.sqrt(off @ off)) > SPAN_TOL:",
           "if float(np.sqrt(off @ off)) > 1.0:", _verd("square_shapes"),
           "a shape up to an octave off the neighbours' span (a skinny one against square ones) predicted"),
    Mutant("pair-sign-flipped", "round5-verdicts", MA,
           'va, vb = (own, fit.values) if measured == "a" else (fit.values, own)',
           'va, vb = (fit.values, own) if measured == "a" else (own, fit.values)', _verd("square_shapes"),
           "a model-based point's log ratio has the wrong sign (prediction on the measured side)"),
    Mutant("pair-matched-twice", "round5-verdicts", MA, "only_b = sorted(set(cb.shapes) - set(both))",
           "only_b = sorted(set(cb.shapes))", R5_VERD,
           "a shape both sides measured also enters as b's model-based point (one shape paired twice)"),
    Mutant("pair-shared-independent", "round5-verdicts", RT, "coef[side, name] = coef.get((side, name), 0.0) + c",
           "coef[side, name] = math.hypot(coef.get((side, name), 0.0), c)", _verd("cover_the_truth"),
           "a neighbour shared by many predictions counted as independent uses (its covariance dropped)"),
    Mutant("pair-df-overlap-ignored", "round5-verdicts", RT,
           "return float(np.clip(total * distinct / max(uses, 1), np.min(terms.df[idx]), 1000.0))",
           "return float(np.clip(total, np.min(terms.df[idx]), 1000.0))", R5_VERD,
           "the df of overlapping local fits summed as if they shared no shape",
           "the overlap-corrected df is >= 31 in every model-decided band of the SYNTHETIC aspect sides (median "
           "60-114): the t quantile moves by <= 3%, no false-lead or coverage rate a test can resolve"),
    Mutant("pair-no-excess-scatter", "round5-verdicts", RT,
           "parts = [(v_model, _pooled_df(idx[model], terms)), (tau2 / n, max(n - 1.0, 1.0))]",
           "parts = [(v_model, _pooled_df(idx[model], terms))]", R5_VERD,
           "model-based bands ignore the true ratio's scatter across shapes beyond the model",
           "the model's variance of a band mean (shared neighbours) dwarfs it: the scatter term is a median 2% "
           "(at most 16-55%) of it on the SYNTHETIC aspect sides, and no false-lead or coverage rate moved"),
    Mutant("pair-runs-no-own-deviation", "round5-verdicts", MA, "return self.sigma2 * (1.0 + self.leverage)",
           "return self.sigma2 * self.leverage", _verd("own_interval"),
           "runs: a model-based point's variance without its shape's own deviation from the surface"),
    Mutant("claim-over-called-bands", "round5-verdicts", B,
           "return within and 0 in inside and all(x == 0 or (st == SAME and x == SAME) for x in inside)",
           "return within and 0 in inside", _verd("called_alone"),
           "a run's lead passes to its uncalled bands even when a band of it is called (another way) alone"),
    Mutant("via-beyond-run", "round5-verdicts", B, "for r in runs if r.first <= k <= r.last),",
           "for r in runs if r.first - 1 <= k <= r.last + 1),", _verd("own_bands"),
           "a band next to a run called taken together inherits the run's lead"),
    Mutant("fieller-90", "round5-verdicts", BS, "tq = float(student_t.ppf(1 - alpha / 2, n - 2))",
           "tq = float(student_t.ppf(1 - alpha, n - 2))", _verd("crossing_at_its_level"),
           "crossover intervals (Fieller) at 90% instead of 95%"),
    Mutant("crossing-check-own-alpha", "round5-verdicts", BS,
           "math.log(hi), max(alpha, CHECK_ALPHA),", "math.log(hi), alpha,", _verd("stricter_look"),
           "a stricter look checks the crossing at its own level (its interval can narrow)"),
    Mutant("cov-b-with-a-rho", "round5-verdicts", E,
           "return np.outer(sa, sa) * rho_a[lag] + np.outer(sb, sb) * rho_b[lag]",
           "return np.outer(sa, sa) * rho_a[lag] + np.outer(sb, sb) * rho_a[lag]", _verd("drift"),
           "runs: b's drift within passes read with a's autocorrelation"),
    Mutant("pool-df-no-correlation", "round5-verdicts", E,
           "shared = np.minimum(df[:, None], df[None, :]) * rho[lag] ** 2",
           "shared = np.minimum(df[:, None], df[None, :]) * (lag == 0)", _verd("drift"),
           "runs: pooled variance df as if neighbouring shapes' deviations were independent"),
    Mutant("autocorr-no-bias-fix", "round5-verdicts", E, "    for _ in range(3):\n", "    for _ in range(0):\n",
           _verd("drift"), "runs: the autocorrelation's downward bias (pass offsets removed) not added back"),
    Mutant("gate-ignores-runs", "round5-verdicts", FG, GATE_SLOWER, "if any(c.verdict < 0 for c in cells):",
           _fleet("run_of_flop"), "the gate (--fail-on slower) ignores a device slower over a run of FLOP counts"),
    Mutant("flag-ignores-runs", "round5-verdicts", FV, "return bool(self.slow_runs or self.slow_bands)",
           "return bool(self.slow_bands)", _fleet("run_of_flop"),
           "the fleet view flags only slower bands, never a slow run of FLOP counts"),
    Mutant("fleet-same-no-holm", "round5-verdicts", FC, "adj, adj_same = holm(p), holm(same_p(est, se, dof, delta))",
           "adj, adj_same = holm(p), same_p(est, se, dof, delta)", _fleet("family_wise"),
           "the fleet's 'same' family without Holm over devices x bands"),
    Mutant("fleet-same-no-interval", "round5-verdicts", FC, "np.abs(est) + half < delta", "np.abs(est) < delta",
           _fleet("interval_inside"), "a fleet cell 'the same' without its interval inside the margin"),
    Mutant("fleet-median-se-as-mean", "round5-verdicts", FC, "np.where(count >= 3, MEDIAN_SE, 1.0)",
           "np.where(count >= 3, 1.0, 1.0)", _fleet("calibrated"),
           "runs: a median over the shapes of one FLOP count given a mean's standard error"),
    Mutant("fleet-runs-no-margin", "round5-verdicts", FC, FLEET_RUNS_P,
           FLEET_RUNS_P.replace("log_margin(margin)", "0.0"), _fleet("not_flagged"),
           "runs of FLOP counts tested without the margin (1% slower flagged)"),
    Mutant("fleet-runs-no-min-run", "round5-verdicts", FC,
           "kept = apply_min_run(verdict[d, cols], min_run, levels[cols])", "kept = verdict[d, cols]",
           _fleet("not_flagged"), "a single slow FLOP count is a run (min_run ignored)"),
    Mutant("lean-band-ratio", "round5-verdicts", RG,
           "lean = np.array([int(np.sign(math.log(p.ratio))) if p.p_value < LEAN_P",
           "lean = np.array([int(np.sign(math.log(p.trend_ratio))) if p.p_value < LEAN_P", _refine("leans_the_way"),
           "a point leans by its band's ratio, not its own"),
    Mutant("lean-model-points", "round5-verdicts", RG, "measured = [p for p in points if not p.interpolated]",
           "measured = list(points)", _refine("both_sides"), "placement leans on model-based points too"),
    Mutant("trend-in-same-bands", "round5-verdicts", RG,
           "for band in (b for b in c.bands if b.verdict == 0 and not b.same):",
           "for band in (b for b in c.bands if b.verdict == 0):", _refine("opens_no_region"),
           "a band settled as 'the same within the margin' searched for a trend crossing"),
    Mutant("candidate-overlap-contained", "round5-verdicts", RG, "if any(a < hi and lo < b for a, b in called):",
           "if any(a < lo and hi < b for a, b in called):", _refine("never_overlaps"),
           "a leaning sign change that overlaps a called crossover's interval reported as a second region"),
) + tuple(Mutant(i, "round6", path, old, new, tests, what) for i, path, old, new, tests, what in ROUND6)


def _copy_tree(dest: Path) -> None:
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*SKIP), dirs_exist_ok=True)


def run_one(m: Mutant, tree: Path, timeout: float) -> tuple[str, float, str]:
    """(outcome, seconds, the failing test or note) of one mutant in ``tree``; the file is restored after."""
    path = tree / m.path
    text = path.read_text()
    if text.count(m.old) != 1:
        return "stale", 0.0, f"line found {text.count(m.old)} times"
    path.write_text(text.replace(m.old, m.new))
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    try:
        for selection in m.tests:
            left = timeout - (time.monotonic() - start)
            outcome, why = _pytest(selection, tree, env, left)
            if outcome == "killed":
                return outcome, time.monotonic() - start, why
    finally:
        path.write_text(text)
    return "survived", time.monotonic() - start, ""


def _pytest(selection: tuple[str, ...], tree: Path, env: dict[str, str], timeout: float) -> tuple[str, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *selection]
    try:
        res = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired:
        return "killed", "timeout"
    if res.returncode == 0:
        return "survived", ""
    if res.returncode in (4, 5):  # a usage error or a selection that matches no test: the list needs an update
        raise SystemExit(f"selection {' '.join(selection)} is broken (pytest exit {res.returncode}): "
                         f"{res.stdout[-300:]}")
    failed = [ln.split(" ", 1)[1].split(" - ")[0] for ln in res.stdout.splitlines()
              if ln.startswith(("FAILED ", "ERROR "))]
    return "killed", (failed[0] if failed else f"pytest exit {res.returncode}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="run only these mutant ids")
    parser.add_argument("--group", nargs="*", default=None, choices=GROUPS, help="run only the mutants of these sets")
    parser.add_argument("--under", nargs="*", default=None, metavar="PATH",
                        help="run only the mutants of files under these paths (e.g. mfu_sweep/analysis/fits)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant (default 600)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--without", nargs="*", default=(), metavar="TEST_FILE",
                        help="leave out the selections of these test files (e.g. a group's property tests, to see "
                             "what the package's own tests catch)")
    args = parser.parse_args()
    chosen = [replace(m, tests=tuple(s for s in m.tests if s[0] not in args.without)) for m in MUTANTS
              if (args.only is None or m.id in args.only)
              and (args.group is None or m.group in args.group)
              and (args.under is None or any(m.path.startswith(u.rstrip("/") + "/") for u in args.under))]
    if args.list or not chosen:
        for m in chosen if args.list and chosen else MUTANTS:
            print(f"{m.id:30} {m.group:6} {m.path}: {m.what}")
        return
    rows, stale = [], 0
    with tempfile.TemporaryDirectory(prefix="mfu-mutants-") as tmp:
        tree = Path(tmp) / "tree"
        _copy_tree(tree)
        for i, m in enumerate(chosen, 1):
            outcome, took, why = run_one(m, tree, args.timeout)
            stale += outcome == "stale"
            print(f"[{i}/{len(chosen)}] {m.id}: {outcome} ({took:.0f} s) {why}", file=sys.stderr, flush=True)
            rows.append((m, outcome, took, why))
    print("| mutant | set | file | slip | outcome | caught by |")
    print("|---|---|---|---|---|---|")
    for m, outcome, _took, why in rows:
        note = f" (argued equivalent: {m.equivalent})" if m.equivalent and outcome == "survived" else ""
        print(f"| `{m.id}` | {m.group} | {Path(m.path).name} | {m.what} | {outcome}{note} | {why or '-'} |")
    for group in GROUPS:
        mine = [r for r in rows if r[0].group == group]
        if not mine:
            continue
        alive = [r[0].id for r in mine if r[1] == "survived" and not r[0].equivalent]
        print(f"\n{group}: {len(mine)} mutants, {sum(r[1] == 'killed' for r in mine)} killed, "
              f"{len(alive)} survived{(': ' + ', '.join(alive)) if alive else ''}")
    if stale:
        raise SystemExit(f"{stale} mutant(s) no longer match the source: update benchmarks/mutants.py")


if __name__ == "__main__":
    main()
