"""mxnet 1.9.1's interleaved multi-head attention matmuls (its contrib transformer
operators): ``_contrib_interleaved_matmul_selfatt_qk``, ``..._selfatt_valatt``,
``..._encdec_qk`` and ``..._encdec_valatt`` (``mx.sym.contrib.interleaved_matmul_*``).

The projections arrive interleaved per head: self-attention's ``(L, B, H * 3 * D)`` holds,
for each batch entry and head, the query, key and value rows of ``D`` values one after the
other; encoder-decoder attention's ``(L, B, H * 2 * D)`` the key and value rows. So
``reshape(x, (L, B * H, parts, D))``, one ``slice_axis`` over ``parts`` and a transpose to
``(B * H, L, D)`` are views of the input, and each operator is one batched matmul over those
views (batch ``b * H + h``, mxnet's order), the query-key products scaled by
``1 / sqrt(D)`` (mxnet's float32 ``scale``, applied to the product as its GEMM's alpha).
The value-attention outputs go back to ``(L, B, H * D)`` with a transpose that needs a copy.

Gradients are written out (mxnet's ``_backward_interleaved_matmul_*``): two batched
matmuls over the same views, and the gradient of an interleaved input assembled by one
``Concat`` over the parts axis (zeros for the parts the operator does not read), whose
inputs are strided views of the matmuls' results.
"""
from __future__ import annotations

import numpy as np
import torch

from .contrib_common import require_rank
from .registry import Attr, Decompose, OpDef, ShapeError, parse_positive_int, register


def _scale(head_dim):
    """mxnet's ``1.0 / sqrt(static_cast<float>(head_dim))``, kept as a float."""
    root = np.sqrt(np.float32(head_dim), dtype=np.float32)
    return float(np.float32(1.0 / float(root)))


def _head_dim(op, what, shape, heads, parts):
    if shape[2] % (heads * parts):
        raise ShapeError(f"{op}: {what} of shape {tuple(shape)}: its last dim must be a "
                         f"multiple of heads * {parts} = {heads * parts}")
    return shape[2] // (heads * parts)


def _heads_view(b, x, heads, parts, part):
    """``(B * H, L, D)``: part ``part`` of each head's rows, a view of ``x``."""
    length, batch, width = x.shape
    d = width // (heads * parts)
    v = b.op("Reshape", x, shape=(length, batch * heads, parts, d))
    if parts > 1:
        v = b.op("slice_axis", v, axis=2, begin=part, end=part + 1)
    v = b.op("Reshape", v, shape=(length, batch * heads, d))
    return b.op("transpose", v, axes=(1, 0, 2))


