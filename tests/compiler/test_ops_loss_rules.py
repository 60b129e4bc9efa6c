"""Rules of softmax, log_softmax and the loss heads (compiler/ops/loss.py).

Loss heads' gradients are mxnet's loss gradients, not derivatives of their
forward outputs: they are checked against the mxnet formula written out here
and against mxnet 1.9.1 outputs (``tests/fixtures/case_*.npz`` and numbers
marked "mxnet 1.9.1", produced by running mxnet 1.9.1 and hard-coded).
"""
import json
import os

import numpy as np
import pytest
import torch

from compiler.ops import get_op
from compiler.ops.registry import Decompose, ShapeError, Special
from compiler.frontend.reference import check_gradient

from tests.compiler._rules_helpers import close, decompose, gradient, infer, reference

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def fixture(name):
    arrays = {k: torch.from_numpy(v) for k, v in
              np.load(os.path.join(FIXTURES, name + ".npz")).items()}
    with open(os.path.join(FIXTURES, name + ".json")) as f:
        nodes = json.load(f)["nodes"]
    ops = [(n["op"], n.get("attrs", {})) for n in nodes if n["op"] != "null"]
    return arrays, ops


def ar(*shape, scale=1.0):
    return torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape) * scale


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# -- softmax / log_softmax -----------------------------------------------------------------

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", [((4, 5), -1), ((3, 1, 7), 1), ((2, 3, 4), 0), ((6,), 0)])
@pytest.mark.parametrize("temperature", [None, 2.5])
def test_softmax_family(op, shape, axis, temperature):
    x = randn(*shape, seed=1) * 3
    attrs = dict(axis=axis) if temperature is None else dict(axis=axis, temperature=temperature)
    assert infer(op, [shape], **attrs)[1] == [shape]
    t = temperature or 1.0
    want = (torch.log_softmax if op == "log_softmax" else torch.softmax)(x / t, dim=axis)
    close(reference(op, [x], **attrs)[0], want)
    (y,), graph = decompose(op, [x], **attrs)
    close(y, want, 1e-5)
    ops = {graph.node(n)["op"] for n in graph.ops()}
    assert {"max", "sum", "exp"} <= ops
    mine, auto = check_gradient(op, [x], attrs)
    close(mine[0], auto[0], 1e-5)


def test_softmax_errors():
    with pytest.raises(ShapeError):
        infer("softmax", [(3, 4)], axis=2)
    with pytest.raises(ShapeError):
        infer("log_softmax", [(3, 4)], axis=-3)


def test_softmax_temperature_values_from_mxnet():
    x = torch.sin(ar(2, 3, scale=1.3))
    dy = torch.cos(ar(2, 3, scale=0.9))
    (y,) = reference("softmax", [x], axis=0, temperature=2.0)
    close(y, [[0.585133, 0.715756, 0.537477], [0.414867, 0.284244, 0.462523]], 1e-5)
    (dx,), _ = gradient("softmax", [x], [dy], axis=0, temperature=2.0)
    close(dx, [[0.231109, 0.154456, -0.002039], [-0.231109, -0.154456, 0.002039]], 1e-5)
    (y,) = reference("log_softmax", [x], axis=0, temperature=2.0)
    close(y, [[-0.535915, -0.334416, -0.620869], [-0.879798, -1.257922, -0.77106]], 1e-5)
    (dx,), _ = gradient("log_softmax", [x], [dy], axis=0, temperature=2.0)
    close(dx, [[0.471935, 0.409275, 0.004106], [-0.471935, -0.409275, -0.004106]], 1e-5)


# -- _softmax_ce_grad ---------------------------------------------------------------------------

