"""``one_hot``, ``pick``, ``take``, ``argmax``, ``argmin``, ``sort``, ``argsort`` and
``topk``, as mxnet 1.9.1 defines them.

Both are composites over the one-hot kernel SoftmaxOutput's gradient already makes
(``_softmax_ce_grad`` over a "probability" of ones, taken from 1): a 1 where the
coordinate along the axis equals ``int(index)`` (C's truncating cast, as mxnet's),
0 elsewhere, so an index outside ``[0, depth)`` hits nothing.

* ``one_hot(indices, depth, on_value, off_value)``: ``off + (on - off) * hit``;
  out-of-range indices give a row of ``off_value``, as in mxnet. Indices get no
  gradient.
* ``pick(data, index, axis, keepdims, mode='clip')``: the index clipped into
  ``[0, M)``, then ``sum(where(hit, data, 0), axis)``; ``data``'s gradient is the
  head gradient at the picked element. ``mode='wrap'``: the index truncated, then
  taken modulo M.
* ``take(a, indices, axis, mode='clip')``: Embedding's gather (rows of ``a``,
  indices clipped into range, as Embedding clips) after moving ``axis`` first,
  and Embedding's scatter-add for ``a``'s gradient. ``mode='wrap'``: as pick's;
  ``'raise'`` is refused (it would need the indices on the host).
* ``argmax`` / ``argmin(data, axis, keepdims)``: the extreme along the axis, then the
  smallest position holding it (the first, as mxnet; a row with NaN: its first NaN),
  from ``_axis_index`` (each element's coordinate along an axis, computed in the
  kernel). ``axis=None``
  flattens, as mxnet does (shape ``(1,)``). Float indices, no gradient (zeros).
* ``sort`` / ``argsort`` / ``topk``: by rank, with no sorting kernel: element i's
  rank along the axis is the number of elements before it in the order (smaller,
  or larger when descending, or equal at a smaller position: a stable order, as
  mxnet's ``std::stable_sort`` on CPU), a fused compare-and-count over the M x M
  pairs of each row; position r of the result then collects the element of rank
  r. M x M work a row: meant for class counts (top-5 of 1,000 classes). Above
  ``MAX_SORT_LENGTH`` elements along the axis, one extern ``torch.sort``
  (``sort_extern.py``) gives the values, positions and ranks instead. The values'
  gradient is the head gradient read back at each element's rank.
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from .index_checks import check_bounds
from ..shape_semantics import zero_is_size
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, choice,
                       normalize_axis, parse_bool, parse_float, parse_int,
                       parse_dtype, parse_optional_int, parse_shape, prod,
                       register)


def _hit(b, indices, shape, axis):
    """1.0 where the coordinate along ``axis`` of ``shape`` equals int(indices), +0.0
    elsewhere: ``1 - (1 - onehot)``, where ``-(0 - onehot)`` would give -0.0 there (a
    printed ``-0.``, and ``1 / x`` of -inf)."""
    ones = b.op("_ones", shape=tuple(shape))
    miss = b.op("_softmax_ce_grad", ones, indices, axis=axis, grad_scale=1.0)
    return b.op("_rminus_scalar", miss, scalar=1.0)


# -- one_hot -----------------------------------------------------------------------------

def _one_hot_shape(attrs, in_shapes):
    idx = in_shapes[0]
    if attrs["depth"] < 0:      # depth 0: a zero-size result, as mxnet gives
        raise ShapeError(f"one_hot: depth must be at least 0, got {attrs['depth']}")
    return in_shapes, [None if idx is None else tuple(idx) + (attrs["depth"],)]


def _one_hot_ref(attrs, ins, is_train):
    idx = ins[0].detach().to(torch.int64)
    depth = attrs["depth"]
    cls = torch.arange(depth, device=idx.device)
    hit = (idx.unsqueeze(-1) == cls).to(torch.float32)
    return [attrs["off_value"] + (attrs["on_value"] - attrs["off_value"]) * hit]


def _one_hot_build(b, n, is_train):
    shape = n.out_shapes[0]
    hit = _hit(b, n.inputs[0], shape, len(shape) - 1)
    on, off = n.attrs["on_value"], n.attrs["off_value"]
    out = hit if (on, off) == (1.0, 0.0) else b.op("_plus_scalar", b.op(
        "_mul_scalar", hit, scalar=on - off), scalar=off)
    return [out]


register(OpDef(
    name="one_hot", pattern="composite", lowering=Decompose(_one_hot_build),
    arguments=("indices",),
    attrs=[Attr("depth", parse_int), Attr("on_value", parse_float, 1.0),
           Attr("off_value", parse_float, 0.0), Attr("dtype", parse_dtype, "float32")],
    infer_shape=_one_hot_shape, reference=_one_hot_ref,
    infer_type=lambda attrs, in_types: (in_types, [attrs["dtype"]]),
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
    doc="out[..., j] = on_value if j == int(indices[...]) else off_value; shape "
        "indices.shape + (depth,)."))


# -- pick ----------------------------------------------------------------------------------

def _pick_axis(attrs, shape):
    if attrs["axis"] is None:
        raise ShapeError("pick: axis=None (pick from the flattened data) is not supported "
                         "yet; give an axis")
    return normalize_axis(attrs["axis"], len(shape), "pick")


def _pick_shape(attrs, in_shapes):
    data, idx = in_shapes
    if data is None:
        return in_shapes, [None]
    ax = _pick_axis(attrs, data)
    removed = tuple(s for i, s in enumerate(data) if i != ax)
    kept = tuple(1 if i == ax else s for i, s in enumerate(data))
    if idx is not None and tuple(idx) not in (removed, kept):
        raise ShapeError(f"pick: index of shape {tuple(idx)} does not fit data {tuple(data)} "
                         f"along axis {ax}: it must be {removed} (or {kept})")
    out = kept if attrs["keepdims"] else removed
    if not data[ax] and prod(out) and zero_is_size():
        raise ShapeError(f"pick: data of shape {tuple(data)} has no element along axis {ax} "
                         f"to pick from")
    return [data, idx if idx is not None else out], [out]


def _pick_ref(attrs, ins, is_train):
    data, idx = ins
    ax = _pick_axis(attrs, tuple(data.shape))
    m = data.shape[ax]
    j = idx.detach().to(torch.int64)        # truncated toward zero, as mxnet's cast
    j = j.remainder(m) if attrs["mode"] == "wrap" else j.clamp(0, m - 1)
    if j.dim() < data.dim():
        j = j.unsqueeze(ax)
    out = torch.gather(data, ax, j)
    return [out if attrs["keepdims"] else out.squeeze(ax)]


def _pick_hit(b, n):
    data_shape = n.in_shapes[0]
    ax = _pick_axis(n.attrs, data_shape)
    removed = tuple(s for i, s in enumerate(data_shape) if i != ax)
    idx = n.inputs[1]
    if tuple(n.in_shapes[1]) != removed:
        idx = b.op("Reshape", idx, shape=removed)
    if n.attrs["mode"] == "wrap":     # truncated, then modulo the axis, non-negative
        chosen = b.op("_mod_scalar", b.op("fix", idx), scalar=float(data_shape[ax]))
    else:
        chosen = b.op("clip", idx, a_min=0.0, a_max=float(data_shape[ax] - 1))
    return _hit(b, chosen, data_shape, ax), ax


def _pick_build(b, n, is_train):
    hit, ax = _pick_hit(b, n)
    picked = b.op("where", hit, n.inputs[0], b.op("_zeros", shape=tuple(n.in_shapes[0])))
    return [b.op("sum", picked, axis=(ax,), keepdims=n.attrs["keepdims"])]


def _pick_gradient(b, n):
    hit, ax = _pick_hit(b, n)
    dy = n.ograds[0]
    if not n.attrs["keepdims"]:
        dy = b.op("expand_dims", dy, axis=ax)
    return [b.op("broadcast_mul", hit, dy), b.zeros_like(n.inputs[1])]


register(OpDef(
    name="pick", pattern="composite", lowering=Decompose(_pick_build),
    arguments=("data", "index"), aliases=("choose_element_0index",),
    attrs=[Attr("axis", parse_optional_int, -1), Attr("keepdims", parse_bool, False),
           Attr("mode", choice("clip", "wrap"), "clip")],
    infer_shape=_pick_shape, reference=_pick_ref, gradient=_pick_gradient,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    doc="out = data[..., clip(int(index)), ...] along axis (mode='wrap': int(index) "
        "modulo the axis); index has data's shape without axis."))


# -- take ----------------------------------------------------------------------------------

def _take_geometry(attrs, a_shape, idx_shape):
    """axis, the permutation moving it first, rows, the row size and the output shape."""
    ax = normalize_axis(attrs["axis"], len(a_shape), "take")
    perm = (ax,) + tuple(i for i in range(len(a_shape)) if i != ax)
    rest = tuple(a_shape[i] for i in perm[1:])
    row = 1
    for s in rest:
        row *= s
    out = tuple(a_shape[:ax]) + tuple(idx_shape) + tuple(a_shape[ax + 1:])
    return ax, perm, a_shape[ax], row, rest, out


def _take_shape(attrs, in_shapes):
    a, idx = in_shapes
    if a is None or idx is None:
        return in_shapes, [None]
    out = _take_geometry(attrs, a, idx)[5]
    if prod(out) and prod(a) == 0 and zero_is_size():
        # no element to take (NumPy shape semantics); mxnet 1.9.1 reads past its buffer
        raise ShapeError(f"take: data of shape {tuple(a)} has no element along axis "
                         f"{attrs['axis']} to take indices of shape {tuple(idx)} from")
    return in_shapes, [out]


def _take_ref(attrs, ins, is_train):
    a, idx = ins
    ax = normalize_axis(attrs["axis"], a.dim(), "take")
    j = idx.detach().to(torch.int64)        # truncated toward zero, as mxnet's cast
    if attrs["mode"] == "raise":
        check_bounds({"sizes": (a.shape[ax],), "negative": False, "op": "take"}, [idx])
    j = j.remainder(a.shape[ax]) if attrs["mode"] == "wrap" else j.clamp(0, a.shape[ax] - 1)
    out = torch.index_select(a, ax, j.reshape(-1))
    return [out.reshape(tuple(a.shape[:ax]) + tuple(idx.shape) + tuple(a.shape[ax + 1:]))]


def _move_back(b, v, idx_nd, ax, out_shape):
    """(indices..., rest...) -> (a[:ax]..., indices..., a[ax+1:]...)."""
    if ax == 0:
        return _reshape(b, v, out_shape)
    lead = list(range(idx_nd, idx_nd + ax))
    axes = tuple(lead) + tuple(range(idx_nd)) + tuple(range(idx_nd + ax, len(out_shape)))
    return b.op("transpose", v, axes=axes)


def _reshape(b, v, shape):
    return v if tuple(v.shape) == tuple(shape) else b.op("Reshape", v, shape=tuple(shape))


def _take_indices(b, n, rows):
    """The indices the rows are read at: as given (Embedding clips them), or with
    ``mode='wrap'`` truncated then taken modulo the rows, non-negative (mxnet's wrap)."""
    idx = n.inputs[1]
    if n.attrs["mode"] == "raise":      # checked, then read as clip reads it
        return b.op("_check_index_bounds", idx, sizes=(rows,), op="take")
    if n.attrs["mode"] != "wrap":
        return idx
    return b.op("_mod_scalar", b.op("fix", idx), scalar=float(rows))


def _take_build(b, n, is_train):
    a, _ = n.inputs
    ax, perm, rows, row, rest, out = _take_geometry(n.attrs, n.in_shapes[0], n.in_shapes[1])
    idx = _take_indices(b, n, rows)
    moved = a if ax == 0 else b.op("transpose", a, axes=perm)
    table = _reshape(b, moved, (rows, row))
    got = b.op("Embedding", idx, table, input_dim=rows, output_dim=row, dtype=a.dtype)
    got = _reshape(b, got, tuple(n.in_shapes[1]) + rest)
    return [_move_back(b, got, len(n.in_shapes[1]), ax, out)]


def _take_gradient(b, n):
    a, idx = n.inputs
    a_shape, idx_shape = n.in_shapes
    ax, perm, rows, row, rest, out = _take_geometry(n.attrs, a_shape, idx_shape)
    dy = n.ograds[0]
    k = len(idx_shape)
    if ax:      # (a[:ax]..., indices..., rest...) -> (indices..., a[:ax]..., rest...)
        axes = tuple(range(ax, ax + k)) + tuple(range(ax)) + tuple(range(ax + k, len(out)))
        dy = b.op("transpose", dy, axes=axes)
    dy = _reshape(b, dy, tuple(idx_shape) + (row,))
    grad = b.op("_embedding_backward", dy, _take_indices(b, n, rows), input_dim=rows,
                output_dim=row)
    grad = _reshape(b, grad, (rows,) + rest)
    if ax:
        inverse = tuple(perm.index(i) for i in range(len(a_shape)))
        grad = b.op("transpose", grad, axes=inverse)
    return [grad, b.zeros_like(idx)]


register(OpDef(
    name="take", pattern="composite", lowering=Decompose(_take_build),
    arguments=("a", "indices"),
    attrs=[Attr("axis", parse_int, 0), Attr("mode", choice("clip", "wrap", "raise"), "clip")],
    infer_shape=_take_shape, reference=_take_ref, gradient=_take_gradient,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    doc="Slices of a along axis at clip(int(indices)) (mode='wrap': int(indices) modulo "
        "the axis; mode='raise': an error for an index outside [0, axis size)): out shape "
        "a.shape[:axis] + indices.shape + a.shape[axis + 1:]."))


# -- _axis_index, argmax, argmin -----------------------------------------------------------

def _axis_index_expr(attrs, *, coords):
    c = coords[attrs["axis"]]
    return ops.const(0.0) if c is None else c * 1.0     # the integer coordinate as a float


register(OpDef(
    name="_axis_index", pattern="broadcast", lowering=Pointwise(_axis_index_expr),
    arguments=(), attrs=[Attr("shape", parse_shape), Attr("axis", parse_int)],
    needs_coords=True,
    infer_shape=lambda attrs, in_shapes: ([], [tuple(attrs["shape"])]),
    infer_type=lambda attrs, in_types: ([], ["float32"]),
    reference=lambda attrs, ins, is_train: [torch.arange(
        attrs["shape"][attrs["axis"]], dtype=torch.float32).reshape(
        [s if i == attrs["axis"] else 1 for i, s in enumerate(attrs["shape"])]).expand(
        tuple(attrs["shape"])).contiguous()],
    doc="out[...] = the element's coordinate along `axis` of `shape` (a float)."))


def _arg_shape(name):
    def shape(attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return in_shapes, [None]
        if attrs["axis"] is None:
            return in_shapes, [(1,) * len(d) if attrs["keepdims"] else (1,)]
        ax = normalize_axis(attrs["axis"], len(d), name)
        return in_shapes, [tuple(1 if i == ax else s for i, s in enumerate(d))
                           if attrs["keepdims"] else tuple(s for i, s in enumerate(d) if i != ax)]
    return shape


def _arg_ref(find):
    def ref(attrs, ins, is_train):
        x = ins[0]
        if attrs["axis"] is None:
            out = find(x.reshape(-1), 0).to(torch.float32).reshape(
                (1,) * x.dim() if attrs["keepdims"] else (1,))
            return [out]
        ax = normalize_axis(attrs["axis"], x.dim(), "argmax")
        return [find(x, ax, keepdim=attrs["keepdims"]).to(torch.float32)]
    return ref


def _first_extreme(extreme):
    def build(b, n, is_train):
        x = n.inputs[0]
        shape = tuple(n.in_shapes[0])
        if n.attrs["axis"] is None:
            x = b.op("Reshape", x, shape=(prod(shape),))
            shape, ax = (prod(shape),), 0
        else:
            ax = normalize_axis(n.attrs["axis"], len(shape), n.name)
        best = b.op(extreme, x, axis=(ax,), keepdims=True)
        index = b.op("_axis_index", shape=shape, axis=ax)
        beyond = b.op("_full", shape=shape, value=float(shape[ax]))
        # a row holding NaN has NaN for its extreme, which equals nothing: its first NaN
        # is the answer, as in mxnet and numpy (NaN is the one value unequal to itself)
        hit = b.op("_logical_or", b.op("broadcast_equal", x, best), b.op("_not_equal", x, x))
        at_best = b.op("where", hit, index, beyond)
        out = b.op("min", at_best, axis=(ax,), keepdims=n.attrs["keepdims"])
        want = tuple(n.out_shapes[0])
        return [out if tuple(out.shape) == want else b.op("Reshape", out, shape=want)]
    return build


for _name, _extreme, _find in (("argmax", "max", torch.argmax), ("argmin", "min", torch.argmin)):
    register(OpDef(
        name=_name, pattern="composite", lowering=Decompose(_first_extreme(_extreme)),
        attrs=[Attr("axis", parse_optional_int, None), Attr("keepdims", parse_bool, False)],
        infer_shape=_arg_shape(_name), reference=_arg_ref(_find),
        # mxnet: the positions come in the data's dtype
        infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
        gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
        doc=f"The first position of the {_extreme}imum along axis (flattened for "
            f"axis=None), as a float."))


# -- sort, argsort, topk -------------------------------------------------------------------

MAX_SORT_LENGTH = 4096


def _sort_axis(attrs, shape, name):
    if attrs["axis"] is None:
        return None
    return normalize_axis(attrs["axis"], len(shape), name)


def _sort_length(shape, ax, name):
    return prod(shape) if ax is None else shape[ax]


def _long(last) -> bool:
    """Whether the axis is sorted by ``torch.sort`` (``sort_extern.py``), not ranked by
    M x M comparisons."""
    return last[-1] > MAX_SORT_LENGTH


def _sorted_parts(b, x, last, descending):
    """``(values, positions, ranks)`` along the last axis of ``last`` by one extern sort."""
    return b.op("_sort_last", x, is_ascend=not descending)


def _rank_of(b, x, last, descending):
    """Each element's rank along the last axis: compared, or from the extern sort."""
    if _long(last):
        return _sorted_parts(b, x, last, descending)[2]
    return _ranks(b, x, last, descending)


def _sorted_by_rank(b, x, last, descending, src):
    """The values (``src='values'``) or positions in sorted order along the last axis."""
    if _long(last):
        values, where, _ = _sorted_parts(b, x, last, descending)
        return values if src == "values" else where
    rank = _ranks(b, x, last, descending)
    if src == "values":
        return _by_rank(b, rank, x, last)
    return _by_rank(b, rank, b.op("_axis_index", shape=last, axis=len(last) - 1), last)


def _dy_at_rank(b, rank, dy, last):
    """dx[..., i] = dy[..., rank[..., i]]: compared, or gathered on a long axis."""
    if _long(last):
        return b.op("_gather_last", dy, rank)
    return _at_rank(b, rank, dy, last)


def _to_last(b, x, shape, ax):
    """x with the sorted axis last (flattened for axis=None): (ref, its shape)."""
    if ax is None:
        flat = (prod(shape),)
        return b.op("Reshape", x, shape=flat), flat
    if ax == len(shape) - 1:
        return x, tuple(shape)
    perm = tuple(i for i in range(len(shape)) if i != ax) + (ax,)
    return b.op("transpose", x, axes=perm), tuple(shape[i] for i in perm)


def _from_last(b, v, shape, ax):
    """Inverse of :func:`_to_last` for a result whose last axis replaced ``shape[ax]``."""
    if ax is None or ax == len(shape) - 1:
        return v
    n = len(shape)
    inverse = tuple(range(ax)) + (n - 1,) + tuple(range(ax, n - 1))
    return b.op("transpose", v, axes=inverse)


def _ranks(b, x, shape, descending):
    """Each element's position in the stable order along the last axis of ``shape``."""
    m = shape[-1]
    pair = tuple(shape) + (m,)                    # (..., i, j)
    xi = b.op("expand_dims", x, axis=len(shape))          # (..., M, 1)
    xj = b.op("expand_dims", x, axis=len(shape) - 1)      # (..., 1, M)
    ii = b.op("_axis_index", shape=pair, axis=len(shape) - 1)
    jj = b.op("_axis_index", shape=pair, axis=len(shape))
    before = b.op("broadcast_greater" if descending else "broadcast_lesser", xj, xi)
    tie = b.op("broadcast_mul", b.op("broadcast_equal", xj, xi),
               b.op("broadcast_lesser", jj, ii))
    return b.op("sum", b.op("broadcast_add", before, tie), axis=(len(shape),))


def _by_rank(b, rank, values, shape):
    """out[..., r] = values[..., i] for the i of rank r (values shaped like rank)."""
    m = shape[-1]
    pair = tuple(shape) + (m,)                    # (..., i, r)
    rr = b.op("_axis_index", shape=pair, axis=len(shape))
    hit = b.op("broadcast_equal", b.op("expand_dims", rank, axis=len(shape)), rr)
    vi = b.op("expand_dims", values, axis=len(shape))
    return b.op("sum", b.op("broadcast_mul", hit, vi), axis=(len(shape) - 1,))


def _at_rank(b, rank, dy, shape):
    """dx[..., i] = dy[..., rank[..., i]]: the gradient each element's rank received."""
    m = shape[-1]
    pair = tuple(shape) + (m,)                    # (..., i, r)
    rr = b.op("_axis_index", shape=pair, axis=len(shape))
    hit = b.op("broadcast_equal", b.op("expand_dims", rank, axis=len(shape)), rr)
    dyr = b.op("expand_dims", dy, axis=len(shape) - 1)
    return b.op("sum", b.op("broadcast_mul", hit, dyr), axis=(len(shape),))


def _sort_shape(name, out_kind):
    def shape(attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return in_shapes, [None]
        ax = _sort_axis(attrs, d, name)
        _sort_length(d, ax, name)
        out = (prod(d),) if ax is None else tuple(d)
        return in_shapes, [out] * (2 if out_kind == "values" else 1)
    return shape


def _sorted_ref(attrs, ins, indices):
    x = ins[0]
    ax = -1 if attrs["axis"] is None else attrs["axis"]
    x = x.reshape(-1) if attrs["axis"] is None else x
    order = torch.sort(x, dim=ax, descending=not attrs["is_ascend"], stable=True)
    if indices:
        return [order.indices.to(torch.float32)]
    return [order.values, order.indices.to(torch.float32)]


def _sort_build(indices):
    def build(b, n, is_train):
        shape = tuple(n.in_shapes[0])
        ax = _sort_axis(n.attrs, shape, n.name)
        x, last = _to_last(b, n.inputs[0], shape, ax)
        down = not n.attrs["is_ascend"]
        if indices:
            return [_from_last(b, _sorted_by_rank(b, x, last, down, "positions"), shape, ax)]
        # sort: the values, and (hidden, as mxnet's second output) the indices
        return [_from_last(b, _sorted_by_rank(b, x, last, down, src), shape, ax)
                for src in ("values", "positions")]
    return build


def _sort_gradient(b, n):
    shape = tuple(n.in_shapes[0])
    ax = _sort_axis(n.attrs, shape, n.name)
    x, last = _to_last(b, n.inputs[0], shape, ax)
    rank = _rank_of(b, x, last, not n.attrs["is_ascend"])
    dy, _ = _to_last(b, n.ograds[0], tuple(n.out_shapes[0]) if ax is not None else last, ax)
    dx = _dy_at_rank(b, rank, dy, last)
    if ax is None:
        return [b.op("Reshape", dx, shape=shape)]
    return [_from_last(b, dx, shape, ax)]


def _dtype_attr():
    return Attr("dtype", parse_dtype, "float32")


register(OpDef(
    name="sort", pattern="composite", lowering=Decompose(_sort_build(False)),
    outputs=("output0", "output1"), num_visible=lambda attrs: 1,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0], "float32"]),
    attrs=[Attr("axis", parse_optional_int, -1), Attr("is_ascend", parse_bool, True)],
    infer_shape=_sort_shape("sort", "values"),
    reference=lambda attrs, ins, is_train: _sorted_ref(attrs, ins, False),
    gradient=_sort_gradient,
    doc="The values sorted along axis (flattened for axis=None)."))
