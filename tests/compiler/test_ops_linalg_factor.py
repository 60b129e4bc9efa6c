"""mxnet's linalg factorizations and solves (``compiler/ops/linalg_factor.py``): extern
launches on both cpu targets.

Each row's inputs are made well conditioned inside the symbol (an SPD ``x x^T`` for
``potrf``, ``x + 4 I`` for the triangular and general solves, ``x + x^T`` for ``syevd``),
so forward (float32 against torch in float64), gradients (torch autograd) and finite
differences all see the same function. ``tests/compiler/test_ops_after_views.py``
sweeps ``ROWS`` after every view.
"""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _plus_eye(x, n, scale=4.0):
    return sym.broadcast_add(x, sym.eye(n) * scale)


def _t_plus_eye(x, scale=4.0):
    return x + scale * torch.eye(x.shape[-1], dtype=x.dtype)


def _tri(a, lower):
    return torch.tril(a) if lower else torch.triu(a)


def _sym_low(a):
    return torch.tril(a) + torch.tril(a, -1).mT


def _flip_rows(u):
    """mxnet's eigenvector signs: each row's entry of largest magnitude positive."""
    big = u.abs().argmax(-1, keepdim=True)
    return u * torch.where(u.gather(-1, big) < 0, -1.0, 1.0).to(u.dtype)


def _eigh_rows(a):
    w, v = torch.linalg.eigh(a)
    return [_flip_rows(v.mT), w]


def _trmm_t(attrs):
    def f(a, b):
        t = _tri(_t_plus_eye(a, 0.0), attrs.get("lower", True))
        t = t.mT if attrs.get("transpose", False) else t
        alpha = attrs.get("alpha", 1.0)
        return alpha * (b @ t if attrs.get("rightside", False) else t @ b)
    return f


def _trsm_t(attrs):
    def f(a, b):
        t = _tri(_t_plus_eye(a), attrs.get("lower", True))
        t = t.mT if attrs.get("transpose", False) else t
        alpha = attrs.get("alpha", 1.0)
        if attrs.get("rightside", False):
            return alpha * b @ torch.linalg.inv(t)
        return alpha * torch.linalg.solve(t, b)
    return f


def _tri_rows(name, sym_f, torch_f, a_eye):
    rows = []
    variants = [{}, {"transpose": True}, {"rightside": True, "alpha": 2.5},
                {"lower": False, "transpose": True, "rightside": True, "alpha": -0.5}]
    for i, attrs in enumerate(variants):
        right = attrs.get("rightside", False)
        shapes = [[(3, 3), (2, 3) if right else (3, 2)], [(2, 3, 3), (2, 4, 3) if right
                                                          else (2, 3, 4)]]
        rows.append(Op(
            f"{name}_{i}",
            lambda a, b, attrs=attrs: sym_f(_plus_eye(a, 3, 4.0 if a_eye else 0.0), b,
                                            **attrs),
            torch_f(attrs), shapes, inputs=("x", "b")))
    return rows


