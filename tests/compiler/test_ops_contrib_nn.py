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


# -- arange_like, index_copy, quadratic, div_sqrt_dim, gradientmultiplier, STEs ----------

def _arange_like(shape, start=0.0, step=1.0, repeat=1):
    n = math.prod(shape)
    i = torch.div(torch.arange(n), repeat, rounding_mode="floor").double()
    return (start + i * step).reshape(shape)


def _index_copy_one(old, idx, new):
    out = old.clone()
    out[int(idx[0])] = new[0]
    return out


class _GradMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s, None


def _straight(fn):
    return lambda x: x + (fn(x) - x).detach()


MATH = [
    Op("arange_like_all", lambda x: C.arange_like(x, start=1.5, step=0.5, repeat=2),
       lambda x: _zero_grad(_arange_like(tuple(x.shape), 1.5, 0.5, 2), x),
       [[(2, 3)], [(1, 5, 1)], [(3,)]], fd=False),
    Op("arange_like_axis", lambda x: C.arange_like(x, start=-2.0, step=3.0, axis=-1),
       lambda x: _zero_grad(_arange_like((x.shape[-1],), -2.0, 3.0), x),
       [[(2, 3)], [(4, 1, 5)]], fd=False),
    Op("index_copy_one_row", lambda x, i, t: C.index_copy(x, i, t), _index_copy_one,
       [[(5, 3), (1,), (1, 3)], [(3, 2, 1), (1,), (1, 2, 1)]], inputs=("x", "i", "t"),
       gen={"i": "index:3"}, nograd=("i",)),
    Op("quadratic", lambda x: C.quadratic(x, a=1.5, b=-2.0, c=0.25),
       lambda x: x * (1.5 * x - 2.0) + 0.25, [[(2, 3)], [(1, 7)], [(5,)]]),
    Op("quadratic_default", lambda x: C.quadratic(x), lambda x: x * 0.0,
       [[(3, 2)], [(1, 5)]]),
    Op("div_sqrt_dim", lambda x: C.div_sqrt_dim(x), lambda x: x / math.sqrt(x.shape[-1]),
       [[(2, 3)], [(4, 1, 7)], [(9,)]]),
    Op("gradientmultiplier", lambda x: C.gradientmultiplier(sym.exp(x), scalar=-0.5),
       lambda x: _GradMul.apply(torch.exp(x), -0.5), [[(2, 3)], [(1, 5)]], fd=False),
    Op("round_ste", lambda x: C.round_ste(x * 3.0),
       lambda x: _straight(lambda v: torch.sign(v) * torch.floor(v.abs() + 0.5))(x * 3.0),
       [[(2, 3)], [(1, 5)]], fd=False),
    Op("sign_ste", lambda x: C.sign_ste(x), _straight(torch.sign), [[(2, 3)], [(1, 5)]],
       fd=False),
]


ROWS = RESIZE + ADAPTIVE + MATH


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
@pytest.mark.parametrize("k", range(3))
def test_contrib_op(op, k, cpu_target):
    if k >= len(op.shapes):
        pytest.skip("fewer shapes")
    exe = check(op, op.shapes[k])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
