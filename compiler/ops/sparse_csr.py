"""mxnet 1.9.1's operators over a csr matrix's stored entries: ``_contrib_getnnz``
(``mx.nd.contrib.getnnz(data, axis=None)``) and ``_contrib_edge_id``
(``mx.nd.contrib.edge_id(data, u, v)``).

Both read what a csr array stores, explicit zeros included (``getnnz`` counts them;
``edge_id`` answers a stored 0 rather than -1), which the Program's dense view of a
sparse argument loses (``runtime/executor_sparse.py``). So they run imperatively, on
the parts: ``mx.nd`` passes a csr array's ``data``, ``indices`` and ``indptr`` to the
hidden operators ``_csr_getnnz`` / ``_csr_edge_id`` (``OpDef.sparse_form``), one extern
launch each. A symbol holding them is refused when it compiles, naming the node (mxnet
binds a csr variable; here that would compute on the dense view). As in mxnet, a dense
input is refused, and ``getnnz`` with ``axis=0`` is not computed ("not supported yet").

* ``getnnz``: int64; the whole matrix's count, shape ``(1,)`` (``axis=None``), or each
  row's (``axis=1``).
* ``edge_id``: ``out[i] = data[u[i], v[i]]`` where that entry is stored, else -1, in
  ``data``'s dtype; ``u`` and ``v`` are 1-D of one length.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .registry import (Attr, Decompose, Extern, OpDef, ShapeError, parse_int,
                       parse_optional_int, register)


def _imperative_only(what):
    raise MXNetError(
        f"{what}: this operator reads a csr array's stored entries, which a bound "
        f"symbol's dense view loses; call it imperatively (mx.nd.contrib), on a CSRNDArray")


def _refuse_symbol(op):
    """A ``Decompose`` build refusing to compile ``op``, naming the node."""
    def build(b, n, is_train):
        _imperative_only(f"{op} '{n.name}'")
    return build


def _csr_parts(op, x):
    if getattr(x, "stype", "default") != "csr":
        raise MXNetError(f"{op}: data must be a csr array (mxnet implements it for csr "
                         f"storage only), got {getattr(x, 'stype', 'default')} storage")
    return [x.data, x.indices, x.indptr]


# -- getnnz ------------------------------------------------------------------------

def _nnz_out(attrs, shape):
    axis = attrs["axis"]
    if axis is None:
        return (1,)
    if axis in (0, 1):
        return (shape[1 - axis],)
    raise ShapeError(f"getnnz: unexpected value for axis ({axis}); candidates are None, 0 "
                     f"and 1")


def _nnz_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None]
    if len(d) != 2:
        raise ShapeError(f"getnnz: data must be a 2-D (csr) matrix, got shape {tuple(d)}")
    return [tuple(d)], [_nnz_out(attrs, d)]


def _nnz_form(attrs, inputs):
    if attrs["axis"] == 0:
        raise MXNetError("getnnz with axis = 0 is not supported yet (mxnet 1.9.1)")
    x = inputs[0]
    _nnz_out(attrs, tuple(x.shape))
    return "_csr_getnnz", {"axis": attrs["axis"]}, [_csr_parts("getnnz", x)[2]]


def _csr_nnz(attrs, ins):
    ptr = ins[0].reshape(-1).to(torch.int64)
    if attrs["axis"] is None:
        return [ptr[-1:].clone()]
    return [ptr[1:] - ptr[:-1]]


def _csr_nnz_shape(attrs, in_shapes):
    p = in_shapes[0]
    out = None if p is None else ((1,) if attrs["axis"] is None else (p[0] - 1,))
    return [p], [out]


_NNZ_AXIS = Attr("axis", parse_optional_int, None)
register(OpDef(
    name="_contrib_getnnz", pattern="opaque",
    lowering=Decompose(_refuse_symbol("_contrib_getnnz")),
    attrs=(_NNZ_AXIS,), infer_shape=_nnz_shape,
    infer_type=lambda attrs, t: (list(t), ["int64"]),
    reference=lambda attrs, ins, is_train: _imperative_only("getnnz"),
    sparse_form=_nnz_form,
    doc="The number of stored values of a csr matrix (explicit zeros included), in all "
        "or per row: imperative only."))
register(OpDef(
    name="_csr_getnnz", pattern="opaque", lowering=Extern(_csr_nnz), arguments=("indptr",),
    attrs=(_NNZ_AXIS,), infer_shape=_csr_nnz_shape,
    infer_type=lambda attrs, t: (list(t), ["int64"]),
    reference=lambda attrs, ins, is_train: _csr_nnz(attrs, ins),
    doc="getnnz over a csr matrix's row pointers."))


# -- edge_id -----------------------------------------------------------------------

def _uv_check(u, v):
    for name, s in (("u", u), ("v", v)):
        if s is not None and len(s) != 1:
            raise ShapeError(f"edge_id: {name} must be 1-D, got shape {tuple(s)}")
    if u is not None and v is not None and u[0] != v[0]:
        raise ShapeError(f"edge_id: u {tuple(u)} and v {tuple(v)} differ in length")


def _edge_shape(attrs, in_shapes):
    d, u, v = in_shapes
    _uv_check(u, v)
    uv = u if u is not None else v
    return [d, uv, uv], [None if uv is None else tuple(uv)]


def _edge_form(attrs, inputs):
    data, u, v = inputs
    _uv_check(tuple(u.shape), tuple(v.shape))
    parts = _csr_parts("edge_id", data)
    if parts[1].shape[0] == 0:      # nothing stored: every answer is -1
        return "_full", {"shape": tuple(u.shape), "value": -1.0,
                         "dtype": str(parts[0].dtype), "ctx": data.context}, []
    return "_csr_edge_id", {"num_cols": int(data.shape[1])}, parts + [u, v]


def _csr_edge(attrs, ins):
    """std::find of column v[i] among row u[i]'s stored entries: the first match."""
    vals, idx, ptr, u, v = ins
    idx, ptr = idx.reshape(-1).to(torch.int64), ptr.reshape(-1).to(torch.int64)
    rows = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device),
                                   ptr[1:] - ptr[:-1])
    keys = rows * attrs["num_cols"] + idx
    order = torch.sort(keys, stable=True)
    want = u.to(torch.int64) * attrs["num_cols"] + v.to(torch.int64)
    at = torch.searchsorted(order.values, want).clamp(max=max(keys.numel() - 1, 0))
    out = torch.full(want.shape, -1, dtype=vals.dtype, device=vals.device)
    if keys.numel():
        hit = order.values[at] == want
        out[hit] = vals.reshape(-1)[order.indices[at[hit]]]
    return [out]


def _csr_edge_shape(attrs, in_shapes):
    d, i, p, u, v = in_shapes
    _uv_check(u, v)
    return list(in_shapes), [None if u is None else tuple(u)]


register(OpDef(
    name="_contrib_edge_id", pattern="opaque",
    lowering=Decompose(_refuse_symbol("_contrib_edge_id")),
    arguments=("data", "u", "v"), infer_shape=_edge_shape,
    infer_type=lambda attrs, t: (list(t), [t[0]]),
    reference=lambda attrs, ins, is_train: _imperative_only("edge_id"),
    sparse_form=_edge_form,
    doc="data[u[i], v[i]] where the csr matrix stores that entry, else -1: imperative "
        "only."))
register(OpDef(
    name="_csr_edge_id", pattern="opaque", lowering=Extern(_csr_edge),
    arguments=("data", "indices", "indptr", "u", "v"),
    attrs=(Attr("num_cols", parse_int),), infer_shape=_csr_edge_shape,
    infer_type=lambda attrs, t: (list(t), [t[0]]),
    reference=lambda attrs, ins, is_train: _csr_edge(attrs, ins),
    doc="edge_id over a csr matrix's parts (data, indices, indptr)."))
