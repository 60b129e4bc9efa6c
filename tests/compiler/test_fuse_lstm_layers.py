"""Chains of mx.rnn.LSTMCell steps as oneDNN LSTM layers on the cpu target
(``compiler/passes/fuse_lstm_layers.py``, ``compiler/ops/lstm_layer.py``).

The oracle is the steps' own kernels (``SYMTRITON_LSTM_LAYERS=0``, checked against
torch's LSTM in ``tests/module_api/test_rnn_cells.py``) and the step-by-step torch
arithmetic of ``reference_layer``: outputs, returned states and every gradient agree,
with the layers made where a chain is whole and the steps kept where it is not.
"""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.artifacts.compile import compile_symbol, lstm_layers_for
from compiler.errors import MXNetError
from compiler.ops import lstm_layer
from runtime.context import cpu

# the fallback tests below run on any torch; the rest need oneDNN's RNN kernels (the
# pinned CPU wheel has them)
needs_onednn = pytest.mark.skipif(not lstm_layer.available(), reason="torch without oneDNN")

N, H = 3, 6


def _layer_ops(prog):
    return sorted(ln.config["op"] for ln in prog.launches
                  if ln.is_extern and "lstm_layer" in ln.config["op"])


def _lm(steps, layers=2, vocab=11, embed=5):
    """lstm_bucketing's model, small: Embedding, stacked LSTMCells, FC, SoftmaxOutput."""
    stack = mx.rnn.SequentialRNNCell()
    for i in range(layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=H, prefix=f"l{i}_"))
    data = mx.sym.Embedding(mx.sym.Variable("data"), input_dim=vocab, output_dim=embed,
                            name="embed")
    out = stack.unroll(steps, inputs=data, merge_outputs=True)[0]
    pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, H)), num_hidden=vocab,
                                 name="pred")
    label = mx.sym.Reshape(mx.sym.Variable("softmax_label"), shape=(-1,))
    return mx.sym.SoftmaxOutput(pred, label, name="softmax")


def _values(symbol, shapes, rng, ints=()):
    arg_shapes, _, _ = symbol.infer_shape(**shapes)
    vals = {}
    for name, shape in zip(symbol.list_arguments(), arg_shapes):
        if name in ints:
            vals[name] = rng.randint(0, ints[name], size=shape).astype(np.float32)
        else:
            vals[name] = (rng.standard_normal(shape) * 0.4).astype(np.float32)
    return vals


def _run(monkeypatch, symbol, shapes, vals, layers, grad_req, head_grads=None,
         backwards=1, is_train=True):
    """Outputs and gradients of one bound executor, with the layers or with the steps."""
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "1" if layers else "0")
    exe = symbol.simple_bind(cpu(), grad_req=grad_req, **shapes)
    for name, v in vals.items():
        exe.arg_dict[name][:] = v
    for g in exe.grad_dict.values():
        if g is not None:
            g[:] = 0.5           # what grad_req 'add' adds to
    exe.forward(is_train=is_train)
    outs = [o.asnumpy() for o in exe.outputs]
    for k in range(backwards):       # grad_req 'add': a step's gradients added to the last
        if k:
            exe.forward(is_train=is_train)
        exe.backward(head_grads)
    grads = {k: g.asnumpy() for k, g in exe.grad_dict.items() if g is not None}
    train_prog, infer_prog = exe.programs
    return outs, grads, (train_prog if is_train else infer_prog)


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-6)


def _both(monkeypatch, sym, shapes, seed):
    """``(fused, steps)``: the runs of :func:`_run` with the layers and with the steps,
    on the same random values and head gradients."""
    rng = np.random.RandomState(seed)
    vals = _values(sym, shapes, rng)
    _, out_shapes, _ = sym.infer_shape(**shapes)
    heads = [mx.nd.array(rng.standard_normal(s).astype(np.float32)) for s in out_shapes]
    return tuple(_run(monkeypatch, sym, shapes, vals, on, "write", heads)
                 for on in (True, False))


