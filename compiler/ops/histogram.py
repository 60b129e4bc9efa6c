"""``_histogram`` (``mx.sym.histogram``), as mxnet 1.9.1 defines it.

Two outputs: the counts (int64) of the flattened data in each bin, and the bin edges
(the data's dtype). The edges are ``bin_cnt + 1`` equal steps over ``range``
(``float((max * i + (bin_cnt - i) * min) / bin_cnt)``, computed in double here as
there, so they enter the graph as constants), or the ``bins`` input itself when
``bin_cnt`` is not given. mxnet's bin search (a first guess corrected against the
edges, or a linear scan) comes to the same for ascending edges: an element inside
``[edges[0], edges[-1]]`` falls in bin ``min(#{j >= 1: x >= edges[j]}, n - 1)`` (the
last bin holds its right edge), one outside in none. Here that count is a
broadcast compare and a row sum, the histogram a one-hot column sum. mxnet registers
no gradient (binding the data for one fails there); here it is zero.
"""
from __future__ import annotations

import torch

from .registry import (Attr, Decompose, OpDef, ShapeError, _literal, parse_optional_int,
                       prod, register)


def _parse_range(v):
    if v is None or v == "None":
        return None
    r = _literal(v) if isinstance(v, str) else v
    r = tuple(float(x) for x in r)
    if len(r) != 2:
        raise ValueError(f"range must be (min, max), got {v!r}")
    return r


def _has_cnt(attrs):
    return attrs["bin_cnt"] is not None


def _edges_ref(attrs):
    cnt, (lo, hi) = attrs["bin_cnt"], attrs["range"]
    return torch.tensor([(hi * i + (cnt - i) * lo) / cnt for i in range(cnt + 1)],
                        dtype=torch.float32)


def _shape(attrs, in_shapes):
    if _has_cnt(attrs):
        if attrs["range"] is None:
            raise ShapeError("histogram: bin_cnt needs a range (min, max)")
        lo, hi = attrs["range"]
        if attrs["bin_cnt"] < 1 or lo > hi:
            raise ShapeError(f"histogram: bin_cnt={attrs['bin_cnt']} and range={(lo, hi)} "
                             f"give no bins")
        n = attrs["bin_cnt"]
    else:
        bins = in_shapes[1]
        if bins is None:
            return in_shapes, [None, None]
        if len(bins) != 1 or bins[0] < 2:
            raise ShapeError(f"histogram: bins of shape {tuple(bins)} must be 1-D with at "
                             f"least 2 edges")
        n = bins[0] - 1
    return in_shapes, [(n,), (n + 1,)]


def _ref(attrs, ins, is_train):
    x = ins[0].detach().reshape(-1)
    edges = _edges_ref(attrs).to(x.dtype) if _has_cnt(attrs) else ins[1].detach()
    n = edges.numel() - 1
    lo, hi = attrs["range"] if _has_cnt(attrs) else (edges[0], edges[-1])
    inside = (x >= lo) & (x <= hi)
    which = (x.unsqueeze(1) >= edges[1:].unsqueeze(0)).sum(1).clamp(max=n - 1)
    counts = torch.bincount(which[inside], minlength=n).to(torch.int64)
    return [counts, edges.clone()]


def _build(b, n, is_train):
    x = n.inputs[0]
    size = prod(n.in_shapes[0])
    x = x if tuple(n.in_shapes[0]) == (size,) else b.op("Reshape", x, shape=(size,))
    if _has_cnt(n.attrs):
        values = _edges_ref(n.attrs).tolist()
        edges = b.op("Concat", *[b.op("_full", shape=(1,), value=v) for v in values],
                     num_args=len(values), dim=0)
        lo, hi = n.attrs["range"]
        above = b.op("_greater_equal_scalar", x, scalar=lo)
        below = b.op("_lesser_equal_scalar", x, scalar=hi)
    else:
        edges = n.inputs[1]
        values = [None] * n.in_shapes[1][0]
        above = b.op("broadcast_greater_equal", x, b.op("slice_axis", edges, axis=0,
                                                        begin=0, end=1))
        below = b.op("broadcast_lesser_equal", x, b.op("slice_axis", edges, axis=0,
                                                       begin=len(values) - 1,
                                                       end=len(values)))
    bins = len(values) - 1
    upper = b.op("slice_axis", edges, axis=0, begin=1, end=bins + 1)        # (bins,)
    passed = b.op("broadcast_greater_equal", b.op("expand_dims", x, axis=1),
                  b.op("expand_dims", upper, axis=0))                       # (size, bins)
    which = b.op("_minimum_scalar", b.op("sum", passed, axis=(1,)), scalar=float(bins - 1))
    inside = b.op("elemwise_mul", above, below)                            # (size,)
    hit = b.op("broadcast_equal", b.op("expand_dims", which, axis=1),
               b.op("_axis_index", shape=(size, bins), axis=1))
    counts = b.op("sum", b.op("broadcast_mul", hit, b.op("expand_dims", inside, axis=1)),
                  axis=(0,))
    return [b.op("Cast", counts, dtype="int64"), edges if _has_cnt(n.attrs) else
            b.op("_copy", edges)]


register(OpDef(
    name="_histogram", aliases=("_npi_histogram",), pattern="composite",
    lowering=Decompose(_build),
    arguments=lambda attrs: ("data",) if _has_cnt(attrs) else ("data", "bins"),
    outputs=("output0", "output1"),
    attrs=[Attr("bin_cnt", parse_optional_int, None), Attr("range", _parse_range, None)],
    infer_shape=_shape, reference=_ref,
    infer_type=lambda attrs, t: (t, ["int64", t[0]]),
    gradient=lambda b, n: [b.zeros_like(v) for v in n.inputs],
    doc="Counts (int64) of the flattened data in bin_cnt equal bins over range, or in "
        "the bins given by the edges input; and the edges."))
