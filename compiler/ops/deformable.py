"""mxnet 1.9.1's deformable and position-sensitive region operators, as extern launches:
``_contrib_DeformableConvolution`` (``contrib/deformable_convolution*``, sampling as
``contrib/nn/deformable_im2col.h``), ``_contrib_ModulatedDeformableConvolution``
(``contrib/modulated_deformable_convolution*``), ``_contrib_PSROIPooling``
(``contrib/psroi_pooling*``), ``_contrib_DeformablePSROIPooling``
(``contrib/deformable_psroi_pooling*``) and ``_contrib_RROIAlign`` (``contrib/rroi_align*``).

Each forward is ATen gathers whose autograd is mxnet's backward (``register_with_vjp`` of
``spatial_more.py``: the ``_backward_*`` entry replays the forward under autograd):

* DeformableConvolution samples as mxnet's CPU kernel: a point counts when ``0 <= y < H``
  and ``0 <= x < W``; from the last row (column) on it reads that row with no weight on
  the next (so no offset gradient there). ModulatedDeformableConvolution samples as its
  (GPU-only) kernel: ``-1 < y < H``, ``-1 < x < W``, each corner off the map reads zero;
  every column is scaled by the mask. Both then multiply the columns by the grouped
  weight and add the bias.
* PSROIPooling averages integer bins of position-sensitive channels; rois (rounded half
  away from zero) get no gradient. DeformablePSROIPooling moves each part's bins by
  ``trans * trans_std * roi size`` and averages ``sample_per_part**2`` clamped bilinear
  samples (its hidden ``top_count`` output counts them).
* RROIAlign (rotated rois ``[batch, cx, cy, w, h, angle in degrees]``) has no gradient in
  mxnet 1.9.1 (no ``FGradient``), so none here either.
"""
from __future__ import annotations

import math

import torch

from .contrib_common import require_rank
from .detection import f32, host
from .registry import (Attr, Extern, OpDef, ShapeError, choice, parse_bool, parse_float,
                       parse_int, parse_shape, register)
from .spatial_more import bilinear_zero_pad, register_with_vjp


# -- deformable sampling -------------------------------------------------------------------

def _snap_taps(y, x, h, w, bounded=True):
    """mxnet's CPU ``im2col_bilinear``: four (row, col, weight) taps; from the last row /
    column on all weight goes to it. ``bounded``: the point is read only when
    ``0 <= y < h`` and ``0 <= x < w``."""
    ok = ((y >= 0) & (x >= 0) & (y < h) & (x < w)).to(y.dtype) if bounded else 1.0
    taps_y, taps_x = [], []
    for pos, size, taps in ((y, h, taps_y), (x, w, taps_x)):
        low = torch.floor(pos).detach().clamp(0, size - 1)
        top = low >= size - 1
        high = torch.where(top, low, low + 1)
        frac = torch.where(top, torch.zeros_like(pos), pos - low)
        taps += [(low, 1.0 - frac), (high, frac)]
    return [(ry, rx, wy * wx * ok) for ry, wy in taps_y for rx, wx in taps_x]


def _sample_snap(img, y, x):
    """``img`` (N, G, Cg, H, W) at (N, G, *S) points -> (N, G, Cg, *S)."""
    n, g, cg, h, w = img.shape
    flat = img.reshape(n, g, cg, h * w)
    out = 0
    for ry, rx, wt in _snap_taps(y, x, h, w):
        idx = (ry * w + rx).nan_to_num(0).long().reshape(n, g, 1, -1).expand(n, g, cg, -1)
        out = out + flat.gather(3, idx).reshape(n, g, cg, *y.shape[2:]) * wt[:, :, None]
    return out


def _sample_zero(img, y, x):
    """The modulated kernel's sampling: read when ``-1 < y < h`` and ``-1 < x < w``."""
    n, g, cg, h, w = img.shape
    ok = ((y > -1) & (x > -1) & (y < h) & (x < w)).to(y.dtype)
    vals = bilinear_zero_pad(img.reshape(n * g, cg, h, w), y.reshape(n * g, -1),
                             x.reshape(n * g, -1))
    return vals.reshape(n, g, cg, *y.shape[2:]) * ok[:, :, None]


def _conv_geometry(attrs, dshape):
    kernel = tuple(attrs["kernel"])
    if len(kernel) != 2:
        raise ShapeError(f"kernel={kernel}: deformable convolution supports 2-D kernels only")
    stride = tuple(attrs["stride"]) or (1, 1)
    dilate = tuple(attrs["dilate"]) or (1, 1)
    pad = tuple(attrs["pad"]) or (0, 0)
    out = tuple((dshape[2 + i] + 2 * pad[i] - (dilate[i] * (kernel[i] - 1) + 1)) // stride[i]
                + 1 for i in range(2))
    return kernel, stride, dilate, pad, out


