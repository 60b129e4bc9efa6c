"""Rules of FullyConnected, Embedding, Dropout and BatchNorm (compiler/ops/nn.py).

Shapes and numbers marked "mxnet 1.9.1" were produced by running mxnet 1.9.1
on the same inputs and hard-coded here; ``tests/fixtures/case_*.npz`` are
mxnet 1.9.1 outputs written by tests/fixtures/make_fixtures.py.
"""
import os

import numpy as np
import pytest
import torch

from compiler.ops import get_op
from compiler.ops.registry import Decompose, ShapeError, Special
from compiler.frontend.reference import check_gradient

from tests.compiler._rules_helpers import autograd, close, decompose, gradient, infer, parse, reference

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures")


def fixture(name):
    return {k: torch.from_numpy(v) for k, v in np.load(os.path.join(FIXTURES, name)).items()}


def ar(*shape, scale=1.0):
    return torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape) * scale


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# -- FullyConnected -----------------------------------------------------------------

FC_SHAPES = [  # data, flatten -> (weight, out); mxnet 1.9.1 with num_hidden=6
    ((5, 3), True, (6, 3), (5, 6)), ((5, 3), False, (6, 3), (5, 6)),
    ((2, 3, 4), True, (6, 12), (2, 6)), ((2, 3, 4), False, (6, 4), (2, 3, 6)),
    ((7,), True, (6, 1), (7, 6)), ((7,), False, (6, 7), (6,)),
    ((1, 1), True, (6, 1), (1, 6)), ((2, 3, 1, 5), True, (6, 15), (2, 6)),
    ((2, 3, 1, 5), False, (6, 5), (2, 3, 1, 6)),
]


@pytest.mark.parametrize("data,flatten,weight,out", FC_SHAPES)
def test_fc_shape_matches_mxnet(data, flatten, weight, out):
    ins, outs = infer("FullyConnected", [data, None, None], num_hidden=6, flatten=flatten)
    assert ins == [data, weight, (6,)] and outs == [out]


def test_fc_no_bias_arguments_and_errors():
    op = get_op("FullyConnected")
    assert op.list_arguments(parse("FullyConnected", {"num_hidden": 3, "no_bias": True})) == \
        ["data", "weight"]
    assert op.list_arguments(parse("FullyConnected", {"num_hidden": 3})) == \
        ["data", "weight", "bias"]
    assert infer("FullyConnected", [(4, 5), None], num_hidden=3, no_bias=True)[0] == \
        [(4, 5), (3, 5)]
    with pytest.raises(ShapeError):
        infer("FullyConnected", [(4, 5), (3, 4), None], num_hidden=3)
    with pytest.raises(ShapeError):
        infer("FullyConnected", [(4, 5), None, (2,)], num_hidden=3)


@pytest.mark.parametrize("data,flatten,weight,out", FC_SHAPES)
@pytest.mark.parametrize("no_bias", [False, True])
def test_fc_reference_decomposition_gradient(data, flatten, weight, out, no_bias):
    x, w, bias = randn(*data, seed=1), randn(*weight, seed=2), randn(6, seed=3)
    ins = [x, w] if no_bias else [x, w, bias]
    attrs = dict(num_hidden=6, flatten=flatten, no_bias=no_bias)
    (y,) = reference("FullyConnected", ins, **attrs)
    x2 = x.reshape(data[0], -1) if flatten else x
    want = torch.nn.functional.linear(x2, w, None if no_bias else bias)
    close(y, want)
    assert tuple(y.shape) == out
    (y2,), graph = decompose("FullyConnected", ins, **attrs)
    close(y2, want)
    ops = {graph.node(n)["op"] for n in graph.ops()}
    if len(data) == 2:
        assert not ops & {"Reshape", "Flatten"}  # 2-D data is used as is
    mine, auto = check_gradient("FullyConnected", ins, attrs)
    for m, t in zip(mine, auto):
        close(m, t, 1e-4)


def test_fc_values_from_mxnet():
    x, bias = torch.sin(ar(2, 3, 2)), torch.tensor([.1, .2, .3, .4])
    # mxnet 1.9.1, flatten=False
    w = torch.cos(ar(4, 2))
    dy = torch.cos(ar(2, 3, 4, scale=0.7))
    (y,) = reference("FullyConnected", [x, w, bias], num_hidden=4, flatten=False)
    close(y[1, 2], [-0.984318, 1.416376, 0.371937, -0.876248], 1e-4)
    (dx, dw, db), _ = gradient("FullyConnected", [x, w, bias], [dy], num_hidden=4,
                               flatten=False)
    close(dx[1], [[0.026674, 0.03523], [-0.064224, 0.174942], [0.094353, -0.364899]], 1e-4)
    close(dw, [[-1.172157, -0.429444], [-0.275419, -0.212456], [0.750853, 0.104453],
               [1.423986, 0.372236]], 1e-4)
    close(db, [0.653797, 0.133008, -0.450336, -0.82188], 1e-4)
    # mxnet 1.9.1, flatten=True
    w = torch.cos(ar(4, 6))
    (y,) = reference("FullyConnected", [x, w, bias], num_hidden=4)
    close(y, [[0.259208, 1.204273, 2.069338, 2.793458],
              [-0.57222, 0.359619, 1.278743, 2.119901]], 1e-4)
    (dx, dw, _), _ = gradient("FullyConnected", [x, w, bias],
                              [torch.cos(ar(2, 4, scale=0.7))], num_hidden=4)
    close(dx[0], [[1.544448, 0.772011], [-0.710209, -1.539467], [-0.953345, 0.509277]], 1e-4)
    close(dw[0], [0.263272, 0.222444, -0.022898, -0.247187, -0.244214, -0.016711], 1e-4)


