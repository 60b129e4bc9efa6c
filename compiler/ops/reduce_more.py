"""More reductions: add_n (ElementWiseSum), nansum, prod, nanprod, norm and moments.

``prod`` is a ``Reduction`` with the ``prod`` combiner; the others are ``Decompose``
rewrites into registered operators (sum / mean / prod Reductions, pointwise math), so
both targets get them without code of their own. The gradients follow mxnet 1.9.1's
(checked against it):

* ``nansum``: the head gradient where x is not NaN, 0 where it is;
* ``prod``: ``dy * y / x`` -- NaN where x is 0 (0 / 0), as mxnet's; ``nanprod`` the
  same, 0 where x is NaN;
* ``norm`` ord=2: ``dy * x / y`` -- NaN where the norm is 0, as mxnet's;
  ord=1: ``dy * sign(x)`` (0 at 0);
* ``moments``: ``dmean / N + dvar * 2 (x - mean) / N``.
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from .reduce import keep_shape, reduce_axes, reduce_out_shape
from .registry import (Attr, Decompose, OpDef, Pointwise, Reduction, ShapeError,
                       broadcast_shapes, parse_bool, parse_count, parse_dtype, parse_float,
                       parse_int, parse_optional_shape, prod, register)


def _bcast(b, ref, attrs, in_shape):
    """``ref`` (a reduction's output) as the input's shape: size-1 kept dims, broadcast."""
    ks = keep_shape(attrs, in_shape)
    if tuple(ref.shape) != ks:
        ref = b.op("Reshape", ref, shape=ks)
    if ks != tuple(in_shape):
        ref = b.op("broadcast_to", ref, shape=tuple(in_shape))
    return ref


# -- add_n / ElementWiseSum ------------------------------------------------------------------

def _add_n_shape(attrs, in_shapes):
    known = [tuple(s) for s in in_shapes if s is not None]
    if not known:
        return in_shapes, [None]
    for i, s in enumerate(in_shapes):
        if s is not None and tuple(s) != known[0]:
            raise ShapeError(f"add_n: input arg{i} has shape {tuple(s)}, but the inputs "
                             f"must share one shape; arg0's is {known[0]}")
    return [known[0]] * len(in_shapes), [known[0]]


def _add_n_build(b, n, is_train=False):
    acc = n.inputs[0]
    for x in n.inputs[1:]:
        acc = b.op("elemwise_add", acc, x)
    if len(n.inputs) == 1:
        acc = b.op("_copy", acc)
    return [acc]


def _add_n_ref(attrs, ins, is_train):
    out = ins[0].clone()
    for x in ins[1:]:
        out = out + x
    return [out]


def _add_n_links(attrs, in_ranks, out_ranks):
    rank = next((r for r in list(in_ranks) + list(out_ranks) if r is not None), None)
    if rank is None:
        return []
    return [[("in", i, k) for i in range(len(in_ranks))] + [("out", 0, k)]
            for k in range(rank)]


register(OpDef(
    name="add_n", pattern="elemwise", lowering=Decompose(_add_n_build),
    arguments=lambda attrs: [f"arg{i}" for i in range(attrs["num_args"])],
    attrs=[Attr("num_args", parse_count)], infer_shape=_add_n_shape, reference=_add_n_ref,
    gradient=lambda b, n: [n.ograds[0]] * n.attrs["num_args"],
    variadic="num_args", key_var_num_args="num_args", dim_links=_add_n_links,
    aliases=("ElementWiseSum",),
    doc="The sum of num_args same-shaped inputs; each input's gradient is the head's."))


# -- _nan_mask: data where `like` is not NaN, else `fill` (nansum's, nanprod's forward and
# gradient) -----------------------------------------------------------------------------

def _nan_mask_shape(attrs, in_shapes):
    d, like = in_shapes
    if d is None or like is None:
        return in_shapes, [None if d is None else tuple(d)]
    if broadcast_shapes(tuple(d), tuple(like), "_nan_mask") != tuple(d):
        raise ShapeError(f"_nan_mask: like shape {tuple(like)} must broadcast to data "
                         f"shape {tuple(d)}")
    return [tuple(d), tuple(like)], [tuple(d)]


def _nan_mask_ref(attrs, ins, is_train):
    d, like = ins
    return [torch.where(torch.isnan(like), torch.full((), attrs["fill"], dtype=d.dtype), d)]


register(OpDef(
    name="_nan_mask", pattern="broadcast",
    # NaN is the one value unequal to itself
    lowering=Pointwise(lambda attrs, d, like: ops.where(ops.ne(like, like), attrs["fill"], d)),
    arguments=("data", "like"), attrs=[Attr("fill", parse_float, 0.0)],
    infer_shape=_nan_mask_shape, reference=_nan_mask_ref,
    gradient=lambda b, n: [b.op("_nan_mask", n.ograds[0], n.inputs[1]),
                           b.op("zeros_like", n.inputs[1])],
    doc="data where like is not NaN, else fill."))


# -- nansum --------------------------------------------------------------------------------

_RED_ATTRS = [Attr("axis", parse_optional_shape, None), Attr("keepdims", parse_bool, False),
              Attr("exclude", parse_bool, False)]


def _red_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    return [tuple(x)], [reduce_out_shape(attrs, tuple(x))]


def _torch_sum(attrs, x):
    axes = reduce_axes(attrs, tuple(x.shape))
    y = x.sum(dim=axes, keepdim=True) if axes else x
    return y.reshape(reduce_out_shape(attrs, tuple(x.shape)))


def _nansum_build(b, n, is_train=False):
    x = n.inputs[0]
    a = n.attrs
    return [b.op("sum", b.op("_nan_mask", x, x), axis=a["axis"], keepdims=a["keepdims"],
                 exclude=a["exclude"])]


def _nansum_grad(b, n):
    x = n.inputs[0]
    dy = _bcast(b, n.ograds[0], n.attrs, tuple(n.in_shapes[0]))
    return [b.op("_nan_mask", dy, x)]


register(OpDef(
    name="nansum", pattern="reduce", lowering=Decompose(_nansum_build), attrs=_RED_ATTRS,
    infer_shape=_red_shape,
    reference=lambda attrs, ins, is_train: [_torch_sum(attrs, torch.nan_to_num(
        ins[0], nan=0.0, posinf=float("inf"), neginf=float("-inf")))],
    gradient=_nansum_grad,
    doc="The sum over axis with NaN counted as 0; the gradient is 0 where x is NaN."))


# -- prod / nanprod ------------------------------------------------------------------------

def _torch_prod(attrs, x):
    y = x
    for a in reduce_axes(attrs, tuple(x.shape)):
        y = y.prod(dim=a, keepdim=True)
    return y.reshape(reduce_out_shape(attrs, tuple(x.shape)))


def _prod_grad_of(b, n, x):
    """``dy * y / x`` broadcast to x's shape (0 / 0 = NaN at a zero, as mxnet's)."""
    a, shape = n.attrs, tuple(n.in_shapes[0])
    return _bcast(b, n.ograds[0], a, shape) * _bcast(b, n.outputs[0], a, shape) / x


register(OpDef(
    name="prod", pattern="reduce", lowering=Reduction("prod", reduce_axes), attrs=_RED_ATTRS,
    infer_shape=_red_shape,
    reference=lambda attrs, ins, is_train: [_torch_prod(attrs, ins[0])],
    gradient=lambda b, n: [_prod_grad_of(b, n, n.inputs[0])],
    doc="The product over axis (None: every axis)."))


def _nanprod_build(b, n, is_train=False):
    x, a = n.inputs[0], n.attrs
    return [b.op("prod", b.op("_nan_mask", x, x, fill=1.0), axis=a["axis"],
                 keepdims=a["keepdims"], exclude=a["exclude"])]


register(OpDef(
    name="nanprod", pattern="reduce", lowering=Decompose(_nanprod_build), attrs=_RED_ATTRS,
    infer_shape=_red_shape,
    reference=lambda attrs, ins, is_train: [_torch_prod(attrs, torch.where(
        torch.isnan(ins[0]), torch.ones((), dtype=ins[0].dtype), ins[0]))],
    gradient=lambda b, n: [b.op("_nan_mask", _prod_grad_of(b, n, n.inputs[0]), n.inputs[0])],
    doc="The product over axis with NaN counted as 1; the gradient is 0 where x is NaN."))


# -- norm ----------------------------------------------------------------------------------

def _parse_ord(v):
    o = parse_int(v)
    if o not in (1, 2):
        raise ValueError(f"norm only supports ord=1 and ord=2, got {o}")
    return o


def _norm_attrs(attrs):
    """The reduction attributes ``sum`` takes for norm's axis and keepdims."""
    return {"axis": attrs["axis"], "keepdims": attrs["keepdims"], "exclude": False}


