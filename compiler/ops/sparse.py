"""Operators of mxnet 1.9.1's sparse family, as the compiled Program computes them.

The Program computes on dense tensors; the storage types these operators give
(mxnet's ``FInferStorageType``) are decided by ``compiler/passes/storage_type.py``
and kept by the executor (``runtime/executor_sparse.py``), which holds the sparse
arrays and converts at the Program's edges.

* ``_square_sum(data, axis, keepdims, exclude)``: ``sum(data ** 2)`` over ``axis``
  (mxnet's kernel is for row_sparse input; the value is the same for any storage).
  Gradient ``2 * data * dy``, broadcast back over the reduced axes.
* ``_contrib_SparseEmbedding``: Embedding, whose weight gradient is row_sparse
  (the rows the batch's indices name).
* ``cast_storage(data, stype)``: the identity on values; its output has storage
  ``stype``. mxnet also names it ``_sparse_cast_storage`` (``mx.sym.sparse``).
"""
from __future__ import annotations

import dataclasses

from .elemwise import _identity_view, same_shape
from .reduce_more import _RED_ATTRS, _bcast, _red_shape, _torch_sum
from .registry import REGISTRY, Attr, Decompose, OpDef, parse_bool, register

STYPES = ("default", "row_sparse", "csr")


def parse_stype(value) -> str:
    """A storage type name: ``default``, ``row_sparse`` or ``csr``."""
    text = str(value).strip("'\"")
    if text not in STYPES:
        raise ValueError(f"stype must be one of {list(STYPES)}, got {value!r}")
    return text


# -- _square_sum -----------------------------------------------------------------------

def _square_sum_build(b, n, is_train=False):
    a = n.attrs
    x = n.inputs[0]
    return [b.op("sum", b.op("square", x), axis=a["axis"], keepdims=a["keepdims"],
                 exclude=a["exclude"])]


def _square_sum_grad(b, n):
    x = n.inputs[0]
    dy = _bcast(b, n.ograds[0], n.attrs, tuple(n.in_shapes[0]))
    return [b.op("_mul_scalar", b.op("elemwise_mul", dy, x), scalar=2.0)]


register(OpDef(
    name="_square_sum", pattern="reduce", lowering=Decompose(_square_sum_build),
    attrs=_RED_ATTRS, infer_shape=_red_shape,
    reference=lambda attrs, ins, is_train: [_torch_sum(attrs, ins[0] * ins[0])],
    gradient=_square_sum_grad,
    doc="The sum of squares over axis (mxnet's row_sparse reduction, any storage here)."))


# -- contrib.SparseEmbedding -------------------------------------------------------------

register(dataclasses.replace(
    REGISTRY["Embedding"], name="_contrib_SparseEmbedding", aliases=(),
    _attr_index={},
    # mxnet's SparseEmbeddingParam: no sparse_grad (always row_sparse); deterministic
    # asks for a fixed summation order, which every backward here has
    attrs=[a for a in REGISTRY["Embedding"].attrs if a.name != "sparse_grad"] +
    [Attr("deterministic", parse_bool, False)],
    doc="Embedding whose weight gradient is row_sparse: the rows named by data."))


# -- cast_storage ------------------------------------------------------------------------

register(OpDef(
    name="cast_storage", pattern="injective", lowering=_identity_view,
    attrs=[Attr("stype", parse_stype)], infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [ins[0]],
    gradient=lambda b, n: [n.ograds[0]], aliases=("_sparse_cast_storage",),
    doc="The identity on values; the output's storage type is stype."))
