"""mxnet 1.9.1's ``_contrib_quantized_conv`` (``src/operator/quantization/quantized_conv*``),
``mx.sym.contrib.quantized_conv``, as an extern launch.

int8 weight, int8 data (mxnet's GPU kernel) or uint8 data (the only data its CPU MKLDNN
kernel takes; the same sums and range here), ``num_group=1``, NCHW (or NCDHW) layout; the products are summed in
int32 (here a float64 convolution, exact below 2^53) and the output range is that of an
int8 x int8 product, ``+-(R_data / 127) * (R_weight / 127) * 2^31``. With a bias, each int32
value ``v`` becomes ``trunc((v * f_out + b * f_bias) / f_out)`` in float32, with
``f_out = R_out / (2^31 - 1)`` and ``f_bias = R_bias / 127``: mxnet's reference kernel (its
GPU one; on CPU mxnet has only MKLDNN's, which rescales the bias with other constants).
Zero gradients, as mxnet (``MakeZeroGradNodes``).
"""
from __future__ import annotations

import numpy as np
import torch

from .contrib_common import zero_gradients
from .quantization import _RANGE, _f32, _product_range
from .registry import Extern, OpDef, ShapeError, get_op, register


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
