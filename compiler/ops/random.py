"""Random samplers, as mxnet 1.9.1 defines them: ``random_uniform``, ``random_normal``,
``random_exponential``, their ``_like`` forms and the per-element ``sample_*`` forms.

Every sampler is a ``Decompose`` rewrite around one draw: a ``_philox_uniform``
(``compiler/ops/nn.py``) with a stream number of its own, so the numbers come from
the same in-kernel Philox as Dropout's masks and ``mx.random.seed`` reproduces them.
The draw is turned into the distribution by a deterministic pointwise op
(``_uniform_to_normal``, ``_uniform_to_exponential``) that fuses with it.

The cpu and interpret targets give the same bits. Their ``log``, ``exp`` and even
``sqrt`` differ in the last place for about one value in five (SLEEF in ATen, numpy's
own loops in Triton's interpreter), while ``+ - * /`` are IEEE operations on both. So
the transforms are written with those four, comparisons and ``where`` only (a log by
exponent reduction and a series, a square root by Newton steps), and every product
that the cpu target may fuse into a single-rounding ``addcmul`` or ``add(alpha=)`` is
either exact or kept apart from its sum (``_unfused``). On a GPU, Triton contracts
products and sums into FMAs, so a GPU's numbers may differ from the cpu's in the last
place; the distribution is the same.

Samplers have no gradient (mxnet's ``MakeZeroGradNodes``): inputs get zeros.
"""
from __future__ import annotations

import math

import torch

from ..ir.expr import ops
from .nn import seed_entry
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, choice, merge_shape,
                       parse_float, parse_optional_shape, parse_str, register)

# ------------------------------------------------------------------------------------
# Deterministic math from + - * / (the same bits on every target without FMA)

_TWO_M32 = 2.0 ** -32        # keeps a draw off 0: tl.rand returns 0 for 2 words in 2**32


def _cody_waite(x: float, bits: int) -> float:
    """``x`` rounded to ``bits`` significant bits: an integer of at most ``24 - bits``
    bits times it is exact in float32, so a fused and an unfused product-sum agree."""
    m, e = math.frexp(x)
    return math.ldexp(round(m * 2 ** bits), e - bits)


_LN2_HI = _cody_waite(math.log(2.0), 17)
_LN2_LO = _cody_waite(math.log(2.0) - _LN2_HI, 17)


def _unfused(p):
    """``p`` (a product about to be added) behind a negation: the cpu target fuses
    ``a + p`` into one ``addcmul``/``add(alpha=)`` call, which rounds once where numpy
    (Triton's interpreter) rounds twice; ``a - (-p)`` is computed as written."""
    return ops.neg(p)


def soft_log(x):
    """``log(x)`` for ``2**-32 <= x <= 1``, written with ``+ - * /`` and ``where`` only.

    The exponent is found by a binary search of exact power-of-two scalings, which
    brings ``x`` to ``m`` in ``[sqrt(1/2), sqrt(2))``; ``log(m) = 2 atanh(s)`` with
    ``s = (m - 1) / (m + 1)``, ``|s| < 0.172``, is its odd series to ``s**15``
    (truncation below 4e-14 relative); ``e * log(2)`` is added in two exact parts.
    """
    e = 0.0
    for k in (16, 8, 4, 2, 1):
        small = x < 2.0 ** -k
        x = ops.where(small, x * float(2 ** k), x)
        e = ops.where(small, e - float(k), e)
    low = x < math.sqrt(0.5)
    x = ops.where(low, x * 2.0, x)
    e = ops.where(low, e - 1.0, e)
    s = (x - 1.0) / (x + 1.0)
    z = s * s
    series = 1.0 / 15.0
    for k in (13, 11, 9, 7, 5, 3, 1):
        series = 1.0 / k + z * series
    return (2.0 * s * series + e * _LN2_LO) + e * _LN2_HI


