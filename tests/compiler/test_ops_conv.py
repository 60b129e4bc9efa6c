"""Convolution and Deconvolution through the full compile path, on both cpu targets.

Each row of ``CONV`` / ``DECONV`` runs ``tests/compiler/test_ops_compiled.check``:
forward against torch's ``F.conv{1,2,3}d`` / ``F.conv_transpose{1,2,3}d`` in float64,
every gradient (data, weight, bias) against torch autograd, a few entries of each
against central finite differences, and (``interpret``) the same launches as the
``cpu`` target. The rows cover 1-D, 2-D and 3-D kernels, odd sizes, size-1 dims,
stride > 1, dilation, groups, depthwise, padding larger than the kernel, a kernel as
large as the padded input, and Deconvolution's ``adj`` and ``target_shape``.
Shape inference, mxnet's defaults and the errors for bad attributes follow, then the
cases recorded with mxnet 1.9.1 (``tests/fixtures/make_conv_fixtures.py``) replayed.
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
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets

_CONV_T = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_DECONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def _conv_row(name, dshape, **attrs):
    """A Convolution row: weight (num_filter, C/G, *kernel), bias (num_filter,)."""
    nd = len(attrs["kernel"])
    g, f = attrs.get("num_group", 1), attrs["num_filter"]
    bias = not attrs.get("no_bias", False)
    shapes = [dshape, (f, dshape[1] // g) + tuple(attrs["kernel"])] + ([(f,)] if bias else [])
    inputs = ("x", "w", "b") if bias else ("x", "w")

    def build(*v):
        return sym.Convolution(*v, name="conv", **attrs)

    def reference(x, w, b=None):
        return _CONV_T[nd](x, w, b, attrs.get("stride", 1), attrs.get("pad", 0),
                           attrs.get("dilate", 1), g)
    return Op(name, build, reference, [shapes], inputs=inputs, infer=False)


def _deconv_row(name, dshape, torch_kw, **attrs):
    """A Deconvolution row: weight (C, num_filter/G, *kernel); ``torch_kw`` the padding and
    output_padding torch needs for the same output (mxnet's pad/adj/target_shape rule)."""
    nd = len(attrs["kernel"])
    g, f = attrs.get("num_group", 1), attrs["num_filter"]
    bias = not attrs.get("no_bias", True)
    shapes = [dshape, (dshape[1], f // g) + tuple(attrs["kernel"])] + ([(f,)] if bias else [])
    inputs = ("x", "w", "b") if bias else ("x", "w")

    def build(*v):
        return sym.Deconvolution(*v, name="deconv", **attrs)

    def reference(x, w, b=None):
        return _DECONV_T[nd](x, w, b, attrs.get("stride", 1), groups=g,
                             dilation=attrs.get("dilate", 1), **torch_kw)
    return Op(name, build, reference, [shapes], inputs=inputs, infer=False)


CONV = [
    _conv_row("conv2d_stride2_pad", (2, 3, 7, 6), kernel=(3, 3), num_filter=4, pad=(1, 1),
              stride=(2, 2)),
    _conv_row("conv2d_groups_dilate_bigpad", (2, 4, 7, 6), kernel=(3, 2), num_filter=6,
              pad=(4, 3), stride=(2, 3), dilate=(2, 1), num_group=2),
    _conv_row("conv2d_depthwise", (1, 4, 5, 5), kernel=(3, 3), num_filter=4, pad=(1, 1),
              num_group=4, no_bias=True),
    _conv_row("conv2d_depthwise_x2", (2, 3, 6, 5), kernel=(1, 3), num_filter=6, num_group=3,
              stride=(1, 2)),
    _conv_row("conv2d_1x1_stride", (3, 8, 5, 5), kernel=(1, 1), num_filter=3, stride=(2, 2)),
    _conv_row("conv2d_kernel_fills_input", (2, 2, 3, 3), kernel=(5, 5), num_filter=3,
              pad=(1, 1)),
    _conv_row("conv2d_lenet_like", (4, 1, 12, 12), kernel=(5, 5), num_filter=5),
    # 16+ channels that 16-wide blocks pad by half: the cpu target's channels-last
    # forward and weight gradient (compiler/cpu/conv.py: channels_last)
    _conv_row("conv2d_20_to_50_channels_last", (3, 20, 7, 6), kernel=(3, 3), num_filter=50),
    _conv_row("conv2d_17_to_33_stride_pad_dilate", (2, 17, 9, 8), kernel=(3, 2),
              num_filter=33, stride=(2, 1), pad=(1, 2), dilate=(2, 1), no_bias=True),
    # pointwise (1 x 1) convolutions: matrix products on the cpu target (cpu/conv.py:
    # as_matmul); the weight gradient too where the channels in are at most the
    # positions (8 <= 20), oneDNN's beyond (24 > 9)
    _conv_row("conv2d_1x1_bias", (2, 8, 5, 4), kernel=(1, 1), num_filter=6),
    _conv_row("conv2d_1x1_more_channels_than_positions", (3, 24, 3, 3), kernel=(1, 1),
              num_filter=5, no_bias=True, dilate=(2, 2)),
    _conv_row("conv3d_1x1", (2, 3, 2, 3, 2), kernel=(1, 1, 1), num_filter=4),
    _conv_row("conv1d_stride_pad", (2, 3, 9), kernel=(3,), num_filter=5, pad=(2,), stride=(2,)),
    _conv_row("conv1d_k1_batch1", (1, 5, 4), kernel=(1,), num_filter=3, no_bias=True),
    _conv_row("conv1d_dilate_groups", (2, 6, 11), kernel=(3,), num_filter=4, dilate=(3,),
              num_group=2, pad=(1,)),
    _conv_row("conv3d", (2, 2, 5, 4, 6), kernel=(2, 3, 2), num_filter=3, pad=(1, 0, 1),
              stride=(1, 2, 2), dilate=(2, 1, 1)),
    _conv_row("conv3d_groups", (1, 4, 3, 3, 3), kernel=(3, 3, 3), num_filter=2, pad=(1, 1, 1),
              num_group=2, no_bias=True),
]

DECONV = [
    _deconv_row("deconv2d_adj", (2, 3, 4, 5), dict(padding=1, output_padding=1),
                kernel=(3, 3), num_filter=4, pad=(1, 1), stride=(2, 2), adj=(1, 1)),
    _deconv_row("deconv2d_groups_dilate_bias", (2, 4, 3, 4),
                dict(padding=(1, 1), output_padding=(1, 0)), kernel=(3, 2), num_filter=6,
                pad=(1, 1), stride=(2, 3), dilate=(2, 1), adj=(1, 0), num_group=2,
                no_bias=False),
    # target_shape (8, 8) from 4x4 with kernel 4, stride 2: pad 1, adj 0
    _deconv_row("deconv2d_target_shape", (2, 3, 4, 4), dict(padding=1, output_padding=0),
                kernel=(4, 4), num_filter=2, stride=(2, 2), target_shape=(8, 8)),
    # target_shape (6, 7) from 3x3, kernel 3, stride 2: full 7 -> pad (1, 0), adj (1, 0)
    _deconv_row("deconv2d_target_shape_odd", (1, 2, 3, 3),
                dict(padding=(1, 0), output_padding=(1, 0)), kernel=(3, 3), num_filter=3,
                stride=(2, 2), target_shape=(6, 7), no_bias=False),
    _deconv_row("deconv2d_depthwise", (2, 3, 5, 4), dict(padding=2), kernel=(3, 3),
                num_filter=3, num_group=3, pad=(2, 2)),
    _deconv_row("deconv1d_bias", (2, 3, 5), dict(padding=0), kernel=(2,), num_filter=2,
                stride=(3,), no_bias=False),
    _deconv_row("deconv2d_1x1_bias", (2, 4, 3, 5), dict(padding=0), kernel=(1, 1),
                num_filter=3, no_bias=False),
    _deconv_row("deconv3d", (1, 2, 3, 3, 2), dict(padding=(0, 1, 0)), kernel=(2, 3, 2),
                num_filter=3, stride=(1, 2, 1), pad=(0, 1, 0)),
]


EPILOGUE = [
    # the residual block's add reads the convolution's own input in the epilogue
    Op("conv2d_residual_relu",
       lambda x, w, b: sym.Activation(sym.Convolution(x, w, b, kernel=(3, 3), num_filter=3,
                                                      pad=(1, 1), name="conv") + x,
                                      act_type="relu"),
       lambda x, w, b: torch.relu(F.conv2d(x, w, b, 1, 1) + x),
       [[(2, 3, 5, 4), (3, 3, 3, 3), (3,)]], inputs=("x", "w", "b"), infer=False),
    # a 1 x 1 convolution's matrix products (cpu target) with the same epilogue
    Op("conv2d_1x1_residual_relu",
       lambda x, w, b: sym.Activation(sym.Convolution(x, w, b, kernel=(1, 1), num_filter=3,
                                                      name="conv") + x, act_type="relu"),
       lambda x, w, b: torch.relu(F.conv2d(x, w, b) + x),
       [[(2, 3, 5, 4), (3, 3, 1, 1), (3,)]], inputs=("x", "w", "b"), infer=False),
    Op("deconv2d_sigmoid_scale",
       lambda x, w: sym.sigmoid(sym.Deconvolution(x, w, kernel=(2, 2), num_filter=2,
                                                  stride=(2, 2), name="deconv")) * 3.0,
       lambda x, w: torch.sigmoid(F.conv_transpose2d(x, w, None, 2)) * 3.0,
       [[(2, 3, 3, 4), (3, 2, 2, 2)]], inputs=("x", "w"), infer=False),
]


@pytest.mark.parametrize("op", CONV + DECONV + EPILOGUE, ids=lambda op: op.name)
def test_conv_op(op, cpu_target):
    exe = check(op, op.shapes[0])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_conv_is_its_own_kernel_with_bias_epilogue():
    """Forward: one launch computes the convolution and adds the bias; backward: the data
    and weight gradients are one implicit GEMM each, the bias gradient a reduction."""
    from compiler.artifacts.compile import compile_symbol
    net = sym.Convolution(sym.Variable("x"), kernel=(3, 3), num_filter=4, name="c")
    shapes = {"x": (2, 3, 6, 6)}
    req = {"x": "write", "c_weight": "write", "c_bias": "write"}
    prog = compile_symbol(net, shapes, True, req, True, "interpret")
    fwd = [ln.summary for ln in prog.launches if ln.phase == "fwd"]
    bwd = [ln.summary for ln in prog.launches if ln.phase == "bwd"]
    assert len(fwd) == 1 and "convolution forward" in fwd[0], fwd
    assert sum("data gradient" in s for s in bwd) == 1, bwd
    assert sum("weight gradient" in s for s in bwd) == 1, bwd
    assert sum(s.startswith("reduce") for s in bwd) == 1, bwd


# ---------------------------------------------------------------------------------------
# Shape inference, defaults and errors (mxnet 1.9.1's convolution.cc / deconvolution.cc)

def test_conv_infers_weight_and_bias_shapes():
    c = sym.Convolution(sym.Variable("data"), kernel=(3, 5), num_filter=8, num_group=2,
                        stride=(2, 1), pad=(1, 2), name="c")
    assert c.list_arguments() == ["data", "c_weight", "c_bias"]
    args, outs, _ = c.infer_shape(data=(4, 6, 11, 9))
    assert args == [(4, 6, 11, 9), (8, 3, 3, 5), (8,)]
    assert outs == [(4, 8, 6, 9)]        # (11 + 2 - 3) // 2 + 1, (9 + 4 - 5) // 1 + 1
    c1 = sym.Convolution(sym.Variable("data"), kernel=(4,), num_filter=2, dilate=(2,),
                         no_bias=True, name="c1")
    assert c1.list_arguments() == ["data", "c1_weight"]
    assert c1.infer_shape(data=(1, 3, 10))[1] == [(1, 2, 4)]    # 10 - 7 + 1


def test_deconv_defaults_and_shapes():
    d = sym.Deconvolution(sym.Variable("data"), kernel=(3, 3), num_filter=4, stride=(2, 2),
                          pad=(1, 1), adj=(1, 1), name="d")
    assert d.list_arguments() == ["data", "d_weight"]          # no_bias defaults to True
    args, outs, _ = d.infer_shape(data=(2, 6, 5, 7))
    assert args == [(2, 6, 5, 7), (6, 4, 3, 3)]
    assert outs == [(2, 4, 10, 14)]      # 2 * (5 - 1) + 3 - 2 + 1, 2 * 6 + 3 - 2 + 1
    t = sym.Deconvolution(sym.Variable("data"), kernel=(4, 4), num_filter=2, stride=(2, 2),
                          target_shape=(16, 15), no_bias=False, name="t")
    args, outs, _ = t.infer_shape(data=(1, 3, 8, 8))
    assert outs == [(1, 2, 16, 15)] and args[2] == (2,)


def test_attributes_round_trip_through_json():
    c = sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=8, pad=(1, 1),
                        workspace=512, cudnn_tune="fastest", cudnn_off=True, layout="NCHW",
                        name="c")
    back = sym.load_json(c.tojson())
    assert back.infer_shape(data=(1, 2, 5, 5))[1] == [(1, 8, 5, 5)]
    assert back.attr_dict()["c"]["kernel"] == "(3, 3)"


@pytest.mark.parametrize("build,shape,match", [
    (lambda x: sym.Convolution(x, kernel=(3, 3), num_filter=4, layout="NHWC"),
     (1, 5, 5, 3), "layout=NHWC is not supported"),
    (lambda x: sym.Convolution(x, kernel=(3, 3), num_filter=4, stride=(1,)),
     (1, 3, 5, 5), "stride=.* must have as many dims as kernel"),
    (lambda x: sym.Convolution(x, kernel=(3, 3), num_filter=4, num_group=2),
     (1, 3, 5, 5), "3 channels are not divisible by num_group=2"),
    (lambda x: sym.Convolution(x, kernel=(3, 3), num_filter=3, num_group=2),
     (1, 4, 5, 5), "num_filter=3 is not divisible by num_group=2"),
    (lambda x: sym.Convolution(x, kernel=(7, 3), num_filter=4, pad=(1, 0)),
     (1, 3, 4, 5), "kernel size exceeds input"),
    (lambda x: sym.Convolution(x, kernel=(3, 3), num_filter=4),
     (1, 3, 5), "must be 4-D"),
    (lambda x: sym.Convolution(x, kernel=(1, 1, 1, 1), num_filter=4),
     (1, 3, 5, 5, 5, 5), "1-D, 2-D and 3-D"),
    (lambda x: sym.Deconvolution(x, kernel=(3, 3), num_filter=4, stride=(2, 2), adj=(2, 0)),
     (1, 3, 5, 5), "adj=.* must be smaller than stride"),
    (lambda x: sym.Deconvolution(x, kernel=(3, 3), num_filter=4, target_shape=(20, 20)),
     (1, 3, 5, 5), "target_shape=.* is too big"),
])
def test_bad_attributes_are_clear_errors(build, shape, match):
    net = build(sym.Variable("data"))
    with pytest.raises(MXNetError, match=match):
        net.infer_shape(data=shape)


def test_bad_attribute_values_are_rejected_when_parsed():
    with pytest.raises(MXNetError, match="num_filter"):
        sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=0)
    with pytest.raises(MXNetError, match="cudnn_tune"):
        sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=2, cudnn_tune="slow")
    with pytest.raises(MXNetError, match="kernel"):
        sym.Convolution(sym.Variable("data"), num_filter=2)


