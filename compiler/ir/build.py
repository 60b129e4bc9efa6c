"""The tile program of one kernel group, whatever its family.

:func:`build_tile_program` is the fusion pass's legality check: a convolution anchors
an implicit GEMM with its epilogue (``conv.py``), a pooling node stands alone
(``pool.py``), so does an extern node (``extern.py``), every other group is pointwise,
a reduction, a matmul or a scatter (``tile_program.py``).
"""
from __future__ import annotations

from .conv import conv_program
from .extern import extern_program, is_extern
from .pool import pool_program
from .tile_program import TileProgram, build_fused_program, special_kind
from ..ops.conv import CONV_KINDS
from ..ops.pool import POOL_KINDS


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
