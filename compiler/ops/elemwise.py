"""Elementwise and broadcast operators: unary math, binary arithmetic (same
shape, broadcast and with scalars), comparisons, Activation, clip, where, zeros_like / ones_like, BlockGrad and the internal backward
operators their gradients use. (LeakyReLU has a file of its own: ``leaky_relu.py``.)

Each unary row holds the operator's forward expression, torch reference and
gradient (expression and reference) together; the table below registers the
forward op and its ``_backward_<name>`` op from that one row.
"""
from __future__ import annotations

import math

import torch

from .registry import (Attr, OpDef, Pointwise, ShapeError, View, broadcast_shapes, lit,
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


# -- unary table: name -> (expr, reference, grad_expr(dy, x, y), grad_ref(dy, x, y))

UNARY = {
    "negative": ("(-{x})", torch.neg, "(-{dy})", lambda dy, x, y: -dy),
    "square": ("({x} * {x})", torch.square, "(2.0 * {x} * {dy})", lambda dy, x, y: 2 * x * dy),
    "sqrt": ("tl.sqrt({x})", torch.sqrt, "({dy} * 0.5 / {y})", lambda dy, x, y: dy * 0.5 / y),
    "exp": ("tl.exp({x})", torch.exp, "({dy} * {y})", lambda dy, x, y: dy * y),
    "log": ("tl.log({x})", torch.log, "({dy} / {x})", lambda dy, x, y: dy / x),
    "abs": ("tl.abs({x})", torch.abs,
            "tl.where({x} > 0, {dy}, tl.where({x} < 0, -{dy}, 0.0))",
            lambda dy, x, y: dy * torch.sign(x)),
    "sign": ("tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0))", torch.sign,
             "({dy} * 0.0)", lambda dy, x, y: dy * 0),
    "sigmoid": ("tl.sigmoid({x})", torch.sigmoid, "({dy} * {y} * (1.0 - {y}))",
                lambda dy, x, y: dy * y * (1 - y)),
    "tanh": ("_tanh({x})", torch.tanh, "({dy} * (1.0 - {y} * {y}))",
             lambda dy, x, y: dy * (1 - y * y)),
    "relu": ("tl.maximum({x}, 0.0)", torch.relu, "tl.where({y} > 0, {dy}, 0.0)",
             lambda dy, x, y: torch.where(y > 0, dy, torch.zeros_like(dy))),
    "softrelu": ("(tl.maximum({x}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({x}))))",
                 torch.nn.functional.softplus, "({dy} * tl.sigmoid({x}))",
                 lambda dy, x, y: dy * torch.sigmoid(x)),
    "softsign": ("({x} / (1.0 + tl.abs({x})))", torch.nn.functional.softsign,
                 "({dy} / ((1.0 + tl.abs({x})) * (1.0 + tl.abs({x}))))",
                 lambda dy, x, y: dy / (1 + x.abs()) ** 2),
    "reciprocal": ("(1.0 / {x})", torch.reciprocal, "(-{dy} * {y} * {y})",
                   lambda dy, x, y: -dy * y * y),
}


# Backward rows ATen computes in one kernel (the cpu target calls it).
ATEN_BACKWARD = {
    "sigmoid": "aten.sigmoid_backward({dy}, {y})",     # dy * y * (1 - y)
    "tanh": "aten.tanh_backward({dy}, {y})",           # dy * (1 - y * y)
    "relu": "aten.threshold_backward({dy}, {y}, 0.0)",  # dy where y > 0, else 0
}


def _unary_expr(template):
    return lambda attrs, x: template.format(x=x)


def _backward_expr(template):
    return lambda attrs, dy, x, y: template.format(dy=dy, x=x, y=y)


def _unary_gradient(name):
    def gradient(b, n):
        return [b.op(f"_backward_{name}", n.ograds[0], n.inputs[0], n.outputs[0])]
    return gradient


for _name, (_expr, _ref, _gexpr, _gref) in UNARY.items():
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(_unary_expr(_expr)),
        infer_shape=same_shape, reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0])],
        gradient=_unary_gradient(_name),
        aliases=("_copy",) if False else ()))
    register(OpDef(
        name=f"_backward_{_name}", pattern="elemwise",
        lowering=Pointwise(_backward_expr(_gexpr), cpu=_backward_expr(ATEN_BACKWARD[_name])
                           if _name in ATEN_BACKWARD else None),
        arguments=("ograd", "data", "output"), infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_gref: [f(*ins)]))


