"""mxnet's binary NDArray-list format (``mx.nd.save`` / ``.params`` files).

The layout, little-endian, as mxnet 1.9.1 writes it::

    file   := u64 0x112  u64 0  u64 n  array*n  u64 k  key*k      (k is 0 or n)
    key    := u64 len  bytes[len]                                 (utf-8)
    array  := u32 magic  i32 stype  shape  [i32 dev_type  i32 dev_id  i32 type_flag  data]
    shape  := u32 ndim  i64 dim*ndim

``magic`` is ``0xF993FAC9`` (V2) or ``0xF993FACA`` (V3, numpy shape semantics:
``ndim`` 0 is a scalar, -1 an unknown shape).  Under V2 ``ndim`` 0 marks a
"none" array and nothing follows the shape.  Older files are read too: V1
(``0xF993FAC8``, no stype field) and the legacy layout whose first word is
``ndim`` followed by ``u32`` dims.  Sparse records (``stype`` 1 row_sparse,
2 csr) put the storage (values) shape before ``shape``, and after ``type_flag``
one ``i32 aux_type_flag  shape`` per aux array, then the values, then each aux
array (csr: indptr, indices; row_sparse: indices).  A pickled mxnet NDArray's
``{'handle': raw}`` state is one ``array`` record on its own: see
:func:`decode_single_ndarray`.

The shape semantics of the thread (``compiler/shape_semantics.py``) picks the
magic, as in mxnet: V2 under legacy semantics, V3 under NumPy semantics (dense
arrays only, ``()`` a scalar). A file is read under the semantics it was written
in, else refused with mxnet's message; legacy semantics cannot write a 0-d array
(mxnet would write an empty record, losing its value), and says so. Loaded arrays
live on ``cpu(0)`` (or the ``ctx`` passed in) whatever context they were saved from.
"""
from __future__ import annotations

import math
import os
import struct

import numpy as np
import torch

from compiler.artifacts.atomic import atomic_write_bytes
from compiler.errors import MXNetError
from compiler.shape_semantics import is_np_shape

from . import ndarray as _ndarray
from .context import Context, cpu
from .ndarray import NDArray, as_ndarray, to_numpy_dtype
from .ndarray import torch_dtype

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA

# mshadow type flags
TYPE_FLAGS = {
    0: np.dtype("float32"), 1: np.dtype("float64"), 2: np.dtype("float16"),
    3: np.dtype("uint8"), 4: np.dtype("int32"), 5: np.dtype("int8"),
    6: np.dtype("int64"), 7: np.dtype("bool"), 8: np.dtype("int16"),
    9: np.dtype("uint16"), 10: np.dtype("uint32"), 11: np.dtype("uint64"),
}
BFLOAT16_FLAG = 12
_FLAG_OF = {v: k for k, v in TYPE_FLAGS.items()}


class _Corrupt(Exception):
    """Internal: the bytes do not follow the format (reason in the message)."""


class _OtherSemantics(Exception):
    """Internal: a record written under the other shape semantics (mxnet's message)."""


