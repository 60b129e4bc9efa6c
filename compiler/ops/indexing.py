"""``batch_take``: one element per row, ``out[i] = a[i, indices[i]]``.

mxnet 1.9.1 (where it is deprecated in favour of ``pick``) clips each index into
``[0, M)`` after its int cast (so ``-2`` reads column 0 and ``M + 3`` column
``M - 1``); the output has the shape of ``indices``, whose size must be ``a``'s
row count.

It is a composite: a one-hot of the clipped indices (the one-hot kernel
``_softmax_ce_grad`` already makes, over a constant zero "probability") selects
one element per row, and a row sum collects it. The gradient scatters ``dy``
back into that one-hot; ``indices`` get none. (mxnet 1.9.1 registers no gradient
for ``batch_take``: binding it with a gradient for ``a`` fails there; here ``a``
gets ``d out / d a`` and ``indices`` zeros.)
"""
from __future__ import annotations

import torch

from ..shape_semantics import zero_is_size
from .registry import Decompose, OpDef, ShapeError, prod, register


def _rows_cols(shape):
    if len(shape) != 2:
        raise ShapeError(f"batch_take: a must be 2-D (rows, columns), got shape {tuple(shape)}; "
                         f"reshape it first (mxnet reads a flat (rows, size / rows) view)")
    return int(shape[0]), int(shape[1])


def _shape(attrs, in_shapes):
    a, idx = in_shapes
    if a is not None:
        rows, _ = _rows_cols(a)
        if idx is not None and prod(idx) != rows:
            raise ShapeError(f"batch_take: indices of shape {tuple(idx)} give {prod(idx)} "
                             f"indices for the {rows} rows of a {tuple(a)}: one index per row")
        if rows and not a[1] and zero_is_size():   # a zero-size row (NumPy shape semantics)
            raise ShapeError(f"batch_take: the rows of a {tuple(a)} have no element to take")
    return in_shapes, [None if idx is None else tuple(idx)]


def _ref(attrs, ins, is_train):
    a, idx = ins
    rows, cols = _rows_cols(a.shape)
    j = idx.detach().reshape(rows).to(torch.int64).clamp(0, cols - 1)   # C cast, then clip
    return [a[torch.arange(rows, device=a.device), j].reshape(idx.shape)]


def _one_hot(b, indices, rows, cols):
    """1.0 at ``(i, clip(int(indices[i])))``, 0 elsewhere, shape (rows, cols)."""
    if tuple(indices.shape) != (rows,):
        indices = b.op("Reshape", indices, shape=(rows,))
    clipped = b.op("clip", indices, a_min=0.0, a_max=float(cols - 1))
    zeros = b.op("_zeros", shape=(rows, cols))
    return b.op("_softmax_ce_grad", zeros, clipped, axis=1, grad_scale=-1.0)   # -(0 - hit)


def _build(b, n, is_train):
    a, indices = n.inputs
    rows, cols = _rows_cols(n.in_shapes[0])
    hit = _one_hot(b, indices, rows, cols)
    picked = b.op("where", hit, a, b.op("_zeros", shape=(rows, cols)))
    out = b.op("sum", picked, axis=(1,))
    if tuple(out.shape) != tuple(n.in_shapes[1]):
        out = b.op("Reshape", out, shape=tuple(n.in_shapes[1]))
    return [out]


def _gradient(b, n):
    a, indices = n.inputs
    rows, cols = _rows_cols(n.in_shapes[0])
    dy = n.ograds[0]
    if tuple(dy.shape) != (rows, 1):
        dy = b.op("Reshape", dy, shape=(rows, 1))
    return [b.op("broadcast_mul", _one_hot(b, indices, rows, cols), dy), b.zeros_like(indices)]


register(OpDef(
    name="batch_take", pattern="composite", lowering=Decompose(_build),
    arguments=("a", "indices"), infer_shape=_shape, reference=_ref, gradient=_gradient,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    doc="out[i] = a[i, clip(int(indices[i]), 0, M - 1)] for a of shape (N, M); "
        "out has the shape of indices (N elements)."))
