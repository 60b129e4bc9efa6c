"""``NDArray``: a ``torch.Tensor`` subclass with mxnet's array methods.

Every array the API hands out is one of these, so it can go straight into
torch code, and mxnet code can call ``asnumpy()`` on it.

User code sees mxnet 1.9.1's legacy NDArray where mxnet and torch differ
(``runtime/ndarray_mx.py``): ``dtype`` is numpy's type object, integer division
truncates, mixed dtypes are refused, ``reshape`` takes mxnet's special codes,
indexing takes NDArray indices and negative steps, and mxnet's methods
(``slice_axis``, ``take``, ``tile`` ...) run the registry's operators. torch's
own code sees a plain tensor (a ``torch.dtype``, torch's methods), so an NDArray
goes into any torch function unchanged. ``size`` is an ``int`` that can also be
called like torch's method, and ``arr[:] = numpy_array`` is accepted. Every
function here that takes a dtype accepts torch dtypes, numpy dtypes and strings
alike (see :func:`to_torch_dtype`); :func:`torch_dtype` gives an array's torch dtype.
"""
from __future__ import annotations

import numpy as np
import torch

from compiler.shape_semantics import is_np_shape

from . import ndarray_mx as _mx
from .context import Context, cpu, current_context
from .ndarray_mx import torch_dtype  # noqa: F401  (re-exported: the torch dtype of an array)

_NP_TO_TORCH = {
    np.dtype("float32"): torch.float32, np.dtype("float64"): torch.float64,
    np.dtype("float16"): torch.float16, np.dtype("uint8"): torch.uint8,
    np.dtype("int8"): torch.int8, np.dtype("int16"): torch.int16,
    np.dtype("int32"): torch.int32, np.dtype("int64"): torch.int64,
    np.dtype("bool"): torch.bool,
}
for _n in ("uint16", "uint32", "uint64"):
    if hasattr(torch, _n):
        _NP_TO_TORCH[np.dtype(_n)] = getattr(torch, _n)
_TORCH_TO_NP = {v: k for k, v in _NP_TO_TORCH.items()}


