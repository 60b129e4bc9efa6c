"""Subgraphs of mxnet's control-flow operators (``control_flow.py``): held as the JSON
text of mxnet's list of subgraph symbols, built into a graph, run with the torch
references, and walked with the registry's shape and dtype rules."""
from __future__ import annotations

import functools
import json

from .chain_rule import differentiate_node, sum_refs
from .registry import ShapeError, get_op


@functools.lru_cache(maxsize=256)
def subgraphs(text: str) -> tuple:
    """The subgraph documents held in a ``subgraphs`` attribute (parsed once per text)."""
    try:
        docs = json.loads(text)
    except RecursionError:
        raise ValueError("subgraphs are nested too deeply") from None
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
        raise ValueError("subgraphs must be a list of symbol JSON documents")
    for k, doc in enumerate(docs):
        _check_doc(k, doc)
    return tuple(docs)


def _entry_ok(e, before) -> bool:
    return (isinstance(e, list) and len(e) >= 2 and all(type(x) is int for x in e[:2])
            and 0 <= e[0] < before and e[1] >= 0)


def _check_doc(k, doc):
    """Subgraph ``k`` is a symbol document whose entries name earlier nodes."""
    nodes, heads = doc.get("nodes"), doc.get("heads")
    if not isinstance(nodes, list) or not isinstance(heads, list) or not heads:
        raise ValueError(f"subgraph {k} needs a 'nodes' list and a non-empty 'heads' list")
    for i, node in enumerate(nodes):
        if not (isinstance(node, dict) and isinstance(node.get("op"), str)
                and isinstance(node.get("name"), str)
                and all(_entry_ok(e, i) for e in node.get("inputs", []))):
            raise ValueError(f"subgraph {k}: node {i} is not an operator or variable whose "
                             f"inputs are earlier nodes")
    if not all(_entry_ok(h, len(nodes)) for h in heads):
        raise ValueError(f"subgraph {k}: a head names no node")


def parse_subgraphs(value) -> str:
    """The ``subgraphs`` attribute: JSON text of a list of symbol documents (checked)."""
    text = str(value)
    subgraphs(text)
    return text


def subgraph_inputs(doc) -> list:
    """Indices of a subgraph's variable nodes in ``list_inputs`` order (DFS from heads)."""
    nodes, order, seen = doc["nodes"], [], set()

    def visit(i):
        stack = [(i, 0)]
        while stack:
            k, j = stack.pop()
            if j == 0 and k in seen:
                continue
            ins = nodes[k].get("inputs", [])
            if j < len(ins):
                stack.append((k, j + 1))
                if ins[j][0] not in seen:
                    stack.append((ins[j][0], 0))
            elif k not in seen:
                seen.add(k)
                order.append(k)
    for h in doc["heads"]:
        visit(h[0])
    return [k for k in order if nodes[k]["op"] == "null"]


def _node_attrs(node) -> dict:
    attrs = dict(node.get("attrs", node.get("attr", node.get("param", {}))) or {})
    if node.get("subgraphs"):
        attrs["subgraphs"] = json.dumps(node["subgraphs"])
    return attrs


def _ordered(opdef, attrs, name, ins):
    """A JSON node's inputs (mxnet's order) in the registry's order (arguments, aux)."""
    if not opdef.input_order:
        return ins
    parsed = opdef.parse_attrs(attrs, name)
    by_name = dict(zip(opdef.list_inputs(parsed), ins))
    return [by_name[n] for n in opdef.list_arguments(parsed) + opdef.list_aux(parsed)]


def inline(b, doc, inputs) -> list:
    """Build a subgraph's ops with ``b``; ``inputs``: Refs in ``list_inputs`` order.
    Returns the Refs of its heads."""
    vals = {}
    for k, ref in zip(subgraph_inputs(doc), inputs):
        vals[(k, 0)] = ref
    for k, node in enumerate(doc["nodes"]):
        if node["op"] == "null":
            continue
        attrs = _node_attrs(node)
        opdef = get_op(node["op"], node["name"])
        ins = _ordered(opdef, attrs, node["name"], [vals[(e[0], e[1])] for e in node["inputs"]])
        out = b.op(node["op"], *ins, **attrs)
        for i, r in enumerate(out if isinstance(out, list) else [out]):
            vals[(k, i)] = r
    return [vals[(h[0], h[1])] for h in doc["heads"]]


