"""mxnet 1.9.1's ``_contrib_quantized_fully_connected``, ``_contrib_quantized_conv``,
``_contrib_quantized_concat`` and ``_contrib_quantized_elemwise_add``, ``mx.sym.contrib.X``,
as extern launches.

quantized_fully_connected and quantized_conv: int8 weight, int8 data (mxnet's reference
kernels: cblas_gemm_s8u8s32 on CPU, cuDNN on GPU) or, for conv, uint8 data (the only data
its CPU MKLDNN kernel takes; the same sums and range here); conv with ``num_group=1`` in
NCHW (or NCDHW) layout. The products are summed in int32 (here in float64, exact below
2^53) and the output range is that of an int8 x int8 product, ``+-(R_data / 127) *
(R_weight / 127) * 2^31``. A bias enters as in mxnet's reference kernels, in float32 with
``f_out = R_out / (2^31 - 1)`` and ``f_bias = R_bias / 127``: FullyConnected starts each
sum at ``trunc(b * f_bias / f_out)``, conv turns each sum ``v`` into ``trunc((v * f_out +
b * f_bias) / f_out)`` (MKLDNN, mxnet's only CPU kernel for both in its pip build, rescales
the bias with other constants). Zero gradients, as mxnet (``MakeZeroGradNodes``).

quantized_concat has only an MKLDNN kernel in mxnet, which this follows: the output range is
``[min(0, min_i), max(0, max_i)]``, the output int8 if any input is (else uint8); an input
whose scale (``127.5`` or ``255.5`` over ``max(|min|, |max|)``) differs from the output's is
rescaled by the ratio, rounded to nearest even and saturated, before the concatenation.

quantized_elemwise_add has only an MKLDNN kernel in mxnet (its reference one stops: "not
supported without MKLDNN"), which this follows: ``out = s_a * a + s_b * b`` rounded to
nearest even and saturated, into int32 over ``+-(R_a + R_b)`` when uncalibrated (``s`` =
``R * 2^31 / ((R_a + R_b) * 127.5)`` with ``R`` the input's range, ``255.5`` for uint8
``lhs``), or into the calibrated range (int8, or the inputs' dtype when both share one;
``s = (width_out / R_out) / (width_in / R_in)``). A uint8 operand added to an int8 one is
first reordered to int8 with its own scale, rounded and saturated. No gradient: mxnet
registers none.
"""
from __future__ import annotations

import numpy as np
import torch

from .contrib_common import zero_gradients
from .quantization import _RANGE, _f32, _max_abs, _product_range
from .registry import Extern, OpDef, ShapeError, get_op, register

_LIMITS = {torch.int8: (-128, 127, 127.5), torch.uint8: (0, 255, 255.5)}


def _arguments(attrs):
    if attrs["no_bias"]:
        return ["data", "weight", "min_data", "max_data", "min_weight", "max_weight"]
    return ["data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight",
            "min_bias", "max_bias"]


def _conv_run(attrs, ins):
    n_in = 2 if attrs["no_bias"] else 3
    data, weight = ins[0], ins[1]
    ranges = [r.reshape(()).to(torch.float32) for r in ins[n_in:]]
    top = _product_range(*ranges[:4])
    k = len(attrs["kernel"])
    conv = torch.nn.functional.conv2d if k == 2 else torch.nn.functional.conv3d
    acc = conv(data.to(torch.float64), weight.to(torch.float64),
               stride=tuple(attrs["stride"]) or 1, padding=tuple(attrs["pad"]) or 0,
               dilation=tuple(attrs["dilate"]) or 1)
    out = acc.to(torch.int64).to(torch.int32)
    if not attrs["no_bias"]:
        f_out = _f32(float(np.float32(float(top) / 2147483647.0)), top)
        f_bias = _f32(float(np.float32(float(torch.maximum(ranges[4].abs(), ranges[5].abs()))
                                       / 127.0)), top)
        b = ins[2].to(torch.float32).reshape((1, -1) + (1,) * k)
        out = ((out.to(torch.float32) * f_out + b * f_bias) / f_out).trunc().to(torch.int32)
    return [out, (-top).reshape(_RANGE), top.reshape(_RANGE)]


