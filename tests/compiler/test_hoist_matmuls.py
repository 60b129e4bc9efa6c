"""hoist_matmuls: x_t @ W over every step of one sequence becomes one matmul."""
import torch

from compiler import symbol as sym
from compiler.passes.decompose import decompose
from compiler.passes.hoist_matmuls import hoist_matmuls
from compiler.passes.infer_shapes import infer_shapes
from compiler.frontend.reference import evaluate
from runtime.context import cpu


def _unrolled(T, share=True):
    x = sym.Variable("x")
    w = sym.Variable("w")
    steps = sym.SliceChannel(x, num_outputs=T, axis=1, squeeze_axis=True)
    outs = [sym.FullyConnected(steps[t], weight=w if share else sym.Variable(f"w{t}"),
                               num_hidden=6, no_bias=True, name=f"fc{t}") for t in range(T)]
    return sym.Group([sym.tanh(o) for o in outs])


def _dots(graph):
    return [n for n in graph.ops() if graph.node(n)["op"] == "dot"]


def test_shared_weight_steps_become_one_matmul():
    T = 4
    g = infer_shapes(_unrolled(T).to_graph(), {"x": (3, T, 5)})
    before = decompose(g, False)
    after = hoist_matmuls(before)
    assert len(_dots(before)) == T and len(_dots(after)) == 1
    assert after.shape((_dots(after)[0], 0)) == (3, T, 6)
    feeds = {"x": torch.randn(3, T, 5), "w": torch.randn(6, 5)}
    want = evaluate(before, feeds)
    got = evaluate(after, feeds)
    for a, b in zip(want.values(), got.values()):
        assert torch.allclose(a, b, atol=1e-6)


def test_not_hoisted_when_weights_differ():
    T = 3
    g = decompose(infer_shapes(_unrolled(T, share=False).to_graph(),
                               {"x": (2, T, 4), **{f"w{t}": (6, 4) for t in range(T)}}), False)
    assert len(_dots(hoist_matmuls(g))) == T


def test_independent_steps_become_one_matmul_over_a_concat():
    """Steps that are not a whole sequence (here: one unused) or are separate values (a
    stacked RNN's layer 1 reading layer 0's outputs) still share one matmul."""
    T = 3
    x, w = sym.Variable("x"), sym.Variable("w")
    steps = sym.SliceChannel(x, num_outputs=T, axis=1, squeeze_axis=True)
    partial = sym.Group([sym.tanh(sym.FullyConnected(sym.sigmoid(steps[t]), weight=w,
                                                     num_hidden=6, no_bias=True))
                         for t in range(T - 1)])
    before = decompose(infer_shapes(partial.to_graph(), {"x": (2, T, 4)}), False)
    after = hoist_matmuls(before)
    assert len(_dots(before)) == T - 1 and len(_dots(after)) == 1
    assert [after.node(n)["op"] for n in after.ops()].count("Concat") == 1
    feeds = {"x": torch.randn(2, T, 4), "w": torch.randn(6, 4)}
    for a, b in zip(evaluate(before, feeds).values(), evaluate(after, feeds).values()):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_recurrence_stays_per_step():
    """h_t = tanh(h_{t-1} @ W): each step's operand comes from the previous matmul."""
    h, w = sym.Variable("h"), sym.Variable("w")
    for _ in range(4):
        h = sym.tanh(sym.FullyConnected(h, weight=w, num_hidden=5, no_bias=True))
    g = decompose(infer_shapes(h.to_graph(), {"h": (2, 5)}), False)
    assert len(_dots(hoist_matmuls(g))) == 4


def test_a_matmul_reading_another_directly_stays_apart():
    """dot(dot(h, W), W): two matmuls on one weight, the second's operand the first
    itself (a two-step recurrence without a bias; in backward, the input gradient of
    two shared-weight FullyConnected layers). Joined, they would read their own output."""
    h, w = sym.Variable("h"), sym.Variable("w")
    out = sym.FullyConnected(sym.FullyConnected(h, weight=w, num_hidden=5, no_bias=True),
                             weight=w, num_hidden=5, no_bias=True)
    before = decompose(infer_shapes(out.to_graph(), {"h": (2, 5)}), False)
    after = hoist_matmuls(before)
    assert len(_dots(after)) == 2
    feeds = {"h": torch.randn(2, 5), "w": torch.randn(5, 5)}
    for a, b in zip(evaluate(before, feeds).values(), evaluate(after, feeds).values()):
        assert torch.allclose(a, b, atol=1e-6)


def test_hoisted_program_trains_like_torch():
    T = 3
    s = sym.MakeLoss(sym.sum(sym.Concat(*[sym.expand_dims(o, axis=1) for o in _unrolled(T)],
                                        dim=1) ** 2))
    exe = s.simple_bind(cpu(), x=(2, T, 5), w=(6, 5))
    x, w = torch.randn(2, T, 5), torch.randn(6, 5) * 0.3
    exe.arg_dict["x"][:] = x
    exe.arg_dict["w"][:] = w
    exe.forward(is_train=True)
    exe.backward()
    xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
    loss = (torch.tanh(xt @ wt.T) ** 2).sum()
    loss.backward()
    assert torch.allclose(exe.outputs[0].reshape(()), loss, rtol=1e-5)
    assert torch.allclose(exe.grad_dict["w"], wt.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(exe.grad_dict["x"], xt.grad, rtol=1e-4, atol=1e-5)
    train, _ = exe.programs
    fwd_matmuls = [g for g, ln in zip(train.groups, train.launches)
                   if ln.phase == "fwd" and "dot" in g]
    assert len(fwd_matmuls) == 1


def test_nothing_to_hoist_returns_the_graph_itself_and_in_place_changes_the_given_graph():
    """A CNN's classifier (one FullyConnected: its forward matmul and, after autodiff, two
    gradient matmuls, no two sharing a key) comes back as the same object, not a copy;
    with ``in_place`` a graph that has something to hoist is changed where it is, with
    the answer of the copying pass."""
    from compiler.passes.autodiff import autodiff
    x, w = sym.Variable("x"), sym.Variable("w")
    head = sym.MakeLoss(sym.sum(sym.FullyConnected(sym.relu(x), weight=w, num_hidden=4,
                                                   no_bias=True)))
    cnn = decompose(autodiff(infer_shapes(head.to_graph(), {"x": (2, 3), "w": (4, 3)}),
                             {"x": "write", "w": "write"}), True)
    assert len(_dots(cnn)) == 3
    assert hoist_matmuls(cnn) is cnn and hoist_matmuls(cnn, in_place=True) is cnn
    T = 4
    shapes = {"x": (3, T, 5)}
    copied = hoist_matmuls(decompose(infer_shapes(_unrolled(T).to_graph(), shapes), False))
    given = decompose(infer_shapes(_unrolled(T).to_graph(), shapes), False)
    changed = hoist_matmuls(given, in_place=True)
    assert changed is given and len(_dots(given)) == 1 == len(_dots(copied))
    feeds = {"x": torch.randn(3, T, 5), "w": torch.randn(6, 5)}
    for a, b in zip(evaluate(copied, feeds).values(), evaluate(given, feeds).values()):
        assert torch.allclose(a, b, atol=1e-6)
