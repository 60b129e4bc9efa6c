"""mxnet's contrib operators that need no extern launch, through the full compile path on
both cpu targets (``compiler/ops/contrib_*.py``).

Each ``ROWS`` entry runs ``tests/compiler/test_ops_compiled.check``: forward against an
independent torch version in float64 (``F.interpolate``, ``F.adaptive_avg_pool2d``,
``torch.bmm`` over the attention layouts, box geometry written out), every gradient
against torch autograd, a few entries against finite differences, and on ``interpret``
the same launches as on ``cpu``. ``tests/compiler/test_ops_after_views.py`` sweeps the
rows again after every view. Operators whose mxnet gradient is zero (box_iou, box_encode,
box_decode, MultiBoxPrior, arange_like) compare with a reference whose gradient is zero
and skip finite differences (the function itself is not flat). Shape rules and errors
follow; mxnet's own numbers are replayed by ``test_mxnet_fixtures_contrib_nn.py``.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets

C = sym.contrib


def _zero_grad(t, *xs):
    """``t``'s value with a zero gradient to each of ``xs`` (mxnet's zero backward)."""
    return t.detach() + sum(0.0 * x.sum() for x in xs)


# -- BilinearResize2D, AdaptiveAvgPooling2D ----------------------------------------------

def _interp(size, align):
    return lambda x: F.interpolate(x, size=size, mode="bilinear", align_corners=align)


RESIZE = [
    Op("bilinear_up_align", lambda x: C.BilinearResize2D(x, height=7, width=9),
       _interp((7, 9), True), [[(2, 3, 4, 5)], [(1, 1, 3, 1)], [(1, 2, 1, 6)]]),
    Op("bilinear_up_noalign",
       lambda x: C.BilinearResize2D(x, height=6, width=7, align_corners=False),
       _interp((6, 7), False), [[(2, 2, 4, 5)], [(1, 3, 3, 1)]]),
    Op("bilinear_down_noalign",
       lambda x: C.BilinearResize2D(x, height=3, width=2, align_corners=False),
       _interp((3, 2), False), [[(1, 2, 7, 5)], [(2, 1, 9, 4)]]),
    Op("bilinear_to_one", lambda x: C.BilinearResize2D(x, height=1, width=3),
       _interp((1, 3), True), [[(1, 2, 5, 6)], [(2, 1, 3, 7)]]),
    Op("bilinear_same_size", lambda x: C.BilinearResize2D(x, height=4, width=5),
       lambda x: x * 1.0, [[(1, 2, 4, 5)], [(2, 1, 4, 5)]]),
    Op("bilinear_scale", lambda x: C.BilinearResize2D(x, scale_height=2.0, scale_width=1.5),
       lambda x: _interp((2 * x.shape[2], int(1.5 * x.shape[3])), True)(x),
       [[(1, 2, 3, 4)], [(2, 1, 5, 3)]]),
    Op("bilinear_odd_scale",
       lambda x: C.BilinearResize2D(x, scale_height=2.0, scale_width=0.5, mode="odd_scale"),
       lambda x: _interp(((x.shape[2] - 1) * 2 + 1 if x.shape[2] % 2 else x.shape[2] * 2,
                          (x.shape[3] - 1) // 2 + 1 if x.shape[3] % 2 else x.shape[3] // 2),
                         True)(x),
       [[(1, 2, 3, 5)], [(2, 1, 4, 6)]]),
    Op("bilinear_to_even_up", lambda x: C.BilinearResize2D(x, mode="to_even_up"),
       lambda x: _interp((x.shape[2] + x.shape[2] % 2, x.shape[3] + x.shape[3] % 2), True)(x),
       [[(1, 2, 3, 4)], [(2, 1, 5, 5)]]),
    Op("bilinear_to_odd_down",
       lambda x: C.BilinearResize2D(x, mode="to_odd_down", align_corners=False),
       lambda x: _interp((x.shape[2] - 1 + x.shape[2] % 2, x.shape[3] - 1 + x.shape[3] % 2),
                         False)(x),
       [[(1, 2, 4, 5)], [(2, 1, 6, 3)]]),
    Op("bilinear_like", lambda x, like: C.BilinearResize2D(x, like, mode="like"),
       lambda x, like: _interp(tuple(like.shape[2:]), True)(x),
       [[(2, 2, 3, 4), (1, 5, 5, 7)], [(1, 1, 4, 4), (3, 1, 2, 3)]], inputs=("x", "like")),
]

ADAPTIVE = [
    Op("adaptive_avg_hw", lambda x: C.AdaptiveAvgPooling2D(x, output_size=(3, 2)),
       lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [[(2, 3, 7, 5)], [(1, 1, 3, 2)],
                                                    [(1, 2, 2, 9)]]),
    Op("adaptive_avg_one_int", lambda x: C.AdaptiveAvgPooling2D(x, output_size=4),
       lambda x: F.adaptive_avg_pool2d(x, 4), [[(1, 2, 6, 10)], [(2, 1, 3, 5)]]),
    Op("adaptive_avg_global", lambda x: C.AdaptiveAvgPooling2D(x),
       lambda x: x.mean((2, 3), keepdim=True), [[(2, 3, 5, 7)], [(1, 1, 1, 3)]]),
]


ROWS = RESIZE + ADAPTIVE


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
@pytest.mark.parametrize("k", range(3))
def test_contrib_op(op, k, cpu_target):
    if k >= len(op.shapes):
        pytest.skip("fewer shapes")
    exe = check(op, op.shapes[k])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
