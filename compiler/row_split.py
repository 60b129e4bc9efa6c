"""Whether a bound graph separates along the batch axis: the analysis behind row-split runs.

The cpu target may run a training step as two half-batch Programs on two threads
(``runtime/executor_rowsplit.py``): outputs are the halves' outputs side by side,
input gradients likewise, parameter gradients the sum of the halves'. That is the
single run's answer (up to the rounding of that sum) exactly when every value that
depends on the batch keeps row ``i`` of its result a function of row ``i`` of its
batch-carrying inputs, and every other value is the same at any batch size. Two
facts decide it, both conservative:

* per operator, ``OpDef.separates_rows(attrs)`` (the registry's ``rows_independent``):
  no mixing along axis 0, no random draw, no auxiliary update, no normalization by
  the batch size;
* per value, shapes inferred at batch ``B`` and ``B / 2``: every value that depends
  on a batch input scales by exactly 2 in dim 0 with its other dims unchanged (so its
  first half of rows is the first half of its memory: a row-major reshape
  ``(B, T, H) -> (B * T, H)`` qualifies, ``(T, B, H)`` does not), and every other
  value keeps its shape.

The batch inputs are the arguments whose shapes the others do not decide (data and
labels: a parameter's shape follows from the data's); they must share one even
dim 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import MXNetError
from .passes.infer_shapes import infer_shapes


@dataclass(frozen=True)
class RowSplit:
    """A graph that separates along axis 0 at batch ``batch``.

    Attributes
    ----------
    batch : int
        Dim 0 of the batch inputs (even).
    rows : tuple of str
        The arguments split into halves along axis 0 (the batch inputs and any other
        argument whose shape scales with them).
    half_shapes : dict of str to tuple
        Every argument's shape in a half run.
    """
    batch: int
    rows: tuple
    half_shapes: dict


def _scales(full, half) -> bool:
    """``full`` is ``half`` with dim 0 doubled."""
    return (full is not None and half is not None and len(full) == len(half) >= 1
            and half[0] >= 1 and full[0] == 2 * half[0] and tuple(full[1:]) == tuple(half[1:]))


def batch_inputs(symbol, shapes: dict) -> list:
    """The arguments whose shapes the other arguments' shapes do not decide.

    Parameters
    ----------
    symbol : Symbol
    shapes : dict of str to tuple
        Every argument's (full) shape.
    """
    names = symbol.list_arguments()
    out = []
    for name in names:
        others = {n: shapes[n] for n in names if n != name and n in shapes}
        try:
            arg_shapes, _, _ = symbol.infer_shape_partial(**others)
        except MXNetError:
            return []
        got = dict(zip(names, arg_shapes)).get(name)
        if not got or 0 in got or tuple(got) != tuple(shapes.get(name, ())):
            out.append(name)
    return out


def analyse(symbol, shapes: dict):
    """Whether ``symbol`` bound at ``shapes`` separates along axis 0.

    Parameters
    ----------
    symbol : Symbol
    shapes : dict of str to tuple
        Every argument's shape, as bound.

    Returns
    -------
    tuple
        ``(RowSplit, None)``, or ``(None, reason)``: why not, naming the node.
    """
    if symbol.list_auxiliary_states():
        return None, f"auxiliary states {symbol.list_auxiliary_states()}"
    batch = batch_inputs(symbol, shapes)
    if not batch:
        return None, "no batch input (every argument's shape follows from the others)"
    dims = {tuple(shapes[n])[:1] for n in batch}
    if len(dims) != 1 or not dims.pop() or shapes[batch[0]][0] < 2 or shapes[batch[0]][0] % 2:
        return None, "batch inputs " + ", ".join(f"{n} {tuple(shapes[n])}" for n in batch) + \
            " do not share one even dim 0"
    full = symbol.to_graph()
    half = symbol.to_graph()
    try:
        infer_shapes(full, shapes)
        infer_shapes(half, {n: (shapes[n][0] // 2,) + tuple(shapes[n][1:]) for n in batch})
    except MXNetError as exc:
        return None, f"shapes at half the batch: {exc}"
    reason, rows = _walk(full, half)
    if reason:
        return None, reason
    halves = {}
    for n in full.variables():
        d = half.node(n)
        halves[d["name"]] = tuple(d["shapes"][0])
    return RowSplit(int(shapes[batch[0]][0]), tuple(rows), halves), None


def _walk(full, half):
    """``(reason, split arguments)``: walk the graph, marking values that depend on the
    batch; ``reason`` is None when every node passes (module doc)."""
    dep, rows = set(), []
    for n in full.topo():
        f, h = full.node(n), half.node(n)
        if f["name"] != h["name"]:
            return f"graphs differ at {f['name']}", rows
        fs, hs = f["shapes"] or [], h["shapes"] or []
        if f["op"] == "null":
            if tuple(fs[0]) == tuple(hs[0]):
                continue
            if not _scales(fs[0], hs[0]):
                return f"argument {f['name']} is {tuple(fs[0])} at the full batch, " \
                       f"{tuple(hs[0])} at half", rows
            dep.add((n, 0))
            rows.append(f["name"])
            continue
        reads = any(e in dep for e in full.inputs(n))
        same = all(tuple(a) == tuple(b) for a, b in zip(fs, hs))
        if not reads and same:
            continue
        if not f["opdef"].separates_rows(f["attrs"]):
            return f"node {f['name']} ({f['op']}) mixes rows or depends on the batch", rows
        for i, (a, b) in enumerate(zip(fs, hs)):
            if not _scales(a, b):
                return f"node {f['name']} ({f['op']}) output {i} is {tuple(a)} at the " \
                       f"full batch, {tuple(b)} at half", rows
            dep.add((n, i))
    for e in full.heads:
        if e not in dep:
            return f"output {full.node(e[0])['name']} does not depend on the batch", rows
    return None, rows
