"""Dtype requests bind arrays of that dtype (type_dict, DataDesc, Variable(dtype=...),
bound arrays), as mxnet does; a dtype no kernel is generated for is refused by name
before anything is allocated."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from runtime.ndarray import torch_dtype


def _net():
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


@pytest.mark.parametrize("dtype,want", [("float16", torch.float16),
                                               (np.float64, torch.float64),
                                               ("bfloat16", torch.bfloat16),
                                               (torch.float16, torch.float16)])
def test_simple_bind_type_dict_gives_every_array_its_dtype(dtype, want):
    exe = _net().simple_bind(mx.cpu(), data=(2, 4), type_dict={"data": dtype})
    assert {torch_dtype(a) for a in exe.arg_arrays} == {want}      # weights follow the data
    assert {torch_dtype(g) for g in exe.grad_arrays if g is not None} == {want}
    assert torch_dtype(exe.outputs[0]) == want


def test_unsupported_dtype_is_refused_by_name():
    with pytest.raises(MXNetError, match=r"type_dict: 'data' is complex64.*float16"):
        _net().simple_bind(mx.cpu(), data=(2, 4), type_dict={"data": np.complex64})


def test_variable_dtype_is_honoured():
    data = mx.sym.Variable("data", dtype="float16")
    exe = mx.sym.FullyConnected(data, num_hidden=3, name="fc").simple_bind(mx.cpu(), data=(2, 4))
    assert torch_dtype(exe.arg_dict["fc_weight"]) == torch.float16


def test_bind_with_a_float64_array_computes_in_float64():
    net = mx.sym.Variable("a") * 2.0
    a = torch.full((2, 2), 1.0 + 2.0 ** -40, dtype=torch.float64)
    exe = net.bind(mx.cpu(), {"a": a})
    out = exe.forward()[0]
    assert torch_dtype(out) == torch.float64 and float(out[0, 0]) == 2.0 + 2.0 ** -39


def test_bind_with_disagreeing_arrays_is_refused():
    net = mx.sym.Variable("a") + mx.sym.Variable("b")
    with pytest.raises(MXNetError, match=r"expected float16, got float32"):
        net.bind(mx.cpu(), {"a": torch.zeros(2, dtype=torch.float16), "b": torch.zeros(2)})


def test_module_bind_with_float16_datadesc():
    mod = mx.mod.Module(_net())
    mod.bind([mx.io.DataDesc("data", (2, 4), np.float16)],
             [mx.io.DataDesc("softmax_label", (2,), np.float16)])
    mod.init_params()
    mod.forward(mx.io.DataBatch([mx.nd.ones((2, 4))], [mx.nd.zeros((2,))]), is_train=False)
    assert torch_dtype(mod.get_outputs()[0]) == torch.float16


def test_module_bind_refused_leaves_module_unbound():
    mod = mx.mod.Module(_net())
    with pytest.raises(MXNetError, match=r"DataDesc: 'data' is complex64"):
        mod.bind([mx.io.DataDesc("data", (2, 4), np.complex64)],
                 [mx.io.DataDesc("softmax_label", (2,))])
    assert not mod.binded
    # float16 data with the default float32 label: mxnet's SoftmaxOutput refuses it too
    with pytest.raises(MXNetError, match=r"node softmax at 1-th input: expected float16, "
                                         r"got float32"):
        mod.bind([mx.io.DataDesc("data", (2, 4), np.float16)],
                 [mx.io.DataDesc("softmax_label", (2,))])
    assert not mod.binded
    mod.bind([mx.io.DataDesc("data", (2, 4))], [mx.io.DataDesc("softmax_label", (2,))])
    assert mod.binded
