"""The operators of ``compiler/ops/indexing_more.py`` (``gather_nd``, ``scatter_nd``,
``diag``, ``argmax_channel``, ``shape_array``, ``size_array``) through the whole
compile path, on both cpu targets: forward and gradients against torch in float64,
finite differences, inference (``check`` of test_ops_compiled.py). ``ROWS`` is swept
after every view by test_ops_after_views.py; mxnet's own numbers are replayed by
test_mxnet_fixtures_indexing_more.py; shape errors are checked at the end.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from module_api import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _rows_of(i, shape):
    """Row numbers of the index columns ``i`` (M, Y...) into ``shape``, negative
    indices counted from the end (mxnet's)."""
    j = i.detach().long()
    rows = torch.zeros(i.shape[1:], dtype=torch.long)
    for k in range(i.shape[0]):
        rows = rows * shape[k] + torch.where(j[k] < 0, j[k] + shape[k], j[k])
    return rows.reshape(-1)


def _gather_nd(x, i):
    m = i.shape[0]
    rest = tuple(x.shape[m:])
    return x.reshape((-1,) + rest)[_rows_of(i, x.shape)].reshape(tuple(i.shape[1:]) + rest)


def _scatter_target(shapes):
    """The ``shape`` attribute of a scatter_nd row: 4 along each addressed dim."""
    x, i = shapes
    return (4,) * i[0] + tuple(x[len(i) - 1:])


def _scatter_nd(x, i):
    """mxnet's forward (the last of repeated indices wins) with mxnet's gradient
    (gather_nd of the head gradient: every repeated position gets it)."""
    shape = _scatter_target([tuple(x.shape), tuple(i.shape)])
    rest = tuple(shape[i.shape[0]:])
    rows = _rows_of(i, shape)
    flat = x.reshape((-1,) + rest)
    out = torch.zeros((4 ** i.shape[0],) + rest, dtype=x.dtype)
    last = out.detach().clone()
    for p in range(rows.numel()):
        last[rows[p]] = flat[p].detach()
    summed = out.index_add(0, rows, flat)
    return (last + summed - summed.detach()).reshape(shape)


def _argmax_channel(x):
    # the positions, with a zero gradient (mxnet's) through the 0 * x term
    return torch.argmax(x, 1).double() + 0 * x.sum(1)


# indices from "index:3" minus 1: -1, 0 or 1, valid for every addressed dim of 2 or more
GATHER = [[(3, 5), (1, 4)], [(2, 1, 3), (1, 7)], [(4, 3, 2), (2, 2, 3)],
          [(5, 2, 6), (3, 1, 5)]]
SCATTER = [[(6, 3), (1, 6)], [(1, 5), (2, 1)], [(2, 3, 7), (1, 2, 3)]]

ROWS = [
    # -- gather_nd: negative indices, repeats (the gradient accumulates), size-1 dims
    Op("gather_nd", lambda x, i: sym.gather_nd(x, i - 1), lambda x, i: _gather_nd(x, i - 1),
       GATHER, inputs=("x", "i"), gen={"i": "index:3"}, nograd=("i",)),
    Op("gather_nd_then_mul", lambda x, i: sym.exp(sym.gather_nd(x * 2, i)),
       lambda x, i: torch.exp(_gather_nd(x * 2, i)), GATHER, inputs=("x", "i"),
       gen={"i": "index:2"}, nograd=("i",)),
    # -- scatter_nd: repeats keep the last write; the gradient is gather_nd of dy, so
    #    finite differences (which see only the last write) do not apply
    Op("scatter_nd", lambda x, i, shapes: sym.scatter_nd(x, i - 1,
                                                         shape=_scatter_target(shapes)),
       lambda x, i: _scatter_nd(x, i - 1), SCATTER, inputs=("x", "i"),
       gen={"i": "index:5"}, nograd=("i",), needs_shapes=True, fd=False),
    # -- diag: 1-D -> matrix, 2-D -> diagonal, N-D over swapped / negative axes
    Op("diag_vector", lambda x: sym.diag(x), lambda x: torch.diag(x),
       [[(3,)], [(1,)], [(6,)]]),
    Op("diag_vector_k2", lambda x: sym.diag(x, k=2), lambda x: torch.diag(x, 2),
       [[(3,)], [(1,)], [(5,)]]),
    Op("diag_vector_km1", lambda x: sym.diag(x, k=-1), lambda x: torch.diag(x, -1),
       [[(3,)], [(1,)], [(4,)]]),
    Op("diag_matrix", lambda x: sym.diag(x), lambda x: torch.diag(x),
       [[(3, 5)], [(1, 7)], [(4, 4)]]),
    Op("diag_matrix_k1", lambda x: sym.diag(x, k=1), lambda x: torch.diag(x, 1),
       [[(3, 5)], [(1, 7)], [(6, 2)]]),
    Op("diag_matrix_km1", lambda x: sym.diag(x, k=-1), lambda x: torch.diag(x, -1),
       [[(3, 5)], [(2, 1)], [(5, 3)]]),
    Op("diag_nd", lambda x: sym.diag(x, k=1, axis1=-1, axis2=0),
       lambda x: torch.diagonal(x, 1, x.dim() - 1, 0),
       [[(3, 2, 4)], [(2, 1, 3)], [(4, 5, 6)]]),
    Op("diag_nd_inner", lambda x: sym.diag(x, axis1=1, axis2=2) * 3,
       lambda x: torch.diagonal(x, 0, 1, 2) * 3,
       [[(2, 3, 5)], [(3, 1, 7)], [(2, 4, 4, 3)]]),
    # -- ravel_multi_index / unravel_index: no range check (indices past shape[0] carry
    #    on), zero gradient (finite differences would step over the integer truncation)
    Op("ravel_multi_index", lambda x: sym.ravel_multi_index(x, shape=(4, 6)),
       lambda x: torch.trunc(x[0]) * 6 + torch.trunc(x[1]), [[(2, 5)], [(2, 1)], [(2, 3)]],
       gen={"x": "index:6"}, fd=False),
    Op("unravel_index", lambda x: sym.unravel_index(x, shape=(3, 1, 5)),
       lambda x: torch.stack([torch.trunc(x / 5), 0 * x,
                              torch.trunc(x) - 5 * torch.trunc(x / 5)]),
       [[(7,)], [(1,)], [(4,)]], gen={"x": "index:20"}, fd=False),
    # -- choose_element_0index: pick's other name (indices clipped into each row)
    Op("choose_element_0index", lambda x, i: sym.choose_element_0index(x, i),
       lambda x, i: x.gather(1, i.long().clamp(0, x.shape[1] - 1).unsqueeze(1)).squeeze(1),
       [[(3, 5), (3,)], [(1, 7), (1,)], [(4, 1), (4,)]], inputs=("x", "i"),
       gen={"i": "index:8"}, nograd=("i",)),
    # -- argmax_channel: argmax over axis 1, zero gradient
    Op("argmax_channel", lambda x: sym.argmax_channel(x), _argmax_channel,
       [[(3, 5)], [(2, 1, 3)], [(2, 7, 3, 1)]]),
]


def _params():
    return [pytest.param(op, shapes, id=f"{op.name}-{i}")
            for op in ROWS for i, shapes in enumerate(op.shapes)]


def test_rows_have_three_shapes_with_a_size_one_and_an_odd_dim():
    assert len({op.name for op in ROWS}) == len(ROWS)
    for op in ROWS:
        dims = [d for shapes in op.shapes for s in shapes for d in s]
        assert len(op.shapes) >= 3 and 1 in dims and any(d & (d - 1) for d in dims), op.name


@pytest.mark.parametrize("op,shapes", _params())
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


@pytest.mark.parametrize("shape", [(2, 3, 4), (1,), (7, 1, 5, 1)])
def test_shape_array_and_size_array_are_int64(shape, cpu_target):
    x = sym.Variable("x")
    s = sym.Group([sym.shape_array(x), sym.size_array(x * 2)])
    assert s.infer_type(x="float32")[1] == [np.int64, np.int64]
    exe = s.simple_bind(cpu(), grad_req="write", x=shape)
    exe.arg_dict["x"][:] = torch.randn(shape)
    shp, size = exe.forward(is_train=True)
    assert shp.asnumpy().dtype == np.int64 and size.asnumpy().dtype == np.int64
    assert shp.asnumpy().tolist() == list(shape)
    assert size.asnumpy().tolist() == [int(np.prod(shape))]
    exe.backward([torch.ones(len(shape)), torch.ones(1)])
    assert not exe.grad_dict["x"].asnumpy().any()          # no gradient flows


def test_scatter_nd_last_repeated_index_wins(cpu_target):
    x, i = sym.Variable("x"), sym.Variable("i")
    out = sym.scatter_nd(x, i, shape=(2, 3)).eval(
        x=np.array([1, 2, 3, 4], np.float32),
        i=np.array([[0, 1, 0, 1], [1, 1, 1, 2]], np.float32))[0]
    assert out.asnumpy().tolist() == [[0, 3, 0], [0, 2, 4]]


_x, _i = sym.Variable("x"), sym.Variable("i")


@pytest.mark.parametrize("s,shapes,words", [
    (sym.gather_nd(_x, _i), {"x": (3, 4), "i": (3,)}, "gather_nd: indices must have at least 2"),
    (sym.gather_nd(_x, _i), {"x": (3, 4), "i": (3, 2)}, "has only 2"),
    (sym.scatter_nd(_x, _i, shape=(3, 4)), {"x": (5, 4), "i": (1, 2)}, "it must be (2, 4)"),
    (sym.diag(_x, axis1=1, axis2=-1), {"x": (3, 4)}, "same axis 1"),
    (sym.diag(_x, k=4), {"x": (3, 4)}, "is empty"),
    (sym.diag(_x, axis2=3), {"x": (3, 4)}, "diag"),
    (sym.argmax_channel(_x), {"x": (5,)}, "argmax_channel: data of shape (5,) has no axis 1"),
    (sym.ravel_multi_index(_x, shape=(3, 4)), {"x": (3, 5)}, "must be (2, N)"),
    (sym.unravel_index(_x, shape=(3, 4)), {"x": (3, 5)}, "unravel_index: data of shape"),
])
def test_shape_errors_name_the_operator_and_the_shapes(s, shapes, words):
    with pytest.raises(MXNetError) as info:
        s.infer_shape(**shapes)
    assert words in str(info.value)


@pytest.mark.parametrize("data,bins,rng,counts,edges", [
    # mxnet 1.9.1's numbers: the right edge stays in the last bin, outliers in none
    ([0, 1, 2, 3, 4, 5, 5, 10, -1], 5, (0, 5), [1, 1, 1, 1, 3], [0, 1, 2, 3, 4, 5]),
    ([0.5, 1.5, 3, 5, 5.5, 1.49], [0, 1.5, 3, 5], None, [2, 1, 2], [0, 1.5, 3, 5]),
    ([[0.1, 0.9], [0.2, 0.3]], 3, (0.1, 0.4), [1, 1, 1], [0.1, 0.2, 0.3, 0.4]),
])
def test_histogram_counts_and_edges(data, bins, rng, counts, edges, cpu_target):
    x = sym.Variable("x")
    data = np.array(data, np.float32)
    inputs = {"x": data}
    if isinstance(bins, list):
        s = sym.histogram(x, bins=sym.Variable("b"))
        inputs["b"] = np.array(bins, np.float32)
    else:
        s = sym.histogram(x, bins=bins, range=rng)
    assert s.infer_type(**{k: "float32" for k in inputs})[1] == [np.int64, np.float32]
    exe = s.simple_bind(cpu(), grad_req="null", **{k: v.shape for k, v in inputs.items()})
    for k, v in inputs.items():
        exe.arg_dict[k][:] = v
    got_counts, got_edges = exe.forward(is_train=False)
    assert got_counts.asnumpy().dtype == np.int64
    assert got_counts.asnumpy().tolist() == counts
    np.testing.assert_allclose(got_edges.asnumpy(), np.array(edges, np.float32), rtol=1e-6)


def test_histogram_needs_a_range_with_a_bin_count():
    with pytest.raises(ValueError, match="null range"):
        sym.histogram(_x, bins=3)
    with pytest.raises(MXNetError, match="histogram: bins of shape"):
        sym.histogram(_x, bins=_i).infer_shape(x=(4,), i=(3, 2))
