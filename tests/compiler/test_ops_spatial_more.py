"""mxnet 1.9.1's spatial operators (``compiler/ops/spatial_more.py``) and deformable family
(``compiler/ops/deformable.py``) through the full compile path, on both cpu targets.

Rows (``ROWS``) run ``tests/compiler/test_ops_compiled.check``: the forward against an
independent torch version (``F.grid_sample`` for the samplers, ``F.unfold`` / ``F.fold``
for im2col / col2im, loops for Correlation), every gradient against autograd of it, a few
entries against finite differences. Then mxnet's own numbers
(``tests/fixtures/make_spatial_more_fixtures.py``, replayed by
``test_mxnet_fixtures.test_mxnet_case``), shape rules and errors.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler import test_mxnet_fixtures as replay
from tests.compiler.test_ops_compiled import Op, check

with open(os.path.join(replay.FIXTURES, "cases_spatial_more_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


def _grid_sample(data, grid):
    """mxnet's BilinearSampler is grid_sample with align_corners and zero padding."""
    return F.grid_sample(data, grid.permute(0, 2, 3, 1), mode="bilinear",
                         padding_mode="zeros", align_corners=True)


def _affine_grid(theta, h, w):
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h, dtype=theta.dtype),
                            torch.linspace(-1, 1, w, dtype=theta.dtype), indexing="ij")
    dst = torch.stack([xs, ys, torch.ones_like(xs)]).reshape(3, -1)
    return (theta.reshape(-1, 2, 3) @ dst).reshape(-1, 2, h, w)


def _warp_grid(flow):
    n, _, h, w = flow.shape
    ys, xs = torch.meshgrid(torch.arange(h, dtype=flow.dtype),
                            torch.arange(w, dtype=flow.dtype), indexing="ij")
    x = (flow[:, 0] + xs) / ((w - 1) / 2) - 1
    y = (flow[:, 1] + ys) / ((h - 1) / 2) - 1
    return torch.stack([x, y], 1)


