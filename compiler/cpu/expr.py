"""The expression vocabulary (``compiler/ir/expr.py``) as torch calls: the handler of the
``cpu`` target, and the elementwise part of its lowering (``lower.py``).

Each primitive becomes at most one ATen call on whole domain-shaped tensors, writing
``out=`` (``codegen.plan`` decides where). Numbers stay Python scalars where torch
takes them and fold at compile time; ``x ± p*q`` becomes ``addcmul``; the composites
ATen has one kernel for (``sigmoid_backward``, ``tanh_backward``,
``threshold_backward``) are that kernel instead of their spelled-out definition.
"""
from __future__ import annotations

import math

from .values import Val, broadcast
from ..ir.dtypes import TORCH
from ..ops.registry import lit

_FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}
_COMMUTE = ("add", "mul", "maximum", "minimum", "logical_and", "logical_or")
# ATen kernels of composites, with the keyword of their out= variant.
_ATEN = {
    "sigmoid_backward": "sigmoid_backward({0}, {1}, grad_input={{out}})",
    "tanh_backward": "tanh_backward({0}, {1}, grad_input={{out}})",
    "threshold_backward": "threshold_backward({0}, {1}, {2}, grad_input={{out}})",
}
_FOLD = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "div": lambda a, b: a / b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
         "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "eq": lambda a, b: a == b,
         "ne": lambda a, b: a != b, "maximum": max, "minimum": min, "exp": math.exp,
         "log": math.log, "abs": abs, "erf": math.erf, "sin": math.sin, "cos": math.cos,
         "atan": math.atan, "log2": math.log2, "floor": math.floor, "ceil": math.ceil,
         "fmod": math.fmod, "tan": math.tan, "log10": math.log10, "log1p": math.log1p,
         "expm1": math.expm1, "sqrt": math.sqrt, "tanh": math.tanh,
         "sigmoid": lambda x: 1 / (1 + math.exp(-x)), "lgamma": math.lgamma,
         "digamma": lambda x: _torch_scalar("digamma", x),
         "erfinv": lambda x: _torch_scalar("erfinv", x),
         "logical_and": lambda a, b: bool(a and b), "logical_or": lambda a, b: bool(a or b),
         "pow": lambda a, b: _torch_scalar2("pow", a, b)}


def _torch_scalar(fn, x):
    """ATen's ``fn`` of one Python number, in float64 (a folded constant)."""
    import torch
    return float(getattr(torch, fn)(torch.tensor(float(x), dtype=torch.float64)))


def _torch_scalar2(fn, a, b):
    """ATen's ``fn`` of two Python numbers, in float64 (``math.pow(0, -1)`` raises)."""
    import torch
    return float(getattr(torch, fn)(torch.tensor(float(a), dtype=torch.float64), float(b)))


def scalar(x) -> Val:
    """A Python number as a value."""
    return Val("", (), kind="scalar", scalar=x)


