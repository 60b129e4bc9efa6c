"""mxnet 1.9.1's detection operators that sort, suppress or match, as extern launches
(``registry.Extern``): ``_contrib_box_nms`` (alias ``_contrib_box_non_maximum_suppression``),
``_contrib_bipartite_matching`` (``src/operator/contrib/bounding_box*``),
``_contrib_MultiBoxTarget`` and ``_contrib_MultiBoxDetection`` (aliases ``_npx_multibox_*``,
``contrib/multibox_*``). ``ROIAlign``, ``Proposal`` and ``MultiProposal`` are in
``detection_rpn.py``.

Each is a greedy, data-dependent loop (a stable sort, then suppression or matching in
order), which no generated kernel is worth: the launch runs the loop with ATen calls on the
host (a copy of the inputs, the result copied back to the context's device). The order of
the loops, mxnet's stable sorts, its strict and non-strict comparisons and its float32
attribute values are kept, as are its quirks:

* ``box_nms`` only looks at the ``topk`` best valid boxes of each batch (the rest become
  ``-1``), converts ``in_format`` to ``out_format`` only on rows whose first coordinate is
  not negative, and records, in a hidden second output, the flat input row of each output
  row; its gradient copies each output row's gradient back to that row (mxnet's
  ``_backward_contrib_box_nms``);
* ``bipartite_matching`` may match ``topk + 1`` pairs (mxnet stops *after* exceeding it);
* ``MultiBoxTarget`` fills ``cls_target`` with ``ignore_label``, ranks negatives by the
  softmax probability of class 0 it computes from ``cls_pred`` (float32, classes summed in
  order);
* ``MultiBoxDetection`` always treats class 0 as background (``background_id`` is parsed
  and unused, as in mxnet) and, with ``nms_topk``, sets only the id of rows past the top k
  to -1.

``bipartite_matching``, ``MultiBoxTarget`` and ``MultiBoxDetection`` back-propagate zeros.
"""
from __future__ import annotations

import struct

import torch

from ..errors import MXNetError
from .contrib_common import require_rank, zero_gradients
from .registry import (Attr, Extern, OpDef, ShapeError, choice, parse_bool, parse_float,
                       parse_int, prod, register)


def f32(v) -> float:
    """A float attribute as mxnet holds it (a C ``float``)."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def host(t):
    """A contiguous host copy to run a sequential loop on."""
    return t.detach().to("cpu").contiguous()


def float_tuple(v):
    """A tuple of floats attribute (``(0.1, 0.1, 0.2, 0.2)``, ``[1, 2]``, ``0.5``)."""
    from .registry import _literal
    val = _literal(v) if isinstance(v, str) else v
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return (float(val),)
    if not isinstance(val, (tuple, list)):
        raise ValueError(f"not a tuple of numbers: {v!r}")
    return tuple(float(x) for x in val)


# -- box_nms ---------------------------------------------------------------------------------

_FORMAT = choice("corner", "center")


def _nms_shape(attrs, in_shapes):
    s = in_shapes[0]
    if s is None:
        return in_shapes, [None, None]
    require_rank("box_nms", "data", s, 2, at_least=True)
    width = s[-1]
    need = 6 if attrs["id_index"] >= 0 else 5
    if width < need:
        raise ShapeError(f"box_nms: data of shape {tuple(s)}: the last dimension must have at "
                         f"least {need} elements (score, 4 coordinates{', id' * (need == 6)})")
    cs, si, ii = attrs["coord_start"], attrs["score_index"], attrs["id_index"]
    if not 0 <= si < width:
        raise ShapeError(f"box_nms: score_index {si} is out of range [0, {width})")
    if cs <= si <= cs + 3:
        raise ShapeError(f"box_nms: score_index {si} conflicts with the coordinates "
                         f"[{cs}, {cs + 3}]")
    if not (cs >= 0 and cs + 3 < width):
        raise ShapeError(f"box_nms: coordinates [{cs}, {cs + 3}] are out of range [0, {width})")
    if ii >= 0:
        if ii >= width or cs <= ii <= cs + 3 or ii == si:
            raise ShapeError(f"box_nms: id_index {ii} is out of range [0, {width}) or conflicts "
                             f"with score_index {si} or the coordinates [{cs}, {cs + 3}]")
    return [tuple(s)], [tuple(s), tuple(s[:-1]) + (1,)]


def _extent(a, b, fmt):
    """Per box, its lower and upper edge along one axis (``a``: x1 or cx, ``b``: x2 or w)."""
    if fmt == "corner":
        return a, b
    return a - b / 2, a + b / 2


def _intersect(ra, rb, pa, pb, fmt):
    """mxnet's ``Intersect``: the overlap of reference and candidate edges, at least 0."""
    if fmt == "corner":
        w = torch.minimum(rb, pb) - torch.maximum(ra, pa)
    else:
        rl, rr = _extent(ra, rb, fmt)
        pl, pr = _extent(pa, pb, fmt)
        w = torch.minimum(pr, rr) - torch.maximum(pl, rl)
    return torch.where(w > 0, w, torch.zeros_like(w))


