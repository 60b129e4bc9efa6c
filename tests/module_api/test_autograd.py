"""``mx.autograd``: gradients of ``mx.nd`` code under ``record()`` equal the symbolic
executor's for the same graph, on both cpu targets; Dropout's modes as mxnet's."""
import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError


def _mlp(F, x, w1, b1, w2, b2, w3, b3):
    """A 3-layer perceptron written once for ``mx.nd`` and ``mx.sym``."""
    h = F.Activation(F.FullyConnected(x, w1, b1, num_hidden=6), act_type="relu")
    h = F.Activation(F.FullyConnected(h, w2, b2, num_hidden=5), act_type="tanh")
    return F.FullyConnected(h, w3, b3, num_hidden=3)


def _lstm_step(F, x, h, c, wx, wh, b):
    """One LSTM step: gates from two FullyConnected, split four ways."""
    gates = F.FullyConnected(x, wx, b, num_hidden=8) + \
        F.FullyConnected(h, wh, no_bias=True, num_hidden=8)
    i, f, g, o = F.split(gates, num_outputs=4, axis=1)
    c_new = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h_new = F.sigmoid(o) * F.tanh(c_new)
    return [h_new, c_new]


def _compare_with_executor(fn, shapes, head_shapes, seed):
    rng = np.random.RandomState(seed)
    names = list(shapes)
    values = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in shapes.items()}
    ograds = [rng.uniform(-1, 1, s).astype(np.float32) for s in head_shapes]
    # imperative, under record
    arrays = {n: mx.nd.array(v) for n, v in values.items()}
    for a in arrays.values():
        a.attach_grad()
    with mx.autograd.record():
        heads = fn(mx.nd, *[arrays[n] for n in names])
    heads = heads if isinstance(heads, list) else [heads]
    mx.autograd.backward(heads, [mx.nd.array(g) for g in ograds])
    # symbolic, the same graph bound by an executor
    out = fn(mx.sym, *[mx.sym.var(n) for n in names])
    sym = mx.sym.Group(out) if isinstance(out, list) else out
    exe = sym.bind(mx.cpu(), {n: mx.nd.array(v) for n, v in values.items()},
                   args_grad={n: mx.nd.zeros(s) for n, s in shapes.items()})
    outs = exe.forward(is_train=True)
    exe.backward([mx.nd.array(g) for g in ograds])
    for h, o in zip(heads, outs):
        np.testing.assert_allclose(h.asnumpy(), o.asnumpy(), rtol=1e-5, atol=1e-6)
    for n in names:
        np.testing.assert_allclose(arrays[n].grad.asnumpy(), exe.grad_dict[n].asnumpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=n)


def test_mlp_gradients_match_the_executor(cpu_target):
    shapes = {"x": (4, 7), "w1": (6, 7), "b1": (6,), "w2": (5, 6), "b2": (5,),
              "w3": (3, 5), "b3": (3,)}
    _compare_with_executor(_mlp, shapes, [(4, 3)], seed=0)


def test_lstm_step_gradients_match_the_executor(cpu_target):
    shapes = {"x": (3, 4), "h": (3, 2), "c": (3, 2), "wx": (8, 4), "wh": (8, 2), "b": (8,)}
    _compare_with_executor(_lstm_step, shapes, [(3, 2), (3, 2)], seed=1)


def test_dropout_train_and_predict_modes(cpu_target):
    x = mx.nd.ones((10, 10))
    x.attach_grad()
    with mx.autograd.record():            # train mode: a mask scaled by 1 / (1 - p)
        assert mx.autograd.is_recording() and mx.autograd.is_training()
        y = mx.nd.Dropout(x, p=0.5)
        assert set(np.unique(y.asnumpy())) == {0.0, 2.0}
        y.backward()
        np.testing.assert_array_equal(x.grad.asnumpy(), y.asnumpy())   # the same mask
        with mx.autograd.predict_mode():   # the identity, and its gradient
            assert mx.autograd.is_recording() and not mx.autograd.is_training()
            y = mx.nd.Dropout(x, p=0.5)
            np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
            y.backward(train_mode=False)
            np.testing.assert_array_equal(x.grad.asnumpy(), x.asnumpy())
        with mx.autograd.pause():
            assert not mx.autograd.is_recording() and not mx.autograd.is_training()
            np.testing.assert_array_equal(mx.nd.Dropout(x, p=0.5).asnumpy(), x.asnumpy())
    assert not mx.autograd.is_recording() and not mx.autograd.is_training()
    np.testing.assert_array_equal(mx.nd.Dropout(x, p=0.5).asnumpy(), x.asnumpy())
    with mx.autograd.train_mode():         # training without recording
        assert not mx.autograd.is_recording() and mx.autograd.is_training()
        assert set(np.unique(mx.nd.Dropout(x, p=0.5).asnumpy())) == {0.0, 2.0}


def test_two_dropouts_keep_their_own_masks():
    x = mx.nd.ones((6, 8))
    x.attach_grad()
    with mx.autograd.record():
        a = mx.nd.Dropout(x, p=0.5)
        b = mx.nd.Dropout(x, p=0.5)
        loss = a * 3 + b
    loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), a.asnumpy() * 3 + b.asnumpy())
