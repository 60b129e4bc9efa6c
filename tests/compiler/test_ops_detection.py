"""mxnet's detection operators (``compiler/ops/detection.py``, ``detection_rpn.py``): extern
launches checked against mxnet 1.9.1's numbers on both cpu targets.

``tests/fixtures/make_detection_fixtures.py`` recorded the cases (``case_detection_*``,
indexed by ``cases_detection_index.json``): forward in training and inference, and the
gradients mxnet gives (box_nms's and ROIAlign's, zeros for the others). Each is replayed
by ``test_mxnet_fixtures.test_mxnet_case``. The gradients that are not zero are also
checked against finite differences here.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler import test_mxnet_fixtures as replay
from tests.compiler.test_ops_compiled import Op, check

with open(os.path.join(replay.FIXTURES, "cases_detection_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


# -- Table rows (``tests/compiler/test_ops_after_views.py`` sweeps them after every view):
# references written as plain loops over the boxes and samples, differentiable in torch.

def _nms_ref(over):
    """Greedy NMS of [id, score, x1, y1, x2, y2] rows (corner, no ids, scores > 0)."""
    def area(r):
        w, h = float(r[4] - r[2]), float(r[5] - r[3])
        return 0.0 if w < 0 or h < 0 else w * h

    def iou(a, b):
        w = max(0.0, float(min(a[4], b[4]) - max(a[2], b[2])))
        h = max(0.0, float(min(a[5], b[5]) - max(a[3], b[3])))
        union = area(a) + area(b) - w * h
        return math.nan if union == 0 else w * h / union      # mxnet's 0/0: no suppression

    def one(x):
        x0 = x.detach()
        order = sorted((i for i in range(len(x0)) if x0[i, 1] > 0), key=lambda i: -float(x0[i, 1]))
        kept = []
        for i in order:
            if all(not iou(x0[k], x0[i]) > over for k in kept):
                kept.append(i)
        rows = [x[i] for i in kept] + [torch.full_like(x[0], -1.0)] * (len(x) - len(kept))
        return torch.stack(rows)

    def f(x):
        flat = x.reshape(-1, *x.shape[-2:])
        return torch.stack([one(b) for b in flat]).reshape(x.shape)
    return f


def _bilinear(fmap, y, x, h, w):
    """mxnet's ROIAlign sample at (y, x) of one channel map, or None off the map."""
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return None
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    y1, x1 = (y0, x0)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    return ((1 - ly) * (1 - lx) * fmap[y0, x0] + (1 - ly) * lx * fmap[y0, x1] +
            ly * (1 - lx) * fmap[y1, x0] + ly * lx * fmap[y1, x1])


def _roi_align_ref(pooled, scale, ratio=-1):
    ph, pw = pooled

    def bin_value(fmap, x1, y1, bw, bh, i, j, gh, gw):
        acc = 0.0
        for iy in range(gh):
            for ix in range(gw):
                v = _bilinear(fmap, y1 + i * bh + (iy + 0.5) * bh / gh,
                              x1 + j * bw + (ix + 0.5) * bw / gw, *fmap.shape)
                acc = acc if v is None else acc + v
        return acc / (gh * gw)

    def f(x, r):
        out = []
        for roi in r.detach():
            b = int(roi[0])
            x1, y1, x2, y2 = (float(v) * scale for v in _roi_coords(roi))
            rw, rh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
            gh = ratio if ratio > 0 else math.ceil(rh / ph)
            gw = ratio if ratio > 0 else math.ceil(rw / pw)
            out.append(torch.stack([torch.stack([torch.stack([
                torch.as_tensor(bin_value(x[b, c], x1, y1, rw / pw, rh / ph, i, j, gh, gw),
                                dtype=x.dtype) for j in range(pw)]) for i in range(ph)])
                for c in range(x.shape[1])]))
        return torch.stack(out)
    return f


