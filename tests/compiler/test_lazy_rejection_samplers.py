"""The ``cpu`` target's rejection samplers try again only where needed
(``passes/lazy_rejection_samplers.py``, ``ops/random_lazy.py``): the same values as the
kernel that computes every try, bit for bit, in parts of any size."""
from __future__ import annotations

import torch

import module_api as mx
from compiler import symbol as sym
from compiler.ops import random_lazy
from runtime.context import cpu


def _samplers(n):
    return sym.Group([
        sym.random_gamma(alpha=0.4, shape=(n,)),                    # alpha < 1: boosted
        sym.random_gamma(alpha=3.0, beta=2.0, shape=(n,)),
        sym.random_poisson(lam=30.0, shape=(n,)),                   # the rejection branch
        sym.sample_poisson(sym.var("lam"), shape=(n,)),             # both branches
        sym.sample_generalized_negative_binomial(sym.var("mu"), sym.var("alpha"),
                                                 shape=(n,))])


def _draw(target, monkeypatch, n, seed=3):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    exe = _samplers(n).simple_bind(cpu(), grad_req="null", lam=(4,), mu=(3,), alpha=(3,))
    exe.arg_dict["lam"][:] = torch.tensor([0.5, 11.9, 12.0, 60.0])
    exe.arg_dict["mu"][:] = torch.tensor([2.0, 15.0, 30.0])
    exe.arg_dict["alpha"][:] = torch.tensor([0.5, 0.0, 2.0])
    mx.random.seed(seed)
    return exe, [o.asnumpy() for o in exe.forward(is_train=True)]


def test_the_cpu_program_calls_the_lazy_forms_and_the_kernel_keeps_every_try(monkeypatch):
    exe, _ = _draw("cpu", monkeypatch, 5)
    names = [ln.config["op"] for ln in exe._infer_prog.launches if ln.is_extern]
    assert names.count("_gamma_draw_lazy") == 3 and names.count("_poisson_draw_lazy") == 3
    exe, _ = _draw("interpret", monkeypatch, 5)
    assert not [ln for ln in exe._infer_prog.launches if ln.is_extern]


def test_same_bits_as_the_kernel_in_parts_of_any_size(monkeypatch):
    """Parts of 7 elements put part boundaries inside every parameter row; rows where
    most tries are rejected (Poisson at 30 and 60, about half each) use many tries."""
    _, kernel = _draw("interpret", monkeypatch, 40)
    for chunk in (7, random_lazy.CHUNK):
        monkeypatch.setattr(random_lazy, "CHUNK", chunk)
        _, lazy = _draw("cpu", monkeypatch, 40)
        for a, b in zip(kernel, lazy):
            assert a.dtype == b.dtype and (a == b).all(), (chunk, a, b)


def test_values_follow_the_laws():
    """Means and variances of 200,000 draws."""
    a = mx.nd.random.gamma(alpha=9.0, beta=0.5, shape=(200000,)).asnumpy()
    assert abs(a.mean() - 4.5) < 0.02 and abs(a.var() - 2.25) < 0.05
    p = mx.nd.random.poisson(lam=40.0, shape=(200000,)).asnumpy()
    assert abs(p.mean() - 40.0) < 0.1 and abs(p.var() - 40.0) < 1.0
