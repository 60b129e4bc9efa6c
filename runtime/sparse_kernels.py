"""Storage conversions and row operations of sparse arrays, on plain torch tensors.

Each function takes and returns the parts of a sparse array (``data`` plus its
int64 aux arrays) as ``torch.Tensor`` objects, with the semantics of mxnet
1.9.1's ``cast_storage``, ``_sparse_retain``, ``slice`` on csr and the
row-sparse sum its kvstore uses:

* csr: ``data`` (nnz,), ``indptr`` (rows + 1,) and ``indices`` (nnz,), column
  indices sorted within each row.
* row_sparse: ``data`` (nnr, *shape[1:]) and ``indices`` (nnr,), sorted and
  unique row ids.
"""
from __future__ import annotations

import torch

IDX = torch.int64


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.detach().as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t.detach()


def dense_to_csr(dense: torch.Tensor):
    """``(data, indptr, indices)`` of a 2-D dense tensor (non-zeros in row-major order)."""
    dense = _plain(dense)
    if dense.dim() != 2:
        raise ValueError(f"cast_storage to csr needs a 2-D array, got shape {tuple(dense.shape)}")
    mask = dense != 0
    rows, cols = mask.nonzero(as_tuple=True)
    counts = mask.sum(dim=1, dtype=IDX)
    indptr = torch.zeros(dense.shape[0] + 1, dtype=IDX, device=dense.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    return dense[rows, cols].clone(), indptr, cols.to(IDX)


def csr_to_dense(data, indptr, indices, shape):
    """The dense 2-D tensor of a csr array."""
    out = torch.zeros(tuple(shape), dtype=data.dtype, device=data.device)
    if indptr.numel() == 0 or data.numel() == 0:
        return out
    counts = indptr[1:] - indptr[:-1]
    rows = torch.repeat_interleave(torch.arange(shape[0], device=data.device), counts)
    out[rows, indices.long()] = _plain(data)
    return out


def dense_to_rsp(dense: torch.Tensor):
    """``(data, indices)`` of a dense tensor: the rows holding any non-zero."""
    dense = _plain(dense)
    if dense.dim() == 0:
        raise ValueError("cast_storage to row_sparse needs at least one dimension")
    keep = (dense != 0).reshape(dense.shape[0], -1).any(dim=1)
    idx = keep.nonzero(as_tuple=True)[0].to(IDX)
    return dense[idx].clone(), idx


def dense_to_parts(dense: torch.Tensor, stype):
    """``(data, aux)`` of a dense tensor in storage ``stype`` (``cast_storage``'s:
    csr's non-zero entries, row_sparse's rows holding any non-zero)."""
    if stype == "csr":
        data, indptr, indices = dense_to_csr(dense)
        return data, [indptr, indices]
    data, idx = dense_to_rsp(dense)
    return data, [idx]


def rsp_to_dense(data, indices, shape):
    """The dense tensor of a row_sparse array."""
    out = torch.zeros(tuple(shape), dtype=data.dtype, device=data.device)
    if indices.numel():
        out[indices.long()] = _plain(data)
    return out


def retain_rows(data, indices, shape, row_ids):
    """mxnet's ``sparse.retain``: one output row per requested id, in the given order;
    rows the input lacks are zero. An input with no rows gives an empty output."""
    row_ids = _plain(row_ids).reshape(-1).to(device=data.device).long()
    if indices.numel() == 0 or row_ids.numel() == 0 or shape[0] == 0:
        return (torch.zeros((0,) + tuple(shape[1:]), dtype=data.dtype, device=data.device),
                torch.zeros((0,), dtype=IDX, device=data.device))
    if indices.numel() == shape[0]:      # every row stored (sorted, unique): row r is data[r]
        inside = (row_ids >= 0) & (row_ids < shape[0])
        inside = inside.reshape((-1,) + (1,) * (len(shape) - 1))
        out = _plain(data).index_select(0, row_ids.clamp(0, shape[0] - 1))
        return torch.where(inside, out, out.new_zeros(())), row_ids.to(IDX)
    pos = torch.searchsorted(indices.long(), row_ids).clamp_(max=indices.numel() - 1)
    found = indices[pos] == row_ids
    out = torch.zeros((row_ids.numel(),) + tuple(shape[1:]), dtype=data.dtype,
                      device=data.device)
    out[found] = _plain(data)[pos[found]]
    return out, row_ids.to(IDX)


def slice_csr_rows(data, indptr, indices, begin, end):
    """Rows ``begin:end`` of a csr array: ``(data, indptr, indices)``."""
    if indptr.numel() == 0:
        return data[:0].clone(), indptr.new_zeros(0), indices[:0].clone()
    part = indptr[begin:end + 1]
    lo, hi = int(part[0]), int(part[-1])
    return data[lo:hi].clone(), (part - lo).clone(), indices[lo:hi].clone()


def add_rows_(out, pos, values):
    """``out[pos[i]] += values[i]`` row by row (repeats accumulate), in place.

    ``scatter_add_`` over the rows' flat views: torch's CPU ``index_add_`` on dim 0
    goes parallel even for a few thousand short rows and, with other processes on the
    cores, takes hundreds of milliseconds where this takes a fraction of one."""
    if pos.numel() == 0:             # nothing to add (and no row size to infer)
        return out
    flat = out.reshape(out.shape[0], -1)
    vals = _plain(values).reshape(pos.numel(), -1)
    if vals.numel():
        flat.scatter_add_(0, pos.long()[:, None].expand(-1, vals.shape[1]), vals)
    return out


def rsp_sum(parts, shape, dtype, device):
    """Sum of row_sparse arrays ``[(data, indices), ...]`` (rows: the union, sorted)."""
    idx = [i.to(device).long() for _, i in parts]
    rows = torch.unique(torch.cat(idx)) if idx else torch.zeros(0, dtype=IDX, device=device)
    out = torch.zeros((rows.numel(),) + tuple(shape[1:]), dtype=dtype, device=device)
    for (d, _), i in zip(parts, idx):
        if i.numel():
            add_rows_(out, torch.searchsorted(rows, i), _plain(d).to(device, dtype))
    return out, rows.to(IDX)


def unique_row_ids(row_ids, device):
    """Sorted unique int64 row ids (what mxnet's kvstore makes of ``row_ids``)."""
    return torch.unique(_plain(row_ids).reshape(-1).to(device).long())


def coo_to_csr(data, row, col, shape):
    """A csr array of coordinate triplets, duplicates summed and columns sorted."""
    row, col = row.long(), col.long()
    key = row * shape[1] + col
    uniq, inverse = torch.unique(key, return_inverse=True)
    vals = torch.zeros(uniq.numel(), dtype=data.dtype, device=data.device)
    vals.index_add_(0, inverse, data)
    rows = uniq // shape[1]
    counts = torch.bincount(rows, minlength=shape[0])
    indptr = torch.zeros(shape[0] + 1, dtype=IDX, device=data.device)
    torch.cumsum(counts, 0, out=indptr[1:])
    return vals, indptr, (uniq % shape[1]).to(IDX)


def csr_take_rows(data, indptr, indices, rows):
    """Rows ``rows`` (any order, repeats allowed) of a csr array: ``(data, indptr, indices)``."""
    rows = torch.as_tensor(rows, dtype=IDX, device=indptr.device).reshape(-1)
    starts, ends = indptr[rows], indptr[rows + 1]
    counts = ends - starts
    out_indptr = torch.zeros(rows.numel() + 1, dtype=IDX, device=indptr.device)
    torch.cumsum(counts, 0, out=out_indptr[1:])
    # position of every kept entry: its row's start plus its offset within the row
    offsets = torch.arange(int(out_indptr[-1]), device=indptr.device) - \
        torch.repeat_interleave(out_indptr[:-1], counts)
    pos = torch.repeat_interleave(starts, counts) + offsets
    return data[pos].clone(), out_indptr, indices[pos].clone()


def csr_rows_of_entries(indptr, nnz):
    """The row of every stored entry of a csr array."""
    counts = indptr[1:] - indptr[:-1]
    return torch.repeat_interleave(torch.arange(counts.numel(), device=indptr.device), counts)[:nnz]


def dot_csr_dense(data, indptr, indices, shape, rows_of, transpose_a):
    """``csr . B`` (dense M x N) or ``csr^T . B`` (row_sparse: ``(rows, row ids)``, one
    row per column the csr stores). ``rows_of(ids)`` gives rows ``ids`` of B."""
    entry_rows = csr_rows_of_entries(indptr, data.numel())
    cols = indices.long()
    if not transpose_a:
        b = rows_of(cols)
        out = torch.zeros((shape[0], b.shape[1]), dtype=b.dtype, device=b.device)
        return out.index_add_(0, entry_rows, data[:, None].to(b.dtype) * b)
    uniq = torch.unique(cols)
    b = rows_of(entry_rows)
    out = torch.zeros((uniq.numel(), b.shape[1]), dtype=b.dtype, device=b.device)
    out.index_add_(0, torch.searchsorted(uniq, cols), data[:, None].to(b.dtype) * b)
    return out, uniq.to(IDX)


def dot_dense_csr(a, data, indptr, indices, transpose_b):
    """``A . csr`` or ``A . csr^T`` (A dense M x K) as csr parts ``(data, indptr, indices)``:
    every output row stores the same columns (the csr's columns, or its non-empty rows),
    zeros included, as mxnet 1.9.1 gives them."""
    entry_rows = csr_rows_of_entries(indptr, data.numel())
    cols = indices.long()
    take, put = (cols, entry_rows) if transpose_b else (entry_rows, cols)
    keep = torch.unique(put)
    compact = torch.zeros((a.shape[0], keep.numel()), dtype=a.dtype, device=a.device)
    compact.index_add_(1, torch.searchsorted(keep, put), a[:, take] * data.to(a.dtype))
    m, c = a.shape[0], keep.numel()
    out_indptr = torch.arange(m + 1, dtype=IDX, device=a.device) * c
    return compact.reshape(-1), out_indptr, keep.to(IDX).repeat(m)
