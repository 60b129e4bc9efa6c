"""Image bytes <-> pixel arrays, with Pillow (mxnet uses OpenCV).

One place decodes and encodes for ``mx.recordio``, ``mx.image`` and
``mx.io.ImageRecordIter``. Arrays are ``uint8`` in height x width x channel
order, channels RGB (``mx.image``'s order; ``mx.recordio``'s OpenCV-style
functions flip to BGR themselves).

PNG round trips are exact. JPEG decoders differ in their IDCT and chroma
upsampling, so pixels decoded here may differ from OpenCV's by a few units
(the tests compare mxnet-decoded pixels within a tolerance). Grayscale
conversion is ``(4899 R + 9617 G + 1868 B) >> 14`` (ITU-R 601 weights in
14-bit fixed point, truncated), which gives mxnet's gray PNG pixels exactly;
mxnet's JPEG decoder makes gray from the JPEG's own luma instead, so gray
JPEG pixels may differ by a unit or two.
"""
import io

import numpy as np

from compiler.errors import MXNetError

try:
    from PIL import Image
except ImportError:  # pragma: no cover - Pillow is a declared dependency
    Image = None

_FORMATS = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".bmp": "BMP"}


def _pillow():
    if Image is None:
        raise MXNetError("image decoding needs Pillow: pip install Pillow")
    return Image


def decode(buf, flag=1):
    """Decode image bytes to a ``uint8`` array.

    Parameters
    ----------
    buf : bytes or numpy.ndarray
        The encoded image (JPEG, PNG, ...).
    flag : int
        ``1``: 3 channels (RGB); ``0``: 1 channel (gray); ``-1``: as stored
        (gray stays 2-D, an alpha channel is kept).

    Returns
    -------
    numpy.ndarray
        ``(H, W, 3)`` or ``(H, W, 1)`` for flags 1 / 0; for ``-1`` ``(H, W)``,
        ``(H, W, 3)`` or ``(H, W, 4)``.
    """
    pil = _pillow()
    data = bytes(buf) if not isinstance(buf, bytes) else buf
    try:
        img = pil.open(io.BytesIO(data))
        img.load()
    except Exception as err:  # noqa: BLE001  (Pillow raises several kinds)
        raise MXNetError(f"imdecode: cannot decode {len(data)} bytes as an image "
                         f"({type(err).__name__}: {err})") from None
    if flag == 1:
        return np.array(img.convert("RGB"))
    if flag == 0:
        return _gray(np.asarray(img.convert("RGB")))[:, :, None]
    mode = {"L": "L", "RGB": "RGB", "RGBA": "RGBA", "LA": "RGBA", "P": "RGB"}.get(img.mode)
    return np.array(img.convert(mode or "RGB"))


def _gray(rgb):
    """OpenCV's gray of an ``(H, W, 3)`` RGB uint8 array (fixed point, truncated)."""
    r, g, b = (rgb[:, :, k].astype(np.int64) for k in range(3))
    return ((4899 * r + 9617 * g + 1868 * b) >> 14).astype(np.uint8)


def encode(img, img_fmt=".jpg", quality=95):
    """Encode a ``uint8`` RGB (or gray) array to image bytes.

    Parameters
    ----------
    img : numpy.ndarray
        ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` (RGB) or ``(H, W, 4)`` (RGBA).
    img_fmt : str
        ``'.jpg'`` / ``'.jpeg'``, ``'.png'`` or ``'.bmp'``.
    quality : int
        JPEG quality (1-100), or PNG compression level (0-9).

    Returns
    -------
    bytes
    """
    pil = _pillow()
    fmt = _FORMATS.get(img_fmt.lower())
    if fmt is None:
        raise MXNetError(f"imencode: img_fmt {img_fmt!r} is not one of {sorted(_FORMATS)}")
    arr = np.ascontiguousarray(np.asarray(img, dtype=np.uint8))
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    out = io.BytesIO()
    options = {"quality": int(quality)} if fmt == "JPEG" else {}
    if fmt == "PNG":
        options = {"compress_level": min(max(int(quality), 0), 9)}   # OpenCV clamps too
    pil.fromarray(arr).save(out, format=fmt, **options)
    return out.getvalue()
