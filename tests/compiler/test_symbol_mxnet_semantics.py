"""Symbol behaviour mxnet 1.9.1 defines (values recorded from mxnet 1.9.1)."""
import json

import numpy as np
import pytest

import module_api as mx


def test_get_children_of_groups_and_multi_output_nodes():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    assert mx.sym.Group([a + b, a * 2]).get_children().list_outputs() == ["a", "b", "a"]
    assert mx.sym.Group([a + b, b - a]).get_children().list_outputs() == ["a", "b", "b", "a"]
    split = mx.sym.split(a, num_outputs=3)
    assert split.get_children().list_outputs() == ["a"]
    assert split[1].get_children().list_outputs() == ["a"]
    assert a.get_children() is None


@pytest.mark.parametrize("make", [lambda a, b: a + b, lambda a, b: a])
def test_bool_of_a_symbol_raises_as_in_mxnet(make):
    s = make(mx.sym.var("a"), mx.sym.var("b"))
    with pytest.raises(mx.base.NotImplementedForSymbol,
                       match=r'Function __bool__ \(namely operator "bool"\) is not implemented '
                             r'for Symbol and only available in NDArray.'):
        bool(s)


def test_infer_type_partial_leaves_unknown_arguments_none():
    # mxnet 1.9.1's test_symbol_infer_type: Cast fixes fc1's dtype, not data's
    data = mx.sym.Variable("data")
    mlp = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Cast(data, dtype="float32"),
                                                     name="fc1", num_hidden=8), name="softmax")
    assert mlp.infer_type() == (None, None, None)
    arg, out, aux = mlp.infer_type_partial()
    assert arg == [None, np.float32, np.float32, np.float32]
    assert out == [np.float32] and aux == []
    arg, out, aux = mlp.infer_type(data=np.float16)
    assert arg == [np.float16, np.float32, np.float32, np.float32]


def _twice(head, a):
    d = a + 1          # one node read by both heads
    return mx.sym.Group([head(d), head(d)])


# mxnet 1.9.1's test_eliminate_common_expr: symbol, its inputs, nodes merged
CSE_CASES = [
    ("(a+1)+(a+2)", lambda a, b, c: (a + 1) + (a + 2), 0, []),
    ("(a+b)+(a+b)", lambda a, b, c: (a + b) + (a + b), 1, []),
    ("((a+b)+c)+((a+b)+c)", lambda a, b, c: ((a + b) + c) + ((a + b) + c), 2, []),
    # both heads are one value after merging: the second reads it through a _copy
    ("Group(a*d, a*d)", lambda a, b, c: _twice(lambda d: a * d, a), 0, ["_copy"]),
    ("Group(a*d+b, a*d+b)", lambda a, b, c: _twice(lambda d: a * d + b, a), 1, ["_copy"]),
    # random draws are never merged
    ("Dropout+Dropout", lambda a, b, c: mx.sym.Dropout(a) + mx.sym.Dropout(a), 0, []),
]


@pytest.mark.parametrize("label,make,saved,extra_ops", CSE_CASES, ids=[c[0] for c in CSE_CASES])
def test_get_optimized_symbol_merges_common_expressions_as_mxnet(label, make, saved,
                                                                  extra_ops):
    a, b, c = (mx.sym.Variable(n) for n in "abc")
    s = make(a, b, c)
    ex = s.simple_bind(mx.cpu(), **{n: (3, 4) for n in s.list_arguments()})
    opt = ex.get_optimized_symbol()
    assert len(opt.get_internals()) + saved == len(s.get_internals())
    assert len(opt.list_outputs()) == len(s.list_outputs())
    ops = {n["op"] for n in json.loads(opt.tojson())["nodes"]}
    assert set(extra_ops) <= ops
    # the optimized symbol computes what the original does
    inputs = {n: mx.nd.array(np.arange(12.0).reshape(3, 4) + k)
              for k, n in enumerate(s.list_arguments())}
    if label != "Dropout+Dropout":
        for want, got in zip(s.eval(mx.cpu(), **inputs), opt.eval(mx.cpu(), **inputs)):
            np.testing.assert_allclose(got.asnumpy(), want.asnumpy())


def test_common_expressions_are_kept_under_mxnets_switch_as_the_bind_saw_it(monkeypatch):
    """MXNET_ELIMINATE_COMMON_EXPR=0 at bind: nothing merged, in the optimized symbol
    (asked after the switch is gone, as mxnet's test does) and in the compiled program,
    which has its own cache key (the merged one is not reused), with the same values."""
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    s = mx.sym.Group([mx.sym.exp(a + b) * 2, mx.sym.exp(a + b) * 3])
    inputs = {"a": mx.nd.array(np.arange(12.0).reshape(3, 4)),
              "b": mx.nd.array(np.ones((3, 4)))}
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "0")
    kept = s.simple_bind(mx.cpu(), a=(3, 4), b=(3, 4))
    monkeypatch.delenv("MXNET_ELIMINATE_COMMON_EXPR")
    merged = s.simple_bind(mx.cpu(), a=(3, 4), b=(3, 4))
    assert len(kept.get_optimized_symbol().get_internals()) == len(s.get_internals())
    assert len(merged.get_optimized_symbol().get_internals()) + 2 == len(s.get_internals())
    kept_ops, merged_ops = (sum(g["op"] != "null" for g in json.loads(
        e.get_optimized_symbol().tojson())["nodes"]) for e in (kept, merged))
    assert (kept_ops, merged_ops) == (6, 4)
    for want, got in zip(merged.forward(**inputs), kept.forward(**inputs)):
        np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    # the kernels compute exp twice where nothing is merged
    kept_exps, merged_exps = (sum(ops.count("exp") for ops in e.programs[0].groups)
                              for e in (kept, merged))
    assert (kept_exps, merged_exps) == (2, 1)


