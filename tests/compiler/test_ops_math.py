"""mxnet's math operators (``compiler/ops/math.py``) through the full compile path, on
both cpu targets.

Each row runs ``tests/compiler/test_ops_compiled.check``: forward against torch in
float64, every gradient against torch autograd, a few entries against central finite
differences, inference, and (``interpret``) the same launches as the ``cpu`` target.
Rows whose operator has a restricted domain read it through a scalar op (``x - 0.5``
over ``unit`` values reaches both signs); the rounding rows read exact ties.
``tests/compiler/test_ops_after_views.py`` sweeps ``ROWS`` after every view.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from compiler import symbol as sym
from tests.compiler.test_ops_compiled import BCAST2, SAME2, U3, Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _unary(name, ref, gen="randn", pre=None, tpre=None, label=None):
    """A row of ``sym.<name>``; ``pre`` / ``tpre`` map the drawn values into the
    operator's domain (as a symbol and in torch)."""
    pre = pre or (lambda x: x)
    tpre = tpre or (lambda x: x)
    return Op(label or name, lambda x: getattr(sym, name)(pre(x)), lambda x: ref(tpre(x)), U3,
              gen={"x": gen})


def _signed(name, ref):
    return _unary(name, ref, "unit", lambda x: x - 0.5, lambda x: x - 0.5, f"{name}_signed")


def _ties(name, ref):
    # (k - 4) / 2 for k in 0..8: every half-integer tie from -2 to 2, and integers; each
    # value sits on a step of the function, where finite differences mean nothing
    return replace(_unary(name, ref, "index:9", lambda x: (x - 4.0) * 0.5,
                          lambda x: (x - 4.0) * 0.5, f"{name}_ties"), fd=False)


def _round_ref(x):
    return torch.sign(x) * torch.floor(x.abs() + 0.5)


def _rint_ref(x):
    f, c = torch.floor(x), torch.ceil(x)
    return torch.where(x - f <= c - x, f, c)


def _logical_not_ref(x):
    return (x == 0).to(x.dtype) + x * 0.0      # (+ x * 0: autograd's zero gradient)


UNARY_ROWS = [
    _unary("sin", torch.sin), _unary("cos", torch.cos),
    _unary("tan", torch.tan, "unit"), _signed("tan", torch.tan),
    _unary("arcsin", torch.asin, "unit"), _signed("arcsin", torch.asin),
    _unary("arccos", torch.acos, "unit"), _signed("arccos", torch.acos),
    _unary("arctan", torch.atan), _unary("arctan", torch.atan, "randn", lambda x: x * 30.0,
                                         lambda x: x * 30.0, "arctan_wide"),
    _unary("sinh", torch.sinh), _unary("cosh", torch.cosh), _unary("arcsinh", torch.asinh),
    _unary("arcsinh", torch.asinh, "randn", lambda x: x * 1e-3, lambda x: x * 1e-3,
           "arcsinh_tiny"),
    _unary("arccosh", torch.acosh, "pos", lambda x: x + 1.0, lambda x: x + 1.0),
    _unary("arctanh", torch.atanh, "unit"), _signed("arctanh", torch.atanh),
    _unary("degrees", torch.rad2deg), _unary("radians", torch.deg2rad),
    _unary("floor", torch.floor), _unary("ceil", torch.ceil), _unary("trunc", torch.trunc),
    _unary("fix", torch.trunc), _unary("round", _round_ref), _unary("rint", _rint_ref),
    *[_ties(n, f) for n, f in (("floor", torch.floor), ("ceil", torch.ceil),
                               ("trunc", torch.trunc), ("fix", torch.trunc),
                               ("round", _round_ref), ("rint", _rint_ref))],
    _unary("log10", torch.log10, "pos"), _unary("log2", torch.log2, "pos"),
    _unary("log1p", torch.log1p, "unit"), _signed("log1p", torch.log1p),
    _unary("log1p", torch.log1p, "randn", lambda x: x * 1e-4, lambda x: x * 1e-4, "log1p_tiny"),
    _unary("expm1", torch.expm1),
    _unary("expm1", torch.expm1, "randn", lambda x: x * 1e-4, lambda x: x * 1e-4, "expm1_tiny"),
    _unary("sinh", torch.sinh, "randn", lambda x: x * 1e-3, lambda x: x * 1e-3, "sinh_tiny"),
    _unary("rsqrt", torch.rsqrt, "pos"), _unary("erf", torch.erf),
    _unary("logical_not", _logical_not_ref, "cond"),
    _unary("logical_not", _logical_not_ref, label="logical_not_randn"),
]


def _pymod(a, c):
    """Python's (and mxnet's) remainder, the divisor's sign, in float64."""
    return a - c * torch.floor(a / c)


def _binary(name, build, ref, shapes, gen=None):
    return Op(name, build, ref, shapes, inputs=("x", "y"), gen=gen or {})


def _logic(kind):
    fn = {"and": torch.logical_and, "or": torch.logical_or, "xor": torch.logical_xor}[kind]
    return lambda a, c: fn(a != 0, c != 0).to(a.dtype) + (a + c) * 0.0


