"""mxnet 1.9.1's detection operators that sort, suppress or match, as extern launches
(``registry.Extern``): ``_contrib_box_nms`` (alias ``_contrib_box_non_maximum_suppression``),
``_contrib_bipartite_matching`` (of mxnet's contrib bounding-box operators),
``_contrib_MultiBoxTarget`` and ``_contrib_MultiBoxDetection`` (aliases ``_npx_multibox_*``;
registered in ``detection_multibox.py``). ``ROIAlign``, ``Proposal`` and ``MultiProposal``
are in ``detection_rpn.py``.

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
* ``MultiBoxTarget`` reads ground truths up to the first padding row (class -1), fills
  ``cls_target`` with ``ignore_label``, ranks negatives by the softmax probability of
  class 0 it computes from ``cls_pred`` (float32, classes summed in order), and parses
  ``minimum_negative_samples`` without using it (mxnet's cpu kernel does not either);
* ``MultiBoxDetection`` always treats class 0 as background (``background_id`` is parsed
  and unused, as in mxnet) and, with ``nms_topk``, sets only the id of rows past the top k
  to -1.

``bipartite_matching``, ``MultiBoxTarget`` and ``MultiBoxDetection`` back-propagate zeros.
"""
from __future__ import annotations

import struct

import torch

from .contrib_common import require_rank, zero_gradients
from .registry import (Attr, Extern, OpDef, ShapeError, choice, parse_bool, parse_float,
                       parse_int, prod, register)


def f32(v) -> float:
    """A float attribute as mxnet holds it (a C ``float``)."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def host(t):
    """The tensor on the host, contiguous, to run a sequential loop on: a copy, or the
    input itself when it already is one (so it is only ever read)."""
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
