"""Table rows for the last of mxnet 1.9.1's catalogue (``compiler/ops/catalogue_rest.py``,
``compiler/ops/boolean_mask.py``) through the full compile path on both cpu targets.

``ROWS`` run ``tests/compiler/test_ops_compiled.check`` against torch written out here in
float64; ``test_ops_after_views.py`` sweeps the single-input ones after views.

* ``_boolean_mask_count`` is the fixed-count form ``mx.nd.contrib.boolean_mask`` runs
  (a symbol of ``boolean_mask`` itself does not bind, as in mxnet): its rows select every
  row (an index of positive values), so the count is the first dim; subsets, empty
  selections and the gradient against mxnet are in
  ``test_mxnet_fixtures_catalogue_rest.py``.
* ``group_adagrad_update`` has no gradient (as every update operator) and writes its
  history on each forward, so its row checks the first forward only.

``reset_arrays`` (no outputs) and ``quantized_batch_norm`` (int8 data) are checked
against mxnet's numbers only, in ``test_mxnet_fixtures_catalogue_rest.py``.
"""
from __future__ import annotations

import torch

from compiler import symbol as sym
from tests.compiler.test_ops_compiled import Op


def _mask_rows(n):
    return Op(f"boolean_mask_count_{n}",
              lambda x, index: getattr(sym, "_boolean_mask_count")(x, index, count=n),
              lambda x, index: x[index != 0],
              [[(n, 3), (n,)], [(n, 1, 2), (n,)], [(n,), (n,)]],
              inputs=("x", "index"), gen={"index": "pos"}, nograd=("index",))


def _group_adagrad(x, grad, history, lr=0.1, eps=1e-5):
    rows = grad.reshape(grad.shape[0], -1)
    hist = history.reshape(-1) + (rows * rows).sum(1) / rows.shape[1]
    den = torch.sqrt(hist + eps).reshape((-1,) + (1,) * (x.dim() - 1))
    return x - lr * grad / den


ROWS = [
    _mask_rows(5),
    _mask_rows(3),
    Op("group_adagrad_update",
       # history's shape is not inferred (mxnet's rule): the variable carries it
       lambda x, grad, shapes: sym.contrib.group_adagrad_update(
           x, grad, sym.Variable("history", shape=(shapes[0][0], 1)), lr=0.1),
       _group_adagrad, [[(5, 3), (5, 3)], [(3, 2, 1), (3, 2, 1)], [(1, 7), (1, 7)]],
       inputs=("x", "grad"), aux={"history": "pos"}, grad=False, infer=False,
       needs_shapes=True),
]


import pytest  # noqa: E402

from tests.compiler.test_ops_compiled import check  # noqa: E402
from tests.conftest import assert_same_launches_on_cpu_targets  # noqa: E402


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_row(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
