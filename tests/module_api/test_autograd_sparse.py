"""csr and row_sparse arrays under ``mx.autograd`` (``runtime/autograd_sparse.py``):
``attach_grad`` / ``mark_variables`` with sparse arrays and sparse gradient arrays,
arithmetic, operators and ``dot`` recorded through dense stand-ins, sparse heads and
head gradients. The gradients are checked against their closed forms (mxnet's
test_autograd.py cases: ``test_attach_grad``, ``test_grad_with_stype``,
``test_sparse_dot_grad``, ``test_unary_func``, ``test_binary_func``)."""
from __future__ import annotations

import numpy as np
import pytest

import module_api as mx
from module_api.contrib.autograd import grad_and_loss

STYPES = ["default", "row_sparse", "csr"]


def _values(seed, shape=(4, 5), density=0.5):
    rng = np.random.RandomState(seed)
    return (rng.uniform(0.5, 1.5, shape) * (rng.uniform(size=shape) < density)).astype(
        np.float32)


@pytest.mark.parametrize("stype", STYPES)
def test_attach_grad_of_a_sparse_array(stype):
    x = mx.nd.array(_values(0)).tostype(stype)
    assert x.grad is None
    x.attach_grad()
    assert x.grad.stype == stype and not x.grad.asnumpy().any()
    with mx.autograd.record():
        y = x * 2
    assert y.stype == stype
    y.backward(out_grad=mx.nd.ones_like(y).tostype(stype))
    assert x.grad.stype == stype
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((4, 5), 2.0))


@pytest.mark.parametrize("stype", STYPES)
@pytest.mark.parametrize("grad_stype", [None] + STYPES)
def test_grad_storage_asked_for(stype, grad_stype):
    x = mx.nd.zeros((2, 3), stype=stype)
    x.attach_grad(stype=grad_stype)
    assert x.grad.stype == (grad_stype or stype)
    assert x.detach().stype == stype


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_unary_gradients(stype):
    v = _values(1, density=1.0)
    x = mx.nd.array(v).tostype(stype)
    for fn, want in [(lambda a: mx.nd.exp(a), np.exp(v)), (lambda a: a / 2, 0.5 + 0 * v),
                     (lambda a: a ** 2, 2 * v), (lambda a: -mx.nd.sqrt(a), -0.5 / np.sqrt(v))]:
        grads, out = grad_and_loss(fn)(x)
        np.testing.assert_allclose(grads[0].asnumpy(), want, rtol=1e-5)
        assert grads[0].stype == stype          # zeros_like(x): the variable's storage


@pytest.mark.parametrize("sx", STYPES)
@pytest.mark.parametrize("sy", STYPES)
def test_binary_gradients(sx, sy):
    vx, vy = _values(2), _values(3)
    x, y = mx.nd.array(vx).tostype(sx), mx.nd.array(vy).tostype(sy)
    grads, out = grad_and_loss(lambda a, b: a + a * b)(x, y)
    np.testing.assert_allclose(out.asnumpy(), vx + vx * vy, rtol=1e-6)
    np.testing.assert_allclose(grads[0].asnumpy(), 1 + vy, rtol=1e-6)
    np.testing.assert_allclose(grads[1].asnumpy(), vx, rtol=1e-6)


def test_dot_gradient_of_a_row_sparse_weight():
    lhs = mx.nd.array(_values(4, shape=(2, 8))).tostype("csr")
    want = lhs.asnumpy().T @ np.ones((2, 3), np.float32)
    rsp = mx.nd.ones((8, 3)).tostype("row_sparse")
    rsp.attach_grad()
    dense = mx.nd.ones((8, 3))
    dense.attach_grad(stype="row_sparse")
    for w in (rsp, dense):
        with mx.autograd.record():
            y = mx.nd.dot(lhs, w)
        y.backward()
        assert w.grad.stype == "row_sparse"
        np.testing.assert_allclose(w.grad.asnumpy(), want, rtol=1e-6)
        rows = np.flatnonzero(np.abs(want).sum(axis=1))
        np.testing.assert_array_equal(w.grad.indices.asnumpy(), rows)


def test_add_into_a_sparse_gradient_array():
    x = mx.nd.array(_values(5)).tostype("row_sparse")
    grad = mx.nd.zeros((4, 5), stype="row_sparse")
    mx.autograd.mark_variables([x], [grad], grad_reqs="add")
    for step in (1, 2):
        with mx.autograd.record():
            y = x * 3
        y.backward()
        np.testing.assert_allclose(grad.asnumpy(), np.full((4, 5), 3.0 * step))
    grad[:] = mx.nd.zeros((4, 5)).tostype("row_sparse")     # a program resets it
    with mx.autograd.record():
        y = x * 3
    y.backward()
    np.testing.assert_allclose(grad.asnumpy(), np.full((4, 5), 3.0))


def test_operators_on_sparse_arrays_outside_a_recording_record_nothing():
    x = mx.nd.array(_values(6)).tostype("row_sparse")
    x.attach_grad()
    y = mx.nd.sqrt(x) * 2
    assert getattr(y, "_ag_dense", None) is None
    with pytest.raises(mx.MXNetError, match="record"):
        y.backward()
