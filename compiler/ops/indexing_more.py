"""``gather_nd``, ``scatter_nd``, ``diag``, ``argmax_channel``, ``shape_array`` and
``size_array``, as mxnet 1.9.1 defines them.

All are composites over kernels other operators already make:

* ``gather_nd(data, indices)``: indices of shape ``(M, Y...)`` address the first M
  dims of ``data``; the output is ``Y... + data.shape[M:]``. Each index column is
  turned into one flat row number (negative indices count from the end, as mxnet's;
  an index mxnet rejects as out of bounds is clipped here, where the device cannot
  raise), then Embedding's gather reads rows of ``data`` viewed as
  ``(prod(shape[:M]), rest)``. The gradient is Embedding's scatter-add (mxnet's
  ``_backward_gather_nd``: repeated indices accumulate; negative indices land where
  the forward read them, where mxnet 1.9.1's backward writes out of bounds).
* ``scatter_nd(data, indices, shape)``: the inverse placement into zeros of
  ``shape``. Where indices repeat, mxnet's CPU loop writes them in order, so the
  last one wins: a pair count (the same row number at a later position) masks the
  earlier ones out before the scatter-add. The gradient to ``data`` is
  ``gather_nd`` of the head gradient (mxnet's, so every repeated position gets it).
* ``diag(data, k, axis1, axis2)``: 1-D data becomes the ``(n + |k|)``-square matrix
  with data on diagonal k; N-D data gives its k-th diagonal over ``axis1``/``axis2``,
  appended last. Both are a mask ``col - row == k`` from ``_axis_index``: extraction
  is a masked row sum and a slice, placement a masked broadcast; each is the other's
  gradient.
* ``argmax_channel(data)``: ``argmax(data, axis=1)`` (mxnet's parameters are fixed
  to axis 1, keepdims false), float positions, the first of ties. mxnet registers no
  gradient (binding data for one fails there); here it is zero, as argmax's.
* ``shape_array`` / ``size_array``: int64 constants of the input's shape / size; zero
  gradient (mxnet's).
* ``ravel_multi_index`` / ``unravel_index`` (``_ravel_multi_index`` /
  ``_unravel_index``): mxnet's index arithmetic, with no range check; zero gradient.

``choose_element_0index`` is ``pick``'s other name (compiler/ops/selection.py), as
mxnet registers it; ``histogram`` lives in compiler/ops/histogram.py.
"""
from __future__ import annotations

import torch

from .index_checks import check_bounds
from .registry import (Attr, Decompose, OpDef, ShapeError, normalize_axis, parse_int,
                       parse_shape, prod, register)


def _reshape(b, v, shape):
    return v if tuple(v.shape) == tuple(shape) else b.op("Reshape", v, shape=tuple(shape))


# -- gather_nd / scatter_nd ------------------------------------------------------------------

def _nd_geometry(name, dshape, ishape, what="data"):
    """M, Y, the number of addressed rows and the row size for indices ``ishape``."""
    if len(ishape) < 2:
        raise ShapeError(f"{name}: indices must have at least 2 dimensions (M, ...), got "
                         f"shape {tuple(ishape)}")
    m = ishape[0]
    if m > len(dshape):
        raise ShapeError(f"{name}: indices of shape {tuple(ishape)} address {m} dimensions "
                         f"of {what} {tuple(dshape)}, which has only {len(dshape)}")
    return m, tuple(ishape[1:]), prod(dshape[:m]), prod(dshape[m:])


def _flat_rows_ref(idx, dshape):
    """torch: row numbers (int64, shape Y) of the index columns, wrapped and clipped."""
    m = idx.shape[0]
    j = idx.detach().to(torch.int64)
    rows = torch.zeros(idx.shape[1:], dtype=torch.int64, device=idx.device)
    for k in range(m):
        d = dshape[k]
        jk = torch.where(j[k] < 0, j[k] + d, j[k]).clamp(0, d - 1)
        rows = rows * d + jk
    return rows


