"""Higher-order gradients: ``autograd.grad(create_graph=True)`` and the gradients of
gradient operators (``compiler/ops/math_gradient.py``, ``runtime/autograd_graph.py``).

Oracles: torch autograd of each operator's torch reference (double and triple
backward), and mxnet's documented results for Dropout and FullyConnected.
"""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from compiler.frontend.reference import check_gradient
from compiler.ops import REGISTRY

# every gradient operator whose own gradient is derived from its math
DERIVED = sorted(n for n, o in REGISTRY.items() if n.startswith("_backward_") and o.name == n
                 and "math_gradient" in getattr(o.gradient, "__qualname__", ""))
# forward operators defined for negative inputs too (the rest get x in (0.2, 0.9))
BOTH_SIGNS = {"negative", "square", "exp", "abs", "sign", "sigmoid", "tanh", "relu",
              "softrelu", "softsign", "reciprocal", "cbrt", "rcbrt", "clip", "sin", "cos",
              "tan", "arctan", "sinh", "cosh", "arcsinh", "degrees", "radians", "expm1",
              "erf"}
CLIP = {"a_min": -0.5, "a_max": 0.5}


def _input(fwd, shape, gen):
    if fwd == "arccosh":
        return torch.rand(shape, generator=gen) + 1.2
    x = torch.rand(shape, generator=gen) * 0.7 + 0.2
    if fwd in BOTH_SIGNS:
        x = x * torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
    return x


def test_every_gradient_operator_has_a_derived_gradient():
    assert len(DERIVED) >= 36
    for fwd in ("sin", "tanh", "sigmoid", "relu", "log", "sqrt", "arcsinh", "clip",
                "erfinv"):
        assert f"_backward_{fwd}" in DERIVED
    # digamma's series uses fmod, which no operator spells: no gradient, said plainly
    assert REGISTRY["_backward_gammaln"].gradient is None
    x = mx.sym.var("x")
    g = mx.sym._backward_gammaln(mx.sym.var("dy"), x, mx.sym.gammaln(x))
    with pytest.raises(MXNetError, match="_backward_gammaln .* has no gradient"):
        g.simple_bind(mx.cpu(), dy=(2,), x=(2,))


@pytest.mark.parametrize("name", DERIVED)
def test_derived_gradient_matches_torch_autograd_of_the_reference(name):
    fwd = name[len("_backward_"):]
    gen = torch.Generator().manual_seed(7)
    x = _input(fwd, (3, 5), gen)
    attrs = CLIP if fwd == "clip" else {}
    y = REGISTRY[fwd].reference(REGISTRY[fwd].parse_attrs(
        {k: str(v) for k, v in attrs.items()}, "f"), [x], False)[0]
    dy = torch.randn((3, 5), generator=gen)
    slots = REGISTRY[name].list_arguments(REGISTRY[name].parse_attrs(
        {k: str(v) for k, v in attrs.items()}, "g"))
    given = {"ograd": dy, "data": x, "output": y}
    ours, auto = check_gradient(name, [given[s] for s in slots], attrs)
    for slot, a, b in zip(slots, ours, auto):
        want = torch.zeros_like(x) if b is None else b
        got = torch.zeros_like(x) if a is None else a
        torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-5, msg=f"{name} d/d{slot}")


def _torch_orders(f, x, heads):
    """torch's 1st..nth gradients of f at x, each weighted by its head gradient."""
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y, out = f(xt), []
    for h in heads:
        (y,) = torch.autograd.grad(y, xt, torch.tensor(h, dtype=torch.float64),
                                   create_graph=True)
        out.append(y.detach().numpy())
    return out


def _our_orders(f, x, heads):
    xa = mx.nd.array(x)
    xa.attach_grad()
    out = []
    with mx.autograd.record():
        y = f(xa)
        for h in heads:
            y = mx.autograd.grad(y, xa, head_grads=mx.nd.array(h), create_graph=True)[0]
            out.append(y.asnumpy())
    return out


