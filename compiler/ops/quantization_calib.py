"""mxnet 1.9.1's ``_contrib_quantize_asym`` and ``_contrib_calibrate_entropy``, as
``mx.sym.contrib.X``.

``quantize_asym`` maps float32 data onto uint8 with a scale and a shift,
``q = trunc(x * scale + shift + 0.5)`` (the sum of 0.5 in double), ``scale = 255 / (max -
min)`` and ``shift = 255 - max * scale`` in float32, over the calibrated range or the
data's own extremes; outputs ``(q, scale, shift)``; zero gradients, as mxnet.

``calibrate_entropy`` finds the threshold of a symmetric histogram whose int8
quantization loses the least information (KL divergence), as an extern launch on a host
copy of the histogram (a search over thresholds, run once per calibration).

For every candidate half-width ``i`` (from ``num_quantized_bins // 2`` to the zero bin), as
mxnet's CPU kernel does:

* ``p`` is the histogram's slice ``[zero - i, zero + i]`` with everything left of it added
  to its first bin and everything right of it to its last (the slice's last bin counted
  there too); the slice's counts are truncated to integers for the quantized side;
* the slice is merged into ``num_quantized_bins`` bins of ``len // num_quantized_bins``
  (the remainder into the last), each spread evenly back over its nonzero positions where
  ``p`` is nonzero, giving ``q``;
* both are smoothed (zeros raised to 1e-4, the mass taken evenly from the nonzeros; an
  all-zero or too sparse ``q`` has divergence infinity), normalised, and compared with
  ``sum p log(p / q)``.

The outputs are the right edge of the slice with the least divergence (the first of equals)
and that divergence, both ``(1,)`` float32. No gradient: mxnet registers none.
"""
from __future__ import annotations

import numpy as np
import torch

from .contrib_common import zero_gradients
from .registry import (Attr, Extern, OpDef, ShapeError, parse_int, parse_optional_float,
                       register)

_EPS = np.float32(1e-4)


def _smooth(p):
    zeros = p == 0
    n_zero = int(zeros.sum())
    n_nonzero = p.size - n_zero
    if not n_nonzero:
        return None
    eps1 = np.float32(_EPS * np.float32(n_zero) / np.float32(n_nonzero))
    if eps1 >= 1.0:
        return None
    return (p + np.where(zeros, _EPS, -eps1)).astype(np.float32)


def _entropy(p, q):
    p = p / np.float32(p.sum(dtype=np.float32))
    q = q / np.float32(q.sum(dtype=np.float32))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = p * np.log(p / q)
    return np.float32(terms.sum(dtype=np.float32))


def _divergence(hist, start, stop, nqb):
    """KL divergence of the slice ``(start, stop)`` of ``hist`` against its quantization."""
    p = hist[start:stop].copy()
    sliced = np.trunc(hist[start:stop])
    sliced[0] = 0
    p[0] = hist[:start + 1].sum(dtype=np.float32)
    p[-1] = hist[stop - 1:].sum(dtype=np.float32)
    merged = len(sliced) // nqb
    starts = np.arange(nqb) * merged                 # the last group runs to the end
    total = np.add.reduceat(sliced, starts).astype(np.float32)
    norm = np.add.reduceat((sliced != 0).astype(np.int64), starts)
    group = np.minimum(np.arange(len(sliced)) // merged, nqb - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = (total / np.maximum(norm, 1).astype(np.float32))[group]
    q = np.where((p != 0) & (norm[group] > 0), level, 0).astype(np.float32)
    p, q = _smooth(p), _smooth(q)
    if q is None or p is None:
        return np.float32(np.inf)
    return _entropy(p, q)


def _calibrate(attrs, ins):
    hist = ins[0].detach().to("cpu", torch.float32).numpy().reshape(-1)
    edges = ins[1].detach().to("cpu", torch.float32).numpy().reshape(-1)
    nqb = attrs["num_quantized_bins"]
    zero = hist.size // 2
    best, best_i = np.float32(np.finfo(np.float32).max), nqb // 2
    for i in range(nqb // 2, zero + 1):
        d = _divergence(hist, zero - i, zero + i + 1, nqb)
        if d < best:
            best, best_i = d, i
    dev = ins[0].device
    return [torch.tensor([edges[zero + best_i + 1]], dtype=torch.float32, device=dev),
            torch.tensor([best], dtype=torch.float32, device=dev)]


def _shape(attrs, in_shapes):
    h, e = in_shapes
    if h is not None and e is not None and int(np.prod(h)) + 1 != int(np.prod(e)):
        raise ShapeError(f"calibrate_entropy: hist {tuple(h)} needs one more edge than bins, "
                         f"got hist_edges {tuple(e)}")
    return in_shapes, [(1,), (1,)]


register(OpDef(
    name="_contrib_calibrate_entropy", pattern="opaque", lowering=Extern(_calibrate),
    arguments=("hist", "hist_edges"), outputs=("threshold", "divergence"),
    attrs=[Attr("num_quantized_bins", parse_int, 255)],
    infer_shape=_shape,
    infer_type=lambda attrs, t: (["float32", "float32"], ["float32", "float32"]),
    reference=lambda attrs, ins, is_train: _calibrate(attrs, ins),
    doc="The threshold (and its KL divergence) of a symmetric histogram that int8 "
        "quantization with num_quantized_bins bins preserves best."))


# -- quantize_asym -----------------------------------------------------------------------

def _asym(attrs, ins):
    x = ins[0].to(torch.float32)
    lo, hi = attrs["min_calib_range"], attrs["max_calib_range"]
    if lo is not None and hi is not None:
        lo_t = torch.tensor(lo, dtype=torch.float32, device=x.device)
        hi_t = torch.tensor(hi, dtype=torch.float32, device=x.device)
    else:
        lo_t, hi_t = x.min(), x.max()
    scale = torch.tensor(255.0, dtype=torch.float32, device=x.device) / (hi_t - lo_t)
    shift = 255.0 - hi_t * scale
    q = ((x * scale + shift).double() + 0.5).trunc().clamp(0, 255).to(torch.uint8)
    return [q, scale.reshape(1), shift.reshape(1)]


register(OpDef(
    name="_contrib_quantize_asym", pattern="opaque", lowering=Extern(_asym),
    arguments=("data",), outputs=("output", "scale", "shift"),
    attrs=[Attr("min_calib_range", parse_optional_float, None),
           Attr("max_calib_range", parse_optional_float, None)],
    infer_shape=lambda attrs, s: (s, [None if s[0] is None else tuple(s[0]), (1,), (1,)]),
    infer_type=lambda attrs, t: (["float32"], ["uint8", "float32", "float32"]),
    reference=lambda attrs, ins, is_train: _asym(attrs, ins),
    gradient=zero_gradients,
    doc="float32 data to uint8 with a scale and a shift (asymmetric quantization)."))