def test_softmax_ce_grad_formula():
    low = get_op("_softmax_ce_grad").lowering
    assert isinstance(low, Special) and low.kind == "softmax_ce_grad"   # its math: low.expr
    prob = torch.softmax(randn(2, 4, 3, seed=2), dim=1)
    label = torch.tensor([[0., 3., 9.], [2.7, -1., 1.]])
    assert infer("_softmax_ce_grad", [(2, 4, 3), None], axis=1)[0] == [(2, 4, 3), (2, 3)]
    with pytest.raises(ShapeError):
        infer("_softmax_ce_grad", [(2, 4, 3), (2, 4)], axis=1)
    (g,) = reference("_softmax_ce_grad", [prob, label], axis=1, grad_scale=2.0,
                     use_ignore=True, ignore_label=1, smooth_alpha=0.3)
    want = torch.empty_like(prob)
    for i in range(2):
        for j in range(3):
            lab = int(label[i, j])  # C truncation: 2.7 -> 2; -1 and 9 match no class
            for c in range(4):
                target = 0.7 if c == lab else 0.1
                want[i, c, j] = 0.0 if lab == 1 else (prob[i, c, j] - target) * 2.0
    close(g, want)


# -- SoftmaxOutput -----------------------------------------------------------------------------

SO_SHAPES = [  # data, attrs -> label; mxnet 1.9.1
    ((4, 5), {}, (4,)), ((4, 5), {"multi_output": True}, (4, 1)),
    ((4, 5), {"preserve_shape": True}, (4,)), ((2, 3, 4), {}, (2, 3)),
    ((2, 3, 4), {"multi_output": True}, (2, 4)), ((2, 3, 4, 5), {"multi_output": True}, (2, 20)),
    ((2, 3, 4, 5), {"preserve_shape": True}, (2, 3, 4)), ((3,), {}, ()),
    ((1, 1), {}, (1,)),
]


@pytest.mark.parametrize("data,attrs,label", SO_SHAPES)
def test_softmax_output_shape_matches_mxnet(data, attrs, label):
    assert infer("SoftmaxOutput", [data, None], **attrs) == ([data, label], [data])


def test_softmax_output_signature_and_errors():
    op = get_op("SoftmaxOutput")
    assert op.is_loss and get_op("Softmax") is op and isinstance(op.lowering, Decompose)
    assert op.list_arguments(op.parse_attrs({})) == ["data", "label"]
    with pytest.raises(ShapeError):  # mxnet 1.9.1: "Shape inconsistent, Provided = [5]"
        infer("SoftmaxOutput", [(4, 3), (5,)])
    with pytest.raises(ShapeError):
        infer("SoftmaxOutput", [(3,), None], multi_output=True)
    assert infer("SoftmaxOutput", [(4, 3), (4, 3)])[0] == [(4, 3), (4, 3)]  # soft labels


