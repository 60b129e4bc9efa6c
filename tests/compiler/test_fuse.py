"""fuse: the work of fusion grows linearly with a chain, single-consumer trees change
no group, and the group graph's cycle checks are exact under contraction."""
import random

import networkx as nx
import pytest

from compiler import symbol as sym
from compiler.artifacts.compile import all_argument_shapes, all_dtypes
from compiler.frontend.graph import Graph
from compiler.passes import fuse as fuse_mod
from compiler.passes import pipeline
from compiler.passes.fuse import _GroupDag, fuse
from tests.models import lstm_cell, mlp


def _relu_chain(n):
    x = sym.Variable("data")
    for _ in range(n):
        x = sym.Activation(x, act_type="relu")
    return x


def _fused(symbol, shapes, train=True, no_grad=()):
    """The graph fuse() sees, its groups, and the work fuse counted."""
    shapes = all_argument_shapes(symbol, shapes)
    req = {n: ("null" if n in no_grad else "write") for n in symbol.list_arguments()} \
        if train else {}
    seen = {}
    real = pipeline.fuse

    def grab(graph):
        seen["graph"] = graph
        return real(graph)

    pipeline.fuse = grab
    try:
        g, groups, _ = pipeline.run_passes(symbol.to_graph(), shapes, req, train, {},
                                           all_dtypes(symbol, {}))
    finally:
        pipeline.fuse = real
    return seen["graph"], groups, g.meta["fuse_work"]


@pytest.mark.parametrize("train", [False, True])
def test_fusing_a_chain_is_linear_work(train):
    """A chain of N ReLUs (and its backward) is one kernel per phase, and the tile
    programs fusion builds cover N nodes a handful of times, not N**2 / 2: four
    times the chain is four times the work (sixteen times when it was quadratic)."""
    work = {}
    for n in (1000, 4000):
        _, groups, work[n] = _fused(_relu_chain(n), {"data": (2, 3)}, train)
        assert len(groups) == (2 if train else 1)
        assert work[n]["merges"] == (2 * n - 2 if train else n - 1)
    for key in ("tile_programs", "tile_program_nodes", "cycle_checks", "cycle_visits",
                "cycle_edges"):
        small, large = work[1000][key], work[4000][key]
        assert large <= 4.2 * max(small, 1) + 8, (key, small, large)
    assert work[4000]["tile_program_nodes"] <= 3 * 2 * 4000


def _read_twice_chain(n):
    """Each step reads the last twice (``tanh(x) * w + sigmoid(x)``): no single-consumer
    tree spans a step, so the groups grow as runs of the first sweep."""
    x, w = sym.Variable("data"), sym.Variable("w")
    for _ in range(n):
        x = sym.tanh(x) * w + sym.sigmoid(x)
    return x


def test_fusing_steps_that_read_a_value_twice_is_linear_work():
    """Forward and backward are one kernel each, and fusion's work grows with the
    steps: four times the steps, at most about four times the tile-program nodes,
    cycle checks and the edges they start from (node by node the group was rebuilt
    at every node: 250 steps took 52 s, 500 took 233 s; and each contraction's check
    scanned the group's hundreds of edges to the gradient sum of ``w``)."""
    work = {}
    for n in (100, 400):
        _, groups, work[n] = _fused(_read_twice_chain(n), {"data": (4, 8), "w": (4, 8)})
        assert len(groups) == 2
    for key in ("tile_programs", "tile_program_nodes", "cycle_checks", "cycle_visits",
                "cycle_edges"):
        small, large = work[100][key], work[400][key]
        assert large <= 4.2 * max(small, 1) + 8, (key, small, large)


def test_trees_change_no_group():
    """The single-consumer trees merged up front are the groups the pairwise merges
    build node by node: the same partition without them."""
    cases = [
        (lstm_cell(num_hidden=8), {"data": (4, 6), "prev_h": (4, 8), "prev_c": (4, 8)}, ()),
        (mlp(hidden=(16, 16)), {"data": (4, 12), "softmax_label": (4,)},
         ("data", "softmax_label")),
        (_relu_chain(30), {"data": (2, 3)}, ()),
    ]
    x, w = sym.Variable("data"), sym.Variable("w")
    for _ in range(6):                            # values read twice: no tree spans a step
        x = sym.tanh(x) * w + sym.sigmoid(x)
    cases.append((x, {"data": (4, 8), "w": (4, 8)}, ()))
    for symbol, shapes, no_grad in cases:
        graph, groups, _ = _fused(symbol, shapes, True, no_grad)
        real = fuse_mod._pointwise_trees
        fuse_mod._pointwise_trees = lambda *a: []
        try:
            pairwise = fuse(graph)
        finally:
            fuse_mod._pointwise_trees = real
        assert [g["nodes"] for g in groups] == [g["nodes"] for g in pairwise]


