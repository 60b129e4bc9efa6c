"""Creation operators with no inputs: the constants ``_zeros`` / ``_ones`` / ``_full``
(``mx.sym.zeros`` / ``ones`` / ``full``), ``_arange`` (``mx.sym.arange``), ``_linspace``
(``mx.sym.linspace``) and ``_eye`` (``mx.sym.eye``).

Each is a ``Pointwise`` whose value depends only on its position (``needs_coords``),
so both targets generate it like any elementwise kernel. mxnet 1.9.1's rules:

* ``_arange``: ``stop=None`` means ``arange(0, start)``; ``ceil((stop - start) / step)``
  values ``start + (i // repeat) * step``, each repeated ``repeat`` times, computed in
  the output dtype (integer dtypes truncate start and step first); step 0, repeat < 1
  and an empty range are errors. ``infer_range`` (a length taken from a consumer) is
  not supported here: an error says so.
* ``_linspace``: ``num`` values ``start + i * step`` with
  ``step = (stop - start) / (num - 1 if endpoint else num)`` (0 when that count is 0);
  mxnet computes them in double precision, here in the output dtype (within an ulp).
* ``_eye``: an ``N x M`` (``M = 0``: ``N``) matrix of zeros with ones on diagonal ``k``.

The constants are ``Special("constant")`` kernels filled with ``attrs['value']``; a
0 or -1 in their ``shape`` is mxnet's unknown dim, filled from the operands they meet.
"""
from __future__ import annotations

import math

import torch

from ..ir.dtypes import INTS
from ..ir.expr import ops
from .registry import (Attr, OpDef, Pointwise, ShapeError, Special, parse_bool, parse_dtype,
                       parse_float, parse_int, parse_nonneg_int, parse_optional_float,
                       parse_shape, parse_str, register)


# -- constants ---------------------------------------------------------------------------------

_TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                 "bfloat16": torch.bfloat16,
                 "int32": torch.int32, "int64": torch.int64, "int8": torch.int8,
                 "uint8": torch.uint8, "bool": torch.bool}


def _dtype(v):
    s = str(v)
    if s.startswith("torch."):
        s = s[len("torch."):]
    if s.startswith("<class 'numpy."):
        s = s[len("<class 'numpy."):-2]
    if s not in _TORCH_DTYPES:
        raise ValueError(f"unsupported dtype {v!r}")
    return s


def _const_shape(attrs, in_shapes):
    return [], [tuple(attrs["shape"])]


def _const_ref(attrs, ins, is_train):
    return [torch.full(tuple(attrs["shape"]), attrs["value"],
                       dtype=_TORCH_DTYPES[attrs["dtype"]])]


def _const_shape_attr(v) -> tuple:
    """A constant's ``shape``: -1 reads as an unknown dim, as 0 does (mxnet 1.x keeps
    unknown dims as -1 inside; ``ones(shape=(-1, -1)) + x`` takes ``x``'s shape)."""
    shape = parse_shape(v)
    if any(d < -1 for d in shape):
        raise ValueError(f"shape {shape} has a negative dim other than -1 (unknown)")
    return tuple(0 if d == -1 else d for d in shape)


def _const_attrs(value):
    return [Attr("shape", _const_shape_attr, ()), Attr("dtype", _dtype, "float32"),
            Attr("ctx", parse_str, ""), Attr("value", parse_float, value)]


for _name, _alias, _value in (("_zeros", "zeros", 0.0), ("_ones", "ones", 1.0),
                              ("_full", None, None)):
    register(OpDef(
        name=_name, pattern="injective", lowering=Special("constant"), arguments=(),
        attrs=_const_attrs(0.0 if _value is None else _value),
        infer_shape=_const_shape, reference=_const_ref,
        infer_type=lambda attrs, in_types: ([], [attrs["dtype"]]),
        gradient=lambda b, n: [], aliases=(_alias,) if _alias else (),
        doc="A constant tensor; the codegen fills it with attrs['value']."))


def _coord(coords, d):
    c = coords[d]
    return ops.const(0) if c is None else c


def _no_grad(b, n):
    return []


def _dtype_of(attrs):
    return getattr(torch, attrs["dtype"])


# -- _arange -------------------------------------------------------------------------------

def _range(attrs):
    """(start, stop) with mxnet's ``stop=None``: ``arange(0, start)``."""
    if attrs["stop"] is None:
        return 0.0, attrs["start"]
    return attrs["start"], attrs["stop"]


def _arange_len(attrs) -> int:
    start, stop = _range(attrs)
    step, repeat = attrs["step"], attrs["repeat"]
    if attrs["infer_range"] and attrs["stop"] is None:
        raise ShapeError("_arange: infer_range=True (the length taken from a consumer) is "
                         "not supported; give stop")
    if step == 0:
        raise ShapeError(f"_arange: range does not support step=0, received {step}")
    if repeat < 1:
        raise ShapeError(f"_arange: range only supports repeat > 0, received {repeat}")
    if (step > 0 and not start < stop) or (step < 0 and not start > stop):
        raise ShapeError(f"_arange: invalid range (start, stop, step) = ({start}, {stop}, "
                         f"{step})")
    return int(math.ceil((stop - start) / step)) * repeat


