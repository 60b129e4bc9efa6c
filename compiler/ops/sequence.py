"""Sequence operators: SequenceMask, SequenceLast and SequenceReverse, as mxnet 1.9.1
defines them, with the internal ops they lower to (``_sequence_select``,
``_sequence_reverse_index``).

Each takes ``data`` shaped ``(max_len, batch, ...)`` (``axis=0``) or ``(batch,
max_len, ...)`` (``axis=1``; SequenceReverse supports only 0) and, when
``use_sequence_length=True``, a second input ``sequence_length`` of shape ``(batch,)``:
the argument list depends on the attribute. mxnet reads a length ``L`` as
``static_cast<int>(L)`` (truncation toward zero): a position ``t`` is inside the
sequence when ``t < trunc(L)``, which for an integer ``t >= 0`` is ``t + 1 <= L``
for every real ``L``, so the kernels compare floats and need no cast.

No gradient flows to ``sequence_length`` (mxnet never writes it: zeros).
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from ..shape_semantics import zero_is_size
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, merge_shape,
                       parse_bool, parse_float, parse_int, parse_shape, prod, register)


def _args(attrs):
    return ("data", "sequence_length") if attrs["use_sequence_length"] else ("data",)


def _seq_attrs():
    return [Attr("use_sequence_length", parse_bool, False), Attr("axis", parse_int, 0)]


def _types(attrs, in_types):
    """mxnet: the data's dtype for the output and for an untyped sequence_length
    (which may have any dtype of its own)."""
    t = in_types[0]
    return [t] + [x or t for x in in_types[1:]], [t]


def _check_axis(name, attrs, allowed):
    if attrs["axis"] not in allowed:
        want = "0" if allowed == (0,) else "0 or 1"
        raise ShapeError(f"{name}: axis must be {want} (mxnet's implementation supports "
                         f"no other), got {attrs['axis']}")


def _seq_shapes(name, attrs, in_shapes, allowed=(0, 1)):
    """Checks of all three operators: ``(data shape, [data, length] shapes)``."""
    _check_axis(name, attrs, allowed)
    d = in_shapes[0]
    if d is None:
        return None, in_shapes
    if len(d) < 2:
        raise ShapeError(f"{name}: data must be of rank 2 or greater, got shape {tuple(d)}")
    if not attrs["use_sequence_length"]:
        return tuple(d), [tuple(d)]
    batch = (d[1] if attrs["axis"] == 0 else d[0],)
    length = merge_shape(in_shapes[1], batch,
                         f"{name} sequence_length (one length per batch entry of data "
                         f"{tuple(d)})")
    return tuple(d), [tuple(d), length]


def _pos_shape(axis, ndim):
    """Shape that broadcasts a (batch,) vector against data along the batch dim."""
    batch_dim = 1 - axis
    return [-1 if i == batch_dim else 1 for i in range(ndim)]


def _positions(x, axis):
    """Position of every element along ``axis`` (float64, broadcastable)."""
    t = x.shape[axis]
    return torch.arange(t, dtype=torch.float64, device=x.device).reshape(
        [t if i == axis else 1 for i in range(x.dim())])


def _inside(x, length, axis):
    """Boolean mask: the position is inside its batch entry's sequence (t + 1 <= L)."""
    lens = length.detach().to(torch.float64).reshape(_pos_shape(axis, x.dim()))
    return _positions(x, axis) + 1 <= lens


def _at_last(x, length, axis):
    """Boolean mask: the position is the last of its sequence (t == trunc(L) - 1)."""
    lens = length.detach().to(torch.float64).reshape(_pos_shape(axis, x.dim()))
    t = _positions(x, axis)
    return (t + 1 <= lens) & (lens < t + 2)


# -- _sequence_select: where the position is inside (or the last of) its sequence ------

def _select_math(attrs, x, length, *, coords):
    c = coords[attrs["axis"]]
    t = ops.const(0.0) if c is None else c * 1.0
    keep = t + 1.0 <= length
    if attrs["last"]:
        keep = ops.and_(keep, length < t + 2.0)
    return ops.where(keep, x, attrs["value"])


def _select_dims(attrs, in_shapes, out_shape):
    """data lies along the output; the lengths along the batch dim (1 - axis)."""
    return [list(range(len(out_shape))), [1 - attrs["axis"]]]


def _select_shape(attrs, in_shapes):
    d, lshape = in_shapes
    if d is None:
        return in_shapes, [None]
    batch = (d[1 - attrs["axis"]],)
    return [tuple(d), merge_shape(lshape, batch, "_sequence_select sequence_length")], \
        [tuple(d)]


def _select_ref(attrs, ins, is_train):
    x, length = ins
    hit = (_at_last if attrs["last"] else _inside)(x, length, attrs["axis"])
    return [torch.where(hit, x, torch.full_like(x, attrs["value"]))]


