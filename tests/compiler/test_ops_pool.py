"""Pooling through the full compile path, on both cpu targets.

Each row runs ``tests/compiler/test_ops_compiled.check``: forward against torch's
``F.max_pool{1,2,3}d`` / ``F.avg_pool{1,2,3}d`` / ``F.lp_pool2d`` (or, where mxnet's rule
is not one of torch's, those applied to explicitly padded data) in float64, the data
gradient against torch autograd, a few entries against central finite differences, and
(``interpret``) the same launches as the ``cpu`` target. Rows cover 1-D, 2-D and 3-D,
odd sizes, stride > 1, padding (larger than half the kernel too), the valid, full and
same conventions, count_include_pad, global pooling, Lp pooling and data read through
strides. Then: ties in a window send the gradient to the first maximum (mxnet's
``unpool``), mxnet's output-shape rule, the errors for bad attributes, the cases recorded
with mxnet 1.9.1 (``tests/fixtures/make_pool_fixtures.py``: every pool type and
convention, Pad, Crop, UpSampling, ROIPooling) replayed, ROIPooling against mxnet's loops
transcribed, a LeNet chain against torch, and the hidden max mask written only for a
gradient.
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets

_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _row(name, dshape, reference, **attrs):
    def build(x):
        return sym.Pooling(x, name="pool", **attrs)
    return Op(name, build, reference, [[dshape]], infer=False)


def _padded(x, pad, fill, right=None):
    """``x`` padded by ``pad`` before (and ``right`` or ``pad`` after) each spatial dim."""
    right = pad if right is None else right
    pads = [v for i in reversed(range(len(pad))) for v in (pad[i], right[i])]
    return F.pad(x, pads, value=fill)


def _signed_cube_root(s):
    return s.sign() * s.abs().pow(1.0 / 3.0)


def _sum_pool(x, k, s):
    """Window sums: an average over whole windows times the window size."""
    return _AVG[len(k)](x, k, s) * float(np.prod(k))


ROWS = [
    _row("max2d_k2s2_odd", (2, 3, 6, 7), lambda x: F.max_pool2d(x, 2, 2),
         kernel=(2, 2), stride=(2, 2)),
    _row("max2d_k3s2_pad", (2, 3, 7, 6), lambda x: F.max_pool2d(x, 3, 2, 1),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    _row("max2d_overlap_s1", (1, 2, 5, 5), lambda x: F.max_pool2d(x, 3, 1, 1),
         kernel=(3, 3), pad=(1, 1)),
    _row("max2d_full", (2, 2, 8, 7), lambda x: F.max_pool2d(x, (3, 2), 2, (1, 0), ceil_mode=True),
         kernel=(3, 2), stride=(2, 2), pad=(1, 0), pooling_convention="full"),
    _row("max2d_lenet", (2, 3, 8, 8), lambda x: F.max_pool2d(x, 2, 2),
         kernel=(2, 2), stride=(2, 2), pool_type="max"),
    _row("avg2d_pad_include", (2, 3, 7, 6), lambda x: F.avg_pool2d(x, 3, 2, 1),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"),
    _row("avg2d_pad_exclude", (2, 3, 7, 6),
         lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", count_include_pad=False),
    _row("avg2d_full", (2, 3, 8, 6), lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", pooling_convention="full"),
    _row("avg2d_full_exclude", (1, 2, 8, 6),
         lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", pooling_convention="full",
         count_include_pad=False),
    # pad 2 > kernel / 2: torch refuses it, mxnet pads; valid windows lie inside the pad
    _row("avg2d_bigpad", (1, 2, 5, 4), lambda x: F.avg_pool2d(_padded(x, (2, 2), 0.0), 3, 2),
         kernel=(3, 3), stride=(2, 2), pad=(2, 2), pool_type="avg"),
    _row("sum2d_stride_pad", (2, 2, 7, 5),
         lambda x: _sum_pool(_padded(x, (1, 2), 0.0), (2, 3), (2, 2)),
         kernel=(2, 3), stride=(2, 2), pad=(1, 2), pool_type="sum"),
    _row("max1d_k3s2_pad", (2, 3, 9), lambda x: F.max_pool1d(x, 3, 2, 1),
         kernel=(3,), stride=(2,), pad=(1,)),
    _row("avg1d_full", (2, 3, 7), lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True),
         kernel=(3,), stride=(2,), pad=(1,), pool_type="avg", pooling_convention="full"),
    # same: ceil(7 / 2) = 4 windows starting at 0, 2, 4, 6; the last one runs past the data
    _row("sum1d_same", (2, 3, 7),
         lambda x: _sum_pool(_padded(x, (0,), 0.0, right=(2,)), (3,), (2,)),
         kernel=(3,), stride=(2,), pool_type="sum", pooling_convention="same"),
    _row("max1d_same", (2, 3, 8),
         lambda x: F.max_pool1d(_padded(x, (0,), float("-inf"), right=(1,)), 3, 2),
         kernel=(3,), stride=(2,), pool_type="max", pooling_convention="same"),
    _row("max3d_stride_pad", (1, 2, 4, 5, 5), lambda x: F.max_pool3d(x, 2, (2, 1, 2), 1),
         kernel=(2, 2, 2), stride=(2, 1, 2), pad=(1, 1, 1)),
    _row("avg3d_full", (1, 2, 5, 4, 5),
         lambda x: F.avg_pool3d(x, 2, (2, 1, 2), ceil_mode=True),
         kernel=(2, 2, 2), stride=(2, 1, 2), pool_type="avg", pooling_convention="full"),
    _row("global_max", (2, 3, 5, 4), lambda x: x.amax((2, 3), keepdim=True),
         pool_type="max", global_pool=True),
    _row("global_avg_ignores_kernel", (2, 3, 5, 4), lambda x: x.mean((2, 3), keepdim=True),
         kernel=(2, 2), stride=(2, 2), pad=(1, 1), pool_type="avg", global_pool=True),
    _row("global_sum_1d", (2, 3, 6), lambda x: x.sum(2, keepdim=True),
         kernel=(1,), pool_type="sum", global_pool=True),
    _row("lp2_2d", (2, 3, 5, 4), lambda x: F.lp_pool2d(x, 2, 2, 1),
         kernel=(2, 2), pool_type="lp", p_value=2),
    _row("lp1_1d", (2, 3, 5), lambda x: _sum_pool(x, (2,), (1,)),
         kernel=(2,), pool_type="lp", p_value=1),
    # 8 channels or more: the cpu target pools through ATen's channels-last kernel
    _row("max2d_k2s2_8ch", (2, 8, 6, 7), lambda x: F.max_pool2d(x, 2, 2),
         kernel=(2, 2), stride=(2, 2)),
    _row("max2d_k3s2_pad_9ch", (2, 9, 7, 6), lambda x: F.max_pool2d(x, 3, 2, 1),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
    _row("max2d_full_12ch", (1, 12, 8, 7),
         lambda x: F.max_pool2d(x, (3, 2), 2, (1, 0), ceil_mode=True),
         kernel=(3, 2), stride=(2, 2), pad=(1, 0), pooling_convention="full"),
    _row("max1d_k3s2_pad_8ch", (2, 8, 9), lambda x: F.max_pool1d(x, 3, 2, 1),
         kernel=(3,), stride=(2,), pad=(1,)),
    # avg, sum and lp pooling of 8 channels or more: channels-last forward and backward
    # (the other conventions: _WIDE below, the rows above at more channels)
    _row("avg2d_k3s1_pad_8ch", (2, 8, 6, 5), lambda x: F.avg_pool2d(x, 3, 1, 1),
         kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg"),
    _row("avg2d_nopad_8ch", (2, 8, 6, 6), lambda x: F.avg_pool2d(x, 2, 2),
         kernel=(2, 2), stride=(2, 2), pool_type="avg"),
    # mxnet's p = 3 keeps the sign of a window's sum of cubes (torch's lp_pool2d gives nan)
    _row("lp3_2d_8ch", (2, 8, 4, 4), lambda x: _signed_cube_root(_sum_pool(x.pow(3), (2, 2),
                                                                          (2, 2))),
         kernel=(2, 2), stride=(2, 2), pool_type="lp", p_value=3),
    # the data read through strides: a transposed slice of the input
    Op("max2d_strided_view",
       lambda x: sym.Pooling(sym.slice_axis(sym.transpose(x, axes=(0, 1, 3, 2)), axis=3,
                                            begin=1, end=6),
                             kernel=(2, 2), stride=(2, 1), pad=(1, 0)),
       lambda x: F.max_pool2d(x.transpose(2, 3)[..., 1:6], 2, (2, 1), (1, 0)),
       [[(2, 3, 7, 8)]], infer=False),
    # the channels-last path reads its data through strides too: 8 channels, avg
    Op("avg2d_strided_view_8ch",
       lambda x: sym.Pooling(sym.slice_axis(sym.transpose(x, axes=(0, 1, 3, 2)), axis=3,
                                            begin=1, end=6),
                             kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg"),
       lambda x: F.avg_pool2d(x.transpose(2, 3)[..., 1:6], 3, 1, 1),
       [[(2, 8, 7, 8)]], infer=False),
]


def _wide(op, dshape):
    """Row ``op`` on data of shape ``dshape``, 8 channels or more: the cpu target's
    channels-last pooling."""
    return dataclasses.replace(op, name=f"{op.name}_{dshape[1]}ch", shapes=[[dshape]])


_WIDE = {"avg2d_pad_exclude": (2, 10, 7, 6), "avg2d_full": (1, 9, 8, 6),
         "avg2d_bigpad": (1, 8, 5, 4), "sum2d_stride_pad": (2, 8, 7, 5),
         "lp2_2d": (2, 8, 5, 4), "avg1d_full": (2, 8, 7)}
ROWS += [_wide(op, _WIDE[op.name]) for op in ROWS if op.name in _WIDE]


@pytest.mark.parametrize("op", ROWS, ids=lambda op: op.name)
def test_pool_op(op, cpu_target):
    exe = check(op, op.shapes[0])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def _grad_of_ones(attrs, x):
    exe = sym.Pooling(sym.Variable("x"), **attrs).simple_bind(cpu(), x=tuple(x.shape))
    exe.arg_dict["x"][:] = x
    y = exe.forward(is_train=True)[0]
    exe.backward([torch.ones(tuple(y.shape))])
    return torch.as_tensor(np.asarray(exe.grad_dict["x"].asnumpy()))


def test_max_gradient_goes_to_the_first_maximum(cpu_target):
    """Two (or more) equal maxima in a window: mxnet's unpool gives the whole gradient to
    the first in row-major order, not a share to each (torch's amax would split it)."""
    x = torch.tensor([[[[1., 1., 0., 2.],
                        [0., 1., 2., 2.]]]])
    got = _grad_of_ones({"kernel": (2, 2), "stride": (2, 2)}, x)
    assert got.tolist() == [[[[1., 0., 0., 1.], [0., 0., 0., 0.]]]]
    # overlapping windows (3x3, stride 1, pad 1) over a constant image: each window's
    # first in-bounds position takes its gradient
    x = torch.full((1, 1, 3, 3), 5.0)
    got = _grad_of_ones({"kernel": (3, 3), "pad": (1, 1)}, x)
    want = torch.zeros(3, 3)
    for oh in range(3):
        for ow in range(3):
            want[max(oh - 1, 0), max(ow - 1, 0)] += 1
    assert torch.equal(got[0, 0], want)
    # 1-D and 3-D: ties along the last axis
    got = _grad_of_ones({"kernel": (3,), "stride": (3,)},
                        torch.tensor([[[4., 4., 4., 1., 7., 7.]]]))
    assert got.tolist() == [[[1., 0., 0., 0., 1., 0.]]]
    got = _grad_of_ones({"kernel": (2, 2, 2), "stride": (2, 2, 2)}, torch.ones(1, 1, 2, 2, 2))
    assert got.reshape(-1).tolist() == [1.] + [0.] * 7
    # many channels (the cpu target's channels-last pooling): the same rule per channel,
    # saturated values (tanh's 1.0) tied in every window
    x = torch.ones(2, 16, 4, 6)
    x[:, :, 1, 5] = 3.0
    got = _grad_of_ones({"kernel": (2, 2), "stride": (2, 2)}, x)
    want = torch.zeros(4, 6)
    want[0, 0] = want[0, 2] = want[2, 0] = want[2, 2] = want[2, 4] = want[1, 5] = 1.0
    assert torch.equal(got, want.expand(2, 16, 4, 6))


@pytest.mark.parametrize("attrs, dshape, oshape", [
    ({"kernel": (3, 3), "stride": (2, 2)}, (1, 1, 8, 8), (1, 1, 3, 3)),
    ({"kernel": (3, 3), "stride": (2, 2), "pooling_convention": "full"}, (1, 1, 8, 8),
     (1, 1, 4, 4)),
    ({"kernel": (2, 2), "stride": (3, 3), "pad": (1, 1)}, (2, 4, 7, 5), (2, 4, 3, 2)),
    ({"kernel": (2, 2), "stride": (3, 3), "pad": (1, 1), "pooling_convention": "full"},
     (2, 4, 7, 5), (2, 4, 4, 3)),
    ({"kernel": (3,), "stride": (2,), "pooling_convention": "same"}, (1, 2, 7), (1, 2, 4)),
    ({"kernel": (2, 3, 2), "global_pool": True}, (1, 2, 3, 4, 5), (1, 2, 1, 1, 1)),
    ({"global_pool": True, "pool_type": "avg"}, (3, 2, 6), (3, 2, 1)),
])
def test_output_shape_is_mxnets(attrs, dshape, oshape):
    """valid: floor((x + 2p - k) / s) + 1; full: its ceiling; same: ceil(x / s)."""
    _, out, _ = sym.Pooling(sym.Variable("x"), **attrs).infer_shape(x=dshape)
    assert tuple(out[0]) == oshape


@pytest.mark.parametrize("attrs, dshape, words", [
    ({"kernel": (5, 5)}, (1, 1, 3, 3), "exceeds input"),
    ({"kernel": (3, 3)}, (1, 1, 5), "must be 4-D"),
    ({"kernel": (2, 2), "pooling_convention": "same"}, (1, 1, 5, 5), "1-D pooling only"),
    ({"kernel": (2,), "pad": (1,), "pooling_convention": "same"}, (1, 1, 5), "disables pad"),
    ({"kernel": (2, 2), "pool_type": "lp"}, (1, 1, 5, 5), "p_value"),
    ({"kernel": (2, 2), "layout": "NHWC"}, (1, 5, 5, 1), "NHWC is not supported"),
    ({"kernel": (2, 2), "stride": (1,)}, (1, 1, 5, 5), "stride"),
    ({}, (1, 1, 5, 5), "kernel is required"),
])
def test_bad_attributes_are_named(attrs, dshape, words):
    with pytest.raises(MXNetError, match=words):
        sym.Pooling(sym.Variable("x"), name="p1", **attrs).infer_shape(x=dshape)


def test_unknown_pool_type_is_refused():
    with pytest.raises(MXNetError, match="pool_type"):
        sym.Pooling(sym.Variable("x"), kernel=(2, 2), pool_type="median")


def test_mxnet_defaults_and_json_round_trip():
    """Attributes stay mxnet's strings; defaults (max, valid, stride 1, pad 0) apply."""
    p = sym.Pooling(sym.Variable("x"), kernel=(2, 2), cudnn_off=True, name="pool")
    back = sym.load_json(p.tojson())
    assert back.attr_dict()["pool"]["kernel"] == "(2, 2)"
    _, out, _ = back.infer_shape(x=(1, 1, 5, 5))
    assert tuple(out[0]) == (1, 1, 4, 4)


# ---------------------------------------------------------------------------------------
# Numbers made by mxnet 1.9.1 (tests/fixtures/make_pool_fixtures.py), replayed: every
# pool type and convention, Pad, Crop and UpSampling; outputs and data gradients

_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(_FIXTURES, "pool_cases.json")) as _f:
    _MX_CASES = json.load(_f)["cases"]


