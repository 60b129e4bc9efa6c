"""Partition the graph into kernel groups.

Fusion is split as in TorchInductor: ``can_fuse`` (legal?) builds the tile
program of the union and checks that contracting the two groups leaves the
group graph acyclic; ``score`` (worth it?) prefers merges that keep the
largest intermediate out of memory. Pointwise chains join each other,
reductions take their prologue and epilogue, matmuls take their epilogue
(bias, activation, even a row softmax when a tile spans the row) and sums
of matmuls over the same output share one kernel.
"""
from __future__ import annotations

from ..frontend.graph import Graph
from ..ir.build import build_tile_program
from ..ir.tile_program import NotFusable
from ..ops.registry import View, prod


def is_free_view(graph: Graph, n) -> bool:
    d = graph.node(n)
    return d["op"] != "null" and isinstance(d["opdef"].lowering, View)


def is_source(graph: Graph, n) -> bool:
    """A value no kernel computes: a variable (argument, state, seed ...)."""
    return graph.node(n)["op"] == "null"


def outside_uses(graph: Graph, nodes: set, head_set: set) -> list:
    """Entries computed by ``nodes`` that something outside them reads."""
    uses = []
    for n in nodes:
        for i in range(len(graph.node(n)["shapes"])):
            entry = (n, i)
            readers = [v for v, _ in graph.consumers(n, i)]
            if entry in head_set or any(v not in nodes for v in readers):
                uses.append(entry)
    return sorted(uses)


def fuse(graph: Graph) -> list:
    """Return the kernel groups in launch order.

    Each group is a dict with ``nodes`` (frozenset), ``program``
    (:class:`~compiler.ir.tile_program.TileProgram`) and ``phase``.
    """
    head_set = set(map(tuple, graph.heads))
    order = graph.topo()
    pos = {n: i for i, n in enumerate(order)}
    succ = {n: list(graph.g.successors(n)) for n in order}   # the cycle check's hot loop
    graph.meta["topo_pos"] = pos
    group_of, members = {}, {}
    for n in order:
        if not is_source(graph, n) and not is_free_view(graph, n):
            group_of[n] = n
            members[n] = {n}
    programs = {g: _program(graph, nodes, head_set) for g, nodes in members.items()}

    def try_merge(gu, gv):
        if gu is None or gv is None or gu == gv:
            return False
        if graph.node(gu)["phase"] != graph.node(gv)["phase"]:
            return False
        union = members[gu] | members[gv]
        if _creates_cycle(succ, members[gu], members[gv], pos, group_of, members):
            return False
        try:
            program = build_tile_program(graph, union, outside_uses(graph, union, head_set))
        except NotFusable:
            return False
        for n in members[gu]:
            group_of[n] = gv
        members[gv] = union
        del members[gu], programs[gu]
        programs[gv] = program
        return True

    for _round in range(3):
        merged = False
        # Vertical: a producer into its consumer.
        for v in order:
            if v not in group_of:
                continue
            for u, _ in graph.inputs(v):
                merged |= try_merge(group_of.get(u), group_of.get(v))
        # Horizontal: siblings feeding the same consumer, or reading the same input.
        for v in order:
            if v not in group_of and not is_source(graph, v):
                continue
            near = sorted({group_of[u] for u, _ in graph.inputs(v) if u in group_of} |
                          {group_of[w] for w in graph.g.successors(v) if w in group_of},
                          key=lambda g: pos[g])
            for i in range(len(near)):
                for j in range(i + 1, len(near)):
                    a, c = group_of.get(near[i]), group_of.get(near[j])
                    if a is not None and c is not None and a != c and \
                            programs.get(a) is not None and programs.get(c) is not None and \
                            programs[a].kind == "pointwise" == programs[c].kind:
                        merged |= try_merge(a, c)
        if not merged:
            break

    groups = []
    for g, nodes in members.items():
        if programs[g] is None:
            programs[g] = _program(graph, nodes, head_set, strict=True)
        groups.append({"nodes": frozenset(nodes), "program": programs[g],
                       "phase": graph.node(g)["phase"],
                       "first": min(pos[n] for n in nodes)})
    scheduled = _schedule(graph, groups, group_of)
    del graph.meta["topo_pos"]
    return scheduled


def _program(graph, nodes, head_set, strict=False):
    try:
        return build_tile_program(graph, nodes, outside_uses(graph, nodes, head_set))
    except NotFusable as exc:
        if strict:
            n = next(iter(nodes))
            from ..errors import MXNetError
            raise MXNetError(f"cannot generate a kernel for {graph.describe(n)}: {exc}") from None
        return None


def _creates_cycle(succ, a: set, b: set, pos, group_of, members) -> bool:
    """Would contracting groups ``a`` and ``b`` close a cycle through another node
    or another group (a group is one launch: reaching one member reaches all)?

    A depth-first search from the union's successors, bounded by the union's last
    topological position (nothing later can lead back into it); each group is
    expanded once, when the search first reaches one of its members.
    """
    union = a | b
    limit = max(pos[n] for n in union)
    stack = [v for n in union for v in succ[n] if v not in union]
    seen, seen_groups = set(), set()
    while stack:
        n = stack.pop()
        if n in seen or pos[n] > limit:
            continue
        seen.add(n)
        g = group_of.get(n)
        if g is None:
            nodes = (n,)
        elif g in seen_groups:
            continue
        else:
            seen_groups.add(g)
            nodes = members[g]
        for m in nodes:
            seen.add(m)
            for v in succ[m]:
                if v in union:
                    return True
                if v not in seen:
                    stack.append(v)
    return False


def _schedule(graph, groups, group_of):
    """Order groups topologically (forward phase first)."""
    import networkx as nx
    dag = nx.DiGraph()
    index = {}
    for i, grp in enumerate(groups):
        dag.add_node(i)
        for n in grp["nodes"]:
            index[n] = i

    def producer_groups(n, acc):
        for u, _ in graph.inputs(n):
            if u in index:
                acc.add(index[u])
            elif is_free_view(graph, u):
                producer_groups(u, acc)
        return acc

    for i, grp in enumerate(groups):
        for n in grp["nodes"]:
            for j in producer_groups(n, set()):
                if j != i:
                    dag.add_edge(j, i)
    key = lambda i: (groups[i]["phase"] != "fwd", groups[i]["first"])
    order = list(nx.lexicographical_topological_sort(dag, key=key))
    return [groups[i] for i in order]


def unfused_counts(graph: Graph) -> dict:
    """Launches and bytes if every live non-view operator ran as its own kernel."""
    import networkx as nx
    live = set()
    for h, _ in graph.heads:
        if h not in live:
            live.add(h)
            live |= nx.ancestors(graph.g, h)
    counts = {"fwd": 0, "bwd": 0, "bytes": 0}
    for n in graph.ops():
        if n not in live or is_free_view(graph, n) or is_source(graph, n):
            continue
        d = graph.node(n)
        counts[d["phase"]] += 1
        for e in graph.inputs(n):
            counts["bytes"] += 4 * prod(graph.shape(e))
        for s in d["shapes"]:
            counts["bytes"] += 4 * prod(s)
    return counts
