"""Spatial transformers, correlation and sliding blocks: mxnet 1.9.1's ``BilinearSampler``,
``GridGenerator``, ``SpatialTransformer``, ``Correlation``, ``im2col`` / ``col2im`` and the
NDArray function ``fill_element_0index``.

The samplers and ``Correlation`` are extern launches (``registry.Extern``): ATen gathers
written so that torch's autograd of the forward is exactly mxnet's CPU backward (the
bilinear corners outside the map read zero and carry no gradient; ``Correlation``'s
``|a - b|`` takes the sign ``a >= b ? 1 : -1``, as mxnet's backward does at a tie). Each
one's gradient is a ``_backward_<name>`` extern that replays the forward under autograd
(``register_with_vjp``, shared with ``deformable.py``). ``im2col`` and ``col2im`` are
externs too (strided slices of the zero-padded map, any of 1 to 3 spatial dims), each
the other's gradient, as mxnet registers them. ``fill_element_0index`` decomposes into
existing ops (a one-hot hit and ``where``), so it is generated code.

Hidden outputs are kept as mxnet lists them: ``BilinearSampler``'s ``tmp`` (the grid as
``(N, H, W, 2)``, what mxnet's cuDNN path keeps), ``GridGenerator``'s ``grid_dst``,
``SpatialTransformer``'s ``grid_dst`` and ``grid_src``, ``Correlation``'s padded
``tmp1`` / ``tmp2`` (NHWC).
"""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from ..errors import MXNetError
from .contrib_common import require_rank
from .registry import (Attr, Decompose, Extern, OpDef, ShapeError, choice, parse_bool,
                       parse_int, parse_shape, prod, register)
from .selection import _hit


# -- the autograd-replayed backward --------------------------------------------------------

def _float_types(n_out):
    def infer(attrs, in_types):
        known = [t for t in in_types if t is not None]
        t = known[0] if known else None
        return [t] * len(in_types), [t] * n_out
    return infer


def _vjp(fwd, n_vis, diff):
    """``run`` of a ``_backward_*`` extern: inputs are the visible outputs' gradients,
    then the forward's inputs; outputs, every input's gradient (zeros where ``diff``
    says the input takes none)."""
    def run(attrs, ins):
        ograds, xs = ins[:n_vis], ins[n_vis:]
        flags = diff(attrs, len(xs))
        with torch.inference_mode(False), torch.enable_grad():     # launches run under
            leaves = [x.clone().requires_grad_(f) for x, f in zip(xs, flags)]  # inference
            ograds = [g.clone() for g in ograds]
            outs = fwd(attrs, leaves)[:n_vis]
            pairs = [(o, g) for o, g in zip(outs, ograds) if o.requires_grad]
            wrt = [x for x in leaves if x.requires_grad]
            got = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs],
                                      allow_unused=True) if pairs and wrt else [None] * len(wrt)
        got = iter(got)
        res = []
        for x in leaves:
            g = next(got) if x.requires_grad else None
            res.append(torch.zeros_like(x.detach()) if g is None else g.detach())
        return res
    return run


def _all_diff(attrs, n):
    return [True] * n


