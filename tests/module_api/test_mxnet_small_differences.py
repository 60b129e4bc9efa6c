"""Two behaviours fixed to mxnet 1.9.1's (issue 24): ``MAERegressionOutput``'s
gradient where the output equals the label, on both cpu() targets, and an array
on a GPU this machine lacks."""
import numpy as np
import pytest
import torch

import module_api as mx


def test_mae_gradient_at_equal_output_and_label(cpu_target):
    x = np.array([[1., 2., 3.], [0., -1., 5.]], np.float32)
    y = np.array([[1., 3., 2.], [0., -1., 7.]], np.float32)
    net = mx.sym.MAERegressionOutput(mx.sym.var("data"), mx.sym.var("label"), name="mae")
    exe = net.simple_bind(mx.cpu(), data=x.shape, label=y.shape)
    exe.forward(is_train=True, data=x, label=y)
    exe.backward()
    third = 0.3333333432674408          # mxnet 1.9.1 printed these gradients
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(),
                               [[-third, -third, third], [-third, -third, -third]], rtol=1e-7)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_array_on_a_missing_gpu_is_an_mxnet_error():
    for make in (lambda: mx.nd.zeros((2, 2), ctx=mx.gpu(0)),
                 lambda: mx.nd.array([1.0, 2.0], ctx=mx.gpu(0)),
                 lambda: mx.nd.ones((2,)).as_in_context(mx.gpu(1))):
        with pytest.raises(mx.MXNetError, match=r"gpu\(\d\) is not available: this machine "
                                                r"has no GPU"):
            make()


def test_a_gpu_beyond_the_count_is_named(monkeypatch):
    from runtime import context
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(context, "_GPUS_SEEN", set())
    with pytest.raises(mx.MXNetError, match=r"gpu\(2\) is not available: this machine has 2 "
                                            r"GPU\(s\): gpu\(0\) to gpu\(1\)"):
        mx.gpu(2).torch_device
    assert mx.gpu(1).torch_device == torch.device("cuda", 1)
