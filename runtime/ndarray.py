"""``NDArray``: a ``torch.Tensor`` subclass with mxnet's array methods.

Every array the API hands out is one of these, so it can go straight into
torch code, and mxnet code can call ``asnumpy()`` on it.

Where mxnet and torch disagree on a name, torch wins, with two exceptions:
``size`` (mxnet: an int property; torch: a method) is an ``int`` that can
also be called like torch's method, and ``arr[:] = numpy_array`` is accepted.
``dtype`` stays a ``torch.dtype``; every function here that takes a dtype
accepts torch dtypes, numpy dtypes and strings alike (see :func:`to_torch_dtype`).
"""
from __future__ import annotations

import numpy as np
import torch

from .context import Context, cpu, current_context

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


class _Size(int):
    """mxnet's ``arr.size`` (an int) that also answers torch's ``arr.size(dim)``."""

    def __new__(cls, tensor):
        obj = int.__new__(cls, tensor.numel())
        obj._shape = torch.Tensor.size(tensor)
        return obj

    def __call__(self, dim=None):
        return self._shape if dim is None else self._shape[dim]


class NDArray(torch.Tensor):
    """A torch tensor that also speaks mxnet (``asnumpy``, ``context``, ``copyto`` ...)."""

    @property
    def context(self) -> Context:
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
    def np_dtype(self) -> np.dtype:
        """The dtype as numpy spells it (``dtype`` itself stays a torch dtype)."""
        return to_numpy_dtype(self.dtype)

    @property
    def shape(self):
        """The shape as a plain tuple, as mxnet returns it (prints ``(2, 3)``)."""
        return tuple(torch.Tensor.size(self))

    def __getitem__(self, key):
        out = super().__getitem__(key)
        # mxnet 1.x has no 0-d arrays: an element is a (1,) array (a view, as there)
        if isinstance(out, torch.Tensor) and out.dim() == 0:
            out = _keep_ctx(out.reshape(1), self)
        return out

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(torch.Tensor.size(self, 0)))

    def __repr__(self):
        """mxnet's layout: the values, then ``<NDArray 2x3 @cpu(0)>``."""
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self.asnumpy()}\n<{type(self).__name__} {shape} @{self.context}>"

    @property
    def T(self):
        return self.t() if self.dim() == 2 else self.permute(*reversed(range(self.dim())))

    def __setitem__(self, key, value):
        if isinstance(value, (np.ndarray, np.generic, list, tuple)):
            value = torch.as_tensor(np.asarray(value), dtype=self.dtype, device=self.device)
        elif isinstance(value, torch.Tensor) and value.device != self.device:
            value = value.to(self.device)
        super().__setitem__(key, value)

    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the array."""
        t = self.detach().cpu()
        if t.dtype == torch.bfloat16:
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
        if not copy and dt == self.dtype:
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

    def attach_grad(self, grad_req="write", stype=None):
        check_stype(stype)
        self.requires_grad_(True)

    def copyto(self, other):
        """Copy into an NDArray (returns it) or onto a Context (returns a new array)."""
        if isinstance(other, Context):
            out = torch.empty(tuple(self.shape), dtype=self.dtype,
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
        return self.unsqueeze(axis)

    def as_nd_ndarray(self):
        return self


def _keep_ctx(t: torch.Tensor, like) -> NDArray:
    out = t.as_subclass(NDArray)
    ctx = getattr(like, "_mx_ctx", None)
    if ctx is not None:
        out._mx_ctx = ctx
    return out


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