@pytest.fixture(scope="module")
def mx_arrays():
    with np.load(os.path.join(_FIXTURES, "pool_cases.npz")) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("name", sorted(_MX_CASES))
def test_mxnet_fixture(name, mx_arrays, cpu_target):
    """mxnet's symbol JSON loads; the output and every gradient equal mxnet's (with ties,
    the max gradient lands where mxnet put it)."""
    case = _MX_CASES[name]
    net = sym.load_json(case["symbol"])
    assert net.list_arguments() == case["arguments"]
    shapes = {k: tuple(v) for k, v in case["input_shapes"].items()}
    exe = net.simple_bind(cpu(), grad_req="write", **shapes)
    for arg in case["arguments"]:
        exe.arg_dict[arg][:] = torch.from_numpy(mx_arrays[f"{name}/in_{arg}"])
    outs = exe.forward(is_train=True)
    assert len(outs) == case["num_outputs"]
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), mx_arrays[f"{name}/out{i}"], rtol=1e-5,
                                   atol=1e-6, err_msg=f"{name} output {i}")
    exe.backward([torch.from_numpy(mx_arrays[f"{name}/head_grad{i}"]) for i in range(len(outs))])
    for arg in case["arguments"]:
        np.testing.assert_allclose(exe.grad_dict[arg].asnumpy(), mx_arrays[f"{name}/grad_{arg}"],
                                   rtol=1e-5, atol=1e-6, err_msg=f"{name} d/d{arg}")
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# ---------------------------------------------------------------------------------------
# ROIPooling

