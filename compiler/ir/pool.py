"""The tile program of a pooling node: a kernel group of its own.

A ``Pooling`` or ``_pool_grad`` node (``compiler/ops/pool.py``), or ROIPooling's
``roi_fwd`` / ``roi_bwd``, is a kernel group of its own, as ``scatter_add`` is: no other
node joins it. Its tile program holds one ``pool`` instruction whose ``extra`` is
:func:`~compiler.ops.pool.pool_problem` (or ``roi_problem``). Each target renders it its
own way: ``compiler/triton/pool.py`` as window loops, ``compiler/cpu/pool.py`` as ATen's
pooling.
"""
from __future__ import annotations

from .tile_program import Instr, NotFusable, Store, TileProgram, special_kind
from ..ops.pool import POOL_KINDS, ROI_KINDS, pool_problem, roi_problem
from ..ops.registry import prod

__all__ = ["POOL_KINDS", "pool_program", "summary"]


def pool_program(graph, nodes, outside_uses) -> TileProgram:
    """The tile program of a group holding one pooling node alone.

    Raises
    ------
    NotFusable
        When the group holds anything besides the pooling node.
    """
    if len(nodes) != 1:
        raise NotFusable("pooling stands alone")
    n = next(iter(nodes))
    if special_kind(graph, n) not in POOL_KINDS:
        raise NotFusable("not a pooling node")
    d = graph.node(n)
    ins = list(graph.inputs(n))
    in_shapes = [graph.shape(e) for e in ins]
    if special_kind(graph, n) in ROI_KINDS:
        problem = roi_problem(d["op"], d["attrs"], in_shapes, d["shapes"])
    else:
        problem = pool_problem(d["op"], d["attrs"], in_shapes, d["shapes"][0])
    stored = tuple(i for i in range(len(d["shapes"])) if i == 0 or (n, i) in outside_uses)
    problem = dict(problem, stored=stored)   # a mask or maxidx no gradient reads: not stored
    domain = tuple(d["shapes"][0])
    nd = len(domain)
    outs = [(n, i) for i in stored]
    instrs = [Instr("pool", "v1", tuple(range(len(ins))),
                    varies=frozenset(p for p in range(nd) if domain[p] != 1), extra=problem)]
    stores = [Store("v1", len(ins) + i, tuple((j, j) for j in range(nd)))
              for i in range(len(outs))]
    return TileProgram("pool", domain, (), tuple(range(nd)), (), instrs, stores,
                       ins + outs, ["in"] * len(ins) + ["out"] * len(outs), False,
                       frozenset([n]))


def summary(p: dict) -> str:
    """The kernel's comment line: a pointwise kernel over the flat output or data, which
    is how ``compiler/triton/cubin.py`` reads its tiles."""
    if p["type"] == "roi":
        m = prod(p["y"] if p["mode"] == "roi_fwd" else p["x"])
        what = "forward" if p["mode"] == "roi_fwd" else "data gradient"
        return (f"pointwise over domain ({m},): ROI max pooling {what}, x {p['x']} "
                f"rois {p['rois']} pooled {p['pooled']} spatial_scale {p['scale']!r}")
    nd = len(p["kernel"])
    m = prod(p["y"] if p["mode"] == "pool_fwd" else p["x"])
    what = "forward" if p["mode"] == "pool_fwd" else "data gradient"
    kind = p["type"] + (str(p["p"]) if p["type"] == "lp" else "")
    return (f"pointwise over domain ({m},): {nd}-D {kind} pooling {what}, x {p['x']} "
            f"y {p['y']} kernel {p['kernel']} stride {p['stride']} pad {p['pad']}")
