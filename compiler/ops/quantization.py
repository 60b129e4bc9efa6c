"""mxnet 1.9.1's quantization operators, as extern launches:
``_contrib_quantize``, ``_contrib_quantize_v2``, ``_contrib_dequantize``,
``_contrib_requantize``, ``_contrib_quantized_flatten``, ``_contrib_quantized_elemwise_mul``,
``_contrib_quantized_embedding``, ``_contrib_quantized_act`` and ``_contrib_quantized_pooling``
(``mx.sym.contrib.X``); the quantized layers summing in int32 are in ``quantization_conv.py``.

Integer kernels are not worth generating here: each operator is one extern launch of a few
ATen calls that repeat, operation for operation, the float32 arithmetic of mxnet's CPU
reference kernels (its non-MKLDNN ``FCompute``), so the integers come out the same:

* zero-centred (int8): ``q = trunc(sign(x) * min(|x| * (127 / R) + 0.5, 127))`` with
  ``R = max(|min|, |max|)``, the output range ``(-R, R)``; back, ``x = q * (R / 127)``;
* unsigned (uint8): ``q = trunc((x - min) * (255 / (max - min)) + 0.5)`` (the scale divided
  in double, the sum in double), the range kept; back, ``x = q * ((max - min) / 255) + min``.
  mxnet casts a float beyond ``[0, 255]`` to uint8 undefinedly (data outside the range
  given); here it saturates;
* int32 values (``requantize``) stand for ``q * (R / 2^31)``.

quantized_act and quantized_pooling have no reference kernel on mxnet's CPU (MKLDNN only;
cuDNN for pooling on GPUs), so they follow MKLDNN (see their section).

Every range is a ``(1,)`` float32 array. None of these operators has a gradient in mxnet
(``MakeZeroGradNodes``): every input gets zeros; quantized_act registers no gradient at
all, so asking for one through it is an error, as in mxnet. ``requantize`` to uint8 is
computed only by mxnet's MKLDNN kernel (its reference kernel writes int8 whatever
``out_type`` says and stops on a uint8 output), so it is refused at type inference.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import MXNetError
from .contrib_common import zero_gradients
from .registry import (Attr, Extern, OpDef, ShapeError, choice, get_op, parse_bool,
                       parse_optional_float, register)

_F32 = torch.float32
_RANGE = (1,)
_Q = {"int8": torch.int8, "uint8": torch.uint8}


# -- the arithmetic of quantization_utils.h, in float32 ----------------------------------

def _f32(v, like):
    return torch.as_tensor(v, dtype=_F32, device=like.device)


def _max_abs(a, b):
    return torch.maximum(a.abs(), b.abs())


def to_int8(x, real_range):
    """FloatToQuantized<int8>: zero-centred, saturating at +-127, truncated."""
    qr = _f32(127.0, x)
    scale = qr / real_range
    v = torch.sign(x) * torch.minimum(x.abs() * scale + _f32(0.5, x), qr)
    return v.trunc().to(torch.int8)


def to_uint8(x, lo, hi):
    """quantize_unsigned: ``(x - lo) * scale + 0.5`` truncated, the scale and the sum in
    double as mxnet's kernel computes them."""
    scale = (255.0 / (hi - lo).double()).float()
    v = ((x - lo) * scale).double() + 0.5
    return v.trunc().clamp(0, 255).to(torch.uint8)


def from_quantized(q, lo, hi):
    """dequantize: int8 zero-centred, uint8 over ``[lo, hi]``, int32 over ``+-2^31``."""
    if q.dtype == torch.uint8:
        scale = (hi - lo) / _f32(255.0, lo)
        return q.to(_F32) * scale + lo
    qr = _f32(127.0 if q.dtype == torch.int8 else 2147483648.0, lo)
    return q.to(_F32) * (_max_abs(lo, hi) / qr)


def _quantize(x, lo, hi, out_type):
    """``(q, out_min, out_max)`` of float32 ``x`` over the range ``[lo, hi]``."""
    if out_type == "uint8":
        return [to_uint8(x, lo, hi), lo.reshape(_RANGE), hi.reshape(_RANGE)]
    r = _max_abs(lo, hi)
    return [to_int8(x, r), (-r).reshape(_RANGE), r.reshape(_RANGE)]


# -- shapes and types --------------------------------------------------------------------