def _correlation(a, b, k, md, s1, s2, pad, mult):
    """Caffe/FlowNet's correlation, one output position at a time."""
    a, b = F.pad(a, (pad,) * 4), F.pad(b, (pad,) * 4)
    n, c, hp, wp = a.shape
    kr = (k - 1) // 2
    border = md + kr
    th, tw = -(-(hp - 2 * border) // s1), -(-(wp - 2 * border) // s1)
    r = md // s2
    rows = []
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            plane = []
            for i in range(th):
                line = []
                for j in range(tw):
                    y, x = i * s1 + md, j * s1 + md
                    pa = a[:, :, y:y + k, x:x + k]
                    pb = b[:, :, y + dy * s2:y + dy * s2 + k, x + dx * s2:x + dx * s2 + k]
                    v = (pa * pb) if mult else (pa - pb).abs()
                    line.append(v.sum(dim=(1, 2, 3)) / (k * k * c))
                plane.append(torch.stack(line, -1))
            rows.append(torch.stack(plane, -2))
    return torch.stack(rows, 1)


def _im2col_1d3d(x, kernel, stride, dilate, pad):
    """im2col of 1 or 3 spatial dims: unfold one dim at a time."""
    nd = len(kernel)
    x = F.pad(x, [p for q in reversed(pad) for p in (q, q)])
    for d in range(nd):
        x = x.unfold(2 + d, (kernel[d] - 1) * dilate[d] + 1, stride[d])[..., ::dilate[d]]
    # x: (N, C, *blocks, *kernel) -> (N, C * prod(kernel), prod(blocks))
    n, c = x.shape[:2]
    perm = [0, 1] + [2 + nd + d for d in range(nd)] + [2 + d for d in range(nd)]
    return x.permute(*perm).reshape(n, c * int(np.prod(kernel)), -1)


SAMPLERS = [
    Op("bilinear_sampler", lambda d, g: sym.BilinearSampler(d, g), _grid_sample,
       [[(2, 3, 4, 5), (2, 2, 3, 4)], [(1, 1, 3, 1), (1, 2, 2, 3)]], inputs=("d", "g"),
       gen={"g": "randn"}),
    Op("grid_affine", lambda t: sym.GridGenerator(t, transform_type="affine",
                                                  target_shape=(3, 4)),
       lambda t: _affine_grid(t, 3, 4), [[(2, 6)], [(1, 6)]]),
    Op("grid_warp", lambda f: sym.GridGenerator(f, transform_type="warp"), _warp_grid,
       [[(2, 2, 3, 4)], [(1, 2, 2, 5)]]),
    Op("spatial_transformer",
       lambda d, t: sym.SpatialTransformer(d, t, target_shape=(3, 4), transform_type="affine",
                                           sampler_type="bilinear"),
       lambda d, t: _grid_sample(d, _affine_grid(t, 3, 4)),
       [[(2, 2, 5, 4), (2, 6)], [(1, 3, 2, 3), (1, 6)]], inputs=("d", "t")),
]

CORRELATION = [
    Op(f"correlation_{tag}",
       lambda a, b, kw=kw: sym.Correlation(a, b, **kw),
       lambda a, b, kw=kw: _correlation(a, b, kw["kernel_size"], kw["max_displacement"],
                                        kw["stride1"], kw["stride2"], kw["pad_size"],
                                        kw["is_multiply"]),
       shapes, inputs=("a", "b"))
    for tag, kw, shapes in [
        ("mul", dict(kernel_size=1, max_displacement=2, stride1=1, stride2=1, pad_size=2,
                     is_multiply=True), [[(2, 3, 4, 5)] * 2, [(1, 1, 3, 3)] * 2]),
        ("abs_k3", dict(kernel_size=3, max_displacement=2, stride1=2, stride2=2, pad_size=3,
                        is_multiply=False), [[(1, 2, 5, 6)] * 2]),
        ("mul_k3_nopad", dict(kernel_size=3, max_displacement=1, stride1=1, stride2=1,
                              pad_size=0, is_multiply=True), [[(2, 2, 5, 6)] * 2]),
    ]]

IM2COL = [
    Op("im2col_2d", lambda x: sym.im2col(x, kernel=(2, 3), stride=(1, 2), dilate=(2, 1),
                                         pad=(1, 1)),
       lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=(1, 1), stride=(1, 2)),
       [[(2, 3, 5, 6)], [(1, 1, 3, 3)]]),
    Op("im2col_1d", lambda x: sym.im2col(x, kernel=(3,), stride=(2,), pad=(1,)),
       lambda x: _im2col_1d3d(x, (3,), (2,), (1,), (1,)), [[(2, 2, 7)], [(1, 1, 3)]]),
    Op("im2col_3d", lambda x: sym.im2col(x, kernel=(2, 2, 2), dilate=(1, 2, 1)),
       lambda x: _im2col_1d3d(x, (2, 2, 2), (1, 1, 1), (1, 2, 1), (0, 0, 0)),
       [[(1, 2, 3, 4, 3)]]),
    Op("col2im_2d", lambda x: sym.col2im(x, output_size=(5, 6), kernel=(2, 3), stride=(1, 2),
                                         dilate=(2, 1), pad=(1, 1)),
       lambda x: F.fold(x, (5, 6), (2, 3), dilation=(2, 1), padding=(1, 1), stride=(1, 2)),
       [[(2, 18, 15)], [(1, 6, 15)]]),
]

FILL = [
    Op("fill_element_0index", lambda a, m, r: sym.fill_element_0index(a, m, r),
       lambda a, m, r: torch.where(
           r.long()[:, None] == torch.arange(a.shape[1]), m[:, None].expand_as(a), a),
       [[(3, 4), (3,), (3,)], [(5, 1), (5,), (5,)]], inputs=("a", "m", "r"),
       gen={"r": "index:4"}, nograd=("r",)),
]

ROWS = SAMPLERS + CORRELATION + IM2COL + FILL


