"""Spatial data movement: Pad, Crop and UpSampling, as mxnet 1.9.1 defines them.

All three are gathers, so they decompose into ops that are views or fuse as loads
(``slice_axis``, ``reverse``, ``broadcast_to``, ``Reshape``, ``Concat`` and constants):
no kernel family of their own. Bilinear UpSampling is mxnet's Deconvolution with the
given weight (a depthwise transposed convolution), decomposed into ``Deconvolution``.
Their gradients, needed before decomposition, are graph ops too.
"""
from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F

from .registry import (Attr, Decompose, OpDef, ShapeError, choice, get_op, parse_bool,
                       parse_count, parse_float, parse_int, parse_nonneg_int,
                       parse_positive_int, parse_shape, register)


def _place(b, v, shape, axis, before, after):
    """``v`` with zeros ``before`` and ``after`` it along ``axis`` (other dims of ``shape``)."""
    parts = []
    if before:
        parts.append(b.op("_zeros", shape=shape[:axis] + (before,) + shape[axis + 1:]))
    parts.append(v)
    if after:
        parts.append(b.op("_zeros", shape=shape[:axis] + (after,) + shape[axis + 1:]))
    return parts[0] if len(parts) == 1 else b.op("Concat", *parts, num_args=len(parts),
                                                  dim=axis)


# -- Pad --------------------------------------------------------------------------------

def _pad_pairs(attrs, dshape):
    """``[(axis, before, after)]`` of the padded axes, checked as mxnet checks them."""
    dshape = tuple(dshape)
    nd = len(dshape)
    if nd not in (4, 5):
        raise ShapeError(f"Pad: data of shape {dshape}: the implementation only supports "
                         f"4-D or 5-D input")
    pw = tuple(attrs["pad_width"])
    if len(pw) != 2 * nd:
        raise ShapeError(f"Pad: pad_width={pw} must have 2 values per dim of the {nd}-D "
                         f"data ({2 * nd})")
    if any(pw[:4]):
        raise ShapeError(f"Pad: pad_width={pw}: padding on the first two axes (batch, "
                         f"channel) must be zero")
    if any(v < 0 for v in pw):
        raise ShapeError(f"Pad: pad_width={pw} must be non-negative")
    pairs = [(a, pw[2 * a], pw[2 * a + 1]) for a in range(2, nd)]
    if attrs["mode"] == "reflect" and any(max(lo, hi) >= dshape[a] for a, lo, hi in pairs):
        raise ShapeError(f"Pad: reflect padding pad_width={pw} must be smaller than the "
                         f"data's size {dshape} in every padded dim")
    return [p for p in pairs if p[1] or p[2]]


def _pad_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    out = list(x)
    for a, lo, hi in _pad_pairs(attrs, x):
        out[a] += lo + hi
    return in_shapes, [tuple(out)]


def _pad_ref(attrs, ins, is_train):
    x = ins[0]
    pw = tuple(attrs["pad_width"])
    _pad_pairs(attrs, tuple(x.shape))
    pads = [v for a in reversed(range(2, x.dim())) for v in (pw[2 * a], pw[2 * a + 1])]
    mode = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}[attrs["mode"]]
    if mode == "constant":
        return [F.pad(x, pads, value=attrs["constant_value"])]
    return [F.pad(x, pads, mode=mode)]


def _pad_build(b, n, is_train):
    """Per padded axis, a Concat of the border pieces and the data."""
    x = n.inputs[0]
    shape = list(n.in_shapes[0])
    mode = n.attrs["mode"]
    for a, lo, hi in _pad_pairs(n.attrs, shape):
        size = shape[a]
        parts = []
        for width, first in ((lo, True), (hi, False)):
            if not width:
                parts.append(None)
                continue
            piece_shape = tuple(shape[:a] + [width] + shape[a + 1:])
            if mode == "constant":
                piece = b.op("_full", shape=piece_shape, value=n.attrs["constant_value"])
            elif mode == "edge":
                at = 0 if first else size - 1
                piece = b.op("broadcast_to", b.op("slice_axis", x, axis=a, begin=at, end=at + 1),
                             shape=piece_shape)
            else:       # reflect: the border excluded, mirrored
                lo_, hi_ = (1, width + 1) if first else (size - 1 - width, size - 1)
                piece = b.op("reverse", b.op("slice_axis", x, axis=a, begin=lo_, end=hi_),
                             axis=(a,))
            parts.append(piece)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        x = b.op("Concat", *pieces, num_args=len(pieces), dim=a)
        shape[a] += lo + hi
    return [x]


