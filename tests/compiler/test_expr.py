"""The expression vocabulary of operator math (``compiler/ir/expr.py``) and its emitters:
the Triton text (``compiler/triton/expr.py``) and the cpu target's ATen calls
(``compiler/cpu/expr.py``)."""
import math
import os
import random

import pytest

from compiler import symbol as sym
from compiler.artifacts.cache import kernel_path
from compiler.artifacts.compile import compile_symbol
from compiler.cpu.expr import CpuOps
from compiler.ir.expr import COMPOSITES, MissingPrimitive, evaluate, missing, ops, sum_terms
from compiler.triton.expr import TritonOps, triton_source

a, b, c, dy, x, y = (ops.value(n) for n in ("a", "b", "c", "dy", "x", "y"))


def _tl(expr):
    return triton_source(expr, lambda pos: f"r{pos}", "tl.float32")


def test_every_target_emits_every_primitive():
    assert missing(TritonOps) == []
    assert missing(CpuOps) == []


@pytest.mark.parametrize("expr, text", [
    (dy * y * (1.0 - y), "(dy * y * (1.0 - y))"),
    (dy / ((1.0 + ops.abs(x)) * (1.0 + ops.abs(x))),
     "(dy / ((1.0 + tl.abs(x)) * (1.0 + tl.abs(x))))"),
    (-dy * y * y, "(-dy * y * y)"),
    (-x, "(-x)"),
    (-(a + b), "(-(a + b))"),
    (a - (b - c), "(a - (b - c))"),
    (a - b - c, "(a - b - c)"),
    (a + -1.5, "(a + -1.5)"),
    (ops.where((x >= 0.0) & (x <= 1.0), dy, 0.0), "tl.where((x >= 0.0) & (x <= 1.0), dy, 0.0)"),
    (ops.where(x > 0, dy, ops.where(x < 0, -dy, 0.0)),
     "tl.where(x > 0, dy, tl.where(x < 0, -dy, 0.0))"),
    (ops.exp(x * math.log(2.0)), "tl.exp(x * 0.6931471805599453)"),
    (ops.round_to(a + b, "float16"), "(a + b).to(tl.float16).to(tl.float32)"),
    (ops.where(ops.eq(ops.coord(1), ops.to_int32(y)), 1.0, 0.0),
     "tl.where(r1 == y.to(tl.int32), 1.0, 0.0)"),
    (ops.tanh(x), "_tanh(x)"),
    (ops.const(float("-inf")), "float('-inf')"),
    (ops.const(-2.0), "-2.0"),
    # a composite Triton has no kernel for: its definition, spelled out
    (ops.sigmoid_backward(dy, y), "(dy * y * (1.0 - y))"),
    (ops.threshold_backward(dy, y, 0), "tl.where(y > 0, dy, 0.0)"),
])
def test_triton_text(expr, text):
    assert _tl(expr) == text


class _Numbers:
    """A third handler, of Python floats: how little a target needs."""
    target = "numbers"

    def __init__(self, env):
        self.env = env

    def value(self, name):
        return self.env[name]

    def const(self, v):
        return v

    add, sub = (lambda s, p, q: p + q), (lambda s, p, q: p - q)
    mul, div = (lambda s, p, q: p * q), (lambda s, p, q: p / q)
    neg = (lambda s, p: -p)