def _flat_rows(b, idx, dshape, ishape):
    """Graph: float row numbers (shape Y) of the index columns, wrapped and clipped."""
    m, y = ishape[0], tuple(ishape[1:])
    rows = None
    for k in range(m):
        col = _reshape(b, b.op("slice_axis", idx, axis=0, begin=k, end=k + 1), y)
        col = b.op("fix", col)                                   # C's truncating cast
        d = float(dshape[k])
        col = b.op("elemwise_add", col, b.op("_mul_scalar", b.op("_lesser_scalar", col,
                                                                   scalar=0.0), scalar=d))
        col = b.op("clip", col, a_min=0.0, a_max=d - 1.0)
        rows = col if rows is None else b.op("elemwise_add", b.op("_mul_scalar", rows,
                                                                  scalar=d), col)
    return rows


def _gather_nd_shape(attrs, in_shapes):
    data, idx = in_shapes
    if data is None or idx is None:
        return in_shapes, [None]
    m, y, _, _ = _nd_geometry("gather_nd", data, idx)
    return in_shapes, [y + tuple(data[m:])]


def _gather_nd_ref(attrs, ins, is_train):
    data, idx = ins
    m, y, nrows, row = _nd_geometry("gather_nd", tuple(data.shape), tuple(idx.shape))
    check_bounds({"sizes": tuple(data.shape[:m]), "negative": True, "op": "gather_nd"}, [idx])
    rows = _flat_rows_ref(idx, tuple(data.shape))
    return [data.reshape(nrows, row)[rows.reshape(-1)].reshape(y + tuple(data.shape[m:]))]


def _gather(b, data, idx, dshape, ishape):
    m, y, nrows, row = _nd_geometry("gather_nd", dshape, ishape)
    # mxnet raises IndexError for an index outside [-size, size) (index_checks.py)
    idx = b.op("_check_index_bounds", idx, sizes=tuple(dshape[:m]), negative=True,
               op="gather_nd")
    rows = _flat_rows(b, idx, dshape, ishape)
    table = _reshape(b, data, (nrows, row))
    got = b.op("Embedding", rows, table, input_dim=nrows, output_dim=row)
    return _reshape(b, got, y + tuple(dshape[m:]))


def _scatter_add(b, values, idx, shape, ishape):
    """zeros(shape) with ``values`` (shape Y + shape[M:]) added at the index columns."""
    m, y, nrows, row = _nd_geometry("scatter_nd", shape, ishape, "shape")
    rows = _flat_rows(b, idx, shape, ishape)
    got = b.op("_embedding_backward", _reshape(b, values, y + (row,)), rows,
               input_dim=nrows, output_dim=row)
    return _reshape(b, got, shape)


register(OpDef(
    name="gather_nd", pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [_gather(b, *n.inputs, *n.in_shapes)]),
    arguments=("data", "indices"),
    infer_shape=_gather_nd_shape, reference=_gather_nd_ref,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    gradient=lambda b, n: [_scatter_add(b, n.ograds[0], n.inputs[1], tuple(n.in_shapes[0]),
                                        tuple(n.in_shapes[1])), b.zeros_like(n.inputs[1])],
    doc="out[y..., rest...] = data[indices[0, y...], ..., indices[M-1, y...], rest...]; "
        "out shape indices.shape[1:] + data.shape[M:]."))


def _scatter_nd_shape(attrs, in_shapes):
    data, idx = in_shapes
    shape = tuple(attrs["shape"])
    if idx is None:
        return in_shapes, [shape]
    m, y, _, _ = _nd_geometry("scatter_nd", shape, idx, "shape")
    want = y + shape[m:]
    if data is not None and tuple(data) != want:
        raise ShapeError(f"scatter_nd: data of shape {tuple(data)} does not fit indices "
                         f"{tuple(idx)} into shape {shape}: it must be {want}")
    return [want, idx], [shape]


def _scatter_nd_ref(attrs, ins, is_train):
    data, idx = ins
    shape = tuple(attrs["shape"])
    m, y, nrows, row = _nd_geometry("scatter_nd", shape, tuple(idx.shape), "shape")
    rows = _flat_rows_ref(idx, shape).reshape(-1)
    out = torch.zeros((nrows, row), dtype=data.dtype, device=data.device)
    out = out.index_copy(0, rows, data.reshape(-1, row)) if rows.unique().numel() == \
        rows.numel() else _last_wins_ref(out, rows, data.reshape(-1, row))
    return [out.reshape(shape)]


