"""Partition the graph into kernel groups.

Fusion is split in two as in TorchInductor: *legality* (``try_merge``: one
phase, contracting the two groups leaves the group graph acyclic, and the tile
program of the union can be built) and *the order in which merges are tried*
(producer into consumer along the topological order, then siblings, for up to
three rounds), which decides what the groups become. Pointwise chains join
each other, reductions take their prologue and epilogue, matmuls take their
epilogue (bias, activation, even a row softmax when a tile spans the row) and
sums of matmuls over the same output share one kernel.

The cost of fusion is the cost of its legality checks, so each is kept
proportional to what it looks at, never to the size of the graph:

* **Closed single-consumer trees first** (:func:`_pointwise_trees`): pointwise
  nodes (and matmuls, as leaves) whose value one pointwise node of their phase
  reads, and which read nothing of their phase from outside the tree. The
  pairwise merges would build each such tree node by node, the tile program of
  every prefix: a chain of N operators cost N**2 / 2 node visits. Each tree's
  program is built once instead; a tree whose program cannot be built is left
  to the pairwise merges. The partition is the same either way
  (``tests/compiler/test_fuse.py``).
* **Runs in the first sweep** (:func:`_run`): a stretch of the node order whose
  single nodes would each join one growing group, one merge per node (a batch
  norm's statistics and epilogue into its reduction, 11 nodes, the backward's sums
  and their epilogue), is joined with the union's program built once; node by node
  each merge builds the whole group again, quadratic in its size. A union that
  cannot be built is left to the node-by-node merges. The partition is the same
  either way on the models ``tests/compiler/test_fuse.py`` checks and on every
  model the test suite compiles (compared while this was written); it could differ
  only where a node-by-node step fails to build while the whole run builds, and
  then the run is one legal kernel.
* **Refused merges are remembered.** Whether two groups can merge depends only
  on the two groups (the union's tile program) and on the partition of the
  rest (the cycle check), and merging other groups can only add paths: a merge
  refused once stays refused until one of the two groups changes, so later
  rounds do not rebuild it.
* **The commonest refusals without a tile program** (``ir/build.py``:
  :func:`~compiler.ir.build.refused_without_building`): each group keeps counts of
  the nodes that decide some refusals alone (convolutions, their weight gradients,
  nodes that stand alone, nodes no convolution takes as its epilogue), and a union
  those counts refuse is refused before its cycle check and its program. A
  convolution's group is asked to take its batch norm's statistics again each
  time either grows (Inception-BN: 629 such programs were built and refused).
* **Cycle checks on the group graph in a maintained topological order**
  (:class:`_GroupDag`, Pearce and Kelly's dynamic topological sort): two
  groups close a cycle only through groups ordered between them, so the
  search visits those alone, and contracting the two reorders only what it
  visited.

``graph.meta['fuse_work']`` counts the work (tile programs built and the
nodes they covered, vertices the cycle searches visited and the edges they
started from): tests check that it grows linearly with a chain.
"""
from __future__ import annotations

from ..frontend.graph import Graph, UncachedDiGraph
from ..ir.build import (NO_FACTS, add_facts, build_tile_program, family_of, group_facts,
                        refused_without_building)
from ..ir.tile_program import NotFusable
from ..ops.registry import MatMul, Pointwise, View, prod


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
    graph._inputs_memo = {n: graph.inputs(n) for n in graph.g._node}   # the graph stays as it is
    try:
        return _fuse(graph)
    finally:
        graph._inputs_memo = None


