"""Dtype inference (``passes/infer_types.py``) and the casts, against mxnet 1.9.1.

``tests/fixtures/dtype_rules.json`` (made by ``make_dtype_rule_fixtures.py`` with
mxnet) records, for small symbols and given dtypes, what mxnet's ``infer_type``
gives or that it refuses; every case must come out the same here. The rest checks
values: what a Cast computes, the gradient's dtype, the memory plan per dtype,
and the key of the cache.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.artifacts.compile import all_dtypes, compile_symbol
from compiler.ir.dtypes import dtype_name
from compiler.errors import MXNetError
from runtime.ndarray import torch_dtype

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "dtype_rules.json")
with open(FIXTURE) as _f:
    CASES = json.load(_f)["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_infer_type_as_mxnet(case):
    s = mx.sym.load_json(case["symbol"])
    if "error" in case:
        with pytest.raises(MXNetError) as info:
            s.infer_type(**case["given"])
        text = str(info.value)
        # the node mxnet names, and the two dtypes that disagree
        node = case["error"].split("Error in operator ")[1].split(":")[0]
        assert node in text, (text, case["error"])
        assert all(t in text for t in ("expected", "got")), text
        return
    args, outs, aux = s.infer_type(**case["given"])
    if case["result"] is None:
        assert args is None and outs is None and aux is None
        return
    assert [dtype_name(t) for t in args] == case["result"]["args"]
    assert [dtype_name(t) for t in outs] == case["result"]["outs"]
    assert [dtype_name(t) for t in aux] == case["result"]["aux"]


def test_infer_type_returns_numpy_types():
    s = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    args, outs, _ = s.infer_type(data=np.float16)
    assert args == [np.float16] * 3 and outs == [np.float16]
    args, _, _ = s.infer_type(data=torch.bfloat16)
    assert args[1] == np.dtype([("bfloat16", np.uint16)])     # mxnet's bfloat16


def test_refusal_names_the_input_and_what_to_do():
    d, w = mx.sym.Variable("data"), mx.sym.Variable("w", dtype="float32")
    s = mx.sym.FullyConnected(d, weight=w, num_hidden=3, no_bias=True, name="fc")
    with pytest.raises(MXNetError, match=r"node fc at 1-th input: expected float16, got "
                                         r"float32 .*weight \('w'\).*Cast"):
        s.simple_bind(mx.cpu(), data=(2, 4), type_dict={"data": "float16"})


def _run(sym, dtypes, **values):
    exe = sym.simple_bind(mx.cpu(), grad_req="null",
                          type_dict=dtypes, **{k: v.shape for k, v in values.items()})
    outs = exe.forward(**values)
    return [o.as_subclass(torch.Tensor) for o in outs]


@pytest.mark.parametrize("target", ["float16", "bfloat16", "float64", "int32", "uint8"])
def test_cast_values(target, cpu_target):
    """Cast rounds to nearest (floats) and truncates toward zero (integers, as C casts),
    also inside a fused kernel whose other operations run in float32."""
    if target == "bfloat16" and cpu_target == "interpret":
        pytest.skip("Triton's interpreter truncates float32 to bfloat16 (numpy has no "
                    "bfloat16); GPUs round to nearest even, as torch does")
    x = torch.tensor([[1.0 + 2.0 ** -12, -2.75, 3.999, 1e4 + 0.3, -0.5, 200.7]])
    d = mx.sym.Variable("data")
    alone = mx.sym.Cast(d, dtype=target)
    fused = mx.sym.Cast(mx.sym.Cast(d * 1.0, dtype=target) * 1.0, dtype="float32")
    want = x.to(getattr(torch, target))
    if target == "uint8":
        x = x.abs()
        want = x.to(torch.uint8)
    got = _run(alone, {"data": "float32"}, data=x)[0]
    assert torch_dtype(got) == getattr(torch, target)
    assert torch.equal(got, want)
    got = _run(fused, {"data": "float32"}, data=x)[0]
    assert torch_dtype(got) == torch.float32 and torch.equal(got, want.to(torch.float32))


def test_cast_gradient_has_the_input_dtype():
    d = mx.sym.Variable("data")
    s = mx.sym.Cast(d * 3.0, dtype="float16")
    exe = s.simple_bind(mx.cpu(), data=(2, 3), type_dict={"data": "float32"})
    exe.forward(is_train=True, data=torch.ones(2, 3))
    exe.backward(torch.full((2, 3), 0.5, dtype=torch.float16))
    g = exe.grad_dict["data"]
    assert torch_dtype(g) == torch.float32 and torch.equal(g.as_subclass(torch.Tensor),
                                                    torch.full((2, 3), 1.5))


def test_amp_multicast_values_and_gradients():
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    s = mx.sym.Group(list(mx.sym.amp_multicast(a, b, num_outputs=2)))
    exe = s.simple_bind(mx.cpu(), a=(3,), b=(3,), type_dict={"a": "float16", "b": "float32"})
    x = torch.tensor([1.0, 2.5, -3.0])
    outs = exe.forward(is_train=True, a=x, b=x + 2 ** -20)
    assert [torch_dtype(o) for o in outs] == [torch.float32, torch.float32]
    exe.backward([torch.ones(3), torch.ones(3)])
    assert torch_dtype(exe.grad_dict["a"]) == torch.float16 and torch_dtype(exe.grad_dict["b"]) == torch.float32


def test_batchnorm_float16_keeps_float32_parameters_and_statistics():
    d = mx.sym.Variable("data")
    s = mx.sym.BatchNorm(d, fix_gamma=False, name="bn")
    exe = s.simple_bind(mx.cpu(), data=(4, 3), type_dict={"data": "float16"})
    assert torch_dtype(exe.arg_dict["bn_gamma"]) == torch.float32
    assert torch_dtype(exe.aux_dict["bn_moving_mean"]) == torch.float32
    exe.arg_dict["bn_gamma"][:] = 1.0
    exe.aux_dict["bn_moving_var"][:] = 1.0
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    out = exe.forward(is_train=True, data=x)[0]
    assert torch_dtype(out) == torch.float16
    want = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + 1e-3)
    assert torch.allclose(out.float(), want, atol=2e-3)
    # moving mean: 0.9 * 0 + 0.1 * batch mean, in float32 (no float16 rounding)
    assert torch.allclose(exe.aux_dict["bn_moving_mean"].as_subclass(torch.Tensor),
                          0.1 * x.mean(0), rtol=1e-6)
    exe.backward(torch.ones(4, 3, dtype=torch.float16))
    assert torch_dtype(exe.grad_dict["bn_gamma"]) == torch.float32


def test_dtypes_are_part_of_the_cache_key_and_buffers_are_per_dtype():
    d = mx.sym.Variable("data")
    s = mx.sym.Activation(mx.sym.FullyConnected(d, num_hidden=5, name="fc"), act_type="tanh")
    s = mx.sym.FullyConnected(s, num_hidden=2, name="fc2")
    shapes = {"data": (3, 4)}
    req = {n: "write" for n in s.list_arguments()}
    p32 = compile_symbol(s, shapes, True, req, True, "cpu")
    p16 = compile_symbol(s, shapes, True, req, True, "cpu", {"data": "float16"})
    assert p32 is not p16
    assert set(p32.buffer_dtypes) == {"float32"}
    assert set(p16.buffer_dtypes) == {"float16"}
    assert p16.output_dtypes == ["float16"] and p16.arg_dtypes["fc2_weight"] == "float16"
    # the same launches, half the bytes
    assert len(p16.launches) == len(p32.launches)
    assert p16.stats["bytes_per_step"] * 2 == p32.stats["bytes_per_step"]
    assert all_dtypes(s, {"data": "float64"})["fc_bias"] == "float64"


def test_float16_kernel_source_loads_widens_and_stores_narrow():
    """The Triton kernels of a float16 matmul: operands go to tl.dot as float16, the
    accumulator and the epilogue are float32, the store writes float16."""
    from compiler.artifacts.cache import kernel_path
    d = mx.sym.Variable("data")
    s = mx.sym.Activation(mx.sym.FullyConnected(d, num_hidden=5, name="fc"), act_type="relu")
    prog = compile_symbol(s, {"data": (3, 4)}, False, {}, False, "interpret",
                          {"data": "float16"})
    src = "\n".join(open(kernel_path(ln.kernel)).read() for ln in prog.launches)
    assert "tl.dot(a, b)" in src and "input_precision" not in src.split("tl.dot(a, b)")[0][-200:]
    assert "tl.zeros((BM, BN), dtype=tl.float32)" in src
    assert ".to(tl.float16)" in src
