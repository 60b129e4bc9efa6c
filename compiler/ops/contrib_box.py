"""mxnet 1.9.1's box geometry operators that need no sort: ``_contrib_box_iou``,
``_contrib_box_encode``, ``_contrib_box_decode`` (mxnet's contrib bounding-box operators) and
``_contrib_MultiBoxPrior`` (alias ``_npx_multibox_prior``).

All are index math on the last axis of 4 coordinates: each coordinate is a
``slice_axis`` view, the formulas are pointwise (broadcast) ops in mxnet's order of
operations, and the results are joined with ``Concat``. ``box_encode`` reads each sample's
matched reference box with ``take`` on the flattened ``(B * M, 4)`` references (clipped, so
an unmatched ``-1`` reads a real row; its target is zeroed anyway). ``MultiBoxPrior`` is a
constant of the data's height and width built from ``_axis_index``. mxnet back-propagates
zeros through all four (``MakeZeroGradNodes``, and backward kernels that write zeros).
"""
from __future__ import annotations

import numpy as np
import torch

from .contrib_common import cast_to, parse_float32, require_rank, zero_gradients
from .registry import (Attr, Decompose, OpDef, ShapeError, _literal, choice, parse_bool,
                       prod, register)


def _col(b, v, k):
    """Coordinate ``k`` of boxes ``v`` (last axis 4), keeping the axis (a view)."""
    return b.op("slice_axis", v, axis=len(v.shape) - 1, begin=k, end=k + 1)


def _check_boxes(op, what, shape, rank=2):
    require_rank(op, what, shape, rank, at_least=True)
    if shape[-1] != 4:
        raise ShapeError(f"{op}: {what} of shape {tuple(shape)}: the last dim must be 4")


# -- box_iou -------------------------------------------------------------------------------

def _iou_shape(attrs, in_shapes):
    lhs, rhs = in_shapes
    if lhs is None or rhs is None:
        return in_shapes, [None]
    _check_boxes("box_iou", "lhs", lhs)
    _check_boxes("box_iou", "rhs", rhs)
    return in_shapes, [tuple(lhs[:-1]) + tuple(rhs[:-1])]


def _sides(b, box, axis, center):
    """``(low, high)`` edges of boxes along x (``axis`` 0) or y (1)."""
    a, c = _col(b, box, axis), _col(b, box, axis + 2)
    if not center:
        return a, c
    half = b.op("_div_scalar", c, scalar=2.0)
    return a - half, a + half


def _area(b, box, center):
    if center:
        w, h = _col(b, box, 2), _col(b, box, 3)
    else:
        w, h = _col(b, box, 2) - _col(b, box, 0), _col(b, box, 3) - _col(b, box, 1)
    negative = b.op("_greater_scalar", b.op("elemwise_add", b.op("_lesser_scalar", w, scalar=0.0),
                                            b.op("_lesser_scalar", h, scalar=0.0)), scalar=0.5)
    return b.op("where", negative, b.zeros_like(w), b.op("elemwise_mul", w, h))


def _iou_build(b, n, is_train):
    lhs_shape, rhs_shape = n.in_shapes
    left, right = prod(lhs_shape[:-1]), prod(rhs_shape[:-1])
    lb = b.op("Reshape", n.inputs[0], shape=(left, 1, 4))
    rb = b.op("Reshape", n.inputs[1], shape=(1, right, 4))
    center = n.attrs["format"] == "center"
    overlap = []
    for axis in (0, 1):
        (l_lo, l_hi), (r_lo, r_hi) = _sides(b, lb, axis, center), _sides(b, rb, axis, center)
        width = b.op("broadcast_minimum", r_hi, l_hi) - b.op("broadcast_maximum", r_lo, l_lo)
        overlap.append(b.op("relu", width))
    inter = b.op("elemwise_mul", *overlap)                                  # (L, R, 1)
    union = b.op("broadcast_add", _area(b, lb, center), _area(b, rb, center)) - inter
    hit = b.op("_greater_scalar", inter, scalar=0.0)       # no 0 / 0 where nothing overlaps
    union = b.op("where", hit, union, b.op("ones_like", union))
    iou = b.op("where", hit, b.op("elemwise_div", inter, union), b.zeros_like(inter))
    return [b.op("Reshape", iou, shape=tuple(lhs_shape[:-1]) + tuple(rhs_shape[:-1]))]


