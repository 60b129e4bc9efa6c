"""mxnet 1.9.1's contrib resizing operators: ``_contrib_BilinearResize2D`` and
``_contrib_AdaptiveAvgPooling2D`` (as mxnet's contrib operators of those names define them),
``mx.sym.contrib.BilinearResize2D`` / ``AdaptiveAvgPooling2D``.

Both are separable linear maps of the two spatial axes: ``out[n, c] = Mh @ x[n, c] @ Mw^T``
with an ``(out, in)`` matrix per axis. Each matrix is built from ``_axis_index``
coordinates with pointwise ops (no kernel of its own, no copy of the data), and the map is
one batched matmul over the height (the matrix broadcast over ``N * C``, a stride-0 view)
and one matmul over the width. Their gradients are those of the decomposition (the
matmuls' transposes), which is what mxnet's backward kernels compute: the adjoint of the
forward map.

Bilinear weights follow mxnet's ``area_pixel_compute_source_index``: the source position
of output row ``i`` is ``i * (H - 1) / (OH - 1)`` with ``align_corners`` (0 for a one-row
output), else ``max((i + 0.5) * H / OH - 0.5, 0)``; the scale is rounded to float32 as
mxnet computes it. mxnet reads rows ``floor(src)`` and ``floor(src) + 1`` (the last row
once at the border) with weights ``1 - frac`` and ``frac``: the tent
``max(0, 1 - |min(src, H - 1) - j|)``. Adaptive pooling averages rows
``floor(i * H / OH)`` to ``ceil((i + 1) * H / OH)`` (exclusive), as mxnet's
``START_IND`` / ``END_IND``.
"""
from __future__ import annotations

import numpy as np
import torch

from .contrib_common import cast_to, gradient_of_decomposition, require_rank
from .registry import (Attr, Decompose, OpDef, ShapeError, choice, parse_bool, parse_int,
                       parse_optional_float, parse_shape, register)


def _f32(x):
    return float(np.float32(x))


def _axis_grid(b, out_size, in_size):
    """``(i, j)``: the row and column coordinates of an ``(out_size, in_size)`` matrix."""
    shape = (out_size, in_size)
    return (b.op("_axis_index", shape=shape, axis=0), b.op("_axis_index", shape=shape, axis=1))


def _bilinear_matrix(b, out_size, in_size, align_corners):
    """The ``(out_size, in_size)`` interpolation weights of one axis."""
    i, j = _axis_grid(b, out_size, in_size)
    if out_size > 1:
        scale = _f32(np.float32(in_size - 1) / np.float32(out_size - 1)) if align_corners \
            else _f32(np.float32(in_size) / np.float32(out_size))
    else:
        scale = 0.0
    if align_corners:
        src = b.op("_mul_scalar", i, scalar=scale)
    else:
        src = b.op("_minus_scalar", b.op("_mul_scalar", b.op("_plus_scalar", i, scalar=0.5),
                                         scalar=scale), scalar=0.5)
        src = b.op("_maximum_scalar", src, scalar=0.0)
    src = b.op("_minimum_scalar", src, scalar=float(in_size - 1))
    dist = b.op("abs", b.op("elemwise_sub", src, j))
    return b.op("relu", b.op("_rminus_scalar", dist, scalar=1.0))


def _average_matrix(b, out_size, in_size):
    """The ``(out_size, in_size)`` adaptive-average weights of one axis."""
    i, j = _axis_grid(b, out_size, in_size)
    start = b.op("floor", b.op("_div_scalar", b.op("_mul_scalar", i, scalar=float(in_size)),
                               scalar=float(out_size)))
    end = b.op("ceil", b.op("_div_scalar", b.op("_mul_scalar", b.op("_plus_scalar", i,
                                                                     scalar=1.0),
                                                scalar=float(in_size)),
                            scalar=float(out_size)))
    inside = b.op("elemwise_mul", b.op("_greater_equal", j, start), b.op("_lesser", j, end))
    return b.op("elemwise_div", inside, b.op("elemwise_sub", end, start))