def test_reference_matches_torch_for_internal_gradient_ops():
    """The gradient ops' own torch references (the op-by-op oracle) against autograd."""
    from compiler.ops import get_op
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 7, 5, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 2, 3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    y = F.conv2d(x, w, None, (2, 1), (2, 1), (1, 2), 2)
    dy = torch.randn(y.shape, generator=g, dtype=torch.float64)
    dx, dw = torch.autograd.grad((y * dy).sum(), [x, w])
    geo = {"kernel": (3, 2), "stride": (2, 1), "pad": (2, 1), "dilate": (1, 2), "num_group": 2}
    got_dx = get_op("_conv_data_grad").reference(dict(geo, data_shape=x.shape), [dy, w], True)
    got_dw = get_op("_conv_weight_grad").reference(dict(geo, weight_shape=w.shape), [x, dy], True)
    torch.testing.assert_close(got_dx[0], dx)
    torch.testing.assert_close(got_dw[0], dw)


# ---------------------------------------------------------------------------------------
# Numbers made by mxnet 1.9.1 (tests/fixtures/make_conv_fixtures.py), replayed

_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(_FIXTURES, "conv_cases.json")) as _f:
    _MX_CASES = json.load(_f)["cases"]


@pytest.fixture(scope="module")
def mx_arrays():
    with np.load(os.path.join(_FIXTURES, "conv_cases.npz")) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("name", sorted(_MX_CASES))
