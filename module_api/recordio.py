"""``mx.recordio``: mxnet's RecordIO files, byte for byte.

A ``.rec`` file is a sequence of records. Each record is written as the
magic word ``0xced7230a`` (little-endian ``uint32``), then a ``uint32``
whose top 3 bits are a continuation flag and whose low 29 bits are the
length, then that many bytes, zero-padded to a multiple of 4. A record
whose bytes hold the magic word at a 4-aligned offset is cut there into
parts (flag 1: first, 2: middle, 3: last; 0: a whole record); the magic
word itself is dropped and restored on reading. A ``.idx`` file (for
:class:`MXIndexedRecordIO`) has one ``key<TAB>byte offset`` line per record.

``pack`` / ``unpack`` prepend mxnet's image-record header (``IRHeader``:
``uint32`` flag, ``float32`` label, two ``uint64`` ids; a label array is
stored as ``flag`` float32 values after it). ``pack_img`` / ``unpack_img``
take and give OpenCV-style BGR arrays as mxnet's do, encoded and decoded
with Pillow (see :mod:`module_api._imagecodec` for how pixels may differ).
"""
import numbers
import struct
from collections import namedtuple
from multiprocessing import current_process

import numpy as np

from compiler.errors import MXNetError

from . import _imagecodec

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img"]

_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_LEN_MASK = (1 << 29) - 1


def _pad4(n):
    return (n + 3) & ~3


class MXRecordIO(object):
    """Sequential reading (``flag='r'``) or writing (``flag='w'``) of a RecordIO file.

    Parameters
    ----------
    uri : str
        Path to the record file.
    flag : str
        ``'w'`` for write or ``'r'`` for read.
    """

    def __init__(self, uri, flag):
        self.uri = str(uri)
        self.flag = flag
        self.pid = None
        self.is_open = False
        self.handle = None
        self.open()

    def open(self):
        """Open the record file (``'w'`` truncates it)."""
        if self.flag not in ("w", "r"):
            raise ValueError("Invalid flag %s" % self.flag)
        try:
            self.handle = open(self.uri, "wb" if self.flag == "w" else "rb")
        except OSError as err:
            raise MXNetError(f"MXRecordIO: cannot open {self.uri!r} for "
                             f"{'writing' if self.flag == 'w' else 'reading'}: {err}") from None
        self.writable = self.flag == "w"
        self.pid = current_process().pid
        self.is_open = True

    def __del__(self):
        self.close()

    def __getstate__(self):
        """Pickle the path and flag; the file is reopened on unpickling if it was open."""
        is_open = self.is_open
        self.close()
        state = dict(self.__dict__)
        state["is_open"] = is_open
        del state["handle"]
        return state

    def __setstate__(self, state):
        self.__dict__ = state
        is_open = state["is_open"]
        self.is_open = False
        self.handle = None
        if is_open:
            self.open()

    def _check_pid(self, allow_reset=False):
        """Reopen (``allow_reset``) or refuse when used from another process than its opener."""
        if self.pid != current_process().pid:
            if allow_reset:
                self.reset()
            else:
                raise RuntimeError("Forbidden operation in multiple processes")

    def close(self):
        """Close the record file."""
        if not getattr(self, "is_open", False):
            return
        self.handle.close()
        self.is_open = False
        self.pid = None

    def reset(self):
        """Back to the first record (``'w'``: truncate the file)."""
        self.close()
        self.open()

    def write(self, buf):
        """Append ``buf`` (bytes) as one record."""
        assert self.writable
        self._check_pid(allow_reset=False)
        data = bytes(buf)
        if len(data) >= 1 << 29:
            raise MXNetError(f"MXRecordIO.write: a record of {len(data)} bytes; RecordIO "
                             f"records are limited to 2^29 - 1 bytes")
        self.handle.write(_encode(data))

    def read(self):
        """The next record as bytes, or ``None`` at the end of the file."""
        assert not self.writable
        self._check_pid(allow_reset=False)
        return _read_record(self.handle, self.uri)


def _encode(data):
    """The bytes of one record: parts cut at 4-aligned magic words, then padding."""
    out, start, flag = [], 0, 1
    pos = data.find(_MAGIC_BYTES)
    while pos != -1:
        if pos % 4 == 0:
            out += [_MAGIC_BYTES, struct.pack("<I", (flag << 29) | (pos - start)),
                    data[start:pos]]
            start, flag = pos + 4, 2
        pos = data.find(_MAGIC_BYTES, pos + 1)
    last = 3 if start else 0
    out += [_MAGIC_BYTES, struct.pack("<I", (last << 29) | (len(data) - start)), data[start:],
            b"\0" * (_pad4(len(data)) - len(data))]
    return b"".join(out)


def _read_record(f, uri):
    """Read one (possibly multi-part) record from the file object ``f``."""
    parts = []
    while True:
        head = f.read(8)
        if not head:
            if parts:
                raise MXNetError(f"Invalid RecordIO File {uri!r}: ends inside a record")
            return None
        if len(head) != 8:
            raise MXNetError(f"Invalid RecordIO File {uri!r}: truncated header at byte "
                             f"{f.tell() - len(head)}")
        magic, lrec = struct.unpack("<II", head)
        if magic != _MAGIC:
            raise MXNetError(f"Invalid RecordIO File {uri!r}: no magic number at byte "
                             f"{f.tell() - 8} (found {magic:#010x})")
        cflag, length = lrec >> 29, lrec & _LEN_MASK
        body = f.read(_pad4(length))
        if len(body) != _pad4(length):
            raise MXNetError(f"Invalid RecordIO File {uri!r}: a record of {length} bytes is "
                             f"cut short")
        parts.append(body[:length])
        if cflag in (0, 3):
            return _MAGIC_BYTES.join(parts)


