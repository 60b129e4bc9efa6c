"""simplify: ``x + 0`` folds where the 0 is a value known to be zero, also through the
layout changes of zeros (the zero gradients of unrolled RNN begin states), and only
there; the values stay the reference's."""
import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from compiler.frontend.reference import evaluate
from compiler.passes.infer_shapes import infer_shapes
from compiler.passes.simplify import simplify


def _ops(graph, name):
    return [n for n in graph.ops() if graph.node(n)["op"] == name]


def _check_same_values(before, after, feeds):
    want, got = evaluate(before, feeds), evaluate(after, feeds)
    assert list(want) == list(got)
    for a, b in zip(want.values(), got.values()):
        assert torch.equal(a, b)


def _zeros_through_layouts(y):
    """A zero value of shape (2, 3, 4) built the way unused begin states' gradients reach
    a graph's data: a Concat of zeros, reshaped and transposed (spelled with mxnet's
    aliases, which the graph keeps as written)."""
    z = sym.concat(sym.zeros_like(sym.slice_axis(y, axis=1, begin=0, end=1)),
                   sym.zeros(shape=(2, 11)), dim=1)          # (2, 12)
    return sym.transpose(sym.reshape(z, shape=(2, 4, 3)), axes=(0, 2, 1))


def test_a_sum_with_zeros_made_through_layout_changes_folds():
    x, y = sym.Variable("x"), sym.Variable("y")
    zero = _zeros_through_layouts(y)
    out = (x + zero) + zero + (zero + x * 2)
    before = infer_shapes(out.to_graph(), {"x": (2, 3, 4), "y": (2, 5)})
    after = simplify(before)
    assert len(_ops(before, "elemwise_add")) == 4
    # x + 2x is all that is left to add; the zeros and their layout changes are dead
    assert len(_ops(after, "elemwise_add")) == 1
    assert not _ops(after, "concat") and not _ops(after, "zeros")
    _check_same_values(before, after, {"x": torch.randn(2, 3, 4), "y": torch.randn(2, 5)})


@pytest.mark.parametrize("case", ["nonzero part", "nonzero constant", "broadcasting zero"])
def test_a_value_not_known_to_be_zero_is_kept(case):
    x, y = sym.Variable("x"), sym.Variable("y")
    shapes = {"x": (2, 10), "y": (2, 5)}
    if case == "nonzero part":          # one part of the Concat is data
        zero = sym.Concat(sym.zeros_like(y), y, dim=1)
    elif case == "nonzero constant":    # _zeros with a value attribute is not zero
        zero = sym.Concat(sym.zeros_like(y), sym._zeros(shape=(2, 5), value=3.0), dim=1)
    else:                               # x + 0 has the zero's shape, not x's
        zero, shapes = sym.zeros_like(y), {"x": (1, 5), "y": (2, 5)}
    before = infer_shapes(sym.broadcast_add(x, zero).to_graph(), shapes)
    after = simplify(before)
    assert len(_ops(after, "broadcast_add")) == 1
    _check_same_values(before, after, {k: torch.randn(v) for k, v in shapes.items()})


def test_unrolled_lstm_gradients_keep_their_values_with_the_zero_sums_gone(cpu_target):
    """In context: the data gradient of an unrolled 2-layer LSTM (zero begin states whose
    zero gradients reach the data) against the same graph's Executor on the Triton
    interpreter's or cpu kernels, and against torch's own LSTM."""
    T, N, C, H = 3, 2, 4, 5
    stack = mx.rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(mx.rnn.LSTMCell(num_hidden=H, prefix=f"l{i}_"))
    outs, _ = stack.unroll(T, inputs=mx.sym.Variable("data"), merge_outputs=True)
    exe = mx.sym.MakeLoss(mx.sym.sum(outs * mx.sym.Variable("w"))).simple_bind(
        mx.cpu(), data=(N, T, C), w=(N, T, H))
    torch.manual_seed(0)
    for arr in exe.arg_dict.values():
        arr[:] = torch.rand(arr.shape) - 0.5
    exe.forward(is_train=True)
    exe.backward()
    lstm = torch.nn.LSTM(C, H, num_layers=2, batch_first=True)
    with torch.no_grad():
        for i in range(2):
            for theirs, ours in (("weight_ih", "i2h_weight"), ("weight_hh", "h2h_weight"),
                                 ("bias_ih", "i2h_bias"), ("bias_hh", "h2h_bias")):
                getattr(lstm, f"{theirs}_l{i}").copy_(
                    torch.from_numpy(exe.arg_dict[f"l{i}_{ours}"].asnumpy()))
    data = torch.tensor(exe.arg_dict["data"].asnumpy(), requires_grad=True)
    w = torch.tensor(exe.arg_dict["w"].asnumpy())
    (lstm(data)[0] * w).sum().backward()
    torch.testing.assert_close(torch.tensor(exe.grad_dict["data"].asnumpy()), data.grad,
                               rtol=1e-5, atol=1e-6)
