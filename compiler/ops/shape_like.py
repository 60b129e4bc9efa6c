"""Shape operators that take a shape from a second input or move blocks of data:
``reshape_like``, ``slice_like``, ``broadcast_like``, ``space_to_depth``,
``depth_to_space`` and ``_split_v2`` (``mx.sym.split_v2``).

Every one is a ``Decompose`` rewrite into views (``Reshape``, ``slice``,
``broadcast_to``, ``transpose``) once the shapes are known: the second input
only lends its shape, so it leaves the graph (its gradient is zero, as in mxnet
1.9.1), and the views fuse into their consumers.
"""
from __future__ import annotations

from .registry import (Attr, Decompose, OpDef, ShapeError, merge_shape, parse_bool,
                       parse_count, parse_int, parse_optional_int, parse_optional_shape,
                       parse_positive_int, parse_shape, prod, register)
from .shape_more import scatter_axis


def _t(s):
    return None if s is None else tuple(int(x) for x in s)


def _second_input_zero(b, n, dx):
    return [dx, b.zeros_like(n.inputs[1])]


def _like_type(attrs, in_types):
    # the output has the first input's dtype; the second lends only its shape
    return in_types, [in_types[0]]


# -- reshape_like ------------------------------------------------------------------------

def _canon_range(ndim, side, begin, end):
    b = 0 if begin is None else begin
    b += ndim if b < 0 else 0
    e = ndim if end is None else end
    e += ndim if e < 0 else 0
    if e > ndim:
        raise ShapeError(f"reshape_like: invalid end for {side}_end={end} as dimension "
                         f"number is {ndim}")
    if not b < e:
        raise ShapeError(f"reshape_like: invalid begin, end, get {side}_begin={begin}, "
                         f"{side}_end={end}")
    if e < 0 or b < 0:
        raise ShapeError(f"reshape_like: invalid begin for {side}_begin={begin}")
    return b, e


def _reshape_like_target(attrs, lhs, rhs):
    lb, le = _canon_range(len(lhs), "lhs", attrs["lhs_begin"], attrs["lhs_end"])
    rb, re = _canon_range(len(rhs), "rhs", attrs["rhs_begin"], attrs["rhs_end"])
    out = tuple(lhs[:lb]) + tuple(rhs[rb:re]) + tuple(lhs[le:])
    if prod(out) != prod(lhs):
        raise ShapeError(f"reshape_like: cannot reshape lhs with shape {tuple(lhs)} to new "
                         f"shape {out} because they have different size")
    return out


def _reshape_like_shape(attrs, in_shapes):
    lhs, rhs = _t(in_shapes[0]), _t(in_shapes[1])
    if lhs is None or rhs is None:
        return in_shapes, [None]
    return [lhs, rhs], [_reshape_like_target(attrs, lhs, rhs)]


def _identity_like_rhs_shape(attrs, in_shapes):
    shape = merge_shape(in_shapes[0], in_shapes[1],
                        "_identity_with_attr_like_rhs: lhs must have rhs's shape")
    return [shape, shape], [shape]


register(OpDef(
    name="_identity_with_attr_like_rhs", pattern="injective", arguments=("lhs", "rhs"),
    lowering=Decompose(lambda b, n, is_train=False: [b.op("_copy", n.inputs[0])]),
    infer_shape=_identity_like_rhs_shape, infer_type=_like_type,
    # a shape its consumer expects is rhs's: it reaches the variable behind rhs (mxnet's
    # test_backward_infer gives a weight its shape through one); either input and the
    # output decide each other's unknown (0) dims
    passes_shape=1,
    dim_links=lambda attrs, in_ranks, out_ranks: [
        [("in", 0, k), ("in", 1, k), ("out", 0, k)]
        for k in range(next((r for r in in_ranks + out_ranks if r is not None), 0))],
    reference=lambda attrs, ins, is_train: [ins[0]],
    gradient=lambda b, n: _second_input_zero(b, n, n.ograds[0]),
    doc="lhs as it is, with rhs's shape (a constraint for shape inference); rhs gets a "
        "zero gradient."))