def _norm_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    # any number of axes: mxnet 1.9.1 reduces over all of them (Frobenius over two)
    return [tuple(x)], [reduce_out_shape(_norm_attrs(attrs), tuple(x))]


def _norm_type(attrs, in_types):
    out = attrs["out_dtype"] or in_types[0]
    return in_types, [out]


def _norm_ref(attrs, ins, is_train):
    x = ins[0]
    s = _torch_sum(_norm_attrs(attrs), x.abs() if attrs["ord"] == 1 else x * x)
    return [s if attrs["ord"] == 1 else s.sqrt()]


def _norm_build(b, n, is_train=False):
    x, a = n.inputs[0], _norm_attrs(n.attrs)
    if n.attrs["ord"] == 1:
        y = b.op("sum", b.op("abs", x), **a)
    else:
        y = b.op("sqrt", b.op("sum", b.op("square", x), **a))
    if n.attrs["out_dtype"] is not None:
        y = b.op("Cast", y, dtype=n.attrs["out_dtype"])
    return [y]


def _norm_grad(b, n):
    x, shape, a = n.inputs[0], tuple(n.in_shapes[0]), _norm_attrs(n.attrs)
    dy = n.ograds[0]
    if n.attrs["ord"] == 1:
        return [b.op("sign", x) * _bcast(b, dy, a, shape)]
    # dy * x / y: NaN where the norm is 0 (0 * inf), as mxnet's
    return [x * _bcast(b, dy / n.outputs[0], a, shape)]


