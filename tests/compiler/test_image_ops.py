"""The deterministic image operators (``compiler/ops/image.py``) against mxnet 1.9.1's
results (``tests/fixtures/make_image_ops_fixtures.py``), imperatively and inside a
graph (after a view, fused with the product after them, as a head), on both cpu
targets; their true gradients against torch autograd of the references."""
import json
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from compiler.frontend.reference import check_gradient

with open(os.path.join(os.path.dirname(__file__), "..", "fixtures", "mxnet_image_ops.json")) as f:
    CASES = json.load(f)


def _values(case):
    shape, n = tuple(case["shape"]), int(np.prod(case["shape"]))
    if case["kind"] == "bytes":
        return ((np.arange(n) * 37 + 3) % 256).reshape(shape).astype(case["dtype"])
    return (np.sin(np.arange(n) * 0.7) * 2.0).reshape(shape).astype(case["dtype"])


def _head(case):
    return 1 + np.arange(int(np.prod(case["out_shape"]))).reshape(case["out_shape"]) / 10.0


def _id(case):
    return f"{case['op']}-{'x'.join(map(str, case['shape']))}-{case['dtype']}"


def _unwritten(case):
    """The index of the row (column) mxnet's flip leaves unwritten, for an odd size."""
    axis = {"flip_top_bottom": 0, "flip_left_right": 1}.get(case["op"])
    if axis is None or case["shape"][axis] % 2 == 0:
        return None
    index = [slice(None)] * len(case["shape"])
    index[axis] = case["shape"][axis] // 2
    return tuple(index)


def _check_out(got, case, scale=1.0):
    want = np.array(case["out"]).reshape(case["out_shape"]) * scale
    assert tuple(got.shape) == tuple(case["out_shape"])
    middle = _unwritten(case)
    if middle is not None:
        # mxnet leaves it as the output buffer held it; a flip keeps the middle in place
        np.testing.assert_array_equal(got[middle], _values(case)[middle] * scale)
        want[middle] = got[middle]
    if case["out_dtype"] == "uint8":
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_imperative_call_matches_mxnet(case, cpu_target):
    x = mx.nd.array(_values(case), dtype=case["dtype"])
    fn = getattr(mx.nd.image, case["op"])
    if "grad" not in case:
        _check_out(fn(x, **case["attrs"]).asnumpy(), case)
        return
    x.attach_grad()
    with mx.autograd.record():
        y = fn(x, **case["attrs"])
    y.backward(mx.nd.array(_head(case)))
    _check_out(y.asnumpy(), case)
    np.testing.assert_allclose(x.grad.asnumpy().ravel(), case["grad"], rtol=1e-6, atol=1e-6)


FLOAT_CASES = [c for c in CASES if c["dtype"] == "float32"]


@pytest.mark.parametrize("case", FLOAT_CASES, ids=_id)
def test_in_a_graph_after_a_view_and_fused(case, cpu_target):
    n = int(np.prod(case["shape"]))
    flat = mx.sym.var("flat")
    img = getattr(mx.sym.image, case["op"])(mx.sym.reshape(flat, shape=tuple(case["shape"])),
                                            **case["attrs"])
    out = mx.sym.Group([img * 1.5, img])
    exe = out.simple_bind(mx.cpu(), flat=(n,))
    exe.arg_dict["flat"][:] = _values(case).ravel()
    exe.forward(is_train=True)
    _check_out(exe.outputs[0].asnumpy(), case, 1.5)
    _check_out(exe.outputs[1].asnumpy(), case)
    if "grad" in case:
        zero = np.zeros(case["out_shape"])
        exe.backward([mx.nd.array(_head(case) / 1.5), mx.nd.array(zero)])
        np.testing.assert_allclose(exe.grad_dict["flat"].asnumpy(), case["grad"], rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("op,shape,attrs", [
    ("_image_flip_left_right", (3, 4, 3), {}),
    ("_image_flip_top_bottom", (4, 2, 1), {}),
    ("_image_to_tensor", (3, 4, 3), {}),
    ("_image_to_tensor", (2, 3, 4, 1), {}),
    ("_image_normalize", (2, 3, 2, 4), {"mean": (0.1, 0.2, 0.3), "std": (0.5, 2.0, 4.0)}),
    ("_image_crop", (2, 5, 4, 3), {"x": 1, "y": 1, "width": 2, "height": 3}),
    ("_image_adjust_lighting", (2, 3, 3), {"alpha": (0.2, 0.1, -0.4)}),
])
def test_gradients_are_the_true_ones(op, shape, attrs):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    ours, auto = check_gradient(op, [x], attrs)
    torch.testing.assert_close(ours[0], auto[0], rtol=1e-5, atol=1e-6)


def test_shape_errors_name_the_operator_and_shape():
    x = mx.sym.var("x")
    with pytest.raises(MXNetError, match=r"normalize: the channel dimension must have 1 "
                                         r"or 3 elements, but got input with shape "
                                         r"\(2, 4, 4\)"):
        mx.sym.image.normalize(x).infer_shape(x=(2, 4, 4))
    with pytest.raises(MXNetError, match=r"invalid std .* either 1 or 3 elements"):
        mx.sym.image.normalize(x, mean=(0.0,), std=(1.0, 2.0)).infer_shape(x=(3, 4, 4))
    # the default mean, (0, 0, 0, 0), fits no 3-channel tensor: mxnet refuses it too
    with pytest.raises(MXNetError, match=r"invalid mean .* but got \(0.0, 0.0, 0.0, 0.0\)"):
        mx.sym.image.normalize(x).infer_shape(x=(3, 4, 4))
    with pytest.raises(MXNetError, match=r"crop: the area x=3, y=0, width=4, height=1 does "
                                         r"not lie inside the image of shape \(2, 5, 3\)"):
        mx.sym.image.crop(x, x=3, y=0, width=4, height=1).infer_shape(x=(2, 5, 3))
    with pytest.raises(MXNetError, match=r"flip_left_right: input image must have shape "
                                         r"\(height, width, channels\), but got \(1, 2, 2, 3\)"):
        mx.sym.image.flip_left_right(x).infer_shape(x=(1, 2, 2, 3))
    with pytest.raises(MXNetError, match=r"adjust_lighting: the last dimension .* \(2, 2, 4\)"):
        mx.nd.image.adjust_lighting(mx.nd.ones((2, 2, 4)), alpha=(0.1, 0.1, 0.1))


def test_a_one_channel_image_keeps_its_lighting():
    x = mx.nd.array(np.arange(6.0).reshape(2, 3, 1))
    np.testing.assert_array_equal(
        mx.nd.image.adjust_lighting(x, alpha=(0.5, 0.5, 0.5)).asnumpy(), x.asnumpy())