register(OpDef(
    name="reshape_like", pattern="injective", arguments=("lhs", "rhs"),
    lowering=Decompose(lambda b, n, is_train=False: [
        b.op("Reshape", n.inputs[0], shape=tuple(n.out_shapes[0]))]),
    attrs=[Attr(k, parse_optional_int, None)
           for k in ("lhs_begin", "lhs_end", "rhs_begin", "rhs_end")],
    infer_shape=_reshape_like_shape, infer_type=_like_type,
    reference=lambda attrs, ins, is_train: [ins[0].reshape(
        _reshape_like_target(attrs, tuple(ins[0].shape), tuple(ins[1].shape)))],
    gradient=lambda b, n: _second_input_zero(
        b, n, b.op("Reshape", n.ograds[0], shape=tuple(n.in_shapes[0]))),
    doc="lhs with dims lhs_begin:lhs_end replaced by rhs's dims rhs_begin:rhs_end."))


# -- slice_like --------------------------------------------------------------------------

def _slice_like_target(attrs, x, like):
    axes = attrs["axes"]
    if not axes:
        if len(x) != len(like):
            raise ShapeError(f"slice_like: by default it slices on all axes, but the ranks "
                             f"differ: data {tuple(x)} vs. shape_like {tuple(like)}")
        axes = range(len(x))
    out = list(x)
    for a in axes:
        axis = a + len(x) if a < 0 else a
        if axis < 0 or axis >= len(x):
            raise ShapeError(f"slice_like: axis {a} is out of range for data of shape {tuple(x)}")
        if axis >= len(like):
            raise ShapeError(f"slice_like: axis {axis} exceeds the shape_like input's shape "
                             f"{tuple(like)}")
        if like[axis] > x[axis]:
            raise ShapeError(f"slice_like: axis {axis} with size {like[axis]} (shape_like "
                             f"{tuple(like)}) exceeds the size {x[axis]} of data {tuple(x)}")
        out[axis] = like[axis]
    return tuple(out)


def _slice_like_shape(attrs, in_shapes):
    x, like = _t(in_shapes[0]), _t(in_shapes[1])
    if x is None or like is None:
        return in_shapes, [None]
    return [x, like], [_slice_like_target(attrs, x, like)]


def _slice_like_grad(b, n):
    shape = tuple(n.in_shapes[0])
    g = n.ograds[0]
    for axis, (d, o) in enumerate(zip(shape, n.out_shapes[0])):
        if d != o:
            g = scatter_axis(b, g, axis, d, 0, 1)
    return _second_input_zero(b, n, g)


register(OpDef(
    name="slice_like", pattern="injective", arguments=("data", "shape_like"),
    lowering=Decompose(lambda b, n, is_train=False: [
        b.op("slice", n.inputs[0], begin=(0,) * len(n.out_shapes[0]),
             end=tuple(n.out_shapes[0]))]),
    attrs=[Attr("axes", parse_shape, ())], infer_shape=_slice_like_shape,
    infer_type=_like_type,
    reference=lambda attrs, ins, is_train: [ins[0][tuple(
        slice(0, d) for d in _slice_like_target(attrs, tuple(ins[0].shape),
                                                tuple(ins[1].shape)))]],
    gradient=_slice_like_grad,
    doc="The leading part of data with shape_like's sizes on axes (all axes by default)."))


# -- broadcast_like ----------------------------------------------------------------------

def _broadcast_like_target(attrs, lhs, rhs):
    lhs_axes, rhs_axes = attrs["lhs_axes"], attrs["rhs_axes"]
    if lhs_axes is None or rhs_axes is None:
        if len(lhs) != len(rhs):
            raise ShapeError(f"broadcast_like: operand of shape {tuple(lhs)} cannot be "
                             f"broadcast to {tuple(rhs)}")
        for a, c in zip(lhs, rhs):
            if a != c and a != 1:
                raise ShapeError(f"broadcast_like: array cannot be broadcast from "
                                 f"{tuple(lhs)} to {tuple(rhs)}")
        return tuple(rhs)
    if len(lhs_axes) != len(rhs_axes):
        raise ShapeError(f"broadcast_like: lhs_axes={tuple(lhs_axes)} and "
                         f"rhs_axes={tuple(rhs_axes)} differ in size")
    if not lhs_axes:
        raise ShapeError("broadcast_like: empty axes tuple is not allowed")
    out = list(lhs)
    for i, (la, ra) in enumerate(zip(lhs_axes, rhs_axes)):
        src = la + len(lhs) if la < 0 else la
        dst = ra + len(rhs) if ra < 0 else ra
        if not 0 <= src < len(lhs):
            raise ShapeError(f"broadcast_like: invalid dimension in lhs_axes: {la} for lhs "
                             f"{tuple(lhs)}")
        if not 0 <= dst < len(rhs):
            raise ShapeError(f"broadcast_like: invalid dimension in rhs_axes: {ra} for rhs "
                             f"{tuple(rhs)}")
        if lhs[src] != 1:
            raise ShapeError(f"broadcast_like: input axis {la} of lhs {tuple(lhs)} (at "
                             f"position {i}) has size {lhs[src]}, not 1: it cannot be "
                             f"broadcast to {rhs[dst]}")
        out[src] = rhs[dst]
    return tuple(out)


