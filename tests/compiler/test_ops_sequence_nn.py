"""Sequence operators (SequenceMask, SequenceLast, SequenceReverse) and the nn and loss
operators of compiler/ops/nn_more.py through the whole compile path on both cpu targets:
forward against an independent torch version (float64), every gradient against autograd
(or mxnet's formula for loss heads) and central finite differences (the operator table's
``check``), plus mxnet's argument lists, shapes, defaults and errors. Cases recorded
with mxnet 1.9.1 replay in tests/compiler/test_mxnet_fixtures_sequence_nn.py.

``ROWS`` is swept after views by tests/compiler/test_ops_after_views.py.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


# -- independent torch versions: loops over the batch, each sequence sliced by hand ----------

def _lengths(length):
    """mxnet's static_cast<int>: truncation toward zero."""
    return [int(v) for v in torch.trunc(length.detach()).tolist()]


def _seq_mask(axis, value=0.0, shift=0.0):
    def f(x, length):
        xs = x if axis == 0 else x.transpose(0, 1)          # (T, batch, ...)
        cols = []
        for b, n in enumerate(_lengths(length + shift)):
            n = min(max(n, 0), xs.shape[0])
            col = xs[:, b]
            pad = torch.full_like(col[n:], value)
            cols.append(torch.cat([col[:n], pad]))
        out = torch.stack(cols, dim=1)
        return out if axis == 0 else out.transpose(0, 1)
    return f


def _seq_last(axis, shift=1.0):
    def f(x, length):
        xs = x if axis == 0 else x.transpose(0, 1)
        return torch.stack([xs[n - 1, b] for b, n in enumerate(_lengths(length + shift))])
    return f


def _seq_reverse(shift=0.0):
    def f(x, length):
        cols = []
        for b, n in enumerate(_lengths(length + shift)):
            col = x[:, b]
            cols.append(torch.cat([col[:n].flip(0), col[n:]]))
        return torch.stack(cols, dim=1)
    return f


# shapes: (data, sequence_length); max_len >= 3 everywhere (lengths 1..3 are valid for
# SequenceLast), size-1 batch and rest dims, non-power-of-two dims
SEQ0 = [[(4, 3, 2), (3,)], [(3, 1, 5), (1,)], [(5, 2), (2,)], [(3, 2, 1, 3), (2,)]]
SEQ1 = [[(3, 4, 2), (3,)], [(1, 3, 5), (1,)], [(2, 5), (2,)], [(2, 3, 3, 1), (2,)]]
NOLEN = [[(3, 5)], [(1, 7)], [(2, 1, 3)], [(4, 3, 2, 5)]]


def _len_row(name, build, torch_fn, shapes, gen):
    return Op(name, build, torch_fn, shapes, inputs=("x", "l"), gen={"l": gen},
              nograd=("l",))


ROWS = [
    # -- SequenceMask
    Op("SequenceMask_nolen", lambda x: sym.SequenceMask(x), lambda x: x, NOLEN),
    _len_row("SequenceMask_axis0",
             lambda x, l: sym.SequenceMask(x, l, use_sequence_length=True),
             _seq_mask(0), SEQ0, "index:5"),
    _len_row("SequenceMask_axis1_value",
             lambda x, l: sym.SequenceMask(x, l, use_sequence_length=True, axis=1,
                                           value=-2.5),
             _seq_mask(1, -2.5), SEQ1, "index:5"),
    # fractional and negative lengths truncate toward zero: -1.5 -> -1, -0.5 -> 0
    _len_row("SequenceMask_fractional",
             lambda x, l: sym.SequenceMask(x, l - 1.5, use_sequence_length=True, value=7.0),
             _seq_mask(0, 7.0, -1.5), SEQ0, "index:5"),
    # -- SequenceLast
    Op("SequenceLast_nolen", lambda x: sym.SequenceLast(x), lambda x: x[-1], NOLEN),
    Op("SequenceLast_nolen_axis1", lambda x: sym.SequenceLast(x, axis=1),
       lambda x: x[:, -1], NOLEN),
    _len_row("SequenceLast_axis0",
             lambda x, l: sym.SequenceLast(x, l + 1, use_sequence_length=True),
             _seq_last(0), SEQ0, "index:3"),
    _len_row("SequenceLast_axis1_fractional",
             lambda x, l: sym.SequenceLast(x, l + 1.75, use_sequence_length=True, axis=1),
             _seq_last(1, 1.75), SEQ1, "index:3"),
    # -- SequenceReverse
    Op("SequenceReverse_nolen", lambda x: sym.SequenceReverse(x), lambda x: x.flip(0), NOLEN),
    _len_row("SequenceReverse_len",
             lambda x, l: sym.SequenceReverse(x, l, use_sequence_length=True),
             _seq_reverse(), SEQ0, "index:4"),
    _len_row("SequenceReverse_fractional",
             lambda x, l: sym.SequenceReverse(x, l + 0.5, use_sequence_length=True),
             _seq_reverse(0.5), SEQ0, "index:3"),
]


