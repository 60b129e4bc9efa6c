"""cumsum (mxnet 1.9.1's ``_np_cumsum``, ``mx.sym.cumsum``): the running sum along an
axis, or along the flattened input when ``axis`` is None.

A scan has no place in the tile IR yet, so the operator is a ``Decompose`` into a
matmul with a triangular 0/1 matrix (``_scan_matrix``): the scanned axis moved last
and the rest flattened to rows, ``y = x @ U`` with ``U[j, i] = 1`` where ``j <= i``.
Both targets get it with no code of their own; the cost is O(n^2) in the axis length
n, so n is limited to ``MAX_SCAN`` (the matrix then holds 64 Mi entries). The
gradient is the reverse running sum of the head gradient, ``dy @ U^T``. A negative
axis is refused, as mxnet 1.9.1 refuses it (at run time there).
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, parse_bool,
                       parse_dtype, parse_optional_int, parse_positive_int,
                       prod, register)

MAX_SCAN = 8192


def _tri_expr(attrs, *, coords):
    j, i = coords          # row j of U meets column i
    if j is None or i is None:      # a 1 x 1 matrix
        return ops.const(1.0)
    keep = (j >= i) if attrs["reverse"] else (j <= i)
    return ops.where(keep, 1.0, 0.0)


register(OpDef(
    name="_scan_matrix", pattern="broadcast", lowering=Pointwise(_tri_expr), arguments=(),
    attrs=[Attr("n", parse_positive_int), Attr("reverse", parse_bool, False),
           Attr("dtype", parse_dtype, "float32")],
    needs_coords=True,
    infer_shape=lambda attrs, in_shapes: ([], [(attrs["n"], attrs["n"])]),
    infer_type=lambda attrs, in_types: ([], [attrs["dtype"]]),
    reference=lambda attrs, ins, is_train: [
        (torch.tril if attrs["reverse"] else torch.triu)(
            torch.ones(attrs["n"], attrs["n"])).to(getattr(torch, attrs["dtype"]))],
    doc="U[j, i] = 1 where j <= i (reverse: j >= i), else 0: x @ U is x's running sum."))


def _axis(attrs, shape):
    if attrs["axis"] is None:
        return None
    nd = len(shape)
    # mxnet 1.9.1 fails at run time on a negative axis (its kernel indexes the shape with
    # it): refused here, when shapes are inferred
    if not 0 <= attrs["axis"] < nd:
        raise ShapeError(f"cumsum: axis={attrs['axis']} is out of range for input shape "
                         f"{tuple(shape)} (mxnet 1.9.1's cumsum takes 0 .. ndim - 1)")
    return attrs["axis"]


def _out_shape(attrs, shape):
    shape = tuple(shape)
    a = _axis(attrs, shape)
    n = prod(shape) if a is None else shape[a]
    if n > MAX_SCAN:
        raise ShapeError(f"cumsum: scanning {n} elements of input shape {shape} is more than "
                         f"the {MAX_SCAN} this triangular-matmul cumsum supports")
    return (prod(shape),) if a is None else shape


def _shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    return [tuple(x)], [_out_shape(attrs, x)]


def _type(attrs, in_types):
    return in_types, [attrs["dtype"] or in_types[0]]


def _ref(attrs, ins, is_train):
    x = ins[0]
    if attrs["dtype"] is not None:
        x = x.to(getattr(torch, attrs["dtype"]))
    a = _axis(attrs, tuple(x.shape))
    return [torch.cumsum(x.reshape(-1), 0) if a is None else torch.cumsum(x, a)]


def scan(b, x, axis, reverse=False):
    """The running sum of ``x`` (a Ref) along ``axis`` (forward, or from the end)."""
    shape = tuple(x.shape)
    nd = len(shape)
    perm = [d for d in range(nd) if d != axis] + [axis]
    moved = x if perm == list(range(nd)) else b.op("transpose", x, axes=tuple(perm))
    n = shape[axis]
    rows = b.op("Reshape", moved, shape=(prod(shape) // max(n, 1), n))
    u = b.op("_scan_matrix", n=n, reverse=reverse, dtype=x.dtype)
    y = b.op("Reshape", b.op("dot", rows, u), shape=tuple(moved.shape))
    if perm == list(range(nd)):
        return y
    back = [perm.index(d) for d in range(nd)]
    return b.op("transpose", y, axes=tuple(back))


def _build(b, n, is_train=False):
    x = n.inputs[0]
    if n.attrs["dtype"] is not None and n.attrs["dtype"] != x.dtype:
        x = b.op("Cast", x, dtype=n.attrs["dtype"])
    a = _axis(n.attrs, tuple(n.in_shapes[0]))
    if a is None:
        x, a = b.op("Reshape", x, shape=(prod(n.in_shapes[0]),)), 0
    return [scan(b, x, a)]


def _grad(b, n):
    dy = n.ograds[0]
    a = _axis(n.attrs, tuple(n.in_shapes[0]))
    dx = scan(b, dy, 0 if a is None else a, reverse=True)
    if a is None:
        dx = b.op("Reshape", dx, shape=tuple(n.in_shapes[0]))
    return [dx]


register(OpDef(
    name="_np_cumsum", pattern="composite", lowering=Decompose(_build), arguments=("a",),
    attrs=[Attr("axis", parse_optional_int, None),
           Attr("dtype", lambda v: None if str(v) == "None" else parse_dtype(v), None)],
    infer_shape=_shape, infer_type=_type, reference=_ref, gradient=_grad,
    aliases=("cumsum",),
    doc="The running sum along axis (None: of the flattened input)."))
