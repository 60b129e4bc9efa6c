"""The last of mxnet 1.9.1's catalogue: ``reset_arrays`` and
``_contrib_group_adagrad_update``.

``reset_arrays(*data, num_arrays)`` zeroes its inputs in place and has no outputs
(mxnet's ``FMutateInputs`` on every input, ``set_num_outputs(0)``): its inputs are
the symbol's auxiliary states ``array_<i>``, and its ``Decompose`` returns their
new values (zeros), which the executor writes back on every forward
(``OpDef.mutates_inputs``). mxnet 1.9.1 computes it for real types only; an
integer input is refused.

``group_adagrad_update(weight, grad, history)`` is Group AdaGrad's step, one
learning rate per row: ``history += mean(g * g over the row)`` and
``weight - lr * g / sqrt(history + epsilon)``, ``g`` the rescaled, clipped
gradient; ``history`` (mutated, an auxiliary state) holds one value per row.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .registry import (Attr, Decompose, OpDef, ShapeError, merge_shape, parse_count,
                       parse_float, register)

_REAL = ("float16", "float32", "float64")      # MSHADOW_REAL_TYPE_SWITCH


def _arrays(attrs):
    return [f"array_{i}" for i in range(attrs["num_arrays"])]


def _reset_shape(attrs, in_shapes):
    if len(in_shapes) != attrs["num_arrays"]:
        raise ShapeError(f"reset_arrays: num_arrays={attrs['num_arrays']} but "
                         f"{len(in_shapes)} inputs were given")
    return list(in_shapes), []


def _reset_type(attrs, in_types):
    bad = [(i, t) for i, t in enumerate(in_types) if t is not None and t not in _REAL]
    if bad:
        i, t = bad[0]
        raise MXNetError(f"reset_arrays: input array_{i} is {t}; this operation only "
                         f"supports floating point types")
    return list(in_types), []


def _reset_build(b, n, is_train):
    return [b.op("zeros_like", x) for x in n.inputs]


register(OpDef(
    name="reset_arrays", pattern="composite", lowering=Decompose(_reset_build),
    infer_shape=_reset_shape, infer_type=_reset_type,
    reference=lambda attrs, ins, is_train: [torch.zeros_like(x) for x in ins],
    arguments=(), aux=_arrays, outputs=(), attrs=(Attr("num_arrays", parse_count),),
    variadic="num_arrays", mutates_inputs=True,
    doc="mxnet's reset_arrays: sets every input to zero in place; no outputs."))


# ------------------------------------------------------------------ group adagrad

def _rows_shape(shape):
    return (shape[0],) + (1,) * (len(shape) - 1)


def _group_adagrad_shape(attrs, in_shapes):
    w, g, h = in_shapes
    known = merge_shape(w, g, "_contrib_group_adagrad_update: weight and grad")
    if known is not None and len(known) < 1:
        raise ShapeError(f"_contrib_group_adagrad_update: weight must have a row axis, "
                         f"got {tuple(known)}")
    if known is not None and h is not None:
        size = 1
        for d in h:
            size *= d
        if len(h) < 1 or h[0] != known[0] or size != known[0]:
            raise ShapeError(f"_contrib_group_adagrad_update: history must hold one value "
                             f"per row of weight {tuple(known)}: shape ({known[0]},) or "
                             f"({known[0]}, 1), got {tuple(h)}")
    return [known, known, h], [known]


def _clipped(b, g, attrs):
    g = b.op("_mul_scalar", g, scalar=attrs["rescale_grad"])
    c = attrs["clip_gradient"]
    return g if c < 0 else b.op("clip", g, a_min=-c, a_max=c)


def _group_adagrad_build(b, n, is_train):
    w, g, h = n.inputs
    wshape, hshape = n.in_shapes[0], n.in_shapes[2]
    g = _clipped(b, g, n.attrs)
    axes = tuple(range(1, len(wshape)))
    ssq = b.op("mean", b.op("square", g), axis=axes, keepdims=True) if axes else \
        b.op("square", g)
    hist = b.op("elemwise_add", h, b.op("Reshape", ssq, shape=hshape))
    den = b.op("sqrt", b.op("_plus_scalar", b.op("Reshape", hist, shape=_rows_shape(wshape)),
                            scalar=n.attrs["epsilon"]))
    step = b.op("broadcast_div", b.op("_mul_scalar", g, scalar=n.attrs["lr"]), den)
    return [b.op("elemwise_sub", w, step), hist]


def _group_adagrad_ref(attrs, ins, is_train):
    w, g, h = (x.double() for x in ins)
    g = g * attrs["rescale_grad"]
    if attrs["clip_gradient"] >= 0:
        g = g.clamp(-attrs["clip_gradient"], attrs["clip_gradient"])
    rows = g.reshape(g.shape[0], -1)
    hist = h + rows.square().mean(1).reshape(h.shape)
    den = (hist.reshape(_rows_shape(tuple(w.shape))) + attrs["epsilon"]).sqrt()
    out = w - attrs["lr"] * g / den
    return [out.to(ins[0].dtype), hist.to(ins[2].dtype)]


register(OpDef(
    name="_contrib_group_adagrad_update", pattern="composite",
    lowering=Decompose(_group_adagrad_build), infer_shape=_group_adagrad_shape,
    reference=_group_adagrad_ref, arguments=("weight", "grad"), aux=("history",),
    attrs=(Attr("lr", parse_float), Attr("rescale_grad", parse_float, 1.0),
           Attr("clip_gradient", parse_float, -1.0), Attr("epsilon", parse_float, 1e-5)),
    mutates_inputs=True, lazy_rows=True,
    doc="mxnet's contrib.group_adagrad_update: AdaGrad with one history value per row; "
        "writes history in place."))