# -- nn and loss operators ----------------------------------------------------------------------

def _hard_sigmoid(alpha=0.2, beta=0.5):
    return lambda x: torch.clamp(alpha * x + beta, 0.0, 1.0)


def _sce(x, label):
    p = torch.softmax(x, dim=1)
    picked = p.gather(1, label.long().reshape(-1, 1))
    return -torch.log(torch.clamp(picked, min=1e-8)).sum().reshape(1)


def _svm(margin=1.0, reg=1.0, linear=False):
    """SVMOutput: the forward is the identity; mxnet's gradient is that of the one-vs-all
    hinge loss reg * (sum at the label of max(0, m - x)^p + elsewhere max(0, m + x)^p),
    p = 2 (L2-SVM) or 1 (use_linear)."""
    power = 1 if linear else 2

    def objective(x, label):
        hit = F.one_hot(label.long(), x.shape[-1]).to(torch.bool)
        hinge = torch.where(hit, torch.relu(margin - x), torch.relu(margin + x))
        return reg * (hinge ** power).sum()

    def grad(x, label):
        xx = x.detach().clone().requires_grad_(True)
        return {"x": torch.autograd.grad(objective(xx, label), xx)[0]}
    return grad, objective


def _group_norm(num_groups, eps=1e-5, stats=False):
    def f(x, gamma, beta):
        n = x.shape[0]
        x3 = x.reshape(n, num_groups, -1)
        mean = x3.mean(dim=2, keepdim=True)
        var = x3.var(dim=2, unbiased=False, keepdim=True)
        std = torch.sqrt(var + eps)
        out = ((x3 - mean) / std * gamma.reshape(1, -1, 1) + beta.reshape(1, -1, 1))
        out = out.reshape(x.shape)
        # mxnet ignores the gradients arriving at the mean and std outputs
        return [out, mean.reshape(n, -1).detach(), std.reshape(n, -1).detach()] if stats \
            else out
    return f


def _khatri_rao(*mats):
    out = mats[0]
    for m in mats[1:]:
        out = torch.einsum("in,jn->ijn", out, m).reshape(-1, m.shape[1])
    return out


def _gn_row(name, shapes, **kw):
    stats = kw.get("output_mean_var", False)
    return Op(name, lambda x, g, b, shapes, kw=kw: sym.GroupNorm(
        x, g, b, num_groups=shapes[1][0], **kw),
        lambda x, g, b: _group_norm(g.shape[0], kw.get("eps", 1e-5), stats)(x, g, b),
        shapes, inputs=("x", "g", "b"), needs_shapes=True, fd=not stats)


GN = [[(2, 4, 3), (2,), (2,)], [(1, 6, 1, 2), (3,), (3,)], [(3, 5, 2), (1,), (1,)],
      [(2, 6, 5), (6,), (6,)]]
