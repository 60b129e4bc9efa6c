"""Elementwise and broadcast operators: unary math, binary arithmetic (same
shape, broadcast and with scalars), comparisons, Activation, clip, where, zeros_like / ones_like, BlockGrad and the internal backward
operators their gradients use. (LeakyReLU has a file of its own: ``leaky_relu.py``.)

Each unary row holds the operator's forward math, torch reference and gradient
(math and reference) together; the table below registers the forward op and its
``_backward_<name>`` op from that one row. The math is written once in the
vocabulary of ``compiler/ir/expr.py`` (``ops.exp(x)``, Python's arithmetic on
expressions); every target emits its own code from it, so a row is all a new unary
operator needs.
"""
from __future__ import annotations

import math

import torch

from ..ir.dtypes import saturate_to_dtype
from ..ir.expr import ops, value_reads
from ..shape_semantics import zero_is_size
from .math_gradient import math_gradient
from .registry import (Attr, OpDef, Pointwise, ShapeError, View, broadcast_shapes,
                       merge_shape, parse_float, parse_str, choice, register)


# -- shape rules --------------------------------------------------------------

def same_shape(attrs, in_shapes):
    shape = None
    for s in in_shapes:
        shape = merge_shape(shape, s, "inputs must have the same shape")
    return [shape] * len(in_shapes), [shape]


def broadcast_shape(attrs, in_shapes):
    if any(s is None for s in in_shapes):
        return in_shapes, [None]
    out = in_shapes[0]
    for s in in_shapes[1:]:
        out = broadcast_shapes(out, s, "broadcast")
    return in_shapes, [out]


def _ones_like_ref(x):
    return torch.ones_like(x)


# -- unary table: name -> (math(x), reference(x), grad_math(dy, x, y), grad_ref(dy, x, y))
# (y is the forward's output: gradients that read it need not keep x)

UNARY = {
    "negative": (lambda x: -x, torch.neg, lambda dy, x, y: -dy, lambda dy, x, y: -dy),
    "square": (lambda x: x * x, torch.square, lambda dy, x, y: 2.0 * x * dy,
               lambda dy, x, y: 2 * x * dy),
    "sqrt": (ops.sqrt, torch.sqrt, lambda dy, x, y: dy * 0.5 / y, lambda dy, x, y: dy * 0.5 / y),
    "exp": (ops.exp, torch.exp, lambda dy, x, y: dy * y, lambda dy, x, y: dy * y),
    "log": (ops.log, torch.log, lambda dy, x, y: dy / x, lambda dy, x, y: dy / x),
    "abs": (ops.abs, torch.abs,
            lambda dy, x, y: ops.where(x > 0, dy, ops.where(x < 0, -dy, 0.0)),
            lambda dy, x, y: dy * torch.sign(x)),
    "sign": (lambda x: ops.where(x > 0, 1.0, ops.where(x < 0, -1.0, 0.0)), torch.sign,
             lambda dy, x, y: dy * 0.0, lambda dy, x, y: dy * 0),
    "sigmoid": (ops.sigmoid, torch.sigmoid, lambda dy, x, y: ops.sigmoid_backward(dy, y),
                lambda dy, x, y: dy * y * (1 - y)),
    "tanh": (ops.tanh, torch.tanh, lambda dy, x, y: ops.tanh_backward(dy, y),
             lambda dy, x, y: dy * (1 - y * y)),
    "relu": (lambda x: ops.maximum(x, 0.0), torch.relu,
             lambda dy, x, y: ops.threshold_backward(dy, y, 0),
             lambda dy, x, y: torch.where(y > 0, dy, torch.zeros_like(dy))),
    "softrelu": (lambda x: ops.maximum(x, 0.0) + ops.log(1.0 + ops.exp(-ops.abs(x))),
                 torch.nn.functional.softplus, lambda dy, x, y: dy * ops.sigmoid(x),
                 lambda dy, x, y: dy * torch.sigmoid(x)),
    "softsign": (lambda x: x / (1.0 + ops.abs(x)), torch.nn.functional.softsign,
                 lambda dy, x, y: dy / ((1.0 + ops.abs(x)) * (1.0 + ops.abs(x))),
                 lambda dy, x, y: dy / (1 + x.abs()) ** 2),
    "reciprocal": (lambda x: 1.0 / x, torch.reciprocal, lambda dy, x, y: -dy * y * y,
                   lambda dy, x, y: -dy * y * y),
    # mxnet's cbrt: the real cube root (cbrt(-8) = -2, cbrt(0) = 0), its gradient
    # 1 / (3 y^2) from the output. |x|^(1/3) as exp(log|x| / 3): Triton has no cbrt
    # (within 2e-6 relative of the exact root in float32).
    "cbrt": (lambda x: ops.where(x < 0, -1.0, 1.0) * ops.exp(ops.log(ops.abs(x)) / 3.0),
             lambda x: torch.sign(x) * x.abs() ** (1.0 / 3.0),
             lambda dy, x, y: dy / (3.0 * y * y), lambda dy, x, y: dy / (3 * y * y)),
    # mxnet's rcbrt: 1 / cbrt(x), its gradient -1 / (3 x cbrt(x)) from the input
    "rcbrt": (lambda x: ops.where(x < 0, -1.0, 1.0) * ops.exp(ops.log(ops.abs(x)) / -3.0),
              lambda x: torch.sign(x) / x.abs() ** (1.0 / 3.0),
              lambda dy, x, y: -dy * y / (3.0 * x), lambda dy, x, y: -dy * y / (3 * x)),
}