def _random_tree(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([a, b, c, ops.const(rng.choice([2.0, -3.0, 0.5, 7]))])
    if rng.random() < 0.15:
        return -_random_tree(rng, depth - 1)
    op = rng.choice([ops.add, ops.sub, ops.mul, ops.div])
    return op(_random_tree(rng, depth - 1), _random_tree(rng, depth - 1))


def test_triton_parentheses_keep_the_order_of_evaluation():
    """The text Python reads back computes what the tree says, operation by operation
    (bit-equal floats: no reassociation)."""
    rng = random.Random(7)
    env = {"a": 1.25, "b": -0.75, "c": 3.5}
    for _ in range(300):
        tree = _random_tree(rng, 5)
        try:
            want = evaluate(tree, _Numbers(env))
        except ZeroDivisionError:
            continue
        got = eval(_tl(tree), {}, dict(env))     # the text is plain Python arithmetic here
        assert got == want, _tl(tree)


def test_expressions_refuse_misuse():
    with pytest.raises(TypeError, match="no truth value"):
        bool(x > 0)
    with pytest.raises(TypeError, match="not target source text|instead of target source"):
        ops.add("v1", 1.0)
    with pytest.raises(TypeError, match="takes 1 operands"):
        ops.exp(x, y)
    with pytest.raises(TypeError, match="not bool"):
        ops.where(x > 0, True, 0.0)
    assert sum_terms(a + b + c) == ["a", "b", "c"] and sum_terms(a + b * c) is None
    assert set(COMPOSITES) >= {"sigmoid_backward", "tanh_backward", "threshold_backward"}


def _sources(prog):
    return "\n".join(open(kernel_path(ln.kernel)).read() for ln in prog.launches)


def test_composites_are_one_aten_kernel_on_cpu_and_spelled_out_in_triton():
    s = sym.Activation(sym.Variable("xc"), act_type="sigmoid")
    req = {"xc": "write"}
    cpu = _sources(compile_symbol(s, {"xc": (3, 5)}, True, req, True, "cpu"))
    tri = _sources(compile_symbol(s, {"xc": (3, 5)}, True, req, True, "interpret"))
    assert "sigmoid_backward = torch.ops.aten.sigmoid_backward.grad_input" in cpu
    assert "sigmoid_backward(" not in tri and " * (1.0 - " in tri


def test_a_missing_primitive_names_the_operator_at_compile_time(monkeypatch):
    monkeypatch.delattr(CpuOps, "exp")
    s = sym.exp(sym.Variable("x_missing"), name="the_exp")
    with pytest.raises(MissingPrimitive, match=r"operator 'exp' \(node 'the_exp'\) needs the "
                                               r"primitive 'exp'.*'cpu' target"):
        compile_symbol(s, {"x_missing": (2, 9, 1)}, False, {}, False, "cpu")


def test_no_target_parses_generated_code():
    """Each target emits from the vocabulary: no source text is parsed back. Two files
    read Python source, neither to emit operator math: the optimizer rule tables
    (``ops/optimizer_rules.py``: hand-written lines read into the vocabulary once), and
    ``cpu/script.py``, which writes a bound list of the cpu target's finished kernels into
    one TorchScript function (their ``run()`` bodies, emitted before it from the
    vocabulary, with their arguments written in)."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "compiler")
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py") and f not in ("optimizer_rules.py", "script.py"):
                assert "ast.parse(" not in open(os.path.join(folder, f)).read(), f


def test_float64_kernels_carry_constants_in_float64():
    """Triton types a Python float as float32: compiled for an H100, a float64 clip at
    0.1 returned 0.1f (error 1.5e-9). In a float64 kernel a constant that float32 cannot
    hold is a float64 tensor; one it holds exactly stays a literal."""
    from compiler.ir.expr import ops
    x = ops.value("v1")
    text = triton_source(ops.maximum(x, 0.1) + 0.5, lambda pos: None, "tl.float64")
    assert "tl.full([], 0.1, tl.float64)" in text and "0.5" in text and \
        "tl.full([], 0.5" not in text
    assert "tl.full" not in triton_source(ops.maximum(x, 0.1), lambda pos: None, "tl.float32")


def test_float64_constant_keeps_its_value_in_the_interpreter_and_compiles_for_cuda(
        monkeypatch):
    """The float64 clip of the operator table, run by Triton's interpreter, equals
    torch's clamp exactly; its kernel compiles to cubin (the session sweep)."""
    import torch
    from compiler import symbol as sym
    from runtime.context import cpu
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "interpret")
    exe = sym.clip(sym.Variable("x"), a_min=0.1, a_max=0.7).simple_bind(
        cpu(), grad_req="null", type_dict={"x": "float64"}, x=(3, 5))
    x = torch.linspace(-1, 1, 15, dtype=torch.float64).reshape(3, 5)
    exe.arg_dict["x"][:] = x
    out = exe.forward()[0]
    assert torch.equal(torch.as_tensor(out), x.clamp(0.1, 0.7))