SCE = [[(3, 5), (3,)], [(1, 7), (1,)], [(6, 3), (6,)]]


ROWS += [
    # -- SoftmaxActivation: instance is the last axis; on 2-D data mxnet's gradient is
    # softmax's (higher ranks: test_softmax_activation_gradient_is_mxnets)
    Op("SoftmaxActivation_instance", lambda x: sym.SoftmaxActivation(x),
       lambda x: torch.softmax(x, -1), [[(3, 5)], [(1, 7)], [(4, 1)]]),
    Op("SoftmaxActivation_channel", lambda x: sym.SoftmaxActivation(x, mode="channel"),
       lambda x: torch.softmax(x, 1), [[(2, 3, 4)], [(1, 5, 1)], [(2, 3, 2, 3)]]),
    # -- softmin
    Op("softmin", lambda x: sym.softmin(x), lambda x: torch.softmax(-x, -1),
       [[(3, 5)], [(1, 7)], [(2, 1, 3)]]),
    Op("softmin_axis0_temperature", lambda x: sym.softmin(x, axis=0, temperature=2.5),
       lambda x: torch.softmax(-x / 2.5, 0), [[(3, 5)], [(1, 7)], [(5, 1, 3)]]),
    # -- hard_sigmoid (alpha=1 clips a good share of randn inputs on both sides)
    Op("hard_sigmoid", lambda x: sym.hard_sigmoid(x), _hard_sigmoid(),
       [[(3, 5)], [(1, 7)], [(2, 1, 3)]]),
    Op("hard_sigmoid_steep", lambda x: sym.hard_sigmoid(x, alpha=1.0, beta=0.3),
       _hard_sigmoid(1.0, 0.3), [[(3, 5)], [(1, 7)], [(2, 1, 3)], [(4, 9)]]),
    # -- softmax_cross_entropy: one element, the gradient scaled by its head gradient
    Op("softmax_cross_entropy", lambda x, l: sym.softmax_cross_entropy(x, l), _sce, SCE,
       inputs=("x", "l"), gen={"l": "label:3"}, nograd=("l",)),
    # -- SVMOutput: a loss head with mxnet's gradient
    Op("SVMOutput", lambda x, l: sym.SVMOutput(x, l), lambda x, l: x, SCE,
       inputs=("x", "l"), gen={"l": "label:3"}, nograd=("l",),
       mx_grad=_svm()[0], objective=_svm()[1]),
    Op("SVMOutput_margin_reg", lambda x, l: sym.SVMOutput(
        x, l, margin=0.5, regularization_coefficient=0.7), lambda x, l: x,
       [[(4, 3), (4,)], [(1, 5), (1,)], [(2, 3, 4), (2, 3)]], inputs=("x", "l"),
       gen={"l": "label:3"}, nograd=("l",), mx_grad=_svm(0.5, 0.7)[0],
       objective=_svm(0.5, 0.7)[1]),
    Op("SVMOutput_linear", lambda x, l: sym.SVMOutput(
        x, l, use_linear=True, regularization_coefficient=1.5), lambda x, l: x, SCE,
       inputs=("x", "l"), gen={"l": "label:3"}, nograd=("l",),
       mx_grad=_svm(1.0, 1.5, True)[0], objective=_svm(1.0, 1.5, True)[1]),
    # -- GroupNorm: gamma and beta per group
    _gn_row("GroupNorm", GN),
    _gn_row("GroupNorm_eps_stats", GN[:3], eps=1e-3, output_mean_var=True),
    # -- IdentityAttachKLSparseReg: the identity forward (its gradient and moving average:
    # test_kl_sparse_reg_gradient_and_moving_average)
    Op("IdentityAttachKLSparseReg", lambda x: sym.IdentityAttachKLSparseReg(x, name="kl"),
       lambda x, a: x,
       [[(3, 5)], [(1, 7)], [(4, 1)]], aux={"kl_moving_avg": "unit"}, grad=False),
    # -- khatri_rao: no gradient in mxnet
    Op("khatri_rao", lambda x, y: sym.khatri_rao(x, y), _khatri_rao,
       [[(2, 3), (4, 3)], [(1, 5), (3, 5)], [(3, 1), (2, 1)]], inputs=("x", "y"), grad=False),
    Op("khatri_rao_3", lambda x, y, z: sym.khatri_rao(x, y, z), _khatri_rao,
       [[(2, 3), (1, 3), (3, 3)], [(2, 1), (3, 1), (1, 1)], [(4, 2), (3, 2), (5, 2)]],
       inputs=("x", "y", "z"), grad=False),
    Op("khatri_rao_1", lambda x: sym.khatri_rao(x), lambda x: x, [[(2, 3)], [(1, 5)], [(3, 1)]],
       grad=False),
]


