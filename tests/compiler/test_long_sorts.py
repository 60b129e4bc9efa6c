"""``sort``, ``argsort`` and ``topk`` along axes longer than ``MAX_SORT_LENGTH``: one
extern ``torch.sort`` (``compiler/ops/sort_extern.py``) where the comparison form
would do M x M work a row (it refused such axes before). Against numpy's stable
sorts, on both cpu targets, with ties, on every axis position and flattened; the
gradients against the head gradient placed back by hand."""
import numpy as np
import pytest

import module_api as mx
from compiler.ops.selection import MAX_SORT_LENGTH

LONG = MAX_SORT_LENGTH + 7


def _numpy_order(a, axis, ascend):
    flat = axis is None
    data = a.ravel() if flat else a
    ax = 0 if flat else axis
    # stable either way: equal values keep their order, as mxnet's std::stable_sort
    idx = np.argsort(data if ascend else -data, axis=ax, kind="stable")
    return np.take_along_axis(data, idx, axis=ax), idx


@pytest.mark.parametrize("shape, axis", [((2, LONG), 1), ((LONG, 2), 0), ((2, LONG, 3), 1),
                                         ((2, LONG // 2 + 1), None)])
def test_sort_and_argsort_of_a_long_axis(cpu_target, shape, axis):
    rng = np.random.RandomState(len(shape))
    a = rng.randint(0, 40, size=shape).astype(np.float32)
    for ascend in (True, False):
        values, idx = _numpy_order(a, axis, ascend)
        got = mx.nd.sort(mx.nd.array(a), axis=axis, is_ascend=ascend).asnumpy()
        np.testing.assert_array_equal(got, values)
        got = mx.nd.argsort(mx.nd.array(a), axis=axis, is_ascend=ascend).asnumpy()
        np.testing.assert_array_equal(got, idx.astype(np.float32))


def test_topk_of_a_long_axis_in_every_form(cpu_target):
    rng = np.random.RandomState(1)
    a = rng.randint(0, 40, size=(3, LONG)).astype(np.float32)
    values, idx = _numpy_order(a, 1, False)
    x = mx.nd.array(a)
    got_v, got_i = mx.nd.topk(x, axis=1, k=5, ret_typ="both")
    np.testing.assert_array_equal(got_v.asnumpy(), values[:, :5])
    np.testing.assert_array_equal(got_i.asnumpy(), idx[:, :5])
    mask = mx.nd.topk(x, axis=1, k=5, ret_typ="mask").asnumpy()
    want = np.zeros_like(a)
    np.put_along_axis(want, idx[:, :5], 1.0, axis=1)
    np.testing.assert_array_equal(mask, want)
    smallest = mx.nd.topk(x, axis=1, k=2, is_ascend=True, ret_typ="indices").asnumpy()
    np.testing.assert_array_equal(smallest, _numpy_order(a, 1, True)[1][:, :2])


def test_gradients_through_a_long_sort_and_topk(cpu_target):
    rng = np.random.RandomState(2)
    a = rng.permutation(2 * LONG).reshape(2, LONG).astype(np.float32)     # no ties
    head = rng.standard_normal((2, 4)).astype(np.float32)
    x = mx.nd.array(a)
    x.attach_grad()
    with mx.autograd.record():
        top = mx.nd.topk(x, axis=1, k=4, ret_typ="value")
    top.backward(mx.nd.array(head))
    want = np.zeros_like(a)
    np.put_along_axis(want, _numpy_order(a, 1, False)[1][:, :4], head, axis=1)
    np.testing.assert_array_equal(x.grad.asnumpy(), want)

    head = rng.standard_normal(a.shape).astype(np.float32)
    with mx.autograd.record():
        ordered = mx.nd.sort(x, axis=1)
    ordered.backward(mx.nd.array(head))
    want = np.zeros_like(a)
    np.put_along_axis(want, _numpy_order(a, 1, True)[1], head, axis=1)
    np.testing.assert_array_equal(x.grad.asnumpy(), want)


def test_a_long_sort_in_a_graph_is_one_extern_launch(cpu_target):
    """In context: after a fused multiply and a transpose (a view), with a fused add
    after it, forward and gradient, and alone as a graph head."""
    x = mx.sym.Variable("x")
    sym = mx.sym.sort(mx.sym.transpose(x * 2.0), axis=0) + 1.0
    exe = sym.simple_bind(mx.cpu(), x=(2, LONG))
    a = np.random.RandomState(3).standard_normal((2, LONG)).astype(np.float32)
    out = exe.forward(is_train=True, x=mx.nd.array(a))[0].asnumpy()
    np.testing.assert_allclose(out, np.sort(a.T * 2.0, axis=0) + 1.0, rtol=0, atol=0)
    assert "_sort_last" in exe.debug_str()
    head = np.random.RandomState(4).standard_normal(out.shape).astype(np.float32)
    exe.backward(mx.nd.array(head))
    want = np.zeros_like(a.T)
    np.put_along_axis(want, np.argsort(a.T, axis=0, kind="stable"), head, axis=0)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2.0 * want.T, rtol=0, atol=0)
    alone = mx.sym.argsort(x, axis=1).simple_bind(mx.cpu(), x=(2, LONG))
    got = alone.forward(x=mx.nd.array(a))[0].asnumpy()
    np.testing.assert_array_equal(got, np.argsort(a, axis=1, kind="stable"))
