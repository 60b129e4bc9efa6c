"""FullyConnected with a (num_hidden, 1) bias, which mxnet 1.9.1 takes as a
(num_hidden,) one (its test_sparse_fc builds one), on both cpu targets."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError


@pytest.mark.parametrize("flatten", [True, False])
def test_column_bias_forward_and_gradient(cpu_target, flatten):
    x, b = mx.sym.var("x"), mx.sym.var("b")
    out = mx.sym.FullyConnected(mx.sym.transpose(x), bias=b, num_hidden=3, flatten=flatten,
                                name="fc") * 2
    assert out.infer_shape(x=(4, 2), b=(3, 1))[0] == [(4, 2), (3, 4), (3, 1)]
    rng = np.random.RandomState(0)
    xv, wv, bv = rng.normal(size=(4, 2)), rng.normal(size=(3, 4)), rng.normal(size=(3, 1))
    exe = out.simple_bind(mx.cpu(), x=(4, 2), b=(3, 1))
    exe.arg_dict["x"][:], exe.arg_dict["fc_weight"][:], exe.arg_dict["b"][:] = xv, wv, bv
    head = rng.normal(size=(2, 3))
    exe.forward(is_train=True)
    exe.backward(mx.nd.array(head))
    xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (xv, wv, bv))
    yt = (xt.t() @ wt.t() + bt.reshape(-1)) * 2
    gx, gw, gb = torch.autograd.grad(yt, [xt, wt, bt], torch.tensor(head))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), yt.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    assert exe.grad_dict["b"].shape == (3, 1)
    for name, want in (("x", gx), ("fc_weight", gw), ("b", gb)):
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), want.numpy(), rtol=1e-5,
                                   atol=1e-6)


def test_other_bias_shapes_are_refused_as_mxnet_does():
    x, b = mx.sym.var("x"), mx.sym.var("b")
    with pytest.raises(MXNetError, match="FullyConnected bias"):
        mx.sym.FullyConnected(x, bias=b, num_hidden=3).infer_shape(x=(2, 4), b=(1, 3))


def test_sparse_namespace_operators_are_the_nd_ones():
    assert mx.nd.sparse.sgd_update is mx.nd.sgd_update
    assert mx.nd.sparse.FullyConnected is mx.nd.FullyConnected
    rsp = mx.nd.sparse.row_sparse_array((np.ones((1, 4), np.float32), [1]), shape=(3, 4))
    zero = mx.nd.sparse.zeros_like(rsp)
    assert zero.stype == "row_sparse" and zero.data.shape[0] == 0
    np.testing.assert_array_equal(mx.nd.sparse.abs(rsp * -1).asnumpy(), rsp.asnumpy())