ROWS = [
    Op("linalg_potrf", lambda x: sym.linalg.potrf(sym.dot(x, x, transpose_b=True)),
       lambda x: torch.linalg.cholesky(x @ x.mT), [[(3, 6)], [(1, 3)], [(4, 9)]]),
    Op("linalg_potrf_upper_batch",
       lambda x: sym.linalg.potrf(sym.batch_dot(x, x, transpose_b=True), lower=False),
       lambda x: torch.linalg.cholesky(x @ x.mT, upper=True), [[(2, 3, 7)], [(1, 2, 5)]]),
    Op("linalg_potri", lambda x: sym.linalg.potri(_plus_eye(x, 3)),
       lambda x: torch.cholesky_inverse(torch.tril(_t_plus_eye(x))), [[(3, 3)], [(2, 3, 3)]]),
    Op("linalg_potri_upper", lambda x: sym.linalg.potri(_plus_eye(x, 3), lower=False),
       lambda x: torch.cholesky_inverse(torch.triu(_t_plus_eye(x)), upper=True),
       [[(3, 3)], [(2, 3, 3)]]),
    Op("linalg_potri_of_potrf",
       lambda x: sym.linalg.potri(sym.linalg.potrf(sym.dot(x, x, transpose_b=True))),
       lambda x: torch.linalg.inv(x @ x.mT), [[(3, 7)]]),
    *_tri_rows("linalg_trmm", sym.linalg.trmm, _trmm_t, False),
    *_tri_rows("linalg_trsm", sym.linalg.trsm, _trsm_t, True),
    Op("linalg_gelqf", lambda x: sym.linalg.gelqf(x),
       lambda x: [q.mT for q in torch.linalg.qr(x.mT)], [[(2, 4)], [(3, 3)], [(2, 2, 5)]]),
    Op("linalg_syevd", lambda x: sym.linalg.syevd(x + sym.transpose(x)),
       lambda x: _eigh_rows(x + x.mT), [[(3, 3)], [(4, 4)], [(1, 1)]]),
    Op("linalg_syevd_batch",
       lambda x: sym.linalg.syevd(x + sym.transpose(x, axes=(0, 2, 1))),
       lambda x: _eigh_rows(x + x.mT), [[(2, 3, 3)]]),
    Op("linalg_inverse", lambda x: sym.linalg.inverse(_plus_eye(x, 3)),
       lambda x: torch.linalg.inv(_t_plus_eye(x)), [[(3, 3)], [(2, 3, 3)], [(2, 1, 3, 3)]]),
    Op("linalg_det", lambda x: sym.linalg.det(_plus_eye(x, 3, 2.0)),
       lambda x: torch.linalg.det(_t_plus_eye(x, 2.0)).reshape(-1 if x.dim() == 2 else
                                                                x.shape[:-2]),
       [[(3, 3)], [(2, 3, 3)]]),
    Op("linalg_slogdet", lambda x: sym.linalg.slogdet(_plus_eye(x, 3, 1.0)),
       lambda x: [v.reshape(-1) if x.dim() == 2 else v
                  for v in torch.linalg.slogdet(_t_plus_eye(x, 1.0))],
       [[(3, 3)], [(2, 3, 3)]]),
]


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
def test_linalg_factor_op(op, cpu_target):
    """Forward, gradients, finite differences and inference on each row's shapes."""
    for shapes in op.shapes:
        exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
    train, _ = exe.programs
    assert any(ln.is_extern for ln in train.launches)


def _run(s, cpu_target, **inputs):
    exe = s.simple_bind(cpu(), grad_req="null",
                        type_dict={k: str(v.dtype).replace("torch.", "") for k, v in
                                   inputs.items()},
                        **{k: tuple(v.shape) for k, v in inputs.items()})
    for k, v in inputs.items():
        exe.arg_dict[k][:] = v
    return [o.clone() for o in exe.forward()]


def test_triangles_read_as_mxnet(cpu_target):
    """potrf reads the lower (upper) triangle, syevd the lower one, trsm / trmm / potri
    the triangle ``lower`` names: the other triangle's values change nothing."""
    a = torch.tensor([[4.0, 1.5, 0.7], [1.0, 4.25, 0.9], [0.5, 0.3, 3.0]], dtype=torch.float64)
    x = sym.Variable("a")
    lo, = _run(sym.linalg.potrf(x), cpu_target, a=a)
    up, = _run(sym.linalg.potrf(x, lower=False), cpu_target, a=a)
    torch.testing.assert_close(lo, torch.linalg.cholesky(_sym_low(a)))
    upper_sym = torch.triu(a) + torch.triu(a, 1).mT
    torch.testing.assert_close(up, torch.linalg.cholesky(upper_sym, upper=True))
    u, w = _run(sym.linalg.syevd(x), cpu_target, a=a)
    torch.testing.assert_close(w, torch.linalg.eigvalsh(_sym_low(a)))
    torch.testing.assert_close(u.mT @ torch.diag(w) @ u, _sym_low(a))
    b = torch.ones(3, 2, dtype=torch.float64)
    c, = _run(sym.linalg.trsm(x, sym.Variable("b")), cpu_target, a=a, b=b)
    torch.testing.assert_close(c, torch.linalg.solve(torch.tril(a), b))


def test_det_hidden_outputs_and_names():
    d = sym.linalg.det(sym.Variable("a"))
    assert d.list_outputs() == [f"{d.name}_output0"]
    s = sym.linalg.slogdet(sym.Variable("a"))
    assert len(s.list_outputs()) == 2
    assert sym.linalg.gelqf(sym.Variable("a")).list_outputs()[1].endswith("_output1")
    _, out, _ = d.infer_shape(a=(3, 3))
    assert out == [(1,)]
    _, out, _ = s.infer_shape(a=(2, 4, 3, 3))
    assert out == [(2, 4), (2, 4)]


