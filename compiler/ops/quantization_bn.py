"""mxnet 1.9.1's ``_contrib_quantized_batch_norm`` (``mx.sym.contrib.quantized_batch_norm``):
BatchNorm with the moving statistics of inference, on int8 (or uint8) data, giving int8.

Inputs, in mxnet's order: ``data, gamma, beta, moving_mean, moving_var, min_data,
max_data``; the moving statistics (mxnet's ``FMutateInputs`` 3 and 4, never written) are
the auxiliary states, in the middle of the inputs (``OpDef.input_order``). Outputs:
``output`` (int8), ``min_output``, ``max_output``.

mxnet's pip build computes it with MKLDNN only, and that kernel is followed here, as
one extern launch of float32 ATen calls:

* the output range is the calibrated one (``min_calib_range``, ``max_calib_range``);
  without it mxnet stops ("Quantized BN currently don't support calib_mode=None");
* with ``Rd = max(|min_data|, |max_data|)``, ``Ro`` the same of the output range and
  ``s = 1 / sqrt(moving_var + eps)``, each channel's ``scale = gamma * s * Rd / Ro`` and
  ``shift = (beta - moving_mean * gamma * s) * 127.5 / Ro`` (mxnet's ``kInt8Range``);
  MKLDNN then normalises with mean 0 and variance 1, so the data is also divided by
  ``sqrt(1 + eps)``: ``out = sat_int8(rint(q / sqrt(1 + eps) * scale + shift))``;
* uint8 data is first reordered to int8, ``rint(q * 127.5 / 255.5)``;
* ``gamma`` is used as given (``fix_gamma`` is not read); the channel axis must be 1 and
  the data have at least 2 dims (MKLDNN's layout: mxnet fails otherwise).

No gradient (mxnet's ``MakeZeroGradNodes``: zeros for every input).
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .contrib_common import zero_gradients
from .registry import Extern, OpDef, ShapeError, get_op, merge_shape, register

_INPUTS = ["data", "gamma", "beta", "moving_mean", "moving_var", "min_data", "max_data"]
# as a node holds them: the arguments, then the auxiliary states
_HELD = ["data", "gamma", "beta", "min_data", "max_data", "moving_mean", "moving_var"]
_RANGE = (1,)
_F32 = torch.float32
_NAME = "_contrib_quantized_batch_norm"


def _calibrated(attrs):
    lo, hi = attrs["min_calib_range"], attrs["max_calib_range"]
    if lo is None or hi is None:
        raise MXNetError(f"{_NAME}: min_calib_range or max_calib_range is not available; "
                         f"mxnet's quantized BatchNorm does not support calib_mode=None")
    return lo, hi


def _run(attrs, ins):
    q, gamma, beta, lo, hi, mean, var = ins
    out_lo, out_hi = _calibrated(attrs)
    f = lambda v: torch.as_tensor(v, dtype=_F32, device=q.device)  # noqa: E731
    rd = torch.maximum(lo.to(_F32).abs(), hi.to(_F32).abs()).reshape(())
    ro = f(max(abs(out_lo), abs(out_hi)))
    x = q.to(_F32)
    if q.dtype == torch.uint8:       # MKLDNN's reorder to int8
        x = torch.round(x * (f(127.5) / f(255.5)))
    s = f(1.0) / torch.sqrt(var.to(_F32) + f(attrs["eps"]))
    g = gamma.to(_F32)
    scale = g * s * (rd / ro)
    shift = (beta.to(_F32) - mean.to(_F32) * g * s) * (f(127.5) / ro)
    bshape = (1, -1) + (1,) * (q.dim() - 2)
    y = (x / torch.sqrt(f(1.0 + attrs["eps"]))) * scale.reshape(bshape) + shift.reshape(bshape)
    out = torch.clamp(torch.round(y), -128, 127).to(torch.int8)
    return [out, f([out_lo]), f([out_hi])]


def _shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, _RANGE, _RANGE]
    ax = attrs["axis"] + len(d) if attrs["axis"] < 0 else attrs["axis"]
    if len(d) < 2 or ax != 1:
        raise ShapeError(f"{_NAME}: data of shape {tuple(d)} with axis={attrs['axis']}: "
                         f"mxnet's (MKLDNN) kernel normalises axis 1 of data with at least "
                         f"2 dims only")
    want = {"gamma": (d[1],), "beta": (d[1],), "moving_mean": (d[1],),
            "moving_var": (d[1],), "min_data": _RANGE, "max_data": _RANGE}
    shapes = [tuple(d)] + [merge_shape(s, want[n], f"{_NAME}: input '{n}'")
                           for s, n in zip(in_shapes[1:], _HELD[1:])]
    return shapes, [tuple(d), _RANGE, _RANGE]


def _type(attrs, in_types):
    # int8 or uint8 data (MKLDNN's rule); ``passes/infer_types.py`` refuses another,
    # naming both
    t = in_types[0] if in_types[0] in ("int8", "uint8") else "int8"
    return [t] + ["float32"] * 6, ["int8", "float32", "float32"]


register(OpDef(
    name=_NAME, pattern="opaque", lowering=Extern(_run),
    arguments=("data", "gamma", "beta", "min_data", "max_data"),
    aux=("moving_mean", "moving_var"), input_order=_INPUTS,
    outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("BatchNorm").attrs), infer_shape=_shape, infer_type=_type,
    reference=lambda attrs, ins, is_train: _run(attrs, ins), gradient=zero_gradients,
    doc="BatchNorm with the moving statistics on int8/uint8 data, to int8 in the "
        "calibrated range (mxnet's MKLDNN kernel)."))