def soft_sqrt(y, guess: float, steps: int):
    """``sqrt(y)`` by ``steps`` Newton steps from ``0.5 (y / guess + guess)`` (division
    and the exact halving are IEEE on every target, where ``sqrt`` is not)."""
    r = 0.5 * (y / guess + guess)
    for _ in range(steps):
        r = 0.5 * (r + y / r)
    return r


# Acklam's rational approximation of the normal quantile (relative error < 1.2e-9).
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
      6.680131188771972e+01, -1.328068155288572e+01, 1.0)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
      3.754408661907416e+00, 1.0)
_P_LOW = 0.02425


def _horner(coeffs, t):
    """``c0 t**n + ... + cn``: each step adds a number to a product (nothing to fuse)."""
    acc = coeffs[0]
    for c in coeffs[1:]:
        acc = acc * t + c
    return acc


def _normal_math(attrs, u):
    """The standard normal quantile of ``p = u + 2**-32``, in ``(0, 1)``."""
    p = u + _TWO_M32
    q = p - 0.5
    central = q * _horner(_A, q * q) / _horner(_B, q * q)
    near = ops.minimum(p, 1.0 - p)                       # the nearer tail's probability
    # -2 log(near) lies in [7.4, 44.4] wherever the tail is taken: 5 Newton steps
    # from 4.5 reach float64's last place
    t = soft_sqrt(-2.0 * soft_log(near), 4.5, 5)
    tail = _horner(_C, t) / _horner(_D, t)              # the lower tail's (negative) value
    return ops.where(near < _P_LOW, ops.where(q < 0.0, tail, -tail), central)


def _normal_ref(attrs, ins, is_train):
    p = ins[0].double() + _TWO_M32
    return [torch.special.ndtri(p).to(ins[0].dtype)]


def _exponential_math(attrs, u):
    """``-log(u + 2**-32)``: Exp(1), in ``(0, 22.2]``."""
    return -soft_log(u + _TWO_M32)


def _exponential_ref(attrs, ins, is_train):
    return [(-torch.log(ins[0].double() + _TWO_M32)).to(ins[0].dtype)]


def _same(attrs, in_shapes):
    return in_shapes, [in_shapes[0]]


for _name, _math, _ref, _what in (
        ("_uniform_to_normal", _normal_math, _normal_ref,
         "the standard normal quantile of u + 2**-32 (Acklam's approximation)"),
        ("_uniform_to_exponential", _exponential_math, _exponential_ref,
         "-log(u + 2**-32), an Exp(1) variate")):
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(_math), arguments=("u",),
        infer_shape=_same, reference=_ref,
        doc=f"out = {_what} of a U[0, 1) draw u, with + - * / only (the same bits on "
            f"every target without FMA)."))


def _scale_shift_ref(attrs, ins, is_train):
    x, shift, scale = ins
    return [shift + scale * x]


def _scale_shift_shape(attrs, in_shapes):
    x, shift, scale = in_shapes
    if shift is not None and scale is not None:
        merge_shape(shift, scale, "_scale_shift scale")
    return in_shapes, [x]


register(OpDef(
    name="_scale_shift", pattern="broadcast", arguments=("data", "shift", "scale"),
    lowering=Pointwise(lambda attrs, x, shift, scale: shift - _unfused(scale * x)),
    infer_shape=_scale_shift_shape, reference=_scale_shift_ref,
    doc="out = shift + scale * data with two roundings (shift and scale broadcast to "
        "data's shape): a sampler's affine map, the same bits on the cpu and interpret "
        "targets."))


# ------------------------------------------------------------------------------------
# The samplers

def _draw(b, shape):
    """A new ``_philox_uniform`` of ``shape``: its own stream of the step's seed.

    Streams are numbered in the order ``decompose`` expands the sources (a topological
    order), so equal graphs number them alike and share cached Programs.
    """
    stream = b.graph.meta.get("random_streams", 0)
    b.graph.meta["random_streams"] = stream + 1
    return b.op("_philox_uniform", b.ref(seed_entry(b.graph)), shape=tuple(shape),
                stream=stream)


def _cast(b, ref, dtype):
    return ref if dtype in ("None", "float32") else b.op("Cast", ref, dtype=dtype)