def _agree(fused, steps):
    for a, b in zip(fused[0], steps[0]):
        _close(a, b)
    assert set(fused[1]) == set(steps[1])
    for name in steps[1]:
        _close(fused[1][name], steps[1][name])


@needs_onednn
@pytest.mark.parametrize("grad_req,backwards", [("write", 1), ("add", 2)])
def test_stacked_layers_are_one_call_each_and_agree_with_the_steps(monkeypatch, grad_req,
                                                                    backwards):
    sym = _lm(steps=5)
    shapes = {"data": (N, 5), "softmax_label": (N, 5)}
    vals = _values(sym, shapes, np.random.RandomState(0), {"data": 11, "softmax_label": 11})
    req = {n: ("null" if n in ("data", "softmax_label") else grad_req)
           for n in sym.list_arguments()}
    fused = _run(monkeypatch, sym, shapes, vals, True, req, backwards=backwards)
    steps = _run(monkeypatch, sym, shapes, vals, False, req, backwards=backwards)
    assert _layer_ops(fused[2]) == ["_backward_lstm_layer"] * 2 + ["_lstm_layer"] * 2
    assert _layer_ops(steps[2]) == []
    # a layer is one launch where the steps took several per step
    assert fused[2].stats["forward_launches"] < steps[2].stats["forward_launches"] // 2
    _close(fused[0][0], steps[0][0])
    assert set(fused[1]) == set(steps[1]) and len(fused[1]) == 11
    for name in steps[1]:
        _close(fused[1][name], steps[1][name])


def _one_layer_with_states(steps):
    """One LSTMCell unrolled over a float input from given begin states; heads: the
    merged outputs and the returned ``h`` and ``c``."""
    cell = mx.rnn.LSTMCell(num_hidden=H, prefix="l0_")
    begin = [mx.sym.Variable("h0"), mx.sym.Variable("c0")]
    out, states = cell.unroll(steps, inputs=mx.sym.Variable("data"), begin_state=begin,
                              merge_outputs=True)
    return mx.sym.Group([out] + list(states))


@needs_onednn
def test_given_begin_states_returned_states_and_their_gradients(monkeypatch):
    steps = 4
    sym = _one_layer_with_states(steps)
    shapes = {"data": (N, steps, 7), "h0": (N, H), "c0": (N, H)}
    rng = np.random.RandomState(1)
    vals = _values(sym, shapes, rng)
    heads = [mx.nd.array(rng.standard_normal(s).astype(np.float32))
             for s in [(N, steps, H), (N, H), (N, H)]]
    fused = _run(monkeypatch, sym, shapes, vals, True, "write", heads)
    steps_run = _run(monkeypatch, sym, shapes, vals, False, "write", heads)
    assert _layer_ops(fused[2]) == ["_backward_lstm_layer", "_lstm_layer"]
    for a, b in zip(fused[0], steps_run[0]):
        _close(a, b)
    for name in ("data", "h0", "c0", "l0_i2h_weight", "l0_h2h_weight", "l0_i2h_bias",
                 "l0_h2h_bias"):
        _close(fused[1][name], steps_run[1][name])
    # and against the torch oracle, step by step
    t = {k: torch.from_numpy(v) for k, v in vals.items()}
    y, h, c = lstm_layer.reference_layer(t["data"].transpose(0, 1), t["l0_i2h_weight"],
                                         t["l0_h2h_weight"], t["l0_i2h_bias"],
                                         t["l0_h2h_bias"], t["h0"], t["c0"])
    _close(fused[0][0], y.transpose(0, 1).numpy())
    _close(fused[0][1], h.numpy())
    _close(fused[0][2], c.numpy())


