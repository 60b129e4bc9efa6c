"""NDArray methods that torch has with another signature run mxnet's operator when a
program calls them (``a.flatten()`` is mxnet's 2-D Flatten, ``a.round()`` rounds half
away from zero, ``a.topk()`` gives float indices ...). Expected values are what mxnet
1.9.1 printed for the same calls."""
import numpy as np
import pytest

import module_api as mx

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
B = np.array([[3, 1, 2], [0, 5, 4]], np.float32)


def _first8(x):
    return x.asnumpy().ravel()[:8].tolist()


@pytest.mark.parametrize("call, shape, head", [
    (lambda a, b: a.transpose(), (4, 3, 2), [0, 12, 4, 16, 8, 20, 1, 13]),
    (lambda a, b: a.transpose(axes=(1, 0, 2)), (3, 2, 4), [0, 1, 2, 3, 12, 13, 14, 15]),
    (lambda a, b: a.transpose((1, 0, 2)), (3, 2, 4), [0, 1, 2, 3, 12, 13, 14, 15]),
    (lambda a, b: a.flatten(), (2, 12), [0, 1, 2, 3, 4, 5, 6, 7]),
    (lambda a, b: b.sort(), (2, 3), [1, 2, 3, 0, 4, 5]),
    (lambda a, b: b.sort(axis=0, is_ascend=False), (2, 3), [3, 5, 4, 0, 1, 2]),
    (lambda a, b: b.topk(), (2, 1), [0, 1]),
    (lambda a, b: b.topk(k=2, ret_typ="value"), (2, 2), [3, 2, 5, 4]),
    (lambda a, b: b.argsort(), (2, 3), [1, 2, 0, 0, 2, 1]),
    (lambda a, b: b.repeat(repeats=2), (12,), [3, 3, 1, 1, 2, 2, 0, 0]),
    (lambda a, b: b.repeat(repeats=2, axis=1), (2, 6), [3, 3, 1, 1, 2, 2, 0, 0]),
    (lambda a, b: b.clip(1, 4), (2, 3), [3, 1, 2, 1, 4, 4]),
    (lambda a, b: b.clip(a_min=1, a_max=4), (2, 3), [3, 1, 2, 1, 4, 4]),
    (lambda a, b: b.flip(axis=1), (2, 3), [2, 1, 3, 4, 5, 0]),
    (lambda a, b: a.swapaxes(0, 2), (4, 3, 2), [0, 12, 4, 16, 8, 20, 1, 13]),
    (lambda a, b: a.swapaxes(dim1=0, dim2=1), (3, 2, 4), [0, 1, 2, 3, 12, 13, 14, 15]),
])
def test_methods_take_mxnets_signature_and_give_its_values(call, shape, head):
    out = call(mx.nd.array(A), mx.nd.array(B))
    assert out.shape == shape
    assert out.dtype == np.float32
    assert _first8(out) == head


def test_round_is_half_away_from_zero_and_squeeze_split_as_mxnet():
    r = mx.nd.array([0.5, 1.5, 2.5, -0.5, -1.5]).round()
    assert r.asnumpy().tolist() == [1, 2, 3, -1, -2]
    c = mx.nd.array(np.arange(6, dtype=np.float32).reshape(1, 6, 1))
    assert c.squeeze().shape == (6,)
    assert c.squeeze(axis=0).shape == (6, 1)
    parts = mx.nd.array(A).split(num_outputs=3, axis=1)
    assert [p.shape for p in parts] == [(2, 1, 4)] * 3
    parts = mx.nd.array(A).split(3, 1, squeeze_axis=True)
    assert [p.shape for p in parts] == [(2, 4)] * 3
    np.testing.assert_array_equal(parts[1].asnumpy(), A[:, 1])


def test_softmax_methods_default_to_the_last_axis():
    x = mx.nd.array(B)
    want = np.exp(B) / np.exp(B).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(x.softmax().asnumpy(), want, rtol=1e-6)
    np.testing.assert_allclose(x.log_softmax().asnumpy(), np.log(want), rtol=1e-5, atol=1e-6)


def test_the_same_call_gives_the_same_shape_recorded_or_not():
    x = mx.nd.array(A)
    x.attach_grad()
    plain = x.flatten()
    with mx.autograd.record():
        recorded = x.flatten()
    assert plain.shape == recorded.shape == (2, 12)
