"""More nn and loss operators of mxnet 1.9.1: SoftmaxActivation, softmin, hard_sigmoid,
softmax_cross_entropy, SVMOutput, GroupNorm, IdentityAttachKLSparseReg and khatri_rao
(as mxnet's operators of those names define them), with the internal ops some lower to
(``_backward_hard_sigmoid``, ``_svm_output_grad``).

Most are ``Decompose`` rewrites into softmax, reductions and pointwise ops; their
gradients are mxnet's formulas written as graph ops, including where mxnet's differs
from the derivative of its forward (SoftmaxActivation's instance mode, see there).
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from ..ir.expr import ops
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, choice, merge_shape,
                       normalize_axis, parse_bool, parse_count, parse_dtype, parse_float,
                       parse_int, parse_optional_float, prod, register)


def _reshape(b, ref, shape):
    return ref if tuple(ref.shape) == tuple(shape) else b.op("Reshape", ref, shape=tuple(shape))


def _same(attrs, in_shapes):
    return in_shapes, [in_shapes[0]]


def _in_range(lo, hi):
    """mxnet's ``set_range``: a float within [lo, hi]."""
    def parse(v):
        f = parse_float(v)
        if not lo <= f <= hi:
            raise ValueError(f"{f} is outside the bound [{lo:g}, {hi:g}]")
        return f
    return parse


# -- SoftmaxActivation ---------------------------------------------------------------------
# instance: softmax over the last axis (mshadow's FlatTo2D view: (all but last, last));
# channel: over axis 1 (data of rank 3 or more). The gradient (SoftmaxActivationGradCompute)
# views every input as (batch, channel, rest) and sums over the channel axis in BOTH modes:
# for instance-mode data of rank 3 or more that is not the derivative of the forward, and
# mxnet 1.9.1 computes exactly that. 1-D data has a forward but no gradient there.

def _sa_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is not None and attrs["mode"] == "channel" and len(d) < 3:
        raise ShapeError(f"SoftmaxActivation: input need to have a least 3 dimensions when "
                         f"mode=channel, got data of shape {tuple(d)}")
    return in_shapes, [d]


def _sa_axis(attrs):
    return 1 if attrs["mode"] == "channel" else -1


def _sa_ref(attrs, ins, is_train):
    return [torch.softmax(ins[0], dim=_sa_axis(attrs))]


def _sa_gradient(b, n):
    y, dy = n.outputs[0], n.ograds[0]
    if len(n.in_shapes[0]) < 2:
        raise MXNetError(f"SoftmaxActivation '{n.name}': mxnet 1.9.1 has no gradient for "
                         f"1-D data (its backward reads the channel dim, axis 1)")
    return [y * (dy - b.op("sum", dy * y, axis=(1,), keepdims=True))]


register(OpDef(
    name="SoftmaxActivation", pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [b.op("softmax", n.inputs[0],
                                                    axis=_sa_axis(n.attrs))]),
    attrs=[Attr("mode", choice("instance", "channel"), "instance")],
    infer_shape=_sa_shape, reference=_sa_ref, gradient=_sa_gradient,
    doc="softmax over the last axis (instance) or axis 1 (channel); gradient "
        "y * (dy - sum(dy * y, axis=1)) as mxnet computes it."))


# -- softmin ---------------------------------------------------------------------------------

def _temperature(attrs):
    t = attrs["temperature"]
    return 1.0 if t is None else t


def _softmin_shape(attrs, in_shapes):
    if attrs["use_length"]:
        raise ShapeError("softmin: use_length=True is not supported (as softmax)")
    if in_shapes[0] is not None:
        normalize_axis(attrs["axis"], len(in_shapes[0]), "softmin")
    return in_shapes, [in_shapes[0]]


def _softmin_gradient(b, n):
    """softmax's gradient of -x / T: dx = -y * (dy - sum(dy * y, axis)) / T."""
    y, dy, ax = n.outputs[0], n.ograds[0], n.attrs["axis"]
    g = y * (dy - b.op("sum", dy * y, axis=ax, keepdims=True))
    return [b.op("_mul_scalar", g, scalar=-1.0 / _temperature(n.attrs))]


register(OpDef(
    name="softmin", pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [b.op(
        "softmax", b.op("negative", n.inputs[0]), axis=n.attrs["axis"],
        temperature=n.attrs["temperature"])]),
    attrs=[Attr("axis", parse_int, -1), Attr("temperature", parse_optional_float, None),
           Attr("dtype", lambda v: None if str(v) == "None" else parse_dtype(v), None),
           Attr("use_length", parse_bool, False)],
    infer_shape=_softmin_shape,
    infer_type=lambda attrs, in_types: (in_types, [attrs["dtype"] or in_types[0]]),
    reference=lambda attrs, ins, is_train: [torch.softmax(-ins[0] / _temperature(attrs),
                                                          dim=attrs["axis"])],
    gradient=_softmin_gradient,
    doc="softmax(-x / temperature) along `axis`."))


