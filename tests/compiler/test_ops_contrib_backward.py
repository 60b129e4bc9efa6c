"""mxnet's public contrib backward operators equal the gradients the forward operators'
own rules give (``tests/compiler/test_ops_contrib_backward.py``): each is bound and run
beside the forward operator's backward pass on the same inputs, on both cpu targets."""
import numpy as np
import pytest

import module_api as mx

RNG = np.random.RandomState(3)


def _grads(forward, inputs, dy):
    ex = forward.simple_bind(mx.cpu(), **{k: v.shape for k, v in inputs.items()})
    for k, v in inputs.items():
        ex.arg_dict[k][:] = mx.nd.array(v)
    ex.forward(is_train=True)
    ex.backward(mx.nd.array(dy))
    return {k: ex.grad_dict[k].asnumpy() for k in inputs}


def _run(sym, inputs):
    return [o.asnumpy() for o in sym.eval(mx.cpu(), **{k: mx.nd.array(v)
                                                        for k, v in inputs.items()})]


def test_backward_quadratic_is_quadratics_gradient(cpu_target):
    x, dy = RNG.randn(3, 5).astype(np.float32), RNG.randn(3, 5).astype(np.float32)
    data = mx.sym.Variable("data")
    want = _grads(mx.sym.contrib.quadratic(data, a=1.5, b=-2.0, c=0.5), {"data": x}, dy)
    got = _run(mx.sym.contrib.backward_quadratic(mx.sym.Variable("g"), data, a=1.5, b=-2.0,
                                                 c=0.5), {"g": dy, "data": x})
    np.testing.assert_allclose(got[0], want["data"], rtol=1e-6)


def test_backward_gradientmultiplier_scales(cpu_target):
    x, dy = RNG.randn(4, 2).astype(np.float32), RNG.randn(4, 2).astype(np.float32)
    data = mx.sym.Variable("data")
    want = _grads(mx.sym.contrib.gradientmultiplier(data, scalar=-0.25), {"data": x}, dy)
    got = _run(mx.sym.contrib.backward_gradientmultiplier(mx.sym.Variable("g"),
                                                          scalar=-0.25), {"g": dy})
    np.testing.assert_allclose(got[0], want["data"], rtol=1e-6)


@pytest.mark.parametrize("index", [[4, 0, 2], [1, 1, 3]])    # a repeated row: the last wins
def test_backward_index_copy_is_index_copys_gradient(cpu_target, index):
    old = RNG.randn(5, 3).astype(np.float32)
    new = RNG.randn(3, 3).astype(np.float32)
    idx = np.array(index, np.float32)
    dy = RNG.randn(5, 3).astype(np.float32)
    o, i, n = (mx.sym.Variable(k) for k in ("old", "idx", "new"))
    want = _grads(mx.sym.contrib.index_copy(o, i, n), {"old": old, "idx": idx, "new": new}, dy)
    got = _run(mx.sym.contrib.backward_index_copy(mx.sym.Variable("g"), o, i, n),
               {"g": dy, "old": old, "idx": idx, "new": new})
    np.testing.assert_allclose(got[0], want["old"])
    np.testing.assert_array_equal(got[1], np.zeros(3, np.float32))
    np.testing.assert_allclose(got[2], want["new"])
