"""Optimizer states in mxnet 1.9.1's ``.states`` format, written without pickle.

mxnet's ``Updater.get_states()`` is ``pickle.dumps(states)`` of a dict
``index -> state`` whose states are NDArrays, tuples of them, or None; an NDArray
pickles as ``NDArray(None)`` followed by ``__setstate__({'handle': bytearray(raw)})``
with ``raw`` its single-array save format. :func:`dumps` writes exactly those
protocol-2 opcodes from our arrays, so mxnet 1.9.1 loads the file with
``Module.load_optimizer_states``, and nothing in this process is ever unpickled
or imported to write it. Reading such a file here goes through the restricted
unpickler (``set_states(..., allow_pickle=True)``).

Chosen with ``SYMTRITON_STATES_FORMAT=mxnet``; the default stays symtriton's own
format, which loads without any pickle.
"""
from __future__ import annotations

import os
import struct

import torch

from compiler.errors import MXNetError

from .ndarray_io import encode_single_ndarray

FORMATS = ("symtriton", "mxnet")

_PROTO, _STOP, _NONE, _MARK = b"\x80\x02", b".", b"N", b"("
_EMPTY_DICT, _SETITEMS, _TUPLE, _TUPLE1, _TUPLE2 = b"}", b"u", b"t", b"\x85", b"\x86"
_REDUCE, _BUILD, _SETITEM = b"R", b"b", b"s"


def states_format() -> str:
    """``SYMTRITON_STATES_FORMAT`` (``symtriton`` by default, or ``mxnet``)."""
    fmt = os.environ.get("SYMTRITON_STATES_FORMAT", "symtriton").strip().lower() or "symtriton"
    if fmt not in FORMATS:
        raise MXNetError(f"SYMTRITON_STATES_FORMAT={fmt!r}: choose one of {list(FORMATS)}")
    return fmt


def _global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _unicode(text: str) -> bytes:
    data = text.encode("utf-8")
    return b"X" + struct.pack("<I", len(data)) + data


def _int(value: int) -> bytes:
    if 0 <= value < 256:
        return b"K" + struct.pack("<B", value)
    if 0 <= value < 65536:
        return b"M" + struct.pack("<H", value)
    if -2 ** 31 <= value < 2 ** 31:
        return b"J" + struct.pack("<i", value)
    raise MXNetError(f"optimizer state index {value} does not fit mxnet's format")


def _ndarray(t: torch.Tensor) -> bytes:
    raw = encode_single_ndarray(t.detach().to("cpu").contiguous())
    # bytearray pickles (protocol 2, Python 3) as _codecs.encode(latin-1 text, 'latin1')
    handle = (_global("__builtin__", "bytearray") + _global("_codecs", "encode")
              + _unicode(raw.decode("latin-1")) + _unicode("latin1") + _TUPLE2 + _REDUCE
              + _TUPLE1 + _REDUCE)
    return (_global("mxnet.ndarray.ndarray", "NDArray") + _NONE + _TUPLE1 + _REDUCE
            + _EMPTY_DICT + _unicode("handle") + handle + _SETITEM + _BUILD)


def _value(x) -> bytes:
    if x is None:
        return _NONE
    if isinstance(x, (tuple, list)):
        items = b"".join(_value(v) for v in x)
        if isinstance(x, tuple):
            return {0: b")", 1: items + _TUPLE1, 2: items + _TUPLE2}.get(
                len(x), _MARK + items + _TUPLE)
        return b"]" + (_MARK + items + b"e" if x else b"")
    if torch.is_tensor(x):
        return _ndarray(x)
    raise MXNetError(f"cannot write an optimizer state of type {type(x).__name__} in "
                     f"mxnet's format (NDArrays, tuples of them and None only)")


def dumps(states: dict) -> bytes:
    """mxnet 1.9.1's pickle of ``states`` (``index -> NDArray | tuple | None``)."""
    body = b""
    for key, value in states.items():
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise MXNetError(f"optimizer state keys must be int or str, not "
                             f"{type(key).__name__}")
        body += (_int(key) if isinstance(key, int) else _unicode(key)) + _value(value)
    return _PROTO + _EMPTY_DICT + (_MARK + body + _SETITEMS if body else b"") + _STOP