class _Reader:
    def __init__(self, buf):
        self.buf = memoryview(buf)
        self.pos = 0

    def take(self, n: int, what: str):
        if n < 0 or self.pos + n > len(self.buf):
            raise _Corrupt(f"truncated while reading {what} at byte {self.pos} "
                           f"(needs {n} bytes, {len(self.buf) - self.pos} left: the file "
                           f"is cut short or its header is corrupt)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def u32(self, what):
        return self.unpack("I", what)[0]

    def i32(self, what):
        return self.unpack("i", what)[0]

    def u64(self, what):
        return self.unpack("Q", what)[0]


# ----------------------------------------------------------------- decoding
def _read_shape(r: _Reader, magic: int):
    if magic in (V1_MAGIC, V2_MAGIC, V3_MAGIC):
        ndim = r.i32("shape ndim")
        if ndim < -1 or ndim > 32:
            raise _Corrupt(f"implausible ndim {ndim}")
        return None if ndim == -1 else r.unpack(f"{ndim}q", "shape dims") if ndim else ()
    ndim = magic  # legacy layout: the first word was ndim, dims are u32
    if ndim > 32:
        raise _Corrupt(f"unknown array magic 0x{magic:08X}")
    return r.unpack(f"{ndim}I", "legacy shape dims")


def _check_semantics(magic: int):
    """mxnet's rule: V3 records load under NumPy shape semantics only, others under
    legacy semantics only (the messages are mxnet's; the file is named by the caller)."""
    if magic == V3_MAGIC and not is_np_shape():
        raise _OtherSemantics(
            "ndarray was saved in np shape semantics, must be loaded in the same semantics. "
            "Please turn on np shape semantics in Python using `with np_shape(True)` or "
            "decorator `use_np_shape` to scope the code of loading the ndarray.")
    if magic != V3_MAGIC and is_np_shape():
        raise _OtherSemantics(
            "ndarray was not saved in np shape semantics, but being loaded in np shape "
            "semantics. Please turn off np shape semantics in Python using "
            "`with np_shape(False)` to scope the code of loading the ndarray.")


def _read_array(r: _Reader, ctx: Context):
    magic = r.u32("array magic")
    _check_semantics(magic)
    if magic in (V2_MAGIC, V3_MAGIC):
        stype = r.i32("storage type")
        if stype in _SPARSE_NAUX:
            return _read_sparse(r, magic, stype, ctx)
        if stype != 0:
            raise _Corrupt(f"unknown storage type {stype} (0 dense, 1 row_sparse, 2 csr)")
    shape = _read_shape(r, magic)
    if shape is None or (shape == () and magic != V3_MAGIC):
        return as_ndarray(torch.empty((0,)), ctx)  # mxnet's "none" array
    if any(d < 0 for d in shape):
        raise _Corrupt(f"negative dimension in shape {shape}")
    r.i32("context device type")
    r.i32("context device id")
    flag = r.i32("type flag")
    # Python ints: numpy's int64 product wraps (2**62 x 4 is 0). ``take`` checks the
    # byte count against what the file holds before anything is allocated.
    count = math.prod(shape)
    itemsize = 2 if flag == BFLOAT16_FLAG else getattr(TYPE_FLAGS.get(flag), "itemsize", 1)
    if math.prod(d for d in shape if d) * itemsize >= 2 ** 63:
        raise _Corrupt(f"shape {tuple(shape)} is too large for any array (its strides "
                       f"overflow 64 bits)")
    if flag == BFLOAT16_FLAG:
        raw = r.take(2 * count, f"bfloat16 data of shape {tuple(shape)}")
        t = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16) if count else \
            torch.empty((0,), dtype=torch.bfloat16)
        return as_ndarray(t.reshape(shape).to(ctx.torch_device), ctx)
    if flag not in TYPE_FLAGS:
        raise _Corrupt(f"unknown type flag {flag}")
    dt = TYPE_FLAGS[flag]
    raw = r.take(dt.itemsize * count, f"{dt} data of shape {tuple(shape)}")
    arr = np.frombuffer(raw, dtype=dt.newbyteorder("<"), count=count).astype(dt).reshape(shape)
    return as_ndarray(torch.from_numpy(arr.copy()).to(ctx.torch_device), ctx)


_SPARSE_NAUX = {1: 1, 2: 2}     # row_sparse: indices; csr: indptr, indices


def _read_blob(r: _Reader, flag: int, shape, what: str) -> torch.Tensor:
    if flag not in TYPE_FLAGS:
        raise _Corrupt(f"unknown type flag {flag} for {what}")
    if any(d < 0 for d in shape):
        raise _Corrupt(f"negative dimension in {what} shape {tuple(shape)}")
    dt, count = TYPE_FLAGS[flag], math.prod(shape)
    raw = r.take(dt.itemsize * count, f"{dt} {what} of shape {tuple(shape)}")
    arr = np.frombuffer(raw, dtype=dt.newbyteorder("<"), count=count).astype(dt)
    return torch.from_numpy(arr.reshape(shape).copy())


