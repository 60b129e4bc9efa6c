"""Pooling and ROIPooling, as mxnet 1.9.1's operators of those names define them, and
their gradient ops.

A pooling node is a kernel of its own (``Special("pool_fwd")`` / ``Special("pool_bwd")``,
``compiler/triton/pool.py``): each output position reduces the window
``start = o * stride - pad``, ``[start, start + kernel)`` of every spatial dim, clipped to
the data. :func:`pool_problem` states the effective geometry (``global_pool`` and the
``same`` convention folded in); the kernels read nothing else.

mxnet's rules kept here:

* output size: ``valid`` floor((x + 2 pad - k) / s) + 1, ``full`` the ceiling of it,
  ``same`` (1-D only, no pad) ceil(x / s) with windows starting at ``o * s``;
  ``global_pool`` pools the whole spatial extent (kernel, stride and pad ignored).
* ``max``: the first maximum of the window in row-major order takes the gradient. The
  forward also has a hidden output ``mask`` (where each maximum is; mxnet's oneDNN
  pooling keeps a workspace the same way), written only when the gradient reads it.
* ``avg``: divides by the window clipped to ``[-pad, x + pad)`` (``count_include_pad``,
  the default) or to the data; ``sum`` does not divide; ``lp`` is
  ``(sum x^p)^(1/p)`` for ``p_value`` 1, 2 or 3.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..ir.dtypes import LOW_PRECISION
from ..errors import MXNetError
from .registry import (Attr, OpDef, ShapeError, Special, choice, parse_bool, parse_float,
                       parse_int, parse_shape, prod, register)

POOL_KINDS = ("pool_fwd", "pool_bwd", "roi_fwd", "roi_bwd")   # roi: ROIPooling, below
_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _optional(parse):
    def parse_optional(v):
        return None if v is None or str(v).strip() in ("None", "") else parse(v)
    parse_optional.__name__ = getattr(parse, "__name__", "value")
    return parse_optional


ATTRS = [Attr("kernel", parse_shape, ()),
         Attr("pool_type", choice("avg", "lp", "max", "sum"), "max"),
         Attr("global_pool", parse_bool, False),
         Attr("cudnn_off", parse_bool, False),
         Attr("pooling_convention", choice("full", "same", "valid"), "valid"),
         Attr("stride", parse_shape, ()), Attr("pad", parse_shape, ()),
         Attr("p_value", _optional(parse_int), None),
         Attr("count_include_pad", _optional(parse_bool), None),
         Attr("layout", _optional(choice("NCDHW", "NCHW", "NCW", "NDHWC", "NHWC", "NWC")),
              None)]


def pool_geometry(attrs: dict, dshape: tuple) -> dict:
    """The effective ``kernel``, ``stride``, ``pad`` (before each dim) and output spatial
    size ``out`` of Pooling with ``attrs`` on data of shape ``dshape``, checked as mxnet
    checks them (``PoolingParamParser``, ``PoolingShape``)."""
    dshape = tuple(dshape)
    nd = len(dshape) - 2
    kernel = tuple(attrs["kernel"])
    if not attrs["global_pool"]:
        if not kernel:
            raise ShapeError("Pooling: kernel is required unless global_pool=True")
        if len(kernel) not in (1, 2, 3):
            raise ShapeError(f"Pooling: kernel={kernel}: 1-D, 2-D and 3-D pooling are "
                             f"supported")
        if len(dshape) != len(kernel) + 2:
            raise ShapeError(f"Pooling: data of shape {dshape} must be {len(kernel) + 2}-D "
                             f"({_LAYOUTS[len(kernel)]}) for kernel={kernel}")
    elif nd not in (1, 2, 3):
        raise ShapeError(f"Pooling: data of shape {dshape} must be 3-D, 4-D or 5-D "
                         f"(NCW, NCHW, NCDHW)")
    layout = attrs["layout"]
    if layout is not None and layout != _LAYOUTS[nd]:
        raise ShapeError(f"Pooling: layout={layout} is not supported; only {_LAYOUTS[nd]} "
                         f"for {nd}-D pooling. Transpose the data (mx.sym.transpose) and drop "
                         f"the layout attribute")
    ptype = attrs["pool_type"]
    if ptype == "lp" and attrs["p_value"] not in (1, 2, 3):
        raise ShapeError(f"Pooling: pool_type='lp' needs p_value 1, 2 or 3, got "
                         f"{attrs['p_value']}")
    if attrs["global_pool"]:
        return {"kernel": dshape[2:], "stride": (1,) * nd, "pad": (0,) * nd,
                "out": (1,) * nd}
    stride = tuple(attrs["stride"]) or (1,) * nd
    pad = tuple(attrs["pad"]) or (0,) * nd
    conv = attrs["pooling_convention"]
    if conv == "same" and not any(pad):
        # mxnet 1.9.1 reads pad[0..2] for 'same' whatever the kernel's dims, so its users
        # pass pad=(0, 0, 0) with a 1-D kernel
        pad = (0,) * nd
    for name, v in (("stride", stride), ("pad", pad)):
        if len(v) != nd:
            raise ShapeError(f"Pooling: {name}={v} must have as many dims as kernel={kernel}")
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride) or any(p < 0 for p in pad):
        raise ShapeError(f"Pooling: kernel={kernel} and stride={stride} must be positive and "
                         f"pad={pad} non-negative")
    if conv == "same":
        if nd != 1:
            raise ShapeError(f"Pooling: pooling_convention='same' supports 1-D pooling only "
                             f"(data {dshape})")
        if any(pad):
            raise ShapeError("Pooling: the 'same' pooling convention disables pad; drop it")
    out = []
    for i in range(nd):
        size = dshape[2 + i] + 2 * pad[i]
        if kernel[i] > size:
            raise ShapeError(f"Pooling: kernel size ({kernel[i]}) exceeds input "
                             f"({dshape[2 + i]} padded to {size}) in spatial dim {i} of data "
                             f"{dshape}")
        if conv == "valid":
            out.append(1 + (size - kernel[i]) // stride[i])
        elif conv == "full":
            out.append(1 + -(-(size - kernel[i]) // stride[i]))
        else:
            out.append(-(-size // stride[i]))
    return {"kernel": kernel, "stride": stride, "pad": pad, "out": tuple(out)}


def _pool_outputs(attrs):
    """max pooling keeps where each window's maximum is (hidden ``mask``), as mxnet's
    oneDNN pooling keeps a workspace: its gradient then needs neither the data nor a
    second search."""
    return ("output", "mask") if attrs["pool_type"] == "max" else ("output",)


def _pool_shape(attrs, in_shapes):
    dshape = in_shapes[0]
    n = len(_pool_outputs(attrs))
    if dshape is None:
        return in_shapes, [None] * n
    geo = pool_geometry(attrs, dshape)
    return in_shapes, [tuple(dshape[:2]) + geo["out"]] * n


def _include_pad(attrs) -> bool:
    return attrs["count_include_pad"] is not False


def window_counts(geo: dict, dshape: tuple, include_pad: bool) -> list:
    """Per spatial dim, the divisor of each output position of an average: the window
    clipped to ``[-pad, x + pad)`` (``include_pad``) or to ``[0, x)``."""
    out = []
    for i, n in enumerate(geo["out"]):
        x, k, s, p = dshape[2 + i], geo["kernel"][i], geo["stride"][i], geo["pad"][i]
        lo, hi = (-p, x + p) if include_pad else (0, x)
        out.append([min(o * s - p + k, hi) - max(o * s - p, lo) for o in range(n)])
    return out


def _windows(x, geo, fill):
    """``x`` padded with ``fill`` and unfolded: ``(N, C, *out, k0 * k1 ...)``."""
    nd = x.dim() - 2
    pads = []
    for i in reversed(range(nd)):
        right = (geo["out"][i] - 1) * geo["stride"][i] + geo["kernel"][i] - x.shape[2 + i] \
            - geo["pad"][i]
        pads += [geo["pad"][i], right]
    xp = F.pad(x, pads, value=fill)
    for i in range(nd):
        xp = xp.unfold(2 + i, geo["kernel"][i], geo["stride"][i])
    return xp.reshape(*xp.shape[:2 + nd], -1)


def _pool_ref(attrs, ins, is_train):
    """The oracle: explicit windows (``unfold``); ``max`` through ``max(dim)``, whose
    gradient goes to the first maximum."""
    x = ins[0]
    geo = pool_geometry(attrs, tuple(x.shape))
    ptype = attrs["pool_type"]
    if ptype == "max":   # mask: the position of the first maximum in its window
        best = _windows(x, geo, -math.inf).max(dim=-1)
        return [best.values, best.indices.to(_index_dtype(x))]
    if ptype == "lp":
        p = attrs["p_value"]
        s = (_windows(x, geo, 0.0) ** p).sum(-1)
        return [s if p == 1 else s.sqrt() if p == 2 else torch.sign(s) * s.abs() ** (1 / 3)]
    s = _windows(x, geo, 0.0).sum(-1)
    if ptype == "sum":
        return [s]
    counts = window_counts(geo, tuple(x.shape), _include_pad(attrs))
    div = torch.ones((), dtype=x.dtype)
    for i, c in enumerate(counts):
        div = div * torch.tensor(c, dtype=x.dtype).reshape([-1] + [1] * (len(counts) - 1 - i))
    return [s / div]


def _grad_inputs(ptype):
    return {"max": ("ograd", "mask"), "lp": ("ograd", "data", "output")}.get(ptype,
                                                                            ("ograd",))


def _pool_gradient(b, n):
    """One ``_pool_grad`` node: max reads the forward's mask, lp the data and output."""
    ptype = n.attrs["pool_type"]
    ins = [n.ograds[0]]
    if ptype == "max":
        ins.append(n.outputs[1])
    elif ptype == "lp":
        ins += [n.inputs[0], n.outputs[0]]
    attrs = {a.name: n.attrs[a.name] for a in ATTRS}
    return [b.op("_pool_grad", *ins, data_shape=n.in_shapes[0], **attrs)]