def reads_input(gmath) -> bool:
    """Whether a unary row's gradient math ``gmath(dy, x, y)`` reads the forward's input.

    Most read only the output ``y`` (tanh, sigmoid, relu, exp, ...): their backward op
    then takes ``(ograd, output)``, as mxnet's ``_backward_Activation`` does for those,
    so the forward's input is not kept for the backward. That lets a convolution's
    group end in its activation without storing the pre-activation, which the cpu
    target's fused convolution + activation call (``compiler/cpu/conv.py``) needs.
    """
    expr = gmath(ops.value("dy"), ops.value("x"), ops.value("y"))
    return "x" in value_reads(expr)


def backward_op(name, gmath, gref):
    """The ``_backward_<name>`` OpDef of a unary row: arguments ``(ograd, data, output)``,
    or ``(ograd, output)`` when the gradient does not read the input (:func:`reads_input`)."""
    if reads_input(gmath):
        expr = lambda attrs, dy, x, y, f=gmath: f(dy, x, y)     # noqa: E731
        return OpDef(
            name=f"_backward_{name}", pattern="elemwise", lowering=Pointwise(expr),
            arguments=("ograd", "data", "output"), infer_shape=same_shape,
            reference=lambda attrs, ins, is_train, f=gref: [f(*ins)],
            gradient=math_gradient(expr))
    expr = lambda attrs, dy, y, f=gmath: f(dy, None, y)     # noqa: E731
    return OpDef(
        name=f"_backward_{name}", pattern="elemwise", lowering=Pointwise(expr),
        arguments=("ograd", "output"), infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=gref: [f(ins[0], None, ins[1])],
        gradient=math_gradient(expr))


def backward_node(b, name, n):
    """The gradient node of unary row ``name`` at forward node ``n`` (its input only
    when the backward op takes it)."""
    args = (n.ograds[0], n.inputs[0], n.outputs[0]) if _BACKWARD_READS_INPUT[name] else \
        (n.ograds[0], n.outputs[0])
    return b.op(f"_backward_{name}", *args)


_BACKWARD_READS_INPUT = {}


def _unary_gradient(name):
    def gradient(b, n):
        return [backward_node(b, name, n)]
    return gradient


for _name, (_math, _ref, _gmath, _gref) in UNARY.items():
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(lambda attrs, x, f=_math: f(x)),
        infer_shape=same_shape, reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0])],
        gradient=_unary_gradient(_name)))
    _BACKWARD_READS_INPUT[_name] = reads_input(_gmath)
    register(backward_op(_name, _gmath, _gref))


# -- Activation: the same unary rows, chosen by act_type -----------------------

ACT_TYPES = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def _act_gradient(b, n):
    return [backward_node(b, n.attrs["act_type"], n)]


register(OpDef(
    name="Activation", pattern="elemwise",
    lowering=Pointwise(lambda attrs, x: UNARY[attrs["act_type"]][0](x)),
    attrs=[Attr("act_type", choice(*ACT_TYPES))],
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [UNARY[attrs["act_type"]][1](ins[0])],
    gradient=_act_gradient))