def _params():
    return [pytest.param(op, shapes, id=f"{op.name}-{i}")
            for op in ROWS for i, shapes in enumerate(op.shapes)]


def test_rows_are_well_formed():
    """Unique names; at least three shapes with a size-1 and a non-power-of-two dim."""
    names = [op.name for op in ROWS]
    assert len(names) == len(set(names))
    for op in ROWS:
        dims = [d for shapes in op.shapes for s in shapes for d in s]
        assert len(op.shapes) >= 3 and 1 in dims and any(d & (d - 1) for d in dims), op.name


@pytest.mark.parametrize("op,shapes", _params())
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# -- mxnet's signatures, shapes and errors --------------------------------------------------

def test_sequence_arguments_follow_use_sequence_length():
    x, l = sym.Variable("data"), sym.Variable("len")
    for op in ("SequenceMask", "SequenceLast", "SequenceReverse"):
        f = getattr(sym, op)
        assert f(x).list_arguments() == ["data"]
        s = f(x, name="s", use_sequence_length=True)
        assert s.list_arguments() == ["data", "s_sequence_length"]
        assert f(x, l, use_sequence_length=True).list_arguments() == ["data", "len"]
        assert s.list_outputs() == ["s_output"]


def test_sequence_shapes():
    x = sym.Variable("x")
    s = sym.SequenceLast(x, use_sequence_length=True, name="last")
    args, outs, _ = s.infer_shape(x=(5, 3, 4, 2))
    assert args == [(5, 3, 4, 2), (3,)] and outs == [(3, 4, 2)]
    args, outs, _ = sym.SequenceLast(x, axis=1, use_sequence_length=True).infer_shape(
        x=(3, 5, 4))
    assert args == [(3, 5, 4), (3,)] and outs == [(3, 4)]
    args, outs, _ = sym.SequenceMask(x, axis=1, use_sequence_length=True).infer_shape(
        x=(3, 5))
    assert args == [(3, 5), (3,)] and outs == [(3, 5)]
    assert sym.SequenceLast(x).infer_shape(x=(3, 2))[1] == [(2,)]


@pytest.mark.parametrize("build,shapes,match", [
    (lambda x: sym.SequenceMask(x, axis=2), {"x": (3, 2, 4)}, "axis must be 0 or 1"),
    (lambda x: sym.SequenceLast(x, axis=-1), {"x": (3, 2, 4)}, "axis must be 0 or 1"),
    (lambda x: sym.SequenceReverse(x, axis=1), {"x": (3, 2, 4)}, "axis must be 0"),
    (lambda x: sym.SequenceMask(x), {"x": (3,)}, "rank 2 or greater"),
    (lambda x: sym.SequenceMask(x, sym.Variable("l"), use_sequence_length=True),
     {"x": (3, 2, 4), "l": (3,)}, "sequence_length"),
])
def test_sequence_shape_errors(build, shapes, match):
    with pytest.raises(MXNetError, match=match):
        build(sym.Variable("x")).infer_shape(**shapes)


