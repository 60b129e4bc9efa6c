"""The tile program of one kernel group, whatever its family.

:func:`build_tile_program` is the fusion pass's legality check: a convolution anchors
an implicit GEMM with its epilogue (``conv.py``), a pooling node stands alone
(``pool.py``), so does an extern node (``extern.py``), every other group is pointwise,
a reduction, a matmul or a scatter (``tile_program.py``).

:func:`group_facts` and :func:`refused_without_building` answer the commonest
refusals of the fusion pass before a tile program is built (a convolution's group
asked to take a batch norm's statistics, again as that group grows).
"""
from __future__ import annotations

from .conv import conv_program
from .extern import extern_program, is_extern
from .pool import pool_program
from .tile_program import TileProgram, build_fused_program, special_kind
from ..ops.conv import CONV_KINDS
from ..ops.pool import POOL_KINDS
from ..ops.registry import MatMul, Reduction


def build_tile_program(graph, nodes, outside_uses) -> TileProgram:
    """Build the tile program computing ``nodes``, storing ``outside_uses``.

    Parameters
    ----------
    graph : compiler.frontend.graph.Graph
        The graph holding the group.
    nodes : iterable
        The group's node ids.
    outside_uses : iterable
        The group's output entries read outside it (or graph heads): what it stores.

    Returns
    -------
    TileProgram
        The program, with each tensor's storage dtype in ``dtypes``.

    Raises
    ------
    NotFusable
        When the nodes cannot share one domain, or a store would be a race.
    """
    family = family_of(graph, nodes)
    if family == "extern":
        prog = extern_program(graph, nodes, outside_uses)
    elif family == "conv":
        prog = conv_program(graph, nodes, outside_uses)
    elif family == "pool":
        prog = pool_program(graph, nodes, outside_uses)
    else:
        prog = build_fused_program(graph, nodes, outside_uses)
    prog.dtypes = [graph.dtype(e) for e in prog.tensors]
    return prog


def family_of(graph, nodes) -> str:
    """The kernel family of a group: ``extern`` if a node of ``nodes`` is lowered as an
    extern launch, else ``conv`` if one is a convolution, else ``pool`` if one is a
    pooling, else ``fused``: one look at each node (a chain's group holds tens of
    thousands)."""
    found = set()
    for n in nodes:
        if is_extern(graph, n):
            return "extern"
        kind = special_kind(graph, n)
        if kind is not None:
            found.add(kind)
    if not found.isdisjoint(CONV_KINDS):
        return "conv"
    if not found.isdisjoint(POOL_KINDS):
        return "pool"
    return "fused"


# A group's facts: counts of its nodes that decide, without a tile program, that some
# unions are refused; a union's facts are the sum of its parts' (``add_facts``).
NO_FACTS = (0, 0, 0, 0)     # (stands alone, convolutions, weight gradients, no epilogue)


def group_facts(graph, n) -> tuple:
    """The facts of node ``n`` alone: whether it stands alone (an extern or pooling
    node), is a convolution, a convolution's weight gradient, or a node that no
    convolution takes as its epilogue (a reduction, a matmul). Summed over a group's
    nodes (:func:`add_facts`), they are what :func:`refused_without_building` reads."""
    if is_extern(graph, n):
        return (1, 0, 0, 0)
    kind = special_kind(graph, n)
    if kind is not None:
        if kind in POOL_KINDS:
            return (1, 0, 0, 0)
        if kind in CONV_KINDS:
            return (0, 1, int(kind == "conv_wgrad"), 0)
        return NO_FACTS
    if isinstance(graph.node(n)["opdef"].lowering, (MatMul, Reduction)):
        return (0, 0, 0, 1)
    return NO_FACTS


def add_facts(a: tuple, b: tuple) -> tuple:
    """The facts of the union of two groups."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])


def refused_without_building(facts: tuple, size: int) -> bool:
    """Whether :func:`build_tile_program` refuses every group of ``size`` nodes whose
    summed :func:`group_facts` are ``facts``; False where only building it can tell.

    Each answer is a refusal of the builders: an extern or pooling node stands alone
    (``extern.py``, ``pool.py``; a convolution's group refuses it as an epilogue too),
    one convolution per kernel and no epilogue for a weight gradient (``conv.py``), and
    a convolution's epilogue is pointwise, so a reduction or a matmul beside it is
    refused (``tile_program.py``'s ``propagate`` in a ``conv`` kernel).
    """
    alone, convs, wgrads, no_epilogue = facts
    if size < 2:
        return False
    return bool(alone or convs > 1 or wgrads or (convs and no_epilogue))