def _roi_oracle(data, rois, pooled, scale):
    """mxnet's ROIPoolForward transcribed loop by loop (C round, float32 bins, strict >
    from -FLT_MAX, empty bins 0), in float64 values with autograd."""
    ph_n, pw_n = pooled
    height, width = data.shape[2:]
    out = []
    for roi in rois.tolist():
        f = [np.float32(v) * np.float32(scale) for v in roi[1:]]
        sw, sh, ew, eh = [int(np.sign(v) * np.floor(abs(v) + np.float32(0.5))) for v in f]
        bh = np.float32(max(eh - sh + 1, 1)) / np.float32(ph_n)
        bw = np.float32(max(ew - sw + 1, 1)) / np.float32(pw_n)
        rows = []
        for ph in range(ph_n):
            for pw in range(pw_n):
                hs = min(max(int(np.floor(np.float32(ph) * bh)) + sh, 0), height)
                he = min(max(int(np.ceil(np.float32(ph + 1) * bh)) + sh, 0), height)
                ws = min(max(int(np.floor(np.float32(pw) * bw)) + sw, 0), width)
                we = min(max(int(np.ceil(np.float32(pw + 1) * bw)) + sw, 0), width)
                img = data[int(roi[0])]
                if he <= hs or we <= ws:
                    rows.append(img[:, 0, 0] * 0)
                    continue
                best = [None] * data.shape[1]
                for c in range(data.shape[1]):
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if best[c] is None or img[c, h, w] > best[c]:
                                best[c] = img[c, h, w]
                rows.append(torch.stack(best))
        out.append(torch.stack(rows, 1).reshape(data.shape[1], ph_n, pw_n))
    return torch.stack(out)