register(OpDef(
    name="argsort", pattern="composite", lowering=Decompose(_sort_build(True)),
    attrs=[Attr("axis", parse_optional_int, -1), Attr("is_ascend", parse_bool, True),
           _dtype_attr()],
    infer_shape=_sort_shape("argsort", "indices"),
    infer_type=lambda attrs, in_types: (in_types, [attrs["dtype"]]),
    reference=lambda attrs, ins, is_train: _sorted_ref(attrs, ins, True),
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
    doc="The positions that sort the data along axis (stable; float)."))


def _topk_outputs(attrs):
    """mxnet's names: 'value' and 'both' have two outputs (values, indices; 'value'
    shows only the first), 'indices' and 'mask' one."""
    return ["output0", "output1"] if attrs["ret_typ"] in ("value", "both") else ["output"]


def _topk_shape(attrs, in_shapes):
    d = in_shapes[0]
    n_out = 2 if attrs["ret_typ"] in ("value", "both") else 1
    if d is None:
        return in_shapes, [None] * n_out
    ax = _sort_axis(attrs, d, "topk")
    m = _sort_length(d, ax, "topk")
    k = attrs["k"] if attrs["k"] > 0 else m
    if k > m:
        raise ShapeError(f"topk: k={k} is larger than the {m} elements along the axis")
    if attrs["ret_typ"] == "mask":
        return in_shapes, [tuple(d)]
    if ax is None:
        out = (k,)
    else:
        out = tuple(k if i == ax else s for i, s in enumerate(d))
    return in_shapes, [out] * n_out


