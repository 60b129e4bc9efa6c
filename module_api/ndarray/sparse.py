"""``mx.nd.sparse``: csr and row_sparse arrays, as mxnet 1.9.1's module makes them.

Constructors follow mxnet's argument forms and defaults: ``csr_matrix`` takes
``(data, indices, indptr)``, ``(data, (row, col))`` (summed, sorted; scipy is not
needed here), an ``(M, N)`` shape, a dense array or a scipy csr matrix;
``row_sparse_array`` takes ``(data, indices)``, a shape or a dense array. The
values' dtype is the source's for numpy / NDArray sources, float32 otherwise;
indices are int64. The arrays are :mod:`runtime.ndarray_sparse`'s classes.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

from runtime import sparse_arith as _arith
from runtime import sparse_kernels as _K
from runtime.context import Context, current_context
from runtime.ndarray import NDArray, as_ndarray, to_numpy_dtype, to_torch_dtype, torch_dtype
from runtime.ndarray_sparse import (BaseSparseNDArray, CSRNDArray,  # noqa: F401
                                    RowSparseNDArray, cast_storage, retain)
from runtime.ndarray_sparse import dot as _dot
from runtime.ndarray_sparse import zeros as _zeros

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "csr_matrix",
           "row_sparse_array", "zeros", "empty", "array", "cast_storage", "retain", "slice", "dot",
           "add", "subtract", "multiply", "divide", "elemwise_add", "elemwise_sub",
           "elemwise_mul", "elemwise_div"]


def _spsp():
    try:
        import scipy.sparse as spsp
        return spsp
    except ImportError:
        return None


def _is_scipy_csr(x):
    sp = _spsp()
    return sp is not None and isinstance(x, sp.csr_matrix)


def _ctx(ctx):
    if ctx is None:
        return current_context()
    return ctx if isinstance(ctx, Context) else Context(ctx)


def _default_dtype(src, dtype):
    """mxnet's ``_prepare_default_dtype``: the source's dtype for arrays, else float32."""
    if dtype is not None:
        return to_torch_dtype(dtype)
    if isinstance(src, torch.Tensor):
        return torch_dtype(src)
    if isinstance(src, np.ndarray) or _is_scipy_csr(src):
        return to_torch_dtype(src.dtype)
    return torch.float32


def _tensor(x, dtype, ctx, what):
    if isinstance(x, torch.Tensor):
        return x.detach().as_subclass(torch.Tensor).to(ctx.torch_device, dtype, copy=True)
    try:
        arr = np.array(x, dtype=to_numpy_dtype(dtype))
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be array like object") from None
    return torch.from_numpy(arr).to(ctx.torch_device)


def _check_shape(s1, s2):
    if s1 and s2 and tuple(s1) != tuple(s2):
        raise ValueError("Shape mismatch detected. " + str(tuple(s1)) + " v.s. " + str(tuple(s2)))


def _from_dense(arg, shape, ctx, dtype, stype):
    dt = _default_dtype(arg, dtype)
    c = _ctx(ctx) if ctx is not None else (arg.context if isinstance(arg, NDArray)
                                             else current_context())
    dense = as_ndarray(_tensor(arg, dt, c, "source_array"), c)
    _check_shape(dense.shape, shape)
    return cast_storage(dense, stype)


def csr_matrix(arg1, shape=None, ctx=None, dtype=None):
    """A CSRNDArray from parts, coordinates, a shape, a dense or a sparse matrix."""
    if isinstance(arg1, tuple):
        if len(arg1) == 2 and isinstance(arg1[1], tuple) and len(arg1[1]) == 2:
            return _csr_from_coo(arg1[0], arg1[1][0], arg1[1][1], shape, ctx, dtype)
        if len(arg1) == 2:
            _check_shape(arg1, shape)
            return empty("csr", arg1, ctx=ctx, dtype=dtype)
        if len(arg1) == 3:
            return _csr_from_parts(arg1[0], arg1[1], arg1[2], shape, ctx, dtype)
        raise ValueError("Unexpected length of input tuple: " + str(len(arg1)))
    if isinstance(arg1, CSRNDArray) or _is_scipy_csr(arg1):
        _check_shape(arg1.shape, shape)
        return array(arg1, ctx=ctx, dtype=dtype)
    if isinstance(arg1, RowSparseNDArray):
        raise ValueError("Unexpected input type: RowSparseNDArray")
    return _from_dense(arg1, shape, ctx, dtype, "csr")


def _csr_from_parts(data, indices, indptr, shape, ctx, dtype):
    c = _ctx(ctx)
    dt = _default_dtype(data, dtype)
    data = _tensor(data, dt, c, "values")
    indptr = _tensor(indptr, _K.IDX, c, "values")
    indices = _tensor(indices, _K.IDX, c, "values")
    if shape is None:
        if indices.shape[0] == 0:
            raise ValueError("invalid shape")
        shape = (indptr.shape[0] - 1, int(indices.max()) + 1)
    if data.dim() != 1 or indptr.dim() != 1 or indices.dim() != 1 or \
            indptr.shape[0] == 0 or len(shape) != 2:
        raise ValueError("invalid shape")
    return CSRNDArray(data, [indptr, indices], shape, c)


def _csr_from_coo(data, row, col, shape, ctx, dtype):
    c = _ctx(ctx)
    dt = _default_dtype(data, dtype)
    data = _tensor(data, dt, c, "values")
    row, col = _tensor(row, _K.IDX, c, "row"), _tensor(col, _K.IDX, c, "col")
    if shape is None:
        shape = (int(row.max()) + 1, int(col.max()) + 1) if row.numel() else (0, 0)
    vals, indptr, indices = _K.coo_to_csr(data, row, col, tuple(shape))
    return CSRNDArray(vals, [indptr, indices], shape, c)


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """A RowSparseNDArray from ``(data, indices)``, a shape, a dense or a row_sparse array."""
    if isinstance(arg1, tuple):
        if len(arg1) < 2:
            raise ValueError("Unexpected length of input tuple: " + str(len(arg1)))
        if len(arg1) > 2 or all(isinstance(d, numbers.Integral) for d in arg1):
            _check_shape(arg1, shape)
            return empty("row_sparse", arg1, ctx=ctx, dtype=dtype)
        return _rsp_from_parts(arg1[0], arg1[1], shape, ctx, dtype)
    if isinstance(arg1, RowSparseNDArray):
        _check_shape(arg1.shape, shape)
        return array(arg1, ctx=ctx, dtype=dtype)
    if isinstance(arg1, CSRNDArray):
        raise ValueError("Unexpected input type: CSRNDArray")
    return _from_dense(arg1, shape, ctx, dtype, "row_sparse")


def _rsp_from_parts(data, indices, shape, ctx, dtype):
    c = _ctx(ctx)
    dt = _default_dtype(data, dtype)
    data = _tensor(data, dt, c, "values")
    indices = _tensor(indices, _K.IDX, c, "values")
    if shape is None:
        if indices.shape[0] == 0:
            raise ValueError("invalid shape")
        shape = (int(indices[-1]) + 1,) + tuple(data.shape[1:])
    shape = tuple(int(d) for d in shape)
    if data.dim() != len(shape) or indices.dim() != 1 or int(np.prod(shape[1:])) == 0:
        raise ValueError("invalid shape")
    return RowSparseNDArray(data, [indices], shape, c)


def zeros(stype, shape, ctx=None, dtype=None, **kwargs):
    """An all-zero array of storage type ``stype`` (``'default'``: a dense NDArray)."""
    if stype == "default":
        c = _ctx(ctx)
        shape = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(shape)
        return as_ndarray(torch.zeros(shape, dtype=to_torch_dtype(dtype),
                                      device=c.torch_device), c)
    return _zeros(stype, shape, _ctx(ctx), dtype)


def empty(stype, shape, ctx=None, dtype=None):
    """A sparse array of ``stype`` with nothing stored (all zero)."""
    if stype not in ("csr", "row_sparse"):
        raise Exception("unknown stype : " + str(stype))
    return zeros(stype, shape, ctx=ctx, dtype=dtype)


def array(source_array, ctx=None, dtype=None):
    """A sparse copy of a CSRNDArray / RowSparseNDArray or a scipy csr matrix."""
    if isinstance(source_array, BaseSparseNDArray):
        dt = _default_dtype(source_array, dtype) if dtype is not None else source_array.dtype
        out = source_array.astype(dt)
        return out.as_in_context(_ctx(ctx)) if ctx is not None else \
            out.as_in_context(current_context())
    if isinstance(source_array, NDArray):
        raise AssertionError("Please use `tostype` to create RowSparseNDArray or CSRNDArray "
                             "from an NDArray")
    if _is_scipy_csr(source_array):
        csr = source_array.sorted_indices()
        csr.sum_duplicates()
        return csr_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape,
                          dtype=_default_dtype(source_array, dtype), ctx=ctx)
    if isinstance(source_array, (np.ndarray, np.generic)):
        raise ValueError("Please use mx.nd.array to create an NDArray with source_array of type ",
                         type(source_array))
    raise ValueError("Unexpected source_array type: ", type(source_array))


def slice(data, begin, end, step=(), out=None):  # noqa: A001  (mxnet's name)
    """Rows ``begin:end`` of a csr array, and with 2-tuples its columns too: a csr array.
    With a step other than 1 the result is mxnet's dense fallback (a dense slice)."""
    if not isinstance(data, CSRNDArray):
        raise TypeError("sparse.slice takes a CSRNDArray; dense arrays use mx.nd.slice")
    steps = step if isinstance(step, (tuple, list)) else (step,)
    if any(s not in (None, 1) for s in steps):
        from runtime.imperative import invoke
        kwargs = dict(begin=begin, end=end, step=step)
        return invoke("slice", (data.tostype("default"),),
                      kwargs if out is None else dict(kwargs, out=out))
    as_tuple = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,)  # noqa: E731
    b, e = as_tuple(begin), as_tuple(end)
    if len(b) > 1 or len(e) > 1:
        res = data.slice(b, e)
    else:
        res = data.slice(0 if b[0] is None else b[0], data.shape[0] if e[0] is None else e[0])
    if out is not None:
        out[:] = res
        return out
    return res


