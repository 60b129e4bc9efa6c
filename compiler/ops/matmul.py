"""Matrix products: ``dot`` and ``batch_dot``.

``dot`` follows mxnet's shape rule for any ranks: without ``transpose_a``
the lhs contracts its last axis (free axes ``lhs[:-1]``), with it its first
axis (free axes ``lhs[1:]``); without ``transpose_b`` the rhs contracts its
first axis (free axes ``rhs[1:]``), with it its last (free axes
``rhs[:-1]``). A 1-D operand contracts its only axis whatever the flag. The
output is ``lhs_free + rhs_free``, or ``(1,)`` when both are empty (1-D . 1-D).
So the kernel sees two row-major 2-D matrices (see :func:`dot_matrices`).

``batch_dot`` multiplies the last two axes of two N-D (N >= 3) arrays with
equal leading (batch) axes.
"""
from __future__ import annotations

import torch

from ..shape_semantics import zero_is_size
from .registry import Attr, MatMul, OpDef, ShapeError, choice, parse_bool, prod, register

_FLAGS = [Attr("transpose_a", parse_bool, False), Attr("transpose_b", parse_bool, False),
          # the output's storage when given (compiler/passes/storage_type.py reads it)
          Attr("forward_stype", choice("None", "default", "csr", "row_sparse"), "None")]


# -- dot ------------------------------------------------------------------------

def dot_dims(lshape, rshape, ta, tb):
    """``(lhs_free, k_lhs, k_rhs, rhs_free)`` of mxnet's dot rule."""
    if len(lshape) == 0 or len(rshape) == 0:
        raise ShapeError(f"dot: operands must have at least one dimension, got "
                         f"{tuple(lshape)} and {tuple(rshape)}")
    if len(lshape) == 1 and len(rshape) == 1 and (ta or tb):
        raise ShapeError("dot: cannot transpose 1-D operands of a vector inner product")
    if len(lshape) == 1:
        lfree, kl = (), lshape[0]
    elif ta:
        lfree, kl = tuple(lshape[1:]), lshape[0]
    else:
        lfree, kl = tuple(lshape[:-1]), lshape[-1]
    if len(rshape) == 1:
        kr, rfree = rshape[0], ()
    elif tb:
        kr, rfree = rshape[-1], tuple(rshape[:-1])
    else:
        kr, rfree = rshape[0], tuple(rshape[1:])
    if kl != kr:
        raise ShapeError(f"dot: contracted dimensions differ ({kl} vs. {kr}) for shapes "
                         f"{tuple(lshape)} x {tuple(rshape)} with transpose_a={ta}, "
                         f"transpose_b={tb}")
    return lfree, kl, kr, rfree


def dot_matrices(attrs, lshape, rshape):
    """The 2-D row-major views the kernel multiplies, and the effective flags.

    Returns ``(a_shape, b_shape, ta, tb)``: ``out2d = op(A) @ op(B)`` with ``A``
    the lhs buffer read as ``a_shape`` and ``B`` the rhs buffer as ``b_shape``.
    """
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    lfree, k, _, rfree = dot_dims(lshape, rshape, ta, tb)
    ta = ta and len(lshape) > 1
    tb = tb and len(rshape) > 1
    a_shape = (k, prod(lfree)) if ta else (prod(lfree), k)
    b_shape = (prod(rfree), k) if tb else (k, prod(rfree))
    return a_shape, b_shape, ta, tb


def _dot_shape(attrs, in_shapes):
    lshape, rshape = in_shapes
    if lshape is None or rshape is None:
        return in_shapes, [None]
    lfree, _, _, rfree = dot_dims(lshape, rshape, attrs["transpose_a"], attrs["transpose_b"])
    return in_shapes, [lfree + rfree or (1,)]


def _dot_ref(attrs, ins, is_train):
    lhs, rhs = ins
    a_shape, b_shape, ta, tb = dot_matrices(attrs, tuple(lhs.shape), tuple(rhs.shape))
    a, b = lhs.reshape(a_shape), rhs.reshape(b_shape)
    out = (a.t() if ta else a) @ (b.t() if tb else b)
    return [out.reshape(_dot_shape(attrs, [tuple(lhs.shape), tuple(rhs.shape)])[1][0])]


def _reshape(b, ref, shape):
    shape = tuple(shape)
    return ref if tuple(ref.shape) == shape else b.op("Reshape", ref, shape=shape)