# -- hard_sigmoid ------------------------------------------------------------------------------

def _hs_math(attrs, x):
    # mxnet's order: clip above, then below, as comparisons (a NaN stays NaN)
    r = attrs["alpha"] * x + attrs["beta"]
    r = ops.where(r > 1.0, 1.0, r)
    return ops.where(r < 0.0, 0.0, r)


def _hs_grad_math(attrs, dy, x):
    v = attrs["alpha"] * x + attrs["beta"]
    return ops.where(ops.and_(v > 0.0, v < 1.0), dy * attrs["alpha"], 0.0)


_HS_ATTRS = [Attr("alpha", parse_float, 0.2), Attr("beta", parse_float, 0.5)]

register(OpDef(
    name="hard_sigmoid", pattern="elemwise", lowering=Pointwise(_hs_math), attrs=_HS_ATTRS,
    infer_shape=_same,
    reference=lambda attrs, ins, is_train: [torch.clamp(attrs["alpha"] * ins[0] +
                                                        attrs["beta"], 0.0, 1.0)],
    gradient=lambda b, n: [b.op("_backward_hard_sigmoid", n.ograds[0], n.inputs[0],
                                alpha=n.attrs["alpha"], beta=n.attrs["beta"])],
    doc="max(0, min(1, alpha * x + beta))."))


def _hs_grad_ref(attrs, ins, is_train):
    dy, x = ins
    v = attrs["alpha"] * x + attrs["beta"]
    return [torch.where((v > 0) & (v < 1), dy * attrs["alpha"], torch.zeros_like(dy))]


register(OpDef(
    name="_backward_hard_sigmoid", pattern="elemwise", lowering=Pointwise(_hs_grad_math),
    arguments=("ograd", "data"), attrs=_HS_ATTRS, infer_shape=lambda attrs, s: (s, [s[0]]),
    reference=_hs_grad_ref,
    doc="dy * alpha where 0 < alpha * x + beta < 1 (strictly), else 0."))


# -- softmax_cross_entropy ----------------------------------------------------------------------

def _sce_shape(attrs, in_shapes):
    d, lab = in_shapes
    if d is not None and len(d) != 2:
        raise ShapeError(f"softmax_cross_entropy: SoftmaxCrossEntropy only accept 2D data, "
                         f"got data of shape {tuple(d)}")
    if lab is not None and len(lab) != 1:
        raise ShapeError(f"softmax_cross_entropy: SoftmaxCrossEntropy only accept 1D label, "
                         f"got label of shape {tuple(lab)}")
    if d is not None:
        lab = merge_shape(lab, (d[0],), f"softmax_cross_entropy label (one per row of data "
                                        f"{tuple(d)})")
    return [d, lab], [(1,)]


def _sce_ref(attrs, ins, is_train):
    x, lab = ins
    p = torch.softmax(x, dim=1)
    picked = p.gather(1, lab.detach().long().clamp(0, x.shape[1] - 1).reshape(-1, 1))
    return [-torch.log(torch.clamp(picked, min=1e-8)).sum().reshape(1)]


def _sce_build(b, n, is_train):
    x, lab = n.inputs
    picked = b.op("pick", b.op("softmax", x, axis=1), lab, axis=1)
    # mxnet: -log(max(p, 1e-8)) per row, summed into one element
    nll = b.op("negative", b.op("log", b.op("_maximum_scalar", picked, scalar=1e-8)))
    return [b.op("sum", nll)]


def _sce_gradient(b, n):
    """dy * (softmax(x) - one_hot(label)) (the clamp has no gradient there); the label
    gets none (mxnet refuses one)."""
    x, lab = n.inputs
    g = b.op("_softmax_ce_grad", b.op("softmax", x, axis=1), lab, axis=1)
    return [g * n.ograds[0], b.zeros_like(lab)]


register(OpDef(
    name="softmax_cross_entropy", pattern="composite", lowering=Decompose(_sce_build),
    arguments=("data", "label"), infer_shape=_sce_shape, reference=_sce_ref,
    gradient=_sce_gradient,
    doc="sum over rows of -log(max(softmax(data)[row, label[row]], 1e-8)), shape (1,)."))


