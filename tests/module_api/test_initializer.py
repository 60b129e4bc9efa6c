"""``mx.init``: suffix dispatch, ``__init__`` attributes, statistics, dumps()
strings as mxnet 1.9.1 prints them."""
import json
import logging
import os

import numpy as np
import pytest
import torch

import module_api as mx
import module_api.initializer as init
import module_api.ndarray as nd


def fill(initializer, name, shape, attrs=None):
    arr = nd.zeros(shape) + 0.5
    initializer(init.InitDesc(name, attrs), arr)
    return arr


@pytest.mark.parametrize("name,value", [
    ("fc1_bias", 0.0), ("bn_gamma", 1.0), ("bn_beta", 0.0), ("bn_moving_mean", 0.0),
    ("bn_moving_var", 1.0), ("q_min", 0.0), ("q_max", 1.0), ("bn_moving_inv_var", 0.0)])
def test_suffix_dispatch(name, value):
    arr = fill(init.Uniform(0.1), name, (4,))
    assert torch.all(arr == value)


def test_weight_goes_to_init_weight_and_unknown_raises():
    arr = fill(init.One(), "fc_weight", (2, 2))
    assert torch.all(arr == 1)
    with pytest.raises(ValueError, match="Unknown initialization pattern for data"):
        fill(init.Xavier(), "data", (2, 2))


@pytest.mark.parametrize("attr,value", [("zeros", 0.0), ("ones", 1.0), ('["zero", {}]', 0.0),
                                        ('["constant", {"value": 3}]', 3.0)])
def test_init_attribute_overrides(attr, value):
    arr = fill(init.Uniform(), "fc1_weight", (3, 3), {"__init__": attr})
    assert torch.all(arr == value)


def test_variable_init_attribute_from_symbol():
    v = mx.sym.Variable("w", init=init.Constant(0.25))
    attrs = v.attr_dict()["w"]
    arr = fill(init.Uniform(), "w", (2,), attrs)
    assert torch.all(arr == 0.25)


def test_global_init_is_recorded():
    desc = init.InitDesc("fc_weight")
    g = init.Normal()
    g(desc, nd.zeros((2, 2)))
    assert desc.global_init is g and isinstance(desc, str) and desc == "fc_weight"


def test_uniform_range_and_normal_sigma():
    mx.random.seed(0)
    u = fill(init.Uniform(0.3), "w_weight", (200, 100))
    assert float(u.min()) >= -0.3 and float(u.max()) <= 0.3 and float(u.max()) > 0.29
    n = fill(init.Normal(0.2), "w_weight", (200, 100))
    assert abs(float(n.std()) - 0.2) < 0.005 and abs(float(n.mean())) < 0.005


@pytest.mark.parametrize("factor_type,fan", [("avg", (30 * 9 + 20 * 9) / 2),
                                             ("in", 30 * 9), ("out", 20 * 9)])
def test_xavier_bounds(factor_type, fan):
    bound = np.sqrt(3.0 / fan)
    arr = fill(init.Xavier(factor_type=factor_type), "conv_weight", (20, 30, 3, 3))
    assert float(arr.abs().max()) <= bound + 1e-7
    assert float(arr.abs().max()) > 0.95 * bound
    g = fill(init.Xavier(rnd_type="gaussian", factor_type=factor_type, magnitude=2),
             "conv_weight", (200, 300))
    want = np.sqrt(2.0 / {"avg": 250, "in": 300, "out": 200}[factor_type])
    assert abs(float(g.std()) - want) < 0.03 * want


def test_xavier_rejects_vectors():
    with pytest.raises(ValueError, match="cannot be applied to vector"):
        fill(init.Xavier(), "x_weight", (5,))


@pytest.mark.parametrize("shape", [(4, 6), (6, 4), (3, 2, 2)])
def test_orthogonal(shape):
    arr = fill(init.Orthogonal(scale=1.0), "w_weight", shape).reshape(shape[0], -1)
    m = arr.double()
    gram = m @ m.T if shape[0] <= m.shape[1] else m.T @ m
    assert torch.allclose(gram, torch.eye(gram.shape[0], dtype=torch.float64), atol=1e-5)


