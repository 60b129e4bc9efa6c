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



def _deform_ref(data, offset, weight, bias=None, mask=None, *, kernel, stride=(1, 1),
                dilate=(1, 1), pad=(0, 0), groups=1, dg=1, snap=True):
    """Deformable convolution through ``F.grid_sample`` per kernel point. ``snap``:
    mxnet's CPU sampling (0 <= y < H, the last row / column clamped); otherwise the
    modulated kernel's (-1 < y < H, corners off the map read zero)."""
    n, c, h, w = data.shape
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = kernel, stride, dilate, pad
    ho = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wo = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    off = offset.reshape(n, dg, kh * kw, 2, ho, wo)
    cols = []
    for i in range(kh):
        for j in range(kw):
            k = i * kw + j
            y = (torch.arange(ho, dtype=data.dtype) * sh - ph + i * dh)[:, None] + off[:, :, k, 0]
            x = (torch.arange(wo, dtype=data.dtype) * sw - pw + j * dw) + off[:, :, k, 1]
            if snap:
                ok = (y >= 0) & (x >= 0) & (y < h) & (x < w)
                y, x = y.clamp(max=h - 1), x.clamp(max=w - 1)
            else:
                ok = (y > -1) & (x > -1) & (y < h) & (x < w)
            grid = torch.stack([x / (w - 1) * 2 - 1, y / (h - 1) * 2 - 1], -1)
            v = F.grid_sample(data.reshape(n * dg, c // dg, h, w), grid.reshape(n * dg, ho, wo, 2),
                              align_corners=True, padding_mode="zeros")
            v = v.reshape(n, dg, c // dg, ho, wo) * ok[:, :, None]
            if mask is not None:
                v = v * mask.reshape(n, dg, kh * kw, ho, wo)[:, :, k, None]
            cols.append(v.reshape(n, c, ho, wo))
    col = torch.stack(cols, 2).reshape(n, groups, -1, ho * wo)
    f = weight.shape[0]
    out = torch.einsum("gfk,ngkl->ngfl", weight.reshape(groups, f // groups, -1), col)
    out = out.reshape(n, f, ho, wo)
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


DEFORMABLE = [
    Op("deformable_conv", lambda d, o, w, b: sym.contrib.DeformableConvolution(
        d, o, w, b, kernel=(3, 3), pad=(1, 1), num_filter=4),
       lambda d, o, w, b: _deform_ref(d, o, w, b, kernel=(3, 3), pad=(1, 1)),
       [[(2, 3, 5, 6), (2, 18, 5, 6), (4, 3, 3, 3), (4,)]], inputs=("d", "o", "w", "b")),
    Op("deformable_conv_groups", lambda d, o, w: sym.contrib.DeformableConvolution(
        d, o, w, kernel=(2, 3), stride=(2, 1), dilate=(1, 2), num_filter=4, num_group=2,
        num_deformable_group=2, no_bias=True),
       lambda d, o, w: _deform_ref(d, o, w, kernel=(2, 3), stride=(2, 1), dilate=(1, 2),
                                   groups=2, dg=2),
       [[(1, 4, 6, 7), (1, 24, 3, 3), (4, 2, 2, 3)]], inputs=("d", "o", "w")),
    Op("modulated_deformable_conv", lambda d, o, m, w, b:
       sym.contrib.ModulatedDeformableConvolution(d, o, m, w, b, kernel=(3, 3), pad=(1, 1),
                                                  num_filter=3),
       lambda d, o, m, w, b: _deform_ref(d, o, w, b, m, kernel=(3, 3), pad=(1, 1), snap=False),
       [[(2, 2, 4, 5), (2, 18, 4, 5), (2, 9, 4, 5), (3, 2, 3, 3), (3,)]],
       inputs=("d", "o", "m", "w", "b"), gen={"m": "unit"}),
    Op("modulated_deformable_conv_dg", lambda d, o, m, w:
       sym.contrib.ModulatedDeformableConvolution(d, o, m, w, kernel=(2, 2), stride=(2, 2),
                                                  num_filter=2, num_deformable_group=2,
                                                  no_bias=True),
       lambda d, o, m, w: _deform_ref(d, o, w, None, m, kernel=(2, 2), stride=(2, 2), dg=2,
                                      snap=False),
       [[(1, 4, 6, 5), (1, 16, 3, 2), (1, 8, 3, 2), (2, 4, 2, 2)]],
       inputs=("d", "o", "m", "w"), gen={"m": "unit"}),
]

ROWS = SAMPLERS + CORRELATION + IM2COL + FILL + DEFORMABLE


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


# -- the extern backward entries against finite differences (float64, ATen directly) ------

def _rois(n_rois, batch, size, gen):
    xy = torch.rand(n_rois, 2, generator=gen, dtype=torch.float64) * (size - 3) + 1
    wh = torch.rand(n_rois, 2, generator=gen, dtype=torch.float64) * size / 2 + 1.5
    b = torch.randint(0, batch, (n_rois, 1), generator=gen).double()
    return torch.cat([b, xy, torch.minimum(xy + wh, torch.tensor(size - 1.0))], 1)


def _vjp_cases(gen):
    r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    return [
        ("_contrib_PSROIPooling", dict(spatial_scale="0.5", output_dim="2", pooled_size="3"),
         [r(2, 18, 7, 8), _rois(3, 2, 14, gen)], [0]),
        ("_contrib_DeformablePSROIPooling",
         dict(spatial_scale="0.5", output_dim="2", group_size="3", pooled_size="3",
              sample_per_part="2", trans_std="0.1"),
         [r(2, 18, 7, 8), _rois(3, 2, 14, gen), r(3, 4, 3, 3)], [0, 2]),
        ("_contrib_DeformableConvolution", dict(kernel="(3, 3)", pad="(1, 1)", num_filter="2"),
         [r(1, 2, 4, 5), r(1, 18, 4, 5), r(2, 2, 3, 3), r(2)], [0, 1, 2, 3]),
        ("Correlation", dict(kernel_size="3", max_displacement="1", pad_size="1",
                             is_multiply="False"), [r(1, 2, 4, 5), r(1, 2, 4, 5)], [0, 1]),
        ("SpatialTransformer", dict(target_shape="(3, 4)", transform_type="affine",
                                    sampler_type="bilinear"),
         [r(1, 2, 4, 5), torch.tensor([[1.1, 0.1, 0.05, -0.1, 0.9, 0.1]],
                                      dtype=torch.float64)], [0, 1]),
    ]


@pytest.mark.parametrize("case", range(5))
def test_extern_gradients_vs_finite_differences(case):
    """``_backward_<op>`` (autograd replay of the forward) against central differences of
    the forward's ``sum(out * ograd)``, a few entries of every input that takes one."""
    from compiler.ops.registry import get_op
    gen = torch.Generator().manual_seed(11 + case)
    name, raw, ins, wrt = _vjp_cases(gen)[case]
    fwd, bwd = get_op(name), get_op(f"_backward_{name}")
    attrs = fwd.parse_attrs(raw)
    out = fwd.lowering.run(attrs, ins)[0]
    og = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    grads = bwd.lowering.run(bwd.parse_attrs(raw), [og] + ins)
    eps = 1e-6
    for k in wrt:
        for flat in torch.randint(0, ins[k].numel(), (4,), generator=gen).tolist():
            vals = []
            for sign in (1, -1):
                moved = [x.clone() for x in ins]
                moved[k].view(-1)[flat] += sign * eps
                vals.append((fwd.lowering.run(attrs, moved)[0] * og).sum().item())
            fd = (vals[0] - vals[1]) / (2 * eps)
            assert abs(grads[k].reshape(-1)[flat].item() - fd) < 1e-5 * max(1, abs(fd)), \
                (name, k, flat, grads[k].reshape(-1)[flat].item(), fd)
    for k in set(range(len(ins))) - set(wrt):
        assert not grads[k].any(), f"{name}: input {k} takes no gradient"


# -- the deformable family's shapes and errors -------------------------------------------

def test_deformable_shapes_fill_weights():
    d, o = sym.Variable("d"), sym.Variable("o")
    s = sym.contrib.DeformableConvolution(d, o, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                          num_filter=6, num_group=2, name="dc")
    assert s.list_arguments() == ["d", "o", "dc_weight", "dc_bias"]
    args, outs, _ = s.infer_shape(d=(2, 4, 7, 8), o=(2, 18, 4, 4))
    assert args == [(2, 4, 7, 8), (2, 18, 4, 4), (6, 2, 3, 3), (6,)] and outs == [(2, 6, 4, 4)]
    m = sym.contrib.ModulatedDeformableConvolution(d, o, sym.Variable("m"), kernel=(1, 1),
                                                   num_filter=2, no_bias=True, name="mc")
    assert m.list_arguments() == ["d", "o", "m", "mc_weight"]
    ps = sym.contrib.DeformablePSROIPooling(d, o, spatial_scale=0.5, output_dim=2,
                                            group_size=2, pooled_size=2, no_trans=True)
    assert ps.list_arguments() == ["d", "o"]
    _, outs, _ = ps.infer_shape(d=(1, 8, 5, 5), o=(3, 5))
    assert outs == [(3, 2, 2, 2)]
    _, outs, _ = sym.contrib.RROIAlign(d, o, pooled_size=(2, 3), spatial_scale=1.0).infer_shape(
        d=(1, 4, 5, 5), o=(7, 6))
    assert outs == [(7, 4, 2, 3)]


@pytest.mark.parametrize("build, shapes, match", [
    (lambda d, o: sym.contrib.DeformableConvolution(d, o, kernel=(3, 3), num_filter=2),
     dict(d=(1, 2, 5, 5), o=(1, 18, 5, 5)), "offset"),
    (lambda d, o: sym.contrib.DeformableConvolution(d, o, kernel=(3, 3), num_filter=2,
                                                    num_deformable_group=2),
     dict(d=(1, 3, 5, 5), o=(1, 36, 3, 3)), "divide"),
    (lambda d, o: sym.contrib.PSROIPooling(d, o, spatial_scale=1.0, output_dim=2,
                                           pooled_size=2), dict(d=(1, 8, 5, 5), o=(2, 4)),
     "rois"),
    (lambda d, o: sym.contrib.RROIAlign(d, o, pooled_size=(2, 2), spatial_scale=1.0),
     dict(d=(1, 8, 5, 5), o=(2, 5)), "rois"),
])
def test_deformable_shape_errors(build, shapes, match):
    with pytest.raises(MXNetError, match=match):
        build(sym.Variable("d"), sym.Variable("o")).simple_bind(cpu(), grad_req="null",
                                                                **shapes)


def test_rroi_align_has_no_gradient():
    """mxnet 1.9.1 registers no FGradient for RROIAlign: binding for training fails."""
    s = sym.contrib.RROIAlign(sym.Variable("d"), sym.Variable("r"), pooled_size=(2, 2),
                              spatial_scale=1.0)
    with pytest.raises(MXNetError, match="gradient"):
        s.simple_bind(cpu(), grad_req={"d": "write", "r": "null"}, d=(1, 2, 4, 4), r=(1, 6))