def _last_wins_ref(out, rows, values):
    for p in range(rows.numel()):          # mxnet's sequential loop: the last write stays
        out = out.index_copy(0, rows[p:p + 1], values[p:p + 1])
    return out


def _scatter_nd_build(b, n, is_train):
    data, idx = n.inputs
    shape = tuple(n.attrs["shape"])
    ishape = tuple(n.in_shapes[1])
    m, y, nrows, row = _nd_geometry("scatter_nd", shape, ishape, "shape")
    p = prod(y)
    rows = _reshape(b, _flat_rows(b, idx, shape, ishape), (p,))
    # a position is overwritten when a later position holds the same row number
    same = b.op("broadcast_equal", b.op("expand_dims", rows, axis=1),
                b.op("expand_dims", rows, axis=0))                      # (p, p')
    later = b.op("broadcast_greater", b.op("_axis_index", shape=(p, p), axis=1),
                 b.op("_axis_index", shape=(p, p), axis=0))            # p' > p
    overwritten = b.op("sum", b.op("broadcast_mul", same, later), axis=(1,), keepdims=True)
    keep = b.op("_equal_scalar", overwritten, scalar=0.0)                # (p, 1)
    values = b.op("broadcast_mul", _reshape(b, data, (p, row)), keep)
    return [_scatter_add(b, _reshape(b, values, y + (row,)), idx, shape, ishape)]


register(OpDef(
    name="scatter_nd", pattern="composite", lowering=Decompose(_scatter_nd_build),
    arguments=("data", "indices"), attrs=[Attr("shape", parse_shape)],
    infer_shape=_scatter_nd_shape, reference=_scatter_nd_ref,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    gradient=lambda b, n: [_gather(b, n.ograds[0], n.inputs[1], tuple(n.attrs["shape"]),
                                   tuple(n.in_shapes[1])), b.zeros_like(n.inputs[1])],
    doc="zeros(shape) with out[indices[:, y...], rest...] = data[y..., rest...] (the last "
        "write wins where indices repeat)."))


# -- diag ------------------------------------------------------------------------------------

def _diag_geometry(attrs, shape):
    """(perm moving axis1, axis2 last or None for 1-D, D1, D2, first row, length)."""
    k = attrs["k"]
    if len(shape) == 0:
        raise ShapeError("diag: data must have at least 1 dimension, got a scalar")
    if len(shape) == 1:
        n = shape[0] + abs(k)
        return None, n, n, max(-k, 0), shape[0]
    a1 = normalize_axis(attrs["axis1"], len(shape), "diag")
    a2 = normalize_axis(attrs["axis2"], len(shape), "diag")
    if a1 == a2:
        raise ShapeError(f"diag: axis1 and axis2 cannot refer to the same axis {a1} of data "
                         f"{tuple(shape)}")
    perm = tuple(i for i in range(len(shape)) if i not in (a1, a2)) + (a1, a2)
    d1, d2 = shape[a1], shape[a2]
    length = min(d1 - max(-k, 0), d2 - max(k, 0))
    if length <= 0:
        raise ShapeError(f"diag: diagonal k={k} of data {tuple(shape)} over axes ({a1}, {a2}) "
                         f"is empty (zero-size arrays are not supported)")
    return perm, d1, d2, max(-k, 0), length


def _diag_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None]
    perm, d1, d2, _, length = _diag_geometry(attrs, d)
    if perm is None:
        return in_shapes, [(d1, d2)]
    return in_shapes, [tuple(d[i] for i in perm[:-2]) + (length,)]


def _diag_ref(attrs, ins, is_train):
    x = ins[0]
    if x.dim() == 1:
        return [torch.diag(x, attrs["k"])]
    perm, _, _, _, _ = _diag_geometry(attrs, tuple(x.shape))
    return [torch.diagonal(x, attrs["k"], perm[-2], perm[-1]).contiguous()]


def _diag_hit(b, shape, k):
    """1.0 where col - row == k over the last two dims of ``shape``."""
    rows = b.op("_axis_index", shape=shape, axis=len(shape) - 2)
    cols = b.op("_axis_index", shape=shape, axis=len(shape) - 1)
    return b.op("_equal_scalar", b.op("elemwise_sub", cols, rows), scalar=float(k))


