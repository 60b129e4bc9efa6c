"""mxnet 1.9.1's region operators of Faster / Mask R-CNN, as extern launches
(``registry.Extern``): ``_contrib_ROIAlign`` and its gradient ``_backward_ROIAlign``,
``_contrib_Proposal`` and ``_contrib_MultiProposal``.

``ROIAlign`` averages, per output bin, bilinear samples on a grid of ``sample_ratio`` (or
``ceil(roi size / pooled size)``) points per axis; every roi's grid is built as tensors and
gathered (forward) or scattered with ``index_put_(accumulate=True)`` (gradient) on the
context's device. As in mxnet: ``rois`` is ``(R, 5)`` ``[batch, x1, y1, x2, y2]``; without
``aligned`` a roi is at least 1x1; a sample more than one pixel outside the map reads
nothing; ``position_sensitive`` reads channel ``c * ph * pw + i * pw + j`` for bin
``(i, j)``. A roi whose batch index is negative gives zeros (mxnet writes one zero and
leaves the rest of that roi's output unset) and no gradient. The rois get a zero gradient.

``Proposal`` (one image) and ``MultiProposal`` (a batch) decode RPN anchors, clip them to
the image, mark boxes smaller than ``rpn_min_size * scale`` and those past the image's
feature extent with score -1, take the ``rpn_pre_nms_top_n`` best (stable sort), suppress
with IoU above ``threshold`` (``+1`` pixel areas) and return ``rpn_post_nms_top_n`` rows
``[batch, x1, y1, x2, y2]``, repeating the kept boxes cyclically when fewer survive; the
hidden (or, with ``output_score``, visible) second output holds their scores. They compute
in float32 (mxnet's ``real_t``) on the host and back-propagate zeros.
"""
from __future__ import annotations

import math

import torch

from ..errors import MXNetError
from .contrib_common import require_rank, zero_gradients
from .detection import f32, float_tuple, host
from .registry import (Attr, Extern, OpDef, ShapeError, parse_bool, parse_float, parse_int,
                       parse_shape, register)


# -- ROIAlign --------------------------------------------------------------------------------

def _pooled(v):
    s = parse_shape(v)
    if len(s) != 2 or min(s) < 1:
        raise ValueError(f"pooled_size must be 2 positive integers (h, w), got {v!r}")
    return s


def _align_shape(attrs, in_shapes):
    d, r = in_shapes
    if d is None or r is None:
        return in_shapes, [None]
    require_rank("ROIAlign", "data", d, 4)
    if len(r) != 2 or r[1] != 5:
        raise ShapeError(f"ROIAlign: rois of shape {tuple(r)} must be (num_rois, 5)")
    ph, pw = attrs["pooled_size"]
    c = d[1]
    if attrs["position_sensitive"]:
        if c % (ph * pw):
            raise ShapeError(f"ROIAlign: data {tuple(d)} has {c} channels, not a multiple of "
                             f"pooled_size {ph}x{pw} (position_sensitive)")
        c //= ph * pw
    return [tuple(d), tuple(r)], [(r[0], c, ph, pw)]


def _axis_samples(start, size, pooled, grid, extent, dtype):
    """Per (bin, sample) along one axis: low and high index, the high weight, and
    whether the sample lies on the map (mxnet's bilinear_interpolate rules)."""
    p = torch.arange(pooled, dtype=dtype)[:, None]
    i = torch.arange(grid, dtype=dtype)[None, :]
    binsz = size / pooled
    pos = start + p * binsz + (i + 0.5) * binsz / grid
    inside = ~((pos < -1.0) | (pos > extent))
    pos = pos.clamp(min=0)
    low = pos.to(torch.int64)
    top = low >= extent - 1
    low = torch.where(top, extent - 1, low)
    high = torch.where(top, low, low + 1)
    pos = torch.where(top, low.to(dtype), pos)
    return low, high, pos - low.to(dtype), inside