class ExprLowering:
    """Methods of the cpu lowering that make elementwise calls (mixed into ``Lowering``)."""

    def ew(self, fn, *args):
        """An elementwise torch call; scalars stay Python numbers where torch takes them."""
        tens = [a for a in args if a.kind != "scalar"]
        if not tens:
            return scalar(_FOLD[fn](*[a.scalar for a in args]))
        shape = broadcast([a.shape for a in tens], len(self.D))
        a = list(args)
        if fn in _COMMUTE and a[0].kind == "scalar":
            a = [a[1], a[0]]
        if fn in _FLIP and a[0].kind == "scalar":
            fn, a = _FLIP[fn], [a[1], a[0]]
        if a[0].dtype == "f" and a[1].kind == "scalar" and (
                (fn in ("add", "sub") and a[1].scalar == 0) or
                (fn in ("mul", "div") and a[1].scalar == 1)):
            return a[0]
        if fn in ("sub", "div", "fmod", "pow") and a[0].kind == "scalar":
            a[0] = self.const(a[0].scalar)
        if fn in ("add", "sub") and all(v.kind != "scalar" for v in a):
            fused = self.add_product(fn, a[0], a[1])
            if fused is not None:
                return fused
        if fn == "maximum" and a[1].kind == "scalar":
            fn = "clamp_min"
        elif fn == "minimum" and a[1].kind == "scalar":
            fn = "clamp_max"
        dtype = "b" if fn in _FLIP or fn.startswith("logical") else _arith_dtype(a)
        if dtype == "f" and self.cdt != "torch.float32" and \
                not any(v.dtype == "f" for v in a if v.kind != "scalar"):
            # integer tensors (coordinates) with a float scalar: torch would give float32,
            # the default dtype; a float64 kernel computes in float64
            a = [v if v.kind == "scalar" else
                 self.emit("cast", f"{{a0}}.to({self.cdt})", [v], v.shape) for v in a]
        second = lit(a[1].scalar) if a[1].kind == "scalar" else "{a1}"
        return self.emit("ew", f"torch.{fn}({{a0}}, {second}, out={{out}})", a, shape,
                         dtype, fn=fn)

    def add_product(self, fn, x, y):
        """``x + p*q`` / ``x - p*q`` as one ``addcmul`` (``x ± s*p``: ``add(alpha=)``) when
        the product is used only here: one ATen call instead of two."""
        for k, (base, prod_) in enumerate(((x, y), (y, x))):
            if fn == "sub" and k == 1:
                break
            op = prod_.op
            if prod_.kind != "temp" or op is None or op not in self.ops or \
                    not op.fmt.startswith("torch.mul(") or self.val_uses(prod_, 1) != 1 or \
                    base.dtype != "f" or prod_.dtype != "f":
                continue
            p, q = op.args
            sign = -1.0 if fn == "sub" else 1.0
            self.ops.remove(op)
            shape = broadcast([base.shape, prod_.shape], len(self.D))
            if q.kind == "scalar":
                return self.emit("ew", f"torch.add({{a0}}, {{a1}}, alpha={lit(sign * q.scalar)}, "
                                       f"out={{out}})", [base, p], shape)
            return self.emit("ew", f"torch.addcmul({{a0}}, {{a1}}, {{a2}}, value={lit(sign)}, "
                                   f"out={{out}})", [base, p, q], shape)
        return None

    def unary(self, fn, x):
        if x.kind == "scalar":
            return scalar(_FOLD[fn](x.scalar))
        return self.emit("ew", f"torch.{fn}({{a0}}, out={{out}})", [x], x.shape, "f", fn=fn)

    def neg(self, x):
        if x.kind == "scalar":
            return scalar(-x.scalar)
        return self.emit("ew", "torch.neg({a0}, out={out})", [x], x.shape, x.dtype)

    def select(self, c, x, y):
        if c.kind == "scalar":
            return x if c.scalar else y
        x = self.const(x.scalar) if x.kind == "scalar" else x
        y = self.const(y.scalar) if y.kind == "scalar" else y
        shape = broadcast([v.shape for v in (c, x, y)], len(self.D))
        return self.emit("ew", "torch.where({a0}, {a1}, {a2}, out={out})", [c, x, y], shape,
                         _arith_dtype([x, y]))

    def round_to(self, x, dtype):
        """A rounding to ``dtype`` inside the compute dtype (``compiler/ops/cast.py``)."""
        if x.kind == "scalar" or TORCH[dtype] == self.cdt:
            return x
        return self.emit("cast", f"{{a0}}.to(torch.{dtype}).to({self.cdt})", [x], x.shape)

    def to_int32(self, x):
        if x.kind == "scalar":
            return scalar(int(x.scalar))
        return self.emit("cast", "{a0}.to(torch.int32)", [x], x.shape, "i")

    def aten(self, name, *args):
        """ATen's one kernel for a composite, looked up once in bind."""
        tens = [a for a in args if a.kind != "scalar"]
        shape = broadcast([a.shape for a in tens], len(self.D))
        bound = f"{name} = torch.ops.aten.{name}.grad_input"
        if bound not in self.bound_once:
            self.bound_once.add(bound)
            self.bind_lines.append(bound)
        fmt = _ATEN[name].format(*[f"{{a{k}}}" if a.kind != "scalar" else lit(a.scalar)
                                   for k, a in enumerate(args)])
        return self.emit("ew", fmt, args, shape)

    def philox_uniform(self, bits, *coords_and_params):
        """Triton's ``tl.rand`` in torch (``compiler/ir/philox.py``), one call; its offset,
        the linear index, sums (coordinate, stride) pairs in int64 (so ``wide`` needs
        nothing more)."""
        *coords, stream, strides, _wide = coords_and_params
        bound = "from compiler.ir.philox import stream_uniform"   # imported once, in bind
        if bound not in self.bound_once:
            self.bound_once.add(bound)
            self.bind_lines.append(bound)
        offset = " + ".join(f"{{a{k + 1}}}" + (f" * {s}" if s != 1 else "")
                            for k, s in enumerate(strides)) or "0"
        shape = broadcast([a.shape for a in [bits] + coords], len(self.D))
        draw = self.emit("ew", f"stream_uniform({{a0}}, {int(stream)}, {offset}, "
                               f"out={{out}})", [bits] + coords, shape, fn="philox")
        if self.cdt == "torch.float32":
            return draw
        # the draw is float32 (tl.rand's); a float64 kernel holds it in float64, exactly
        return self.emit("cast", f"{{a0}}.to({self.cdt})", [draw], shape)