def _merge_heads(b, o, heads):
    """``(B * H, L, D)`` -> ``(L, B, H * D)``."""
    bh, length, d = o.shape
    o = b.op("Reshape", o, shape=(bh // heads, heads, length, d))
    o = b.op("transpose", o, axes=(2, 0, 1, 3))
    return b.op("Reshape", o, shape=(length, bh // heads, heads * d))


def _interleave(b, grads, shape, heads, dtype):
    """The gradient of an interleaved ``(L, B, H * parts * D)`` input from one
    ``(B * H, L, D)`` gradient per part (``None``: zeros)."""
    length, batch, width = shape
    d = width // (heads * len(grads))
    pieces = [b.op("_zeros", shape=(length, batch * heads, 1, d), dtype=dtype) if g is None
              else b.op("expand_dims", b.op("transpose", g, axes=(1, 0, 2)), axis=2)
              for g in grads]
    joined = pieces[0] if len(pieces) == 1 else b.op("Concat", *pieces, num_args=len(pieces),
                                                     dim=2)
    return b.op("Reshape", joined, shape=tuple(shape))


def _qk_grads(b, n, q, k):
    """``(dq, dk)`` of ``scale * q @ k^T``, both ``(B * H, L, D)`` (the scale applied to the
    products, an epilogue of their matmuls, as mxnet's GEMM alpha)."""
    g, scale = n.ograds[0], _scale(q.shape[2])
    return (b.op("_mul_scalar", b.op("batch_dot", g, k), scalar=scale),
            b.op("_mul_scalar", b.op("batch_dot", g, q, transpose_a=True), scalar=scale))


def _valatt_grads(b, n, att, v):
    """``(d_att, dv)`` of ``merge_heads(att @ v)``."""
    dout = _heads_view(b, n.ograds[0], n.attrs["heads"], 1, 0)
    return (b.op("batch_dot", dout, v, transpose_b=True),
            b.op("batch_dot", att, dout, transpose_a=True))


def _t_heads(x, heads, parts, part):
    """Torch version of ``_heads_view``."""
    length, batch, width = x.shape
    d = width // (heads * parts)
    v = x.reshape(length, batch * heads, parts, d)[:, :, part]
    return v.transpose(0, 1)


def _t_merge(o, heads):
    bh, length, d = o.shape
    return o.reshape(bh // heads, heads, length, d).permute(2, 0, 1, 3).reshape(
        length, bh // heads, heads * d)


# -- self attention -------------------------------------------------------------------------

def _selfatt_qk_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    require_rank("interleaved_matmul_selfatt_qk", "queries_keys_values", x, 3)
    _head_dim("interleaved_matmul_selfatt_qk", "queries_keys_values", x, attrs["heads"], 3)
    return in_shapes, [(attrs["heads"] * x[1], x[0], x[0])]


def _selfatt_qk_build(b, n, is_train):
    x, h = n.inputs[0], n.attrs["heads"]
    q, k = _heads_view(b, x, h, 3, 0), _heads_view(b, x, h, 3, 1)
    scale = _scale(_head_dim("", "", n.in_shapes[0], h, 3))
    return [b.op("_mul_scalar", b.op("batch_dot", q, k, transpose_b=True), scalar=scale)]


def _selfatt_qk_gradient(b, n):
    x, h = n.inputs[0], n.attrs["heads"]
    dq, dk = _qk_grads(b, n, _heads_view(b, x, h, 3, 0), _heads_view(b, x, h, 3, 1))
    return [_interleave(b, [dq, dk, None], n.in_shapes[0], h, x.dtype)]


def _selfatt_qk_ref(attrs, ins, is_train):
    x, h = ins[0], attrs["heads"]
    q, k = _t_heads(x, h, 3, 0), _t_heads(x, h, 3, 1)
    return [torch.bmm(q, k.transpose(1, 2)) * _scale(x.shape[2] // (3 * h))]


def _selfatt_valatt_shape(attrs, in_shapes):
    x, att = in_shapes
    if x is None or att is None:
        return in_shapes, [None]
    op = "interleaved_matmul_selfatt_valatt"
    require_rank(op, "queries_keys_values", x, 3)
    require_rank(op, "attention", att, 3)
    if att[1] != x[0] or att[2] != x[0]:
        raise ShapeError(f"{op}: attention {tuple(att)} must be (batch * heads, L, L) for "
                         f"queries_keys_values {tuple(x)} of L = {x[0]}")
    _head_dim(op, "queries_keys_values", x, attrs["heads"], 3)
    if att[0] != x[1] * attrs["heads"]:
        raise ShapeError(f"{op}: attention {tuple(att)} must have batch * heads = "
                         f"{x[1] * attrs['heads']} matrices")
    return in_shapes, [(x[0], x[1], x[2] // 3)]


def _selfatt_valatt_build(b, n, is_train):
    x, att = n.inputs
    h = n.attrs["heads"]
    return [_merge_heads(b, b.op("batch_dot", att, _heads_view(b, x, h, 3, 2)), h)]


def _selfatt_valatt_gradient(b, n):
    x, att = n.inputs
    h = n.attrs["heads"]
    d_att, dv = _valatt_grads(b, n, att, _heads_view(b, x, h, 3, 2))
    return [_interleave(b, [None, None, dv], n.in_shapes[0], h, x.dtype), d_att]


def _selfatt_valatt_ref(attrs, ins, is_train):
    x, att = ins
    h = attrs["heads"]
    return [_t_merge(torch.bmm(att, _t_heads(x, h, 3, 2)), h)]


# -- encoder-decoder attention -------------------------------------------------------------

def _encdec_qk_shape(attrs, in_shapes):
    q, kv = in_shapes
    if q is None or kv is None:
        return in_shapes, [None]
    op = "interleaved_matmul_encdec_qk"
    require_rank(op, "queries", q, 3)
    require_rank(op, "keys_values", kv, 3)
    if kv[2] != 2 * q[2] or kv[1] != q[1]:
        raise ShapeError(f"{op}: keys_values {tuple(kv)} must be (Lk, {q[1]}, {2 * q[2]}) "
                         f"for queries {tuple(q)}")
    _head_dim(op, "queries", q, attrs["heads"], 1)
    return in_shapes, [(q[1] * attrs["heads"], q[0], kv[0])]


def _encdec_qk_build(b, n, is_train):
    q, kv = n.inputs
    h = n.attrs["heads"]
    qh, k = _heads_view(b, q, h, 1, 0), _heads_view(b, kv, h, 2, 0)
    scale = _scale(_head_dim("", "", n.in_shapes[0], h, 1))
    return [b.op("_mul_scalar", b.op("batch_dot", qh, k, transpose_b=True), scalar=scale)]


def _encdec_qk_gradient(b, n):
    q, kv = n.inputs
    h = n.attrs["heads"]
    dq, dk = _qk_grads(b, n, _heads_view(b, q, h, 1, 0), _heads_view(b, kv, h, 2, 0))
    return [_interleave(b, [dq], n.in_shapes[0], h, q.dtype),
            _interleave(b, [dk, None], n.in_shapes[1], h, kv.dtype)]


def _encdec_qk_ref(attrs, ins, is_train):
    q, kv = ins
    h = attrs["heads"]
    out = torch.bmm(_t_heads(q, h, 1, 0), _t_heads(kv, h, 2, 0).transpose(1, 2))
    return [out * _scale(q.shape[2] // h)]


def _encdec_valatt_shape(attrs, in_shapes):
    kv, att = in_shapes
    if kv is None or att is None:
        return in_shapes, [None]
    op = "interleaved_matmul_encdec_valatt"
    require_rank(op, "keys_values", kv, 3)
    require_rank(op, "attention", att, 3)
    if att[2] != kv[0] or att[0] != kv[1] * attrs["heads"]:
        raise ShapeError(f"{op}: attention {tuple(att)} must be ({kv[1] * attrs['heads']}, "
                         f"Lq, {kv[0]}) for keys_values {tuple(kv)}")
    _head_dim(op, "keys_values", kv, attrs["heads"], 2)
    return in_shapes, [(att[1], kv[1], kv[2] // 2)]


def _encdec_valatt_build(b, n, is_train):
    kv, att = n.inputs
    h = n.attrs["heads"]
    return [_merge_heads(b, b.op("batch_dot", att, _heads_view(b, kv, h, 2, 1)), h)]


def _encdec_valatt_gradient(b, n):
    kv, att = n.inputs
    h = n.attrs["heads"]
    d_att, dv = _valatt_grads(b, n, att, _heads_view(b, kv, h, 2, 1))
    return [_interleave(b, [None, dv], n.in_shapes[0], h, kv.dtype), d_att]


def _encdec_valatt_ref(attrs, ins, is_train):
    kv, att = ins
    h = attrs["heads"]
    return [_t_merge(torch.bmm(att, _t_heads(kv, h, 2, 1)), h)]


def _register(name, arguments, shape, build, ref, gradient, doc):
    register(OpDef(
        name=f"_contrib_interleaved_matmul_{name}", pattern="composite",
        lowering=Decompose(build), arguments=arguments,
        attrs=[Attr("heads", parse_positive_int)],
        infer_shape=shape, reference=ref, gradient=gradient,
        infer_type=lambda attrs, in_types: (
            [next((t for t in in_types if t), None)] * len(in_types),
            [next((t for t in in_types if t), None)]),
        doc=doc))


_register("selfatt_qk", ("queries_keys_values",), _selfatt_qk_shape, _selfatt_qk_build,
          _selfatt_qk_ref, _selfatt_qk_gradient,
          "q @ k^T / sqrt(D) per batch and head of interleaved (L, B, H*3*D) projections: "
          "(B*H, L, L).")
_register("selfatt_valatt", ("queries_keys_values", "attention"), _selfatt_valatt_shape,
          _selfatt_valatt_build, _selfatt_valatt_ref, _selfatt_valatt_gradient,
          "attention @ v per batch and head, back to (L, B, H*D).")
_register("encdec_qk", ("queries", "keys_values"), _encdec_qk_shape, _encdec_qk_build,
          _encdec_qk_ref, _encdec_qk_gradient,
          "q @ k^T / sqrt(D) with queries (Lq, B, H*D) and interleaved keys_values "
          "(Lk, B, H*2*D): (B*H, Lq, Lk).")
_register("encdec_valatt", ("keys_values", "attention"), _encdec_valatt_shape,
          _encdec_valatt_build, _encdec_valatt_ref, _encdec_valatt_gradient,
          "attention @ v per batch and head of interleaved keys_values, back to (Lq, B, H*D).")
