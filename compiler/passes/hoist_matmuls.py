"""Hoist per-time-step matmuls that share a weight into one matmul.

An unrolled RNN computes ``x_t @ W`` for every step ``t``, where each
``x_t`` is step ``t`` of one sequence tensor (``SliceChannel`` /
``slice_axis`` over the time axis, squeezed). When every step of the
sequence is multiplied by the same ``W`` (same transpose flags, same
phase), one matmul over the whole sequence does the work of all of them
with a larger, better-shaped tile; each step then reads its rows of the
result through a view, which costs no launch.
"""
from __future__ import annotations

from ..graph import Builder, Graph


def hoist_matmuls(graph: Graph) -> Graph:
    """Return a copy where shared-weight matmuls over all steps of a sequence are one."""
    out = graph.copy()
    candidates = {}
    for n in out.ops():
        step = _sequence_step(out, n)
        if step is None:
            continue
        base, axis, t, weight, tb = step
        key = (base, axis, weight, tb, out.node(n)["phase"])
        candidates.setdefault(key, {})[t] = n
    for (base, axis, weight, tb, phase), steps in candidates.items():
        length = out.shape(base)[axis]
        if len(steps) < 2 or sorted(steps) != list(range(length)):
            continue
        b = Builder(out, phase, "hoist")
        seq = b.op("dot", b.ref(base), b.ref(weight), transpose_b=tb)
        for t, n in steps.items():
            rows = b.op("slice_axis", seq, axis=axis, begin=t, end=t + 1)
            rows = b.op("Reshape", rows, shape=tuple(out.node(n)["shapes"][0]))
            out.replace_entry((n, 0), rows.entry)
    out.remove_dead()
    return out


def _sequence_step(graph: Graph, n):
    """``(base, axis, t, weight, transpose_b)`` if ``n`` is ``dot(step t of base, weight)``."""
    d = graph.node(n)
    if d["op"] != "dot" or d["attrs"].get("transpose_a"):
        return None
    a, weight = graph.inputs(n)
    if len(graph.shape(weight)) != 2:
        return None
    squeeze = graph.node(a[0])
    if squeeze["op"] != "Reshape":
        return None
    src = graph.inputs(a[0])[0]
    sl = graph.node(src[0])
    if sl["op"] != "slice_axis":
        return None
    base = graph.inputs(src[0])[0]
    base_shape = graph.shape(base)
    axis = sl["attrs"]["axis"] % len(base_shape)
    begin, end = sl["attrs"]["begin"], sl["attrs"]["end"]
    begin = begin % base_shape[axis] if begin is not None else 0
    end = base_shape[axis] if end is None else end % (base_shape[axis] + 1)
    if end != begin + 1 or axis == len(base_shape) - 1:
        return None
    squeezed = tuple(s for i, s in enumerate(base_shape) if i != axis)
    if tuple(graph.shape(a)) != squeezed:
        return None
    return base, axis, begin, weight, bool(d["attrs"].get("transpose_b"))
