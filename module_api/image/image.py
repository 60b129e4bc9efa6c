"""``mx.image``'s functions: decode, resize, crop and normalize HWC images.

Images are ``NDArray`` (torch) in height x width x channel order, RGB,
``uint8`` as decoded. Decoding is Pillow's (:mod:`module_api._imagecodec`);
resizing is written here with mxnet's (OpenCV's) interpolation rules:

* ``0`` nearest: source index ``floor(dst * src_size / dst_size)``, exact;
* ``1`` bilinear and ``2`` bicubic (``a = -0.75``): half-pixel centres, no
  antialiasing, borders clamped, as OpenCV; OpenCV computes ``uint8``
  images in fixed point, so results may differ by 1;
* ``3`` area: each output pixel averages the source area it covers (OpenCV's
  ``INTER_AREA`` when shrinking; bilinear when enlarging, as OpenCV);
* ``4`` Lanczos is not implemented (an error says so); ``9`` and ``10`` pick
  a method as mxnet does.

Random choices (``random_crop``, ``10``) draw from Python's ``random`` as
mxnet's Python code does.
"""
import random

import numpy as np
import torch
import torch.nn.functional as F

from compiler.errors import MXNetError
from runtime.ndarray import as_ndarray

from .. import _imagecodec

__all__ = ["imdecode", "imread", "imresize", "scale_down", "copyMakeBorder", "resize_short",
           "fixed_crop", "random_crop", "center_crop", "color_normalize", "random_size_crop"]


def _tensor(src):
    if isinstance(src, torch.Tensor):
        return src.as_subclass(torch.Tensor)
    return torch.as_tensor(np.asarray(src))


def imdecode(buf, flag=1, to_rgb=1, out=None):
    """Decode an image to an ``(H, W, C)`` uint8 NDArray.

    Parameters
    ----------
    buf : bytes, bytearray, numpy.ndarray or NDArray
        The encoded image.
    flag : int
        ``1``: 3 channels; ``0``: 1 channel (gray).
    to_rgb : int
        ``1``: RGB channel order (default); ``0``: BGR, as OpenCV.
    out : NDArray, optional
        Written in place when given.

    Returns
    -------
    NDArray
    """
    if isinstance(buf, torch.Tensor):
        buf = buf.as_subclass(torch.Tensor).numpy().astype(np.uint8).tobytes()
    elif isinstance(buf, np.ndarray):
        buf = buf.astype(np.uint8, copy=False).tobytes()
    if not isinstance(buf, (bytes, bytearray)):
        raise MXNetError(f"imdecode: buf must be bytes, a numpy array or an NDArray, got "
                         f"{type(buf).__name__}")
    img = _imagecodec.decode(bytes(buf), 1 if flag else 0)
    if flag and not to_rgb:
        img = img[:, :, ::-1]
    result = torch.from_numpy(np.ascontiguousarray(img))
    if out is not None:
        out.copy_(result)
        return out
    return as_ndarray(result)


def imread(filename, flag=1, to_rgb=1, out=None):
    """Read and decode an image file (see :func:`imdecode`).

    Parameters
    ----------
    filename : str
    flag, to_rgb, out
        As :func:`imdecode`.
    """
    try:
        with open(filename, "rb") as f:
            buf = f.read()
    except OSError as err:
        raise MXNetError(f"imread: cannot read {filename!r}: {err}") from None
    return imdecode(buf, flag, to_rgb, out)


def _area_weights(src, dst):
    """``(dst, src)`` matrix: the share of each source pixel in each (shrunk) output pixel."""
    scale = src / dst
    w = np.zeros((dst, src))
    for i in range(dst):
        lo, hi = i * scale, (i + 1) * scale
        for j in range(int(np.floor(lo)), min(int(np.ceil(hi)), src)):
            w[i, j] = (min(hi, j + 1) - max(lo, j)) / scale
    return torch.from_numpy(w)


def _resize_float(img, w, h, interp):
    """Resize an ``(H, W, C)`` float64 tensor to ``(h, w, C)``."""
    src_h, src_w = img.shape[0], img.shape[1]
    if interp == 3 and h <= src_h and w <= src_w:
        return torch.einsum("ij,jkc,lk->ilc", _area_weights(src_h, h), img,
                            _area_weights(src_w, w))
    mode = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "bilinear"}[interp]
    x = img.permute(2, 0, 1)[None]
    kwargs = {} if mode == "nearest" else {"align_corners": False}
    return F.interpolate(x, size=(h, w), mode=mode, **kwargs)[0].permute(1, 2, 0)


