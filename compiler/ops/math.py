"""mxnet's elementwise math beyond ``elemwise.py``: trigonometric and hyperbolic functions
and their inverses, degrees / radians, rounding (floor, ceil, round, rint, fix, trunc),
log10 / log2 / log1p / expm1, rsqrt, erf, logical_not; the binary ``mod`` (``_mod``,
``broadcast_mod``, ``_mod_scalar``, ``_rmod_scalar``), ``hypot`` and the logical
and / or / xor.

Each unary row holds the forward math (in the vocabulary of ``compiler/ir/expr.py``),
the torch reference, and the gradient (math and reference), or ``None`` where mxnet's
gradient is zero (the rounding functions, logical_not: mxnet registers no backward
operator for them, their gradient is zeros). Functions Triton has no instruction for
are written from those it has, keeping float32 rounding (``tan`` = sin / cos; the
inverse functions through ``atan``, ``log1p``, ``expm1``; ``ir/expr.py`` and
``templates/_macros.py.j2`` say how those three stay accurate).
"""
from __future__ import annotations

import math

import torch

from ..ir.expr import ops
from .elemwise import broadcast_shape, same_shape
from .registry import Attr, OpDef, Pointwise, parse_float, parse_str, register

_LN2 = math.log(2.0)
# Above 2**28, sqrt(a^2 +- 1) = a in float64 too: asinh(a) = acosh(a) = log(2a),
# and a^2 cannot overflow on the way.
_HUGE = 268435456.0


def _sign_as(x, v):
    """``v`` with ``x``'s sign (``v`` >= 0)."""
    return ops.where(x < 0, -v, v)


def _sinh(x):
    a = ops.abs(x)
    u = ops.expm1(a)                 # near 0: (e^a - e^-a) / 2 = (u + u / (u + 1)) / 2
    e = ops.exp(a)
    return _sign_as(x, ops.where(a < 1.0, 0.5 * (u + u / (u + 1.0)), 0.5 * (e - 1.0 / e)))


def _cosh(x):
    e = ops.exp(ops.abs(x))
    return 0.5 * (e + 1.0 / e)


def _asinh(x):
    a = ops.abs(x)
    near = ops.log1p(a + a * a / (1.0 + ops.sqrt(1.0 + a * a)))
    return _sign_as(x, ops.where(a > _HUGE, ops.log(a) + _LN2, near))


def _acosh(x):
    t = x - 1.0                      # exact near 1, where x^2 - 1 would cancel
    return ops.where(x > _HUGE, ops.log(x) + _LN2, ops.log1p(t + ops.sqrt(t * (x + 1.0))))


def _atanh(x):
    a = ops.abs(x)
    return _sign_as(x, 0.5 * ops.log1p(2.0 * a / (1.0 - a)))


def _asin(x):
    # (1 - x)(1 + x): 1 - x^2 without the cancellation near |x| = 1
    return ops.atan(x / ops.sqrt((1.0 - x) * (1.0 + x)))


def _acos(x):
    return 2.0 * ops.atan(ops.sqrt((1.0 - x) / (1.0 + x)))


def _trunc(x):
    return ops.where(x < 0, ops.ceil(x), ops.floor(x))


def _round(x):
    """Half away from zero (C's round): ``floor(x + 0.5)`` would round 0.49999997 up."""
    t = _trunc(x)
    return ops.where(ops.abs(x - t) >= 0.5, t + _sign_as(x, 1.0), t)


def _rint(x):
    """mxnet's rint: the nearer of floor and ceil, floor at a tie (rint(2.5) = 2,
    rint(-2.5) = -3), not IEEE's half to even."""
    f, c = ops.floor(x), ops.ceil(x)
    return ops.where(x - f <= c - x, f, c)


def _rint_ref(x):
    f, c = torch.floor(x), torch.ceil(x)
    return torch.where(x - f <= c - x, f, c)


def _round_ref(x):
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


