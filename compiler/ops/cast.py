"""Dtype conversions: ``Cast`` and AMP's ``amp_cast`` / ``amp_multicast`` (mxnet 1.9.1).

Inside a kernel every value is held in the kernel's compute dtype
(``compiler/ir/dtypes.py``), so a cast is a rounding: ``ops.round_to(x, "float16")``
rounds to float16 and keeps computing (``x.to(tl.float16).to(tl.float32)`` in a
Triton kernel); the store writes the output's storage dtype.
The gradient of a cast is the output gradient; ``passes/autodiff.py`` casts every
input gradient back to its input's dtype (mxnet's ``_backward_cast``).
"""
from __future__ import annotations

import torch

from ..ir.dtypes import LOW_PRECISION, SUPPORTED, dtype_name
from ..ir.expr import ops
from .elemwise import same_shape
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, parse_bool, parse_count,
                       parse_dtype, register)

# amp_cast / amp_multicast convert only these; other inputs pass through (mxnet's rule)
_AMP_FLOATS = ("float32",) + LOW_PRECISION


def _torch_cast(x, dtype):
    return x.to(getattr(torch, dtype)) if dtype in SUPPORTED else x


register(OpDef(
    name="Cast", pattern="elemwise", infer_shape=same_shape,
    lowering=Pointwise(lambda attrs, x: ops.round_to(x, attrs["dtype"])),
    attrs=[Attr("dtype", parse_dtype)], passes_shape=True,
    infer_type=lambda attrs, t: (t, [attrs["dtype"]]),
    reference=lambda attrs, ins, is_train: [_torch_cast(ins[0], attrs["dtype"])],
    gradient=lambda b, n: [n.ograds[0]], aliases=("cast",),
    doc="Cast to ``dtype`` (values rounded, integers truncated toward zero, as C casts)."))


def _amp_target(attrs, src):
    return attrs["dtype"] if src in _AMP_FLOATS else src


def _amp_cast_build(b, n, is_train):
    x = n.inputs[0]
    target = _amp_target(n.attrs, x.dtype)
    return [x if target == x.dtype else b.op("Cast", x, dtype=target)]


register(OpDef(
    name="amp_cast", pattern="elemwise", infer_shape=same_shape,
    lowering=Decompose(_amp_cast_build),
    attrs=[Attr("dtype", parse_dtype)], passes_shape=True,
    infer_type=lambda attrs, t: (t, [None if t[0] is None else _amp_target(attrs, t[0])]),
    reference=lambda attrs, ins, is_train: [
        _torch_cast(ins[0], _amp_target(attrs, dtype_name(ins[0].dtype)))],
    gradient=lambda b, n: [n.ograds[0]],
    doc="AMP's cast: float32/float16/bfloat16 inputs to ``dtype``, others unchanged."))


def _multicast_target(attrs, types):
    """mxnet's ``AMPMultiCastType``: the widest float type of the inputs (float32 if any
    is), or with ``cast_narrow`` the narrowest (float16/bfloat16 if any is)."""
    if attrs["cast_narrow"]:
        target = "float32"
        for t in types:
            if t in LOW_PRECISION:
                target = t
        return target
    target = types[0]
    if any(t == "float32" for t in types):
        target = "float32"
    return target


def _multicast_types(attrs, t):
    if any(x is None for x in t):
        return t, [None] * len(t)
    target = _multicast_target(attrs, t)
    return t, [target if x in _AMP_FLOATS else x for x in t]


def _multicast_shape(attrs, in_shapes):
    if len(in_shapes) != attrs["num_outputs"]:
        raise ShapeError(f"amp_multicast has num_outputs={attrs['num_outputs']} but "
                         f"{len(in_shapes)} inputs")
    return in_shapes, list(in_shapes)


def _multicast_build(b, n, is_train):
    types = [x.dtype for x in n.inputs]
    _, outs = _multicast_types(n.attrs, types)
    return [x if t == x.dtype else b.op("Cast", x, dtype=t) for x, t in zip(n.inputs, outs)]


def _multicast_ref(attrs, ins, is_train):
    _, outs = _multicast_types(attrs, [dtype_name(x.dtype) for x in ins])
    return [_torch_cast(x, t) for x, t in zip(ins, outs)]


register(OpDef(
    name="amp_multicast", pattern="elemwise", infer_shape=_multicast_shape,
    lowering=Decompose(_multicast_build),
    arguments=lambda attrs: [f"data_{i}" for i in range(attrs["num_outputs"])],
    outputs=lambda attrs: [f"output{i}" for i in range(attrs["num_outputs"])],
    attrs=[Attr("num_outputs", parse_count), Attr("cast_narrow", parse_bool, False)],
    variadic="num_outputs", key_var_num_args="num_outputs", passes_shape=True,
    infer_type=_multicast_types, reference=_multicast_ref,
    gradient=lambda b, n: list(n.ograds),
    doc="AMP's cast of several inputs to their widest (or narrowest) float type."))
