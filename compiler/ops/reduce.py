"""Reductions: sum (sum_axis), mean, max (max_axis), min (min_axis), with
mxnet's ``axis`` (int, tuple or None = all), ``keepdims`` and ``exclude``,
and the internal ``_backward_reduce_select`` that max / min gradients use.

mxnet 1.x rules: ``axis=None`` or ``axis=()`` reduces every axis (``exclude``
is then ignored); negative axes count from the end; duplicates are an error;
a result with no dims left is shape ``(1,)``.
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from .registry import (Attr, OpDef, Pointwise, Reduction, ShapeError, broadcast_shapes,
                       parse_bool, parse_optional_shape, prod, register)


def reduce_axes(attrs, in_shape) -> tuple:
    """The sorted input axes a reduction combines."""
    ndim = len(in_shape)
    axis = attrs["axis"]
    if axis is None or len(axis) == 0:
        return tuple(range(ndim))
    norm = []
    for a in axis:
        if not -ndim <= a < ndim:
            raise ShapeError(f"reduction axis={a} is out of range for input shape "
                             f"{tuple(in_shape)}")
        norm.append(a % ndim)
    if len(set(norm)) != len(norm):
        raise ShapeError(f"reduction axis={tuple(axis)} has duplicates for input shape "
                         f"{tuple(in_shape)}")
    if attrs["exclude"]:
        return tuple(i for i in range(ndim) if i not in norm)
    return tuple(sorted(norm))


def keep_shape(attrs, in_shape) -> tuple:
    """The output shape with reduced axes kept as size 1."""
    axes = reduce_axes(attrs, in_shape)
    return tuple(1 if i in axes else d for i, d in enumerate(in_shape))


def reduce_out_shape(attrs, in_shape) -> tuple:
    axes = reduce_axes(attrs, in_shape)
    if attrs["keepdims"]:
        return keep_shape(attrs, in_shape)
    out = tuple(d for i, d in enumerate(in_shape) if i not in axes)
    return out if out else (1,)


def _shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    x = tuple(x)
    return [x], [reduce_out_shape(attrs, x)]


def _select_input_shape(attrs, in_shapes):
    """max / min: an output element over no input elements (a zero-size axis under
    NumPy shape semantics) has no extremum, and is refused as mxnet refuses it."""
    x = in_shapes[0]
    if x is not None and _count(attrs, tuple(x)) == 0 and \
            prod(reduce_out_shape(attrs, tuple(x))) > 0:
        raise ShapeError(f"Reduction input's size should > 0: max / min over zero-size "
                         f"axes of shape {tuple(x)} has no value")
    return _shape(attrs, in_shapes)


def _count(attrs, in_shape) -> int:
    return prod(in_shape[a] for a in reduce_axes(attrs, in_shape))


def _torch_reduce(kind):
    def ref(attrs, ins, is_train):
        x = ins[0]
        axes = reduce_axes(attrs, tuple(x.shape))
        if axes:
            if kind == "sum":
                y = x.sum(dim=axes, keepdim=True)
            elif kind == "mean":
                y = x.mean(dim=axes, keepdim=True)
            else:
                y = x
                for a in axes:
                    y = (y.amax if kind == "max" else y.amin)(dim=a, keepdim=True)
        else:
            y = x
        return [y.reshape(reduce_out_shape(attrs, tuple(x.shape)))]
    return ref


def _mean_scale(attrs, shape) -> float:
    """1 / count; a mean over zero-size axes is 0 / 0, NaN (as mxnet and numpy give)."""
    count = _count(attrs, shape)
    return 1.0 / count if count else float("nan")


def _keep(b, ref, shape):
    return ref if tuple(ref.shape) == tuple(shape) else b.op("Reshape", ref, shape=tuple(shape))


def _sum_grad(scaled):
    def gradient(b, n):
        in_shape = tuple(n.in_shapes[0])
        dy = _keep(b, n.ograds[0], keep_shape(n.attrs, in_shape))
        if tuple(dy.shape) != in_shape:
            dy = b.op("broadcast_to", dy, shape=in_shape)
        if scaled:
            count = _count(n.attrs, in_shape)
            if count not in (0, 1):     # count 0: the gradient has no element
                dy = b.op("_mul_scalar", dy, scalar=1.0 / count)
        return [dy]
    return gradient


def _select_grad(b, n):
    in_shape = tuple(n.in_shapes[0])
    ks = keep_shape(n.attrs, in_shape)
    dy = _keep(b, n.ograds[0], ks)
    y = _keep(b, n.outputs[0], ks)
    return [b.op("_backward_reduce_select", dy, n.inputs[0], y)]


_ATTRS = [Attr("axis", parse_optional_shape, None), Attr("keepdims", parse_bool, False),
          Attr("exclude", parse_bool, False)]

for _name, _kind, _aliases in (("sum", "sum", ("sum_axis",)), ("mean", "mean", ()),
                               ("max", "max", ("max_axis",)), ("min", "min", ("min_axis",))):
    register(OpDef(
        name=_name, pattern="reduce",
        lowering=Reduction(
            "sum" if _kind == "mean" else _kind, reduce_axes,
            _mean_scale if _kind == "mean"
            else (lambda attrs, shape: 1.0)),
        attrs=_ATTRS, infer_shape=_shape if _kind in ("sum", "mean") else _select_input_shape,
        reference=_torch_reduce(_kind),
        gradient=_sum_grad(_kind == "mean") if _kind in ("sum", "mean") else _select_grad,
        aliases=_aliases))


# -- max / min gradient: dy where x equals the (broadcast) extremum ----------------

def _select_shape(attrs, in_shapes):
    dy, x, y = in_shapes
    if x is None:
        return in_shapes, [None]
    for what, s in (("ograd", dy), ("output", y)):
        if s is not None:
            if len(s) != len(x):
                raise ShapeError(f"_backward_reduce_select: {what} shape {tuple(s)} must have "
                                 f"the rank of data shape {tuple(x)}")
            broadcast_shapes(tuple(x), tuple(s), "_backward_reduce_select")
    return in_shapes, [tuple(x)]


def _select_ref(attrs, ins, is_train):
    dy, x, y = ins
    return [torch.where(x == y, dy, torch.zeros((), dtype=dy.dtype)).expand(x.shape)
            .contiguous()]


register(OpDef(
    name="_backward_reduce_select", pattern="broadcast",
    lowering=Pointwise(lambda attrs, dy, x, y: ops.where(ops.eq(x, y), dy, 0.0)),
    arguments=("ograd", "data", "output"), infer_shape=_select_shape, reference=_select_ref,
    doc="ograd where data equals the reduced output (every tied extremum gets it), else 0."))