_ROIS = [[0, 1.2, 0.4, 6.6, 5.1], [1, 3, 2, 3, 2], [1, -2, -3, 12, 20], [0, 8.4, 1, 2, 6.5],
         [1, 20, 20, 30, 30]]


def _roi_exe(dshape, rois, pooled, scale):
    s = sym.ROIPooling(sym.Variable("data"), sym.Variable("rois"), pooled_size=pooled,
                       spatial_scale=scale)
    exe = s.simple_bind(cpu(), grad_req={"data": "write", "rois": "write"}, data=dshape,
                        rois=(len(rois), 5))
    exe.arg_dict["rois"][:] = torch.tensor(rois)
    return exe


def test_roi_pooling_mxnet_docstring_example(cpu_target):
    exe = _roi_exe((1, 1, 8, 6), [[0, 0, 0, 4, 4]], (2, 2), 1.0)
    exe.arg_dict["data"][:] = torch.arange(48.0).reshape(1, 1, 8, 6)
    assert exe.forward()[0].asnumpy().tolist() == [[[[14., 16.], [26., 28.]]]]
    exe = _roi_exe((1, 1, 8, 6), [[0, 0, 0, 4, 4]], (2, 2), 0.7)
    exe.arg_dict["data"][:] = torch.arange(48.0).reshape(1, 1, 8, 6)
    assert exe.forward()[0].asnumpy().tolist() == [[[[7., 9.], [19., 21.]]]]


