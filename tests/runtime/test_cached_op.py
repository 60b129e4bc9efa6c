"""``mx.nd.CachedOp`` (``runtime/cached_op.py``) and the tape's freed graphs, against
torch and mxnet 1.9.1's documented behaviour (its ``test_ndarray.py::test_cached``)."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError


def _conv_plus_two():
    return mx.sym.Convolution(kernel=(3, 3), num_filter=4, name="conv") + 2


def _torch_conv_plus_two(x, w, b):
    return torch.nn.functional.conv2d(x, w, b) + 2


def _arrays(rng, n=2, c=3):
    return [mx.nd.array(rng.normal(size=s)) for s in ((n, c, 6, 6), (4, c, 3, 3), (4,))]


def test_calls_run_the_symbol_and_follow_changed_inputs(cpu_target):
    op = mx.nd.CachedOp(_conv_plus_two())
    rng = np.random.RandomState(0)
    x, w, b = _arrays(rng)
    o1 = op(x, w, b)
    want = _torch_conv_plus_two(*(torch.tensor(a.asnumpy()) for a in (x, w, b)))
    np.testing.assert_allclose(o1.asnumpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    b[:] = b + 1
    o2 = op(x, w, b)
    np.testing.assert_allclose(o2.asnumpy(), o1.asnumpy() + 1, rtol=1e-5, atol=1e-5)
    o2[:] = 0
    assert op(x, w, b, out=o2) is o2
    np.testing.assert_allclose(o2.asnumpy(), o1.asnumpy() + 1, rtol=1e-5, atol=1e-5)
    # another shape binds again
    x5, w5, b5 = _arrays(rng, n=5, c=2)
    want5 = _torch_conv_plus_two(*(torch.tensor(a.asnumpy()) for a in (x5, w5, b5)))
    np.testing.assert_allclose(op(x5, w5, b5).asnumpy(), want5.numpy(), rtol=1e-5, atol=1e-5)


def test_several_outputs_come_back_as_a_list():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    op = mx.nd.CachedOp(mx.sym.Group([a + b, a * b]))
    s, p = op(mx.nd.array([1.0, 2.0]), mx.nd.array([3.0, 4.0]))
    np.testing.assert_array_equal(s.asnumpy(), [4, 6])
    np.testing.assert_array_equal(p.asnumpy(), [3, 8])
    with pytest.raises(MXNetError, match=r"takes 2 inputs \['a', 'b'\], got 1"):
        op(mx.nd.ones((2,)))


def test_gradients_through_a_call_match_torch(cpu_target):
    op = mx.nd.CachedOp(_conv_plus_two())
    rng = np.random.RandomState(1)
    x, w, b = _arrays(rng)
    for a in (x, w, b):
        a.attach_grad()
    head = rng.normal(size=(2, 4, 4, 4))
    with mx.autograd.record():
        y = op(x, w, mx.nd.square(b)) * 3
    y.backward(mx.nd.array(head))
    xt, wt, bt = (torch.tensor(a.asnumpy(), requires_grad=True) for a in (x, w, b))
    yt = _torch_conv_plus_two(xt, wt, bt * bt) * 3
    gx, gw, gb = torch.autograd.grad(yt, [xt, wt, bt], torch.tensor(head, dtype=torch.float32))
    for got, want in ((x.grad, gx), (w.grad, gw), (b.grad, gb)):
        np.testing.assert_allclose(got.asnumpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_dropout_gradient_uses_the_mask_the_call_drew():
    op = mx.nd.CachedOp(mx.sym.Dropout(mx.sym.var("x"), p=0.5))
    x = mx.nd.ones((6, 7))
    x.attach_grad()
    with mx.autograd.record():
        y = op(x)
    y.backward()
    kept = y.asnumpy() != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_array_equal(x.grad.asnumpy(), np.where(kept, 2.0, 0.0))


def test_training_calls_update_the_callers_moving_statistics():
    sym = mx.sym.BatchNorm(mx.sym.var("data"), name="bn", momentum=0.5)
    op = mx.nd.CachedOp(sym)
    assert sym.list_inputs() == ["data", "bn_gamma", "bn_beta", "bn_moving_mean",
                                 "bn_moving_var"]
    data = mx.nd.array(np.arange(12.0).reshape(4, 3))
    mean, var = mx.nd.zeros((3,)), mx.nd.ones((3,))
    with mx.autograd.train_mode():
        op(data, mx.nd.ones((3,)), mx.nd.zeros((3,)), mean, var)
    batch_mean = np.arange(12.0).reshape(4, 3).mean(axis=0)
    np.testing.assert_allclose(mean.asnumpy(), 0.5 * batch_mean, rtol=1e-6)
    op(data, mx.nd.ones((3,)), mx.nd.zeros((3,)), mean, var)     # predict mode: no update
    np.testing.assert_allclose(mean.asnumpy(), 0.5 * batch_mean, rtol=1e-6)


def test_a_freed_graph_is_a_constant_to_later_records_and_an_error_to_earlier_ones():
    x = mx.nd.ones((2,))
    x.attach_grad()
    with mx.autograd.record():
        y = x * 2
        z1 = y + 1
        z2 = y * 3
    z1.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2, 2])
    # z2 was recorded before the backward freed y's entry: mxnet refuses it too
    with pytest.raises(MXNetError, match="freed by an earlier backward"):
        z2.backward()
    with pytest.raises(MXNetError, match="freed by an earlier backward"):
        z1.backward()
    # recorded after it: z1 is a constant there (mxnet's test_cached relies on it)
    with mx.autograd.record():
        w = z1 * x
    w.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [3, 3])