def _ranged_shape(out_of_data=lambda s: tuple(s), n_out=3):
    """Data plus two ``(1,)`` ranges in, the data's shape (or ``out_of_data``) and two
    ``(1,)`` ranges out."""
    def infer(attrs, in_shapes):
        shapes = [in_shapes[0]] + [_RANGE] * (len(in_shapes) - 1)
        for s in in_shapes[1:]:
            if s is not None and tuple(s) not in ((1,), ()):
                raise ShapeError(f"quantization: a range input of shape {tuple(s)} must be (1,)")
        d = in_shapes[0]
        outs = [None if d is None else out_of_data(d)] + [_RANGE] * (n_out - 1)
        return shapes, outs
    return infer


def _v2_out_type(attrs):
    """GetQuantizeOutputType: ``auto`` is uint8 for a calibrated range from 0 up, else int8."""
    t = attrs["out_type"]
    if t != "auto":
        return t
    lo, hi = attrs["min_calib_range"], attrs["max_calib_range"]
    return "uint8" if lo is not None and hi is not None and lo >= 0.0 else "int8"


def _expect(got, allowed):
    """The dtype an input must have: ``got`` where mxnet takes it, else the first one
    mxnet takes (``passes/infer_types.py`` refuses the difference, naming both)."""
    return got if got in allowed else allowed[0]


# -- quantize ----------------------------------------------------------------------------

def _quantize_run(attrs, ins):
    x, lo, hi = ins
    return _quantize(x.to(_F32), lo.reshape(()).to(_F32), hi.reshape(()).to(_F32),
                     attrs["out_type"])


register(OpDef(
    name="_contrib_quantize", pattern="opaque", lowering=Extern(_quantize_run),
    arguments=("data", "min_range", "max_range"),
    outputs=("output0", "output1", "output2"),
    attrs=[Attr("out_type", choice("int8", "uint8"), "uint8")],
    infer_shape=_ranged_shape(),
    infer_type=lambda attrs, t: (["float32"] * 3, [attrs["out_type"], "float32", "float32"]),
    reference=lambda attrs, ins, is_train: _quantize_run(attrs, ins),
    gradient=zero_gradients,
    doc="float32 data to int8 (zero-centred) or uint8 over the range [min_range, "
        "max_range]; outputs (data, min, max) of the quantized range."))


# -- quantize_v2 -------------------------------------------------------------------------

def _v2_run(attrs, ins):
    x = ins[0]
    lo, hi = attrs["min_calib_range"], attrs["max_calib_range"]
    calibrated = lo is not None and hi is not None
    if x.dtype in (torch.int8, torch.uint8):      # already quantized: passed through
        if not calibrated:
            lo, hi = (0.0, 255.0) if x.dtype == torch.uint8 else (-127.0, 127.0)
        return [x.clone(), _f32([lo], x), _f32([hi], x)]
    x = x.to(_F32)
    if calibrated:
        lo_t, hi_t = _f32(lo, x), _f32(hi, x)
    else:
        lo_t, hi_t = x.min(), x.max()
    return _quantize(x, lo_t, hi_t, _v2_out_type(attrs))


def _v2_type(attrs, in_types):
    out = _v2_out_type(attrs)
    # int8 / uint8 data passes through unchanged: it must be of the output's dtype
    want = out if in_types[0] in _Q else "float32"
    return [want], [out, "float32", "float32"]


register(OpDef(
    name="_contrib_quantize_v2", pattern="opaque", lowering=Extern(_v2_run),
    arguments=("data",), outputs=("output0", "output1", "output2"),
    attrs=[Attr("out_type", choice("auto", "int8", "uint8"), "int8"),
           Attr("min_calib_range", parse_optional_float, None),
           Attr("max_calib_range", parse_optional_float, None)],
    infer_shape=lambda attrs, s: (s, [None if s[0] is None else tuple(s[0]), _RANGE, _RANGE]),
    infer_type=_v2_type,
    reference=lambda attrs, ins, is_train: _v2_run(attrs, ins),
    gradient=zero_gradients,
    doc="float32 data to int8/uint8 over the calibrated range, or the data's own "
        "min/max; int8/uint8 data passes through."))


# -- dequantize --------------------------------------------------------------------------

def _dequantize_run(attrs, ins):
    q, lo, hi = ins
    return [from_quantized(q, lo.reshape(()).to(_F32), hi.reshape(()).to(_F32))]


def _dequantize_type(attrs, in_types):
    return [_expect(in_types[0], ("int8", "uint8")), "float32", "float32"], ["float32"]


