"""mxnet's other samplers (``src/operator/random/sample_op.cc``, ``multisample_op.cc``):
``_random_gamma``, ``_random_poisson``, ``_random_negative_binomial``,
``_random_generalized_negative_binomial`` and ``_random_randint``, the ``_like`` forms
and the per-element ``_sample_*`` forms, with mxnet's aliases.

As ``random.py``'s samplers, each is a ``Decompose`` around ``_philox_uniform`` draws
of the step's seed, turned into the distribution by pointwise ops written with the
deterministic math of ``random_math.py``, so the cpu and interpret targets give the
same bits. A rejection sampler cannot loop in a kernel that must give every target the
same numbers, so it makes a fixed number of tries, each from draws of its own stream:
a try is an op ``(prev, u1, u2, parameter) -> accepted value, else prev``, chained from
the last try to the first, so the first accepted try wins (the fallback after all
tries is the distribution's mean, reached with probability below 1e-7):

* gamma: Marsaglia and Tsang, as mxnet (``alpha < 1`` through ``alpha + 1`` and
  ``u**(1/alpha)``), 6 tries (each accepted with probability above 0.95);
* poisson: ``lam < 12`` by inversion of one draw (mxnet multiplies draws, the same
  distribution); ``lam >= 12`` by mxnet's rejection method (Numerical Recipes'
  Lorentzian envelope), 12 tries;
* negative binomial: Poisson(Gamma(k, (1 - p) / p)); generalized: Poisson(Gamma(1 / alpha,
  alpha mu)), Poisson(mu) where alpha is 0;
* randint: ``low + floor(u (high - low))`` in float64 (24 bits of a draw).

Samplers have no gradient (mxnet's ``MakeZeroGradNodes``).
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from . import random_math as rm
from .random import _FLOAT_DTYPE, _cast, _check, _draw, _out_dtype
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, choice, merge_shape,
                       parse_float, parse_int, parse_optional_shape, parse_str, register,
                       REQUIRED)

GAMMA_TRIES = 6
POISSON_TRIES = 12


def _broadcast_shape(attrs, in_shapes):
    known = [s for s in in_shapes if s is not None]
    if len(known) < len(in_shapes):
        return in_shapes, [None]
    rank = max(len(s) for s in known)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in known]
    return in_shapes, [tuple(max(d) for d in zip(*padded))]


def _internal(name, args, fn, what):
    register(OpDef(
        name=name, pattern="broadcast", arguments=args, infer_shape=_broadcast_shape,
        lowering=Pointwise(lambda attrs, *xs: fn(*xs)),
        reference=lambda attrs, ins, is_train: [_torch_of(fn, ins)],
        doc=what + " (operands broadcast; a step of the samplers in random_more.py)."))


_EAGER = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
          "neg": torch.neg, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
          "eq": torch.eq, "ne": torch.ne, "and_": torch.logical_and, "or_": torch.logical_or,
          "where": torch.where, "maximum": torch.maximum, "minimum": torch.minimum,
          "floor": torch.floor, "abs": torch.abs}


def _torch_of(fn, ins):
    """The reference of an internal step: its math evaluated eagerly in float64 by torch
    (each shared node once); the samplers' moments tests check the math itself."""
    env = {f"a{i}": x.double() for i, x in enumerate(ins)}
    memo = {}

    def walk(e):
        if id(e) not in memo:
            if e.op == "value":
                memo[id(e)] = env[e.params[0]]
            elif e.op == "const":
                memo[id(e)] = torch.tensor(float(e.params[0]), dtype=torch.float64)
            else:
                memo[id(e)] = _EAGER[e.op](*[walk(a) for a in e.args])
        return memo[id(e)]
    out = walk(fn(*[ops.value(f"a{i}") for i in range(len(ins))]))
    return out.to(ins[0].dtype)


register(OpDef(
    name="_param_tensor", pattern="elemwise", arguments=("u",),
    attrs=[Attr("value", parse_float, REQUIRED)],
    lowering=Pointwise(lambda attrs, u: ops.mul(u, 0.0) + attrs["value"]),
    infer_shape=lambda attrs, in_shapes: (in_shapes, [in_shapes[0]]),
    reference=lambda attrs, ins, is_train: [ins[0] * 0.0 + attrs["value"]],
    doc="out = 0 * u + value: a number as a tensor of u's shape and dtype."))