def _arange_params(attrs):
    start, _ = _range(attrs)
    step = attrs["step"]
    if attrs["dtype"] in INTS:          # mxnet casts start and step to the dtype first
        start, step = float(math.trunc(start)), float(math.trunc(step))
    return start, step


def _arange_expr(attrs, *, coords):
    start, step = _arange_params(attrs)
    c = _coord(coords, 0)
    # an integer range computes in float64 (its kernel's compute dtype): a Triton int32
    # coordinate times 1.0 would be float32, and counts above 2**24 would round
    i = ops.round_to(c, "float64") if attrs["dtype"] in INTS else c * 1.0
    if attrs["repeat"] > 1:
        i = ops.floor(i / float(attrs["repeat"]))
    return i * step + start


def _arange_ref(attrs, ins, is_train):
    start, step = _arange_params(attrs)
    n = _arange_len(attrs)
    i = torch.div(torch.arange(n), attrs["repeat"], rounding_mode="floor")
    dt = _dtype_of(attrs)
    return [(torch.tensor(start, dtype=dt) + i.to(dt) * torch.tensor(step, dtype=dt)).to(dt)]


_CTX = Attr("ctx", parse_str, "")

register(OpDef(
    name="_arange", pattern="broadcast", lowering=Pointwise(_arange_expr), arguments=(),
    attrs=[Attr("start", parse_float), Attr("stop", parse_optional_float, None),
           Attr("step", parse_float, 1.0), Attr("repeat", parse_int, 1),
           Attr("infer_range", parse_bool, False), _CTX,
           Attr("dtype", parse_dtype, "float32")],
    needs_coords=True,
    infer_shape=lambda attrs, in_shapes: ([], [(_arange_len(attrs),)]),
    infer_type=lambda attrs, in_types: ([], [attrs["dtype"]]),
    reference=_arange_ref, gradient=_no_grad,
    doc="Evenly spaced values start, start + step, ... below stop, each repeated "
        "`repeat` times."))


# -- _linspace -----------------------------------------------------------------------------

def _linspace_step(attrs) -> float:
    count = attrs["num"] - 1 if attrs["endpoint"] else attrs["num"]
    return (attrs["stop"] - attrs["start"]) / count if count > 0 else 0.0


def _linspace_expr(attrs, *, coords):
    return _coord(coords, 0) * _linspace_step(attrs) + attrs["start"]


def _linspace_ref(attrs, ins, is_train):
    i = torch.arange(attrs["num"], dtype=torch.float64)
    return [(attrs["start"] + _linspace_step(attrs) * i).to(_dtype_of(attrs))]


register(OpDef(
    name="_linspace", pattern="broadcast", lowering=Pointwise(_linspace_expr), arguments=(),
    attrs=[Attr("start", parse_float), Attr("stop", parse_float),
           Attr("num", parse_nonneg_int), Attr("endpoint", parse_bool, True), _CTX,
           Attr("dtype", parse_dtype, "float32")],
    needs_coords=True,
    infer_shape=lambda attrs, in_shapes: ([], [(attrs["num"],)]),
    infer_type=lambda attrs, in_types: ([], [attrs["dtype"]]),
    reference=_linspace_ref, gradient=_no_grad,
    doc="num evenly spaced values from start to stop (endpoint: stop included)."))


# -- _eye ----------------------------------------------------------------------------------

def _eye_shape(attrs, in_shapes):
    n, m = attrs["N"], attrs["M"]
    if n < 0 or m < 0:
        raise ShapeError(f"_eye: N={n} and M={m} must not be negative")
    return [], [(n, m if m > 0 else n)]


def _eye_expr(attrs, *, coords):
    return ops.where(ops.eq(_coord(coords, 1) - _coord(coords, 0), attrs["k"]), 1.0, 0.0)


def _eye_k(n, m, k, attrs):
    i = torch.arange(n).reshape(n, 1)
    j = torch.arange(m).reshape(1, m)
    return (j - i == k).to(_dtype_of(attrs))


register(OpDef(
    name="_eye", pattern="broadcast", lowering=Pointwise(_eye_expr), arguments=(),
    attrs=[Attr("N", parse_int), Attr("M", parse_int, 0), Attr("k", parse_int, 0), _CTX,
           Attr("dtype", parse_dtype, "float32")],
    needs_coords=True, infer_shape=_eye_shape,
    infer_type=lambda attrs, in_types: ([], [attrs["dtype"]]),
    reference=lambda attrs, ins, is_train: [_eye_k(*_eye_shape(attrs, [])[1][0], attrs["k"],
                                                   attrs)],
    gradient=_no_grad,
    doc="An N x M matrix with ones on diagonal k (k > 0: above the main one)."))