@needs_onednn
def test_a_step_whose_gate_is_read_elsewhere_stays_and_splits_the_chain(monkeypatch):
    steps = 5
    cell = mx.rnn.LSTMCell(num_hidden=H, prefix="l0_")
    out = cell.unroll(steps, inputs=mx.sym.Variable("data"), merge_outputs=True)[0]
    gate = out.get_internals()["l0_t2_i_output"]      # step 2's input gate, an output
    sym = mx.sym.Group([out, gate])
    fused, steps_run = _both(monkeypatch, sym, {"data": (N, steps, 4)}, 2)
    # steps 0-1 and 3-4 are layers; step 2 keeps its kernels
    assert _layer_ops(fused[2]).count("_lstm_layer") == 2
    assert any(g.count("Activation") for g in fused[2].groups)
    _agree(fused, steps_run)


@needs_onednn
def test_a_decoder_feeding_its_output_back_keeps_its_steps(monkeypatch):
    cell = mx.rnn.LSTMCell(num_hidden=H, prefix="dec_")
    x = mx.sym.Variable("data")
    states = cell.begin_state()
    outs = []
    for _ in range(3):
        x, states = cell(x, states)          # the next step reads this step's h
        outs.append(x)
    sym = mx.sym.Group(outs)
    shapes = {"data": (N, H)}
    rng = np.random.RandomState(3)
    vals = _values(sym, shapes, rng)
    heads = [mx.nd.array(rng.standard_normal((N, H)).astype(np.float32)) for _ in range(3)]
    fused = _run(monkeypatch, sym, shapes, vals, True, "write", heads)
    steps_run = _run(monkeypatch, sym, shapes, vals, False, "write", heads)
    assert _layer_ops(fused[2]) == []
    for a, b in zip(fused[0], steps_run[0]):
        np.testing.assert_array_equal(a, b)


@needs_onednn
def test_a_program_without_gradients_keeps_no_workspace(monkeypatch):
    sym = _lm(steps=4)
    shapes = {"data": (N, 4), "softmax_label": (N, 4)}
    vals = _values(sym, shapes, np.random.RandomState(4), {"data": 11, "softmax_label": 11})
    fused = _run(monkeypatch, sym, shapes, vals, True, "null", is_train=False, backwards=0)
    steps_run = _run(monkeypatch, sym, shapes, vals, False, "null", is_train=False,
                     backwards=0)
    layers = [ln for ln in fused[2].launches if ln.is_extern]
    assert [ln.config["op"] for ln in layers] == ["_lstm_layer"] * 2
    assert all(ln.config["attrs"].get("workspace", "0") == "0" for ln in layers)
    _close(fused[0][0], steps_run[0][0])


@needs_onednn
def test_a_workspace_of_another_size_is_refused_with_the_fix():
    ins = [torch.zeros(s) for s in [(2, N, 4), (4 * H, 4), (4 * H, H), (4 * H,), (4 * H,),
                                    (N, H), (N, H)]]
    right = lstm_layer.workspace_bytes(2, N, 4, H)
    assert len(lstm_layer._forward({"workspace": right}, ins)) == 4
    with pytest.raises(MXNetError, match="SYMTRITON_LSTM_LAYERS=0"):
        lstm_layer._forward({"workspace": right + 64}, ins)


@needs_onednn
def test_only_the_cpu_target_and_only_float32(monkeypatch):
    monkeypatch.delenv("SYMTRITON_LSTM_LAYERS", raising=False)
    assert lstm_layers_for("cpu")
    assert not lstm_layers_for("interpret") and not lstm_layers_for("cuda:90")
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "0")
    assert not lstm_layers_for("cpu")
    monkeypatch.delenv("SYMTRITON_LSTM_LAYERS")
    sym = _one_layer_with_states(3)
    shapes = {"data": (N, 3, 4), "h0": (N, H), "c0": (N, H)}
    req = {n: "write" for n in sym.list_arguments()}
    prog32 = compile_symbol(sym, shapes, True, req, True)
    prog64 = compile_symbol(sym, shapes, True, req, True,
                            dtypes={n: "float64" for n in sym.list_arguments()})
    assert _layer_ops(prog32) == ["_backward_lstm_layer", "_lstm_layer"]
    assert _layer_ops(prog64) == []


