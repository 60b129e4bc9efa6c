"""mxnet's public backward operators of the contrib family: ``_contrib_backward_quadratic``,
``_contrib_backward_gradientmultiplier`` and ``_contrib_backward_index_copy``.

mxnet registers the gradients of ``quadratic``, ``gradientmultiplier`` and ``index_copy``
as operators of their own, so they appear in ``mx.sym.contrib`` (``backward_quadratic`` ...)
and may be called directly. Each takes mxnet's inputs (the output gradient first, then the
forward's inputs where mxnet's ``ElemwiseGradUseIn`` passes them) and computes what the
forward entry's own gradient rule computes (``compiler/ops/contrib_math.py``): the math is
that rule's, reached through the same helpers. Like mxnet's, they have no gradient.
"""
from __future__ import annotations

import torch

from .contrib_common import cast_to, parse_float32
from .contrib_math import _last_source, _rows_like
from .elemwise import same_shape
from .registry import Attr, Decompose, OpDef, Pointwise, parse_float, parse_str, register


def _quadratic_slope(attrs, dy, x):
    return dy * (2.0 * attrs["a"] * x + attrs["b"])


register(OpDef(
    name="_contrib_backward_quadratic", pattern="elemwise", arguments=("ograd", "data"),
    lowering=Pointwise(_quadratic_slope),
    attrs=[Attr("a", parse_float32, 0.0), Attr("b", parse_float32, 0.0),
           Attr("c", parse_float32, 0.0)],
    infer_shape=lambda attrs, in_shapes: ([in_shapes[1] or in_shapes[0]] * 2,
                                          [in_shapes[1] or in_shapes[0]]),
    reference=lambda attrs, ins, is_train: [
        ins[0] * (2.0 * attrs["a"] * ins[1] + attrs["b"])],
    doc="quadratic's gradient: ograd * (2 a x + b)."))

register(OpDef(
    name="_contrib_backward_gradientmultiplier", pattern="elemwise",
    lowering=Pointwise(lambda attrs, dy: dy * attrs["scalar"]),
    attrs=[Attr("scalar", parse_float), Attr("is_int", parse_str, "True")],
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [ins[0] * attrs["scalar"]],
    doc="gradientmultiplier's gradient: ograd * scalar."))


def _index_copy_backward_build(b, n, is_train):
    dy, old, idx, new = n.inputs
    shape = tuple(n.in_shapes[1])
    hit, _ = _last_source(b, cast_to(b, idx, "float32"), shape[0])
    d_old = b.op("where", _rows_like(b, hit, shape), b.zeros_like(dy), dy)
    d_new = b.op("take", dy, b.op("trunc", idx), axis=0)
    return [d_old, b.zeros_like(idx), d_new]


def _index_copy_backward_ref(attrs, ins, is_train):
    dy, old, idx, new = ins
    rows = idx.detach().to(torch.int64)
    d_old = dy.clone()
    d_old[rows] = 0
    return [d_old, torch.zeros_like(idx), dy[rows]]


register(OpDef(
    name="_contrib_backward_index_copy", pattern="composite",
    lowering=Decompose(_index_copy_backward_build),
    arguments=("ograd", "old_tensor", "index_vector", "new_tensor"),
    outputs=("old_tensor_grad", "index_vector_grad", "new_tensor_grad"),
    infer_shape=lambda attrs, in_shapes: (in_shapes, [in_shapes[1], in_shapes[2],
                                                      in_shapes[3]]),
    infer_type=lambda attrs, in_types: (in_types, [in_types[0], in_types[2], in_types[0]]),
    reference=_index_copy_backward_ref,
    doc="index_copy's gradients: ograd with the copied rows zeroed, zeros for the "
        "index, the copied rows of ograd for new_tensor."))
