"""Rules of the reductions (compiler/ops/reduce.py).

Expected shapes and tie-breaking gradients marked "mxnet 1.9.1" were produced
by running mxnet 1.9.1 on the same inputs and hard-coded here.
"""
import numpy as np
import pytest
import torch

from compiler.frontend.graph import _raw
from compiler.ir.expr import ops
from compiler.ops import get_op
from compiler.ops.registry import Reduction, ShapeError
from compiler.frontend.reference import check_gradient

OPS = ["sum", "mean", "max", "min"]
NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def attrs_of(name, **attrs):
    return get_op(name).parse_attrs({k: _raw(v) for k, v in attrs.items()})


def infer(name, shape, **attrs):
    return get_op(name).infer_shape(attrs_of(name, **attrs), [shape])[1][0]


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64).float()


# (input shape, attrs) -> output shape; identical for sum, mean, max and min in mxnet 1.9.1
SHAPE_TABLE = [
    ((2, 3, 5), {}, (1,)),
    ((2, 3, 5), {"axis": 1}, (2, 5)),
    ((2, 3, 5), {"axis": (0, 2), "keepdims": True}, (1, 3, 1)),
    ((2, 3, 5), {"axis": -1, "keepdims": True}, (2, 3, 1)),
    ((2, 3, 5), {"axis": 1, "exclude": True}, (3,)),
    ((1, 7), {"axis": ()}, (1,)),
    ((2, 3, 5), {"axis": (), "exclude": True}, (1,)),
    ((7,), {"axis": 0}, (1,)),
    ((2, 3, 5), {"keepdims": True}, (1, 1, 1)),
    ((1, 7), {"axis": None, "exclude": True}, (1,)),
    ((2, 7), {"axis": (0, 1), "exclude": True}, (2, 7)),
    ((2, 7), {"axis": (), "keepdims": True}, (1, 1)),
    ((2, 7), {"axis": (-1, 0)}, (1,)),
    ((3, 1, 6), {"axis": 1}, (3, 6)),
]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,attrs,expected", SHAPE_TABLE)
def test_infer_shape_and_reference(name, shape, attrs, expected):
    assert infer(name, shape, **attrs) == expected
    x = rand(*shape)
    op = get_op(name)
    y, = op.reference(attrs_of(name, **attrs), [x], False)
    assert tuple(y.shape) == expected
    # numpy semantics with mxnet's axis rules
    parsed = attrs_of(name, **attrs)
    from compiler.ops.reduce import reduce_axes
    axes = reduce_axes(parsed, shape)
    want = NUMPY[name](x.numpy().astype(np.float64), axis=axes, keepdims=True) if axes else \
        x.numpy()
    np.testing.assert_allclose(y.numpy(), np.reshape(want, expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", OPS)
def test_unknown_input_and_aliases(name):
    assert infer(name, None, axis=1) is None
    alias = {"sum": "sum_axis", "max": "max_axis", "min": "min_axis"}.get(name)
    if alias:
        assert get_op(alias) is get_op(name)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,attrs,match", [  # errors in mxnet 1.9.1 as well
    ((2, 3, 5), {"axis": 3}, r"axis=3 is out of range .*\(2, 3, 5\)"),
    ((2, 7), {"axis": -3}, "axis=-3 is out of range"),
    ((2, 3, 5), {"axis": (0, 0)}, "duplicates"),
    ((2, 7), {"axis": (0, -2)}, "duplicates"),
])
def test_errors(name, shape, attrs, match):
    with pytest.raises(ShapeError, match=match):
        infer(name, shape, **attrs)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 5), {}), ((2, 3, 5), {"axis": (0, 2)}), ((2, 3, 5), {"axis": 1, "exclude": True}),
    ((3, 1, 7), {"axis": -1, "keepdims": True}), ((2, 7), {"axis": (0, 1), "exclude": True}),
])
def test_lowering(name, shape, attrs):
    """Apply the Reduction's kind / axes / scale with torch and compare."""
    low = get_op(name).lowering
    assert isinstance(low, Reduction)
    parsed = attrs_of(name, **attrs)
    x = rand(*shape)
    axes = low.axes(parsed, shape)
    assert tuple(axes) == tuple(sorted(axes))
    y = x
    if axes:
        if low.kind == "sum":
            y = x.sum(dim=tuple(axes), keepdim=True)
        else:
            y = (x.amax if low.kind == "max" else x.amin)(dim=tuple(axes), keepdim=True)
    y = y * low.scale(parsed, shape)
    expected, = get_op(name).reference(parsed, [x], False)
    torch.testing.assert_close(y.reshape(expected.shape), expected, rtol=1e-5, atol=1e-6)
    assert low.kind == ("sum" if name == "mean" else name)


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 5), {}), ((2, 3, 5), {"axis": 1}), ((2, 3, 5), {"axis": (0, 2), "keepdims": True}),
    ((2, 3, 5), {"axis": 1, "exclude": True}), ((7,), {"axis": 0}), ((3, 1, 6), {"axis": 1}),
    ((2, 7), {"axis": (0, 1), "exclude": True}),
])
def test_gradient(name, shape, attrs):
    x = rand(*shape)
    graph_grads, auto = check_gradient(name, [x], attrs)
    assert tuple(graph_grads[0].shape) == shape
    torch.testing.assert_close(graph_grads[0], auto[0], rtol=1e-5, atol=1e-6)


