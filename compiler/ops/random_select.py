"""mxnet's samplers that pick among elements: ``_sample_multinomial`` (alias
``sample_multinomial``), ``_shuffle`` (alias ``shuffle``) and ``_sample_unique_zipfian``.

* ``_sample_multinomial``: per row of ``data`` (the last axis holds the probabilities
  of ``K`` outcomes), ``shape`` draws ``u`` of the step's Philox seed; each outcome is the
  number of running sums of the row below ``u`` (mxnet's binary search over its table
  of running sums, which it adds in double and stores as float: the running sums here
  are a float64 ``cumsum``, exact for float32 probabilities within 2**29 of each other,
  so every target compares the same numbers). An outcome past the last (a row summing
  to less than ``u``) is clamped to ``K - 1``. With ``get_prob`` a second output holds
  ``log(data[outcome])``, and the gradient is mxnet's: ``ograd / data[outcome]`` added
  at each drawn outcome (the score function estimator); without it, zeros.
* ``_shuffle``: the rows (first axis) in the order that sorts one Philox draw per row
  (a stable ``argsort``: ties keep their order), gathered with ``take``. mxnet
  registers no gradient for it.
* ``_sample_unique_zipfian``: per row of ``shape = (batch_size, num_sampled)``, draws
  ``lround(exp(u log(range_max))) - 1`` (mxnet's kernel: nearly log-uniform on
  ``[0, range_max)``) until ``num_sampled`` distinct classes have come, in the order they
  came, and counts the draws (the second output, which sampled softmax's correction
  reads). The number of draws depends on the values, so no kernel is generated: an extern
  launch (``_unique_zipfian_draw``) draws them with a torch generator seeded from the
  step's seed and its stream, the same numbers on every target.
"""
from __future__ import annotations

import math

import torch

from ..ir.philox import stream_seed
from .nn import seed_entry
from .random import _draw
from .random_more import _streams
from .registry import (Attr, Decompose, Extern, OpDef, ShapeError, choice, parse_bool,
                       parse_int, parse_optional_shape, register)

_MULTINOMIAL_DTYPE = choice("uint8", "int32", "float16", "float32", "float64")


def _multinomial_outputs(attrs):
    return ["output", "prob"] if attrs["get_prob"] else ["output"]


def _multinomial_shape(attrs, in_shapes):
    data = in_shapes[0]
    if data is None:
        return in_shapes, [None] * len(_multinomial_outputs(attrs))
    if len(data) == 0:
        raise ShapeError("_sample_multinomial: data needs a last axis of outcomes")
    extra = tuple(attrs["shape"] or ())
    if len(data) == 1:
        out = extra or (1,)
    else:
        out = tuple(data[:-1]) + extra
    return in_shapes, [out] * len(_multinomial_outputs(attrs))


def _multinomial_type(attrs, in_types):
    t = in_types[0]
    return in_types, [attrs["dtype"]] + ([t] if attrs["get_prob"] else [])


def _rows(b, ref, lead, k):
    """``ref`` of shape ``lead + (k,)`` seen as ``out + (k,)``: 1s for the draw dims."""
    return b.op("Reshape", ref, shape=tuple(lead) + (k,))


def _multinomial_build(b, n, is_train):
    data = n.inputs[0]
    k = data.shape[-1]
    out_shape = n.out_shapes[0]
    lead = (1,) * len(out_shape) if len(data.shape) == 1 else \
        tuple(data.shape[:-1]) + (1,) * (len(out_shape) - len(data.shape) + 1)
    cum = b.op("_np_cumsum", b.op("Cast", data, dtype="float64"), axis=len(data.shape) - 1)
    cum = _rows(b, b.op("Cast", cum, dtype="float32"), lead, k)
    u = b.op("Reshape", _draw(b, out_shape), shape=tuple(out_shape) + (1,))
    below = b.op("broadcast_lesser", cum, u)
    idx = b.op("_minimum_scalar", b.op("sum", below, axis=-1), scalar=float(k - 1))
    outs = [b.op("Cast", idx, dtype=n.attrs["dtype"])]
    if n.attrs["get_prob"]:
        picked = b.op("sum", b.op("one_hot", idx, depth=k) * _rows(b, data, lead, k), axis=-1)
        outs.append(b.op("log", picked))
    return outs


