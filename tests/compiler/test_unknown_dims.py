"""mxnet's 0-as-unknown dims (``sym.zeros(shape=(0, H))`` begin states,
``Variable(shape=(0, H))`` hints, a constant's -1) are filled from the other operands,
forwards and backwards (through elementwise operators, dim links such as
transpose's, and Reshape's size), as mxnet 1.9.1 does: shapes, partial shapes and
outputs against mxnet-made fixtures (tests/fixtures/make_unknown_dims_fixtures.py)."""
import json
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError

FIXTURES = json.load(open(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                       "unknown_dims.json")))


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_infer_shape_matches_mxnet(name):
    case = FIXTURES[name]
    sym = mx.sym.load_json(case["symbol"])
    infer = sym.infer_shape_partial if case["partial"] else sym.infer_shape
    args, outs, _ = infer(**{k: tuple(v) for k, v in case["given"].items()})
    assert sym.list_arguments() == case["arg_names"]
    assert [list(s) for s in args] == case["arg_shapes"]
    assert [list(s) for s in outs] == case["out_shapes"]


@pytest.mark.parametrize("name", sorted(n for n in FIXTURES if "outputs" in FIXTURES[n]))
def test_forward_matches_mxnet(cpu_target, name):
    case = FIXTURES[name]
    sym = mx.sym.load_json(case["symbol"])
    arrays = {n: torch.tensor(case["args"][n], dtype=torch.float32).reshape(s)
              for n, s in zip(case["arg_names"], case["arg_shapes"])}
    exe = sym.bind(mx.cpu(), {n: mx.nd.array(v.numpy()) for n, v in arrays.items()})
    for got, want in zip(exe.forward(), case["outputs"]):
        np.testing.assert_allclose(got.asnumpy().ravel(), np.array(want, np.float32),
                                   rtol=1e-5, atol=1e-6)


def test_simple_bind_fills_begin_state_variables_and_trains():
    """mxnet's test_module_states pattern: begin-state Variables get their
    batch size from the data, and a backward pass runs."""
    stack = mx.rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(mx.rnn.LSTMCell(num_hidden=6, prefix=f"l{i}_"))
    begin = stack.begin_state(func=mx.sym.Variable)
    outs, states = stack.unroll(3, begin_state=begin, inputs=mx.sym.Variable("data"),
                                merge_outputs=True)
    exe = mx.sym.MakeLoss(mx.sym.sum(outs)).simple_bind(mx.cpu(), data=(4, 3, 5))
    for s in begin:
        assert tuple(exe.arg_dict[s.name].shape) == (4, 6)
    torch.manual_seed(0)
    for arr in exe.arg_dict.values():
        arr[:] = torch.rand(arr.shape) - 0.5
    exe.forward(is_train=True)
    exe.backward()
    assert float(exe.grad_dict["l0_i2h_weight"].abs().sum()) > 0


def test_a_dim_nothing_fills_stays_unknown_with_the_usual_error():
    z = mx.sym.zeros(shape=(0, 3))
    v = mx.sym.var("v")
    with pytest.raises(MXNetError, match=r"unknown \(0\) dims of \[.*variable 'v' \(0, 2\)"):
        (mx.sym.FullyConnected(z, num_hidden=2, name="fc") + v).simple_bind(mx.cpu())


def test_conflicting_known_dims_are_still_an_error():
    a, b = mx.sym.var("a"), mx.sym.var("b", shape=(0, 4))
    with pytest.raises(MXNetError, match="shape"):
        (a + b).simple_bind(mx.cpu(), a=(2, 3))


def test_reshape_backwards_refuses_sizes_that_disagree():
    # (2, ?, 5, 5) has a multiple of 50 elements; (2, 77) has 154: no dim decides it, and
    # none is made up (154 // 50 would say 3)
    out = mx.sym.elemwise_add(mx.sym.var("data").reshape((0, -1)), mx.sym.ones(shape=(2, 77)))
    with pytest.raises(MXNetError, match=r"reshape\d+:\(2, 0\).*\(2, 77\)"):
        out.infer_shape(data=(2, 0, 5, 5))


def test_a_constant_shape_takes_minus_one_as_unknown_and_refuses_other_negatives():
    assert (mx.sym.ones(shape=(2, 3)) + mx.sym.zeros(shape=(-1, 3))).infer_shape()[1] == \
        [(2, 3)]
    with pytest.raises(MXNetError, match="negative dim other than -1"):
        mx.sym.ones(shape=(2, -2))


def test_a_known_dim_sliced_to_nothing_is_still_refused():
    # only an unknown (0) input dim passes through slice unknown
    with pytest.raises(MXNetError, match="select no element of axis 1"):
        mx.sym.slice(mx.sym.var("d"), begin=(0, 5), end=(2, 5)).infer_shape(d=(3, 6))
    with pytest.raises(MXNetError, match="slice_axis"):
        mx.sym.slice_axis(mx.sym.var("d"), axis=1, begin=4, end=2).infer_shape(d=(3, 6))