# -- SVMOutput -----------------------------------------------------------------------------------
# Forward: the identity. Backward (a loss: the head gradient is ignored), per row of the
# (all but last, last) view with k = int(label[row]), as mxnet's SVMOutput computes it:
#   L2: x == k: -reg * 2 (margin - x) if margin > x;  else: -reg * -2 (margin + x) if margin > -x
#   L1: x == k: -reg if margin > x;                   else: reg if margin > -x
# (else 0).

def _svm_shape(attrs, in_shapes):
    d, lab = in_shapes
    if d is None:
        return in_shapes, [None]
    if len(d) < 2:
        raise ShapeError(f"SVMOutput: data must have at least 2 dimensions (rows, classes), "
                         f"got {tuple(d)}")
    lab = merge_shape(lab, tuple(d[:-1]), f"SVMOutput label (data {tuple(d)} without its "
                                           f"last dim)")
    return [tuple(d), lab], [tuple(d)]


def _svm_grad_math(attrs, x, label, *, coords):
    c = coords[-1]
    hit = ops.eq(ops.const(0) if c is None else c, ops.to_int32(label))
    m, reg = attrs["margin"], attrs["regularization_coefficient"]
    if attrs["use_linear"]:
        at_k = ops.where(m > x, -reg, 0.0)
        other = ops.where(m > -x, reg, 0.0)
    else:
        at_k = ops.where(m > x, 2.0 * (m - x), 0.0) * -reg
        other = ops.where(m > -x, -2.0 * (m + x), 0.0) * -reg
    return ops.where(hit, at_k, other)


def _svm_grad_ref(attrs, ins, is_train):
    x, label = ins
    c = x.shape[-1]
    hit = label.detach().long().unsqueeze(-1) == torch.arange(c, device=x.device)
    m, reg = attrs["margin"], attrs["regularization_coefficient"]
    zero = torch.zeros_like(x)
    if attrs["use_linear"]:
        at_k = torch.where(m > x, zero - reg, zero)
        other = torch.where(m > -x, zero + reg, zero)
    else:
        at_k = torch.where(m > x, 2 * (m - x), zero) * -reg
        other = torch.where(m > -x, -2 * (m + x), zero) * -reg
    return [torch.where(hit, at_k, other)]


_SVM_ATTRS = [Attr("margin", parse_float, 1.0),
              Attr("regularization_coefficient", parse_float, 1.0),
              Attr("use_linear", parse_bool, False)]

register(OpDef(
    name="_svm_output_grad", pattern="broadcast",
    lowering=Pointwise(_svm_grad_math,
                       lambda attrs, in_shapes, out: [list(range(len(out))),
                                                      list(range(len(out) - 1))]),
    needs_coords=True, arguments=("data", "label"), attrs=_SVM_ATTRS,
    infer_shape=_svm_shape, reference=_svm_grad_ref,
    doc="SVMOutput's gradient at the output x and the label (see svm_output.cc)."))


register(OpDef(
    name="SVMOutput", pattern="composite", is_loss=True,
    lowering=Decompose(lambda b, n, is_train: [b.op("_copy", n.inputs[0])]),
    arguments=("data", "label"), attrs=_SVM_ATTRS, infer_shape=_svm_shape,
    reference=lambda attrs, ins, is_train: [ins[0]],
    gradient=lambda b, n: [b.op("_svm_output_grad", n.outputs[0], n.inputs[1], **n.attrs),
                           b.zeros_like(n.inputs[1])],
    doc="The identity forward; backward the L2-SVM (or L1 with use_linear) hinge "
        "gradient of the one-vs-all margin loss, times regularization_coefficient."))


# -- GroupNorm -------------------------------------------------------------------------------------
# mxnet 1.9.1: channels split into num_groups groups; mean and std = sqrt(var + eps) per
# (sample, group) over the group's channels and spatial positions; gamma and beta have one
# entry per GROUP (shape (num_groups,), as GroupNormShape assigns), not per channel.

def _gn_geometry(attrs, d):
    """``(grouped shape (N, G, rest), param shape (1, G, 1))``."""
    g = attrs["num_groups"]
    return (d[0], g, prod(d[1:]) // g), (1, g, 1)


def _gn_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, None, None]
    g = attrs["num_groups"]
    if len(d) < 3:
        raise ShapeError(f"GroupNorm: data must be (batch, channel, spatial...), at least "
                         f"3-D, got {tuple(d)}")
    if d[1] % g:
        raise ShapeError(f"GroupNorm: # of channels must be divisible by # of groups: "
                         f"{d[1]} channels (data {tuple(d)}), num_groups={g}")
    shapes = [tuple(d)] + [merge_shape(s, (g,), f"GroupNorm {nm} (one per group)")
                           for s, nm in zip(in_shapes[1:], ("gamma", "beta"))]
    return shapes, [tuple(d), (d[0], g), (d[0], g)]


