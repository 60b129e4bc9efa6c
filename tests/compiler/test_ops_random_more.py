"""The samplers of ``compiler/ops/random_more.py`` (gamma, poisson, negative binomial,
generalized negative binomial, randint; ``_like`` and ``sample_*`` forms): moments at a
fixed seed, exact reproducibility, the same bits on the cpu and interpret targets, and
mxnet's shapes, dtypes, parameter checks and zero gradients.

mxnet draws from another generator, so no fixture can hold its numbers.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from runtime.ndarray import torch_dtype

ALPHA = torch.tensor([0.3, 1.0, 4.5])
BETA = torch.tensor([2.0, 0.5, 1.5])
LAM = torch.tensor([0.5, 7.0, 40.0])
K, P = torch.tensor([1.0, 3.0, 20.0]), torch.tensor([0.7, 0.4, 0.5])
MU, DISP = torch.tensor([2.0, 15.0, 3.0]), torch.tensor([0.5, 0.0, 2.0])


def _table(n):
    """name -> (symbol over variables a, b of shape (3,), their values, and per output
    row the exact mean and variance)."""
    return {
        "random_gamma": (lambda a, b: sym.random_gamma(alpha=2.5, beta=2.0, shape=(n,)),
                         [(5.0, 10.0)]),
        "random_gamma_small": (lambda a, b: sym.random_gamma(alpha=0.4, shape=(n,)),
                               [(0.4, 0.4)]),
        "random_poisson": (lambda a, b: sym.random_poisson(lam=3.0, shape=(n,)), [(3.0, 3.0)]),
        "random_poisson_large": (lambda a, b: sym.random_poisson(lam=30.0, shape=(n,)),
                                 [(30.0, 30.0)]),
        "random_negative_binomial": (
            lambda a, b: sym.random_negative_binomial(k=3, p=0.4, shape=(n,)),
            [(4.5, 3 * 0.6 / 0.16)]),
        "random_generalized_negative_binomial": (
            lambda a, b: sym.random_generalized_negative_binomial(mu=2.0, alpha=0.5,
                                                                   shape=(n,)),
            [(2.0, 4.0)]),
        "random_randint": (lambda a, b: sym.random_randint(low=-3, high=7, shape=(n,)),
                           [(1.5, 99 / 12)]),
        "sample_gamma": (lambda a, b: sym.sample_gamma(a, b, shape=(n,)),
                         [(x * y, x * y * y) for x, y in zip(ALPHA.tolist(), BETA.tolist())],
                         ALPHA, BETA),
        "sample_poisson": (lambda a, b: sym.sample_poisson(a, shape=(n,)),
                           [(x, x) for x in LAM.tolist()], LAM),
        "sample_negative_binomial": (
            lambda a, b: sym.sample_negative_binomial(a, b, shape=(n,)),
            [(k * (1 - p) / p, k * (1 - p) / p ** 2) for k, p in zip(K.tolist(), P.tolist())],
            K, P),
        "sample_generalized_negative_binomial": (
            lambda a, b: sym.sample_generalized_negative_binomial(a, b, shape=(n,)),
            [(m, m + d * m * m) for m, d in zip(MU.tolist(), DISP.tolist())], MU, DISP),
    }


def _run(target, monkeypatch, names, seed, n, steps=1, is_train=True):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    mx.random.seed(seed)
    table = _table(n)
    s = sym.Group([table[k][0](sym.Variable(f"{k}_a"), sym.Variable(f"{k}_b")) for k in names])
    exe = s.simple_bind(cpu(), grad_req="null", **{v: (3,) for v in s.list_arguments()})
    for k in names:
        for var, val in zip("ab", table[k][2:]):
            exe.arg_dict[f"{k}_{var}"][:] = val
    return exe, [[o.clone() for o in exe.forward(is_train=is_train)] for _ in range(steps)]


@pytest.mark.slow
def test_moments(monkeypatch):
    """Mean and variance of 5,000 draws per distribution within 5 standard errors
    (the variance's from the sample's fourth moment); counts are whole numbers."""
    names = sorted(_table(1))
    n = 5_000
    # one graph each: in one Group the fusion pass tries pairs across the samplers
    outs = [_run("cpu", monkeypatch, [name], seed=11, n=n)[1][0][0] for name in names]
    for name, out in zip(names, outs):
        expected = _table(n)[name][1]
        rows = out.double().reshape(len(expected), -1)
        for row, (mean, var) in zip(rows, expected):
            assert abs(row.mean() - mean) < 5 * math.sqrt(var / n), (name, row.mean(), mean)
            m4 = ((row - row.mean()) ** 4).mean()
            assert abs(row.var() - var) < 5 * math.sqrt((m4 - var ** 2) / n), \
                (name, row.var(), var)
        if "gamma_" in name or name.endswith("gamma"):
            assert (out > 0).all(), name
        else:
            assert torch.equal(out.double(), out.double().floor()), name


# Between them these reach every path of the samplers' math: alpha < 1, the two Poisson
# branches (each alone, and chosen per element), gnb's alpha = 0, randint's float64 map.
BITS = ["random_gamma_small", "random_poisson_large", "random_randint",
        "sample_generalized_negative_binomial"]


def test_same_bits_on_both_targets_and_reproducible(monkeypatch):
    """One seed: the cpu and interpret targets draw the same bits; the same seed draws
    them again, another seed and the next step others."""
    names = BITS
    runs = {t: _run(t, monkeypatch, names, seed=5, n=64, steps=2 if t == "cpu" else 1)
            for t in ("cpu", "interpret")}
    for x, y in zip(runs["cpu"][1][0], runs["interpret"][1][0]):
        assert x.dtype == y.dtype and torch.equal(x, y)
    first, second = runs["cpu"][1]
    assert all(not torch.equal(x, y) for x, y in zip(first, second))
    _, [again] = _run("cpu", monkeypatch, names, seed=5, n=64)
    assert all(torch.equal(x, y) for x, y in zip(first, again))
    _, [other] = _run("cpu", monkeypatch, names, seed=6, n=64)
    assert all(not torch.equal(x, y) for x, y in zip(first, other))


def test_like_forms_take_shape_and_dtype_from_data():
    x = sym.Variable("x", dtype="float64")
    s = sym.Group([sym._random_gamma_like(x, alpha=2.0), sym._random_poisson_like(x, lam=4),
                   sym._random_negative_binomial_like(x, k=2, p=0.5),
                   sym._random_generalized_negative_binomial_like(x, mu=3, alpha=0.1)])
    outs = s.simple_bind(cpu(), x=(4, 1, 7)).forward()
    assert all(o.shape == (4, 1, 7) and torch_dtype(o) == torch.float64 for o in outs)
    assert (outs[0] > 0).all() and all((o >= 0).all() for o in outs[1:])


def test_shapes_dtypes_and_aliases():
    s = sym._random_randint(low=0, high=5, shape=(2, 3))
    assert s.infer_shape()[1] == [(2, 3)] and s.infer_type()[1] == [np.int32]
    out = sym.random_randint(low=5, high=9, shape=(50,), dtype="int64").simple_bind(
        cpu()).forward()[0]
    assert torch_dtype(out) == torch.int64 and out.min() >= 5 and out.max() <= 8
    assert sym.random_poisson(lam=2, shape=(4,), dtype="float64").infer_type()[1] == \
        [np.float64]
    a, b = sym.Variable("a"), sym.Variable("b")
    assert sym._sample_gamma(a, b, shape=(2,)).infer_shape(a=(3,), b=(3,))[1] == [(3, 2)]
    assert sym.sample_poisson(a).infer_shape(a=(4, 1))[1] == [(4, 1)]
    assert sym.sample_negative_binomial(a, b).list_arguments() == ["a", "b"]
    with pytest.raises(MXNetError, match="beta"):
        sym.sample_gamma(a, b, shape=(2,)).infer_shape(a=(3,), b=(4,))


@pytest.mark.parametrize("make,match", [
    (lambda: sym.random_gamma(alpha=0, shape=(2,)), "alpha parameter in gamma"),
    (lambda: sym.random_gamma(beta=-1, shape=(2,)), "beta parameter in gamma"),
    (lambda: sym.random_poisson(lam=-1, shape=(2,)), "lambda parameter in poisson"),
    (lambda: sym.random_negative_binomial(k=-1, shape=(2,)), "k parameter"),
    (lambda: sym.random_generalized_negative_binomial(alpha=-1, shape=(2,)), "alpha parameter"),
    (lambda: sym.random_randint(low=3, high=1, shape=(2,)), "low must be less or equal"),
    (lambda: sym.random_gamma(), "its own `shape` decides it"),
])
def test_parameter_errors(make, match):
    with pytest.raises(MXNetError, match=match):
        make().simple_bind(cpu())


def test_samplers_have_zero_gradients():
    a, b, x = sym.Variable("a"), sym.Variable("b"), sym.Variable("x")
    s = sym.Group([sym.sample_gamma(a, b, shape=(4,)), sym._random_poisson_like(x) * x])
    exe = s.simple_bind(cpu(), a=(3,), b=(3,), x=(2, 5))
    exe.arg_dict["a"][:] = 2.0
    exe.arg_dict["b"][:] = 1.0
    exe.arg_dict["x"][:] = 1.0
    outs = exe.forward(is_train=True)
    exe.backward([torch.ones_like(o) for o in outs])
    assert torch.equal(exe.grad_dict["a"], torch.zeros(3))
    assert torch.equal(exe.grad_dict["b"], torch.zeros(3))
    torch.testing.assert_close(exe.grad_dict["x"], outs[1])


def test_mx_sym_random_wrappers():
    """mxnet's mx.sym.random: numbers give _random_*, Symbols _sample_*;
    the _random_*_like operators appear as random.*_like."""
    s = mx.sym.random.gamma(2, 3, shape=(4,))
    assert '"_random_gamma"' in s.tojson() and '"alpha": "2"' in s.tojson()
    a, b = sym.Variable("a"), sym.Variable("b")
    assert '"_sample_poisson"' in mx.sym.random.poisson(a, shape=(2,)).tojson()
    s = mx.sym.random.negative_binomial(a, b, shape=(2,), dtype="float64")
    assert '"_sample_negative_binomial"' in s.tojson()
    assert s.infer_shape(a=(3,), b=(3,))[1] == [(3, 2)]
    s = mx.sym.random.generalized_negative_binomial(1.5, 0.2, shape=(5,))
    assert '"_random_generalized_negative_binomial"' in s.tojson()
    assert mx.sym.random.randint(0, 10, shape=(3,)).infer_type()[1] == [np.int32]
    assert mx.sym.random.poisson_like(a, lam=2).infer_shape(a=(2, 2))[1] == [(2, 2)]
    assert '"_random_gamma_like"' in mx.sym.random.gamma_like(a).tojson()
    with pytest.raises(AssertionError, match="same type"):
        mx.sym.random.gamma(a, 1.0)


# ---------------------------------------------------------------------------------------
# sample_multinomial and shuffle

PROBS = torch.tensor([[0.0, 0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1, 0.0]])


def _multinomial(target, monkeypatch, seed, n):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    mx.random.seed(seed)
    d, x = sym.Variable("d"), sym.Variable("x")
    s = sym.Group(list(mx.sym.random.multinomial(d, shape=(n,))) + [mx.sym.random.shuffle(x)])
    exe = s.simple_bind(cpu(), grad_req={"d": "write", "x": "null"}, d=(2, 5), x=(7, 3))
    exe.arg_dict["d"][:] = PROBS
    exe.arg_dict["x"][:] = torch.arange(21.0).reshape(7, 3)
    return exe, [o.clone() for o in exe.forward(is_train=True)]


def test_multinomial_frequencies_and_log_probs(monkeypatch):
    """Each outcome's frequency within 5 standard errors of its probability; never an
    outcome of probability 0; get_prob's output is log(p[outcome])."""
    n = 4000
    _, (idx, logp, _) = _multinomial("cpu", monkeypatch, seed=3, n=n)
    assert torch_dtype(idx) == torch.int32 and idx.shape == (2, n)
    idx, logp = idx.as_subclass(torch.Tensor), logp.as_subclass(torch.Tensor)  # torch math
    for row, p in zip(idx.long(), PROBS):
        freq = torch.bincount(row, minlength=5).double() / n
        se = (p.double() * (1 - p.double()) / n).sqrt()
        assert ((freq - p).abs() <= 5 * se + 1e-12).all(), (freq, p)
    torch.testing.assert_close(logp, torch.log(torch.gather(PROBS, 1, idx.long())))


