"""More shape operators of mxnet 1.9.1: ``slice`` (alias ``crop``), ``squeeze``,
``stack``, ``tile`` and ``repeat``.

``slice`` and ``squeeze`` are zero-copy views (:class:`View`): a slice of any
steps is the input's buffer read with the steps folded into the strides (a
negative step is a negative stride, as ``reverse``), so it fuses into its
consumers. ``stack``, ``tile`` and ``repeat`` are ``Decompose`` rewrites into
views (``expand_dims``, ``broadcast_to``, ``Reshape``) and ``Concat``; a
``Reshape`` of a broadcast is no strided view, so the compiler copies there.
The family's operators that take a second input's shape, move blocks or split are
in ``shape_like.py``.
"""
from __future__ import annotations

import torch

from .registry import (Attr, Decompose, OpDef, ShapeError, View, _literal, parse_count,
                       parse_int, parse_optional_int, parse_optional_shape, parse_shape, prod,
                       register)
from .shape import _unit_dimmap


def _t(s):
    return None if s is None else tuple(int(x) for x in s)


def parse_optional_int_tuple(v) -> tuple:
    """A tuple whose entries are ints or None (``slice``'s ``(None, 1)``, ``[]``)."""
    if isinstance(v, (tuple, list)):
        items = list(v)
    else:
        s = str(v).strip()
        if s in ("", "()", "[]"):
            return ()
        val = _literal(s)
        items = list(val) if isinstance(val, (tuple, list)) else [val]
    return tuple(parse_optional_int(x) for x in items)


# -- slice -------------------------------------------------------------------------------

def slice_ranges(attrs, shape, opname="slice"):
    """``(begin, end, step)`` per dim after mxnet's ``GetIndexRange``: begins and ends
    clamped into the dim (``end`` may be -1 under a negative step), full ranges for the
    dims that ``begin`` does not name."""
    begin, end = attrs["begin"], attrs["end"]
    step = attrs["step"]
    ndim = len(shape)
    what = f"{opname}: begin={tuple(begin)}, end={tuple(end)}, step={tuple(step)}"
    if ndim == 0:
        raise ShapeError(f"{what}: the input must have at least 1 dim")
    if len(begin) > ndim or len(end) > ndim:
        raise ShapeError(f"{what} name more axes than the {ndim} of input shape {tuple(shape)}")
    if len(begin) != len(end):
        raise ShapeError(f"{what}: begin and end must have the same length")
    if step and len(step) != len(begin):
        raise ShapeError(f"{what}: step and begin must have the same length")
    out = []
    for i, n in enumerate(shape):
        if i >= len(begin):
            out.append((0, n, 1))
            continue
        s = step[i] if step and step[i] is not None else 1
        if s == 0:
            raise ShapeError(f"{what}: step[{i}] cannot be 0")
        b = begin[i] if begin[i] is not None else (n - 1 if s < 0 else 0)
        e = end[i] if end[i] is not None else (-1 if s < 0 else n)
        b += n if b < 0 else 0
        e += n if e < 0 and end[i] is not None else 0
        b = 0 if b < 0 and s > 0 else b
        b = n - 1 if b > n - 1 and s < 0 else b
        b = -1 if b < 0 or b > n - 1 else b
        e = min(max(e, -1), n)
        out.append((b, e, s))
    return out


def _slice_len(b, e, s):
    if b < 0 or b == e:
        return 0
    if s > 0:
        return (e - b - 1) // s + 1 if e > b else 0
    return (b - e - 1) // -s + 1 if e < b else 0


def _slice_out_shape(attrs, shape, opname="slice"):
    ranges = slice_ranges(attrs, shape, opname)
    out = tuple(_slice_len(*r) for r in ranges)
    # an unknown (0) input dim, in partial inference, leaves its output dim unknown (0)
    empty = [i for i, (o, n) in enumerate(zip(out, shape)) if n and not o]
    if empty:
        raise ShapeError(f"{opname}: begin={tuple(attrs['begin'])}, end={tuple(attrs['end'])}, "
                         f"step={tuple(attrs['step'])} select no element of axis {empty[0]} "
                         f"of input shape {tuple(shape)} (symtriton has no zero-size arrays)")
    return ranges, out


def _slice_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [_slice_out_shape(attrs, x)[1]]


def _slice_view(attrs, in_shape, out_shape, strides, offset):
    ranges = slice_ranges(attrs, in_shape)
    for (b, _, s), st in zip(ranges, strides):
        offset += b * st
    return tuple(st * s for (_, _, s), st in zip(ranges, strides)), offset