def register_with_vjp(name, fwd, *, arguments, outputs=("output",), num_visible=None,
                      attrs, infer_shape, infer_type=None, diff=_all_diff, aliases=(),
                      doc=""):
    """Register ``name`` (extern ``fwd``) and ``_backward_<name>``, whose run is torch's
    autograd of ``fwd``.

    Parameters
    ----------
    name : str
        The operator's registry name.
    fwd : callable(attrs, inputs) -> list of torch.Tensor
        Every output (hidden ones too), differentiable where mxnet's backward is.
    arguments, outputs : sequence of str or callable(attrs)
        As ``OpDef``'s.
    num_visible : int
        How many leading outputs are visible (and take a head gradient).
    diff : callable(attrs, n_inputs) -> list of bool
        Which inputs get a gradient (the others get zeros, as mxnet's backward writes).
    """
    n_vis = num_visible or 1

    def grad(b, n):
        kept = {k: v for k, v in n.attrs.items() if v is not None}
        g = b.op(f"_backward_{name}", *n.ograds[:n_vis], *n.inputs, **kept)
        return g if isinstance(g, list) else [g]

    def bwd_shape(a, s):
        return s, [None if x is None else tuple(x) for x in s[n_vis:]]

    def bwd_outputs(a):
        count = len(arguments(a)) if callable(arguments) else len(arguments)
        return [f"output{k}" for k in range(count)] if count > 1 else ["output"]

    n_out = lambda a: len(outputs(a)) if callable(outputs) else len(outputs)  # noqa: E731
    register(OpDef(
        name=name, pattern="opaque", lowering=Extern(fwd), arguments=arguments,
        outputs=outputs, num_visible=None if num_visible is None else (lambda a: n_vis),
        attrs=list(attrs), infer_shape=infer_shape,
        infer_type=infer_type or (lambda a, t: _float_types(n_out(a))(a, t)),
        reference=lambda a, ins, is_train: fwd(a, ins), gradient=grad, aliases=aliases,
        doc=doc))
    register(OpDef(
        name=f"_backward_{name}", pattern="opaque", lowering=Extern(_vjp(fwd, n_vis, diff)),
        arguments=lambda a: [f"ograd{k}" for k in range(n_vis)] + [
            f"in{k}" for k in range(len(arguments(a)) if callable(arguments)
                                    else len(arguments))],
        outputs=bwd_outputs, attrs=list(attrs), infer_shape=bwd_shape,
        infer_type=lambda a, t: (t, t[n_vis:]),
        reference=lambda a, ins, is_train: _vjp(fwd, n_vis, diff)(a, ins)))


# -- bilinear sampling ---------------------------------------------------------------------

def bilinear_zero_pad(data, yr, xr):
    """mxnet's BilinearSampler kernel: ``data`` (N, C, H, W) read at pixel coordinates
    ``yr``, ``xr`` (N, *S); each of the four corners off the map reads 0. Returns
    (N, C, *S)."""
    n, c, h, w = data.shape
    y0, x0 = torch.floor(yr).detach(), torch.floor(xr).detach()
    wy, wx = yr - y0, xr - x0
    flat = data.reshape(n, c, h * w)
    out = 0
    for dy, ky in ((0, 1.0 - wy), (1, wy)):
        for dx, kx in ((0, 1.0 - wx), (1, wx)):
            yy, xx = y0 + dy, x0 + dx
            ok = (yy >= 0) & (yy <= h - 1) & (xx >= 0) & (xx <= w - 1)
            idx = (yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)).nan_to_num(0).long()
            v = flat.gather(2, idx.reshape(n, 1, -1).expand(n, c, -1))
            out = out + v.reshape(n, c, *yr.shape[1:]) * (ky * kx * ok)[:, None]
    return out


def _sample_grid(data, gx, gy):
    """Sample at a normalized grid ``gx``, ``gy`` in [-1, 1] (mxnet's mapping)."""
    h, w = data.shape[2], data.shape[3]
    return bilinear_zero_pad(data, (gy + 1) * (h - 1) / 2, (gx + 1) * (w - 1) / 2)


def _sampler_shape(attrs, in_shapes):
    d, g = in_shapes
    if d is None or g is None:
        return in_shapes, [None, None]
    require_rank("BilinearSampler", "data", d, 4)
    require_rank("BilinearSampler", "grid", g, 4)
    if d[0] != g[0] or g[1] != 2:
        raise ShapeError(f"BilinearSampler: grid of shape {tuple(g)} must be (batch, 2, H, W) "
                         f"with the batch of data {tuple(d)}")
    return [tuple(d), tuple(g)], [(d[0], d[1], g[2], g[3]), (g[0], g[2], g[3], 2)]


def _sampler(attrs, ins):
    data, grid = ins
    return [_sample_grid(data, grid[:, 0], grid[:, 1]), grid.detach().permute(0, 2, 3, 1)]


