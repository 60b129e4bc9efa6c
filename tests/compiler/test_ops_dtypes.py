"""The operator table (``test_ops_compiled.OPS``) in float16, bfloat16 and float64.

Every row is bound with its first input in the dtype (``simple_bind`` type_dict; mxnet's
rules give the other inputs theirs), on the first of its shapes, and compared with
its torch version in float64 run on the same inputs (rounded to the dtype
first). Low-precision kernels compute in float32 and round at their stores, so
the error is a few roundings of the dtype; float64 kernels compute in float64.
The tolerances, per dtype, are in ``TOLERANCE``: the one place they are written.
"""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from compiler.ir.dtypes import dtype_name
from runtime.context import cpu
from tests.compiler.test_ops_compiled import OPS, _as_list, _fill, _make, _seed
from runtime.ndarray import torch_dtype

# (rtol, atol) per dtype. float16 keeps 11 significant bits (unit roundoff 2**-11 =
# 4.9e-4) and bfloat16 8 (2**-8 = 3.9e-3): a value that went through a few stores of
# the dtype (forward kernels, then the gradient's) is within ~8 roundings; the absolute
# part covers values that cancel to near zero. float64 kernels compute in float64, so
# only summation order separates them from the torch reference.
TOLERANCE = {
    "float16": (8 * 2.0 ** -11, 8 * 2.0 ** -11),
    "bfloat16": (8 * 2.0 ** -8, 8 * 2.0 ** -8),
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),     # a row whose output is float32 whatever its inputs (Cast)
}
# Rows that cannot run with every input in one dtype: mxnet itself refuses them.
_FIXED_FLOAT32 = ("mxnet fixes this input's dtype to float32 (an attribute's default) and "
                  "refuses another, as checked in tests/compiler/test_dtype_rules.py")
SKIP = {
    # Embedding(dtype=...) in float16 is tests/module_api/test_dtype_training.py's LSTM
    "Embedding": "the weight's dtype is Embedding's `dtype` attribute: " + _FIXED_FLOAT32,
    "Embedding_dim1": "the weight's dtype is Embedding's `dtype` attribute: " + _FIXED_FLOAT32,
    "zeros": "x + zeros(shape): zeros' `dtype` attribute: " + _FIXED_FLOAT32,
    "ones": "x * ones(shape): ones' `dtype` attribute: " + _FIXED_FLOAT32,
}


def _rows():
    """Every row in every dtype on the cpu target; in float16 on the interpreter too
    (one low-precision dtype checks the Triton kernels' loads, casts and stores; the
    interpreter truncates to bfloat16 where GPUs round)."""
    out = []
    for op in OPS:
        if op.name in SKIP:
            continue
        marks = [pytest.mark.slow] if op.slow else []
        for dtype, target in (("float16", "cpu"), ("bfloat16", "cpu"), ("float64", "cpu"),
                              ("float16", "interpret")):
            out.append(pytest.param(op, dtype, target, id=f"{target}-{op.name}-{dtype}",
                                    marks=marks))
    return out


def _close(got, want, dtype, what, out_dtype=None):
    out_dtype = out_dtype or dtype
    rtol, atol = max(TOLERANCE[dtype], TOLERANCE[out_dtype])
    assert torch_dtype(got) == getattr(torch, out_dtype), f"{what}: dtype {got.dtype}, expected {out_dtype}"
    got = got.detach().double().cpu()
    want = want.detach().double()
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)}"
    # relative to the scale of the whole tensor: low precision rounds each value to its
    # own magnitude, and a sum's rounding is relative to its terms, not its result
    scale = max(float(want.abs().max()), 1.0)
    err = float((got - want).abs().max()) if got.numel() else 0.0
    assert err <= atol + rtol * scale, f"{what}: max abs error {err:.3g} (scale {scale:.3g})"


def check_dtype(op, dtype):
    shapes = op.shapes[0]
    gen = torch.Generator().manual_seed(_seed(op.name, shapes, dtype))
    vars_ = [sym.Variable(n) for n in op.inputs]
    s = op.build(*vars_, shapes=shapes) if op.needs_shapes else op.build(*vars_)
    diff = [n for n in op.inputs if n not in op.nograd] if op.grad else []
    grad_req = {n: "write" if n in diff else "null" for n in s.list_arguments()}
    # the first input's dtype is given; mxnet's rules give the others (a BatchNorm's
    # gamma stays float32 under float16 data)
    first = next((n for n in op.inputs if not op.gen.get(n, "randn").startswith(
        ("label", "index", "cond"))), op.inputs[0])
    given = {first: dtype}
    exe = s.simple_bind(cpu(), grad_req=grad_req, type_dict=given,
                        **dict(zip(op.inputs, shapes)))
    values = {n: _make(op.gen.get(n, "randn"), shp, gen).to(torch_dtype(exe.arg_dict[n]))
              for n, shp in zip(op.inputs, shapes)}
    aux_vals = _fill(exe, s, op, values, gen)
    xs = {n: v.double().requires_grad_(n in diff) for n, v in values.items()}
    xs_list = [xs[n] for n in op.inputs] + [exe.aux_dict[n].double() for n in aux_vals]
    outs = exe.forward(is_train=True)
    want = _as_list(op.torch(*xs_list))
    _, out_types, _ = s.infer_type(**{n: a.dtype for n, a in exe.arg_dict.items()})
    for i, (o, w) in enumerate(zip(outs, want)):
        _close(o, w, dtype, f"{op.name} {dtype} forward output {i}",
               out_dtype=dtype_name(out_types[i]))
    if not diff:
        return
    if op.mx_grad is not None:
        exe.backward()
        expected = op.mx_grad(*xs_list)
    else:
        ograds = [torch.randn(tuple(o.shape), generator=gen).to(torch_dtype(o)) for o in outs]
        exe.backward(ograds)
        objective = sum((w * g.double()).sum() for w, g in zip(want, ograds))
        grads = torch.autograd.grad(objective, [xs[n] for n in diff], allow_unused=True)
        expected = {n: torch.zeros_like(xs[n]) if g is None else g for n, g in zip(diff, grads)}
    for n in diff:
        _close(exe.grad_dict[n], expected[n], dtype, f"{op.name} {dtype} d/d{n}",
               out_dtype=dtype_name(exe.arg_dict[n].dtype))


@pytest.mark.parametrize("op,dtype,target", _rows())
def test_op_dtype(op, dtype, target, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    check_dtype(op, dtype)
