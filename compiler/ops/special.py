"""mxnet's special functions: ``gamma``, ``gammaln`` and ``erfinv``, with their
gradients as mxnet defines them: ``gamma(x) * psi(x)``, ``psi(x)`` (``psi`` is
``+inf`` at its poles, 0 and the negative integers, as mxnet's) and
``sqrt(pi) / 2 * exp(y**2)`` from erfinv's output ``y``.

Their math is the vocabulary's composites ``gamma``, ``lgamma``, ``digamma`` and
``erfinv`` (``compiler/ir/special.py`` spells them out for Triton; the cpu target calls
ATen's kernels).
"""
from __future__ import annotations

import math

import torch

from ..ir.expr import ops
from .elemwise import same_shape
from .math_gradient import derivable, math_gradient
from .registry import OpDef, Pointwise, register

_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)


def _torch_gamma(x):
    """Gamma(x) in torch: exp(lgamma) with the sign of the interval x lies in."""
    sign = torch.where((x < 0) & (torch.fmod(torch.floor(x), 2) != 0), -1.0, 1.0)
    return sign.to(x.dtype) * torch.exp(torch.lgamma(x))


def _pole(x):
    return (x <= 0.0) & ops.eq(ops.floor(x), x)


def _tgamma(x):
    """Gamma(x) as C's ``tgamma`` (mxnet's): ``+-inf`` at ``+-0`` (``1 / x``), NaN at
    the negative integers."""
    return ops.where(_pole(x), ops.where(ops.eq(x, 0.0), 1.0 / x, math.nan), ops.gamma(x))


def _torch_tgamma(x):
    pole = (x <= 0) & (torch.floor(x) == x)
    at_pole = torch.where(x == 0, 1.0 / x, torch.full_like(x, math.nan))
    return torch.where(pole, at_pole, _torch_gamma(x))


def _psi(x):
    """mxnet's digamma: ``+inf`` at its poles (0 and the negative integers, as cephes'
    ``psi``), where ATen's gives -inf at +0 and NaN below."""
    return ops.where(_pole(x), math.inf, ops.digamma(x))


def _torch_psi(x):
    pole = (x <= 0) & (torch.floor(x) == x)
    return torch.where(pole, torch.full_like(x, math.inf), torch.digamma(x))


# name -> (math, torch reference, gradient math (dy, x, y), its torch reference)
SPECIAL = {
    "gamma": (_tgamma, _torch_tgamma,
              lambda dy, x, y: dy * (_tgamma(x) * _psi(x)),
              lambda dy, x, y: dy * (_torch_tgamma(x) * _torch_psi(x))),
    "gammaln": (ops.lgamma, torch.lgamma, lambda dy, x, y: dy * _psi(x),
                lambda dy, x, y: dy * _torch_psi(x)),
    "erfinv": (ops.erfinv, torch.erfinv,
               lambda dy, x, y: dy * (_HALF_SQRT_PI * ops.exp(y * y)),
               lambda dy, x, y: dy * (_HALF_SQRT_PI * torch.exp(y * y))),
}
_DOC = {"gamma": "Gamma(x), the gamma function (C's tgamma: +-inf at +-0, NaN at the "
                 "negative integers)",
        "gammaln": "log|Gamma(x)|, the log of the gamma function's magnitude (lgamma)",
        "erfinv": "the inverse error function: erf(out) = x on [-1, 1]"}


def _gradient(name):
    def gradient(b, n):
        return [b.op(f"_backward_{name}", n.ograds[0], n.inputs[0], n.outputs[0])]
    return gradient


for _name, (_math, _ref, _gmath, _gref) in SPECIAL.items():
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(lambda attrs, x, f=_math: f(x)),
        infer_shape=same_shape, reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0])],
        gradient=_gradient(_name), doc=f"out = {_DOC[_name]}, elementwise."))
    _expr = lambda attrs, dy, x, y, f=_gmath: f(dy, x, y)     # noqa: E731
    register(OpDef(
        name=f"_backward_{_name}", pattern="elemwise", lowering=Pointwise(_expr),
        gradient=math_gradient(_expr) if derivable(_expr, 3) else None,
        arguments=("ograd", "data", "output"), infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_gref: [f(*ins)],
        doc=f"The gradient of {_name}."))
