"""Hoist per-time-step matmuls that share a weight into one matmul.

An unrolled RNN computes ``x_t @ W`` for every step ``t``. Two cases become
one matmul with a larger, better-shaped tile, each step then reading its rows
of the result through a view (no launch):

* **slices of one sequence**: each ``x_t`` is step ``t`` of one tensor
  (``SliceChannel`` / ``slice_axis`` over the time axis, squeezed) and every
  step is multiplied by the same ``W``: one matmul over the whole sequence;
* **independent steps**: the ``x_t`` are separate values (a stacked RNN's
  layer 1 reads layer 0's per-step outputs; in backward, each layer's input
  gradient is ``dG_t @ W`` per step) and none of them depends on any of the
  matmuls: one matmul over their ``Concat``. A recurrence (``h_{t-1} @ W``
  feeding step ``t``) fails that test and stays per step.

Matmuls group by weight, transpose flags, phase and operand shape.
"""
from __future__ import annotations

from collections import deque

from ..frontend.graph import Builder, Graph


def hoist_matmuls(graph: Graph, in_place: bool = False) -> Graph:
    """Return a copy where shared-weight matmuls over all steps of a sequence are one
    (``graph`` itself when no two matmuls could be one: nothing to hoist; ``graph``
    itself, changed, with ``in_place``: the pipeline owns its graphs)."""
    if not _may_hoist(graph):
        return graph
    out = graph if in_place else graph.copy()
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
    _hoist_independent(out)
    out.remove_dead()
    return out


def _may_hoist(g: Graph) -> bool:
    """Whether two matmuls share one of the keys the two hoists group by: a graph
    without (a CNN: its classifier's forward and two gradient matmuls) is returned
    without the copy and the topological sorts (5% of Inception-BN's passes)."""
    seen = set()
    for n, d in g.g._node.items():
        if d["op"] != "dot" or d["attrs"].get("transpose_a"):
            continue
        step = _sequence_step(g, n)
        keys = [_independent_key(g, n, d)]
        if step is not None:
            base, axis, _t, weight, tb = step
            keys.append(("step", base, axis, weight, tb, d["phase"]))
        for key in keys:
            if key is None:
                continue
            if key in seen:
                return True
            seen.add(key)
    return False


def _independent_key(g: Graph, n, d):
    """The key :func:`_hoist_independent` groups ``dot`` node ``n`` by (None: never)."""
    a, w = g.inputs(n)
    if len(g.shape(w)) != 2 or len(g.shape(a)) != 2:
        return None
    return (w, bool(d["attrs"].get("transpose_b")), d["phase"], tuple(g.shape(a)))


def _hoist_independent(g: Graph):
    """``dot(x_t, W)`` for independent ``x_t`` -> slices of ``dot(Concat(x_t), W)``."""
    groups = {}
    for n in g.ops():
        d = g.node(n)
        if d["op"] != "dot" or d["attrs"].get("transpose_a"):
            continue
        key = _independent_key(g, n, d)
        if key is not None:
            groups.setdefault(key, []).append(n)
    for (w, tb, phase, shape), dots in groups.items():
        if len(dots) < 2 or not _independent(g, dots):
            continue
        b = Builder(g, phase, "hoist")
        parts = [b.ref(g.inputs(n)[0]) for n in dots]
        stacked = b.op("Concat", *parts, dim=0, num_args=len(parts))
        seq = b.op("dot", stacked, b.ref(w), transpose_b=tb)
        rows = shape[0]
        for i, n in enumerate(dots):
            part = b.op("slice_axis", seq, axis=0, begin=i * rows, end=(i + 1) * rows)
            g.replace_entry((n, 0), part.entry)


def _independent(g: Graph, dots) -> bool:
    """No left operand of ``dots`` is computed from any of them (one search from all)."""
    operands = {g.inputs(n)[0][0] for n in dots}
    if not operands.isdisjoint(dots):      # one dot reads another directly: dot(dot(x, W), W)
        return False
    seen = set(dots)
    queue = deque(dots)
    while queue:
        for v in g.g.successors(queue.popleft()):
            if v in operands:
                return False
            if v not in seen:
                seen.add(v)
                queue.append(v)
    return True


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