def imresize(src, w, h, interp=1, out=None):
    """Resize an ``(H, W, C)`` image to width ``w`` and height ``h``.

    Parameters
    ----------
    src : NDArray
    w, h : int
    interp : int
        0 nearest, 1 bilinear (default), 2 bicubic, 3 area, 9 / 10 as
        :func:`_get_interp_method` (see the module docstring).
    out : NDArray, optional

    Returns
    -------
    NDArray
        ``src``'s dtype (integer images rounded and clipped to their range).
    """
    interp = _get_interp_method(interp, (src.shape[0], src.shape[1], h, w))
    if interp == 4:
        raise MXNetError("imresize: interp=4 (Lanczos) is not implemented here; use 0-3")
    if w <= 0 or h <= 0:
        raise MXNetError(f"imresize: the size must be positive, got w={w}, h={h}")
    img = _tensor(src)
    gray = img.dim() == 2
    x = img[:, :, None] if gray else img
    res = _resize_float(x.to(torch.float64), int(w), int(h), interp)
    if not img.dtype.is_floating_point:
        info = torch.iinfo(img.dtype)
        res = torch.floor(res + 0.5).clamp(info.min, info.max)
    res = res.to(img.dtype).contiguous()
    res = res[:, :, 0] if gray else res
    if out is not None:
        out.copy_(res)
        return out
    return as_ndarray(res)


def scale_down(src_size, size):
    """Shrink ``size`` (w, h) to fit in ``src_size`` (w, h), keeping its aspect ratio."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def copyMakeBorder(src, top, bot, left, right, type=0, value=0.0, values=(),  # noqa: N802,A002
                   out=None):
    """Pad an ``(H, W, C)`` image with a border, as OpenCV's ``copyMakeBorder``.

    Parameters
    ----------
    src : NDArray
    top, bot, left, right : int
    type : int
        OpenCV's border type: 0 constant, 1 replicate (``aaa|abc``), 2 reflect
        (``cba|abc``), 3 wrap (``xyz|abc...xyz``), 4 reflect-101 (``dcb|abcd``).
    value : float
        The constant of the first 3 channels (deprecated in mxnet: use ``values``).
    values : tuple of float
        The constant per channel (up to 4; missing ones are 0).
    out : NDArray, optional
    """
    modes = {0: "constant", 1: "edge", 2: "symmetric", 3: "wrap", 4: "reflect"}
    if type not in modes:
        raise MXNetError(f"copyMakeBorder: border type {type} is not one of {sorted(modes)}")
    img = _tensor(src).numpy()
    pad = [(top, bot), (left, right)] + [(0, 0)] * (img.ndim - 2)
    res = np.pad(img, pad, mode=modes[type])
    if type == 0:
        channels = img.shape[2] if img.ndim == 3 else 1
        fill = list(values) if len(values) else [value] * min(3, channels)
        fill = (fill + [0.0] * 4)[:channels]
        inner = np.zeros(res.shape[:2], bool)
        inner[top:top + img.shape[0], left:left + img.shape[1]] = True
        res[~inner] = np.asarray(fill, res.dtype) if img.ndim == 3 else fill[0]
    res = torch.from_numpy(np.ascontiguousarray(res))
    if out is not None:
        out.copy_(res)
        return out
    return as_ndarray(res)


def _get_interp_method(interp, sizes=()):
    """mxnet's interpolation choice: 9 picks by sizes ``(oh, ow, nh, nw)``, 10 at random."""
    if interp == 9:
        if sizes:
            oh, ow, nh, nw = sizes
            if nh > oh and nw > ow:
                return 2
            if nh < oh and nw < ow:
                return 3
            return 1
        return 2
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise ValueError("Unknown interp method %d" % interp)
    return interp


def resize_short(src, size, interp=2):
    """Resize so that the shorter edge is ``size`` (the longer one keeps the aspect ratio)."""
    h, w = src.shape[0], src.shape[1]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """Crop ``(x0, y0, w, h)``, then resize to ``size`` (w, h) if it differs."""
    out = as_ndarray(_tensor(src)[y0:y0 + h, x0:x0 + w].contiguous())
    if size is not None and (w, h) != tuple(size):
        sizes = (h, w, size[1], size[0])
        out = imresize(out, *size, interp=_get_interp_method(interp, sizes))
    return out


def random_crop(src, size, interp=2):
    """A random crop of ``size`` (w, h) (shrunk to fit), and its ``(x0, y0, w, h)``."""
    h, w = src.shape[0], src.shape[1]
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src, size, interp=2):
    """The centre crop of ``size`` (w, h) (shrunk to fit, then resized), and its box."""
    h, w = src.shape[0], src.shape[1]
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src, mean, std=None):
    """``(src - mean) / std``, in place on ``src`` as mxnet (float images)."""
    if mean is not None:
        src -= _tensor(mean)
    if std is not None:
        src /= _tensor(std)
    return src


def random_size_crop(src, size, area, ratio, interp=2):
    """A random crop of ``area`` (fraction, or range) and aspect ``ratio`` range, resized to
    ``size``; the centre crop after 10 misses, as mxnet."""
    h, w = src.shape[0], src.shape[1]
    if isinstance(area, (int, float)):
        area = (area, 1.0)
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * h * w
        new_ratio = np.exp(random.uniform(np.log(ratio[0]), np.log(ratio[1])))
        new_w = int(round(np.sqrt(target_area * new_ratio)))
        new_h = int(round(np.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp)