def _broadcast_like_shape(attrs, in_shapes):
    lhs, rhs = _t(in_shapes[0]), _t(in_shapes[1])
    if lhs is None or rhs is None:
        return in_shapes, [None]
    return [lhs, rhs], [_broadcast_like_target(attrs, lhs, rhs)]


def _broadcast_like_build(b, n, is_train=False):
    x = n.inputs[0]
    if tuple(n.in_shapes[0]) == tuple(n.out_shapes[0]):
        return [b.op("_copy", x)]
    return [b.op("broadcast_to", x, shape=tuple(n.out_shapes[0]))]


def _broadcast_like_grad(b, n):
    dy = n.ograds[0]
    if tuple(n.in_shapes[0]) != tuple(n.out_shapes[0]):
        dy = b.op("_sum_to_shape", dy, shape=tuple(n.in_shapes[0]))
    return _second_input_zero(b, n, dy)


register(OpDef(
    name="broadcast_like", pattern="broadcast", arguments=("lhs", "rhs"),
    lowering=Decompose(_broadcast_like_build),
    attrs=[Attr("lhs_axes", parse_optional_shape, None),
           Attr("rhs_axes", parse_optional_shape, None)],
    infer_shape=_broadcast_like_shape, infer_type=_like_type,
    reference=lambda attrs, ins, is_train: [ins[0].expand(
        _broadcast_like_target(attrs, tuple(ins[0].shape), tuple(ins[1].shape)))],
    gradient=_broadcast_like_grad,
    doc="lhs broadcast to rhs's shape (or lhs_axes to the sizes of rhs_axes)."))


# -- space_to_depth / depth_to_space -------------------------------------------------------

# A block move is Reshape -> transpose -> Reshape; the two permutations are each
# other's inverse, so each operator's gradient is the other operator.
_D2S_PERM = (0, 3, 4, 1, 5, 2)     # (n, b, b, c, h, w) -> (n, c, h, b, w, b)
_S2D_PERM = (0, 3, 5, 1, 2, 4)     # (n, c, h, b, w, b) -> (n, b, b, c, h, w)


def _block_check(name, attrs, x):
    blk = attrs["block_size"]
    if len(x) != 4:
        raise ShapeError(f"{name}: requires exactly a 4-D input, got shape {tuple(x)}")
    n, c, h, w = x
    if name == "depth_to_space" and c % (blk * blk):
        raise ShapeError(f"depth_to_space: dimension 1 (depth) of input {tuple(x)} should be "
                         f"a multiple of block_size^2 = {blk * blk}")
    if name == "space_to_depth":
        for i, d in ((2, h), (3, w)):
            if d % blk:
                raise ShapeError(f"space_to_depth: dimension {i} (a space dimension) of input "
                                 f"{tuple(x)} should be a multiple of block_size={blk}")
    return blk, n, c, h, w


