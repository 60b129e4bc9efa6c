"""mxnet's pickled ``.states``, read without running the pickle's code.

``restricted_loads`` unpickles with a loader that maps
``mxnet.ndarray.ndarray.NDArray`` to a decoder of its raw bytes, bytearray /
``_codecs.encode`` to themselves and the registered optimizer / lr_scheduler
classes to ours, and refuses every other global. Used only when the caller
passes ``allow_pickle=True``.
"""
from __future__ import annotations

import io
import pickle
import struct

import numpy as np
import torch

from compiler.errors import MXNetError

from . import lr_scheduler as _lrs
from .ndarray import NDArray
from .optimizer_base import Optimizer

def _decode_raw_ndarray(raw: bytes):
    """mxnet's raw NDArray bytes (``MXNDArraySaveRawBytes``) -> NDArray."""
    try:
        from .ndarray_io import decode_single_ndarray  # written alongside; preferred
    except ImportError:
        decode_single_ndarray = _decode_single_ndarray_fallback
    arr = decode_single_ndarray(bytes(raw))
    if isinstance(arr, tuple):
        arr = arr[0]
    if isinstance(arr, np.ndarray):
        arr = torch.from_numpy(arr.copy())
    return arr.as_subclass(NDArray) if torch.is_tensor(arr) else arr


_MX_TYPE_FLAGS = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
                  5: np.int8, 6: np.int64}


def _decode_single_ndarray_fallback(raw: bytes):
    """Dense NDArray in mxnet's V2/V3 layout: magic, stype, shape, context, dtype, data."""
    buf = io.BytesIO(raw)

    def rd(fmt):
        size = struct.calcsize(fmt)
        chunk = buf.read(size)
        if len(chunk) != size:
            raise MXNetError("truncated mxnet NDArray bytes")
        return struct.unpack(fmt, chunk)

    magic, = rd("<I")
    if magic not in (0xF993FAC9, 0xF993FACA):
        raise MXNetError(f"unsupported mxnet NDArray magic {magic:#x}")
    stype, = rd("<i")
    if stype != 0:
        raise MXNetError("only dense (default storage) NDArrays can be loaded")
    ndim, = rd("<I")
    shape = rd(f"<{ndim}q") if ndim else ()
    if ndim == 0 and magic == 0xF993FAC9:
        return torch.empty(0)
    rd("<ii")   # context
    flag, = rd("<i")
    if flag not in _MX_TYPE_FLAGS:
        raise MXNetError(f"unsupported mxnet dtype flag {flag}")
    dt = np.dtype(_MX_TYPE_FLAGS[flag]).newbyteorder("<")
    count = int(np.prod(shape)) if shape else 1
    data = buf.read(count * dt.itemsize)
    if len(data) != count * dt.itemsize:
        raise MXNetError("truncated mxnet NDArray bytes")
    arr = np.frombuffer(data, dtype=dt).astype(dt.newbyteorder("="))
    return torch.from_numpy(arr.reshape(shape))


class _MXNDArrayShim:
    """Stands in for ``mxnet.ndarray.ndarray.NDArray`` while unpickling: ``NDArray(None)``
    then ``__setstate__({'handle': raw bytes})``; :func:`_restricted_loads` swaps it out."""

    def __init__(self, *args):
        self.value = None

    def __setstate__(self, state):
        if not isinstance(state, dict) or not isinstance(state.get("handle"),
                                                         (bytes, bytearray, type(None))):
            raise pickle.UnpicklingError("unexpected NDArray state in pickle")
        h = state.get("handle")
        self.value = None if h is None else _decode_raw_ndarray(h)


def _allowed_global(module, name):
    if module == "mxnet.ndarray.ndarray" and name == "NDArray":
        return _MXNDArrayShim
    # protocol-2 pickles (Python 2 naming, or written with protocol=2) say __builtin__
    if module in ("builtins", "__builtin__") and name in ("bytearray", "bytes"):
        return {"bytearray": bytearray, "bytes": bytes}[name]
    if module == "_codecs" and name == "encode":
        import codecs
        return codecs.encode
    if module in ("mxnet.optimizer.optimizer", "mxnet.optimizer") and \
            name.lower() in Optimizer.opt_registry:
        return Optimizer.opt_registry[name.lower()]
    if module == "mxnet.lr_scheduler" and name in _lrs.SCHEDULERS:
        return _lrs.SCHEDULERS[name]
    return None


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        obj = _allowed_global(module, name)
        if obj is None:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from an "
                                         f"optimizer state pickle")
        return obj


def _swap_shims(x):
    if isinstance(x, _MXNDArrayShim):
        return x.value
    if isinstance(x, tuple):
        return tuple(_swap_shims(v) for v in x)
    if isinstance(x, list):
        return [_swap_shims(v) for v in x]
    if isinstance(x, dict):
        return {k: _swap_shims(v) for k, v in x.items()}
    return x


def restricted_loads(data: bytes):
    """Unpickle ``data`` admitting only mxnet NDArrays, optimizers and lr schedulers."""
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as exc:
        if isinstance(exc, MXNetError):
            raise
        raise MXNetError(f"cannot load optimizer state pickle: {exc}") from None
    obj = _swap_shims(obj)
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], Optimizer):
        opt = obj[1]
        opt.__dict__.setdefault("_current_device", 0)
    return obj
