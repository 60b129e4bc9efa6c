"""LeakyReLU with every ``act_type`` of mxnet 1.9.1:

* ``leaky``: ``x > 0 ? x : slope * x``
* ``elu``: ``x > 0 ? x : slope * (exp(x) - 1)``
* ``selu``: ``lambda * (x > 0 ? x : alpha * (exp(x) - 1))`` with mxnet's constants
* ``gelu``: the erf form ``0.5 * x * (1 + erf(x / sqrt(2)))``
* ``prelu``: ``x > 0 ? x : gamma * x`` with a learned argument ``gamma``, ``(C,)`` by
  default (channel axis 1), laid along data dims 0 and 1 as mxnet's ``expand_shape``
  does: ``(1,)``, ``(C,)`` and ``(N, C)`` all broadcast
* ``rrelu``: ``x > 0 ? x : mask * x``; training draws ``mask`` per element from
  ``U[lower_bound, upper_bound)`` (the seeded generator, as Dropout); inference uses
  ``(lower_bound + upper_bound) / 2``. The symbol has two outputs, ``output`` and
  ``mask``, as mxnet's (in inference mxnet leaves ``mask`` unwritten; here it holds
  the slope used).

LeakyReLU is a composite: its gradient is written on it, then ``decompose``
rewrites it into the pointwise operators below (``rrelu`` differently in training
and inference, so only that act_type makes a symbol mode dependent).

Gradients are the true derivatives. mxnet 1.9.1's ``selu`` backward differs for
``x <= 0``: it multiplies the head gradient by ``lambda * (alpha + y)`` where the
derivative is ``y + lambda * alpha`` (``mshadow_op::selu_grad`` applied to the
output), so its gradients there are off by ``(lambda - 1) * y``.
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from .elemwise import broadcast_shape, same_shape
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, choice, parse_float,
                       register)

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_LAMBDA = 1.0507009873554804934193349852946
_SQRT1_2 = 0.7071067811865476          # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327     # 1 / sqrt(2 pi)

ACT_TYPES = ("leaky", "prelu", "rrelu", "elu", "selu", "gelu")
_ATTRS = [Attr("act_type", choice(*ACT_TYPES), "leaky"),
          Attr("slope", parse_float, 0.25),
          Attr("lower_bound", parse_float, 0.125),
          Attr("upper_bound", parse_float, 0.334)]


# -- the data-only act_types: forward (x) and backward (dy, x, y) rows --------------------

def _fwd_expr(attrs, x):
    act, s = attrs["act_type"], attrs["slope"]
    if act == "leaky":
        return ops.where(x > 0, x, x * s)
    if act == "elu":
        return ops.where(x > 0, x, s * (ops.exp(x) - 1.0))
    if act == "selu":
        return ops.where(x > 0, SELU_LAMBDA * x, SELU_LAMBDA * SELU_ALPHA * (ops.exp(x) - 1.0))
    if act == "gelu":
        return 0.5 * x * (1.0 + ops.erf(x * _SQRT1_2))
    raise ValueError(f"_leaky_relu: act_type {act} has no pointwise form")


def _fwd_ref(attrs, x):
    act, s = attrs["act_type"], attrs["slope"]
    if act == "leaky":
        return torch.where(x > 0, x, x * s)
    if act == "elu":
        return torch.where(x > 0, x, s * torch.expm1(x))
    if act == "selu":
        return SELU_LAMBDA * torch.where(x > 0, x, SELU_ALPHA * torch.expm1(x))
    return 0.5 * x * (1.0 + torch.erf(x * _SQRT1_2))       # gelu


def _bwd_expr(attrs, dy, x, y):
    act, s = attrs["act_type"], attrs["slope"]
    if act == "leaky":
        return ops.where(x > 0, dy, dy * s)
    if act == "elu":
        return ops.where(x > 0, dy, dy * (y + s))
    if act == "selu":
        return ops.where(x > 0, dy * SELU_LAMBDA, dy * (y + SELU_LAMBDA * SELU_ALPHA))
    if act == "gelu":        # Phi(x) + x * phi(x)
        return dy * (0.5 * (1.0 + ops.erf(x * _SQRT1_2)) +
                     x * _INV_SQRT_2PI * ops.exp(-0.5 * x * x))
    raise ValueError(f"_backward_LeakyReLU: act_type {act} has no pointwise form")


def _bwd_ref(attrs, ins, is_train):
    dy, x, y = ins
    act, s = attrs["act_type"], attrs["slope"]
    if act == "leaky":
        return [torch.where(x > 0, dy, dy * s)]
    if act == "elu":
        return [torch.where(x > 0, dy, dy * (y + s))]
    if act == "selu":
        return [torch.where(x > 0, dy * SELU_LAMBDA, dy * (y + SELU_LAMBDA * SELU_ALPHA))]
    cdf = 0.5 * (1.0 + torch.erf(x * _SQRT1_2))
    return [dy * (cdf + x * _INV_SQRT_2PI * torch.exp(-0.5 * x * x))]


register(OpDef(
    name="_leaky_relu", pattern="elemwise", lowering=Pointwise(_fwd_expr), attrs=_ATTRS,
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [_fwd_ref(attrs, ins[0])],
    doc="LeakyReLU's leaky / elu / selu / gelu forms, after decomposition."))
register(OpDef(
    name="_backward_LeakyReLU", pattern="elemwise", lowering=Pointwise(_bwd_expr),
    arguments=("ograd", "data", "output"), attrs=_ATTRS, infer_shape=same_shape,
    reference=_bwd_ref, doc="The gradient of ``_leaky_relu`` from (dy, x, y)."))


# -- a slope given as a tensor (prelu's gamma, rrelu's mask) --------------------------------

register(OpDef(
    name="_xelu", pattern="broadcast", arguments=("data", "slope"),
    lowering=Pointwise(lambda attrs, x, s: ops.where(x > 0, x, x * s)),
    infer_shape=broadcast_shape,
    reference=lambda attrs, ins, is_train: [torch.where(ins[0] > 0, ins[0], ins[0] * ins[1])],
    doc="x > 0 ? x : slope * x, slope broadcast (numpy rule)."))
register(OpDef(
    name="_xelu_grad", pattern="broadcast", arguments=("ograd", "data", "slope"),
    lowering=Pointwise(lambda attrs, dy, x, s: ops.where(x > 0, dy, dy * s)),
    infer_shape=broadcast_shape,
    reference=lambda attrs, ins, is_train: [torch.where(ins[1] > 0, ins[0], ins[0] * ins[2])],
    doc="dy where x > 0, else dy * slope (slope broadcast)."))
register(OpDef(
    name="_prelu_gamma_grad", pattern="elemwise", arguments=("ograd", "data"),
    lowering=Pointwise(lambda attrs, dy, x: ops.where(x > 0, 0.0, x * dy)),
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [torch.where(
        ins[1] > 0, torch.zeros_like(ins[0]), ins[1] * ins[0])],
    doc="x > 0 ? 0 : x * dy, before its sum over gamma's broadcast dims."))


# -- prelu's gamma layout ------------------------------------------------------------------

def gamma_layout(gshape, dshape) -> tuple:
    """gamma's shape laid over the data dims, 1 elsewhere (mxnet's ``expand_shape``).

    gamma's dims, from its last, take data dims 1 and 0 where the sizes agree or
    gamma's is 1; anything left over cannot broadcast.
    """
    gshape, dshape = tuple(gshape), tuple(dshape)
    out, s = [1] * len(dshape), len(gshape) - 1
    for i in range(len(dshape) - 1, -1, -1):
        if s >= 0 and i <= 1 and (dshape[i] == gshape[s] or gshape[s] == 1):
            out[i] = gshape[s]
            s -= 1
    if s != -1:
        raise ShapeError(
            f"LeakyReLU(act_type='prelu'): gamma of shape {gshape} cannot broadcast to data "
            f"{dshape}: gamma runs along data axes 0 and 1 only; give gamma shape "
            f"({dshape[1] if len(dshape) > 1 else 'C'},) (one slope per channel) or (1,)")
    return tuple(out)


def _laid_gamma(b, gamma, gshape, dshape):
    laid = gamma_layout(gshape, dshape)
    return gamma if laid == tuple(gshape) else b.op("Reshape", gamma, shape=laid)


# -- LeakyReLU ------------------------------------------------------------------------------

def _is(act):
    return lambda attrs: attrs["act_type"] == act


def _shape(attrs, in_shapes):
    d = in_shapes[0]
    n_out = 2 if attrs["act_type"] == "rrelu" else 1
    if attrs["act_type"] != "prelu":
        return [d], [d] * n_out
    g = in_shapes[1]
    if d is None:
        return in_shapes, [None]
    if len(d) < 2:
        raise ShapeError(f"LeakyReLU(act_type='prelu'): data must have at least 2 dims "
                         f"(gamma is per channel, axis 1), got {tuple(d)}")
    g = (d[1],) if g is None else tuple(g)
    gamma_layout(g, d)
    return [tuple(d), g], [tuple(d)]


def _types(attrs, in_types):
    known = [t for t in in_types if t is not None]
    t = known[0] if known else None
    n_out = 2 if attrs["act_type"] == "rrelu" else 1
    return [t if x is None else x for x in in_types], [t] * n_out


def _dim_links(attrs, in_ranks, out_ranks):
    rank = in_ranks[0] if in_ranks[0] is not None else out_ranks[0]
    if rank is None:
        return []
    return [[("in", 0, k)] + [("out", i, k) for i in range(len(out_ranks))]
            for k in range(rank)]


def _rrelu_slope(attrs):
    return (attrs["lower_bound"] + attrs["upper_bound"]) / 2.0


def _ref(attrs, ins, is_train):
    x, act = ins[0], attrs["act_type"]
    if act == "prelu":
        g = ins[1].reshape(gamma_layout(ins[1].shape, x.shape))
        return [torch.where(x > 0, x, x * g)]
    if act == "rrelu":
        lo, hi = attrs["lower_bound"], attrs["upper_bound"]
        if is_train:
            mask = torch.rand(x.shape, dtype=x.dtype, device=x.device) * (hi - lo) + lo
        else:
            mask = torch.full_like(x, _rrelu_slope(attrs))
        return [torch.where(x > 0, x, x * mask), mask]
    return [_fwd_ref(attrs, x)]


def _build(b, n, is_train):
    x, act = n.inputs[0], n.attrs["act_type"]
    if act == "prelu":
        return [b.op("_xelu", x, _laid_gamma(b, n.inputs[1], n.in_shapes[1], n.in_shapes[0]))]
    if act != "rrelu":
        return [b.op("_leaky_relu", x, act_type=act, slope=n.attrs["slope"])]
    shape = tuple(n.in_shapes[0])
    lo, hi = n.attrs["lower_bound"], n.attrs["upper_bound"]
    if not is_train:
        slope = _rrelu_slope(n.attrs)
        return [b.op("_leaky_relu", x, act_type="leaky", slope=slope),
                b.op("_full", shape=shape, value=slope)]
    u = b.op("_random_uniform", shape=shape)
    mask = b.op("_plus_scalar", b.op("_mul_scalar", u, scalar=hi - lo), scalar=lo)
    return [b.op("_xelu", x, mask), mask]


def _gradient(b, n):
    x, dy, act = n.inputs[0], n.ograds[0], n.attrs["act_type"]
    if act == "rrelu":       # mxnet: xelu_grad(output, mask) * dy; the mask gets none
        return [b.op("_xelu_grad", dy, n.outputs[0], n.outputs[1])]
    if act != "prelu":
        return [b.op("_backward_LeakyReLU", dy, x, n.outputs[0], act_type=act,
                     slope=n.attrs["slope"])]
    gshape, dshape = tuple(n.in_shapes[1]), tuple(n.in_shapes[0])
    dx = b.op("_xelu_grad", dy, x, _laid_gamma(b, n.inputs[1], gshape, dshape))
    laid = gamma_layout(gshape, dshape)
    dg = b.op("_prelu_gamma_grad", dy, x)
    if laid != dshape:
        dg = b.op("_sum_to_shape", dg, shape=laid)
    if laid != gshape:
        dg = b.op("Reshape", dg, shape=gshape)
    return [dx, dg]


register(OpDef(
    name="LeakyReLU", pattern="composite", lowering=Decompose(_build), attrs=_ATTRS,
    arguments=lambda attrs: ("data", "gamma") if attrs["act_type"] == "prelu" else ("data",),
    outputs=lambda attrs: ("output", "mask") if attrs["act_type"] == "rrelu" else ("output",),
    mode_dependent=_is("rrelu"), infer_shape=_shape, infer_type=_types,
    dim_links=_dim_links, reference=_ref, gradient=_gradient,
    var_attrs=lambda attrs: {"gamma": {"__init__": '["Constant", {"value": 0.25}]'}}
    if attrs["act_type"] == "prelu" else {},
    doc=__doc__.split("\n\n")[0]))
