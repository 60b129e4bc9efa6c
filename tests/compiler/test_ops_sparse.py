"""The sparse family's operators through the full compile path (both cpu targets), as
rows of the operator table of ``test_ops_compiled``: ``_square_sum``,
``_contrib_SparseEmbedding``, ``cast_storage`` and ``_sparse_retain`` compute on dense
values (their
storage types are ``compiler/passes/storage_type.py``'s, tested in
tests/module_api/test_sparse_symbols.py)."""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from tests.compiler.test_ops_compiled import RED, U3, Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _square_sum(axis=None, keepdims=False):
    def torch_fn(x):
        dims = list(range(x.dim())) if axis is None else [axis % x.dim()]
        y = (x * x).sum(dim=dims, keepdim=True)
        if not keepdims:
            y = y.reshape([s for i, s in enumerate(x.shape) if i not in dims] or [1])
        return y
    return torch_fn


def _retained(d, i):
    """The rows of ``d`` that ``i`` lists, the others zero (mxnet's sparse.retain)."""
    keep = torch.zeros(d.shape[0], dtype=torch.bool)
    keep[i.long()] = True
    return d * keep.reshape((-1,) + (1,) * (d.dim() - 1)).to(d.dtype)


ROWS = [
    Op("_square_sum_ax1k", lambda x: sym._internal._square_sum(x, axis=1, keepdims=True),
       _square_sum(1, True), RED),
    Op("_square_sum_ax0", lambda x: sym._internal._square_sum(x, axis=0), _square_sum(0),
       RED),
    Op("_square_sum_all", lambda x: sym._square_sum(x), _square_sum(), RED),
    Op("SparseEmbedding", lambda d, w: sym.contrib.SparseEmbedding(d, w, input_dim=7,
                                                                   output_dim=4),
       lambda d, w: w[d.long()], [[(5,), (7, 4)], [(2, 3), (7, 4)]],
       # forward only: its row_sparse weight gradient is checked against mxnet in
       # tests/module_api/test_sparse_symbols.py
       inputs=("d", "w"), gen={"d": "index:7"}, nograd=("d", "w")),
    Op("cast_storage", lambda x: sym.cast_storage(x, stype="default"), lambda x: x, U3),
    Op("_sparse_retain", lambda x, i: sym.sparse.retain(x, i), _retained,
       [[(6, 3), (3,)], [(5, 2, 3), (7,)], [(4, 1), (1,)]], inputs=("x", "i"),
       gen={"i": "index:4"}, nograd=("i",)),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