def _roi_coords(r):
    """The rows' raw values in [0, 1) made roi corners (as ``_rois`` builds them)."""
    return r[1:5] * 5.3 - 0.4


def _rois(r):
    """Rows [batch, 4 values in (0, 1)] -> [batch, corners in the map's coordinates]."""
    return sym.Concat(sym.slice_axis(r, axis=1, begin=0, end=1),
                      sym.slice_axis(r, axis=1, begin=1, end=5) * 5.3 - 0.4, dim=1)


ROWS = [
    Op("contrib_box_nms", lambda x: sym.contrib.box_nms(x, overlap_thresh=0.2),
       _nms_ref(0.2), [[(7, 6)], [(2, 5, 6)]], gen={"x": "unit"}),
    Op("contrib_ROIAlign", lambda x, r: sym.contrib.ROIAlign(
        x, _rois(r), pooled_size=(2, 2), spatial_scale=0.8),
       lambda x, r: _roi_align_ref((2, 2), 0.8)(x, r), [[(2, 2, 4, 5), (3, 5)]],
       inputs=("x", "r"), nograd=("r",), gen={"r": "unit"}),
    Op("contrib_ROIAlign_ratio", lambda x, r: sym.contrib.ROIAlign(
        x, _rois(r), pooled_size=(3, 2), spatial_scale=1.0, sample_ratio=2),
       lambda x, r: _roi_align_ref((3, 2), 1.0, 2)(x, r), [[(1, 2, 5, 4), (2, 5)]],
       inputs=("x", "r"), nograd=("r",), gen={"r": "unit"}),
]


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
def test_detection_row(op, cpu_target):
    """Forward, gradients, finite differences and inference against the loop references."""
    for shapes in op.shapes:
        exe = check(op, shapes)
    train, _ = exe.programs
    assert any(ln.is_extern for ln in train.launches)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_detection_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_detection_case_has_arrays():
    assert len(CASES) >= 20
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]


def _bind64(s, inputs, grad_req):
    exe = s.simple_bind(cpu(), grad_req=grad_req,
                        type_dict={k: "float64" for k in inputs},
                        **{k: tuple(v.shape) for k, v in inputs.items()})
    for k, v in inputs.items():
        exe.arg_dict[k][:] = v
    return exe


def _finite_differences(s, inputs, wrt, eps=1e-6):
    """The executor's gradient of ``sum(out * w)`` against central differences of its
    own forward (float64): the backward extern checked by the forward one."""
    req = {k: ("write" if k == wrt else "null") for k in inputs}
    exe = _bind64(s, inputs, req)
    out = exe.forward(is_train=True)[0]
    w = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
    exe.backward([w])
    got = exe.grad_dict[wrt].clone()
    probe = _bind64(s, inputs, "null")
    x = inputs[wrt].clone()
    want = torch.zeros_like(x).reshape(-1)
    for i in range(x.numel()):
        vals = []
        for step in (eps, -eps):
            y = x.clone().reshape(-1)
            y[i] += step
            probe.arg_dict[wrt][:] = y.reshape(x.shape)
            vals.append(float((probe.forward(is_train=False)[0] * w).sum()))
        want[i] = (vals[0] - vals[1]) / (2 * eps)
    torch.testing.assert_close(got, want.reshape(x.shape), rtol=1e-5, atol=1e-7)
    return got


@pytest.mark.parametrize("attrs", [
    {"pooled_size": (2, 2), "spatial_scale": 0.5},
    {"pooled_size": (2, 3), "spatial_scale": 1.0, "sample_ratio": 2, "aligned": True},
    {"pooled_size": (2, 2), "spatial_scale": 0.5, "position_sensitive": True},
])
def test_roi_align_gradient_finite_differences(attrs, cpu_target):
    g = torch.Generator().manual_seed(7)
    data = torch.randn(2, 4, 4, 5, generator=g, dtype=torch.float64)
    rois = torch.tensor([[0, 0.3, 1.1, 6.2, 5.7], [1, 2.2, 0.4, 7.9, 3.3],
                         [1, -1.5, -0.5, 3.0, 9.0]], dtype=torch.float64)
    s = sym.contrib.ROIAlign(sym.Variable("data"), sym.Variable("rois"), **attrs)
    got = _finite_differences(s, {"data": data, "rois": rois}, "data")
    assert got.abs().sum() > 0


