"""The operators of ``compiler/ops/linalg.py`` (``mx.sym.linalg``: gemm, gemm2, syrk,
sumlogdiag, extractdiag, makediag, extracttrian, maketrian) through the whole compile
path, on both cpu targets: forward and gradients against torch in float64, finite
differences, inference (``check`` of test_ops_compiled.py). ``ROWS`` is swept after every
view by test_ops_after_views.py; mxnet's own numbers are replayed by
test_mxnet_fixtures_linalg.py. Then: the operators as graph heads and inside a larger
graph, the matmul kernels gemm and gemm2 become (scaling and C fused as the epilogue),
mxnet's documented examples, and the shape errors.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from compiler.errors import MXNetError
from module_api import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets

L = sym.linalg


# -- torch oracles, written from mxnet's documentation -------------------------------------

def _rows_last(x, axis):
    """Move the row axis next to the last one."""
    return x.movedim(axis % x.dim(), -2)


def _gemm(a, b, c=None, ta=False, tb=False, alpha=1.0, beta=1.0, axis=-2):
    nd = a.dim()
    a, b = _rows_last(a, axis), _rows_last(b, axis)
    a = a.transpose(-1, -2) if ta else a
    b = b.transpose(-1, -2) if tb else b
    out = alpha * (a @ b)
    if c is not None:
        out = out + beta * _rows_last(c, axis)
    return out.movedim(-2, axis % nd)


def _syrk(a, transpose=False, alpha=1.0):
    at = a.transpose(-1, -2)
    return alpha * (at @ a if transpose else a @ at)


def _tri_positions(n, offset, lower):
    """mxnet's packing: a lower triangle row by row, an upper one column by column."""
    p = n - abs(offset)
    pos = [(r + abs(offset), c) for r in range(p) for c in range(r + 1)]
    if offset > 0 or (offset == 0 and not lower):
        pos = [(c, r) for r, c in pos]
    return [r for r, _ in pos], [c for _, c in pos]


def _extracttrian(a, offset=0, lower=True):
    rows, cols = _tri_positions(a.shape[-1], offset, lower)
    return a[..., rows, cols]


def _maketrian(v, offset=0, lower=True):
    p = int(round(((8 * v.shape[-1] + 1) ** 0.5 - 1) / 2))
    n = p + abs(offset)
    rows, cols = _tri_positions(n, offset, lower)
    out = torch.zeros(tuple(v.shape[:-1]) + (n, n), dtype=v.dtype)
    out[..., rows, cols] = v
    return out


def _sumlogdiag(a):
    s = torch.diagonal(a, 0, -2, -1).log().sum(-1)
    return s if a.dim() > 2 else s.reshape(1)


ABC = ("A", "B", "C")
GEMM = [[(3, 4), (4, 5), (3, 5)], [(2, 3, 4), (2, 4, 5), (2, 3, 5)],
        [(1, 1, 3), (1, 3, 1), (1, 1, 1)], [(2, 1, 3, 2), (2, 1, 2, 7), (2, 1, 3, 7)]]
GEMM_T = [[(4, 3), (5, 4), (3, 5)], [(2, 4, 3), (2, 5, 4), (2, 3, 5)],
          [(1, 3, 1), (1, 1, 3), (1, 1, 1)]]
# rows along axis 1 of 4-D tensors (batch dims 0 and 2), along axis 0 of 3-D ones
GEMM_AX1 = [[(2, 3, 5, 4), (2, 4, 5, 6), (2, 3, 5, 6)], [(1, 3, 2, 1), (1, 1, 2, 7),
                                                        (1, 3, 2, 7)]]
GEMM_AX0 = [[(3, 2, 4), (4, 2, 5), (3, 2, 5)], [(1, 3, 1), (1, 3, 6), (1, 3, 6)],
            [(5, 1, 2), (2, 1, 3), (5, 1, 3)]]