def _roi_grid(attrs, roi, height, width, dtype):
    """The bilinear taps of one roi: four ``(index y, index x, weight)`` of shape
    ``(ph, gh, pw, gw)`` and the sample count."""
    ph, pw = attrs["pooled_size"]
    scale = f32(attrs["spatial_scale"])
    off = 0.5 if attrs["aligned"] else 0.0
    x1, y1, x2, y2 = (float(torch.tensor(float(v), dtype=dtype) * scale - off)
                      for v in roi[1:5])
    rw, rh = x2 - x1, y2 - y1
    if attrs["aligned"]:
        if not (rw > 0 and rh > 0):
            raise MXNetError(f"ROIAlign: roi {roi.tolist()} has no positive width and height "
                             f"(aligned=True)")
    else:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    ratio = attrs["sample_ratio"]
    gh = ratio if ratio > 0 else int(math.ceil(rh / ph))
    gw = ratio if ratio > 0 else int(math.ceil(rw / pw))
    yl, yh, ly, yin = _axis_samples(y1, rh, ph, gh, height, dtype)
    xl, xh, lx, xin = _axis_samples(x1, rw, pw, gw, width, dtype)
    sh = (ph, gh, 1, 1)
    sw = (1, 1, pw, gw)
    ly, lx = ly.reshape(sh), lx.reshape(sw)
    ok = (yin.reshape(sh) & xin.reshape(sw)).to(dtype)
    hy, hx = 1.0 - ly, 1.0 - lx
    taps = [(yl, xl, hy * hx), (yl, xh, hy * lx), (yh, xl, ly * hx), (yh, xh, ly * lx)]
    taps = [(y.reshape(sh), x.reshape(sw), w * ok) for y, x, w in taps]
    return taps, max(gh * gw, 1)