def _gn_ref(attrs, ins, is_train):
    x, gamma, beta = ins
    grouped, pshape = _gn_geometry(attrs, tuple(x.shape))
    x3 = x.reshape(grouped)
    mean = x3.mean(dim=2, keepdim=True)
    std = torch.sqrt(((x3 - mean) ** 2).mean(dim=2, keepdim=True) + attrs["eps"])
    out = (x3 - mean) / std * gamma.reshape(pshape) + beta.reshape(pshape)
    return [out.reshape(x.shape), mean.reshape(grouped[:2]), std.reshape(grouped[:2])]


def _gn_build(b, n, is_train):
    x, gamma, beta = n.inputs
    d = n.in_shapes[0]
    grouped, pshape = _gn_geometry(n.attrs, d)
    x3 = _reshape(b, x, grouped)
    mean = b.op("mean", x3, axis=(2,), keepdims=True)
    xc = x3 - mean
    std = b.op("sqrt", b.op("mean", xc * xc, axis=(2,), keepdims=True) + n.attrs["eps"])
    out = xc / std * _reshape(b, gamma, pshape) + _reshape(b, beta, pshape)
    return [_reshape(b, out, d), _reshape(b, mean, grouped[:2]), _reshape(b, std, grouped[:2])]


def _gn_gradient(b, n):
    """mxnet's: with xhat = (x - mean) / std and w = dy * gamma / std per group,
    dx = w - mean(w) - xhat * mean(w * xhat); dgamma = sum(dy * xhat), dbeta = sum(dy)
    over all but the group axis."""
    x, gamma = n.inputs[0], n.inputs[1]
    d = n.in_shapes[0]
    grouped, pshape = _gn_geometry(n.attrs, d)
    kept = grouped[:2] + (1,)
    dy = _reshape(b, n.ograds[0], grouped)
    std = _reshape(b, n.outputs[2], kept)
    xhat = (_reshape(b, x, grouped) - _reshape(b, n.outputs[1], kept)) / std
    w = dy * _reshape(b, gamma, pshape) / std
    dx = (w - b.op("mean", w, axis=(2,), keepdims=True)
          - xhat * b.op("mean", w * xhat, axis=(2,), keepdims=True))
    g = (n.attrs["num_groups"],)
    return [_reshape(b, dx, d),
            _reshape(b, b.op("sum", dy * xhat, axis=(0, 2)), g),
            _reshape(b, b.op("sum", dy, axis=(0, 2)), g)]


def _types(n_out):
    """mxnet's ElemwiseType: every input and output share the first known dtype."""
    def infer_type(attrs, in_types):
        t = next((x for x in in_types if x is not None), None)
        return [t] * len(in_types), [t] * n_out
    return infer_type


register(OpDef(
    name="GroupNorm", pattern="composite", lowering=Decompose(_gn_build),
    arguments=("data", "gamma", "beta"), outputs=("output", "mean", "std"),
    num_visible=lambda attrs: 3 if attrs["output_mean_var"] else 1,
    attrs=[Attr("num_groups", parse_int, 1), Attr("eps", parse_float, 1e-5),
           Attr("output_mean_var", parse_bool, False)],
    infer_shape=_gn_shape, infer_type=_types(3), reference=_gn_ref, gradient=_gn_gradient,
    doc="Group normalization: (x - mean) / sqrt(var + eps) * gamma + beta per (sample, "
        "group), gamma and beta of shape (num_groups,); outputs (out, mean, std)."))


# -- IdentityAttachKLSparseReg ---------------------------------------------------------------
# Forward: the identity. mxnet updates the moving average in its BACKWARD:
#   moving_avg = momentum * moving_avg + (1 - momentum) * mean(data, axis=0)
#   dx = dy + penalty * (-target / moving_avg + (1 - target) / (1 - moving_avg))
# with the updated average. Here the update is a training forward's (as BatchNorm's); the
# hidden output ``moving_avg_new`` carries it to the gradient. A training step (forward,
# then backward) leaves the same numbers; a training forward with no backward updates the
# average where mxnet would not.

def _kl_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, None]
    if len(d) != 2:
        raise ShapeError(f"IdentityAttachKLSparseReg: data must be 2-D (batch, units), got "
                         f"{tuple(d)}: mxnet's kernel averages the (all but last, last) view "
                         f"of data into moving_avg of shape (data.shape[1],), which agree "
                         f"only for 2-D data")
    avg = merge_shape(in_shapes[1], (d[1],), "IdentityAttachKLSparseReg moving_avg")
    return [tuple(d), avg], [tuple(d), avg]