ORDERS = [  # (name, ours, torch's, lowest input)
    ("sin", mx.nd.sin, torch.sin, -2.0),
    ("tanh", mx.nd.tanh, torch.tanh, -2.0),
    ("sigmoid", mx.nd.sigmoid, torch.sigmoid, -2.0),
    ("log", mx.nd.log, torch.log, 0.3),
    ("sqrt", mx.nd.sqrt, torch.sqrt, 0.3),
    ("arcsinh", mx.nd.arcsinh, torch.asinh, -2.0),
    ("reciprocal", mx.nd.reciprocal, torch.reciprocal, 0.3),
    ("sin of square, times exp", lambda x: mx.nd.sin(x * x) * mx.nd.exp(x),
     lambda x: torch.sin(x * x) * torch.exp(x), -1.0),
]


@pytest.mark.parametrize("case", ORDERS, ids=lambda c: c[0])
def test_three_orders_through_the_tape_match_torch(case, cpu_target):
    _, ours, theirs, low = case
    rng = np.random.RandomState(3)
    x = rng.uniform(low, 2.0, (2, 3)).astype(np.float32)
    heads = [rng.normal(size=(2, 3)).astype(np.float32) for _ in range(3)]
    for order, (got, want) in enumerate(zip(_our_orders(ours, x, heads),
                                            _torch_orders(theirs, x, heads)), 1):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"order {order}")


def test_arcsinh_second_derivative_has_the_true_sign():
    # mxnet 1.9.1's hand-written rule gives +x / (x^2 + 1)^(3/2); the derivative of
    # 1 / sqrt(x^2 + 1) is its negative
    x = np.array([0.5, 1.5, -1.0], dtype=np.float32)
    (_, g2) = _our_orders(mx.nd.arcsinh, x, [np.ones(3, np.float32)] * 2)
    np.testing.assert_allclose(g2, -x / (x * x + 1) ** 1.5, rtol=1e-5)


def test_fully_connected_second_order_as_mxnet_documents(cpu_target):
    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.normal(size=(3, 4)))
    w = mx.nd.array(rng.normal(size=(2, 4)))
    b = mx.nd.array(rng.normal(size=(2,)))
    for a in (x, w, b):
        a.attach_grad()
    o_y = mx.nd.arange(6).reshape((3, 2))
    o_xg = mx.nd.arange(12).reshape((3, 4))
    with mx.autograd.record():
        y = mx.nd.FullyConnected(x, w, b, num_hidden=2)
        x_grad = mx.autograd.grad(y, x, head_grads=o_y, create_graph=True,
                                  retain_graph=True)[0]
        w_grad_grad = mx.autograd.grad(x_grad, w, head_grads=o_xg)[0]
    np.testing.assert_allclose(x_grad.asnumpy(), mx.nd.dot(o_y, w).asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(w_grad_grad.asnumpy(),
                               mx.nd.dot(o_y, o_xg, transpose_a=True).asnumpy(), rtol=1e-6)


def test_dropout_second_order_is_zero_and_keeps_the_mask():
    mx.random.seed(5)
    x = mx.nd.array(np.random.RandomState(1).uniform(0.5, 1.0, (4, 5)))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Dropout(x, p=0.5)
        g1 = mx.autograd.grad(y, x, create_graph=True, retain_graph=True)[0]
        g2 = mx.autograd.grad(g1, x, create_graph=True, retain_graph=True)[0]
    kept = y.asnumpy() != 0
    assert 0 < kept.sum() < kept.size
    # the first gradient is the mask the forward drew: 2 where kept, 0 where dropped
    np.testing.assert_array_equal(g1.asnumpy(), np.where(kept, 2.0, 0.0))
    np.testing.assert_array_equal(g2.asnumpy(), np.zeros((4, 5)))


def test_a_gradient_operator_in_a_symbol_binds_with_gradients(cpu_target):
    """A graph holding _backward_sin (as a gradient graph saved to JSON would)
    differentiates through it, fused with the ops around it."""
    dy, x = mx.sym.var("dy"), mx.sym.var("x")
    g = mx.sym._backward_sin(dy, mx.sym.square(x), mx.sym.sin(mx.sym.square(x)))
    out = mx.sym.sum(g * 3.0)
    rng = np.random.RandomState(2)
    xv, dyv = rng.uniform(-1, 1, (2, 3)), rng.normal(size=(2, 3))
    exe = out.simple_bind(mx.cpu(), dy=(2, 3), x=(2, 3))
    exe.arg_dict["x"][:] = xv
    exe.arg_dict["dy"][:] = dyv
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((1,)))
    xt = torch.tensor(xv, requires_grad=True)
    dyt = torch.tensor(dyv, requires_grad=True)
    total = (3.0 * dyt * torch.cos(xt * xt)).sum()
    gx, gdy = torch.autograd.grad(total, [xt, dyt])
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), [total.item()], rtol=1e-5)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), gx.numpy(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(exe.grad_dict["dy"].asnumpy(), gdy.numpy(), rtol=1e-4,
                               atol=1e-5)


def test_one_array_as_two_inputs_of_a_gradient_operator(cpu_target):
    # _backward_square(x, x) = 2 x * x: its gradient 4 x, each input's term counted once
    x = mx.sym.var("x")
    exe = mx.sym._backward_square(x, x).simple_bind(mx.cpu(), x=(4,))
    exe.arg_dict["x"][:] = np.array([1.0, -2.0, 0.5, 3.0])
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((4,)))
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), [2.0, 8.0, 0.5, 18.0])
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), [4.0, -8.0, 2.0, 12.0])