SQUARE = [[(3, 3)], [(2, 4, 4)], [(1, 1)], [(2, 1, 5, 5)]]
VECTORS = [[(3,)], [(2, 4)], [(1,)], [(2, 1, 5)]]
PACKED = [[(6,)], [(2, 3)], [(1,)], [(2, 1, 10)]]

ROWS = [
    # -- gemm: alpha op(A) op(B) + beta C, batches over leading dims, row axis moved
    Op("linalg_gemm", lambda a, b, c: L.gemm(a, b, c), lambda a, b, c: _gemm(a, b, c),
       GEMM, inputs=ABC),
    Op("linalg_gemm_scaled", lambda a, b, c: L.gemm(a, b, c, alpha=-1.5, beta=0.25),
       lambda a, b, c: _gemm(a, b, c, alpha=-1.5, beta=0.25), GEMM, inputs=ABC),
    Op("linalg_gemm_tt", lambda a, b, c: L.gemm(a, b, c, transpose_a=True, transpose_b=True,
                                                  alpha=2.0, beta=3.0),
       lambda a, b, c: _gemm(a, b, c, True, True, 2.0, 3.0), GEMM_T, inputs=ABC),
    Op("linalg_gemm_beta0", lambda a, b, c: L.gemm(a, b, c, beta=0.0, alpha=0.5),
       lambda a, b, c: _gemm(a, b, c, alpha=0.5, beta=0.0), GEMM, inputs=ABC),
    Op("linalg_gemm_axis1", lambda a, b, c: L.gemm(a, b, c, axis=1, alpha=0.5, beta=2.0),
       lambda a, b, c: _gemm(a, b, c, alpha=0.5, beta=2.0, axis=1),
       GEMM_AX1 + [[(3, 2, 4), (3, 4, 5), (3, 2, 5)]], inputs=ABC),
    Op("linalg_gemm_axis0_tb", lambda a, b, c: L.gemm(a, b, c, axis=-3, transpose_b=True),
       lambda a, b, c: _gemm(a, b, c, tb=True, axis=0),
       [[(3, 2, 4), (5, 2, 4), (3, 2, 5)], [(1, 3, 1), (6, 3, 1), (1, 3, 6)],
        [(5, 1, 2), (3, 1, 2), (5, 1, 3)]], inputs=ABC),
    # -- gemm2: alpha op(A) op(B)
    Op("linalg_gemm2", lambda a, b: L.gemm2(a, b), lambda a, b: _gemm(a, b),
       [s[:2] for s in GEMM], inputs=("A", "B")),
    Op("linalg_gemm2_ta", lambda a, b: L.gemm2(a, b, transpose_a=True, alpha=-2.0),
       lambda a, b: _gemm(a, b, ta=True, alpha=-2.0),
       [[(4, 3), (4, 5)], [(2, 4, 3), (2, 4, 5)], [(1, 1, 3), (1, 1, 1)]],
       inputs=("A", "B")),
    Op("linalg_gemm2_tb", lambda a, b: L.gemm2(a, b, transpose_b=True, alpha=0.5),
       lambda a, b: _gemm(a, b, tb=True, alpha=0.5),
       [[(3, 4), (5, 4)], [(2, 3, 4), (2, 5, 4)], [(1, 1, 3), (1, 7, 3)]], inputs=("A", "B")),
    Op("linalg_gemm2_axis0", lambda a, b: L.gemm2(a, b, axis=0, transpose_a=True),
       lambda a, b: _gemm(a, b, ta=True, axis=0),
       [[(4, 2, 3), (4, 2, 5)], [(3, 1, 1), (3, 1, 6)], [(2, 3, 5), (2, 3, 1)]],
       inputs=("A", "B")),
    Op("linalg_gemm2_axis1", lambda a, b: L.gemm2(a, b, axis=1), lambda a, b: _gemm(a, b, axis=1),
       [s[:2] for s in GEMM_AX1] + [[(3, 2, 4), (3, 4, 5)]], inputs=("A", "B")),
    # -- syrk: alpha A A^T or alpha A^T A
    Op("linalg_syrk", lambda a: L.syrk(a, alpha=1.5), lambda a: _syrk(a, alpha=1.5),
       [[(3, 5)], [(2, 4, 3)], [(1, 1)], [(2, 1, 3, 7)]]),
    Op("linalg_syrk_t", lambda a: L.syrk(a, transpose=True), lambda a: _syrk(a, True),
       [[(3, 5)], [(2, 4, 3)], [(1, 1)], [(1, 6, 1)]]),
    # -- diagonals
    Op("linalg_sumlogdiag", lambda a: L.sumlogdiag(a), _sumlogdiag, SQUARE,
       gen={"x": "pos"}),
    Op("linalg_extractdiag", lambda a: L.extractdiag(a), lambda a: torch.diagonal(a, 0, -2, -1),
       SQUARE),
    Op("linalg_extractdiag_k1", lambda a: L.extractdiag(a, offset=1),
       lambda a: torch.diagonal(a, 1, -2, -1), [[(3, 3)], [(2, 4, 4)], [(1, 2, 2)]],
       ),
    Op("linalg_extractdiag_km2", lambda a: L.extractdiag(a, offset=-2) * 2,
       lambda a: torch.diagonal(a, -2, -2, -1) * 2, [[(3, 3)], [(2, 5, 5)], [(1, 3, 3)]],
       ),
    Op("linalg_makediag", lambda a: L.makediag(a), lambda a: torch.diag_embed(a),
       VECTORS),
    Op("linalg_makediag_k2", lambda a: L.makediag(a, offset=2),
       lambda a: torch.diag_embed(a, 2), VECTORS),
    Op("linalg_makediag_km1", lambda a: L.makediag(a, offset=-1),
       lambda a: torch.diag_embed(a, -1), VECTORS),
    # -- triangles: lower row by row, upper column by column
    Op("linalg_extracttrian", lambda a: L.extracttrian(a), _extracttrian, SQUARE,
       ),
    Op("linalg_extracttrian_upper", lambda a: L.extracttrian(a, lower=False),
       lambda a: _extracttrian(a, 0, False), SQUARE),
    Op("linalg_extracttrian_k1", lambda a: L.extracttrian(a, offset=1),
       lambda a: _extracttrian(a, 1), [[(3, 3)], [(2, 5, 5)], [(1, 2, 2)]]),
    Op("linalg_extracttrian_km2", lambda a: L.extracttrian(a, offset=-2, lower=False),
       lambda a: _extracttrian(a, -2), [[(3, 3)], [(2, 5, 5)], [(1, 3, 3)]]),
    Op("linalg_maketrian", lambda a: L.maketrian(a), _maketrian, PACKED),
    Op("linalg_maketrian_upper", lambda a: L.maketrian(a, lower=False),
       lambda a: _maketrian(a, 0, False), PACKED),
    Op("linalg_maketrian_k2", lambda a: L.maketrian(a, offset=2),
       lambda a: _maketrian(a, 2), PACKED),
    Op("linalg_maketrian_km1", lambda a: L.maketrian(a, offset=-1),
       lambda a: _maketrian(a, -1), PACKED),
]


