"""Index arithmetic as source text, shared by the convolution and pooling kernels.

Both families address their tensors from flat row, column or K indices; these turn a
flat index into coordinates and coordinates into an element offset, as Python
expressions that Triton and torch read alike.
"""
from __future__ import annotations

from ..ops.registry import prod


def split_index(var, names, sizes):
    """Lines giving ``names`` (row-major coordinates of ``sizes``) from flat ``var``.

    Parameters
    ----------
    var : str
        The flat index (a name or an expression).
    names : list of str
        One coordinate name per dim.
    sizes : list of int
        The dims' sizes.

    Returns
    -------
    tuple
        ``(lines, coords)``: assignments of the coordinates, and per dim its name, or the
        literal ``"0"`` for a size-1 dim (which gets no line).
    """
    lines, coords = [], []
    inner = prod(sizes)
    for name, size in zip(names, sizes):
        inner //= size
        if size == 1:
            coords.append("0")
            continue
        expr = f"{var} // {inner}" if inner > 1 else var
        if inner * size < prod(sizes):
            expr = f"({expr}) % {size}"
        lines.append(f"{name} = {expr}")
        coords.append(name)
    return lines, coords


def index_sum(terms):
    """``c0 * s0 + c1 * s1 ...`` over ``(coordinate, stride)`` terms (zero terms dropped)."""
    out = [c if s == 1 else f"{c} * {s}" for c, s in terms if c != "0" and s != 0]
    return " + ".join(out) or "0"