def _block_shapes(name, attrs, x):
    """(split shape, permutation, output shape) of the block move."""
    blk, n, c, h, w = _block_check(name, attrs, x)
    if name == "depth_to_space":
        cc = c // (blk * blk)
        return (n, blk, blk, cc, h, w), _D2S_PERM, (n, cc, h * blk, w * blk)
    return ((n, c, h // blk, blk, w // blk, blk), _S2D_PERM,
            (n, c * blk * blk, h // blk, w // blk))


def _block_ref(name):
    def ref(attrs, ins, is_train):
        split, perm, out = _block_shapes(name, attrs, tuple(ins[0].shape))
        return [ins[0].reshape(split).permute(*perm).reshape(out)]
    return ref


def _block_build(name):
    def build(b, n, is_train=False):
        split, perm, out = _block_shapes(name, n.attrs, tuple(n.in_shapes[0]))
        y = b.op("transpose", b.op("Reshape", n.inputs[0], shape=split), axes=perm)
        return [b.op("Reshape", y, shape=out)]
    return build


def _block_shape(name):
    def infer(attrs, in_shapes):
        x = _t(in_shapes[0])
        if x is None:
            return in_shapes, [None]
        return [x], [_block_shapes(name, attrs, x)[2]]
    return infer


for _name, _other in (("depth_to_space", "space_to_depth"), ("space_to_depth", "depth_to_space")):
    register(OpDef(
        name=_name, pattern="injective", lowering=Decompose(_block_build(_name)),
        attrs=[Attr("block_size", parse_positive_int)], infer_shape=_block_shape(_name),
        reference=_block_ref(_name),
        gradient=lambda b, n, other=_other: [
            b.op(other, n.ograds[0], block_size=n.attrs["block_size"])],
        doc="Moves block_size x block_size blocks between the channel dim and the two "
            "spatial dims of an NCHW input (mxnet's DCR order)."))


# -- _split_v2 -----------------------------------------------------------------------------

def _split_bounds(attrs, x):
    """(axis, [(start, end)] per output) of mxnet's SplitOpShape."""
    ndim = len(x)
    axis = attrs["axis"]
    if not -ndim <= axis < ndim:
        raise ShapeError(f"_split_v2: axis={axis} is out of range for input shape {tuple(x)}")
    axis %= ndim
    size = x[axis]
    sections = attrs["sections"]
    if sections > 0:
        small, extra = divmod(size, sections)
        starts = [i * small + min(i, extra) for i in range(sections)]
    else:
        starts = list(attrs["indices"])
    if not starts:
        raise ShapeError("_split_v2: indices=() with sections=0 gives no output")
    bounds = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else size
        if not 0 <= start <= end:
            raise ShapeError(f"_split_v2: start {start} is not less than end {end} for "
                             f"subarray {i} (input shape {tuple(x)}, axis {axis})")
        if end > size:
            raise ShapeError(f"_split_v2: end {end} exceeds the size {size} of axis {axis} "
                             f"(input shape {tuple(x)})")
        if end == start:
            raise ShapeError(f"_split_v2: subarray {i} of input shape {tuple(x)} along axis "
                             f"{axis} is empty (symtriton has no zero-size arrays)")
        if attrs["squeeze_axis"] and end - start != 1:
            raise ShapeError(f"_split_v2: squeeze_axis=True expects an axis size of 1 but "
                             f"subarray {i} has {end - start}")
        bounds.append((start, end))
    return axis, bounds


def _num_outputs(attrs):
    return attrs["sections"] if attrs["sections"] > 0 else len(attrs["indices"])


def _split_out(attrs, x, axis, start, end):
    if attrs["squeeze_axis"]:
        return x[:axis] + x[axis + 1:]
    return x[:axis] + (end - start,) + x[axis + 1:]


def _split_shape(attrs, in_shapes):
    x = _t(in_shapes[0])
    if x is None:
        return in_shapes, [None] * _num_outputs(attrs)
    axis, bounds = _split_bounds(attrs, x)
    return [x], [_split_out(attrs, x, axis, s, e) for s, e in bounds]


def _split_ref(attrs, ins, is_train):
    x = ins[0]
    axis, bounds = _split_bounds(attrs, tuple(x.shape))
    outs = [x.narrow(axis, s, e - s) for s, e in bounds]
    return [o.squeeze(axis) for o in outs] if attrs["squeeze_axis"] else outs


def _split_build(b, n, is_train=False):
    x = tuple(n.in_shapes[0])
    axis, bounds = _split_bounds(n.attrs, x)
    outs = []
    for (s, e), shape in zip(bounds, n.out_shapes):
        r = b.op("slice_axis", n.inputs[0], axis=axis, begin=s, end=e)
        outs.append(b.op("Reshape", r, shape=tuple(shape)) if n.attrs["squeeze_axis"] else r)
    return outs


def _split_grad(b, n):
    x = tuple(n.in_shapes[0])
    axis, bounds = _split_bounds(n.attrs, x)
    grads = []
    for (s, e), g in zip(bounds, n.ograds):
        part = x[:axis] + (e - s,) + x[axis + 1:]
        grads.append(g if tuple(g.shape) == part else b.op("Reshape", g, shape=part))
    if len(grads) == 1:
        return grads
    return [b.op("Concat", *grads, num_args=len(grads), dim=axis)]


register(OpDef(
    name="_split_v2", pattern="injective", lowering=Decompose(_split_build),
    outputs=lambda attrs: [f"output{i}" for i in range(_num_outputs(attrs))],
    attrs=[Attr("indices", parse_shape), Attr("axis", parse_int, 1),
           Attr("squeeze_axis", parse_bool, False), Attr("sections", parse_count, 0)],
    infer_shape=_split_shape, reference=_split_ref, gradient=_split_grad,
    doc="Splits data along axis at the boundaries indices (starting with 0), or into "
        "`sections` parts whose sizes differ by at most one (the larger ones first)."))