def test_mxnet_fixture(name, mx_arrays, cpu_target):
    """mxnet's symbol JSON loads; outputs and every gradient equal mxnet's."""
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
        np.testing.assert_allclose(out.asnumpy(), mx_arrays[f"{name}/out{i}"], rtol=1e-4,
                                   atol=1e-5, err_msg=f"{name} output {i}")
    exe.backward([torch.from_numpy(mx_arrays[f"{name}/head_grad{i}"]) for i in range(len(outs))])
    for arg in case["arguments"]:
        np.testing.assert_allclose(exe.grad_dict[arg].asnumpy(), mx_arrays[f"{name}/grad_{arg}"],
                                   rtol=1e-4, atol=1e-5, err_msg=f"{name} d/d{arg}")
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# ---------------------------------------------------------------------------------------
# Epilogues: bias, inference BatchNorm and activations fuse into the convolution's kernel

def _conv_bn_net():
    y = sym.Convolution(sym.Variable("data"), kernel=(3, 3), num_filter=4, pad=(1, 1),
                        name="c1")
    y = sym.BatchNorm(y, fix_gamma=False, name="bn")
    y = sym.Activation(y, act_type="relu")
    y = sym.Convolution(y, kernel=(3, 2), num_filter=3, stride=(2, 1), num_group=1, name="c2")
    return sym.Activation(y, act_type="tanh")