def _conv_shape(attrs, in_shapes):
    if attrs["num_group"] != 1:
        raise ShapeError(f"quantized_conv only supports num_group=1 for now, got "
                         f"{attrs['num_group']}")
    if attrs["layout"] not in (None, "NCHW", "NCDHW"):
        raise ShapeError(f"quantized_conv supports NCHW or NCDHW for now, got "
                         f"{attrs['layout']}")
    d = in_shapes[0]
    if d is not None and (len(d) not in (4, 5) or len(attrs["kernel"]) != len(d) - 2):
        raise ShapeError(f"quantized_conv: data of shape {tuple(d)} with kernel "
                         f"{tuple(attrs['kernel'])}: only 2-D (4-D data) or 3-D (5-D data) "
                         f"convolutions")
    n_in = 2 if attrs["no_bias"] else 3
    shapes, outs = get_op("Convolution").infer_shape(attrs, list(in_shapes[:n_in]))
    return list(shapes) + [_RANGE] * (2 * n_in), [outs[0], _RANGE, _RANGE]


def _conv_type(attrs, in_types):
    n_in = 2 if attrs["no_bias"] else 3
    data = in_types[0] if in_types[0] in ("int8", "uint8") else "int8"
    return [data] + ["int8"] * (n_in - 1) + ["float32"] * (2 * n_in), \
        ["int32", "float32", "float32"]


register(OpDef(
    name="_contrib_quantized_conv", pattern="opaque", lowering=Extern(_conv_run),
    arguments=_arguments, outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("Convolution").attrs),
    infer_shape=_conv_shape, infer_type=_conv_type,
    reference=lambda attrs, ins, is_train: _conv_run(attrs, ins),
    gradient=zero_gradients,
    doc="int8 Convolution accumulated in int32, with the range of an int8 x int8 "
        "product."))


# -- quantized_concat --------------------------------------------------------------------

def _concat_run(attrs, ins):
    n = attrs["num_args"]
    data, ranges = ins[:n], [r.reshape(()).to(torch.float32) for r in ins[n:]]
    zero = torch.zeros((), dtype=torch.float32, device=data[0].device)
    out_lo = torch.minimum(zero, torch.stack(ranges[0::2]).min())
    out_hi = torch.maximum(zero, torch.stack(ranges[1::2]).max())
    out_t = torch.int8 if any(d.dtype == torch.int8 for d in data) else torch.uint8
    lo_lim, hi_lim, width = _LIMITS[out_t]
    out_scale = _f32(width, zero) / torch.maximum(out_lo.abs(), out_hi.abs())
    parts = []
    for d, lo, hi in zip(data, ranges[0::2], ranges[1::2]):
        scale = _f32(_LIMITS[d.dtype][2], zero) / torch.maximum(lo.abs(), hi.abs())
        if bool(scale == out_scale):
            parts.append(d.to(out_t))
            continue
        v = torch.round(d.to(torch.float32) * (out_scale / scale))
        parts.append(v.clamp(lo_lim, hi_lim).to(out_t))
    return [torch.cat(parts, dim=attrs["dim"]), out_lo.reshape(_RANGE), out_hi.reshape(_RANGE)]


def _concat_arguments(attrs):
    n = attrs["num_args"]
    return [f"arg{i}" for i in range(n)] + [f"arg{i}_{e}" for i in range(n)
                                            for e in ("min", "max")]


def _concat_shape(attrs, in_shapes):
    n = attrs["num_args"]
    shapes, outs = get_op("Concat").infer_shape(attrs, list(in_shapes[:n]))
    return list(shapes) + [_RANGE] * (2 * n), [outs[0], _RANGE, _RANGE]


def _concat_type(attrs, in_types):
    n = attrs["num_args"]
    data = [t if t in ("int8", "uint8") else "uint8" for t in in_types[:n]]
    out = "int8" if "int8" in data else "uint8"
    return data + ["float32"] * (2 * n), [out, "float32", "float32"]


