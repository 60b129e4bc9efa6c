"""Special functions spelled out in the expression vocabulary: the default definitions of
the composites ``lgamma``, ``digamma``, ``gamma`` and ``erfinv`` (``ir/expr.py``).

A target with its own kernel for one of them implements the primitive (the cpu target
calls ATen's ``lgamma``, ``digamma`` and ``erfinv``); Triton has none in its interpreter
(and libdevice is not there either), so it emits these definitions, which use only
``exp``, ``log``, ``sin``, ``cos``, ``erf`` and arithmetic. They keep float64 accuracy
to about 1e-14 relative away from the poles, well inside float32's rounding.

Each function takes the vocabulary ``ops`` as its first argument (``ir/expr.py`` passes
its own), so this module imports nothing of ``expr``.
"""
from __future__ import annotations

import math


# Lanczos's approximation, g = 7, nine terms (relative error below 1e-15 for x >= 0.5).
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
            771.32342877765313, -176.61502916214059, 12.507343278686905,
            -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _lanczos_lgamma(ops, x):
    """``lgamma(x)`` for ``x >= 0.5`` (Lanczos's series over ``x - 1``)."""
    z = x - 1.0
    acc = _LANCZOS[0]
    for k, c in enumerate(_LANCZOS[1:], start=1):
        acc = acc + c / (z + float(k))
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * ops.log(t) - t + ops.log(acc)


_SIN = [(-1.0) ** k / math.factorial(2 * k + 1) for k in range(11, -1, -1)]
_COS = [(-1.0) ** k / math.factorial(2 * k) for k in range(11, -1, -1)]


def _sin_cos_pi(ops, x):
    """``sin(pi x)`` and ``cos(pi x)``: ``x`` reduced exactly to ``[-1, 1)`` (fmod by 2;
    ``pi x`` itself loses the fraction of a large ``x``), folded to ``a`` in
    ``[0, 1/2]`` by symmetry, then Taylor series in ``pi a`` (to ``(pi/2)**23``: below
    float64's rounding). No ``sin`` / ``cos`` instruction: float64 ``sin`` on a GPU is
    libdevice's, whose slow path keeps an array in local memory."""
    r = _reduce2(ops, x)
    a = ops.abs(r)
    far = a > 0.5
    t = math.pi * ops.where(far, 1.0 - a, a)
    z = t * t
    sin, cos = _SIN[0], _COS[0]
    for cs, cc in zip(_SIN[1:], _COS[1:]):
        sin = sin * z + cs
        cos = cos * z + cc
    sin = sin * t
    return ops.where(r < 0.0, -sin, sin), ops.where(far, -cos, cos)


def _sin_pi(ops, x):
    """``sin(pi x)`` (see :func:`_sin_cos_pi`)."""
    return _sin_cos_pi(ops, x)[0]


def lgamma(ops, x):
    """``log|Gamma(x)|``: Lanczos for ``x >= 0.5``, the reflection
    ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` below (``inf`` at the poles 0, -1, ...)."""
    right = _lanczos_lgamma(ops, ops.maximum(x, 0.5))
    left = ops.log(math.pi / ops.abs(_sin_pi(ops, x))) - \
        _lanczos_lgamma(ops, ops.maximum(1.0 - x, 0.5))
    pole = (x <= 0.0) & ops.eq(x, ops.floor(x))
    return ops.where(x >= 0.5, right, ops.where(pole, float("inf"), left))


def gamma(ops, x):
    """``Gamma(x)`` = ``exp(lgamma(x))`` with the sign of the interval it lies in
    (negative on ``(-1, 0)``, ``(-3, -2)``, ...)."""
    odd = ops.ne(ops.fmod(ops.floor(x), 2.0), 0.0)
    sign = ops.where((x < 0.0) & odd, -1.0, 1.0)
    return sign * ops.exp(lgamma(ops, x))


# Bernoulli terms of the asymptotic digamma series: B_2k / (2k), k = 1..7
_DIGAMMA_ASYMPTOTIC = (1.0 / 12.0, -1.0 / 120.0, 1.0 / 252.0, -1.0 / 240.0, 1.0 / 132.0,
                       -691.0 / 32760.0, 1.0 / 12.0)
_DIGAMMA_SHIFT = 10


def _digamma_positive(ops, x):
    """``digamma(x)`` for ``x > 0``: ``x`` moved up by 10 through the recurrence
    ``psi(x) = psi(x + 1) - 1 / x``, then the asymptotic series."""
    acc = 0.0
    for k in range(_DIGAMMA_SHIFT):
        acc = acc + 1.0 / (x + float(k))
    y = x + float(_DIGAMMA_SHIFT)
    w = 1.0 / (y * y)
    series = _DIGAMMA_ASYMPTOTIC[-1]
    for c in reversed(_DIGAMMA_ASYMPTOTIC[:-1]):
        series = c + w * series
    return ops.log(y) - 0.5 / y - w * series - acc


def digamma(ops, x):
    """``psi(x)``, the derivative of ``lgamma``: the reflection
    ``psi(1 - x) - pi cos(pi x) / sin(pi x)`` for ``x <= 0``."""
    right = _digamma_positive(ops, ops.where(x > 0.0, x, 1.0))
    s, c = _sin_cos_pi(ops, x)
    left = _digamma_positive(ops, ops.maximum(1.0 - x, 1.0)) - math.pi * c / s
    return ops.where(x > 0.0, right, left)


def _reduce2(ops, x):
    """``x`` less a multiple of 2, in ``[-1, 1)`` (exact)."""
    r = ops.fmod(x, 2.0)
    return ops.where(r >= 1.0, r - 2.0, ops.where(r < -1.0, r + 2.0, r))


# Giles's single-precision erfinv ("Approximating the erfinv function", 2010)
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(ops, coeffs, t):
    acc = coeffs[0]
    for c in coeffs[1:]:
        acc = acc * t + c
    return acc


def erfinv(ops, y):
    """The inverse error function on ``[-1, 1]``: Giles's approximation refined by two
    Newton steps on ``erf(x) - y`` (each squares the relative error); ``+-inf`` at
    ``+-1``, NaN outside."""
    w = -ops.log((1.0 - y) * (1.0 + y))
    central = _horner(ops, _GILES_CENTRAL, w - 2.5)
    tail = _horner(ops, _GILES_TAIL, ops.sqrt(ops.maximum(w, 5.0)) - 3.0)
    x = ops.where(w < 5.0, central, tail) * y
    for _ in range(2):
        x = x - (ops.erf(x) - y) / ((2.0 / math.sqrt(math.pi)) * ops.exp(-x * x))
    edge = ops.eq(ops.abs(y), 1.0)
    return ops.where(edge, y * float("inf"), ops.where(ops.abs(y) > 1.0, float("nan"), x))