def _conv_bn_torch(v, aux, train):
    y = F.conv2d(v["data"], v["c1_weight"], v["c1_bias"], 1, 1)
    y = F.batch_norm(y, aux["bn_moving_mean"], aux["bn_moving_var"], v["bn_gamma"],
                     v["bn_beta"], training=train, eps=1e-3)
    y = F.conv2d(torch.relu(y), v["c2_weight"], v["c2_bias"], (2, 1))
    return torch.tanh(y)


def test_epilogue_fusion_launches():
    """Inference: each convolution is one launch with its bias, BatchNorm's scale and
    shift and its activation (BatchNorm's per-channel scale/shift computed first)."""
    from compiler.artifacts.compile import compile_symbol
    net = _conv_bn_net()
    prog = compile_symbol(net, {"data": (2, 3, 6, 5)}, False, {}, False, "interpret")
    convs = [sorted(ops) for ops in prog.groups if "Convolution" in ops]
    assert convs == [["Activation", "Convolution", "broadcast_add", "broadcast_mul"],
                     ["Activation", "Convolution"]], prog.groups
    assert len(prog.launches) == 3


@pytest.mark.parametrize("train", [False, True])
def test_epilogue_fusion_values(train, cpu_target):
    net = _conv_bn_net()
    exe = net.simple_bind(cpu(), grad_req="write", data=(2, 3, 6, 5))
    g = torch.Generator().manual_seed(11)
    vals = {n: torch.randn(a.shape, generator=g, dtype=torch.float64)
            for n, a in exe.arg_dict.items()}
    aux = {"bn_moving_mean": torch.randn(4, generator=g, dtype=torch.float64) * 0.1,
           "bn_moving_var": torch.rand(4, generator=g, dtype=torch.float64) + 0.5}
    for n, v in vals.items():
        exe.arg_dict[n][:] = v
    for n, v in aux.items():
        exe.aux_dict[n][:] = v
    out = exe.forward(is_train=train)[0]
    xs = {n: v.clone().requires_grad_() for n, v in vals.items()}
    want = _conv_bn_torch(xs, {n: v.clone() for n, v in aux.items()}, train)
    torch.testing.assert_close(torch.as_tensor(out).double(), want.detach(), rtol=1e-4,
                               atol=1e-5)
    if train:
        dy = torch.randn(want.shape, generator=g, dtype=torch.float64)
        exe.backward([dy.float()])
        grads = torch.autograd.grad((want * dy).sum(), list(xs.values()))
        for n, gr in zip(xs, grads):
            torch.testing.assert_close(exe.grad_dict[n].double(), gr, rtol=1e-4, atol=1e-4,
                                       msg=lambda m, n=n: f"d/d{n}: {m}")
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


