"""Shape operators: Reshape, Flatten, expand_dims, transpose, SwapAxis,
Concat, SliceChannel, slice_axis, reverse, broadcast_to / broadcast_axis, and the
internal ``_sum_to_shape`` that broadcast gradients use (the constant sources zeros /
ones / _full are in ``creation.py``).

Most of them are zero-copy views (:class:`View`): ``view`` maps the input's
element strides and offset to the output's, ``dimmap`` says which input dim
each output dim is when the op only relabels dims.
"""
from __future__ import annotations

import torch

from .registry import (Attr, Decompose, OpDef, ShapeError, Special, View, normalize_axis,
                       parse_bool, parse_count, parse_int, parse_optional_int, parse_shape,
                       prod, register)


def _t(s):
    return None if s is None else tuple(int(x) for x in s)


def contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for d in reversed(tuple(shape)):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def reshape_strides(old_shape, old_strides, new_shape):
    """Strides of ``new_shape`` viewing a tensor of ``old_shape``/``old_strides``.

    torch's ``view`` rule: runs of dims that are contiguous with each other may
    be merged or split; returns None when no view exists.
    """
    old_shape, old_strides, new_shape = tuple(old_shape), tuple(old_strides), tuple(new_shape)
    if prod(old_shape) == 0 or prod(new_shape) == 0:
        return contiguous_strides(new_shape)
    if not old_shape:
        old_shape, old_strides = (1,), (1,)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = old_strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1
                             and old_strides[tensor_d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base = old_strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def _reshape_view(attrs, in_shape, out_shape, strides, offset):
    s = reshape_strides(in_shape, strides, out_shape)
    return None if s is None else (s, offset)


def _unit_dimmap(attrs, in_shape, out_shape):
    """A reshape that only inserts / removes size-1 dims maps its other dims in order."""
    in_keep = [i for i, d in enumerate(in_shape) if d != 1]
    out_keep = [i for i, d in enumerate(out_shape) if d != 1]
    if [in_shape[i] for i in in_keep] != [out_shape[i] for i in out_keep]:
        return None
    result = [None] * len(out_shape)
    for o, i in zip(out_keep, in_keep):
        result[o] = i
    return result


# -- Reshape --------------------------------------------------------------------

def infer_reshape(in_shape, shape, reverse=False) -> tuple:
    """mxnet 1.9.1's Reshape rule with special codes 0, -1, -2, -3, -4."""
    dshape = list(in_shape)
    spec = list(shape)
    if reverse:
        dshape.reverse()
        spec.reverse()
    what = f"Reshape: cannot reshape {tuple(in_shape)} with shape={tuple(shape)}" + (
        " (reverse=True)" if reverse else "")
    out = []
    src = 0
    inf_idx = -1
    i = 0
    n = len(dshape)
    while i < len(spec):
        p = spec[i]
        if p == 0:
            if src >= n:
                raise ShapeError(f"{what}: code 0 at position {i} copies input dim {src}, "
                                 f"but the input has only {n} dims")
            out.append(dshape[src])
            src += 1
        elif p == -1:
            if inf_idx >= 0:
                raise ShapeError(f"{what}: one and only one dim can be inferred (-1)")
            inf_idx = len(out)
            out.append(1)
            src += 1
        elif p == -2:
            out.extend(dshape[src:])
            src = n
        elif p == -3:
            if src + 1 >= n:
                raise ShapeError(f"{what}: code -3 at position {i} needs two input dims "
                                 f"from dim {src}")
            out.append(dshape[src] * dshape[src + 1])
            src += 2
        elif p == -4:
            if i + 2 >= len(spec):
                raise ShapeError(f"{what}: code -4 must be followed by two dims")
            if src >= n:
                raise ShapeError(f"{what}: code -4 at position {i} has no input dim to split")
            d0 = dshape[src]
            src += 1
            d1, d2 = spec[i + 1], spec[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise ShapeError(f"{what}: split dims after -4 cannot both be -1")
            if d1 == -1:
                d1 = d0 // d2 if d2 else 0
            if d2 == -1:
                d2 = d0 // d1 if d1 else 0
            if d1 * d2 != d0:
                raise ShapeError(f"{what}: split dims {d1}, {d2} do not multiply to {d0}")
            out.extend([d1, d2])
        elif p > 0:
            out.append(p)
            src += 1
        else:
            raise ShapeError(f"{what}: invalid code {p} in shape")
        i += 1
    total = prod(dshape)
    if inf_idx >= 0:
        rest = prod(out)
        if total > 0:
            if rest == 0 or total % rest:
                raise ShapeError(f"{what}: size {total} is not divisible by {rest} to infer -1")
            out[inf_idx] = total // rest
        else:
            out[inf_idx] = 0
    if reverse:
        out.reverse()
    if prod(out) != total:
        raise ShapeError(f"{what}: the target shape {tuple(out)} has {prod(out)} elements, "
                         f"the input has {total}")
    return tuple(out)


def _reshape_target(attrs, in_shape):
    shape = attrs["shape"]
    if not shape and attrs.get("target_shape"):  # legacy: 0 means infer
        tgt = [(-1 if d == 0 else d) for d in attrs["target_shape"]]
        if attrs.get("keep_highest"):
            tgt = [0] + tgt
        shape = tuple(tgt)
    return infer_reshape(in_shape, shape, attrs["reverse"])


def _reshape_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [_reshape_target(attrs, x)]


def _reshape_back(b, n):
    return [b.op("Reshape", n.ograds[0], shape=tuple(n.in_shapes[0]))]


def _reshape_shape_back(attrs, in_dims, out_dims):
    """mxnet's reverse reshape inference: an input with one unknown (0) dim takes it
    from a fully known output's size (``elemwise_add(x.reshape((0, -1)), ones((2, 75)))``
    with ``x`` given as ``(2, 0, 5, 5)`` decides ``x`` is ``(2, 3, 5, 5)``)."""
    x, out = in_dims[0], out_dims[0]
    if x is None or out is None or 0 in out or x.count(0) != 1:
        return [None]
    rest = prod(d for d in x if d)
    if rest == 0 or prod(out) % rest:
        return [None]           # the sizes disagree: infer_shapes reports it
    return [[d if d else prod(out) // rest for d in x]]


_RESHAPE_VIEW = View(view=_reshape_view, dimmap=_unit_dimmap)

register(OpDef(
    name="Reshape", pattern="injective", lowering=_RESHAPE_VIEW,
    # row-major: (B, ...) -> (k B, ...) keeps each half of the rows a half of the memory
    rows_independent=True,
    attrs=[Attr("shape", parse_shape, ()), Attr("reverse", parse_bool, False),
           Attr("target_shape", parse_shape, ()), Attr("keep_highest", parse_bool, False)],
    infer_shape=_reshape_shape, infer_shape_back=_reshape_shape_back,
    reference=lambda attrs, ins, is_train: [ins[0].reshape(_reshape_target(attrs, tuple(ins[0].shape)))],
    gradient=_reshape_back, aliases=("reshape",)))


# -- Flatten --------------------------------------------------------------------

def _flatten_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    if not x:
        raise ShapeError("Flatten: input must have at least 1 dim")
    return [x], [(x[0], prod(x[1:]))]


register(OpDef(
    name="Flatten", pattern="injective", lowering=_RESHAPE_VIEW, infer_shape=_flatten_shape,
    rows_independent=True,
    reference=lambda attrs, ins, is_train: [ins[0].reshape(ins[0].shape[0], -1)
                                            if ins[0].dim() > 0 else ins[0].reshape(1, 1)],
    gradient=_reshape_back, aliases=("flatten",)))


# -- expand_dims ------------------------------------------------------------------

def _expand_axis(attrs, ndim):
    axis = attrs["axis"]
    if not -ndim - 1 <= axis <= ndim:
        raise ShapeError(f"expand_dims: axis={axis} must be in the range [{-ndim - 1}, {ndim}] "
                         f"for a {ndim}-d input")
    return axis % (ndim + 1)


def _expand_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    a = _expand_axis(attrs, len(x))
    return [x], [x[:a] + (1,) + x[a:]]


def _expand_view(attrs, in_shape, out_shape, strides, offset):
    a = _expand_axis(attrs, len(in_shape))
    s = strides[a] * in_shape[a] if a < len(in_shape) else 1
    return tuple(strides[:a]) + (s,) + tuple(strides[a:]), offset


def _expand_dimmap(attrs, in_shape, out_shape):
    a = _expand_axis(attrs, len(in_shape))
    dims = list(range(len(in_shape)))
    return dims[:a] + [None] + dims[a:]


register(OpDef(
    name="expand_dims", pattern="injective", lowering=View(_expand_view, _expand_dimmap),
    rows_independent=lambda attrs: attrs["axis"] > 0,
    attrs=[Attr("axis", parse_int)], infer_shape=_expand_shape,
    reference=lambda attrs, ins, is_train: [ins[0].unsqueeze(_expand_axis(attrs, ins[0].dim()))],
    gradient=_reshape_back))


# -- transpose / SwapAxis -----------------------------------------------------------

def _perm(attrs, ndim):
    axes = attrs["axes"]
    if not axes:
        return tuple(range(ndim - 1, -1, -1))
    if len(axes) != ndim:
        raise ShapeError(f"transpose: axes={tuple(axes)} has {len(axes)} entries but the input "
                         f"has {ndim} dims")
    perm = tuple(normalize_axis(a, ndim, "transpose") for a in axes)
    if sorted(perm) != list(range(ndim)):
        raise ShapeError(f"transpose: axes={tuple(axes)} is not a permutation of "
                         f"{tuple(range(ndim))}")
    return perm


def _transpose_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [tuple(x[p] for p in _perm(attrs, len(x)))]


def _transpose_dim_links(attrs, in_ranks, out_ranks):
    # output dim k is input dim perm[k]: mxnet infers either side from the other
    rank = in_ranks[0] if in_ranks[0] is not None else out_ranks[0]
    if rank is None:
        return []
    return [[("out", 0, k), ("in", 0, p)] for k, p in enumerate(_perm(attrs, rank))]


def _transpose_grad(b, n):
    perm = _perm(n.attrs, len(n.in_shapes[0]))
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [b.op("transpose", n.ograds[0], axes=tuple(inv))]


register(OpDef(
    name="transpose", pattern="injective",
    rows_independent=lambda attrs: bool(attrs["axes"]) and int(attrs["axes"][0]) == 0,
    lowering=View(
        view=lambda attrs, i, o, strides, offset: (
            tuple(strides[p] for p in _perm(attrs, len(i))), offset),
        dimmap=lambda attrs, i, o: list(_perm(attrs, len(i)))),
    attrs=[Attr("axes", parse_shape, ())], infer_shape=_transpose_shape,
    dim_links=_transpose_dim_links,
    reference=lambda attrs, ins, is_train: [ins[0].permute(*_perm(attrs, ins[0].dim()))],
    gradient=_transpose_grad))


def _swap_perm(attrs, ndim):
    d1 = attrs["dim1"]
    d2 = attrs["dim2"]
    for name, d in (("dim1", d1), ("dim2", d2)):
        if not -ndim <= d < ndim:
            raise ShapeError(f"SwapAxis: {name}={d} is out of bounds for a {ndim}-d input")
    perm = list(range(ndim))
    d1, d2 = d1 % ndim, d2 % ndim
    perm[d1], perm[d2] = perm[d2], perm[d1]
    return perm


def _swap_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [tuple(x[p] for p in _swap_perm(attrs, len(x)))]


register(OpDef(
    name="SwapAxis", pattern="injective",
    lowering=View(
        view=lambda attrs, i, o, strides, offset: (
            tuple(strides[p] for p in _swap_perm(attrs, len(i))), offset),
        dimmap=lambda attrs, i, o: _swap_perm(attrs, len(i))),
    attrs=[Attr("dim1", parse_int, 0), Attr("dim2", parse_int, 0)], infer_shape=_swap_shape,
    reference=lambda attrs, ins, is_train: [ins[0].permute(*_swap_perm(attrs, ins[0].dim()))],
    gradient=lambda b, n: [b.op("SwapAxis", n.ograds[0], dim1=n.attrs["dim1"],
                                dim2=n.attrs["dim2"])],
    aliases=("swapaxes",)))


# -- Concat ---------------------------------------------------------------------------

def _concat_shape(attrs, in_shapes):
    num = attrs["num_args"]
    if len(in_shapes) != num:
        raise ShapeError(f"Concat: num_args={num} but {len(in_shapes)} inputs were given")
    known = [_t(s) for s in in_shapes if s is not None]
    if not known:
        return in_shapes, [None]
    ndim = len(known[0])
    if ndim == 0:
        raise ShapeError("Concat: inputs must have at least 1 dim")
    dim = attrs["dim"]
    if not -ndim <= dim < ndim:
        raise ShapeError(f"Concat: dim={dim} is out of range for {ndim}-d inputs")
    dim %= ndim
    ref = known[0]
    for s in known[1:]:
        if len(s) != ndim or any(a != c for k, (a, c) in enumerate(zip(s, ref)) if k != dim):
            shapes = ", ".join("?" if x is None else str(tuple(x)) for x in in_shapes)
            raise ShapeError(f"Concat: inputs must agree on every dim except dim={dim}; "
                             f"got shapes {shapes}")
    if len(known) < num:
        return in_shapes, [None]
    total = sum(s[dim] for s in known)
    return [tuple(s) for s in in_shapes], [ref[:dim] + (total,) + ref[dim + 1:]]


def _concat_dim(attrs, ndim):
    return attrs["dim"] % ndim


def _concat_grad(b, n):
    dim = _concat_dim(n.attrs, len(n.in_shapes[0]))
    grads, start = [], 0
    for s in n.in_shapes:
        grads.append(b.op("slice_axis", n.ograds[0], axis=dim, begin=start, end=start + s[dim]))
        start += s[dim]
    return grads


def _concat_dim_links(attrs, in_ranks, out_ranks):
    """Every dim but ``dim`` is shared by the inputs and the output."""
    ndim = next((r for r in list(in_ranks) + list(out_ranks) if r is not None), None)
    if ndim is None:
        return []
    dim = _concat_dim(attrs, ndim)
    sides = [("in", i) for i in range(len(in_ranks))] + [("out", 0)]
    return [[(side, i, k) for side, i in sides] for k in range(ndim) if k != dim]


register(OpDef(
    name="Concat", pattern="injective", lowering=Special("concat"),
    rows_independent=lambda attrs: attrs["dim"] > 0,
    dim_links=_concat_dim_links,
    arguments=lambda attrs: [f"arg{i}" for i in range(attrs["num_args"])],
    attrs=[Attr("num_args", parse_count), Attr("dim", parse_int, 1)],
    infer_shape=_concat_shape,
    reference=lambda attrs, ins, is_train: [torch.cat(list(ins), dim=_concat_dim(attrs, ins[0].dim()))],
    gradient=_concat_grad, variadic="num_args", key_var_num_args="num_args",
    aliases=("concat",)))


# -- slice_axis -------------------------------------------------------------------------

def _slice_range(attrs, in_shape):
    ndim = len(in_shape)
    axis = attrs["axis"]
    if not -ndim <= axis < ndim:
        raise ShapeError(f"slice_axis: axis={axis} is out of range for input shape "
                         f"{tuple(in_shape)}")
    axis %= ndim
    size = in_shape[axis]
    begin, end = attrs["begin"], attrs["end"]
    b = begin + size if begin < 0 else begin
    e = size if end is None else (end + size if end < 0 else end)
    if not (0 <= b < e <= size):
        raise ShapeError(f"slice_axis: invalid begin={begin}, end={end} for axis {axis} of size "
                         f"{size} (input shape {tuple(in_shape)})")
    return axis, b, e


def _slice_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    axis = attrs["axis"] % len(x) if -len(x) <= attrs["axis"] < len(x) else None
    if axis is not None and x[axis] == 0:
        return [x], [x]     # an unknown (0) dim, in partial inference, stays unknown
    axis, b, e = _slice_range(attrs, x)
    return [x], [x[:axis] + (e - b,) + x[axis + 1:]]


def _slice_view(attrs, in_shape, out_shape, strides, offset):
    axis, b, _ = _slice_range(attrs, in_shape)
    return tuple(strides), offset + b * strides[axis]


def _slice_ref(attrs, ins, is_train):
    axis, b, e = _slice_range(attrs, tuple(ins[0].shape))
    return [ins[0].narrow(axis, b, e - b)]


def _slice_grad(b, n):
    shape = tuple(n.in_shapes[0])
    axis, lo, hi = _slice_range(n.attrs, shape)
    parts = []
    if lo > 0:
        parts.append(b.op("_zeros", shape=shape[:axis] + (lo,) + shape[axis + 1:]))
    parts.append(n.ograds[0])
    if hi < shape[axis]:
        parts.append(b.op("_zeros", shape=shape[:axis] + (shape[axis] - hi,) + shape[axis + 1:]))
    if len(parts) == 1:
        return [n.ograds[0]]
    return [b.op("Concat", *parts, num_args=len(parts), dim=axis)]


register(OpDef(
    name="slice_axis", pattern="injective", lowering=View(_slice_view, None),
    rows_independent=lambda attrs: attrs["axis"] > 0,
    attrs=[Attr("axis", parse_int), Attr("begin", parse_int), Attr("end", parse_optional_int, None)],
    infer_shape=_slice_shape, reference=_slice_ref, gradient=_slice_grad))


# -- SliceChannel -------------------------------------------------------------------------

def _split_params(attrs, in_shape):
    ndim = len(in_shape)
    num = attrs["num_outputs"]
    axis = attrs["axis"]
    if num < 1:
        raise ShapeError(f"SliceChannel: num_outputs={num} must be at least 1")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"SliceChannel: axis={axis} is out of range for input shape "
                         f"{tuple(in_shape)}")
    axis %= ndim
    size = in_shape[axis]
    if size % num:
        raise ShapeError(f"SliceChannel: cannot split axis {axis} of input shape "
                         f"{tuple(in_shape)} into num_outputs={num} evenly sized chunks")
    if attrs["squeeze_axis"] and size != num:
        raise ShapeError(f"SliceChannel: squeeze_axis=True needs the size of axis {axis} "
                         f"({size}) to equal num_outputs={num} (input shape {tuple(in_shape)})")
    return axis, size // num


def _split_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    num = attrs["num_outputs"]
    if x is None:
        return in_shapes, [None] * num
    axis, step = _split_params(attrs, x)
    if attrs["squeeze_axis"]:
        out = x[:axis] + x[axis + 1:]
    else:
        out = x[:axis] + (step,) + x[axis + 1:]
    return [x], [out] * num


def _split_ref(attrs, ins, is_train):
    axis, step = _split_params(attrs, tuple(ins[0].shape))
    parts = torch.split(ins[0], step, dim=axis)
    if attrs["squeeze_axis"]:
        parts = [p.squeeze(axis) for p in parts]
    return list(parts)


def _split_build(b, n, is_train=False):
    axis, step = _split_params(n.attrs, tuple(n.in_shapes[0]))
    outs = []
    for i in range(n.attrs["num_outputs"]):
        r = b.op("slice_axis", n.inputs[0], axis=axis, begin=i * step, end=(i + 1) * step)
        if n.attrs["squeeze_axis"]:
            r = b.op("Reshape", r, shape=tuple(n.out_shapes[i]))
        outs.append(r)
    return outs


def _split_grad(b, n):
    shape = tuple(n.in_shapes[0])
    axis, step = _split_params(n.attrs, shape)
    part = shape[:axis] + (step,) + shape[axis + 1:]
    grads = [g if tuple(g.shape) == part else b.op("Reshape", g, shape=part) for g in n.ograds]
    if len(grads) == 1:
        return grads
    return [b.op("Concat", *grads, num_args=len(grads), dim=axis)]


def _split_dim_links(attrs, in_ranks, out_ranks):
    """Every dim but ``axis`` is shared by the input and each output."""
    ndim = in_ranks[0]
    if ndim is None:
        return []
    axis = attrs["axis"] % ndim
    squeeze = attrs["squeeze_axis"]
    groups = []
    for k in range(ndim):
        if k == axis:
            continue
        out_k = k - 1 if squeeze and k > axis else k
        groups.append([("in", 0, k)] + [("out", i, out_k) for i in range(len(out_ranks))])
    return groups


register(OpDef(
    name="SliceChannel", pattern="injective", lowering=Decompose(_split_build),
    rows_independent=lambda attrs: attrs["axis"] > 0,
    dim_links=_split_dim_links,
    outputs=lambda attrs: [f"output{i}" for i in range(attrs["num_outputs"])],
    attrs=[Attr("num_outputs", parse_count), Attr("axis", parse_int, 1),
           Attr("squeeze_axis", parse_bool, False)],
    infer_shape=_split_shape, reference=_split_ref, gradient=_split_grad, aliases=("split",)))


# -- reverse --------------------------------------------------------------------------------

def _rev_axes(attrs, ndim):
    axes = []
    for a in attrs["axis"]:
        if not -ndim <= a < ndim:
            raise ShapeError(f"reverse: axis={a} is out of range for a {ndim}-d input")
        axes.append(a % ndim)
    return axes


def _rev_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    _rev_axes(attrs, len(x))
    return [x], [x]


def _rev_view(attrs, in_shape, out_shape, strides, offset):
    strides = list(strides)
    for a in _rev_axes(attrs, len(in_shape)):  # a repeated axis flips back
        offset += (in_shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    return tuple(strides), offset


def _rev_ref(attrs, ins, is_train):
    x = ins[0]
    for a in _rev_axes(attrs, x.dim()):
        x = torch.flip(x, (a,))
    return [x]


register(OpDef(
    name="reverse", pattern="injective", lowering=View(_rev_view, None),
    attrs=[Attr("axis", parse_shape)], infer_shape=_rev_shape, reference=_rev_ref,
    gradient=lambda b, n: [b.op("reverse", n.ograds[0], axis=tuple(n.attrs["axis"]))],
    aliases=("flip",)))


# -- broadcast_to / broadcast_axis -------------------------------------------------------------

def _bcast_to_target(attrs, x):
    shape = attrs["shape"]
    if len(shape) != len(x):
        raise ShapeError(f"broadcast_to: input of shape {tuple(x)} cannot be broadcast to "
                         f"shape={tuple(shape)}: the number of dims differs")
    out = tuple(d if t == 0 else t for d, t in zip(x, shape))
    for d, t in zip(x, out):
        if d != t and d != 1:
            raise ShapeError(f"broadcast_to: input of shape {tuple(x)} cannot be broadcast to "
                             f"shape={tuple(shape)}")
    return out


def _bcast_axis_target(attrs, x):
    axes, sizes = attrs["axis"], attrs["size"]
    if len(axes) != len(sizes):
        raise ShapeError(f"broadcast_axis: axis={tuple(axes)} and size={tuple(sizes)} must "
                         f"have the same length")
    out = list(x)
    for a, s in zip(axes, sizes):
        a = normalize_axis(a, len(x), "broadcast_axis")
        if x[a] != 1:
            raise ShapeError(f"broadcast_axis: axis {a} of input shape {tuple(x)} must have "
                             f"size 1 to be broadcast to size {s}")
        out[a] = s
    return tuple(out)


def _bcast_shape(target):
    def infer(attrs, in_shapes):
        x = _t(in_shapes[0])
        if x is None:
            return in_shapes, [None]
        return [x], [target(attrs, x)]
    return infer


def _bcast_view(attrs, in_shape, out_shape, strides, offset):
    return tuple(0 if i != o else s for i, o, s in zip(in_shape, out_shape, strides)), offset


def _bcast_dimmap(attrs, in_shape, out_shape):
    return [k if i == o else None for k, (i, o) in enumerate(zip(in_shape, out_shape))]


def _bcast_ref(target):
    return lambda attrs, ins, is_train: [ins[0].expand(target(attrs, tuple(ins[0].shape)))]


def _bcast_grad(b, n):
    if tuple(n.in_shapes[0]) == tuple(n.out_shapes[0]):
        return [n.ograds[0]]
    return [b.op("_sum_to_shape", n.ograds[0], shape=tuple(n.in_shapes[0]))]


_BCAST_VIEW = View(_bcast_view, _bcast_dimmap)

register(OpDef(
    name="broadcast_to", pattern="broadcast", lowering=_BCAST_VIEW,
    attrs=[Attr("shape", parse_shape, ())], infer_shape=_bcast_shape(_bcast_to_target),
    reference=_bcast_ref(_bcast_to_target), gradient=_bcast_grad))
register(OpDef(
    name="broadcast_axis", pattern="broadcast", lowering=_BCAST_VIEW,
    rows_independent=lambda attrs: all(int(a) > 0 for a in attrs["axis"]),
    attrs=[Attr("axis", parse_shape, ()), Attr("size", parse_shape, ())],
    infer_shape=_bcast_shape(_bcast_axis_target),
    reference=_bcast_ref(_bcast_axis_target), gradient=_bcast_grad,
    aliases=("broadcast_axes",)))


# -- _sum_to_shape ---------------------------------------------------------------------------

def _sum_to_axes(in_shape, target):
    in_shape, target = tuple(in_shape), tuple(target)
    lead = len(in_shape) - len(target)
    if lead < 0:
        raise ShapeError(f"_sum_to_shape: cannot sum shape {in_shape} to the larger-rank "
                         f"shape={target}")
    axes = list(range(lead))
    for k, t in enumerate(target):
        d = in_shape[lead + k]
        if t == d:
            continue
        if t != 1:
            raise ShapeError(f"_sum_to_shape: shape {in_shape} does not broadcast from "
                             f"shape={target}")
        axes.append(lead + k)
    return tuple(axes)


def _sum_to_shape_infer(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [tuple(attrs["shape"])]
    _sum_to_axes(x, attrs["shape"])
    return [x], [tuple(attrs["shape"])]


def _sum_to_ref(attrs, ins, is_train):
    x = ins[0]
    axes = _sum_to_axes(tuple(x.shape), attrs["shape"])
    if axes:
        x = x.sum(dim=axes, keepdim=True)
    return [x.reshape(tuple(attrs["shape"]))]


def _sum_to_build(b, n, is_train=False):
    x = n.inputs[0]
    axes = _sum_to_axes(n.in_shapes[0], n.attrs["shape"])
    target = tuple(n.attrs["shape"])
    in_shape = tuple(n.in_shapes[0])
    kept = tuple(d for i, d in enumerate(in_shape) if i not in axes)
    if axes and kept == target:
        # Reduce straight to the target shape: the kernel stores it, no copy.
        return [b.op("sum", x, axis=axes, keepdims=False)]
    if axes:
        x = b.op("sum", x, axis=axes, keepdims=True)
    if tuple(x.shape) != target:
        x = b.op("Reshape", x, shape=target)
    return [x]


def _sum_to_grad(b, n):
    in_shape = tuple(n.in_shapes[0])
    target = tuple(n.attrs["shape"])
    dy = n.ograds[0]
    keep = (1,) * (len(in_shape) - len(target)) + target
    if keep != target:
        dy = b.op("Reshape", dy, shape=keep)
    if keep != in_shape:
        dy = b.op("broadcast_to", dy, shape=in_shape)
    return [dy]


register(OpDef(
    name="_sum_to_shape", pattern="reduce", lowering=Decompose(_sum_to_build),
    attrs=[Attr("shape", parse_shape)], infer_shape=_sum_to_shape_infer,
    reference=_sum_to_ref, gradient=_sum_to_grad,
    doc="Sums a broadcast result back to `shape` (broadcast gradients)."))
