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
       [[(3, 5)], [(2, 4, 3)], [(1, 1)], [(2, 1, 3, 7)]], inputs=("A",)),
    Op("linalg_syrk_t", lambda a: L.syrk(a, transpose=True), lambda a: _syrk(a, True),
       [[(3, 5)], [(2, 4, 3)], [(1, 1)], [(1, 6, 1)]], inputs=("A",)),
    # -- diagonals
    Op("linalg_sumlogdiag", lambda a: L.sumlogdiag(a), _sumlogdiag, SQUARE, inputs=("A",),
       gen={"A": "pos"}),
    Op("linalg_extractdiag", lambda a: L.extractdiag(a), lambda a: torch.diagonal(a, 0, -2, -1),
       SQUARE, inputs=("A",)),
    Op("linalg_extractdiag_k1", lambda a: L.extractdiag(a, offset=1),
       lambda a: torch.diagonal(a, 1, -2, -1), [[(3, 3)], [(2, 4, 4)], [(1, 2, 2)]],
       inputs=("A",)),
    Op("linalg_extractdiag_km2", lambda a: L.extractdiag(a, offset=-2) * 2,
       lambda a: torch.diagonal(a, -2, -2, -1) * 2, [[(3, 3)], [(2, 5, 5)], [(1, 3, 3)]],
       inputs=("A",)),
    Op("linalg_makediag", lambda a: L.makediag(a), lambda a: torch.diag_embed(a),
       VECTORS, inputs=("A",)),
    Op("linalg_makediag_k2", lambda a: L.makediag(a, offset=2),
       lambda a: torch.diag_embed(a, 2), VECTORS, inputs=("A",)),
    Op("linalg_makediag_km1", lambda a: L.makediag(a, offset=-1),
       lambda a: torch.diag_embed(a, -1), VECTORS, inputs=("A",)),
    # -- triangles: lower row by row, upper column by column
    Op("linalg_extracttrian", lambda a: L.extracttrian(a), _extracttrian, SQUARE,
       inputs=("A",)),
    Op("linalg_extracttrian_upper", lambda a: L.extracttrian(a, lower=False),
       lambda a: _extracttrian(a, 0, False), SQUARE, inputs=("A",)),
    Op("linalg_extracttrian_k1", lambda a: L.extracttrian(a, offset=1),
       lambda a: _extracttrian(a, 1), [[(3, 3)], [(2, 5, 5)], [(1, 2, 2)]], inputs=("A",)),
    Op("linalg_extracttrian_km2", lambda a: L.extracttrian(a, offset=-2, lower=False),
       lambda a: _extracttrian(a, -2), [[(3, 3)], [(2, 5, 5)], [(1, 3, 3)]], inputs=("A",)),
    Op("linalg_maketrian", lambda a: L.maketrian(a), _maketrian, PACKED, inputs=("A",)),
    Op("linalg_maketrian_upper", lambda a: L.maketrian(a, lower=False),
       lambda a: _maketrian(a, 0, False), PACKED, inputs=("A",)),
    Op("linalg_maketrian_k2", lambda a: L.maketrian(a, offset=2),
       lambda a: _maketrian(a, 2), PACKED, inputs=("A",)),
    Op("linalg_maketrian_km1", lambda a: L.maketrian(a, offset=-1),
       lambda a: _maketrian(a, -1), PACKED, inputs=("A",)),
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