def _params():
    return [pytest.param(op, shapes, id=f"{op.name}-{i}")
            for op in ROWS for i, shapes in enumerate(op.shapes)]


def test_rows_have_three_shapes_with_a_size_one_and_an_odd_dim():
    assert len({op.name for op in ROWS}) == len(ROWS)
    for op in ROWS:
        dims = [d for shapes in op.shapes for s in shapes for d in s]
        assert len(op.shapes) >= 3 and 1 in dims and any(d & (d - 1) for d in dims), op.name


@pytest.mark.parametrize("op,shapes", _params())
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# -- mxnet's documented examples (la_op.cc) -------------------------------------------------

_M2 = [[1.0, 2.0], [3.0, 4.0]]
_EXAMPLES = [
    (lambda a, b, c: L.gemm(a, b, c, transpose_b=True, alpha=2.0, beta=10.0),
     [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0]] * 3, [[1.0] * 3] * 2], [[14.0] * 3] * 2),
    (lambda a, b, c: L.gemm(a, b, c, transpose_b=True, alpha=2.0, beta=10.0),
     [[[[1.0, 1.0]], [[0.1, 0.1]]], [[[1.0, 1.0]], [[0.1, 0.1]]], [[[10.0]], [[0.01]]]],
     [[[104.0]], [[0.14]]]),
    (lambda a, b: L.gemm2(a, b, transpose_b=True, alpha=2.0),
     [[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0]] * 3], [[4.0] * 3] * 2),
    (lambda a: L.syrk(a, alpha=1.0, transpose=False), [[[1.0, 2, 3], [4, 5, 6]]],
     [[14.0, 32], [32, 77]]),
    (lambda a: L.syrk(a, alpha=1.0, transpose=True), [[[1.0, 2, 3], [4, 5, 6]]],
     [[17.0, 22, 27], [22, 29, 36], [27, 36, 45]]),
    (lambda a: L.sumlogdiag(a), [[[1.0, 1.0], [1.0, 7.0]]], [1.9459101]),
    (lambda a: L.sumlogdiag(a), [[[[1.0, 1.0], [1.0, 7.0]], [[3.0, 0], [0, 17.0]]]],
     [1.9459101, 3.9318256]),
    (lambda a: L.extractdiag(a), [_M2], [1.0, 4.0]),
    (lambda a: L.extractdiag(a, offset=1), [_M2], [2.0]),
    (lambda a: L.makediag(a, offset=1), [[1.0, 2.0]], [[0.0, 1, 0], [0, 0, 2], [0, 0, 0]]),
    (lambda a: L.extracttrian(a), [_M2], [1.0, 3.0, 4.0]),
    (lambda a: L.extracttrian(a, lower=False), [_M2], [1.0, 2.0, 4.0]),
    (lambda a: L.extracttrian(a, offset=1), [_M2], [2.0]),
    (lambda a: L.extracttrian(a, offset=-1), [_M2], [3.0]),
    (lambda a: L.maketrian(a), [[1.0, 2, 3]], [[1.0, 0], [2, 3]]),
    (lambda a: L.maketrian(a, lower=False), [[1.0, 2, 3]], [[1.0, 2], [0, 3]]),
    (lambda a: L.maketrian(a, offset=1), [[1.0, 2, 3]], [[0.0, 1, 2], [0, 0, 3], [0, 0, 0]]),
    (lambda a: L.maketrian(a, offset=-1), [[1.0, 2, 3]], [[0.0, 0, 0], [1, 0, 0], [2, 3, 0]]),
]


