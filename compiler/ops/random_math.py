"""Deterministic math for the rejection and inversion samplers of ``random_more.py``.

As in ``random.py`` (whose ``soft_log`` and ``soft_sqrt`` these build on), everything
is ``+ - * /``, comparisons, ``floor`` and ``where``: IEEE operations that the cpu and
interpret targets round alike. A product that is added to something is either exact
or kept apart from its sum (:func:`plus`), since the cpu target would fuse the pair
into one single-rounding ``addcmul``.
"""
from __future__ import annotations

import math

from ..ir.expr import ops
from .random import _LN2_HI, _LN2_LO, _TWO_M32, _normal_math, soft_log

_INV_LN2 = 1.0 / math.log(2.0)


def plus(a, p):
    """``a + p`` for a product ``p``, with two roundings on every target."""
    return a - ops.neg(p)


def soft_log_any(x):
    """``log(x)`` for any positive float32 ``x``: ``x > 1`` through ``-log(1 / x)`` (the
    division rounds once), tiny ``x`` scaled by exact powers ``2**32`` into
    ``soft_log``'s range ``[2**-32, 1]``."""
    big = x > 1.0
    y = ops.where(big, 1.0 / x, x)
    shift = 0.0
    for _ in range(3):
        tiny = y < _TWO_M32
        y = ops.where(tiny, y * 4294967296.0, y)
        shift = ops.where(tiny, shift + 32.0, shift)
    low = soft_log(y)
    low = plus(low, shift * -_LN2_LO) + shift * -_LN2_HI     # shift * HI is exact
    return ops.where(big, -low, low)


_EXP_TERMS = [1.0 / math.factorial(k) for k in range(13, -1, -1)]


def soft_exp(x):
    """``exp(x)`` for ``x <= 88``: ``x = n ln 2 + r`` with ``|r| <= ln2 / 2`` (Cody and
    Waite's two-part ``ln 2``), a Taylor series of ``e**r`` to ``r**13``, and ``2**n``
    applied as exact power-of-two factors (0 below about ``-150``)."""
    x = ops.maximum(x, -200.0)
    n = ops.floor(x * _INV_LN2 + 0.5)
    r = plus(x - n * _LN2_HI, n * -_LN2_LO)
    acc = _EXP_TERMS[0]
    for c in _EXP_TERMS[1:]:
        acc = acc * r + c
    neg = n < 0.0
    m = ops.abs(n)
    for k in (128, 64, 32, 16, 8, 4, 2, 1):
        step = m >= float(k)
        # 2**-128 is subnormal in float32: two halves keep each factor normal
        factor = ops.where(neg, 2.0 ** -min(k, 64), 2.0 ** min(k, 64))
        acc = ops.where(step, acc * factor, acc)
        if k == 128:
            acc = ops.where(step, acc * factor, acc)
        m = ops.where(step, m - float(k), m)
    return acc


def soft_sqrt_any(y):
    """``sqrt(y)`` for positive ``y``: ``exp(log(y) / 2)`` refined by two Newton steps."""
    r = soft_exp(0.5 * soft_log_any(y))
    for _ in range(2):
        r = 0.5 * (r + y / r)
    return r


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def soft_lgamma(z):
    """``lgamma(z)`` for ``z >= 1``: Stirling's series (to ``z**-5``) at ``z >= 8``,
    below that at ``z + 8`` less ``log(z (z + 1) ... (z + 7))``."""
    small = z < 8.0
    y = ops.where(small, z + 8.0, z)
    prod = z
    for k in range(1, 8):
        prod = prod * (z + float(k))
    inv = 1.0 / y
    w = inv * inv
    tail = inv * (1.0 / 12.0 - w * (1.0 / 360.0 - w * (1.0 / 1260.0)))
    log_y = soft_log_any(y)
    stirling = plus(ops.neg(y), (y - 0.5) * log_y) + (_HALF_LOG_2PI + tail)
    return ops.where(small, stirling - soft_log_any(ops.where(small, prod, 1.0)), stirling)


_LGAMMA_INT = [math.lgamma(k + 1.0) for k in range(8)]


def soft_lgamma_count(n):
    """``lgamma(n + 1) = log(n!)`` for a whole number ``n >= 0``: a table below 8,
    Stirling's series above."""
    big = n >= 8.0
    z = ops.where(big, n + 1.0, 9.0)
    log_z = soft_log_any(z)
    inv = 1.0 / z
    w = inv * inv
    tail = inv * (1.0 / 12.0 - w * (1.0 / 360.0 - w * (1.0 / 1260.0)))
    out = plus(ops.neg(z), (z - 0.5) * log_z) + (_HALF_LOG_2PI + tail)
    for k in range(8):
        out = ops.where(ops.eq(n, float(k)), _LGAMMA_INT[k], out)
    return out


