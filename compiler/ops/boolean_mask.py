"""mxnet 1.9.1's ``_contrib_boolean_mask`` (``mx.sym.contrib.boolean_mask(data, index,
axis=0)``): the rows of ``data`` where ``index`` is nonzero.

Its output length is the number of nonzero entries of ``index``, a value: mxnet's shape
inference cannot decide it (``infer_shape`` answers ``(None, None, None)``, the partial
form ``()`` for the output) and a symbol holding it does not bind. Both hold here; the
bind is refused with an error naming the node. ``mx.nd.contrib.boolean_mask``, which has
the values, runs ``_boolean_mask_count`` instead (``OpDef.value_shaped``): the same
selection with the count as an attribute, so its output shape is fixed and it compiles
as any operator, one extern launch. Its gradient is mxnet's
``_backward_contrib_boolean_mask``: each selected row of ``data`` gets its output row's
gradient, the others zero; ``index`` gets zeros.

Only ``axis=0`` is computed by mxnet ("Not supported yet" otherwise); ``index`` is 1-D,
as long as ``data``'s first axis, of any dtype.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .contrib_common import zero_gradients
from .registry import Attr, Extern, OpDef, ShapeError, parse_int, register

_AXIS = Attr("axis", parse_int, 0)


def _check(name, attrs, data, index):
    if attrs["axis"] != 0:
        raise ShapeError(f"{name}: axis={attrs['axis']} is not supported (mxnet 1.9.1 "
                         f"masks axis 0 only)")
    if data is not None and len(data) < 1:
        raise ShapeError(f"{name}: data must have at least 1 dim, got {tuple(data)}")
    if index is not None and len(index) != 1:
        raise ShapeError(f"{name}: index must be 1-D, got shape {tuple(index)}")
    if data is not None and index is not None and data[0] != index[0]:
        raise ShapeError(f"{name}: index of shape {tuple(index)} does not match axis 0 of "
                         f"data {tuple(data)}")


def _mask_shape(attrs, in_shapes):
    _check("boolean_mask", attrs, *in_shapes)
    return list(in_shapes), [None]       # the output length is a value of index


def _count_shape(attrs, in_shapes):
    data, index = in_shapes
    _check("_boolean_mask_count", attrs, data, index)
    if index is None and data is not None:
        index = (data[0],)
    out = None if data is None else (attrs["count"],) + tuple(data[1:])
    return [data, index], [out]


def _types(attrs, in_types):
    return list(in_types), [in_types[0]]


def _select(attrs, ins):
    data, index = ins
    keep = index.reshape(-1) != 0
    got = int(keep.sum())
    if "count" in attrs and got != attrs["count"]:
        raise MXNetError(f"_boolean_mask_count: index has {got} nonzero entries, the "
                         f"operator was built for {attrs['count']}")
    return [data[keep]]


def _count_of(attrs, tensors):
    """The fixed-shape operator of an imperative call: the count of nonzero entries."""
    data, index = tensors
    _check("boolean_mask", attrs, tuple(data.shape), tuple(index.shape))
    return "_boolean_mask_count", {"axis": 0, "count": int((index.reshape(-1) != 0).sum())}


def _backward(attrs, ins):
    ograd, data, index = ins
    keep = index.reshape(-1) != 0
    grad = torch.zeros(data.shape, dtype=ograd.dtype, device=ograd.device)
    grad[keep] = ograd
    return [grad]


def _grad(b, n):
    data, index = n.inputs
    return [b.op("_backward_contrib_boolean_mask", n.ograds[0], data, index,
                 axis=n.attrs["axis"]), b.zeros_like(index)]


register(OpDef(
    name="_contrib_boolean_mask", pattern="opaque", lowering=Extern(_select),
    arguments=("data", "index"), attrs=(_AXIS,), infer_shape=_mask_shape,
    infer_type=_types, reference=lambda attrs, ins, is_train: _select(attrs, ins),
    gradient=_grad, value_shaped=_count_of,
    doc="The rows of data where index is nonzero (output shape from the values: "
        "imperative only, as in mxnet)."))
register(OpDef(
    name="_boolean_mask_count", pattern="opaque", lowering=Extern(_select),
    arguments=("data", "index"), attrs=(_AXIS, Attr("count", parse_int)),
    infer_shape=_count_shape, infer_type=_types,
    reference=lambda attrs, ins, is_train: _select(attrs, ins), gradient=_grad,
    doc="boolean_mask with its output length given (count): what mx.nd runs."))
register(OpDef(
    name="_backward_contrib_boolean_mask", pattern="opaque", lowering=Extern(_backward),
    arguments=("ograd", "data", "index"), attrs=(_AXIS,),
    infer_shape=lambda attrs, s: (s, [None if s[1] is None else tuple(s[1])]),
    infer_type=lambda attrs, t: (list(t), [t[0]]),
    reference=lambda attrs, ins, is_train: _backward(attrs, ins), gradient=zero_gradients,
    doc="boolean_mask's gradient: the output rows' gradients back at the selected rows of "
        "data, zeros elsewhere."))