# -- Embedding --------------------------------------------------------------------------

@pytest.mark.parametrize("data,out", [((5,), (5, 7)), ((2, 3), (2, 3, 7)), ((1,), (1, 7)),
                                      ((2, 3, 4), (2, 3, 4, 7))])
def test_embedding_shape_matches_mxnet(data, out):  # mxnet 1.9.1
    assert infer("Embedding", [data, None], input_dim=10, output_dim=7) == \
        ([data, (10, 7)], [out])


def test_embedding_errors_and_lowering():
    with pytest.raises(ShapeError):
        infer("Embedding", [(2,), (10, 6)], input_dim=10, output_dim=7)
    assert get_op("Embedding").lowering == Special("gather")
    assert get_op("_embedding_backward").lowering == Special("scatter_add")
    assert infer("_embedding_backward", [(2, 3, 7), (2, 3)], input_dim=10, output_dim=7)[1] == \
        [(10, 7)]


def test_embedding_fixture_from_mxnet():
    d = fixture("case_embedding.npz")
    attrs = dict(input_dim=8, output_dim=4)
    (y,) = reference("Embedding", [d["in_data"], d["in_embed_weight"]], **attrs)
    close(y, d["out0_train"])
    (_, dw), _ = gradient("Embedding", [d["in_data"], d["in_embed_weight"]], [d["ograd0"]],
                          **attrs)
    close(dw, d["grad_embed_weight"])


def test_embedding_gradient_accumulates_repeats():
    data = torch.tensor([[1., 3., 1.], [0., 1., 4.]])
    w = randn(5, 3)
    dy = randn(2, 3, 3, seed=4)
    (y,) = reference("Embedding", [data, w], input_dim=5, output_dim=3)
    close(y, w[data.long()])
    (ddata, dw), _ = gradient("Embedding", [data, w], [dy], input_dim=5, output_dim=3)
    close(ddata, torch.zeros_like(data))
    close(dw[1], dy[0, 0] + dy[0, 2] + dy[1, 1])
    close(dw[2], torch.zeros(3))
    auto = autograd("Embedding", [data, w], [dy], input_dim=5, output_dim=3)
    close(dw, auto[1])


# -- Dropout ------------------------------------------------------------------------------

def test_dropout_signature_and_shapes():
    op = get_op("Dropout")
    attrs = parse("Dropout", {})
    assert op.list_outputs(attrs) == ["output", "mask"] and op.visible_outputs(attrs) == 1
    assert op.mode_dependent and isinstance(op.lowering, Decompose)
    for s in [(3, 4), (7,), (2, 1, 5)]:
        assert infer("Dropout", [s])[1] == [s, s]
    with pytest.raises(ShapeError):
        infer("Dropout", [(3, 4)], axes=(2,))
    assert infer("_random_uniform", [], shape=(3, 5))[1] == [(3, 5)]
    assert isinstance(get_op("_random_uniform").lowering, Decompose)   # -> _philox_uniform
    assert infer("_philox_uniform", [None], shape=(3, 5), stream=2) == ([(1,)], [(3, 5)])


def test_dropout_inference_is_identity():
    x = randn(3, 5)
    (y, mask), graph = decompose("Dropout", [x], is_train=False, p=0.3)
    close(y, x)
    close(mask, torch.ones_like(x))
    assert "_random_uniform" not in {graph.node(n)["op"] for n in graph.ops()}
    close(reference("Dropout", [x], False, p=0.3)[0], x)


@pytest.mark.parametrize("axes", [(), (1,)])
def test_dropout_training_mask(axes):
    torch.manual_seed(0)
    x = randn(40, 50) + 3.0
    (y, mask), _ = decompose("Dropout", [x], is_train=True, p=0.25, axes=axes)
    assert ((mask == 0) | ((mask - 1.0 / 0.75).abs() < 1e-6)).all()
    close(y, x * mask)
    assert 0.6 < (mask > 0).float().mean() < 0.9
    if axes:
        assert (mask == mask[:, :1]).all()  # shared along axis 1
    # mode='always' drops in inference too
    (y, mask), _ = decompose("Dropout", [x], is_train=False, p=0.5, mode="always")
    assert (mask == 0).any() and (mask == 2.0).any()


def test_dropout_gradient_uses_mask():
    torch.manual_seed(1)
    x, dy = randn(6, 7), randn(6, 7, seed=5)
    (dx,), (y, mask) = gradient("Dropout", [x], [dy, torch.zeros(6, 7)], p=0.5)
    close(dx, dy * mask)
    close(y, x * mask)