def _t_sides(box, axis, center):
    a, c = box[..., axis], box[..., axis + 2]
    return (a - c / 2, a + c / 2) if center else (a, c)


def _iou_ref(attrs, ins, is_train):
    lhs, rhs = ins
    center = attrs["format"] == "center"
    lb = lhs.reshape(-1, 1, 4)
    rb = rhs.reshape(1, -1, 4)
    inter = 1.0
    for axis in (0, 1):
        (l0, l1), (r0, r1) = _t_sides(lb, axis, center), _t_sides(rb, axis, center)
        inter = inter * (torch.minimum(l1, r1) - torch.maximum(l0, r0)).clamp(min=0)

    def area(v):
        w, h = (v[..., 2], v[..., 3]) if center else (v[..., 2] - v[..., 0], v[..., 3] - v[..., 1])
        return torch.where((w < 0) | (h < 0), torch.zeros_like(w), w * h)
    iou = torch.where(inter > 0, inter / (area(lb) + area(rb) - inter), torch.zeros_like(inter))
    return [iou.reshape(tuple(lhs.shape[:-1]) + tuple(rhs.shape[:-1]))]


_FORMAT = choice("corner", "center")

register(OpDef(
    name="_contrib_box_iou", pattern="composite", lowering=Decompose(_iou_build),
    arguments=("lhs", "rhs"), attrs=[Attr("format", _FORMAT, "corner")],
    infer_shape=_iou_shape, reference=_iou_ref, gradient=zero_gradients,
    doc="Intersection over union of every lhs box with every rhs box (corner or center "
        "format): shape lhs.shape[:-1] + rhs.shape[:-1]; zero gradients."))


# -- box_encode ----------------------------------------------------------------------------

def _encode_shape(attrs, in_shapes):
    samples, matches, anchors, refs, means, stds = in_shapes
    op = "box_encode"
    if samples is not None:
        require_rank(op, "samples", samples, 2)
    if matches is not None:
        require_rank(op, "matches", matches, 2, at_least=True)
    ins = list(in_shapes)
    ins[4] = means if means is not None else (4,)
    ins[5] = stds if stds is not None else (4,)
    for what, s in (("means", ins[4]), ("stds", ins[5])):
        if tuple(s) != (4,):
            raise ShapeError(f"{op}: {what} of shape {tuple(s)} must be (4,)")
    if anchors is None or refs is None:
        return ins, [anchors, anchors]
    for what, s in (("anchors", anchors), ("refs", refs)):
        _check_boxes(op, what, s, 3)
        require_rank(op, what, s, 3)
    b_, n_ = anchors[0], anchors[1]
    for what, s in (("samples", samples), ("matches", matches)):
        if s is not None and prod(s) != b_ * n_:
            raise ShapeError(f"{op}: {what} of shape {tuple(s)} must hold one value per "
                             f"anchor ({b_}, {n_})")
    return ins, [tuple(anchors), tuple(anchors)]


def _center_form(b, box):
    """``(x, y, w, h)`` of corner boxes, as mxnet computes them."""
    w = _col(b, box, 2) - _col(b, box, 0)
    h = _col(b, box, 3) - _col(b, box, 1)
    return _col(b, box, 0) + w * 0.5, _col(b, box, 1) + h * 0.5, w, h


def _coef(b, v, k, rank):
    """Element ``k`` of a ``(4,)`` input, shaped to broadcast over ``rank`` dims."""
    return b.op("Reshape", b.op("slice_axis", v, axis=0, begin=k, end=k + 1), shape=(1,) * rank)


