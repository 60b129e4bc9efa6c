"""row_sparse values in the key-value store, as mxnet 1.9.1's ``local`` store handles them.

* ``init`` with a RowSparseNDArray keeps a row_sparse copy on the store's device.
* ``push`` of row_sparse values sums them row-wise (the union of their rows,
  sorted); with no optimizer the sum replaces the stored value, whatever its
  storage type was (mxnet's ``local = merged.Copy(ctx)`` when the types
  differ). A push of csr values is refused, as mxnet refuses it.
* ``pull`` into a dense array writes the stored value densely; into a
  row_sparse array only with ``ignore_sparse=False`` (otherwise mxnet skips it
  and says once per key to use ``row_sparse_pull``).
* ``row_sparse_pull(key, out, row_ids)`` needs a row_sparse stored value and
  row_sparse ``out``; the ids are made unique and sorted, and ``out`` gets one
  row per id (zero where the stored value has none), i.e. ``retain``. Only those
  rows are copied to ``out``'s device.
"""
from __future__ import annotations

import logging

import torch

from compiler.errors import MXNetError

from . import sparse_kernels as K
from .ndarray import torch_dtype
from .ndarray_sparse import BaseSparseNDArray, RowSparseNDArray

_LOG = logging.getLogger(__name__)


def stype_of(value):
    return getattr(value, "stype", "default")


def is_sparse(value):
    return isinstance(value, BaseSparseNDArray)


def stored_copy(key, value, home: torch.device):
    """The store's own row_sparse copy of an init value, on ``home``."""
    if value.stype != "row_sparse":
        raise MXNetError(f"kvstore init of key {key!r}: storage type {value.stype!r} is not "
                         f"supported (a kvstore holds default and row_sparse values)")
    return RowSparseNDArray(value._data_t.to(home, copy=True),
                            [value._aux_t[0].to(home, copy=True)], value.shape,
                            _ctx_on(home, value))


def _ctx_on(device, like):
    from .context import Context, cpu
    if device.type == "cuda":
        return Context("gpu", device.index or 0)
    return like.context if like.context.device_type == "cpu" else cpu(0)


def reduce_rows(key, values, stored):
    """The row_sparse sum of pushed values (dense ones count by their non-zero rows)."""
    parts = []
    for v in values:
        if tuple(v.shape) != tuple(stored.shape):
            raise MXNetError(f"kvstore key {key!r}: pushed shape {tuple(v.shape)} does not "
                             f"match the stored shape {tuple(stored.shape)}")
        st = stype_of(v)
        if st == "row_sparse":
            parts.append((v._data_t, v._aux_t[0]))
        elif st == "default":
            parts.append(K.dense_to_rsp(v))
        else:
            raise MXNetError(f"Unexpected storage type detected during kvstore push of key "
                             f"{key!r}: {st} (push takes default and row_sparse values)")
    dev = _device_of(stored)
    data, idx = K.rsp_sum(parts, tuple(stored.shape), torch_dtype(stored), dev)
    return RowSparseNDArray(data, [idx], tuple(stored.shape), _ctx_on(dev, values[0]))


def _device_of(arr):
    return arr._data_t.device if is_sparse(arr) else arr.device


def pull_into(key, stored, out, ignore_sparse, warned: set):
    """Copy ``stored`` into ``out`` (see the module docstring for the sparse cases)."""
    if stype_of(out) != "default":
        if ignore_sparse:
            if key not in warned:
                warned.add(key)
                _LOG.warning("non-default weights detected during kvstore pull of key %r. "
                             "This call has been ignored. Please make sure to use "
                             "kv.row_sparse_pull() or module.prepare() with row_ids.", key)
            return
        if stype_of(stored) == "default":
            out[:] = stored
        else:
            stored.copyto(out)
        return
    dense = stored._dense() if is_sparse(stored) else stored
    with torch.no_grad():
        out.copy_(dense.to(out.device, torch_dtype(out)))


def row_sparse_pull(kv, key, out, row_ids, key_value_pairs):
    """mxnet's ``KVStore.row_sparse_pull`` on a store ``kv`` (``kv._stored(k)``);
    ``key_value_pairs`` is the store's grouping of mxnet's (key, value) forms."""
    if out is None or row_ids is None:
        raise MXNetError("row_sparse_pull needs out= and row_ids=")
    if isinstance(row_ids, torch.Tensor):
        row_ids = [row_ids]
    if not isinstance(row_ids, list):
        raise MXNetError("row_ids should be NDArray or list of NDArray")
    single = len(row_ids) == 1 and isinstance(out, list)
    first = [out[0]] if single else out
    outs = key_value_pairs(key, first, "row_sparse_pull")
    ids = key_value_pairs(key, row_ids, "row_sparse_pull")
    flat = [(k, o, r) for (k, os_), (_, rs) in zip(outs, ids) for o, r in _pair(os_, rs)]
    pull_one = getattr(kv, "_pull_rows", None)     # a store whose values live elsewhere
    for k, o, r in flat:
        if pull_one is not None:
            pull_one(k, o, r)
        else:
            pull_rows_local(k, kv._stored(k), o, r)
    if single:
        for o in out[1:]:
            out[0].copyto(o)


