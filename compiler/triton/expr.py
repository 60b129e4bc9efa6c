"""The expression vocabulary (``compiler/ir/expr.py``) as Triton source: the handler of the
``interpret`` and ``cuda:<arch>`` targets.

Every method returns a :class:`_Text`, source with the precedence of its outermost
operation, so that parentheses appear only where Python's grammar needs them (and
around a whole instruction, as ``(x * x)``): the text reads as an author would write
it, and a left-nested chain ``dy * y * y`` keeps its evaluation order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.expr import evaluate
from ..ops.registry import lit

# Python's binding strengths, weakest first; an atom (name, call, literal) binds tightest.
_CMP, _OR, _AND, _SUM, _PRODUCT, _UNARY, _NEG_LITERAL, _ATOM = range(8)
_BINARY = {"add": ("+", _SUM), "sub": ("-", _SUM), "mul": ("*", _PRODUCT),
           "div": ("/", _PRODUCT), "and_": ("&", _AND), "or_": ("|", _OR),
           "lt": ("<", _CMP), "le": ("<=", _CMP), "gt": (">", _CMP), "ge": (">=", _CMP),
           "eq": ("==", _CMP), "ne": ("!=", _CMP),
           # Triton's float % is frem, C's fmod (Python's % on two numbers is not,
           # but no operator's math takes the remainder of two constants)
           "fmod": ("%", _PRODUCT)}
_CALLS = {"exp": "tl.exp", "log": "tl.log", "abs": "tl.abs", "sqrt": "tl.sqrt",
          "sigmoid": "tl.sigmoid", "erf": "tl.erf", "where": "tl.where", "sin": "tl.sin", "cos": "tl.cos",
          "log2": "tl.log2", "floor": "tl.floor", "ceil": "tl.ceil",
          # arctangent without libdevice: templates/_macros.py.j2
          "atan": "_atan",
          # tanh without libdevice (the interpreter has none): templates/_macros.py.j2
          "tanh": "_tanh"}


@dataclass(frozen=True)
class _Text:
    text: str
    prec: int = _ATOM

    def atom(self) -> str:
        """The text as the receiver of a method call (``(a + b).to(...)``)."""
        return self.text if self.prec == _ATOM else f"({self.text})"


def _binary(symbol, prec):
    def emit(self, a, b):
        # comparisons do not chain (``a < b < c`` means something else): both sides
        # of one need parentheses at equal strength; other operators associate left
        left = a.text if a.prec > prec or (a.prec == prec and prec != _CMP) else f"({a.text})"
        right = b.text if b.prec > prec else f"({b.text})"
        return _Text(f"{left} {symbol} {right}", prec)
    return emit


def _call(fn):
    return lambda self, *args: _Text(f"{fn}({', '.join(a.text for a in args)})")


def _nan_propagating(fn):
    # as ATen's maximum / clamp (the cpu target): a NaN on either side is the result;
    # Triton's default keeps the other operand
    return lambda self, a, b: _Text(f"{fn}({a.text}, {b.text}, "
                                    f"propagate_nan=tl.PropagateNan.ALL)")


class TritonOps:
    """Handler of the vocabulary for Triton kernels.

    ``coord_name(pos)`` gives the kernel's variable of a domain coordinate (None for a
    position of size 1, which reads as 0); ``cdt`` is the compute dtype (``tl.float32``).
    """
    target = "triton"

    def __init__(self, coord_name, cdt: str):
        self.coord_name, self.cdt = coord_name, cdt

    def value(self, name):
        return _Text(name)

    def const(self, x):
        text = lit(x) if isinstance(x, float) else str(int(x))
        if self.cdt == "tl.float64" and isinstance(x, float) and math.isfinite(x) and \
                float(np.float32(x)) != x:
            # Triton types a Python float as float32 (the compiled kernel rounds 0.1 to
            # 0.1f even beside float64 values; seen on an H100): a float64 constant
            return _Text(f"tl.full([], {text}, tl.float64)")
        return _Text(text, _NEG_LITERAL if text.startswith("-") else _ATOM)

    def coord(self, pos):
        return _Text(self.coord_name(pos) or "0")

    def neg(self, a):
        return _Text(f"-{a.text}" if a.prec >= _UNARY else f"-({a.text})", _UNARY)

    def to_int32(self, a):
        return _Text(f"{a.atom()}.to(tl.int32)")

    def round_to(self, a, dtype):
        return _Text(f"{a.atom()}.to(tl.{dtype}).to({self.cdt})")

    def philox_uniform(self, seed, *coords_and_params):
        """``tl.rand(key, offset)``: the seed's 32 bits zero-extended, the stream in the
        key's high word; the offset an int32 linear index (int64 when ``wide``)."""
        *coords, stream, strides, wide = coords_and_params
        bits = f"{seed.atom()}.to(tl.uint32, bitcast=True)"
        key = f"{bits}.to(tl.int64)" + (f" + {stream << 32}" if stream else "")
        terms = []
        for c, s in zip(coords, strides):
            c = f"{c.atom()}.to(tl.int64)" if wide else c.text
            terms.append(c if s == 1 else f"{c} * {s}")
        # a one-element source still needs an integer tensor offset (tl.rand calls .to on it)
        return _Text(f"tl.rand({key}, {' + '.join(terms) or f'({bits} * 0)'})")


for _op, (_symbol, _prec) in _BINARY.items():
    setattr(TritonOps, _op, _binary(_symbol, _prec))
for _op, _fn in _CALLS.items():
    setattr(TritonOps, _op, _call(_fn))
TritonOps.maximum = _nan_propagating("tl.maximum")
TritonOps.minimum = _nan_propagating("tl.minimum")


def triton_source(expr, coord_name, cdt: str, origin: str = "") -> str:
    """The Triton text of ``expr`` as the right side of an assignment.

    Parameters
    ----------
    expr : compiler.expr.Expr
    coord_name : callable(int) -> str or None
        The kernel's variable holding a domain position's coordinate.
    cdt : str
        The compute dtype, as Triton spells it (``tl.float32``).
    origin : str
        The operator and node, for :class:`~compiler.expr.MissingPrimitive`.

    Returns
    -------
    str
        An operation other than a call or a literal stands in parentheses, as
        ``(-x)`` and ``(a * b)`` (the form the registry's templates had).
    """
    t = evaluate(expr, TritonOps(coord_name, cdt), origin)
    return t.text if t.prec >= _NEG_LITERAL else f"({t.text})"
