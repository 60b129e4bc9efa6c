"""The expression vocabulary of operator math: written once, emitted by every target.

A pointwise operator's math (``compiler/ops/*.py``) is a Python function over
:class:`Expr` nodes built with :data:`ops` (and the arithmetic operators, which
build the same nodes)::

    Pointwise(lambda attrs, x: ops.exp(attrs["scalar"] * ops.log(x)))

The result is data: a tree of primitives over the kernel's SSA values
(``ops.value("v3")``), numbers (``ops.const``) and domain coordinates
(``ops.coord``). ``tile_program.py`` stores it in the tile program's instructions, and
each target walks it with a *handler*, an object with one method per primitive
that returns that target's form of the value: ``compiler/triton/expr.py`` returns
Triton source text, ``compiler/cpu/expr.py`` torch calls. No target reads another
target's output.

Composites (``COMPOSITES``) are primitives with a default definition in other
primitives: a handler may implement one directly (the cpu target calls ATen's
``sigmoid_backward`` kernel) or leave it to the default (Triton spells it out).
A handler lacking a primitive that has no default is an error at compile time
naming the operator that needs it (:class:`MissingPrimitive`).

Comparisons build nodes (``x > 0``); ``==`` and ``!=`` do not (they keep
Python's identity meaning): write ``ops.eq`` / ``ops.ne``. An expression has no
truth value, so ``if x > 0`` fails loudly instead of choosing a branch at
compile time.
"""
from __future__ import annotations

from ..errors import MXNetError

# The leaves: an SSA value of the kernel by name, a Python number, the coordinate
# of a domain position. Their payload is the node's one parameter.
LEAVES = ("value", "const", "coord")

# name -> (number of expression operands, None for any; what it computes)
PRIMITIVES = {
    "add": (2, "a + b"),
    "sub": (2, "a - b"),
    "mul": (2, "a * b"),
    "div": (2, "a / b"),
    "neg": (1, "-a"),
    "lt": (2, "a < b (a boolean)"),
    "le": (2, "a <= b (a boolean)"),
    "gt": (2, "a > b (a boolean)"),
    "ge": (2, "a >= b (a boolean)"),
    "eq": (2, "a == b (a boolean)"),
    "ne": (2, "a != b (a boolean)"),
    "and_": (2, "logical and of two booleans"),
    "or_": (2, "logical or of two booleans"),
    "where": (3, "b where the boolean a holds, else c"),
    "maximum": (2, "the larger of a and b"),
    "minimum": (2, "the smaller of a and b"),
    "exp": (1, "e ** a"),
    "log": (1, "the natural logarithm of a"),
    "abs": (1, "|a|"),
    "sqrt": (1, "the square root of a"),
    "sigmoid": (1, "1 / (1 + exp(-a))"),
    "tanh": (1, "the hyperbolic tangent of a"),
    "erf": (1, "the error function of a"),
    "sin": (1, "the sine of a (radians)"),
    "cos": (1, "the cosine of a (radians)"),
    "atan": (1, "the arctangent of a, in [-pi/2, pi/2]"),
    "log2": (1, "the base-2 logarithm of a"),
    "floor": (1, "the largest integer not above a (a float)"),
    "ceil": (1, "the smallest integer not below a (a float)"),
    "fmod": (2, "a - b * trunc(a / b), exactly: the remainder with a's sign (C's fmod)"),
    "to_int32": (1, "a truncated toward zero to an int32 (an index)"),
    "round_to": (1, "a rounded to the dtype named by the parameter, held in the compute "
                    "dtype (a cast inside a kernel)"),
    "philox_uniform": (None, "U[0, 1) of Triton's Philox 4x32 (tl.rand) at the linear index "
                             "sum(coord * stride), keyed by the seed operand's 32 bits and "
                             "the stream (parameters: stream, strides, int64 offsets)"),
}


class MissingPrimitive(MXNetError):
    """A target cannot emit a primitive that an operator's math uses."""


