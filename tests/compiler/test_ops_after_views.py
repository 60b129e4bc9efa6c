"""Every single-data-input operator of the operator table, read through a view.

A view (reshape, Flatten, expand_dims, transpose, slice_axis, slice) writes nothing:
the operator after it reads its input's buffer with other strides, and an
operator that is itself a view (identity, BlockGrad, Flatten, MakeLoss, the
regression outputs' forward) as a graph head must still get a kernel that
writes the output array. A head of ``identity(reshape(x))`` once returned
zeros while its gradient was right, so this sweep checks forward, gradients,
finite differences and inference for every row of ``test_ops_compiled.OPS``
(and of every ``ROWS`` table of another ``test_ops_*.py``) whose only
differentiable input is ``x``, placed after each view:

* as the graph head: ``op(view(x))``;
* as an inner node: ``op(view(x)) * 2`` (the product is the head).

The view's own reference is the same torch view, so the oracle of every case
is the row's torch reference (or mxnet's gradient formula for loss heads)
composed with it. Both cpu targets run every case.
"""
from __future__ import annotations

import glob
import importlib
import math
import os
from dataclasses import replace

import pytest
import torch

from compiler import symbol as sym
from tests.compiler.test_ops_compiled import OPS, Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _tables():
    """``OPS`` of test_ops_compiled.py, and ``ROWS`` of every other
    ``tests/compiler/test_ops_*.py`` that keeps its operator family's table there."""
    rows = list(OPS)
    folder = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(folder, "test_ops_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if name not in ("test_ops_compiled", "test_ops_after_views"):
            rows += getattr(importlib.import_module(f"tests.compiler.{name}"), "ROWS", [])
    return rows


def _rows():
    """Rows with one data input ``x`` (others labels bound with grad_req null)."""
    return [op for op in _tables()
            if op.inputs[0] == "x" and set(op.inputs[1:]) <= set(op.nograd)
            and not op.aux and not op.needs_shapes]


# Each view: (applies(shape), input shape for which view(input) has ``shape``,
# symbol view, torch view). ``shape`` is the shape the row's operator reads.
def _reshape():
    return (lambda s: True, lambda s: (math.prod(s),),
            lambda x, s: sym.reshape(x, shape=s), lambda t, s: t.reshape(s))


def _flatten():
    # (a, 1, b) flattens to (a, b)
    return (lambda s: len(s) == 2, lambda s: (s[0], 1, s[1]),
            lambda x, s: sym.Flatten(x), lambda t, s: t.reshape(s))


def _expand_dims():
    # the last size-1 dim of the operator's input comes from expand_dims
    def axis(s):
        return max(i for i, d in enumerate(s) if d == 1)
    # (not from a 0-d input: a (1,) operand stays as it is, mxnet 1.x has no 0-d arrays)
    return (lambda s: 1 in s and len(s) > 1,
            lambda s: tuple(d for i, d in enumerate(s) if i != axis(s)),
            lambda x, s: sym.expand_dims(x, axis=axis(s)),
            lambda t, s: t.unsqueeze(axis(s)))


def _transpose():
    # reversed axes: a strided read of every element
    return (lambda s: len(s) >= 2, lambda s: tuple(reversed(s)),
            lambda x, s: sym.transpose(x), lambda t, s: t.permute(*reversed(range(t.dim()))))


def _slice_axis():
    # rows 1 .. n of an input with one more row above and below
    return (lambda s: True, lambda s: (s[0] + 2,) + tuple(s[1:]),
            lambda x, s: sym.slice_axis(x, axis=0, begin=1, end=s[0] + 1),
            lambda t, s: t[1:s[0] + 1])


def _slice():
    # rows 1 .. n as slice's begin/end tuples, and every other column (step 2) of an
    # input twice as wide: a strided read along the last axes too
    def pre(s):
        return (s[0] + 2,) + ((2 * s[1],) + tuple(s[2:]) if len(s) > 1 else ())

    def sym_view(x, s):
        if len(s) == 1:
            return sym.slice(x, begin=(1,), end=(s[0] + 1,))
        return sym.slice(x, begin=(1, None), end=(s[0] + 1, None), step=(1, 2))

    def torch_view(t, s):
        return t[1:s[0] + 1] if len(s) == 1 else t[1:s[0] + 1, ::2]
    return (lambda s: len(s) >= 1, pre, sym_view, torch_view)


VIEWS = {"reshape": _reshape(), "Flatten": _flatten(), "expand_dims": _expand_dims(),
         "transpose": _transpose(), "slice_axis": _slice_axis(), "slice": _slice()}


def _through_view(op: Op, view: str, inner: bool):
    """``op`` with its ``x`` read through ``view``; returns (row, shapes) or None
    when no shape of the row can be produced by that view."""
    applies, pre_shape, sym_view, torch_view = VIEWS[view]
    shapes = next((s for s in op.shapes if applies(tuple(s[0]))), None)
    if shapes is None:
        return None
    s = tuple(shapes[0])
    new_shapes = [pre_shape(s)] + list(shapes[1:])
    scale = 2.0 if inner else 1.0

    def build(x, *rest):
        out = op.build(sym_view(x, s), *rest)
        if not inner:
            return out
        n = len(out.list_outputs())
        return out * scale if n == 1 else sym.Group([out[i] * scale for i in range(n)])

    def torch_fn(x, *rest):
        outs = op.torch(torch_view(x, s), *rest)
        if isinstance(outs, (list, tuple)):
            return [o * scale for o in outs] if inner else outs
        return outs * scale if inner else outs

    mx_grad = objective = None
    if op.mx_grad is not None:
        # a loss head's gradient ignores the gradient arriving at its output, so it is
        # mxnet's formula at the viewed input, carried back through the view
        def mx_grad(x, *rest):
            xv = x.detach().requires_grad_(True)
            g = op.mx_grad(torch_view(xv, s), *rest)["x"]
            (grad,) = torch.autograd.grad((torch_view(xv, s) * g.detach()).sum(), [xv])
            return {"x": grad}
        if op.objective is not None and not inner:
            def objective(x, *rest):
                return op.objective(torch_view(x, s), *rest)
    row = replace(op, name=f"{op.name}@{view}{'-inner' if inner else ''}", build=build,
                  torch=torch_fn, shapes=[new_shapes], mx_grad=mx_grad, objective=objective,
                  infer_torch=None, loss_inside=inner and mx_grad is not None)
    return row, new_shapes


def _params():
    out = []
    for op in _rows():
        for view in VIEWS:
            for inner in (False, True):
                case = _through_view(op, view, inner)
                if case is not None:
                    out.append(pytest.param(*case, id=case[0].name))
    return out


PARAMS = _params()


def test_every_row_is_swept_after_every_view_that_can_produce_its_shape():
    """The sweep is not empty by accident: each row meets reshape, slice_axis, slice and
    (with a 2-D shape) transpose, as head and as inner node."""
    ids = {p.id for p in PARAMS}
    rows = _rows()
    assert len(rows) >= 130
    for op in rows:
        for view in ("reshape", "slice_axis", "slice"):
            assert f"{op.name}@{view}" in ids and f"{op.name}@{view}-inner" in ids
    assert sum("@Flatten" in i for i in ids) >= 200
    assert sum("@expand_dims" in i for i in ids) >= 100


@pytest.mark.parametrize("row,shapes", PARAMS)
def test_op_after_view(row, shapes, cpu_target):
    exe = check(row, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