@pytest.mark.parametrize("dshape, pooled, scale", [((2, 3, 7, 9), (3, 2), 0.9),
                                                   ((2, 1, 5, 4), (2, 3), 0.5)])
def test_roi_pooling_forward_and_gradients(dshape, pooled, scale, cpu_target):
    """Forward and data gradient against the transcribed loops (autograd gives the
    maximum its gradient), finite differences on a few entries, zero rois gradient."""
    gen = torch.Generator().manual_seed(7)
    data = torch.randn(dshape, generator=gen)
    exe = _roi_exe(dshape, _ROIS, pooled, scale)
    exe.arg_dict["data"][:] = data
    out = torch.as_tensor(exe.forward(is_train=True)[0].asnumpy())
    xd = data.double().requires_grad_(True)
    want = _roi_oracle(xd, torch.tensor(_ROIS), pooled, scale)
    assert torch.allclose(out.double(), want, atol=1e-6), (out, want)
    dy = torch.randn(tuple(want.shape), generator=gen)
    exe.backward([dy])
    (dx,) = torch.autograd.grad((want * dy.double()).sum(), xd)
    got = torch.as_tensor(exe.grad_dict["data"].asnumpy()).double()
    assert torch.allclose(got, dx, atol=1e-5)
    assert not exe.grad_dict["rois"].asnumpy().any()
    flat = data.double().reshape(-1)
    for j in torch.randperm(flat.numel(), generator=gen)[:6].tolist():
        vals = []
        for sign in (1, -1):
            pert = flat.clone()
            pert[j] += sign * 1e-4
            vals.append(float((_roi_oracle(pert.reshape(dshape), torch.tensor(_ROIS), pooled,
                                           scale) * dy.double()).sum()))
        fd = (vals[0] - vals[1]) / 2e-4
        assert abs(float(got.reshape(-1)[j]) - fd) <= 1e-4 + 1e-3 * abs(fd)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_roi_pooling_shapes_and_errors():
    s = sym.ROIPooling(sym.Variable("data"), sym.Variable("rois"), pooled_size=(7, 7),
                       spatial_scale=0.0625)
    assert s.list_outputs() == [s.name + "_output"]
    _, out, _ = s.infer_shape(data=(2, 16, 38, 50), rois=(128, 5))
    assert tuple(out[0]) == (128, 16, 7, 7)
    with pytest.raises(MXNetError, match=r"\(num_rois, 5\)"):
        s.infer_shape(data=(2, 16, 38, 50), rois=(128, 4))
    with pytest.raises(MXNetError, match="pooled_size"):
        sym.ROIPooling(sym.Variable("data"), sym.Variable("rois"), pooled_size=(7,),
                       spatial_scale=1.0)