class Expr:
    """One node of operator math: a primitive applied to operand nodes.

    ``op`` names the primitive (a key of :data:`PRIMITIVES`, :data:`COMPOSITES`
    or :data:`LEAVES`), ``args`` are the operand nodes and ``params`` the static
    parameters (a leaf's payload, a dtype name, a stream number), passed to a
    handler after the evaluated operands. Nodes are immutable; equality is
    identity.
    """
    __slots__ = ("op", "args", "params")

    def __init__(self, op: str, args: tuple = (), params: tuple = ()):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "params", tuple(params))

    def __setattr__(self, name, value):
        raise AttributeError("expressions are immutable")

    def __bool__(self):
        raise TypeError("an expression has no truth value at compile time: select with "
                        "ops.where, compare with ops.eq / ops.ne")

    def __repr__(self):
        if self.op in LEAVES:
            return self.params[0] if self.op == "value" else f"{self.op}({self.params[0]!r})"
        inner = [repr(a) for a in self.args] + [repr(p) for p in self.params]
        return f"{self.op}({', '.join(inner)})"

    # Python's operators build the same nodes as ops.*, operands in written order.
    def __add__(self, o): return ops.add(self, o)
    def __radd__(self, o): return ops.add(o, self)
    def __sub__(self, o): return ops.sub(self, o)
    def __rsub__(self, o): return ops.sub(o, self)
    def __mul__(self, o): return ops.mul(self, o)
    def __rmul__(self, o): return ops.mul(o, self)
    def __truediv__(self, o): return ops.div(self, o)
    def __rtruediv__(self, o): return ops.div(o, self)
    def __neg__(self): return ops.neg(self)
    def __lt__(self, o): return ops.lt(self, o)
    def __le__(self, o): return ops.le(self, o)
    def __gt__(self, o): return ops.gt(self, o)
    def __ge__(self, o): return ops.ge(self, o)
    def __and__(self, o): return ops.and_(self, o)
    def __or__(self, o): return ops.or_(self, o)

    __hash__ = object.__hash__


def lift(x) -> Expr:
    """``x`` as a node.

    Parameters
    ----------
    x : Expr, int or float
        Nodes are returned as they are, numbers become ``const`` leaves.

    Raises
    ------
    TypeError
        For anything else: a bool (``x == y`` compares identities; use ``ops.eq``) or
        a string (a target's source text).
    """
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return Expr("const", params=(x,))
    raise TypeError(f"operator math takes expressions and numbers, not {type(x).__name__} "
                    f"{x!r:.60}" + (": write it with ops.* instead of target source text"
                                    if isinstance(x, str) else ""))


def _primitive(name: str, arity: int):
    def build(*operands):
        if len(operands) != arity:
            raise TypeError(f"ops.{name} takes {arity} operands, got {len(operands)}")
        return Expr(name, tuple(lift(a) for a in operands))
    build.__name__ = name
    build.__doc__ = PRIMITIVES.get(name, COMPOSITES.get(name, (0, "", "")))[-1]
    return build


class _Vocabulary:
    """``ops``: the constructors of every primitive, composite and leaf."""

    @staticmethod
    def value(name: str) -> Expr:
        """The kernel's SSA value ``name`` (``v3``)."""
        return Expr("value", params=(str(name),))

    @staticmethod
    def const(x) -> Expr:
        """A Python number (ints stay ints: ``x > 0`` compares with an integer 0)."""
        return lift(x)

    @staticmethod
    def coord(pos: int) -> Expr:
        """The integer coordinate of domain position ``pos`` (0 where it has size 1)."""
        return Expr("coord", params=(int(pos),))

    @staticmethod
    def round_to(x, dtype: str) -> Expr:
        """``x`` rounded to ``dtype`` and held in the compute dtype."""
        return Expr("round_to", (lift(x),), (str(dtype),))

    @staticmethod
    def philox_uniform(seed, offsets, stream: int, wide: bool) -> Expr:
        """``tl.rand`` of ``seed``'s bits and ``stream`` at ``sum(coord * stride)`` over
        ``offsets`` (pairs of a coordinate node and an int stride); ``wide``: the
        offset needs int64."""
        coords = tuple(lift(c) for c, _ in offsets)
        strides = tuple(int(s) for _, s in offsets)
        return Expr("philox_uniform", (lift(seed),) + coords, (int(stream), strides, bool(wide)))


