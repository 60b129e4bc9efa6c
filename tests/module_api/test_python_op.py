"""mxnet's legacy Python operators (``NumpyOp``, ``NDArrayOp``: ``module_api/python_op.py``)
against mxnet's documented behaviour and the built-in operators they stand for."""
import warnings

import numpy as np
import pytest

import module_api as mx


def test_numpy_op_defaults_copy_forward_and_write_one_backward():
    # mxnet's test_operator.py::test_python_op
    with pytest.warns(UserWarning, match="NumpyOp has been deprecated"):
        op = mx.operator.NumpyOp()
    s = op.get_symbol(mx.sym.var("X"), name="numpy_op")
    assert s.list_arguments() == ["X"] and s.list_outputs() == ["numpy_op_output"]
    x, dx = mx.nd.ones((10,)) * 10, mx.nd.zeros((10,))
    exe = s.bind(mx.cpu(), args=[x], args_grad={"X": dx})
    exe.forward(is_train=True)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.full(10, 10.0))
    exe.backward(mx.nd.ones((10,)) * 3)
    np.testing.assert_array_equal(dx.asnumpy(), np.ones(10))


class NumpySoftmax(mx.operator.NumpyOp):
    """A softmax loss written in numpy: backward is p - onehot(label)."""

    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], [in_shape[0][0]]], [in_shape[0]]

    def forward(self, in_data, out_data):
        x = in_data[0] - in_data[0].max(axis=1, keepdims=True)
        e = np.exp(x)
        out_data[0][:] = e / e.sum(axis=1, keepdims=True)

    def backward(self, out_grad, in_data, out_data, in_grad):
        label = in_data[1].astype(int)
        g = out_data[0].copy()
        g[np.arange(label.size), label] -= 1.0
        in_grad[0][:] = g


def _train(head):
    mx.random.seed(0)
    rng = np.random.RandomState(0)
    x, y = rng.normal(size=(60, 8)), rng.randint(0, 4, size=(60,))
    fc = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=4, name="fc")
    mod = mx.mod.Module(head(fc), data_names=["data"], label_names=["softmax_label"])
    mod.fit(mx.io.NDArrayIter(x, y, batch_size=20), num_epoch=3, optimizer="sgd",
            optimizer_params={"learning_rate": 0.3}, initializer=mx.init.Xavier())
    return mod.get_params()[0]


def test_a_numpy_softmax_loss_trains_as_softmax_output():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _train(lambda fc: NumpySoftmax()(data=fc, label=mx.sym.var("softmax_label"),
                                                 name="softmax"))
    want = _train(lambda fc: mx.sym.SoftmaxOutput(fc, name="softmax"))
    for name in want:
        np.testing.assert_allclose(got[name].asnumpy(), want[name].asnumpy(), rtol=1e-5,
                                   atol=1e-6)


class AddAndScale(mx.operator.NDArrayOp):
    """Two inputs, two outputs: (a + b, the row sums of a)."""

    def list_arguments(self):
        return ["a", "b"]

    def list_outputs(self):
        return ["sum", "rows"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0], [in_shape[0][0]]]

    def forward(self, in_data, out_data):
        out_data[0][:] = in_data[0] + in_data[1]
        out_data[1][:] = mx.nd.sum(in_data[0], axis=1)

    def backward(self, out_grad, in_data, out_data, in_grad):
        in_grad[0][:] = out_grad[0] + out_grad[1].reshape((-1, 1))
        in_grad[1][:] = out_grad[0]


def test_an_ndarray_op_with_two_inputs_and_outputs_in_a_graph(cpu_target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        op = AddAndScale()
    a, b = mx.sym.var("a"), mx.sym.var("b")
    out = op(mx.sym.square(a), b, name="ab")
    assert out.list_outputs() == ["ab_sum", "ab_rows"]
    head = mx.sym.Group([out[0] * 3, out[1]])
    rng = np.random.RandomState(1)
    av, bv = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    exe = head.simple_bind(mx.cpu(), a=(2, 3), b=(2, 3))
    exe.arg_dict["a"][:], exe.arg_dict["b"][:] = av, bv
    exe.forward(is_train=True)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), 3 * (av * av + bv), rtol=1e-5)
    np.testing.assert_allclose(exe.outputs[1].asnumpy(), (av * av).sum(axis=1), rtol=1e-5)
    g0, g1 = rng.normal(size=(2, 3)), rng.normal(size=(2,))
    exe.backward([mx.nd.array(g0), mx.nd.array(g1)])
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), (3 * g0 + g1[:, None]) * 2 * av,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(), 3 * g0, rtol=1e-5, atol=1e-6)
    assert op in mx.operator.PythonOp._ref_holder
