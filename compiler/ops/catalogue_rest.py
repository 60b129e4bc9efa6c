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
from .registry import Attr, Decompose, OpDef, ShapeError, parse_count, register

_REAL = ("float16", "float32", "float64", "bfloat16")


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
    variadic="num_arrays", key_var_num_args="num_arrays", mutates_inputs=True,
    doc="mxnet's reset_arrays: sets every input to zero in place; no outputs."))