_internal("_gamma_try", ("prev", "u1", "u2", "alpha"), rm.gamma_round,
          "One Marsaglia-Tsang try for Gamma(alpha, 1): its value if accepted, else prev")
_internal("_gamma_finish", ("x", "u", "alpha", "beta"), rm.gamma_finish,
          "x * beta, times u**(1/alpha) where alpha < 1")
_internal("_poisson_inversion", ("u", "lam"), rm.poisson_small,
          "Poisson(lam) for lam < 12 by inverting its cdf at u")
_internal("_poisson_try", ("prev", "u1", "u2", "lam"), rm.poisson_round,
          "One rejection try for Poisson(lam), lam >= 12: its count if accepted, else prev")
_internal("_poisson_select", ("lam", "small", "large"),
          lambda lam, small, large: ops.where(lam < rm.POISSON_SMALL, small, large),
          "small where lam < 12, else large")
_internal("_gnb_rate", ("g", "mu", "alpha"),
          lambda g, mu, alpha: ops.where(ops.eq(alpha, 0.0), mu, g),
          "mu where alpha is 0, else g")


# ------------------------------------------------------------------------------------
# Builders: parameters are Refs that broadcast to the output shape

def _gamma(b, shape, alpha, beta):
    x = alpha
    for _ in range(GAMMA_TRIES):
        x = b.op("_gamma_try", x, _draw(b, shape), _draw(b, shape), alpha)
    return b.op("_gamma_finish", x, _draw(b, shape), alpha, beta)


def _poisson(b, shape, lam, static=None):
    """``static``: lam's value where it is one number (only its branch is built)."""
    small = large = None
    if static is None or static < rm.POISSON_SMALL:
        small = b.op("_poisson_inversion", _draw(b, shape), lam)
    if static is None or static >= rm.POISSON_SMALL:
        large = lam
        for _ in range(POISSON_TRIES):
            large = b.op("_poisson_try", large, _draw(b, shape), _draw(b, shape), lam)
    if static is not None:
        return small if small is not None else large
    return b.op("_poisson_select", lam, small, large)


def _negative_binomial(b, shape, k, p):
    return _poisson(b, shape, _gamma(b, shape, k, (1.0 - p) / p))


def _generalized_negative_binomial(b, shape, mu, alpha):
    g = _gamma(b, shape, 1.0 / alpha, alpha * mu)
    return _poisson(b, shape, b.op("_gnb_rate", g, mu, alpha))


def _torch_gamma(alpha, beta):
    return torch.distributions.Gamma(alpha.double(), 1.0 / beta.double()).sample()


def _torch_dist(dist, ps):
    """The reference's draw (torch's generator: the distribution, not the numbers)."""
    if dist == "gamma":
        return _torch_gamma(*ps)
    if dist == "poisson":
        return torch.poisson(ps[0].double())
    if dist == "negative_binomial":
        k, p = ps
        return torch.poisson(_torch_gamma(k, (1 - p) / p))
    mu, alpha = [q.double() for q in ps]
    lam = torch.where(alpha == 0, mu, _torch_gamma(1 / alpha, alpha * mu).nan_to_num())
    return torch.poisson(lam)


