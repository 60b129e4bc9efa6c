"""mxnet's index bounds checks (``compiler/ops/index_checks.py``): ``take`` with
``mode='raise'`` and ``gather_nd`` refuse an index out of range, imperatively and in a
bound graph, on both cpu targets; in range they give mxnet's values and gradients."""
import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError


def _a():
    return mx.nd.array(np.arange(12.0).reshape(3, 4))


@pytest.mark.parametrize("bad", [[0, 3], [-1], [1, 2.0, 7.9]])
def test_take_raise_refuses_an_index_outside_the_axis(bad, cpu_target):
    with pytest.raises(MXNetError, match=r"take operator contains indices out of bound: "
                                         r"index (3|-1|7) where the axis has size 3"):
        mx.nd.take(_a(), mx.nd.array(bad), mode="raise")
    with pytest.raises(MXNetError, match="where the axis has size 4"):
        mx.nd.take(_a(), mx.nd.array([4.5]), axis=1, mode="raise")


def test_take_raise_in_a_graph_gives_clips_values_and_gradient(cpu_target):
    a, i = mx.sym.var("a"), mx.sym.var("i")
    out = mx.sym.take(mx.sym.transpose(a), i, axis=1, mode="raise") * 2
    exe = out.simple_bind(mx.cpu(), a=(3, 4), i=(2,), grad_req={"a": "write", "i": "null"})
    exe.arg_dict["a"][:] = np.arange(12.0).reshape(3, 4)
    exe.arg_dict["i"][:] = np.array([2.7, 0.0])
    exe.forward(is_train=True)
    want = np.arange(12.0).reshape(3, 4).T[:, [2, 0]] * 2
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), want)
    exe.backward(mx.nd.ones((4, 2)))
    grad = np.zeros((3, 4))
    grad[[2, 0], :] = 2
    np.testing.assert_array_equal(exe.grad_dict["a"].asnumpy(), grad)
    exe.arg_dict["i"][:] = np.array([3.0, 0.0])
    with pytest.raises(MXNetError, match="index 3 where the axis has size 3"):
        exe.forward(is_train=True)


def test_gather_nd_refuses_what_mxnet_refuses_and_wraps_negatives(cpu_target):
    data = mx.nd.array([[0, 1, 2], [3, 4, 5]])
    # mxnet 1.9.1's test_gather_nd_check_bound, with its messages
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3"):
        mx.nd.gather_nd(data, mx.nd.array([[0, 1, 0], [0, 1, 3]]))
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 3"):
        mx.nd.gather_nd(data, mx.nd.array([[0, 1, 0], [0, 1, -5]]))
    with pytest.raises(IndexError, match="index 2 is out of bounds for axis 0 with size 2"):
        mx.nd.gather_nd(data, mx.nd.array([[2], [0]]))
    got = mx.nd.gather_nd(data, mx.nd.array([[0, 1, -1], [0, 1, -2]]))
    np.testing.assert_array_equal(got.asnumpy(), [0, 4, 4])


def test_gather_nd_in_a_graph_checks_each_forward(cpu_target):
    d, i = mx.sym.var("d"), mx.sym.var("i")
    out = mx.sym.gather_nd(d * 1.0, i)
    exe = out.simple_bind(mx.cpu(), d=(2, 3), i=(2, 2), grad_req={"d": "write", "i": "null"})
    exe.arg_dict["d"][:] = np.arange(6.0).reshape(2, 3)
    exe.arg_dict["i"][:] = np.array([[1, 0], [-1, 2]])
    exe.forward(is_train=True)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), [5, 2])
    exe.backward(mx.nd.array([1.0, 10.0]))
    np.testing.assert_array_equal(exe.grad_dict["d"].asnumpy(), [[0, 0, 10], [0, 0, 1]])
    exe.arg_dict["i"][:] = np.array([[1, 0], [3, 2]])
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3"):
        exe.forward(is_train=True)
