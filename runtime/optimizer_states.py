"""symtriton's optimizer state file: loading it never executes code.

A magic line, a JSON header (state structure, dtypes, shapes, offsets, and the
optimizer's plain attributes when saved with ``dump_optimizer=True``), then
the raw little-endian array bytes. ``Updater.get_states`` / ``set_states`` use
:func:`encode_states` / :func:`decode_states`.
"""
from __future__ import annotations

import json
import logging
import math
import struct

import numpy as np
import torch

from compiler.errors import MXNetError

from . import lr_scheduler as _lrs
from .ndarray import NDArray
from .optimizer_base import Optimizer
from .ndarray import torch_dtype

log = logging.getLogger("symtriton")

MAGIC = b"SYMTRITON-OPTIMIZER-STATES\n"
_FORMAT_VERSION = 1
_DTYPES = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
           "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
           "int32": torch.int32, "int64": torch.int64}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}


def encode_states(states, optimizer=None) -> bytes:
    """``states`` (index -> arrays, tuples, lists, numbers or None), and
    ``optimizer``'s settings if given, in symtriton's state file format."""
    arrays, blobs = [], []
    offset = 0

    def tree(x):
        nonlocal offset
        if x is None:
            return None
        if isinstance(x, (tuple, list)):
            return {"tuple" if isinstance(x, tuple) else "list": [tree(v) for v in x]}
        if torch.is_tensor(x):
            t = x.detach().to("cpu").contiguous()
            if torch_dtype(t) not in _DTYPE_NAMES:
                raise MXNetError(f"cannot save optimizer state of dtype {torch_dtype(t)}")
            data = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            arrays.append({"dtype": _DTYPE_NAMES[torch_dtype(t)], "shape": list(t.shape),
                           "offset": offset, "nbytes": len(data)})
            blobs.append(data)
            offset += len(data)
            return {"array": len(arrays) - 1}
        if isinstance(x, (int, float, bool, str)):
            return {"value": x}
        raise MXNetError(f"cannot save optimizer state of type {type(x).__name__}")

    entries = [[_enc_key(k), tree(v)] for k, v in states.items()]
    header = {"format": _FORMAT_VERSION, "byteorder": "little", "states": entries,
              "arrays": arrays,
              "optimizer": _encode_optimizer(optimizer) if optimizer is not None else None}
    hjson = json.dumps(header, sort_keys=True).encode()
    return MAGIC + struct.pack("<IQ", _FORMAT_VERSION, len(hjson)) + hjson + b"".join(blobs)


def _enc_key(k):
    if isinstance(k, bool) or not isinstance(k, (int, str)):
        raise MXNetError(f"optimizer state keys must be int or str, not {type(k).__name__}")
    return {"int": k} if isinstance(k, int) else {"str": k}


def _dec_key(k):
    if not isinstance(k, dict) or len(k) != 1:
        raise MXNetError("corrupt optimizer state key")
    if "int" in k and isinstance(k["int"], int):
        return k["int"]
    if "str" in k and isinstance(k["str"], str):
        return k["str"]
    raise MXNetError("corrupt optimizer state key")


def _encode_value(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, tuple):
        return {"__tuple__": [_encode_value(x) for x in v]}
    if isinstance(v, list):
        return [_encode_value(x) for x in v]
    if isinstance(v, dict):
        return {"__dict__": [[_encode_value(k), _encode_value(x)] for k, x in v.items()]}
    if isinstance(v, _lrs.LRScheduler) and type(v).__name__ in _lrs.SCHEDULERS:
        return {"__scheduler__": type(v).__name__,
                "attrs": {k: _encode_value(x) for k, x in vars(v).items()}}
    raise TypeError(type(v).__name__)


