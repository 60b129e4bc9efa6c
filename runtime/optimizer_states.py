"""symtriton's optimizer state file: loading it never executes code.

A magic line, a JSON header (state structure, dtypes, shapes, offsets, and the
optimizer's plain attributes when saved with ``dump_optimizer=True``), then
the raw little-endian array bytes. ``Updater.get_states`` / ``set_states`` use
:func:`encode_states` / :func:`decode_states`.
"""
from __future__ import annotations

import json
import logging
import struct

import numpy as np
import torch

from compiler.errors import MXNetError

from . import lr_scheduler as _lrs
from .ndarray import NDArray
from .optimizer_base import Optimizer

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
            if t.dtype not in _DTYPE_NAMES:
                raise MXNetError(f"cannot save optimizer state of dtype {t.dtype}")
            data = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
            arrays.append({"dtype": _DTYPE_NAMES[t.dtype], "shape": list(t.shape),
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


def _decode_optimizer(spec):
    cls = Optimizer.opt_registry.get(str(spec.get("class", "")).lower())
    if cls is None:
        raise MXNetError(f"optimizer {spec.get('class')!r} in the state file is not registered")
    obj = cls.__new__(cls)
    obj.__setstate__({str(k): _decode_value(v) for k, v in spec.get("attrs", {}).items()})
    return obj


def decode_states(data: bytes):
    """(states, optimizer or None) from :func:`encode_states` bytes."""
    try:
        pos = len(MAGIC)
        version, hlen = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if version != _FORMAT_VERSION:
            raise MXNetError(f"optimizer state format version {version} is not supported")
        header = json.loads(data[pos:pos + hlen].decode("utf-8"))
        body = memoryview(data)[pos + hlen:]
        tensors = []
        for a in header["arrays"]:
            dtype = _DTYPES[a["dtype"]]
            shape = [int(s) for s in a["shape"]]
            off, nbytes = int(a["offset"]), int(a["nbytes"])
            numel = int(np.prod(shape)) if shape else 1
            itemsize = torch.empty((), dtype=dtype).element_size()
            if nbytes != numel * itemsize or off < 0 or off + nbytes > len(body):
                raise MXNetError("optimizer state file is truncated or corrupt")
            raw = bytearray(body[off:off + nbytes])
            t = (torch.frombuffer(raw, dtype=dtype) if nbytes else
                 torch.empty(0, dtype=dtype)).reshape(shape).clone()
            tensors.append(t.as_subclass(NDArray))

        def tree(x):
            if x is None:
                return None
            if "array" in x:
                return tensors[int(x["array"])]
            if "tuple" in x:
                return tuple(tree(v) for v in x["tuple"])
            if "list" in x:
                return [tree(v) for v in x["list"]]
            if "value" in x:
                return x["value"]
            raise MXNetError("corrupt optimizer state tree")

        states = {_dec_key(k): tree(v) for k, v in header["states"]}
        opt = _decode_optimizer(header["optimizer"]) if header.get("optimizer") else None
        return states, opt
    except (KeyError, ValueError, TypeError, struct.error, IndexError) as exc:
        if isinstance(exc, MXNetError):
            raise
        raise MXNetError(f"optimizer state file is corrupt ({exc})") from None
