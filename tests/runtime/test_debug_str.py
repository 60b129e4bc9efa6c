"""``Executor.debug_str``: the graph and the memory plan, as mxnet prints them."""
import re

import module_api as mx


def _net():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="act1")
    net = mx.sym.FullyConnected(net, num_hidden=8, name="fc2")
    net = mx.sym.Activation(net, act_type="tanh", name="act2")
    net = mx.sym.Dropout(net, p=0.5, name="drop")
    net = mx.sym.FullyConnected(net, num_hidden=4, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_graph_part_lists_nodes_in_order_with_inputs_and_shapes():
    ex = _net().simple_bind(mx.cpu(), data=(5, 6))
    text = ex.debug_str()
    graph = text[:text.index("====")]
    assert graph.startswith("Symbol Outputs:\n\toutput[0]=softmax_output(0) shape=(5, 4)\n")
    assert "Variable:data shape=(5, 6)" in graph
    assert "Variable:fc1_weight shape=(8, 6)" in graph
    assert "Variable:softmax_label shape=(5,)" in graph
    assert "Op:FullyConnected, Name=fc1\nInputs:\n\targ[0]=data(0)\n\targ[1]=fc1_weight(0)\n" \
           "\targ[2]=fc1_bias(0)\nAttrs:\n\tnum_hidden=8\nOutputs:\n\tfc1_output shape=(5, 8)" \
        in graph
    assert "Op:Activation, Name=act2\nInputs:\n\targ[0]=fc2_output(0)" in graph
    assert "\tfc3_output shape=(5, 4)" in graph
    order = [m.group(1) for m in re.finditer(r"Name=(\w+)", graph)]
    assert order == ["fc1", "act1", "fc2", "act2", "drop", "fc3", "softmax"]


def test_memory_plan_matches_the_program_and_the_pool():
    ex = _net().simple_bind(mx.cpu(), data=(5, 6))
    text = ex.debug_str()
    train, infer = ex.programs
    assert "Program (training, target cpu): %d launches" % len(train.launches) in text
    assert "Program (inference, target cpu): %d launches" % len(infer.launches) in text
    blocks = text.split("====================\n")[1:]
    for prog, block in zip((train, infer), blocks):
        sizes = [int(m.group(1)) for m in re.finditer(r"^Buffer \d+: (\d+) float32", block,
                                                      re.M)]
        assert sizes == [int(n) for n in prog.buffers]
        planned = sum(4 * max(int(n), 1) for n in prog.buffers)
        assert f"Total {len(prog.buffers)} buffers, {planned} bytes planned" in block
        assert len(re.findall(r"^Launch (fwd|bwd)\[\d+\]", block, re.M)) == len(prog.launches)
    # every buffer names the values it holds; reuse shows as several values in one buffer
    held = re.findall(r"shared by (\d+) value\(s\)", text)
    assert held and all(int(n) >= 1 for n in held)
    assert any(int(n) >= 2 for n in held)
    assert "(random seed, set before each forward)" in text       # Dropout's mask seed
    assert re.search(r"^\tact1 shape=\(5, 8\) at element 0$", text, re.M)
    assert re.search(r"^Total 0 MB allocated$", text, re.M)      # mxnet's line
    total = re.search(r"^\((\d+) bytes in (\d+) pool buffers\)$", text, re.M)
    assert int(total.group(1)) == ex._total_exec_bytes == ex._pool.nbytes() > 0
    assert int(total.group(2)) == len(ex._pool.tensors)


def test_debug_str_after_forward_and_inference_only():
    ex = _net().simple_bind(mx.cpu(), data=(5, 6), grad_req="null")
    ex.forward()
    before = ex._total_exec_bytes
    text = ex.debug_str()
    assert "Program (training" not in text and "Program (inference" in text
    assert ex._total_exec_bytes == before            # nothing new allocated
    assert f"({before} bytes in" in text