def _decode_value(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_decode_value(x) for x in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_decode_value(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {_hashable(_decode_value(k)): _decode_value(x) for k, x in v["__dict__"]}
        if "__scheduler__" in v:
            cls = _lrs.SCHEDULERS.get(v["__scheduler__"])
            if cls is None:
                raise MXNetError(f"unknown lr scheduler {v['__scheduler__']!r} in state file")
            obj = cls.__new__(cls)
            for k, x in v["attrs"].items():
                setattr(obj, str(k), _decode_value(x))
            return obj
    raise MXNetError("corrupt optimizer description in state file")


def _hashable(k):
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


def _encode_optimizer(opt):
    attrs = {}
    for k, v in vars(opt).items():
        if k in ("param_dict", "_index_update_count"):
            continue
        try:
            attrs[k] = _encode_value(v)
        except TypeError as exc:
            log.warning("symtriton: optimizer attribute %s (%s) is not saved", k, exc)
    name = type(opt).__name__.lower()
    if Optimizer.opt_registry.get(name) is not type(opt):
        raise MXNetError(f"optimizer class {type(opt).__name__} is not registered; register it "
                         f"to save it with dump_optimizer=True")
    return {"class": name, "attrs": attrs}


def _fits(default, value) -> bool:
    """Whether a saved attribute ``value`` can stand where the optimizer has ``default``."""
    if default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, (dict, str, tuple, list)):
        return isinstance(value, type(default)) or (
            isinstance(default, (tuple, list)) and isinstance(value, (tuple, list)))
    return True


def _decode_optimizer(spec):
    """The optimizer a state file describes: a default instance of its registered
    class with the saved attributes, each one known to that class and of a fitting
    type (an unknown or mistyped attribute is refused, not set)."""
    cls = Optimizer.opt_registry.get(str(spec.get("class", "")).lower())
    if cls is None:
        raise MXNetError(f"optimizer {spec.get('class')!r} in the state file is not registered")
    attrs = spec.get("attrs", {})
    if not isinstance(attrs, dict):
        raise MXNetError("the optimizer's attributes in the state file are not an object")
    state = {k: v for k, v in vars(cls()).items()
             if k not in ("param_dict", "_index_update_count")}   # as encode leaves them
    for k, v in attrs.items():
        if k not in state:
            raise MXNetError(f"the state file sets attribute {str(k)[:40]!r}, which "
                             f"{cls.__name__} does not have")
        value = _decode_value(v)
        if not _fits(state[k], value):
            raise MXNetError(f"the state file sets {cls.__name__}.{k} to a "
                             f"{type(value).__name__}, where it holds a "
                             f"{type(state[k]).__name__}")
        state[k] = value
    obj = cls.__new__(cls)
    obj.__setstate__(state)
    return obj


_MAX_NDIM = 32
_MAX_DEPTH = 32      # nesting of one state (tuples of tuples ...); mxnet's are 2 deep


def _shape_of(spec, i):
    """The validated shape of array ``i`` of a header: non-negative ints, at most 32."""
    shape = spec.get("shape")
    if not isinstance(shape, list) or len(shape) > _MAX_NDIM or \
            any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape):
        raise MXNetError(f"array {i} has an invalid shape {str(shape)[:80]} (a list of at "
                         f"most {_MAX_NDIM} non-negative integers is expected)")
    return shape


def _array_from(spec, i, body):
    """Array ``i`` of the header, its size checked against the body before any copy."""
    if not isinstance(spec, dict):
        raise MXNetError(f"array {i} of the header is not an object")
    dtype = _DTYPES.get(spec.get("dtype"))
    if dtype is None:
        raise MXNetError(f"array {i} has unknown dtype {str(spec.get('dtype'))[:40]!r}")
    shape = _shape_of(spec, i)
    off, nbytes = spec.get("offset"), spec.get("nbytes")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (off, nbytes)):
        raise MXNetError(f"array {i} needs integer 'offset' and 'nbytes'")
    itemsize = torch.empty((), dtype=dtype).element_size()
    if math.prod(d for d in shape if d) * itemsize >= 2 ** 63:
        raise MXNetError(f"array {i} has shape {tuple(shape)}, too large for any array "
                         f"(its strides overflow 64 bits)")
    need = math.prod(shape) * itemsize     # Python ints: no wrap-around
    if nbytes != need:
        raise MXNetError(f"array {i} of shape {tuple(shape)} and dtype {spec['dtype']} needs "
                         f"{need} bytes, its header says {nbytes}")
    if off < 0 or off + nbytes > len(body):
        raise MXNetError(f"array {i} (bytes {off}..{off + nbytes}) lies outside the "
                         f"{len(body)} bytes of data: the file is cut short or corrupt")
    if not nbytes:
        return torch.empty(shape, dtype=dtype).as_subclass(NDArray)
    raw = bytearray(body[off:off + nbytes])
    return torch.frombuffer(raw, dtype=dtype).reshape(shape).as_subclass(NDArray)