@pytest.mark.parametrize("i", range(len(_EXAMPLES)))
def test_mxnet_documented_examples(i, cpu_target):
    build, arrays, want = _EXAMPLES[i]
    names = "ABC"[:len(arrays)]
    s = build(*[sym.Variable(n) for n in names])
    got = s.eval(**{n: np.array(a, np.float32) for n, a in zip(names, arrays)})[0]
    np.testing.assert_allclose(got.asnumpy(), np.array(want, np.float32), rtol=1e-5)


def test_namespace_and_aliases():
    assert {n for n in dir(L) if not n.startswith("_")} >= {
        "extractdiag", "extracttrian", "gemm", "gemm2", "makediag", "maketrian",
        "sumlogdiag", "syrk"}
    a, b, c = sym.Variable("A"), sym.Variable("B"), sym.Variable("C")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for alias, name in (("linalg_syrk", "syrk"), ("linalg_extracttrian", "extracttrian")):
        got = getattr(sym, alias)(a).eval(A=x[:, :2])[0].asnumpy()
        assert (got == getattr(L, name)(a).eval(A=x[:, :2])[0].asnumpy()).all()
    assert sym.linalg_gemm(a, b, c).list_arguments() == ["A", "B", "C"]
    assert L.gemm2(a, b).list_arguments() == ["A", "B"]