# -- binary arithmetic ------------------------------------------------------------
# name -> (math(a, c), reference, gradient(b, a, c, y, dy) -> (da, dc) before reduction)

def _odd_integer(c):
    """Whether ``c`` is an odd integer (not inf: fmod(inf, 2) is NaN)."""
    return ops.eq(ops.abs(ops.fmod(c, 2.0)), 1.0)


def _real_power(a, c):
    """``a ** c`` as C's ``pow`` (and mxnet): a negative base with an integer exponent
    keeps the sign of an odd one, with another exponent it is nan (infinite exponents
    count as even integers: ``(-2) ** inf`` is inf, ``(-1) ** inf`` 1); ``x ** 0`` is 1."""
    mag = ops.pow(ops.abs(a), c)
    signed = ops.where(_odd_integer(c), -mag, mag)
    # -inf to a non-integer power is inf ** c, as C's pow; a finite negative base NaN
    real = ops.eq(ops.floor(c), c) | ops.eq(a, -math.inf)
    negative = ops.where(real, signed, float("nan"))
    return ops.where(ops.eq(c, 0.0), 1.0, ops.where(a < 0, negative, mag))


BINARY = {
    "add": (lambda a, c: a + c, torch.add, lambda b, a, c, y, dy: (dy, dy)),
    "sub": (lambda a, c: a - c, torch.sub, lambda b, a, c, y, dy: (dy, -dy)),
    "mul": (lambda a, c: a * c, torch.mul, lambda b, a, c, y, dy: (dy * c, dy * a)),
    "div": (lambda a, c: a / c, torch.div, lambda b, a, c, y, dy: (dy / c, -(dy * y) / c)),
    "power": (_real_power, torch.pow,
              lambda b, a, c, y, dy: (dy * c * y / a, dy * y * b.log(a))),
    "maximum": (ops.maximum, torch.maximum,
                lambda b, a, c, y, dy: (b.op("_where_ge", dy, a, c), b.op("_where_ge", dy, c, a,
                                                                          strict=True))),
    "minimum": (ops.minimum, torch.minimum,
                lambda b, a, c, y, dy: (b.op("_where_ge", dy, c, a), b.op("_where_ge", dy, a, c,
                                                                          strict=True))),
}

# name -> (math, reference): 1.0 where the comparison holds, else 0.0
COMPARE = {
    "equal": (ops.eq, torch.eq), "not_equal": (ops.ne, torch.ne),
    "greater": (ops.gt, torch.gt), "greater_equal": (ops.ge, torch.ge),
    "lesser": (ops.lt, torch.lt), "lesser_equal": (ops.le, torch.le),
}


def _binary_expr(name):
    math_ = BINARY[name][0]
    return lambda attrs, a, c: math_(a, c)


def _binary_gradient(name, broadcast):
    rule = BINARY[name][2]

    def gradient(b, n):
        a, c = n.inputs
        da, dc = rule(b, a, c, n.outputs[0], n.ograds[0])
        if broadcast:
            da = _sum_to(b, da, n.in_shapes[0])
            dc = _sum_to(b, dc, n.in_shapes[1])
        return [da, dc]
    return gradient


def _sum_to(b, ref, shape):
    if tuple(ref.shape) == tuple(shape):
        return ref
    return b.op("_sum_to_shape", ref, shape=tuple(shape))


_ALIASES = {
    "add": ("_Plus", "_plus", "_add"), "sub": ("_Minus", "_minus", "_sub"),
    "mul": ("_Mul", "_mul"), "div": ("_Div", "_div"),
    "power": ("_Power", "_power"), "maximum": ("_Maximum", "_maximum"),
    "minimum": ("_Minimum", "_minimum"),
}