register(OpDef(
    name="_contrib_quantized_concat", pattern="opaque", lowering=Extern(_concat_run),
    arguments=_concat_arguments, outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("Concat").attrs),
    infer_shape=_concat_shape, infer_type=_concat_type,
    reference=lambda attrs, ins, is_train: _concat_run(attrs, ins),
    gradient=zero_gradients,
    doc="Concat of int8/uint8 tensors rescaled into the widest of their ranges."))


# -- quantized_elemwise_add --------------------------------------------------------------

def _calibrated(attrs):
    return attrs["min_calib_range"] is not None and attrs["max_calib_range"] is not None


def _width(t):
    return _LIMITS[t][2] if t in _LIMITS else 2147483647.0


def _reorder(x, scale, to):
    lo, hi, _ = _LIMITS[to]
    return torch.round(x.to(torch.float32) * scale).clamp(lo, hi)


def _add_scales(attrs, a, b, ra, rb, out_t):
    """``(scale_a, scale_b, b as float)``, b reordered to int8 first where the dtypes mix."""
    f = lambda v: _f32(v, ra)          # noqa: E731
    wa, wb = f(_width(a.dtype)), f(_width(b.dtype))
    if _calibrated(attrs):
        r_out = f(float(max(abs(np.float32(attrs["min_calib_range"])),
                            abs(np.float32(attrs["max_calib_range"])))))
        out_scale = f(_width(out_t)) / r_out
        sa, sb = out_scale / (wa / ra), out_scale / (wb / rb)
    else:
        total, w_out = ra + rb, f(_width(out_t))
        # the uncalibrated scales divide by lhs's width (int8 rhs: by 127.5 when mixed)
        sa = ra * w_out / (total * wa)
        sb = rb * w_out / (total * (f(127.5) if a.dtype != b.dtype else wa))
    bf = b.to(torch.float32)
    if a.dtype != b.dtype:              # the uint8 operand is reordered to int8 first
        u8_is_b = b.dtype == torch.uint8
        if not _calibrated(attrs):
            u8_scale = (rb * f(_width(out_t)) / ((ra + rb) * f(255.5)) if u8_is_b
                        else ra * f(_width(out_t)) / ((ra + rb) * wa))
        else:
            u8_scale = sb if u8_is_b else sa
        if u8_is_b:
            bf, sb = _reorder(b, u8_scale, torch.int8), f(1.0)
        else:
            a, sa = _reorder(a, u8_scale, torch.int8), f(1.0)
    return sa, sb, a.to(torch.float32), bf


def _add_run(attrs, ins):
    a, b = ins[0], ins[1]
    lo_a, hi_a, lo_b, hi_b = [r.reshape(()).to(torch.float32) for r in ins[2:]]
    ra = torch.maximum(lo_a.abs(), hi_a.abs())
    rb = torch.maximum(lo_b.abs(), hi_b.abs())
    out_t = {"int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32}[
        _add_type(attrs, [str(a.dtype)[6:], str(b.dtype)[6:]])[1][0]]
    sa, sb, af, bf = _add_scales(attrs, a, b, ra, rb, out_t)
    v = torch.round(af * sa + bf * sb)
    lo, hi = (_LIMITS[out_t][:2] if out_t in _LIMITS else (-2147483648.0, 2147483647.0))
    out = v.clamp(lo, hi).to(torch.int64).to(out_t)
    if _calibrated(attrs):
        rng = [_f32([attrs["min_calib_range"]], ra), _f32([attrs["max_calib_range"]], ra)]
    else:
        rng = [(-(ra + rb)).reshape(_RANGE), (ra + rb).reshape(_RANGE)]
    return [out] + rng


def _add_type(attrs, in_types):
    ins = [t if t in ("int8", "uint8") else "int8" for t in in_types[:2]]
    out = "int32"
    if _calibrated(attrs):
        out = ins[0] if ins[0] == ins[1] else "int8"
    return ins + ["float32"] * 4, [out, "float32", "float32"]


def _add_shape(attrs, in_shapes):
    a, b = in_shapes[:2]
    if a is not None and b is not None and tuple(a) != tuple(b):
        raise ShapeError(f"quantized_elemwise_add: lhs {tuple(a)} and rhs {tuple(b)} must "
                         f"have the same shape")
    d = a if a is not None else b
    return [d, d] + [_RANGE] * 4, [None if d is None else tuple(d), _RANGE, _RANGE]