def test_linalg_aliases_and_namespace():
    assert sym.linalg_potrf is not None and sym.linalg_det is not None
    assert not hasattr(sym, "linalg_syevd")          # mxnet registers no such alias
    assert sym.linalg.syevd is not None


@pytest.mark.parametrize("build, shapes, words", [
    (lambda x, b: sym.linalg.potrf(x), {"x": (3, 4)}, "square"),
    (lambda x, b: sym.linalg.inverse(x), {"x": (3,)}, "at least 2"),
    (lambda x, b: sym.linalg.gelqf(x), {"x": (4, 3)}, "at most"),
    (lambda x, b: sym.linalg.trsm(x, b), {"x": (3, 3), "b": (2, 3)}, "incompatible"),
    (lambda x, b: sym.linalg.trmm(x, b), {"x": (2, 3, 3), "b": (3, 3, 2)}, "the same"),
])
def test_shape_errors(build, shapes, words):
    with pytest.raises(MXNetError, match=words):
        build(sym.Variable("x"), sym.Variable("b")).infer_shape(**shapes)


def test_float16_is_refused():
    with pytest.raises(MXNetError, match="32-bit and 64-bit"):
        sym.linalg.det(sym.Variable("a")).infer_type(a="float16")
    with pytest.raises(MXNetError, match="32-bit and 64-bit"):
        sym.linalg.potrf(sym.Variable("a")).infer_type(a="float16")


def test_not_positive_definite_names_the_operator(cpu_target):
    s = sym.linalg.potrf(sym.Variable("a"), name="chol")
    exe = s.simple_bind(cpu(), a=(2, 2), grad_req="null")
    exe.arg_dict["a"][:] = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(MXNetError, match=r"_linalg_potrf .*\(2, 2\).*positive-definite"):
        exe.forward()


def test_grad_req_add_and_debug_str(cpu_target):
    """An extern gradient added into the argument's gradient (grad_req add), and the
    executor's plan listing the extern launches."""
    s = sym.linalg.inverse(_plus_eye(sym.Variable("x"), 3))
    exe = s.simple_bind(cpu(), x=(2, 3, 3), grad_req="add")
    x = torch.randn(2, 3, 3)
    exe.arg_dict["x"][:] = x
    exe.grad_dict["x"][:] = 1.0
    g = torch.randn(2, 3, 3)
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward([g])
    xs = x.double().requires_grad_()
    want, = torch.autograd.grad((torch.linalg.inv(_t_plus_eye(xs)) * g.double()).sum(), xs)
    torch.testing.assert_close(exe.grad_dict["x"], (1 + 2 * want).float(), rtol=1e-4, atol=1e-5)
    assert "kernel=extern:_linalg_inverse" in exe.debug_str()


def test_ops_table_says_extern(capsys):
    """``symtriton ops --markdown`` (the README's table) lists them as extern on both
    target columns, ``linalg.syevd`` (no top-level alias) by its namespace name."""
    from compiler import cli
    assert cli.main(["ops", "--markdown"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| extern (ATen) | extern (ATen) |"))
    for name in ("linalg_potrf (linalg.potrf)", "linalg.syevd", "linalg_slogdet"):
        assert name in row


@pytest.mark.parametrize("view", ["reshape", "transpose", "slice"])
def test_view_of_an_extern_output_as_head(view, cpu_target):
    """A head that is a view of an extern launch's output (written through the view, or
    copied) holds the right values, and the output read by another head too."""
    x = sym.Variable("x")
    inv = sym.linalg.inverse(_plus_eye(x, 3))
    head = {"reshape": lambda s: sym.reshape(s, shape=(2, 9)),
            "transpose": lambda s: sym.transpose(s, axes=(0, 2, 1)),
            "slice": lambda s: sym.slice_axis(s, axis=1, begin=1, end=3)}[view](inv)
    s = sym.Group([head, sym.sum(inv)])
    exe = s.simple_bind(cpu(), x=(2, 3, 3), grad_req="null")
    v = torch.randn(2, 3, 3)
    exe.arg_dict["x"][:] = v
    outs = exe.forward()
    want = torch.linalg.inv(_t_plus_eye(v.double())).float()
    torch_view = {"reshape": lambda t: t.reshape(2, 9), "transpose": lambda t: t.mT,
                  "slice": lambda t: t[:, 1:3]}[view]
    torch.testing.assert_close(outs[0], torch_view(want), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(outs[1], want.sum().reshape(1), rtol=1e-4, atol=1e-5)
