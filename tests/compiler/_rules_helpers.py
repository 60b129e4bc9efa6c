"""Helpers for the operator-rule tests: shape rules, decompositions and
gradient rules evaluated with the torch references (no kernels)."""
from __future__ import annotations

import torch

from compiler.frontend.graph import Builder, Graph, _raw, infer_node
from compiler.ops.registry import NodeView
from compiler.ops import get_op
from compiler.frontend.reference import evaluate


def parse(op, attrs):
    return get_op(op).parse_attrs({k: _raw(v) for k, v in attrs.items()}, "op")


def infer(op, shapes, **attrs):
    """``(in_shapes, out_shapes)`` of the operator's shape rule, as tuples."""
    ins, outs = get_op(op).infer_shape(parse(op, attrs), list(shapes))
    fix = lambda s: None if s is None else tuple(s)  # noqa: E731
    return [fix(s) for s in ins], [fix(s) for s in outs]


def reference(op, inputs, is_train=False, **attrs):
    return get_op(op).reference(parse(op, attrs), list(inputs), is_train)


def _node(op, inputs, attrs, ograds=None):
    opdef = get_op(op)
    raw = {k: _raw(v) for k, v in attrs.items()}
    parsed = opdef.parse_attrs(raw, "op")
    graph = Graph()
    feeds, vars_ = {}, []
    for i, t in enumerate(inputs):
        v = graph.add_node("null", f"in{i}", role="arg")
        graph.node(v)["shapes"] = [tuple(t.shape)]
        graph.node(v)["dtypes"] = ["float32"]
        feeds[f"in{i}"] = t
        vars_.append(v)
    n = graph.add_node(op, "op", [(v, 0) for v in vars_], parsed, raw)
    infer_node(graph, n)
    out_shapes = graph.node(n)["shapes"]
    b = Builder(graph, "bwd", "t")
    og = []
    for i, g in enumerate(ograds or []):
        gid = graph.add_node("null", f"og{i}", role="head_grad", phase="bwd")
        graph.node(gid)["shapes"] = [tuple(g.shape)]
        graph.node(gid)["dtypes"] = ["float32"]
        feeds[f"og{i}"] = g
        og.append(b.ref((gid, 0)))
    view = NodeView("op", parsed, [b.ref((v, 0)) for v in vars_],
                    [b.ref((n, i)) for i in range(len(out_shapes))], og,
                    [tuple(t.shape) for t in inputs], out_shapes)
    return graph, b, view, feeds, opdef


def decompose(op, inputs, is_train=False, **attrs):
    """Evaluate the operator's ``Decompose`` build (outputs, then new aux)."""
    graph, b, view, feeds, opdef = _node(op, inputs, attrs)
    refs = opdef.lowering.build(b, view, is_train)
    vals = evaluate(graph, feeds, is_train, [r.entry for r in refs])
    for r in refs:  # the builder's inferred shapes agree with the values
        assert tuple(r.shape) == tuple(vals[r.entry].shape), (r, vals[r.entry].shape)
    return [vals[r.entry] for r in refs], graph


def gradient(op, inputs, ograds, is_train=True, **attrs):
    """Evaluate the operator's gradient rule under the given output gradients.

    Returns the input gradients (None where the rule gives none) and the
    forward outputs the rule saw.
    """
    graph, b, view, feeds, opdef = _node(op, inputs, attrs, ograds)
    grads = opdef.gradient(b, view)
    wanted = [g.entry for g in grads if g is not None] + [o.entry for o in view.outputs]
    vals = evaluate(graph, feeds, is_train, wanted)
    return ([None if g is None else vals[g.entry] for g in grads],
            [vals[o.entry] for o in view.outputs])


def autograd(op, inputs, ograds, is_train=True, **attrs):
    """torch autograd of sum(out_i * ograd_i) over the given output gradients."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    outs = reference(op, leaves, is_train, **attrs)
    total = sum((o * g).sum() for o, g in zip(outs, ograds))
    return list(torch.autograd.grad(total, leaves, allow_unused=True))


def close(a, b, tol=1e-5):
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert torch.allclose(a, b, atol=tol, rtol=tol), (a - b).abs().max()
