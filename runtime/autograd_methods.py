"""NDArray's own methods while ``mx.autograd`` records: arithmetic, in-place refusals
and indexing, as registry operators on the tape.

``runtime/ndarray.py`` sends them here through the recorder ``runtime/autograd_tape.py``
registers (``ndarray_mx.register_recorder``), which re-exports these functions.
"""
from __future__ import annotations

import numpy as np
import torch

from compiler.errors import MXNetError

from . import ndarray_mx


_BINARY = ndarray_mx.ARITHMETIC_OPS   # method: (array op, scalar op, reversed)


def binary(name, arr, other):
    """NDArray arithmetic while recording: mxnet's operator for the operand types."""
    array_op, scalar_op, reverse = _BINARY[name]
    if isinstance(other, torch.Tensor):
        args = (other, arr) if reverse else (arr, other)
        return ndarray_mx._invoke(array_op, args, {})
    return ndarray_mx._invoke(scalar_op, (arr,), {"scalar": float(other)})


def refuse_inplace(name, arr):
    """In-place arithmetic would change an array the tape still reads."""
    raise MXNetError(f"NDArray.{name} on an array of shape {tuple(arr.shape)} inside "
                     f"autograd.record(): in-place updates are not recorded; write "
                     f"'a = a {name[3:-2]} b' form (a new array) instead")


def getitem(arr, key):
    """``arr[key]`` while recording: basic indexing (integers, slices with steps,
    ``None``, ``...``) as ``slice`` + ``Reshape``; one index array (an NDArray or a
    list) on the first axis as ``take``; any other (advanced) index as a ``take`` of
    the flattened array at the positions numpy's indexing selects."""
    if isinstance(key, np.integer):
        key = int(key)          # a numpy integer is an integer index, not an index array
    if isinstance(key, (torch.Tensor, list)) or hasattr(key, "__array__"):
        idx = key if isinstance(key, torch.Tensor) else \
            ndarray_mx._invoke("_copy", (torch.as_tensor(key, dtype=torch.float32),), {})
        # negative indices count from the end, as numpy's and mxnet's indexing
        return ndarray_mx._invoke("take", (arr, idx), {"axis": 0, "mode": "wrap"})
    if not ndarray_mx.basic_key(key):
        return _advanced_getitem(arr, key)
    parts = _expand_key(arr, key)
    begin, end, step, shape = [], [], [], []
    d = 0
    for p in parts:
        if p is None:
            shape.append(1)
            continue
        size = arr.shape[d]
        if isinstance(p, slice):
            begin.append(p.start), end.append(p.stop), step.append(p.step)
            shape.append(len(range(*p.indices(size))))
        else:
            i = int(p) + size if int(p) < 0 else int(p)
            if not 0 <= i < size:
                raise IndexError(f"index {int(p)} is out of bounds for axis {d} with size "
                                 f"{size}")
            begin.append(i), end.append(i + 1), step.append(1)
        d += 1
    out = ndarray_mx._invoke("slice", (arr,), {"begin": tuple(begin), "end": tuple(end),
                                               "step": tuple(step)}) if begin else arr
    shape += list(arr.shape[d:])
    if tuple(shape) != tuple(out.shape):
        out = ndarray_mx._invoke("Reshape", (out,), {"shape": tuple(shape) or (1,)})
    return out


# positions travel as float32 through ``take``: exact below 2**24
_MAX_ADVANCED_ELEMENTS = 1 << 24


def _advanced_getitem(arr, key):
    """``arr[key]`` for an advanced index (lists and arrays on any axes, mixed with
    slices, integers and ``None``): numpy's indexing of the positions ``0 .. size - 1``
    says which elements, in which shape (mxnet's advanced indexing is numpy's); a
    ``take`` of the flattened array reads them, and its gradient adds the head
    gradient back at each position, repeats included."""
    n = arr.numel()
    if n > _MAX_ADVANCED_ELEMENTS:
        raise MXNetError(f"advanced indexing of an array of {n} elements (shape "
                         f"{tuple(arr.shape)}) inside autograd.record(): positions are "
                         f"exact below 2**24 here; index a reshaped part of the array")
    positions = ndarray_mx.positions(key, arr.shape)
    positions = positions.reshape(positions.shape or (1,))
    flat = ndarray_mx._invoke("Reshape", (arr,), {"shape": (-1,)})
    idx = ndarray_mx._invoke("_copy", (torch.as_tensor(positions, dtype=torch.float32),), {})
    return ndarray_mx._invoke("take", (flat, idx), {"axis": 0})


def _expand_key(arr, key):
    """The parts of a basic index, ``...`` spelled out as full slices."""
    parts = list(key) if isinstance(key, tuple) else [key]
    basic = (int, slice, type(None), type(Ellipsis), np.integer)
    if not all(isinstance(p, basic) and not isinstance(p, bool) for p in parts) or \
            sum(p is Ellipsis for p in parts) > 1:
        raise MXNetError(f"indexing an array of shape {tuple(arr.shape)} with {key!r} inside "
                         f"autograd.record(): integers, slices, None, one '...' and one "
                         f"index array on the first axis are recorded")
    real = sum(p is not None and p is not Ellipsis for p in parts)
    if real > arr.dim():
        raise IndexError(f"too many indices ({real}) for an array of shape "
                         f"{tuple(arr.shape)}")
    if Ellipsis in parts:
        i = parts.index(Ellipsis)
        parts[i:i + 1] = [slice(None)] * (arr.dim() - real)
    return parts
