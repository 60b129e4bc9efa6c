"""The Triton target's entry point: a tile program of any family -> Triton source.

Pointwise, reduce, matmul and scatter programs are ``codegen.py``'s; a convolution is
``conv.py``'s implicit GEMM (``templates/conv.py.j2``), pooling ``pool.py``'s window
loops (``templates/pool.py.j2``).
"""
from __future__ import annotations

from .codegen import render_tile
from .conv import render_conv
from .pool import render_pool
from ..ir.rendering import Rendered
from ..ir.tile_program import TileProgram


def render(prog: TileProgram, strides: list, shapes: list, fp32_dot: str = "ieee") -> Rendered:
    """Triton source for ``prog`` given each tensor's element strides.

    Parameters
    ----------
    prog : TileProgram
        The kernel group's program.
    strides : list
        Per tensor ``t``, one tuple of element strides per destination (inputs have
        one; an output stored to several arrays has several).
    shapes : list
        Per tensor, its shape.
    fp32_dot : str
        The ``input_precision`` of float32 matmuls (``ieee`` / ``tf32``,
        ``compiler/ir/dtypes.py: fp32_matmul_precision``).

    Returns
    -------
    Rendered
    """
    if prog.kind == "conv":
        return render_conv(prog, strides, shapes, fp32_dot)
    if prog.kind == "pool":
        return render_pool(prog, strides, shapes)
    return render_tile(prog, strides, shapes, fp32_dot)
