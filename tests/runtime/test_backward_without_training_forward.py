"""``Executor.backward`` when the last forward was not a training one, as mxnet 1.9.1
answers (values: ``tests/fixtures/make_operator_edge_fixtures.py``): after
``forward(is_train=False)`` the gradient of what that forward computed (Dropout the
identity; BatchNorm mxnet's backward at the moving statistics), and for a graph whose
modes compute the same, a backward with no forward before it (the forward runs
first). Both cpu targets."""
import json
import os

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mxnet_operator_edges.json")
with open(FIXTURE) as _f:
    MX = json.load(_f)["backward_after_inference"]
X = np.array(MX["x"], np.float32).reshape(4, 3)


def test_dropout_backward_after_an_inference_forward_is_the_identity(cpu_target):
    x = mx.sym.Variable("x")
    exe = (mx.sym.Dropout(x, p=0.5) * 2).simple_bind(mx.cpu(), x=(4, 3))
    exe.arg_dict["x"][:] = X
    exe.forward(is_train=False)
    exe.backward([mx.nd.ones((4, 3))], is_train=False)
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy().ravel(), MX["dropout_grad"])
    exe.forward(is_train=True)                  # a training step between: its masks
    exe.backward([mx.nd.ones((4, 3))])
    assert set(np.unique(exe.grad_dict["x"].asnumpy())) <= {0.0, 4.0}
    exe.forward(is_train=False)
    exe.backward([mx.nd.ones((4, 3))])
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy().ravel(), MX["dropout_grad"])


def test_batchnorm_backward_after_an_inference_forward(cpu_target):
    x = mx.sym.Variable("x")
    exe = mx.sym.BatchNorm(x, fix_gamma=False, name="bn").simple_bind(mx.cpu(), x=(4, 3))
    exe.arg_dict["x"][:] = X
    exe.arg_dict["bn_gamma"][:] = np.array([2, 3, 4], np.float32)
    exe.arg_dict["bn_beta"][:] = 0
    exe.aux_dict["bn_moving_mean"][:] = np.array([0.5, 0.1, -1], np.float32)
    exe.aux_dict["bn_moving_var"][:] = np.array([4, 1, 2], np.float32)
    exe.forward(is_train=False)
    exe.backward([mx.nd.ones((4, 3))])
    np.testing.assert_allclose(exe.outputs[0].asnumpy().ravel(), MX["bn_out"], rtol=1e-5)
    for name, want in MX["bn_grads"].items():
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy().ravel(), want, rtol=1e-4,
                                   atol=1e-6, err_msg=name)
    # the inference forward the backward reran left the moving statistics alone
    np.testing.assert_allclose(exe.aux_dict["bn_moving_mean"].asnumpy(), MX["bn_moving_mean"])


def test_backward_with_no_forward(cpu_target):
    x = mx.sym.Variable("x")
    exe = mx.sym.repeat(x, repeats=2, axis=0).bind(mx.cpu(), args=[mx.nd.ones((2, 3))],
                                                  args_grad=[mx.nd.zeros((2, 3))])
    exe.backward(mx.nd.array(np.arange(12).reshape(4, 3)))
    np.testing.assert_array_equal(exe.grad_arrays[0].asnumpy().ravel(),
                                  MX["repeat_grad_no_forward"])
    # a backward that reads forward values: the forward runs first (mxnet would read
    # whatever its buffers held)
    sig = mx.sym.sigmoid(x).bind(mx.cpu(), args=[mx.nd.array(X)], args_grad=[mx.nd.zeros((4, 3))])
    sig.backward(mx.nd.ones((4, 3)))
    y = 1.0 / (1.0 + np.exp(-X))
    np.testing.assert_allclose(sig.grad_arrays[0].asnumpy(), y * (1 - y), rtol=1e-5)
    # where the modes differ there is no one computation to differentiate: refused
    drop = mx.sym.Dropout(x, p=0.5).simple_bind(mx.cpu(), x=(4, 3))
    with pytest.raises(mx.MXNetError, match="forward first"):
        drop.backward([mx.nd.ones((4, 3))])