# -- Activation: the same unary rows, chosen by act_type -----------------------

ACT_TYPES = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def _act_gradient(b, n):
    act = n.attrs["act_type"]
    return [b.op(f"_backward_{act}", n.ograds[0], n.inputs[0], n.outputs[0])]


register(OpDef(
    name="Activation", pattern="elemwise",
    lowering=Pointwise(lambda attrs, x: UNARY[attrs["act_type"]][0].format(x=x)),
    attrs=[Attr("act_type", choice(*ACT_TYPES))],
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [UNARY[attrs["act_type"]][1](ins[0])],
    gradient=_act_gradient))


# -- binary arithmetic ------------------------------------------------------------
# name -> (expr, reference, gradient(b, a, c, y, dy) -> (da, dc) before reduction)

def _pow_expr(a, c):
    return f"tl.exp({c} * tl.log({a}))"


BINARY = {
    "add": ("({a} + {c})", torch.add, lambda b, a, c, y, dy: (dy, dy)),
    "sub": ("({a} - {c})", torch.sub, lambda b, a, c, y, dy: (dy, -dy)),
    "mul": ("({a} * {c})", torch.mul, lambda b, a, c, y, dy: (dy * c, dy * a)),
    "div": ("({a} / {c})", torch.div, lambda b, a, c, y, dy: (dy / c, -(dy * y) / c)),
    "power": (None, torch.pow,
              lambda b, a, c, y, dy: (dy * c * y / a, dy * y * b.log(a))),
    "maximum": ("tl.maximum({a}, {c})", torch.maximum,
                lambda b, a, c, y, dy: (b.op("_where_ge", dy, a, c), b.op("_where_ge", dy, c, a,
                                                                          strict=True))),
    "minimum": ("tl.minimum({a}, {c})", torch.minimum,
                lambda b, a, c, y, dy: (b.op("_where_ge", dy, c, a), b.op("_where_ge", dy, a, c,
                                                                          strict=True))),
}

COMPARE = {
    "equal": "==", "not_equal": "!=", "greater": ">", "greater_equal": ">=",
    "lesser": "<", "lesser_equal": "<=",
}
_TORCH_CMP = {"==": torch.eq, "!=": torch.ne, ">": torch.gt, ">=": torch.ge,
              "<": torch.lt, "<=": torch.le}


def _binary_expr(name):
    template = BINARY[name][0]
    if template is None:
        return lambda attrs, a, c: _pow_expr(a, c)
    return lambda attrs, a, c: template.format(a=a, c=c)


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
            gradient=_binary_gradient(_name, False), aliases=_ALIASES[_name]))
    register(OpDef(
        name=f"broadcast_{_name}", pattern="broadcast", lowering=Pointwise(_binary_expr(_name)),
        arguments=("lhs", "rhs"), infer_shape=broadcast_shape,
        reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0], ins[1])],
        gradient=_binary_gradient(_name, True),
        aliases=(_public,) + (_ALIASES[_name] if _name in ("maximum", "minimum") else ())
        if _public else (("broadcast_plus",) if _name == "add" else
                         ("broadcast_minus",) if _name == "sub" else ())))

for _name, _sym in COMPARE.items():
    register(OpDef(
        name=f"broadcast_{_name}", pattern="broadcast",
        lowering=Pointwise(lambda attrs, a, c, s=_sym: f"tl.where({a} {s} {c}, 1.0, 0.0)"),
        arguments=("lhs", "rhs"), infer_shape=broadcast_shape,
        reference=lambda attrs, ins, is_train, f=_TORCH_CMP[_sym]: [f(ins[0], ins[1]).to(ins[0].dtype)],
        gradient=lambda b, n: [b.zeros_like(n.inputs[0]), b.zeros_like(n.inputs[1])],
        aliases=(f"_{_name}", f"elemwise_{_name}" if False else f"_{_name.title().replace('_', '')}")))
    register(OpDef(
        name=f"_{_name}_scalar", pattern="elemwise",
        lowering=Pointwise(lambda attrs, a, s=_sym: f"tl.where({a} {s} {lit(attrs['scalar'])}, 1.0, 0.0)"),
        attrs=[Attr("scalar", parse_float)], infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_TORCH_CMP[_sym]: [f(ins[0], attrs["scalar"]).to(ins[0].dtype)],
        gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
        aliases=(f"_{_name.title().replace('_', '')}Scalar",)))