def _conv_bn_block():
    """Convolutions with batch norm and ReLU in two branches joined by a Concat, as in
    Inception-BN, then pooling and a classifier."""
    x = sym.Variable("data")

    def unit(x, name, filters, kernel, pad):
        x = sym.Convolution(x, num_filter=filters, kernel=kernel, pad=pad, name=f"conv_{name}")
        x = sym.BatchNorm(x, fix_gamma=False, name=f"bn_{name}")
        return sym.Activation(x, act_type="relu", name=f"relu_{name}")

    x = unit(x, "stem", 4, (3, 3), (1, 1))
    x = sym.Concat(unit(x, "a", 3, (1, 1), (0, 0)),
                   unit(unit(x, "b0", 2, (1, 1), (0, 0)), "b1", 3, (3, 3), (1, 1)), dim=1)
    x = sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max")
    x = sym.FullyConnected(sym.Flatten(x), num_hidden=5)
    return sym.SoftmaxOutput(x, name="softmax")


@pytest.mark.parametrize("train", [True, False])
def test_runs_change_no_group(train, monkeypatch):
    """The first sweep joins a run of nodes (a batch norm's statistics and their
    epilogue, the backward's sums) to its group with one tile program built, where
    node by node it builds one per node: the same partition, fewer programs built."""
    cases = [
        (_conv_bn_block(), {"data": (2, 3, 6, 6), "softmax_label": (2,)}, ("softmax_label",)),
        (lstm_cell(num_hidden=8), {"data": (4, 6), "prev_h": (4, 8), "prev_c": (4, 8)}, ()),
        (mlp(hidden=(16, 16)), {"data": (4, 12), "softmax_label": (4,)},
         ("data", "softmax_label")),
    ]
    built = {}
    for i, (symbol, shapes, no_grad) in enumerate(cases):
        graph, groups, work = _fused(symbol, shapes, train, no_grad)
        with monkeypatch.context() as m:
            m.setattr(fuse_mod, "_run", lambda *a, **k: [])     # node by node
            one_by_one = fuse(graph)
        assert [g["nodes"] for g in groups] == [g["nodes"] for g in one_by_one]
        built[i] = (work["tile_programs"], graph.meta["fuse_work"]["tile_programs"])
    runs, node_by_node = built[0]
    assert runs < node_by_node, built      # the batch norms' runs: fewer builds


def _conv_pool_block():
    """Two convolutions with batch norm, an average pooling, a classifier: convolutions
    beside reductions, matmuls, poolings and weight gradients."""
    x = sym.Variable("data")
    for i in range(2):
        x = sym.Convolution(x, num_filter=3, kernel=(3, 3), pad=(1, 1), name=f"conv{i}")
        x = sym.Activation(sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}"), act_type="relu")
    x = sym.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="avg")
    x = sym.FullyConnected(sym.Flatten(x), num_hidden=4)
    return sym.SoftmaxOutput(x, name="softmax")


@pytest.mark.parametrize("train", [True, False])
def test_refusals_without_building_change_no_group(train, monkeypatch):
    """Unions refused from their nodes' counts alone (a convolution beside a batch
    norm's statistics, ...) are the unions the builders refuse: the same partition
    with every union built, and fewer programs built without."""
    cases = [
        (_conv_bn_block(), {"data": (2, 3, 6, 6), "softmax_label": (2,)}, ("softmax_label",)),
        (_conv_pool_block(), {"data": (2, 2, 6, 6), "softmax_label": (2,)},
         ("softmax_label",)),
        (mlp(hidden=(16, 16)), {"data": (4, 12), "softmax_label": (4,)},
         ("data", "softmax_label")),
    ]
    for symbol, shapes, no_grad in cases:
        graph, groups, work = _fused(symbol, shapes, train, no_grad)
        with monkeypatch.context() as m:
            m.setattr(fuse_mod, "refused_without_building", lambda facts, size: False)
            built = fuse(graph)
        assert [g["nodes"] for g in groups] == [g["nodes"] for g in built]
        assert work["tile_programs"] <= graph.meta["fuse_work"]["tile_programs"]
        if symbol is not cases[2][0]:       # convolutions and their statistics
            assert work["tile_programs"] < graph.meta["fuse_work"]["tile_programs"], work


