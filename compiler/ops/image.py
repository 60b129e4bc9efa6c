"""mxnet 1.9.1's deterministic image operators (``mx.nd.image`` / ``mx.sym.image``):
``to_tensor``, ``normalize``, ``flip_left_right``, ``flip_top_bottom``, ``crop`` and
``adjust_lighting``.

Images are ``(H, W, C)`` (``(N, H, W, C)`` where mxnet takes a batch), tensors after
``to_tensor`` ``(C, H, W)``; each operator is one ATen call (``Extern``). Shapes,
dtypes and errors follow mxnet's rules; values are mxnet's (``tests/fixtures/
mxnet_image_ops.json``).

Gradients are the true ones. mxnet gives every image augmenter and ``to_tensor`` the
gradient ``_copy`` (the head gradient passed through): for a flip that is not the
gradient, and for ``to_tensor`` not even of the input's shape. Here a flip's gradient
is the flipped head gradient, ``to_tensor``'s the head gradient moved back to
``(H, W, C)`` and divided by 255, ``crop``'s the head gradient placed in zeros, and
``adjust_lighting``'s (it adds a constant per channel) the head gradient itself, as
mxnet's for floating-point images.
"""
from __future__ import annotations

import torch

from .detection import float_tuple
from .registry import Attr, Extern, OpDef, ShapeError, parse_int, register

# AlexNet's lighting noise: the RGB eigenvectors scaled by their eigenvalues
_EIGEN = ((55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009),
          (55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140),
          (55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203))


def _image(shape, op, batch=True):
    """Check an ``(H, W, C)`` image (or ``(N, H, W, C)`` where ``batch``)."""
    ranks = (3, 4) if batch else (3,)
    if len(shape) not in ranks:
        what = "(height, width, channels), or (N, height, width, channels)" if batch else \
            "(height, width, channels)"
        raise ShapeError(f"{op}: input image must have shape {what}, but got {tuple(shape)}")
    if not batch and shape[-1] not in (1, 3):
        raise ShapeError(f"{op}: the last dimension of input image must be the channel "
                         f"dimension with either 1 or 3 elements, but got input with shape "
                         f"{tuple(shape)}")


def _unary(rule):
    def infer_shape(attrs, in_shapes):
        s = in_shapes[0]
        if s is None:
            return in_shapes, [None]
        return in_shapes, [tuple(rule(attrs, tuple(s)))]
    return infer_shape


def _run(fn):
    return lambda attrs, ins: [fn(attrs, ins[0])]


def _ref(fn):
    return lambda attrs, ins, is_train: [fn(attrs, ins[0])]


# -- to_tensor -------------------------------------------------------------------------

def _to_tensor_shape(attrs, s):
    _image(s, "to_tensor")
    return (s[2], s[0], s[1]) if len(s) == 3 else (s[0], s[3], s[1], s[2])


def _to_tensor(attrs, x):
    perm = (2, 0, 1) if x.dim() == 3 else (0, 3, 1, 2)
    return (x.to(torch.float32) / 255.0).permute(perm).contiguous()


def _to_tensor_gradient(b, n):
    axes = (1, 2, 0) if len(n.in_shapes[0]) == 3 else (0, 2, 3, 1)
    return [b.op("_div_scalar", b.op("transpose", n.ograds[0], axes=axes), scalar=255.0)]


register(OpDef(
    name="_image_to_tensor", pattern="opaque", lowering=Extern(_run(_to_tensor)),
    infer_shape=_unary(_to_tensor_shape),
    infer_type=lambda attrs, t: (list(t), ["float32"]), reference=_ref(_to_tensor),
    gradient=_to_tensor_gradient,
    doc="(H, W, C) or (N, H, W, C) values in [0, 255] to float32 (C, H, W) / "
        "(N, C, H, W) in [0, 1]."))


# -- normalize -------------------------------------------------------------------------

def _normalize_shape(attrs, s):
    if len(s) not in (3, 4):
        raise ShapeError(f"normalize: input tensor must have shape (channels, height, "
                         f"width), or (N, channels, height, width), but got {tuple(s)}")
    c = s[0] if len(s) == 3 else s[1]
    if c not in (1, 3):
        raise ShapeError(f"normalize: the channel dimension must have 1 or 3 elements, but "
                         f"got input with shape {tuple(s)}")
    for key in ("mean", "std"):
        if len(attrs[key]) not in (1, c):
            raise ShapeError(f"normalize: invalid {key} for input with shape {tuple(s)}: "
                             f"{key} must have either 1 or {c} elements, but got "
                             f"{attrs[key]}")
    return s


def _per_channel(values, x):
    c = x.shape[0] if x.dim() == 3 else x.shape[1]
    t = torch.tensor(values, dtype=torch.float32, device=x.device).expand(c).clone()
    return t.reshape((c, 1, 1))


def _normalize(attrs, x):
    mean, std = _per_channel(attrs["mean"], x), _per_channel(attrs["std"], x)
    return ((x.to(torch.float32) - mean) / std).to(x.dtype)


