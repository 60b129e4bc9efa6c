"""mxnet 1.9.1's SSD operators ``_contrib_MultiBoxTarget`` and ``_contrib_MultiBoxDetection``
(aliases ``_npx_multibox_target``, ``_npx_multibox_detection``) as extern launches; their
behaviour, quirks included, is described in ``detection.py``'s docstring, whose helpers
(float32 attributes, host copies, greedy suppression) they share. Both back-propagate
zeros.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .contrib_common import zero_gradients
from .detection import f32, float_tuple, greedy_nms, host
from .registry import (Attr, Extern, OpDef, ShapeError, parse_bool, parse_float, parse_int,
                       register)


# -- MultiBoxTarget ----------------------------------------------------------------------------

def _target_shape(attrs, in_shapes):
    a, lab, p = in_shapes
    if a is None or lab is None or p is None:
        return in_shapes, [None] * 3
    if len(a) != 3 or a[0] != 1 or a[1] < 1 or a[2] != 4:
        raise ShapeError(f"MultiBoxTarget: anchor of shape {tuple(a)} must be (1, N, 4), "
                         f"shared across batches")
    if len(lab) != 3 or lab[1] < 1 or lab[2] < 5:
        raise ShapeError(f"MultiBoxTarget: label of shape {tuple(lab)} must be (batch, "
                         f"num_labels > 0, label_width >= 5)")
    if len(p) != 3 or p[2] != a[1]:
        raise ShapeError(f"MultiBoxTarget: cls_pred of shape {tuple(p)} must be (batch, "
                         f"num_classes, {a[1]}) for anchor {tuple(a)}")
    return ([tuple(a), tuple(lab), tuple(p)],
            [(lab[0], a[1] * 4), (lab[0], a[1] * 4), (lab[0], a[1])])


def _iou_matrix(anchors, gts):
    """mxnet's overlaps (anchors x ground truths), in the inputs' dtype, 0 for an empty
    union."""
    al, at, ar, ab = (anchors[:, k, None] for k in range(4))
    gl, gt, gr, gb = (gts[None, :, k] for k in range(4))
    zero = torch.zeros((), dtype=anchors.dtype)
    inter = torch.maximum(zero, torch.minimum(ar, gr) - torch.maximum(al, gl)) * \
        torch.maximum(zero, torch.minimum(ab, gb) - torch.maximum(at, gt))
    union = (ar - al) * (ab - at) + (gr - gl) * (gb - gt) - inter
    return torch.where(union == 0, torch.zeros_like(inter), inter / union)


def _greedy_best(iou, flags, num_gt):
    """Stage 1: each ground truth takes its best free anchor, best pairs first."""
    matches = torch.full((iou.shape[0],), -1, dtype=torch.int64)
    masked = iou.clone()
    for _ in range(num_gt):
        masked[flags == 1] = -1.0
        flat = int(torch.argmax(masked))
        j, k = divmod(flat, num_gt)
        if not float(masked[j, k]) > f32(1e-6):
            break
        matches[j] = k
        flags[j] = 1
        masked[:, k] = -1.0
    return matches


def _background_prob(pred):
    """Softmax probability of class 0 per anchor, as mxnet sums it (float32, in order)."""
    big = pred.max(dim=0).values
    total = torch.zeros_like(big)
    for k in range(pred.shape[0]):
        total = total + torch.exp(pred[k] - big)
    return torch.exp(pred[0] - big) / total


def _mine_negatives(attrs, flags, best_iou, pred, num_pos):
    ratio = f32(attrs["negative_mining_ratio"])
    num_anchors = flags.shape[0]
    num_neg = min(int(num_pos * ratio), num_anchors - num_pos)
    if num_neg <= 0:
        return
    cand = torch.nonzero((flags == -1) &
                         (best_iou < f32(attrs["negative_mining_thresh"]))).flatten()
    if len(cand) < num_neg:
        raise MXNetError(f"MultiBoxTarget: {len(cand)} negative candidates for {num_neg} "
                         f"negatives to mine")
    prob = _background_prob(pred)[cand]
    order = torch.sort(prob, stable=True).indices
    flags[cand[order[:num_neg]]] = 0


def _loc_targets(anchors, gts, var):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = (anchors[:, 0] + anchors[:, 2]) * 0.5, (anchors[:, 1] + anchors[:, 3]) * 0.5
    gw, gh = gts[:, 2] - gts[:, 0], gts[:, 3] - gts[:, 1]
    gx, gy = (gts[:, 0] + gts[:, 2]) * 0.5, (gts[:, 1] + gts[:, 3]) * 0.5
    return torch.stack([(gx - ax) / aw / f32(var[0]), (gy - ay) / ah / f32(var[1]),
                        torch.log(gw / aw) / f32(var[2]), torch.log(gh / ah) / f32(var[3])], 1)


def _target_one(attrs, anchors, label, pred, outs):
    loc, mask, cls = outs
    valid = label[:, 0] != -1.0
    num_gt = int(valid.long().cumprod(0).sum())
    if num_gt < label.shape[0] and bool((label[num_gt, 1:5] != -1.0).any()):
        raise MXNetError(f"MultiBoxTarget: label row {num_gt} has class -1 (padding) but "
                         f"values {label[num_gt, :5].tolist()}: a padding row must be all -1")
    if num_gt == 0:
        return
    gts = label[:num_gt]
    iou = _iou_matrix(anchors, gts[:, 1:5])
    flags = torch.full((anchors.shape[0],), -1, dtype=torch.int64)
    matches = _greedy_best(iou, flags, num_gt)
    best_iou, best_gt = iou.max(dim=1).values, iou.argmax(dim=1)   # first of equals
    free = flags != 1
    matches = torch.where(free, best_gt, matches)
    if f32(attrs["overlap_threshold"]) > 0:
        flags[free & (best_iou > f32(attrs["overlap_threshold"]))] = 1
    num_pos = int((flags == 1).sum())
    if f32(attrs["negative_mining_ratio"]) > 0:
        if not f32(attrs["negative_mining_thresh"]) > 0:
            raise MXNetError("MultiBoxTarget: negative_mining_thresh must be > 0")
        _mine_negatives(attrs, flags, best_iou, pred, num_pos)
    else:
        flags[flags != 1] = 0
    pos = flags == 1
    g = gts[matches.clamp(min=0)]
    cls[:] = torch.where(pos, g[:, 0] + 1, torch.where(flags == 0, 0.0, cls).to(cls.dtype))
    mask4 = pos[:, None].expand(-1, 4)
    mask[:] = mask4.to(mask.dtype).reshape(-1)
    t = _loc_targets(anchors, g[:, 1:5], attrs["variances"])
    loc[:] = torch.where(mask4, t, torch.zeros_like(t)).reshape(-1)


def _multibox_target(attrs, ins):
    anchor, label, pred = (host(t) for t in ins)
    if len(attrs["variances"]) != 4:
        raise MXNetError(f"MultiBoxTarget: variances {attrs['variances']} must hold 4 values")
    nb, na = label.shape[0], anchor.shape[1]
    dt = label.dtype
    loc = torch.zeros(nb, na * 4, dtype=dt)
    mask = torch.zeros(nb, na * 4, dtype=dt)
    cls = torch.full((nb, na), f32(attrs["ignore_label"]), dtype=dt)
    anchors = anchor.reshape(na, 4)
    for b in range(nb):
        _target_one(attrs, anchors, label[b], pred[b], (loc[b], mask[b], cls[b]))
    dev = ins[0].device
    return [loc.to(dev), mask.to(dev), cls.to(dev)]


_VARIANCES = Attr("variances", float_tuple, (0.1, 0.1, 0.2, 0.2))

register(OpDef(
    name="_contrib_MultiBoxTarget", aliases=("_npx_multibox_target",), pattern="opaque",
    lowering=Extern(_multibox_target), arguments=("anchor", "label", "cls_pred"),
    outputs=("loc_target", "loc_mask", "cls_target"),
    attrs=[Attr("overlap_threshold", parse_float, 0.5),
           Attr("ignore_label", parse_float, -1.0),
           Attr("negative_mining_ratio", parse_float, -1.0),
           Attr("negative_mining_thresh", parse_float, 0.5),
           Attr("minimum_negative_samples", parse_int, 0), _VARIANCES],
    infer_shape=_target_shape, reference=lambda a, ins, is_train: _multibox_target(a, ins),
    gradient=zero_gradients,
    doc="SSD training targets: anchors matched to ground truths (greedy best pairs, then "
        "every anchor over overlap_threshold), hard negatives mined by the background "
        "probability; box regression targets, their mask and class targets."))


# -- MultiBoxDetection ---------------------------------------------------------------------

def _detection_shape(attrs, in_shapes):
    c, l, a = in_shapes
    if c is None or l is None or a is None:
        return in_shapes, [None]
    if len(c) != 3 or len(l) != 2 or len(a) != 3:
        raise ShapeError(f"MultiBoxDetection: cls_prob {tuple(c)}, loc_pred {tuple(l)} and "
                         f"anchor {tuple(a)} must have 3, 2 and 3 dims")
    if c[2] != a[1] or c[2] * 4 != l[1] or a[1] < 1 or a[2] != 4:
        raise ShapeError(f"MultiBoxDetection: anchor counts disagree: cls_prob {tuple(c)}, "
                         f"loc_pred {tuple(l)}, anchor {tuple(a)}")
    return [tuple(c), tuple(l), tuple(a)], [(c[0], a[1], 6)]


def _decode(anchors, loc, clip, var):
    """mxnet's TransformLocations, in the inputs' dtype."""
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = (anchors[:, 0] + anchors[:, 2]) / 2, (anchors[:, 1] + anchors[:, 3]) / 2
    ox = loc[:, 0] * f32(var[0]) * aw + ax
    oy = loc[:, 1] * f32(var[1]) * ah + ay
    ow = torch.exp(loc[:, 2] * f32(var[2])) * aw / 2
    oh = torch.exp(loc[:, 3] * f32(var[3])) * ah / 2
    box = torch.stack([ox - ow, oy - oh, ox + ow, oy + oh], 1)
    return box.clamp(0, 1) if clip else box


def _detect_one(attrs, prob, loc, anchors, out):
    if prob.shape[0] < 2:
        return                                  # no foreground class: every row -1
    fg = prob[1:]
    score, best = fg.max(dim=0).values, fg.argmax(dim=0)     # first of equals
    score = torch.where(score > -1, score, torch.full_like(score, -1.0))
    ident = torch.where(score > -1, best + 1, torch.zeros_like(best))
    ident = torch.where((ident > 0) & (score < f32(attrs["threshold"])), 0, ident)
    rows = torch.cat([(ident - 1).to(out.dtype)[:, None], score[:, None],
                      _decode(anchors, loc.reshape(-1, 4), attrs["clip"],
                              attrs["variances"])], 1)
    rows = rows[ident > 0]
    nv = rows.shape[0]
    out[:nv] = rows
    thr = f32(attrs["nms_threshold"])
    if nv < 1 or thr <= 0 or thr > 1:
        return
    order = torch.sort(rows[:, 1], descending=True, stable=True).indices
    nkeep = nv
    if 0 < attrs["nms_topk"] < nv:
        nkeep = attrs["nms_topk"]
        out[nkeep:nv, 0] = -1.0
    top = rows[order[:nkeep]]
    alive = greedy_nms(top[:, 2:6], thr, "corner",
                       None if attrs["force_suppress"] else top[:, 0], strict=False,
                       raw_area=True)
    top[~alive, 0] = -1.0
    out[:nkeep] = top


def _multibox_detection(attrs, ins):
    prob, loc, anchor = (host(t) for t in ins)
    if len(attrs["variances"]) != 4:
        raise MXNetError(f"MultiBoxDetection: variances {attrs['variances']} must hold 4 "
                         f"values")
    nb, na = prob.shape[0], prob.shape[2]
    out = torch.full((nb, na, 6), -1.0, dtype=prob.dtype)
    anchors = anchor.reshape(na, 4)
    for b in range(nb):
        _detect_one(attrs, prob[b], loc[b], anchors, out[b])
    return [out.to(ins[0].device)]


register(OpDef(
    name="_contrib_MultiBoxDetection", aliases=("_npx_multibox_detection",),
    pattern="opaque", lowering=Extern(_multibox_detection),
    arguments=("cls_prob", "loc_pred", "anchor"),
    attrs=[Attr("clip", parse_bool, True), Attr("threshold", parse_float, 0.01),
           Attr("background_id", parse_int, 0), Attr("nms_threshold", parse_float, 0.5),
           Attr("force_suppress", parse_bool, False), _VARIANCES,
           Attr("nms_topk", parse_int, -1)],
    infer_shape=_detection_shape,
    reference=lambda a, ins, is_train: _multibox_detection(a, ins),
    gradient=zero_gradients,
    doc="SSD detections [id, score, xmin, ymin, xmax, ymax] per anchor: the best "
        "foreground class over threshold, boxes decoded from the anchors, non-maximum "
        "suppression per class (all classes with force_suppress); the rest -1."))