def _pad_gradient(b, n):
    """Undo the axes in reverse order: the middle of the gradient, plus (edge) the
    border sums at the first / last position or (reflect) the mirrored borders."""
    pairs = _pad_pairs(n.attrs, n.in_shapes[0])
    shape = list(n.out_shapes[0])
    g = n.ograds[0]
    mode = n.attrs["mode"]
    for a, lo, hi in reversed(pairs):
        size = shape[a] - lo - hi
        shape[a] = size
        tshape = tuple(shape)
        total = b.op("slice_axis", g, axis=a, begin=lo, end=lo + size)
        if mode != "constant":
            for width, first in ((lo, True), (hi, False)):
                if not width:
                    continue
                start = 0 if first else lo + size
                border = b.op("slice_axis", g, axis=a, begin=start, end=start + width)
                if mode == "edge":
                    border = b.op("sum", border, axis=(a,), keepdims=True)
                    at = 0 if first else size - 1
                    placed = _place(b, border, tshape, a, at, size - 1 - at)
                else:
                    border = b.op("reverse", border, axis=(a,))
                    at = 1 if first else size - 1 - width
                    placed = _place(b, border, tshape, a, at, size - at - width)
                total = total + placed
        g = total
    return [g]


register(OpDef(
    name="Pad", pattern="composite", lowering=Decompose(_pad_build), aliases=("pad",),
    attrs=[Attr("mode", choice("constant", "edge", "reflect")), Attr("pad_width", parse_shape),
           Attr("constant_value", parse_float, 0.0)],
    infer_shape=_pad_shape, reference=_pad_ref, gradient=_pad_gradient,
    dim_links=lambda attrs, i, o: [[("in", 0, 0), ("out", 0, 0)], [("in", 0, 1), ("out", 0, 1)]],
    doc="Pads the spatial dims of 4-D/5-D data: constant value, edge (repeat the border) "
        "or reflect (mirror, border excluded)."))


# -- Crop -------------------------------------------------------------------------------

def _crop_window(attrs, dshape, like):
    """``(offset_y, offset_x, h, w)`` of the crop, checked as mxnet's CropOp checks it."""
    dshape = tuple(dshape)
    if len(dshape) != 4:
        raise ShapeError(f"Crop: data of shape {dshape} must be 4-D (NCHW)")
    if attrs["num_args"] == 1:
        h, w = tuple(attrs["h_w"])
        if h < 1 or w < 1:
            raise ShapeError(f"Crop: h_w={tuple(attrs['h_w'])}: the crop height and width "
                             f"must be at least 1 (with one input h_w gives the size)")
    else:
        like = tuple(like)
        if len(like) != 4:
            raise ShapeError(f"Crop: crop_like of shape {like} must be 4-D (NCHW)")
        h, w = like[2], like[3]
    if h > dshape[2] or w > dshape[3]:
        raise ShapeError(f"Crop: the crop ({h}, {w}) is larger than the data {dshape}")
    if attrs["center_crop"]:
        oy, ox = (dshape[2] - h) // 2, (dshape[3] - w) // 2
    else:
        oy, ox = tuple(attrs["offset"])
        if not (0 <= oy <= dshape[2] - h and 0 <= ox <= dshape[3] - w):
            raise ShapeError(f"Crop: offset={(oy, ox)} leaves no room for a ({h}, {w}) crop of "
                             f"data {dshape}: at most ({dshape[2] - h}, {dshape[3] - w})")
    return oy, ox, h, w


def _pair(v):
    s = parse_shape(v)
    if len(s) != 2:
        raise ValueError(f"expected two values (y, x), got {s}")
    return s


def _crop_num_args(v):
    n = parse_count(v)
    if n not in (1, 2):
        raise ValueError(f"Crop takes 1 or 2 inputs, got num_args={n}")
    return n


def _crop_shape(attrs, in_shapes):
    x = in_shapes[0]
    like = in_shapes[1] if attrs["num_args"] == 2 else None
    if x is None or (attrs["num_args"] == 2 and like is None):
        return in_shapes, [None]
    _, _, h, w = _crop_window(attrs, x, like)
    return in_shapes, [tuple(x[:2]) + (h, w)]