def _area(box, fmt):
    """mxnet's ``BoxArea``: 0 where a width or height is negative."""
    if fmt == "corner":
        w, h = box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]
    else:
        w, h = box[:, 2], box[:, 3]
    return torch.where((w < 0) | (h < 0), torch.zeros_like(w), w * h)


def greedy_nms(boxes, over, fmt="corner", classes=None, strict=True, raw_area=False):
    """Greedy suppression over boxes already in priority order.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(n, 4)`` coordinates in ``fmt``.
    over : float
        Suppress a later box whose IoU with a kept one is above (``strict``) or at least
        ``over``.
    classes : torch.Tensor, optional
        Per box an integer class: only boxes of the same class suppress each other.
    raw_area : bool
        Areas as ``(x2 - x1) * (y2 - y1)`` unclamped, an IoU of 0 where the union is not
        positive (``MultiBoxDetection``'s ``CalculateOverlap``); else ``box_nms``'s.

    Returns
    -------
    torch.Tensor
        ``(n,)`` bool: which boxes survive.
    """
    n = boxes.shape[0]
    alive = torch.ones(n, dtype=torch.bool)
    if raw_area:
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    else:
        area = _area(boxes, fmt)
    for i in range(n - 1):
        if not alive[i]:
            continue
        rest = boxes[i + 1:]
        inter = _intersect(boxes[i, 0], boxes[i, 2], rest[:, 0], rest[:, 2], fmt) * \
            _intersect(boxes[i, 1], boxes[i, 3], rest[:, 1], rest[:, 3], fmt)
        union = area[i] + area[i + 1:] - inter
        iou = inter / union
        if raw_area:
            iou = torch.where(union <= 0, torch.zeros_like(iou), iou)
        hit = iou > over if strict else iou >= over
        if classes is not None:
            hit &= classes[i + 1:] == classes[i]
        alive[i + 1:] &= ~hit
    return alive


def _convert_format(out, cs, to):
    """mxnet's corner_to_center / center_to_corner on rows whose first coordinate is >= 0."""
    c = out[:, cs:cs + 4].clone()
    keep = c[:, 0] < 0
    if to == "center":
        new = torch.stack([(c[:, 0] + c[:, 2]) / 2, (c[:, 1] + c[:, 3]) / 2,
                           c[:, 2] - c[:, 0], c[:, 3] - c[:, 1]], 1)
    else:
        hw, hh = c[:, 2] / 2, c[:, 3] / 2
        new = torch.stack([c[:, 0] - hw, c[:, 1] - hh, c[:, 0] + hw, c[:, 1] + hh], 1)
    out[:, cs:cs + 4] = torch.where(keep[:, None], c, new)


def _box_nms(attrs, ins):
    x = ins[0]
    shape = tuple(x.shape)
    n, k = shape[-2], shape[-1]
    nb = prod(shape[:-2]) if len(shape) > 2 else 1
    data = host(x).reshape(nb * n, k)
    topk = n if attrs["topk"] < 0 else min(n, attrs["topk"])
    rshape = shape[:-1] + (1,)
    if topk < 1:
        rec = torch.arange(nb * n, dtype=x.dtype)
        return [x.clone(), rec.reshape(rshape).to(x.device)]
    si, cs, ii = attrs["score_index"], attrs["coord_start"], attrs["id_index"]
    scores = data[:, si]
    valid = scores > f32(attrs["valid_thresh"])
    if ii >= 0:
        valid &= data[:, ii] != float(attrs["background_id"])
    out = torch.full_like(data, -1.0)
    rec = torch.full((nb * n,), -1.0, dtype=x.dtype)
    if not bool(valid.any()):
        return [out.reshape(shape).to(x.device), rec.reshape(rshape).to(x.device)]
    for b in range(nb):
        idx = torch.nonzero(valid[b * n:(b + 1) * n]).flatten() + b * n
        order = torch.sort(scores[idx], descending=True, stable=True).indices
        cand = idx[order][:topk]
        cls = None
        if ii >= 0 and not attrs["force_suppress"]:
            cls = data[cand, ii].to(torch.int64)
        alive = greedy_nms(data[cand, cs:cs + 4], f32(attrs["overlap_thresh"]),
                           attrs["in_format"], cls)
        kept = cand[alive]
        out[b * n:b * n + len(kept)] = data[kept]
        rec[b * n:b * n + len(kept)] = kept.to(x.dtype)
    if attrs["in_format"] != attrs["out_format"]:
        _convert_format(out, cs, attrs["out_format"])
    return [out.reshape(shape).to(x.device), rec.reshape(rshape).to(x.device)]