ops = _Vocabulary()

# Composites: name -> (operands, definition in other primitives, what it computes). A
# target with one kernel for the whole (ATen's ``*_backward``) implements the name.
COMPOSITES = {
    "sigmoid_backward": (2, lambda dy, y: dy * y * (1.0 - y),
                         "dy * y * (1 - y): sigmoid's gradient from its output y"),
    "tanh_backward": (2, lambda dy, y: dy * (1.0 - y * y),
                      "dy * (1 - y * y): tanh's gradient from its output y"),
    "threshold_backward": (3, lambda dy, y, t: ops.where(y > t, dy, 0.0),
                           "dy where y > t, else 0: relu's gradient from its output"),
    "pow": (2, lambda a, b: ops.where(ops.eq(a, 1.0) | ops.eq(b, 0.0), 1.0,
                                      ops.exp(b * ops.log(a))),
            "a ** b for a >= 0 (or NaN), as C's pow (1 where a == 1 or b == 0, NaN "
            "included); callers give negative bases their signs. Written out, "
            "exp(b log a) is off by a few ulp where |b log a| is large; a target with "
            "a pow of its own keeps C's accuracy"),
    "tan": (1, lambda x: ops.sin(x) / ops.cos(x), "the tangent of a (radians)"),
    "log10": (1, lambda x: ops.log2(x) * 0.30102999566398120, "the base-10 logarithm of a"),
    "log1p": (1, lambda x: _log1p(x), "log(1 + a), accurate where a is tiny"),
    "expm1": (1, lambda x: _expm1(x), "exp(a) - 1, accurate where a is tiny"),
    # special functions: definitions in ir/special.py (imported when first expanded)
    "lgamma": (1, lambda x: _special().lgamma(ops, x), "log|Gamma(a)|"),
    "digamma": (1, lambda x: _special().digamma(ops, x), "psi(a), the derivative of lgamma"),
    "gamma": (1, lambda x: _special().gamma(ops, x), "Gamma(a)"),
    "erfinv": (1, lambda x: _special().erfinv(ops, x), "the inverse error function of a"),
}


def _special():
    from . import special
    return special


def _log1p(x):
    # Goldberg's trick: with u = 1 + x rounded, log(u) * x / (u - 1) cancels the
    # rounding of u (1 + x loses the low bits of a tiny x; the quotient puts them back).
    u = 1.0 + x
    return ops.where(ops.eq(u, 1.0), x,
                     ops.where(ops.eq(u, float("inf")), u, ops.log(u) * x / (u - 1.0)))


def _expm1(x):
    # Kahan's trick: (u - 1) * x / log(u) with u = exp(x) rounded, as _log1p's mirror.
    u = ops.exp(x)
    return ops.where(ops.eq(u, 1.0), x, ops.where(
        ops.eq(u - 1.0, -1.0), -1.0,
        ops.where(ops.eq(u, float("inf")), u, (u - 1.0) * x / ops.log(u))))

for _name, (_arity, _what) in PRIMITIVES.items():
    if _arity is not None and not hasattr(_Vocabulary, _name):
        setattr(_Vocabulary, _name, staticmethod(_primitive(_name, _arity)))
for _name, (_arity, _define, _what) in COMPOSITES.items():
    setattr(_Vocabulary, _name, staticmethod(_primitive(_name, _arity)))


# ------------------------------------------------------------------------------ walking

def evaluate(expr: Expr, handler, origin: str = "", memo: dict = None):
    """``expr`` in the target of ``handler``.

    Operands are evaluated first, left to right, then ``handler.<op>(*operand
    results, *params)`` is called; a leaf calls ``handler.value(name)``,
    ``handler.const(number)`` or ``handler.coord(pos)``. A composite the handler
    lacks is evaluated through its definition, with its operands' subtrees spelled
    out wherever the definition repeats them (as written source would be).

    Parameters
    ----------
    expr : Expr
    handler : object
        A target's handler (``TritonOps``, ``CpuOps``).
    origin : str
        The operator and node the expression computes, for errors.
    memo : dict, optional
        Results by node: a node several paths reach is then computed once (a handler
        that computes, not one that writes source, wants this).

    Returns
    -------
    object
        Whatever the handler returns for the root: source text, a torch value.

    Raises
    ------
    MissingPrimitive
        When the handler has no method for a primitive the expression uses.
    """
    return _evaluate(expr, handler, origin, memo)