def _flat(states):
    out = []
    for s in states:
        out.extend(_flat(s) if isinstance(s, (list, tuple)) else [s])
    return out


@needs_onednn
@pytest.mark.parametrize("kind", ["bidirectional", "residual"])
def test_wrapped_cells_agree_with_the_steps(monkeypatch, kind):
    """A BidirectionalCell's backward cell steps over the inputs in reverse (its chain
    reads them last to first); a ResidualCell adds each step's input to its h."""
    if kind == "bidirectional":
        cell = mx.rnn.BidirectionalCell(mx.rnn.LSTMCell(H, prefix="f_"),
                                        mx.rnn.LSTMCell(H, prefix="b_"))
    else:
        cell = mx.rnn.SequentialRNNCell()
        cell.add(mx.rnn.LSTMCell(H, prefix="a_"))
        cell.add(mx.rnn.ResidualCell(mx.rnn.LSTMCell(H, prefix="r_")))
    out, states = cell.unroll(4, inputs=mx.sym.Variable("data"), merge_outputs=True)
    sym = mx.sym.Group([out] + _flat(states))
    fused, steps_run = _both(monkeypatch, sym, {"data": (N, 4, H)}, 5)
    assert _layer_ops(fused[2]).count("_lstm_layer") == 2
    _agree(fused, steps_run)


@needs_onednn
@pytest.mark.parametrize("layers,bidirectional", [(2, False), (1, True), (2, True)])
def test_the_fused_rnn_operator_is_one_call_per_layer_and_direction(monkeypatch, layers,
                                                                    bidirectional):
    """sym.RNN in LSTM mode (FusedRNNCell's operator): its weights are views of the
    packed vector, the backward direction reads the sequence reversed; against the
    operator's own decomposition (checked against torch.nn.LSTM in test_rnn_op.py)."""
    sym = mx.sym.RNN(data=mx.sym.Variable("data"), state_size=H, num_layers=layers,
                     mode="lstm", bidirectional=bidirectional, state_outputs=True,
                     name="rnn")
    fused, steps_run = _both(monkeypatch, sym, {"data": (4, N, 5)}, 6)
    n = layers * (2 if bidirectional else 1)
    assert _layer_ops(fused[2]) == ["_backward_lstm_layer"] * n + ["_lstm_layer"] * n
    assert _layer_ops(steps_run[2]) == []
    _agree(fused, steps_run)
    assert set(fused[1]) == {"data", "rnn_parameters", "rnn_state", "rnn_state_cell"}


@needs_onednn
def test_an_rnn_operator_with_what_the_call_lacks_keeps_its_decomposition():
    req = {"data": "write", "rnn_parameters": "write", "rnn_state": "write",
           "rnn_state_cell": "write"}
    for extra in ({"p": 0.3, "num_layers": 2}, {"lstm_state_clip_min": -1.0,
                                                "lstm_state_clip_max": 1.0}):
        attrs = {"num_layers": 1, **extra}
        sym = mx.sym.RNN(data=mx.sym.Variable("data"), state_size=H, mode="lstm",
                         name="rnn", **attrs)
        prog = compile_symbol(sym, {"data": (3, N, 5)}, True, req, True)
        assert _layer_ops(prog) == [], extra


@needs_onednn
def test_an_upper_layer_reads_the_layer_below_without_a_copy():
    """Layer 1's steps read layer 0's per-step outputs: stacked again they would be
    layer 0's output itself, which the layer reads as it is."""
    from compiler.passes.fuse_lstm_layers import fuse_lstm_layers
    from compiler.passes.infer_shapes import infer_shapes
    from compiler.passes.infer_types import infer_types
    g = infer_types(infer_shapes(_lm(steps=3).to_graph(),
                                 {"data": (N, 3), "softmax_label": (N, 3)}, False, None,
                                 False), None)
    assert fuse_lstm_layers(g, True) == 2
    layers = [n for n in g.topo() if g.node(n)["op"] == "_lstm_layer"]
    assert g.inputs(layers[1])[0] == (layers[0], 0)
    assert g.node(g.inputs(layers[0])[0][0])["op"] == "stack"    # the embedding's steps