register(OpDef(
    name="_contrib_quantized_elemwise_add", pattern="opaque", lowering=Extern(_add_run),
    arguments=("lhs", "rhs", "lhs_min", "lhs_max", "rhs_min", "rhs_max"),
    outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("_contrib_quantized_elemwise_mul").attrs)[:2],
    infer_shape=_add_shape, infer_type=_add_type,
    reference=lambda attrs, ins, is_train: _add_run(attrs, ins),
    doc="Sum of two int8/uint8 tensors rescaled into int32 (uncalibrated) or the "
        "calibrated range (no gradient: mxnet registers none)."))


# -- quantized_fully_connected -----------------------------------------------------------
# mxnet's reference CPU kernel (cblas_gemm_s8u8s32): int8 data times int8 weight summed in
# int32 (here in float64, exact below 2^53), started from the int8 bias rescaled to the
# output's level; the output range is that of an int8 x int8 product:
# ``+-(R_data / 127) * (R_weight / 127) * 2^31``.

def _fc_arguments(attrs):
    if attrs["no_bias"]:
        return ["data", "weight", "min_data", "max_data", "min_weight", "max_weight"]
    return ["data", "weight", "bias", "min_data", "max_data", "min_weight", "max_weight",
            "min_bias", "max_bias"]


def _fc_run(attrs, ins):
    n_in = 2 if attrs["no_bias"] else 3
    data, weight = ins[0], ins[1]
    ranges = [r.reshape(()).to(torch.float32) for r in ins[n_in:]]
    top = _product_range(*ranges[:4])
    rows = data.reshape(data.shape[0], -1) if attrs["flatten"] else \
        data.reshape(-1, data.shape[-1])
    acc = rows.to(torch.float64) @ weight.to(torch.float64).t()
    if not attrs["no_bias"]:
        out_level = float(np.float32(float(top) / 2147483647.0))
        bias_level = float(np.float32(float(_max_abs(ranges[4], ranges[5])) / 127.0))
        if out_level != 0:
            start = (ins[2].to(torch.float32) * _f32(bias_level, top) / _f32(out_level, top)).trunc()
            acc = acc + start.to(torch.float64)
    out = acc.to(torch.int64).to(torch.int32)
    shape = (data.shape[0], attrs["num_hidden"]) if attrs["flatten"] else \
        tuple(data.shape[:-1]) + (attrs["num_hidden"],)
    return [out.reshape(shape), (-top).reshape(_RANGE), top.reshape(_RANGE)]


def _fc_shape(attrs, in_shapes):
    d = in_shapes[0]
    n_in = 2 if attrs["no_bias"] else 3
    if d is None:
        return in_shapes, [None, _RANGE, _RANGE]
    k = int(np.prod(d[1:])) if attrs["flatten"] else d[-1]
    h = attrs["num_hidden"]
    want = [tuple(d), (h, k)] + ([] if attrs["no_bias"] else [(h,)])
    for name, got, w in zip(("data", "weight", "bias"), in_shapes[:n_in], want):
        if got is not None and tuple(got) != w:
            raise ShapeError(f"quantized_fully_connected: {name} of shape {tuple(got)} must "
                             f"be {w} (num_hidden={h}, data {tuple(d)})")
    out = (d[0], h) if attrs["flatten"] else tuple(d[:-1]) + (h,)
    return want + [_RANGE] * (2 * n_in), [out, _RANGE, _RANGE]


def _fc_type(attrs, in_types):
    n_in = 2 if attrs["no_bias"] else 3
    return ["int8"] * n_in + ["float32"] * (2 * n_in), ["int32", "float32", "float32"]


register(OpDef(
    name="_contrib_quantized_fully_connected", pattern="opaque", lowering=Extern(_fc_run),
    arguments=_fc_arguments, outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("FullyConnected").attrs),
    infer_shape=_fc_shape, infer_type=_fc_type,
    reference=lambda attrs, ins, is_train: _fc_run(attrs, ins),
    gradient=zero_gradients,
    doc="int8 FullyConnected accumulated in int32, with the range of an int8 x int8 "
        "product."))