def test_sequence_attributes_are_mxnets():
    with pytest.raises(MXNetError, match="unknown attribute 'value'"):
        sym.SequenceLast(sym.Variable("x"), value=1.0)
    s = sym.SequenceMask(sym.Variable("x"), use_sequence_length=True, value=-1, name="m")
    assert s.attr_dict()["m"] == {"use_sequence_length": "True", "value": "-1"}


def _bind(s, grad_req="write", **shapes):
    from runtime.context import cpu
    return s.simple_bind(cpu(), grad_req=grad_req, **shapes)


@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 2, 2, 5), (1, 4, 3)])
def test_softmax_activation_gradient_is_mxnets(shape, cpu_target):
    """Instance mode on data of rank 3+: softmax over the last axis, but mxnet 1.9.1's
    backward sums dy * y over axis 1 (its (batch, channel, rest) view), not the last."""
    gen = torch.Generator().manual_seed(7)
    x, dy = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    exe = _bind(sym.SoftmaxActivation(sym.Variable("x")), x=shape)
    exe.arg_dict["x"][:] = x
    y = exe.forward(is_train=True)[0]
    torch.testing.assert_close(y, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    exe.backward([dy])
    want = y * (dy - (dy * y).sum(dim=1, keepdim=True))
    torch.testing.assert_close(exe.grad_dict["x"], want, rtol=1e-5, atol=1e-6)


def test_kl_sparse_reg_gradient_and_moving_average(cpu_target):
    """The moving average of mean(x, axis=0) moves by one step per training step, and
    the gradient adds the KL penalty of the updated average; inference keeps it."""
    gen = torch.Generator().manual_seed(3)
    x = torch.rand((4, 5), generator=gen) * 0.8 + 0.1
    dy = torch.randn((4, 5), generator=gen)
    avg = torch.rand((5,), generator=gen) * 0.8 + 0.1
    s = sym.IdentityAttachKLSparseReg(sym.Variable("x"), sparseness_target=0.2,
                                      penalty=0.01, momentum=0.7, name="kl")
    assert s.list_auxiliary_states() == ["kl_moving_avg"] and s.list_outputs() == ["kl_output"]
    exe = _bind(s, x=(4, 5))
    exe.arg_dict["x"][:] = x
    exe.aux_dict["kl_moving_avg"][:] = avg
    torch.testing.assert_close(exe.forward(is_train=False)[0], x)
    torch.testing.assert_close(exe.aux_dict["kl_moving_avg"], avg)
    exe.forward(is_train=True)
    exe.backward([dy])
    new = 0.7 * avg + 0.3 * x.mean(dim=0)
    torch.testing.assert_close(exe.aux_dict["kl_moving_avg"], new, rtol=1e-5, atol=1e-6)
    want = dy + 0.01 * (-0.2 / new + 0.8 / (1 - new))
    torch.testing.assert_close(exe.grad_dict["x"], want, rtol=1e-5, atol=1e-6)


def test_softmax_cross_entropy_clamps_at_1e_8():
    """-log(max(p, 1e-8)): a row whose label has probability e^-100 costs -log(1e-8)."""
    exe = _bind(sym.softmax_cross_entropy(sym.Variable("x"), sym.Variable("l")),
                grad_req={"x": "write", "l": "null"}, x=(2, 2), l=(2,))
    exe.arg_dict["x"][:] = torch.tensor([[0.0, 100.0], [1.0, 1.0]])
    exe.arg_dict["l"][:] = torch.tensor([0.0, 1.0])
    out = exe.forward(is_train=True)[0]
    torch.testing.assert_close(out, torch.tensor([-torch.log(torch.tensor(1e-8)).item() +
                                                  torch.log(torch.tensor(2.0)).item()]))
    exe.backward([torch.tensor([3.0])])
    torch.testing.assert_close(exe.grad_dict["x"], torch.tensor([[-3.0, 3.0], [1.5, -1.5]]))


def test_khatri_rao_has_no_gradient():
    """mxnet 1.9.1 registers no FGradient for khatri_rao: asking for one is an error."""
    s = sym.khatri_rao(sym.Variable("a"), sym.Variable("b"), name="kr")
    assert s.list_arguments() == ["a", "b"] and s.attr_dict()["kr"] == {"num_args": "2"}
    with pytest.raises(MXNetError, match="has no gradient"):
        exe = _bind(s, a=(2, 3), b=(4, 3))
        exe.forward(is_train=True)
        exe.backward([torch.ones(8, 3)])


def test_nn_signatures_and_shapes():
    x = sym.Variable("x")
    gn = sym.GroupNorm(x, num_groups=2, output_mean_var=True, name="gn")
    assert gn.list_arguments() == ["x", "gn_gamma", "gn_beta"]
    assert gn.list_outputs() == ["gn_output", "gn_mean", "gn_std"]
    args, outs, _ = gn.infer_shape(x=(2, 4, 3))
    assert args == [(2, 4, 3), (2,), (2,)] and outs == [(2, 4, 3), (2, 2), (2, 2)]
    assert sym.GroupNorm(x, name="g1").list_outputs() == ["g1_output"]
    svm = sym.SVMOutput(x, name="svm")
    assert svm.list_arguments() == ["x", "svm_label"]
    assert svm.infer_shape(x=(3, 4, 5))[0] == [(3, 4, 5), (3, 4)]
    sce = sym.softmax_cross_entropy(x, name="sce")
    assert sce.list_arguments() == ["x", "sce_label"]
    assert sce.infer_shape(x=(3, 4))[:2] == ([(3, 4), (3,)], [(1,)])
    assert sym.khatri_rao(x, x, x).infer_shape(x=(2, 3))[1] == [(8, 3)]
    assert sym.IdentityAttachKLSparseReg(x).infer_shape(x=(3, 4))[2] == [(4,)]
    assert sym.hard_sigmoid(x, name="hs").attr_dict().get("hs", {}) == {}


@pytest.mark.parametrize("build,shapes,match", [
    (lambda x: sym.SoftmaxActivation(x, mode="channel"), {"x": (2, 3)},
     "3 dimensions when mode=channel"),
    (lambda x: sym.softmax_cross_entropy(x), {"x": (2, 3, 4)}, "only accept 2D data"),
    (lambda x: sym.softmax_cross_entropy(x, sym.Variable("l")), {"x": (2, 3), "l": (2, 1)},
     "only accept 1D label"),
    (lambda x: sym.softmax_cross_entropy(x, sym.Variable("l")), {"x": (2, 3), "l": (3,)},
     "label"),
    (lambda x: sym.SVMOutput(x, sym.Variable("l")), {"x": (2, 3), "l": (3,)}, "label"),
    (lambda x: sym.GroupNorm(x, num_groups=3), {"x": (2, 4, 3)}, "divisible"),
    (lambda x: sym.GroupNorm(x), {"x": (2, 4)}, "at least 3-D"),
    (lambda x: sym.GroupNorm(x, sym.Variable("g"), num_groups=2), {"x": (2, 4, 3), "g": (4,)},
     "gamma"),
    (lambda x: sym.IdentityAttachKLSparseReg(x), {"x": (2, 4, 3)}, "2-D"),
    (lambda x: sym.khatri_rao(x, sym.Variable("y")), {"x": (2, 3), "y": (2, 4)}, "columns"),
    (lambda x: sym.khatri_rao(x), {"x": (2, 3, 1)}, "matrix"),
])
def test_nn_shape_errors(build, shapes, match):
    with pytest.raises(MXNetError, match=match):
        build(sym.Variable("x")).infer_shape(**shapes)


def test_nn_attribute_ranges():
    with pytest.raises(MXNetError, match="momentum"):
        sym.IdentityAttachKLSparseReg(sym.Variable("x"), momentum=1.5)
    with pytest.raises(MXNetError, match="num_args"):
        sym.khatri_rao(num_args=0)