for _name, (_expr, _ref, _) in BINARY.items():
    _public = {"maximum": "maximum", "minimum": "minimum"}.get(_name)
    if _name in ("add", "sub", "mul", "div", "power"):
        register(OpDef(
            name=f"elemwise_{_name}" if _name != "power" else "_power_same",
            pattern="elemwise", lowering=Pointwise(_binary_expr(_name)),
            arguments=("lhs", "rhs"), infer_shape=same_shape,
            reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0], ins[1])],
            gradient=_binary_gradient(_name, False), aliases=_ALIASES[_name],
            # mxnet's same-shape power is the operator _power
            json_names=tuple((s, "_power") for s in ("_power_same",) + _ALIASES[_name])
            if _name == "power" else ()))
    register(OpDef(
        name=f"broadcast_{_name}", pattern="broadcast", lowering=Pointwise(_binary_expr(_name)),
        arguments=("lhs", "rhs"), infer_shape=broadcast_shape,
        reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0], ins[1])],
        gradient=_binary_gradient(_name, True),
        aliases=(_public,) + (_ALIASES[_name] if _name in ("maximum", "minimum") else ())
        if _public else (("broadcast_plus",) if _name == "add" else
                         ("broadcast_minus",) if _name == "sub" else ()),
        # mxnet's _maximum / _Maximum: its same-shape operator _maximum
        json_names=tuple((s, f"_{_name}") for s in _ALIASES[_name][:2])
        if _name in ("maximum", "minimum") else ()))

for _name, (_cmp, _tcmp) in COMPARE.items():
    register(OpDef(
        name=f"broadcast_{_name}", pattern="broadcast",
        lowering=Pointwise(lambda attrs, a, c, f=_cmp: ops.where(f(a, c), 1.0, 0.0)),
        arguments=("lhs", "rhs"), infer_shape=broadcast_shape,
        reference=lambda attrs, ins, is_train, f=_tcmp: [f(ins[0], ins[1]).to(ins[0].dtype)],
        gradient=lambda b, n: [b.zeros_like(n.inputs[0]), b.zeros_like(n.inputs[1])],
        aliases=(f"_{_name}", f"_{_name.title().replace('_', '')}"),
        # mxnet's _equal / _Equal ...: its same-shape comparison operator _equal (it has
        # no _NotEqual, _GreaterEqual, _LesserEqual: those are written as this entry)
        json_names=((f"_{_name}", f"_{_name}"),) + (
            ((f"_{_name.title()}", f"_{_name}"),) if "_" not in _name else ())))
    register(OpDef(
        name=f"_{_name}_scalar", pattern="elemwise",
        lowering=Pointwise(lambda attrs, a, f=_cmp: ops.where(f(a, attrs["scalar"]), 1.0, 0.0)),
        attrs=[Attr("scalar", parse_float)], infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_tcmp: [f(ins[0], attrs["scalar"]).to(ins[0].dtype)],
        gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
        aliases=(f"_{_name.title().replace('_', '')}Scalar",)))


def _where_ge_expr(attrs, dy, a, c):
    return ops.where(a > c if attrs["strict"] else a >= c, dy, 0.0)


def _where_ge_ref(attrs, ins, is_train):
    dy, a, c = ins
    mask = a > c if attrs["strict"] else a >= c
    return [torch.where(mask, dy, torch.zeros_like(dy))]


register(OpDef(
    name="_where_ge", pattern="broadcast", lowering=Pointwise(_where_ge_expr),
    arguments=("ograd", "lhs", "rhs"), attrs=[Attr("strict", lambda v: str(v) == "True", False)],
    infer_shape=broadcast_shape, reference=_where_ge_ref,
    doc="dy where lhs >= rhs (lhs > rhs when strict), else 0: max/min gradients."))


# -- scalar arithmetic ------------------------------------------------------------
# name -> (math(x, s), reference(x, s), gradient(b, x, y, dy, s), mxnet alias)

def _power_scalar_math(x, s):
    if not math.isfinite(s):
        # C's pow: |x| == 1 gives 1 for any exponent; inf and -inf by |x| against 1
        if math.isnan(s):
            return ops.where(ops.eq(x, 1.0), 1.0, math.nan)
        inf_pow = ops.pow(ops.abs(x), s)
        return ops.where(ops.eq(ops.abs(x), 1.0), 1.0, inf_pow)
    if s == int(s) and 0 <= s <= 4:        # small integer powers: products, exact
        y = ops.const(1.0)
        for k in range(int(s)):
            y = x if k == 0 else y * x
        return y
    if s == int(s):                         # a negative base keeps an odd power's sign
        mag = ops.pow(ops.abs(x), s)
        return ops.where(x < 0, -mag, mag) if int(s) % 2 else mag
    # a finite negative base to a non-integer power is NaN, -inf's is inf ** s (C's pow)
    return ops.where(ops.eq(x, -math.inf), ops.pow(ops.abs(x), s), ops.pow(x, s))


