"""mxnet's Python functions of ``mx.nd.contrib`` (imperative ``foreach``, ``while_loop``,
``cond``, ``isinf`` / ``isnan`` / ``isfinite``, ``rand_zipfian``); expected values
printed by mxnet 1.9.1 for the same calls."""
import numpy as np

import module_api as mx


def test_isinf_isnan_isfinite():
    x = mx.nd.array([1, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(mx.nd.contrib.isinf(x).asnumpy(), [0, 1, 1, 0])
    np.testing.assert_array_equal(mx.nd.contrib.isnan(x).asnumpy(), [0, 0, 0, 1])
    np.testing.assert_array_equal(mx.nd.contrib.isfinite(x).asnumpy(), [1, 0, 0, 0])


def test_foreach_stacks_step_outputs_and_carries_states():
    out, states = mx.nd.contrib.foreach(lambda d, s: (d * 2, [s[0] + d]),
                                        mx.nd.arange(6).reshape((3, 2)), [mx.nd.zeros((2,))])
    np.testing.assert_array_equal(out.asnumpy(), [[0, 2], [4, 6], [8, 10]])
    np.testing.assert_array_equal(states[0].asnumpy(), [6, 9])


def test_foreach_over_a_list_with_nested_outputs():
    data = [mx.nd.arange(4).reshape((2, 2)), mx.nd.ones((2, 1))]
    out, _ = mx.nd.contrib.foreach(lambda d, s: ([d[0], [d[1] * 3]], s), data,
                                   [mx.nd.zeros((1,))])
    assert out[0].shape == (2, 2) and out[1][0].shape == (2, 1)
    np.testing.assert_array_equal(out[1][0].asnumpy(), [[3], [3]])


def test_while_loop_pads_to_max_iterations():
    out, (i, s) = mx.nd.contrib.while_loop(
        lambda i, s: i < 3, lambda i, s: (s, [i + 1, s + i]),
        [mx.nd.array([0]), mx.nd.array([1])], max_iterations=5)
    assert out.shape == (5, 1)
    np.testing.assert_array_equal(out.asnumpy()[:3], [[1], [1], [2]])
    assert i.asscalar() == 3 and s.asscalar() == 4


def test_cond_picks_a_branch():
    got = mx.nd.contrib.cond(mx.nd.array([0]), lambda: mx.nd.ones(1), lambda: mx.nd.zeros(1))
    np.testing.assert_array_equal(got.asnumpy(), [0])


def test_rand_zipfian_expected_counts():
    mx.random.seed(2)
    sampled, exp_true, exp_sampled = mx.nd.contrib.rand_zipfian(mx.nd.array([3]), 4, 10)
    assert sampled.shape == (4,) and 0 <= sampled.asnumpy().min() and \
        sampled.asnumpy().max() < 10
    np.testing.assert_allclose(exp_true.asnumpy(), [np.log(5 / 4) / np.log(11) * 4])
    c = sampled.asnumpy().astype(np.float64)
    np.testing.assert_allclose(exp_sampled.asnumpy(), np.log((c + 2) / (c + 1)) / np.log(11) * 4)
