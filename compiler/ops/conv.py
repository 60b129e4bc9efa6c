"""Convolution and Deconvolution, as mxnet 1.9.1's operators of those names define them,
with the internal ops their gradients are made of.

Every operator here is one implicit GEMM of three (``CONV_KINDS``), in the roles of a
convolution ``y = conv(x, w)``: x ``(N, C, *X)``, w ``(O, C/G, *K)``, y ``(N, O, *Y)``:

* ``conv_fwd``:   y from x and w (+ bias)                 -- Convolution
* ``conv_dgrad``: x from y and w, the transposed conv (+ bias) -- Deconvolution,
  ``_conv_data_grad`` (Convolution's data gradient)
* ``conv_wgrad``: w from x and y                          -- ``_conv_weight_grad``

:func:`conv_problem` states, for a node, which tensor plays which role and the
geometry (stride, pad, dilate, groups); the kernel builders (``compiler/triton/conv.py``)
read nothing else. Deconvolution's data gradient is a Convolution of the output
gradient with the same weight, its weight gradient a ``_conv_weight_grad`` with the
roles of x and y swapped.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import MXNetError
from .registry import (Attr, OpDef, ShapeError, Special, choice, merge_shape, parse_bool,
                       parse_int, parse_nonneg_int, parse_positive_int, parse_shape, prod,
                       register)

CONV_KINDS = ("conv_fwd", "conv_dgrad", "conv_wgrad")
_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _optional_choice(*options):
    parse = choice(*options)

    def parse_optional(v):
        return None if v is None or str(v).strip() in ("None", "") else parse(v)
    parse_optional.__name__ = parse.__name__
    return parse_optional


def _deconv_workspace(v):
    n = parse_nonneg_int(v)
    if n > 8192:
        raise ValueError(f"must be at most 8192 (MB), got {n}")
    return n


_COMMON = [Attr("kernel", parse_shape), Attr("stride", parse_shape, ()),
           Attr("dilate", parse_shape, ()), Attr("pad", parse_shape, ()),
           Attr("num_filter", parse_positive_int), Attr("num_group", parse_positive_int, 1),
           Attr("cudnn_tune", _optional_choice("off", "limited_workspace", "fastest"), None),
           Attr("cudnn_off", parse_bool, False),
           Attr("layout", _optional_choice("NCW", "NCHW", "NCDHW", "NHWC", "NDHWC"), None)]


def geometry(op: str, attrs: dict) -> dict:
    """``kernel``, ``stride``, ``dilate``, ``pad`` (and ``adj`` for Deconvolution) with
    mxnet's defaults filled in (ones, ones, zeros, zeros), checked as mxnet's parameter
    parser checks them."""
    kernel = tuple(attrs["kernel"])
    nd = len(kernel)
    if nd not in (1, 2, 3):
        raise ShapeError(f"{op}: kernel={kernel} has {nd} dims; 1-D, 2-D and 3-D "
                         f"(NCW, NCHW, NCDHW) are supported")
    if any(k < 1 for k in kernel):
        raise ShapeError(f"{op}: incorrect kernel size {kernel}")
    names = ("stride", "dilate", "pad") + (("adj",) if "adj" in attrs else ())
    out = {"kernel": kernel}
    for name in names:
        value = tuple(attrs[name]) or ((1,) * nd if name in ("stride", "dilate") else (0,) * nd)
        if len(value) != nd:
            raise ShapeError(f"{op}: {name}={value} must have as many dims as kernel={kernel}")
        low = 1 if name in ("stride", "dilate") else 0
        if any(v < low for v in value):
            raise ShapeError(f"{op}: {name}={value} must be at least {low} in every dim")
        out[name] = value
    layout = attrs["layout"]
    if layout is not None and layout != _LAYOUTS[nd]:
        raise ShapeError(f"{op}: layout={layout} is not supported; only the channel-first "
                         f"layout of a {nd}-D kernel ({_LAYOUTS[nd]}) is. Transpose the data "
                         f"to {_LAYOUTS[nd]} (mx.sym.transpose) and drop the layout attribute")
    return out


def _dilated(geo, i):
    return 1 + (geo["kernel"][i] - 1) * geo["dilate"][i]


def _check_channels(op, channels, attrs):
    g = attrs["num_group"]
    if channels is not None and channels % g:
        raise ShapeError(f"{op}: the data's {channels} channels are not divisible by "
                         f"num_group={g} (input num_filter must divide group size)")
    if attrs["num_filter"] % g:
        raise ShapeError(f"{op}: num_filter={attrs['num_filter']} is not divisible by "
                         f"num_group={g} (output num_filter must divide group size)")


# -- Convolution ------------------------------------------------------------------------

def _conv_shape(attrs, in_shapes):
    geo = geometry("Convolution", attrs)
    nd = len(geo["kernel"])
    dshape = in_shapes[0]
    f, g = attrs["num_filter"], attrs["num_group"]
    if dshape is None:
        return in_shapes, [None]
    dshape = tuple(dshape)
    if len(dshape) != nd + 2:
        raise ShapeError(f"Convolution: data of shape {dshape} must be {nd + 2}-D "
                         f"({_LAYOUTS[nd]}) for a {nd}-D kernel {geo['kernel']}")
    _check_channels("Convolution", dshape[1], attrs)
    shapes = [dshape, merge_shape(in_shapes[1], (f, dshape[1] // g) + geo["kernel"],
                                  "Convolution weight")]
    if not attrs["no_bias"]:
        shapes.append(merge_shape(in_shapes[2], (f,), "Convolution bias"))
    out = [dshape[0], f]
    for i in range(nd):
        if dshape[2 + i] == 0:          # mxnet's unknown dim (partial inference) stays so
            out.append(0)
            continue
        padded = dshape[2 + i] + 2 * geo["pad"][i]
        if _dilated(geo, i) > padded:
            raise ShapeError(f"Convolution: kernel size exceeds input: dilated kernel "
                             f"{_dilated(geo, i)} > padded input {padded} in spatial dim {i} "
                             f"of data {dshape} (kernel={geo['kernel']}, pad={geo['pad']}, "
                             f"dilate={geo['dilate']})")
        out.append((padded - _dilated(geo, i)) // geo["stride"][i] + 1)
    return shapes, [tuple(out)]


_CONV_F = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_DECONV_F = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _conv_ref(attrs, ins, is_train):
    geo = geometry("Convolution", attrs)
    bias = None if attrs["no_bias"] else ins[2]
    return [_CONV_F[len(geo["kernel"])](ins[0], ins[1], bias, geo["stride"], geo["pad"],
                                        geo["dilate"], attrs["num_group"])]


def _geo_attrs(geo, attrs):
    """The attributes of the internal gradient ops."""
    return {"kernel": geo["kernel"], "stride": geo["stride"], "dilate": geo["dilate"],
            "pad": geo["pad"], "num_group": attrs["num_group"]}


def _conv_gradient(b, n):
    """dx: the transposed convolution of dy; dW: x (*) dy; db: dy summed but for axis 1."""
    geo = geometry("Convolution", n.attrs)
    x, w = n.inputs[0], n.inputs[1]
    dy = n.ograds[0]
    common = _geo_attrs(geo, n.attrs)
    grads = [b.op("_conv_data_grad", dy, w, data_shape=n.in_shapes[0], **common),
             b.op("_conv_weight_grad", x, dy, weight_shape=n.in_shapes[1], **common)]
    if not n.attrs["no_bias"]:
        grads.append(b.op("sum", dy, axis=(1,), exclude=True))
    return grads


def _batch_link(attrs, in_ranks, out_ranks):
    return [[("in", 0, 0), ("out", 0, 0)]]


def _conv_shape_back(attrs, in_dims, out_dims):
    """mxnet's incomplete inference: an unknown (0) spatial dim of the data from the
    output's where that dim's stride is 1 (out = in + 2 pad - dilated kernel + 1)."""
    x, y = in_dims[0], out_dims[0]
    geo = geometry("Convolution", attrs)
    nd = len(geo["kernel"])
    if x is None or y is None or len(x) != nd + 2 or len(y) != nd + 2:
        return [None] * len(in_dims)
    new = list(x)
    for i in range(nd):
        size = y[2 + i] + _dilated(geo, i) - 1 - 2 * geo["pad"][i]
        if not x[2 + i] and y[2 + i] and geo["stride"][i] == 1 and size > 0:
            new[2 + i] = size
    return [new] + [None] * (len(in_dims) - 1)


register(OpDef(
    name="Convolution", pattern="opaque", lowering=Special("conv_fwd"), rows_independent=True,
    arguments=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    attrs=_COMMON + [Attr("workspace", parse_nonneg_int, 1024), Attr("no_bias", parse_bool, False)],
    infer_shape=_conv_shape, reference=_conv_ref, gradient=_conv_gradient,
    dim_links=_batch_link, infer_shape_back=_conv_shape_back,
    doc="y[n, o] = b[o] + sum over c in o's group and kernel offsets of "
        "w[o, c, k] * x[n, c, y * stride + k * dilate - pad] (zero outside x)."))


# -- Deconvolution ----------------------------------------------------------------------

def deconv_pad_adj(attrs, geo, dshape):
    """mxnet's ``DeconvolutionParam::InferPad``: with a nonzero ``target_shape`` the
    padding and adjustment that produce it, else ``pad`` and ``adj``."""
    target = tuple(attrs["target_shape"])
    if not any(target):
        return geo["pad"], geo["adj"]
    nd = len(geo["kernel"])
    if len(target) != nd:
        raise ShapeError(f"Deconvolution: target_shape={target} must have as many dims as "
                         f"kernel={geo['kernel']}")
    pads, adjs = [], []
    for i in range(nd):
        full = geo["stride"][i] * (dshape[2 + i] - 1) + _dilated(geo, i)
        if full < target[i]:
            raise ShapeError(f"Deconvolution: target_shape={target} is too big for data "
                             f"{tuple(dshape)}: at most {full} in spatial dim {i}")
        p = full - target[i]
        adjs.append(p % 2)
        pads.append((p + 1) // 2)
    return tuple(pads), tuple(adjs)


def _deconv_geo(attrs, dshape):
    """Geometry with the effective ``pad`` and ``adj`` for data of shape ``dshape``."""
    geo = geometry("Deconvolution", attrs)
    pad, adj = deconv_pad_adj(attrs, geo, dshape)
    return dict(geo, pad=pad, adj=adj)


def _deconv_shape(attrs, in_shapes):
    geo = geometry("Deconvolution", attrs)
    nd = len(geo["kernel"])
    dshape = in_shapes[0]
    f, g = attrs["num_filter"], attrs["num_group"]
    if dshape is None:
        return in_shapes, [None]
    dshape = tuple(dshape)
    if len(dshape) != nd + 2:
        raise ShapeError(f"Deconvolution: data of shape {dshape} must be {nd + 2}-D "
                         f"({_LAYOUTS[nd]}) for a {nd}-D kernel {geo['kernel']}")
    _check_channels("Deconvolution", dshape[1], attrs)
    geo = _deconv_geo(attrs, dshape)
    shapes = [dshape, merge_shape(in_shapes[1], (dshape[1], f // g) + geo["kernel"],
                                  "Deconvolution weight")]
    if not attrs["no_bias"]:
        shapes.append(merge_shape(in_shapes[2], (f,), "Deconvolution bias"))
    out = [dshape[0], f]
    for i in range(nd):
        if geo["adj"][i] > geo["stride"][i] - 1:
            raise ShapeError(f"Deconvolution: adj={geo['adj']} must be smaller than "
                             f"stride={geo['stride']} in every dim")
        size = geo["stride"][i] * (dshape[2 + i] - 1) + _dilated(geo, i) - 2 * geo["pad"][i] \
            + geo["adj"][i]
        if size < 1:
            raise ShapeError(f"Deconvolution: output size {size} < 1 in spatial dim {i} for "
                             f"data {dshape} (pad={geo['pad']} is too large)")
        out.append(size)
    return shapes, [tuple(out)]


def _deconv_ref(attrs, ins, is_train):
    geo = _deconv_geo(attrs, tuple(ins[0].shape))
    bias = None if attrs["no_bias"] else ins[2]
    return [_DECONV_F[len(geo["kernel"])](ins[0], ins[1], bias, geo["stride"], geo["pad"],
                                          geo["adj"], attrs["num_group"], geo["dilate"])]


def _deconv_gradient(b, n):
    """dx: Convolution of dy with the same weight; dW: _conv_weight_grad with x and y
    swapped (dy plays the convolution's input); db: dy summed but for axis 1."""
    geo = _deconv_geo(n.attrs, n.in_shapes[0])
    x, w = n.inputs[0], n.inputs[1]
    dy = n.ograds[0]
    common = _geo_attrs(geo, n.attrs)
    dx = b.op("Convolution", dy, w, num_filter=n.in_shapes[0][1], no_bias=True, **common)
    grads = [dx, b.op("_conv_weight_grad", dy, x, weight_shape=n.in_shapes[1], **common)]
    if not n.attrs["no_bias"]:
        grads.append(b.op("sum", dy, axis=(1,), exclude=True))
    return grads


register(OpDef(
    name="Deconvolution", pattern="opaque", lowering=Special("conv_dgrad"),
    arguments=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    attrs=_COMMON + [Attr("adj", parse_shape, ()), Attr("target_shape", parse_shape, ()),
                     Attr("workspace", _deconv_workspace, 512), Attr("no_bias", parse_bool, True)],
    infer_shape=_deconv_shape, reference=_deconv_ref, gradient=_deconv_gradient,
    dim_links=_batch_link,
    doc="The transposed convolution (the gradient of Convolution with respect to its "
        "data), plus bias; output size stride * (in - 1) + dilated kernel - 2 pad + adj."))


# -- the gradients' internal ops ----------------------------------------------------------

_INTERNAL = [Attr("kernel", parse_shape), Attr("stride", parse_shape),
             Attr("dilate", parse_shape), Attr("pad", parse_shape),
             Attr("num_group", parse_positive_int, 1)]


def _internal_geo(attrs):
    return {k: tuple(attrs[k]) for k in ("kernel", "stride", "dilate", "pad")}


def _aten_backward(attrs, dy, x, w, mask):
    geo = _internal_geo(attrs)
    nd = len(geo["kernel"])
    return torch.ops.aten.convolution_backward(
        dy, x, w, None, list(geo["stride"]), list(geo["pad"]), list(geo["dilate"]), False,
        [0] * nd, attrs["num_group"], mask)


def _dgrad_ref(attrs, ins, is_train):
    dy, w = ins
    x = dy.new_empty(tuple(attrs["data_shape"]))     # read for its shape only
    return [_aten_backward(attrs, dy, x, w, [True, False, False])[0]]


def _wgrad_ref(attrs, ins, is_train):
    x, dy = ins
    w = x.new_empty(tuple(attrs["weight_shape"]))    # read for its shape only
    return [_aten_backward(attrs, dy, x, w, [False, True, False])[1]]


register(OpDef(
    name="_conv_data_grad", pattern="opaque", lowering=Special("conv_dgrad"),
    arguments=("ograd", "weight"), attrs=_INTERNAL + [Attr("data_shape", parse_shape)],
    infer_shape=lambda attrs, s: (s, [tuple(attrs["data_shape"])]), reference=_dgrad_ref,
    doc="Convolution's data gradient: the transposed convolution of ograd with weight, "
        "of shape data_shape."))

register(OpDef(
    name="_conv_weight_grad", pattern="opaque", lowering=Special("conv_wgrad"),
    arguments=("data", "ograd"), attrs=_INTERNAL + [Attr("weight_shape", parse_shape)],
    infer_shape=lambda attrs, s: (s, [tuple(attrs["weight_shape"])]), reference=_wgrad_ref,
    doc="Convolution's weight gradient: dW[o, c, k] = sum over n and output positions p of "
        "ograd[n, o, p] * data[n, c, p * stride + k * dilate - pad]."))


# -- what a kernel computes -----------------------------------------------------------------

def conv_problem(op: str, attrs: dict, in_shapes: list, out_shape: tuple) -> dict:
    """The implicit GEMM a node computes, in a convolution's roles.

    Returns
    -------
    dict with ``mode`` (one of ``CONV_KINDS``), ``x``/``w``/``y`` (the shapes of the
    convolution's input, weight and output), ``roles`` (which of them each of the
    node's inputs is, then its output: ``"x"``, ``"w"``, ``"y"`` or ``"bias"``),
    ``stride``, ``pad``, ``dilate`` (tuples) and ``groups``.
    """
    ins = [tuple(s) for s in in_shapes]
    out = tuple(out_shape)
    if op == "Convolution":
        geo = geometry(op, attrs)
        mode, x, w, y = "conv_fwd", ins[0], ins[1], out
        roles = ["x", "w"] + ([] if attrs["no_bias"] else ["bias"]) + ["y"]
    elif op == "Deconvolution":
        geo = _deconv_geo(attrs, ins[0])
        mode, x, w, y = "conv_dgrad", out, ins[1], ins[0]
        roles = ["y", "w"] + ([] if attrs["no_bias"] else ["bias"]) + ["x"]
    elif op == "_conv_data_grad":
        geo = _internal_geo(attrs)
        mode, x, w, y, roles = "conv_dgrad", out, ins[1], ins[0], ["y", "w", "x"]
    elif op == "_conv_weight_grad":
        geo = _internal_geo(attrs)
        mode, x, w, y, roles = "conv_wgrad", ins[0], out, ins[1], ["x", "y", "w"]
    else:
        raise MXNetError(f"internal: {op} is not a convolution")
    return {"mode": mode, "x": x, "w": w, "y": y, "roles": roles,
            "stride": tuple(geo["stride"]), "pad": tuple(geo["pad"]),
            "dilate": tuple(geo["dilate"]), "groups": int(attrs["num_group"]),
            "kernel": tuple(w[2:]), "numel": prod(out)}