def _log_or_nan(s):
    """``log(s)`` as C computes it: -inf at 0, nan below (math.log raises)."""
    if math.isnan(s) or s < 0:
        return math.nan
    return -math.inf if s == 0 else math.log(s)


def _rpower_scalar_math(x, s):
    """``s ** x`` as C's ``pow(s, x)``: 1 at x == 0 for every s, a negative base only
    to integer powers (odd ones negative), -inf's signed limits."""
    if math.isnan(s):
        return ops.where(ops.eq(x, 0.0), 1.0, math.nan)
    mag = ops.pow(ops.const(abs(s)), x)           # |s| ** x; inf and 0 bases included
    if s >= 0:
        return ops.where(ops.eq(x, 0.0), 1.0, mag)
    integral = ops.eq(ops.floor(x), x)
    signed = ops.where(_odd_integer(x), -mag, mag)
    if not math.isinf(s):                        # a finite negative base: nan off integers
        signed = ops.where(integral, signed, math.nan)
    return ops.where(ops.eq(x, 0.0), 1.0, signed)


SCALAR = {
    "_plus_scalar": (lambda x, s: x + s, lambda x, s: x + s, lambda b, x, y, dy, s: dy,
                     "_PlusScalar"),
    "_minus_scalar": (lambda x, s: x - s, lambda x, s: x - s, lambda b, x, y, dy, s: dy,
                      "_MinusScalar"),
    "_rminus_scalar": (lambda x, s: s - x, lambda x, s: s - x, lambda b, x, y, dy, s: -dy,
                       "_RMinusScalar"),
    "_mul_scalar": (lambda x, s: x * s, lambda x, s: x * s,
                    lambda b, x, y, dy, s: b.op("_mul_scalar", dy, scalar=s), "_MulScalar"),
    "_div_scalar": (lambda x, s: x / s, lambda x, s: x / s,
                    lambda b, x, y, dy, s: b.op("_div_scalar", dy, scalar=s), "_DivScalar"),
    "_rdiv_scalar": (lambda x, s: s / x, lambda x, s: s / x,
                     lambda b, x, y, dy, s: -(dy * y) / x, "_RDivScalar"),
    "_power_scalar": (_power_scalar_math, lambda x, s: x ** s,
                      lambda b, x, y, dy, s: dy * b.op("_power_scalar", x, scalar=s - 1.0) * s,
                      "_PowerScalar"),
    # log(s) in double: float64 kernels
    "_rpower_scalar": (_rpower_scalar_math,
                       lambda x, s: torch.pow(torch.tensor(s, dtype=x.dtype), x),
                       lambda b, x, y, dy, s: b.op("_backward_rpower_scalar", dy, y,
                                                   scalar=s),
                       "_RPowerScalar"),
    "_maximum_scalar": (ops.maximum, lambda x, s: torch.clamp(x, min=s),
                        lambda b, x, y, dy, s: dy * b.op("_greater_equal_scalar", x, scalar=s),
                        "_MaximumScalar"),
    "_minimum_scalar": (ops.minimum, lambda x, s: torch.clamp(x, max=s),
                        lambda b, x, y, dy, s: dy * b.op("_lesser_equal_scalar", x, scalar=s),
                        "_MinimumScalar"),
}


def _scalar_expr(name):
    math_ = SCALAR[name][0]
    return lambda attrs, x: math_(x, attrs["scalar"])


def _scalar_gradient(name):
    rule = SCALAR[name][2]
    return lambda b, n: [rule(b, n.inputs[0], n.outputs[0], n.ograds[0], n.attrs["scalar"])]


for _name, (_e, _ref, _g, _alias) in SCALAR.items():
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(_scalar_expr(_name)),
        attrs=[Attr("scalar", parse_float), Attr("is_int", parse_str, "True")],
        infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_ref: [
            f(ins[0], saturate_to_dtype(attrs["scalar"], ins[0].dtype))],
        gradient=_scalar_gradient(_name), aliases=(_alias,)))


