"""``_sparse_retain`` (``mx.sym.sparse.retain`` / ``mx.nd.sparse.retain``): the rows of
``data`` whose ids ``indices`` lists, the other rows zero.

mxnet 1.9.1 implements it for a row_sparse ``data`` (the result keeps the listed rows
that ``data`` stores); in a bound symbol the Program computes on dense arrays
(``runtime/executor_sparse.py``), where that is the same values: the listed rows of
``data``, zeros elsewhere. Storage inference gives the output ``data``'s storage and
the gradient of ``data`` the rows ``indices`` lists
(``compiler/passes/storage_type.py``). ``indices`` is read as row ids (any dtype,
truncated); ids outside ``[0, rows)`` select nothing. Its gradient is that of a
mask: ``ograd`` retained at the same rows; ``indices`` gets none.
"""
from __future__ import annotations

import torch

from .registry import Extern, OpDef, ShapeError, register


def _shape(attrs, in_shapes):
    data, idx = in_shapes
    if idx is not None and len(idx) != 1:
        raise ShapeError(f"_sparse_retain: indices must be 1-D, got shape {tuple(idx)}")
    if data is not None and len(data) == 0:
        raise ShapeError("_sparse_retain: data must have at least one dimension")
    return [data, idx], [data]


def _type(attrs, in_types):
    return list(in_types), [in_types[0]]


def _retain(attrs, ins):
    data, idx = ins
    rows = data.shape[0]
    ids = idx.reshape(-1).to(torch.float64).trunc().to(torch.int64)
    keep = torch.zeros(rows, dtype=torch.bool, device=data.device)
    keep[ids[(ids >= 0) & (ids < rows)]] = True
    mask = keep.reshape((rows,) + (1,) * (data.dim() - 1))
    return [torch.where(mask, data, torch.zeros((), dtype=data.dtype, device=data.device))]


def _gradient(b, n):
    return [b.op("_sparse_retain", n.ograds[0], n.inputs[1]), None]


register(OpDef(
    name="_sparse_retain", pattern="opaque", lowering=Extern(_retain),
    arguments=("data", "indices"), infer_shape=_shape, infer_type=_type,
    reference=lambda attrs, ins, is_train: _retain(attrs, ins), gradient=_gradient,
    doc="The rows of data whose ids indices lists; the other rows are zero (mxnet's "
        "sparse.retain)."))
