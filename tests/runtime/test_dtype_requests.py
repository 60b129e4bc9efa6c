"""Until dtypes are real, any request for a dtype other than float32 is a clear
error (naming the input and the dtype), never a silent float32 computation."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError


def _net():
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


@pytest.mark.parametrize("dtype", ["float16", np.float64, "bfloat16", "int32"])
def test_simple_bind_type_dict_other_than_float32_is_refused(dtype):
    with pytest.raises(MXNetError, match=r"type_dict: 'data' is (float16|float64|bfloat16|"
                                         r"int32).*float32 only"):
        _net().simple_bind(mx.cpu(), data=(2, 4), type_dict={"data": dtype})


def test_float32_requests_still_bind():
    exe = _net().simple_bind(mx.cpu(), data=(2, 4), type_dict={"data": "float32",
                                                               "fc_weight": np.float32})
    assert exe.arg_dict["data"].dtype == torch.float32


def test_variable_dtype_is_refused():
    data = mx.sym.Variable("data", dtype="float16")
    with pytest.raises(MXNetError, match=r"Variable\(dtype=...\): 'data' is float16"):
        mx.sym.FullyConnected(data, num_hidden=3, name="fc").simple_bind(mx.cpu(), data=(2, 4))


def test_bind_with_a_float64_array_is_refused():
    net = mx.sym.Variable("a") * 2.0
    with pytest.raises(MXNetError, match=r"bind args: 'a' is float64"):
        net.bind(mx.cpu(), {"a": torch.zeros(2, 2, dtype=torch.float64)})


def test_module_bind_with_float16_datadesc_is_refused_and_leaves_module_unbound():
    mod = mx.mod.Module(_net())
    with pytest.raises(MXNetError, match=r"DataDesc: 'data' is float16"):
        mod.bind([mx.io.DataDesc("data", (2, 4), np.float16)],
                 [mx.io.DataDesc("softmax_label", (2,))])
    assert not mod.binded
    mod.bind([mx.io.DataDesc("data", (2, 4))], [mx.io.DataDesc("softmax_label", (2,))])
    assert mod.binded