def test_seeded_draws_repeat():
    mx.random.seed(3)
    a = fill(init.Xavier(), "w_weight", (5, 5))
    mx.random.seed(3)
    b = fill(init.Xavier(), "w_weight", (5, 5))
    assert torch.equal(a, b)


# strings printed by mxnet 1.9.1
MXNET_DUMPS = [
    (lambda: init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2.34),
     '["xavier", {"rnd_type": "gaussian", "factor_type": "in", "magnitude": 2.34}]'),
    (lambda: init.Xavier(), '["xavier", {"rnd_type": "uniform", "factor_type": "avg", '
                            '"magnitude": 3}]'),
    (lambda: init.Uniform(0.1), '["uniform", {"scale": 0.1}]'),
    (lambda: init.Normal(0.5), '["normal", {"sigma": 0.5}]'),
    (lambda: init.Constant(2), '["constant", {"value": 2}]'),
    (lambda: init.Constant(np.array([1., 2.])), '["constant", {"value": [1.0, 2.0]}]'),
    (lambda: init.Zero(), '["zero", {}]'),
    (lambda: init.One(), '["one", {}]'),
    (lambda: init.Orthogonal(), '["orthogonal", {"scale": 1.414, "rand_type": "uniform"}]'),
    (lambda: init.MSRAPrelu(), '["msraprelu", {"factor_type": "avg", "slope": 0.25}]'),
    (lambda: init.LSTMBias(), '["lstmbias", {"forget_bias": 1.0}]'),
    (lambda: init.Bilinear(), '["bilinear", {}]'),
]


@pytest.mark.parametrize("make,text", MXNET_DUMPS)
def test_dumps_matches_mxnet(make, text):
    obj = make()
    assert obj.dumps() == text
    again = init.create(text)
    assert type(again) is type(obj)
    assert json.loads(again.dumps()) == json.loads(text)


def test_create_and_register():
    assert isinstance(init.create("zeros"), init.Zero)
    assert isinstance(init.create("ones"), init.One)
    assert init.create("uniform", scale=0.2).scale == 0.2
    z = init.Zero()
    assert init.create(z) is z
    with pytest.raises(ValueError, match="not registered"):
        init.create("nosuch")

    @init.register
    @init.alias("halves")
    class Half(init.Initializer):
        def _init_weight(self, _, arr):
            arr[:] = 0.5

    arr = fill(init.Zero(), "a_weight", (2,), {"__init__": "halves"})
    assert torch.all(arr == 0.5)


def test_mixed_and_load(tmp_path):
    mixed = init.Mixed(["fc1.*", ".*"], [init.Constant(2), init.Zero()])
    arr = nd.ones((2,))
    mixed(init.InitDesc("fc1_weight"), arr)
    assert arr.tolist() == [2, 2]
    mixed(init.InitDesc("fc2_weight"), arr)
    assert arr.tolist() == [0, 0]
    mixed(init.InitDesc("fc1_bias"), arr)      # suffix rules still apply, as in mxnet
    assert arr.tolist() == [0, 0]

    f = tmp_path / "p.params"
    nd.save(str(f), {"arg:fc_weight": nd.array([1.0, 2.0]), "aux:bn_moving_var": nd.ones((1,))})
    loader = init.Load(str(f), default_init=init.Constant(9))
    w = nd.zeros((2,))
    loader("fc_weight", w)
    assert w.tolist() == [1.0, 2.0]
    other = nd.zeros((3,))
    loader(init.InitDesc("other_weight"), other)
    assert other.tolist() == [9, 9, 9]
    with pytest.raises(AssertionError, match="Shape mismatch"):
        loader("fc_weight", nd.zeros((3,)))


def test_lstm_bias_and_plain_tensors():
    arr = torch.zeros(8)
    init.LSTMBias(forget_bias=1.5)(init.InitDesc("lstm_i2h_bias", {"__init__":
                                                  init.LSTMBias(1.5).dumps()}), arr)
    assert arr.tolist() == [0, 0, 1.5, 1.5, 0, 0, 0, 0]
    t = torch.zeros(3, 3)
    init.Uniform(0.5)(init.InitDesc("x_weight"), t)     # a plain tensor works too
    assert float(t.abs().sum()) > 0


