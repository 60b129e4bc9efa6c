"""``mx.nd.contrib``'s AdamW wrappers (single and multi-weight) against the update
mxnet 1.9.1 documents, and ``mx.engine``'s bulk-size controls."""
import math

import numpy as np
import pytest

import module_api as mx


def _adamw_reference(w, g, m, v, scale, lr, eta, wd, beta1=0.9, beta2=0.999, eps=1e-8,
                     clip=-1.0):
    g = g * scale
    if clip >= 0:
        g = np.clip(g, -clip, clip)
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return w - eta * (lr * m / (np.sqrt(v) + eps) + wd * w), m, v


def _state(rng, shape):
    return [rng.uniform(0.1, 1.0, shape).astype(np.float32) for _ in range(4)]


def test_multi_adamw_update_is_each_weights_own_update():
    rng = np.random.RandomState(0)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    states = [_state(rng, s) for s in shapes]
    lrs, wds, etas = [0.1, 0.2, 0.05], [0.01, 0.0, 0.1], [1.0, 0.5, 2.0]
    w, g, m, v = ([mx.nd.array(st[k]) for st in states] for k in range(4))
    got = mx.nd.contrib.multi_adamw_update(w, g, m, v, 2.0, lrs=lrs, wds=wds, etas=etas,
                                           out=w, clip_gradient=1.5)
    assert [o is x for o, x in zip(got, w)] == [True] * 3
    for i, st in enumerate(states):
        want_w, want_m, want_v = _adamw_reference(*st, 2.0, lrs[i], etas[i], wds[i],
                                                  clip=1.5)
        np.testing.assert_allclose(w[i].asnumpy(), want_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m[i].asnumpy(), want_m, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(v[i].asnumpy(), want_v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", [math.nan, math.inf])
def test_a_non_finite_rescale_skips_every_update(scale):
    rng = np.random.RandomState(1)
    w32, g32, m32, v32 = _state(rng, (4, 3))
    w, m, v = mx.nd.array(w32), mx.nd.array(m32), mx.nd.array(v32)
    w16, g16 = w.astype("float16"), mx.nd.array(g32).astype("float16")
    mx.nd.contrib.multi_mp_adamw_update([w16], [g16], [m], [v], [w], mx.nd.array([scale]),
                                        lrs=[0.1], wds=[0.1], etas=[1.0], out=[w16])
    np.testing.assert_array_equal(w.asnumpy(), w32)
    np.testing.assert_array_equal(w16.asnumpy(), w32.astype(np.float16))
    with pytest.raises(ValueError, match="2 weights need as many"):
        mx.nd.contrib.multi_adamw_update([w, w], [w], [m, m], [v, v], 1.0, lrs=[1, 1],
                                         wds=[0, 0], etas=[1, 1])


def test_mp_adamw_update_writes_the_float32_copy_and_the_float16_weight():
    rng = np.random.RandomState(2)
    w32, g32, m32, v32 = _state(rng, (6,))
    w, m, v = mx.nd.array(w32), mx.nd.array(m32), mx.nd.array(v32)
    w16, g16 = w.astype("float16"), mx.nd.array(g32).astype("float16")
    mx.nd.contrib.mp_adamw_update(w16, g16, m, v, w, 1.0, lr=0.1, eta=1.0, wd=0.01, out=w16)
    want, _, _ = _adamw_reference(w32, g16.asnumpy().astype(np.float32), m32, v32, 1.0,
                                  0.1, 1.0, 0.01)
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w16.asnumpy(), want.astype(np.float16), rtol=1e-3)


def test_engine_bulk_size_is_kept_and_restored():
    prev = mx.engine.set_bulk_size(30)
    try:
        with mx.engine.bulk(10):
            assert mx.engine.set_bulk_size(10) == 10
            x = mx.nd.ones((4,))
            x += 1
        assert mx.engine.set_bulk_size(30) == 30
        assert (x.asnumpy() == 2).all()
    finally:
        mx.engine.set_bulk_size(prev)


def test_is_aarch64_run_reads_the_machine():
    import platform
    assert mx.test_utils.is_aarch64_run() == (platform.machine() == "aarch64")
