"""The densities of ``compiler/ops/pdf.py`` (``random_pdf_*``): forward and gradients
against torch.distributions' log_prob and finite differences, on both cpu targets, with
and without ``is_log``; mxnet's zero sample gradients; shapes and errors."""
from __future__ import annotations

import pytest
import torch
from torch import distributions as D

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _e(p, x):
    return p.reshape(tuple(p.shape) + (1,) * (x.dim() - p.dim()))


def _uniform(x, lo, hi):
    return (-torch.log(_e(hi, x) - _e(lo, x))).expand(x.shape)


def _log_probs():
    """dist -> (log_prob(x, *params) through torch.distributions, inputs' gens)."""
    return {
        "uniform": (lambda x, a, b: _uniform(x, a, a + b), {"a": "unit", "b": "pos"}),
        "normal": (lambda x, a, b: D.Normal(_e(a, x), _e(b, x)).log_prob(x), {"b": "pos"}),
        "gamma": (lambda x, a, b: D.Gamma(_e(a, x), _e(b, x)).log_prob(x),
                  {"x": "pos", "a": "pos", "b": "pos"}),
        "exponential": (lambda x, a: D.Exponential(_e(a, x)).log_prob(x),
                        {"x": "pos", "a": "pos"}),
        "poisson": (lambda x, a: D.Poisson(_e(a, x)).log_prob(x), {"x": "index:7", "a": "pos"}),
        # torch's probs is the success probability; mxnet's p enters as k log p
        "negative_binomial": (
            lambda x, a, b: D.NegativeBinomial(_e(a, x), probs=1 - _e(b, x)).log_prob(x),
            {"x": "index:7", "a": "pos", "b": "unit"}),
        "generalized_negative_binomial": (
            lambda x, a, b: D.NegativeBinomial(1 / _e(b, x), probs=1 - 1 / (
                _e(a, x) * _e(b, x) + 1)).log_prob(x),
            {"x": "index:7", "a": "pos", "b": "pos"}),
    }


SHAPES2 = [[(3, 4), (3,), (3,)], [(2, 3, 5), (2, 3), (2, 3)], [(4,), (4,), (4,)]]
# mxnet's gradient of these with respect to the sample is zero (not the log_prob's)
_ZERO_SAMPLE_GRAD = ("uniform", "poisson", "negative_binomial", "generalized_negative_binomial")


def _rows():
    rows = []
    for dist, (lp, gen) in _log_probs().items():
        two = dist not in ("exponential", "poisson")
        inputs = ("x", "a", "b") if two else ("x", "a")
        shapes = SHAPES2 if two else [s[:2] for s in SHAPES2]
        fn = getattr(sym, f"random_pdf_{dist}")
        for is_log in (True, False):
            def build(*v, fn=fn, is_log=is_log, dist=dist):
                if dist == "uniform":
                    return fn(v[0], v[1], v[1] + v[2], is_log=is_log)
                return fn(*v, is_log=is_log)

            def ref(*xs, lp=lp, is_log=is_log):
                v = lp(*xs)
                return v if is_log else torch.exp(v)
            rows.append(Op(f"random_pdf_{dist}{'_log' if is_log else ''}", build, ref, shapes,
                           inputs=inputs, gen=gen,
                           nograd=("x",) if dist in _ZERO_SAMPLE_GRAD else ()))
    rows.append(Op("random_pdf_dirichlet_log",
                   lambda x, a: sym.random_pdf_dirichlet(x, a, is_log=True),
                   lambda x, a: _dirichlet(x, a), [[(2, 5, 3), (2, 3)], [(4, 3), (3,)]],
                   inputs=("x", "a"), gen={"x": "unit", "a": "pos"}))
    rows.append(Op("random_pdf_dirichlet",
                   lambda x, a: sym.random_pdf_dirichlet(x, a),
                   lambda x, a: torch.exp(_dirichlet(x, a)), [[(3, 2, 4), (3, 4)]],
                   inputs=("x", "a"), gen={"x": "unit", "a": "pos"}))
    return rows


def _dirichlet(x, a):
    """torch's Dirichlet log_prob of unnormalised samples (mxnet does not normalise)."""
    a = a.reshape(tuple(a.shape[:-1]) + (1,) * (x.dim() - a.dim()) + (a.shape[-1],))
    return ((a - 1) * torch.log(x)).sum(-1) + torch.lgamma(a.sum(-1)) - torch.lgamma(a).sum(-1)


ROWS = _rows()


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_dirichlet_matches_torch_on_the_simplex():
    """On normalised samples mxnet's formula is torch.distributions.Dirichlet's."""
    x = torch.distributions.Dirichlet(torch.tensor([1.5, 2.0, 0.7])).sample((5,))
    a = torch.tensor([1.5, 2.0, 0.7])
    exe = sym.random_pdf_dirichlet(sym.Variable("x"), sym.Variable("a"), is_log=True
                                   ).simple_bind(cpu(), x=(5, 3), a=(3,))
    exe.arg_dict["x"][:] = x
    exe.arg_dict["a"][:] = a
    torch.testing.assert_close(exe.forward()[0], D.Dirichlet(a).log_prob(x), rtol=1e-5,
                               atol=1e-5)


def test_zero_sample_gradients_and_shapes():
    x, a, b = sym.Variable("x"), sym.Variable("a"), sym.Variable("b")
    s = sym.random_pdf_poisson(x, a)
    exe = s.simple_bind(cpu(), x=(3, 2), a=(3,))
    exe.arg_dict["x"][:] = 1.0
    exe.arg_dict["a"][:] = 2.0
    exe.forward(is_train=True)
    exe.backward([torch.ones(3, 2)])
    assert torch.equal(exe.grad_dict["x"], torch.zeros(3, 2))
    assert sym.random_pdf_gamma(x, a, b).infer_shape(x=(2, 3, 4), a=(2, 3))[1] == [(2, 3, 4)]
    assert sym.random_pdf_dirichlet(x, a).infer_shape(x=(4, 5, 3), a=(4, 3))[1] == [(4, 5)]
    assert sym.random_pdf_dirichlet(x, a).infer_shape(x=(3,), a=(3,))[1] == [(1,)]
    with pytest.raises(MXNetError, match="at least dimension"):
        sym.random_pdf_normal(x, a, b).infer_shape(x=(3,), a=(3, 1), b=(3, 1))
    with pytest.raises(MXNetError):
        sym.random_pdf_normal(x, a, b).infer_shape(x=(3, 4), a=(4,), b=(4,))