register_with_vjp(
    "BilinearSampler", _sampler, arguments=("data", "grid"), outputs=("output", "tmp"),
    num_visible=1, attrs=[Attr("cudnn_off", parse_bool, None)], infer_shape=_sampler_shape,
    doc="Bilinear sampling of data (N, C, H, W) at grid (N, 2, h, w) of normalized x, y "
        "in [-1, 1]; points off the map read zero.")


# -- GridGenerator, SpatialTransformer -------------------------------------------------------

def _target(attrs, op):
    t = tuple(attrs["target_shape"])
    if len(t) != 2 or min(t) <= 0:
        raise ShapeError(f"{op}: target_shape={t} must be two positive sizes (h, w)")
    return t


def _affine_dst(h, w, dtype, device):
    """The (3, h * w) destination grid: normalized x, y and ones, mxnet's order."""
    i = torch.arange(h * w, device=device)
    x = -1.0 + (i % w).to(dtype) * (2.0 / (w - 1) if w > 1 else math.inf)
    y = -1.0 + (i // w).to(dtype) * (2.0 / (h - 1) if h > 1 else math.inf)
    return torch.stack([x, y, torch.ones_like(x)])


def _gridgen_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None, None]
    if attrs["transform_type"] == "affine":
        if len(d) != 2 or d[1] != 6:
            raise ShapeError(f"GridGenerator: affine data of shape {tuple(d)} must be "
                             f"(batch, 6)")
        h, w = _target(attrs, "GridGenerator")
        return [tuple(d)], [(d[0], 2, h, w), (3, h * w)]
    if len(d) != 4 or d[1] != 2:
        raise ShapeError(f"GridGenerator: warp data of shape {tuple(d)} must be "
                         f"(batch, 2, H, W)")
    return [tuple(d)], [tuple(d), (2, d[2], d[3])]


def _gridgen(attrs, ins):
    data = ins[0]
    if attrs["transform_type"] == "affine":
        h, w = attrs["target_shape"]
        dst = _affine_dst(h, w, data.dtype, data.device)
        out = data.reshape(-1, 2, 3) @ dst
        return [out.reshape(-1, 2, h, w), dst]
    n, _, h, w = data.shape
    ys, xs = torch.meshgrid(torch.arange(h, device=data.device, dtype=data.dtype),
                            torch.arange(w, device=data.device, dtype=data.dtype),
                            indexing="ij")
    dst = torch.stack([xs, ys])
    half = torch.tensor([(w - 1.0) / 2.0, (h - 1.0) / 2.0], dtype=data.dtype,
                        device=data.device).reshape(1, 2, 1, 1)
    return [(data + dst) / half - 1.0, dst]


register_with_vjp(
    "GridGenerator", _gridgen, arguments=("data",), outputs=("output", "grid_dst"),
    num_visible=1, infer_shape=_gridgen_shape,
    attrs=[Attr("transform_type", choice("affine", "warp")),
           Attr("target_shape", parse_shape, (0, 0))],
    doc="A sampling grid for BilinearSampler: an affine matrix (N, 6) applied to the "
        "normalized target grid, or an optical flow (N, 2, H, W) added to the pixel grid.")


def _st_shape(attrs, in_shapes):
    d, loc = in_shapes
    h, w = _target(attrs, "SpatialTransformer")
    if d is None or loc is None:          # mxnet infers neither input from the other
        return in_shapes, [None, (3, h * w), None]
    require_rank("SpatialTransformer", "data", d, 4)
    if len(loc) != 2 or loc[1] != 6 or loc[0] != d[0]:
        raise ShapeError(f"SpatialTransformer: loc of shape {tuple(loc)} must be "
                         f"({d[0]}, 6) for data {tuple(d)}")
    return [tuple(d), tuple(loc)], [(d[0], d[1], h, w), (3, h * w), (d[0], 2, h * w)]


def _st(attrs, ins):
    data, loc = ins
    h, w = attrs["target_shape"]
    dst = _affine_dst(h, w, data.dtype, data.device)
    src = loc.reshape(-1, 2, 3) @ dst
    n = data.shape[0]
    out = _sample_grid(data, src[:, 0].reshape(n, h, w), src[:, 1].reshape(n, h, w))
    return [out, dst, src.detach()]