def _box_nms_bwd(attrs, ins):
    """Each output row's gradient goes back to the input row it came from."""
    dy, rec = ins
    k = dy.shape[-1]
    g = dy.reshape(-1, k)
    r = rec.reshape(-1)
    dx = torch.zeros_like(g)
    sel = r >= 0
    dx[r[sel].long()] = g[sel]
    return [dx.reshape(dy.shape)]


def _grad_box_nms(b, n):
    return [b.op("_backward_contrib_box_nms", n.ograds[0], n.outputs[1])]


_NMS_ATTRS = [
    Attr("overlap_thresh", parse_float, 0.5), Attr("valid_thresh", parse_float, 0.0),
    Attr("topk", parse_int, -1), Attr("coord_start", parse_int, 2),
    Attr("score_index", parse_int, 1), Attr("id_index", parse_int, -1),
    Attr("background_id", parse_int, -1), Attr("force_suppress", parse_bool, False),
    Attr("in_format", _FORMAT, "corner"), Attr("out_format", _FORMAT, "corner")]

register(OpDef(
    name="_contrib_box_nms", aliases=("_contrib_box_non_maximum_suppression",),
    pattern="opaque", lowering=Extern(_box_nms), arguments=("data",),
    outputs=("output0", "output1"), num_visible=lambda a: 1, attrs=_NMS_ATTRS,
    infer_shape=_nms_shape, reference=lambda a, ins, is_train: _box_nms(a, ins),
    gradient=_grad_box_nms,
    doc="Non-maximum suppression of boxes [id, score, 4 coordinates, ...] per batch: the "
        "survivors sorted by descending score, the rest -1 (hidden output: the input row "
        "of each output row, which the gradient reads)."))
register(OpDef(
    name="_backward_contrib_box_nms", pattern="opaque", lowering=Extern(_box_nms_bwd),
    arguments=("ograd", "record"),
    infer_shape=lambda a, s: (s, [None if s[0] is None else tuple(s[0])]),
    reference=lambda a, ins, is_train: _box_nms_bwd(a, ins)))


# -- bipartite_matching ----------------------------------------------------------------------

def _matching_shape(attrs, in_shapes):
    s = in_shapes[0]
    if s is None:
        return in_shapes, [None, None]
    require_rank("bipartite_matching", "data", s, 2, at_least=True)
    return [tuple(s)], [tuple(s[:-1]), tuple(s[:-2]) + (s[-1],)]


def _match_one(score, rows, cols, thresh, ascend, topk):
    """Greedy matching of one score matrix, best pairs first (mxnet's order)."""
    order = torch.sort(score.flatten(), descending=not ascend, stable=True).indices
    r_of, c_of = order // cols, order % cols
    good = score.flatten()[order] < thresh if ascend else score.flatten()[order] > thresh
    rmark = torch.full((rows,), -1, dtype=torch.int64)
    cmark = torch.full((cols,), -1, dtype=torch.int64)
    count, start = 0, 0
    while True:
        free = (rmark[r_of[start:]] == -1) & (cmark[c_of[start:]] == -1)
        hits = torch.nonzero(free).flatten()
        if len(hits) == 0:
            break
        j = start + int(hits[0])
        if not bool(good[j]):
            break
        rmark[r_of[j]], cmark[c_of[j]] = c_of[j], r_of[j]
        count += 1
        if 0 < topk < count:
            break
        start = j + 1
    return rmark, cmark


def _bipartite(attrs, ins):
    x = ins[0]
    rows, cols = x.shape[-2], x.shape[-1]
    data = host(x).reshape(-1, rows, cols)
    rm, cm = [], []
    for m in data:
        r, c = _match_one(m, rows, cols, f32(attrs["threshold"]), attrs["is_ascend"],
                          attrs["topk"])
        rm.append(r)
        cm.append(c)
    r = torch.stack(rm).to(x.dtype).reshape(x.shape[:-1])
    c = torch.stack(cm).to(x.dtype).reshape(tuple(x.shape[:-2]) + (cols,))
    return [r.to(x.device), c.to(x.device)]


register(OpDef(
    name="_contrib_bipartite_matching", pattern="opaque", lowering=Extern(_bipartite),
    arguments=("data",), outputs=("output0", "output1"),
    attrs=[Attr("is_ascend", parse_bool, False), Attr("threshold", parse_float),
           Attr("topk", parse_int, -1)],
    infer_shape=_matching_shape, reference=lambda a, ins, is_train: _bipartite(a, ins),
    gradient=zero_gradients,
    doc="Greedy bipartite matching of a [..., N, M] score matrix: per row its matched "
        "column (-1 if none), per column its matched row."))


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