# -- BatchNorm -------------------------------------------------------------------------------

BN_SHAPES = [((4, 3), 1, 3), ((2, 3, 5), 1, 3), ((2, 3, 4, 5), 1, 3), ((1, 1, 1), 1, 1),
             ((2, 3, 5), -1, 5), ((2, 3, 5, 6), 2, 5)]  # mxnet 1.9.1


@pytest.mark.parametrize("data,axis,c", BN_SHAPES)
def test_batchnorm_shape_matches_mxnet(data, axis, c):
    ins, outs = infer("BatchNorm", [data, None, None, None, None], axis=axis)
    assert ins == [data, (c,), (c,), (c,), (c,)] and outs == [data, (c,), (c,)]


def test_batchnorm_signature_and_errors():
    op = get_op("BatchNorm")
    assert op.aux == ("moving_mean", "moving_var") and op.mode_dependent
    assert op.list_outputs(parse("BatchNorm", {})) == ["output", "mean", "var"]
    assert op.visible_outputs(parse("BatchNorm", {})) == 1
    assert op.visible_outputs(parse("BatchNorm", {"output_mean_var": True})) == 3
    with pytest.raises(ShapeError):
        infer("BatchNorm", [(2, 3), (4,), None, None, None])
    with pytest.raises(ShapeError):
        infer("BatchNorm", [(2, 3)] + [None] * 4, axis=2)


BN_CASES = {
    "case_batchnorm_fix_gamma_False": dict(fix_gamma=False),
    "case_batchnorm_fix_gamma_True": dict(fix_gamma=True),
    "case_batchnorm_global_stats": dict(fix_gamma=False, use_global_stats=True),
    "case_batchnorm_output_mean_var": dict(fix_gamma=False, output_mean_var=True),
    "case_batchnorm_2d": dict(fix_gamma=False),
}


@pytest.mark.parametrize("case", sorted(BN_CASES))
def test_batchnorm_fixtures_from_mxnet(case):
    d = fixture(case + ".npz")
    attrs = BN_CASES[case]
    ins = [d["in_data"], d["in_bn_gamma"], d["in_bn_beta"], d["aux_bn_moving_mean_before"],
           d["aux_bn_moving_var_before"]]
    for fn in (lambda tr: reference("BatchNorm", ins, tr, **attrs),
               lambda tr: decompose("BatchNorm", ins, tr, **attrs)[0]):
        out = fn(False)
        close(out[0], d["out0_infer"], 1e-4)
        train = fn(True)
        close(train[0], d["out0_train"], 1e-4)
        if "out1_train" in d:  # mxnet's 'var' output is 1/sqrt(var + eps)
            close(train[1], d["out1_train"], 1e-4)
            close(train[2], d["out2_train"], 1e-4)
            close(out[1], d["out1_infer"], 1e-4)
            close(out[2], d["out2_infer"], 1e-4)
        close(train[3], d["aux_bn_moving_mean_after"], 1e-5)
        close(train[4], d["aux_bn_moving_var_after"], 1e-5)   # biased batch variance
    c = d["in_bn_gamma"].shape
    ograds = [d["ograd0"], d.get("ograd1", torch.zeros(c)), d.get("ograd2", torch.zeros(c))]
    grads, _ = gradient("BatchNorm", ins, ograds, **attrs)
    close(grads[0], d["grad_data"], 1e-4)
    close(grads[1], d["grad_bn_gamma"], 1e-4)
    close(grads[2], d["grad_bn_beta"], 1e-4)
    assert grads[3] is None and grads[4] is None


@pytest.mark.parametrize("shape,axis", [((5, 3), 1), ((4, 3, 2, 3), 1), ((2, 3, 7), -1),
                                        ((3, 1, 2), 1)])
@pytest.mark.parametrize("fix_gamma", [False, True])
def test_batchnorm_gradient_matches_autograd(shape, axis, fix_gamma):
    x = randn(*shape, seed=6) * 2 + 1
    c = shape[axis]
    ins = [x, randn(c, seed=7), randn(c, seed=8), torch.zeros(c), torch.ones(c)]
    dy = randn(*shape, seed=9)
    attrs = dict(axis=axis, fix_gamma=fix_gamma)
    mine, _ = gradient("BatchNorm", ins, [dy, torch.zeros(c), torch.zeros(c)], **attrs)
    auto = autograd("BatchNorm", ins, [dy], **attrs)
    close(mine[0], auto[0], 1e-4)
    close(mine[1], torch.zeros(c) if fix_gamma else auto[1], 1e-4)
    close(mine[2], auto[2], 1e-4)
    # independent torch: batch_norm in training mode
    perm_x = x.movedim(axis, 1)
    g = torch.ones(c) if fix_gamma else ins[1]
    want = torch.nn.functional.batch_norm(perm_x, None, None, g, ins[2], True, 0.0, 1e-3)
    close(reference("BatchNorm", ins, True, **attrs)[0], want.movedim(1, axis), 1e-5)
    close(decompose("BatchNorm", ins, True, **attrs)[0][0], want.movedim(1, axis), 1e-5)
