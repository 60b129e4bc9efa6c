"""mxnet's densities (its ``_random_pdf_*`` operators): ``_random_pdf_X``
(alias ``random_pdf_X``) for uniform, normal, gamma, exponential, poisson,
negative_binomial, generalized_negative_binomial and dirichlet, with ``is_log``.

``sample`` has the parameters' shape followed by any number of further dims (one
distribution per parameter element, many samples of it); the output has ``sample``'s
shape. mxnet's parameterisation, which is not always its samplers': gamma's ``beta`` is a
rate here, negative_binomial's ``p`` enters as ``k log p + x log(1 - p)``, and
generalized_negative_binomial is negative_binomial at ``k = 1 / alpha``,
``p = 1 / (mu alpha + 1)``. Gradients are mxnet's: every parameter's, and the sample's
only for normal, gamma, exponential and dirichlet (zero for the others, as mxnet).

Each density is a ``Decompose``: the parameters are reshaped to broadcast over the sample
(trailing 1s) and one pointwise op computes the log density (then ``exp`` unless
``is_log``); the gradient is one pointwise op per input, summed over the sample dims for
a parameter. dirichlet's vector samples use graph ops (its sums run along the last axis).
"""
from __future__ import annotations

import math
import types

import torch

from ..ir.expr import ops
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, merge_shape, parse_bool,
                       parse_int, register)

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _nb_lpdf(m, x, k, p):
    return (m.lgamma(x + k) - m.lgamma(x + 1.0) - m.lgamma(k)) + k * m.log(p) + \
        x * m.log(1.0 - p)


def _nb_grads(m, x, k, p):
    return m.digamma(x + k) - m.digamma(k) + m.log(p), k / p - x / (1.0 - p)


def _gnb_grads(m, x, mu, alpha):
    den = mu * alpha + 1.0
    gl, gp = _nb_grads(m, x, 1.0 / alpha, 1.0 / den)
    return [None, -gp * alpha / (den * den), -gl / (alpha * alpha) - gp * mu / (den * den)]


# dist -> (parameter names, log density (m, x, *params), d log density / d (x, *params)
# with None for mxnet's zero); ``m`` is the math namespace: ``ops`` in kernels, torch in
# the reference
DENSITIES = {
    "uniform": (("low", "high"), lambda m, x, lo, hi: -m.log(hi - lo),
                lambda m, x, lo, hi: [None, 1.0 / (hi - lo), 1.0 / (lo - hi)]),
    "normal": (("mu", "sigma"),
               lambda m, x, mu, s: -0.5 * (x - mu) * (x - mu) / (s * s) - m.log(s) - _HALF_LOG_2PI,
               lambda m, x, mu, s: [(mu - x) / (s * s), (x - mu) / (s * s),
                                    ((x - mu) * (x - mu) - s * s) / (s * s * s)]),
    "gamma": (("alpha", "beta"),
              lambda m, x, a, b: a * m.log(b) + (a - 1.0) * m.log(x) - b * x - m.lgamma(a),
              lambda m, x, a, b: [(a - 1.0) / x - b, m.log(b) + m.log(x) - m.digamma(a),
                                  a / b - x]),
    "exponential": (("lam",), lambda m, x, lam: m.log(lam) - lam * x,
                    lambda m, x, lam: [-lam, 1.0 / lam - x]),
    "poisson": (("lam",), lambda m, x, lam: x * m.log(lam) - m.lgamma(x + 1.0) - lam,
                lambda m, x, lam: [None, x / lam - 1.0]),
    "negative_binomial": (("k", "p"), _nb_lpdf,
                          lambda m, x, k, p: [None, *_nb_grads(m, x, k, p)]),
    "generalized_negative_binomial": (
        ("mu", "alpha"),
        lambda m, x, mu, alpha: _nb_lpdf(m, x, 1.0 / alpha, 1.0 / (mu * alpha + 1.0)),
        _gnb_grads),
}
TORCH = types.SimpleNamespace(log=torch.log, lgamma=torch.lgamma, digamma=torch.digamma,
                              exp=torch.exp)


def _pdf_math(dist):
    lpdf = DENSITIES[dist][1]

    def expr(attrs, x, *params):
        v = lpdf(ops, x, *params)
        return v if attrs["is_log"] else ops.exp(v)
    return expr


