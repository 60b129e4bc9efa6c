"""The program of an extern node: a launch that calls ATen instead of a kernel.

A node whose lowering is :class:`~compiler.ops.registry.Extern` (a factorization, a
long sort, a dynamic programme) is a group of its own, as a pooling node is: no other
node joins it, so the fusion pass keeps it alone. Its tile program holds one
``extern`` instruction whose ``extra`` names the operator and its mxnet attribute
strings; ``compiler/artifacts/program.py`` turns it into a launch of kind ``extern``
(no kernel source), and ``runtime/launcher.py`` calls the registry entry's ``run``
on the planned buffers. The memory plan sees its tensors as it sees any kernel's:
inputs read, outputs written.
"""
from __future__ import annotations

from .tile_program import Instr, NotFusable, Store, TileProgram
from ..ops.registry import Extern

__all__ = ["is_extern", "extern_program"]


def is_extern(graph, n) -> bool:
    """Whether node ``n`` is an operator lowered as an extern launch."""
    d = graph.node(n)
    return d["op"] != "null" and isinstance(d["opdef"].lowering, Extern)


def extern_program(graph, nodes, outside_uses) -> TileProgram:
    """The program of a group holding one extern node alone.

    Parameters
    ----------
    graph : compiler.frontend.graph.Graph
    nodes : iterable
        The group's node ids: exactly one extern node.
    outside_uses : iterable
        The entries read outside the group (or heads): the outputs it stores
        (output 0 always).

    Raises
    ------
    NotFusable
        When the group holds anything besides the extern node.
    """
    nodes = set(nodes)
    if len(nodes) != 1:
        raise NotFusable("an extern launch stands alone")
    n = next(iter(nodes))
    if not is_extern(graph, n):
        raise NotFusable("not an extern node")
    d = graph.node(n)
    ins = list(graph.inputs(n))
    uses = set(map(tuple, outside_uses))
    stored = tuple(i for i in range(len(d["shapes"])) if i == 0 or (n, i) in uses)
    raw = {k: str(v) for k, v in d["raw"].items()
           if not (k.startswith("__") and k.endswith("__"))}
    # no node name: the Program is shared by every symbol of the same canonical graph
    # (names are not part of its key), so a name recorded here could be another's
    extra = {"op": d["op"], "attrs": raw, "stored": stored}
    domain = tuple(d["shapes"][0])
    instrs = [Instr("extern", "v1", tuple(range(len(ins))), extra=extra,
                    origin=f"operator '{d['op']}' (node '{d.get('name', '?')}')")]
    stores = [Store("v1", len(ins) + k, ()) for k in range(len(stored))]
    outs = [(n, i) for i in stored]
    return TileProgram("extern", domain, (), (), (), instrs, stores, ins + outs,
                       ["in"] * len(ins) + ["out"] * len(outs), False, frozenset([n]))
