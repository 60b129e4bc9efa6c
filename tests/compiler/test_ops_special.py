"""gamma, gammaln and erfinv (``compiler/ops/special.py``): forward and gradients against
torch, finite differences, both cpu targets; the reflection formulas on negative
arguments, the poles and erfinv's ends."""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from runtime.context import cpu
from tests.compiler.test_ops_compiled import U3, Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _torch_gamma(x):
    sign = torch.where((x < 0) & (torch.fmod(torch.floor(x), 2) != 0), -1.0, 1.0)
    return sign.to(x.dtype) * torch.exp(torch.lgamma(x))


ROWS = [
    Op("gamma", lambda x: sym.gamma(x), _torch_gamma, U3, gen={"x": "pos"}),
    Op("gammaln", lambda x: sym.gammaln(x), torch.lgamma, U3, gen={"x": "pos"}),
    Op("erfinv", lambda x: sym.erfinv(x), torch.erfinv, U3, gen={"x": "unit"}),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


_X = [-4.7, -2.5, -1.25, -0.5, -0.01, 0.003, 0.3, 1.0, 2.0, 3.7, 17.5, 60.0]


def test_negative_arguments_and_gradients(cpu_target):
    """Reflection below 1/2: values and gradients (gamma * psi, psi) against torch in
    float64, on both targets."""
    x = sym.Variable("x")
    s = sym.Group([sym.gamma(x), sym.gammaln(x)])
    exe = s.simple_bind(cpu(), x=(len(_X),), type_dict={"x": "float64"})
    v = torch.tensor(_X, dtype=torch.float64)
    exe.arg_dict["x"][:] = v
    g, lg = exe.forward(is_train=True)
    torch.testing.assert_close(g, _torch_gamma(v), rtol=1e-11, atol=0)
    torch.testing.assert_close(lg, torch.lgamma(v), rtol=1e-11, atol=1e-12)
    exe.backward([torch.ones(len(_X), dtype=torch.float64), torch.zeros(len(_X),
                                                                        dtype=torch.float64)])
    torch.testing.assert_close(exe.grad_dict["x"], _torch_gamma(v) * torch.digamma(v),
                               rtol=1e-10, atol=1e-12)
    exe.backward([torch.zeros(len(_X), dtype=torch.float64), torch.ones(len(_X),
                                                                        dtype=torch.float64)])
    torch.testing.assert_close(exe.grad_dict["x"], torch.digamma(v), rtol=1e-10, atol=1e-12)


def test_poles_and_ends(cpu_target):
    """gammaln is +inf at 0 and the negative integers; erfinv is +-inf at +-1, NaN
    outside [-1, 1]."""
    x = sym.Variable("x")
    exe = sym.Group([sym.gammaln(x), sym.erfinv(x)]).simple_bind(cpu(), x=(6,))
    exe.arg_dict["x"][:] = torch.tensor([0.0, -1.0, -3.0, 1.0, -1.0, 1.5])
    lg, ei = exe.forward()
    assert torch.isinf(lg[:3]).all() and (lg[:3] > 0).all()
    assert ei[3] == float("inf") and ei[4] == float("-inf") and torch.isnan(ei[5])
    assert torch.isinf(ei[1])


def test_erfinv_float64_accuracy(cpu_target):
    x = sym.Variable("x")
    exe = sym.erfinv(x).simple_bind(cpu(), x=(7,), type_dict={"x": "float64"})
    v = torch.tensor([-0.999999, -0.9, -1e-6, 0.0, 0.2, 0.99, 0.9999999], dtype=torch.float64)
    exe.arg_dict["x"][:] = v
    torch.testing.assert_close(exe.forward()[0], torch.erfinv(v), rtol=1e-10, atol=1e-14)


def test_gamma_and_gradients_at_the_poles_as_mxnet(cpu_target):
    """mxnet 1.9.1 (its tgamma and cephes-style psi, recorded from ``mx.nd.gamma`` /
    ``gammaln`` under autograd): gamma is +-inf at +-0 and NaN at the negative integers;
    psi, in both gradients, is +inf at every pole (ATen's digamma gives -inf at +0)."""
    nan, inf = float("nan"), float("inf")
    at = torch.tensor([0.0, -0.0, -1.0, -2.0, 0.5])
    want = {"gamma": ([inf, -inf, nan, nan, 1.7724539], [inf, -inf, nan, nan, -3.480233]),
            "gammaln": ([inf, inf, inf, inf, 0.5723649], [inf, inf, inf, inf, -1.9635108])}
    for name, (value, grad) in want.items():
        exe = getattr(sym, name)(sym.Variable("x")).simple_bind(cpu(), x=(5,))
        exe.arg_dict["x"][:] = at
        out = exe.forward(is_train=True)[0]
        torch.testing.assert_close(out, torch.tensor(value), equal_nan=True)
        exe.backward([torch.ones(5)])
        torch.testing.assert_close(exe.grad_dict["x"], torch.tensor(grad), equal_nan=True)
