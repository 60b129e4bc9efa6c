"""``mxnet.ndarray.ndarray``: the NDArray class and the functions that make arrays.

:class:`NDArray` is :class:`runtime.ndarray.NDArray` (a ``torch.Tensor`` subclass with
mxnet's legacy NDArray semantics). The creation functions follow mxnet 1.9.1's
names, argument names and defaults (``array`` of a numpy array or list is float32
unless ``dtype`` says otherwise). Every ``dtype`` argument accepts numpy dtypes,
torch dtypes and strings. ``mx.nd`` (this package's ``__init__``) gathers them with
the operators.
"""
from __future__ import annotations

import builtins
import numbers
import time
import warnings

import numpy as np
import torch

from compiler.errors import MXNetError
from compiler.shape_semantics import is_np_shape
from runtime import launcher as _launcher
from runtime import ndarray_io as _io
from runtime.context import Context, current_context, cpu  # noqa: F401
from runtime.imperative import invoke
from runtime.ndarray import (NDArray, as_ndarray, check_stype, to_numpy_dtype,  # noqa: F401
                             to_torch_dtype)
from runtime.ndarray import torch_dtype

from . import sparse

__all__ = ["NDArray", "array", "zeros", "ones", "empty", "full", "arange", "concatenate",
           "waitall", "save", "load", "load_frombuffer", "from_numpy", "from_dlpack",
           "to_dlpack_for_read", "to_dlpack_for_write", "onehot_encode"]

# mxnet's module keeps Python's ``slice`` under this name (its own ``slice`` is the operator)
py_slice = builtins.slice

# mxnet's storage type ids, as its C API numbers them
_STORAGE_TYPE_UNDEFINED = -1
_STORAGE_TYPE_DEFAULT = 0
_STORAGE_TYPE_ROW_SPARSE = 1
_STORAGE_TYPE_CSR = 2
_STORAGE_TYPE_STR_TO_ID = {"undefined": _STORAGE_TYPE_UNDEFINED,
                           "default": _STORAGE_TYPE_DEFAULT,
                           "row_sparse": _STORAGE_TYPE_ROW_SPARSE,
                           "csr": _STORAGE_TYPE_CSR}
_STORAGE_TYPE_ID_TO_STR = {v: k for k, v in _STORAGE_TYPE_STR_TO_ID.items()}

# ------------------------------------------------------------------ helpers
def _ctx(ctx) -> Context:
    if ctx is None:
        return current_context()
    return ctx if isinstance(ctx, Context) else Context(ctx)


def _shape(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _out(result: NDArray, out):
    if out is None:
        return result
    out[:] = result
    return out


# ----------------------------------------------------------------- creation
def empty(shape, ctx=None, dtype=None, stype=None):
    """An array of the given shape (contents zero here; mxnet leaves them undefined).
    Zero-size and ``()`` shapes are taken under either shape semantics, as mxnet."""
    if stype in ("csr", "row_sparse"):
        return sparse.zeros(stype, shape, ctx=ctx, dtype=dtype)
    check_stype(stype)
    return _full(None, shape, 0, ctx, dtype, None)      # no operator in mxnet: not profiled


def _known_shape(shape, what):
    """``shape``, refused where legacy shape semantics reads it as unknown (a 0 dim,
    or ``()``), as mxnet's ``zeros`` / ``ones`` operators refuse it."""
    dims = _shape(shape)
    if not is_np_shape() and (dims == () or 0 in dims):
        raise MXNetError(
            f"{what}: shape {dims} has an unknown dim: under mxnet's legacy shape "
            f"semantics () and 0 mean 'unknown'. Give every dim, or make scalar and "
            f"zero-size arrays under NumPy shape semantics (with mx.np_shape(): ...)")
    return dims


def zeros(shape, ctx=None, dtype=None, stype=None, **kwargs):
    """An array of zeros (``out=``: written into that array, which is returned).

    Raises
    ------
    MXNetError
        For a ``()`` or zero-size shape under legacy shape semantics (as mxnet).
    """
    if stype in ("csr", "row_sparse"):
        return sparse.zeros(stype, shape, ctx=ctx, dtype=dtype)
    check_stype(stype)
    return _full("_zeros", _known_shape(shape, "zeros"), 0, ctx, dtype, kwargs.get("out"))


def ones(shape, ctx=None, dtype=None, **kwargs):
    """An array of ones (``out=``: written into that array, which is returned).

    Raises
    ------
    MXNetError
        For a ``()`` or zero-size shape under legacy shape semantics (as mxnet).
    """
    check_stype(kwargs.pop("stype", None))
    return _full("_ones", _known_shape(shape, "ones"), 1, ctx, dtype, kwargs.get("out"))


def full(shape, val, ctx=None, dtype=np.float32, out=None):
    """An array of ``val`` (``out=``: ``val`` written into that array, returned)."""
    return _full("_full", shape, val, ctx, dtype, out)


def _full(op_name, shape, val, ctx, dtype, out):
    """``full``, filed by ``mx.profiler`` under mxnet's operator ``op_name`` (``_zeros``,
    ``_ones``, ``_full``; None: not filed)."""
    start = op_name is not None and _launcher.PROFILING and time.perf_counter_ns()
    if out is not None:
        out[:] = val
    else:
        c = _ctx(ctx)
        out = as_ndarray(torch.full(_shape(shape), val, dtype=to_torch_dtype(dtype),
                                    device=c.torch_device), c)
    if start:
        _launcher.record_operator(op_name, start)
    return out


def array(source_array, ctx=None, dtype=None):
    """An NDArray copied from an array-like (float32 unless ``dtype`` is given,
    except that an NDArray / tensor source keeps its dtype, as in mxnet)."""
    if isinstance(source_array, sparse.BaseSparseNDArray) or sparse._is_scipy_csr(source_array):
        return sparse.array(source_array, ctx=ctx, dtype=dtype)
    c = _ctx(ctx)
    if isinstance(source_array, torch.Tensor):
        dt = torch_dtype(source_array) if dtype is None else to_torch_dtype(dtype)
        t = source_array.detach().to(device=c.torch_device, dtype=dt).clone()
        return as_ndarray(t, c)
    # numpy has no bfloat16: such arrays are made from float32 values, then rounded
    want = to_torch_dtype(dtype) if dtype is not None else torch.float32
    np_dt = np.dtype(np.float32) if want == torch.bfloat16 else to_numpy_dtype(want)
    try:
        src = np.asarray(source_array, dtype=np_dt)
    except (TypeError, ValueError):
        raise TypeError("source_array must be array like object") from None
    t = torch.from_numpy(np.array(src, order="C", copy=True))
    return as_ndarray(t.to(device=c.torch_device, dtype=want), c)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None,
           dtype=np.float32):
    """``start, start + step, ...`` below ``stop`` (``arange(n)``: from 0), each value
    ``repeat`` times: operator ``_arange``, which computes in ``dtype`` as mxnet does
    (start and step cast to it first: ``arange(1.3, 10, 1.3, dtype='int32')`` counts by
    1 from 1; float32 sums round as float32's)."""
    if infer_range is not None:         # as mxnet: warned about, then ignored
        warnings.warn("`infer_range` argument has been deprecated", DeprecationWarning)
    return invoke("_arange", (), dict(start=start, stop=stop, step=step, repeat=repeat,
                                      ctx=ctx, dtype=dtype if dtype is not None else
                                      "float32"))