def softmax_output_formula(x, label, grad_scale=1.0, ignore_label=-1.0, use_ignore=False,
                           normalization="null", multi_output=False):
    """mxnet's SoftmaxOutput gradient for class axis 1 (2-D or multi_output), in numpy."""
    x, label = x.double().numpy(), label.double().numpy()
    p = np.exp(x - x.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    lab = label.astype(np.int64)
    onehot = np.moveaxis(np.eye(x.shape[1])[lab], -1, 1)
    g = (p - onehot) * grad_scale
    if use_ignore:
        g = g * np.expand_dims(lab != int(ignore_label), 1)
    spatial = int(np.prod(x.shape[2:])) if multi_output else 1
    if normalization == "batch":
        g /= x.shape[0] * spatial
    elif normalization == "valid":
        g /= max(int((lab != int(ignore_label)).sum()), 1)
    else:
        g /= spatial
    return torch.from_numpy(p), torch.from_numpy(g)


SO_CASES = ["case_softmax_grad_scale", "case_softmax_ignore_batch", "case_softmax_ignore_null",
            "case_softmax_ignore_valid", "case_softmax_multi", "case_softmax_multi_ignore_batch",
            "case_softmax_multi_ignore_null", "case_softmax_multi_ignore_valid",
            "case_softmax_nograd", "case_softmax_norm_batch", "case_softmax_norm_null",
            "case_softmax_norm_valid"]


@pytest.mark.parametrize("case", SO_CASES)
def test_softmax_output_fixtures_from_mxnet(case):
    d, [(op, raw)] = fixture(case)
    attrs = {k: v for k, v in raw.items()}
    x, label = d["in_data"], d["in_softmax_label"]
    close(reference(op, [x, label], **attrs)[0], d["out0_infer"])
    close(decompose(op, [x, label], True, **attrs)[0][0], d["out0_train"])
    (dx, dlabel), _ = gradient(op, [x, label], [torch.ones_like(x)], **attrs)
    close(dx, d["grad_data"])
    close(dlabel, torch.zeros_like(label))
    parsed = get_op(op).parse_attrs(raw)
    _, want = softmax_output_formula(
        x, label, parsed["grad_scale"], parsed["ignore_label"], parsed["use_ignore"],
        parsed["normalization"], parsed["multi_output"])
    close(dx, want)


def test_softmax_output_nd_values_from_mxnet():
    x = torch.sin(ar(2, 3, 4, scale=0.77))
    label = torch.tensor([[0., 1., 2.], [3., 2., 1.]])
    # mxnet 1.9.1, preserve_shape: softmax over the last axis, rows of (6, 4)
    attrs = dict(preserve_shape=True, normalization="valid", use_ignore=True, ignore_label=2)
    (g, _), _ = gradient("SoftmaxOutput", [x, label], [torch.ones_like(x)], **attrs)
    close(g, [[[-0.218018, 0.064156, 0.086896, 0.066966],
               [0.110161, -0.195958, 0.038269, 0.047528], [0., 0., 0., 0.]],
              [[0.116394, 0.055749, 0.036467, -0.20861], [0., 0., 0., 0.],
               [0.121466, -0.19256, 0.03493, 0.036164]]], 1e-5)
    close(decompose("SoftmaxOutput", [x, label], True, **attrs)[0][0].sum(-1), torch.ones(2, 3))
    # mxnet 1.9.1, 3-D data without multi_output: softmax over the flattened (2, 12)
    # rows; the gradient uses the first 2 labels of the flattened label array while
    # 'valid' counts all 6 labels.
    attrs = dict(normalization="valid", grad_scale=3.0)
    (y,), _ = decompose("SoftmaxOutput", [x, label], True, **attrs)
    close(y[0, 0], [0.055898, 0.11213, 0.151874, 0.117042], 1e-5)
    (g, _), _ = gradient("SoftmaxOutput", [x, label], [torch.ones_like(x)], **attrs)
    close(g, [[[-0.472051, 0.056065, 0.075937, 0.058521], [0.029723, 0.014581, 0.010326, 0.012824],
               [0.024717, 0.051061, 0.075079, 0.063216]],
              [[0.046831, -0.477569, 0.014672, 0.016653], [0.030536, 0.064253, 0.101966, 0.094048],
               [0.052769, 0.024954, 0.015175, 0.015711]]], 1e-5)


def test_softmax_output_smoothing_and_soft_labels_from_mxnet():
    x = torch.sin(ar(3, 4, scale=0.5))
    (g, _), _ = gradient("SoftmaxOutput", [x, torch.tensor([0., 1., 3.])], [torch.ones_like(x)],
                         smooth_alpha=0.3)
    close(g, [[-0.56922, 0.11123, 0.203381, 0.254609], [0.303172, -0.404539, 0.087014, 0.014352],
              [0.172366, 0.11842, 0.122522, -0.413308]], 1e-5)  # mxnet 1.9.1
    # mxnet 1.9.1: a label of the data's shape is a distribution; no normalization
    soft = torch.softmax(randn(3, 4, seed=3), 1)
    (g, _), (p,) = gradient("SoftmaxOutput", [x, soft], [torch.ones_like(x)], grad_scale=2.0,
                            normalization="batch")
    close(g, (p - soft) * 2.0)


# -- regression outputs ----------------------------------------------------------------------------

REG = ["LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"]


@pytest.mark.parametrize("op", REG)
@pytest.mark.parametrize("data,label", [((4, 5), (4, 5)), ((3,), (3,)), ((2, 3, 4), (2, 3, 4)),
                                        ((4, 1), (4,))])  # mxnet 1.9.1
def test_regression_shape_matches_mxnet(op, data, label):
    assert infer(op, [data, None]) == ([data, label], [data])
    assert get_op(op).is_loss


@pytest.mark.parametrize("op", REG)
def test_regression_shape_errors(op):  # mxnet 1.9.1 rejects both
    with pytest.raises(ShapeError):
        infer(op, [(4, 3), (4,)])
    with pytest.raises(ShapeError):
        infer(op, [(4, 3), (12,)])


@pytest.mark.parametrize("case", ["LinearRegressionOutput_gs1", "LinearRegressionOutput_gs3",
                                  "LinearRegressionOutput_label1d", "LogisticRegressionOutput_gs1",
                                  "LogisticRegressionOutput_gs3", "MAERegressionOutput_gs1",
                                  "MAERegressionOutput_gs3"])
def test_regression_fixtures_from_mxnet(case):
    d, [(op, raw)] = fixture("case_" + case)
    x, label = d["in_data"], d["in_reg_label"]
    close(reference(op, [x, label], **raw)[0], d["out0_infer"])
    close(decompose(op, [x, label], True, **raw)[0][0], d["out0_train"])
    (dx, dl), (out,) = gradient(op, [x, label], [torch.ones_like(x)], **raw)
    close(dx, d["grad_data"])
    close(dl, torch.zeros_like(label))
    # the formula: (out - label) * grad_scale / outputs-per-sample (for MAE its sign, with
    # mxnet's -1 at 0)
    diff = out - label.reshape(x.shape)
    diff = torch.where(diff > 0, 1.0, -1.0) if op.startswith("MAE") else diff
    close(dx, diff * float(raw.get("grad_scale", 1.0)) / (x.numel() / x.shape[0]))


def test_mae_gradient_where_output_equals_label_from_mxnet():
    """mxnet 1.9.1's MAE gradient is ``out > label ? 1 : -1`` (times grad_scale /
    outputs per sample): -1, not 0, where the output equals the label."""
    x = torch.tensor([[1., 2., 3.], [0., -1., 5.]])
    label = torch.tensor([[1., 3., 2.], [0., -1., 7.]])
    (dx, _), _ = gradient("MAERegressionOutput", [x, label], [torch.ones_like(x)])
    third = 0.3333333432674408
    close(dx, [[-third, -third, third], [-third, -third, -third]], 1e-7)   # mxnet 1.9.1


def test_logistic_regression_3d_from_mxnet():
    x = torch.sin(ar(2, 3, 4, scale=0.77))
    label = torch.cos(ar(2, 3, 4, scale=0.3))
    (dx, _), _ = gradient("LogisticRegressionOutput", [x, label], [torch.ones_like(x)],
                          grad_scale=2.0)
    close(dx[0], [[-0.083333, -0.048001, -0.015728, 0.009195],
                  [0.025504, 0.045352, 0.08283, 0.136561],
                  [0.201119, 0.258389, 0.286453, 0.280151]], 1e-5)  # mxnet 1.9.1


# -- MakeLoss -------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["makeloss_batch_gs2", "makeloss_nograd", "makeloss_null_gs1",
                                  "makeloss_null_gs2", "makeloss_valid_gs2"])