register(OpDef(
    name="_contrib_dequantize", pattern="opaque", lowering=Extern(_dequantize_run),
    arguments=("data", "min_range", "max_range"), outputs=("output",),
    attrs=[Attr("out_type", choice("float32"), "float32")],
    infer_shape=_ranged_shape(n_out=1), infer_type=_dequantize_type,
    reference=lambda attrs, ins, is_train: _dequantize_run(attrs, ins),
    gradient=zero_gradients,
    doc="int8 (zero-centred) or uint8 data over [min_range, max_range] back to float32."))


# -- requantize --------------------------------------------------------------------------

def _requantize_run(attrs, ins):
    q, lo, hi = ins
    lo, hi = lo.reshape(()).to(_F32), hi.reshape(()).to(_F32)
    clo, chi = attrs["min_calib_range"], attrs["max_calib_range"]
    if clo is not None and chi is not None:
        r = _f32(float(np.float32(max(abs(np.float32(clo)), abs(np.float32(chi))))), q)
    else:
        ends = from_quantized(torch.stack([q.min(), q.max()]), lo, hi)
        r = _max_abs(ends[0], ends[1])
    return [to_int8(from_quantized(q, lo, hi), r), (-r).reshape(_RANGE), r.reshape(_RANGE)]


def _requantize_type(attrs, in_types):
    if _v2_out_type(attrs) != "int8":
        raise MXNetError("requantize: a uint8 output is computed only by mxnet's MKLDNN "
                         "kernel (its reference kernel writes int8); use out_type='int8'")
    return ["int32", "float32", "float32"], ["int8", "float32", "float32"]


register(OpDef(
    name="_contrib_requantize", pattern="opaque", lowering=Extern(_requantize_run),
    arguments=("data", "min_range", "max_range"),
    outputs=("output0", "output1", "output2"),
    attrs=[Attr("out_type", choice("auto", "int8", "uint8"), "int8"),
           Attr("min_calib_range", parse_optional_float, None),
           Attr("max_calib_range", parse_optional_float, None)],
    infer_shape=_ranged_shape(), infer_type=_requantize_type,
    reference=lambda attrs, ins, is_train: _requantize_run(attrs, ins),
    gradient=zero_gradients,
    doc="int32 data over [min_range, max_range] (as +-2^31) to int8 over the calibrated "
        "range, or the range of the data's own extremes."))


# -- quantized_flatten -------------------------------------------------------------------

def _flatten_run(attrs, ins):
    q, lo, hi = ins
    return [q.reshape(q.shape[0], -1).clone(), lo.reshape(_RANGE).clone(),
            hi.reshape(_RANGE).clone()]


def _flatten_type(attrs, in_types):
    t = _expect(in_types[0], ("int8", "uint8"))
    return [t, "float32", "float32"], [t, "float32", "float32"]


def _flat(shape):
    rest = 1
    for d in shape[1:]:
        rest *= d
    return (shape[0], rest)


register(OpDef(
    name="_contrib_quantized_flatten", pattern="opaque", lowering=Extern(_flatten_run),
    arguments=("data", "min_data", "max_data"),
    outputs=("output", "min_output", "max_output"),
    infer_shape=_ranged_shape(_flat), infer_type=_flatten_type,
    reference=lambda attrs, ins, is_train: _flatten_run(attrs, ins),
    gradient=zero_gradients,
    doc="Flatten of int8/uint8 data to (N, rest); the range passes through."))


# -- quantized_elemwise_mul --------------------------------------------------------------
# mxnet's CPU kernel (no MKLDNN one): int8 * int8 products scaled in float32 and truncated;
# int32 products over the product of the two ranges when uncalibrated, int8 over the
# calibrated range, float32 with ``enable_float_output``. Its range constant is 127.5.

def _calibrated(attrs):
    return attrs["min_calib_range"] is not None and attrs["max_calib_range"] is not None