def test_without_onednn_or_where_it_refuses_the_sizes_the_steps_stay(monkeypatch):
    """A torch without oneDNN compiles the steps' kernels; so does a chain or an RNN
    operator whose sizes oneDNN refuses (asked before the graph changes)."""
    import compiler.passes.fuse_lstm_layers as pass_module
    monkeypatch.delenv("SYMTRITON_LSTM_LAYERS", raising=False)
    monkeypatch.setattr(lstm_layer, "available", lambda: False)
    assert not lstm_layers_for("cpu")
    monkeypatch.undo()

    def refused(*sizes):
        raise RuntimeError("oneDNN refuses these sizes")
    monkeypatch.setattr(pass_module, "workspace_bytes", refused)
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "1")
    # sizes no other test compiles: a cached Program would not ask the pass again
    for sym, shapes in ((_one_layer_with_states(7), {"data": (N, 7, 9), "h0": (N, H),
                                                     "c0": (N, H)}),
                        (mx.sym.RNN(data=mx.sym.Variable("data"), state_size=H,
                                    num_layers=1, mode="lstm", name="rnn"),
                         {"data": (7, N, 9)})):
        req = {n: "write" for n in sym.list_arguments()}
        prog = compile_symbol(sym, shapes, True, req, True)
        assert _layer_ops(prog) == []
        assert prog.stats["forward_launches"] > 2


@needs_onednn
def test_the_workspace_reaches_the_gradient_as_the_tensor_onednn_returned(monkeypatch):
    """The workspace is kept by reference (``Extern.held``): no planned memory holds
    it, and the gradient's oneDNN call reads the very tensor the forward's call
    returned, through the executor's pool, on the Python launches and in a second
    step alike."""
    steps, embed = 5, 5
    sym = _lm(steps=steps, embed=embed)
    shapes = {"data": (N, steps), "softmax_label": (N, steps)}
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "1")
    exe = sym.simple_bind(cpu(), grad_req="write", **shapes)
    for name, v in _values(sym, shapes, np.random.RandomState(6),
                           {"data": 11, "softmax_label": 11}).items():
        exe.arg_dict[name][:] = v
    prog = exe.programs[0]
    sizes = [lstm_layer.workspace_bytes(steps, N, embed, H),
             lstm_layer.workspace_bytes(steps, N, H, H)]
    assert prog.held == [[sizes[0], "uint8"], [sizes[1], "uint8"]]
    assert "uint8" not in prog.buffer_dtypes
    layers = {op: [ln for ln in prog.launches if ln.is_extern and ln.config["op"] == op]
              for op in ("_lstm_layer", "_backward_lstm_layer")}
    assert [ln.args[-1][:2] for ln in layers["_lstm_layer"]] == [["held", 0], ["held", 1]]
    # the gradient's 11th input is the workspace; the second layer's gradient runs first
    assert [ln.args[10][:2] for ln in layers["_backward_lstm_layer"]] == \
        [["held", 1], ["held", 0]]

    returned, read = [], []
    forward, backward = torch.ops.aten.mkldnn_rnn_layer, torch.ops.aten.mkldnn_rnn_layer_backward

    def forward_seen(*args):
        out = forward(*args)
        returned.append(out[3].data_ptr())
        return out

    def backward_seen(*args):
        read.append(args[-1].data_ptr())
        return backward(*args)
    monkeypatch.setattr(torch.ops.aten, "mkldnn_rnn_layer", forward_seen)
    monkeypatch.setattr(torch.ops.aten, "mkldnn_rnn_layer_backward", backward_seen)
    for _ in range(2):
        returned.clear()
        read.clear()
        exe.forward(is_train=True)
        kept = [exe._pool.kept[(k, torch.uint8, torch.device("cpu"))] for k in (0, 1)]
        assert [t.numel() for t in kept] == sizes
        assert [t.data_ptr() for t in kept] == returned
        exe.backward()
        assert read == returned[::-1]
    text = exe.debug_str()
    assert f"Kept by reference 0: {sizes[0]} uint8, {sizes[0]} bytes" in text
    assert "and 2 values kept by reference)" in text


