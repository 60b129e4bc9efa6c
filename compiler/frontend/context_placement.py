"""Model-parallel placement: which context runs each node, and the graph cut
into one sub-symbol per run of nodes on one context.

mxnet places a graph bound with ``group2ctx`` in two steps (its
``AssignContext`` and nnvm's ``PlaceDevice``), which :func:`assign_contexts`
follows:

1. A variable lives where its array lives.
2. An operator with a ``ctx_group`` attribute runs on the context its group
   maps to; a group the map does not name is an error, as in mxnet.
3. Any other operator runs where its first input lives (a forward sweep);
   one without inputs runs where its first consumer runs (a backward
   sweep), else on the default context.

Where an edge crosses contexts mxnet inserts a ``_CrossDeviceCopy`` node.
Here :func:`partition_by_context` cuts the graph at those edges instead: each
segment is a sub-symbol whose cut inputs are new variables, compiled and run
as an ordinary Program on its context, and the runtime copies values (and,
backwards, gradients) across the cuts. Segments are numbered by *level*, the
number of context changes on the longest path into a node (then raised as
far as its consumers allow), so that a graph which goes A -> B -> A gives two
segments on A, and the segments in ``(level, first node)`` order are a
topological order of the cut graph.
Gradients run on the context of the forward node they belong to.

Contexts are opaque, hashable keys here; the runtime passes its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import MXNetError
from ..symbol import Symbol
from ..symbol_node import Node, topo


def assign_contexts(symbol, variable_contexts: dict, group2ctx: dict, default) -> dict:
    """The context of every node of ``symbol``, keyed by ``id(node)``.

    Parameters
    ----------
    symbol : Symbol
    variable_contexts : dict of str to context
        Where each argument's and auxiliary state's array lives.
    group2ctx : dict of str to context
        mxnet's ``group2ctx``: the context of each ``ctx_group``.
    default : context
        The executor's own context, for nodes nothing else places.
    """
    nodes = topo(symbol._outputs)
    place = {}
    for node in nodes:
        if node.op == "null":
            if node.name not in variable_contexts:
                raise MXNetError(f"assign_contexts: variable '{node.name}' has no array")
            place[id(node)] = variable_contexts[node.name]
            continue
        group = node.attrs.get("__ctx_group__")
        if group is not None and group2ctx:     # no map (a plain bind): groups are ignored
            if group not in group2ctx:
                raise MXNetError(
                    f"operator {node.op} '{node.name}' is in ctx_group '{group}', which "
                    f"group2ctx does not map (it maps {sorted(group2ctx)}); add the group "
                    f"to group2ctx (mxnet refuses this graph too)")
            place[id(node)] = group2ctx[group]
        elif node.inputs and id(node.inputs[0][0]) in place:   # else placed below
            place[id(node)] = place[id(node.inputs[0][0])]
    for node in reversed(nodes):
        if id(node) not in place:
            continue
        for src, _ in node.inputs:
            place.setdefault(id(src), place[id(node)])
    for node in nodes:
        place.setdefault(id(node), default)
    return place


@dataclass
class Segment:
    """The nodes of one level on one context, as a symbol of their own.

    Attributes
    ----------
    context : context
    level : int
        Context changes on the longest path from the inputs to these nodes.
    symbol : Symbol
        The segment's operators over the original variables it reads and one
        new variable per value it receives from another segment.
    entries : list of (node, int)
        The original graph entry behind each output of ``symbol``: values
        other segments read, and outputs of the whole graph.
    received : dict of str to (int, int)
        Each cut variable of ``symbol`` and the (segment index, output
        position) whose value it receives.
    isolated : str or None
        The name of the one node of a segment cut around a single node (a
        ``Custom`` node, run in Python), else None.
    """
    context: object
    level: int
    symbol: Symbol
    entries: list = field(default_factory=list)
    received: dict = field(default_factory=dict)
    isolated: object = None


def partition_by_context(symbol, node_contexts: dict, isolate=()):
    """Cut ``symbol`` into segments that each run on one context.

    Parameters
    ----------
    symbol : Symbol
    node_contexts : dict
        ``id(node) -> context`` from :func:`assign_contexts`.
    isolate : collection of int
        ``id(node)`` of nodes that get a segment of their own (``Custom`` nodes,
        which run in Python between compiled segments): an edge into or out of
        one is a cut, as an edge across contexts is.

    Returns
    -------
    segments : list of Segment
        In an order where every segment comes after those it receives from.
    outputs : list of (int, int) or (None, str)
        For each output of ``symbol``: the (segment index, output position)
        that computes it, or ``(None, name)`` for an output that is a variable.
    """
    nodes = topo(symbol._outputs)
    ops = [n for n in nodes if n.op != "null"]
    isolate = set(isolate)
    # the key a segment is made of: the context, and the node itself where isolated
    place = {id(n): (node_contexts[id(n)], id(n) if id(n) in isolate else None) for n in ops}
    level = {}
    for node in ops:
        here = place[id(node)]
        level[id(node)] = max([level[id(src)] + (place[id(src)] != here)
                               for src, _ in node.inputs if src.op != "null"], default=0)
    # then as late as the consumers allow, so that a value is computed in the
    # segment that reads it (a label's reshape joins the loss, not the input
    # segment of its context); every edge keeps level(dst) >= level(src) + crossing
    consumers = {}
    for node in ops:
        for src, _ in node.inputs:
            if src.op != "null":
                consumers.setdefault(id(src), []).append(node)
    for node in reversed(ops):
        users = consumers.get(id(node))
        if users and id(node) not in {id(n) for n, _ in symbol._outputs}:
            here = place[id(node)]
            level[id(node)] = min(level[id(u)] - (place[id(u)] != here) for u in users)
    order, key_of = [], {}
    for node in ops:
        key = (level[id(node)], place[id(node)])
        if key not in key_of:
            key_of[key] = len(order)
            order.append(key)
    # levels first; within a level, the order the segments' first nodes come in
    rank = sorted(range(len(order)), key=lambda k: (order[k][0], k))
    index_of = {order[k]: i for i, k in enumerate(rank)}
    segment_of = {id(n): index_of[(level[id(n)], place[id(n)])] for n in ops}
    names = {id(n): n.name for n in ops}

    # which entries each segment must output: read elsewhere, or graph outputs
    exported = [[] for _ in rank]

    def export(entry):
        s = segment_of[id(entry[0])]
        key = (id(entry[0]), entry[1])
        if key not in [(id(n), i) for n, i in exported[s]]:
            exported[s].append(entry)
        return s, [(id(n), i) for n, i in exported[s]].index(key)

    taken = {n.name for n in nodes}
    received_vars = [dict() for _ in rank]      # (id, idx) -> variable node, per segment
    received = [dict() for _ in rank]
    new_nodes = {}
    for node in ops:
        s = segment_of[id(node)]
        inputs = []
        for src, i in node.inputs:
            if src.op == "null":
                inputs.append((src, 0))
            elif segment_of[id(src)] == s:
                inputs.append((new_nodes[id(src)], i))
            else:
                key = (id(src), i)
                var = received_vars[s].get(key)
                if var is None:
                    var = Node("null", _fresh_name(src.output_names()[i] + "_copy", taken))
                    received_vars[s][key] = var
                    received[s][var.name] = export((src, i))
                inputs.append((var, 0))
        new_nodes[id(node)] = Node(node.op, node.name, node.attrs, inputs)
    outputs = []
    for node, i in symbol._outputs:
        outputs.append((None, node.name) if node.op == "null" else export((node, i)))
    segments = []
    for s, k in enumerate(rank):
        lvl, (ctx, alone) = order[k]
        sub = Symbol([(new_nodes[id(n)], i) for n, i in exported[s]])
        segments.append(Segment(ctx, lvl, sub, list(exported[s]), received[s],
                                names.get(alone)))
    return segments, outputs


def _fresh_name(base, taken):
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name