register_with_vjp(
    "SpatialTransformer", _st, arguments=("data", "loc"),
    outputs=("output", "grid_dst", "grid_src"), num_visible=1, infer_shape=_st_shape,
    attrs=[Attr("target_shape", parse_shape, (0, 0)),
           Attr("transform_type", choice("affine")), Attr("sampler_type", choice("bilinear")),
           Attr("cudnn_off", parse_bool, None)],
    doc="An affine spatial transformer: loc (N, 6) maps the target grid into data, "
        "which is sampled bilinearly (zeros off the map).")


# -- Correlation -----------------------------------------------------------------------------

def _corr_geometry(attrs, dshape):
    """(top channels, top height, top width, grid radius, grid width) as mxnet's
    CorrelationProp computes them."""
    p, k, md = attrs["pad_size"], attrs["kernel_size"], attrs["max_displacement"]
    s1, s2 = attrs["stride1"], attrs["stride2"]
    border = md + (k - 1) // 2
    th = math.ceil((dshape[2] + 2 * p - 2 * border) / s1)
    tw = math.ceil((dshape[3] + 2 * p - 2 * border) / s1)
    if th < 1 or tw < 1:
        raise ShapeError(f"Correlation: data of shape {tuple(dshape)}: cannot be done with "
                         f"current settings. Neighborhood and kernel don't fit in blob")
    r = md // s2
    return (2 * r + 1) ** 2, th, tw, r, 2 * r + 1


def _corr_shape(attrs, in_shapes):
    d1, d2 = in_shapes
    d = d1 if d1 is not None else d2
    if d is None:
        return in_shapes, [None, None, None]
    require_rank("Correlation", "data1", d, 4)
    if d1 is not None and d2 is not None and tuple(d1) != tuple(d2):
        raise ShapeError(f"Correlation: data1 {tuple(d1)} and data2 {tuple(d2)} must have "
                         f"the same shape")
    tc, th, tw, _, _ = _corr_geometry(attrs, d)
    p = attrs["pad_size"]
    tmp = (d[0], d[2] + 2 * p, d[3] + 2 * p, d[1])
    return [tuple(d), tuple(d)], [(d[0], tc, th, tw), tmp, tmp]


