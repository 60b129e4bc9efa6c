"""Sparse arrays bound in an executor: row_sparse parameters and gradients, csr data.

An executor's ``arg_dict`` / ``grad_dict`` hold the sparse arrays of
``ndarray_sparse.py`` where storage-type inference (``compiler/passes/storage_type.py``)
says so, as mxnet's do. Embedding tables are read through their batch's rows
(``executor_rows.py``); for every other sparse array the compiled Program computes
on a dense *shadow* its launches are bound to:

* before a forward, every sparse argument is written into its shadow (the whole
  array: a dense copy per step);
* after a backward, every row_sparse gradient takes, from its shadow, the rows
  mxnet's backward stores (the indices an Embedding reads, the columns a csr
  operand of ``dot`` stores, ...; see ``storage_type.py``), zero-valued ones included.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import sparse_kernels as K
from .ndarray import as_ndarray, empty, torch_dtype
from .ndarray_sparse import BaseSparseNDArray, zeros as sparse_zeros


def is_sparse(arr) -> bool:
    return isinstance(arr, BaseSparseNDArray)


def new_array(stype, shape, ctx, dtype):
    """A zero array of storage ``stype`` (``empty`` for default storage)."""
    if stype in ("row_sparse", "csr"):
        return sparse_zeros(stype, shape, ctx, dtype)
    return empty(shape, ctx, dtype)


class SparseShadows:
    """The dense tensors the Program reads / writes in place of an executor's sparse
    arrays, and the conversions at the Program's edges.

    Parameters
    ----------
    arg_dict, grad_dict : dict of str to array
        The executor's arrays (sparse ones among them).
    row_rules : dict of str to list of (kind, name)
        ``infer_storage(symbol)["rows"]``: the rows each row_sparse gradient stores.
    grad_req : dict of str to str
    """

    def __init__(self, arg_dict, grad_dict, row_rules, grad_req):
        self.args = {n: a for n, a in arg_dict.items() if is_sparse(a)}
        self.grads = {n: g for n, g in grad_dict.items() if is_sparse(g)}
        for name, g in self.grads.items():
            if g.stype != "row_sparse":
                raise MXNetError(f"bind: the gradient of '{name}' is {g.stype}; only "
                                 f"row_sparse (or dense) gradients are computed")
            if name not in row_rules:
                raise MXNetError(f"bind: the gradient of '{name}' is row_sparse, but its "
                                 f"consumers give it dense storage (mxnet's storage "
                                 f"inference); bind a dense gradient array")
        self.rules = row_rules
        self.grad_req = grad_req
        self.dense = {("arg", n): _shadow(a) for n, a in self.args.items()}
        self.dense.update({("grad", n): _shadow(g) for n, g in self.grads.items()})

    def __bool__(self):
        return bool(self.dense)

    def resolve(self, kind, name):
        """The shadow bound in place of ``(kind, name)``, or None."""
        return self.dense.get((kind, name))

    def before_forward(self):
        """Write every sparse argument's values into its shadow."""
        with torch.no_grad():
            for name, arr in self.args.items():
                self.dense[("arg", name)].copy_(arr._dense().to(self.dense[("arg", name)]))

    def after_backward(self, arg_dict):
        """Give every row_sparse gradient the rows mxnet's backward stores."""
        with torch.no_grad():
            for name, grad in self.grads.items():
                dense = self.dense[("grad", name)]
                rows = self._rows(name, arg_dict, dense)
                if self.grad_req.get(name) == "add" and grad._aux_t[0].numel():
                    rows = torch.unique(torch.cat([rows, grad._aux_t[0].to(rows.device)]))
                grad._set_parts(dense.as_subclass(torch.Tensor)[rows], [rows])

    def _rows(self, name, arg_dict, dense):
        parts = [_rule_rows(kind, arg_dict[src], dense.shape[0], name)
                 for kind, src in self.rules[name]]
        parts = [p.to(dense.device, K.IDX) for p in parts]
        return torch.unique(torch.cat(parts)) if parts else torch.zeros(0, dtype=K.IDX)


def _shadow(arr):
    """A dense tensor of ``arr``'s shape, dtype and context."""
    return as_ndarray(torch.zeros(arr.shape, dtype=torch_dtype(arr), device=arr.device),
                      arr.context)


def _rule_rows(kind, src, nrows, grad_name):
    """The rows one rule stores, from the bound array ``src``."""
    if kind == "indices":            # an Embedding's data: the rows it reads
        values = src._dense() if is_sparse(src) else src.as_subclass(torch.Tensor)
        return values.reshape(-1).long().clamp(0, nrows - 1)
    if kind == "columns":            # a csr operand of dot: the columns it stores
        if not is_sparse(src) or src.stype != "csr":
            raise MXNetError(f"gradient of '{grad_name}': its rows are the columns of a csr "
                             f"argument, but that argument is bound {type(src).__name__}")
        return src._aux_t[1]
    if kind == "stored":             # the rows a row_sparse input stores
        if not is_sparse(src):
            return torch.arange(nrows)
        return src._aux_t[0]
    raise MXNetError(f"gradient of '{grad_name}': unknown row rule {kind!r}")


def array_nbytes(arr) -> int:
    """Bytes an array holds (a sparse one: its stored values and indices)."""
    if is_sparse(arr):
        return sum(t.element_size() * t.numel() for t in [arr._data_t, *arr._aux_t])
    return arr.element_size() * arr.numel()
