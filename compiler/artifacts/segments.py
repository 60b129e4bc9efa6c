"""The Programs of a graph cut at its ``Custom`` nodes, for ``symtriton inspect``.

A Custom node (a Python operator, ``mx.operator``) has no kernel: the executor
runs the compiled segments around it and calls the op in between
(``runtime/executor_partitioned.py``). This module cuts a symbol the same way
(``frontend/context_placement.py: partition_by_context`` with every Custom node
isolated) and compiles each compiled segment as the executor would bind it, so
inspection shows the very Programs a bind runs and where the Python calls fall.
"""
from __future__ import annotations

from ..errors import MXNetError
from ..frontend.context_placement import partition_by_context
from ..ir.dtypes import dtype_name
from .compile import all_dtypes, compile_symbol


def custom_node_ids(symbol) -> set:
    """``id(node)`` of every ``Custom`` node of ``symbol``."""
    return {id(n) for n in symbol._nodes() if n.op == "Custom"}


def _entry_facts(symbol, shapes, dtypes):
    """Shape and dtype of every value, by ``(id(node), index)``."""
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape(**shapes)
    _, out_types, _ = internals.infer_type(**dtypes)
    if out_shapes is None:
        raise MXNetError(f"cannot infer the shape of every value from {shapes}")
    keys = [(id(n), i) for n, i in internals._outputs]
    return (dict(zip(keys, (tuple(s) for s in out_shapes))),
            dict(zip(keys, (dtype_name(t) for t in out_types))))


def compile_segments(symbol, shapes, for_training=False, grad_req=None, is_train=None,
                     target="interpret", dtypes=None) -> list:
    """Compile each segment of ``symbol`` between its Custom nodes.

    Parameters
    ----------
    symbol : Symbol
    shapes, for_training, grad_req, is_train, target, dtypes
        As :func:`~compiler.artifacts.compile.compile_symbol` takes them, for the whole
        symbol; a cut value gets its producer's shape and dtype, and a gradient
        (``write``) when training.

    Returns
    -------
    list of (Segment, Program or None)
        In run order; ``None`` for a Custom node's segment.
    """
    grad_req = dict(grad_req or {})
    arg_shapes, _, _ = symbol.infer_shape(**shapes)
    if arg_shapes is None:
        raise MXNetError(f"cannot infer every argument's shape from {shapes}")
    full = dict(zip(symbol.list_arguments(), (tuple(s) for s in arg_shapes)))
    types = all_dtypes(symbol, dict(dtypes or {}))
    entry_shapes, entry_types = _entry_facts(symbol, full, types)
    segments, _ = partition_by_context(symbol, {id(n): None for n in symbol._nodes()},
                                       custom_node_ids(symbol))
    out = []
    for seg in segments:
        if seg.isolated is not None:
            out.append((seg, None))
            continue
        sub_shapes, sub_types, sub_req = {}, {}, {}
        for name in seg.symbol.list_arguments():
            if name in seg.received:
                src, pos = seg.received[name]
                node, idx = segments[src].entries[pos]
                sub_shapes[name] = entry_shapes[(id(node), idx)]
                sub_types[name] = entry_types[(id(node), idx)]
                sub_req[name] = "write" if for_training else "null"
            else:
                sub_shapes[name] = full[name]
                sub_types[name] = types[name]
                sub_req[name] = grad_req.get(name, "null")
        train = for_training and any(r != "null" for r in sub_req.values())
        prog = compile_symbol(seg.symbol, sub_shapes, train, sub_req if train else {},
                              for_training if is_train is None else is_train, target,
                              sub_types)
        out.append((seg, prog))
    return out