def _extract(b, x, shape, k, first, length):
    """(..., D1, D2) -> (..., length): the k-th diagonal."""
    picked = b.op("where", _diag_hit(b, shape, k), x, b.op("_zeros", shape=shape))
    rowsum = b.op("sum", picked, axis=(len(shape) - 1,))
    if first == 0 and length == shape[-2]:
        return rowsum
    return b.op("slice_axis", rowsum, axis=len(shape) - 2, begin=first, end=first + length)


def _place(b, v, shape, k, first, length):
    """(..., length) -> (..., D1, D2): v on the k-th diagonal, zeros elsewhere."""
    lead = tuple(shape[:-2])
    parts = []
    if first:
        parts.append(b.op("_zeros", shape=lead + (first,)))
    parts.append(v)
    if shape[-2] - first - length:
        parts.append(b.op("_zeros", shape=lead + (shape[-2] - first - length,)))
    col = parts[0] if len(parts) == 1 else b.op("Concat", *parts, num_args=len(parts),
                                                   dim=len(lead))
    col = b.op("expand_dims", col, axis=len(lead) + 1)                  # (..., D1, 1)
    return b.op("broadcast_mul", _diag_hit(b, shape, k), col)


def _inverse(perm):
    return tuple(perm.index(i) for i in range(len(perm)))


def _diag_build(b, n, is_train):
    x, shape, k = n.inputs[0], tuple(n.in_shapes[0]), n.attrs["k"]
    perm, d1, d2, first, length = _diag_geometry(n.attrs, shape)
    if perm is None:
        return [_place(b, x, (d1, d2), k, first, length)]
    moved = x if perm == tuple(range(len(shape))) else b.op("transpose", x, axes=perm)
    return [_extract(b, moved, tuple(shape[i] for i in perm), k, first, length)]


def _diag_gradient(b, n):
    dy, shape, k = n.ograds[0], tuple(n.in_shapes[0]), n.attrs["k"]
    perm, d1, d2, first, length = _diag_geometry(n.attrs, shape)
    if perm is None:
        return [_extract(b, dy, (d1, d2), k, first, length)]
    g = _place(b, dy, tuple(shape[i] for i in perm), k, first, length)
    return [g if perm == tuple(range(len(shape))) else
            b.op("transpose", g, axes=_inverse(perm))]


register(OpDef(
    name="diag", pattern="composite", lowering=Decompose(_diag_build),
    attrs=[Attr("k", parse_int, 0), Attr("axis1", parse_int, 0), Attr("axis2", parse_int, 1)],
    infer_shape=_diag_shape, reference=_diag_ref, gradient=_diag_gradient,
    doc="1-D data: the square matrix with data on diagonal k; N-D data: its k-th "
        "diagonal over axis1 and axis2, appended as the last axis."))


# -- argmax_channel, shape_array, size_array -------------------------------------------------

def _argmax_channel_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None]
    if len(d) < 2:
        raise ShapeError(f"argmax_channel: data of shape {tuple(d)} has no axis 1 (it "
                         f"takes the argmax over axis 1)")
    return in_shapes, [tuple(d[:1]) + tuple(d[2:])]


register(OpDef(
    name="argmax_channel", pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [b.op("argmax", n.inputs[0], axis=1)]),
    infer_shape=_argmax_channel_shape,
    reference=lambda attrs, ins, is_train: [torch.argmax(ins[0], 1).to(ins[0].dtype)],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
    doc="The first position of the maximum along axis 1, as a float in data's dtype."))


def _shape_array_build(b, n, is_train):
    parts = [b.op("_full", shape=(1,), value=float(s), dtype="int64")
             for s in n.in_shapes[0]]
    return [parts[0] if len(parts) == 1 else
            b.op("Concat", *parts, num_args=len(parts), dim=0)]


register(OpDef(
    name="shape_array", pattern="composite", lowering=Decompose(_shape_array_build),
    infer_shape=lambda attrs, s: (s, [None if s[0] is None else (len(s[0]),)]),
    infer_type=lambda attrs, in_types: (in_types, ["int64"]),
    reference=lambda attrs, ins, is_train: [torch.tensor(tuple(ins[0].shape),
                                                         dtype=torch.int64)],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
    doc="The shape of data as a 1-D int64 array."))