def test_box_nms_gradient_finite_differences(cpu_target):
    g = torch.Generator().manual_seed(3)
    x = torch.rand(2, 6, 6, generator=g, dtype=torch.float64)
    x[..., 4:] += x[..., 2:4] + 0.2            # x2 > x1, y2 > y1
    x[..., 0] = torch.tensor([0.5, 1.5, 0.5, 1.5, 2.5, 0.5])   # int() keeps the class
    s = sym.contrib.box_nms(sym.Variable("x"), overlap_thresh=0.1, id_index=0, topk=5)
    got = _finite_differences(s, {"x": x}, "x")
    kept = (got != 0).any(-1).sum(-1)
    assert 0 < int(kept.min()) and int(kept.max()) < 6   # some rows suppressed, some kept


def test_box_nms_documented_example(cpu_target):
    """mxnet's docstring example: forward and the gradient that follows the boxes."""
    x = torch.tensor([[0, 0.5, 0.1, 0.1, 0.2, 0.2], [1, 0.4, 0.1, 0.1, 0.2, 0.2],
                      [0, 0.3, 0.1, 0.1, 0.14, 0.14], [2, 0.6, 0.5, 0.5, 0.7, 0.8]])
    s = sym.contrib.box_nms(sym.Variable("x"), overlap_thresh=0.1, coord_start=2,
                            score_index=1, id_index=0, force_suppress=True)
    exe = s.simple_bind(cpu(), x=(4, 6))
    exe.arg_dict["x"][:] = x
    out = exe.forward(is_train=True)[0]
    want = torch.tensor([[2, 0.6, 0.5, 0.5, 0.7, 0.8], [0, 0.5, 0.1, 0.1, 0.2, 0.2]] +
                        [[-1.0] * 6] * 2)
    torch.testing.assert_close(out, want)
    exe.backward([torch.tensor([0.1, 0.2, 0.3, 0.4])[:, None].expand(4, 6).contiguous()])
    gwant = torch.tensor([0.2, 0.0, 0.0, 0.1])[:, None].expand(4, 6)
    torch.testing.assert_close(exe.grad_dict["x"], gwant)


def test_bipartite_documented_example(cpu_target):
    s = sym.contrib.bipartite_matching(sym.Variable("x"), threshold=1e-12, is_ascend=False)
    exe = s.simple_bind(cpu(), x=(3, 2), grad_req="null")
    exe.arg_dict["x"][:] = torch.tensor([[0.5, 0.6], [0.1, 0.2], [0.3, 0.4]])
    rows, cols = exe.forward()
    assert rows.tolist() == [1, -1, 0] and cols.tolist() == [2, 0]


def test_names_aliases_and_hidden_outputs():
    x = sym.Variable("x")
    for f in (sym.contrib.box_nms, sym.contrib.box_non_maximum_suppression):
        outs = f(x).list_outputs()
        assert len(outs) == 1 and outs[0].endswith("_output0")      # output1 is hidden
    p = sym.contrib.Proposal(x, sym.Variable("b"), sym.Variable("i"))
    assert len(p.list_outputs()) == 1
    p2 = sym.contrib.MultiProposal(x, sym.Variable("b"), sym.Variable("i"), output_score=True)
    assert [o.rsplit("_", 1)[1] for o in p2.list_outputs()] == ["output", "score"]
    t = sym.contrib.MultiBoxTarget(x, sym.Variable("l"), sym.Variable("p"))
    assert [o.split("_", 1)[1] for o in t.list_outputs()] == ["loc_target", "loc_mask",
                                                               "cls_target"]
    from compiler.ops.registry import REGISTRY
    for alias, name in (("_npx_multibox_target", "_contrib_MultiBoxTarget"),
                        ("_npx_multibox_detection", "_contrib_MultiBoxDetection")):
        assert REGISTRY[alias] is REGISTRY[name]


