"""Rules of dot and batch_dot (compiler/ops/matmul.py).

Shapes and numbers marked "mxnet 1.9.1" were produced by running mxnet 1.9.1
(the oracle interpreter) on the same inputs and hard-coded here.
"""
import os

import numpy as np
import pytest
import torch

from compiler.ops import get_op
from compiler.ops.registry import MatMul, ShapeError
from compiler.frontend.reference import check_gradient

from tests.compiler._rules_helpers import close, gradient, infer, reference

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def ar(*shape, scale=1.0):
    return torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape) * scale


# (lhs, rhs, transpose_a, transpose_b) -> output shape; None: mxnet 1.9.1 rejects it.
DOT_SHAPES = [
    ((3,), (3,), False, False, (1,)), ((3,), (3,), True, False, None),
    ((3,), (3, 4), False, False, (4,)), ((3,), (3, 4), True, False, (4,)),
    ((3,), (3, 4), False, True, None), ((2, 3), (3,), False, False, (2,)),
    ((2, 3), (3,), False, True, (2,)), ((2, 3), (3,), True, False, None),
    ((2, 3), (3, 4), False, False, (2, 4)), ((2, 3), (3, 4), True, True, None),
    ((2, 5, 3), (3, 4), False, False, (2, 5, 4)), ((3, 4), (4, 2, 5), False, False, (3, 2, 5)),
    ((2, 5, 3), (3, 4, 2), False, False, (2, 5, 4, 2)),
    ((2, 5, 3), (3, 4, 2), True, True, (5, 3, 3, 4)),
    ((2, 3, 4), (2, 3, 4), False, True, (2, 3, 2, 3)),
    ((2, 3, 4), (2, 3, 4), True, False, (3, 4, 3, 4)),
    ((2, 3, 4), (4, 3, 2), True, True, (3, 4, 4, 3)), ((1, 3), (3,), False, False, (1,)),
    ((4, 1), (1, 3), False, False, (4, 3)), ((3,), (1, 4), False, False, None),
]


@pytest.mark.parametrize("ls,rs,ta,tb,want", DOT_SHAPES)
def test_dot_shape_matches_mxnet(ls, rs, ta, tb, want):
    if want is None:
        with pytest.raises(ShapeError):
            infer("dot", [ls, rs], transpose_a=ta, transpose_b=tb)
    else:
        assert infer("dot", [ls, rs], transpose_a=ta, transpose_b=tb)[1] == [want]


BATCH_DOT_SHAPES = [  # mxnet 1.9.1
    ((2, 3, 4), (2, 4, 5), False, False, (2, 3, 5)), ((1, 3, 4), (1, 4, 1), False, False, (1, 3, 1)),
    ((2, 3, 4), (2, 3, 5), True, False, (2, 4, 5)), ((2, 3, 4), (2, 4, 5), True, False, None),
    ((2, 3, 4), (3, 4, 5), False, False, None), ((3, 4), (4, 5), False, False, None),
    ((2, 3, 4, 5), (2, 3, 5, 4), False, False, (2, 3, 4, 4)),
    ((2, 3, 4, 5), (2, 3, 5, 4), True, True, (2, 3, 5, 5)),
]


@pytest.mark.parametrize("ls,rs,ta,tb,want", BATCH_DOT_SHAPES)
def test_batch_dot_shape_matches_mxnet(ls, rs, ta, tb, want):
    if want is None:
        with pytest.raises(ShapeError):
            infer("batch_dot", [ls, rs], transpose_a=ta, transpose_b=tb)
    else:
        assert infer("batch_dot", [ls, rs], transpose_a=ta, transpose_b=tb)[1] == [want]


def test_unknown_shapes_stay_unknown():
    assert infer("dot", [None, (3, 4)])[1] == [None]
    assert infer("batch_dot", [(2, 3, 4), None])[1] == [None]


def test_lowering_kind():
    low = get_op("dot").lowering
    assert isinstance(low, MatMul) and not low.batched
    attrs = get_op("dot").parse_attrs({"transpose_b": "True"})
    assert low.transpose_b(attrs) and not low.transpose_a(attrs)
    assert get_op("batch_dot").lowering.batched


