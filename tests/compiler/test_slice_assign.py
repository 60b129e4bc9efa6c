"""_slice_assign / _slice_assign_scalar (mxnet's _crop_assign / _crop_assign_scalar)
against mxnet 1.9.1's results (tests/fixtures/make_slice_assign_fixtures.py), on both
cpu targets: imperatively (mx.nd._internal, with out= the input, as mxnet's
test_ndarray_crop), and in a graph after a view, fused with the sum after it."""
import json
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

CASES = json.load(open(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                    "mxnet_slice_assign.json")))


def _slice(case):
    return dict(begin=tuple(case["begin"]), end=tuple(case["end"]), step=tuple(case["step"]))


def _lhs(case):
    return 1 + np.arange(np.prod(case["shape"]), dtype=np.float32).reshape(case["shape"])


def _rhs(case):
    # a 0 first: the assigned positions are the slice's, not where rhs is nonzero
    return -np.arange(np.prod(case["rhs_shape"]), dtype=np.float32).reshape(case["rhs_shape"])


@pytest.mark.parametrize("i", range(len(CASES)))
def test_imperative_matches_mxnet(cpu_target, i):
    case = CASES[i]
    got = mx.nd._internal._slice_assign(mx.nd.array(_lhs(case)), mx.nd.array(_rhs(case)),
                                        **_slice(case))
    np.testing.assert_array_equal(got.asnumpy().ravel(), case["assigned"])
    x = mx.nd.array(_lhs(case))
    mx.nd._internal._crop_assign_scalar(x, scalar=case["scalar"], out=x, **_slice(case))
    np.testing.assert_array_equal(x.asnumpy().ravel(), case["assigned_scalar"])


@pytest.mark.parametrize("i", range(len(CASES)))
def test_in_a_graph_after_a_view_and_fused_with_a_sum(cpu_target, i):
    case = CASES[i]
    lhs_t = np.ascontiguousarray(_lhs(case).T)      # the graph reads it back transposed
    x, r = mx.sym.Variable("x"), mx.sym.Variable("r")
    view = mx.sym.transpose(x)
    out = mx.sym.Group([
        mx.sym._internal._crop_assign(view, r, **_slice(case)) + 1.0,
        mx.sym._internal._slice_assign_scalar(view, scalar=case["scalar"], **_slice(case))])
    args, _, _ = out.infer_shape(x=lhs_t.shape)
    assert tuple(args[1]) == tuple(case["rhs_shape"])      # rhs takes the slice's shape
    exe = out.bind(mx.cpu(), {"x": mx.nd.array(lhs_t), "r": mx.nd.array(_rhs(case))})
    first, second = exe.forward()
    np.testing.assert_array_equal(first.asnumpy().ravel(), np.array(case["assigned"]) + 1)
    np.testing.assert_array_equal(second.asnumpy().ravel(), case["assigned_scalar"])


def test_rhs_of_another_shape_is_refused_naming_both():
    with pytest.raises(MXNetError, match=r"rhs has shape \(2, 2\).*has shape \(2, 1\)"):
        mx.nd._internal._slice_assign(mx.nd.ones((2, 3)), mx.nd.ones((2, 2)),
                                      begin=(0, 0), end=(2, 1))


def test_no_gradient_as_in_mxnet():
    out = mx.sym._internal._slice_assign(mx.sym.Variable("x"), mx.sym.Variable("r"),
                                         begin=(0,), end=(1,))
    with pytest.raises(MXNetError, match="has no gradient"):
        out.simple_bind(mx.cpu(), x=(3, 2))