def test_make_loss_fixtures_from_mxnet(case):
    d, ops = fixture("case_" + case)
    assert [o for o, _ in ops] == ["square", "MakeLoss"]
    raw = ops[1][1]
    x = d["in_data"]
    sq = x * x
    close(reference("MakeLoss", [sq], **raw)[0], d["out0_train"])
    close(decompose("make_loss", [sq], True, **raw)[0][0], d["out0_train"])
    (g,), _ = gradient("MakeLoss", [sq], [torch.ones_like(x)], **raw)
    close(g * 2 * x, d["grad_data"])  # chain rule through square


@pytest.mark.parametrize("data", [(3, 4), (5,), (2, 1, 3)])
def test_make_loss_formula(data):
    x = torch.sin(ar(*data, scale=1.1))
    assert infer("MakeLoss", [data]) == ([data], [data])
    for norm, div in [("null", 1.0), ("batch", float(data[0])),
                      ("valid", float(max(int((x > 0.3).sum()), 1)))]:
        (g,), _ = gradient("MakeLoss", [x], [torch.zeros_like(x)], grad_scale=1.5,
                           normalization=norm, valid_thresh=0.3)
        close(g, torch.full(data, 1.5 / div))
    # mxnet 1.9.1: (3, 4) valid with 5 entries > 0.3 -> 1.5 / 5 everywhere
    if data == (3, 4):
        close(g[0, 0], 0.3)
    # none valid: divides by 1
    (g,), _ = gradient("MakeLoss", [x], [torch.zeros_like(x)], normalization="valid",
                       valid_thresh=10.0)
    close(g, torch.ones(data))