def _crop_ref(attrs, ins, is_train):
    x = ins[0]
    oy, ox, h, w = _crop_window(attrs, tuple(x.shape),
                                tuple(ins[1].shape) if len(ins) > 1 else None)
    return [x[:, :, oy:oy + h, ox:ox + w]]


def _crop_build(b, n, is_train):
    oy, ox, h, w = _crop_window(n.attrs, n.in_shapes[0],
                                n.in_shapes[1] if len(n.in_shapes) > 1 else None)
    y = b.op("slice_axis", n.inputs[0], axis=2, begin=oy, end=oy + h)
    return [b.op("slice_axis", y, axis=3, begin=ox, end=ox + w)]


def _crop_gradient(b, n):
    """The output gradient placed in zeros; crop_like (only its shape is read) gets zeros."""
    x = tuple(n.in_shapes[0])
    oy, ox, h, w = _crop_window(n.attrs, x, n.in_shapes[1] if len(n.in_shapes) > 1 else None)
    g = _place(b, n.ograds[0], x[:2] + (h, x[3]), 3, ox, x[3] - ox - w)
    grads = [_place(b, g, x, 2, oy, x[2] - oy - h)]
    if len(n.in_shapes) > 1:
        grads.append(b.op("_zeros", shape=tuple(n.in_shapes[1])))
    return grads


register(OpDef(
    name="Crop", pattern="composite", lowering=Decompose(_crop_build),
    arguments=lambda attrs: ("data",) if attrs["num_args"] == 1 else ("data", "crop_like"),
    attrs=[Attr("num_args", _crop_num_args), Attr("offset", _pair, (0, 0)),
           Attr("h_w", _pair, (0, 0)), Attr("center_crop", parse_bool, False)],
    variadic="num_args", key_var_num_args="num_args",
    infer_shape=_crop_shape, reference=_crop_ref, gradient=_crop_gradient,
    doc="Crops the height and width of NCHW data to h_w or to crop_like's, at offset or "
        "centred."))


# -- UpSampling -------------------------------------------------------------------------