def _topk_ref(attrs, ins, is_train):
    x = ins[0]
    flat = attrs["axis"] is None
    xx = x.reshape(-1) if flat else x
    ax = -1 if flat else attrs["axis"]
    m = xx.shape[ax]
    k = attrs["k"] if attrs["k"] > 0 else m
    order = torch.sort(xx, dim=ax, descending=not attrs["is_ascend"], stable=True)
    vals = order.values.narrow(ax, 0, k)
    idx = order.indices.narrow(ax, 0, k)
    typ = attrs["ret_typ"]
    if typ == "mask":
        mask = torch.zeros_like(xx).scatter_(ax, idx, 1.0)
        return [mask.reshape(x.shape)]
    if typ == "value":
        return [vals, idx.to(torch.float32)]
    if typ == "indices":
        return [idx.to(torch.float32)]
    return [vals, idx.to(torch.float32)]


def _topk_build(b, n, is_train):
    shape = tuple(n.in_shapes[0])
    a = n.attrs
    ax = _sort_axis(a, shape, n.name)
    x, last = _to_last(b, n.inputs[0], shape, ax)
    m = last[-1]
    k = a["k"] if a["k"] > 0 else m
    down = not a["is_ascend"]
    if a["ret_typ"] == "mask":
        mask = b.op("_lesser_scalar", _rank_of(b, x, last, down), scalar=float(k))
        mask = _from_last(b, mask, shape, ax)
        return [mask if ax is not None else b.op("Reshape", mask, shape=shape)]

    def first_k(src):
        full = _sorted_by_rank(b, x, last, down, src)
        part = full if k == m else b.op("slice_axis", full, axis=len(last) - 1, begin=0, end=k)
        return _from_last(b, part, shape, ax)

    vals = first_k("values") if a["ret_typ"] in ("value", "both") else None
    idx = first_k("positions")
    return [v for v in (vals, idx) if v is not None]