# s ** x's gradient, dy * y * log(s), with s as the kernel's dtype holds it (an
# entry of its own so that 1e39 is float32's inf here too, as mxnet computes it)
register(OpDef(
    name="_backward_rpower_scalar", pattern="elemwise", arguments=("ograd", "output"),
    attrs=[Attr("scalar", parse_float)], infer_shape=same_shape,
    lowering=Pointwise(lambda attrs, dy, y: dy * y * _log_or_nan(attrs["scalar"])),
    reference=lambda attrs, ins, is_train: [
        ins[0] * ins[1] * _log_or_nan(saturate_to_dtype(attrs["scalar"], ins[0].dtype))]))


# -- clip, where, constants, identity -----------------------------------------------

def _clip_expr(attrs, x):
    return ops.minimum(ops.maximum(x, attrs["a_min"]), attrs["a_max"])


def _clip_gradient(b, n):
    return [b.op("_backward_clip", n.ograds[0], n.inputs[0],
                 a_min=n.attrs["a_min"], a_max=n.attrs["a_max"])]


_CLIP_ATTRS = [Attr("a_min", parse_float), Attr("a_max", parse_float)]
register(OpDef(
    name="clip", pattern="elemwise", lowering=Pointwise(_clip_expr), attrs=_CLIP_ATTRS,
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [torch.clamp(ins[0], attrs["a_min"], attrs["a_max"])],
    gradient=_clip_gradient))


def _clip_backward_expr(attrs, dy, x):
    return ops.where((x >= attrs["a_min"]) & (x <= attrs["a_max"]), dy, 0.0)


register(OpDef(
    name="_backward_clip", pattern="elemwise", arguments=("ograd", "data"), attrs=_CLIP_ATTRS,
    lowering=Pointwise(_clip_backward_expr), gradient=math_gradient(_clip_backward_expr),
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [torch.where(
        (ins[1] >= attrs["a_min"]) & (ins[1] <= attrs["a_max"]), ins[0],
        torch.zeros_like(ins[0]))]))


def _where_shape(attrs, in_shapes):
    cond, x, y = in_shapes
    if cond is not None and 0 in tuple(cond) and not zero_is_size():
        return in_shapes, [None]    # mxnet infers nothing until the condition is known
    shape = merge_shape(x, y, "where: x and y must have the same shape")
    if cond is not None and shape is not None:
        # an unknown (0) data dim, in partial inference, agrees with the condition's
        agree = (lambda c, s: len(c) == len(s) and all(a == b or not b for a, b in zip(c, s)))
        if not agree(tuple(cond), tuple(shape)) and not agree(tuple(cond), (shape[0],)):
            raise ShapeError(f"where: condition shape {tuple(cond)} must equal the data shape "
                             f"{tuple(shape)} or be ({shape[0]},)")
    return [cond, shape, shape], [shape]


def _cond_dims(attrs, in_shapes, out_shape):
    """``where``'s 1-D condition selects along axis 0 (left-aligned)."""
    cond = in_shapes[0]
    if len(cond) == 1 and len(out_shape) > 1:
        return [[0], list(range(len(out_shape))), list(range(len(out_shape)))]
    return None


def _where_ref(attrs, ins, is_train):
    cond, x, y = ins
    if cond.dim() == 1 and x.dim() > 1:
        cond = cond.reshape((-1,) + (1,) * (x.dim() - 1))
    return [torch.where(cond != 0, x, y)]


def _where_gradient(b, n):
    cond, x, y = n.inputs
    dy = n.ograds[0]
    zero = b.zeros_like(dy)
    return [b.zeros_like(cond), b.op("where", cond, dy, zero), b.op("where", cond, zero, dy)]


register(OpDef(
    name="where", pattern="broadcast",
    lowering=Pointwise(lambda attrs, c, x, y: ops.where(ops.ne(c, 0), x, y), _cond_dims),
    arguments=("condition", "x", "y"), infer_shape=_where_shape, reference=_where_ref,
    # mxnet: x, y and the output share a dtype; the condition may have any
    infer_type=lambda attrs, t: ([t[0] or t[1] or t[2]] + [t[1] or t[2]] * 2, [t[1] or t[2]]),
    gradient=_where_gradient))