def _correlation(attrs, ins):
    d1, d2 = ins
    k, md, s1, s2 = (attrs[a] for a in ("kernel_size", "max_displacement", "stride1",
                                        "stride2"))
    if k % 2 == 0:
        raise MXNetError(f"Correlation: kernel size should be odd number, got {k}")
    tc, th, tw, r, gw = _corr_geometry(attrs, d1.shape)
    p = attrs["pad_size"]
    p1, p2 = F.pad(d1, (p, p, p, p)), F.pad(d2, (p, p, p, p))
    span_h, span_w = (th - 1) * s1 + 1, (tw - 1) * s1 + 1
    outs = []
    for ch in range(tc):
        oy, ox = (ch // gw - r) * s2, (ch % gw - r) * s2
        acc = 0
        for i, j in itertools.product(range(k), range(k)):
            y, x = md + i, md + j
            a = p1[:, :, y:y + span_h:s1, x:x + span_w:s1]
            b = p2[:, :, y + oy:y + oy + span_h:s1, x + ox:x + ox + span_w:s1]
            if attrs["is_multiply"]:
                acc = acc + (a * b).sum(1)
            else:
                sign = torch.where(a >= b, 1.0, -1.0).to(a.dtype).detach()
                acc = acc + ((a - b) * sign).sum(1)
        outs.append(acc / (k * k * d1.shape[1]))
    return [torch.stack(outs, 1), p1.detach().permute(0, 2, 3, 1),
            p2.detach().permute(0, 2, 3, 1)]


register_with_vjp(
    "Correlation", _correlation, arguments=("data1", "data2"),
    outputs=("output", "tmp1", "tmp2"), num_visible=1, infer_shape=_corr_shape,
    attrs=[Attr("kernel_size", parse_int, 1), Attr("max_displacement", parse_int, 1),
           Attr("stride1", parse_int, 1), Attr("stride2", parse_int, 1),
           Attr("pad_size", parse_int, 0), Attr("is_multiply", parse_bool, True)],
    doc="FlowNet's correlation of two feature maps: per displacement within "
        "max_displacement, the mean over a kernel window and channels of a*b (or |a-b|).")


# -- im2col, col2im --------------------------------------------------------------------------

def _sliding(attrs, op):
    """(kernel, stride, dilate, pad) with mxnet's SlidingParser defaults and checks."""
    kernel = tuple(attrs["kernel"])
    nd = len(kernel)
    if nd not in (1, 2, 3):
        raise ShapeError(f"{op}: kernel={kernel}: {nd}D convolution not supported")
    stride = tuple(attrs["stride"]) or (1,) * nd
    dilate = tuple(attrs["dilate"]) or (1,) * nd
    pad = tuple(attrs["pad"]) or (0,) * nd
    for what, v in (("stride", stride), ("dilate", dilate), ("pad", pad)):
        if len(v) != nd:
            raise ShapeError(f"{op}: {what}={v} must have the same number of dimensions as "
                             f"kernel={kernel}")
    if prod(kernel) <= 0 or prod(stride) <= 0 or prod(dilate) <= 0:
        raise ShapeError(f"{op}: kernel={kernel}, stride={stride}, dilate={dilate} must be "
                         f"positive")
    return kernel, stride, dilate, pad


def _blocks(op, attrs, spatial):
    """Per spatial dim, the number of sliding positions."""
    kernel, stride, dilate, pad = _sliding(attrs, op)
    if len(spatial) != len(kernel):
        raise ShapeError(f"{op}: {len(spatial)} spatial dims {tuple(spatial)} but "
                         f"kernel={kernel}")
    out = []
    for s, k, st, d, p in zip(spatial, kernel, stride, dilate, pad):
        ext = 1 + (k - 1) * d
        if ext > s + 2 * p:
            raise ShapeError(f"{op}: kernel size {kernel} (dilated) exceeds the padded "
                             f"input {tuple(spatial)} (pad {pad})")
        out.append((s + 2 * p - ext) // st + 1)
    return out


def _offsets(attrs, blocks):
    """Per kernel point (row-major), the slices of the padded map it reads."""
    kernel, stride, dilate, _ = _sliding(attrs, "im2col")
    for point in itertools.product(*(range(k) for k in kernel)):
        yield (slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (n - 1) * s + 1, s)
            for o, d, s, n in zip(point, dilate, stride, blocks))


def _pads(pad):
    return [v for p in reversed(pad) for v in (p, p)]


def _im2col(attrs, ins):
    x = ins[0]
    blocks = _blocks("im2col", attrs, x.shape[2:])
    xp = F.pad(x, _pads(_sliding(attrs, "im2col")[3]))
    col = torch.stack([xp[sl] for sl in _offsets(attrs, blocks)], 2)
    return [col.reshape(x.shape[0], -1, prod(blocks))]


def _col2im(attrs, ins):
    col = ins[0]
    size = tuple(attrs["output_size"])
    kernel, _, _, pad = _sliding(attrs, "col2im")
    blocks = _blocks("col2im", attrs, size)
    n, c = col.shape[0], col.shape[1] // prod(kernel)
    col = col.reshape(n, c, prod(kernel), *blocks)
    img = torch.zeros((n, c) + tuple(s + 2 * p for s, p in zip(size, pad)),
                      dtype=col.dtype, device=col.device)
    for i, sl in enumerate(_offsets(attrs, blocks)):
        img[sl] += col[:, :, i]
    crop = (slice(None), slice(None)) + tuple(slice(p, p + s) for s, p in zip(size, pad))
    return [img[crop]]


def _im2col_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None]
    blocks = _blocks("im2col", attrs, d[2:])
    return [tuple(d)], [(d[0], d[1] * prod(attrs["kernel"]), prod(blocks))]


