"""LayerNorm, InstanceNorm, L2Normalization and LRN, as mxnet 1.9.1 defines them:
attributes, defaults, outputs and their shapes.

Each is a ``Decompose`` into reductions and pointwise ops (so it fuses like
BatchNorm), with its gradient written as graph ops. Statistics are two-pass
(the mean, then the mean of squared deviations), as mxnet computes them.
"""
from __future__ import annotations

import torch

from .registry import (Attr, Decompose, OpDef, ShapeError, choice, merge_shape,
                       normalize_axis, parse_bool, parse_float, parse_int, prod, register)


def _reshape(b, ref, shape):
    return ref if tuple(ref.shape) == tuple(shape) else b.op("Reshape", ref, shape=tuple(shape))


def _types(n_out):
    """mxnet's ElemwiseType: data, gamma and beta share the first known dtype."""
    def infer_type(attrs, in_types):
        t = next((x for x in in_types if x is not None), None)
        return [t] * len(in_types), [t] * n_out
    return infer_type


def _normalize(b, x, red):
    """``(x - mean) / sqrt(var + eps)`` pieces over axes ``red`` (kept): mean, xc, var."""
    mean = b.op("mean", x, axis=red, keepdims=True)
    xc = x - mean
    var = b.op("mean", xc * xc, axis=red, keepdims=True)
    return mean, xc, var


def _norm_backward(b, dxhat, xhat, scale, red, m):
    """d/dx of ``xhat = (x - mean(x)) * scale`` over ``red`` (``m`` elements), given the
    gradient ``dxhat`` of ``xhat``: ``(dxhat - mean(dxhat) - xhat mean(dxhat xhat)) scale``."""
    s1 = b.op("sum", dxhat, axis=red, keepdims=True)
    s2 = b.op("sum", dxhat * xhat, axis=red, keepdims=True)
    return (dxhat - s1 * (1.0 / m) - xhat * (s2 * (1.0 / m))) * scale


# -- LayerNorm ---------------------------------------------------------------------------

def _ln_axes(attrs, shape):
    ax = normalize_axis(attrs["axis"], len(shape), "LayerNorm")
    kept = tuple(1 if i == ax else s for i, s in enumerate(shape))
    bshape = tuple(s if i == ax else 1 for i, s in enumerate(shape))
    return ax, kept, bshape


def _ln_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, None, None]
    ax, kept, _ = _ln_axes(attrs, d)
    c = (d[ax],)
    shapes = [d] + [merge_shape(s, c, f"LayerNorm {nm}") for s, nm in
                    zip(in_shapes[1:], ("gamma", "beta"))]
    return shapes, [tuple(d), kept, kept]


def _ln_ref(attrs, ins, is_train):
    x, gamma, beta = ins
    ax, _, bshape = _ln_axes(attrs, tuple(x.shape))
    mean = x.mean(dim=ax, keepdim=True)
    std = torch.sqrt(x.var(dim=ax, unbiased=False, keepdim=True) + attrs["eps"])
    out = (x - mean) / std * gamma.reshape(bshape) + beta.reshape(bshape)
    return [out, mean, std]


def _ln_build(b, n, is_train):
    x, gamma, beta = n.inputs
    ax, _, bshape = _ln_axes(n.attrs, n.in_shapes[0])
    mean, xc, var = _normalize(b, x, (ax,))
    std = b.op("sqrt", var + n.attrs["eps"])
    out = xc * (1.0 / std) * _reshape(b, gamma, bshape) + _reshape(b, beta, bshape)
    return [out, mean, std]


def _ln_gradient(b, n):
    x, gamma = n.inputs[0], n.inputs[1]
    dy = n.ograds[0]
    shape = n.in_shapes[0]
    ax, _, bshape = _ln_axes(n.attrs, shape)
    others = tuple(i for i in range(len(shape)) if i != ax)
    invstd = 1.0 / n.outputs[2]
    xhat = (x - n.outputs[1]) * invstd
    dx = _norm_backward(b, dy * _reshape(b, gamma, bshape), xhat, invstd, (ax,),
                        float(shape[ax]))
    c = (shape[ax],)
    dgamma = _reshape(b, b.op("sum", dy * xhat, axis=others), c) if others else dy * xhat
    dbeta = _reshape(b, b.op("sum", dy, axis=others), c) if others else b.op("_copy", dy)
    return [dx, dgamma, dbeta]