register(OpDef(
    name="_image_normalize", pattern="opaque", lowering=Extern(_run(_normalize)),
    attrs=[Attr("mean", float_tuple, (0.0, 0.0, 0.0, 0.0)),
           Attr("std", float_tuple, (1.0, 1.0, 1.0, 1.0))],
    infer_shape=_unary(_normalize_shape), reference=_ref(_normalize),
    # (g - 0) / std: the head gradient normalized with the same std
    gradient=lambda b, n: [b.op("_image_normalize", n.ograds[0], mean=(0.0,),
                                std=n.attrs["std"])],
    doc="(data[c] - mean[c]) / std[c] over a (C, H, W) or (N, C, H, W) tensor."))


# -- flips -----------------------------------------------------------------------------

def _flip_shape(op):
    def rule(attrs, s):
        _image(s, op, batch=False)
        return s
    return rule


for _name, _axis in (("flip_left_right", 1), ("flip_top_bottom", 0)):
    register(OpDef(
        name=f"_image_{_name}", pattern="opaque",
        lowering=Extern(_run(lambda attrs, x, a=_axis: torch.flip(x, (a,)))),
        infer_shape=_unary(_flip_shape(_name)),
        reference=_ref(lambda attrs, x, a=_axis: torch.flip(x, (a,))),
        gradient=lambda b, n, op=f"_image_{_name}": [b.op(op, n.ograds[0])],
        doc=f"The (H, W, C) image flipped along its {'width' if _axis else 'height'}."))


# -- crop ------------------------------------------------------------------------------

def _crop_box(attrs, s):
    h_axis = len(s) - 3
    x, y, w, h = attrs["x"], attrs["y"], attrs["width"], attrs["height"]
    height, width = s[h_axis], s[h_axis + 1]
    if x < 0 or y < 0 or w <= 0 or h <= 0 or x + w > width or y + h > height:
        raise ShapeError(f"crop: the area x={x}, y={y}, width={w}, height={h} does not lie "
                         f"inside the image of shape {tuple(s)} (height {height}, width "
                         f"{width})")
    return h_axis, x, y, w, h


def _crop_shape(attrs, s):
    _image(s, "crop")
    h_axis, _, _, w, h = _crop_box(attrs, s)
    out = list(s)
    out[h_axis], out[h_axis + 1] = h, w
    return tuple(out)


def _crop(attrs, x):
    h_axis, cx, cy, w, h = _crop_box(attrs, tuple(x.shape))
    return x.narrow(h_axis, cy, h).narrow(h_axis + 1, cx, w).contiguous()


def _crop_gradient(b, n):
    s = tuple(n.in_shapes[0])
    h_axis, x, y, w, h = _crop_box(n.attrs, s)
    begin = [0] * len(s)
    end = list(s)
    begin[h_axis], begin[h_axis + 1] = y, x
    end[h_axis], end[h_axis + 1] = y + h, x + w
    return [b.op("_slice_assign", b.zeros_like(n.inputs[0]), n.ograds[0],
                 begin=tuple(begin), end=tuple(end))]


register(OpDef(
    name="_image_crop", pattern="opaque", lowering=Extern(_run(_crop)),
    attrs=[Attr("x", parse_int), Attr("y", parse_int), Attr("width", parse_int),
           Attr("height", parse_int)],
    infer_shape=_unary(_crop_shape), reference=_ref(_crop), gradient=_crop_gradient,
    doc="The width x height area of an (H, W, C) or (N, H, W, C) image at (x, y)."))


# -- adjust_lighting -------------------------------------------------------------------

def _lighting_shape(attrs, s):
    _image(s, "adjust_lighting", batch=False)
    if len(attrs["alpha"]) != 3:
        raise ShapeError(f"adjust_lighting: alpha must hold 3 values (R, G, B), got "
                         f"{attrs['alpha']}")
    return s


def _adjust_lighting(attrs, x):
    if x.shape[-1] == 1:
        return x.clone()
    # float32 products and sums in mxnet's order, then a saturating store for uint8
    eig = torch.tensor(_EIGEN, dtype=torch.float32)
    alpha = torch.tensor(attrs["alpha"], dtype=torch.float32)
    terms = eig * alpha
    pca = terms[:, 0] + terms[:, 1] + terms[:, 2]
    out = x.to(torch.float32) + pca.to(x.device)
    if x.dtype == torch.uint8:
        out = out.clamp(0.0, 255.0)
    return out.to(x.dtype)


register(OpDef(
    name="_image_adjust_lighting", pattern="opaque", lowering=Extern(_run(_adjust_lighting)),
    attrs=[Attr("alpha", float_tuple)], infer_shape=_unary(_lighting_shape),
    reference=_ref(_adjust_lighting), gradient=lambda b, n: [n.ograds[0]],
    doc="AlexNet's PCA lighting: each pixel plus eigvec * eigval * alpha (R, G, B)."))