def _fuse(graph: Graph) -> list:
    head_set = set(map(tuple, graph.heads))
    order = graph.topo()
    pos = {n: i for i, n in enumerate(order)}
    graph.meta["topo_pos"] = pos
    work = {"tile_programs": 0, "tile_program_nodes": 0, "cycle_checks": 0,
            "cycle_visits": 0, "cycle_edges": 0, "merges": 0}
    readers = _readers(graph, order)
    ins = graph._inputs_memo
    node_data = graph.g._node
    sources = {n for n in order if is_source(graph, n)}
    kernel_nodes = [n for n in order if n not in sources and not is_free_view(graph, n)]
    group_of = {n: n for n in kernel_nodes}
    members = {n: {n} for n in kernel_nodes}
    dag = None               # made when the first pairwise merge needs a cycle check

    def build(nodes):
        work["tile_programs"] += 1
        work["tile_program_nodes"] += len(nodes)
        return build_tile_program(graph, nodes, _outside(graph, nodes, head_set, readers))

    def program_or_none(nodes):
        try:
            return build(nodes)
        except NotFusable:
            return None

    # 1. Single-consumer pointwise trees, each checked once as a whole.
    programs = {}
    for root, tree in _pointwise_trees(graph, order, ins, group_of, head_set, readers):
        try:
            programs[root] = build(tree)
        except NotFusable:
            continue
        for n in tree:
            if n != root:
                group_of[n] = root
                del members[n]
        members[root] = set(tree)
        work["merges"] += len(tree) - 1

    def program_of(g):
        # built on first need: most single nodes join a group before anything asks
        if g not in programs:
            programs[g] = program_or_none(members[g])
        return programs[g]

    # 2. Pairwise merges: producer into consumer, then siblings.
    stamp = dict.fromkeys(members, 0)
    stamps = iter(range(1, 1 << 62))
    refused = set()
    facts = {}

    def facts_of(g):
        # what refuses a union before its program is built (build.py: group_facts)
        found = facts.get(g)
        if found is None:
            found = NO_FACTS
            for n in members[g]:
                found = add_facts(found, group_facts(graph, n))
            facts[g] = found
        return found

    def group_dag():
        nonlocal dag
        if dag is None:
            dag = _GroupDag(graph, order, pos, work, group_of)
        return dag

    def try_merge(gu, gv):
        if gu is None or gv is None or gu == gv:
            return False
        if graph.node(gu)["phase"] != graph.node(gv)["phase"]:
            return False
        key = (gu, stamp[gu], gv, stamp[gv]) if gu < gv else (gv, stamp[gv], gu, stamp[gu])
        if key in refused:
            return False
        union_facts = add_facts(facts_of(gu), facts_of(gv))
        if refused_without_building(union_facts, len(members[gu]) + len(members[gv])):
            refused.add(key)
            return False
        found = group_dag().search(gu, gv)
        if found is None:
            refused.add(key)
            return False
        union = members[gu] | members[gv]
        try:
            program = build(union)
        except NotFusable:
            refused.add(key)
            return False
        dag.contract(gu, gv, found)
        for n in members[gu]:
            group_of[n] = gv
        members[gv] = union
        del members[gu], stamp[gu]
        programs.pop(gu, None)
        facts.pop(gu, None)
        programs[gv] = program
        facts[gv] = union_facts
        stamp[gv] = next(stamps)
        work["merges"] += 1
        return True

    def speculate(v):
        """The first sweep's merges at ``v`` and after it, made as runs: None when
        ``v`` starts no run (the sweep goes on node by node), else whether a merge
        was made."""
        if group_of.get(v) != v or len(members[v]) != 1:
            return None
        read = set(_groups_read(graph, v, ins, group_of, node_data[v]["phase"]) or ())
        if len(read) != 1:
            return None
        (g,) = read
        run = _run(graph, order, pos[v], ins, group_of, members, g)
        if len(run) < 2:
            return None
        if merge_run(g, run):
            return True
        unspeculated.update(run)                # the union is not one kernel
        if try_merge(g, v):                     # the sweep's one merge at v
            return True
        # v stays alone: the nodes after it may grow from it, reading g before it
        run = _run(graph, order, pos[v] + 1, ins, group_of, members, v, {g})
        if len(run) >= 2:
            if merge_run(v, run):
                swept.update(run)
                return True
            unspeculated.update(run)
        return False

    def merge_run(g, run):
        """Join the nodes of ``run`` to group ``g`` with one tile program built, the
        union's (see :func:`_run`); False, changing nothing, if it cannot be built."""
        if group_dag().keep_all:
            return False
        union_facts = facts_of(g)
        for w in run:
            union_facts = add_facts(union_facts, facts_of(w))
        union = members[g] | set(run)
        if refused_without_building(union_facts, len(union)):
            return False
        try:
            program = build(union)
        except NotFusable:
            return False
        label = g
        for w in run:               # the contractions the pairwise merges would make
            found = dag.search_reader(label, w)
            if found is None:       # cannot happen: a run's nodes read nothing else
                raise AssertionError(f"fusion run {run} closes a cycle at {w}")
            dag.contract(label, w, found)
            del members[label], stamp[label]
            programs.pop(label, None)
            facts.pop(label, None)
            label = w
        for n in union:
            group_of[n] = label
        members[label] = union
        programs[label] = program
        facts[label] = union_facts
        stamp[label] = next(stamps)
        work["merges"] += len(run)
        return True

    unspeculated, swept = set(), set()
    for _round in range(3):
        merged = False
        # Vertical: a producer into its consumer.
        for v in order:
            if v not in group_of:
                continue
            if _round == 0:
                if v in swept:          # joined by a run: its merges are made
                    continue
                if v not in unspeculated:
                    made = speculate(v)
                    if made is not None:
                        merged |= made
                        continue
            for u, _ in ins[v]:
                gu, gv = group_of.get(u), group_of[v]
                if gu is not None and gu != gv and \
                        node_data[gu]["phase"] == node_data[gv]["phase"]:
                    merged |= try_merge(gu, gv)      # (try_merge's first tests, inlined)
        # Horizontal: siblings feeding the same consumer, or reading the same input.
        for v in order:
            if v not in group_of and v not in sources:
                continue
            near = {group_of[u] for u, _ in ins[v] if u in group_of}
            near.update(group_of[w] for w in graph.g._succ[v] if w in group_of)
            if len(near) < 2:
                continue
            near = sorted(near, key=pos.__getitem__)
            for i in range(len(near)):
                for j in range(i + 1, len(near)):
                    a, c = group_of.get(near[i]), group_of.get(near[j])
                    # groups of two phases never merge (try_merge's test, made before
                    # their programs are asked for: a forward value and the backward
                    # reading it, at every node of a chain)
                    if a is not None and c is not None and a != c and \
                            node_data[a]["phase"] == node_data[c]["phase"] and \
                            program_of(a) is not None and program_of(c) is not None and \
                            programs[a].kind == "pointwise" == programs[c].kind:
                        merged |= try_merge(a, c)
        if not merged:
            break

    groups = []
    for g, nodes in members.items():
        if program_of(g) is None:
            programs[g] = _program(graph, nodes, head_set, strict=True)
        groups.append({"nodes": frozenset(nodes), "program": programs[g],
                       "phase": graph.node(g)["phase"],
                       "first": min(pos[n] for n in nodes)})
    scheduled = _schedule(graph, groups, ins)
    del graph.meta["topo_pos"]
    graph.meta["fuse_work"] = work
    return scheduled


