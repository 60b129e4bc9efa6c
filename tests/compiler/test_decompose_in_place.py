"""decompose with ``in_place`` (the pipeline's call: it owns its graph) expands the
given graph itself and gives the answer of the copying pass (compiler/passes)."""
import torch

from compiler import symbol as sym
from compiler.frontend.reference import evaluate
from compiler.passes.decompose import decompose
from compiler.passes.infer_shapes import infer_shapes


def _net():
    x = sym.Variable("x")
    h = sym.FullyConnected(x, num_hidden=4, name="fc")
    return sym.SoftmaxOutput(sym.BatchNorm(h, name="bn", fix_gamma=False), name="out")


def _composites(graph):
    return sorted(graph.node(n)["op"] for n in graph.ops()
                  if graph.node(n)["op"] in ("FullyConnected", "BatchNorm", "SoftmaxOutput"))


def test_in_place_expands_the_given_graph_as_the_copy_does():
    shapes = {"x": (3, 5), "out_label": (3,)}
    given = infer_shapes(_net().to_graph(), shapes)
    kept = infer_shapes(_net().to_graph(), shapes)
    copied = decompose(kept, True)
    assert copied is not kept and _composites(kept) == ["BatchNorm", "FullyConnected",
                                                         "SoftmaxOutput"]
    changed = decompose(given, True, in_place=True)
    assert changed is given and _composites(given) == [] == _composites(copied)
    assert given.meta["aux_updates"] and len(given.heads) == len(copied.heads)
    feeds = {"x": torch.randn(3, 5), "fc_weight": torch.randn(4, 5),
             "fc_bias": torch.randn(4), "bn_gamma": torch.rand(4) + 0.5,
             "bn_beta": torch.randn(4), "bn_moving_mean": torch.zeros(4),
             "bn_moving_var": torch.ones(4), "out_label": torch.tensor([0., 2., 1.])}
    for a, b in zip(evaluate(copied, feeds).values(), evaluate(given, feeds).values()):
        assert torch.allclose(a, b, atol=1e-6)
    # nothing composite: the graph itself, either way
    assert decompose(given, True) is given and decompose(given, True, in_place=True) is given