register(OpDef(
    name="_sequence_select", pattern="broadcast",
    lowering=Pointwise(_select_math, _select_dims), needs_coords=True,
    arguments=("data", "sequence_length"),
    attrs=[Attr("axis", parse_int, 0), Attr("value", parse_float, 0.0),
           Attr("last", parse_bool, False)],
    infer_shape=_select_shape, infer_type=_types, reference=_select_ref,
    doc="data where its position t along `axis` is inside its sequence (t + 1 <= L, "
        "L = sequence_length[batch]) -- with last=True only where t == trunc(L) - 1 -- "
        "else `value`."))


# -- SequenceMask -------------------------------------------------------------------------

def _mask_shape(attrs, in_shapes):
    d, shapes = _seq_shapes("SequenceMask", attrs, in_shapes)
    return shapes, [d]


def _mask_ref(attrs, ins, is_train):
    x = ins[0]
    if not attrs["use_sequence_length"]:
        return [x]
    hit = _inside(x, ins[1], attrs["axis"])
    return [torch.where(hit, x, torch.full_like(x, attrs["value"]))]


def _mask_build(b, n, is_train):
    if not n.attrs["use_sequence_length"]:
        return [b.op("_copy", n.inputs[0])]
    return [b.op("_sequence_select", *n.inputs, axis=n.attrs["axis"],
                 value=n.attrs["value"])]


def _mask_gradient(b, n):
    """The head gradient, zero outside each sequence (mxnet masks it with 0)."""
    dy = n.ograds[0]
    if not n.attrs["use_sequence_length"]:
        return [dy]
    return [b.op("_sequence_select", dy, n.inputs[1], axis=n.attrs["axis"], value=0.0),
            b.zeros_like(n.inputs[1])]


register(OpDef(
    name="SequenceMask", pattern="composite", lowering=Decompose(_mask_build),
    arguments=_args, aliases=("_npx_sequence_mask",),
    attrs=[Attr("use_sequence_length", parse_bool, False), Attr("value", parse_float, 0.0),
           Attr("axis", parse_int, 0)],
    infer_shape=_mask_shape, infer_type=_types, reference=_mask_ref, gradient=_mask_gradient,
    doc="Elements at positions t >= trunc(sequence_length[batch]) along `axis` set to "
        "`value`; the identity without use_sequence_length."))


# -- SequenceLast -------------------------------------------------------------------------

def _last_out(attrs, d):
    return tuple(s for i, s in enumerate(d) if i != attrs["axis"])


def _last_shape(attrs, in_shapes):
    d, shapes = _seq_shapes("SequenceLast", attrs, in_shapes)
    out = None if d is None else _last_out(attrs, d)
    if out is not None and not d[attrs["axis"]] and prod(out) and zero_is_size():
        # sequences of no step (NumPy shape semantics): nothing to take
        raise ShapeError(f"SequenceLast: data of shape {tuple(d)} has no step along axis "
                         f"{attrs['axis']} to take the last of")
    return shapes, [out]


def _last_ref(attrs, ins, is_train):
    x, ax = ins[0], attrs["axis"]
    if not attrs["use_sequence_length"]:
        return [x.select(ax, x.shape[ax] - 1)]
    hit = _at_last(x, ins[1], ax)
    return [torch.where(hit, x, torch.zeros_like(x)).sum(dim=ax)]


def _last_build(b, n, is_train):
    x, ax = n.inputs[0], n.attrs["axis"]
    d = n.in_shapes[0]
    if not n.attrs["use_sequence_length"]:
        last = b.op("slice_axis", x, axis=ax, begin=d[ax] - 1, end=d[ax])
        return [b.op("Reshape", last, shape=_last_out(n.attrs, d))]
    # one element of each sequence survives the select; the sum along the axis reads it
    picked = b.op("_sequence_select", x, n.inputs[1], axis=ax, last=True)
    return [b.op("sum", picked, axis=(ax,))]


def _last_gradient(b, n):
    """The head gradient placed at each sequence's last position, zeros elsewhere."""
    ax, d = n.attrs["axis"], n.in_shapes[0]
    dy = b.op("expand_dims", n.ograds[0], axis=ax)
    if not n.attrs["use_sequence_length"]:
        if d[ax] == 1:
            return [dy]
        before = tuple(d[ax] - 1 if i == ax else s for i, s in enumerate(d))
        zeros = b.op("_zeros", shape=before, dtype=dy.dtype)
        return [b.op("Concat", zeros, dy, num_args=2, dim=ax)]
    spread = b.op("broadcast_to", dy, shape=tuple(d))
    return [b.op("_sequence_select", spread, n.inputs[1], axis=ax, last=True),
            b.zeros_like(n.inputs[1])]


