"""``_slice_assign`` and ``_slice_assign_scalar`` (mxnet's ``_crop_assign`` /
``_crop_assign_scalar``): a copy of ``lhs`` with one strided slice replaced by ``rhs``
or a scalar, the slice as ``slice`` reads it (mxnet's clamped begin / end, any step).

mxnet registers no gradient for either, so a backward through one is refused, as there.
Both decompose to ``where(mask, placed, lhs)``: ``placed`` is the value scattered to the
slice's positions of zeros (``slice``'s own gradient, ``shape_more.scatter_slice``) and
``mask`` the same scatter of ones, so the assigned elements are the value's bits.
"""
from __future__ import annotations

import torch

from .registry import Attr, Decompose, OpDef, ShapeError, parse_float, register
from .shape_more import _slice_out_shape, parse_optional_int_tuple, scatter_slice


def _slice_attrs():
    return [Attr("begin", parse_optional_int_tuple), Attr("end", parse_optional_int_tuple),
            Attr("step", parse_optional_int_tuple, ())]


def _assign(b, lhs, value, attrs, shape):
    ranges, out = _slice_out_shape(attrs, shape, "_slice_assign")
    mask = scatter_slice(b, b.op("ones_like", value), ranges, out, shape)
    return [b.op("where", mask, scatter_slice(b, value, ranges, out, shape), lhs)]


def _assign_ref(lhs, value, attrs):
    ranges, out = _slice_out_shape(attrs, tuple(lhs.shape), "_slice_assign")
    idx = [torch.arange(m, device=lhs.device) * s + lo for (lo, _, s), m in zip(ranges, out)]
    res = lhs.clone()
    res[torch.meshgrid(*idx, indexing="ij")] = value.to(lhs.dtype)
    return [res]


def _assign_shape(attrs, in_shapes):
    lhs, rhs = in_shapes
    if lhs is None:
        return in_shapes, [None]
    lhs = tuple(lhs)
    want = _slice_out_shape(attrs, lhs, "_slice_assign")[1]
    if rhs is not None and tuple(rhs) != want:
        raise ShapeError(f"_slice_assign: rhs has shape {tuple(rhs)}; the slice "
                         f"begin={tuple(attrs['begin'])}, end={tuple(attrs['end'])}, "
                         f"step={tuple(attrs['step'])} of lhs {lhs} has shape {want}")
    return [lhs, want], [lhs]


register(OpDef(
    name="_slice_assign", pattern="injective",
    lowering=Decompose(lambda b, n, is_train=False: _assign(
        b, n.inputs[0], n.inputs[1], n.attrs, tuple(n.in_shapes[0]))),
    arguments=("lhs", "rhs"), attrs=_slice_attrs(), infer_shape=_assign_shape,
    reference=lambda attrs, ins, is_train: _assign_ref(ins[0], ins[1], attrs),
    gradient=None, aliases=("_crop_assign",),
    doc="lhs with lhs[begin:end:step] replaced by rhs (the slice's shape); no gradient."))


def _scalar_value(b, n):
    """The scalar in the slice's shape and the data's dtype."""
    ones = b.op("ones_like", b.op("slice", n.inputs[0], begin=n.attrs["begin"],
                                  end=n.attrs["end"], step=n.attrs["step"]))
    return b.op("_mul_scalar", ones, scalar=n.attrs["scalar"])


register(OpDef(
    name="_slice_assign_scalar", pattern="injective",
    lowering=Decompose(lambda b, n, is_train=False: _assign(
        b, n.inputs[0], _scalar_value(b, n), n.attrs, tuple(n.in_shapes[0]))),
    arguments=("data",), attrs=[Attr("scalar", parse_float, 0.0)] + _slice_attrs(),
    infer_shape=lambda attrs, in_shapes: (
        in_shapes, [None if in_shapes[0] is None else tuple(in_shapes[0])]),
    reference=lambda attrs, ins, is_train: _assign_ref(
        ins[0], torch.tensor(attrs["scalar"], dtype=torch.float64), attrs),
    gradient=None, aliases=("_crop_assign_scalar",),
    doc="data with data[begin:end:step] set to scalar; no gradient."))
