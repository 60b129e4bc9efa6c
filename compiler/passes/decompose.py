"""Rewrite composite operators (FullyConnected, softmax, BatchNorm, Dropout ...)
into the primitive ones that fusion understands.

Runs after autodiff, so composite operators keep their own gradient rules
(SoftmaxOutput's gradient is not the gradient of its forward). Training
mode decides the rewrite of mode-dependent operators; new auxiliary values
(BatchNorm's moving statistics in training; an optimizer update's mutated inputs
always, ``OpDef.mutates_inputs``) become extra heads listed in ``meta['aux_updates']``.
"""
from __future__ import annotations

from ..frontend.graph import Builder, Graph
from ..ops.registry import NodeView
from ..ops.registry import Decompose


def decompose(graph: Graph, is_train: bool, in_place: bool = False) -> Graph:
    """Return a copy of ``graph`` with every ``Decompose`` operator expanded
    (``graph`` itself when it has none: a copy costs as much as the pass; ``graph``
    itself, changed, with ``in_place``: the pipeline owns its graphs)."""
    if not _has_composite(graph):
        return graph
    out = graph if in_place else graph.copy()
    out.meta.setdefault("aux_updates", [])
    # decompositions may produce composite ops in turn; a scan says whether any is
    # left (the topological sort, for the expansion order, only where one is)
    for _ in range(16):
        if not _has_composite(out):
            break
        for n in [n for n in out.ops() if isinstance(out.node(n)["opdef"].lowering, Decompose)]:
            _expand(out, n, is_train)
    out.remove_dead()
    return out


def _all_zero_size(d, ins) -> bool:
    """Whether every output of node ``d`` has no element, and it writes no state."""
    opdef = d["opdef"]
    if opdef.mutates_inputs or len(ins) != len(opdef.list_arguments(d["attrs"])):
        return False
    return all(s is not None and 0 in tuple(s) for s in d["shapes"])


def _has_composite(graph: Graph) -> bool:
    return any(d["op"] != "null" and isinstance(d["opdef"].lowering, Decompose)
               for d in graph.g._node.values())


def _expand(graph: Graph, n, is_train):
    d = graph.node(n)
    b = Builder(graph, d["phase"], d["name"])
    ins = graph.inputs(n)
    view = NodeView(d["name"], d["attrs"], [b.ref(e) for e in ins],
                    [b.ref((n, i)) for i in range(len(d["shapes"]))], [],
                    [graph.shape(e) for e in ins], list(d["shapes"]))
    if _all_zero_size(d, ins):
        # nothing to compute (NumPy shape semantics): a rule's inner steps, such as
        # softmax's max over an empty axis, need not make sense of zero-size values
        refs = [b.op("_zeros", shape=tuple(s), dtype=graph.dtype((n, i)) or "float32")
                for i, s in enumerate(d["shapes"])]
    else:
        refs = d["opdef"].lowering.build(b, view, is_train)
    num_out = len(d["shapes"])
    outs, aux_new = refs[:num_out], refs[num_out:]
    for i, r in enumerate(outs):
        want = graph.dtype((n, i))
        if want is not None and r.dtype != want:
            # the entry's infer_type is the one place that says an output's dtype (one_hot's
            # ``dtype``, take's data dtype): a decomposition computing in another is cast
            r = b.op("Cast", r, dtype=want)
        graph.replace_entry((n, i), r.entry)
    if aux_new and (is_train or d["opdef"].mutates_inputs):
        nargs = len(d["opdef"].list_arguments(d["attrs"]))
        for (src, _), r in zip(ins[nargs:], aux_new):
            if r.dtype != graph.dtype((src, 0)):   # written back into the aux array's dtype
                r = b.op("Cast", r, dtype=graph.dtype((src, 0)))
            graph.meta["aux_updates"].append((graph.node(src)["name"], r.entry))
            graph.heads.append(r.entry)
    graph.g.remove_node(n)