def _read_sparse(r: _Reader, magic: int, stype: int, ctx: Context):
    """A row_sparse (1) or csr (2) record: storage shape, shape, context, type flag,
    (aux type flag, aux shape) per aux array, the values, then each aux array."""
    from .ndarray_sparse import CSRNDArray, RowSparseNDArray
    storage_shape = _read_shape(r, magic)
    shape = _read_shape(r, magic)
    if not shape or storage_shape is None:
        raise _Corrupt(f"sparse array (storage type {stype}) with no shape")
    r.i32("context device type")
    r.i32("context device id")
    flag = r.i32("type flag")
    aux_meta = [(r.i32("aux type flag"), _read_shape(r, magic))
                for _ in range(_SPARSE_NAUX[stype])]
    data = _read_blob(r, flag, storage_shape, "sparse values")
    aux = [_read_blob(r, f, s or (0,), f"aux array {i}").to(torch.int64)
           for i, (f, s) in enumerate(aux_meta)]
    dev = ctx.torch_device
    cls = RowSparseNDArray if stype == 1 else CSRNDArray
    if stype == 2 and len(shape) != 2:
        raise _Corrupt(f"csr array of shape {tuple(shape)} (csr is 2-D)")
    out = cls(data.to(dev), [a.to(dev) for a in aux], shape, ctx)
    try:
        out.check_format(full_check=False)
    except MXNetError as e:
        raise _Corrupt(str(e)) from None
    return out


def _decode_list(buf, ctx: Context):
    r = _Reader(buf)
    header = r.u64("header")
    if header != LIST_MAGIC:
        raise _Corrupt(f"bad header 0x{header:X} (expected 0x112): not an NDArray file")
    r.u64("reserved word")
    n = r.u64("array count")
    if n > len(buf):
        raise _Corrupt(f"implausible array count {n}")
    arrays = [_read_array(r, ctx) for _ in range(n)]
    k = r.u64("key count")
    if k not in (0, n):
        raise _Corrupt(f"{k} keys for {n} arrays")
    keys = []
    for i in range(k):
        length = r.u64("key length")
        raw = bytes(r.take(length, f"key {i}"))
        try:
            keys.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise _Corrupt(f"key {i} is not UTF-8 text ({e.reason} at byte {e.start} of "
                           f"{raw[:40]!r})") from None
    if r.pos != len(r.buf):
        raise _Corrupt(f"{len(r.buf) - r.pos} trailing bytes after the key list")
    return dict(zip(keys, arrays)) if keys else arrays


def loads(buf, ctx: Context = None, source: str = "<buffer>"):
    """Decode an NDArray-list buffer: a list, or a dict when the file has keys."""
    try:
        return _decode_list(buf, ctx or cpu(0))
    except _Corrupt as e:
        raise MXNetError(f"Invalid NDArray file format in {source}: {e}") from None
    except _OtherSemantics as e:
        raise MXNetError(f"{source}: {e}") from None