def _state_tree(x, tensors, depth=0):
    if x is None:
        return None
    if depth > _MAX_DEPTH:
        raise MXNetError(f"a state is nested more than {_MAX_DEPTH} levels deep")
    if not isinstance(x, dict) or len(x) != 1:
        raise MXNetError("corrupt optimizer state tree (an entry is not a one-key object)")
    (kind, v), = x.items()
    if kind == "array":
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < len(tensors):
            raise MXNetError(f"a state refers to array {str(v)[:20]}, the file has "
                             f"{len(tensors)}")
        return tensors[v]
    if kind in ("tuple", "list") and isinstance(v, list):
        items = [_state_tree(e, tensors, depth + 1) for e in v]
        return tuple(items) if kind == "tuple" else items
    if kind == "value" and (v is None or isinstance(v, (bool, int, float, str))):
        return v
    raise MXNetError(f"corrupt optimizer state tree (unknown entry {kind[:20]!r})")


def decode_states(data: bytes):
    """(states, optimizer or None) from :func:`encode_states` bytes.

    Every size in the header is checked against the bytes that follow it before
    an array is made, so a corrupt header cannot ask for memory the file does not
    hold; any malformation is an :class:`MXNetError` saying what is wrong.
    """
    data = bytes(data)
    if not data.startswith(MAGIC):
        raise MXNetError("not a symtriton optimizer state file (bad magic line)")
    pos = len(MAGIC)
    if len(data) < pos + 12:
        raise MXNetError("optimizer state file is cut short (no header)")
    version, hlen = struct.unpack_from("<IQ", data, pos)
    pos += 12
    if version != _FORMAT_VERSION:
        raise MXNetError(f"optimizer state format version {version} is not supported "
                         f"(this symtriton reads version {_FORMAT_VERSION})")
    if pos + hlen > len(data):
        raise MXNetError(f"optimizer state header of {hlen} bytes runs past the end of "
                         f"the file ({len(data) - pos} bytes left)")
    try:
        header = json.loads(data[pos:pos + hlen].decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MXNetError(f"optimizer state header is not UTF-8 ({exc.reason})") from None
    except RecursionError:
        raise MXNetError("optimizer state header is nested too deeply") from None
    except ValueError as exc:
        raise MXNetError(f"optimizer state header is not valid JSON ({exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list) or \
            not isinstance(header.get("states"), list):
        raise MXNetError("optimizer state header needs an 'arrays' list and a 'states' list")
    body = memoryview(data)[pos + hlen:]
    tensors = [_array_from(a, i, body) for i, a in enumerate(header["arrays"])]
    states = {}
    for entry in header["states"]:
        if not isinstance(entry, list) or len(entry) != 2:
            raise MXNetError("corrupt optimizer state entry (expected [key, state])")
        states[_dec_key(entry[0])] = _state_tree(entry[1], tensors)
    spec = header.get("optimizer")
    if spec is None:
        return states, None
    if not isinstance(spec, dict):
        raise MXNetError("corrupt optimizer description in state file")
    try:
        return states, _decode_optimizer(spec)
    except RecursionError:
        raise MXNetError("optimizer description in state file is nested too deeply") from None
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        if isinstance(exc, MXNetError):
            raise
        raise MXNetError(f"corrupt optimizer description in state file ({exc})") from None