@pytest.mark.parametrize("op", ROWS, ids=lambda o: o.name)
def test_op(op, cpu_target):
    for shapes in op.shapes:
        check(op, shapes)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_spatial_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_spatial_case_has_arrays():
    assert len(CASES) >= 3
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]


def _forward(s, values, **shapes):
    exe = s.simple_bind(cpu(), grad_req="null", **shapes)
    for k, v in values.items():
        exe.arg_dict[k][:] = torch.as_tensor(v)
    return [torch.as_tensor(o.asnumpy()) for o in exe.forward(is_train=False)]


def test_fill_element_matches_mxnet_ndarray(cpu_target):
    """Off-row indices (-0.5 truncates to 0, 7 is past the row) as mxnet.nd wrote them."""
    f = np.load(os.path.join(replay.FIXTURES, "spatial_fill_element.npz"))
    s = sym.fill_element_0index(sym.Variable("l"), sym.Variable("m"), sym.Variable("r"))
    out = _forward(s, {"l": f["lhs"], "m": f["mhs"], "r": f["rhs"]}, l=f["lhs"].shape,
                   m=f["mhs"].shape, r=f["rhs"].shape)[0]
    np.testing.assert_array_equal(out.numpy(), f["out"])


def test_shapes_and_hidden_outputs():
    d, g = sym.Variable("d"), sym.Variable("g")
    s = sym.BilinearSampler(d, g)
    assert s.list_outputs() == [s.name + "_output"]
    _, outs, _ = s.infer_shape(d=(2, 3, 8, 9), g=(2, 2, 4, 5))
    assert outs == [(2, 3, 4, 5)]
    c = sym.Correlation(d, g, kernel_size=3, max_displacement=4, stride1=2, stride2=2,
                        pad_size=4)
    _, outs, _ = c.infer_shape(d=(1, 5, 10, 11), g=(1, 5, 10, 11))
    assert outs == [(1, 25, 4, 5)]          # as mxnet 1.9.1 infers it
    st = sym.SpatialTransformer(d, g, target_shape=(6, 7), transform_type="affine",
                                sampler_type="bilinear")
    args, outs, _ = st.infer_shape(d=(3, 2, 8, 8), g=(3, 6))
    assert outs == [(3, 2, 6, 7)]
    assert st.infer_shape_partial(d=(3, 2, 8, 8))[0][1] in (None, ())   # as mxnet: loc unknown
    _, outs, _ = sym.col2im(d, output_size=(5, 6), kernel=(2, 3), stride=(1, 2)).infer_shape(
        d=(2, 18, 8))
    assert outs == [(2, 3, 5, 6)]


@pytest.mark.parametrize("build, shapes, match", [
    (lambda d, g: sym.BilinearSampler(d, g), dict(d=(2, 3, 4, 4), g=(2, 3, 4, 4)), "grid"),
    (lambda d, g: sym.Correlation(d, g, max_displacement=5), dict(d=(1, 2, 4, 4),
                                                                  g=(1, 2, 4, 4)), "fit"),
    (lambda d, g: sym.Correlation(d, g), dict(d=(1, 2, 4, 4), g=(1, 2, 4, 5)), "same shape"),
    (lambda d, g: sym.col2im(d, output_size=(4, 4), kernel=(2, 2)) + g,
     dict(d=(1, 8, 8), g=(1, 2, 4, 4)), "output size"),
    (lambda d, g: sym.im2col(d, kernel=(2, 2), stride=(1,)) + g,
     dict(d=(1, 1, 4, 4), g=(1, 4, 9)), "stride"),
])
def test_shape_errors(build, shapes, match):
    with pytest.raises(MXNetError, match=match):
        build(sym.Variable("d"), sym.Variable("g")).simple_bind(cpu(), **shapes)


def test_correlation_even_kernel_refused_at_forward():
    s = sym.Correlation(sym.Variable("a"), sym.Variable("b"), kernel_size=2, pad_size=1)
    with pytest.raises(MXNetError, match="odd"):
        _forward(s, {}, a=(1, 1, 4, 4), b=(1, 1, 4, 4))