def _encode_build(b, n, is_train):
    samples, matches, anchors, refs, means, stds = n.inputs
    bsz, num = n.in_shapes[2][:2]
    m = n.in_shapes[3][1]
    base = b.op("_mul_scalar", b.op("_axis_index", shape=(bsz, num), axis=0), scalar=float(m))
    row = base + b.op("trunc", b.op("Reshape", cast_to(b, matches, "float32"), shape=(bsz, num)))
    ref = b.op("take", b.op("Reshape", refs, shape=(bsz * m, 4)), row, axis=0)   # (B, N, 4)
    anchors = b.op("Reshape", anchors, shape=(bsz, num, 4))
    rx, ry, rw, rh = _center_form(b, ref)
    ax, ay, aw, ah = _center_form(b, anchors)
    raw = [(rx - ax) / aw, (ry - ay) / ah, b.op("log", rw / aw), b.op("log", rh / ah)]
    parts = [b.op("broadcast_div", b.op("broadcast_sub", v, _coef(b, means, k, 3)),
                  _coef(b, stds, k, 3)) for k, v in enumerate(raw)]
    targets = b.op("Concat", *parts, num_args=4, dim=2)
    valid = b.op("_greater_scalar", b.op("Reshape", samples, shape=(bsz, num, 1)), scalar=0.5)
    mask = b.op("broadcast_to", valid, shape=(bsz, num, 4))
    return [b.op("where", mask, targets, b.zeros_like(targets)), b.op("_copy", mask)]


def _encode_ref(attrs, ins, is_train):
    samples, matches, anchors, refs, means, stds = ins
    bsz, num = anchors.shape[:2]
    j = matches.reshape(bsz, num).trunc().long().clamp(0, refs.shape[1] - 1)
    ref = torch.stack([refs[i][j[i]] for i in range(bsz)])

    def center(v):
        w, h = v[..., 2] - v[..., 0], v[..., 3] - v[..., 1]
        return v[..., 0] + w * 0.5, v[..., 1] + h * 0.5, w, h
    (rx, ry, rw, rh), (ax, ay, aw, ah) = center(ref), center(anchors.reshape(bsz, num, 4))
    raw = torch.stack([(rx - ax) / aw, (ry - ay) / ah, torch.log(rw / aw),
                       torch.log(rh / ah)], -1)
    valid = (samples.reshape(bsz, num, 1) > 0.5).expand(bsz, num, 4)
    t = torch.where(valid, (raw - means) / stds, torch.zeros_like(raw))
    return [t, valid.to(anchors.dtype)]


register(OpDef(
    name="_contrib_box_encode", pattern="composite", lowering=Decompose(_encode_build),
    arguments=("samples", "matches", "anchors", "refs", "means", "stds"),
    outputs=("output0", "output1"),
    infer_shape=_encode_shape, reference=_encode_ref, gradient=zero_gradients,
    infer_type=lambda attrs, in_types: ([next((t for t in in_types if t), None)] * 6,
                                        [next((t for t in in_types if t), None)] * 2),
    doc="Training targets of matched anchors ((ref - anchor) center offsets over the "
        "anchor's size, log size ratios; minus means, over stds) and their masks; zero "
        "targets where samples <= 0.5."))


# -- box_decode ----------------------------------------------------------------------------

def _decode_shape(attrs, in_shapes):
    data, anchors = in_shapes
    if data is None:
        return in_shapes, [None]
    _check_boxes("box_decode", "data", data, 3)
    require_rank("box_decode", "data", data, 3)
    if anchors is not None:
        _check_boxes("box_decode", "anchors", anchors, 3)
        if prod(anchors) < 4 * data[1]:
            raise ShapeError(f"box_decode: anchors of shape {tuple(anchors)} hold fewer than "
                             f"the {data[1]} boxes data {tuple(data)} decodes")
    return in_shapes, [tuple(data)]