POS_Y = {"y": "pos"}
BINARY_ROWS = [
    _binary("mod", lambda x, y: x % y, _pymod, SAME2, POS_Y),
    _binary("mod_negative_divisor", lambda x, y: x % (y * -1.0),
            lambda a, c: _pymod(a, -c), SAME2, POS_Y),
    _binary("broadcast_mod", sym.broadcast_mod, _pymod, BCAST2, POS_Y),
    Op("mod_scalar", lambda x: x % 1.5, lambda x: _pymod(x, 1.5), U3),
    Op("mod_scalar_negative", lambda x: x % -1.5, lambda x: _pymod(x, -1.5), U3),
    Op("rmod_scalar", lambda x: 2.5 % x, lambda x: _pymod(2.5, x), U3, gen={"x": "pos"}),
    Op("rmod_scalar_negative", lambda x: -2.5 % x, lambda x: _pymod(-2.5, x), U3,
       gen={"x": "pos"}),
    _binary("hypot", sym.hypot, torch.hypot, SAME2),
    _binary("broadcast_hypot", sym.broadcast_hypot, torch.hypot, BCAST2),
    Op("hypot_scalar", lambda x: sym.hypot(x, -1.5), lambda x: torch.hypot(x, torch.tensor(1.5,
       dtype=x.dtype)), U3),
    Op("hypot_scalar_left", lambda x: sym.hypot(2.0, x), lambda x: torch.hypot(x, torch.tensor(
       2.0, dtype=x.dtype)), U3),
    *[_binary(f"broadcast_logical_{k}", getattr(sym, f"broadcast_logical_{k}"), _logic(k),
              BCAST2, {"x": "cond", "y": "cond"}) for k in ("and", "or", "xor")],
    *[Op(f"logical_{k}_scalar_{s}",
         lambda x, k=k, s=s: getattr(sym, f"_logical_{k}_scalar")(x, scalar=s),
         lambda x, k=k, s=s: _logic(k)(x, torch.full_like(x, s)), U3, gen={"x": "cond"})
      for k in ("and", "or", "xor") for s in (0.0, 2.0)],
    _binary("pow", sym.pow, torch.pow, SAME2, {"x": "pos"}),
    _binary("power", sym.power, torch.pow, SAME2, {"x": "pos"}),
    Op("pow_scalar", lambda x: sym.pow(x, 2.5), lambda x: x ** 2.5, U3, gen={"x": "pos"}),
    Op("pow_rscalar", lambda x: sym.power(1.5, x), lambda x: 1.5 ** x, U3),
]

ROWS = UNARY_ROWS + BINARY_ROWS


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
@pytest.mark.parametrize("k", range(3))
def test_math_op(op, k, cpu_target):
    """Forward, gradients, finite differences and inference on three shapes (a size-1
    dim, a non-power-of-two dim, 2-D and 3-D)."""
    exe = check(op, op.shapes[k])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


@pytest.mark.parametrize("case", ["broadcast", "scalar5", "scalar_neg3", "scalar_frac"])
def test_power_of_negative_bases_is_cs_pow(case, cpu_target):
    """mxnet computes pow as C does: (-5) ** 3 = -125, (-2) ** 2 = 4, 0 ** 0 = 1, a
    negative base with a fractional exponent is nan (exp(c log a) gave nan for all)."""
    import numpy as np
    import torch
    from compiler import symbol as sym
    from runtime.context import cpu
    a = torch.tensor([[-5.0, -2.0, 0.0, 0.0, 3.0, -1.5], [2.0, -3.0, 0.0, -0.5, 1.0, -4.0]])
    c = torch.tensor([[3.0, 2.0, 0.0, 2.0, -1.0, 2.5], [0.5, -3.0, -1.0, 4.0, 7.0, 0.0]])
    x, y = sym.Variable("x"), sym.Variable("y")
    if case == "broadcast":
        s, want, args = sym.broadcast_power(x, y), torch.pow(a, c), {"x": a, "y": c}
    else:
        e = {"scalar5": 5.0, "scalar_neg3": -3.0, "scalar_frac": 0.5}[case]
        s, want, args = x ** e, torch.pow(a, e), {"x": a}
    exe = s.simple_bind(cpu(), grad_req="null", **{k: tuple(v.shape) for k, v in args.items()})
    for k, v in args.items():
        exe.arg_dict[k][:] = v
    got = torch.as_tensor(exe.forward()[0])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_unary_backward_reads_the_input_only_where_its_gradient_does():
    """``_backward_<name>`` takes (ograd, output) when the gradient is a function of the
    output alone (as mxnet's ``_backward_Activation`` for relu / sigmoid / tanh), so the
    forward's input is not kept for it; (ograd, data, output) otherwise."""
    from compiler.ops.elemwise import UNARY, reads_input
    from compiler.ops.registry import get_op
    from runtime.context import cpu
    for name in ("tanh", "sigmoid", "relu", "exp", "sqrt", "reciprocal"):
        assert not reads_input(UNARY[name][2]), name
        assert get_op(f"_backward_{name}").arguments == ("ograd", "output"), name
    for name in ("square", "log", "abs", "softrelu", "softsign"):
        assert reads_input(UNARY[name][2]), name
        assert get_op(f"_backward_{name}").arguments == ("ograd", "data", "output"), name
    x = sym.Variable("x")
    net = sym.Activation(sym.FullyConnected(x, num_hidden=3, name="fc"), act_type="tanh")
    exe = net.simple_bind(cpu(), x=(2, 4))
    exe.arg_dict["x"][:] = torch.randn(2, 4)
    exe.arg_dict["fc_weight"][:] = torch.randn(3, 4)
    out = exe.forward(is_train=True)[0].as_subclass(torch.Tensor).clone()
    exe.backward(torch.ones(2, 3))
    torch.testing.assert_close(exe.grad_dict["fc_bias"].as_subclass(torch.Tensor),
                               (1 - out * out).sum(0), rtol=1e-5, atol=1e-6)