def _col2im_shape(attrs, in_shapes):
    d = in_shapes[0]
    if d is None:
        return in_shapes, [None]
    size = tuple(attrs["output_size"])
    blocks = _blocks("col2im", attrs, size)
    k = prod(attrs["kernel"])
    require_rank("col2im", "data", d, 3)
    if d[2] != prod(blocks):
        raise ShapeError(f"col2im: data of shape {tuple(d)}: output size does not match "
                         f"convolution parameters ({prod(blocks)} blocks)")
    if d[1] % k:
        raise ShapeError(f"col2im: data of shape {tuple(d)}: the second dim of input shape "
                         f"should be multiples of kernel size {k}")
    return [tuple(d)], [(d[0], d[1] // k) + size]


def _sliding_attrs(n):
    return {a: n.attrs[a] for a in ("kernel", "stride", "dilate", "pad")}


_SLIDING = [Attr("kernel", parse_shape), Attr("stride", parse_shape, ()),
            Attr("dilate", parse_shape, ()), Attr("pad", parse_shape, ())]

register(OpDef(
    name="im2col", pattern="opaque", lowering=Extern(_im2col), attrs=_SLIDING,
    infer_shape=_im2col_shape, reference=lambda a, ins, is_train: _im2col(a, ins),
    gradient=lambda b, n: [b.op("col2im", n.ograds[0], **_sliding_attrs(n),
                                output_size=tuple(n.in_shapes[0][2:]))],
    doc="Sliding blocks of data (N, C, *) as columns (N, C * prod(kernel), blocks)."))
register(OpDef(
    name="col2im", pattern="opaque", lowering=Extern(_col2im),
    attrs=[Attr("output_size", parse_shape)] + _SLIDING, infer_shape=_col2im_shape,
    reference=lambda a, ins, is_train: _col2im(a, ins),
    gradient=lambda b, n: [b.op("im2col", n.ograds[0], **_sliding_attrs(n))],
    doc="Columns (N, C * prod(kernel), blocks) summed back into an image of output_size "
        "(im2col's gradient)."))


# -- fill_element_0index -------------------------------------------------------------------

def _fill_shape(attrs, in_shapes):
    lhs, mhs, rhs = in_shapes
    if lhs is None:
        return in_shapes, [None]
    require_rank("fill_element_0index", "lhs", lhs, 2)
    for what, s in (("mhs", mhs), ("rhs", rhs)):
        if s is not None and tuple(s) != (lhs[0],):
            raise ShapeError(f"fill_element_0index: {what} of shape {tuple(s)} must be "
                             f"({lhs[0]},) for lhs {tuple(lhs)}")
    return [tuple(lhs), (lhs[0],), (lhs[0],)], [tuple(lhs)]


def _fill_ref(attrs, ins, is_train):
    lhs, mhs, rhs = ins
    idx = rhs.detach().to(torch.int64)[:, None]
    hit = idx == torch.arange(lhs.shape[1], device=lhs.device)
    return [torch.where(hit, mhs[:, None].expand_as(lhs), lhs)]


def _fill_build(b, n, is_train):
    lhs, mhs, rhs = n.inputs
    shape = tuple(n.in_shapes[0])
    hit = _hit(b, rhs, shape, 1)
    col = b.op("broadcast_to", b.op("Reshape", mhs, shape=(shape[0], 1)), shape=shape)
    return [b.op("where", hit, col, lhs)]


def _fill_grad(b, n):
    lhs, mhs, rhs = n.inputs
    shape = tuple(n.in_shapes[0])
    hit = _hit(b, rhs, shape, 1)
    zeros = b.op("_zeros", shape=shape)
    picked = b.op("sum", b.op("where", hit, n.ograds[0], zeros), axis=(1,))
    return [b.op("where", hit, zeros, n.ograds[0]), picked, b.zeros_like(rhs)]


register(OpDef(
    name="fill_element_0index", pattern="composite", lowering=Decompose(_fill_build),
    arguments=("lhs", "mhs", "rhs"), infer_shape=_fill_shape, reference=_fill_ref,
    gradient=_fill_grad,
    doc="lhs (M, N) with lhs[i, int(rhs[i])] = mhs[i] (0-based; an index off the row "
        "leaves it as it is)."))