register(OpDef(
    name="norm", pattern="reduce", lowering=Decompose(_norm_build),
    attrs=[Attr("ord", _parse_ord, 2), Attr("axis", parse_optional_shape, None),
           Attr("out_dtype", lambda v: None if str(v) == "None" else parse_dtype(v), None),
           Attr("keepdims", parse_bool, False)],
    infer_shape=_norm_shape, infer_type=_norm_type, reference=_norm_ref, gradient=_norm_grad,
    doc="The L1 (ord=1) or L2 (ord=2) norm over axis (None: every axis)."))


# -- moments -------------------------------------------------------------------------------

def _moments_attrs(attrs, in_shape):
    if attrs["axes"] is None or len(attrs["axes"]) == 0:
        raise ShapeError(f"moments: empty axes is not supported for input shape "
                         f"{tuple(in_shape)}; pass every axis to do global moments")
    return {"axis": attrs["axes"], "keepdims": attrs["keepdims"], "exclude": False}


def _moments_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None, None]
    out = reduce_out_shape(_moments_attrs(attrs, x), tuple(x))
    return [tuple(x)], [out, out]


def _moments_ref(attrs, ins, is_train):
    x = ins[0]
    a = _moments_attrs(attrs, tuple(x.shape))
    axes = reduce_axes(a, tuple(x.shape))
    out = reduce_out_shape(a, tuple(x.shape))
    m = x.mean(dim=axes, keepdim=True)
    v = ((x - m) ** 2).mean(dim=axes, keepdim=True)
    return [m.reshape(out), v.reshape(out)]


def _moments_build(b, n, is_train=False):
    x, shape = n.inputs[0], tuple(n.in_shapes[0])
    a = _moments_attrs(n.attrs, shape)
    mean = b.op("mean", x, **a)
    d = x - _bcast(b, mean, a, shape)
    return [mean, b.op("mean", b.op("square", d), **a)]


def _moments_grad(b, n):
    x, shape = n.inputs[0], tuple(n.in_shapes[0])
    a = _moments_attrs(n.attrs, shape)
    count = prod(shape[i] for i in reduce_axes(a, shape))
    d = x - _bcast(b, n.outputs[0], a, shape)
    g = _bcast(b, n.ograds[0], a, shape) + d * _bcast(b, n.ograds[1], a, shape) * 2.0
    return [b.op("_mul_scalar", g, scalar=1.0 / count)]


register(OpDef(
    name="moments", pattern="reduce", lowering=Decompose(_moments_build),
    attrs=[Attr("axes", parse_optional_shape, None), Attr("keepdims", parse_bool, False)],
    outputs=("output0", "output1"), infer_shape=_moments_shape,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0], in_types[0]]),
    reference=_moments_ref, gradient=_moments_grad,
    doc="The mean and the (biased) variance over axes."))