def _decode_build(b, n, is_train):
    data, anchors = n.inputs
    num = n.in_shapes[0][1]
    flat = b.op("Reshape", anchors, shape=(prod(n.in_shapes[1]) // 4, 4))
    if flat.shape[0] != num:       # mxnet reads the first N boxes of anchors
        flat = b.op("slice_axis", flat, axis=0, begin=0, end=num)
    anc = b.op("Reshape", flat, shape=(1, num, 4))
    if n.attrs["format"] == "corner":
        ax, ay, aw, ah = _center_form(b, anc)
    else:
        ax, ay, aw, ah = (_col(b, anc, k) for k in range(4))
    a = n.attrs
    ox = b.op("broadcast_add", b.op("broadcast_mul", _col(b, data, 0) * a["std0"], aw), ax)
    oy = b.op("broadcast_add", b.op("broadcast_mul", _col(b, data, 1) * a["std1"], ah), ay)
    dw, dh = _col(b, data, 2) * a["std2"], _col(b, data, 3) * a["std3"]
    if a["clip"] > 0:
        dw = b.op("_minimum_scalar", dw, scalar=a["clip"])
        dh = b.op("_minimum_scalar", dh, scalar=a["clip"])
    ow = b.op("broadcast_mul", b.op("exp", dw), aw) * 0.5
    oh = b.op("broadcast_mul", b.op("exp", dh), ah) * 0.5
    return [b.op("Concat", ox - ow, oy - oh, ox + ow, oy + oh, num_args=4, dim=2)]


def _decode_ref(attrs, ins, is_train):
    data, anchors = ins
    anc = anchors.reshape(-1, 4)[:data.shape[1]][None]
    ax, ay, aw, ah = anc.unbind(-1)
    if attrs["format"] == "corner":
        aw, ah = aw - ax, ah - ay
        ax, ay = ax + aw * 0.5, ay + ah * 0.5
    d = data.unbind(-1)
    ox, oy = d[0] * attrs["std0"] * aw + ax, d[1] * attrs["std1"] * ah + ay
    dw, dh = d[2] * attrs["std2"], d[3] * attrs["std3"]
    if attrs["clip"] > 0:
        dw, dh = dw.clamp(max=attrs["clip"]), dh.clamp(max=attrs["clip"])
    ow, oh = torch.exp(dw) * aw * 0.5, torch.exp(dh) * ah * 0.5
    return [torch.stack([ox - ow, oy - oh, ox + ow, oy + oh], -1)]


register(OpDef(
    name="_contrib_box_decode", pattern="composite", lowering=Decompose(_decode_build),
    arguments=("data", "anchors"),
    attrs=[Attr("std0", parse_float32, 1.0), Attr("std1", parse_float32, 1.0),
           Attr("std2", parse_float32, 1.0), Attr("std3", parse_float32, 1.0),
           Attr("clip", parse_float32, -1.0), Attr("format", _FORMAT, "center")],
    infer_shape=_decode_shape, reference=_decode_ref, gradient=zero_gradients,
    doc="Corner boxes from predicted center offsets and log sizes (times std0..std3, sizes "
        "clipped at `clip` when positive) relative to anchors (center or corner format)."))


# -- MultiBoxPrior -------------------------------------------------------------------------

def _floats(v):
    val = _literal(v) if isinstance(v, str) else v
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return (float(val),)
    if not isinstance(val, (tuple, list)):
        raise ValueError(f"not a tuple of numbers: {v!r}")
    return tuple(float(x) for x in val)


def _check_prior_attrs(attrs):
    if not attrs["sizes"] or not attrs["ratios"]:
        raise ShapeError("MultiBoxPrior: sizes and ratios must not be empty")
    if len(attrs["steps"]) != 2 or len(attrs["offsets"]) != 2:
        raise ShapeError(f"MultiBoxPrior: steps {attrs['steps']} and offsets "
                         f"{attrs['offsets']} must hold two values (y, x)")
    if not all(0.0 <= o <= 1.0 for o in attrs["offsets"]):
        raise ShapeError(f"MultiBoxPrior: offsets {attrs['offsets']} must lie in [0, 1]")
    if attrs["steps"][0] * attrs["steps"][1] < 0:
        raise ShapeError("MultiBoxPrior: must specify both step_y and step_x")


def _prior_shape(attrs, in_shapes):
    x = in_shapes[0]
    _check_prior_attrs(attrs)
    if x is None:
        return in_shapes, [None]
    require_rank("MultiBoxPrior", "data", x, 4, at_least=True)
    count = len(attrs["sizes"]) + len(attrs["ratios"]) - 1
    return in_shapes, [(1, x[2] * x[3] * count, 4)]


def _prior_geometry(attrs, h, w):
    """float32 ``(step_y, step_x)`` and per anchor ``(half width, half height)``."""
    f = np.float32
    sy, sx = attrs["steps"]
    if sy <= 0 or sx <= 0:
        sy, sx = f(1.0) / f(h), f(1.0) / f(w)
    sizes, ratios = [f(s) for s in attrs["sizes"]], [f(r) for r in attrs["ratios"]]
    pairs = [(s, np.sqrt(ratios[0])) for s in sizes] + [(sizes[0], np.sqrt(r))
                                                         for r in ratios[1:]]
    halves = [(float(s * f(h) / f(w) * r / f(2)), float(s / r / f(2))) for s, r in pairs]
    return float(f(sy)), float(f(sx)), halves


def _constant_column(b, values, count):
    parts = [b.op("_full", shape=(1, 1, 1, 1), value=v) for v in values]
    return parts[0] if count == 1 else b.op("Concat", *parts, num_args=count, dim=2)


def _prior_build(b, n, is_train):
    a = n.attrs
    h, w = n.in_shapes[0][2:4]
    sy, sx, halves = _prior_geometry(a, h, w)
    count = len(halves)
    grid = (h, w, count, 1)
    cy = b.op("_axis_index", shape=grid, axis=0)
    cx = b.op("_axis_index", shape=grid, axis=1)
    cy = b.op("_plus_scalar", cy, scalar=float(np.float32(a["offsets"][0]))) * sy
    cx = b.op("_plus_scalar", cx, scalar=float(np.float32(a["offsets"][1]))) * sx
    hw = _constant_column(b, [v[0] for v in halves], count)
    hh = _constant_column(b, [v[1] for v in halves], count)
    out = b.op("Concat", b.op("broadcast_sub", cx, hw), b.op("broadcast_sub", cy, hh),
               b.op("broadcast_add", cx, hw), b.op("broadcast_add", cy, hh),
               num_args=4, dim=3)
    if a["clip"]:
        out = b.op("clip", out, a_min=0.0, a_max=1.0)
    out = b.op("Reshape", out, shape=(1, h * w * count, 4))
    return [cast_to(b, out, n.inputs[0].dtype)]


def _prior_ref(attrs, ins, is_train):
    x = ins[0]
    h, w = x.shape[2:4]
    sy, sx, halves = _prior_geometry(attrs, h, w)
    cy = ((torch.arange(h, dtype=torch.float64) + attrs["offsets"][0]) * sy)[:, None, None]
    cx = ((torch.arange(w, dtype=torch.float64) + attrs["offsets"][1]) * sx)[None, :, None]
    hw = torch.tensor([v[0] for v in halves], dtype=torch.float64)[None, None, :]
    hh = torch.tensor([v[1] for v in halves], dtype=torch.float64)[None, None, :]
    shape = (h, w, len(halves))
    out = torch.stack([(cx - hw).expand(shape), (cy - hh).expand(shape),
                       (cx + hw).expand(shape), (cy + hh).expand(shape)], -1)
    if attrs["clip"]:
        out = out.clamp(0.0, 1.0)
    return [out.reshape(1, -1, 4).to(x.dtype)]


register(OpDef(
    name="_contrib_MultiBoxPrior", aliases=("_npx_multibox_prior",), pattern="composite",
    lowering=Decompose(_prior_build),
    attrs=[Attr("sizes", _floats, (1.0,)), Attr("ratios", _floats, (1.0,)),
           Attr("clip", parse_bool, False), Attr("steps", _floats, (-1.0, -1.0)),
           Attr("offsets", _floats, (0.5, 0.5))],
    infer_shape=_prior_shape, reference=_prior_ref, gradient=zero_gradients,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    doc="SSD prior boxes (corner format) for every position of data's height x width: "
        "sizes with the first ratio, then the first size with the other ratios."))