def _index_type(t):
    """The dtype of a hidden index output (max pooling's mask, ROIPooling's maxidx):
    positions held as floats, float32 for float16 / bfloat16 data, whose 11 / 8
    significant bits would round positions past 2048 / 256."""
    return "float32" if t in LOW_PRECISION else t


def _index_dtype(x):
    """:func:`_index_type` of tensor ``x``, as a torch dtype (the references)."""
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _pool_types(attrs, in_types):
    t = in_types[0]
    outs = _pool_outputs(attrs)
    return in_types, [t] + [_index_type(t)] * (len(outs) - 1)


def _pool_grad_types(attrs, in_types):
    """dy, the data and output (lp) share dy's dtype; max pooling's mask is an index."""
    t = in_types[0]
    expected = [t] * len(in_types)
    if attrs["pool_type"] == "max" and len(in_types) > 1:
        expected[1] = _index_type(t) if in_types[1] is None else in_types[1]
    return expected, [t]


def _batch_channel_link(attrs, in_ranks, out_ranks):
    return [[("in", 0, 0), ("out", 0, 0)], [("in", 0, 1), ("out", 0, 1)]]


register(OpDef(
    name="Pooling", pattern="opaque", lowering=Special("pool_fwd"), attrs=ATTRS,
    rows_independent=True,
    aliases=("_npx_pooling",), outputs=_pool_outputs, num_visible=lambda attrs: 1,
    infer_type=_pool_types,
    infer_shape=_pool_shape, reference=_pool_ref, gradient=_pool_gradient,
    dim_links=_batch_channel_link,
    doc="Max, average, sum or Lp pooling over 1-D, 2-D or 3-D windows (NCW, NCHW, NCDHW)."))


