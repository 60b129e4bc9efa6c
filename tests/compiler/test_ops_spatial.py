"""Pad, Crop and UpSampling through the full compile path, on both cpu targets.

Each row runs ``tests/compiler/test_ops_compiled.check``: forward against torch
(``F.pad`` with constant / replicate / reflect, slicing, ``F.interpolate`` nearest,
``F.conv_transpose2d`` for bilinear UpSampling) in float64, every gradient against torch
autograd, a few entries against central finite differences, and (``interpret``) the same
launches as the ``cpu`` target. Then mxnet's shape rules, its errors, the bilinear
initializer mxnet sets on UpSampling's second input, and values checked against numbers
mxnet 1.9.1 printed.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets


def _pad_row(name, dshape, mode, pad_width, value=0.0):
    pads = [v for a in reversed(range(2, len(dshape))) for v in pad_width[2 * a:2 * a + 2]]
    tmode = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}[mode]

    def reference(x):
        if tmode == "constant":
            return F.pad(x, pads, value=value)
        return F.pad(x, pads, mode=tmode)
    return Op(name, lambda x: sym.Pad(x, mode=mode, pad_width=pad_width, constant_value=value),
              reference, [[dshape]], infer=False)


PAD = [
    _pad_row("pad_constant_2d", (2, 3, 4, 5), "constant", (0, 0, 0, 0, 1, 2, 3, 0), 1.5),
    _pad_row("pad_edge_2d", (2, 2, 3, 4), "edge", (0, 0, 0, 0, 2, 1, 1, 3)),
    _pad_row("pad_reflect_2d", (1, 2, 4, 5), "reflect", (0, 0, 0, 0, 3, 1, 2, 4)),
    _pad_row("pad_reflect_one_axis", (2, 1, 3, 4), "reflect", (0, 0, 0, 0, 2, 2, 0, 0)),
    _pad_row("pad_constant_3d", (1, 2, 2, 3, 2), "constant", (0, 0, 0, 0, 1, 0, 0, 2, 1, 1)),
    _pad_row("pad_edge_3d", (1, 2, 2, 3, 2), "edge", (0, 0, 0, 0, 1, 1, 2, 0, 0, 1)),
    _pad_row("pad_reflect_3d", (1, 1, 3, 3, 4), "reflect", (0, 0, 0, 0, 1, 2, 2, 1, 1, 3)),
]


def _crop_row(name, shapes, reference, **attrs):
    inputs = ("x", "like")[:len(shapes)]
    return Op(name, lambda *v: sym.Crop(*v, **attrs), reference, [shapes], inputs=inputs,
              infer=False)


CROP = [
    _crop_row("crop_hw_offset", [(2, 3, 5, 6)], lambda x: x[:, :, 1:3, 2:5],
              h_w=(2, 3), offset=(1, 2)),
    _crop_row("crop_hw_center", [(2, 3, 5, 6)], lambda x: x[:, :, 1:3, 1:4],
              h_w=(2, 3), center_crop=True),
    _crop_row("crop_like_center", [(2, 2, 7, 6), (1, 5, 4, 3)],
              lambda x, like: x[:, :, 1:5, 1:4], center_crop=True),
    _crop_row("crop_like_offset", [(1, 2, 5, 6), (3, 1, 3, 3)],
              lambda x, like: x[:, :, 2:5, 1:4], offset=(2, 1)),
]


def _nearest(x, s):
    return x.repeat_interleave(s, 2).repeat_interleave(s, 3)


UPSAMPLING = [
    Op("up_nearest_x2", lambda x: sym.UpSampling(x, scale=2, sample_type="nearest"),
       lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), [[(2, 3, 3, 4)]],
       infer=False),
    Op("up_nearest_x3_odd", lambda x: sym.UpSampling(x, scale=3, sample_type="nearest"),
       lambda x: _nearest(x, 3), [[(1, 2, 3, 1)]], infer=False),
    Op("up_nearest_concat", lambda a, b: sym.UpSampling(a, b, scale=2, sample_type="nearest"),
       lambda a, b: torch.cat([_nearest(a, 2), _nearest(b, 1)], 1),
       [[(2, 2, 2, 3), (2, 3, 4, 6)]], inputs=("a", "b"), infer=False),
    Op("up_nearest_sum", lambda a, b: sym.UpSampling(a, b, scale=4, sample_type="nearest",
                                                     multi_input_mode="sum"),
       lambda a, b: _nearest(a, 4) + _nearest(b, 2), [[(1, 2, 2, 2), (1, 2, 4, 4)]],
       inputs=("a", "b"), infer=False),
]


def _bilinear_row():
    def reference(x, w):
        return F.conv_transpose2d(x, w, None, 2, 1, groups=3)
    return Op("up_bilinear_x2", lambda x, w: sym.UpSampling(x, w, scale=2, num_filter=3,
                                                            sample_type="bilinear"),
              reference, [[(2, 3, 3, 4), (3, 1, 4, 4)]], inputs=("x", "w"), infer=False)


@pytest.mark.parametrize("op", PAD + CROP + UPSAMPLING + [_bilinear_row()],
                         ids=lambda op: op.name)
def test_spatial_op(op, cpu_target):
    exe = check(op, op.shapes[0])
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_crop_like_gets_a_zero_gradient():
    """mxnet's Crop writes zeros into crop_like's gradient (only its shape is read)."""
    s = sym.Crop(sym.Variable("a"), sym.Variable("b"), offset=(1, 1))
    exe = s.simple_bind(cpu(), a=(1, 1, 4, 4), b=(1, 1, 2, 2))
    exe.arg_dict["a"][:] = torch.ones(1, 1, 4, 4)
    exe.arg_dict["b"][:] = torch.ones(1, 1, 2, 2)
    exe.grad_dict["b"][:] = torch.full((1, 1, 2, 2), 7.0)
    exe.forward(is_train=True)
    exe.backward([torch.ones(1, 1, 2, 2)])
    want = np.zeros((4, 4))
    want[1:3, 1:3] = 1
    assert np.array_equal(exe.grad_dict["a"].asnumpy()[0, 0], want)
    assert not exe.grad_dict["b"].asnumpy().any()


def test_values_mxnet_printed():
    """Numbers from mxnet 1.9.1: reflect padding 2 of a 3-row image, UpSampling sum."""
    x = np.arange(2 * 1 * 3 * 4, dtype=np.float32).reshape(2, 1, 3, 4)
    exe = sym.Pad(sym.Variable("x"), mode="reflect", pad_width=(0, 0, 0, 0, 2, 2, 0, 0)) \
        .simple_bind(cpu(), x=x.shape)
    exe.arg_dict["x"][:] = x
    got = exe.forward()[0].asnumpy()[0, 0]
    assert got[:, 0].tolist() == [8., 4., 0., 4., 8., 4., 0.]
    a = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    s = sym.UpSampling(sym.Variable("a"), sym.Variable("b"), scale=2, sample_type="nearest",
                       multi_input_mode="sum")
    exe = s.simple_bind(cpu(), a=(1, 2, 2, 3), b=(1, 2, 4, 6))
    exe.arg_dict["a"][:] = a
    exe.arg_dict["b"][:] = np.ones((1, 2, 4, 6), np.float32)
    got = exe.forward()[0].asnumpy()[0, 0]
    assert got.tolist() == [[1, 1, 2, 2, 3, 3], [1, 1, 2, 2, 3, 3],
                            [4, 4, 5, 5, 6, 6], [4, 4, 5, 5, 6, 6]]


def test_shapes_and_mxnet_argument_names():
    s = sym.UpSampling(sym.Variable("a"), scale=2, sample_type="bilinear", num_filter=3)
    assert s.list_arguments() == ["a", "upsampling0_weight"] or \
        s.list_arguments()[1].endswith("_weight")
    args, out, _ = s.infer_shape(a=(1, 3, 4, 4))
    assert [tuple(a) for a in args] == [(1, 3, 4, 4), (3, 1, 4, 4)]
    assert tuple(out[0]) == (1, 3, 8, 8)
    u = sym.UpSampling(sym.Variable("a"), sym.Variable("b"), scale=2, sample_type="nearest")
    assert u.attr_dict()["b"]["__init__"] == '["bilinear", {}]'
    _, out, _ = u.infer_shape(a=(1, 2, 2, 3), b=(1, 1, 4, 6))
    assert tuple(out[0]) == (1, 3, 4, 6)
    c = sym.Crop(sym.Variable("a"), sym.Variable("b"))
    assert c.list_arguments() == ["a", "b"]
    assert c.attr_dict()[c.name]["num_args"] == "2"
    _, out, _ = sym.Pad(sym.Variable("x"), mode="edge",
                        pad_width=(0, 0, 0, 0, 1, 2, 3, 4)).infer_shape(x=(2, 3, 4, 5))
    assert tuple(out[0]) == (2, 3, 7, 12)


@pytest.mark.parametrize("build, shapes, words", [
    (lambda: sym.Pad(sym.Variable("x"), mode="constant", pad_width=(0, 0, 0, 0, 1, 1)),
     {"x": (2, 3, 4)}, "4-D or 5-D"),
    (lambda: sym.Pad(sym.Variable("x"), mode="constant", pad_width=(0, 0, 1, 0, 0, 0, 0, 0)),
     {"x": (2, 3, 4, 4)}, "first two axes"),
    (lambda: sym.Pad(sym.Variable("x"), mode="reflect", pad_width=(0, 0, 0, 0, 3, 0, 0, 0)),
     {"x": (2, 3, 3, 4)}, "smaller than"),
    (lambda: sym.Crop(sym.Variable("x"), h_w=(2, 3), offset=(4, 2)), {"x": (1, 1, 5, 6)},
     "offset"),
    (lambda: sym.Crop(sym.Variable("x")), {"x": (1, 1, 5, 6)}, "at least 1"),
    (lambda: sym.UpSampling(sym.Variable("a"), sym.Variable("b"), scale=2,
                            sample_type="nearest"), {"a": (1, 1, 2, 2), "b": (1, 1, 3, 3)},
     "does not divide"),
    (lambda: sym.UpSampling(sym.Variable("a"), sym.Variable("b"), scale=2, sample_type="nearest",
                            multi_input_mode="sum"), {"a": (1, 1, 2, 2), "b": (1, 2, 4, 4)},
     "same number of"),
])
def test_bad_shapes_are_named(build, shapes, words):
    with pytest.raises(MXNetError, match=words):
        build().infer_shape(**shapes)
