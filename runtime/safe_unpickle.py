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

from compiler.errors import MXNetError

from . import lr_scheduler as _lrs
from .ndarray import NDArray
from .ndarray_io import decode_single_ndarray
from .optimizer_base import Optimizer

def _decode_raw_ndarray(raw: bytes):
    """mxnet's raw NDArray bytes (``MXNDArraySaveRawBytes``) -> NDArray."""
    return decode_single_ndarray(bytes(raw)).as_subclass(NDArray)


def _bytes_from(*args):
    """``bytes(...)`` / ``bytearray(...)`` as a pickle calls them: from bytes, or from a
    str and an encoding (protocol 2), never from an integer size (which would
    allocate whatever the file asks)."""
    if len(args) > 2 or (args and isinstance(args[0], int)) or \
            (args and not isinstance(args[0], (bytes, bytearray, str, list))):
        raise pickle.UnpicklingError("refusing bytes()/bytearray() of anything but bytes "
                                     "or text in an optimizer state pickle")
    if args and isinstance(args[0], list) and len(args[0]) > (1 << 24):
        raise pickle.UnpicklingError("bytes() of an implausibly long list")
    return bytes(*args)


def _bytearray_from(*args):
    return bytearray(_bytes_from(*args))


def _codecs_encode(obj, encoding="utf-8", errors="strict"):
    """``_codecs.encode`` as protocol-2 pickles of bytes use it: text to latin-1 bytes."""
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1", "utf-8", "utf8"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode(..., {str(encoding)[:20]!r}) "
                                     f"in an optimizer state pickle")
    return obj.encode(encoding, errors)


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
        return {"bytearray": _bytearray_from, "bytes": _bytes_from}[name]
    if module == "_codecs" and name == "encode":
        return _codecs_encode
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


_MEMO_OPS = ("PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET")


def _prescan(data: bytes):
    """Walk the opcodes before unpickling: a memo index is at most the number of
    opcodes seen so far (the C unpickler sizes its memo table by the largest index, so
    ``LONG_BINPUT 779706738`` alone would allocate gigabytes), and every length field
    fits the data (``pickletools`` raises on a short argument)."""
    import pickletools
    for n, (op, arg, _) in enumerate(pickletools.genops(data)):
        if op.name in _MEMO_OPS and (not isinstance(arg, int) or arg > n):
            raise pickle.UnpicklingError(f"memo index {arg} at opcode {n} is implausible "
                                         f"(a corrupt pickle)")


def restricted_loads(data: bytes):
    """Unpickle ``data`` admitting only mxnet NDArrays, optimizers and lr schedulers."""
    try:
        _prescan(data)
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except MXNetError:
        raise
    except RecursionError:
        raise MXNetError("cannot load optimizer state pickle: it is nested too "
                         "deeply") from None
    except MemoryError:
        raise MXNetError("cannot load optimizer state pickle: it asks for more memory "
                         "than there is (a corrupt length)") from None
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError,
            KeyError, IndexError, OverflowError, struct.error) as exc:
        raise MXNetError(f"cannot load optimizer state pickle: "
                         f"{type(exc).__name__}: {str(exc)[:200]}") from None
    obj = _swap_shims(obj)
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], Optimizer):
        opt = obj[1]
        opt.__dict__.setdefault("_current_device", 0)
    return obj