def _mul_run(attrs, ins):
    a, b, alo, ahi, blo, bhi = ins
    prod = a.to(torch.int32) * b.to(torch.int32)
    half = _f32(127.5, alo)
    a_scale = half / _max_abs(alo.reshape(()), ahi.reshape(()))
    b_scale = half / _max_abs(blo.reshape(()), bhi.reshape(()))
    if attrs["enable_float_output"]:
        scale = torch.tensor(1.0 / float(a_scale) / float(b_scale), dtype=_F32)
        return [prod.to(_F32) * scale.to(a.device)]
    if _calibrated(attrs):
        lo, hi = attrs["min_calib_range"], attrs["max_calib_range"]
        r = _f32(float(max(abs(np.float32(lo)), abs(np.float32(hi)))), a)
        scale = half / r / a_scale / b_scale
        # beyond int8 the cast is undefined in C++; mxnet's x86 build converts to int32 and
        # keeps the low byte (148 becomes -108), as here
        out = (prod.to(_F32) * scale).trunc().to(torch.int32).to(torch.int8)
        return [out, _f32([lo], a), _f32([hi], a)]
    level = (_max_abs(alo, ahi) / _f32(127.0, a)) * (_max_abs(blo, bhi) / _f32(127.0, a))
    top = (level * _f32(2147483648.0, a)).reshape(_RANGE)
    return [prod, -top, top]


def _mul_outputs(attrs):
    return ("output",) if attrs["enable_float_output"] else ("output", "min_output",
                                                              "max_output")


def _mul_shape(attrs, in_shapes):
    lhs, rhs = in_shapes[:2]
    if lhs is not None and rhs is not None and tuple(lhs) != tuple(rhs):
        raise ShapeError(f"quantized_elemwise_mul: lhs {tuple(lhs)} and rhs {tuple(rhs)} "
                         f"must have the same shape (no broadcasting)")
    d = lhs if lhs is not None else rhs
    n_out = len(_mul_outputs(attrs))
    return ([d, d] + [_RANGE] * 4,
            [None if d is None else tuple(d)] + [_RANGE] * (n_out - 1))


def _mul_type(attrs, in_types):
    if attrs["enable_float_output"]:
        outs = ["float32"]
    else:
        outs = ["int8" if _calibrated(attrs) else "int32", "float32", "float32"]
    return ["int8", "int8"] + ["float32"] * 4, outs


register(OpDef(
    name="_contrib_quantized_elemwise_mul", pattern="opaque", lowering=Extern(_mul_run),
    arguments=("lhs", "rhs", "lhs_min", "lhs_max", "rhs_min", "rhs_max"),
    outputs=_mul_outputs,
    attrs=[Attr("min_calib_range", parse_optional_float, None),
           Attr("max_calib_range", parse_optional_float, None),
           Attr("enable_float_output", parse_bool, False)],
    infer_shape=_mul_shape, infer_type=_mul_type,
    reference=lambda attrs, ins, is_train: _mul_run(attrs, ins),
    gradient=zero_gradients,
    doc="Elementwise product of two int8 tensors: int32 (uncalibrated), int8 over the "
        "calibrated range, or float32."))


# -- quantized_embedding -----------------------------------------------------------------

def _embedding_run(attrs, ins):
    idx, w, lo, hi = ins
    rows = idx.to(torch.int64).clamp(0, w.shape[0] - 1)
    return [w[rows], lo.reshape(_RANGE).clone(), hi.reshape(_RANGE).clone()]


def _embedding_shape(attrs, in_shapes):
    d = in_shapes[0]
    w = (attrs["input_dim"], attrs["output_dim"])
    if in_shapes[1] is not None and tuple(in_shapes[1]) != w:
        raise ShapeError(f"quantized_embedding: weight of shape {tuple(in_shapes[1])} must "
                         f"be (input_dim, output_dim) = {w}")
    return ([d, w, _RANGE, _RANGE],
            [None if d is None else tuple(d) + (attrs["output_dim"],), _RANGE, _RANGE])


register(OpDef(
    name="_contrib_quantized_embedding", pattern="opaque", lowering=Extern(_embedding_run),
    arguments=("data", "weight", "min_weight", "max_weight"),
    outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("Embedding").attrs),
    infer_shape=_embedding_shape,
    infer_type=lambda attrs, t: ([t[0], "int8", "float32", "float32"],
                                 ["int8", "float32", "float32"]),
    reference=lambda attrs, ins, is_train: _embedding_run(attrs, ins),
    gradient=zero_gradients,
    doc="Rows of an int8 weight picked by (clipped) indices; the weight's range passes "
        "through."))


# -- quantized_act, quantized_pooling ----------------------------------------------------
# mxnet's pip build computes both with MKLDNN only (their storage-type rules choose it on
# every CPU; the reference pooling kernel is cuDNN's): relu and max pooling are exact on
# integers, an average is rounded to nearest, ties to even, as MKLDNN's int8 pooling does.
# The range passes through.