def _groups_read(graph, w, ins, group_of, phase):
    """The groups of ``phase`` that node ``w`` reads, in the order of its inputs (one
    entry per input), or None if it reads a free view of a value computed in ``phase``."""
    nodes, found = graph.g._node, []
    for u, _ in ins[w]:
        d = nodes[u]
        if d["op"] == "null" or d["phase"] != phase:
            continue
        if u not in group_of:                   # a free view: of a source, or not a run
            if any(nodes[x]["op"] != "null" and nodes[x]["phase"] == phase for x, _ in ins[u]):
                return None
            continue
        found.append(group_of[u])
    return found


def _run(graph, order, start, ins, group_of, members, grow, behind=frozenset()):
    """The nodes from ``order[start]`` on that the first vertical sweep joins, one at a
    time, to group ``grow`` when each merge succeeds (see :func:`fuse`'s runs).

    A run is the longest stretch of the order of single-node groups of ``grow``'s phase
    that can join a group computing their operands, each reading ``grow`` or an earlier
    node of the run and nothing else computed in that phase (free views of such values
    end a run: they are a path around the group), except groups in ``behind`` read
    before any of those. At each, the sweep tries one merge, of the grown group and the
    node: a ``behind`` group tried first is refused by the cycle check (it reaches the
    node through ``grow``), none is tried after. Non-kernel nodes in the stretch are
    passed over, as the sweep passes them.
    """
    phase = graph.g._node[grow]["phase"]
    inside, run = {grow}, []
    for i in range(start, len(order)):         # (a slice would copy the rest of the order)
        w = order[i]
        if w not in group_of:                   # a source or free view
            continue
        if group_of[w] != w or len(members[w]) != 1 or graph.g._node[w]["phase"] != phase \
                or not _joins_a_group(graph, w):
            break
        read = _groups_read(graph, w, ins, group_of, phase) or ()
        first = next((i for i, r in enumerate(read) if r in inside), None)
        if first is None or any(r not in inside for r in read[first:]) or \
                any(r not in behind for r in read[:first]):
            break
        run.append(w)
        inside.add(w)
    return run