def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None, out=None):
    """mxnet's ``dot`` with csr / row_sparse operands (see :func:`runtime.ndarray_sparse.dot`
    for the storage of each result); ``forward_stype`` (``'default'``, ``'csr'`` or
    ``'row_sparse'``), when given, is the result's storage."""
    res = _dot(lhs, rhs, transpose_a, transpose_b, forward_stype)
    if out is not None:
        out[:] = res
        return out
    return res


def add(lhs, rhs):
    """``lhs + rhs`` with mxnet's result storage (runtime/sparse_arith.py)."""
    return _arith.binary("add", lhs, rhs)


def subtract(lhs, rhs):
    """``lhs - rhs`` with mxnet's result storage."""
    return _arith.binary("sub", lhs, rhs)


def multiply(lhs, rhs):
    """``lhs * rhs`` with mxnet's result storage."""
    return _arith.binary("mul", lhs, rhs)


def divide(lhs, rhs):
    """``lhs / rhs`` with mxnet's result storage."""
    return _arith.binary("div", lhs, rhs)


def elemwise_add(lhs, rhs):
    """``lhs + rhs`` of equal shapes, stored as mxnet's ``elemwise_add`` stores it."""
    return _arith.elemwise("add", lhs, rhs)


def elemwise_sub(lhs, rhs):
    """``lhs - rhs`` of equal shapes, stored as mxnet's ``elemwise_sub`` stores it."""
    return _arith.elemwise("sub", lhs, rhs)


def elemwise_mul(lhs, rhs):
    """``lhs * rhs`` of equal shapes, stored as mxnet's ``elemwise_mul`` stores it (a
    sparse operand times a dense one keeps the sparse storage)."""
    return _arith.elemwise("mul", lhs, rhs)


def elemwise_div(lhs, rhs):
    """``lhs / rhs`` of equal shapes (dense, as mxnet's ``elemwise_div``)."""
    return _arith.elemwise("div", lhs, rhs)