def _multinomial_gradient(b, n):
    data = n.inputs[0]
    if not n.attrs["get_prob"]:
        return [b.zeros_like(data)]
    k = data.shape[-1]
    out_shape = n.out_shapes[0]
    lead = (1,) * len(out_shape) if len(data.shape) == 1 else \
        tuple(data.shape[:-1]) + (1,) * (len(out_shape) - len(data.shape) + 1)
    hot = b.op("one_hot", b.op("Cast", n.outputs[0], dtype="float32"), depth=k)
    picked = b.op("sum", hot * _rows(b, data, lead, k), axis=-1, keepdims=True)
    dy = b.op("Reshape", n.ograds[1], shape=tuple(out_shape) + (1,))
    g = hot * (dy / picked)
    # the draw dims: all of out_shape for a single row, else those after the rows' dims
    first = 0 if len(data.shape) == 1 else len(data.shape) - 1
    draw_axes = tuple(range(first, len(out_shape)))
    g = b.op("sum", g, axis=draw_axes) if draw_axes else g
    return [b.op("Reshape", g, shape=tuple(data.shape))]


def _multinomial_ref(attrs, ins, is_train):
    data = ins[0].double()
    rows = data.reshape(-1, data.shape[-1])
    out_shape = _multinomial_shape(attrs, [tuple(data.shape)])[1][0]
    per_row = max(1, int(torch.tensor(out_shape).prod()) // rows.shape[0])
    idx = torch.multinomial(rows, per_row, replacement=True)
    probs = torch.gather(rows, 1, idx)
    outs = [idx.reshape(out_shape).to(getattr(torch, attrs["dtype"]))]
    if attrs["get_prob"]:
        outs.append(torch.log(probs).reshape(out_shape).to(ins[0].dtype))
    return outs


register(OpDef(
    name="_sample_multinomial", aliases=("sample_multinomial",), pattern="composite",
    lowering=Decompose(_multinomial_build), needs_random=True,
    attrs=[Attr("shape", parse_optional_shape, ()), Attr("get_prob", parse_bool, False),
           Attr("dtype", _MULTINOMIAL_DTYPE, "int32")],
    outputs=_multinomial_outputs, infer_shape=_multinomial_shape,
    infer_type=_multinomial_type, reference=_multinomial_ref,
    gradient=_multinomial_gradient,
    doc="Outcomes drawn from the categorical distributions in data's last axis, `shape` "
        "per row (one where empty); with get_prob also their log probabilities, whose "
        "gradient reaches data."))


def _shuffle_build(b, n, is_train):
    data = n.inputs[0]
    rows = data.shape[0]
    order = b.op("argsort", _draw(b, (rows,)), axis=0)
    return [b.op("take", data, order, axis=0)]


def _shuffle_ref(attrs, ins, is_train):
    return [ins[0][torch.randperm(ins[0].shape[0])]]


def _shuffle_shape(attrs, in_shapes):
    if in_shapes[0] is not None and len(in_shapes[0]) == 0:
        raise ShapeError("_shuffle: data needs a first axis to shuffle")
    return in_shapes, [in_shapes[0]]


register(OpDef(
    name="_shuffle", aliases=("shuffle",), pattern="composite",
    lowering=Decompose(_shuffle_build), needs_random=True,
    infer_shape=_shuffle_shape, reference=_shuffle_ref,
    doc="data with its rows (first axis) in a random order, new each forward; "
        "no gradient (as mxnet)."))


# -- _sample_unique_zipfian ------------------------------------------------------------

def _zipfian_shape(attrs, in_shapes):
    shape = tuple(attrs["shape"] or ())
    if len(shape) != 2:
        raise ShapeError(f"_sample_unique_zipfian: shape must be (batch_size, num_sampled), "
                         f"got {shape}")
    if attrs["range_max"] < 1:
        raise ShapeError(f"_sample_unique_zipfian: range_max must be positive, got "
                         f"{attrs['range_max']}")
    if shape[1] > attrs["range_max"]:
        raise ShapeError(f"_sample_unique_zipfian: num_sampled ({shape[1]}) cannot exceed "
                         f"the number of classes, range_max ({attrs['range_max']})")
    return in_shapes, [shape, (shape[0],)]


def _unique_zipfian(range_max, shape, generator=None):
    """Classes ``(rows, num_sampled)`` and draw counts ``(rows,)``, both int64."""
    rows, num_sampled = shape
    log_range = math.log(range_max)
    classes = torch.empty(shape, dtype=torch.int64)
    trials = torch.empty((rows,), dtype=torch.int64)
    for r in range(rows):
        drawn, block = torch.empty(0, dtype=torch.int64), max(2 * num_sampled, 64)
        while True:
            u = torch.rand(block, dtype=torch.float64, generator=generator)
            # lround: halves away from zero (the values are positive)
            drawn = torch.cat([drawn, torch.floor(torch.exp(u * log_range) + 0.5).long() - 1])
            distinct, inverse = torch.unique(drawn, return_inverse=True)
            if distinct.numel() >= num_sampled:
                break
            block *= 2
        first = torch.full((distinct.numel(),), drawn.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(drawn.numel()), reduce="amin")
        kept = torch.sort(first).values[:num_sampled]
        classes[r] = drawn[kept]
        trials[r] = kept[-1] + 1 if num_sampled else 0
    return [classes, trials]


def _zipfian_draw(attrs, ins):
    generator = torch.Generator()
    generator.manual_seed(stream_seed(ins[0], attrs["stream"]))
    return _unique_zipfian(attrs["range_max"], tuple(attrs["shape"]), generator)


def _zipfian_build(b, n, is_train):
    return b.op("_unique_zipfian_draw", b.ref(seed_entry(b.graph)),
                range_max=n.attrs["range_max"], shape=tuple(n.attrs["shape"]),
                stream=_streams(b, 1))


_ZIPFIAN_ATTRS = [Attr("range_max", parse_int), Attr("shape", parse_optional_shape, ())]
_INT64 = lambda attrs, in_types: (list(in_types), ["int64", "int64"])  # noqa: E731

register(OpDef(
    name="_sample_unique_zipfian", pattern="composite", lowering=Decompose(_zipfian_build),
    needs_random=True, arguments=(), attrs=_ZIPFIAN_ATTRS,
    outputs=lambda attrs: ["output0", "output1"], infer_shape=_zipfian_shape,
    infer_type=_INT64,
    reference=lambda attrs, ins, is_train: _unique_zipfian(attrs["range_max"],
                                                           tuple(attrs["shape"])),
    gradient=lambda b, n: [],
    doc="Per row of shape (batch_size, num_sampled): num_sampled distinct classes of "
        "[0, range_max), drawn nearly log-uniformly without replacement, and the number "
        "of draws it took (int64 both); new each forward."))
register(OpDef(
    name="_unique_zipfian_draw", pattern="opaque", lowering=Extern(_zipfian_draw),
    arguments=("seed",), attrs=_ZIPFIAN_ATTRS + [Attr("stream", parse_int)],
    outputs=lambda attrs: ["output0", "output1"], infer_shape=_zipfian_shape,
    infer_type=_INT64, reference=lambda attrs, ins, is_train: _zipfian_draw(attrs, ins),
    gradient=lambda b, n: [],
    doc="_sample_unique_zipfian's draws from the step's seed and a stream of their own."))
