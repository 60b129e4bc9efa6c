"""Sparse arrays bound in an executor: row_sparse parameters and gradients, csr data.

An executor's ``arg_dict`` / ``grad_dict`` hold the sparse arrays of
``ndarray_sparse.py`` where storage-type inference (``compiler/passes/storage_type.py``)
says so, or where the caller binds them, as mxnet's do. Embedding tables are read
through their batch's rows (``executor_rows.py``); for every other sparse array the
compiled Program computes on a dense *shadow* its launches are bound to:

* before a forward, every sparse argument and auxiliary state is written into its
  shadow (the whole array: a dense copy per step); after it, a sparse auxiliary state
  takes its shadow's values back (the moving statistics a training forward updates);
* after a forward, every output that inference gives csr / row_sparse storage takes
  its parts from its shadow: the pattern of the sparse variable it keeps (through
  zero-preserving unary operators: ``sqrt(x)`` stores ``x``'s rows), the rows a
  ``retain`` lists, else the non-zeros, as ``cast_storage`` stores them;
* after a backward, every row_sparse gradient takes, from its shadow, the rows
  mxnet's backward stores (the indices an Embedding reads, the columns a csr
  operand of ``dot`` stores, ...; see ``storage_type.py``), zero-valued ones included.
  A sparse gradient array whose consumers give a dense gradient is mxnet's storage
  fallback: the dense gradient is computed and cast into the array's storage (its
  non-zero rows, or entries for csr). With ``grad_req='add'`` the shadow starts
  from the array's values, so the sum is the array's plus the new gradient.
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

    def __init__(self, arg_dict, grad_dict, row_rules, grad_req, aux_dict=None):
        self.args = {n: a for n, a in arg_dict.items() if is_sparse(a)}
        self.aux = {n: a for n, a in (aux_dict or {}).items() if is_sparse(a)}
        self.grads = {n: g for n, g in grad_dict.items() if is_sparse(g)}
        self.rules = row_rules
        self.grad_req = grad_req
        self.dense = {("arg", n): _shadow(a) for n, a in self.args.items()}
        self.dense.update({("grad", n): _shadow(g) for n, g in self.grads.items()})
        self.dense.update({("aux", n): _shadow(a) for n, a in self.aux.items()})
        self.outputs = {}           # output index -> (sparse array, what it stores: a rule)

    def __bool__(self):
        return bool(self.dense)

    def resolve(self, kind, name):
        """The shadow bound in place of ``(kind, name)``, or None."""
        if kind == "out":
            return self.dense.get((kind, int(name)))
        return self.dense.get((kind, name))

    def sparse_outputs(self, outputs, stypes, rules):
        """``outputs`` with a sparse array in place of each one whose storage ``stypes``
        gives as csr / row_sparse; the dense one becomes its shadow. ``rules``: what
        each stores (``infer_storage``'s ``out_rules``; None: its non-zeros)."""
        shown = list(outputs)
        for i, (arr, stype) in enumerate(zip(outputs, stypes)):
            if stype not in ("csr", "row_sparse") or is_sparse(arr):
                continue
            if stype == "csr" and arr.dim() != 2:
                continue            # mxnet's csr is 2-D; anything else stays dense
            self.dense[("out", i)] = arr
            shown[i] = new_array(stype, tuple(arr.shape), arr.context, arr.dtype)
            self.outputs[i] = (shown[i], rules[i] if i < len(rules) else None)
        return shown

    def before_forward(self):
        """Write every sparse argument's and auxiliary state's values into its shadow."""
        with torch.no_grad():
            for kind, arrays in (("arg", self.args), ("aux", self.aux)):
                for name, arr in arrays.items():
                    self.dense[(kind, name)].copy_(arr._dense().to(self.dense[(kind, name)]))

    def after_forward(self, arg_dict):
        """Give every sparse output its parts from its shadow, and every sparse auxiliary
        state (BatchNorm's moving statistics) its values, cast into its storage."""
        with torch.no_grad():
            for name, arr in self.aux.items():
                dense = self.dense[("aux", name)].as_subclass(torch.Tensor)
                arr._set_parts(*_parts_like(dense, arr.stype, None, {}))
            for i, (out, rule) in self.outputs.items():
                dense = self.dense[("out", i)].as_subclass(torch.Tensor)
                out._set_parts(*_parts_like(dense, out.stype, rule, arg_dict))

    def before_backward(self):
        """Start each ``add`` gradient's shadow from the sparse array's values."""
        with torch.no_grad():
            for name, grad in self.grads.items():
                if self.grad_req.get(name) == "add":
                    self.dense[("grad", name)].copy_(grad._dense().to(self.dense[("grad", name)]))

    def after_backward(self, arg_dict):
        """Give every sparse gradient the rows (or entries) mxnet's backward stores."""
        with torch.no_grad():
            for name, grad in self.grads.items():
                dense = self.dense[("grad", name)].as_subclass(torch.Tensor)
                if name not in self.rules:          # mxnet's storage fallback
                    grad._set_parts(*_parts_like(dense, grad.stype, None, arg_dict))
                    continue
                rows = self._rows(name, arg_dict, dense)
                if self.grad_req.get(name) == "add" and grad._aux_t[0].numel():
                    rows = torch.unique(torch.cat([rows, grad._aux_t[0].to(rows.device)]))
                grad._set_parts(dense[rows], [rows])

    def _rows(self, name, arg_dict, dense):
        parts = [_rule_rows(kind, arg_dict[src], dense.shape[0], name)
                 for kind, src in self.rules[name]]
        parts = [p.to(dense.device, K.IDX) for p in parts]
        return torch.unique(torch.cat(parts)) if parts else torch.zeros(0, dtype=K.IDX)


def _parts_like(dense, stype, rule, arg_dict):
    """``(data, aux)`` of ``dense`` in storage ``stype``: what ``rule`` says is stored
    (``("stored", x)``: the pattern of the bound sparse ``x`` of that storage and
    shape; ``("indices", ids)``: the rows ``ids`` lists), else the non-zeros."""
    kind, name = rule if rule is not None else (None, None)
    if kind == "indices" and stype == "row_sparse" and name in arg_dict:
        # (ids clamped into range, as the gradient's row rule reads them)
        rows = torch.unique(_rule_rows(kind, arg_dict[name], dense.shape[0], name))
        rows = rows.to(dense.device, K.IDX)
        return dense[rows], [rows]
    source = arg_dict.get(name) if kind == "stored" else None
    if is_sparse(source) and source.stype == stype and tuple(source.shape) == \
            tuple(dense.shape):
        aux = [a.to(dense.device) for a in source._aux_t]
        if stype == "row_sparse":
            return dense[aux[0]], aux
        rows = K.csr_rows_of_entries(aux[0], aux[1].numel())
        return dense[rows, aux[1]], aux
    return K.dense_to_parts(dense, stype)


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