def test_legacy_string_call_warns():
    arr = nd.zeros((2,))
    with pytest.warns(DeprecationWarning):
        init.One()("fc_gamma", arr)
    assert arr.tolist() == [1, 1]


def test_a_program_that_never_seeds_draws_the_same_numbers_every_run():
    """mxnet 1.9.1 starts its generators from a fixed seed: two runs of a program that
    never calls mx.random.seed get the same initial weights and samples (here from
    this project's generators, not mxnet's numbers)."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import module_api as mx\n"
            "a = mx.nd.zeros((3, 4))\n"
            "mx.init.Xavier()(mx.init.InitDesc('fc_weight'), a)\n"
            "print(a.asnumpy().tolist(), mx.nd.random.normal(shape=3).asnumpy().tolist())\n")
    env = dict(os.environ, PYTHONPATH=root)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.strip()


def _seeded_samples(shape, law, first, second):
    """One float32 draw of ``shape`` from the CPU generator, as after mx.random.seed(11)."""
    from runtime import random as rt_random
    from runtime.context import cpu
    mx.random.seed(11)
    out = torch.empty(shape, dtype=torch.float32)
    gen = rt_random.generator_for(cpu())
    if law == "uniform":
        return out.uniform_(first, second, generator=gen)
    return out.normal_(first, second, generator=gen)


@pytest.mark.parametrize("make,law,first,second", [
    (lambda: init.Uniform(0.3), "uniform", -0.3, 0.3),
    (lambda: init.Normal(0.2), "normal", 0.0, 0.2),
    (lambda: init.Xavier(), "uniform", -np.sqrt(3 / 45.0), np.sqrt(3 / 45.0)),
    (lambda: init.Xavier("gaussian", "in", 2), "normal", 0.0, np.sqrt(2 / 27.0)),
    (lambda: init.Xavier("uniform", "out", 1.5), "uniform", -np.sqrt(1.5 / 63.0),
     np.sqrt(1.5 / 63.0)),
    (lambda: init.MSRAPrelu("avg", 0.5), "normal", 0.0, np.sqrt(2 / 1.25 / 45.0)),
])
def test_random_fills_are_one_seeded_float32_draw_of_the_shape(make, law, first, second):
    """Each random initializer makes exactly one draw of the array's shape from the seeded
    generator (the draw order that fixed-seed results depend on)."""
    shape = (7, 3, 3, 3)       # fan_in 27, fan_out 63, mean 45
    want = _seeded_samples(shape, law, float(first), float(second))
    mx.random.seed(11)
    got = fill(make(), "conv_weight", shape)
    assert torch.equal(got.as_subclass(torch.Tensor), want)
    nxt = fill(make(), "conv_weight", shape)        # the stream goes on
    assert not torch.equal(nxt.as_subclass(torch.Tensor), want)


@pytest.mark.parametrize("rand_type,law,first,second", [("uniform", "uniform", -1.0, 1.0),
                                                        ("normal", "normal", 0.0, 1.0)])
@pytest.mark.parametrize("shape", [(3, 2, 2), (6, 2)])
def test_orthogonal_is_the_svd_factor_of_one_seeded_draw(rand_type, law, first, second, shape):
    rows, cols = shape[0], int(np.prod(shape[1:]))
    noise = _seeded_samples((rows, cols), law, first, second).numpy()
    u, _, v = np.linalg.svd(noise, full_matrices=False)
    want = (2.0 * (u if u.shape == noise.shape else v)).reshape(shape).astype(np.float32)
    mx.random.seed(11)
    got = fill(init.Orthogonal(2.0, rand_type), "w_weight", shape)
    np.testing.assert_array_equal(got.asnumpy(), want)


def test_bilinear_kernels_as_mxnet():
    """Values printed by mxnet 1.9.1 (the 3x3 kernel uses mxnet's formula as it is)."""
    arr = fill(init.Bilinear(), "up_weight", (1, 1, 4, 4))
    assert arr.asnumpy().ravel().tolist() == [0.0625, 0.1875, 0.1875, 0.0625,
                                              0.1875, 0.5625, 0.5625, 0.1875,
                                              0.1875, 0.5625, 0.5625, 0.1875,
                                              0.0625, 0.1875, 0.1875, 0.0625]
    arr = fill(init.Bilinear(), "up_weight", (2, 1, 3, 3))
    assert arr.asnumpy().ravel().tolist() == [0.0625, 0.1875, 0.1875, 0.1875, 0.5625, 0.5625,
                                              0.1875, 0.5625, 0.5625] * 2
    arr = fill(init.Bilinear(), "up_weight", (1, 1, 2, 2))
    assert arr.asnumpy().ravel().tolist() == [1.0, 0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"4-d weight .* got shape \(6, 3\)"):
        fill(init.Bilinear(), "up_weight", (6, 3))


def test_legacy_names_upsampling_and_spatial_transformer():
    with pytest.warns(DeprecationWarning):
        bias = nd.ones((6,))
        init.Uniform()("stn_loc_bias", bias)
        weight = nd.ones((2, 3))
        init.Uniform()("stn_loc_weight", weight)
        up = nd.zeros((1, 1, 2, 2))
        init.Uniform()("upsampling0_weight", up)
    assert bias.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]       # as mxnet 1.9.1
    assert weight.tolist() == [[0.0] * 3] * 2
    assert up.tolist() == [[[[1.0, 0.0], [0.0, 0.0]]]]