def test_every_refusal_without_building_is_a_refusal_of_the_builders():
    """Over every pair and triple of kernel nodes of a convolutional network's training
    graph (and each node with its readers): where the counts refuse a union,
    build_tile_program raises NotFusable; and the counts do refuse some."""
    from itertools import combinations
    from compiler.ir.build import (NO_FACTS, add_facts, build_tile_program, group_facts,
                                   refused_without_building)
    from compiler.ir.tile_program import NotFusable
    graph, _, _ = _fused(_conv_pool_block(), {"data": (2, 2, 6, 6), "softmax_label": (2,)},
                         True, ("softmax_label",))
    heads = set(map(tuple, graph.heads))
    kernel = [n for n in graph.topo() if not fuse_mod.is_source(graph, n)
              and not fuse_mod.is_free_view(graph, n)]
    unions = [set(c) for c in combinations(kernel, 2)]
    unions += [set(c) for c in combinations(kernel, 3)][::7]
    unions += [{n, *(v for v, _ in graph.consumers(n))} & set(kernel) for n in kernel]
    refused = 0
    for nodes in unions:
        facts = NO_FACTS
        for n in nodes:
            facts = add_facts(facts, group_facts(graph, n))
        if not refused_without_building(facts, len(nodes)):
            continue
        refused += 1
        with pytest.raises(NotFusable):
            build_tile_program(graph, nodes, fuse_mod.outside_uses(graph, nodes, heads))
    assert refused > 100, refused


def _dag_graph(edges, n):
    """A Graph of ``n`` op nodes (``elemwise_add`` of two inputs, ``negative`` of one,
    over one variable) with the given edges ``(u, v)``, ``u < v``."""
    g = Graph()
    src = g.add_node("null", "x")
    ids = []
    for v in range(n):
        ins = [ids[u] for u, w in edges if w == v][:2] or [src]
        op = "elemwise_add" if len(ins) == 2 else "negative"
        ids.append(g.add_node(op, f"n{v}", [(u, 0) for u in ins]))
    return g, ids


def test_cycle_through_a_group_that_is_not_convex():
    """Group {x, y} with a -> x and y -> b: contracting a with b closes a cycle through
    the group, although x comes after b in the node order (a search bounded by node
    positions would stop at x)."""
    # n0 = y, n1 = a, n2 = b = y + a, n3 = x = -a
    g, (y, a, b, x) = _dag_graph([(0, 2), (1, 2), (1, 3)], 4)
    order = g.topo()
    pos = {n: i for i, n in enumerate(order)}
    dag = _GroupDag(g, order, pos, {"cycle_checks": 0, "cycle_visits": 0, "cycle_edges": 0}, {})
    found = dag.search(x, y)
    assert found is not None
    dag.contract(x, y, found)                    # x's group joins y's: {x, y} named y
    assert dag.search(a, b) is None              # a -> {x, y} -> b
    assert dag.search(a, y) is not None          # a -> {x, y} directly: no other path


def test_contractions_keep_an_exact_cycle_check_and_a_topological_order():
    """Random DAGs contracted pair by pair: every answer of ``search`` (and, in every
    other DAG, of ``search_reader``, whose shortcut skips the search) agrees with a
    cycle search on the quotient graph, and the order stays topological."""
    rng = random.Random(0)
    shortcuts = 0
    for trial in range(40):
        n = rng.randint(4, 14)
        edges = sorted({(u, v) for v in range(n) for u in range(v)
                        if rng.random() < 0.3 and u < v})
        g, ids = _dag_graph(edges, n)
        # the graph as built (an op reads at most two inputs): its own edges
        real_edges = [(u, v) for u in ids for v in g.g.successors(u)]
        order = g.topo()
        pos = {m: i for i, m in enumerate(order)}
        dag = _GroupDag(g, order, pos, {"cycle_checks": 0, "cycle_visits": 0, "cycle_edges": 0}, {})
        label = {m: m for m in ids}              # node -> its group's label
        for _ in range(3 * n):
            a, c = rng.sample(ids, 2)
            ga, gc = label[a], label[c]
            if ga == gc:
                continue
            quotient = nx.DiGraph()
            quotient.add_nodes_from(set(label.values()))
            for u, v in real_edges:
                lu = ga if label[u] in (ga, gc) else label[u]
                lv = ga if label[v] in (ga, gc) else label[v]
                if lu != lv:
                    quotient.add_edge(lu, lv)
            cyclic = not nx.is_directed_acyclic_graph(quotient)
            if trial % 2:
                searched = dag.work["cycle_visits"], dag.work["cycle_edges"]
                found = dag.search_reader(ga, gc)
                # the shortcut counts the reader's in-edges only, and visits nothing
                shortcuts += (dag.work["cycle_visits"], dag.work["cycle_edges"]) == \
                    (searched[0], searched[1] + len(dag.inn[dag.vertex[gc]]))
            else:
                found = dag.search(ga, gc)
            assert (found is None) == cyclic, (trial, edges, a, c)
            if found is not None:
                dag.contract(ga, gc, found)
                for m in ids:
                    if label[m] == ga:
                        label[m] = gc
                for u, v in real_edges:          # the maintained order is topological
                    vu, vv = dag.vertex[label[u]], dag.vertex[label[v]]
                    assert vu == vv or dag.ord[vu] < dag.ord[vv]
    assert shortcuts >= 10                       # the shortcut was taken, and held
