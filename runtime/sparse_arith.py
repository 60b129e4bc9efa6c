"""``+ - * / **`` and comparisons on sparse arrays, with the result storage mxnet
1.9.1 gives.

* sparse (op) sparse of one storage type, op ``+ - *``: that storage type, storing
  the union of both operands' rows (row_sparse, zero rows included) or the non-zero
  entries of the result (csr; mxnet's columns within a row come unsorted, these
  sorted);
* row_sparse / csr ``*`` dense: the sparse operand's storage and pattern;
* ``*`` and ``/`` by a scalar, negation, and any other operation with a scalar that
  maps 0 to 0 (``+ 0``, ``> 0.5``, ``1 == x``; not ``**``): the same storage and
  pattern;
* everything else (``+ -`` with a dense array or another scalar, ``/`` and ``**`` of
  two arrays, comparisons of two arrays, a dense left operand, mixed sparse types,
  shapes that broadcast): a dense NDArray, as mxnet's storage fallback computes it.
"""
from __future__ import annotations

import numbers
import operator

import torch

from compiler.errors import MXNetError

from . import autograd_sparse
from . import sparse_kernels as K
from .ndarray import as_ndarray, torch_dtype

OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
       "div": operator.truediv, "pow": operator.pow}
# comparisons give 1 and 0 in the array's dtype, as mxnet's
COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "ge": operator.ge,
               "lt": operator.lt, "le": operator.le}


def _sparse(x):
    return getattr(x, "stype", "default") in ("csr", "row_sparse") and hasattr(x, "_aux_t")


def _dense(x):
    return x._dense() if _sparse(x) else K._plain(x)


def _zero_stays_zero(name, fn, s, scalar_r) -> bool:
    """Whether ``0 (op) s`` (``s (op) 0``) is 0, so the implicit zeros stay zeros and
    the result keeps the sparse pattern: ``* s`` and ``/ s`` always (as mxnet), ``+ 0``,
    ``- 0``, ``> s`` for s >= 0 ... otherwise the result is dense."""
    if name == "mul" or (name == "div" and scalar_r):
        return True
    if name == "pow":           # mxnet's power has no sparse kernel: dense, even x ** 2
        return False
    try:
        at_zero = fn(0.0, float(s)) if scalar_r else fn(float(s), 0.0)
    except (ZeroDivisionError, OverflowError):
        return False
    return at_zero == 0 and not (isinstance(at_zero, float) and at_zero != at_zero)


def binary(name, lhs, rhs):
    """``lhs (name) rhs`` where at least one operand is a sparse array (``name``: one of
    :data:`OPS` or :data:`COMPARISONS`), recorded by ``mx.autograd`` through the
    operands' dense stand-ins (``runtime/autograd_sparse.py``)."""
    res = _binary(name, lhs, rhs)
    if autograd_sparse.recording_with(lhs, rhs):
        res = autograd_sparse.record(res, OPS.get(name) or COMPARISONS[name], (lhs, rhs))
    return res


def _binary(name, lhs, rhs):
    fn = OPS.get(name) or COMPARISONS[name]
    cast = name in COMPARISONS      # booleans back in the array's dtype
    scalar_r = isinstance(rhs, numbers.Number)
    scalar_l = isinstance(lhs, numbers.Number)
    if scalar_r or scalar_l:
        arr, s = (lhs, rhs) if scalar_r else (rhs, lhs)
        dt = torch_dtype(arr)
        if _zero_stays_zero(name, fn, s, scalar_r):
            vals = fn(arr._data_t, s) if scalar_r else fn(s, arr._data_t)
            return arr._with(vals.to(dt) if cast else vals, [a.clone() for a in arr._aux_t])
        res = fn(_dense(lhs), rhs) if scalar_r else fn(lhs, _dense(rhs))
        return as_ndarray(res.to(dt) if cast else res, arr.context)
    same_shape = tuple(lhs.shape) == tuple(rhs.shape)
    if same_shape and _sparse(lhs) and _sparse(rhs) and lhs.stype == rhs.stype and \
            name in ("add", "sub", "mul"):
        return _union(fn, lhs, rhs)
    if same_shape and _sparse(lhs) and not _sparse(rhs) and name == "mul":
        return _times_dense(lhs, K._plain(rhs))
    # everything else: mxnet's storage fallback, dense and broadcasting as dense operands
    if not same_shape:
        try:
            torch.broadcast_shapes(tuple(lhs.shape), tuple(rhs.shape))
        except RuntimeError:
            raise MXNetError(f"sparse {name}: shapes {tuple(lhs.shape)} and "
                             f"{tuple(rhs.shape)} do not broadcast") from None
    ctx = lhs.context if hasattr(lhs, "context") else None
    res = fn(_dense(lhs), _dense(rhs))
    if cast:
        res = res.to(torch_dtype(lhs if hasattr(lhs, "shape") else rhs))
    return as_ndarray(res, ctx)