_FLOAT_DTYPE = choice("None", "float16", "float32", "float64")


def _check(name, ok: bool, message: str):
    if not ok:
        raise ShapeError(f"{name}: {message}")


# name -> (parameters with mxnet's defaults, their check, the scalar form's builder)
def _uniform_scalars(b, u, a):
    x = u if a["high"] - a["low"] == 1.0 else b.op("_mul_scalar", u, scalar=a["high"] - a["low"])
    return x if a["low"] == 0.0 else b.op("_plus_scalar", x, scalar=a["low"])


def _normal_scalars(b, u, a):
    z = b.op("_uniform_to_normal", u)
    z = z if a["scale"] == 1.0 else b.op("_mul_scalar", z, scalar=a["scale"])
    return z if a["loc"] == 0.0 else b.op("_plus_scalar", z, scalar=a["loc"])


def _exponential_scalars(b, u, a):
    x = b.op("_uniform_to_exponential", u)
    return x if a["lam"] == 1.0 else b.op("_div_scalar", x, scalar=a["lam"])


_SCALAR = {
    "uniform": ((("low", 0.0), ("high", 1.0)),
                lambda a: a["high"] >= a["low"],
                "low must be less or equal to high in uniform distribution", _uniform_scalars),
    "normal": ((("loc", 0.0), ("scale", 1.0)),
               lambda a: a["scale"] > 0, "scale parameter in gaussian has to be positive",
               _normal_scalars),
    "exponential": ((("lam", 1.0),),
                    lambda a: a["lam"] > 0,
                    "lambda parameter in exponential distribution has to be positive",
                    _exponential_scalars),
}
_WHAT = {"uniform": "U[low, high)", "normal": "N(loc, scale**2)",
         "exponential": "Exp(lam) (rate lam, mean 1 / lam)"}


def _torch_draw(dist, a, shape):
    """The reference's draw (torch's generator: the distribution, not the numbers)."""
    if dist == "uniform":
        return torch.rand(shape) * (a["high"] - a["low"]) + a["low"]
    if dist == "normal":
        return torch.randn(shape) * a["scale"] + a["loc"]
    return torch.empty(shape).exponential_(a["lam"])


def _register_scalar(dist):
    params, ok, message, build_math = _SCALAR[dist]
    attrs = [Attr(p, parse_float, d) for p, d in params]

    def checked(name, a):
        _check(name, ok(a), message)

    def build(b, n, is_train, like=False):
        shape = n.in_shapes[0] if like else n.attrs["shape"]
        checked(n.name, n.attrs)
        dtype = n.inputs[0].dtype if like else n.attrs["dtype"]
        return [_cast(b, build_math(b, _draw(b, shape), n.attrs), dtype)]

    def shape_rule(attrs, in_shapes):
        checked(f"_random_{dist}", attrs)
        if attrs["shape"] is None:
            raise ShapeError(f"_random_{dist}: the output shape is unknown: give `shape`")
        return [], [tuple(attrs["shape"])]

    def ref(attrs, ins, is_train, like=False):
        shape = tuple(ins[0].shape) if like else tuple(attrs["shape"])
        return [_torch_draw(dist, attrs, shape).to(getattr(torch, _out_dtype(attrs)))]

    register(OpDef(
        name=f"_random_{dist}", aliases=(f"random_{dist}",) + (
            (dist,) if dist in ("uniform", "normal") else ()),
        pattern="composite", lowering=Decompose(build), arguments=(), needs_random=True,
        attrs=attrs + [Attr("shape", parse_optional_shape, None), Attr("ctx", parse_str, ""),
                       Attr("dtype", _FLOAT_DTYPE, "None")],
        infer_shape=shape_rule, infer_type=lambda attrs, t: ([], [_out_dtype(attrs)]),
        reference=ref,
        doc=f"{_WHAT[dist]} samples of `shape` (dtype float32 unless given), new each "
            f"forward, drawn in the kernel from the step's Philox seed."))

    def like_shape(attrs, in_shapes):
        checked(f"_random_{dist}_like", attrs)
        return in_shapes, [in_shapes[0]]

    register(OpDef(
        name=f"_random_{dist}_like", pattern="composite",
        lowering=Decompose(lambda b, n, t: build(b, n, t, like=True)), needs_random=True,
        attrs=attrs, infer_shape=like_shape,
        reference=lambda attrs, ins, is_train: ref(attrs, ins, is_train, like=True),
        gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
        doc=f"{_WHAT[dist]} samples of data's shape and dtype (data's values are not "
            f"read); no gradient."))


