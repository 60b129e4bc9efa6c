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
    if any(is_extern(graph, n) for n in nodes):
        prog = extern_program(graph, nodes, outside_uses)
    elif any(special_kind(graph, n) in CONV_KINDS for n in nodes):
        prog = conv_program(graph, nodes, outside_uses)
    elif any(special_kind(graph, n) in POOL_KINDS for n in nodes):
        prog = pool_program(graph, nodes, outside_uses)
    else:
        prog = build_fused_program(graph, nodes, outside_uses)
    prog.dtypes = [graph.dtype(e) for e in prog.tensors]
    return prog