def test_a_program_compiled_after_the_bind_follows_the_switch_the_bind_saw(monkeypatch):
    """A training executor of a graph with Dropout compiles its inference program when
    first asked for it (here by ``programs``, after the switch is gone): bound under
    MXNET_ELIMINATE_COMMON_EXPR=0, that program keeps both exps too."""
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    s = mx.sym.Group([mx.sym.exp(a + b) * 2, mx.sym.exp(a + b) * 3, mx.sym.Dropout(a)])
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "0")
    kept = s.simple_bind(mx.cpu(), a=(3, 4), b=(3, 4))
    monkeypatch.delenv("MXNET_ELIMINATE_COMMON_EXPR")
    assert sum(ops.count("exp") for ops in kept.programs[1].groups) == 2
    out = kept.forward(is_train=False, a=mx.nd.ones((3, 4)), b=mx.nd.ones((3, 4)))
    np.testing.assert_allclose(out[1].asnumpy(), 3 * np.exp(2.0) * np.ones((3, 4)),
                               rtol=1e-6)


FLUENT_UNARY = ["norm", "round", "rint", "fix", "floor", "ceil", "trunc", "sign", "sin",
                "degrees", "expm1", "reciprocal", "argmax_channel", "shape_array",
                "size_array", "rsqrt", "cbrt", "softmin", "log1p"]


@pytest.mark.parametrize("func", FLUENT_UNARY)
def test_fluent_methods_are_the_operator_of_their_name(func):
    # mxnet 1.9.1's test_symbol_fluent: x.f() equals mx.sym.f(x), auto name included
    x = np.linspace(0.1, 2.3, 12, dtype=np.float32).reshape(3, 4)
    with mx.name.NameManager():
        data = mx.sym.Variable("data")
        regular = getattr(mx.sym, func)(data, name=func + "0")
        fluent = getattr(data, func)()
    assert regular.list_outputs() == fluent.list_outputs()
    want = regular.eval(mx.cpu(), data=mx.nd.array(x))[0].asnumpy()
    got = fluent.eval(mx.cpu(), data=mx.nd.array(x))[0].asnumpy()
    np.testing.assert_array_equal(got, want)


def test_fluent_flip_is_named_flip():
    with mx.name.NameManager():
        assert mx.sym.Variable("x").flip(axis=0).list_outputs() == ["flip0_output"]


def test_infer_shape_partial_gives_mxnets_partial_answers():
    # answers recorded from mxnet 1.9.1 (its test_symbol_infer_shape and two more)
    prev = mx.sym.Variable("prevstate")
    out = mx.sym.Activation(mx.sym.elemwise_add(
        mx.sym.FullyConnected(mx.sym.Variable("data"), name="x2h", num_hidden=128),
        mx.sym.FullyConnected(prev, name="h2h", num_hidden=128)), name="out", act_type="relu")
    assert out.infer_shape(data=(10, 64)) == (None, None, None)
    assert out.infer_shape_partial(data=(10, 64)) == (
        [(10, 64), (128, 64), (128,), (), (), ()], [(10, 128)], [])

    data = mx.sym.Variable("data", shape=(1, 0, 0, 0))
    conv = mx.sym.Convolution(data=mx.sym.cast(data, dtype="float16"),
                              weight=mx.sym.cast(mx.sym.Variable("weight"), dtype="float16"),
                              pad=(3, 3), num_filter=64, stride=(2, 2), no_bias=True,
                              kernel=(7, 7))
    assert conv.infer_shape_partial() == ([(1, 0, 0, 0), (64, 0, 7, 7)], [(1, 64, 0, 0)], [])

    a, b = mx.sym.Variable("a", shape=(0, 3)), mx.sym.Variable("b")
    fc = mx.sym.FullyConnected(a, num_hidden=5, name="fc") + b
    assert fc.infer_shape_partial() == ([(0, 3), (5, 3), (5,), (0, 5)], [(0, 5)], [])
    assert mx.sym.Concat(a, b, dim=1).infer_shape_partial(b=(4, 2)) == (
        [(4, 3), (4, 2)], [(4, 5)], [])


def test_a_positional_none_is_an_input_left_out():
    """mxnet's generated signatures take None for an input left out (its arguments as
    mxnet 1.9.1 lists them), and a None past the inputs is an attribute's."""
    x, w, b = mx.sym.var("x"), mx.sym.var("w"), mx.sym.var("b")
    conv = mx.sym.Convolution(x, w, None, num_filter=2, kernel=(3, 3), no_bias=True)
    assert conv.list_arguments() == ["x", "w"]
    conv = mx.sym.Convolution(x, None, b, num_filter=2, kernel=(3, 3), name="cv")
    assert conv.list_arguments() == ["x", "cv_weight", "b"]
    resize = mx.sym.contrib.BilinearResize2D(x, None, scale_height=2., scale_width=2.)
    assert resize.list_arguments() == ["x"]
    assert resize.infer_shape(x=(1, 1, 2, 2))[1] == [(1, 1, 4, 4)]
    fc = mx.sym.FullyConnected(x, None, None, num_hidden=3, no_bias=True, name="f")
    assert fc.list_arguments() == ["x", "f_weight"]
    assert mx.sym.sum(x, None).infer_shape(x=(2, 3))[1] == [(1,)]
    with pytest.raises(mx.MXNetError, match="takes only"):
        mx.sym.Convolution(x, w, None, b, num_filter=2, kernel=(3, 3), no_bias=True)