class CpuOps:
    """Handler of the vocabulary for the cpu target: each primitive a method of the
    lowering ``lw`` (an :class:`ExprLowering`)."""
    target = "cpu"

    def __init__(self, lw):
        self.lw = lw

    def value(self, name):
        return self.lw.values[name]

    def const(self, x):
        return scalar(x)

    def coord(self, pos):
        return self.lw.coord(pos)

    def neg(self, a):
        return self.lw.neg(a)

    def where(self, c, a, b):
        return self.lw.select(c, a, b)

    def round_to(self, a, dtype):
        return self.lw.round_to(a, dtype)

    def to_int32(self, a):
        return self.lw.to_int32(a)

    def philox_uniform(self, *args):
        return self.lw.philox_uniform(*args)


def _method(kind, fn):
    if kind == "ew":
        return lambda self, a, b: self.lw.ew(fn, a, b)
    if kind == "unary":
        return lambda self, a: self.lw.unary(fn, a)
    return lambda self, *args: self.lw.aten(fn, *args)


for _op, _fn in {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "lt": "lt",
                 "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne",
                 "and_": "logical_and", "or_": "logical_or", "maximum": "maximum",
                 "minimum": "minimum", "fmod": "fmod", "pow": "pow"}.items():
    setattr(CpuOps, _op, _method("ew", _fn))
# (tan, log10, log1p, expm1, lgamma, digamma and erfinv are composites: ATen's one kernel
# each here; gamma is left to its definition over lgamma)
for _op in ("exp", "log", "abs", "sqrt", "sigmoid", "tanh", "erf", "sin", "cos", "atan",
            "log2", "floor", "ceil", "tan", "log10", "log1p", "expm1", "lgamma", "digamma",
            "erfinv"):
    setattr(CpuOps, _op, _method("unary", _op))
for _op in _ATEN:
    setattr(CpuOps, _op, _method("aten", _op))


def _arith_dtype(args):
    kinds = {a.dtype for a in args if a.kind != "scalar"}
    if "f" in kinds or any(a.kind == "scalar" and isinstance(a.scalar, float) for a in args):
        return "f"
    return "i" if "i" in kinds else "f"
