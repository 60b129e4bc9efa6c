"""Sequence operators (SequenceMask, SequenceLast, SequenceReverse) and the nn and loss
operators of compiler/ops/nn_more.py through the whole compile path on both cpu targets:
forward against an independent torch version (float64), every gradient against autograd
(or mxnet's formula for loss heads) and central finite differences (the operator table's
``check``), plus mxnet's argument lists, shapes, defaults and errors. Cases recorded
with mxnet 1.9.1 replay in tests/compiler/test_mxnet_fixtures_sequence_nn.py.

``ROWS`` is swept after views by tests/compiler/test_ops_after_views.py.
"""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


# -- independent torch versions: loops over the batch, each sequence sliced by hand ----------

def _lengths(length):
    """mxnet's static_cast<int>: truncation toward zero."""
    return [int(v) for v in torch.trunc(length.detach()).tolist()]


def _seq_mask(axis, value=0.0, shift=0.0):
    def f(x, length):
        xs = x if axis == 0 else x.transpose(0, 1)          # (T, batch, ...)
        cols = []
        for b, n in enumerate(_lengths(length + shift)):
            n = min(max(n, 0), xs.shape[0])
            col = xs[:, b]
            pad = torch.full_like(col[n:], value)
            cols.append(torch.cat([col[:n], pad]))
        out = torch.stack(cols, dim=1)
        return out if axis == 0 else out.transpose(0, 1)
    return f


def _seq_last(axis, shift=1.0):
    def f(x, length):
        xs = x if axis == 0 else x.transpose(0, 1)
        return torch.stack([xs[n - 1, b] for b, n in enumerate(_lengths(length + shift))])
    return f


def _seq_reverse(shift=0.0):
    def f(x, length):
        cols = []
        for b, n in enumerate(_lengths(length + shift)):
            col = x[:, b]
            cols.append(torch.cat([col[:n].flip(0), col[n:]]))
        return torch.stack(cols, dim=1)
    return f


# shapes: (data, sequence_length); max_len >= 3 everywhere (lengths 1..3 are valid for
# SequenceLast), size-1 batch and rest dims, non-power-of-two dims
SEQ0 = [[(4, 3, 2), (3,)], [(3, 1, 5), (1,)], [(5, 2), (2,)], [(3, 2, 1, 3), (2,)]]
SEQ1 = [[(3, 4, 2), (3,)], [(1, 3, 5), (1,)], [(2, 5), (2,)], [(2, 3, 3, 1), (2,)]]
NOLEN = [[(3, 5)], [(1, 7)], [(2, 1, 3)], [(4, 3, 2, 5)]]


def _len_row(name, build, torch_fn, shapes, gen):
    return Op(name, build, torch_fn, shapes, inputs=("x", "l"), gen={"l": gen},
              nograd=("l",))


ROWS = [
    # -- SequenceMask
    Op("SequenceMask_nolen", lambda x: sym.SequenceMask(x), lambda x: x, NOLEN),
    _len_row("SequenceMask_axis0",
             lambda x, l: sym.SequenceMask(x, l, use_sequence_length=True),
             _seq_mask(0), SEQ0, "index:5"),
    _len_row("SequenceMask_axis1_value",
             lambda x, l: sym.SequenceMask(x, l, use_sequence_length=True, axis=1,
                                           value=-2.5),
             _seq_mask(1, -2.5), SEQ1, "index:5"),
    # fractional and negative lengths truncate toward zero: -1.5 -> -1, -0.5 -> 0
    _len_row("SequenceMask_fractional",
             lambda x, l: sym.SequenceMask(x, l - 1.5, use_sequence_length=True, value=7.0),
             _seq_mask(0, 7.0, -1.5), SEQ0, "index:5"),
    # -- SequenceLast
    Op("SequenceLast_nolen", lambda x: sym.SequenceLast(x), lambda x: x[-1], NOLEN),
    Op("SequenceLast_nolen_axis1", lambda x: sym.SequenceLast(x, axis=1),
       lambda x: x[:, -1], NOLEN),
    _len_row("SequenceLast_axis0",
             lambda x, l: sym.SequenceLast(x, l + 1, use_sequence_length=True),
             _seq_last(0), SEQ0, "index:3"),
    _len_row("SequenceLast_axis1_fractional",
             lambda x, l: sym.SequenceLast(x, l + 1.75, use_sequence_length=True, axis=1),
             _seq_last(1, 1.75), SEQ1, "index:3"),
    # -- SequenceReverse
    Op("SequenceReverse_nolen", lambda x: sym.SequenceReverse(x), lambda x: x.flip(0), NOLEN),
    _len_row("SequenceReverse_len",
             lambda x, l: sym.SequenceReverse(x, l, use_sequence_length=True),
             _seq_reverse(), SEQ0, "index:4"),
    _len_row("SequenceReverse_fractional",
             lambda x, l: sym.SequenceReverse(x, l + 0.5, use_sequence_length=True),
             _seq_reverse(0.5), SEQ0, "index:3"),
]