# mxnet's zeros_like / ones_like ignore the values: 0 and 1 where x is inf or NaN too
# (x * 0.0 would be NaN there, and so would the zero gradients built from zeros_like)
register(OpDef(
    name="zeros_like", pattern="elemwise",
    lowering=Pointwise(lambda attrs, x: ops.where(x < 0, 0.0, 0.0)),
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [torch.zeros_like(ins[0])],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])]))
register(OpDef(
    name="ones_like", pattern="elemwise",
    lowering=Pointwise(lambda attrs, x: ops.where(x < 0, 1.0, 1.0)),
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [torch.ones_like(ins[0])],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])]))

# Identity ops are views: they cost no kernel.
_identity_view = View(view=lambda attrs, in_shape, out_shape, strides, offset: (strides, offset),
                      dimmap=lambda attrs, in_shape, out_shape: list(range(len(in_shape))))
register(OpDef(
    name="BlockGrad", pattern="injective", lowering=_identity_view, infer_shape=same_shape,
    rows_independent=True,
    reference=lambda attrs, ins, is_train: [ins[0]],
    # no contribution at all (rather than zeros): the forward values behind a
    # BlockGrad are then not kept for a backward pass that would multiply them by 0
    gradient=lambda b, n: [None], aliases=("stop_gradient",)))
register(OpDef(
    name="_copy", pattern="injective", lowering=_identity_view, infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [ins[0]],
    gradient=lambda b, n: [n.ograds[0]], aliases=("identity",)))

# A copy into fresh contiguous memory: inserted by the compiler where a view
# cannot be expressed by strides, or where a head is a variable or a view.
register(OpDef(
    name="_materialize", pattern="elemwise", lowering=Pointwise(lambda attrs, x: x + 0.0),
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [ins[0].clone()],
    gradient=lambda b, n: [n.ograds[0]]))


# -- smooth_l1 ----------------------------------------------------------------------------
# mxnet's mshadow_op::smooth_l1_loss / smooth_l1_gradient, sigma = `scalar`:
#   f(x) = x - 0.5/s2 (x > 1/s2),  -x - 0.5/s2 (x < -1/s2),  0.5 s2 x^2 (otherwise)
#   f'(x) = 1, -1, s2 x on the same three pieces (s2 = sigma^2).

def _smooth_l1_expr(attrs, x):
    s2 = attrs["scalar"] ** 2
    t = 1.0 / s2
    return ops.where(x > t, x - 0.5 / s2, ops.where(x < -t, -x - 0.5 / s2, 0.5 * s2 * x * x))


def _smooth_l1_ref(attrs, ins, is_train):
    x, s2 = ins[0], attrs["scalar"] ** 2
    return [torch.where(x > 1.0 / s2, x - 0.5 / s2,
                        torch.where(x < -1.0 / s2, -x - 0.5 / s2, 0.5 * s2 * x * x))]


register(OpDef(
    name="smooth_l1", pattern="elemwise", lowering=Pointwise(_smooth_l1_expr),
    attrs=[Attr("scalar", parse_float, 1.0), Attr("is_int", parse_str, "True")],
    infer_shape=same_shape, reference=_smooth_l1_ref,
    gradient=lambda b, n: [b.op("_backward_smooth_l1", n.ograds[0], n.inputs[0],
                                scalar=n.attrs["scalar"])],
    doc="Smooth L1 (Huber) loss, elementwise, with sigma = scalar: 0.5 (sigma x)^2 where "
        "|x| <= 1/sigma^2, |x| - 0.5/sigma^2 elsewhere."))


def _smooth_l1_grad_expr(attrs, dy, x):
    s2 = attrs["scalar"] ** 2
    t = 1.0 / s2
    return dy * ops.where(x > t, 1.0, ops.where(x < -t, -1.0, s2 * x))


register(OpDef(
    name="_backward_smooth_l1", pattern="elemwise", arguments=("ograd", "data"),
    lowering=Pointwise(_smooth_l1_grad_expr),
    attrs=[Attr("scalar", parse_float, 1.0), Attr("is_int", parse_str, "True")],
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [ins[0] * torch.where(
        ins[1] > 1.0 / attrs["scalar"] ** 2, torch.ones_like(ins[1]),
        torch.where(ins[1] < -1.0 / attrs["scalar"] ** 2, -torch.ones_like(ins[1]),
                    attrs["scalar"] ** 2 * ins[1]))]))