def separable_map(b, x, mh, mw):
    """``out[n, c] = mh @ x[n, c] @ mw^T`` for NCHW ``x``, ``mh`` ``(OH, H)``,
    ``mw`` ``(OW, W)``: one batched matmul (``mh`` broadcast, a view) and one matmul."""
    n, c, h, w = x.shape
    oh, ow = mh.shape[0], mw.shape[0]
    mh, mw = cast_to(b, mh, x.dtype), cast_to(b, mw, x.dtype)
    rows = b.op("Reshape", x, shape=(n * c, h, w))
    lhs = b.op("broadcast_to", b.op("Reshape", mh, shape=(1, oh, h)), shape=(n * c, oh, h))
    tall = b.op("batch_dot", lhs, rows)                                  # (NC, OH, W)
    flat = b.op("Reshape", tall, shape=(n * c * oh, w))
    out = b.op("dot", flat, mw, transpose_b=True)                         # (NC*OH, OW)
    return b.op("Reshape", out, shape=(n, c, oh, ow))


# -- BilinearResize2D -------------------------------------------------------------------

_MODES = ("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down",
          "to_odd_up")


def _scaled(size, scale):
    return int(np.float32(scale) * np.float32(size))


def _odd_scaled(size, scale):
    if size % 2 == 0:
        return int(np.float32(size) * np.float32(scale))
    return int(np.float32(size - 1) * np.float32(scale)) + 1


def _resize_size(attrs, dshape, like):
    """``(OH, OW)`` as mxnet's ``BilinearSampleOpInferShape``."""
    h, w = dshape[2], dshape[3]
    mode = attrs["mode"]
    sh, sw = attrs["scale_height"], attrs["scale_width"]
    if mode == "size":
        if sh is None:
            return attrs["height"], attrs["width"]
        if sw is None:     # mxnet reads scale_width whenever scale_height is set
            raise ShapeError("BilinearResize2D: scale_height is set but scale_width is not "
                             "(mode 'size' scales both axes when scale_height is given)")
        return _scaled(h, sh), _scaled(w, sw)
    if mode == "odd_scale":
        if sh is None or sw is None:
            raise ShapeError("BilinearResize2D: mode 'odd_scale' needs scale_height and "
                             "scale_width")
        return _odd_scaled(h, sh), _odd_scaled(w, sw)
    if mode == "like":
        require_rank("BilinearResize2D", "like", like, 4)
        return like[2], like[3]
    step = {"to_even_down": (0, -1), "to_even_up": (0, 1),
            "to_odd_down": (1, -1), "to_odd_up": (1, 1)}[mode]
    return tuple(s if s % 2 == step[0] else s + step[1] for s in (h, w))


def _resize_shape(attrs, in_shapes):
    x = in_shapes[0]
    like = in_shapes[1] if attrs["mode"] == "like" else None
    if x is None or (attrs["mode"] == "like" and like is None):
        return in_shapes, [None]
    require_rank("BilinearResize2D", "data", x, 4)
    oh, ow = _resize_size(attrs, x, like)
    if oh < 1 or ow < 1:
        raise ShapeError(f"BilinearResize2D: data of shape {tuple(x)} gives an empty output "
                         f"({oh}, {ow}) with mode {attrs['mode']!r}")
    return in_shapes, [tuple(x[:2]) + (oh, ow)]


def _resize_weights(out_size, in_size, align):
    """Torch version of ``_bilinear_matrix`` (float64), for the reference."""
    i = torch.arange(out_size, dtype=torch.float64)[:, None]
    j = torch.arange(in_size, dtype=torch.float64)[None, :]
    if out_size > 1:
        scale = _f32(np.float32(in_size - 1) / np.float32(out_size - 1)) if align \
            else _f32(np.float32(in_size) / np.float32(out_size))
    else:
        scale = 0.0
    src = i * scale if align else ((i + 0.5) * scale - 0.5).clamp(min=0.0)
    src = src.clamp(max=in_size - 1)
    return (1.0 - (src - j).abs()).clamp(min=0.0)