def _graph_grad(name, x, attrs, dy):
    from compiler.frontend.graph import Builder, Graph, infer_node
    from compiler.ops.registry import NodeView
    from compiler.frontend.reference import evaluate
    parsed = attrs_of(name, **attrs)
    g = Graph()
    v = g.add_node("null", "x", role="arg")
    g.node(v)["shapes"] = [tuple(x.shape)]
    n = g.add_node(name, "op", [(v, 0)], parsed, {})
    infer_node(g, n)
    h = g.add_node("null", "dy", role="head_grad", phase="bwd")
    g.node(h)["shapes"] = [tuple(dy.shape)]
    b = Builder(g, "bwd", "grad")
    view = NodeView("op", parsed, [b.ref((v, 0))], [b.ref((n, 0))], [b.ref((h, 0))],
                    [tuple(x.shape)], g.node(n)["shapes"])
    dx, = get_op(name).gradient(b, view)
    return evaluate(g, {"x": x, "dy": dy}, True, [dx.entry])[dx.entry]


def test_ties_all_get_gradient():
    x = torch.tensor([[1., 3., 3.], [2., 2., 0.]])
    # mxnet 1.9.1: max(axis=1) backward with ones -> [[0,1,1],[1,1,0]]
    got = _graph_grad("max", x, {"axis": 1}, torch.ones(2))
    assert torch.equal(got, torch.tensor([[0., 1., 1.], [1., 1., 0.]]))
    # mxnet 1.9.1: min() backward with ones -> [[0,0,0],[0,0,1]]
    got = _graph_grad("min", x, {}, torch.ones(1))
    assert torch.equal(got, torch.tensor([[0., 0., 0.], [0., 0., 1.]]))


def test_backward_reduce_select_rules():
    op = get_op("_backward_reduce_select")
    attrs = op.parse_attrs({})
    assert op.infer_shape(attrs, [(2, 1), (2, 3), (2, 1)])[1] == [(2, 3)]
    assert op.infer_shape(attrs, [None, None, None])[1] == [None]
    with pytest.raises(ShapeError, match="cannot be broadcast"):
        op.infer_shape(attrs, [(2, 2), (2, 3), (2, 1)])
    with pytest.raises(ShapeError, match="rank"):
        op.infer_shape(attrs, [(2,), (2, 3), (2, 1)])
    dy, x, y = torch.tensor([[5.], [7.]]), torch.tensor([[1., 4., 4.], [0., 2., 1.]]), \
        torch.tensor([[4.], [2.]])
    out, = op.reference(attrs, [dy, x, y], False)
    assert torch.equal(out, torch.tensor([[0., 5., 5.], [0., 7., 0.]]))
    e = op.lowering.expr(attrs, ops.value("dy"), ops.value("x"), ops.value("y"))
    assert repr(e) == "where(eq(x, y), dy, const(0.0))"
