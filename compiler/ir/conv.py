"""The tile program of a convolution group: an implicit GEMM and its epilogue.

A convolution (``Convolution``, ``Deconvolution`` and the gradient ops of
``compiler/ops/conv.py``) anchors a kernel group of its own, as a dot anchors a matmul's:
one convolution per group, its operands read from memory, and an epilogue of pointwise
and broadcast ops on its output (bias, activation, inference BatchNorm's scale and
shift, a residual add). Whatever the operator, the kernel is one of three
implicit GEMMs over a convolution's x ``(N, C, *X)``,
w ``(O, C/G, *K)`` and y ``(N, O, *Y)``, one GEMM per group ``g`` (grid axis 0 holds
tiles x groups, as a batched matmul's batch):

============  ===================  ================  ====================
mode          rows (M)             columns (N)       reduction (K)
============  ===================  ================  ====================
conv_fwd      n, y positions       o in the group    c in the group, k
conv_dgrad    n, x positions       c in the group    o in the group, k
conv_wgrad    o in the group       c in the group, k n, y positions
============  ===================  ================  ====================

Each target renders the program its own way: ``compiler/triton/conv.py`` as the
implicit GEMM itself, ``compiler/cpu/conv.py`` as one ATen convolution call; both write
the epilogue as their target writes any tile program.
"""
from __future__ import annotations

from .tile_program import Instr, NotFusable, ProgramBuilder, TileProgram, base_node, special_kind
from ..ops.conv import CONV_KINDS, conv_problem
from ..ops.registry import prod

__all__ = ["CONV_KINDS", "conv_program", "gemm_dims", "summary"]


class _ConvBuilder(ProgramBuilder):
    """tile_program's builder with a convolution as the group's anchor, as a dot anchors a
    matmul: the domain is the convolution's output, rows the positions of the GEMM's
    rows, and the other nodes (pointwise, broadcasts: an activation, inference
    BatchNorm's scale and shift) its epilogue on the accumulator tile."""

    def choose_domain(self):
        g = self.graph
        convs = [n for n in self.order if special_kind(g, n) in CONV_KINDS]
        if len(convs) != 1:
            raise NotFusable("one convolution per kernel")
        n = self.conv = convs[0]
        d = g.node(n)
        ins = g.inputs(n)
        self.problem = conv_problem(d["op"], d["attrs"], [g.shape(e) for e in ins],
                                    d["shapes"][0])
        if len(self.nodes) > 1 and self.problem["mode"] == "conv_wgrad":
            raise NotFusable("a weight gradient takes no epilogue")
        if any(base_node(g, e[0]) in self.nodes for e in ins):
            raise NotFusable("a convolution reads its operands from memory")
        self.domain, self.grid_pos = tuple(d["shapes"][0]), ()
        nd = len(self.domain)
        if self.problem["mode"] == "conv_wgrad":     # rows o, columns (c, k)
            self.row_pos, self.col_pos = (0,), tuple(range(1, nd))
        else:                                        # rows (n, spatial), columns channels
            self.row_pos, self.col_pos = (0,) + tuple(range(2, nd)), (1,)
        return n

    def propagate(self, n, out_dm):
        if n != self.conv:
            return super().propagate(n, out_dm)
        if list(out_dm) != list(range(len(self.domain))):
            raise NotFusable("a convolution must span its whole output")

    def emit(self):
        n = self.conv
        args = tuple(self.tensor(e, "in") for e in self.graph.inputs(n))
        name = self.fresh()
        varies = frozenset(p for p in range(len(self.domain)) if self.domain[p] != 1)
        self.instrs.append(Instr("conv", name, args, varies=varies, extra=self.problem))
        self.value[(n, 0)] = name
        self.varies[name] = varies
        self.order = [m for m in self.order if m != n]
        super().emit()


def conv_program(graph, nodes, outside_uses) -> TileProgram:
    """The tile program of a group holding one convolution node: a ``conv`` instruction
    (its ``args`` the tensors of the node's inputs, ``extra`` the
    :func:`~compiler.ops.conv.conv_problem`), then the epilogue's instructions.

    Raises
    ------
    NotFusable
        For two convolutions, a weight gradient with an epilogue, an operand computed
        in the group, or an epilogue that is not pointwise over the output.
    """
    b = _ConvBuilder(graph, nodes, list(outside_uses))
    anchor = b.choose_domain()
    b.kind = "conv"          # reductions and matmuls refuse to join (tile_program.propagate)
    b.assign_dimmaps("matmul", anchor, None)
    b.emit()
    if not b.stores:
        raise NotFusable("group stores nothing")
    return TileProgram("conv", b.domain, (), b.row_pos, b.col_pos, b.instrs, b.stores,
                       b.tensors, b.roles, False, frozenset(nodes))


def gemm_dims(p: dict) -> tuple:
    """``(M, N, K, groups)`` of the implicit GEMM of problem ``p``."""
    x, w, y, g = p["x"], p["w"], p["y"], p["groups"]
    cg, og, kk = x[1] // g, w[0] // g, prod(w[2:])
    if p["mode"] == "conv_fwd":
        return x[0] * prod(y[2:]), og, cg * kk, g
    if p["mode"] == "conv_dgrad":
        return x[0] * prod(x[2:]), cg, og * kk, g
    return og, cg * kk, x[0] * prod(y[2:]), g


def summary(p: dict) -> str:
    """The kernel's comment line, the same on every target: an implicit GEMM is a
    matmul over (M, N), which is also how ``compiler/triton/cubin.py`` reads its tiles."""
    m, n, k, g = gemm_dims(p)
    what = {"conv_fwd": "forward", "conv_dgrad": "data gradient / transposed",
            "conv_wgrad": "weight gradient"}[p["mode"]]
    return (f"matmul over domain ({m}, {n}) K {k} x {g} groups: implicit-GEMM "
            f"{len(p['kernel'])}-D convolution {what}, x {p['x']} w {p['w']} y {p['y']} "
            f"stride {p['stride']} pad {p['pad']} dilate {p['dilate']}")