def _act_run(attrs, ins):
    q, lo, hi = ins
    return [torch.clamp(q, min=0), lo.reshape(_RANGE).clone(), hi.reshape(_RANGE).clone()]


def _act_type(attrs, in_types):
    if attrs["act_type"] != "relu":
        raise MXNetError(f"_contrib_quantized_act only supports act_type=relu for now, got "
                         f"{attrs['act_type']!r}")
    return ["int8", "float32", "float32"], ["int8", "float32", "float32"]


register(OpDef(
    name="_contrib_quantized_act", pattern="opaque", lowering=Extern(_act_run),
    arguments=("data", "min_data", "max_data"),
    outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("Activation").attrs),
    infer_shape=_ranged_shape(), infer_type=_act_type,
    reference=lambda attrs, ins, is_train: _act_run(attrs, ins),
    doc="relu of int8 data; the range passes through (no gradient: mxnet registers "
        "none)."))


def _mkldnn_avg(attrs, x, out_shape):
    """MKLDNN's average including padding: every window divided by the kernel's area, also
    where the ``full`` convention runs it past the padded input (the float Pooling clips
    the divisor there)."""
    k, st = tuple(attrs["kernel"]), tuple(attrs["stride"]) or (1,) * len(attrs["kernel"])
    pad = tuple(attrs["pad"]) or (0,) * len(k)
    spatial = x.shape[2:]
    widths = []
    for i in reversed(range(len(k))):
        extra = (out_shape[2 + i] - 1) * st[i] + k[i] - (spatial[i] + 2 * pad[i])
        widths += [pad[i], pad[i] + max(extra, 0)]
    xp = torch.nn.functional.pad(x, widths)
    pool = torch.nn.functional.avg_pool2d if len(k) == 2 else torch.nn.functional.avg_pool3d
    return pool(xp, k, st)


def _pool_run(attrs, ins):
    q, lo, hi = ins
    x = q.to(_F32)
    out = get_op("Pooling").reference(attrs, [x], False)[0]
    if attrs["pool_type"] == "avg":
        if attrs["count_include_pad"] is not False and not attrs["global_pool"]:
            out = _mkldnn_avg(attrs, x, tuple(out.shape))
        out = torch.round(out)
    return [out.to(q.dtype), lo.reshape(_RANGE).clone(), hi.reshape(_RANGE).clone()]


def _pool_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is not None and (len(d) not in (4, 5) or attrs["layout"] not in (None, "NCHW",
                                                                          "NCDHW")):
        raise ShapeError(f"quantized_pooling: data of shape {tuple(d)}: mxnet pools 4-D "
                         f"(N, C, H, W) or 5-D (N, C, D, H, W) data only")
    _, outs = get_op("Pooling").infer_shape(attrs, [d])
    return [d, _RANGE, _RANGE], [outs[0], _RANGE, _RANGE]


def _pool_type(attrs, in_types):
    if attrs["pool_type"] not in ("max", "avg"):
        raise MXNetError(f"QuantizedPoolingOp only supports pool_type=max/avg for now, got "
                         f"{attrs['pool_type']!r}")
    t = _expect(in_types[0], ("int8", "uint8"))
    return [t, "float32", "float32"], [t, "float32", "float32"]


register(OpDef(
    name="_contrib_quantized_pooling", pattern="opaque", lowering=Extern(_pool_run),
    arguments=("data", "min_data", "max_data"),
    outputs=("output", "min_output", "max_output"),
    attrs=list(get_op("Pooling").attrs),
    infer_shape=_pool_shape, infer_type=_pool_type,
    reference=lambda attrs, ins, is_train: _pool_run(attrs, ins),
    gradient=zero_gradients,
    doc="Max or average pooling of int8/uint8 data (averages rounded to nearest); the "
        "range passes through."))


# -- shared with quantization_conv.py ----------------------------------------------------

def _product_range(alo, ahi, blo, bhi):
    """QuantizationRangeForMultiplication<int8, int8, int32>: the top of the range of an
    int32 sum of int8 x int8 products, ``(R_a / 127) * (R_b / 127) * 2^31``."""
    level = (_max_abs(alo, ahi) / _f32(127.0, alo)) * (_max_abs(blo, bhi) / _f32(127.0, alo))
    return level * _f32(2147483648.0, alo)