def _pool_grad_ref(attrs, ins, is_train):
    dshape = tuple(attrs["data_shape"])
    dy = ins[0]
    if attrs["pool_type"] == "max":   # each window's gradient to the position its mask names
        geo = pool_geometry(attrs, dshape)
        plane = prod(dshape[2:])
        where = torch.arange(plane, dtype=torch.float64).reshape((1, 1) + dshape[2:])
        where = _windows(where, geo, -1.0).expand(*dshape[:2], *geo["out"], -1)
        at = where.gather(-1, ins[1].long().unsqueeze(-1)).squeeze(-1).long()
        base = torch.arange(dshape[0] * dshape[1]).reshape(dshape[:2] + (1,) * len(geo["out"]))
        dx = dy.new_zeros(prod(dshape))
        keep = at >= 0
        dx.index_add_(0, (base * plane + at)[keep], dy[keep])
        return [dx.reshape(dshape)]
    x = ins[1].detach() if len(ins) > 1 else dy.new_zeros(dshape)
    with torch.enable_grad():
        x = x.clone().requires_grad_(True)
        y = _pool_ref(attrs, [x], is_train)[0]
        (dx,) = torch.autograd.grad(y, x, dy)
    return [dx]


def _pool_grad_shape(attrs, in_shapes):
    return in_shapes, [tuple(attrs["data_shape"])]


register(OpDef(
    name="_pool_grad", pattern="opaque", lowering=Special("pool_bwd"),
    arguments=lambda attrs: _grad_inputs(attrs["pool_type"]),
    attrs=ATTRS + [Attr("data_shape", parse_shape)],
    infer_shape=_pool_grad_shape, infer_type=_pool_grad_types, reference=_pool_grad_ref,
    doc="Pooling's data gradient (max: to the window's first maximum; avg: ograd / count)."))