_POSITIVE = "has to be positive"
_NONNEG = "has to be non-negative"
# dist -> ((parameter, default, parser, check, message), ...), builder
DISTS = {
    "gamma": ((("alpha", 1.0, parse_float, lambda v: v > 0,
                "alpha parameter in gamma distribution " + _POSITIVE),
               ("beta", 1.0, parse_float, lambda v: v > 0,
                "beta parameter in gamma distribution " + _POSITIVE)), _gamma,
              "Gamma(alpha, beta): shape alpha, scale beta (mean alpha beta)"),
    "poisson": ((("lam", 1.0, parse_float, lambda v: v >= 0,
                  "lambda parameter in poisson distribution " + _NONNEG),), _poisson,
                "Poisson(lam) counts (as floats)"),
    "negative_binomial": (
        (("k", 1, parse_int, lambda v: v >= 0,
          "k parameter in negative binomial distribution " + _NONNEG),
         ("p", 1.0, parse_float, lambda v: v >= 0,
          "p parameter in negative binomial distribution " + _NONNEG)), _negative_binomial,
        "NB(k, p): failures before the k-th success of trials succeeding with p"),
    "generalized_negative_binomial": (
        (("mu", 1.0, parse_float, lambda v: v >= 0,
          "mu parameter in generalized negative binomial distribution " + _NONNEG),
         ("alpha", 1.0, parse_float, lambda v: v >= 0,
          "alpha parameter in generalized negative binomial distribution " + _NONNEG)),
        _generalized_negative_binomial,
        "GNB(mu, alpha): mean mu, variance mu + alpha mu**2"),
}


def _checked(dist, name, attrs):
    for p, _, _, ok, message in DISTS[dist][0]:
        _check(name, ok(attrs[p]), message)


def _scalar_params(b, dist, attrs):
    """The parameters as float32 tensors of one element: ``0 * u + value`` of a draw
    ``u`` (a constant would enter Triton's source as a Python float, whose arithmetic
    with other constants the interpreter does in float64 and the cpu target in
    float32)."""
    u = _draw(b, (1,))
    refs = [b.op("_param_tensor", u, value=float(attrs[p])) for p, *_ in DISTS[dist][0]]
    if dist == "poisson":
        return refs + [float(attrs["lam"])]
    return refs


def _register_scalar(dist):
    params, build_math, what = DISTS[dist]
    attrs = [Attr(p, parse, d) for p, d, parse, _, _ in params]

    def build(b, n, is_train, like=False):
        _checked(dist, n.name, n.attrs)
        shape = n.in_shapes[0] if like else tuple(n.attrs["shape"])
        out = build_math(b, shape, *_scalar_params(b, dist, n.attrs))
        return [_cast(b, out, n.inputs[0].dtype if like else n.attrs["dtype"])]

    def shape_rule(attrs, in_shapes):
        _checked(dist, f"_random_{dist}", attrs)
        if attrs["shape"] is None:
            raise ShapeError(f"_random_{dist}: the output shape is unknown: give `shape`")
        return [], [tuple(attrs["shape"])]

    def ref(attrs, ins, is_train, like=False):
        shape = tuple(ins[0].shape) if like else tuple(attrs["shape"])
        ps = [torch.full(shape, float(attrs[p]), dtype=torch.float64) for p, *_ in params]
        dtype = ins[0].dtype if like else getattr(torch, _out_dtype(attrs))
        return [_torch_dist(dist, ps).to(dtype)]

    register(OpDef(
        name=f"_random_{dist}", aliases=(f"random_{dist}",), pattern="composite",
        lowering=Decompose(build), arguments=(), needs_random=True,
        attrs=attrs + [Attr("shape", parse_optional_shape, None), Attr("ctx", parse_str, ""),
                       Attr("dtype", _FLOAT_DTYPE, "None")],
        infer_shape=shape_rule, infer_type=lambda attrs, t: ([], [_out_dtype(attrs)]),
        reference=ref,
        doc=f"{what} samples of `shape` (dtype float32 unless given), new each forward, "
            f"drawn in the kernel from the step's Philox seed."))

    def like_shape(attrs, in_shapes):
        _checked(dist, f"_random_{dist}_like", attrs)
        return in_shapes, [in_shapes[0]]

    register(OpDef(
        name=f"_random_{dist}_like", pattern="composite",
        lowering=Decompose(lambda b, n, t: build(b, n, t, like=True)), needs_random=True,
        attrs=attrs, infer_shape=like_shape,
        reference=lambda attrs, ins, is_train: ref(attrs, ins, is_train, like=True),
        gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
        doc=f"{what} samples of data's shape and dtype (data's values are not read); "
            f"no gradient."))


