"""Model parallelism: a graph that ``group2ctx`` spreads over several contexts
runs as one segment per context, with copies where an edge crosses contexts
(mxnet's ``_CrossDeviceCopy``). The oracle is the same graph bound on one
context: outputs, gradients, auxiliary states and trained parameters must
match. cpu(i) contexts are distinct contexts on one torch device, so every
cut, copy and gradient return runs here without a GPU."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.frontend.context_placement import assign_contexts, partition_by_context
from compiler.errors import MXNetError
from runtime.executor_partitioned import PartitionedExecutor

SEQ, HIDDEN, VOCAB, BATCH = 3, 8, 12, 2
LSTM_GROUPS = {"embed": mx.cpu(0), "layer0": mx.cpu(1), "layer1": mx.cpu(2),
               "decode": mx.cpu(0)}


def lstm_symbol():
    """mxnet's model-parallel LSTM layout: embedding, one context per layer, decoder."""
    data, label = mx.sym.Variable("data"), mx.sym.Variable("softmax_label")
    with mx.AttrScope(ctx_group="embed"):
        embed = mx.sym.Embedding(data, input_dim=VOCAB, output_dim=HIDDEN, name="embed")
        steps = mx.sym.SliceChannel(embed, num_outputs=SEQ, axis=1, squeeze_axis=True)
    inputs = [steps[t] for t in range(SEQ)]
    for i in range(2):
        with mx.AttrScope(ctx_group=f"layer{i}"):
            cell = mx.rnn.LSTMCell(HIDDEN, prefix=f"l{i}_")
            inputs, _ = cell.unroll(SEQ, inputs, merge_outputs=False)
    with mx.AttrScope(ctx_group="decode"):
        hidden = mx.sym.Concat(*inputs, dim=0)
        pred = mx.sym.FullyConnected(hidden, num_hidden=VOCAB, name="pred")
        flat = mx.sym.Reshape(mx.sym.transpose(label), shape=(-1,))
        return mx.sym.SoftmaxOutput(pred, flat, name="softmax")


def _fill(exe, seed=0):
    gen = torch.Generator().manual_seed(seed)
    for name in sorted(exe.arg_dict):
        arr = exe.arg_dict[name]
        if name in ("data", "softmax_label"):
            arr[:] = torch.randint(0, VOCAB, tuple(arr.shape), generator=gen).float()
        else:
            arr[:] = torch.randn(tuple(arr.shape), generator=gen) * 0.3


def _step(exe, out_grads=None):
    exe.forward(is_train=True)
    exe.backward(out_grads)
    return ([o.asnumpy() for o in exe.outputs],
            {n: g.asnumpy().copy() for n, g in exe.grad_dict.items() if g is not None})