def _slice_ref(attrs, ins, is_train):
    x = ins[0]
    ranges, out = _slice_out_shape(attrs, tuple(x.shape))
    for axis, ((b, _, s), n) in enumerate(zip(ranges, out)):
        idx = torch.arange(n, device=x.device) * s + b
        x = x.index_select(axis, idx)
    return [x]


def scatter_axis(b, g, axis, size, begin, step):
    """``g`` (``n`` entries along ``axis``) placed at ``begin + j * step`` of a zero tensor of
    ``size`` entries there: the gradient of one strided slice, in graph ops."""
    shape = tuple(g.shape)
    n = shape[axis]
    if step < 0:   # the same positions walked upwards
        g = b.op("reverse", g, axis=(axis,))
        begin, step = begin + (n - 1) * step, -step
    if step > 1 and n > 1:
        # interleave step - 1 zero rows after every row, then drop the trailing zeros
        g = b.op("expand_dims", g, axis=axis + 1)
        gap = b.op("_zeros", shape=shape[:axis + 1] + (step - 1,) + shape[axis + 1:])
        g = b.op("Concat", g, gap, num_args=2, dim=axis + 1)
        g = b.op("Reshape", g, shape=shape[:axis] + (n * step,) + shape[axis + 1:])
        g = b.op("slice_axis", g, axis=axis, begin=0, end=(n - 1) * step + 1)
    span = (n - 1) * step + 1
    parts = []
    if begin > 0:
        parts.append(b.op("_zeros", shape=shape[:axis] + (begin,) + shape[axis + 1:]))
    parts.append(g)
    if begin + span < size:
        parts.append(b.op("_zeros", shape=shape[:axis] + (size - begin - span,)
                          + shape[axis + 1:]))
    if len(parts) == 1:
        return g
    return b.op("Concat", *parts, num_args=len(parts), dim=axis)


def scatter_slice(b, g, ranges, out, shape):
    """``g`` (the slice's shape ``out``) placed at the positions ``slice_ranges`` gives
    of a zero tensor of ``shape``: the gradient of a strided slice (and where
    ``_slice_assign`` writes its value)."""
    for axis, ((lo, _, s), m) in enumerate(zip(ranges, out)):
        if (lo, s, m) != (0, 1, shape[axis]):
            g = scatter_axis(b, g, axis, shape[axis], lo, s)
    return g


def _slice_grad(b, n):
    shape = tuple(n.in_shapes[0])
    ranges, out = _slice_out_shape(n.attrs, shape)
    return [scatter_slice(b, n.ograds[0], ranges, out, shape)]


register(OpDef(
    name="slice", pattern="injective", lowering=View(_slice_view, None),
    attrs=[Attr("begin", parse_optional_int_tuple), Attr("end", parse_optional_int_tuple),
           Attr("step", parse_optional_int_tuple, ())],
    infer_shape=_slice_shape, reference=_slice_ref, gradient=_slice_grad, aliases=("crop",),
    doc="x[b0:e0:s0, b1:e1:s1, ...] with mxnet's clamping of begin/end (None: the whole "
        "axis in the step's direction); axes past len(begin) are kept whole. A view."))


# -- squeeze -----------------------------------------------------------------------------

def _squeeze_axes(attrs, shape):
    ndim = len(shape)
    axes = attrs["axis"]
    if axes is None:
        return [i for i, d in enumerate(shape) if d == 1]
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"squeeze: axis {a} is out of bounds for input shape "
                             f"{tuple(shape)} of dimension {ndim}")
        a %= ndim
        if shape[a] != 1:
            raise ShapeError(f"squeeze: cannot select axis {a} of input shape {tuple(shape)} "
                             f"to squeeze out: its size is {shape[a]}, not 1")
        if a in out:
            raise ShapeError(f"squeeze: duplicate value in axis={tuple(axes)}")
        out.append(a)
    return out


def _squeeze_target(attrs, shape):
    axes = _squeeze_axes(attrs, shape)
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return out or (1,)     # mxnet keeps one dim: squeeze of (1, 1) is (1,)


def _squeeze_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [_squeeze_target(attrs, x)]


def _squeeze_view(attrs, in_shape, out_shape, strides, offset):
    axes = _squeeze_axes(attrs, in_shape)
    kept = tuple(st for i, st in enumerate(strides) if i not in axes)
    return (kept or (1,)), offset