register(OpDef(
    name="SequenceLast", pattern="composite", lowering=Decompose(_last_build),
    arguments=_args, attrs=_seq_attrs(),
    infer_shape=_last_shape, infer_type=_types, reference=_last_ref, gradient=_last_gradient,
    doc="The element at position trunc(sequence_length[batch]) - 1 along `axis` (the last "
        "position without use_sequence_length); `axis` removed from the shape."))


# -- SequenceReverse ---------------------------------------------------------------------------
# mxnet's ReverseKernel: out[t, b] = data[trunc(L_b) - 1 - t, b] for t < trunc(L_b), and
# data[t, b] past the sequence (padding stays in place). The lowering gathers rows of the
# (max_len * batch, rest) view of data (Embedding) at indices one pointwise op computes.

def _rev_index_math(attrs, length, *, coords):
    t_c, b_c = coords
    t = ops.const(0.0) if t_c is None else t_c * 1.0
    col = ops.const(0.0) if b_c is None else b_c * 1.0
    n = ops.to_int32(length) * 1.0            # C's int cast: truncation toward zero
    src = ops.where(t < n, n - 1.0 - t, t)
    return src * float(attrs["shape"][1]) + col


def _rev_index_ref(attrs, ins, is_train):
    t_len, batch = attrs["shape"]
    n = torch.trunc(ins[0].detach().to(torch.float64)).reshape(1, batch)
    t = torch.arange(t_len, dtype=torch.float64).reshape(t_len, 1)
    src = torch.where(t < n, n - 1 - t, t)
    return [(src * batch + torch.arange(batch, dtype=torch.float64)).to(torch.float32)]


def _rev_index_shape(attrs, in_shapes):
    shape = attrs["shape"]
    if len(shape) != 2:
        raise ShapeError(f"_sequence_reverse_index: shape must be (max_len, batch), got "
                         f"{tuple(shape)}")
    return [merge_shape(in_shapes[0], (shape[1],), "_sequence_reverse_index "
                        "sequence_length")], [tuple(shape)]


register(OpDef(
    name="_sequence_reverse_index", pattern="broadcast",
    lowering=Pointwise(_rev_index_math), needs_coords=True,
    arguments=("sequence_length",), attrs=[Attr("shape", parse_shape)],
    infer_shape=_rev_index_shape,
    infer_type=lambda attrs, in_types: (in_types, ["float32"]),
    reference=_rev_index_ref,
    doc="out[t, b] = src * batch + b (a float row index) with src = trunc(L_b) - 1 - t "
        "for t < trunc(L_b), else t: SequenceReverse's source rows."))


def _rev_shape(attrs, in_shapes):
    d, shapes = _seq_shapes("SequenceReverse", attrs, in_shapes, allowed=(0,))
    return shapes, [d]


def _rev_ref(attrs, ins, is_train):
    x = ins[0]
    if not attrs["use_sequence_length"]:
        return [torch.flip(x, dims=(0,))]
    t_len, batch = x.shape[0], x.shape[1]
    idx = _rev_index_ref({"shape": (t_len, batch)}, [ins[1]], is_train)[0].long()
    rows = x.reshape(t_len * batch, -1)[idx.reshape(-1).clamp(0, t_len * batch - 1)]
    return [rows.reshape(x.shape)]


def _rev_build(b, n, is_train):
    x = n.inputs[0]
    d = n.in_shapes[0]
    if not n.attrs["use_sequence_length"]:
        return [b.op("reverse", x, axis=(0,))]
    t_len, batch = d[0], d[1]
    rest = 1
    for s in d[2:]:
        rest *= s
    idx = b.op("_sequence_reverse_index", n.inputs[1], shape=(t_len, batch))
    table = b.op("Reshape", x, shape=(t_len * batch, rest))
    rows = b.op("Embedding", idx, table, input_dim=t_len * batch, output_dim=rest,
                dtype=x.dtype)
    return [b.op("Reshape", rows, shape=tuple(d))]


def _rev_gradient(b, n):
    """Reversing the first trunc(L) positions is its own inverse: the gradient is the
    head gradient reversed the same way."""
    dy = n.ograds[0]
    if not n.attrs["use_sequence_length"]:
        return [b.op("reverse", dy, axis=(0,))]
    return [b.op("SequenceReverse", dy, n.inputs[1], use_sequence_length=True),
            b.zeros_like(n.inputs[1])]


register(OpDef(
    name="SequenceReverse", pattern="composite", lowering=Decompose(_rev_build),
    arguments=_args, attrs=_seq_attrs(),
    infer_shape=_rev_shape, infer_type=_types, reference=_rev_ref, gradient=_rev_gradient,
    doc="The first trunc(sequence_length[batch]) positions along axis 0 reversed, the "
        "rest in place (all of axis 0 without use_sequence_length)."))