def _bilinear_geometry(scale):
    """mxnet's ``GetDeconvolutionParam``: kernel 2s - s % 2, stride s, pad ceil((s-1)/2)."""
    k = 2 * scale - scale % 2
    return k, scale, -(-(scale - 1) // 2)


def _up_scales(attrs, in_shapes):
    """Per nearest input, its scale: the first input's size times ``scale`` over its own."""
    first = tuple(in_shapes[0])
    oh, ow = first[2] * attrs["scale"], first[3] * attrs["scale"]
    scales = []
    for i, s in enumerate(in_shapes):
        s = tuple(s)
        if len(s) != 4:
            raise ShapeError(f"UpSampling: input {i} of shape {s} must be 4-D (NCHW)")
        if oh % s[2] or ow % s[3] or oh // s[2] != ow // s[3]:
            raise ShapeError(f"UpSampling: input {i} of shape {s} does not divide the output "
                             f"size ({oh}, {ow}) by one integer scale")
        scales.append(oh // s[2])
    return scales, oh, ow


def _up_shape(attrs, in_shapes):
    if attrs["sample_type"] == "bilinear":
        x = in_shapes[0]
        if x is None:
            return in_shapes, [None]
        x = tuple(x)
        if len(x) != 4:
            raise ShapeError(f"UpSampling: data of shape {x} must be 4-D (NCHW)")
        k, _, _ = _bilinear_geometry(attrs["scale"])
        want = (x[1], 1, k, k)
        w = in_shapes[1]
        if w is not None and tuple(w) != want:
            raise ShapeError(f"UpSampling: bilinear weight of shape {tuple(w)}, expected {want}")
        return [x, want], [x[:2] + (x[2] * attrs["scale"], x[3] * attrs["scale"])]
    if any(s is None for s in in_shapes):
        return in_shapes, [None]
    scales, oh, ow = _up_scales(attrs, in_shapes)
    chans = [s[1] for s in in_shapes]
    if attrs["multi_input_mode"] == "sum":
        if len(set(chans)) != 1:
            raise ShapeError(f"UpSampling: multi_input_mode='sum' needs the same number of "
                             f"channels in every input, got {chans}")
        c = chans[0]
    else:
        c = sum(chans)
    return in_shapes, [(in_shapes[0][0], c, oh, ow)]


def _deconv_attrs(attrs):
    k, s, p = _bilinear_geometry(attrs["scale"])
    return {"kernel": (k, k), "stride": (s, s), "pad": (p, p), "num_filter": attrs["num_filter"],
            "num_group": attrs["num_filter"], "no_bias": True, "workspace": attrs["workspace"]}


def _up_ref(attrs, ins, is_train):
    if attrs["sample_type"] == "bilinear":
        k, s, p = _bilinear_geometry(attrs["scale"])
        return [F.conv_transpose2d(ins[0], ins[1], None, s, p, groups=attrs["num_filter"])]
    scales, _, _ = _up_scales(attrs, [tuple(x.shape) for x in ins])
    ups = [F.interpolate(x, scale_factor=s, mode="nearest") if s > 1 else x
           for x, s in zip(ins, scales)]
    if attrs["multi_input_mode"] == "sum":
        return [sum(ups[1:], ups[0])]
    return [torch.cat(ups, dim=1)]


def _up_build(b, n, is_train):
    if n.attrs["sample_type"] == "bilinear":
        return [b.op("Deconvolution", n.inputs[0], n.inputs[1], **_deconv_attrs(n.attrs))]
    scales, _, _ = _up_scales(n.attrs, n.in_shapes)
    ups = []
    for x, shape, s in zip(n.inputs, n.in_shapes, scales):
        if s == 1:
            ups.append(x)
            continue
        nb, c, h, w = shape
        wide = b.op("broadcast_to", b.op("Reshape", x, shape=(nb, c, h, 1, w, 1)),
                    shape=(nb, c, h, s, w, s))
        ups.append(b.op("Reshape", wide, shape=(nb, c, h * s, w * s)))
    if n.attrs["multi_input_mode"] == "sum":
        out = ups[0]
        for u in ups[1:]:
            out = out + u
        return [out]
    return [ups[0] if len(ups) == 1 else b.op("Concat", *ups, num_args=len(ups), dim=1)]


def _up_gradient(b, n):
    """Nearest: each input's share of the gradient summed over its s x s copies;
    bilinear: Deconvolution's gradients."""
    if n.attrs["sample_type"] == "bilinear":
        deconv = get_op("Deconvolution")
        raw = {k: str(v) for k, v in _deconv_attrs(n.attrs).items()}
        return deconv.gradient(b, replace(n, attrs=deconv.parse_attrs(raw, n.name)))
    scales, _, _ = _up_scales(n.attrs, n.in_shapes)
    grads, c0 = [], 0
    for shape, s in zip(n.in_shapes, scales):
        nb, c, h, w = shape
        g = n.ograds[0]
        if n.attrs["multi_input_mode"] != "sum" and len(n.in_shapes) > 1:
            g = b.op("slice_axis", g, axis=1, begin=c0, end=c0 + c)
        c0 += c
        if s > 1:
            g = b.op("sum", b.op("Reshape", g, shape=(nb, c, h, s, w, s)), axis=(3, 5))
        grads.append(g)
    return grads


def _up_arguments(attrs):
    if attrs["sample_type"] == "bilinear":
        return ("data", "weight")
    return tuple(f"arg{i}" for i in range(attrs["num_args"]))


def _up_var_attrs(attrs):
    """mxnet's FSetInputVarAttrOnCompose: the second input, a variable, gets the bilinear
    initializer (whatever sample_type)."""
    args = _up_arguments(attrs)
    return {args[1]: {"__init__": '["bilinear", {}]'}} if len(args) > 1 else {}


register(OpDef(
    name="UpSampling", pattern="composite", lowering=Decompose(_up_build),
    arguments=_up_arguments,
    attrs=[Attr("scale", parse_positive_int), Attr("num_filter", parse_nonneg_int, 0),
           Attr("sample_type", choice("bilinear", "nearest")),
           Attr("multi_input_mode", choice("concat", "sum"), "concat"),
           Attr("num_args", parse_count), Attr("workspace", parse_nonneg_int, 512)],
    variadic="num_args", key_var_num_args="num_args", var_attrs=_up_var_attrs,
    infer_shape=_up_shape, reference=_up_ref, gradient=_up_gradient,
    doc="Nearest: each input repeated scale-fold along height and width (inputs after the "
        "first to the first's output size), concatenated on channels or summed; bilinear: "
        "the depthwise Deconvolution with the given weight (kernel 2s - s % 2, stride s)."))