def _assert_same(a, b):
    outs_a, grads_a = a
    outs_b, grads_b = b
    for x, y in zip(outs_a, outs_b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert sorted(grads_a) == sorted(grads_b)
    for n in grads_a:
        np.testing.assert_allclose(grads_a[n], grads_b[n], rtol=1e-5, atol=1e-6, err_msg=n)


def test_lstm_cut_into_a_segment_per_context_and_level():
    sym = lstm_symbol()
    exe = sym.simple_bind(mx.cpu(0), data=(BATCH, SEQ), softmax_label=(BATCH, SEQ),
                          group2ctx=LSTM_GROUPS)
    assert isinstance(exe, PartitionedExecutor)
    # embed -> layer0 -> layer1 -> decode: cpu(0) twice, at levels 0 and 3
    assert [(str(s.context), s.level) for s in exe._segments] == \
        [("cpu(0)", 0), ("cpu(1)", 1), ("cpu(2)", 2), ("cpu(0)", 3)]
    # one copy per time step into each layer and into the decoder; the label stays
    crossings = [(src, dst) for _, src, dst in exe.copies]
    assert crossings == [(mx.cpu(0), mx.cpu(1))] * SEQ + [(mx.cpu(1), mx.cpu(2))] * SEQ + \
        [(mx.cpu(2), mx.cpu(0))] * SEQ
    # parameters live on (and report) their layer's context, and are bound as they are
    assert exe.arg_dict["l1_i2h_weight"].context == mx.cpu(2)
    assert exe.grad_dict["l0_h2h_weight"].context == mx.cpu(1)
    layer1 = exe.segment_executors[2]
    assert layer1.arg_dict["l1_i2h_weight"] is exe.arg_dict["l1_i2h_weight"]
    assert exe.outputs[0].context == mx.cpu(0)
    text = exe.debug_str()
    assert text.count("Op:_CrossDeviceCopy") == 3 * SEQ
    assert "Segment 3 on cpu(0) (level 3)" in text and text.rstrip().endswith("segments)")


def test_lstm_outputs_and_gradients_match_one_context():
    shapes = dict(data=(BATCH, SEQ), softmax_label=(BATCH, SEQ))
    placed = lstm_symbol().simple_bind(mx.cpu(0), group2ctx=LSTM_GROUPS, **shapes)
    plain = lstm_symbol().simple_bind(mx.cpu(0), **shapes)
    _fill(placed), _fill(plain)
    _assert_same(_step(placed), _step(plain))
    # and again: every copy is refreshed on each step
    for exe in (placed, plain):
        exe.arg_dict["l0_i2h_weight"][:] *= 0.5
    _assert_same(_step(placed), _step(plain))


def test_reshape_keeps_the_partition_and_shares_each_segments_memory():
    shapes = dict(data=(4, SEQ), softmax_label=(4, SEQ))
    big = lstm_symbol().simple_bind(mx.cpu(0), group2ctx=LSTM_GROUPS, **shapes)
    small = big.reshape(data=(BATCH, SEQ), softmax_label=(BATCH, SEQ))
    assert isinstance(small, PartitionedExecutor)
    assert small.arg_dict["pred_weight"] is big.arg_dict["pred_weight"]
    for a, b in zip(small.segment_executors, big.segment_executors):
        assert a._pool is b._pool
    plain = lstm_symbol().simple_bind(mx.cpu(0), data=(BATCH, SEQ), softmax_label=(BATCH, SEQ))
    _fill(small), _fill(plain)
    _assert_same(_step(small), _step(plain))
    assert small.outputs[0].shape == (BATCH * SEQ, VOCAB)


def _shared_weight_symbol():
    """One weight read on two contexts: its gradient is the sum of both."""
    x, w = mx.sym.Variable("x"), mx.sym.Variable("w")
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.FullyConnected(x, weight=w, num_hidden=4, no_bias=True, name="fc_a")
    with mx.AttrScope(ctx_group="dev2"):
        b = mx.sym.FullyConnected(mx.sym.tanh(a), weight=w, num_hidden=4, no_bias=True,
                                  name="fc_b")
        return mx.sym.sum(b * b) + mx.sym.sum(mx.sym.BlockGrad(a) * b)


@pytest.mark.parametrize("req", ["write", "add"])
def test_parameter_read_on_two_contexts_gets_the_summed_gradient(req):
    groups = {"dev1": mx.cpu(1), "dev2": mx.cpu(2)}
    placed = _shared_weight_symbol().simple_bind(mx.cpu(0), x=(3, 4), w=(4, 4),
                                                 grad_req=req, group2ctx=groups)
    plain = _shared_weight_symbol().simple_bind(mx.cpu(0), x=(3, 4), w=(4, 4), grad_req=req)
    # w and x live on cpu(0) (no group): both segments read copies of them
    assert placed.arg_dict["w"].context == mx.cpu(0)
    assert sorted(n for n, _, _ in placed.copies) == ["fc_a_output", "w", "w", "x"]
    for exe in (placed, plain):
        _fill(exe, seed=3)
        for g in exe.grad_dict.values():
            g[:] = 1.0
    head = [mx.nd.ones((1,))]
    first = _step(placed, head), _step(plain, head)
    _assert_same(*first)
    second = _step(placed, head), _step(plain, head)
    _assert_same(*second)
    if req == "add":   # accumulated over both steps, from a start of ones
        np.testing.assert_allclose(second[0][1]["w"], 2 * first[0][1]["w"] - 1, rtol=1e-5)


def test_batchnorm_state_on_another_context_is_updated_through_the_copy():
    def symbol():
        x = mx.sym.Variable("x")
        with mx.AttrScope(ctx_group="dev1"):
            h = mx.sym.FullyConnected(x, num_hidden=5, name="fc")
        gamma, beta = mx.sym.Variable("bn_gamma"), mx.sym.Variable("bn_beta")
        mean, var = mx.sym.Variable("bn_moving_mean"), mx.sym.Variable("bn_moving_var")
        with mx.AttrScope(ctx_group="dev2"):
            bn = mx.sym.BatchNorm(h, gamma=gamma, beta=beta, moving_mean=mean,
                                  moving_var=var, fix_gamma=False, name="bn")
            return mx.sym.MakeLoss(mx.sym.sum(bn * bn))
    placed = symbol().simple_bind(mx.cpu(0), x=(6, 3),
                                  group2ctx={"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    plain = symbol().simple_bind(mx.cpu(0), x=(6, 3))
    assert placed.aux_dict["bn_moving_mean"].context == mx.cpu(0)
    for exe in (placed, plain):
        _fill(exe, seed=5)
        exe.aux_dict["bn_moving_var"][:] = 1.0
        exe.aux_dict["bn_moving_mean"][:] = 0.0
    _assert_same(_step(placed), _step(plain))
    for name in ("bn_moving_mean", "bn_moving_var"):
        np.testing.assert_allclose(placed.aux_dict[name].asnumpy(),
                                   plain.aux_dict[name].asnumpy(), rtol=1e-6)
    assert float(placed.aux_dict["bn_moving_mean"].abs().sum()) > 0


def test_non_loss_output_needs_its_gradient_named_by_the_whole_graph():
    x = mx.sym.Variable("x")
    with mx.AttrScope(ctx_group="dev1"):
        h = mx.sym.tanh(x, name="t")
    with mx.AttrScope(ctx_group="dev2"):
        out = mx.sym.Group([mx.sym.sigmoid(h, name="s"), h * 2])
    exe = out.simple_bind(mx.cpu(0), x=(2, 2), group2ctx={"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match=r"output 1 \('_mulscalar\d+_output'\)"):
        exe.backward([mx.nd.ones((2, 2))])
    # a value that is an output of the graph and also crosses: both gradients count
    exe2 = mx.sym.Group([h, mx.sym.sigmoid(h, name="s2")]).simple_bind(
        mx.cpu(0), x=(2, 2), group2ctx={"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    exe2.arg_dict["x"][:] = torch.tensor([[0.1, -0.4], [0.7, 2.0]])
    exe2.forward(is_train=True)
    exe2.backward([mx.nd.ones((2, 2)), mx.nd.ones((2, 2))])
    t = torch.tanh(torch.tensor([[0.1, -0.4], [0.7, 2.0]]))
    s = torch.sigmoid(t)
    expected = (1 + s * (1 - s)) * (1 - t * t)
    np.testing.assert_allclose(exe2.grad_dict["x"].asnumpy(), expected.numpy(), rtol=1e-6)


def test_operator_in_an_unmapped_group_is_refused():
    x = mx.sym.Variable("x")
    with mx.AttrScope(ctx_group="dev1"):
        h = mx.sym.tanh(x)
    with mx.AttrScope(ctx_group="dev9"):
        out = mx.sym.sigmoid(h, name="sig")
    with pytest.raises(MXNetError, match=r"sigmoid 'sig' is in ctx_group 'dev9'.*\['dev1'\]"):
        out.simple_bind(mx.cpu(0), x=(2, 2), group2ctx={"dev1": mx.cpu(1)})


def test_assign_contexts_follows_mxnets_propagation():
    """Ungrouped operators follow their first input; input-less ones their consumer."""
    x = mx.sym.Variable("x")
    with mx.AttrScope(ctx_group="g"):
        h = mx.sym.tanh(x, name="grouped")
    ungrouped = mx.sym.relu(h, name="follows_input")
    zeros = mx.sym.zeros(shape=(2, 2), name="no_inputs")
    with mx.AttrScope(ctx_group="k"):
        out = mx.sym.elemwise_add(zeros, ungrouped, name="sum")
    where = assign_contexts(out, {"x": "A"}, {"g": "B", "k": "C"}, "DEFAULT")
    by_name = {n.name: where[id(n)] for n in _nodes(out)}
    assert by_name == {"x": "A", "grouped": "B", "follows_input": "B", "no_inputs": "C",
                       "sum": "C"}
    segments, outputs = partition_by_context(out, where)
    assert [(s.context, s.level) for s in segments] == [("B", 0), ("C", 1)]
    assert outputs == [(1, 0)]
    assert segments[1].received == {"follows_input_output_copy": (0, 0)}


def _nodes(symbol):
    from compiler.symbol_node import topo
    return topo(symbol._outputs)


def _matrix_factorization():
    """mxnet's model-parallel matrix_factorization example's model, sizes shrunk."""
    with mx.AttrScope(ctx_group="dev1"):
        user = mx.sym.Embedding(mx.sym.Variable("user"), weight=mx.sym.Variable("user_weight"),
                                input_dim=20, output_dim=6)
        item = mx.sym.Embedding(mx.sym.Variable("item"), weight=mx.sym.Variable("item_weight"),
                                input_dim=30, output_dim=6)
    with mx.AttrScope(ctx_group="dev2"):
        user = mx.sym.FullyConnected(mx.sym.Activation(user, act_type="relu"), num_hidden=5,
                                     weight=mx.sym.Variable("fc_user_weight"),
                                     bias=mx.sym.Variable("fc_user_bias"))
        item = mx.sym.FullyConnected(mx.sym.Activation(item, act_type="relu"), num_hidden=5,
                                     weight=mx.sym.Variable("fc_item_weight"),
                                     bias=mx.sym.Variable("fc_item_bias"))
        pred = mx.sym.Flatten(mx.sym.sum(user * item, axis=1))
        return mx.sym.LinearRegressionOutput(pred, mx.sym.Variable("score"))


def _train(contexts, group2ctxs):
    rng = np.random.RandomState(0)
    users, items = rng.randint(0, 20, 64), rng.randint(0, 30, 64)
    score = (users % 5 + items % 3).astype(np.float32)
    it = mx.io.NDArrayIter({"user": users.astype(np.float32), "item": items.astype(np.float32)},
                           {"score": score}, batch_size=16)
    mod = mx.mod.Module(_matrix_factorization(), context=contexts, data_names=["user", "item"],
                        label_names=["score"], group2ctxs=group2ctxs)
    metric = mx.metric.MSE()
    mx.random.seed(7)
    mod.fit(it, eval_metric=metric, num_epoch=3, optimizer="sgd",
            optimizer_params={"learning_rate": 0.05, "momentum": 0.9},
            initializer=mx.init.Xavier())
    args, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in args.items()}, metric.get()[1]


def test_module_fit_with_group2ctxs_matches_one_context():
    """mxnet's model-parallel matrix factorization, placed and on one context."""
    placed, placed_mse = _train([mx.cpu(0)], {"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    plain, plain_mse = _train([mx.cpu(0)], None)
    for name in plain:
        np.testing.assert_allclose(placed[name], plain[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    assert placed_mse == pytest.approx(plain_mse, rel=1e-4)


def test_module_data_and_model_parallel_together():
    """Two data-parallel slices, each spread over its own pair of contexts."""
    groups = {"dev1": [mx.cpu(2), mx.cpu(4)], "dev2": [mx.cpu(3), mx.cpu(5)]}
    placed, placed_mse = _train([mx.cpu(0), mx.cpu(1)], groups)
    plain, plain_mse = _train([mx.cpu(0), mx.cpu(1)], None)
    for name in plain:
        np.testing.assert_allclose(placed[name], plain[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    assert placed_mse == pytest.approx(plain_mse, rel=1e-4)


def test_skip_connection_within_one_context_reads_the_array_without_a_copy():
    """A -> B -> A with an A -> A edge past B: the second A segment reads the first's
    output array itself; only the edges that change context are copies."""
    x = mx.sym.Variable("x")
    with mx.AttrScope(ctx_group="a"):
        h = mx.sym.FullyConnected(x, num_hidden=4, name="fc1")
    with mx.AttrScope(ctx_group="b"):
        m = mx.sym.tanh(h, name="mid")
    with mx.AttrScope(ctx_group="a"):
        out = mx.sym.MakeLoss(mx.sym.sum(mx.sym.sigmoid(h) * m), name="loss")
    groups = {"a": mx.cpu(1), "b": mx.cpu(2)}
    placed = out.simple_bind(mx.cpu(1), x=(3, 5), group2ctx=groups)
    plain = out.simple_bind(mx.cpu(0), x=(3, 5))
    assert [(str(s.context), s.level) for s in placed._segments] == \
        [("cpu(1)", 0), ("cpu(2)", 1), ("cpu(1)", 2)]
    assert [(src, dst) for _, src, dst in placed.copies] == \
        [(mx.cpu(1), mx.cpu(2)), (mx.cpu(2), mx.cpu(1))]
    first, last = placed.segment_executors[0], placed.segment_executors[2]
    shared = [a for a in last.arg_dict.values() if any(a is o for o in first.outputs)]
    assert len(shared) == 1
    for exe in (placed, plain):
        _fill(exe, seed=11)
    _assert_same(_step(placed), _step(plain))
