"""Random samplers (``compiler/ops/random.py``): moments, exact reproducibility under
``mx.random.seed``, the same bits on the cpu and interpret targets, and mxnet's
semantics (shapes, dtypes, parameter checks, zero gradients).

mxnet draws from another generator, so no fixture can hold its numbers; the
deterministic transforms a draw goes through are table rows checked against torch.
"""
from __future__ import annotations

import math

import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler.test_ops_compiled import U3, Op, check
from tests.conftest import assert_same_launches_on_cpu_targets
from runtime.ndarray import torch_dtype

_P = 2.0 ** -32

ROWS = [
    Op("_uniform_to_normal", lambda x: sym._uniform_to_normal(x),
       lambda u: torch.special.ndtri(u + _P), U3 + [[(4, 1000)]], gen={"x": "unit"},
       grad=False),
    Op("_uniform_to_exponential", lambda x: sym._uniform_to_exponential(x),
       lambda u: -torch.log(u + _P), U3, gen={"x": "unit"}, grad=False),
    Op("_scale_shift", lambda x, a, b: sym._scale_shift(x, a, b),
       lambda x, a, b: a + b * x, [[(3, 5), (3, 5), (3, 5)], [(2, 1, 3), (1, 3), (1, 3)],
                                   [(1, 7), (1,), (1,)]],
       inputs=("x", "a", "b"), grad=False),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_transforms_reach_the_extreme_draws():
    """The smallest and largest values tl.rand returns stay finite and ordered: the
    normal's tails and the exponential's largest value."""
    u = torch.tensor([0.0, 2.0 ** -31, 0.5, 1.0 - 2.0 ** -24], dtype=torch.float32)
    x = sym.Variable("x")
    exe = sym.Group([sym._uniform_to_normal(x), sym._uniform_to_exponential(x)]).simple_bind(
        cpu(), grad_req="null", x=(4,))
    exe.arg_dict["x"][:] = u
    z, e = [o.clone() for o in exe.forward()]
    p = (u + _P).double()              # the kernel's float32 p: 1 - p is 2**-24 at the top
    torch.testing.assert_close(z, torch.special.ndtri(p).float(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(e, -torch.log(p).float(), rtol=1e-6, atol=1e-7)
    assert z[0] < -6.2 and z[-1] > 5.1 and e[0] > 22.1


# ---------------------------------------------------------------------------------------
# Samplers in compiled programs

N = 100_000


def _samplers():
    """name -> (symbol over variables p (3,) and q (3,), parameter values, and per
    output row the exact mean, variance and cdf (None where no KS check))."""
    low, high = torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([1.0, 0.5, 4.0])
    mu, sigma = torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([1.0, 0.5, 4.0])
    lam = torch.tensor([1.0, 2.0, 0.25])

    def ucdf(a, b):
        return lambda x: ((x - a) / (b - a)).clamp(0, 1)

    def ncdf(m, s):
        return lambda x: 0.5 * (1 + torch.erf((x - m) / (s * math.sqrt(2))))

    def ecdf(r):
        return lambda x: 1 - torch.exp(-r * x.clamp(min=0))

    rows = {
        "random_uniform": (lambda p, q: sym.random_uniform(low=-1, high=3, shape=(N,)),
                           [(1.0, 16 / 12, ucdf(-1, 3))]),
        "random_normal": (lambda p, q: sym.random_normal(loc=1, scale=2, shape=(100, N // 100)),
                          [(1.0, 4.0, ncdf(1.0, 2.0))]),
        "random_exponential": (lambda p, q: sym.random_exponential(lam=4, shape=(N,)),
                               [(0.25, 0.0625, ecdf(4.0))]),
        "sample_uniform": (lambda p, q: sym.sample_uniform(p, q, shape=(N,)),
                           [((a + b) / 2, (b - a) ** 2 / 12, ucdf(a, b))
                            for a, b in zip(low.tolist(), high.tolist())], low, high),
        "sample_normal": (lambda p, q: sym.sample_normal(p, q, shape=(N // 10, 10)),
                          [(m, s * s, ncdf(m, s)) for m, s in zip(mu.tolist(), sigma.tolist())],
                          mu, sigma),
        "sample_exponential": (lambda p, q: sym.sample_exponential(p, shape=(N,)),
                               [(1 / r, 1 / r ** 2, ecdf(r)) for r in lam.tolist()], lam),
    }
    return rows


def _run(target, monkeypatch, names, seed, steps=1, is_train=True):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    mx.random.seed(seed)
    p, q = sym.Variable("p"), sym.Variable("q")
    table = _samplers()
    s = sym.Group([table[n][0](p, q) for n in names])
    shapes = {a: (3,) for a in s.list_arguments()}
    exe = s.simple_bind(cpu(), grad_req="null", **shapes)
    for n in names:
        for var, val in zip("pq", table[n][2:]):
            if var in exe.arg_dict:
                exe.arg_dict[var][:] = val
    return exe, [[o.clone() for o in exe.forward(is_train=is_train)] for _ in range(steps)]


@pytest.mark.parametrize("name", sorted(_samplers()))
def test_moments_and_distribution(monkeypatch, name):
    """Mean and variance within 5 standard errors of 100,000 draws per distribution,
    and the Kolmogorov-Smirnov distance to the cdf below its 0.1% critical value."""
    _, [[out]] = _run("cpu", monkeypatch, [name], seed=11)
    expected = _samplers()[name][1]
    rows = out.double().reshape(len(expected), -1)
    for row, (mean, var, cdf) in zip(rows, expected):
        n = row.numel()
        assert abs(row.mean() - mean) < 5 * math.sqrt(var / n), (name, row.mean(), mean)
        # the variance of the sample variance: (m4 - var**2) / n, m4 from the sample
        m4 = ((row - row.mean()) ** 4).mean()
        assert abs(row.var() - var) < 5 * math.sqrt((m4 - var ** 2) / n), (name, row.var(), var)
        xs = torch.sort(row).values
        ks = (cdf(xs) - torch.arange(1, n + 1, dtype=torch.float64) / n).abs().max()
        assert ks < 1.95 / math.sqrt(n), (name, float(ks))


def test_same_bits_on_both_targets_and_reproducible(monkeypatch):
    """One seed: the cpu and interpret targets draw the same bits, step after step,
    in training and inference; a new bind under the same seed draws them again; another
    seed and the next step draw other numbers."""
    names = sorted(_samplers())
    runs = {t: _run(t, monkeypatch, names, seed=5, steps=2) for t in ("cpu", "interpret")}
    for a, b in zip(sum(runs["cpu"][1], []), sum(runs["interpret"][1], [])):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    assert_same_launches_on_cpu_targets(runs["interpret"][0])
    first, second = runs["cpu"][1]
    assert all(not torch.equal(a, b) for a, b in zip(first, second))
    _, again = _run("cpu", monkeypatch, names, seed=5, steps=1)
    assert all(torch.equal(a, b) for a, b in zip(first, again[0]))
    _, other = _run("cpu", monkeypatch, names, seed=6, steps=1)
    assert all(not torch.equal(a, b) for a, b in zip(first, other[0]))
    exe, infer = _run("interpret", monkeypatch, names, seed=5, steps=2, is_train=False)
    assert exe.programs[1].seed_buffer is not None             # inference draws too
    assert all(not torch.equal(a, b) for a, b in zip(*infer))


def test_two_samplers_draw_independent_streams(monkeypatch):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cpu")
    s = sym.Group([sym.random_uniform(shape=(1000,)), sym.random_uniform(shape=(1000,))])
    a, b = s.simple_bind(cpu()).forward()
    assert not torch.equal(a, b)
    assert abs(float(torch.corrcoef(torch.stack([a, b]))[0, 1])) < 0.15


def test_like_forms_take_shape_and_dtype_from_data():
    x = sym.Variable("x", dtype="float64")
    s = sym.Group([sym._random_uniform_like(x, low=2, high=3), sym._random_normal_like(x),
                   sym._random_exponential_like(x, lam=2)])
    exe = s.simple_bind(cpu(), x=(4, 1, 7))
    outs = exe.forward()
    assert all(o.shape == (4, 1, 7) and torch_dtype(o) == torch.float64 for o in outs)
    assert torch.logical_and(outs[0] >= 2, outs[0] <= 3).all() and (outs[2] > 0).all()


def test_shapes_dtypes_and_aliases():
    assert sym.uniform(shape=(2, 3)).infer_shape()[1] == [(2, 3)]
    s = sym._random_normal(shape=(5,), dtype="float64")
    assert s.infer_type()[1] == [np_float64()]
    exe = s.simple_bind(cpu())
    assert torch_dtype(exe.forward()[0]) == torch.float64
    a, b = sym.Variable("a"), sym.Variable("b")
    assert sym._sample_normal(a, b, shape=(2,)).infer_shape(a=(3,), b=(3,))[1] == [(3, 2)]
    assert sym.sample_exponential(a).infer_shape(a=(4, 1))[1] == [(4, 1)]
    with pytest.raises(MXNetError, match="sigma"):
        sym.sample_normal(a, b, shape=(2,)).infer_shape(a=(3,), b=(4,))


def np_float64():
    import numpy as np
    return np.float64


@pytest.mark.parametrize("make,match", [
    (lambda: sym.random_normal(scale=0, shape=(2,)), "scale parameter in gaussian"),
    (lambda: sym.random_uniform(low=2, high=1, shape=(2,)), "low must be less or equal"),
    (lambda: sym.random_exponential(lam=-1, shape=(2,)), "lambda parameter"),
    (lambda: sym.random_uniform(), "its own `shape` decides it"),
])
def test_parameter_errors(make, match):
    with pytest.raises(MXNetError, match=match):
        make().simple_bind(cpu())


def test_samplers_have_zero_gradients():
    """mxnet's MakeZeroGradNodes: the parameters and a _like's data get zeros."""
    a, b, x = sym.Variable("a"), sym.Variable("b"), sym.Variable("x")
    s = sym.Group([sym.sample_normal(a, b, shape=(4,)), sym._random_uniform_like(x) * x])
    exe = s.simple_bind(cpu(), a=(3,), b=(3,), x=(2, 5))
    exe.arg_dict["b"][:] = 1.0
    exe.arg_dict["x"][:] = 1.0
    outs = exe.forward(is_train=True)
    exe.backward([torch.ones_like(o) for o in outs])
    assert torch.equal(exe.grad_dict["a"], torch.zeros(3))
    assert torch.equal(exe.grad_dict["b"], torch.zeros(3))
    # d(u * x)/dx = u: the product's gradient, none through the _like's data
    torch.testing.assert_close(exe.grad_dict["x"], outs[1] / 1.0)


def test_mx_sym_random_dispatches_on_parameter_types():
    """Numbers: the _random_* operator; Symbols: _sample_* (mxnet's _random_helper)."""
    s = mx.sym.random.uniform(-1, 2, shape=(3, 4))
    assert s.tojson().count('"_random_uniform"') == 1 and s.infer_shape()[1] == [(3, 4)]
    a, b = sym.Variable("a"), sym.Variable("b")
    s = mx.sym.random.normal(a, b, shape=(2,), dtype="float64")
    assert '"_sample_normal"' in s.tojson()
    assert s.infer_shape(a=(3,), b=(3,))[1] == [(3, 2)]
    assert mx.sym.random.randn(2, 5, loc=1).infer_shape()[1] == [(2, 5)]
    e = mx.sym.random.exponential(scale=4.0, shape=(7,))       # rate 1 / scale
    assert '"lam": "0.25"' in e.tojson()
    assert '"_sample_exponential"' in mx.sym.random.exponential(a).tojson()
    with pytest.raises(AssertionError, match="same type"):
        mx.sym.random.uniform(a, 1.0)
    with pytest.raises(ValueError, match="Symbol or numbers"):
        mx.sym.random.normal("x", 1.0)