# ---------------------------------------------------------------------------------------
# In a network: LeNet's convolution -> tanh -> max-pool -> fully connected chain

def test_lenet_chain_matches_torch(cpu_target):
    """Pooling between a convolution's kernel and a FullyConnected: outputs and every
    gradient equal torch's, and each pooling is one launch forward and one backward."""
    x = sym.Variable("data")
    y = sym.Pooling(sym.Activation(sym.Convolution(x, kernel=(3, 3), num_filter=4, name="c1"),
                                   act_type="tanh"), kernel=(2, 2), stride=(2, 2),
                    pool_type="max")
    y = sym.Pooling(y, kernel=(2, 2), stride=(1, 1), pool_type="avg", pad=(1, 1))
    y = sym.FullyConnected(sym.Flatten(y), num_hidden=3, name="fc")
    shapes = {"data": (2, 1, 9, 9)}
    exe = y.simple_bind(cpu(), grad_req="write", **shapes)
    gen = torch.Generator().manual_seed(3)
    vals = {n: torch.randn(tuple(a.shape), generator=gen) for n, a in exe.arg_dict.items()}
    for n, v in vals.items():
        exe.arg_dict[n][:] = v
    out = torch.as_tensor(exe.forward(is_train=True)[0].asnumpy())
    t = {n: v.double().requires_grad_(True) for n, v in vals.items()}
    h = torch.tanh(F.conv2d(t["data"], t["c1_weight"], t["c1_bias"]))
    h = F.avg_pool2d(F.max_pool2d(h, 2, 2), 2, 1, 1)
    want = F.linear(h.flatten(1), t["fc_weight"], t["fc_bias"])
    assert torch.allclose(out.double(), want, atol=1e-5)
    dy = torch.randn(tuple(want.shape), generator=gen)
    exe.backward([dy])
    grads = torch.autograd.grad((want * dy.double()).sum(), list(t.values()))
    for n, g in zip(t, grads):
        got = torch.as_tensor(exe.grad_dict[n].asnumpy()).double()
        assert torch.allclose(got, g, atol=1e-5), n
    train, _ = exe.programs
    pools = [ln.phase for ln in train.launches if "pooling" in ln.summary]
    assert sorted(pools) == ["bwd", "bwd", "fwd", "fwd"], pools


