"""The ``round6`` set of ``make mutants`` (benchmarks/mutants.py): one-line slips of the kinds issue 52 found
surviving, written from the code (not from the held-out list), each run first against the property or oracle test
written for it, then against the tests of its own package.

The kinds: the local model's span at the upper end of a coordinate; the calibrated band test's two p-values; the
between-shape variance's moment estimator; the fleet noise's degrees of freedom, one-sided p-values read as
two-sided, a predicted value's standard error; the steps bootstrap's degrees of freedom and spread over R passes;
the repeat check's key without a grouped GEMM's groups; tritonbench's mode in a multi-operator file; the
block-scaled formats' rule on K; and two slips of the oracles' statistics (the signed-rank test's continuity
correction, the median interval's tail).

Each row is (id, path, old, new, tests, what): tests are pytest selections, the first expected to kill.
"""

from __future__ import annotations

MA = "mfu_sweep/analysis/verdicts/matching.py"
RT = "mfu_sweep/analysis/verdicts/run_test.py"
BT = "mfu_sweep/analysis/verdicts/band_tests.py"
FE, FC = "mfu_sweep/analysis/fleet/evidence.py", "mfu_sweep/analysis/fleet/cells.py"
SD = "mfu_sweep/analysis/steps/draws.py"
CK, TB, LY, ST = ("mfu_sweep/records/checks.py", "mfu_sweep/importers/tritonbench.py", "mfu_sweep/measure/layouts.py",
                  "mfu_sweep/util/stats.py")
PE, PS, PIN, OR = ("tests/test_properties_evidence.py", "tests/test_properties_steps.py",
                   "tests/test_properties_inputs.py", "tests/test_oracles.py")

# the tests of each package (what the audit ran the slips against), after the test written for the slip
VERDICTS = (("tests/test_compare_unmatched.py",), ("tests/test_bands.py",), ("tests/test_run_side.py",),
            ("tests/test_properties_verdicts.py",), ("tests/test_compare.py", "-k", "not golden"))
FLEET = (("tests/test_fleet_gate.py",), ("tests/test_leaderboard.py",), ("tests/test_compare_fleet.py",),
         ("tests/test_properties_fleet.py",), ("tests/test_calibration.py", "-k", "fleet or band"))
STEPS = (("tests/test_steps.py",),)
CHECKS = (("tests/test_results.py",), ("tests/test_hostile_inputs.py",))
TRITON = (("tests/test_tritonbench.py",),)
LAYOUTS = (("tests/test_layouts.py",), ("tests/test_scaled.py",))
STATS = (("tests/test_timing.py",), ("tests/test_long_samples.py",))

SE_LINE = "se[j] = math.sqrt(fit.point_var + spread)"
LEAD_P = "return np.minimum(1.0, 2 * t_sf((np.abs(est) - delta) / se, dof))"

ROWS = (
    ("hull-upper-unchecked", MA, "if ((target < lo - 1e-9) | (target > hi + 1e-9)).any():",
     "if (target < lo - 1e-9).any():", ((PE, "-k", "span"), *VERDICTS),
     "the local model predicts above its neighbours' span in a coordinate (only the lower end checked)"),
    ("calibrated-either-p", RT, "return (max(p_rank, p_mean) if agree else 1.0), sign_rank",
     "return (min(p_rank, p_mean) if agree else 1.0), sign_rank", ((PE, "-k", "calibrated"), *VERDICTS),
     "a calibrated band test takes the smaller of the signed-rank and calibrated t p-values, not both"),
    ("dl-denominator-term", BT, "c = sw - (w**2).sum(-1) / sw", "c = sw",
     ((OR, "-k", "random_effects"), *VERDICTS),
     "DerSimonian-Laird's tau^2 without sum w^2 / sum w in its denominator"),
    ("fleet-dof-no-band-means", FE, "dof = np.sum(np.where(counts > 1, counts - 1, 0), axis=1).astype(float)",
     "dof = np.sum(np.where(counts > 1, counts, 0), axis=1).astype(float)", ((PE, "-k", "liberal"), *FLEET),
     "the fleet noise's df counts the shapes, not shapes minus the FLOP bands' means"),
    ("fleet-shape-p-one-sided", FE, "return 2 * t_sf(np.abs(est) / se, dof)",
     "return t_sf(np.abs(est) / se, dof)", ((PE, "-k", "liberal"), *FLEET),
     "a shape's one-sided p-value reported as two-sided"),
    ("fleet-lead-p-one-sided", FC, LEAD_P, LEAD_P.replace("2 * t_sf", "t_sf"),
     ((PE, "-k", "liberal"), *FLEET), "a fleet cell's one-sided p-value beyond the margin read as two-sided"),
    ("fleet-pred-se-no-estimate", FE, SE_LINE, "se[j] = math.sqrt(fit.sigma2 + spread)",
     ((PE, "-k", "predicted"), *FLEET), "a predicted value's standard error without the estimate's variance"),
    ("fleet-pred-se-medians-only", FE, SE_LINE, "se[j] = math.sqrt(spread)", ((PE, "-k", "predicted"), *FLEET),
     "a predicted value's standard error from the neighbours' medians alone (no model variance)"),
    ("steps-df-r", SD, "df = max(1, repeats.get(run, 2) - 1)", "df = max(1, repeats.get(run, 2))",
     ((PS,), *STEPS), "the steps bootstrap's t with R degrees of freedom, not R - 1"),
    ("steps-spread-over-r", SD, "dev = weights @ (values - mean) / math.sqrt(len(values) * (len(values) - 1))",
     "dev = weights @ (values - mean) / len(values)", ((PS, "-k", "t_interval"), *STEPS),
     "the steps bootstrap's spread divided by R, not sqrt(R (R - 1))"),
    ("repeat-key-no-groups", CK,
     "return tuple(sorted((key, tuple(v) if isinstance(v, list) else v) for key, v in shape.items()))",
     "return tuple(sorted((key, v) for key, v in shape.items() if not isinstance(v, list)))",
     ((PIN, "-k", "splits"), *CHECKS), "the repeat check keys a shape without a grouped GEMM's group list"),
    ("tritonbench-mode-of-key", TB, 'mode="compile" if backend.split(".")[-1].startswith("pt2_") else "eager",',
     'mode="compile" if backend.startswith("pt2_") else "eager",', ((PIN, "-k", "tritonbench"), *TRITON),
     "tritonbench's mode read off the source key (op.backend in a multi-operator file), not the backend"),
    ("block-rule-on-n", LY, "if dtype.block and shape.k % dtype.block:", "if dtype.block and shape.n % dtype.block:",
     ((PIN, "-k", "block"), *LAYOUTS), "a block-scaled format's divisibility checked on N instead of K"),
    ("signed-rank-no-correction", BT, "z = np.maximum(np.abs(stat) - 1.0, 0.0) / np.sqrt(var)",
     "z = np.abs(stat) / np.sqrt(var)", ((OR, "-k", "asymptotic"), *VERDICTS),
     "the normal signed-rank test without its continuity correction"),
    ("median-ci-tail-doubled", ST, "tail = (1.0 - confidence) / 2", "tail = 1.0 - confidence",
     ((OR, "-k", "median_interval"), *STATS), "the median's interval from a one-sided tail (90% called 95%)"),
)