# name -> (math(x), reference(x), grad_math(dy, x, y) or None, grad_ref(dy, x, y) or None)
# (None: mxnet's gradient is zero)
UNARY = {
    "sin": (ops.sin, torch.sin, lambda dy, x, y: dy * ops.cos(x),
            lambda dy, x, y: dy * torch.cos(x)),
    "cos": (ops.cos, torch.cos, lambda dy, x, y: -dy * ops.sin(x),
            lambda dy, x, y: -dy * torch.sin(x)),
    "tan": (ops.tan, torch.tan, lambda dy, x, y: dy * (1.0 + y * y),
            lambda dy, x, y: dy * (1 + y * y)),
    "arcsin": (_asin, torch.asin, lambda dy, x, y: dy / ops.sqrt((1.0 - x) * (1.0 + x)),
               lambda dy, x, y: dy / torch.sqrt(1 - x * x)),
    "arccos": (_acos, torch.acos, lambda dy, x, y: -dy / ops.sqrt((1.0 - x) * (1.0 + x)),
               lambda dy, x, y: -dy / torch.sqrt(1 - x * x)),
    "arctan": (ops.atan, torch.atan, lambda dy, x, y: dy / (x * x + 1.0),
               lambda dy, x, y: dy / (x * x + 1)),
    "sinh": (_sinh, torch.sinh, lambda dy, x, y: dy * _cosh(x),
             lambda dy, x, y: dy * torch.cosh(x)),
    "cosh": (_cosh, torch.cosh, lambda dy, x, y: dy * _sinh(x),
             lambda dy, x, y: dy * torch.sinh(x)),
    "arcsinh": (_asinh, torch.asinh, lambda dy, x, y: dy / ops.sqrt(x * x + 1.0),
                lambda dy, x, y: dy / torch.sqrt(x * x + 1)),
    "arccosh": (_acosh, torch.acosh, lambda dy, x, y: dy / ops.sqrt((x - 1.0) * (x + 1.0)),
                lambda dy, x, y: dy / torch.sqrt(x * x - 1)),
    "arctanh": (_atanh, torch.atanh, lambda dy, x, y: dy / ((1.0 - x) * (1.0 + x)),
                lambda dy, x, y: dy / (1 - x * x)),
    "degrees": (lambda x: x * (180.0 / math.pi), torch.rad2deg,
                lambda dy, x, y: dy * (180.0 / math.pi), lambda dy, x, y: dy * (180 / math.pi)),
    "radians": (lambda x: x * (math.pi / 180.0), torch.deg2rad,
                lambda dy, x, y: dy * (math.pi / 180.0), lambda dy, x, y: dy * (math.pi / 180)),
    "floor": (ops.floor, torch.floor, None, None),
    "ceil": (ops.ceil, torch.ceil, None, None),
    "trunc": (_trunc, torch.trunc, None, None),
    "fix": (_trunc, torch.trunc, None, None),
    "round": (_round, _round_ref, None, None),
    "rint": (_rint, _rint_ref, None, None),
    "log10": (ops.log10, torch.log10, lambda dy, x, y: dy / (x * math.log(10.0)),
              lambda dy, x, y: dy / (x * math.log(10))),
    "log2": (ops.log2, torch.log2, lambda dy, x, y: dy / (x * _LN2),
             lambda dy, x, y: dy / (x * _LN2)),
    "log1p": (ops.log1p, torch.log1p, lambda dy, x, y: dy / (1.0 + x),
              lambda dy, x, y: dy / (1 + x)),
    "expm1": (ops.expm1, torch.expm1, lambda dy, x, y: dy * ops.exp(x),
              lambda dy, x, y: dy * torch.exp(x)),
    # 1 / sqrt(x), its gradient -x^(-3/2) / 2 = -y / (2x) (Triton's rsqrt instruction is
    # an approximation on a GPU; the division is exact to rounding)
    "rsqrt": (lambda x: 1.0 / ops.sqrt(x), torch.rsqrt, lambda dy, x, y: -0.5 * dy * y / x,
              lambda dy, x, y: -0.5 * dy * y / x),
    "erf": (ops.erf, torch.erf, lambda dy, x, y: dy * (2.0 / math.sqrt(math.pi)) * ops.exp(-x * x),
            lambda dy, x, y: dy * (2 / math.sqrt(math.pi)) * torch.exp(-x * x)),
    # mxnet's logical_not: 1 where x == 0, else 0 (NaN counts as true)
    "logical_not": (lambda x: ops.where(ops.eq(x, 0.0), 1.0, 0.0),
                    lambda x: (x == 0).to(x.dtype), None, None),
}


def _unary_gradient(name, zero):
    def gradient(b, n):
        if zero:
            return [b.zeros_like(n.inputs[0])]
        return [b.op(f"_backward_{name}", n.ograds[0], n.inputs[0], n.outputs[0])]
    return gradient


for _name, (_math, _ref, _gmath, _gref) in UNARY.items():
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(lambda attrs, x, f=_math: f(x)),
        infer_shape=same_shape, reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0])],
        gradient=_unary_gradient(_name, _gmath is None)))
    if _gmath is not None:
        register(OpDef(
            name=f"_backward_{_name}", pattern="elemwise",
            lowering=Pointwise(lambda attrs, dy, x, y, f=_gmath: f(dy, x, y)),
            arguments=("ograd", "data", "output"), infer_shape=same_shape,
            reference=lambda attrs, ins, is_train, f=_gref: [f(*ins)]))