register(OpDef(
    name="LayerNorm", pattern="composite", lowering=Decompose(_ln_build),
    arguments=("data", "gamma", "beta"), outputs=("output", "mean", "std"),
    num_visible=lambda attrs: 3 if attrs["output_mean_var"] else 1,
    attrs=[Attr("axis", parse_int, -1), Attr("eps", parse_float, 1e-5),
           Attr("output_mean_var", parse_bool, False)],
    infer_shape=_ln_shape, infer_type=_types(3), reference=_ln_ref, gradient=_ln_gradient,
    doc="Layer normalization over `axis`: (x - mean) / sqrt(var + eps) * gamma + beta; "
        "outputs (out, mean, std) with `axis` kept as 1."))


# -- InstanceNorm ------------------------------------------------------------------------

def _in_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, None, None]
    if len(d) < 3:
        raise ShapeError(f"InstanceNorm: data must be (batch, channel, spatial...), at least "
                         f"3-D, got {tuple(d)}")
    c = (d[1],)
    shapes = [d] + [merge_shape(s, c, f"InstanceNorm {nm}") for s, nm in
                    zip(in_shapes[1:], ("gamma", "beta"))]
    return shapes, [tuple(d), (d[0], d[1]), (d[0], d[1])]


def _in_ref(attrs, ins, is_train):
    x, gamma, beta = ins
    red = tuple(range(2, x.dim()))
    bshape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
    mean = x.mean(dim=red, keepdim=True)
    var = x.var(dim=red, unbiased=False, keepdim=True)
    out = (x - mean) / torch.sqrt(var + attrs["eps"]) * gamma.reshape(bshape) + \
        beta.reshape(bshape)
    return [out, mean.reshape(x.shape[:2]), var.reshape(x.shape[:2])]


def _in_build(b, n, is_train):
    x, gamma, beta = n.inputs
    shape = n.in_shapes[0]
    red = tuple(range(2, len(shape)))
    bshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    mean, xc, var = _normalize(b, x, red)
    out = xc * (1.0 / b.op("sqrt", var + n.attrs["eps"])) * _reshape(b, gamma, bshape) + \
        _reshape(b, beta, bshape)
    return [out, _reshape(b, mean, shape[:2]), _reshape(b, var, shape[:2])]


def _in_gradient(b, n):
    x, gamma = n.inputs[0], n.inputs[1]
    dy = n.ograds[0]
    shape = n.in_shapes[0]
    red = tuple(range(2, len(shape)))
    kept = tuple(shape[:2]) + (1,) * (len(shape) - 2)
    bshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    invstd = 1.0 / b.op("sqrt", _reshape(b, n.outputs[2], kept) + n.attrs["eps"])
    xhat = (x - _reshape(b, n.outputs[1], kept)) * invstd
    dx = _norm_backward(b, dy * _reshape(b, gamma, bshape), xhat, invstd, red,
                        float(prod(shape[2:])))
    per_c = (0,) + red
    c = (shape[1],)
    return [dx, _reshape(b, b.op("sum", dy * xhat, axis=per_c), c),
            _reshape(b, b.op("sum", dy, axis=per_c), c)]


register(OpDef(
    name="InstanceNorm", pattern="composite", lowering=Decompose(_in_build),
    arguments=("data", "gamma", "beta"), outputs=("output", "mean", "var"),
    num_visible=lambda attrs: 1,
    attrs=[Attr("eps", parse_float, 1e-3)],
    infer_shape=_in_shape, infer_type=_types(3), reference=_in_ref, gradient=_in_gradient,
    doc="Instance normalization: each (sample, channel) over its spatial positions, "
        "then gamma and beta per channel."))


# -- L2Normalization ---------------------------------------------------------------------

def _l2_axes(attrs, shape):
    mode = attrs["mode"]
    if mode == "instance":
        return tuple(range(1, len(shape)))
    if len(shape) < 2 or (mode == "spatial" and len(shape) < 3):
        raise ShapeError(f"L2Normalization: mode={mode!r} needs data with "
                         f"{'3' if mode == 'spatial' else '2'} or more dims, got {tuple(shape)}")
    return (1,) if mode == "channel" else tuple(range(2, len(shape)))


def _l2_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, None]
    red = _l2_axes(attrs, d)
    return in_shapes, [tuple(d), tuple(s for i, s in enumerate(d) if i not in red)]


def _l2_ref(attrs, ins, is_train):
    x = ins[0]
    red = _l2_axes(attrs, tuple(x.shape))
    norm = torch.sqrt((x * x).sum(dim=red, keepdim=True) + attrs["eps"])
    return [x / norm, norm.reshape([s for i, s in enumerate(x.shape) if i not in red])]


def _l2_build(b, n, is_train):
    x = n.inputs[0]
    red = _l2_axes(n.attrs, n.in_shapes[0])
    norm = b.op("sqrt", b.op("sum", x * x, axis=red, keepdims=True) + n.attrs["eps"])
    return [x * (1.0 / norm), _reshape(b, norm, n.out_shapes[1])]