def concatenate(arrays, axis=0, always_copy=True):
    """Deprecated mxnet helper: join ``arrays`` along ``axis`` (operator ``Concat``)."""
    if not always_copy and len(arrays) == 1:
        return arrays[0]
    return invoke("Concat", tuple(arrays), dict(dim=axis))


def from_numpy(ndarray, zero_copy=True, array_cls=None):
    """An NDArray over a C-contiguous numpy array (sharing its memory when
    ``zero_copy``, which makes the numpy array read-only, as mxnet does; a copy
    otherwise)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("Only c-contiguous arrays are supported for zero-copy")
    t = torch.from_numpy(ndarray if zero_copy else ndarray.copy())
    if zero_copy:
        # as mxnet: the memory now belongs to the NDArray, so numpy may no longer write it
        ndarray.flags.writeable = False
    return as_ndarray(t, cpu(0))


def from_dlpack(dlpack):
    """An NDArray sharing the memory of a DLPack capsule (or of an object that
    has ``__dlpack__``)."""
    return as_ndarray(torch.utils.dlpack.from_dlpack(dlpack))


def to_dlpack_for_read(data):
    """A DLPack capsule of ``data`` (waits for pending writes first)."""
    return data.to_dlpack_for_read()


def to_dlpack_for_write(data):
    """A DLPack capsule of ``data`` for writing into it."""
    return data.to_dlpack_for_write()


def onehot_encode(indices, out):
    """Deprecated mxnet helper: one-hot rows of ``indices`` written into ``out``
    (its second dim is the depth): operator ``one_hot``."""
    depth = int(out.shape[1])
    return invoke("one_hot", (indices,), dict(depth=depth, dtype=out.dtype, out=out))


def waitall():
    """Wait for all pending work (a CUDA synchronize when a GPU is present)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# ------------------------------------------------------------------- files
def save(fname, data):
    """Save an NDArray, a list of them or a dict ``str -> NDArray`` in mxnet's
    binary format (readable by ``mxnet.nd.load``).  The write is atomic."""
    arrays = (torch.Tensor, np.ndarray, sparse.BaseSparseNDArray)
    if isinstance(data, dict):
        bad = [k for k, v in data.items() if not isinstance(v, arrays)]
    elif isinstance(data, (list, tuple)):
        bad = [i for i, v in enumerate(data) if not isinstance(v, arrays)]
    else:
        bad = []
    if bad:
        raise TypeError('save only accept dict str->NDArray or list of NDArray')
    _io.save(fname, data)


def load(fname, ctx=None):
    """Load a file written by ``save`` (here or in mxnet): a list, or a dict
    when the arrays were saved with names.  Arrays are placed on ``cpu(0)``
    unless ``ctx`` is given."""
    return _io.load(fname, ctx)


def load_frombuffer(buf, ctx=None):
    if not isinstance(buf, (bytes, bytearray, memoryview, str)):
        raise TypeError('buf required to be a string or bytes')
    if isinstance(buf, str):
        buf = buf.encode("latin-1")
    return _io.loads(bytes(buf), ctx)