def _evaluate(expr: Expr, handler, origin: str, memo):
    if memo is not None:
        got = memo.get(id(expr))
        if got is not None:
            return got[1]
    op = expr.op
    if op in LEAVES:
        value = getattr(handler, op)(*expr.params)
    else:
        method = getattr(handler, op, None)
        if method is None and op not in COMPOSITES:
            raise MissingPrimitive(
                f"{origin or 'an operator'} needs the primitive '{op}', which the "
                f"'{getattr(handler, 'target', type(handler).__name__)}' target does not "
                f"emit: add {type(handler).__name__}.{op}, or give '{op}' a definition in "
                f"compiler/ir/expr.py's COMPOSITES")
        if method is None:
            value = _evaluate(COMPOSITES[op][1](*expr.args), handler, origin, memo)
        else:
            value = method(*[_evaluate(a, handler, origin, memo) for a in expr.args],
                           *expr.params)
    if memo is not None:
        memo[id(expr)] = (expr, value)    # the node kept beside it: its id stays its own
    return value


def missing(handler) -> list:
    """The primitives and leaves ``handler`` (a class or an instance) has no method
    for, sorted: a complete target returns ``[]`` (composites need no method)."""
    return sorted(name for name in list(PRIMITIVES) + list(LEAVES)
                  if getattr(handler, name, None) is None)


def value_reads(expr) -> list:
    """The SSA value names ``expr`` reads, in read order, once per read (``v1 * v1``
    reads ``v1`` twice)."""
    out, stack = [], [expr] if expr is not None else []
    while stack:
        e = stack.pop()
        if e.op == "value":
            out.append(e.params[0])
        else:
            stack.extend(reversed(e.args))
    return out


def shared_nodes(expr) -> list:
    """The operation nodes ``expr`` reaches by more than one path (one node object used
    as an operand twice, ``d = x - y; ops.where(d > 0, d, -d)``), innermost first.

    A walk spells a node out once per path, so a chain of such reuses grows
    exponentially (a log written by exponent reduction reuses its operand at each
    step); ``tile_program`` computes each of these nodes once, as an SSA value.
    """
    # an explicit stack, not a recursive closure: a closure that calls itself is a
    # reference cycle, left to the cyclic collector once per expression
    counts, order = {}, []
    stack = [(expr, False)]
    while stack:
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if e.op in LEAVES:
            continue
        counts[id(e)] = counts.get(id(e), 0) + 1
        if counts[id(e)] == 1:
            stack.append((e, True))
            stack.extend((a, False) for a in reversed(e.args))
    return [e for e in order if counts[id(e)] > 1]


def substitute(expr, names: dict):
    """``expr`` with every node whose ``id`` is a key of ``names`` replaced by the SSA
    value ``names[id(node)]``."""
    memo = {}

    def walk(e):
        if id(e) in names:
            return ops.value(names[id(e)])
        if e.op in LEAVES or not e.args:
            return e
        if id(e) not in memo:
            memo[id(e)] = Expr(e.op, tuple(walk(a) for a in e.args), e.params)
        return memo[id(e)]
    return walk(expr)


def coord_reads(expr) -> set:
    """The domain positions whose coordinates ``expr`` reads."""
    out, stack = set(), [expr]
    while stack:
        e = stack.pop()
        if e.op == "coord":
            out.add(e.params[0])
        stack.extend(e.args)
    return out


def value_name(expr):
    """The SSA name of a ``value`` leaf, else None."""
    return expr.params[0] if expr is not None and expr.op == "value" else None


def sum_terms(expr) -> list:
    """``[a, b, c]`` for ``a + b + c`` (left-nested adds) of SSA values, else None."""
    if expr is None or expr.op != "add":
        return None
    left, right = expr.args
    terms = [value_name(left)] if left.op != "add" else sum_terms(left)
    if terms is None or None in terms or value_name(right) is None:
        return None
    return terms + [value_name(right)]
