"""``mx.contrib.autograd`` (mxnet's first autograd interface) and NDArray's
``_fresh_grad`` state, against mxnet 1.9.1's documented behaviour."""
import numpy as np
import pytest

import module_api as mx
from module_api.contrib import autograd as cag
from compiler.errors import MXNetError


def test_train_and_test_sections_switch_training_and_recording_together():
    assert not mx.autograd.is_training() and not mx.autograd.is_recording()
    with cag.train_section():
        assert mx.autograd.is_training() and mx.autograd.is_recording()
        with cag.test_section():
            assert not mx.autograd.is_training() and not mx.autograd.is_recording()
        assert mx.autograd.is_training() and mx.autograd.is_recording()
    assert not mx.autograd.is_training() and not mx.autograd.is_recording()
    assert cag.set_is_training(True) is False
    assert cag.set_is_training(False) is True


def test_grad_and_loss_and_grad_with_argnum():
    def f(a, b):
        return a * a * b + mx.nd.exp(b)

    a, b = mx.nd.array([1.0, 2.0]), mx.nd.array([0.5, -1.0])
    grads, loss = cag.grad_and_loss(f)(a, b)
    np.testing.assert_allclose(loss.asnumpy(), [1 * 0.5 + np.exp(0.5), -4 + np.exp(-1)],
                               rtol=1e-6)
    np.testing.assert_allclose(grads[0].asnumpy(), [2 * 1 * 0.5, 2 * 2 * -1.0], rtol=1e-6)
    np.testing.assert_allclose(grads[1].asnumpy(), [1 + np.exp(0.5), 4 + np.exp(-1)],
                               rtol=1e-6)
    (gb,) = cag.grad(f, argnum=1)(a, b)
    np.testing.assert_allclose(gb.asnumpy(), grads[1].asnumpy(), rtol=1e-6)
    with pytest.raises(AssertionError, match="should NDArray"):
        cag.grad(f)(a, 2.0)


def test_backward_with_out_grads_and_mark_variables():
    x = mx.nd.array([1.0, 2.0, 3.0])
    dx = mx.nd.zeros_like(x)
    cag.mark_variables([x], [dx])
    with cag.train_section():
        y = x * x
    cag.backward([y], [mx.nd.array([1.0, 0.5, 2.0])])
    np.testing.assert_allclose(dx.asnumpy(), [2.0, 2.0, 12.0])
    with pytest.raises(MXNetError, match="list or tuple"):
        cag.backward(y)


def test_fresh_grad_marks_what_a_backward_wrote():
    x, y = mx.nd.ones((2, 2)), mx.nd.ones((2, 2))
    dx, dy = mx.nd.zeros_like(x), mx.nd.zeros_like(y)
    cag.mark_variables([x, y], [dx, dy])
    assert x._fresh_grad is False and y._fresh_grad is False
    assert mx.nd.ones((1,))._fresh_grad is False
    with cag.train_section():
        (x + 2 + y).backward()
    assert x._fresh_grad and y._fresh_grad
    x._fresh_grad = y._fresh_grad = False
    with cag.train_section():
        ((x + 2).detach() + y).backward()
    # the detached path never reaches x: its gradient was not written
    assert y._fresh_grad and not x._fresh_grad
    x.attach_grad()
    assert x._fresh_grad is False