def _grad_math(dist):
    grads = DENSITIES[dist][2]

    def expr(attrs, dy, out, x, *params):
        scaling = dy if attrs["is_log"] else dy * out
        return scaling * grads(ops, x, *params)[attrs["wrt"]]
    return expr


def _pdf_shape(dist, vector=False):
    names = DENSITIES[dist][0] if not vector else ("alpha",)

    def rule(attrs, in_shapes):
        sample, *params = in_shapes
        base = None
        for arg, s in zip(names, params):
            base = merge_shape(base, s, f"_random_pdf_{dist} input '{arg}'")
        if sample is None or base is None:
            return in_shapes, [None if sample is None else _pdf_out(sample, vector)]
        if len(base) > len(sample):
            raise ShapeError(f"_random_pdf_{dist}: dimension of input samples "
                             f"({len(sample)}) must be at least dimension of distribution "
                             f"parameters ({len(base)})")
        want = tuple(sample[:len(base)])
        if vector:
            want = want[:-1] + (sample[-1],)
        merge_shape(want, base, f"_random_pdf_{dist} parameters against the sample "
                                f"{tuple(sample)}")
        return [sample] + [want] * len(params), [_pdf_out(sample, vector)]
    return rule


def _pdf_out(sample, vector):
    if not vector:
        return tuple(sample)
    return (1,) if len(sample) == 1 else tuple(sample[:-1])


def _spread(b, p, rank):
    """Parameter ``p`` with trailing 1s up to ``rank`` dims (it broadcasts over the
    sample's further dims)."""
    extra = rank - len(p.shape)
    return p if extra == 0 else b.op("Reshape", p, shape=tuple(p.shape) + (1,) * extra)


def _expand(p, x):
    return p.reshape(tuple(p.shape) + (1,) * (x.dim() - p.dim()))


def _pdf_ref(dist):
    def ref(attrs, ins, is_train):
        x, *params = [t.double() for t in ins]
        v = DENSITIES[dist][1](TORCH, x, *[_expand(p, x) for p in params])
        return [(v if attrs["is_log"] else torch.exp(v)).to(ins[0].dtype)]
    return ref


def _pdf_build(dist):
    def build(b, n, is_train):
        x, *params = n.inputs
        params = [_spread(b, p, len(x.shape)) for p in params]
        return [b.op(f"_pdf_{dist}", x, *params, is_log=n.attrs["is_log"])]
    return build


def _pdf_gradient(dist):
    ones = [torch.ones(1)] * (1 + len(DENSITIES[dist][0]))
    zero = [g is None for g in DENSITIES[dist][2](TORCH, *ones)]

    def gradient(b, n):
        x, *params = n.inputs
        spread = [_spread(b, p, len(x.shape)) for p in params]
        out = []
        for wrt, target in enumerate([x] + params):
            if zero[wrt]:
                out.append(b.zeros_like(target))
                continue
            g = b.op(f"_backward_pdf_{dist}", n.ograds[0], n.outputs[0], x, *spread,
                     wrt=wrt, is_log=n.attrs["is_log"])
            if wrt and len(target.shape) < len(x.shape):
                axes = tuple(range(len(target.shape), len(x.shape)))
                g = b.op("sum", g, axis=axes)
            out.append(g)
        return out
    return gradient


def _register(dist):
    names = DENSITIES[dist][0]
    log_attr = [Attr("is_log", parse_bool, False)]
    register(OpDef(
        name=f"_random_pdf_{dist}", aliases=(f"random_pdf_{dist}",), pattern="composite",
        arguments=("sample",) + names, attrs=log_attr, lowering=Decompose(_pdf_build(dist)),
        infer_shape=_pdf_shape(dist), reference=_pdf_ref(dist),
        gradient=_pdf_gradient(dist),
        doc=f"The {dist} density (log density where is_log) of each sample under the "
            f"parameters ({', '.join(names)}) of its leading index."))
    register(OpDef(
        name=f"_pdf_{dist}", pattern="broadcast", arguments=("sample",) + names,
        attrs=log_attr, lowering=Pointwise(_pdf_math(dist)),
        infer_shape=lambda attrs, s: (s, [s[0]]), reference=_pdf_ref(dist),
        doc=f"_random_pdf_{dist} with parameters broadcast to the sample (right-aligned)."))
    register(OpDef(
        name=f"_backward_pdf_{dist}", pattern="broadcast",
        arguments=("ograd", "output", "sample") + names,
        attrs=log_attr + [Attr("wrt", parse_int)], lowering=Pointwise(_grad_math(dist)),
        infer_shape=lambda attrs, s: (s, [s[2]]), reference=_grad_ref(dist),
        doc=f"The gradient of _random_pdf_{dist} with respect to input `wrt` (0: the "
            f"sample), per sample element."))