def _out_dtype(attrs):
    return "float32" if attrs.get("dtype", "None") == "None" else attrs["dtype"]


for _dist in _SCALAR:
    _register_scalar(_dist)


# ------------------------------------------------------------------------------------
# sample_*: one distribution per element of the parameter arrays

_SAMPLE = {"uniform": ("low", "high"), "normal": ("mu", "sigma"), "exponential": ("lam",)}


def _sample_shape(dist):
    def rule(attrs, in_shapes):
        name = f"_sample_{dist}"
        for s in attrs["shape"]:
            _check(name, s > 0, "shape parameter must be non-zero within each dimension")
        known = [s for s in in_shapes if s is not None]
        base = None
        for arg, s in zip(_SAMPLE[dist], in_shapes):
            base = merge_shape(base, s, f"{name} input '{arg}'")
        if not known:
            return in_shapes, [None]
        return [base] * len(in_shapes), [tuple(base) + tuple(attrs["shape"])]
    return rule


def _sample_type(attrs, in_types):
    known = [t for t in in_types if t is not None]
    t = known[0] if known else None
    return [t] * len(in_types), [_out_dtype(attrs)]


def _sample_build(dist):
    def build(b, n, is_train):
        extra = tuple(n.attrs["shape"])
        params = [p if not extra else b.op("Reshape", p, shape=tuple(p.shape) + (1,) * len(extra))
                  for p in n.inputs]
        u = _draw(b, n.out_shapes[0])
        if dist == "uniform":
            low, high = params
            x = b.op("_scale_shift", u, low, high - low)
        elif dist == "normal":
            x = b.op("_scale_shift", b.op("_uniform_to_normal", u), params[0], params[1])
        else:
            x = b.op("_uniform_to_exponential", u) / params[0]
        return [_cast(b, x, n.attrs["dtype"])]
    return build


def _sample_ref(dist):
    def ref(attrs, ins, is_train):
        extra = tuple(attrs["shape"])
        ps = [p.reshape(tuple(p.shape) + (1,) * len(extra)).expand(tuple(p.shape) + extra)
              for p in ins]
        if dist == "uniform":
            out = ps[0] + (ps[1] - ps[0]) * torch.rand(ps[0].shape, dtype=ps[0].dtype)
        elif dist == "normal":
            out = ps[0] + ps[1] * torch.randn(ps[0].shape, dtype=ps[0].dtype)
        else:
            out = torch.empty(ps[0].shape, dtype=ps[0].dtype).exponential_() / ps[0]
        return [out.to(getattr(torch, _out_dtype(attrs)))]
    return ref


for _dist, _args in _SAMPLE.items():
    register(OpDef(
        name=f"_sample_{_dist}", aliases=(f"sample_{_dist}",), pattern="composite",
        lowering=Decompose(_sample_build(_dist)), arguments=_args, needs_random=True,
        attrs=[Attr("shape", parse_optional_shape, ()), Attr("dtype", _FLOAT_DTYPE, "None")],
        infer_shape=_sample_shape(_dist), infer_type=_sample_type, reference=_sample_ref(_dist),
        gradient=lambda b, n: [b.zeros_like(x) for x in n.inputs],
        doc=f"Per element of the parameter arrays ({', '.join(_args)}: one shape), "
            f"`shape` samples of its {_WHAT[_dist].split(' (')[0].replace('low, high', 'low, high')} "
            f"distribution: output shape = parameter shape + `shape`; no gradient."))
