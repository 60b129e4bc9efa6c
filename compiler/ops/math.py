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

from ..ir.dtypes import is_float
from ..ir.expr import ops
from .elemwise import broadcast_shape, same_shape
from .math_gradient import math_gradient
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
        _expr = lambda attrs, dy, x, y, f=_gmath: f(dy, x, y)     # noqa: E731
        register(OpDef(
            name=f"_backward_{_name}", pattern="elemwise", lowering=Pointwise(_expr),
            gradient=math_gradient(_expr),
            arguments=("ograd", "data", "output"), infer_shape=same_shape,
            reference=lambda attrs, ins, is_train, f=_gref: [f(*ins)]))


# -- binary: mod, hypot, logical and / or / xor -------------------------------------------

def _mod(a, c):
    """mxnet's mod: Python's sign rule (the divisor's sign; fmod's remainder moved by one
    divisor where their signs differ), and 0 where the divisor is 0."""
    r = ops.fmod(a, c)
    moved = ((r < 0) & (c > 0)) | ((r > 0) & (c < 0))
    return ops.where(ops.eq(c, 0.0), 0.0, ops.where(moved, r + c, r))


def _mod_ref(a, c):
    a, c = torch.broadcast_tensors(a, c)
    r = torch.fmod(a, c)
    r = torch.where(((r < 0) & (c > 0)) | ((r > 0) & (c < 0)), r + c, r)
    return torch.where(c == 0, torch.zeros_like(r), r)


def _integral(ref) -> bool:
    return ref.dtype is not None and not is_float(ref.dtype)


def _mod_gradient(b, a, c, dy):
    """d/da mod(a, c) = 1 and d/dc = -floor(a / c) (-inf where c = 0), as mxnet; its
    integer mod has zero gradients (mshadow's ``mod_grad`` / ``mod_rgrad`` are 0 but
    for floating-point types)."""
    if _integral(a):
        return b.zeros_like(a), b.zeros_like(c)
    return dy, -(dy * b.floor(a / c))


def _hypot(a, c):
    """sqrt(a^2 + c^2) without overflow or underflow on the way (C's hypot): the larger
    magnitude times sqrt(1 + ratio^2)."""
    c = abs(c) if isinstance(c, (int, float)) else ops.abs(c)     # (c: _hypot_scalar's number)
    big = ops.maximum(ops.abs(a), c)
    small = ops.minimum(ops.abs(a), c)
    q = small / big
    return ops.where(ops.eq(big, 0.0), 0.0, ops.where(
        ops.eq(big, float("inf")), big, big * ops.sqrt(1.0 + q * q)))


def _truth(v):
    return ops.ne(v, 0.0)            # mxnet's logical operators: nonzero (NaN too) is true


# name -> (math(a, c), reference(a, c), gradient(b, a, c, y, dy) -> (da, dc) before any
# sum over broadcast dims, or None for zero gradients)
BINARY = {
    "mod": (_mod, _mod_ref, lambda b, a, c, y, dy: _mod_gradient(b, a, c, dy)),
    "hypot": (_hypot, torch.hypot, lambda b, a, c, y, dy: (dy * a / y, dy * c / y)),
    "logical_and": (lambda a, c: ops.where(_truth(a) & _truth(c), 1.0, 0.0),
                    lambda a, c: ((a != 0) & (c != 0)).to(a.dtype), None),
    "logical_or": (lambda a, c: ops.where(_truth(a) | _truth(c), 1.0, 0.0),
                   lambda a, c: ((a != 0) | (c != 0)).to(a.dtype), None),
    "logical_xor": (lambda a, c: ops.where(ops.ne(_truth(a), _truth(c)), 1.0, 0.0),
                    lambda a, c: ((a != 0) ^ (c != 0)).to(a.dtype), None),
}
# mxnet's other names of the same-shape operators
_SAME_ALIASES = {"mod": "_Mod", "hypot": "_Hypot", "logical_and": "_Logical_And",
                 "logical_or": "_Logical_Or", "logical_xor": "_Logical_Xor"}


def _binary_gradient(name, broadcast):
    rule = BINARY[name][2]

    def gradient(b, n):
        a, c = n.inputs
        if rule is None:
            return [b.zeros_like(a), b.zeros_like(c)]
        da, dc = rule(b, a, c, n.outputs[0], n.ograds[0])
        if broadcast:
            da, dc = _sum_to(b, da, n.in_shapes[0]), _sum_to(b, dc, n.in_shapes[1])
        return [da, dc]
    return gradient