def test_a_strided_convolution_dim_is_not_back_calculated():
    # out = (in + 2 pad - 3) // 2 + 1 has two answers for in: only stride-1 dims are filled
    a = mx.sym.Variable("a", shape=(0, 2, 0, 0))
    conv = mx.sym.Convolution(data=a, num_filter=3, kernel=(3, 3), stride=(2, 1), name="conv")
    args, _, _ = (conv + mx.sym.Variable("c", shape=(4, 3, 5, 6))).infer_shape_partial()
    assert tuple(args[0]) == (4, 2, 0, 8)


def test_identity_like_rhs_gives_its_consumers_shape_to_the_variable_behind_rhs(cpu_target):
    """mxnet's test_backward_infer: FullyConnected's weight shape reaches ``weight``
    through ``_identity_with_attr_like_rhs``; the gradient goes to lhs only (rhs: zero)."""
    w, data = mx.sym.Variable("weight"), mx.sym.Variable("data")
    wt = mx.sym._internal._identity_with_attr_like_rhs(
        mx.sym.broadcast_add(w, mx.sym.Variable("wshift", shape=(1,))), w)
    out = mx.sym.FullyConnected(data=data, weight=wt, num_hidden=3, no_bias=True)
    exe = out.simple_bind(mx.cpu(), data=(4, 5))
    assert tuple(exe.arg_dict["weight"].shape) == (3, 5)
    torch.manual_seed(0)
    feeds = {n: torch.rand(a.shape) - 0.5 for n, a in exe.arg_dict.items()}
    for n, v in feeds.items():
        exe.arg_dict[n][:] = v
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((4, 3)))
    x = feeds["data"]
    wv = feeds["weight"].clone().requires_grad_()
    sv = feeds["wshift"].clone().requires_grad_()
    (x @ (wv + sv).T).sum().backward()
    np.testing.assert_allclose(exe.grad_dict["weight"].asnumpy(), wv.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(exe.grad_dict["wshift"].asnumpy(), sv.grad.numpy(), rtol=1e-5)


def test_identity_like_rhs_links_unknown_dims_both_ways():
    out = mx.sym._internal._identity_with_attr_like_rhs(
        mx.sym.Variable("a", shape=(0, 3)), mx.sym.Variable("b", shape=(2, 0)))
    args, outs, _ = out.infer_shape()
    assert [tuple(s) for s in args] == [(2, 3), (2, 3)] and outs == [(2, 3)]


def test_a_rule_that_refuses_partial_shapes_leaves_the_error_to_full_inference():
    """An operator's rule raising on partial shapes (here an unsupported layout, and a
    transpose's axes against the data's rank) is reported by the full inference as an
    MXNetError naming the node, never as the rule's internal ShapeError."""
    from compiler.ops.registry import ShapeError
    conv = mx.sym.Convolution(data=mx.sym.Variable("a", shape=(0, 10, 0, 0)), num_filter=2,
                              kernel=(3, 3), pad=(1, 1), layout="NHWC", name="conv")
    t = mx.sym.transpose(mx.sym.Variable("x", shape=(0, 3)), axes=(0, 1, 2))
    for sym in (conv + mx.sym.Variable("c", shape=(5, 2, 32, 32)),
                t + mx.sym.ones(shape=(2, 3))):
        try:
            sym.infer_shape()
        except ShapeError as exc:
            pytest.fail(f"the rule's own error leaked: {exc}")
        except MXNetError:
            pass


def test_identity_like_rhs_after_a_view_as_a_head_and_fused(cpu_target):
    """Its value is lhs's: read through a transpose, as a graph head (a copy of a view)
    and fused with the product after it, on both cpu targets."""
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    same = mx.sym._internal._identity_with_attr_like_rhs(mx.sym.transpose(x), y)
    out = mx.sym.Group([same, same * 2.0])
    xv = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    exe = out.bind(mx.cpu(), {"x": mx.nd.array(xv), "y": mx.nd.zeros((3, 2))})
    head, doubled = exe.forward()
    np.testing.assert_array_equal(head.asnumpy(), xv.T)
    np.testing.assert_array_equal(doubled.asnumpy(), 2 * xv.T)


def test_a_source_of_unknown_shape_left_alone_is_refused_by_name():
    for source in (mx.sym.zeros(shape=(), name="z"), mx.sym.random.normal(name="r")):
        with pytest.raises(MXNetError, match=r"'[zr]' has no inputs, so its own `shape` decides"):
            source.eval(mx.cpu())
    with mx.np_shape():             # under NumPy semantics () is a scalar's shape
        assert mx.sym.zeros(shape=()).eval(mx.cpu())[0].shape == ()


def test_symbols_given_to_an_operator_without_inputs_are_dropped_as_in_mxnet():
    """mxnet's compose ignores them: its test_random builds ``randn(data=...) + X``."""
    x = mx.sym.var("X")
    y = mx.sym.random.randn(data=mx.sym.ones((7, 7)), loc=0, scale=1) + x
    assert y.list_arguments() == ["X"]
    out = y.eval(mx.cpu(), X=mx.nd.zeros((300, 4)))[0].asnumpy()
    assert out.shape == (300, 4) and abs(out.mean()) < 0.1 and abs(out.std() - 1) < 0.1
    with pytest.raises(MXNetError, match="has no input 'foo'"):
        mx.sym.relu(data=x, foo=x)
