"""The ``cpu`` target's entry points: a tile program of any family -> Python/ATen source.

A kernel is a module with one function, ``bind(*flat_arguments) -> run``: ``bind``
makes, once per executor, the strided views of the planned flat buffers that the
program reads and writes; ``run()`` is a closure making the calls
(``templates/cpu_kernel.py.j2``). Pointwise, reduce and matmul programs are lowered by
``lower.py`` and written by ``codegen.py``; a convolution is ``conv.py``'s ATen call and
epilogue, pooling ``pool.py``'s, an embedding gradient one ``index_add_``.
"""
from __future__ import annotations

from .codegen import call_lines, plan
from .conv import conv_kernel_lines
from .loops import fold_runs
from .lower import lower
from .matmul import mergeable
from .pool import render_pool_cpu
from .source import kernel_source
from ..ir.conv import summary as conv_summary
from ..ir.dtypes import TORCH
from ..ir.rendering import Rendered
from ..ir.tile_program import TileProgram
from ..ops.registry import lit, prod


def render_cpu(prog: TileProgram, strides: list, shapes: list, slots: list) -> Rendered:
    """Python source of ``prog`` for the cpu target.

    Parameters
    ----------
    prog : TileProgram
        The kernel group's program.
    strides : list
        Per tensor ``t``, one tuple of element strides per destination.
    shapes : list
        Per tensor, its shape.
    slots : list
        Per tensor ``t``, per destination, the array it lives in (views of one array may
        overlap; views of two never do).

    Returns
    -------
    Rendered
    """
    if prog.kind == "pool":      # ATen pooling on the explicitly padded data
        return render_pool_cpu(prog, strides, shapes, slots)
    params = [(t, d) for t in range(len(prog.tensors)) for d in range(len(strides[t]))]
    if prog.kind == "scatter":
        bind, body = _scatter_lines(prog, strides, shapes)
    elif prog.kind == "conv":    # an ATen convolution call, then its epilogue
        bind, body = conv_kernel_lines(prog, strides, shapes, slots)
    else:
        bind, ops, stores = lower(prog, strides, shapes, slots)
        body = call_lines(ops, plan(ops, stores), TORCH[prog.compute_dtype])
    m = prod(prog.domain[p] for p in prog.row_pos) if prog.kind != "scatter" else 0
    n = prod(prog.domain[p] for p in prog.col_pos) if prog.kind != "scatter" else 0
    summary = (conv_summary(prog.instrs[0].extra) if prog.kind == "conv" else
               f"{prog.kind} over domain {tuple(int(x) for x in prog.domain)}")
    names = [f"p{t}_{d}" for t, d in params]
    signature, bind, body = fold_runs(names, bind, body)
    source, consts = kernel_source(names, signature, summary, bind, body)
    return Rendered(source, params, m, n, 0, prog.kind, consts=consts, summary=summary)


def _scatter_lines(prog, strides, shapes):
    """Embedding's weight gradient: ``out.index_add_(0, idx, dy)`` (rows accumulate)."""
    dy_t, idx_t, out_t = 0, 1, 2
    domain = tuple(int(x) for x in prog.domain)
    rows_dy = prod(domain[:-1])
    merged = mergeable(domain[:-1], strides[dy_t][0][:-1])
    bind = []
    if merged is None:
        bind.append(f"dy = p0_0.as_strided({domain}, {tuple(strides[dy_t][0])})")
        dy = f"dy.reshape({rows_dy}, {domain[-1]})"
    else:
        bind.append(f"dy = p0_0.as_strided(({rows_dy}, {domain[-1]}), "
                    f"({merged[1]}, {strides[dy_t][0][-1]}))")
        dy = "dy"
    bind.append(f"ix = p1_0.as_strided({tuple(shapes[idx_t])}, {tuple(strides[idx_t][0])})")
    rows, cols = shapes[out_t]
    bind.append(f"o = p2_0.as_strided(({rows}, {cols}), {tuple(strides[out_t][0])})")
    if prog.dtypes and prog.dtypes[dy_t] != prog.dtypes[out_t]:
        dy = f"{dy}.to({TORCH[prog.dtypes[out_t]]})"
    body = [f"o.index_add_(0, ix.reshape(-1).to(torch.int64).clamp_(0, {rows - 1}), {dy})"]
    return bind, body


def render_cpu_fill(numel: int, value: float = 0.0) -> Rendered:
    """A kernel writing ``value`` into ``numel`` elements of one tensor."""
    summary = f"fill {int(numel)} elements with {lit(value)}"
    source, consts = kernel_source(["p0_0"], "p0_0", summary, [],
                                   [f"p0_0.fill_({lit(value)})"])
    return Rendered(source, [(0, 0)], int(numel), 1, 0, "fill", consts=consts,
                    summary=summary)
