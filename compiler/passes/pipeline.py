"""The compile pipeline, as one flat list of named passes.

    infer_shapes -> infer_types -> [fuse_lstm_layers] -> autodiff -> decompose ->
    [split_long_concats | lazy_rejection_samplers] -> hoist_matmuls -> simplify ->
    prepare_heads -> fuse -> plan_memory -> codegen

``fuse_lstm_layers`` runs where the compile asks for it (the ``cpu`` target:
``compiler/artifacts/compile.py``'s ``lstm_layers_for``); ``split_long_concats`` on the
Triton targets, ``lazy_rejection_samplers`` on the ``cpu`` target.

``prepare_heads`` runs after ``simplify``: folding ``x + 0`` can turn a head
into a variable (the gradient of ``BlockGrad(x) * y + x`` with respect to
``x`` is the head gradient itself), and every head needs a kernel that
writes its array.

Each stage is timed; ``SYMTRITON_LOG=passes`` prints the times.
"""
from __future__ import annotations

import time

from ..frontend.graph import Builder, Graph
from ..ops.registry import View
from .autodiff import autodiff
from .decompose import decompose
from .fuse import fuse, unfused_counts
from .fuse_lstm_layers import fuse_lstm_layers
from .hoist_matmuls import hoist_matmuls
from .infer_shapes import check_inferred, infer_shapes
from .infer_types import infer_types
from .lazy_rejection_samplers import lazy_rejection_samplers
from .plan_memory import contiguous_strides, plan_memory
from .simplify import simplify
from .split_long_concats import split_long_concats


def _is_view(graph: Graph, node) -> bool:
    d = graph.node(node)
    return d["op"] != "null" and isinstance(d["opdef"].lowering, View)


def _written_by_kernel(graph: Graph, node) -> bool:
    d = graph.node(node)
    return d["op"] != "null" and not isinstance(d["opdef"].lowering, View)


def prepare_heads(graph: Graph, in_place: bool = False) -> Graph:
    """Make every head and every non-stride view read a value a kernel writes.

    A head that is a variable or a view gets a copy (``_materialize``); a
    view whose input layout cannot be expressed by strides gets its input
    copied first. Returns a copy (``graph`` itself, changed, with ``in_place``).
    """
    out = graph if in_place else graph.copy()
    b = Builder(out, "fwd", "copy")
    layouts = {}      # views' layouts; a value a kernel writes is contiguous from 0

    order = out.topo()
    before = set(order)       # copies made below have no layout: they read as unknown

    def layout(entry):
        got = layouts.get(entry)
        if got is None and entry[0] in before and not _is_view(out, entry[0]):
            s = out.shape(entry)
            if s is not None:
                got = layouts[entry] = (0, tuple(s), contiguous_strides(s))
        return got

    for n in order:
        d = out.node(n)
        if not _is_view(out, n):
            continue
        src = out.inputs(n)[0]
        off, shape, strides = layout(src)
        res = d["opdef"].lowering.view(d["attrs"], shape, d["shapes"][0], strides, off)
        if res is None:
            b.phase = d["phase"]
            copy = b.op("_materialize", b.ref(src))
            out.g.remove_edge(src[0], n, key=0)
            out.g.add_edge(copy.node, n, key=0, out=0)
            res = (contiguous_strides(d["shapes"][0]), 0)
        layouts[(n, 0)] = (res[1], tuple(d["shapes"][0]), tuple(res[0]))
    num_fwd = out.meta.get("num_forward_heads", len(out.heads))
    for i, h in enumerate(list(out.heads)):
        d = out.node(h[0])
        if d["op"] != "null" and isinstance(d["opdef"].lowering, View):
            # an identity view (BlockGrad, identity) of a kernel's own result: that
            # kernel writes the output array itself instead of a buffer and a copy
            # the source must be written by a kernel: a view of a view (identity
            # of a reshape) or of a variable has no kernel that writes it
            src = out.inputs(h[0])[0]
            if _written_by_kernel(out, src[0]) and src not in out.heads and \
                    layout(h) == layout(src) and layouts[h][0] == 0 and \
                    layouts[h][2] == contiguous_strides(layouts[h][1]):
                out.heads[i] = src
                continue
        if d["op"] == "null" or isinstance(d["opdef"].lowering, View):
            b.phase = "fwd" if i < num_fwd else "bwd"
            out.heads[i] = b.op("_materialize", b.ref(h)).entry
    return out


def run_passes(graph: Graph, shapes: dict, grad_req: dict, is_train: bool,
               timings: dict = None, dtypes: dict = None, loss_scale: bool = False,
               inferred: bool = False, lstm_layers: bool = False,
               split_concats: bool = False, merge_common: bool = True,
               lazy_samplers: bool = False) -> tuple:
    """Run every pass; return ``(graph, groups, plan)`` (``loss_scale``: autodiff's).

    ``inferred``: ``graph`` already holds the shapes and dtypes that ``infer_shapes``
    and ``infer_types`` would give it for ``shapes`` and ``dtypes`` (a bind inferred
    them on it before the compile); only the completeness checks run again.
    ``lstm_layers``: chains of LSTMCell steps become oneDNN LSTM layers
    (``passes/fuse_lstm_layers.py``; the ``cpu`` target only).
    ``split_concats``: concats of many parts become trees of shorter ones
    (``passes/split_long_concats.py``; the Triton targets only).
    ``merge_common``: ``simplify`` merges common subexpressions (mxnet's
    ``MXNET_ELIMINATE_COMMON_EXPR``).
    ``lazy_samplers``: the rejection samplers try again only where needed
    (``passes/lazy_rejection_samplers.py``; the ``cpu`` target only).
    """
    timings = timings if timings is not None else {}

    def timed(name, fn, *args):
        t0 = time.perf_counter()
        result = fn(*args)
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
        return result

    if inferred:
        g = graph
        timed("infer_shapes", check_inferred, g)
        # inferred before the compile: the same pass names either way (a rebuilt
        # program.json keeps its stored timings only under the same names, aot_verify)
        timings.setdefault("infer_types", 0.0)
    else:
        g = timed("infer_shapes", infer_shapes, graph, shapes, False, None, False)
        g = timed("infer_types", infer_types, g, dtypes)
    # the backward phase wherever gradients are asked for, in either mode: a gradient
    # program in predict mode (mx.autograd's predict_mode under record) differentiates
    # Dropout as the identity it decomposes to
    wants_grad = is_train or any(r != "null" for r in grad_req.values())
    # every pass below may change ``g`` in place: the pipeline owns it (a caller's
    # graph is the one shape inference fills)
    if lstm_layers:
        timed("fuse_lstm_layers", fuse_lstm_layers, g, wants_grad)
    g = timed("autodiff", autodiff, g, grad_req, loss_scale, True) if wants_grad else g
    g.meta.setdefault("num_forward_heads", len(g.heads))
    g = timed("decompose", decompose, g, is_train, True)
    g.meta["unfused"] = unfused_counts(g)   # one kernel per operator: the baseline figures
    if split_concats:
        timed("split_long_concats", split_long_concats, g)
    if lazy_samplers:
        timed("lazy_rejection_samplers", lazy_rejection_samplers, g)
    g = timed("hoist_matmuls", hoist_matmuls, g, True)
    g = timed("simplify", simplify, g, True, merge_common)
    g = timed("prepare_heads", prepare_heads, g, True)
    groups = timed("fuse", fuse, g)
    plan = timed("plan_memory", plan_memory, g, groups)
    return g, groups, plan
