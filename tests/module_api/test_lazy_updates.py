"""Update operators through ``mx.nd`` with a row_sparse gradient
(``runtime/imperative_lazy.py``): mxnet 1.9.1's lazy update touches only the
gradient's rows, states included (``tests/fixtures/make_lazy_update_fixtures.py``)."""
import json
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

with open(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                       "mxnet_lazy_updates.json")) as f:
    CASES = json.load(f)


def _inputs(case):
    shape, rows = tuple(case["shape"]), case["rows"]
    n = int(np.prod(shape))
    weight = (1 + np.arange(n) / 10.0).reshape(shape).astype(np.float32)
    state = (0.1 + np.arange(n) / 20.0).reshape(shape).astype(np.float32)
    values = np.sin(np.arange(len(rows) * shape[1])).reshape(len(rows), shape[1])
    grad = mx.nd.sparse.row_sparse_array((values.astype(np.float32), rows), shape=shape)
    return mx.nd.array(weight), grad, [mx.nd.array(state) for _ in case["states"]]


def _id(case):
    lazy = case["attrs"].get("lazy_update", True)
    return f"{case['op']}-{'lazy' if lazy else 'dense'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_update_with_a_row_sparse_gradient_matches_mxnet(case, cpu_target):
    w, g, states = _inputs(case)
    fn = mx.nd
    for part in case["op"].split("."):
        fn = getattr(fn, part)
    fn(w, g, *states, out=w, **case["attrs"])
    np.testing.assert_allclose(w.asnumpy().ravel(), case["weight"], rtol=1e-6, atol=1e-7)
    for got, want in zip(states, case["state_values"]):
        np.testing.assert_allclose(got.asnumpy().ravel(), want, rtol=1e-6, atol=1e-7)


def test_untouched_rows_keep_their_weight_and_momentum():
    w, g, (mom,) = _inputs(next(c for c in CASES if c["op"] == "sgd_mom_update"))
    before_w, before_m = w.asnumpy().copy(), mom.asnumpy().copy()
    mx.nd.sgd_mom_update(w, g, mom, lr=0.5, wd=0.3, momentum=0.9, out=w)
    for r in (1, 4):        # rows the gradient does not store
        np.testing.assert_array_equal(w.asnumpy()[r], before_w[r])
        np.testing.assert_array_equal(mom.asnumpy()[r], before_m[r])
    assert not np.array_equal(w.asnumpy()[0], before_w[0])


def test_a_lazy_update_needs_the_weight_as_out():
    w, g, _ = _inputs(CASES[0])
    with pytest.raises(MXNetError, match="pass out=weight"):
        mx.nd.sgd_update(w, g, lr=0.1)


def test_sparse_adagrad_refuses_weight_decay_as_mxnet():
    w, g, _ = _inputs(CASES[0])
    with pytest.raises(MXNetError, match="does not support weight decay"):
        mx.nd.sparse.adagrad_update(w, g, mx.nd.zeros(w.shape), lr=0.1, wd=0.1, out=w)
    assert mx.sym.sparse.adagrad_update(mx.sym.var("w"), mx.sym.var("g"), mx.sym.var("h"),
                                        lr=0.1).list_auxiliary_states() == ["h"]