def test_grad_returns_a_list_for_one_variable_as_mxnet():
    x = mx.nd.ones((2,))
    x.attach_grad()
    with mx.autograd.record():
        y = x * 3
    got = mx.autograd.grad(y, x)
    assert isinstance(got, list) and len(got) == 1
    np.testing.assert_array_equal(got[0].asnumpy(), [3, 3])


def test_what_cannot_be_differentiated_twice_says_so():
    x = mx.nd.array(np.random.RandomState(0).normal(size=(4, 3)))
    gamma, beta = mx.nd.ones((3,)), mx.nd.zeros((3,))
    mean, var = mx.nd.zeros((3,)), mx.nd.ones((3,))
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.BatchNorm(x, gamma, beta, mean, var)
        with pytest.raises(MXNetError, match="BatchNorm: its gradient reads its hidden "
                                             "output 'mean'"):
            mx.autograd.grad(y, x, create_graph=True)

    # average pooling's gradient operator has no gradient of its own: a head gradient
    # that depends on w reaches w only through it
    w = mx.nd.ones((1, 1, 3, 2))
    w.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Pooling(x.reshape((1, 1, 4, 3)), kernel=(2, 2), pool_type="avg")
        g = mx.autograd.grad(y, x, head_grads=w * 2, create_graph=True, retain_graph=True)[0]
        for create_graph in (False, True):
            with pytest.raises(MXNetError, match="operator _pool_grad has no gradient, and "
                                                 "the heads reach the variables through it"):
                mx.autograd.grad(g, w, create_graph=create_graph, retain_graph=True)

    class Twice(mx.autograd.Function):
        def forward(self, a):
            return a * 2

        def backward(self, dy):
            return dy * 2

    with mx.autograd.record():
        y = Twice()(x)
        with pytest.raises(MXNetError, match="Python autograd.Function"):
            mx.autograd.grad(y, x, create_graph=True)


def test_a_call_on_constants_only_needs_no_gradient():
    # all_finite (no gradient) of an array the tape does not track: mxnet does not
    # record it, and a backward through the product with it reaches x alone
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    z = mx.nd.array([[1.0, 3.0], [4.0, 2.0]])
    with mx.autograd.record():
        y = x * mx.nd.all_finite(z) * 3
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [3, 3])