def evaluate(doc, inputs, is_train) -> list:
    """Run a subgraph with each operator's torch reference (the oracle)."""
    vals = {}
    for k, t in zip(subgraph_inputs(doc), inputs):
        vals[(k, 0)] = t
    for k, node in enumerate(doc["nodes"]):
        if node["op"] == "null":
            continue
        attrs = _node_attrs(node)
        opdef = get_op(node["op"], node["name"])
        ins = _ordered(opdef, attrs, node["name"], [vals[(e[0], e[1])] for e in node["inputs"]])
        outs = opdef.reference(opdef.parse_attrs(attrs, node["name"]), ins, is_train)
        for i, r in enumerate(outs):
            vals[(k, i)] = r
    return [vals[(h[0], h[1])] for h in doc["heads"]]


def infer_subgraph(doc, shapes, dtypes=None):
    """Shapes and dtypes through a subgraph from its inputs' (None: unknown), each
    operator's rules run once in order, as ``frontend.graph.infer_node`` runs them.

    Returns ``(input shapes, head shapes, head dtypes)``, input shapes completed where an
    operator fixes them (a FullyConnected weight the body owns)."""
    dtypes = list(dtypes or [None] * len(shapes))
    inputs = subgraph_inputs(doc)
    shape = {(k, 0): None if s is None else tuple(s) for k, s in zip(inputs, shapes)}
    dtype = {(k, 0): t or "float32" for k, t in zip(inputs, dtypes)}
    for k, node in enumerate(doc["nodes"]):
        if node["op"] == "null":
            continue
        attrs = _node_attrs(node)
        opdef = get_op(node["op"], node["name"])
        parsed = opdef.parse_attrs(attrs, node["name"])
        ins = _ordered(opdef, attrs, node["name"], [(e[0], e[1]) for e in node["inputs"]])
        try:
            new_in, outs = opdef.infer_shape(parsed, [shape[e] for e in ins])
        except ShapeError as exc:
            raise ShapeError(f"in the subgraph, {node['op']} '{node['name']}': {exc}") from None
        for e, s in zip(ins, new_in):
            if s is not None and shape[e] is None and doc["nodes"][e[0]]["op"] == "null":
                shape[e] = tuple(s)
        _, types = opdef.infer_type(parsed, [dtype[e] for e in ins])
        types = list(types) + [types[-1] if types else None] * len(outs)
        for i, s in enumerate(outs):
            shape[(k, i)] = None if s is None else tuple(s)
            dtype[(k, i)] = types[i] or "float32"
    heads = [(h[0], h[1]) for h in doc["heads"]]
    return ([shape[(k, 0)] for k in inputs], [shape[h] for h in heads],
            [dtype[h] for h in heads])


def gradient_sharing_forward(build):
    """A ``gradient`` rule for a control-flow operator lowered as ``Decompose(build)``.

    As ``contrib_common.gradient_of_decomposition`` (the rebuilt decomposition
    differentiated op by op), and then the node's readers (its heads, its consumers and
    their gradients) read the rebuilt outputs instead: forward and backward share one
    unrolled body, so a random operator in it (Dropout) draws one mask for both."""
    def gradient(b, n):
        graph = b.graph
        before = set(graph.g.nodes)
        phase, b.phase = b.phase, "fwd"
        try:
            outs = build(b, n, True)
        finally:
            b.phase = phase
        built = sorted(set(graph.g.nodes) - before)
        live = {tuple(r.entry)[0] for r in n.inputs}
        for node in built:      # nodes no input reaches (constants) pass no gradient
            if any(src in live for src, _ in graph.inputs(node)):
                live.add(node)
        contributions = {}
        for ref, og in zip(outs, n.ograds):
            contributions.setdefault(tuple(ref.entry), []).append(og)
        for node in reversed(built):
            if node in live:
                differentiate_node(graph, b, node, contributions)
        for old, new in zip(n.outputs, outs):
            graph.replace_entry(tuple(old.entry), tuple(new.entry))
        grads, seen = [], set()
        for ref in n.inputs:
            e = tuple(ref.entry)
            g = None if e in seen else sum_refs(b, contributions.get(e, []))
            grads.append(b.zeros_like(ref) if g is None and e not in seen else g)
            seen.add(e)
        return grads
    return gradient


def check_locs(name, what, locs, bound, doc=None):
    """``locs`` must index ``bound`` things; with ``doc``, one per subgraph input."""
    if any(not 0 <= k < bound for k in locs):
        raise ShapeError(f"{name}: {what}={list(locs)} points outside the {bound} inputs")
    if doc is not None and len(subgraph_inputs(doc)) != len(locs):
        raise ShapeError(f"{name}: {what} gives {len(locs)} inputs to a subgraph of "
                         f"{len(subgraph_inputs(doc))}")