def _sin_cos(a):
    """Taylor series of ``sin(a)`` and ``cos(a)`` for ``|a| <= pi / 2``."""
    z = a * a
    s, c = 1.0 / math.factorial(19), 1.0 / math.factorial(20)
    for k in range(17, 0, -2):
        s = s * ops.neg(z) + 1.0 / math.factorial(k)
        c = c * ops.neg(z) + 1.0 / math.factorial(k + 1)
    return s * a, c * ops.neg(z) + 1.0


def tan_pi(u):
    """``tan(pi u)`` for ``u`` in ``[0, 1)`` (a standard Cauchy variate for uniform
    ``u``): ``-cos(pi v) / sin(pi v)`` at ``v = u - 1/2``, clamped to ``+-1e7``."""
    s, c = _sin_cos(math.pi * (u - 0.5))
    t = ops.where(ops.eq(s, 0.0), 1e7, ops.neg(c) / ops.where(ops.eq(s, 0.0), 1.0, s))
    return ops.minimum(ops.maximum(t, -1e7), 1e7)


# -- gamma: Marsaglia and Tsang ------------------------------------------------------------

def gamma_constants(alpha):
    """Marsaglia and Tsang's ``d`` and ``c = 1 / sqrt(9 d)`` of Gamma(alpha, 1) (alpha < 1
    is drawn as alpha + 1, as mxnet)."""
    d = ops.where(alpha < 1.0, alpha + 2.0 / 3.0, alpha - 1.0 / 3.0)
    return d, 1.0 / soft_sqrt_any(9.0 * d)


def gamma_try(u1, u2, d, c):
    """One try of Marsaglia and Tsang's method from draws ``u1``, ``u2``: whether it is
    accepted, and its value ``d V``."""
    z = _normal_math({}, u1)
    x = plus(1.0, c * z)
    v = x * x * x
    ok = x > 0.0
    safe_v = ops.where(ok, v, 1.0)
    rhs = plus(0.5 * z * z, d * plus(1.0 - safe_v, 3.0 * soft_log_any(ops.where(ok, x, 1.0))))
    return ok & (soft_log(u2 + _TWO_M32) < rhs), d * safe_v


def gamma_round(prev, u1, u2, d, c):
    """One try (:func:`gamma_try`): its value where accepted, else ``prev`` (the later
    tries' result)."""
    accept, value = gamma_try(u1, u2, d, c)
    return ops.where(accept, value, prev)


def gamma_finish(x, u, alpha, beta):
    """A Gamma(alpha, 1) try times ``beta``; for alpha < 1, first times ``u**(1/alpha)``."""
    boost = soft_exp(soft_log(u + _TWO_M32) / ops.where(alpha < 1.0, alpha, 1.0))
    return ops.where(alpha < 1.0, x * boost, x) * beta


# -- poisson ---------------------------------------------------------------------------------

POISSON_SMALL = 12.0         # mxnet's switch from counting to the rejection method
POISSON_TERMS = 40           # P(X > 40) < 1e-9 for lambda < 12


def poisson_small(u, lam):
    """Inversion: the count of terms of Poisson(lam)'s cdf that ``u`` exceeds (the same
    distribution as mxnet's product of uniforms, from one draw)."""
    lam = ops.minimum(lam, POISSON_SMALL)
    p = soft_exp(ops.neg(lam))
    cdf = p
    count = 0.0
    for k in range(1, POISSON_TERMS + 1):
        count = ops.where(u > cdf, count + 1.0, count)
        p = p * lam / float(k)
        cdf = cdf + p
    return count


def poisson_constants(lam):
    """``sqrt(2 lam)``, ``log(lam)`` and ``lam log(lam) - lgamma(lam + 1)`` of the
    rejection method (lam raised to 12 where it is smaller: that branch is not taken)."""
    lam = ops.maximum(lam, POISSON_SMALL)
    log_lam = soft_log_any(lam)
    return soft_sqrt_any(2.0 * lam), log_lam, plus(ops.neg(soft_lgamma(lam + 1.0)), lam * log_lam)


def poisson_try(u1, u2, lam, consts):
    """One try of the rejection method mxnet takes for ``lam >= 12`` (Numerical
    Recipes' ``poidev``: a Lorentzian envelope): whether it is accepted, and its count."""
    sq, log_lam, g = consts
    lam = ops.maximum(lam, POISSON_SMALL)
    y = tan_pi(u1)
    em = plus(lam, sq * y)
    ok = em >= 0.0
    em = ops.floor(ops.maximum(em, 0.0))
    expo = plus(ops.neg(soft_lgamma_count(em) + g), em * log_lam)
    t = 0.9 * plus(1.0, y * y) * soft_exp(ops.minimum(expo, 80.0))
    return ok & (u2 <= t), em


def poisson_round(prev, u1, u2, lam, consts):
    """One try (:func:`poisson_try`): its count where accepted, else ``prev``."""
    accept, value = poisson_try(u1, u2, lam, consts)
    return ops.where(accept, value, prev)