# -- in context: heads, a larger graph, the matmul kernels ----------------------------------

def test_linalg_heads_and_a_larger_graph(cpu_target):
    """gemm2 feeding a softmax, next to syrk, a diagonal and a triangle as graph heads."""
    a, b, c = (sym.Variable(n) for n in "abc")
    p = sym.softmax(L.gemm2(a, b, alpha=0.5, transpose_b=True), axis=-1)
    heads = sym.Group([p, L.syrk(a), L.extractdiag(L.gemm(a, b, c, transpose_b=True)),
                       L.maketrian(L.extracttrian(c) * 2)])
    shapes = {"a": (2, 3, 4), "b": (2, 3, 4), "c": (2, 3, 3)}
    exe = heads.simple_bind(cpu(), grad_req="write", **shapes)
    gen = torch.Generator().manual_seed(7)
    xs = {n: torch.randn(s, generator=gen) for n, s in shapes.items()}
    for n, v in xs.items():
        exe.arg_dict[n][:] = v
    outs = exe.forward(is_train=True)
    t = {n: v.double().requires_grad_() for n, v in xs.items()}
    want = [torch.softmax(0.5 * t["a"] @ t["b"].transpose(1, 2), -1),
            t["a"] @ t["a"].transpose(1, 2),
            torch.diagonal(t["a"] @ t["b"].transpose(1, 2) + t["c"], 0, -2, -1),
            torch.tril(t["c"]) * 2]
    for o, w in zip(outs, want):
        np.testing.assert_allclose(o.asnumpy(), w.detach().numpy(), rtol=1e-4, atol=1e-5)
    ograds = [torch.randn(tuple(w.shape), generator=gen) for w in want]
    exe.backward(ograds)
    grads = torch.autograd.grad(sum((w * g.double()).sum() for w, g in zip(want, ograds)),
                                [t[n] for n in "abc"])
    for n, g in zip("abc", grads):
        np.testing.assert_allclose(exe.grad_dict[n].asnumpy(), g.numpy(), rtol=1e-4, atol=1e-5)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


@pytest.mark.parametrize("build,shapes,kind", [
    (lambda a, b, c: L.gemm(a, b, c, alpha=2.0, beta=0.5), [(3, 4), (4, 5), (3, 5)], "dot"),
    (lambda a, b, c: L.gemm(a, b, c, transpose_a=True, alpha=-1.0, beta=3.0),
     [(2, 4, 3), (2, 4, 5), (2, 3, 5)], "batch_dot"),
    (lambda a, b: L.gemm2(a, b, transpose_b=True, alpha=0.25),
     [(2, 1, 3, 4), (2, 1, 5, 4)], "batch_dot"),
    (lambda a: L.syrk(a, alpha=3.0), [(2, 3, 4)], "batch_dot"),
])
def test_gemm_is_one_matmul_kernel_with_its_epilogue(build, shapes, kind):
    """The product takes the matmul lowering; alpha, beta and C are its fused epilogue,
    so the forward is one launch, and so is each product of the backward."""
    names = "abc"[:len(shapes)]
    s = build(*[sym.Variable(n) for n in names])
    args = dict(zip(names, shapes))
    prog = compile_symbol(s, args, False, {n: "null" for n in names}, False)
    assert prog.stats["forward_launches"] == 1
    (group,) = prog.groups
    assert kind in group and "elemwise_add" in group if len(shapes) == 3 else kind in group
    train = compile_symbol(s, args, True, {n: "write" for n in names}, True)
    products = [g for g in train.groups if kind in g]
    # the forward's and the backward's two (syrk's two halves share one accumulator)
    assert len(products) == (2 if len(shapes) == 1 else 3)
    assert all(set(g) <= {kind, "_mul_scalar", "elemwise_add"} for g in products)