def load(fname, ctx: Context = None):
    """Read an ``mx.nd.save`` / ``.params`` file (mxnet 1.x binary format)."""
    fname = os.fspath(fname)
    try:
        with open(fname, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise MXNetError(f"cannot read NDArray file {fname!r}: {e}") from e
    return loads(buf, ctx, source=repr(fname))


def decode_single_ndarray(raw, ctx: Context = None) -> NDArray:
    """One array record, e.g. the ``handle`` bytes of a pickled mxnet NDArray."""
    r = _Reader(raw)
    try:
        out = _read_array(r, ctx or cpu(0))
        if r.pos != len(r.buf):
            raise _Corrupt(f"{len(r.buf) - r.pos} trailing bytes")
        return out
    except _Corrupt as e:
        raise MXNetError(f"Invalid NDArray record: {e}") from None
    except _OtherSemantics as e:
        raise MXNetError(str(e)) from None


# ----------------------------------------------------------------- encoding
def _context_ids(arr):
    ctx = arr.context if isinstance(arr, NDArray) else \
        (Context("gpu", arr.device.index or 0) if arr.device.type == "cuda" else cpu(0))
    return ctx.device_typeid, ctx.device_id


def encode_single_ndarray(arr, np_shape=None) -> bytes:
    """One array record, as mxnet's ``NDArray::Save`` writes it.

    ``np_shape`` picks the V3 magic (numpy shape semantics); by default only
    0-d arrays use it, since V2 cannot describe them.
    """
    if isinstance(arr, np.ndarray):
        arr = torch.from_numpy(np.array(arr, order="C"))
    if getattr(arr, "stype", "default") != "default":
        return _encode_sparse(arr)
    if not isinstance(arr, torch.Tensor):
        raise TypeError(f"save only accepts arrays, got {type(arr).__name__}")
    shape = tuple(arr.shape)
    if np_shape is None:
        np_shape = len(shape) == 0
    magic = V3_MAGIC if np_shape else V2_MAGIC
    t = arr.detach().cpu().contiguous()
    if torch_dtype(t) == torch.bfloat16:
        flag, data = BFLOAT16_FLAG, t.view(torch.int16).numpy().astype("<i2").tobytes()
    else:
        try:
            dt = to_numpy_dtype(torch_dtype(t))
        except TypeError:
            raise MXNetError(f"cannot save arrays of dtype {torch_dtype(t)}") from None
        flag = _FLAG_OF[dt]
        np_arr = torch.Tensor.numpy(t.as_subclass(torch.Tensor))
        data = np_arr.astype(dt.newbyteorder("<"), copy=False).tobytes()
    dev_type, dev_id = _context_ids(arr)
    head = struct.pack(f"<Iii{len(shape)}q", magic, 0, len(shape), *shape)
    return head + struct.pack("<iii", dev_type, dev_id, flag) + data


def _blob(t: torch.Tensor):
    t = t.detach().cpu().contiguous()
    dt = to_numpy_dtype(t.dtype)
    return _FLAG_OF[dt], torch.Tensor.numpy(t).astype(dt.newbyteorder("<")).tobytes()


def _shape_bytes(shape) -> bytes:
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def _encode_sparse(arr) -> bytes:
    """A csr / row_sparse record as mxnet's ``NDArray::Save`` writes it (V2 magic)."""
    code = 1 if arr.stype == "row_sparse" else 2
    flag, data = _blob(arr._data_t)
    ctx = arr.context
    parts = [struct.pack("<Ii", V2_MAGIC, code), _shape_bytes(tuple(arr._data_t.shape)),
             _shape_bytes(arr.shape), struct.pack("<iii", ctx.device_typeid, ctx.device_id, flag)]
    blobs = [_blob(a) for a in arr._aux_t]
    parts += [struct.pack("<i", f) + _shape_bytes(tuple(a.shape))
              for (f, _), a in zip(blobs, arr._aux_t)]
    return b"".join(parts + [data] + [b for _, b in blobs])


def dumps(data) -> bytes:
    """Encode an array, a list of arrays or a dict ``str -> array``."""
    if isinstance(data, (torch.Tensor, np.ndarray)) or hasattr(data, "_aux_t"):
        data = [data]
    if isinstance(data, dict):
        if any(not isinstance(k, str) for k in data):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        keys, arrays = list(data.keys()), list(data.values())
    elif isinstance(data, (list, tuple)):
        keys, arrays = [], list(data)
    else:
        raise ValueError("data needs to either be a NDArray, dict of str, NDArray pairs "
                         "or a list of NDarrays.")
    arrays = [torch.from_numpy(np.array(a, order="C")) if isinstance(a, np.ndarray) else a
              for a in arrays]
    bad = [a for a in arrays if not isinstance(a, torch.Tensor) and not hasattr(a, "_aux_t")]
    if bad:
        raise TypeError("save only accept dict str->NDArray or list of NDArray")
    np_shape = is_np_shape()
    if np_shape and any(getattr(a, "stype", "default") != "default" for a in arrays):
        raise MXNetError("save: only allow serializing ndarray of default storage type in "
                         "np shape semantics (sparse arrays are saved under legacy semantics)")
    scalar = [i for i, a in enumerate(arrays) if len(a.shape) == 0]
    if scalar and not np_shape:
        raise MXNetError(
            f"save: array {scalar[0]} has shape () (a 0-d array), which legacy shape "
            f"semantics cannot record (mxnet would write an empty array in its place). "
            f"Save it under NumPy shape semantics (with mx.np_shape(): mx.nd.save(...)), "
            f"and load it the same way, or reshape it to (1,)")
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    parts += [encode_single_ndarray(a, np_shape) for a in arrays]
    parts.append(struct.pack("<Q", len(keys)))
    for k in keys:
        kb = k.encode("utf-8")
        parts.append(struct.pack("<Q", len(kb)) + kb)
    return b"".join(parts)


def save(fname, data):
    """Write ``data`` in mxnet's format, atomically (temp file, then rename)."""
    atomic_write_bytes(os.fspath(fname), dumps(data))


_ndarray.RECORD_DECODER[0] = decode_single_ndarray
