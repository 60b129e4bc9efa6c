"""The rejection samplers with their tries taken only where needed: the ``cpu`` target's
``_gamma_draw`` and ``_poisson_draw``.

``_gamma_draw`` and ``_poisson_draw`` (``random_more.py``) compute a fixed number of
tries for every element, so a kernel gives every target the same bits without a loop.
On the ``cpu`` target every try is a few hundred ATen calls over the whole array, and
almost all are wasted: gamma's first try is accepted above 95% of the time, Poisson's
about half. ``passes/lazy_rejection_samplers.py`` swaps these two ops, on the ``cpu``
target only, for the extern ops below. They compute the very same expressions
(``random_math.gamma_try`` / ``poisson_try``, evaluated by :class:`EagerOps`, one ATen
call per primitive, as the cpu target's generated code makes them), but try ``k``
only for the elements tries ``1 .. k-1`` rejected. Each try's draws depend only on
its stream and the element's index, so the values are those of the kernel, bit for
bit (``tests/compiler/test_lazy_rejection_samplers.py`` and
``test_ops_random_more.py`` compare them with the interpreter's).
"""
from __future__ import annotations

import math

import torch

from ..ir.expr import evaluate, ops
from ..ir.philox import stream_uniform
from . import random_math as rm
from .random_more import GAMMA_TRIES, POISSON_TRIES, _DRAW_ATTRS, _draw_ref, _draw_shape
from .registry import Attr, Extern, OpDef, choice, register

_FOLD = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "div": lambda a, b: a / b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
         "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b,
         "ne": lambda a, b: a != b, "maximum": max, "minimum": min}
_TORCH = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq,
          "ne": torch.ne, "maximum": torch.maximum, "minimum": torch.minimum,
          "and_": torch.logical_and, "or_": torch.logical_or}


class EagerOps:
    """A handler of the expression vocabulary (``ir/expr.py``) that computes: each
    primitive one ATen call on tensors of ``dtype``, numbers folded in Python first,
    as the cpu target's generated code does."""
    target = "cpu (eager)"

    def __init__(self, values: dict, dtype):
        self.values, self.dtype = values, dtype

    def value(self, name):
        return self.values[name]

    def const(self, x):
        return x

    def _tensor(self, x):
        return x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=self.dtype)

    def _binary(self, fn, a, b):
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            return _FOLD[fn](a, b)
        if fn in ("add", "sub") and not isinstance(b, torch.Tensor) and b == 0 \
                and a.is_floating_point():
            return a                     # as the cpu target, which emits no call for it
        if fn in ("mul", "div") and not isinstance(b, torch.Tensor) and b == 1 \
                and a.is_floating_point():
            return a
        if not isinstance(a, torch.Tensor):
            a = self._tensor(a)
        if fn in ("maximum", "minimum") and not isinstance(b, torch.Tensor):
            b = self._tensor(b)
        return _TORCH[fn](a, b)

    def neg(self, a):
        return -a if not isinstance(a, torch.Tensor) else torch.neg(a)

    def where(self, c, a, b):
        if not isinstance(c, torch.Tensor):
            return a if c else b
        return torch.where(c, self._tensor(a), self._tensor(b))

    def floor(self, a):
        return torch.floor(a) if isinstance(a, torch.Tensor) else math.floor(a)

    def abs(self, a):
        return torch.abs(a) if isinstance(a, torch.Tensor) else abs(a)


for _name in _TORCH:
    setattr(EagerOps, _name, lambda self, a, b, _fn=_name: self._binary(_fn, a, b))


def _compute(expr, values: dict, dtype):
    """The value of ``expr`` (or a tuple of them: a tuple of values) over named tensors;
    a node several paths reach is computed once."""
    handler, memo = EagerOps(values, dtype), {}
    if isinstance(expr, tuple):
        return tuple(evaluate(e, handler, "a lazy rejection sampler", memo) for e in expr)
    return evaluate(expr, handler, "a lazy rejection sampler", memo)


# the expressions of one try, over named values: built once
_GAMMA_TRY = rm.gamma_try(ops.value("u1"), ops.value("u2"), ops.value("d"), ops.value("c"))
_GAMMA_CONSTANTS = rm.gamma_constants(ops.value("alpha"))
_GAMMA_FINISH = rm.gamma_finish(ops.value("x"), ops.value("u"), ops.value("alpha"),
                                ops.value("beta"))
_POISSON_CONSTANTS = rm.poisson_constants(ops.value("lam"))
_POISSON_TRY = rm.poisson_try(ops.value("u1"), ops.value("u2"), ops.value("lam"),
                              (ops.value("sq"), ops.value("log_lam"), ops.value("g")))
_POISSON_SMALL = rm.poisson_small(ops.value("u"), ops.value("lam"))


class _Draws:
    """U[0, 1) draws of stream ``first + k`` at given element indices, in the compute
    dtype (``_philox_uniform``'s numbers: float32 ``tl.rand`` values)."""

    def __init__(self, seed, first, dtype):
        self.seed, self.first, self.dtype = seed, first, dtype

    def __call__(self, k, index):
        return stream_uniform(self.seed, self.first + k, index).to(self.dtype)


