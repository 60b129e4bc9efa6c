"""Dead code, common subexpressions and zero arithmetic."""
from __future__ import annotations

from ..frontend.graph import Graph

_ADDS = {"elemwise_add", "broadcast_add"}
_ZERO_SOURCES = {"zeros_like"}
# operators whose outputs are zero wherever every input is: layout changes and views (the
# zero gradients of unused begin states reach a graph's data as Concat / Reshape of zeros)
_ZERO_KEEPING = {"Reshape", "Flatten", "expand_dims", "squeeze", "transpose", "SwapAxis",
                 "slice_axis", "slice", "Concat", "SliceChannel", "broadcast_to",
                 "broadcast_axis", "_materialize"}


def simplify(graph: Graph, in_place: bool = False, merge_common: bool = True) -> Graph:
    """Return a copy with dead nodes removed, duplicates merged (unless ``merge_common``
    is False: mxnet's ``MXNET_ELIMINATE_COMMON_EXPR=0``), ``x + 0`` folded (``graph``
    itself, changed, with ``in_place``: the pipeline owns its graphs)."""
    out = graph if in_place else graph.copy()
    out.meta["keep_variables"] = True
    _fold_zero_adds(out)
    if merge_common:
        _merge_common(out)
    out.remove_dead()
    return out


def _makes_zero(d) -> bool:
    name = d["opdef"].name
    return name in _ZERO_SOURCES or (name == "_zeros" and d["attrs"].get("value", 0) == 0)


def _fold_zero_adds(graph: Graph):
    """``x + 0 -> x`` where ``0`` is a value known to be zero: ``zeros_like``, ``_zeros``,
    or a layout change of zeros only (one topological walk, so a sum folded to a zero is
    zero to the nodes after it)."""
    zero = set()
    for n in graph.ops():
        d = graph.node(n)
        ins = graph.inputs(n)
        name = d["opdef"].name      # not the alias written (``zeros``, ``concat``)
        if name in _ADDS:
            a, c = ins
            for z, other in ((a, c), (c, a)):
                if z[0] in zero and graph.shape(other) == d["shapes"][0]:
                    graph.replace_entry((n, 0), other)
                    break
        elif _makes_zero(d) or (name in _ZERO_KEEPING and ins and
                                all(e[0] in zero for e in ins)):
            zero.add(n)


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