def test_max_mask_is_written_only_for_a_gradient(cpu_target):
    """Training: the forward also writes where each maximum is and the gradient reads
    that, not the data; inference: the forward writes the output alone."""
    from compiler.artifacts.compile import compile_symbol
    net = sym.Pooling(sym.Variable("x"), kernel=(2, 2), stride=(2, 2))
    train = compile_symbol(net, {"x": (2, 3, 6, 6)}, True, {"x": "write"}, True, cpu_target)
    infer = compile_symbol(net, {"x": (2, 3, 6, 6)}, False, {}, False, cpu_target)
    fwd = [ln for ln in train.launches if "pooling forward" in ln.summary]
    bwd = [ln for ln in train.launches if "pooling data gradient" in ln.summary]
    assert len(fwd) == 1 and len(bwd) == 1
    assert len(fwd[0].args) == 3 and len(bwd[0].args) == 3     # x, y, mask / dy, mask, dx
    (only,) = [ln for ln in infer.launches if "pooling" in ln.summary]
    assert len(only.args) == 2


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_cpu_pooling_of_many_channels_runs_channels_last(pool_type):
    """cpu target: 2-D pooling of 8 channels or more copies into a channels-last tensor
    for ATen's vectorised kernels (3-5x faster there); fewer stay in NCHW. Max
    pooling's backward stays NCHW (faster there), avg pooling's goes channels-last."""
    from compiler.artifacts import cache
    from compiler.artifacts.compile import compile_symbol
    net = sym.Pooling(sym.Variable("x"), kernel=(3, 3), stride=(1, 1), pad=(1, 1),
                      pool_type=pool_type)
    for channels, want in ((8, True), (3, False)):
        prog = compile_symbol(net, {"x": (2, channels, 6, 6)}, True, {"x": "write"}, True,
                              "cpu")
        for phase, want_here in (("forward", want),
                                 ("data gradient", want and pool_type == "avg")):
            (ln,) = [ln for ln in prog.launches if f"pooling {phase}" in ln.summary]
            with open(cache.kernel_path(ln.kernel)) as f:
                assert ("channels_last" in f.read()) == want_here, (channels, phase)