def test_gemm_beta_zero_reads_no_c():
    """BLAS's rule, which mxnet follows: a NaN in C stays out when beta is 0."""
    a, b, c = (sym.Variable(n) for n in "abc")
    ones = np.ones((2, 2), np.float32)
    got = L.gemm(a, b, c, beta=0.0).eval(a=ones, b=ones, c=np.full((2, 2), np.nan, np.float32))
    assert got[0].asnumpy().tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_triangle_positions_exact_for_larger_matrices():
    """Every packed position of a 181 x 181 triangle (16,471 entries) lands where mxnet
    puts it: the square root's rounding is corrected."""
    x = sym.Variable("x")
    n = 181
    a = np.arange(n * n, dtype=np.float32).reshape(n, n)
    for offset, lower in ((0, True), (0, False), (3, True), (-5, True)):
        got = L.extracttrian(x, offset=offset, lower=lower).eval(x=a)[0].asnumpy()
        want = _extracttrian(torch.from_numpy(a), offset, lower).numpy()
        assert (got == want).all(), (offset, lower)
        back = L.maketrian(x, offset=offset, lower=lower).eval(x=want)[0].asnumpy()
        mask = np.zeros((n, n), bool)
        rows, cols = _tri_positions(n, offset, lower)
        mask[rows, cols] = True
        assert (back == np.where(mask, a, 0)).all(), (offset, lower)


# -- shape errors ------------------------------------------------------------------------

_a, _b, _c = sym.Variable("A"), sym.Variable("B"), sym.Variable("C")


@pytest.mark.parametrize("s,shapes,words", [
    (L.gemm2(_a, _b), {"A": (3, 4), "B": (5, 6)}, "incompatible matrix dimensions"),
    (L.gemm2(_a, _b), {"A": (2, 3, 4), "B": (3, 4, 5)}, "must be the same, except on row/col"),
    (L.gemm2(_a, _b), {"A": (3, 4), "B": (2, 4, 5)}, "same number (at least 2) of dim"),
    (L.gemm2(_a, _b, axis=-1), {"A": (3, 4), "B": (4, 5)}, "invalid row axis (-1)"),
    (L.gemm2(_a, _b, axis=2), {"A": (2, 3, 4), "B": (2, 4, 5)}, "invalid row axis (2)"),
    (L.gemm(_a, _b, _c), {"A": (3, 4), "B": (4, 5), "C": (3, 4)}, "it must be (3, 5)"),
    (L.syrk(_a), {"A": (3,)}, "at least 2 dimensions"),
    (L.sumlogdiag(_a), {"A": (3, 4)}, "square matrices"),
    (L.extractdiag(_a), {"A": (2, 3, 4)}, "square matrices"),
    (L.extractdiag(_a, offset=3), {"A": (3, 3)}, "illegal offset 3"),
    (L.extracttrian(_a, offset=-4), {"A": (2, 4, 4)}, "illegal offset -4"),
    (L.extracttrian(_a), {"A": (5,)}, "tensor of matrices"),
    (L.maketrian(_a), {"A": (2, 4)}, "no triangle's size"),
    (L.maketrian(_a), {"A": (8390656,)}, "too large"),
])
def test_shape_errors_name_the_operator_and_the_shapes(s, shapes, words):
    with pytest.raises(MXNetError) as info:
        s.infer_shape(**shapes)
    assert words in str(info.value)


def test_float64_runs_and_other_dtypes_are_refused_naming_the_node():
    """mxnet's linalg kernels take float32 and float64 only."""
    a, b = sym.Variable("A"), sym.Variable("B")
    s = L.gemm2(a, b, name="g")
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    exe = s.simple_bind(cpu(), grad_req="null", type_dict={"A": "float64", "B": "float64"},
                        A=(2, 3), B=(3, 2))
    got = exe.forward(A=x, B=x.T.copy())[0].asnumpy()
    assert got.dtype == np.float64 and (got == x @ x.T).all()
    assert L.syrk(a).infer_type(A="float64")[1] == [np.float64]
    with pytest.raises(MXNetError) as info:
        L.makediag(a, name="m").infer_type(A="float16")
    assert "node m" in str(info.value) and "float32" in str(info.value)