def _joins_a_group(graph, n) -> bool:
    """Whether node ``n`` can join a group that computes its operands: not a matmul,
    convolution, pooling or extern node (each reads its operands from memory)."""
    return not isinstance(graph.node(n)["opdef"].lowering, MatMul) and \
        family_of(graph, [n]) == "fused"


def _readers(graph, order) -> dict:
    """entry -> the nodes reading it, one per edge (what ``outside_uses`` asks of
    ``graph.consumers``, gathered in one sweep)."""
    readers, succ = {}, graph.g._succ
    for n in order:
        for v, keyed in succ[n].items():
            for data in keyed.values():
                readers.setdefault((n, data["out"]), []).append(v)
    return readers


def _outside(graph, nodes, head_set, readers) -> list:
    """:func:`outside_uses` over the precomputed readers."""
    uses = []
    for n in nodes:
        for i in range(len(graph.node(n)["shapes"])):
            entry = (n, i)
            if entry in head_set or any(v not in nodes for v in readers.get(entry, ())):
                uses.append(entry)
    return sorted(uses)


def _program(graph, nodes, head_set, strict=False):
    try:
        return build_tile_program(graph, nodes, outside_uses(graph, nodes, head_set))
    except NotFusable as exc:
        if strict:
            n = next(iter(nodes))
            from ..errors import MXNetError
            raise MXNetError(f"cannot generate a kernel for {graph.describe(n)}: {exc}") from None
        return None


def _is_pointwise(graph, n) -> bool:
    return isinstance(graph.node(n)["opdef"].lowering, Pointwise)


def _pointwise_trees(graph, order, ins, kernel, head_set, readers) -> list:
    """``(root, nodes)`` of every *closed* tree of two or more pointwise nodes
    (matmuls as leaves).

    A pointwise node is closed when each kernel node of its phase it reads is
    a closed node that nothing else of that phase reads (and no output). A
    matmul is closed whatever it reads: its operands are read from memory, so no
    merge ever joins their producers into it. A closed node links to the one
    node of its phase reading it, if there is exactly one and it is a closed
    pointwise node (a matmul's epilogue, a sum of matmuls: the per-step weight
    gradients of an RNN, a chain of 2T nodes). Links form trees whose
    members read nothing of their phase from outside the tree: the pairwise
    merges below would build exactly such a tree, node by node, when they
    reach its root, since no other group can take a member first (a member's
    value has no other reader in its phase). Values the other phase reads
    (the forward activations the backward needs) are stored whatever the
    grouping, so those readers do not break a tree. Contracting a tree cannot
    close a cycle: every path out of a member goes up the tree to its root,
    and a path from the root back into the tree would be a cycle of the graph.
    """
    closed, link = set(), {}
    nodes = graph.g._node
    for n in order:
        if n not in kernel:
            continue
        d = nodes[n]
        phase = d["phase"]
        low = d["opdef"].lowering
        if isinstance(low, MatMul):
            pass     # a leaf: its operands are read from memory, no merge joins their producers
        elif not isinstance(low, Pointwise) or \
                any(u in kernel and nodes[u]["phase"] == phase and link.get(u) != n
                    for u, _ in ins[n]):
            continue
        closed.add(n)
        if len(d["shapes"]) != 1 or (n, 0) in head_set:
            continue
        same = {v for v in readers.get((n, 0), ()) if nodes[v]["phase"] == phase}
        if len(same) == 1:
            (v,) = same
            if v in kernel and isinstance(nodes[v]["opdef"].lowering, Pointwise):
                link[n] = v
    root_of, trees = {}, {}
    for n in reversed(order):              # a parent comes after its children
        v = link.get(n)
        if v is not None and v in closed:
            r = root_of[n] = root_of.get(v, v)
            trees.setdefault(r, [r]).append(n)
    return [(r, set(nodes)) for r, nodes in trees.items()]