def _params():
    return [pytest.param(op, shapes, id=f"{op.name}-{i}")
            for op in ROWS for i, shapes in enumerate(op.shapes)]


def test_rows_are_well_formed():
    """Unique names; at least three shapes with a size-1 and a non-power-of-two dim."""
    names = [op.name for op in ROWS]
    assert len(names) == len(set(names))
    for op in ROWS:
        dims = [d for shapes in op.shapes for s in shapes for d in s]
        assert len(op.shapes) >= 3 and 1 in dims and any(d & (d - 1) for d in dims), op.name


@pytest.mark.parametrize("op,shapes", _params())
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# -- mxnet's signatures, shapes and errors --------------------------------------------------

def test_sequence_arguments_follow_use_sequence_length():
    x, l = sym.Variable("data"), sym.Variable("len")
    for op in ("SequenceMask", "SequenceLast", "SequenceReverse"):
        f = getattr(sym, op)
        assert f(x).list_arguments() == ["data"]
        s = f(x, name="s", use_sequence_length=True)
        assert s.list_arguments() == ["data", "s_sequence_length"]
        assert f(x, l, use_sequence_length=True).list_arguments() == ["data", "len"]
        assert s.list_outputs() == ["s_output"]


def test_sequence_shapes():
    x = sym.Variable("x")
    s = sym.SequenceLast(x, use_sequence_length=True, name="last")
    args, outs, _ = s.infer_shape(x=(5, 3, 4, 2))
    assert args == [(5, 3, 4, 2), (3,)] and outs == [(3, 4, 2)]
    args, outs, _ = sym.SequenceLast(x, axis=1, use_sequence_length=True).infer_shape(
        x=(3, 5, 4))
    assert args == [(3, 5, 4), (3,)] and outs == [(3, 4)]
    args, outs, _ = sym.SequenceMask(x, axis=1, use_sequence_length=True).infer_shape(
        x=(3, 5))
    assert args == [(3, 5), (3,)] and outs == [(3, 5)]
    assert sym.SequenceLast(x).infer_shape(x=(3, 2))[1] == [(2,)]


@pytest.mark.parametrize("build,shapes,match", [
    (lambda x: sym.SequenceMask(x, axis=2), {"x": (3, 2, 4)}, "axis must be 0 or 1"),
    (lambda x: sym.SequenceLast(x, axis=-1), {"x": (3, 2, 4)}, "axis must be 0 or 1"),
    (lambda x: sym.SequenceReverse(x, axis=1), {"x": (3, 2, 4)}, "axis must be 0"),
    (lambda x: sym.SequenceMask(x), {"x": (3,)}, "rank 2 or greater"),
    (lambda x: sym.SequenceMask(x, sym.Variable("l"), use_sequence_length=True),
     {"x": (3, 2, 4), "l": (3,)}, "sequence_length"),
])
def test_sequence_shape_errors(build, shapes, match):
    with pytest.raises(MXNetError, match=match):
        build(sym.Variable("x")).infer_shape(**shapes)


def test_sequence_attributes_are_mxnets():
    with pytest.raises(MXNetError, match="unknown attribute 'value'"):
        sym.SequenceLast(sym.Variable("x"), value=1.0)
    s = sym.SequenceMask(sym.Variable("x"), use_sequence_length=True, value=-1, name="m")
    assert s.attr_dict()["m"] == {"use_sequence_length": "True", "value": "-1"}
