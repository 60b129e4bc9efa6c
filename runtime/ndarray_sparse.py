"""mxnet's sparse arrays: ``CSRNDArray`` and ``RowSparseNDArray``.

A sparse array holds its parts as plain torch tensors on its context's device:
``data`` (the stored values) and int64 aux arrays (csr: ``indptr``, ``indices``;
row_sparse: ``indices``). Unlike mxnet's, these classes are not ``NDArray`` (a
``torch.Tensor`` subclass) themselves: torch code cannot take them directly;
``tostype('default')`` gives the dense array. ``data`` / ``indices`` / ``indptr``
return copies, as mxnet's do. The conversions live in :mod:`runtime.sparse_kernels`.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from compiler.errors import MXNetError

from . import autograd_sparse as _ag
from . import sparse_arith as _arith
from . import sparse_kernels as K
from .context import Context, current_context
from .ndarray import (SPARSE_ATTACH_GRAD, STORAGE_CASTS, NDArray, as_ndarray, to_numpy_dtype,
                      to_torch_dtype, torch_dtype)
from . import ndarray_mx as _mx
from .ndarray_mx import mx_dtype

STYPES = ("default", "row_sparse", "csr")

# mxnet NDArray method -> registry operator, for the sparse arrays' fluent methods
_FLUENT = {**{n: n for n in _mx.OPERATOR_METHODS + _mx._UNARY_METHODS},
           **{n: n for n in _mx._REDUCTIONS}, "flatten": "Flatten", "zeros_like": "zeros_like",
           "ones_like": "ones_like", "rint": "rint", "degrees": "degrees",
           "radians": "radians", "slice": "slice"}
STYPE_CODES = {"default": 0, "row_sparse": 1, "csr": 2}


def _ctx_of(t: torch.Tensor, ctx):
    return ctx if ctx is not None else (
        Context("gpu", t.device.index or 0) if t.device.type == "cuda" else current_context())


class BaseSparseNDArray:
    """What csr and row_sparse arrays share: shape, dtype, context, conversions."""

    stype = None
    _aux_names = ()

    def __init__(self, data, aux, shape, ctx=None):
        self._data_t = K._plain(data)
        self._aux_t = [K._plain(a).to(K.IDX) for a in aux]
        self._shape = tuple(int(d) for d in shape)
        self._ctx = _ctx_of(self._data_t, ctx)

    # -- properties ----------------------------------------------------------------
    @property
    def shape(self):
        return self._shape

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def dtype(self):
        """numpy's type object of the values (``a.dtype == np.float32``), as an NDArray's
        and as mxnet's; ``runtime.ndarray.torch_dtype(a)`` gives the torch dtype."""
        return mx_dtype(self._data_t.dtype)

    @property
    def np_dtype(self):
        return to_numpy_dtype(self._data_t.dtype)

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def device(self) -> torch.device:
        """The torch device holding the parts."""
        return self._data_t.device

    @property
    def size(self):
        raise NotImplementedError("size is not defined for sparse arrays (mxnet raises too)")

    @property
    def data(self) -> NDArray:
        """A copy of the stored values."""
        return as_ndarray(self._data_t.clone(), self._ctx)

    @property
    def indices(self) -> NDArray:
        """A copy of the (column for csr, row for row_sparse) indices."""
        return as_ndarray(self._aux_t[-1].clone(), self._ctx)

    def _data(self):
        return self.data

    def _aux_data(self, i):
        return as_ndarray(self._aux_t[i].clone(), self._ctx)

    @property
    def _num_aux(self):
        return len(self._aux_names)

    @property
    def _aux_types(self):
        return [np.dtype("int64")] * self._num_aux

    def __repr__(self):
        shape = "x".join(str(d) for d in self._shape)
        return f"\n<{type(self).__name__} {shape} @{self._ctx}>"

    def __reduce__(self):
        return (_rebuild, (self.stype, self._data_t.cpu(), [a.cpu() for a in self._aux_t],
                           self._shape))

    def _with(self, data, aux, ctx=None):
        return type(self)(data, aux, self._shape, ctx or self._ctx)

    # -- arithmetic (runtime/sparse_arith.py says which storage each result has) ------
    def __add__(self, other):
        return _arith.binary("add", self, other)

    def __radd__(self, other):
        return _arith.binary("add", other, self)

    def __sub__(self, other):
        return _arith.binary("sub", self, other)

    def __rsub__(self, other):
        return _arith.binary("sub", other, self)

    def __mul__(self, other):
        return _arith.binary("mul", self, other)

    def __rmul__(self, other):
        return _arith.binary("mul", other, self)

    def __truediv__(self, other):
        return _arith.binary("div", self, other)

    def __rtruediv__(self, other):
        return _arith.binary("div", other, self)

    def __neg__(self):
        res = self._with(-self._data_t, [a.clone() for a in self._aux_t])
        if _ag.recording_with(self):
            res = _ag.record(res, lambda x: -x, (self,))
        return res

    def __pow__(self, other):
        return _arith.binary("pow", self, other)

    def __rpow__(self, other):
        return _arith.binary("pow", other, self)

    def __eq__(self, other):
        return _arith.binary("eq", self, other)

    def __ne__(self, other):
        return _arith.binary("ne", self, other)

    def __gt__(self, other):
        return _arith.binary("gt", self, other)

    def __ge__(self, other):
        return _arith.binary("ge", self, other)

    def __lt__(self, other):
        return _arith.binary("lt", self, other)

    def __le__(self, other):
        return _arith.binary("le", self, other)

    __hash__ = object.__hash__      # identity, as before comparisons became elementwise

    # -- mx.autograd (runtime/autograd_sparse.py: through a dense stand-in) -------------
    def attach_grad(self, grad_req="write", stype=None):
        """Give the array a gradient array (zeros) that ``mx.autograd`` writes or adds
        to, of storage ``stype`` (this array's own by default)."""
        _ag.attach_grad(self, grad_req, stype)

    @property
    def grad(self):
        """The gradient array ``attach_grad`` gave (None before)."""
        return _ag.grad_of(self)

    def detach(self):
        """The same values and storage, cut from the ``mx.autograd`` graph (a copy)."""
        return self.copy()

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        """``mx.autograd.backward`` of this array (with ``out_grad`` as its gradient)."""
        _mx.backward([self], None if out_grad is None else [out_grad], retain_graph,
                     train_mode)

    # -- mxnet's fluent methods: the registry operator on this array ---------------------
    def __getattr__(self, name):
        """``x.abs()``, ``x.sum(axis=0)``, ``x.transpose()`` ...: NDArray's operator
        methods, run as ``mx.nd.<op>(x, ...)`` (which keeps the storage where mxnet does
        and falls back to dense elsewhere: ``runtime/imperative.py``)."""
        op = _FLUENT.get(name)
        if op is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return lambda *args, **kwargs: _mx._invoke(op, (self,) + args, kwargs)

    @property
    def T(self):
        """The transpose (dense, as mxnet's storage fallback gives it)."""
        return _mx._invoke("transpose", (self,), {})

    # -- conversions ---------------------------------------------------------------
    def _dense(self) -> torch.Tensor:
        raise NotImplementedError

    def asnumpy(self) -> np.ndarray:
        """A dense numpy copy."""
        return self.tostype("default").asnumpy()

    def tostype(self, stype):
        """A copy with storage type ``stype`` (mxnet refuses csr <-> row_sparse)."""
        if stype not in STYPES:
            raise MXNetError(f"tostype: unknown storage type {stype!r}; use one of {STYPES}")
        if stype == "default":
            return as_ndarray(self._dense(), self._ctx)
        if stype != self.stype:
            raise ValueError(f"cast_storage from {self.stype} to {stype} is not supported")
        return self.copy()

    def copy(self):
        return self._with(self._data_t.clone(), [a.clone() for a in self._aux_t])

    def astype(self, dtype, copy=True):
        """A copy (same storage type) with values cast to ``dtype``."""
        dt = to_torch_dtype(dtype)
        if not copy and dt == self._data_t.dtype:
            return self
        return self._with(self._data_t.to(dt), [a.clone() for a in self._aux_t])

    def copyto(self, other):
        """Copy into an array (dense, or this storage type) or onto a Context."""
        if isinstance(other, Context):
            dev = other.torch_device
            return self._with(self._data_t.to(dev, copy=True),
                              [a.to(dev, copy=True) for a in self._aux_t], other)
        other_stype = getattr(other, "stype", None)
        if other_stype is None:
            raise TypeError("copyto does not support type " + str(type(other)))
        if other_stype not in ("default", self.stype):
            raise TypeError("copyto does not support destination NDArray stype " + other_stype)
        if other is self:
            warnings.warn("You are attempting to copy an array to itself", RuntimeWarning)
            return False
        if tuple(other.shape) != self._shape:
            raise MXNetError(f"copyto: shape mismatch {self._shape} vs {tuple(other.shape)}")
        if other_stype == "default":
            with torch.no_grad():
                other.copy_(self._dense().to(other.device, torch_dtype(other)))
            return other
        other._set_parts(self._data_t, self._aux_t)
        return other

    def _set_parts(self, data, aux):
        dev = self._data_t.device
        self._data_t = K._plain(data).to(dev, self._data_t.dtype, copy=True)
        self._aux_t = [K._plain(a).to(dev, K.IDX, copy=True) for a in aux]

    def as_in_context(self, ctx):
        return self if ctx == self._ctx else self.copyto(ctx)

    def wait_to_read(self):
        if self._data_t.device.type == "cuda":
            torch.cuda.synchronize(self._data_t.device)

    def _assign(self, key, value):
        """``x[:] = value``: an array of this storage type, a dense array / numpy, or (for
        row_sparse) a number."""
        name = type(self).__name__
        if not isinstance(key, slice) or (key.start, key.stop, key.step) != (None,) * 3:
            raise ValueError(f"{name} only supports [:] for assignment")
        if isinstance(value, (int, float, np.generic)) and not isinstance(value, np.ndarray):
            if self.stype != "row_sparse":      # as mxnet: only row_sparse takes a number
                raise ValueError(f"Assigning numeric types to {name} is not implemented yet.")
            # every row stored, holding the number (0 too), as mxnet
            dev = self._data_t.device
            self._set_parts(torch.full(self._shape, float(value), dtype=self._data_t.dtype,
                                       device=dev),
                            [torch.arange(self._shape[0], dtype=K.IDX, device=dev)])
            return
        if isinstance(value, np.ndarray):
            warnings.warn(f"Assigning non-NDArray object to {name} is not efficient",
                          RuntimeWarning)
            value = as_ndarray(torch.from_numpy(np.array(value, dtype=self.np_dtype)))
        if isinstance(value, BaseSparseNDArray) and value.stype == self.stype:
            if value is not self:
                value.copyto(self)
            return
        if isinstance(value, torch.Tensor):
            if tuple(value.shape) != self._shape:
                raise MXNetError(f"{name}[:] = value: shape mismatch {self._shape} vs "
                                 f"{tuple(value.shape)}")
            self._set_parts(*K.dense_to_parts(value, self.stype))
            return
        raise TypeError("type %s not supported" % str(type(value)))

    __setitem__ = _assign

    def check_format(self, full_check=True):
        """Raise MXNetError when the parts do not describe a valid array."""
        _check_format(self, full_check)


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row format (``data``, ``indices``, ``indptr``)."""

    stype = "csr"
    _aux_names = ("indptr", "indices")

    @property
    def indptr(self) -> NDArray:
        """A copy of the row pointers (``shape[0] + 1`` of them)."""
        return as_ndarray(self._aux_t[0].clone(), self._ctx)

    def _dense(self):
        return K.csr_to_dense(self._data_t, self._aux_t[0], self._aux_t[1], self._shape)

    def __getitem__(self, key):
        """Rows: ``x[i]`` (one row, as a 1-row csr) or ``x[a:b]`` (no step)."""
        if isinstance(key, (int, np.integer)):
            begin = self._shape[0] - 1 if key == -1 else int(key)
            return self.slice(begin, begin + 1)
        if isinstance(key, slice):
            if key.step is not None:
                raise ValueError("CSRNDArray only supports continuous slicing on axis 0")
            if key.start is None and key.stop is None:
                return self
            return self.slice(key.start or 0, self._shape[0] if key.stop is None else key.stop)
        if isinstance(key, tuple):
            raise ValueError("Multi-dimension indexing is not supported")
        raise ValueError("Undefined behaviour for {}".format(key))

    def slice(self, begin, end, step=None):
        """Rows ``begin:end`` as a new CSRNDArray (negative bounds count from the end);
        with tuples (``x.slice(begin=(2, 5), end=(4, 7))``, mxnet's ``slice`` operator),
        the rows, then the columns, as a CSRNDArray."""
        if isinstance(begin, (tuple, list)) or isinstance(end, (tuple, list)):
            if step not in (None, (), [], (1,), (1, 1), (None, None)):
                raise ValueError("CSRNDArray only supports continuous slicing")
            b = list(begin) + [None] * (2 - len(begin))
            e = list(end) + [None] * (2 - len(end))
            nrow, ncol = self._shape
            rows = self.slice(0 if b[0] is None else b[0], nrow if e[0] is None else e[0])
            if (b[1], e[1]) in ((None, None), (0, ncol), (0, None), (None, ncol)):
                return rows
            cols = range(*slice(b[1], e[1]).indices(ncol))
            dense = rows._dense()[:, cols.start:cols.stop]
            return CSRNDArray(*K.dense_to_parts(dense, "csr"), tuple(dense.shape), self._ctx)
        rows = self._shape[0]
        b = begin + rows if begin < 0 else begin
        e = end + rows if end < 0 else end
        if not 0 <= b < e <= rows:
            raise MXNetError(f"slice of a csr array with {rows} rows: begin {begin}, end {end} "
                             f"is out of range or empty")
        data, indptr, indices = K.slice_csr_rows(self._data_t, self._aux_t[0],
                                                 self._aux_t[1], b, e)
        return CSRNDArray(data, [indptr, indices], (e - b, self._shape[1]), self._ctx)

    def take_rows(self, rows):
        """The rows ``rows`` (an index array, any order) as a new CSRNDArray."""
        data, indptr, indices = K.csr_take_rows(self._data_t, self._aux_t[0], self._aux_t[1],
                                                rows)
        return CSRNDArray(data, [indptr, indices], (indptr.numel() - 1, self._shape[1]),
                          self._ctx)

    def asscipy(self):
        """A ``scipy.sparse.csr_matrix`` copy (scipy must be installed)."""
        try:
            import scipy.sparse as spsp
        except ImportError:
            raise ImportError("scipy could not be imported. Please make sure that the "
                              "scipy is installed.") from None
        indptr = self._aux_t[0]
        if indptr.numel() == 0:
            indptr = torch.zeros(self._shape[0] + 1, dtype=K.IDX)
        return spsp.csr_matrix((self._data_t.cpu().numpy(), self._aux_t[1].cpu().numpy(),
                                indptr.cpu().numpy()), shape=self._shape)


class RowSparseNDArray(BaseSparseNDArray):
    """An array whose stored rows are ``data`` at row ids ``indices`` (the rest zero)."""

    stype = "row_sparse"
    _aux_names = ("indices",)

    def _dense(self):
        return K.rsp_to_dense(self._data_t, self._aux_t[0], self._shape)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            raise Exception("__getitem__ with int key is not implemented for "
                            "RowSparseNDArray yet")
        if isinstance(key, slice):
            if (key.start, key.stop, key.step) != (None,) * 3:
                raise Exception("RowSparseNDArray only supports [:] for __getitem__")
            return self
        if isinstance(key, tuple):
            raise ValueError("Multi-dimension indexing is not supported")
        raise ValueError("Undefined behaviour for {}".format(key))

    def retain(self, indices):
        """The rows ``indices`` (sorted ascending), as :func:`retain` gives them."""
        return retain(self, indices)


def retain(data=None, indices=None, out=None, name=None, **kwargs):
    """mxnet's ``sparse.retain``: a row_sparse array of the rows ``indices`` of ``data``
    (one stored row per id, zero where ``data`` has none; ids sorted ascending).
    ``out`` receives the result; ``name`` is accepted, as mxnet's."""
    if kwargs:
        raise MXNetError(f"retain: unknown argument(s) {sorted(kwargs)}; retain takes data "
                         f"and indices")
    if indices is None:
        raise MXNetError("retain: indices are required (the row ids to keep)")
    if not isinstance(data, RowSparseNDArray):
        raise MXNetError(f"retain: data must be a RowSparseNDArray, got "
                         f"{getattr(data, 'stype', type(data).__name__)}")
    if isinstance(indices, BaseSparseNDArray):
        raise MXNetError("retain: indices must be a dense array")
    ids = indices if isinstance(indices, torch.Tensor) else torch.as_tensor(np.asarray(indices))
    rows, idx = K.retain_rows(data._data_t, data._aux_t[0], data.shape, ids)
    res = RowSparseNDArray(rows, [idx], data.shape, data.context)
    if out is not None:
        out[:] = res
        return out
    return res


def _dense_of(x) -> torch.Tensor:
    return x._dense() if isinstance(x, BaseSparseNDArray) else K._plain(x)


def _rows_getter(rhs, transpose_b):
    """``ids -> rows ids of rhs (or of rhs^T)``: a row_sparse rhs answers by retain."""
    if isinstance(rhs, RowSparseNDArray) and not transpose_b:
        def rows(ids):
            if rhs._aux_t[0].numel() == 0:      # nothing stored: every row is zero
                return rhs._data_t.new_zeros((ids.numel(),) + tuple(rhs.shape[1:]))
            return K.retain_rows(rhs._data_t, rhs._aux_t[0], rhs.shape, ids)[0]
        return rows
    b = _dense_of(rhs)
    b = b.t() if transpose_b else b
    return lambda ids: b[ids]


def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
    """mxnet's ``dot`` with sparse operands (see :func:`_dot`), recorded by
    ``mx.autograd`` through the operands' dense stand-ins. ``forward_stype``
    (``'default'``, ``'csr'`` or ``'row_sparse'``), when given, is the result's storage:
    mxnet computes by its dense fallback where no kernel takes the operands (``csr .
    csr`` too) and casts the result."""
    if forward_stype not in (None, "", "None", "default", "csr", "row_sparse"):
        raise ValueError(f"dot: forward_stype={forward_stype!r}; use 'default', 'csr' or "
                         f"'row_sparse'")
    hint = forward_stype if forward_stype not in ("", "None") else None
    a, b = lhs, rhs
    if hint and isinstance(a, CSRNDArray) and isinstance(b, CSRNDArray):
        a, b = a.tostype("default"), b.tostype("default")
    res = _dot(a, b, transpose_a, transpose_b)
    if hint and getattr(res, "stype", "default") != hint:
        # through dense: csr <-> row_sparse has no direct cast
        res = res.tostype("default").tostype(hint)
    if _ag.recording_with(lhs, rhs):
        flags = {"transpose_a": transpose_a, "transpose_b": transpose_b}
        res = _ag.record(res, lambda x, y: _mx._invoke("dot", (x, y), flags), (lhs, rhs))
    return res


def _dot(lhs, rhs, transpose_a=False, transpose_b=False):
    """mxnet's ``dot`` with sparse operands (2-D): ``csr . dense`` is dense, ``csr^T .
    dense`` row_sparse, ``dense . csr`` (either transpose of csr; ``dense`` not
    transposed) csr; a row_sparse
    right operand of ``csr`` is read by rows; other mixes compute densely and give a
    dense array, as mxnet's storage fallback does. ``csr . csr`` is refused."""
    if isinstance(lhs, CSRNDArray) and isinstance(rhs, CSRNDArray):
        raise MXNetError("dot: csr . csr is not supported (mxnet has no such kernel)")
    ctx = lhs.context if hasattr(lhs, "context") else None
    if isinstance(lhs, CSRNDArray) and _dense_2d(rhs):
        res = K.dot_csr_dense(lhs._data_t, lhs._aux_t[0], lhs._aux_t[1], lhs.shape,
                              _rows_getter(rhs, transpose_b), transpose_a)
        if not transpose_a:
            return as_ndarray(res, ctx)
        n = res[0].shape[1]
        return RowSparseNDArray(res[0], [res[1]], (lhs.shape[1], n), ctx)
    if isinstance(rhs, CSRNDArray) and not isinstance(lhs, BaseSparseNDArray) and \
            not transpose_a:
        a = K._plain(lhs)
        data, indptr, indices = K.dot_dense_csr(a, rhs._data_t, rhs._aux_t[0], rhs._aux_t[1],
                                                transpose_b)
        n = rhs.shape[0] if transpose_b else rhs.shape[1]
        return CSRNDArray(data, [indptr, indices], (a.shape[0], n), ctx)
    a, b = _dense_of(lhs), _dense_of(rhs)
    a = a.t() if transpose_a else a
    b = b.t() if transpose_b else b
    return as_ndarray(a @ b, ctx)


def _dense_2d(x):
    return not isinstance(x, CSRNDArray) and len(x.shape) == 2


def cast_storage(data, stype):
    """``data`` converted to storage type ``stype`` (a copy)."""
    if stype not in STYPES:
        raise MXNetError(f"cast_storage: unknown storage type {stype!r}; use one of {STYPES}")
    if isinstance(data, BaseSparseNDArray):
        return data.tostype(stype)
    if stype == "default":
        return as_ndarray(data.detach().clone(), getattr(data, "context", None))
    parts = K.dense_to_parts(data, stype)
    cls = CSRNDArray if stype == "csr" else RowSparseNDArray
    return cls(parts[0], parts[1], tuple(data.shape), getattr(data, "context", None))


def zeros(stype, shape, ctx=None, dtype=None):
    """An all-zero sparse array: nothing stored (a csr's ``indptr`` is all zero)."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(d) for d in shape)
    ctx = ctx if isinstance(ctx, Context) else (Context(ctx) if ctx else current_context())
    dt, dev = to_torch_dtype(dtype), ctx.torch_device
    if stype == "csr":
        if len(shape) != 2:
            raise MXNetError(f"a csr array is 2-D; got shape {shape}")
        indptr = torch.zeros(shape[0] + 1, dtype=K.IDX, device=dev)
        return CSRNDArray(torch.zeros(0, dtype=dt, device=dev),
                          [indptr, torch.zeros(0, dtype=K.IDX, device=dev)], shape, ctx)
    if stype == "row_sparse":
        return RowSparseNDArray(torch.zeros((0,) + shape[1:], dtype=dt, device=dev),
                                [torch.zeros(0, dtype=K.IDX, device=dev)], shape, ctx)
    raise ValueError("unknown storage type" + str(stype))


def _check_format(arr, full_check):
    name, shape = type(arr).__name__, arr.shape
    data, aux = arr._data_t, arr._aux_t
    if arr.stype == "row_sparse":
        idx = aux[0]
        bad = data.shape[0] != idx.numel() or tuple(data.shape[1:]) != shape[1:]
        if not bad and full_check and idx.numel():
            bad = bool((idx[1:] <= idx[:-1]).any()) or int(idx[0]) < 0 or \
                int(idx[-1]) >= shape[0]
        if bad:
            raise MXNetError(f"{name} {shape}: indices {tuple(idx.shape)} / data "
                             f"{tuple(data.shape)} do not form valid row_sparse storage")
        return
    indptr, indices = aux
    if indptr.numel() == 0:
        return
    bad = indptr.numel() != shape[0] + 1 or indices.numel() != data.numel() or \
        int(indptr[-1]) != data.numel() or int(indptr[0]) != 0
    if not bad and full_check:
        bad = bool((indptr[1:] < indptr[:-1]).any()) or bool(
            ((indices < 0) | (indices >= shape[1])).any())
        for r in range(shape[0]):
            seg = indices[int(indptr[r]):int(indptr[r + 1])]
            bad = bad or bool((seg[1:] <= seg[:-1]).any())
    if bad:
        raise MXNetError(f"{name} {shape}: indptr {tuple(indptr.shape)}, indices "
                         f"{tuple(indices.shape)}, data {tuple(data.shape)} do not form "
                         f"valid csr storage")


def _rebuild(stype, data, aux, shape):
    cls = CSRNDArray if stype == "csr" else RowSparseNDArray
    return cls(data, aux, shape)


STORAGE_CASTS.update(csr=cast_storage, row_sparse=cast_storage)   # NDArray.tostype
SPARSE_ATTACH_GRAD[0] = _ag.attach_grad                            # NDArray.attach_grad
_ag.register(zeros, as_ndarray)