def to_torch_dtype(dtype, default=torch.float32) -> torch.dtype:
    """A ``torch.dtype`` from a torch dtype, numpy dtype / scalar type or string.

    ``None`` gives ``default`` (mxnet's ``mx_real_t``, float32).
    """
    if dtype is None:
        return default
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return torch.bfloat16
    if isinstance(dtype, np.dtype) and dtype.names == ("bfloat16",):
        return torch.bfloat16         # mxnet's Python type for bfloat16
    try:
        return _NP_TO_TORCH[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError(f"unsupported dtype {dtype!r}") from None


def to_numpy_dtype(dtype) -> np.dtype:
    """A ``numpy.dtype`` from any dtype spelling :func:`to_torch_dtype` accepts."""
    t = to_torch_dtype(dtype)
    if t not in _TORCH_TO_NP:
        raise TypeError(f"dtype {dtype!r} has no numpy equivalent")
    return _TORCH_TO_NP[t]


def check_stype(stype):
    """Where only dense storage is supported, any other ``stype`` is a clear error."""
    if stype not in (None, "default"):
        from compiler.errors import MXNetError
        raise MXNetError(f"storage type {stype!r} is not supported here: only 'default' "
                         "(csr and row_sparse arrays are made by mx.nd.sparse)")


# 'csr' / 'row_sparse' -> cast of a dense array, registered by runtime.ndarray_sparse
STORAGE_CASTS: dict = {}
# attach_grad(arr, grad_req, stype) for a sparse gradient of a dense array: set by
# runtime/ndarray_sparse.py (which imports this module) to runtime/autograd_sparse.py's
SPARSE_ATTACH_GRAD: list = [None]


class _Size(int):
    """mxnet's ``arr.size`` (an int) that also answers torch's ``arr.size(dim)``."""

    def __new__(cls, tensor):
        obj = int.__new__(cls, tensor.numel())
        obj._shape = torch.Tensor.size(tensor)
        return obj

    def __call__(self, dim=None):
        return self._shape if dim is None else self._shape[dim]


_TORCH_GRAD = torch.Tensor.grad      # the slot NDArray.grad reads and writes


class NDArray(torch.Tensor):
    """A torch tensor that also speaks mxnet (``asnumpy``, ``context``, ``copyto`` ...)."""

    @property
    def context(self) -> Context:
        # read without the subclass's __torch_function__ (a call: 1.2 us, 3.4 with it;
        # the runtime asks for contexts several times a step)
        with torch._C.DisableTorchFunctionSubclass():
            dev = self.device
        return Context("gpu", dev.index or 0) if dev.type == "cuda" else \
            getattr(self, "_mx_ctx", None) or cpu(0)

    ctx = context

    @property
    def stype(self):
        return "default"

    @property
    def size(self):
        return _Size(self)

    @property
    def dtype(self):
        """numpy's type object (``np.float32``) as mxnet gives it; torch's own code
        gets the ``torch.dtype``."""
        t = torch_dtype(self)
        return _mx._MX_TYPES.get(t, t) if _mx.mxnet_caller() else t

    @property
    def np_dtype(self) -> np.dtype:
        """The dtype as a ``numpy.dtype``."""
        return to_numpy_dtype(torch_dtype(self))

    # -- arithmetic: mxnet's dtype rules ------------------------------------------
    __add__ = _mx._binary("__add__", torch.add)
    __radd__ = _mx._binary("__radd__", torch.add, reverse=True)
    __sub__ = _mx._binary("__sub__", torch.sub)
    __rsub__ = _mx._binary("__rsub__", torch.sub, reverse=True)
    __mul__ = _mx._binary("__mul__", torch.mul)
    __rmul__ = _mx._binary("__rmul__", torch.mul, reverse=True)
    __truediv__ = _mx._binary("__truediv__", _mx._truediv)
    __rtruediv__ = _mx._binary("__rtruediv__", _mx._truediv, reverse=True)
    __mod__ = _mx._binary("__mod__", _mx._mod)
    __rmod__ = _mx._binary("__rmod__", _mx._mod, reverse=True)
    __pow__ = _mx._binary("__pow__", torch.pow)
    __rpow__ = _mx._binary("__rpow__", torch.pow, reverse=True)
    # comparisons: mxnet's operators, 1/0 in the input's dtype; defining __eq__ would
    # drop the inherited __hash__, which dicts and sets of arrays need
    __eq__ = _mx._comparison("__eq__", "broadcast_equal", "_equal_scalar")
    __ne__ = _mx._comparison("__ne__", "broadcast_not_equal", "_not_equal_scalar")
    __gt__ = _mx._comparison("__gt__", "broadcast_greater", "_greater_scalar")
    __ge__ = _mx._comparison("__ge__", "broadcast_greater_equal", "_greater_equal_scalar")
    __lt__ = _mx._comparison("__lt__", "broadcast_lesser", "_lesser_scalar")
    __le__ = _mx._comparison("__le__", "broadcast_lesser_equal", "_lesser_equal_scalar")
    __hash__ = torch.Tensor.__hash__
    __iadd__ = _mx._inplace("__iadd__", torch.add)
    __isub__ = _mx._inplace("__isub__", torch.sub)
    __imul__ = _mx._inplace("__imul__", torch.mul)
    __itruediv__ = _mx._inplace("__itruediv__", _mx._truediv)
    __imod__ = _mx._inplace("__imod__", _mx._mod)

    # -- shape methods ------------------------------------------------------------
    def reshape(self, *shape, **kwargs):
        """mxnet's reshape (a view): ``(0, -1)``, ``-2``, ``-3``, ``-4``, ``reverse=True``
        and ``shape=`` as in mxnet; torch's own callers get torch's reshape."""
        if not _mx.mxnet_caller():
            return torch.Tensor.reshape(self, *shape, **kwargs)
        plain = not kwargs and _mx.plain_shape(shape) and not _mx.records(self)
        if plain and _mx.reshape_fits(self.numel(), shape):
            return torch.Tensor.reshape(self, *shape)
        # mxnet's codes, or a size that does not fit (the registry's rule names it)
        out = _mx._reshape_shape(self.shape, shape, dict(kwargs))
        if _mx.records(self):
            return _mx._invoke("Reshape", (self,), {"shape": out})
        return torch.Tensor.reshape(self, out)

    sum = _mx._reduction("sum", "sum")
    mean = _mx._reduction("mean", "mean")
    max = _mx._reduction("max", "max")
    min = _mx._reduction("min", "min")
    prod = _mx._reduction("prod", "prod")
    nansum = _mx._reduction("nansum", "nansum")
    nanprod = _mx._reduction("nanprod", "nanprod")
    argmax = _mx._reduction("argmax", "argmax")
    argmin = _mx._reduction("argmin", "argmin")
    norm = _mx._reduction("norm", "norm")

    @property
    def shape(self):
        """The shape as a plain tuple, as mxnet returns it (prints ``(2, 3)``)."""
        with torch._C.DisableTorchFunctionSubclass():     # 0.4 us a call, 3.8 through it
            return tuple(torch.Tensor.size(self))

    def __getitem__(self, key):
        flips = ()
        program = _mx.mxnet_caller()
        if program and _mx.records(self):
            return _mx._TAPE[0].getitem(self, key)
        if program:
            key, flips = _mx.normalize_key(key, self.shape)
        out = super().__getitem__(key)
        if flips:
            out = out.flip(flips)
        elif program and isinstance(out, torch.Tensor) and not out.is_contiguous():
            # mxnet's basic indexing gives a view only where the result is contiguous
            # (a[1], a[1:3]); a strided one (a[:, 1:3], a[::2]) is a copy there, so a
            # write into it leaves ``a`` as it was
            out = out.contiguous()
        # legacy shapes have no 0-d arrays: an element is a (1,) array (a view, as in
        # mxnet); NumPy shape semantics gives the 0-d array
        if isinstance(out, torch.Tensor) and out.dim() == 0 and not is_np_shape():
            out = _keep_ctx(out.reshape(1), self)
        return out

    @staticmethod
    def _basic_indexing_slice_is_contiguous(slc_key, shape):
        """Whether basic indexing with ``slc_key`` (one slice per dim of ``shape``) gives a
        view of the array, which writes reach: mxnet's helper of the same name, answered
        by this class's own indexing rule (``__getitem__``) on a meta tensor."""
        key, flips = _mx.normalize_key(tuple(slc_key), tuple(shape))
        if flips:
            return False
        return torch.empty(tuple(shape), device="meta")[key].is_contiguous()

    def __setstate__(self, state):
        """mxnet's pickled state, ``{'handle': raw bytes}`` (an ``NDArray::Save`` record,
        which ``MXNDArrayLoadFromRawBytes`` reads), replaces the array's values, shape and
        dtype, on the CPU whatever context it was saved from; any other state is torch's
        own (an NDArray pickled here)."""
        if isinstance(state, dict) and set(state) == {"handle"}:
            loaded = RECORD_DECODER[0](bytes(state["handle"]))
            with torch.no_grad():
                self.data = loaded.as_subclass(torch.Tensor).to(self.device)
            return
        torch._utils._set_obj_state(self, state)

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(torch.Tensor.size(self, 0)))

    def __repr__(self):
        """mxnet's layout: the values, then ``<NDArray 2x3 @cpu(0)>``."""
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self.asnumpy()}\n<{type(self).__name__} {shape} @{self.context}>"

    def __neg__(self):
        if _mx.records(self) and _mx.mxnet_caller():
            return _mx._invoke("_mul_scalar", (self,), {"scalar": -1.0})
        return torch.Tensor.__neg__(self)

    @property
    def T(self):
        if _mx.records(self):
            return _mx._invoke("transpose", (self,), {})
        return self.t() if self.dim() == 2 else self.permute(*reversed(range(self.dim())))

    def __setitem__(self, key, value):
        if key is not None and key is not Ellipsis and _mx.records(self, value) and \
                _mx.mxnet_caller():
            # as mxnet: the tape cannot see a write into part of an array, so a gradient
            # through it would be silently wrong (``a[...] = v`` copies)
            from compiler.errors import MXNetError
            raise MXNetError(f"Inplace operations (+=, -=, x[:]=, etc) are not supported "
                             f"when recording with autograd: writing {key!r} of an array of "
                             f"shape {tuple(self.shape)}; write a new array instead "
                             f"(mx.nd.concat, mx.nd.where), or assign outside "
                             f"autograd.record()")
        if isinstance(value, (np.ndarray, np.generic, list, tuple)):
            value = torch.as_tensor(np.asarray(value), dtype=torch_dtype(self),
                                    device=self.device)
        elif isinstance(value, torch.Tensor) and (value.device != self.device or
                                                  torch_dtype(value) != torch_dtype(self)):
            # written in the array's dtype, as mxnet's assignment casts (torch's index
            # put refuses two dtypes)
            value = value.to(device=self.device, dtype=torch_dtype(self))
        flips = ()
        if _mx.mxnet_caller():
            original = key
            key, flips = _mx.normalize_key(key, self.shape)
            if flips and not _mx.basic_key(original):
                # an advanced index with a negative step: torch's indexing of it is a
                # copy, not a view to write into; write at the positions numpy selects
                self._put_at(_mx.positions(original, self.shape), value)
                return
        if flips:      # write the flipped value into the ascending view of the elements
            view = super().__getitem__(key)
            value = torch.as_tensor(value, dtype=torch_dtype(self))
            while value.dim() > view.dim() and value.shape[0] == 1:
                value = value[0]        # leading ones, as numpy and torch's setitem drop
            value = value.expand(view.shape)
            with torch.no_grad():
                view.copy_(value.flip(flips))
            return
        super().__setitem__(key, value)

    def _put_at(self, positions, value):
        """Write ``value`` (broadcast to ``positions``' shape) at the row-major
        ``positions`` of this array (repeated positions: the last write wins, as numpy's)."""
        value = torch.as_tensor(value, dtype=torch_dtype(self), device=self.device)
        while value.dim() > positions.ndim and value.shape[0] == 1:
            value = value[0]
        value = value.expand(positions.shape).reshape(-1)
        with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
            torch.Tensor.put_(self, torch.as_tensor(positions.reshape(-1), device=self.device),
                              value)

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the array."""
        t = self.detach().cpu()
        if torch_dtype(t) == torch.bfloat16:
            t = t.float()
        return torch.Tensor.numpy(t.as_subclass(torch.Tensor)).copy()

    def asscalar(self):
        """The one value as a numpy scalar of the array's dtype (``np.float32``), as
        mxnet returns it: arithmetic on it then rounds as mxnet users' code does."""
        if self.numel() != 1:
            raise ValueError("The current array is not a scalar")
        return self.asnumpy().reshape(-1)[0]

    def astype(self, dtype, copy=True):
        """A copy converted to ``dtype`` (any dtype spelling)."""
        dt = to_torch_dtype(dtype)
        if not copy and dt == torch_dtype(self):
            return self
        return _keep_ctx(self.detach().to(dt).clone(), self)

    def copy(self):
        return _keep_ctx(self.detach().clone(), self)

    def __deepcopy__(self, memo):
        out = _keep_ctx(self.detach().clone(), self)
        if self.requires_grad:
            out.requires_grad_(True)
        memo[id(self)] = out
        return out

    def tostype(self, stype):
        if stype in STORAGE_CASTS:
            return STORAGE_CASTS[stype](self, stype)
        check_stype(stype)
        return self.copy()

    def wait_to_read(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # mxnet's grad state: whether a backward wrote ``grad`` since the flag was last
    # reset (the tape sets it; Trainer-style code reads and resets it)
    _fresh_grad = False

    @property
    def grad(self):
        """The gradient array ``attach_grad`` / ``mark_variables`` gave: torch's ``grad``
        slot, or a sparse array asked for with ``stype`` (``runtime/autograd_sparse.py``
        writes it from the dense gradient in that slot)."""
        sparse = self.__dict__.get("_ag_sparse_grad")
        return sparse if sparse is not None else _TORCH_GRAD.__get__(self)

    @grad.setter
    def grad(self, value):
        _TORCH_GRAD.__set__(self, value)

    def attach_grad(self, grad_req="write", stype=None):
        """Give the array a gradient buffer (zeros, read as ``grad``) that
        ``mx.autograd`` writes (``grad_req='write'``) or adds to (``'add'``); with
        ``stype`` ``'csr'`` / ``'row_sparse'`` a sparse one (the dense gradient cast)."""
        if stype in ("csr", "row_sparse"):
            # runtime/autograd_sparse.py's, registered by the sparse arrays' module
            SPARSE_ATTACH_GRAD[0](self, grad_req, stype)
            return
        check_stype(stype)
        with torch.no_grad():
            grad = _keep_ctx(torch.zeros_like(self.as_subclass(torch.Tensor)), self)
        _mx.mark_variable(self, grad, grad_req)

    def detach(self):
        """The same values, cut from the ``mx.autograd`` graph (a new array)."""
        return _keep_ctx(torch.Tensor.detach(self), self)

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        """``mx.autograd.backward`` of this array (with ``out_grad`` as its gradient)."""
        _mx.backward([self], None if out_grad is None else [out_grad], retain_graph,
                     train_mode)

    def copyto(self, other):
        """Copy into an NDArray (returns it) or onto a Context (returns a new array)."""
        if isinstance(other, Context):
            out = torch.empty(tuple(self.shape), dtype=torch_dtype(self),
                              device=other.torch_device).as_subclass(NDArray)
            with torch.no_grad():
                out.copy_(self)
            out._mx_ctx = other
            return out
        if getattr(other, "stype", "default") != "default":   # a sparse array: cast into it
            other[:] = self
            return other
        if tuple(other.shape) != tuple(self.shape):
            from compiler.errors import MXNetError
            raise MXNetError(f"copyto: shape mismatch {tuple(self.shape)} vs {tuple(other.shape)}")
        with torch.no_grad():
            other.copy_(self)
        return other

    def as_in_context(self, ctx: Context):
        if ctx == self.context:
            return self
        return self.copyto(ctx)

    def expand_dims(self, axis, inplace=False):
        """``self`` with a new axis of size 1 at ``axis``: a new array (operator
        ``expand_dims``) or, with ``inplace=True``, a view sharing ``self``'s memory."""
        if inplace:
            return self.unsqueeze(axis)
        return _mx._invoke("expand_dims", (self,), {"axis": axis})

    def as_nd_ndarray(self):
        return self

    def split_v2(self, indices_or_sections, axis=0, squeeze_axis=False):
        """Split into equal sections (an int) or at the given indices (a tuple), as
        mxnet's ``split_v2`` (operator ``_split_v2``)."""
        if isinstance(indices_or_sections, int):
            attrs = dict(indices=(), sections=indices_or_sections)
        elif isinstance(indices_or_sections, tuple):
            attrs = dict(indices=(0,) + tuple(indices_or_sections))
        else:
            raise ValueError("indices_or_sections must either int or tuple of ints")
        return _mx._invoke("_split_v2", (self,), dict(attrs, axis=axis,
                                                      squeeze_axis=squeeze_axis))

    def __bool__(self):
        """mxnet's truth value: False for an empty array, the element's for one element;
        a ValueError for more, as numpy's."""
        n = self.numel()
        if n == 0:
            return False
        if n > 1 and _mx.mxnet_caller():
            raise ValueError("The truth value of an NDArray with multiple elements is "
                             "ambiguous.")
        return torch.Tensor.__bool__(self)

    def to_dlpack_for_read(self):
        """A DLPack capsule of this array (``mx.nd.to_dlpack_for_read``)."""
        self.wait_to_read()
        return torch.utils.dlpack.to_dlpack(self.as_subclass(torch.Tensor))

    def to_dlpack_for_write(self):
        """A DLPack capsule of this array, for writing into it."""
        self.wait_to_read()
        return torch.utils.dlpack.to_dlpack(self.as_subclass(torch.Tensor))

    def all(self, *args, **kwargs):
        """torch's ``all`` for torch's and this project's callers; numpy's for a program's
        (mxnet's NDArray has no ``all``: ``np.all(array)`` calls this with ``axis`` and
        ``out``)."""
        if not _mx.program_caller():
            return torch.Tensor.all(self, *args, **kwargs)
        return np.all(self.asnumpy(), *args, **kwargs)

    def any(self, *args, **kwargs):
        """torch's ``any`` for torch's callers; numpy's for a program's, as :meth:`all`."""
        if not _mx.program_caller():
            return torch.Tensor.any(self, *args, **kwargs)
        return np.any(self.asnumpy(), *args, **kwargs)


for _name in _mx.OPERATOR_METHODS:
    if _name not in NDArray.__dict__:
        setattr(NDArray, _name, _mx._operator_method(_name, _name,
                                                    getattr(torch.Tensor, _name, None)))

for _name, _op in _mx.RECORDED_METHODS.items():
    if _name not in _mx.OPERATOR_METHODS:
        setattr(NDArray, _name, _mx._recorded_method(
            _name, _op, NDArray.__dict__.get(_name) or getattr(torch.Tensor, _name)))


# mxnet's one-record decoder, for ``NDArray.__setstate__``: ``runtime/ndarray_io.py``
# installs its ``decode_single_ndarray`` here (it imports this module, not the reverse)
RECORD_DECODER = [None]


def _keep_ctx(t: torch.Tensor, like) -> NDArray:
    out = t.as_subclass(NDArray)
    ctx = getattr(like, "_mx_ctx", None)
    if ctx is not None:
        out._mx_ctx = ctx
    return out


def plain(t):
    """``t`` as a plain ``torch.Tensor`` alias (same storage and version counter), for
    torch calls that need not pass through NDArray's ``__torch_function__``; anything
    else as it is."""
    if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
        return t.as_subclass(torch.Tensor)
    return t


def as_ndarray(t: torch.Tensor, ctx: Context = None) -> NDArray:
    out = t.as_subclass(NDArray) if not isinstance(t, NDArray) else t
    if ctx is not None:
        out._mx_ctx = ctx
    return out


def empty(shape, ctx: Context = None, dtype=torch.float32) -> NDArray:
    ctx = ctx or current_context()
    if isinstance(shape, int):
        shape = (shape,)
    return as_ndarray(torch.zeros(tuple(shape), dtype=to_torch_dtype(dtype),
                                  device=ctx.torch_device), ctx)