def _grad_ref(dist):
    def ref(attrs, ins, is_train):
        dy, out, x, *params = [t.double() for t in ins]
        scaling = dy if attrs["is_log"] else dy * out
        return [(scaling * DENSITIES[dist][2](TORCH, x, *params)[attrs["wrt"]]).to(ins[0].dtype)]
    return ref


for _dist in DENSITIES:
    _register(_dist)


# ------------------------------------------------------------------------------------
# dirichlet: vector samples along the last axis

register(OpDef(
    name="_pdf_digamma", pattern="elemwise", lowering=Pointwise(lambda attrs, x: ops.digamma(x)),
    infer_shape=lambda attrs, s: (s, [s[0]]),
    reference=lambda attrs, ins, is_train: [torch.digamma(ins[0])],
    doc="psi(x), the digamma function (dirichlet's density gradient)."))


def _dirichlet_parts(b, x, alpha):
    """alpha spread over the sample's middle dims, and a function spreading a value of
    alpha's leading shape and a last dim of 1 the same way."""
    r, m = len(x.shape), len(alpha.shape)
    lead = tuple(alpha.shape[:-1]) + (1,) * (r - m)
    a = alpha if r == m else b.op("Reshape", alpha, shape=lead + (alpha.shape[-1],))
    return a, (lambda v: b.op("Reshape", v, shape=lead + (1,)))


def _dirichlet_build(b, n, is_train):
    x, alpha = n.inputs
    a, spread = _dirichlet_parts(b, x, alpha)
    t = b.op("sum", (a - 1.0) * b.op("log", x), axis=-1, keepdims=True)
    c = b.op("gammaln", b.op("sum", alpha, axis=-1, keepdims=True)) - \
        b.op("sum", b.op("gammaln", alpha), axis=-1, keepdims=True)
    lp = b.op("Reshape", t + spread(c), shape=n.out_shapes[0])
    return [lp if n.attrs["is_log"] else b.op("exp", lp)]


def _dirichlet_gradient(b, n):
    x, alpha = n.inputs
    a, spread = _dirichlet_parts(b, x, alpha)
    scaling = n.ograds[0] if n.attrs["is_log"] else n.ograds[0] * n.outputs[0]
    scaling = b.op("Reshape", scaling, shape=tuple(x.shape[:-1]) + (1,))
    grad_x = scaling * (a - 1.0) / x
    psi_sum = spread(b.op("_pdf_digamma", b.op("sum", alpha, axis=-1, keepdims=True)))
    g = scaling * (b.op("log", x) + psi_sum - b.op("_pdf_digamma", a))
    r, m = len(x.shape), len(alpha.shape)
    if r > m:
        g = b.op("sum", g, axis=tuple(range(m - 1, r - 1)))
    return [grad_x, g]


def _dirichlet_ref(attrs, ins, is_train):
    x, alpha = [t.double() for t in ins]
    a = alpha.reshape(tuple(alpha.shape[:-1]) + (1,) * (x.dim() - alpha.dim()) +
                      (alpha.shape[-1],))
    lp = ((a - 1) * torch.log(x)).sum(-1) + torch.lgamma(a.sum(-1)) - torch.lgamma(a).sum(-1)
    lp = lp.reshape(_pdf_out(tuple(x.shape), True))
    return [(lp if attrs["is_log"] else torch.exp(lp)).to(ins[0].dtype)]


register(OpDef(
    name="_random_pdf_dirichlet", aliases=("random_pdf_dirichlet",), pattern="composite",
    arguments=("sample", "alpha"), attrs=[Attr("is_log", parse_bool, False)],
    lowering=Decompose(_dirichlet_build), infer_shape=_pdf_shape("dirichlet", vector=True),
    reference=_dirichlet_ref, gradient=_dirichlet_gradient,
    doc="The Dirichlet density (log density where is_log) of each vector sample (the last "
        "axis) under the concentration vector alpha of its leading index."))