@pytest.mark.parametrize("build, shapes, words", [
    (lambda: sym.contrib.box_nms(sym.Variable("x")), {"x": (4,)}, "at least 2"),
    (lambda: sym.contrib.box_nms(sym.Variable("x"), id_index=0), {"x": (3, 5)}, "at least 6"),
    (lambda: sym.contrib.box_nms(sym.Variable("x"), score_index=3), {"x": (3, 6)},
     "conflicts"),
    (lambda: sym.contrib.MultiBoxTarget(sym.Variable("a"), sym.Variable("l"),
                                        sym.Variable("p")),
     {"a": (2, 5, 4), "l": (1, 2, 5), "p": (1, 3, 5)}, "shared across batches"),
    (lambda: sym.contrib.MultiBoxDetection(sym.Variable("c"), sym.Variable("l"),
                                           sym.Variable("a")),
     {"c": (1, 3, 5), "l": (1, 16), "a": (1, 5, 4)}, "disagree"),
    (lambda: sym.contrib.ROIAlign(sym.Variable("d"), sym.Variable("r"), pooled_size=(2, 2),
                                  spatial_scale=1.0), {"d": (1, 3, 4, 4), "r": (2, 4)},
     r"\(num_rois, 5\)"),
    (lambda: sym.contrib.ROIAlign(sym.Variable("d"), sym.Variable("r"), pooled_size=(2, 2),
                                  spatial_scale=1.0, position_sensitive=True),
     {"d": (1, 6, 4, 4), "r": (2, 5)}, "multiple"),
])
def test_shape_errors(build, shapes, words):
    with pytest.raises(MXNetError, match=words):
        build().infer_shape(**shapes)


def test_proposal_shapes_follow_cls_prob():
    p = sym.contrib.MultiProposal(sym.Variable("c"), sym.Variable("b"), sym.Variable("i"),
                                  rpn_post_nms_top_n=7, output_score=True)
    args, outs, _ = p.infer_shape(c=(2, 6, 4, 5))
    assert args == [(2, 6, 4, 5), (2, 12, 4, 5), (2, 3)]
    assert outs == [(14, 5), (14, 1)]


def test_proposal_refuses_a_batch(cpu_target):
    s = sym.contrib.Proposal(sym.Variable("c"), sym.Variable("b"), sym.Variable("i"),
                             scales=(8,), ratios=(1,))
    exe = s.simple_bind(cpu(), c=(2, 2, 3, 3), grad_req="null")
    exe.arg_dict["i"][:] = torch.tensor([[48.0, 48, 1], [48, 48, 1]])
    with pytest.raises(MXNetError, match="one image"):
        exe.forward()


def test_multibox_target_refuses_a_half_padded_label(cpu_target):
    s = sym.contrib.MultiBoxTarget(sym.Variable("a"), sym.Variable("l"), sym.Variable("p"))
    exe = s.simple_bind(cpu(), a=(1, 2, 4), l=(1, 2, 5), p=(1, 3, 2), grad_req="null")
    exe.arg_dict["a"][:] = torch.tensor([[[0.1, 0.1, 0.4, 0.4], [0.5, 0.5, 0.9, 0.9]]])
    exe.arg_dict["l"][:] = torch.tensor([[[1, 0.1, 0.1, 0.4, 0.4], [-1, 0.2, -1, -1, -1]]])
    with pytest.raises(MXNetError, match="padding row must be all -1"):
        exe.forward()