def _register_sample(dist):
    params, build_math, what = DISTS[dist]
    names = tuple(p for p, *_ in params)

    def shape_rule(attrs, in_shapes):
        base = None
        for s in attrs["shape"]:
            _check(f"_sample_{dist}", s > 0,
                   "shape parameter must be non-zero within each dimension")
        for arg, s in zip(names, in_shapes):
            base = merge_shape(base, s, f"_sample_{dist} input '{arg}'")
        if base is None:
            return in_shapes, [None]
        return [base] * len(in_shapes), [tuple(base) + tuple(attrs["shape"])]

    def build(b, n, is_train):
        extra = tuple(n.attrs["shape"])
        ps = [p if not extra else b.op("Reshape", p, shape=tuple(p.shape) + (1,) * len(extra))
              for p in n.inputs]
        return [_cast(b, build_math(b, n.out_shapes[0], *ps), n.attrs["dtype"])]

    def ref(attrs, ins, is_train):
        extra = tuple(attrs["shape"])
        ps = [p.reshape(tuple(p.shape) + (1,) * len(extra)).expand(tuple(p.shape) + extra)
              for p in ins]
        return [_torch_dist(dist, ps).to(getattr(torch, _out_dtype(attrs)))]

    def infer_type(attrs, in_types):
        known = [t for t in in_types if t is not None]
        t = known[0] if known else None
        return [t] * len(in_types), [_out_dtype(attrs)]

    register(OpDef(
        name=f"_sample_{dist}", aliases=(f"sample_{dist}",), pattern="composite",
        lowering=Decompose(build), arguments=names, needs_random=True,
        attrs=[Attr("shape", parse_optional_shape, ()), Attr("dtype", _FLOAT_DTYPE, "None")],
        infer_shape=shape_rule, infer_type=infer_type, reference=ref,
        gradient=lambda b, n: [b.zeros_like(x) for x in n.inputs],
        doc=f"Per element of the parameter arrays ({', '.join(names)}: one shape), `shape` "
            f"samples of {what}: output shape = parameter shape + `shape`; no gradient."))


for _dist in DISTS:
    _register_scalar(_dist)
    _register_sample(_dist)


# ------------------------------------------------------------------------------------
# randint

def _randint_check(name, attrs):
    _check(name, attrs["high"] >= attrs["low"],
           "low must be less or equal to high in uniform distribution")


def _randint_build(b, n, is_train):
    a = n.attrs
    _randint_check(n.name, a)
    u = b.op("Cast", _draw(b, tuple(a["shape"])), dtype="float64")
    span = float(a["high"] - a["low"])
    x = b.op("floor", b.op("_mul_scalar", u, scalar=span))
    x = b.op("_plus_scalar", b.op("_minimum_scalar", x, scalar=max(span - 1.0, 0.0)),
             scalar=float(a["low"]))
    return [b.op("Cast", x, dtype=_int_dtype(a))]


def _int_dtype(attrs):
    return "int32" if attrs["dtype"] == "None" else attrs["dtype"]


def _randint_shape(attrs, in_shapes):
    _randint_check("_random_randint", attrs)
    if attrs["shape"] is None:
        raise ShapeError("_random_randint: the output shape is unknown: give `shape`")
    return [], [tuple(attrs["shape"])]


register(OpDef(
    name="_random_randint", aliases=("random_randint",), pattern="composite",
    lowering=Decompose(_randint_build), arguments=(), needs_random=True,
    attrs=[Attr("low", parse_int, REQUIRED), Attr("high", parse_int, REQUIRED),
           Attr("shape", parse_optional_shape, None), Attr("ctx", parse_str, ""),
           Attr("dtype", choice("None", "int32", "int64"), "None")],
    infer_shape=_randint_shape, infer_type=lambda attrs, t: ([], [_int_dtype(attrs)]),
    reference=lambda attrs, ins, is_train: [torch.randint(
        attrs["low"], max(attrs["high"], attrs["low"] + 1), tuple(attrs["shape"]),
        dtype=getattr(torch, _int_dtype(attrs)))],
    doc="Integers uniform on [low, high) of `shape` (dtype int32 unless given): "
        "low + floor(u (high - low)) of a Philox draw u (24 random bits), new each forward."))
