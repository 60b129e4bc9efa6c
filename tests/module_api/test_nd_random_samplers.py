"""``mx.nd.random``'s gamma / poisson / negative binomial samplers, their ``*_like`` forms,
``multinomial`` and ``shuffle``: mxnet's dispatch (numbers -> ``_random_*``, NDArrays ->
``_sample_*``), shapes, and moments at a fixed seed."""
import numpy as np
import pytest

import module_api as mx


@pytest.mark.parametrize("draw,mean,var", [
    (lambda s: mx.nd.random.gamma(2.0, 3.0, shape=s), 6.0, 18.0),
    (lambda s: mx.nd.random.poisson(4.0, shape=s), 4.0, 4.0),
    (lambda s: mx.nd.random.negative_binomial(3, 0.4, shape=s), 4.5, 11.25),
    (lambda s: mx.nd.random.generalized_negative_binomial(2.0, 0.5, shape=s), 2.0, 4.0),
])
def test_moments(draw, mean, var):
    mx.random.seed(11)
    x = draw((40000,)).asnumpy()
    assert abs(x.mean() - mean) < 4 * np.sqrt(var / x.size)
    assert abs(x.var() - var) / var < 0.08


def test_ndarray_parameters_draw_per_element_and_likes_keep_the_shape():
    mx.random.seed(3)
    lam = mx.nd.array([0.5, 60.0])
    x = mx.nd.random.poisson(lam, shape=(3000,)).asnumpy()
    assert x.shape == (2, 3000)
    np.testing.assert_allclose(x.mean(axis=1), [0.5, 60.0], rtol=0.06)
    like = mx.nd.random.gamma_like(mx.nd.zeros((3, 4)), 2.0, 1.0)
    assert like.shape == (3, 4) and (like.asnumpy() > 0).all()


def test_multinomial_and_shuffle():
    mx.random.seed(5)
    r = mx.nd.random.multinomial(mx.nd.array([[0.1, 0.9], [0.9, 0.1]]), shape=4000).asnumpy()
    np.testing.assert_allclose(r.mean(axis=1), [0.9, 0.1], atol=0.03)
    s = mx.nd.random.shuffle(mx.nd.arange(50).reshape((25, 2))).asnumpy()
    assert sorted(s[:, 0].tolist()) == list(range(0, 50, 2))
    np.testing.assert_array_equal(s[:, 1], s[:, 0] + 1)       # rows move whole


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_randint_reaches_every_integer_of_a_range_far_from_zero(dtype):
    """A float32 draw holds 24 bits: past 2**24 it could give only multiples of 4."""
    a = mx.nd.random.randint(50000000, 50001000, shape=(200000,), dtype=dtype).asnumpy()
    assert a.dtype == np.dtype(dtype) and a.min() >= 50000000 and a.max() < 50001000
    assert len(np.unique(a)) == 1000
    counts = np.bincount(a - 50000000, minlength=1000)
    assert counts.min() > 100 and counts.max() < 310          # mean 200, sd 14


def test_symbolic_randint_past_2_to_the_24_is_not_coarse():
    s = mx.sym.random.randint(0, 2 ** 30, shape=(100000,), dtype="int64")
    out = s.simple_bind(mx.cpu()).forward()[0].asnumpy()
    assert out.min() >= 0 and out.max() < 2 ** 30
    assert (out % 64 != 0).mean() > 0.95          # one draw alone: multiples of 64
    # distinct values as for 100000 uniform draws of 2**30 (about 5 collide)
    assert len(np.unique(out)) > 100000 - 50
    assert abs(np.histogram(out, bins=4, range=(0, 2 ** 30))[0] - 25000).max() < 800


def test_seed_is_taken_modulo_2_to_the_32_as_mxnets_c_int():
    def first():
        return mx.nd.random.uniform(shape=(4,)).asnumpy()

    mx.random.seed(-1)
    a = first()
    mx.random.seed(2 ** 32 - 1)
    assert (a == first()).all()
    mx.random.seed(-(1 << 31))
    b = first()
    assert not (a == b).all()
    with pytest.raises(ValueError, match="seed_state must be int"):
        mx.random.seed(1.5)