def pool_problem(op: str, attrs: dict, in_shapes: list, out_shape: tuple) -> dict:
    """What a pooling kernel computes.

    Returns
    -------
    dict with ``mode`` (``pool_fwd`` or ``pool_bwd``), ``type`` (max, avg, sum, lp), ``p``
    (lp's p_value), ``x`` and ``y`` (the data and pooled shapes), ``roles`` (per input of
    the node: ``"x"``, ``"y"``, ``"mask"`` or ``"dy"``, then per output: ``"y"`` and
    max pooling's ``"mask"``, or ``"dx"``),
    ``kernel``, ``stride``, ``pad`` (effective) and ``counts`` (avg's divisors per dim).
    """
    if op == "Pooling":
        x, y = tuple(in_shapes[0]), tuple(out_shape)
        roles = ["x"] + ["y", "mask"][:len(_pool_outputs(attrs))]
    elif op == "_pool_grad":
        x, y = tuple(attrs["data_shape"]), tuple(in_shapes[0])
        roles = ["dy"] + ["mask" if attrs["pool_type"] == "max" else "x", "y"][
            :len(in_shapes) - 1] + ["dx"]
    else:
        raise MXNetError(f"internal: {op} is not a pooling")
    geo = pool_geometry(attrs, x)
    ptype = attrs["pool_type"]
    counts = window_counts(geo, x, _include_pad(attrs)) if ptype == "avg" else None
    return {"mode": "pool_fwd" if op == "Pooling" else "pool_bwd", "type": ptype,
            "p": attrs["p_value"], "x": x, "y": y, "roles": roles,
            "kernel": tuple(geo["kernel"]), "stride": tuple(geo["stride"]),
            "pad": tuple(geo["pad"]), "counts": counts, "include_pad": _include_pad(attrs),
            "numel": prod(out_shape)}


# -- ROIPooling ----------------------------------------------------------------------------

ROI_KINDS = ("roi_fwd", "roi_bwd")
FLT_MAX = 3.4028234663852886e38     # float32's largest: where a ROI bin's max starts


def _pooled_size(v):
    s = parse_shape(v)
    if len(s) != 2 or min(s) < 1:
        raise ValueError(f"expected two positive values (h, w), got {s}")
    return s


ROI_ATTRS = [Attr("pooled_size", _pooled_size), Attr("spatial_scale", parse_float)]


def _roi_shape(attrs, in_shapes):
    data, rois = in_shapes
    if data is not None and len(data) != 4:
        raise ShapeError(f"ROIPooling: data of shape {tuple(data)} must be 4-D (NCHW)")
    if rois is not None and (len(rois) != 2 or rois[1] != 5):
        raise ShapeError(f"ROIPooling: rois of shape {tuple(rois)} must be (num_rois, 5): "
                         f"[batch_index, x1, y1, x2, y2] per row")
    if data is None or rois is None:
        return in_shapes, [None, None]
    out = (rois[0], data[1]) + tuple(attrs["pooled_size"])
    return in_shapes, [out, out]


def roi_bins(attrs, rois: torch.Tensor, hw: tuple):
    """mxnet's bins of every roi: ``(batch, hstart, hend, wstart, wend)`` (int64; the bin
    bounds ``(R, PH)`` / ``(R, PW)``, clipped to the data; empty where end <= start).
    Corners are rounded half away from zero after scaling, in float32 as mxnet does."""
    ph, pw = attrs["pooled_size"]
    r = rois.detach().float()
    scaled = r[:, 1:5] * torch.tensor(attrs["spatial_scale"], dtype=torch.float32)
    corner = (torch.sign(scaled) * torch.floor(scaled.abs() + 0.5)).long()
    sw, sh, ew, eh = corner.unbind(1)
    out = [r[:, 0].long()]
    for start, end, n, size in ((sh, eh, ph, hw[0]), (sw, ew, pw, hw[1])):
        bin_size = (end - start + 1).clamp(min=1).float() / n
        i = torch.arange(n, dtype=torch.float32)
        lo = torch.floor(i[None] * bin_size[:, None]).long() + start[:, None]
        hi = torch.ceil((i[None] + 1) * bin_size[:, None]).long() + start[:, None]
        out += [lo.clamp(0, size), hi.clamp(0, size)]
    return out


