"""mxnet's symbol JSON, read and written over :class:`compiler.symbol_node.Node` graphs.

The format is mxnet 1.x's (``nodes``, ``arg_nodes``, ``node_row_ptr``, ``heads``,
``attrs``): attribute values as strings, each node's inputs in mxnet's order
(``OpDef.input_order``), a control-flow operator's bodies in the node's ``subgraphs``
field. ``compiler/symbol.py`` wraps what is read here in a ``Symbol``.
"""
from __future__ import annotations

import json
import os

from .errors import MXNetError
from .ops import get_op
from .ops.registry import parse_shape
from .shape_semantics import is_np_shape
from .symbol_node import Node, inputs_before_amp_casts, reorder_inputs, topo

MXNET_VERSION = 10901       # what a written symbol says made it (mxnet 1.9.1)


def json_doc(outputs, effects, remove_amp_cast=True, nodes=None) -> dict:
    """mxnet's symbol JSON of the graph of ``outputs`` (entries) and ``effects``
    (operators without outputs), as a dict (:meth:`compiler.symbol.Symbol.tojson`).
    ``nodes``: the graph's nodes in :func:`topo` order where the caller has them
    (only used with ``remove_amp_cast`` False: the walk that skips casts is another)."""
    inputs_of = inputs_before_amp_casts if remove_amp_cast else (lambda n: n.inputs)
    # an operator without outputs (reset_arrays) is written among the nodes, which
    # mxnet's heads cannot name: entries_from_json keeps such nodes as effects again
    if remove_amp_cast or nodes is None:
        nodes = topo(outputs + [(n, 0) for n in effects], inputs_of)
    index = {id(n): i for i, n in enumerate(nodes)}
    out_nodes, row_ptr = [], [0]
    for n in nodes:
        opdef = n.opdef()
        entry = {"op": n.op if opdef is None else opdef.json_name(n.op), "name": n.name}
        attrs = {k: str(v) for k, v in n.attrs.items() if k != "subgraphs"}
        if attrs:
            entry["attrs"] = attrs
        ins = inputs_of(n)
        if opdef is not None and opdef.input_order:
            ins = reorder_inputs(opdef, opdef.parse_attrs(n.attrs, n.name), ins,
                                  to_mxnet=True)
        entry["inputs"] = [[index[id(s)], i, 0] for s, i in ins]
        if opdef is not None and "subgraphs" in n.attrs:   # control flow: mxnet's own field
            entry["subgraphs"] = json.loads(n.attrs["subgraphs"])
        out_nodes.append(entry)
        row_ptr.append(row_ptr[-1] + (1 if opdef is None else
                                      len(opdef.list_outputs(n.parsed()))))
    doc = {
        "nodes": out_nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n.op == "null"],
        "node_row_ptr": row_ptr,
        "heads": [[index[id(n)], i, 0] for n, i in outputs],
        "attrs": {"mxnet_version": ["int", MXNET_VERSION]},
    }
    if is_np_shape():       # as mxnet: its 0 dims are sizes, -1 the unknown ones
        doc["attrs"]["is_np_shape"] = ["int", 1]
    return doc


def entries_from_json(json_str) -> tuple:
    """The ``(heads, effects)`` of mxnet's symbol JSON text: the output entries and the
    operators without outputs, over new :class:`Node` objects. Unknown operators or
    attributes, and anything malformed, raise :class:`MXNetError` naming the node."""
    try:
        doc = json.loads(json_str)
    except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise MXNetError(f"symbol JSON is not valid JSON: {exc}") from None
    except RecursionError:
        raise MXNetError("symbol JSON is nested too deeply") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) \
            or not isinstance(doc.get("heads"), list):
        raise MXNetError("symbol JSON needs a 'nodes' list and a 'heads' list")
    nodes = []
    for i, entry in enumerate(doc["nodes"]):
        nodes.append(_node_from_json(i, entry, nodes))
    if is_np_shape() and not _written_in_numpy_shapes(doc):
        _legacy_hints_to_numpy(nodes)
    heads = []
    for h in doc["heads"]:
        heads.append(_entry_from_json(h, nodes, "heads"))
    # operators without outputs (reset_arrays), which heads cannot name: kept as effects
    effects = [n for n in nodes if n.op != "null" and n.num_outputs() == 0]
    if not heads and not effects:
        raise MXNetError("symbol JSON has no heads")
    return heads, effects


