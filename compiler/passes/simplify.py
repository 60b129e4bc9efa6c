"""Dead code, common subexpressions and zero arithmetic."""
from __future__ import annotations

from ..frontend.graph import Graph

_ADDS = {"elemwise_add", "broadcast_add"}
_ZERO_SOURCES = {"zeros_like"}


def simplify(graph: Graph, in_place: bool = False) -> Graph:
    """Return a copy with dead nodes removed, duplicates merged, ``x + 0`` folded
    (``graph`` itself, changed, with ``in_place``: the pipeline owns its graphs)."""
    out = graph if in_place else graph.copy()
    out.meta["keep_variables"] = True
    _fold_zero_adds(out)
    _merge_common(out)
    out.remove_dead()
    return out


def _is_zero(graph, entry):
    return graph.node(entry[0])["op"] in _ZERO_SOURCES


def _fold_zero_adds(graph: Graph):
    for n in graph.ops():
        d = graph.node(n)
        if d["op"] not in _ADDS:
            continue
        a, c = graph.inputs(n)
        out_shape = d["shapes"][0]
        for zero, other in ((a, c), (c, a)):
            if _is_zero(graph, zero) and graph.shape(other) == out_shape:
                graph.replace_entry((n, 0), other)
                break


def _merge_common(graph: Graph):
    seen = {}
    for n in graph.topo():
        d = graph.node(n)
        if d["op"] == "null" or d["opdef"].needs_random:   # two draws are two values
            continue
        key = (d["op"], tuple(sorted(d["raw"].items())), tuple(graph.inputs(n)), d["phase"])
        first = seen.get(key)
        if first is None:
            seen[key] = n
            continue
        for i in range(len(d["shapes"])):
            graph.replace_entry((n, i), (first, i))