def _channels(attrs, fmap):
    """The map as ``(C_out, bins, H, W)`` and per bin ``(i, j)`` the bin index it reads."""
    ph, pw = attrs["pooled_size"]
    c, h, w = fmap.shape
    if attrs["position_sensitive"]:
        sel = torch.arange(ph * pw).reshape(ph, 1, pw, 1)
        return fmap.reshape(c // (ph * pw), ph * pw, h, w), sel
    return fmap.reshape(c, 1, h, w), torch.zeros(ph, 1, pw, 1, dtype=torch.int64)


def _roi_align(attrs, ins):
    data, rois = ins
    n, c, h, w = data.shape
    ph, pw = attrs["pooled_size"]
    cout = c // (ph * pw) if attrs["position_sensitive"] else c
    out = torch.zeros(rois.shape[0], cout, ph, pw, dtype=data.dtype, device=data.device)
    for r, roi in enumerate(host(rois)):
        b = int(roi[0])
        if b < 0:
            continue
        taps, count = _roi_grid(attrs, roi, h, w, data.dtype)
        fmap, sel = _channels(attrs, data[b])
        acc = 0
        for y, x, wt in taps:
            acc = acc + wt.to(data.device) * fmap[:, sel.to(data.device), y.to(data.device),
                                                  x.to(data.device)]
        out[r] = acc.sum(dim=(2, 4)) / count
    return [out]


def _roi_align_bwd(attrs, ins):
    dy, rois, data = ins
    grad = torch.zeros(data.shape, dtype=data.dtype, device=data.device)
    n, c, h, w = data.shape
    dev = data.device
    for r, roi in enumerate(host(rois)):
        b = int(roi[0])
        if b < 0:
            continue
        taps, count = _roi_grid(attrs, roi, h, w, data.dtype)
        gmap, sel = _channels(attrs, grad[b])                 # a view of grad[b]
        top = dy[r][:, :, None, :, None]                       # (C, ph, 1, pw, 1)
        ch = torch.arange(gmap.shape[0], device=dev).reshape(-1, 1, 1, 1, 1)
        for y, x, wt in taps:
            val = top * wt.to(dev) / count
            idx = torch.broadcast_tensors(ch, sel.to(dev), y.to(dev), x.to(dev), val)[:4]
            gmap.index_put_(tuple(idx), val, accumulate=True)
    return [grad]


def _grad_roi_align(b, n):
    dx = b.op("_backward_ROIAlign", n.ograds[0], n.inputs[1], n.inputs[0], **n.attrs)
    return [dx, b.zeros_like(n.inputs[1])]


_ALIGN_ATTRS = [Attr("pooled_size", _pooled), Attr("spatial_scale", parse_float),
                Attr("sample_ratio", parse_int, -1),
                Attr("position_sensitive", parse_bool, False),
                Attr("aligned", parse_bool, False)]


def _align_type(attrs, in_types):
    known = [t for t in in_types if t is not None]
    t = known[0] if known else None
    if t is not None and any(x is not None and x != t for x in in_types):
        raise MXNetError(f"ROIAlign: data and rois must share a dtype, got {in_types}")
    return [t] * len(in_types), [t]


register(OpDef(
    name="_contrib_ROIAlign", pattern="opaque", lowering=Extern(_roi_align),
    arguments=("data", "rois"), attrs=_ALIGN_ATTRS, infer_shape=_align_shape,
    infer_type=_align_type, reference=lambda a, ins, is_train: _roi_align(a, ins),
    gradient=_grad_roi_align,
    doc="Bilinear average pooling of each roi [batch, x1, y1, x2, y2] into pooled_size "
        "bins (Mask R-CNN's RoIAlign; position-sensitive as R-FCN)."))
register(OpDef(
    name="_backward_ROIAlign", pattern="opaque", lowering=Extern(_roi_align_bwd),
    arguments=("ograd", "rois", "data"), attrs=_ALIGN_ATTRS,
    infer_shape=lambda a, s: (s, [None if s[2] is None else tuple(s[2])]),
    reference=lambda a, ins, is_train: _roi_align_bwd(a, ins)))


# -- Proposal, MultiProposal -------------------------------------------------------------------

def _proposal_shape(multi):
    def infer(attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return in_shapes, [None, None]
        op = "MultiProposal" if multi else "Proposal"
        require_rank(op, "cls_prob", d, 4)
        bbox = (d[0], d[1] * 2, d[2], d[3])
        info = (d[0], 3)
        for k, (want, what) in enumerate(((bbox, "bbox_pred"), (info, "im_info")), 1):
            if in_shapes[k] is not None and tuple(in_shapes[k]) != want:
                raise ShapeError(f"{op}: {what} of shape {tuple(in_shapes[k])}, expected "
                                 f"{want} for cls_prob {tuple(d)}")
        rows = attrs["rpn_post_nms_top_n"] * (d[0] if multi else 1)
        return [tuple(d), bbox, info], [(rows, 5), (rows, 1)]
    return infer


def _base_anchors(attrs):
    """mxnet's GenerateAnchors: ratios outer, scales inner, float32 arithmetic."""
    t = lambda v: torch.tensor(v, dtype=torch.float32)   # noqa: E731
    stride = attrs["feature_stride"]
    w = h = t(stride - 1.0) + 1.0
    xc = yc = 0.5 * (w - 1.0)
    rows = []
    for ratio in attrs["ratios"]:
        for scale in attrs["scales"]:
            size_ratios = torch.floor(w * h / f32(ratio))
            nw = torch.floor(torch.sqrt(size_ratios) + 0.5) * f32(scale)
            nh = torch.floor(nw / f32(scale) * f32(ratio) + 0.5) * f32(scale)
            rows.append(torch.stack([xc - 0.5 * (nw - 1.0), yc - 0.5 * (nh - 1.0),
                                     xc + 0.5 * (nw - 1.0), yc + 0.5 * (nh - 1.0)]))
    return torch.stack(rows)


def _decode_rpn(attrs, anchors, deltas, info):
    """Anchors moved by the deltas (``bbox`` or IoU-loss form), clipped to the image."""
    a, hgt, wid = deltas.shape[0] // 4, deltas.shape[1], deltas.shape[2]
    d = deltas.reshape(a, 4, hgt, wid).permute(2, 3, 0, 1).reshape(-1, 4)
    if attrs["iou_loss"]:
        box = anchors + d
    else:
        aw = anchors[:, 2] - anchors[:, 0] + 1.0
        ah = anchors[:, 3] - anchors[:, 1] + 1.0
        cx = anchors[:, 0] + 0.5 * (aw - 1.0)
        cy = anchors[:, 1] + 0.5 * (ah - 1.0)
        px, py = d[:, 0] * aw + cx, d[:, 1] * ah + cy
        pw, ph = torch.exp(d[:, 2]) * aw, torch.exp(d[:, 3]) * ah
        box = torch.stack([px - 0.5 * (pw - 1.0), py - 0.5 * (ph - 1.0),
                           px + 0.5 * (pw - 1.0), py + 0.5 * (ph - 1.0)], 1)
    lim = torch.stack([info[1], info[0], info[1], info[0]]) - 1.0
    return torch.maximum(torch.minimum(box, lim), torch.zeros(()))


def _rpn_nms(dets, thresh, limit):
    """mxnet's NonMaximumSuppression: +1 pixel areas, at most ``limit`` kept."""
    area = (dets[:, 2] - dets[:, 0] + 1) * (dets[:, 3] - dets[:, 1] + 1)
    gone = torch.zeros(dets.shape[0], dtype=torch.bool)
    keep = []
    for i in range(dets.shape[0]):
        if len(keep) >= limit:
            break
        if gone[i]:
            continue
        keep.append(i)
        rest = dets[i + 1:]
        w = (torch.minimum(dets[i, 2], rest[:, 2]) - torch.maximum(dets[i, 0], rest[:, 0])
             + 1.0).clamp(min=0.0)
        h = (torch.minimum(dets[i, 3], rest[:, 3]) - torch.maximum(dets[i, 1], rest[:, 1])
             + 1.0).clamp(min=0.0)
        inter = w * h
        gone[i + 1:] |= inter / (area[i] + area[i + 1:] - inter) > thresh
    return keep


def _propose_one(attrs, anchors, fg, deltas, info, batch):
    a, hgt, wid = fg.shape
    stride = attrs["feature_stride"]
    score = fg.permute(1, 2, 0).reshape(-1).clone()
    box = _decode_rpn(attrs, anchors, deltas, info)
    real_h, real_w = int(info[0] / stride), int(info[1] / stride)
    if hgt < real_h or wid < real_w:
        raise MXNetError(f"Proposal: feature map {hgt}x{wid} is smaller than the image's "
                         f"{real_h}x{real_w} (im_info {info.tolist()}, stride {stride})")
    jj = torch.arange(hgt).repeat_interleave(wid * a)
    kk = torch.arange(wid).repeat_interleave(a).repeat(hgt)
    score[(jj >= real_h) | (kk >= real_w)] = -1.0
    min_size = attrs["rpn_min_size"] * info[2]
    bw, bh = box[:, 2] - box[:, 0] + 1.0, box[:, 3] - box[:, 1] + 1.0
    small = (bw < min_size) | (bh < min_size)
    half = torch.stack([-min_size, -min_size, min_size, min_size]) / 2
    box = torch.where(small[:, None], box + half, box)
    score[small] = -1.0
    count = score.shape[0]
    pre = attrs["rpn_pre_nms_top_n"]
    pre = min(pre if pre > 0 else count, count)
    post = min(attrs["rpn_post_nms_top_n"], pre)
    order = torch.sort(score, descending=True, stable=True).indices[:pre]
    dets, dscore = box[order], score[order]
    keep = _rpn_nms(dets, f32(attrs["threshold"]), post)
    n_out = attrs["rpn_post_nms_top_n"]
    pick = torch.tensor([keep[i % len(keep)] for i in range(n_out)], dtype=torch.int64)
    rows = torch.cat([torch.full((n_out, 1), float(batch)), dets[pick]], 1)
    return rows, dscore[pick][:, None]


def _proposal(multi):
    def run(attrs, ins):
        prob, deltas, info = (host(t).to(torch.float32) for t in ins)
        nb, a2 = prob.shape[0], prob.shape[1]
        if not multi and nb != 1:
            raise MXNetError(f"Proposal: cls_prob of shape {tuple(prob.shape)}: one image "
                             f"per device only (use MultiProposal)")
        a = a2 // 2
        if a != len(attrs["ratios"]) * len(attrs["scales"]):
            raise MXNetError(f"Proposal: cls_prob has {a} anchors per position, ratios "
                             f"{attrs['ratios']} x scales {attrs['scales']} make "
                             f"{len(attrs['ratios']) * len(attrs['scales'])}")
        base = _base_anchors(attrs)
        hgt, wid = prob.shape[2], prob.shape[3]
        s = attrs["feature_stride"]
        shift = torch.stack(torch.meshgrid(torch.arange(hgt, dtype=torch.float32) * s,
                                           torch.arange(wid, dtype=torch.float32) * s,
                                           indexing="ij"), -1)
        xy = shift[..., [1, 0, 1, 0]]                             # (H, W, 4)
        anchors = (xy[:, :, None, :] + base[None, None]).reshape(-1, 4)
        outs = [_propose_one(attrs, anchors, prob[b, a:], deltas[b], info[b], b)
                for b in range(nb)]
        dev, dt = ins[0].device, ins[0].dtype
        return [torch.cat([o[0] for o in outs]).to(dev, dt),
                torch.cat([o[1] for o in outs]).to(dev, dt)]
    return run


_RPN_ATTRS = [
    Attr("rpn_pre_nms_top_n", parse_int, 6000), Attr("rpn_post_nms_top_n", parse_int, 300),
    Attr("threshold", parse_float, 0.7), Attr("rpn_min_size", parse_int, 16),
    Attr("scales", float_tuple, (4.0, 8.0, 16.0, 32.0)),
    Attr("ratios", float_tuple, (0.5, 1.0, 2.0)), Attr("feature_stride", parse_int, 16),
    Attr("output_score", parse_bool, False), Attr("iou_loss", parse_bool, False)]

for _name, _multi in (("Proposal", False), ("MultiProposal", True)):
    register(OpDef(
        name=f"_contrib_{_name}", pattern="opaque", lowering=Extern(_proposal(_multi)),
        arguments=("cls_prob", "bbox_pred", "im_info"), outputs=("output", "score"),
        num_visible=lambda a: 2 if a["output_score"] else 1, attrs=_RPN_ATTRS,
        infer_shape=_proposal_shape(_multi),
        reference=lambda a, ins, is_train, _m=_multi: _proposal(_m)(a, ins),
        gradient=zero_gradients,
        doc="Region proposals from RPN scores and box deltas: decoded anchors, the best "
            "rpn_pre_nms_top_n, non-maximum suppression, rpn_post_nms_top_n rows [batch, "
            "x1, y1, x2, y2] (and their scores)."))