def _dot_gradient(b, n):
    """Gradients of ``C = op(A) @ op(B)`` on the 2-D views, reshaped back."""
    lhs, rhs = n.inputs
    a_shape, b_shape, ta, tb = dot_matrices(n.attrs, n.in_shapes[0], n.in_shapes[1])
    a, m = _reshape(b, lhs, a_shape), _reshape(b, rhs, b_shape)
    dc = _reshape(b, n.ograds[0], (a_shape[0 if not ta else 1], b_shape[1 if not tb else 0]))
    if ta:   # dA = op(B) @ dC^T
        da = b.op("dot", m, dc, transpose_a=tb, transpose_b=True)
    else:    # dA = dC @ op(B)^T
        da = b.op("dot", dc, m, transpose_b=not tb)
    if tb:   # dB = dC^T @ op(A)
        db = b.op("dot", dc, a, transpose_a=True, transpose_b=ta)
    else:    # dB = op(A)^T @ dC
        db = b.op("dot", a, dc, transpose_a=not ta)
    return [_reshape(b, da, n.in_shapes[0]), _reshape(b, db, n.in_shapes[1])]


register(OpDef(
    name="dot", pattern="matmul", arguments=("lhs", "rhs"), attrs=_FLAGS,
    lowering=MatMul(transpose_a=lambda attrs: attrs["transpose_a"],
                    transpose_b=lambda attrs: attrs["transpose_b"]),
    infer_shape=_dot_shape, reference=_dot_ref, gradient=_dot_gradient,
    doc="mxnet dot; N-D operands are read as the 2-D matrices of dot_matrices()."))


# -- batch_dot --------------------------------------------------------------------

def _batch_dot_shape(attrs, in_shapes):
    lshape, rshape = in_shapes
    if lshape is None or rshape is None:
        return in_shapes, [None]
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    if len(lshape) < 3 or len(rshape) < 3 or len(lshape) != len(rshape):
        raise ShapeError(f"batch_dot: operands must both be N-D with N >= 3 and equal ranks, "
                         f"got {tuple(lshape)} and {tuple(rshape)}")
    if tuple(lshape[:-2]) != tuple(rshape[:-2]):    # unknown (0) dims too, as mxnet's
        raise ShapeError(f"batch_dot: the leading batch dimensions must be equal: "
                         f"{tuple(lshape)} x {tuple(rshape)}")
    m, kl = (lshape[-1], lshape[-2]) if ta else (lshape[-2], lshape[-1])
    kr, n = (rshape[-1], rshape[-2]) if tb else (rshape[-2], rshape[-1])
    if kl != kr:
        if not (kl and kr) and not zero_is_size():  # an unknown (0) one, in partial inference
            return in_shapes, [None]    # as mxnet's: nothing known of the output
        raise ShapeError(f"batch_dot: shape mismatch ({kl} vs. {kr}): {tuple(lshape)} x "
                         f"{tuple(rshape)} transpose_a={ta} transpose_b={tb}")
    return in_shapes, [tuple(lshape[:-2]) + (m, n)]


def _batch_dot_ref(attrs, ins, is_train):
    a, c = ins
    a = a.transpose(-1, -2) if attrs["transpose_a"] else a
    c = c.transpose(-1, -2) if attrs["transpose_b"] else c
    return [torch.matmul(a, c)]


def _batch_dot_gradient(b, n):
    a, m = n.inputs
    dc = n.ograds[0]
    ta, tb = n.attrs["transpose_a"], n.attrs["transpose_b"]
    if ta:
        da = b.op("batch_dot", m, dc, transpose_a=tb, transpose_b=True)
    else:
        da = b.op("batch_dot", dc, m, transpose_b=not tb)
    if tb:
        db = b.op("batch_dot", dc, a, transpose_a=True, transpose_b=ta)
    else:
        db = b.op("batch_dot", a, dc, transpose_a=not ta)
    return [da, db]


register(OpDef(
    name="batch_dot", pattern="matmul", arguments=("lhs", "rhs"), attrs=_FLAGS,
    lowering=MatMul(transpose_a=lambda attrs: attrs["transpose_a"],
                    transpose_b=lambda attrs: attrs["transpose_b"], batched=True),
    infer_shape=_batch_dot_shape, reference=_batch_dot_ref, gradient=_batch_dot_gradient,
    doc="Batched matrix product over the last two axes; leading axes are the batch."))