# elements per pass: a try's few hundred temporaries stay in the caches (a million at a
# time, each ATen call wrote 4 MB of fresh memory, and the calls cost three times more)
CHUNK = 1 << 15


def _sized(value, n, dtype):
    return torch.broadcast_to(torch.as_tensor(value, dtype=dtype), (n,))


def _tries(fallback, params, index, draws, count, try_expr, steps):
    """The first accepted of ``count`` tries per element (``fallback`` where none is),
    try ``k`` computed only where the tries before it were rejected and read from the
    draws ``steps(k)`` at the elements' ``index``."""
    out = fallback.clone()
    pending = torch.arange(out.numel())
    for k in range(count):
        first, second = steps(k)
        values = {name: p[pending] for name, p in params.items()}
        values.update(u1=draws(first, index[pending]), u2=draws(second, index[pending]))
        accept, value = _compute(try_expr, values, out.dtype)
        out[pending[accept]] = _sized(value, pending.numel(), out.dtype)[accept]
        pending = pending[~accept]
        if not pending.numel():
            break
    return out


def _gamma_part(attrs, p, index, draws, dtype):
    n = index.numel()
    d, c = (_sized(v, n, dtype) for v in _compute(_GAMMA_CONSTANTS, {"alpha": p["alpha"]},
                                                  dtype))
    x = _tries(p["alpha"], {"d": d, "c": c}, index, draws, GAMMA_TRIES, _GAMMA_TRY,
               lambda k: (2 * k, 2 * k + 1))
    return _compute(_GAMMA_FINISH, dict(p, x=x, u=draws(2 * GAMMA_TRIES, index)), dtype)


def _poisson_part(attrs, p, index, draws, dtype):
    lam, n = p["lam"], index.numel()
    small = None
    if attrs["branch"] != "large":
        small = _sized(_compute(_POISSON_SMALL, {"u": draws(0, index), "lam": lam}, dtype),
                       n, dtype)
        if attrs["branch"] == "small":
            return small
    sq, log_lam, g = (_sized(v, n, dtype)
                      for v in _compute(_POISSON_CONSTANTS, {"lam": lam}, dtype))
    large = torch.floor(lam)
    # the rejection method only where it is taken (lam >= 12, or everywhere)
    rows = torch.arange(n) if small is None else \
        torch.nonzero(lam >= rm.POISSON_SMALL).reshape(-1)
    if rows.numel():
        params = {"lam": lam[rows], "sq": sq[rows], "log_lam": log_lam[rows], "g": g[rows]}
        large[rows] = _tries(large[rows], params, index[rows], draws, POISSON_TRIES,
                             _POISSON_TRY, lambda k: (2 * k + 1, 2 * k + 2))
    return large if small is None else torch.where(lam < rm.POISSON_SMALL, small, large)


def _by_parts(part, names):
    """An extern ``run`` computing ``part`` over the output's elements, ``CHUNK`` at a
    time, with the parameters ``names`` (the inputs after the seed) broadcast to it."""
    def run(attrs, ins):
        seed, *params = ins
        shape, dtype = tuple(attrs["shape"]), params[0].dtype
        flat = {k: torch.broadcast_to(v.to(dtype), shape).reshape(-1)
                for k, v in zip(names, params)}
        draws = _Draws(seed, attrs["stream"], dtype)
        total = math.prod(shape)
        out = torch.empty(total, dtype=dtype)
        for s in range(0, total, CHUNK):
            index = torch.arange(s, min(s + CHUNK, total))
            out[s:s + CHUNK] = part(attrs, {k: v[s:s + CHUNK] for k, v in flat.items()},
                                    index, draws, dtype)
        return [out.reshape(shape)]
    return run


register(OpDef(
    name="_gamma_draw_lazy", pattern="opaque", arguments=("seed", "alpha", "beta"),
    attrs=_DRAW_ATTRS, needs_random=True,
    lowering=Extern(_by_parts(_gamma_part, ("alpha", "beta"))),
    infer_shape=_draw_shape, infer_type=lambda attrs, t: (t, [t[1]]),
    reference=_draw_ref("gamma"), gradient=lambda b, n: [b.zeros_like(x) for x in n.inputs],
    doc="_gamma_draw's values, each try computed only where the ones before it were "
        "rejected (the cpu target's)."))
register(OpDef(
    name="_poisson_draw_lazy", pattern="opaque", arguments=("seed", "lam"),
    attrs=_DRAW_ATTRS + [Attr("branch", choice("both", "small", "large"), "both")],
    needs_random=True, lowering=Extern(_by_parts(_poisson_part, ("lam",))),
    infer_shape=_draw_shape, infer_type=lambda attrs, t: (t, [t[1]]),
    reference=_draw_ref("poisson"), gradient=lambda b, n: [b.zeros_like(x) for x in n.inputs],
    doc="_poisson_draw's values, each try computed only where the ones before it were "
        "rejected (the cpu target's)."))

LAZY_FORMS = {"_gamma_draw": "_gamma_draw_lazy", "_poisson_draw": "_poisson_draw_lazy"}
