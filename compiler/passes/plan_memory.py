"""Memory planning: where every value lives, and buffer reuse by liveness.

Each value is a *layout* ``(slot, offset, shape, strides)``: a slot is an
external array (``arg``, ``aux``, ``grad``, ``head_grad``, ``out``) or an
internal buffer (``buf``). Views never own memory: their layout is computed
from their input's. Internal buffers are reused once the last launch that
reads them has run (strictly before the writer), so a launch never writes
memory it is still reading through another name.

A value takes the smallest free buffer of its dtype that holds it (at most twice its
size, so that a small value does not hold a large buffer), else the largest free one,
grown to hold it (a buffer's size is only a number until the runtime allocates the
pool), else a new buffer. Growing keeps the pool near the peak of live values where
sizes rise along the graph: Inception-BN's training pool at batch 2 is 91 MB for a
peak of 77 MB live (108 MB when a buffer never grew).

An extern operator's output that its registry entry keeps by reference
(``Extern.held``), where only extern launches read it, is a ``held`` slot of its own
with no memory here: the runtime keeps the tensor the operator returned and gives
that same tensor to its readers (the k-th held value: ``held[k]`` is its element
count and dtype).
"""
from __future__ import annotations

from ..errors import MXNetError
from ..frontend.graph import Graph
from ..ops.registry import Extern, View, prod


def contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def plan_memory(graph: Graph, groups: list) -> dict:
    """Assign layouts to every value the launches touch.

    Returns
    -------
    dict with ``layouts`` (entry -> list of layouts, several for a value
    stored to several arrays), ``buffers`` (element counts), ``buffer_dtypes``
    (a buffer holds one dtype: reuse only among values of that dtype) and
    ``seed_buffer`` (the buffer holding the random seed, or None: the runtime
    sets it before each forward of a Program that draws random numbers) and ``held``
    (``[element count, dtype]`` of each value kept by reference).
    """
    homes = {}
    buffers, free, seed_buffer = [], [], None
    buffer_dtypes, held = [], []
    for n in graph.variables():
        d = graph.node(n)
        role = d["role"]
        if role == "random":
            # the seed (compiler/ops/nn.py): one element of its own, never reused, so
            # the backward of a step reads the seed its forward drew with
            buffers.append(1)
            buffer_dtypes.append("float32")
            seed_buffer = len(buffers) - 1
            homes[(n, 0)] = [("buf", seed_buffer)]
            continue
        if role == "grad_in":
            slot = ("grad", d["name"].split(":", 1)[1])
        else:
            slot = (role, d["name"])
        homes[(n, 0)] = [slot]
    num_fwd = graph.meta.get("num_forward_heads", len(graph.heads))
    grad_names = graph.meta.get("grad_names", [])
    aux_updates = graph.meta.get("aux_updates", [])
    dests = {}
    for i, h in enumerate(graph.heads):
        h = tuple(h)
        if i < num_fwd:
            slot = ("out", i)
        elif i < num_fwd + len(grad_names):
            slot = ("grad", grad_names[i - num_fwd])
        else:
            slot = ("aux", aux_updates[i - num_fwd - len(grad_names)][0])
        dests.setdefault(h, []).append(slot)

    last_read = _last_reads(graph, groups)
    layouts = {}
    for li, grp in enumerate(groups):
        free.extend(b for b in list(_pending_free(last_read, li)))
        for t, entry in enumerate(grp["program"].tensors):
            if grp["program"].tensor_roles[t] == "in" or entry in homes:
                continue
            if entry in dests:
                homes[entry] = dests[entry]
                continue
            size = prod(graph.shape(entry))
            if _kept_by_reference(graph, entry):
                homes[entry] = [("held", len(held))]
                held.append([int(size), graph.dtype(entry)])
                continue
            buf = _take(free, buffers, buffer_dtypes, size, graph.dtype(entry))
            homes[entry] = [("buf", buf)]
            last_read.setdefault(("free_at", buf), set())
            _register_free(last_read, entry, buf)
    for entry, slots in homes.items():
        shape = graph.shape(entry)
        layouts[entry] = [(slot, 0, tuple(shape), contiguous_strides(shape)) for slot in slots]
    for grp in groups:
        for entry in grp["program"].tensors:
            if entry not in layouts:
                layouts[entry] = [_view_layout(graph, entry, layouts)]
    return {"layouts": layouts, "buffers": buffers, "buffer_dtypes": buffer_dtypes,
            "seed_buffer": seed_buffer, "held": held}


def _kept_by_reference(graph, entry):
    """Whether ``entry`` is an output its extern operator keeps by reference and only
    extern operators read (a generated kernel binds its views once, to memory)."""
    n, idx = entry
    low = graph.node(n)["opdef"].lowering
    if not isinstance(low, Extern) or idx not in low.held:
        return False
    readers = graph.consumers(n, idx)
    return bool(readers) and all(
        isinstance(graph.node(v)["opdef"].lowering, Extern) for v, _ in readers)


def _view_layout(graph, entry, layouts):
    if entry in layouts:
        return layouts[entry][0]
    n, idx = entry
    d = graph.node(n)
    low = d["opdef"].lowering if d["op"] != "null" else None
    if not isinstance(low, View):
        raise MXNetError(f"internal: {graph.describe(n)} output {idx} has no memory")
    src = graph.inputs(n)[0]
    slot, offset, in_shape, strides = _view_layout(graph, src, layouts)
    out_shape = tuple(d["shapes"][idx])
    res = low.view(d["attrs"], in_shape, out_shape, strides, offset) if idx == 0 else \
        low.view(dict(d["attrs"], _output_index=idx), in_shape, out_shape, strides, offset)
    if res is None:
        raise MXNetError(f"internal: {graph.describe(n)} cannot be a view of its input")
    layout = (slot, res[1], out_shape, tuple(res[0]))
    layouts[entry] = [layout]
    return layout


def _base_entries(graph, entry):
    """The materialized entry a (possibly view) entry reads from."""
    n, _ = entry
    d = graph.node(n)
    while d["op"] != "null" and isinstance(d["opdef"].lowering, View):
        entry = graph.inputs(n)[0]
        n = entry[0]
        d = graph.node(n)
    return entry


def _last_reads(graph, groups):
    last = {}
    for li, grp in enumerate(groups):
        prog = grp["program"]
        for t, entry in enumerate(prog.tensors):
            if prog.tensor_roles[t] != "out":
                last[_base_entries(graph, entry)] = li
    return {"by_entry": last, "pending": {}}


def _register_free(state, entry, buf):
    li = state["by_entry"].get(entry)
    if li is None:
        li = -1  # never read inside the program: a dead store kept for safety
    state["pending"].setdefault(li + 1, []).append(buf)


def _pending_free(state, li):
    return state["pending"].pop(li, [])


def _take(free, buffers, buffer_dtypes, size, dtype):
    best = grow = None       # the smallest free buffer that holds size, the largest that not
    for b in free:
        if buffer_dtypes[b] != dtype:
            continue
        if buffers[b] >= size:
            if best is None or buffers[b] < buffers[best]:
                best = b
        elif grow is None or buffers[b] > buffers[grow]:
            grow = b
    if best is not None and buffers[best] <= 2 * size:
        free.remove(best)
        return best
    if grow is not None:
        free.remove(grow)
        buffers[grow] = size
        return grow
    buffers.append(size)
    buffer_dtypes.append(dtype)
    return len(buffers) - 1