def elemwise_storage(name, lhs, rhs):
    """The storage of mxnet's ``elemwise_<name>`` result for operand storages ``lhs`` and
    ``rhs``: add and sub keep a storage both share, mul also a sparse one times a dense
    one, and div (and every other pairing) is dense."""
    if name in ("add", "sub", "mul") and lhs == rhs:
        return lhs
    if name == "mul" and "default" in (lhs, rhs):
        return rhs if lhs == "default" else lhs
    return "default"


def elemwise(name, lhs, rhs):
    """mxnet's ``nd.sparse.elemwise_<name>``: :func:`binary`'s values, stored as
    :func:`elemwise_storage` says."""
    want = elemwise_storage(name, getattr(lhs, "stype", "default"),
                            getattr(rhs, "stype", "default"))
    out = binary(name, lhs, rhs)
    if getattr(out, "stype", "default") == want:
        return out
    return out.tostype(want)


def _union(fn, lhs, rhs):
    if lhs.stype == "row_sparse":
        rows = torch.unique(torch.cat([lhs._aux_t[0], rhs._aux_t[0].to(lhs.device)]))
        left = K.retain_rows(lhs._data_t, lhs._aux_t[0], lhs.shape, rows)[0]
        right = K.retain_rows(rhs._data_t.to(lhs.device), rhs._aux_t[0].to(lhs.device),
                              rhs.shape, rows)[0]
        return lhs._with(fn(left, right), [rows])
    ncol = lhs.shape[1]
    keys = [_csr_keys(x) for x in (lhs, rhs)]
    uniq = torch.unique(torch.cat([keys[0], keys[1].to(lhs.device)]))
    vals = []
    for x, k in zip((lhs, rhs), keys):
        v = torch.zeros(uniq.numel(), dtype=torch_dtype(lhs), device=lhs.device)
        v[torch.searchsorted(uniq, k.to(lhs.device))] = x._data_t.to(lhs.device, torch_dtype(lhs))
        vals.append(v)
    res = fn(vals[0], vals[1])
    keep = res != 0            # mxnet's csr (op) csr stores no zeros
    res, uniq = res[keep], uniq[keep]
    rows = uniq // ncol
    indptr = torch.zeros(lhs.shape[0] + 1, dtype=K.IDX, device=lhs.device)
    torch.cumsum(torch.bincount(rows, minlength=lhs.shape[0]), 0, out=indptr[1:])
    return lhs._with(res, [indptr, (uniq % ncol).to(K.IDX)])


def _csr_keys(x):
    rows = K.csr_rows_of_entries(x._aux_t[0], x._data_t.numel())
    return rows * x.shape[1] + x._aux_t[1].long()


def _times_dense(sp, dense):
    dense = dense.to(sp.device, torch_dtype(sp))
    if sp.stype == "row_sparse":
        return sp._with(sp._data_t * dense[sp._aux_t[0]], [sp._aux_t[0].clone()])
    rows = K.csr_rows_of_entries(sp._aux_t[0], sp._data_t.numel())
    vals = sp._data_t * dense[rows, sp._aux_t[1]]
    return sp._with(vals, [a.clone() for a in sp._aux_t])