def test_set_verbosity_logs_mxnet_lines(caplog):
    caplog.set_level(logging.INFO)
    one = init.One()
    assert one.set_verbosity(True) is one
    one(init.InitDesc("fc_weight"), nd.zeros((2, 2)))
    one(init.InitDesc("w", {"__init__": "zeros"}), nd.zeros((4,)))
    one(init.InitDesc("fc_bias"), nd.zeros((4,)))
    init.One().set_verbosity(True, lambda x: "sum=%g" % float(x.sum()))(
        init.InitDesc("fc_weight"), nd.zeros((2, 2)))
    init.One()(init.InitDesc("quiet_weight"), nd.zeros((2,)))     # verbosity off: no line
    assert [r.getMessage() for r in caplog.records] == [       # as mxnet 1.9.1 logs them
        "Initialized fc_weight as weight: 1.0", "Initialized w as zeros: 0.0",
        "Initialized fc_bias as bias: 0.0", "Initialized fc_weight as weight: sum=4"]


def test_load_verbose_lines_and_mixed_error(caplog):
    caplog.set_level(logging.INFO)
    loader = init.Load({"arg:a_weight": nd.array([1., 2.])}, init.Constant(9), verbose=True)
    loader("a_weight", nd.zeros((2,)))
    loader(init.InitDesc("b_weight"), nd.zeros((2,)))
    assert [r.getMessage() for r in caplog.records] == ["Initialized a_weight by loading",
                                                        "Initialized b_weight by default"]
    with pytest.raises(AssertionError, match="Cannot Initialize c. Not found in loaded param"):
        init.Load({"a": nd.zeros((2,))})("c", nd.zeros((2,)))
    with pytest.raises(ValueError, match="Parameter name b_weight did not match any pattern"):
        init.Mixed(["a.*"], [init.Zero()])(init.InitDesc("b_weight"), nd.zeros((2,)))


def test_create_from_dict_json_object_and_constant_tensor_dumps():
    assert init.create({"initializer": "uniform", "scale": 0.2}).dumps() == \
        '["uniform", {"scale": 0.2}]'
    assert init.create('{"initializer": "normal", "sigma": 0.3}').dumps() == \
        '["normal", {"sigma": 0.3}]'
    assert init.Constant(nd.array([1.5, 2.])).dumps() == '["constant", {"value": [1.5, 2.0]}]'
    with pytest.raises(TypeError, match="initializer must be of string type"):
        init.create(3)
    with pytest.raises(ValueError, match="Incorrect factor type"):
        fill(init.Xavier(factor_type="zz"), "w_weight", (2, 2))
    with pytest.raises(ValueError, match="Unknown random type"):
        fill(init.Xavier(rnd_type="zz"), "w_weight", (2, 2))