def _back_to_input_shape(b, n):
    return [b.op("Reshape", n.ograds[0], shape=tuple(n.in_shapes[0]))]


register(OpDef(
    name="squeeze", pattern="injective", lowering=View(_squeeze_view, _unit_dimmap),
    attrs=[Attr("axis", parse_optional_shape, None)], infer_shape=_squeeze_shape,
    reference=lambda attrs, ins, is_train: [
        ins[0].reshape(_squeeze_target(attrs, tuple(ins[0].shape)))],
    gradient=_back_to_input_shape,
    doc="Removes the size-1 dims named by axis (all of them by default); a view."))


# -- stack -------------------------------------------------------------------------------

def _stack_axis(attrs, ndim):
    axis = attrs["axis"]
    if not -(ndim + 1) <= axis <= ndim:
        raise ShapeError(f"stack: axis={axis} exceeds the output dimension of {ndim + 1}")
    return axis % (ndim + 1)


def _stack_shape(attrs, in_shapes):
    num = attrs["num_args"]
    if len(in_shapes) != num:
        raise ShapeError(f"stack: num_args={num} but {len(in_shapes)} inputs were given")
    known = [_t(s) for s in in_shapes if s is not None]
    if not known:
        return in_shapes, [None]
    for s in known[1:]:
        if s != known[0]:
            shapes = ", ".join("?" if x is None else str(tuple(x)) for x in in_shapes)
            raise ShapeError(f"stack: every input must have the same shape; got {shapes}")
    x = known[0]
    a = _stack_axis(attrs, len(x))
    return [x] * num, [x[:a] + (num,) + x[a:]]


def _stack_build(b, n, is_train=False):
    a = _stack_axis(n.attrs, len(n.in_shapes[0]))
    parts = [b.op("expand_dims", x, axis=a) for x in n.inputs]
    if len(parts) == 1:
        return parts
    return [b.op("Concat", *parts, num_args=len(parts), dim=a)]


def _stack_grad(b, n):
    shape = tuple(n.in_shapes[0])
    a = _stack_axis(n.attrs, len(shape))
    return [b.op("Reshape", b.op("slice_axis", n.ograds[0], axis=a, begin=i, end=i + 1),
                 shape=shape) for i in range(n.attrs["num_args"])]


def _stack_dim_links(attrs, in_ranks, out_ranks):
    """Input dim k is output dim k (before ``axis``) or k + 1 (after it)."""
    ndim = next((r for r in in_ranks if r is not None), None)
    if ndim is None and out_ranks[0] is not None:
        ndim = out_ranks[0] - 1
    if ndim is None:
        return []
    a = _stack_axis(attrs, ndim)
    return [[("in", i, k) for i in range(len(in_ranks))] + [("out", 0, k + (k >= a))]
            for k in range(ndim)]


register(OpDef(
    name="stack", pattern="injective", lowering=Decompose(_stack_build),
    arguments=lambda attrs: [f"arg{i}" for i in range(attrs["num_args"])],
    attrs=[Attr("axis", parse_int, 0), Attr("num_args", parse_count)],
    infer_shape=_stack_shape,
    reference=lambda attrs, ins, is_train: [
        torch.stack(list(ins), dim=_stack_axis(attrs, ins[0].dim()))],
    gradient=_stack_grad, variadic="num_args", key_var_num_args="num_args",
    dim_links=_stack_dim_links,
    doc="Joins same-shaped inputs along a new axis."))


# -- tile / repeat -------------------------------------------------------------------------

def _tile_reps(attrs, shape):
    reps = tuple(attrs["reps"])
    for r in reps:
        if r < 1:
            raise ShapeError(f"tile: reps={reps} must be positive integers (symtriton has no "
                             f"zero-size arrays), input shape {tuple(shape)}")
    n = max(len(reps), len(shape))
    return (1,) * (n - len(shape)) + tuple(shape), (1,) * (n - len(reps)) + reps


def _tile_target(attrs, shape):
    x, reps = _tile_reps(attrs, shape)
    return tuple(d * r for d, r in zip(x, reps))


def _tile_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [_tile_target(attrs, x)]


def _broadcast_copies(b, x, pairs, out_shape):
    """``x`` reshaped to the ``(r, d)`` of every (copies, size) pair (``r`` only where it is
    above 1), broadcast along the ``r`` dims, and merged back to ``out_shape``."""
    ones = tuple(d for r, d in pairs for d in ((1, d) if r > 1 else (d,)))
    full = tuple(d for r, d in pairs for d in ((r, d) if r > 1 else (d,)))
    if tuple(x.shape) != ones:
        x = b.op("Reshape", x, shape=ones)
    if ones != full:
        x = b.op("broadcast_to", x, shape=full)
    if full != tuple(out_shape):
        x = b.op("Reshape", x, shape=tuple(out_shape))
    return x