def _l2_gradient(b, n):
    x = n.inputs[0]
    dy = n.ograds[0]
    shape = n.in_shapes[0]
    red = _l2_axes(n.attrs, shape)
    kept = tuple(1 if i in red else s for i, s in enumerate(shape))
    invnorm = 1.0 / _reshape(b, n.outputs[1], kept)
    out = x * invnorm
    return [(dy - out * b.op("sum", dy * out, axis=red, keepdims=True)) * invnorm]


register(OpDef(
    name="L2Normalization", pattern="composite", lowering=Decompose(_l2_build),
    arguments=("data",), outputs=("output", "norm"), num_visible=lambda attrs: 1,
    attrs=[Attr("eps", parse_float, 1e-10),
           Attr("mode", choice("instance", "channel", "spatial"), "instance")],
    infer_shape=_l2_shape, infer_type=_types(2), reference=_l2_ref, gradient=_l2_gradient,
    doc="x / sqrt(sum(x^2) + eps) over all but the batch axis (instance), the channel "
        "axis (channel) or the spatial axes (spatial)."))


# -- LRN ---------------------------------------------------------------------------------
# mxnet's LRN: norm = knorm + alpha / nsize * chpool_sum(x^2, nsize) and
# out = x * norm^-beta, where chpool_sum sums the channels [c - nsize//2, c + nsize//2]
# (mshadow's channel pooling, zero outside; an even nsize spans nsize + 1 channels, as
# there). Gradient (the same file): dy * norm^-beta
#   - 2 alpha beta / nsize * x * chpool_sum(dy * x * norm^(-beta - 1), nsize).

def _channel_window_sum(b, v, shape, nsize):
    """Sum over the channel window of every channel: zero-padded shifted slices."""
    h = nsize // 2
    c = shape[1]
    if h == 0:
        return v
    pad = tuple(h if i == 1 else s for i, s in enumerate(shape))
    z = b.op("_zeros", shape=pad)
    padded = b.op("Concat", z, v, z, num_args=3, dim=1)
    total = None
    for k in range(2 * h + 1):
        part = b.op("slice_axis", padded, axis=1, begin=k, end=k + c)
        total = part if total is None else total + part
    return total


def _lrn_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is not None and len(d) < 3:
        raise ShapeError(f"LRN: data must be (batch, channel, spatial...), got {tuple(d)}")
    if attrs["nsize"] < 1:
        raise ShapeError(f"LRN: nsize must be at least 1, got {attrs['nsize']}")
    return in_shapes, [None if d is None else tuple(d)] * 2


def _lrn_ref(attrs, ins, is_train):
    x = ins[0]
    h = attrs["nsize"] // 2
    sq = torch.nn.functional.pad(x * x, (0, 0) * (x.dim() - 2) + (h, h))
    window = sum(sq[:, k:k + x.shape[1]] for k in range(2 * h + 1))
    norm = attrs["knorm"] + attrs["alpha"] / attrs["nsize"] * window
    return [x * norm ** -attrs["beta"], norm]


def _lrn_build(b, n, is_train):
    x = n.inputs[0]
    a = n.attrs
    window = _channel_window_sum(b, x * x, n.in_shapes[0], a["nsize"])
    norm = b.op("_plus_scalar", b.op("_mul_scalar", window, scalar=a["alpha"] / a["nsize"]),
                scalar=a["knorm"])
    return [x * b.op("_power_scalar", norm, scalar=-a["beta"]), norm]


def _lrn_gradient(b, n):
    x, dy, norm = n.inputs[0], n.ograds[0], n.outputs[1]
    a = n.attrs
    inner = dy * x * b.op("_power_scalar", norm, scalar=-a["beta"] - 1.0)
    spread = _channel_window_sum(b, inner, n.in_shapes[0], a["nsize"])
    return [dy * b.op("_power_scalar", norm, scalar=-a["beta"]) +
            b.op("_mul_scalar", x * spread, scalar=-2.0 * a["alpha"] * a["beta"] / a["nsize"])]


register(OpDef(
    name="LRN", pattern="composite", lowering=Decompose(_lrn_build),
    arguments=("data",), outputs=("output", "tmp_norm"), num_visible=lambda attrs: 1,
    attrs=[Attr("alpha", parse_float, 1e-4), Attr("beta", parse_float, 0.75),
           Attr("knorm", parse_float, 2.0), Attr("nsize", parse_int)],
    infer_shape=_lrn_shape, infer_type=_types(2), reference=_lrn_ref, gradient=_lrn_gradient,
    doc="Local response normalization across channels: x * (knorm + alpha / nsize * "
        "sum over the nsize-channel window of x^2)^-beta."))
