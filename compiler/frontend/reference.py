"""Op-by-op evaluation of a Graph with each operator's torch reference.

The oracle for tests and the debug backend: no fusion, no kernels. Values
are keyed by entry ``(node, index)``.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError


def evaluate(graph, feeds: dict, is_train: bool = False, entries=None) -> dict:
    """Evaluate ``graph`` given tensors for its variables.

    Parameters
    ----------
    graph : compiler.frontend.graph.Graph
    feeds : dict of str -> torch.Tensor
        Values for variable nodes, by variable name.
    is_train : bool
        Passed to mode-dependent references (Dropout, BatchNorm).
    entries : list of (node, index), optional
        What to return; defaults to the graph's heads.

    Returns
    -------
    dict of (node, index) -> torch.Tensor
    """
    values = {}
    for n in graph.topo():
        d = graph.node(n)
        if d["op"] == "null":
            if d["name"] not in feeds:
                raise MXNetError(f"no value given for variable '{d['name']}'")
            values[(n, 0)] = feeds[d["name"]]
            continue
        ins = [values[e] for e in graph.inputs(n)]
        outs = d["opdef"].reference(d["attrs"], ins, is_train)
        for i, t in enumerate(outs):
            values[(n, i)] = t
    wanted = graph.heads if entries is None else entries
    return {tuple(e): values[tuple(e)] for e in wanted}


def check_gradient(op_name: str, inputs: list, attrs: dict = None, is_train: bool = True,
                   seed: int = 0):
    """Compare an operator's graph-op gradient with torch autograd of its reference.

    Builds a graph with one node of ``op_name`` over variables holding
    ``inputs``, asks the operator's ``gradient`` rule for the input
    gradients under random output gradients, evaluates them with the
    references, and returns ``(graph_grads, autograd_grads)`` (None where
    the rule gives no gradient).
    """
    from .graph import Builder, Graph, infer_node
    from ..ops.registry import NodeView
    from ..ops import get_op
    from .graph import _raw

    opdef = get_op(op_name)
    attrs = attrs or {}
    raw = {k: _raw(v) for k, v in attrs.items()}
    parsed = opdef.parse_attrs(raw, "op")
    graph = Graph()
    var_ids = []
    for i, t in enumerate(inputs):
        v = graph.add_node("null", f"in{i}", role="arg")
        graph.node(v)["shapes"] = [tuple(t.shape)]
        graph.node(v)["dtypes"] = ["float32"]
        var_ids.append(v)
    n = graph.add_node(op_name, "op", [(v, 0) for v in var_ids], parsed, raw)
    infer_node(graph, n)
    out_shapes = graph.node(n)["shapes"]
    gen = torch.Generator().manual_seed(seed)
    ograd_vals, ograd_ids = [], []
    for i, s in enumerate(out_shapes):
        g = graph.add_node("null", f"ograd{i}", role="head_grad", phase="bwd")
        graph.node(g)["shapes"] = [s]
        graph.node(g)["dtypes"] = ["float32"]
        ograd_ids.append(g)
        ograd_vals.append(torch.randn(s, generator=gen, dtype=torch.float64).float())
    b = Builder(graph, "bwd", "grad")
    view = NodeView("op", parsed, [b.ref((v, 0)) for v in var_ids],
                    [b.ref((n, i)) for i in range(len(out_shapes))],
                    [b.ref((g, 0)) for g in ograd_ids],
                    [tuple(t.shape) for t in inputs], out_shapes)
    grads = opdef.gradient(b, view)
    feeds = {f"in{i}": t for i, t in enumerate(inputs)}
    feeds.update({f"ograd{i}": t for i, t in enumerate(ograd_vals)})
    wanted = [g.entry for g in grads if g is not None]
    vals = evaluate(graph, feeds, is_train, wanted)
    graph_grads = [None if g is None else vals[g.entry] for g in grads]

    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    outs = opdef.reference(parsed, leaves, is_train)
    outs = outs[:len(out_shapes)]
    total = sum((o * g).sum() for o, g in zip(outs, ograd_vals) if o.requires_grad)
    auto = torch.autograd.grad(total, leaves, allow_unused=True)
    return graph_grads, list(auto)
