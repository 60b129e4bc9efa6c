"""mxnet 1.9.1's numbers for the operators no other fixture family held, replayed through
the full compile path on both cpu targets.

``tests/fixtures/make_coverage_fixtures.py`` recorded the cases (``case_cov_*``, indexed by
``cases_cov_index.json``) in ``make_fixtures.py``'s format; each is replayed by
``test_mxnet_fixtures.test_mxnet_case``. ``tests/compiler/test_fixture_coverage.py`` says
why these operators, and holds every operator to some replayed fixture.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import module_api as mx
from tests.compiler import test_mxnet_fixtures as replay

FIXTURES = replay.FIXTURES

with open(os.path.join(FIXTURES, "cases_cov_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


class _SquareTimes(mx.operator.CustomOp):
    """(a, b) -> a * a * b: the twin of make_coverage_fixtures.py's mxnet operator."""

    def forward(self, is_train, req, in_data, out_data, aux):
        a, b = in_data
        self.assign(out_data[0], req[0], a * a * b)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        a, b = in_data
        self.assign(in_grad[0], req[0], 2 * a * b * out_grad[0])
        self.assign(in_grad[1], req[1], a * a * out_grad[0])


@mx.operator.register("cov_square_times")
class _SquareTimesProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["a", "b"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _SquareTimes()


def _close_dense(got, want, what):
    """``replay._close``, reading a sparse array (SparseEmbedding's row_sparse weight
    gradient, as mxnet's) as its dense value."""
    replay_close(got.asnumpy() if hasattr(got, "tostype") else got, want, what)


replay_close = replay._close


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_coverage_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    monkeypatch.setattr(replay, "_close", _close_dense)
    if name == "cov_custom":
        # a bound graph is cut at its Custom node into compiled segments: there is no
        # one Program of the whole symbol whose launches the two targets could compare
        monkeypatch.setattr(replay, "assert_same_launches_on_cpu_targets", lambda exe: None)
    replay.test_mxnet_case(name, cpu_target)


def test_every_coverage_case_has_arrays():
    for case in CASES.values():
        keys = set(np.load(os.path.join(FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