class MXIndexedRecordIO(MXRecordIO):
    """RecordIO with random access through an index file (``key<TAB>offset`` lines).

    Parameters
    ----------
    idx_path : str
        Path to the index file.
    uri : str
        Path to the record file.
    flag : str
        ``'w'`` for write or ``'r'`` for read.
    key_type : type
        Type of the keys (``int`` by default).
    """

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = str(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super(MXIndexedRecordIO, self).__init__(uri, flag)

    def open(self):
        super(MXIndexedRecordIO, self).open()
        self.idx = {}
        self.keys = []
        self.fidx = open(self.idx_path, self.flag)
        if not self.writable:
            for line in iter(self.fidx.readline, ""):
                fields = line.strip().split("\t")
                key = self.key_type(fields[0])
                self.idx[key] = int(fields[1])
                self.keys.append(key)

    def close(self):
        """Close the record and index files."""
        if not getattr(self, "is_open", False):
            return
        super(MXIndexedRecordIO, self).close()
        self.fidx.close()

    def __getstate__(self):
        state = super(MXIndexedRecordIO, self).__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx):
        """Move the read position to the record of key ``idx``."""
        assert not self.writable
        self._check_pid(allow_reset=True)
        self.handle.seek(self.idx[idx])

    def tell(self):
        """The write position (byte offset of the next record)."""
        assert self.writable
        return self.handle.tell()

    def read_idx(self, idx):
        """The record of key ``idx``."""
        self.seek(idx)
        return self.read()

    def write_idx(self, idx, buf):
        """Append ``buf`` as the record of key ``idx`` and index it."""
        key = self.key_type(idx)
        pos = self.tell()
        self.write(buf)
        self.fidx.write("%s\t%d\n" % (str(key), pos))
        self.idx[key] = pos
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """An image record's header: ``flag`` (the label count when ``label`` is
an array), ``label`` (float or float array), ``id`` and ``id2`` (uint64)."""
_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header, s):
    """Bytes of an image record: ``header`` then ``s``.

    Parameters
    ----------
    header : IRHeader
        ``label`` may be a number (``flag`` is then written 0) or an array
        (``flag`` becomes its size and the values follow the header as float32).
    s : bytes
        The payload (usually an encoded image).

    Returns
    -------
    bytes
    """
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(_IR_FORMAT, *header) + bytes(s)


def unpack(s):
    """Split an image record into its header and payload.

    Parameters
    ----------
    s : bytes
        A record, as :meth:`MXRecordIO.read` returns.

    Returns
    -------
    header : IRHeader
        ``label`` is a float32 array when ``flag > 0``.
    s : bytes
        The payload.
    """
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


def _flip_channels(img):
    """BGR <-> RGB (and BGRA <-> RGBA) of an ``(H, W, C)`` array; gray passes through."""
    if img.ndim == 3 and img.shape[2] in (3, 4):
        order = [2, 1, 0] + ([3] if img.shape[2] == 4 else [])
        return np.ascontiguousarray(img[:, :, order])
    return img


def unpack_img(s, iscolor=-1):
    """Split an image record into its header and decoded image (BGR, as OpenCV's).

    Parameters
    ----------
    s : bytes
        A record, as :meth:`MXRecordIO.read` returns.
    iscolor : int
        OpenCV's ``imdecode`` flag: ``1`` color ``(H, W, 3)``, ``0`` gray
        ``(H, W)``, ``-1`` as stored.

    Returns
    -------
    header : IRHeader
    img : numpy.ndarray
        ``uint8``.
    """
    header, s = unpack(s)
    img = _imagecodec.decode(s, 1 if iscolor > 0 else iscolor)
    if iscolor == 0:
        img = img[:, :, 0]
    return header, _flip_channels(img)


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """Bytes of an image record holding ``img`` encoded.

    Parameters
    ----------
    header : IRHeader
    img : numpy.ndarray
        ``uint8`` BGR ``(H, W, 3)`` (OpenCV's order, as mxnet), or gray.
    quality : int
        JPEG quality (1-100), or PNG compression (0-9; larger values clamp to 9).
    img_fmt : str
        ``'.jpg'`` or ``'.png'`` (also ``'.jpeg'``, ``'.bmp'``).

    Returns
    -------
    bytes
    """
    buf = _imagecodec.encode(_flip_channels(np.asarray(img)), img_fmt, quality)
    return pack(header, buf)


def _record_offsets(uri):
    """The byte offset of every record of a RecordIO file (headers read, payloads skipped)."""
    offsets, starting = [], True
    with open(uri, "rb") as f:
        while True:
            pos = f.tell()
            head = f.read(8)
            if not head:
                return offsets
            if len(head) != 8 or struct.unpack("<I", head[:4])[0] != _MAGIC:
                raise MXNetError(f"Invalid RecordIO File {uri!r}: no record header at byte "
                                 f"{pos}")
            lrec = struct.unpack("<I", head[4:])[0]
            if starting:
                offsets.append(pos)
            starting = (lrec >> 29) in (0, 3)
            f.seek(_pad4(lrec & _LEN_MASK), 1)