class _GroupDag:
    """The graph of groups and free views (variables read by nothing computed are
    left out), kept in a topological order ``ord`` under contraction.

    Merges only join groups of one phase, and no backward value feeds the
    forward phase, so a path between two groups of one phase never leaves it:
    edges between phases are left out (all kept if some backward value did
    feed a forward node). Each vertex is named by a member node; :meth:`contract`
    keeps the vertex with more edges and renames the other in its neighbours,
    so renaming costs the smaller degree.
    """

    def __init__(self, graph, order, pos, work, group_of):
        """The graph of the groups in ``group_of`` (label of each grouped node) made
        when the first pairwise merge needs it: the groups then are single nodes and
        the single-consumer trees, and a tree placed at its root keeps the order
        topological (its inputs come before its members, its readers after the root)."""
        self.work = work
        phase = {n: graph.node(n)["phase"] for n in order if not is_source(graph, n)}
        edges = [(u, v) for v in phase for u in graph.g._pred[v] if u in phase]
        keep_all = any(phase[u] == "bwd" and phase[v] == "fwd" for u, v in edges)
        self.keep_all = keep_all
        self.vertex = {n: n for n in phase if group_of.get(n, n) == n}   # label -> vertex
        self.out = {n: set() for n in self.vertex}
        self.inn = {n: set() for n in self.vertex}
        for u, v in edges:
            gu, gv = group_of.get(u, u), group_of.get(v, v)
            if gu != gv and (keep_all or phase[u] == phase[v]):
                self.out[gu].add(gv)
                self.inn[gv].add(gu)
        self.ord = {n: pos[n] for n in self.vertex}

    def _merge(self, a, b) -> int:
        """Join vertices ``a`` and ``b``; return the survivor (the one with more edges)."""
        if len(self.out[a]) + len(self.inn[a]) < len(self.out[b]) + len(self.inn[b]):
            a, b = b, a
        out_a, in_a = self.out[a], self.inn[a]
        for w in self.out.pop(b):
            self.inn[w].discard(b)
            if w != a:
                self.inn[w].add(a)
                out_a.add(w)
        for w in self.inn.pop(b):
            self.out[w].discard(b)
            if w != a:
                self.out[w].add(a)
                in_a.add(w)
        out_a.discard(b)
        in_a.discard(b)
        del self.ord[b]
        return a

    def search(self, ga, gb):
        """None if contracting groups ``ga`` and ``gb`` closes a cycle, else what
        :meth:`contract` needs to keep the order topological.

        With ``x`` before ``y`` in the order, a cycle is a path ``x -> ... -> y``
        through some other vertex; only vertices ordered between the two can lie
        on it. The vertices after ``x`` it reaches (``fwd``) and those before
        ``y`` reaching it (``bwd``) are what the contraction reorders.
        """
        self.work["cycle_checks"] += 1
        a, b = self.vertex[ga], self.vertex[gb]
        x, y = (a, b) if self.ord[a] < self.ord[b] else (b, a)
        ox, oy = self.ord[x], self.ord[y]
        ord_ = self.ord
        self.work["cycle_edges"] += len(self.out[x]) + len(self.inn[y])    # the starts
        fwd, stack = set(), [w for w in self.out[x] if w != y and ord_[w] < oy]
        while stack:
            w = stack.pop()
            if w in fwd:
                continue
            fwd.add(w)
            for z in self.out[w]:
                if z == y:
                    self.work["cycle_visits"] += len(fwd)
                    return None
                if z not in fwd and ord_[z] < oy:
                    stack.append(z)
        bwd, stack = set(), [w for w in self.inn[y] if w != x and ord_[w] > ox]
        while stack:
            w = stack.pop()
            if w in bwd:
                continue
            bwd.add(w)
            stack.extend(z for z in self.inn[w] if z not in bwd and ord_[z] > ox)
        self.work["cycle_visits"] += len(fwd) + len(bwd)
        return x, y, fwd, bwd

    def search_reader(self, ga, gb):
        """:meth:`search` where group ``gb`` may read only ``ga`` and vertices ordered
        before it (a run's node, :func:`_run`): then no path leaves ``ga`` and comes back
        into ``gb`` (every other vertex ``gb`` reads comes before ``ga``, so ``ga`` reaches
        none), and no vertex needs to move, so nothing is searched. Anything else is
        searched as :meth:`search` does."""
        a, b = self.vertex[ga], self.vertex[gb]
        oa = self.ord[a]
        if self.ord[b] > oa and all(u == a or self.ord[u] < oa for u in self.inn[b]):
            self.work["cycle_checks"] += 1
            self.work["cycle_edges"] += len(self.inn[b])
            return a, b, set(), set()
        return self.search(ga, gb)

    def contract(self, gu, gv, found):
        """Contract group ``gu`` into ``gv`` after :meth:`search` allowed it.

        Pearce and Kelly's reordering: the visited vertices take the same
        positions, those reaching ``y`` first, then ``y`` and ``x`` side by side,
        then those ``x`` reaches; the contracted vertex takes ``y``'s place.
        """
        x, y, fwd, bwd = found
        ord_ = self.ord
        if fwd or bwd:
            moved = sorted(bwd, key=ord_.__getitem__) + [y, x] + \
                sorted(fwd, key=ord_.__getitem__)
            for v, slot in zip(moved, sorted(ord_[v] for v in moved)):
                ord_[v] = slot
        at = min(ord_[x], ord_[y])
        v = self._merge(self.vertex.pop(gu), self.vertex[gv])
        ord_[v] = at
        self.vertex[gv] = v


