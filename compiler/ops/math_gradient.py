"""The gradient of a pointwise operator derived from its math: higher-order gradients.

A gradient operator such as ``_backward_sin`` (``dy * cos(x)``) is one fused kernel
whose math is written once in ``compiler/ir/expr.py``'s vocabulary. Its own gradient
(what ``autograd.grad(create_graph=True)`` and a second ``grad`` need) follows from
that math: :func:`math_gradient` spells the expression out as registry operators on
the node's inputs (:class:`GraphOps`, one more handler of the vocabulary, as each
target is one), then applies each spelled-out operator's gradient rule in reverse
order (``chain_rule.differentiate_node``). Nothing is written twice: change the
math and its gradient follows.
"""
from __future__ import annotations

import math
import numbers

from ..errors import MXNetError
from ..ir.expr import COMPOSITES, LEAVES, MissingPrimitive, evaluate, ops
from .chain_rule import differentiate_node, sum_refs

# primitive -> (operator on two arrays, on (array, number), on (number, array))
_BINARY = {
    "add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
    "sub": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
    "mul": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "div": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
    "maximum": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
    "minimum": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar"),
    "pow": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
    "lt": ("broadcast_lesser", "_lesser_scalar", "_greater_scalar"),
    "le": ("broadcast_lesser_equal", "_lesser_equal_scalar", "_greater_equal_scalar"),
    "gt": ("broadcast_greater", "_greater_scalar", "_lesser_scalar"),
    "ge": ("broadcast_greater_equal", "_greater_equal_scalar", "_lesser_equal_scalar"),
    "eq": ("broadcast_equal", "_equal_scalar", "_equal_scalar"),
    "ne": ("broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar"),
    "and_": ("broadcast_logical_and", None, None),
    "or_": ("broadcast_logical_or", None, None),
}
_NUMBERS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "maximum": max, "minimum": min, "pow": lambda a, b: a ** b,
    "lt": lambda a, b: float(a < b), "le": lambda a, b: float(a <= b),
    "gt": lambda a, b: float(a > b), "ge": lambda a, b: float(a >= b),
    "eq": lambda a, b: float(a == b), "ne": lambda a, b: float(a != b),
    "and_": lambda a, b: float(bool(a) and bool(b)), "or_": lambda a, b: float(bool(a) or bool(b)),
}
# primitive or composite -> the registry operator of one array
_UNARY = {"neg": "negative", "exp": "exp", "log": "log", "abs": "abs", "sqrt": "sqrt",
          "sigmoid": "sigmoid", "tanh": "tanh", "erf": "erf", "sin": "sin", "cos": "cos",
          "atan": "arctan", "log2": "log2", "floor": "floor", "ceil": "ceil", "tan": "tan",
          "log10": "log10", "log1p": "log1p", "expm1": "expm1", "lgamma": "gammaln",
          "gamma": "gamma", "erfinv": "erfinv"}
_UNARY_NUMBERS = {"neg": lambda a: -a, "exp": math.exp, "log": math.log, "abs": abs,
                  "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "atan": math.atan,
                  "log2": math.log2, "floor": math.floor, "ceil": math.ceil, "tan": math.tan,
                  "log10": math.log10, "log1p": math.log1p, "expm1": math.expm1,
                  "erf": math.erf, "tanh": math.tanh,
                  "sigmoid": lambda a: 1.0 / (1.0 + math.exp(-a))}


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real)


class GraphOps:
    """The expression vocabulary's handler that builds registry operators.

    Values are builder Refs (arrays) or Python numbers; numbers are folded where
    both operands are numbers. Primitives with no operator here (``fmod``, casts,
    coordinates, random draws) raise :class:`MissingPrimitive`, which
    :func:`math_gradient` reports as "no gradient".
    """
    target = "graph operators"

    def __init__(self, b, values: dict):
        self.b, self.values = b, values

    def value(self, name):
        return self.values[name]

    def const(self, x):
        return x

    def where(self, c, a, y):
        if _is_number(c):
            return a if c else y
        like = next(v for v in (a, y, c) if not _is_number(v))
        a, y = (self._full(like, v) if _is_number(v) else v for v in (a, y))
        return self.b.op("where", c, a, y)

    def _full(self, like, v):
        zero = self.b.op("zeros_like", like)
        return zero if v == 0 else self.b.op("_plus_scalar", zero, scalar=float(v))

    def __getattr__(self, name):
        if name in _BINARY:
            return lambda a, c: self._binary(name, a, c)
        if name in _UNARY:
            return lambda a: _UNARY_NUMBERS[name](a) if _is_number(a) else \
                self.b.op(_UNARY[name], a)
        raise AttributeError(name)

    def _binary(self, name, a, c):
        both, right, left = _BINARY[name]
        if _is_number(a) and _is_number(c):
            return _NUMBERS[name](a, c)
        if _is_number(c) or _is_number(a):
            if right is None:
                raise MissingPrimitive(f"{name} of an array and a number")
            arr, num, op = (a, c, right) if _is_number(c) else (c, a, left)
            return self.b.op(op, arr, scalar=float(num))
        return self.b.op(both, a, c)


def math_gradient(expr):
    """The ``gradient`` rule of a pointwise operator whose math is ``expr``.

    Parameters
    ----------
    expr : callable(attrs, *operands) -> Expr
        The operator's ``Pointwise`` math.

    Returns
    -------
    callable(b, n) -> list of Refs
        A gradient rule (``OpDef.gradient``) that spells the math out as registry
        operators on the node's inputs and takes their gradients.
    """
    def gradient(b, n):
        graph = b.graph
        # a copy of each input: two inputs that are one array keep their own terms
        inputs = [b.op("_copy", x) for x in n.inputs]
        names = [f"in{i}" for i in range(len(inputs))]
        before = set(graph.g.nodes)
        try:
            out = evaluate(expr(n.attrs, *[ops.value(k) for k in names]),
                           GraphOps(b, dict(zip(names, inputs))), f"the gradient of {n.name}")
        except MissingPrimitive as err:
            raise MXNetError(f"operator '{n.name}' has no gradient: its math uses {err}") \
                from None
        if _is_number(out):
            return [None] * len(inputs)
        contributions = {tuple(out.entry): [n.ograds[0]]}
        for k in sorted(set(graph.g.nodes) - before, reverse=True):
            differentiate_node(graph, b, k, contributions)
        return [sum_refs(b, contributions.get(tuple(x.entry), [])) for x in inputs]
    return gradient


def derivable(expr, arity: int, attrs=None) -> bool:
    """Whether :func:`math_gradient` can spell ``expr`` out as registry operators.

    Parameters
    ----------
    expr : callable(attrs, *operands) -> Expr
    arity : int
        Its number of operands.
    attrs : dict, optional
        Attributes to build the expression with (none for most unary math).

    Returns
    -------
    bool
        False where the math uses a primitive with no operator here (digamma's
        series uses ``fmod``: gamma's gradient operator then has no gradient).
    """
    stack = [expr(attrs or {}, *[ops.value(f"in{i}") for i in range(arity)])]
    while stack:
        e = stack.pop()
        if e.op in LEAVES:
            continue
        if e.op in _BINARY or e.op in _UNARY or e.op == "where":
            stack.extend(e.args)
        elif e.op in COMPOSITES:
            stack.append(COMPOSITES[e.op][1](*e.args))
        else:
            return False
    return True
