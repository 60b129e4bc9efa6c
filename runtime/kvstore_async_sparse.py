"""row_sparse values on ``dist_async`` (:mod:`runtime.kvstore_async`): only rows move.

Each key still has one owning rank. What changes for a row_sparse key:

* ``init``: rank 0's rows reach every worker (counts first, then the rows); the
  owner keeps them row_sparse.
* ``push`` of row_sparse values: this worker's row-wise sum over its devices goes
  to the owner as three messages (the row count, the row ids, the rows), never a
  table-sized tensor. The owner applies its optimizer to those rows (the
  optimizers' lazy updates, :mod:`runtime.sparse_update`); with no optimizer the
  pushed rows replace the stored value, as a dense ``dist_async`` push replaces it
  (mxnet's server refuses that case outright).
* ``row_sparse_pull(key, out, row_ids)``: the ids (unique, sorted) go to the owner,
  which answers with those rows of its copy (zero where it stores none).
* ``pull`` into a dense array: the owner sends the whole value, densely.

The message kinds and tags are :mod:`runtime.kvstore_async`'s; these functions run
on the worker (``push_rows``, ``pull_rows``) and in the owner's server thread
(``serve_push``, ``serve_pull``).
"""
from __future__ import annotations

import torch

from . import kvstore_sparse as kvs
from . import sparse_kernels as K
from .ndarray_sparse import RowSparseNDArray


def all_rows(value):
    """A row_sparse copy of ``value`` storing every row (zeros where it stores none): the
    owner's copy, which the optimizers' lazy updates need."""
    data = K.rsp_to_dense(value._data_t, value._aux_t[0], value.shape)
    ids = torch.arange(value.shape[0], dtype=value._aux_t[0].dtype, device=data.device)
    return RowSparseNDArray(data, [ids], value.shape, value.context)


def stand_in(shape, dtype):
    """A value with a key's shape and dtype and no storage: what the row-wise sum of a
    push needs to know of the stored value (the owner may be another rank)."""
    return torch.empty((), dtype=dtype).expand(shape)


def push_rows(kv, k, merged, owner, head, payload_tag, works):
    """Post the messages of one row_sparse push of ``k`` to ``owner``."""
    ids = merged._aux_t[0].to("cpu", torch.int64).contiguous()
    rows = merged._data_t.to("cpu").contiguous()
    count = torch.tensor([ids.numel()], dtype=torch.int64)
    works.append(kv._dist.isend(head, dst=owner, group=kv._p2p, tag=kv.TAG_REQUEST))
    works.append(kv._dist.isend(count, dst=owner, group=kv._p2p, tag=payload_tag))
    if ids.numel():
        works.append(kv._dist.isend(ids, dst=owner, group=kv._p2p, tag=payload_tag))
        works.append(kv._dist.isend(rows, dst=owner, group=kv._p2p, tag=payload_tag))
    return [count, ids, rows]      # kept alive until the sends complete


def _recv_ids(kv, src, tag):
    count = torch.zeros(1, dtype=torch.int64)
    kv._dist.recv(count, src=src, group=kv._p2p, tag=tag)
    ids = torch.empty(int(count), dtype=torch.int64)
    if ids.numel():
        kv._dist.recv(ids, src=src, group=kv._p2p, tag=tag)
    return ids


def serve_push(kv, k, src, tag):
    """Owner side: receive one row_sparse push of ``k`` from ``src`` and apply it."""
    shape, dtype = kv._meta[k]
    ids = _recv_ids(kv, src, tag)
    rows = torch.empty((ids.numel(),) + tuple(shape[1:]), dtype=dtype)
    if ids.numel():
        kv._dist.recv(rows, src=src, group=kv._p2p, tag=tag)
    kv._apply(k, RowSparseNDArray(rows, [ids], shape))


def pull_rows(kv, k, out, row_ids, owner, head, payload_tag, reply_tag):
    """Worker side: ``out`` (row_sparse) gets the rows ``row_ids`` of ``k`` from ``owner``."""
    shape, dtype = kv._meta[k]
    ids = K.unique_row_ids(row_ids, torch.device("cpu")).to(torch.int64).contiguous()
    rows = torch.empty((ids.numel(),) + tuple(shape[1:]), dtype=dtype)
    count = torch.tensor([ids.numel()], dtype=torch.int64)
    waits = [kv._dist.isend(head, dst=owner, group=kv._p2p, tag=kv.TAG_REQUEST),
             kv._dist.isend(count, dst=owner, group=kv._p2p, tag=payload_tag)]
    if ids.numel():
        waits.append(kv._dist.isend(ids, dst=owner, group=kv._p2p, tag=payload_tag))
        waits.append(kv._dist.irecv(rows, src=owner, group=kv._p2p, tag=reply_tag))
    for w in waits:
        w.wait()
    out._set_parts(rows.to(out._data_t.device), [ids.to(out._data_t.device)])


def rows_of(stored, ids):
    """The rows ``ids`` of a stored value (dense or row_sparse), zero where absent."""
    if kvs.is_sparse(stored):
        rows, _ = K.retain_rows(stored._data_t, stored._aux_t[0], stored.shape, ids)
        return rows
    return stored.detach().as_subclass(torch.Tensor)[ids].clone()


def serve_pull(kv, k, src, tag, reply_tag):
    """Owner side: answer a ``row_sparse_pull`` of ``k`` from ``src``."""
    ids = _recv_ids(kv, src, tag)
    if not ids.numel():
        return
    with kv._lock:
        rows = rows_of(kv._store[k], ids).contiguous()
    kv._dist.send(rows, dst=src, group=kv._p2p, tag=reply_tag)


def dense_value(stored):
    """What a dense ``pull`` of a stored value sends."""
    if kvs.is_sparse(stored):
        return stored._dense().detach().clone()
    return stored.detach().clone()
