"""mxnet's other samplers:
``_random_gamma``, ``_random_poisson``, ``_random_negative_binomial``,
``_random_generalized_negative_binomial`` and ``_random_randint``, the ``_like`` forms
and the per-element ``_sample_*`` forms, with mxnet's aliases.

As ``random.py``'s samplers, each is a ``Decompose`` around ``_philox_uniform`` draws
of the step's seed, turned into the distribution by pointwise ops written with the
deterministic math of ``random_math.py``, so the cpu and interpret targets give the
same bits. A rejection sampler cannot loop in a kernel that must give every target the same
numbers, so it makes a fixed number of tries, each from draws of its own Philox stream,
all in one pointwise op (``_gamma_draw``, ``_poisson_draw``: the op draws them itself).
The tries are chained from the last to the first, ``accepted ? value : later tries'
result``, so the first accepted try wins; after every try is rejected (probability below
1e-7) the result is about the mean:

* gamma: Marsaglia and Tsang, as mxnet (``alpha < 1`` through ``alpha + 1`` and
  ``u**(1/alpha)``), 6 tries (each accepted with probability above 0.9);
* poisson: ``lam < 12`` by inversion of one draw (mxnet multiplies draws: the same
  distribution); ``lam >= 12`` by mxnet's rejection method (Numerical Recipes'
  Lorentzian envelope), 24 tries (each accepted with probability about 0.51);
* negative binomial: Poisson(Gamma(k, (1 - p) / p)); generalized: Poisson(Gamma(1 / alpha,
  alpha mu)), Poisson(mu) where alpha is 0;
* randint: ``low + floor(u (high - low))`` in float64, ``u`` one draw (24 bits), or two
  (48 bits) when the range holds more than 2**24 integers.

Samplers have no gradient (mxnet's ``MakeZeroGradNodes``).
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from . import random_math as rm
from .nn import seed_entry
from .random import _FLOAT_DTYPE, _cast, _check, _draw, _out_dtype
from .registry import (REQUIRED, Attr, Decompose, OpDef, Pointwise, ShapeError, choice,
                       merge_shape, parse_float, parse_int, parse_optional_shape, parse_shape,
                       parse_str, prod, register)

GAMMA_TRIES = 6
POISSON_TRIES = 24


def _streams(b, count: int) -> int:
    """The first of ``count`` new consecutive stream numbers of the graph (numbered in
    ``decompose``'s order, as ``random._draw``'s)."""
    first = b.graph.meta.get("random_streams", 0)
    b.graph.meta["random_streams"] = first + count
    return first


def _draws(attrs, seed, coords, count):
    """``count`` U[0, 1) draws at each element's linear index in ``attrs['shape']``,
    from streams ``attrs['stream']``, ``+ 1``, ...: the sampler draws them itself, so
    its tries need no ops (and no fusion steps) of their own."""
    shape = attrs["shape"]
    offsets = [(c, prod(shape[j + 1:])) for j, c in enumerate(coords) if c is not None]
    wide = prod(shape) > 2 ** 31
    return [ops.philox_uniform(seed, offsets, attrs["stream"] + k, wide) for k in range(count)]


def _gamma_expr(attrs, seed, alpha, beta, *, coords):
    u = _draws(attrs, seed, coords, 2 * GAMMA_TRIES + 1)
    d, c = rm.gamma_constants(alpha)
    x = alpha                           # after every try rejected: the mean
    for k in reversed(range(GAMMA_TRIES)):
        x = rm.gamma_round(x, u[2 * k], u[2 * k + 1], d, c)
    return rm.gamma_finish(x, u[-1], alpha, beta)


def _poisson_expr(attrs, seed, lam, *, coords):
    branch = attrs["branch"]
    u = _draws(attrs, seed, coords, 2 * POISSON_TRIES + 1)
    small = rm.poisson_small(u[0], lam) if branch != "large" else None
    if branch == "small":
        return small
    consts = rm.poisson_constants(lam)
    large = ops.floor(lam)              # after every try rejected: about the mean
    for k in reversed(range(POISSON_TRIES)):
        large = rm.poisson_round(large, u[2 * k + 1], u[2 * k + 2], lam, consts)
    return large if branch == "large" else ops.where(lam < rm.POISSON_SMALL, small, large)


def _draw_shape(attrs, in_shapes):
    seed, *params = in_shapes
    out = tuple(attrs["shape"])
    return [merge_shape(seed, (1,), "sampler seed")] + params, [out]


def _draw_ref(dist):
    def ref(attrs, ins, is_train):
        shape = tuple(attrs["shape"])
        ps = [p.double().expand(shape) for p in ins[1:]]
        return [_torch_dist(dist, ps).to(ins[1].dtype)]
    return ref


_DRAW_ATTRS = [Attr("shape", parse_shape), Attr("stream", parse_int)]
register(OpDef(
    name="_gamma_draw", pattern="broadcast", arguments=("seed", "alpha", "beta"),
    attrs=_DRAW_ATTRS, needs_random=True, lowering=Pointwise(_gamma_expr),
    infer_shape=_draw_shape, infer_type=lambda attrs, t: (t, [t[1]]),
    reference=_draw_ref("gamma"),
    doc=f"Gamma(alpha, beta) of `shape` (alpha and beta broadcast to it): Marsaglia and "
        f"Tsang's method, {GAMMA_TRIES} tries from streams `stream`, `stream` + 1, ..."))
register(OpDef(
    name="_poisson_draw", pattern="broadcast", arguments=("seed", "lam"),
    attrs=_DRAW_ATTRS + [Attr("branch", choice("both", "small", "large"), "both")],
    needs_random=True, lowering=Pointwise(_poisson_expr),
    infer_shape=_draw_shape, infer_type=lambda attrs, t: (t, [t[1]]),
    reference=_draw_ref("poisson"),
    doc=f"Poisson(lam) of `shape`: inversion below lam = 12, mxnet's rejection method "
        f"({POISSON_TRIES} tries) above; `branch` builds one of them alone."))
register(OpDef(
    name="_param_tensor", pattern="elemwise", arguments=("u",),
    attrs=[Attr("value", parse_float, REQUIRED)],
    lowering=Pointwise(lambda attrs, u: ops.mul(u, 0.0) + attrs["value"]),
    infer_shape=lambda attrs, in_shapes: (in_shapes, [in_shapes[0]]),
    reference=lambda attrs, ins, is_train: [ins[0] * 0.0 + attrs["value"]],
    doc="out = 0 * u + value: a number as a tensor of u's shape and dtype."))
register(OpDef(
    name="_gnb_rate", pattern="broadcast", arguments=("g", "mu", "alpha"),
    lowering=Pointwise(lambda attrs, g, mu, alpha: ops.where(ops.eq(alpha, 0.0), mu, g)),
    infer_shape=lambda attrs, in_shapes: (in_shapes, [in_shapes[0]]),
    reference=lambda attrs, ins, is_train: [torch.where(ins[2] == 0, ins[1], ins[0])],
    doc="mu where alpha is 0, else g: the generalized negative binomial's Poisson rate."))


# ------------------------------------------------------------------------------------
# Builders: parameters are Refs that broadcast to the output shape

def _seed(b):
    return b.ref(seed_entry(b.graph))


def _gamma(b, shape, alpha, beta):
    return b.op("_gamma_draw", _seed(b), alpha, beta, shape=tuple(shape),
                stream=_streams(b, 2 * GAMMA_TRIES + 1))


def _poisson(b, shape, lam, static=None):
    """``static``: lam's value where it is one number (only its branch is built)."""
    branch = "both" if static is None else "small" if static < rm.POISSON_SMALL else "large"
    return b.op("_poisson_draw", _seed(b), lam, shape=tuple(shape), branch=branch,
                stream=_streams(b, 2 * POISSON_TRIES + 1))


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
    shape, span = tuple(a["shape"]), float(a["high"] - a["low"])
    u = b.op("Cast", _draw(b, shape), dtype="float64")
    if span > 2 ** 24:
        # a draw holds 24 bits, so alone it would reach one integer in span / 2**24: a
        # second draw, scaled into one step of the first, fills the gaps (48 bits)
        finer = b.op("_mul_scalar", b.op("Cast", _draw(b, shape), dtype="float64"),
                     scalar=2.0 ** -24)
        u = b.op("elemwise_add", u, finer)
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
        "low + floor(u (high - low)) of a Philox draw u (24 random bits; 48 from two draws "
        "past 2**24 integers), new each forward."))