def _written_in_numpy_shapes(doc) -> bool:
    """Whether the file says it was written under NumPy shape semantics."""
    mark = (doc.get("attrs") or {}).get("is_np_shape")
    try:
        return bool(int(mark[1] if isinstance(mark, list) else mark or 0))
    except (TypeError, ValueError, IndexError):
        return False


def _legacy_hints_to_numpy(nodes):
    """A legacy file read under NumPy shape semantics: its variables' ``__shape__``
    hints say unknown with 0 (a dim) and () (the shape); they become -1 and no hint,
    as mxnet converts them."""
    for n in nodes:
        hint = n.attrs.get("__shape__") if n.op == "null" else None
        if hint is None:
            continue
        try:
            dims = tuple(parse_shape(hint))
        except ValueError:
            continue            # left for inference to report, naming the variable
        if dims:
            n.attrs["__shape__"] = str(tuple(-1 if d == 0 else d for d in dims))
        else:
            del n.attrs["__shape__"]


def _node_from_json(i, entry, nodes):
    if not isinstance(entry, dict):
        raise MXNetError(f"symbol JSON node {i} is not an object")
    op, name = entry.get("op"), entry.get("name")
    if not isinstance(op, str) or not isinstance(name, str):
        raise MXNetError(f"symbol JSON node {i} needs string 'op' and 'name'")
    attrs = entry.get("attrs", entry.get("attr", entry.get("param", {}))) or {}
    if not isinstance(attrs, dict):
        raise MXNetError(f"symbol JSON node {i} ('{name}'): attrs must be an object")
    attrs = {str(k): _attr_from_json(v, i, name) for k, v in attrs.items()}
    if entry.get("subgraphs"):      # control flow's bodies (ops/control_flow.py)
        attrs["subgraphs"] = json.dumps(entry["subgraphs"])
    raw_inputs = entry.get("inputs", [])
    if not isinstance(raw_inputs, list):
        raise MXNetError(f"symbol JSON node {i} ('{name}'): inputs must be a list")
    inputs = [_entry_from_json(e, nodes, f"node {i} ('{name}') inputs") for e in raw_inputs]
    node = Node(op, name, attrs, inputs)
    if op != "null":
        opdef = get_op(op, name)
        parsed = opdef.parse_attrs(attrs, name)
        expected = len(opdef.list_arguments(parsed)) + len(opdef.list_aux(parsed))
        if len(inputs) != expected:
            raise MXNetError(f"operator {op} '{name}' takes {expected} inputs, the JSON gives "
                             f"{len(inputs)}")
        node.inputs = reorder_inputs(opdef, parsed, inputs, to_mxnet=False)
    elif inputs:
        raise MXNetError(f"variable '{name}' (node {i}) cannot have inputs")
    return node


def _attr_from_json(v, i, name):
    """An attribute value: mxnet writes strings; numbers and booleans are accepted."""
    if isinstance(v, (str, int, float)):
        return str(v)
    raise MXNetError(f"symbol JSON node {i} ('{name}'): attribute values must be strings, "
                     f"got {type(v).__name__}")


def _entry_from_json(e, nodes, where):
    if not isinstance(e, list) or len(e) < 2 or not all(type(x) is int for x in e[:2]):
        raise MXNetError(f"symbol JSON {where}: bad entry {_short(e)}")
    idx, out = e[0], e[1]
    if not 0 <= idx < len(nodes):
        raise MXNetError(f"symbol JSON {where}: entry refers to node {idx}, which is not "
                         f"defined before it")
    if not 0 <= out < nodes[idx].num_outputs():
        raise MXNetError(f"symbol JSON {where}: node '{nodes[idx].name}' has no output {out}")
    return (nodes[idx], out)


def _short(value) -> str:
    try:
        return json.dumps(value)[:40]
    except (ValueError, TypeError, RecursionError):
        return type(value).__name__


def entries_from_file(fname) -> tuple:
    """The ``(heads, effects)`` of a ``-symbol.json`` file (:func:`entries_from_json`),
    for :func:`compiler.symbol.load`: a file that cannot be read, is not UTF-8 text or
    holds no valid symbol graph raises :class:`MXNetError` naming the file."""
    if not isinstance(fname, (str, os.PathLike)):
        raise TypeError("fname must be a path")
    path = os.fspath(fname)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise MXNetError(f"cannot read symbol file {path!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MXNetError(f"symbol file {path!r} is not UTF-8 text ({exc.reason} at byte "
                         f"{exc.start}): not a -symbol.json file, or a damaged one") from None
    try:
        return entries_from_json(text)
    except MXNetError as exc:
        raise MXNetError(f"symbol file {path!r}: {exc}") from None