@pytest.mark.parametrize("k", [3, 1])
def test_strided_and_reversed_operands(cpu_target, k):
    """A convolution reading a channel slice through a reversed view, its output also
    stored as a head and read by two consumers (a 1 x 1 one: matrix products on the
    cpu target, reading the view through a copy)."""
    x = sym.Variable("x")
    r = sym.reverse(sym.slice_axis(x, axis=1, begin=1, end=4), axis=3)
    c = sym.Convolution(r, kernel=(k, k), num_filter=2, pad=(k // 2, k // 2), name="c")
    net = sym.Group([c, c * 2.0, sym.transpose(c, axes=(0, 1, 3, 2))])

    def reference(x, w, b):
        y = F.conv2d(x[:, 1:4].flip(3), w, b, 1, k // 2)
        return [y, y * 2, y.transpose(2, 3)]
    op = Op("conv_views", lambda x, w, b: net, reference, [[(2, 5, 6, 5), (2, 3, k, k), (2,)]],
            inputs=("x", "c_weight", "c_bias"), infer=False)
    exe = check(op, op.shapes[0])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# ---------------------------------------------------------------------------------------
# The kernels a GPU runs, with a GPU's tiles (many row tiles, K in steps of 8, partial
# tiles at every edge), in the interpreter: the same numbers as with its whole tiles

def _gpu_tile_net():
    x = sym.Variable("data")
    y = sym.Convolution(x, kernel=(3, 3), num_filter=20, num_group=2, pad=(2, 1),
                        stride=(2, 1), dilate=(2, 1), name="c1")
    y = sym.Activation(y, act_type="relu")
    y = sym.Deconvolution(y, kernel=(3, 2), num_filter=6, stride=(2, 2), pad=(1, 0),
                          adj=(1, 1), no_bias=False, name="d1")
    z = sym.Convolution(sym.Variable("seq"), kernel=(4,), num_filter=17, pad=(2,), name="c1d")
    return sym.MakeLoss(sym.sum(y * y) + sym.sum(sym.tanh(z))), \
        {"data": (3, 6, 11, 9), "seq": (5, 3, 21)}


@pytest.mark.parametrize("target", ["cuda:90", "cuda:80"])
def test_gpu_tiles_give_the_interpreters_results(target, monkeypatch):
    from tests.compiler.test_gpu_tiles import _bind, _step, _with_gpu_tiles
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "interpret")
    net, shapes = _gpu_tile_net()
    outs, grads = _step(_bind(net, shapes))
    exe = _bind(net, shapes)
    configs = _with_gpu_tiles(exe, target)
    convs = [c for kind, n, c in configs if c["BK"] == 8 and c["grid"][0] > 1]
    assert len(convs) >= 4, configs        # the implicit GEMMs now loop over several tiles
    outs_gpu, grads_gpu = _step(exe)
    for a, b in zip(outs, outs_gpu):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    for name in grads:      # summation order differs: errors relative to the largest value
        scale = float(np.abs(grads[name]).max())
        np.testing.assert_allclose(grads_gpu[name], grads[name], rtol=1e-4, atol=1e-6 * scale,
                                   err_msg=name)


def test_cpu_convolution_channels_last_choice():
    """cpu target: forward, weight and data gradient in channels-last where 16-wide
    blocks would pad the channels by half (20 -> 50: 32 x 64 for 1,000), not below 16
    channels, not for little padding, never for 3-D."""
    from compiler.artifacts import cache
    from compiler.cpu.conv import channels_last
    from compiler.artifacts.compile import compile_symbol

    def problem(mode, ci, co, kernel=(3, 3), groups=1):
        return {"mode": mode, "x": (2, ci, 8, 8), "y": (2, co, 6, 6), "kernel": kernel,
                "groups": groups}
    assert channels_last(problem("conv_fwd", 20, 50))
    assert channels_last(problem("conv_wgrad", 20, 50))
    assert channels_last(problem("conv_dgrad", 20, 50))
    assert not channels_last(problem("conv_dgrad", 40, 100))       # 48 x 112 for 4,000
    assert not channels_last(problem("conv_fwd", 12, 50))          # below 16
    assert not channels_last(problem("conv_fwd", 30, 30))          # 32 x 32 for 900
    assert not channels_last(problem("conv_fwd", 64, 64))
    assert not channels_last(problem("conv_fwd", 20, 50, kernel=(3, 3, 3)))
    assert not channels_last(problem("conv_fwd", 20, 50, groups=2))
    net = sym.Convolution(sym.Variable("x"), kernel=(3, 3), num_filter=50, name="c")
    prog = compile_symbol(net, {"x": (2, 20, 8, 8)}, True,
                          {"x": "write", "c_weight": "write", "c_bias": "write"}, True, "cpu")
    uses = {}
    for ln in prog.launches:
        if "convolution" in ln.summary:
            with open(cache.kernel_path(ln.kernel)) as f:
                what = ln.summary.split(": ", 1)[1].split(",")[0]
                uses[what] = "channels_last" in f.read()
    assert uses == {"implicit-GEMM 2-D convolution forward": True,
                    "implicit-GEMM 2-D convolution weight gradient": True,
                    "implicit-GEMM 2-D convolution data gradient / transposed": True}, uses


@pytest.mark.parametrize("ci,co,act,kw", [
    (1, 4, "tanh", {}), (20, 50, "tanh", {}), (3, 4, "sigmoid", {}),
    (4, 8, "tanh", {"num_group": 2, "stride": (2, 1), "pad": (1, 2), "dilate": (2, 1)})])
def test_cpu_convolution_then_tanh_is_one_onednn_call(ci, co, act, kw):
    """cpu target, float32: a forward convolution whose group ends in tanh (the
    pre-activation not kept: tanh's gradient reads only its output) is one
    ``mkldnn._convolution_pointwise`` call with tanh as oneDNN's post-op, also on the
    channels-last copies; other activations keep ATen's calls. Outputs and gradients
    agree with float64 torch."""
    from compiler.artifacts import cache
    from compiler.cpu.conv import pointwise_available
    if not pointwise_available():
        pytest.skip("this torch has no mkldnn._convolution_pointwise")
    from runtime.context import cpu
    net = sym.Activation(sym.Convolution(sym.Variable("x"), kernel=(3, 3), num_filter=co,
                                         name="c", **kw), act_type=act)
    shape = (3, ci, 9, 8)
    exe = net.simple_bind(cpu(), x=shape)
    g = torch.Generator().manual_seed(0)
    vals = {"x": torch.randn(shape, generator=g) * 2,
            "c_weight": torch.randn((co, ci // kw.get("num_group", 1), 3, 3), generator=g) * 0.5,
            "c_bias": torch.randn((co,), generator=g) * 0.1}
    for n, v in vals.items():
        exe.arg_dict[n][:] = v
    dy = torch.randn(exe.outputs[0].shape, generator=g)
    out = exe.forward(is_train=True)[0].as_subclass(torch.Tensor).clone()
    exe.backward(dy)
    v64 = {n: v.double().requires_grad_() for n, v in vals.items()}
    fn = torch.tanh if act == "tanh" else torch.sigmoid
    want = fn(torch.nn.functional.conv2d(
        v64["x"], v64["c_weight"], v64["c_bias"], stride=kw.get("stride", 1),
        padding=kw.get("pad", 0), dilation=kw.get("dilate", 1), groups=kw.get("num_group", 1)))
    want.backward(dy.double())
    # float32 sums of 180 products: errors relative to the operands, as ATen's
    torch.testing.assert_close(out.double(), want.detach(), rtol=1e-4, atol=5e-5)
    for n in vals:
        torch.testing.assert_close(exe.grad_dict[n].as_subclass(torch.Tensor).double(),
                                   v64[n].grad, rtol=1e-4, atol=1e-4)
    src = [open(cache.kernel_path(ln.kernel)).read() for p in exe.programs for ln in p.launches
           if "convolution forward" in ln.summary]
    assert src                              # training and inference programs
    for text in src:
        assert ("_convolution_pointwise" in text) == (act == "tanh"), text
        if act == "tanh":
            assert "torch.tanh" not in text and "tanh_()" not in text, text


def test_cpu_pointwise_convolution_is_matrix_products():
    """cpu target: a 1 x 1 convolution of stride 1, no padding and one group runs as
    matrix products (forward and data gradient; the weight gradient where the channels
    in are at most the positions), every other convolution as ATen's."""
    from compiler.artifacts import cache
    from compiler.artifacts.compile import compile_symbol
    from compiler.cpu.conv import as_matmul

    def problem(mode, c=8, x=(4, 5), y=(4, 5), kernel=(1, 1), stride=(1, 1), pad=(0, 0),
                groups=1):
        return {"mode": mode, "x": (2, c) + x, "y": (2, 6) + y, "kernel": kernel,
                "stride": stride, "pad": pad, "groups": groups}
    for mode in ("conv_fwd", "conv_dgrad", "conv_wgrad"):
        assert as_matmul(problem(mode))
        assert not as_matmul(problem(mode, kernel=(1, 3)))
        assert not as_matmul(problem(mode, stride=(2, 1), y=(2, 5)))
        assert not as_matmul(problem(mode, pad=(0, 1), y=(4, 7)))
        assert not as_matmul(problem(mode, groups=2))
        assert not as_matmul(problem(mode, x=(5, 5)))       # a transposed one's adj
    assert as_matmul(problem("conv_fwd", c=21)) and as_matmul(problem("conv_dgrad", c=21))
    assert not as_matmul(problem("conv_wgrad", c=21))        # 21 channels, 20 positions

    def sources(c):
        net = sym.Convolution(sym.Variable("x"), kernel=(1, 1), num_filter=6, name="c")
        prog = compile_symbol(net, {"x": (2, c, 4, 5)}, True,
                              {"x": "write", "c_weight": "write", "c_bias": "write"}, True,
                              "cpu")
        found = {}
        for ln in prog.launches:
            if "convolution" in ln.summary:
                with open(cache.kernel_path(ln.kernel)) as f:
                    found[ln.summary.split(": ", 1)[1].split(",")[0]] = f.read()
        return found
    for c, wgrad_as_matmul in ((8, True), (24, False)):
        found = sources(c)
        assert len(found) == 3, found
        for what, text in found.items():
            products = "torch.matmul" in text or "torch.bmm" in text
            aten = "convolution_out" in text or "convolution_backward" in text
            assert products != aten, text
            assert products == ("weight gradient" not in what or wgrad_as_matmul), (c, what)