register(OpDef(
    name="size_array", pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [b.op(
        "_full", shape=(1,), value=float(prod(n.in_shapes[0])), dtype="int64")]),
    infer_shape=lambda attrs, s: (s, [(1,)]),
    infer_type=lambda attrs, in_types: (in_types, ["int64"]),
    reference=lambda attrs, ins, is_train: [torch.tensor([ins[0].numel()],
                                                         dtype=torch.int64)],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
    doc="The number of elements of data as a (1,) int64 array."))


# -- ravel_multi_index, unravel_index --------------------------------------------------------
# mxnet's loops in index arithmetic (ravel.h): ravel is ret = int(ret * shape[j] + u[j]),
# unravel C's truncating division and remainder, the first coordinate keeping what is left
# (so neither checks the range: 50 in (7, 6) unravels to (8, 2)). Here in float32, exact
# for flat indices below 2**24.

def _ravel_shape(name, ravel):
    def shape(attrs, in_shapes):
        d, m = in_shapes[0], len(attrs["shape"])
        if m == 0:
            raise ShapeError(f"{name}: the shape attribute is empty")
        if d is None:
            return in_shapes, [None]
        if ravel and (len(d) != 2 or d[0] != m):
            raise ShapeError(f"{name}: data of shape {tuple(d)} must be ({m}, N): one row "
                             f"per dimension of shape {tuple(attrs['shape'])}")
        if not ravel and len(d) != 1:
            raise ShapeError(f"{name}: data of shape {tuple(d)} must be 1-D (N,)")
        return in_shapes, [(d[1],) if ravel else (m, d[0])]
    return shape


def _ravel_ref(attrs, ins, is_train):
    u = ins[0].detach().double()
    ret = torch.zeros(u.shape[1:], dtype=torch.float64)
    for k, s in enumerate(attrs["shape"]):
        ret = torch.trunc(ret * s + u[k])
    return [ret.to(ins[0].dtype)]


def _unravel_ref(attrs, ins, is_train):
    idx = torch.trunc(ins[0].detach().double())
    coords = []
    for s in reversed(attrs["shape"][1:]):
        tmp = torch.trunc(idx / s)
        coords.append(idx - tmp * s)
        idx = tmp
    coords.append(idx)
    return [torch.stack(coords[::-1]).to(ins[0].dtype)]


def _ravel_build(b, n, is_train):
    shape, (m, count) = n.attrs["shape"], n.in_shapes[0]
    ret = None
    for k, s in enumerate(shape):
        u = _reshape(b, b.op("slice_axis", n.inputs[0], axis=0, begin=k, end=k + 1), (count,))
        ret = u if ret is None else b.op("elemwise_add", b.op("_mul_scalar", ret,
                                                              scalar=float(s)), u)
        ret = b.op("fix", ret)
    return [ret]


def _unravel_build(b, n, is_train):
    shape = n.attrs["shape"]
    idx = b.op("fix", n.inputs[0])
    coords = []
    for s in reversed(shape[1:]):
        tmp = b.op("fix", b.op("_div_scalar", idx, scalar=float(s)))
        coords.append(b.op("elemwise_sub", idx, b.op("_mul_scalar", tmp, scalar=float(s))))
        idx = tmp
    coords.append(idx)
    rows = [b.op("expand_dims", c, axis=0) for c in reversed(coords)]
    return [rows[0] if len(rows) == 1 else b.op("Concat", *rows, num_args=len(rows), dim=0)]


for _name, _alias, _ravel, _ref, _build, _doc in (
        ("_ravel_multi_index", "ravel_multi_index", True, _ravel_ref, _ravel_build,
         "Flat indices into shape of the (len(shape), N) coordinates in data."),
        ("_unravel_index", "unravel_index", False, _unravel_ref, _unravel_build,
         "The (len(shape), N) coordinates in shape of the N flat indices in data.")):
    register(OpDef(
        name=_name, aliases=(_alias,), pattern="composite", lowering=Decompose(_build),
        attrs=[Attr("shape", parse_shape)], infer_shape=_ravel_shape(_alias, _ravel),
        reference=_ref, gradient=lambda b, n: [b.zeros_like(n.inputs[0])], doc=_doc))