def _topk_gradient(b, n):
    a = n.attrs
    if a["ret_typ"] not in ("value", "both"):
        return [b.zeros_like(n.inputs[0])]
    shape = tuple(n.in_shapes[0])
    ax = _sort_axis(a, shape, n.name)
    x, last = _to_last(b, n.inputs[0], shape, ax)
    m = last[-1]
    k = a["k"] if a["k"] > 0 else m
    rank = _rank_of(b, x, last, not a["is_ascend"])
    out_shape = tuple(n.out_shapes[0])
    dy, dlast = _to_last(b, n.ograds[0], out_shape, None if ax is None else ax)
    if k < m:     # ranks k.. get nothing: pad the head gradient with zeros to M
        pad = b.op("_zeros", shape=tuple(dlast[:-1]) + (m - k,))
        dy = b.op("Concat", dy, pad, num_args=2, dim=len(dlast) - 1)
    dx = _dy_at_rank(b, rank, dy, last)
    if ax is None:
        return [b.op("Reshape", dx, shape=shape)]
    return [_from_last(b, dx, shape, ax)]


register(OpDef(
    name="topk", pattern="composite", lowering=Decompose(_topk_build),
    outputs=_topk_outputs,
    attrs=[Attr("axis", parse_optional_int, -1), Attr("k", parse_int, 1),
           Attr("ret_typ", choice("value", "indices", "mask", "both"), "indices"),
           Attr("is_ascend", parse_bool, False), _dtype_attr()],
    num_visible=lambda attrs: 2 if attrs["ret_typ"] == "both" else 1,
    infer_shape=_topk_shape, reference=_topk_ref, gradient=_topk_gradient,
    # mxnet: values and masks in the data's dtype, indices in ``dtype``
    infer_type=lambda attrs, t: (t, {"value": [t[0], t[0]], "indices": [attrs["dtype"]],
                                     "mask": [t[0]], "both": [t[0], attrs["dtype"]]}[
                                         attrs["ret_typ"]]),
    doc="The k largest (smallest with is_ascend) along axis: values, indices (float), "
        "a 0/1 mask of the data's shape, or both values and indices."))