def _resize_ref(attrs, ins, is_train):
    x = ins[0]
    oh, ow = _resize_size(attrs, tuple(x.shape), tuple(ins[1].shape) if len(ins) > 1 else None)
    mh = _resize_weights(oh, x.shape[2], attrs["align_corners"]).to(x.dtype)
    mw = _resize_weights(ow, x.shape[3], attrs["align_corners"]).to(x.dtype)
    return [torch.einsum("oh,nchw,pw->ncop", mh, x, mw)]


def _resize_build(b, n, is_train):
    x = n.inputs[0]
    _, _, h, w = n.in_shapes[0]
    oh, ow = n.out_shapes[0][2:]
    align = n.attrs["align_corners"]
    return [separable_map(b, x, _bilinear_matrix(b, oh, h, align),
                          _bilinear_matrix(b, ow, w, align))]


register(OpDef(
    name="_contrib_BilinearResize2D", pattern="composite", lowering=Decompose(_resize_build),
    arguments=lambda attrs: ("data", "like") if attrs["mode"] == "like" else ("data",),
    attrs=[Attr("height", parse_int, 1), Attr("width", parse_int, 1),
           Attr("scale_height", parse_optional_float, None),
           Attr("scale_width", parse_optional_float, None),
           Attr("mode", choice(*_MODES), "size"), Attr("align_corners", parse_bool, True)],
    infer_shape=_resize_shape, reference=_resize_ref,
    gradient=gradient_of_decomposition(_resize_build),
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    dim_links=lambda attrs, i, o: [[("in", 0, 0), ("out", 0, 0)], [("in", 0, 1), ("out", 0, 1)]],
    doc="Bilinear resizing of NCHW data to (height, width), scaled sizes, like's size or the "
        "nearest even / odd size; align_corners as mxnet."))


# -- AdaptiveAvgPooling2D ---------------------------------------------------------------

def _pool_size(attrs):
    size = tuple(attrs["output_size"])
    if len(size) == 1:
        return size[0], size[0]
    if len(size) == 2:
        return size
    return 1, 1          # mxnet: () and anything longer than 2 give 1 x 1


def _pool_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    require_rank("AdaptiveAvgPooling2D", "data", x, 4)
    oh, ow = _pool_size(attrs)
    if oh < 1 or ow < 1:
        raise ShapeError(f"AdaptiveAvgPooling2D: output_size={tuple(attrs['output_size'])} "
                         f"must be positive")
    return in_shapes, [tuple(x[:2]) + (oh, ow)]


def _pool_ref(attrs, ins, is_train):
    x = ins[0]
    oh, ow = _pool_size(attrs)
    return [torch.nn.functional.adaptive_avg_pool2d(x, (oh, ow))]


def _pool_build(b, n, is_train):
    _, _, h, w = n.in_shapes[0]
    oh, ow = n.out_shapes[0][2:]
    return [separable_map(b, n.inputs[0], _average_matrix(b, oh, h), _average_matrix(b, ow, w))]


register(OpDef(
    name="_contrib_AdaptiveAvgPooling2D", pattern="composite", lowering=Decompose(_pool_build),
    attrs=[Attr("output_size", parse_shape, ())],
    infer_shape=_pool_shape, reference=_pool_ref,
    gradient=gradient_of_decomposition(_pool_build),
    dim_links=lambda attrs, i, o: [[("in", 0, 0), ("out", 0, 0)], [("in", 0, 1), ("out", 0, 1)]],
    doc="Average pooling of NCHW data to output_size (one int or (height, width)); the "
        "windows start at floor(i * H / OH) and end at ceil((i + 1) * H / OH)."))