def _sum_to(b, ref, shape):
    if tuple(ref.shape) == tuple(shape):
        return ref
    return b.op("_sum_to_shape", ref, shape=tuple(shape))


for _name, (_math2, _ref2, _) in BINARY.items():
    for _bcast in (False, True):
        register(OpDef(
            name=f"broadcast_{_name}" if _bcast else f"_{_name}",
            pattern="broadcast" if _bcast else "elemwise",
            lowering=Pointwise(lambda attrs, a, c, f=_math2: f(a, c)),
            arguments=("lhs", "rhs"), infer_shape=broadcast_shape if _bcast else same_shape,
            reference=lambda attrs, ins, is_train, f=_ref2: [f(ins[0], ins[1])],
            gradient=_binary_gradient(_name, _bcast),
            aliases=() if _bcast else (_SAME_ALIASES[_name],)))


# -- with a scalar: x op scalar, and (r...) scalar op x --------------------------------------
# The scalar is a Python number: whatever depends on it alone is decided here, not in
# the kernel.

def _mod_by(x, s):
    """``x mod s`` for a number ``s``."""
    if s == 0:
        return ops.where(x < 0, 0.0, 0.0)        # 0 for every x (inf and NaN too), as mxnet
    r = ops.fmod(x, s)
    return ops.where(r < 0 if s > 0 else r > 0, r + s, r)


def _logical_scalar(kind):
    """``x and|or|xor s`` for a number ``s`` (true when nonzero, NaN included)."""
    def math_(x, s):
        t = s != 0
        if kind == "and" and not t or kind == "or" and t:
            return ops.where(x < 0, float(t), float(t))     # the same for every x
        if kind == "xor" and t:
            return ops.where(_truth(x), 0.0, 1.0)
        return ops.where(_truth(x), 1.0, 0.0)
    return math_


def _scalar_like(x, s):
    return torch.full_like(x, s)


def _logical_scalar_ref(name):
    return lambda x, s: BINARY[name][1](x, _scalar_like(x, s)) + x * 0.0


SCALAR = {
    # integer mods have zero gradients, as mxnet's (see _mod_gradient)
    "_mod_scalar": (_mod_by, lambda x, s: _mod_ref(x, _scalar_like(x, s)),
                    lambda b, x, y, dy, s: b.zeros_like(x) if _integral(x) else dy,
                    "_ModScalar"),
    # d/dx (s mod x) = -floor(s / x)
    "_rmod_scalar": (lambda x, s: _mod(ops.const(s), x),
                     lambda x, s: _mod_ref(_scalar_like(x, s), x),
                     lambda b, x, y, dy, s: b.zeros_like(x) if _integral(x) else
                     -(dy * b.floor(b.op("_rdiv_scalar", x, scalar=s))),
                     "_RModScalar"),
    "_hypot_scalar": (_hypot, lambda x, s: torch.hypot(x, _scalar_like(x, s)),
                      lambda b, x, y, dy, s: dy * x / y, "_HypotScalar"),
    "_logical_and_scalar": (_logical_scalar("and"), _logical_scalar_ref("logical_and"), None,
                            "_LogicalAndScalar"),
    "_logical_or_scalar": (_logical_scalar("or"), _logical_scalar_ref("logical_or"), None,
                           "_LogicalOrScalar"),
    "_logical_xor_scalar": (_logical_scalar("xor"), _logical_scalar_ref("logical_xor"), None,
                            "_LogicalXorScalar"),
}


def _scalar_gradient(rule):
    def gradient(b, n):
        if rule is None:
            return [b.zeros_like(n.inputs[0])]
        return [rule(b, n.inputs[0], n.outputs[0], n.ograds[0], n.attrs["scalar"])]
    return gradient


for _name, (_math2, _ref2, _grad2, _alias) in SCALAR.items():
    register(OpDef(
        name=_name, pattern="elemwise",
        lowering=Pointwise(lambda attrs, x, f=_math2: f(x, attrs["scalar"])),
        attrs=[Attr("scalar", parse_float, 1.0), Attr("is_int", parse_str, "True")],
        infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_ref2: [f(ins[0], attrs["scalar"])],
        gradient=_scalar_gradient(_grad2), aliases=(_alias,)))
