"""A compile leaves no reference cycles among its objects: they are freed by reference
counting as it ends, and the cyclic collector, paused during the compile
(``compiler/frontend/collector.py``), finds nothing of the compiler's to walk (the
20,000-ReLU chain's first collection after its compile once walked 2 million objects)."""
import gc

import networkx as nx

from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from tests.models import mlp


def _relu_chain(n):
    x = sym.Variable("data")
    for _ in range(n):
        x = sym.Activation(x, act_type="relu")
    return x


def _cyclic_garbage(compile_once):
    """The compiler's objects and networkx graphs the collector finds after a compile."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        compile_once()
        gc.collect()
        found = [o for o in gc.garbage if isinstance(o, nx.Graph) or
                 type(o).__module__.startswith("compiler.")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return sorted({f"{type(o).__module__}.{type(o).__qualname__}" for o in found})


def test_a_training_compile_leaves_no_cycles(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    net = mlp(hidden=(8,))
    shapes = {"data": (4, 10), "softmax_label": (4,)}
    req = {n: "write" for n in net.list_arguments() if n not in ("data", "softmax_label")}
    assert _cyclic_garbage(lambda: compile_symbol(net, shapes, True, req)) == []
    chain = _relu_chain(40)
    assert _cyclic_garbage(lambda: compile_symbol(chain, {"data": (2, 3)}, True,
                                                  {"data": "write"})) == []


def test_the_check_finds_a_cycle():
    def leaky():
        g = nx.MultiDiGraph()       # networkx's own class caches its views on the graph
        g.add_node(1)
        return g.out_degree(1)      # a degree view refers back to its graph
    assert _cyclic_garbage(leaky) == ["networkx.classes.multidigraph.MultiDiGraph"]