def _roi_ref(attrs, ins, is_train):
    """The oracle: each bin's first maximum, in mxnet's row-major scan."""
    data, rois = ins
    b, hs, he, ws, we = roi_bins(attrs, rois, tuple(data.shape[2:]))
    ph, pw = attrs["pooled_size"]
    width = data.shape[3]
    outs, idxs = [], []
    for r in range(rois.shape[0]):
        for i in range(ph):
            for j in range(pw):
                h0, h1, w0, w1 = int(hs[r, i]), int(he[r, i]), int(ws[r, j]), int(we[r, j])
                if h1 <= h0 or w1 <= w0:
                    outs.append(data.new_zeros(data.shape[1]))
                    idxs.append(data.new_full((data.shape[1],), -1.0))
                    continue
                v, k = data[int(b[r]), :, h0:h1, w0:w1].reshape(data.shape[1], -1).max(1)
                outs.append(v)
                idxs.append(((k // (w1 - w0) + h0) * width + k % (w1 - w0) + w0).to(_index_dtype(data)))
    shape = (rois.shape[0], ph, pw, data.shape[1])
    out = torch.stack(outs).reshape(shape).permute(0, 3, 1, 2)
    idx = torch.stack(idxs).reshape(shape).permute(0, 3, 1, 2)
    return [out, idx]


def _roi_gradient(b, n):
    """data: each output gradient added where its bin's maximum was; rois: zeros."""
    attrs = {a.name: n.attrs[a.name] for a in ROI_ATTRS}
    return [b.op("_roi_pool_grad", n.ograds[0], n.inputs[1], n.outputs[1],
                 data_shape=n.in_shapes[0], **attrs),
            b.op("_zeros", shape=tuple(n.in_shapes[1]))]


register(OpDef(
    name="ROIPooling", pattern="opaque", lowering=Special("roi_fwd"), attrs=ROI_ATTRS,
    arguments=("data", "rois"), outputs=("output", "maxidx"), num_visible=lambda attrs: 1,
    infer_shape=_roi_shape, reference=_roi_ref, gradient=_roi_gradient,
    infer_type=lambda attrs, t: ([t[0], t[0] if t[1] is None else t[1]],
                                 [t[0], _index_type(t[0])]),
    doc="Max pooling of each region [batch_index, x1, y1, x2, y2] (scaled by "
        "spatial_scale, rounded) into pooled_size bins; maxidx (hidden) holds each "
        "maximum's position h * W + w, -1 for an empty bin."))


def _roi_grad_ref(attrs, ins, is_train):
    dy, rois, idx = ins
    n, c, h, w = tuple(attrs["data_shape"])
    dx = dy.new_zeros(n * c * h * w)
    batch = rois[:, 0].long()[:, None, None, None]
    chan = torch.arange(c)[None, :, None, None]
    flat = ((batch * c + chan) * (h * w) + idx.long()).expand(dy.shape)
    keep = idx.expand(dy.shape) >= 0
    dx.index_put_((flat[keep],), dy[keep], accumulate=True)
    return [dx.reshape(n, c, h, w)]


register(OpDef(
    name="_roi_pool_grad", pattern="opaque", lowering=Special("roi_bwd"),
    arguments=("ograd", "rois", "maxidx"), attrs=ROI_ATTRS + [Attr("data_shape", parse_shape)],
    infer_shape=lambda attrs, s: (s, [tuple(attrs["data_shape"])]), reference=_roi_grad_ref,
    infer_type=lambda attrs, t: ([t[0], t[0] if t[1] is None else t[1],
                                  _index_type(t[0]) if t[2] is None else t[2]], [t[0]]),
    doc="ROIPooling's data gradient: ograd summed at the positions maxidx names."))


def roi_problem(op: str, attrs: dict, in_shapes: list, out_shapes: list) -> dict:
    """What a ROIPooling kernel computes: ``mode`` (roi_fwd, roi_bwd), ``x`` (data shape),
    ``y`` (pooled shape), ``rois`` shape, ``pooled``, ``scale`` and ``roles``."""
    if op == "ROIPooling":
        x, y, roles = tuple(in_shapes[0]), tuple(out_shapes[0]), ["x", "rois", "y", "idx"]
    else:
        x, y, roles = tuple(attrs["data_shape"]), tuple(in_shapes[0]), ["dy", "rois", "idx",
                                                                          "dx"]
    return {"mode": "roi_fwd" if op == "ROIPooling" else "roi_bwd", "type": "roi", "x": x,
            "y": y, "rois": tuple(in_shapes[1]), "pooled": tuple(attrs["pooled_size"]),
            "scale": float(attrs["spatial_scale"]), "roles": roles,
            "numel": prod(out_shapes[0])}
