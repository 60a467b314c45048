"""The run-to-run model under compare's band verdicts (mfu_sweep.analysis.verdicts.evidence), on hand-made values."""

from __future__ import annotations

import numpy as np

from mfu_sweep.analysis.verdicts.evidence import POOL_DF, apply_min_run, choose_method, pooled_run_variance


def test_pooled_run_variance_pools_until_enough_degrees_of_freedom() -> None:
    x = np.log10(np.geomspace(1e6, 1e12, 20))
    var = np.linspace(1.0, 2.0, 20)
    pooled2, df2 = pooled_run_variance(x, var, np.full(20, 2.0))
    assert (df2 >= POOL_DF).all() and (df2 <= POOL_DF + 2).all()
    assert var.min() < pooled2[0] < var.max()
    pooled9, df9 = pooled_run_variance(x, var, np.full(20, 9.0))
    assert np.allclose(pooled9, var) and (df9 == 8).all()
    one, df1 = pooled_run_variance(x, np.full(20, np.nan), np.ones(20))
    assert np.isnan(one).all() and (df1 == 0).all()


def test_min_run_counts_flop_counts() -> None:
    v = np.array([1, 1, 0, -1, 1, 1, 1])
    assert apply_min_run(v, 2).tolist() == [1, 1, 0, 0, 1, 1, 1]
    assert apply_min_run(np.array([1, 1]), 2, [1e9, 1e9]).tolist() == [0, 0]


def test_runs_method_is_chosen_only_with_two_passes_on_both_sides() -> None:
    one, two = np.zeros((1, 12)), np.zeros((2, 12))
    assert choose_method(two, two) == "runs"
    assert choose_method(two, one) == choose_method(one, two) == "shapes"
    two[1, :] = np.nan  # a second pass that measured nothing is no pass
    assert choose_method(two, np.zeros((3, 12))) == "shapes"