def _tensordot(a, b, ta, tb):
    """Independent dot: move the contracted axis, then tensordot over one axis."""
    if a.dim() > 1 and ta:
        a = a.movedim(0, -1)
    if b.dim() > 1 and tb:
        b = b.movedim(-1, 0)
    out = torch.tensordot(a, b, dims=1)
    return out.reshape(1) if out.dim() == 0 else out


@pytest.mark.parametrize("ls,rs,ta,tb,want", [c for c in DOT_SHAPES if c[4] is not None])
def test_dot_reference_and_gradient(ls, rs, ta, tb, want):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(ls, generator=g), torch.randn(rs, generator=g)
    (out,) = reference("dot", [a, b], transpose_a=ta, transpose_b=tb)
    assert tuple(out.shape) == want
    close(out, _tensordot(a, b, ta, tb))
    mine, auto = check_gradient("dot", [a, b], {"transpose_a": ta, "transpose_b": tb})
    for m, t in zip(mine, auto):
        close(m, t)


@pytest.mark.parametrize("ls,rs,ta,tb", [
    ((2, 3, 4), (2, 4, 5), False, False), ((2, 4, 3), (2, 4, 5), True, False),
    ((2, 3, 4), (2, 5, 4), False, True), ((1, 4, 3), (1, 1, 4), True, True),
    ((2, 2, 3, 4), (2, 2, 5, 4), False, True)])
def test_batch_dot_reference_and_gradient(ls, rs, ta, tb):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(ls, generator=g), torch.randn(rs, generator=g)
    (out,) = reference("batch_dot", [a, b], transpose_a=ta, transpose_b=tb)
    want = torch.einsum("...ij,...jk->...ik", a.transpose(-1, -2) if ta else a,
                        b.transpose(-1, -2) if tb else b)
    close(out, want)
    mine, auto = check_gradient("batch_dot", [a, b], {"transpose_a": ta, "transpose_b": tb})
    for m, t in zip(mine, auto):
        close(m, t)


def test_dot_values_from_mxnet():
    # mxnet 1.9.1: dot(sin(arange(24).reshape(2,3,4)), cos(arange(20).reshape(4,5)))
    a, b = torch.sin(ar(2, 3, 4)), torch.cos(ar(4, 5))
    dy = torch.sin(ar(2, 3, 5, scale=0.3))
    (out,) = reference("dot", [a, b])
    close(out[1, 2], [1.800563, 2.10695, 0.476217, -1.592348, -2.196915], 1e-4)
    (da, db), _ = gradient("dot", [a, b], [dy])
    close(da[1, 0], [-0.005502, -1.317566, -0.741985, 0.89662], 1e-4)
    close(db[3], [-0.957086, -0.651009, -0.286778, 0.103069, 0.48371], 1e-4)
    # mxnet 1.9.1: transpose_a with a 3-D lhs contracts its FIRST axis
    b2 = torch.cos(ar(2, 3, 5))
    (out,) = reference("dot", [a, b2], transpose_a=True)
    assert out.shape == (3, 4, 3, 5)
    close(out[2, 3, 1], [-0.628987, -0.496661, 0.092292, 0.596393, 0.552172], 1e-4)
    (da, db), _ = gradient("dot", [a, b2], [torch.sin(ar(3, 4, 3, 5, scale=0.3))],
                           transpose_a=True)
    close(da[1, 2], [0.583699, -1.491172, 0.044967, 1.472215], 1e-4)
    close(db[1, 2], [-0.679395, -0.187276, 0.321571, 0.801697, 1.210206], 1e-4)
    # mxnet 1.9.1: vector . vector is shape (1,)
    v, w = torch.sin(ar(3, scale=0.1)), torch.cos(ar(3, scale=0.1))
    (out,) = reference("dot", [v, w])
    close(out, [0.294044], 1e-5)
    (dv, _), _ = gradient("dot", [v, w], [torch.tensor([2.0])])
    close(dv, [2.0, 1.990008, 1.960133], 1e-5)


def test_batch_dot_values_from_mxnet():
    # mxnet 1.9.1: 4-D batch_dot with transpose_b
    a, b = torch.sin(ar(2, 2, 3, 4)), torch.cos(ar(2, 2, 5, 4))
    (out,) = reference("batch_dot", [a, b], transpose_b=True)
    close(out[1, 1, 2], [0.492712, -1.43711, 1.386004, -0.374795, -0.896039], 1e-4)
    (da, db), _ = gradient("batch_dot", [a, b], [torch.sin(ar(2, 2, 3, 5, scale=0.3))],
                           transpose_b=True)
    close(da[1, 0, 1], [-0.257721, 0.212816, 0.48769, 0.314184], 1e-4)
    close(db[0, 1, 4], [0.672238, -0.439733, -1.147416, -0.80017], 1e-4)