def _sum_copies(b, dy, pairs, in_shape):
    """The gradient of :func:`_broadcast_copies`: ``dy`` summed over the copies."""
    full = tuple(d for r, d in pairs for d in ((r, d) if r > 1 else (d,)))
    axes, k = [], 0
    for r, _ in pairs:
        if r > 1:
            axes.append(k)
            k += 1
        k += 1
    if tuple(dy.shape) != full:
        dy = b.op("Reshape", dy, shape=full)
    if axes:
        dy = b.op("sum", dy, axis=tuple(axes))
    if tuple(dy.shape) != tuple(in_shape):
        dy = b.op("Reshape", dy, shape=tuple(in_shape))
    return dy


def _tile_pairs(attrs, shape):
    x, reps = _tile_reps(attrs, shape)
    return list(zip(reps, x))


def _as_copy(b, x, ref):
    # a rewrite that changes nothing still gives the node a value of its own
    return b.op("_copy", x) if ref.entry == x.entry else ref


def _tile_build(b, n, is_train=False):
    x = n.inputs[0]
    y = _broadcast_copies(b, x, _tile_pairs(n.attrs, n.in_shapes[0]), n.out_shapes[0])
    return [_as_copy(b, x, y)]


register(OpDef(
    name="tile", pattern="injective", lowering=Decompose(_tile_build),
    attrs=[Attr("reps", parse_shape)], infer_shape=_tile_shape,
    reference=lambda attrs, ins, is_train: [
        ins[0].reshape(_tile_reps(attrs, tuple(ins[0].shape))[0])
        .repeat(*_tile_reps(attrs, tuple(ins[0].shape))[1])],
    gradient=lambda b, n: [_sum_copies(b, n.ograds[0], _tile_pairs(n.attrs, n.in_shapes[0]),
                                       n.in_shapes[0])],
    doc="The whole array repeated reps[i] times along each axis (numpy's tile)."))


def _repeat_axis(attrs, shape):
    r = attrs["repeats"]
    if r < 1:
        raise ShapeError(f"repeat: repeats={r} must be at least 1 (symtriton has no zero-size "
                         f"arrays), input shape {tuple(shape)}")
    axis = attrs["axis"]
    if axis is None:
        return None, r
    ndim = len(shape)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"repeat: axis = {axis} out of bounds for input shape {tuple(shape)}")
    return axis % ndim, r


def _repeat_pairs(attrs, shape):
    """(copies, size) pairs of the (flattened, for axis None) input: each element of
    ``axis`` is followed by its copies, so the copies dim comes after it."""
    axis, r = _repeat_axis(attrs, shape)
    if axis is None:
        return [(1, prod(shape)), (r, 1)]
    pairs = [(1, d) for d in shape]
    return pairs[:axis + 1] + [(r, 1)] + pairs[axis + 1:]


def _repeat_target(attrs, shape):
    axis, r = _repeat_axis(attrs, shape)
    if axis is None:
        return (prod(shape) * r,)
    return shape[:axis] + (shape[axis] * r,) + shape[axis + 1:]


def _repeat_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None]
    return [x], [_repeat_target(attrs, x)]


def _repeat_ref(attrs, ins, is_train):
    x = ins[0]
    axis, r = _repeat_axis(attrs, tuple(x.shape))
    if axis is None:
        return [x.reshape(-1).repeat_interleave(r)]
    return [x.repeat_interleave(r, dim=axis)]


def _repeat_build(b, n, is_train=False):
    x = n.inputs[0]
    y = _broadcast_copies(b, x, _repeat_pairs(n.attrs, n.in_shapes[0]), n.out_shapes[0])
    return [_as_copy(b, x, y)]


register(OpDef(
    name="repeat", pattern="injective", lowering=Decompose(_repeat_build),
    attrs=[Attr("repeats", parse_int), Attr("axis", parse_optional_int, None)],
    infer_shape=_repeat_shape, reference=_repeat_ref,
    gradient=lambda b, n: [_sum_copies(b, n.ograds[0],
                                       _repeat_pairs(n.attrs, n.in_shapes[0]),
                                       n.in_shapes[0])],
    doc="Each element repeated `repeats` times along axis (of the flattened input when "
        "axis is None)."))