def _where_ge_expr(attrs, dy, a, c):
    op = ">" if attrs["strict"] else ">="
    return f"tl.where({a} {op} {c}, {dy}, 0.0)"


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
# name -> (expr(x, s), reference(x, s), gradient(b, x, y, dy, s), mxnet alias)

SCALAR = {
    "_plus_scalar": ("({x} + {s})", lambda x, s: x + s, lambda b, x, y, dy, s: dy, "_PlusScalar"),
    "_minus_scalar": ("({x} - {s})", lambda x, s: x - s, lambda b, x, y, dy, s: dy, "_MinusScalar"),
    "_rminus_scalar": ("({s} - {x})", lambda x, s: s - x, lambda b, x, y, dy, s: -dy,
                       "_RMinusScalar"),
    "_mul_scalar": ("({x} * {s})", lambda x, s: x * s,
                    lambda b, x, y, dy, s: b.op("_mul_scalar", dy, scalar=s), "_MulScalar"),
    "_div_scalar": ("({x} / {s})", lambda x, s: x / s,
                    lambda b, x, y, dy, s: b.op("_div_scalar", dy, scalar=s), "_DivScalar"),
    "_rdiv_scalar": ("({s} / {x})", lambda x, s: s / x,
                     lambda b, x, y, dy, s: -(dy * y) / x, "_RDivScalar"),
    "_power_scalar": (None, lambda x, s: x ** s,
                      lambda b, x, y, dy, s: dy * b.op("_power_scalar", x, scalar=s - 1.0) * s,
                      "_PowerScalar"),
    "_rpower_scalar": ("tl.exp({x} * {logs})", lambda x, s: torch.pow(torch.tensor(s), x),
                       lambda b, x, y, dy, s: dy * y * math.log(s),
                       "_RPowerScalar"),
    "_maximum_scalar": ("tl.maximum({x}, {s})", lambda x, s: torch.clamp(x, min=s),
                        lambda b, x, y, dy, s: dy * b.op("_greater_equal_scalar", x, scalar=s),
                        "_MaximumScalar"),
    "_minimum_scalar": ("tl.minimum({x}, {s})", lambda x, s: torch.clamp(x, max=s),
                        lambda b, x, y, dy, s: dy * b.op("_lesser_equal_scalar", x, scalar=s),
                        "_MinimumScalar"),
}


def _power_scalar_expr(x, s):
    if s == int(s) and 0 <= s <= 4:
        return "(" + " * ".join([x] * int(s)) + ")" if s else "1.0"
    return f"tl.exp({lit(s)} * tl.log({x}))"


def _scalar_expr(name):
    template = SCALAR[name][0]

    def expr(attrs, x):
        s = attrs["scalar"]
        if template is None:
            return _power_scalar_expr(x, s)
        logs = lit(math.log(s)) if "{logs}" in template else ""   # in double: float64 kernels
        return template.format(x=x, s=lit(s), logs=logs)
    return expr


def _scalar_gradient(name):
    rule = SCALAR[name][2]
    return lambda b, n: [rule(b, n.inputs[0], n.outputs[0], n.ograds[0], n.attrs["scalar"])]


for _name, (_e, _ref, _g, _alias) in SCALAR.items():
    register(OpDef(
        name=_name, pattern="elemwise", lowering=Pointwise(_scalar_expr(_name)),
        attrs=[Attr("scalar", parse_float), Attr("is_int", parse_str, "True")],
        infer_shape=same_shape,
        reference=lambda attrs, ins, is_train, f=_ref: [f(ins[0], attrs["scalar"])],
        gradient=_scalar_gradient(_name), aliases=(_alias,)))


# -- clip, where, constants, identity -----------------------------------------------

def _clip_expr(attrs, x):
    return f"tl.minimum(tl.maximum({x}, {lit(attrs['a_min'])}), {lit(attrs['a_max'])})"


def _clip_gradient(b, n):
    return [b.op("_backward_clip", n.ograds[0], n.inputs[0],
                 a_min=n.attrs["a_min"], a_max=n.attrs["a_max"])]