def _pair(outs, ids):
    if len(outs) != len(ids):
        raise MXNetError(f"row_sparse_pull: the number of row_ids ({len(ids)}) doesn't match "
                         f"the number of values ({len(outs)})")
    return zip(outs, ids)


def check_row_pull(key, out, row_ids, stored_stype, stored_shape):
    """mxnet's checks of one ``row_sparse_pull`` (the stored value's storage type and
    shape given, wherever it lives)."""
    if stype_of(out) != "row_sparse":
        raise MXNetError(f"row_sparse_pull of key {key!r}: expected row_sparse storage type "
                         f"for the values, but got {stype_of(out)}")
    if is_sparse(row_ids):
        raise MXNetError(f"row_sparse_pull of key {key!r}: row_ids must be dense, got "
                         f"{row_ids.stype}")
    if stored_stype != "row_sparse":
        raise MXNetError(f"row_sparse_pull of key {key!r}: the stored value is "
                         f"{stored_stype}; PullRowSparse expects a row_sparse value "
                         f"(init the key with a RowSparseNDArray)")
    if tuple(out.shape) != tuple(stored_shape):
        raise MXNetError(f"row_sparse_pull of key {key!r}: out shape {tuple(out.shape)} vs "
                         f"stored {tuple(stored_shape)}")


def pull_rows_local(key, stored, out, row_ids):
    """``out`` gets the rows ``row_ids`` of ``stored`` (a store's own copy)."""
    check_row_pull(key, out, row_ids, stype_of(stored), stored.shape)
    uniq = K.unique_row_ids(row_ids, _device_of(stored))
    rows, idx = K.retain_rows(stored._data_t, stored._aux_t[0], stored.shape, uniq)
    out._set_parts(rows, [idx])


# -- dist_sync: every worker holds a replica; a push moves only the pushed rows -------
def _gather_rows(group, data, idx, what):
    """Every worker's (data, indices), in rank order: an all-gather of the row counts,
    then of the rows and ids padded to the largest count (no table-sized buffer)."""
    import torch.distributed as dist
    n = group.size
    count = torch.tensor([idx.numel()], dtype=torch.int64)
    counts = [torch.zeros_like(count) for _ in range(n)]
    with group.collective(f"row counts of {what}"):
        dist.all_gather(counts, count)
    most = max(int(c) for c in counts)
    pad_idx = torch.zeros(most, dtype=torch.int64)
    pad_idx[:idx.numel()] = idx.cpu()
    pad_rows = torch.zeros((most,) + tuple(data.shape[1:]), dtype=data.dtype)
    pad_rows[:idx.numel()] = data.cpu()
    all_idx = [torch.empty_like(pad_idx) for _ in range(n)]
    all_rows = [torch.empty_like(pad_rows) for _ in range(n)]
    with group.collective(f"rows of {what}"):
        dist.all_gather(all_idx, pad_idx)
        dist.all_gather(all_rows, pad_rows)
    return [(r[:int(c)], i[:int(c)]) for r, i, c in zip(all_rows, all_idx, counts)]


def dist_combine(group, merged):
    """Replace each row_sparse sum in ``merged`` [(key, value)] by the sum over workers
    (rows summed in rank order, so every replica gets the same bits)."""
    for pos, (k, m) in enumerate(merged):
        if not is_sparse(m):
            continue
        parts = _gather_rows(group, m._data_t, m._aux_t[0], f"row_sparse key {k!r}")
        data, idx = K.rsp_sum(parts, m.shape, torch_dtype(m), m.device)
        merged[pos] = (k, RowSparseNDArray(data, [idx], m.shape, m.context))


def dist_broadcast(group, pairs):
    """Rank 0's row_sparse init values on every worker (counts first, then the rows)."""
    import torch.distributed as dist
    for k, v in pairs:
        if not is_sparse(v):
            continue
        count = torch.tensor([v._aux_t[0].numel()], dtype=torch.int64)
        with group.collective(f"row count of row_sparse key {k!r} from rank 0"):
            dist.broadcast(count, src=0)
        idx = v._aux_t[0].cpu().clone() if group.rank == 0 else \
            torch.zeros(int(count), dtype=torch.int64)
        rows = v._data_t.cpu().clone() if group.rank == 0 else \
            torch.zeros((int(count),) + tuple(v.shape[1:]), dtype=torch_dtype(v))
        with group.collective(f"rows of row_sparse key {k!r} from rank 0"):
            dist.broadcast(idx, src=0)
            dist.broadcast(rows, src=0)
        v._set_parts(rows, [idx])
