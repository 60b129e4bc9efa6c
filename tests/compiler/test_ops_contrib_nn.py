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


# -- interleaved attention matmuls: written from mxnet's documented equivalent -------------

def _heads(x, heads, parts, part):
    """(L, B, H*parts*D) -> (B*H, L, D): mxnet's reshape(0, 0, H, parts, -1), pick, transpose
    (1, 2, 0, 3), reshape(-1, 0, 0)."""
    length, batch, width = x.shape
    t = x.reshape(length, batch, heads, parts, width // (heads * parts))[:, :, :, part]
    return t.permute(1, 2, 0, 3).reshape(batch * heads, length, -1)


def _merge(o, heads):
    bh, length, d = o.shape
    o = o.reshape(bh // heads, heads, length, d).permute(2, 0, 1, 3)
    return o.reshape(length, bh // heads, -1)


def _qk(q, k):
    return torch.bmm(q / math.sqrt(q.shape[-1]), k.transpose(1, 2))


ATTENTION = [
    Op("selfatt_qk", lambda x: C.interleaved_matmul_selfatt_qk(x, heads=2),
       lambda x: _qk(_heads(x, 2, 3, 0), _heads(x, 2, 3, 1)),
       [[(3, 2, 12)], [(1, 3, 18)], [(5, 1, 6)]]),
    Op("selfatt_qk_one_head", lambda x: C.interleaved_matmul_selfatt_qk(x, heads=1),
       lambda x: _qk(_heads(x, 1, 3, 0), _heads(x, 1, 3, 1)), [[(4, 2, 9)], [(2, 3, 3)]]),
    Op("selfatt_valatt", lambda x, a: C.interleaved_matmul_selfatt_valatt(x, a, heads=3),
       lambda x, a: _merge(torch.bmm(a, _heads(x, 3, 3, 2)), 3),
       [[(4, 2, 18), (6, 4, 4)], [(1, 1, 9), (3, 1, 1)], [(3, 2, 9), (6, 3, 3)]],
       inputs=("x", "a")),
    Op("encdec_qk", lambda q, kv: C.interleaved_matmul_encdec_qk(q, kv, heads=2),
       lambda q, kv: _qk(_heads(q, 2, 1, 0), _heads(kv, 2, 2, 0)),
       [[(3, 2, 6), (5, 2, 12)], [(1, 3, 4), (2, 3, 8)], [(4, 1, 10), (1, 1, 20)]],
       inputs=("q", "kv")),
    Op("encdec_valatt", lambda kv, a: C.interleaved_matmul_encdec_valatt(kv, a, heads=2),
       lambda kv, a: _merge(torch.bmm(a, _heads(kv, 2, 2, 1)), 2),
       [[(5, 2, 12), (4, 3, 5)], [(1, 3, 4), (6, 2, 1)], [(3, 1, 20), (2, 1, 3)]],
       inputs=("kv", "a")),
]


# -- box geometry: written out from mxnet's kernels, zero gradients -------------------------

def _corners(v, center):
    if center:
        return v[..., 0] - v[..., 2] / 2, v[..., 1] - v[..., 3] / 2, \
            v[..., 0] + v[..., 2] / 2, v[..., 1] + v[..., 3] / 2
    return v.unbind(-1)


def _box_iou(center):
    def iou(a, b):
        a2, b2 = a.detach().reshape(-1, 4), b.detach().reshape(-1, 4)
        out = torch.zeros(a2.shape[0], b2.shape[0], dtype=a.dtype)
        for i in range(a2.shape[0]):
            ax0, ay0, ax1, ay1 = _corners(a2[i], center)
            for j in range(b2.shape[0]):
                bx0, by0, bx1, by1 = _corners(b2[j], center)
                iw = max(float(min(ax1, bx1) - max(ax0, bx0)), 0.0)
                ih = max(float(min(ay1, by1) - max(ay0, by0)), 0.0)
                if iw * ih <= 0:
                    continue
                area = [max(float(x1 - x0), 0.0) * max(float(y1 - y0), 0.0)
                        if (x1 >= x0 and y1 >= y0) else 0.0
                        for x0, y0, x1, y1 in ((ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1))]
                out[i, j] = iw * ih / (area[0] + area[1] - iw * ih)
        return _zero_grad(out.reshape(tuple(a.shape[:-1]) + tuple(b.shape[:-1])), a, b)
    return iou


def _decode(center, stds=(1.0, 1.0, 1.0, 1.0), clip=-1.0):
    def decode(x, anc):
        out = torch.empty_like(x).detach()
        a = anc.detach().reshape(-1, 4)
        for bi in range(x.shape[0]):
            for i in range(x.shape[1]):
                ax, ay, aw, ah = (float(v) for v in a[i])
                if not center:
                    aw, ah = aw - ax, ah - ay
                    ax, ay = ax + aw / 2, ay + ah / 2
                d = [float(v) * s for v, s in zip(x.detach()[bi, i], stds)]
                dw, dh = (min(d[2], clip), min(d[3], clip)) if clip > 0 else (d[2], d[3])
                cx, cy = d[0] * aw + ax, d[1] * ah + ay
                w, h = math.exp(dw) * aw / 2, math.exp(dh) * ah / 2
                out[bi, i] = torch.tensor([cx - w, cy - h, cx + w, cy + h])
        return _zero_grad(out, x, anc)
    return decode


def _prior(sizes, ratios, steps=None, offsets=(0.5, 0.5), clip=False):
    def prior(x):
        h, w = x.shape[2:]
        sy, sx = steps or (1.0 / h, 1.0 / w)
        pairs = [(s, math.sqrt(ratios[0])) for s in sizes] + \
            [(sizes[0], math.sqrt(r)) for r in ratios[1:]]
        rows = []
        for r in range(h):
            for c in range(w):
                cy, cx = (r + offsets[0]) * sy, (c + offsets[1]) * sx
                for s, q in pairs:
                    hw, hh = s * h / w * q / 2, s / q / 2
                    rows.append([cx - hw, cy - hh, cx + hw, cy + hh])
        out = torch.tensor(rows, dtype=x.dtype)[None]
        return _zero_grad(out.clamp(0, 1) if clip else out, x)
    return prior


def _encode_inputs(xy, wh):
    return sym.concat(xy, xy + wh, dim=2)


def _encode(s, m, xy, wh, rxy, rwh, means, stds):
    anchors = torch.cat([xy, xy + wh], 2).detach()
    refs = torch.cat([rxy, rxy + rwh], 2).detach()
    t, mask = torch.zeros_like(anchors), torch.zeros_like(anchors)
    for b in range(anchors.shape[0]):
        for n in range(anchors.shape[1]):
            if float(s.detach()[b, n]) <= 0.5:
                continue
            a, r = anchors[b, n], refs[b, int(m.detach()[b, n])]
            aw, ah, rw, rh = a[2] - a[0], a[3] - a[1], r[2] - r[0], r[3] - r[1]
            raw = torch.stack([(r[0] + rw / 2 - a[0] - aw / 2) / aw,
                               (r[1] + rh / 2 - a[1] - ah / 2) / ah,
                               torch.log(rw / aw), torch.log(rh / ah)])
            t[b, n] = (raw - means.detach()) / stds.detach()
            mask[b, n] = 1.0
    every = (s, m, xy, wh, rxy, rwh, means, stds)
    return [_zero_grad(t, *every), _zero_grad(mask, *every)]


BOX = [
    Op("box_encode",
       lambda s, m, xy, wh, rxy, rwh, means, stds: C.box_encode(
           s, m, _encode_inputs(xy, wh), _encode_inputs(rxy, rwh), means, stds),
       _encode, [[(2, 3), (2, 3), (2, 3, 2), (2, 3, 2), (2, 5, 2), (2, 5, 2), (4,), (4,)],
                 [(1, 1), (1, 1), (1, 1, 2), (1, 1, 2), (1, 2, 2), (1, 2, 2), (4,), (4,)]],
       inputs=("s", "m", "xy", "wh", "rxy", "rwh", "means", "stds"),
       gen={"m": "index:2", "wh": "pos", "rwh": "pos", "stds": "pos"}, nograd=("m",),
       fd=False),
    Op("box_iou_corner", lambda a, b: C.box_iou(a, b),
       _box_iou(False), [[(3, 4), (5, 4)], [(2, 3, 4), (1, 4)], [(1, 4), (2, 2, 4)]],
       inputs=("a", "b"), gen={"a": "unit", "b": "unit"}, fd=False),
    Op("box_iou_center", lambda a, b: C.box_iou(a, b, format="center"),
       _box_iou(True), [[(3, 4), (5, 4)], [(2, 1, 4), (3, 4)]],
       inputs=("a", "b"), gen={"a": "unit", "b": "unit"}, fd=False),
    Op("box_decode_center", lambda x, a: C.box_decode(x, a, std0=0.1, std1=0.2, std2=0.3,
                                                      std3=0.4),
       _decode(True, (0.1, 0.2, 0.3, 0.4)), [[(2, 3, 4), (1, 3, 4)], [(1, 5, 4), (1, 5, 4)]],
       inputs=("x", "a"), gen={"a": "pos"}, fd=False),
    Op("box_decode_corner_clip", lambda x, a: C.box_decode(x, a, format="corner", clip=0.5),
       _decode(False, clip=0.5), [[(2, 3, 4), (1, 3, 4)], [(3, 1, 4), (1, 1, 4)]],
       inputs=("x", "a"), fd=False),
    Op("multibox_prior", lambda x: C.MultiBoxPrior(x, sizes=(0.5, 0.25), ratios=(1, 2, 0.5)),
       _prior((0.5, 0.25), (1, 2, 0.5)), [[(1, 2, 3, 5)], [(2, 1, 1, 1)], [(1, 1, 4, 2)]],
       fd=False),
    Op("multibox_prior_steps_clip",
       lambda x: C.MultiBoxPrior(x, sizes=(0.7,), steps=(0.25, 0.125), offsets=(0.2, 0.7),
                                 clip=True),
       _prior((0.7,), (1.0,), (0.25, 0.125), (0.2, 0.7), True), [[(1, 1, 3, 5)], [(2, 3, 2, 2)]],
       fd=False),
]


ROWS = RESIZE + ADAPTIVE + MATH + ATTENTION + BOX


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
@pytest.mark.parametrize("k", range(3))
def test_contrib_op(op, k, cpu_target):
    if k >= len(op.shapes):
        pytest.skip("fewer shapes")
    exe = check(op, op.shapes[k])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