def _kl_new_avg(attrs, x, avg):
    return attrs["momentum"] * avg + (1 - attrs["momentum"]) * x.mean(dim=0)


def _kl_ref(attrs, ins, is_train):
    x, avg = ins
    if not is_train:
        return [x, avg]
    new = _kl_new_avg(attrs, x.detach(), avg)
    return [x, new, new]


def _kl_build(b, n, is_train):
    x, avg = n.inputs
    out = b.op("_copy", x)
    if not is_train:
        return [out, b.op("_copy", avg)]
    m = n.attrs["momentum"]
    new = b.op("_mul_scalar", avg, scalar=m) + b.op(
        "_mul_scalar", b.op("mean", x, axis=(0,)), scalar=1.0 - m)
    return [out, new, new]


def _kl_gradient(b, n):
    dy, avg = n.ograds[0], n.outputs[1]
    t, p = n.attrs["sparseness_target"], n.attrs["penalty"]
    reg = b.op("_rdiv_scalar", avg, scalar=-t) + b.op(
        "_rdiv_scalar", b.op("_rminus_scalar", avg, scalar=1.0), scalar=1.0 - t)
    return [dy + b.op("_mul_scalar", reg, scalar=p), None]


register(OpDef(
    name="IdentityAttachKLSparseReg", pattern="composite", lowering=Decompose(_kl_build),
    aux=("moving_avg",), outputs=("output", "moving_avg_new"), num_visible=lambda attrs: 1,
    mode_dependent=True,
    var_attrs=lambda attrs: {"moving_avg": {"__init__": '["zero", {}]'}},
    attrs=[Attr("sparseness_target", _in_range(0, 1), 0.1), Attr("penalty", parse_float, 1e-3),
           Attr("momentum", _in_range(0, 1), 0.9)],
    infer_shape=_kl_shape, infer_type=_types(2), reference=_kl_ref, gradient=_kl_gradient,
    doc="The identity; its gradient adds penalty * (-target / a + (1 - target) / (1 - a)) "
        "with a the moving average of mean(data, axis=0) (a KL sparseness penalty)."))


# -- khatri_rao ---------------------------------------------------------------------------------

def _num_args(v):
    """mxnet's ``set_lower_bound(1)``."""
    n = parse_count(v)
    if n < 1:
        raise ValueError(f"must be at least 1, got {n}")
    return n


def _kr_shape(attrs, in_shapes):
    if any(s is None for s in in_shapes):
        return in_shapes, [None]
    for i, s in enumerate(in_shapes):
        if len(s) != 2:
            raise ShapeError(f"khatri_rao: input arg{i} must be a matrix, got shape {tuple(s)}")
        if s[1] != in_shapes[0][1]:
            raise ShapeError(f"khatri_rao: every input needs {in_shapes[0][1]} columns (arg0 "
                             f"{tuple(in_shapes[0])}), arg{i} has shape {tuple(s)}")
    return in_shapes, [(prod(s[0] for s in in_shapes), in_shapes[0][1])]


def _kr_ref(attrs, ins, is_train):
    out = ins[0]
    for a in ins[1:]:
        out = (out.unsqueeze(1) * a.unsqueeze(0)).reshape(-1, a.shape[1])
    return [out]


def _kr_build(b, n, is_train):
    """Each matrix (M_i, N) placed along its own dim of (M_1, ..., M_k, N); the
    broadcast product, flattened to (M_1 ... M_k, N)."""
    k = len(n.inputs)
    out = None
    for i, (a, s) in enumerate(zip(n.inputs, n.in_shapes)):
        placed = _reshape(b, a, tuple(s[0] if j == i else 1 for j in range(k)) + (s[1],))
        out = placed if out is None else b.op("broadcast_mul", out, placed)
    if k == 1:
        out = b.op("_copy", out)
    return [_reshape(b, out, n.out_shapes[0])]


register(OpDef(
    name="khatri_rao", pattern="composite", lowering=Decompose(_kr_build),
    arguments=lambda attrs: [f"arg{i}" for i in range(attrs["num_args"])],
    attrs=[Attr("num_args", _num_args)],
    variadic="num_args", key_var_num_args="num_args",
    infer_shape=_kr_shape, infer_type=_types(1), reference=_kr_ref,
    doc="Column-wise Khatri-Rao product: out[(i_1, ..., i_k), n] = prod_j arg_j[i_j, n]. "
        "No gradient (mxnet 1.9.1 registers none)."))