_CLIP_ATTRS = [Attr("a_min", parse_float), Attr("a_max", parse_float)]
register(OpDef(
    name="clip", pattern="elemwise", lowering=Pointwise(_clip_expr), attrs=_CLIP_ATTRS,
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [torch.clamp(ins[0], attrs["a_min"], attrs["a_max"])],
    gradient=_clip_gradient))
register(OpDef(
    name="_backward_clip", pattern="elemwise", arguments=("ograd", "data"), attrs=_CLIP_ATTRS,
    lowering=Pointwise(lambda attrs, dy, x: (
        f"tl.where(({x} >= {lit(attrs['a_min'])}) & ({x} <= {lit(attrs['a_max'])}), {dy}, 0.0)")),
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [torch.where(
        (ins[1] >= attrs["a_min"]) & (ins[1] <= attrs["a_max"]), ins[0],
        torch.zeros_like(ins[0]))]))


def _where_shape(attrs, in_shapes):
    cond, x, y = in_shapes
    shape = merge_shape(x, y, "where: x and y must have the same shape")
    if cond is not None and shape is not None:
        if tuple(cond) != tuple(shape) and tuple(cond) != (shape[0],):
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
    lowering=Pointwise(lambda attrs, c, x, y: f"tl.where({c} != 0, {x}, {y})", _cond_dims),
    arguments=("condition", "x", "y"), infer_shape=_where_shape, reference=_where_ref,
    # mxnet: x, y and the output share a dtype; the condition may have any
    infer_type=lambda attrs, t: ([t[0] or t[1] or t[2]] + [t[1] or t[2]] * 2, [t[1] or t[2]]),
    gradient=_where_gradient))

register(OpDef(
    name="zeros_like", pattern="elemwise", lowering=Pointwise(lambda attrs, x: f"({x} * 0.0)"),
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [torch.zeros_like(ins[0])],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])]))
register(OpDef(
    name="ones_like", pattern="elemwise", lowering=Pointwise(lambda attrs, x: f"({x} * 0.0 + 1.0)"),
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [torch.ones_like(ins[0])],
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])]))

# Identity ops are views: they cost no kernel.
_identity_view = View(view=lambda attrs, in_shape, out_shape, strides, offset: (strides, offset),
                      dimmap=lambda attrs, in_shape, out_shape: list(range(len(in_shape))))
register(OpDef(
    name="BlockGrad", pattern="injective", lowering=_identity_view, infer_shape=same_shape,
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
    name="_materialize", pattern="elemwise", lowering=Pointwise(lambda attrs, x: f"({x} + 0.0)"),
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [ins[0].clone()],
    gradient=lambda b, n: [n.ograds[0]]))


# -- smooth_l1 ----------------------------------------------------------------------------
# mxnet's mshadow_op::smooth_l1_loss / smooth_l1_gradient, sigma = `scalar`:
#   f(x) = x - 0.5/s2 (x > 1/s2),  -x - 0.5/s2 (x < -1/s2),  0.5 s2 x^2 (otherwise)
#   f'(x) = 1, -1, s2 x on the same three pieces (s2 = sigma^2).

def _smooth_l1_expr(attrs, x):
    s2 = attrs["scalar"] ** 2
    t = lit(1.0 / s2)
    return (f"tl.where({x} > {t}, {x} - {lit(0.5 / s2)}, tl.where({x} < -{t}, "
            f"-{x} - {lit(0.5 / s2)}, {lit(0.5 * s2)} * {x} * {x}))")


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
    t = lit(1.0 / s2)
    return (f"{dy} * tl.where({x} > {t}, 1.0, tl.where({x} < -{t}, -1.0, "
            f"{lit(s2)} * {x}))")


register(OpDef(
    name="_backward_smooth_l1", pattern="elemwise", arguments=("ograd", "data"),
    lowering=Pointwise(_smooth_l1_grad_expr),
    attrs=[Attr("scalar", parse_float, 1.0), Attr("is_int", parse_str, "True")],
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [ins[0] * torch.where(
        ins[1] > 1.0 / attrs["scalar"] ** 2, torch.ones_like(ins[1]),
        torch.where(ins[1] < -1.0 / attrs["scalar"] ** 2, -torch.ones_like(ins[1]),
                    attrs["scalar"] ** 2 * ins[1]))]))