def _schedule(graph, groups, ins):
    """Order groups topologically (forward phase first); ``ins``: each node's inputs."""
    import networkx as nx
    dag = UncachedDiGraph()
    index = {}
    for i, grp in enumerate(groups):
        dag.add_node(i)
        for n in grp["nodes"]:
            index[n] = i

    def producer_groups(n):
        # the groups n reads, through free views (a loop, not a closure calling itself:
        # that is a reference cycle, left to the cyclic collector)
        acc, todo = set(), [n]
        while todo:
            for u, _ in ins[todo.pop()]:
                if u in index:
                    acc.add(index[u])
                elif is_free_view(graph, u):
                    todo.append(u)
        return acc

    for i, grp in enumerate(groups):
        for n in grp["nodes"]:
            for j in producer_groups(n):
                if j != i:
                    dag.add_edge(j, i)
    key = lambda i: (groups[i]["phase"] != "fwd", groups[i]["first"])
    order = list(nx.lexicographical_topological_sort(dag, key=key))
    return [groups[i] for i in order]


def unfused_counts(graph: Graph) -> dict:
    """Launches and bytes if every live non-view operator ran as its own kernel."""
    live = graph.ancestors(h for h, _ in graph.heads)
    counts = {"fwd": 0, "bwd": 0, "bytes": 0}
    nodes, pred = graph.g._node, graph.g._pred
    numel = {}                 # shape -> elements: the same few shapes, again and again

    def size(shape):
        shape = tuple(shape)
        got = numel.get(shape)
        if got is None:
            got = numel[shape] = prod(shape)
        return got

    elements = 0
    for n in live:             # sums and counts: any order gives the same
        d = nodes[n]
        if d["op"] == "null" or isinstance(d["opdef"].lowering, View):
            continue
        counts[d["phase"]] += 1
        for u, keyed in pred[n].items():
            shapes = nodes[u]["shapes"]
            for data in keyed.values():           # one edge per input slot
                elements += size(shapes[data["out"]])
        for s in d["shapes"]:
            elements += size(s)
    counts["bytes"] = 4 * elements
    return counts