def test_dot_fixture_forward():
    d = {k: torch.from_numpy(v) for k, v in np.load(os.path.join(FIXTURES, "case_dot.npz")).items()}
    A, B, C, D, P, Q, R = (d[f"in_{k}"] for k in "ABCDPQR")
    close(reference("dot", [A, B])[0], d["out0_train"])
    close(reference("dot", [A, C], transpose_a=True)[0], d["out1_train"])
    close(reference("dot", [A, D], transpose_b=True)[0], d["out2_train"])
    close(reference("dot", [D, C], transpose_a=True, transpose_b=True)[0], d["out3_train"])
    close(reference("batch_dot", [P, Q])[0], d["out4_train"])
    close(reference("batch_dot", [P, P], transpose_a=True)[0], d["out5_train"])
    close(reference("batch_dot", [Q, R], transpose_a=True, transpose_b=True)[0], d["out6_train"])


@pytest.mark.parametrize("ls,rs,ta,tb,want", [c for c in DOT_SHAPES if c[4] is not None])
def test_compiled_dot_for_every_rule_alone_and_fused(cpu_target, ls, rs, ta, tb, want):
    """The kernels, not only the reference: ``dot`` alone (a graph head) and with a
    multiply fused after it, forward and both gradients, against the independent
    ``_tensordot`` and torch's autograd, on both cpu targets. (An N-D lhs with
    ``transpose_a`` was read as its first two axes on the ``cpu`` target.)"""
    import module_api as mx
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(ls, generator=g), torch.randn(rs, generator=g)
    scale, dy = torch.randn(want, generator=g), torch.randn(want, generator=g)
    x, y, s = mx.sym.Variable("x"), mx.sym.Variable("y"), mx.sym.Variable("s")
    d = mx.sym.dot(x, y, transpose_a=ta, transpose_b=tb)
    at, bt = a.clone().requires_grad_(), b.clone().requires_grad_()
    plain = _tensordot(at, bt, ta, tb)
    for sym, want_out in ((d, plain), (d * s, plain * scale)):
        exe = sym.simple_bind(mx.cpu(), x=ls, y=rs, **({"s": want} if sym is not d else {}))
        feed = {"x": a.numpy(), "y": b.numpy(), **({"s": scale.numpy()} if sym is not d else {})}
        out = exe.forward(is_train=True, **feed)[0]
        close(torch.from_numpy(out.asnumpy()), want_out.detach())
        exe.backward(mx.nd.array(dy.numpy()))
        ga, gb = torch.autograd.grad(want_out, (at, bt), dy, retain_graph=True)
        close(torch.from_numpy(exe.grad_dict["x"].asnumpy()), ga)
        close(torch.from_numpy(exe.grad_dict["y"].asnumpy()), gb)


def test_compiled_dot_with_a_3d_lhs_transposed_gives_mxnets_values(cpu_target):
    """mxnet 1.9.1's numbers (as in test_dot_values_from_mxnet), from the kernels."""
    import module_api as mx
    a, b2 = torch.sin(ar(2, 3, 4)), torch.cos(ar(2, 3, 5))
    exe = mx.sym.dot(mx.sym.Variable("x"), mx.sym.Variable("y"), transpose_a=True) \
        .simple_bind(mx.cpu(), x=(2, 3, 4), y=(2, 3, 5))
    out = exe.forward(is_train=True, x=a.numpy(), y=b2.numpy())[0].asnumpy()
    close(torch.from_numpy(out[2, 3, 1]), [-0.628987, -0.496661, 0.092292, 0.596393, 0.552172],
          1e-4)
    exe.backward(mx.nd.array(torch.sin(ar(3, 4, 3, 5, scale=0.3)).numpy()))
    close(torch.from_numpy(exe.grad_dict["x"].asnumpy()[1, 2]),
          [0.583699, -1.491172, 0.044967, 1.472215], 1e-4)
    close(torch.from_numpy(exe.grad_dict["y"].asnumpy()[1, 2]),
          [-0.679395, -0.187276, 0.321571, 0.801697, 1.210206], 1e-4)