def test_multinomial_gradient_and_shuffle(monkeypatch):
    """get_prob's gradient is ograd / p added at each drawn outcome (mxnet's); shuffle
    permutes whole rows; both targets draw the same bits."""
    outs = {}
    for target in ("cpu", "interpret"):
        exe, outs[target] = _multinomial(target, monkeypatch, seed=8, n=6)
        dy = torch.arange(12.0).reshape(2, 6)
        exe.backward([torch.zeros(2, 6), dy, torch.zeros(7, 3)])
        idx = outs[target][0].long()
        want = torch.zeros(2, 5).scatter_add_(1, idx, dy / torch.gather(PROBS, 1, idx))
        torch.testing.assert_close(exe.grad_dict["d"], want)
    for a, b in zip(outs["cpu"], outs["interpret"]):
        assert torch.equal(a, b)
    rows = outs["cpu"][2]
    assert sorted(rows[:, 0].tolist()) == list(range(0, 21, 3))
    assert torch.equal(rows[:, 1:] - rows[:, :1], torch.tensor([[1.0, 2.0]] * 7))
    assert not torch.equal(rows, torch.arange(21.0).reshape(7, 3))


def test_multinomial_shapes_and_no_prob_gradient():
    d = sym.Variable("d")
    assert sym.sample_multinomial(d).infer_shape(d=(4,))[1] == [(1,)]
    assert sym.sample_multinomial(d, shape=(2, 3)).infer_shape(d=(4,))[1] == [(2, 3)]
    s = sym.sample_multinomial(d, shape=(2,), get_prob=True, dtype="float32")
    assert s.infer_shape(d=(3, 4))[1] == [(3, 2), (3, 2)]
    assert s.infer_type(d="float64")[1] == [np.float32, np.float64]
    exe = sym.sample_multinomial(d, shape=(3,)).simple_bind(cpu(), d=(2, 4))
    exe.arg_dict["d"][:] = 0.25
    exe.forward(is_train=True)
    exe.backward([torch.ones(2, 3)])
    assert torch.equal(exe.grad_dict["d"], torch.zeros(2, 4))