def _deform_conv(modulated):
    def run(attrs, ins):
        data, offset = ins[0], ins[1]
        mask = ins[2] if modulated else None
        weight = ins[3 if modulated else 2]
        (kh, kw), (sh, sw), (dh, dw), (ph, pw), (ho, wo) = _conv_geometry(attrs, data.shape)
        n, c, h, w = data.shape
        dg, k = attrs["num_deformable_group"], kh * kw
        dev, dt = data.device, data.dtype
        off = offset.reshape(n, dg, k, 2, ho, wo)
        ky = (torch.arange(kh, device=dev, dtype=dt) * dh).repeat_interleave(kw)
        kx = (torch.arange(kw, device=dev, dtype=dt) * dw).repeat(kh)
        y = (ky[:, None, None] + (torch.arange(ho, device=dev, dtype=dt) * sh - ph)[:, None]
             + off[:, :, :, 0])
        x = (kx[:, None, None] + (torch.arange(wo, device=dev, dtype=dt) * sw - pw)
             + off[:, :, :, 1])
        img = data.reshape(n, dg, c // dg, h, w)
        cols = (_sample_zero if modulated else _sample_snap)(img, y, x)  # (n, dg, cg, k, ho, wo)
        if modulated:
            cols = cols * mask.reshape(n, dg, 1, k, ho, wo)
        grp = attrs["num_group"]
        cols = cols.reshape(n, grp, (c // grp) * k, ho * wo)
        wt = weight.reshape(grp, attrs["num_filter"] // grp, (c // grp) * k)
        out = torch.einsum("gfk,ngkl->ngfl", wt, cols).reshape(n, -1, ho, wo)
        if not attrs["no_bias"]:
            out = out + ins[-1].reshape(1, -1, 1, 1)
        return [out]
    return run


def _deform_shape(modulated):
    op = "ModulatedDeformableConvolution" if modulated else "DeformableConvolution"

    def infer(attrs, in_shapes):
        d, off = in_shapes[0], in_shapes[1]
        if d is None or off is None:
            return in_shapes, [None]
        require_rank(op, "data", d, 4)
        require_rank(op, "offset", off, 4)
        kernel, _, _, _, (ho, wo) = _conv_geometry(attrs, d)
        f, g, dg = attrs["num_filter"], attrs["num_group"], attrs["num_deformable_group"]
        k = kernel[0] * kernel[1]
        if d[1] % g or d[1] % dg or f % g:
            raise ShapeError(f"{op}: data {tuple(d)}: channels and num_filter={f} must divide "
                             f"num_group={g}, channels num_deformable_group={dg}")
        if modulated and d[0] > attrs["im2col_step"] and d[0] % attrs["im2col_step"]:
            raise ShapeError(f"{op}: input batchsize {d[0]} must be smaller than or divide "
                             f"im2col_step={attrs['im2col_step']}")
        maps = [("offset", off, 2 * k * dg)]
        if modulated and in_shapes[2] is not None:
            maps.append(("mask", in_shapes[2], k * dg))
        for what, s, ch in maps:
            if tuple(s) != (d[0], ch, ho, wo):
                raise ShapeError(f"{op}: {what} of shape {tuple(s)} must be "
                                 f"{(d[0], ch, ho, wo)} for data {tuple(d)} (kernel {kernel}, "
                                 f"num_deformable_group {dg})")
        ins = [tuple(d), tuple(off)] + ([(d[0], k * dg, ho, wo)] if modulated else [])
        ins.append((f, d[1] // g) + tuple(kernel))
        if not attrs["no_bias"]:
            ins.append((f,))
        return ins, [(d[0], f, ho, wo)]
    return infer


def _conv_attrs(modulated):
    attrs = [Attr("kernel", parse_shape), Attr("stride", parse_shape, ()),
             Attr("dilate", parse_shape, ()), Attr("pad", parse_shape, ()),
             Attr("num_filter", parse_int), Attr("num_group", parse_int, 1),
             Attr("num_deformable_group", parse_int, 1), Attr("workspace", parse_int, 1024),
             Attr("no_bias", parse_bool, False),
             Attr("layout", choice("NCW", "NCHW", "NCDHW"), None)]
    if modulated:
        attrs.append(Attr("im2col_step", parse_int, 64))
    return attrs


for _name, _mod in (("DeformableConvolution", False), ("ModulatedDeformableConvolution", True)):
    _args = ("data", "offset") + (("mask",) if _mod else ()) + ("weight",)
    register_with_vjp(
        f"_contrib_{_name}", _deform_conv(_mod),
        arguments=lambda a, _args=_args: list(_args) + ([] if a["no_bias"] else ["bias"]),
        attrs=_conv_attrs(_mod), infer_shape=_deform_shape(_mod),
        doc=f"{_name}: a grouped convolution over columns sampled bilinearly at the kernel "
            f"points moved by offset (N, 2 * kh * kw * num_deformable_group, Ho, Wo)"
            + (", each scaled by mask (N, kh * kw * num_deformable_group, Ho, Wo)." if _mod
               else "."))


# -- PSROIPooling --------------------------------------------------------------------------

def _round(v):
    """C's ``round``: half away from zero."""
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def _roi_box(roi, scale, dtype, shift=0.0):
    """Start (w, h) and size (w, h) of a roi [batch, x1, y1, x2, y2] in ``dtype`` (the
    data's, as mxnet's DType arithmetic)."""
    r = _round(roi[1:5].to(dtype))
    start = r[:2] * scale - shift
    end = (r[2:] + 1.0) * scale - shift
    return start, torch.clamp(end - start, min=0.1)


def _ps_channels(fmap, output_dim, group, pooled):
    """(output_dim, P, P, H, W): the channel each output bin reads (R-FCN's layout)."""
    g = torch.clamp(torch.floor(torch.arange(pooled, dtype=torch.float32) * group / pooled),
                    0, group - 1).long()
    per = fmap.reshape(output_dim, group, group, *fmap.shape[1:])
    return per[:, g][:, :, g]


def _psroi(attrs, ins):
    data, rois = ins
    n, c, h, w = data.shape
    p, od = attrs["pooled_size"], attrs["output_dim"]
    gs = attrs["group_size"] or p
    if c != od * gs * gs:
        raise ShapeError(f"PSROIPooling: data {tuple(data.shape)} must have output_dim * "
                         f"group_size**2 = {od * gs * gs} channels")
    scale = f32(attrs["spatial_scale"])
    outs = []
    for roi in host(rois):
        start, size = _roi_box(roi, scale, data.dtype)
        edges = torch.arange(p + 1, dtype=data.dtype)
        bins = [(torch.floor(edges[:-1] * (size[a] / p) + start[a]),
                 torch.ceil(edges[1:] * (size[a] / p) + start[a])) for a in (1, 0)]
        masks = []
        for (lo, hi), ext in zip(bins, (h, w)):
            lo, hi = lo.clamp(0, ext), hi.clamp(0, ext)
            pos = torch.arange(ext, dtype=data.dtype)
            masks.append(((pos >= lo[:, None]) & (pos < hi[:, None])).to(data.dtype))
        area = masks[0].sum(1)[:, None] * masks[1].sum(1)[None, :]        # (P, P)
        weight = masks[0][:, None, :, None] * masks[1][None, :, None, :]   # (P, P, H, W)
        weight = weight / torch.where(area > 0, area, 1.0)[:, :, None, None]
        fmap = _ps_channels(data[int(roi[0])], od, gs, p)
        outs.append((fmap * weight.to(data.device)).sum(dim=(3, 4)))
    return [torch.stack(outs) if outs else data.new_zeros(0, od, p, p)]


def _psroi_shape(attrs, in_shapes):
    d, r = in_shapes[0], in_shapes[1]
    if d is None or r is None:
        return in_shapes, [None]
    require_rank("PSROIPooling", "data", d, 4)
    if len(r) != 2 or r[1] != 5:
        raise ShapeError(f"PSROIPooling: rois of shape {tuple(r)} must be (num_rois, 5)")
    p = attrs["pooled_size"]
    return [tuple(d), tuple(r)], [(r[0], attrs["output_dim"], p, p)]


register_with_vjp(
    "_contrib_PSROIPooling", _psroi, arguments=("data", "rois"),
    attrs=[Attr("spatial_scale", parse_float), Attr("output_dim", parse_int),
           Attr("pooled_size", parse_int), Attr("group_size", parse_int, 0)],
    infer_shape=_psroi_shape, diff=lambda a, n: [True, False],
    doc="Position-sensitive roi pooling (R-FCN): bin (i, j) of output channel k averages "
        "channel (k * group + gi) * group + gj over the bin's pixels.")


# -- DeformablePSROIPooling ------------------------------------------------------------------

def _dps_points(attrs, roi, trans_r, p, od, scale, n_cls, dtype):
    """Per (output_dim, P, P, S, S): sample x, y (``dtype``) before clamping."""
    start, size = _roi_box(roi, scale, dtype, 0.5)
    s, part = attrs["sample_per_part"], attrs["part_size"] or p
    binsz = size / p
    idx = torch.arange(p, dtype=dtype)
    part_i = torch.floor(idx / p * part).long()
    cls = torch.arange(od) // (od // n_cls)
    if trans_r is None:
        tx = ty = torch.zeros(od, p, p, dtype=dtype)
    else:
        t = trans_r.reshape(n_cls, 2, part, part) * f32(attrs["trans_std"])
        tx = t[cls, 0][:, part_i][:, :, part_i]
        ty = t[cls, 1][:, part_i][:, :, part_i]
    sub = torch.arange(s, dtype=dtype)
    ws = (idx * binsz[0] + start[0])[None, None, :] + tx * size[0]
    hs = (idx * binsz[1] + start[1])[None, :, None] + ty * size[1]
    x = ws[..., None, None] + (sub * (binsz[0] / s))[None, :]
    y = hs[..., None, None] + (sub * (binsz[1] / s))[:, None]
    return x, y


def _dps_roi(attrs, fmap, roi, trans_r, scale, n_cls):
    od, p = attrs["output_dim"], attrs["pooled_size"]
    h, w = fmap.shape[-2:]
    x, y = _dps_points(attrs, roi, trans_r, p, od, scale, n_cls, fmap.dtype)
    x, y = (v.to(fmap.device) for v in torch.broadcast_tensors(x, y))
    ok = ~((x < -0.5) | (x > w - 0.5) | (y < -0.5) | (y > h - 0.5))
    x, y = x.clamp(0, w - 1), y.clamp(0, h - 1)
    x0, y0 = torch.floor(x).detach(), torch.floor(y).detach()
    x1, y1 = torch.ceil(x).detach(), torch.ceil(y).detach()
    dx, dy = x - x0, y - y0
    plane = fmap.reshape(od, p, p, h * w)
    val = 0
    for yy, xx, wt in ((y0, x0, (1 - dx) * (1 - dy)), (y1, x0, (1 - dx) * dy),
                       (y0, x1, dx * (1 - dy)), (y1, x1, dx * dy)):
        idx = (yy * w + xx).long().reshape(od, p, p, -1)
        val = val + plane.gather(3, idx).reshape(wt.shape) * wt
    count = ok.sum(dim=(3, 4)).to(fmap.dtype)
    total = (val * ok).sum(dim=(3, 4))
    return total / torch.where(count > 0, count, 1.0), count


def _dpsroi(attrs, ins):
    data, rois = ins[0], ins[1]
    trans = None if attrs["no_trans"] else ins[2]
    od, p, gs = attrs["output_dim"], attrs["pooled_size"], attrs["group_size"]
    if data.shape[1] != od * gs * gs:
        raise ShapeError(f"DeformablePSROIPooling: data {tuple(data.shape)} must have "
                         f"output_dim * group_size**2 = {od * gs * gs} channels")
    n_cls = 1 if trans is None else trans.shape[1] // 2
    scale = f32(attrs["spatial_scale"])
    outs, counts = [], []
    for r, roi in enumerate(host(rois)):
        fmap = _ps_channels(data[int(roi[0])], od, gs, p)
        tr = None if trans is None else trans[r].cpu()
        o, cnt = _dps_roi(attrs, fmap, roi, tr, scale, n_cls)
        outs.append(o)
        counts.append(cnt)
    if not outs:
        z = data.new_zeros(0, od, p, p)
        return [z, z]
    return [torch.stack(outs).to(data.dtype), torch.stack(counts).to(data.dtype)]


def _dpsroi_shape(attrs, in_shapes):
    d, r = in_shapes[0], in_shapes[1]
    if d is None or r is None:
        return in_shapes, [None, None]
    require_rank("DeformablePSROIPooling", "data", d, 4)
    if len(r) != 2 or r[1] != 5:
        raise ShapeError(f"DeformablePSROIPooling: rois of shape {tuple(r)} must be "
                         f"(num_rois, 5)")
    if not attrs["no_trans"] and in_shapes[2] is not None:
        require_rank("DeformablePSROIPooling", "trans", in_shapes[2], 4)
    p = attrs["pooled_size"]
    out = (r[0], attrs["output_dim"], p, p)
    return in_shapes, [out, out]


register_with_vjp(
    "_contrib_DeformablePSROIPooling", _dpsroi,
    arguments=lambda a: ["data", "rois"] + ([] if a["no_trans"] else ["trans"]),
    outputs=("output", "top_count"), num_visible=1, infer_shape=_dpsroi_shape,
    attrs=[Attr("spatial_scale", parse_float), Attr("output_dim", parse_int),
           Attr("group_size", parse_int), Attr("pooled_size", parse_int),
           Attr("part_size", parse_int, 0), Attr("sample_per_part", parse_int, 1),
           Attr("trans_std", parse_float, 0.0), Attr("no_trans", parse_bool, False)],
    diff=lambda a, n: [True, False] + [True] * (n - 2),
    doc="Deformable position-sensitive roi pooling: each part's bins moved by trans * "
        "trans_std * roi size, averaging sample_per_part**2 bilinear samples.")


# -- RROIAlign -----------------------------------------------------------------------------

def _rroi_one(attrs, fmap, roi):
    """One rotated roi's (C, ph, pw) output, float32 geometry as mxnet's CPU kernel."""
    c, h, w = fmap.shape
    ph, pw = attrs["pooled_size"]
    scale = f32(attrs["spatial_scale"])
    r = roi.to(torch.float32)
    cx, cy = r[1] * scale, r[2] * scale
    rw, rh = torch.clamp(r[3] * scale, min=1.0), torch.clamp(r[4] * scale, min=1.0)
    theta = torch.tensor(float(roi[5]) * math.pi / 180.0, dtype=torch.float32)
    ratio = attrs["sampling_ratio"]
    gh = ratio if ratio > 0 else int(math.ceil(float(rh / ph)))
    gw = ratio if ratio > 0 else int(math.ceil(float(rw / pw)))
    bh, bw = rh / ph, rw / pw
    yy = (-rh / 2.0 + torch.arange(ph)[:, None] * bh
          + (torch.arange(gh) + 0.5) * bh / gh)                        # (ph, gh)
    xx = (-rw / 2.0 + torch.arange(pw)[:, None] * bw
          + (torch.arange(gw) + 0.5) * bw / gw)                        # (pw, gw)
    yy, xx = yy[:, None, :, None], xx[None, :, None, :]
    cos, sin = torch.cos(theta), torch.sin(theta)
    x = xx * cos + yy * sin + cx
    y = yy * cos - xx * sin + cy
    out_of = (y < -1.0) | (y > h) | (x < -1.0) | (x > w)
    taps = _snap_taps(y.clamp(min=0), x.clamp(min=0), h, w, bounded=False)
    flat = fmap.reshape(c, h * w)
    val = 0
    for ry, rx, wt in taps:
        wt = torch.where(out_of, 0.0, wt)
        val = val + flat[:, (ry * w + rx).long().to(fmap.device)] * wt.to(fmap.device,
                                                                            fmap.dtype)
    return val.sum(dim=(3, 4)) / (gh * gw)


def _rroi(attrs, ins):
    data, rois = ins
    outs = [_rroi_one(attrs, data[int(roi[0])], roi) for roi in host(rois)]
    ph, pw = attrs["pooled_size"]
    return [torch.stack(outs) if outs else data.new_zeros(0, data.shape[1], ph, pw)]


def _rroi_shape(attrs, in_shapes):
    d, r = in_shapes
    if d is None or r is None:
        return in_shapes, [None]
    require_rank("RROIAlign", "data", d, 4)
    if len(r) != 2 or r[1] != 6:
        raise ShapeError(f"RROIAlign: rois of shape {tuple(r)} must be (num_rois, 6)")
    ph, pw = attrs["pooled_size"]
    return [tuple(d), tuple(r)], [(r[0], d[1], ph, pw)]


def _pooled2(v):
    s = parse_shape(v)
    if len(s) != 2 or min(s) < 1:
        raise ValueError(f"pooled_size must be 2 positive integers (h, w), got {v!r}")
    return s


register(OpDef(
    name="_contrib_RROIAlign", pattern="opaque", lowering=Extern(_rroi),
    arguments=("data", "rois"), infer_shape=_rroi_shape,
    attrs=[Attr("pooled_size", _pooled2), Attr("spatial_scale", parse_float),
           Attr("sampling_ratio", parse_int, -1)],
    reference=lambda a, ins, is_train: _rroi(a, ins),
    doc="Rotated roi align: rois [batch, cx, cy, w, h, angle in degrees], each bin the "
        "mean of bilinear samples on the rotated grid (no gradient, as mxnet 1.9.1)."))
