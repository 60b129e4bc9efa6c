"""Sorts of long axes as extern launches (``torch.sort`` on the context's device).

``sort``, ``argsort`` and ``topk`` rank each element by M x M comparisons along the
axis (``selection.py``): fused and launch-free for class counts, but M**2 work a row.
Above ``selection.MAX_SORT_LENGTH`` elements along the axis they decompose into
these two entries instead (extern launches: ``compiler/ops/registry.py: Extern``):

* ``_sort_last(data, is_ascend)``: along the last axis, the sorted values, the
  positions that sort it (float, stable: equal values keep their order, as mxnet's
  ``std::stable_sort``) and each element's rank (float: where it lands);
* ``_gather_last(data, index)``: ``data[..., index[..., j]]`` along the last axis
  (``torch.gather``), which the gradients use to read the head gradient at each
  element's rank.

Neither is differentiated itself: the sorts' gradient rules (``selection.py``) use
them as they use the comparison forms.
"""
from __future__ import annotations

import torch

from .contrib_common import zero_gradients
from .registry import Attr, Extern, OpDef, ShapeError, parse_bool, register


def _sort_last_run(attrs, ins):
    x = ins[0]
    order = torch.sort(x, dim=-1, descending=not attrs["is_ascend"], stable=True)
    m = x.shape[-1]
    where = torch.arange(m, dtype=torch.float32, device=x.device).expand(x.shape)
    ranks = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    ranks.scatter_(-1, order.indices, where.contiguous())
    return [order.values, order.indices.to(torch.float32), ranks]


def _sort_last_shape(attrs, in_shapes):
    d = in_shapes[0]
    out = None if d is None else tuple(d)
    return in_shapes, [out, out, out]


register(OpDef(
    name="_sort_last", pattern="opaque", lowering=Extern(_sort_last_run),
    arguments=("data",), outputs=("values", "indices", "ranks"),
    attrs=[Attr("is_ascend", parse_bool, True)],
    infer_shape=_sort_last_shape,
    infer_type=lambda attrs, t: (t, [t[0], "float32", "float32"]),
    reference=lambda attrs, ins, is_train: _sort_last_run(attrs, ins),
    gradient=zero_gradients,
    doc="Along the last axis: the values sorted (stable), the positions that sort them "
        "and each element's rank (floats)."))


def _gather_last_run(attrs, ins):
    data, index = ins
    return [torch.gather(data, -1, index.to(torch.int64))]


def _gather_last_shape(attrs, in_shapes):
    data, index = in_shapes
    if data is None or index is None:
        return in_shapes, [None if index is None else tuple(index)]
    if tuple(data[:-1]) != tuple(index[:-1]):
        raise ShapeError(f"_gather_last: data {tuple(data)} and index {tuple(index)} must "
                         f"agree on all axes but the last")
    return in_shapes, [tuple(index)]


register(OpDef(
    name="_gather_last", pattern="opaque", lowering=Extern(_gather_last_run),
    arguments=("data", "index"), attrs=[],
    infer_shape=_gather_last_shape,
    infer_type=lambda attrs, t: (t, [t[0]]),
    reference=lambda attrs, ins, is_train: _gather_last_run(attrs, ins),
    gradient=zero_gradients,
    doc="out[..., j] = data[..., int(index[..., j])] along the last axis."))