@needs_onednn
def test_a_backward_after_another_buckets_forward_is_refused_not_run_on_its_workspace(
        monkeypatch):
    """Executors that share memory (buckets) share the kept workspace as they share
    buffers: a backward whose forward was followed by another length's forward names
    what to do, where oneDNN would read a workspace of the wrong size."""
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "1")
    exes = []
    for steps in (4, 20):           # oneDNN's workspace: 28,672 and 45,056 bytes here
        assert steps == 4 or lstm_layer.workspace_bytes(steps, N, H, H) != \
            lstm_layer.workspace_bytes(4, N, H, H)
        sym = _lm(steps=steps)
        shapes = {"data": (N, steps), "softmax_label": (N, steps)}
        exes.append(sym.simple_bind(cpu(), grad_req="write",
                                    shared_exec=exes[0] if exes else None, **shapes))
    short, long_ = exes
    short.forward(is_train=True)
    long_.forward(is_train=True)
    with pytest.raises(MXNetError, match=r"workspace holds \d+ bytes where the forward "
                                         r"writes \d+: run forward\(is_train=True\)"):
        short.backward()
    short.forward(is_train=True)
    short.backward()        # its own forward's workspace again
    assert all(np.isfinite(g.asnumpy()).all() for g in short.grad_dict.values()
               if g is not None)


@needs_onednn
def test_a_scripted_phase_keeps_the_workspace_by_reference_and_gives_the_same_gradients(
        monkeypatch):
    """In a TorchScript phase (``compiler/cpu/script.py``) the forward points the kept
    tensor at oneDNN's workspace (``set_``), never copies it, and the gradient reads it:
    the scripted forward and backward give the Python launches' gradients."""
    from compiler.cpu.script import checked_parts, phase_source
    steps = 5
    sym = _lm(steps=steps)
    shapes = {"data": (N, steps), "softmax_label": (N, steps)}
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "1")
    exe = sym.simple_bind(cpu(), grad_req="write", **shapes)
    for name, v in _values(sym, shapes, np.random.RandomState(7),
                           {"data": 11, "softmax_label": 11}).items():
        exe.arg_dict[name][:] = v
    exe.forward(is_train=True)
    exe.backward()
    want = {k: g.asnumpy().copy() for k, g in exe.grad_dict.items() if g is not None}
    prog = exe.programs[0]
    phases = {p: exe._launches(prog, p) for p in ("fwd", "bwd")}
    kept = [exe._pool.kept[(k, torch.uint8, torch.device("cpu"))] for k in (0, 1)]
    source, tensors, opaque = phase_source(phases["fwd"])
    names = [f"t{next(j for j, t in enumerate(tensors) if t is k)}" for k in kept]
    assert all(f"{n}.set_(r_l" in source and f"{n}.copy_(" not in source for n in names)
    assert {int(n[1:]) for n in names} <= opaque
    assert "c[10].numel() != " in phase_source(phases["bwd"])[0]
    scripts = {p: checked_parts([phases[p]]) for p in ("fwd", "bwd")}   # checked once
    for g in exe.grad_dict.values():
        if g is not None:
            g[:] = 0
    for p in ("fwd", "bwd"):
        run, ts = scripts[p]
        run(ts)
    assert [t.numel() for t in kept] == [w for w, _ in prog.held]
    for k, g in want.items():
        _close(exe.grad_dict[k].asnumpy(), g)
