"""``mx.test_utils``'s checks of random generators (``module_api/distribution_checks.py``):
they must pass a right generator and fail a wrong one."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import module_api as mx
from module_api import distribution_checks as dc


def test_exported_by_test_utils():
    for name in dc.__all__:
        assert getattr(mx.test_utils, name) is getattr(dc, name)


def test_buckets_from_a_quantile_function():
    buckets, probs = dc.gen_buckets_probs_with_ppf(lambda p: stats.uniform.ppf(p, 2, 4), 4)
    assert buckets == [(2.0, 3.0), (3.0, 4.0), (4.0, 5.0), (5.0, 6.0)]
    assert probs == [0.25] * 4
    with pytest.raises(ValueError, match="nbuckets must be positive"):
        dc.gen_buckets_probs_with_ppf(lambda p: p, 0)


def test_right_generator_passes_and_a_shifted_one_fails():
    rng = np.random.default_rng(5)
    buckets, probs = dc.gen_buckets_probs_with_ppf(lambda p: stats.norm.ppf(p), 5)
    p_values = dc.verify_generator(lambda n: rng.normal(size=n), buckets, probs,
                                   nsamples=20000, nrepeat=4)
    assert len(p_values) == 4 and np.mean(np.array(p_values) > 0.05) >= 0.5
    with pytest.raises(AssertionError, match="Generator test fails, Chi-square p="):
        dc.verify_generator(lambda n: rng.normal(0.05, 1, size=n), buckets, probs,
                            nsamples=100000, nrepeat=3)


def test_discrete_buckets_and_draws_outside_every_bucket():
    rng = np.random.default_rng(1)
    p, obs, expected = dc.chi_square_check(lambda n: rng.integers(0, 3, size=n), [0, 1, 2],
                                           [1 / 3] * 3, nsamples=30000)
    assert obs.sum() == 30000 and np.allclose(expected, 10000) and p > 1e-4
    # 5% of the draws fall outside the buckets that claim all the mass: caught
    p, obs, _ = dc.chi_square_check(lambda n: rng.integers(0, 20, size=n), list(range(19)),
                                    [1 / 19] * 19, nsamples=20000)
    assert p == 0.0 and obs.sum() < 20000
    # buckets that cover part of the law are tested with the rest as one more cell
    p, obs, _ = dc.chi_square_check(lambda n: rng.integers(0, 4, size=n), [0, 1],
                                    [0.25, 0.25], nsamples=40000)
    assert p > 1e-4 and obs.sum() < 40000


def test_range_buckets_are_closed_below_and_the_last_also_above():
    samples = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    counts = dc._observed_counts(samples, [(0.0, 1.0), (1.0, 2.0)])
    assert counts.tolist() == [2, 3]
    with pytest.raises(ValueError, match="ascending, non-overlapping"):
        dc._observed_counts(samples, [(0.0, 1.5), (1.0, 2.0)])


def test_mean_and_variance_checks():
    rng = np.random.default_rng(2)
    assert dc.mean_check(lambda n: rng.normal(3, 2, size=n), 3, 2, nsamples=100000)
    assert not dc.mean_check(lambda n: rng.normal(3.1, 2, size=n), 3, 2, nsamples=100000)
    assert dc.var_check(lambda n: rng.normal(0, 2, size=n), 2, nsamples=100000)
    assert not dc.var_check(lambda n: rng.normal(0, 2.2, size=n), 2, nsamples=100000)
