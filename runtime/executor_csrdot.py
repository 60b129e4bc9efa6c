"""``dot(csr, W)`` read through W's rows at the csr's columns (issue 25).

The sibling of ``executor_rows.py``'s Embedding reads, planned and run by its
``RowReads``: a weight ``W`` (``(K, N)``, default or row_sparse storage) that a plain
``dot(csr, W)`` reads (no transposes, the csr operand a bound csr *argument* whose
gradient nobody asks for) is not handed to the Program. The dot node becomes
``Reshape(rows_k, shape=(M, N))`` of a new argument ``rows_k`` of the output's static
shape ``(M, N)``; around the Program:

* before a forward, ``csr_dot_rows`` writes ``rows_k = csr . W`` reading only the rows
  of W at the csr's stored column ids (a row_sparse W's missing rows are zeros, as
  mxnet's ``DotCsrRspDnsImpl`` reads them);
* the Program's backward writes ``rows_k``'s gradient, ``d(out)``;
* after a backward, ``csr_t_rows`` gives, per stored csr entry, its column id and
  ``value * d(out)[its row]``; ``sum_rows`` of those is ``csr^T . d(out)`` as the
  row_sparse gradient mxnet's ``DotCsrDnsRspImpl`` writes: one row per distinct
  column the csr stores (zero-valued ones included), sorted.

Nothing of size ``K`` (the number of features) is read, written or allocated per
step. ``grad_req='add'`` on W keeps the dense shadows (mxnet's sparse dot refuses
it: ``CHECK_EQ(req, kWriteTo)``), as does a csr operand whose gradient is asked for
("sparse dot does not support computing the gradient of csr").
"""
from __future__ import annotations

import torch

from . import sparse_kernels as K
from .executor_sparse import is_sparse

DOT = "dot"


def _true(attrs, key):
    return str(attrs.get(key, "False")).lower() in ("true", "1")


def is_csr_dot_read(node, nodes, arg_dict, grad_req, shapes):
    """Whether ``node`` (the user of a weight at input slot 1) is a ``dot(csr, W)`` this
    mechanism runs: no transposes, the lhs a bound csr argument with no gradient asked
    for, W not csr, both operands 2-D, and W's gradient (if any) written, not added.

    Parameters
    ----------
    node : dict
        The user node of the symbol's JSON.
    nodes : list of dict
        All nodes of the JSON.
    arg_dict, grad_req, shapes : dict
        The executor's arguments, grad_req and argument shapes.
    """
    attrs = node.get("attrs", {})
    if node["op"] != DOT or _true(attrs, "transpose_a") or _true(attrs, "transpose_b"):
        return False
    lhs, rhs = nodes[node["inputs"][0][0]], nodes[node["inputs"][1][0]]
    csr = arg_dict.get(lhs["name"])
    if lhs["op"] != "null" or not is_sparse(csr) or csr.stype != "csr":
        return False
    if getattr(arg_dict.get(rhs["name"]), "stype", "default") == "csr":
        return False            # csr . csr: no rows to read (a dense fallback)
    if grad_req.get(lhs["name"], "null") != "null":
        return False
    if grad_req.get(rhs["name"], "null") == "add":
        return False
    return len(shapes[lhs["name"]]) == 2 and len(shapes[rhs["name"]]) == 2


def dot_shape(shapes, data, table):
    """The static shape ``(M, N)`` of ``dot(data, table)``."""
    return (int(shapes[data][0]), int(shapes[table][1]))


def csr_parts(csr):
    """``(values, entry rows, column ids)`` of a bound csr array: one per stored entry."""
    values, (indptr, indices) = csr._data_t, csr._aux_t
    return values, K.csr_rows_of_entries(indptr, values.numel()), indices.long()


def csr_dot_rows(parts, table, out, gather_rows):
    """``out = csr . table``, reading only ``table``'s rows at the csr's columns.

    Parameters
    ----------
    parts : tuple
        ``csr_parts`` of the csr operand (``(M, K)``).
    table : NDArray or RowSparseNDArray
        ``(K, N)``; a row_sparse one's missing rows read as zeros.
    out : torch.Tensor
        ``(M, N)``, written in place.
    gather_rows : callable
        ``gather_rows(table, ids, out)`` of ``executor_rows``.
    """
    values, rows, cols = parts
    dst = out.as_subclass(torch.Tensor)
    picked = torch.empty((cols.numel(), dst.shape[1]), dtype=dst.dtype, device=dst.device)
    if cols.numel():
        gather_rows(table, cols.to(dst.device), picked)
    picked.mul_(values.to(dst.device, dst.dtype)[:, None])
    dst.zero_()
    K.add_rows_(dst, rows.to(dst.device), picked)


def csr_t_rows(parts, dout):
    """``(ids, values)`` whose ``sum_rows`` is ``csr^T . dout``: per stored entry its
    column id and ``entry value * dout[entry row]``.

    Parameters
    ----------
    parts : tuple
        ``csr_parts`` of the csr operand (``(M, K)``).
    dout : torch.Tensor
        ``(M, N)``: the gradient of the dot's output.
    """
    values, rows, cols = parts
    dout = dout.as_subclass(torch.Tensor)
    picked = dout.index_select(0, rows.to(dout.device))
    return cols.to(dout.device), picked.mul_(values.to(dout.device, dout.dtype)[:, None])
