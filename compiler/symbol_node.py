"""The nodes of a :class:`compiler.symbol.Symbol` graph and the walks over them.

A symbol is a list of output entries ``(node, index)`` over :class:`Node` objects: an
operator instance or a variable, its attributes as mxnet's strings, its inputs as
entries. This module knows nothing of ``Symbol`` itself: the symbol API
(``compiler/symbol.py``) and its JSON form (``compiler/symbol_json.py``) build on it.
"""
from __future__ import annotations

from .ops import get_op

# Bumped whenever a node's attributes change after it was made (``Symbol._set_attr``): what a
# Symbol derived from its graph (variables, inferred shapes) is recomputed after it.
ATTR_EDITS = [0]


class Node:
    """One operator instance or variable. ``attrs`` are mxnet strings."""
    __slots__ = ("op", "name", "attrs", "inputs", "_parsed")

    def __init__(self, op, name, attrs=None, inputs=()):
        self.op = op
        self.name = name
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)  # [(node, index)]
        self._parsed = None         # (attribute edits then, parsed attrs): see parsed()

    def opdef(self):
        return None if self.op == "null" else get_op(self.op, self.name)

    def parsed(self):
        """The parsed attributes (a copy): parsed once while no node's attributes change,
        since every listing and graph building asks for them again."""
        memo = self._parsed
        if memo is None or memo[0] != ATTR_EDITS[0]:
            memo = self._parsed = (ATTR_EDITS[0], self.opdef().parse_attrs(self.attrs, self.name))
        return dict(memo[1])

    def num_outputs(self):
        if self.op == "null":
            return 1
        return len(self.opdef().list_outputs(self.parsed()))

    def output_names(self):
        if self.op == "null":
            return [self.name]
        outs = self.opdef().list_outputs(self.parsed())
        return [f"{self.name}_{o}" if self.name else o for o in outs]  # unnamed: atomic

    def num_arguments(self):
        return len(self.opdef().list_arguments(self.parsed()))


def listed_attrs(node) -> dict:
    """The attributes mxnet lists for a node: a control-flow operator's subgraphs are not
    attributes there (its JSON holds them in the node's ``subgraphs`` field)."""
    if node.op != "null" and "subgraphs" in node.attrs:
        return {k: v for k, v in node.attrs.items() if k != "subgraphs"}
    return dict(node.attrs)


def inputs_before_amp_casts(node) -> list:
    """``node``'s inputs with AMP's casts skipped (a chain of them too): an
    ``amp_cast``'s value is its input's, output ``i`` of ``amp_multicast`` its input
    ``i``'s (mxnet's RemoveAmpCast)."""
    out = []
    for src, i in node.inputs:
        while src.op in ("amp_cast", "amp_multicast"):
            src, i = src.inputs[0 if src.op == "amp_cast" else i]
        out.append((src, i))
    return out


def in_mxnet_order(node, inputs):
    """``inputs`` (a node's, arguments then auxiliary states) in mxnet's order
    (``OpDef.input_order``: quantized_batch_norm's moving statistics sit in the middle)."""
    if node.op == "null" or not node.opdef().input_order:
        return inputs
    return reorder_inputs(node.opdef(), node.parsed(), inputs, to_mxnet=True)


def reorder_inputs(opdef, parsed, inputs, to_mxnet):
    """A node's inputs between this project's order (arguments, then auxiliary states)
    and mxnet's (``OpDef.input_order``, as its JSON lists them)."""
    if not opdef.input_order:
        return list(inputs)
    ours = opdef.list_arguments(parsed) + opdef.list_aux(parsed)
    theirs = opdef.list_inputs(parsed)
    src, dst = (ours, theirs) if to_mxnet else (theirs, ours)
    by_name = dict(zip(src, inputs))
    return [by_name[n] for n in dst]


def topo(entries, inputs_of=None) -> list:
    """Nodes reachable from ``entries`` in mxnet's DFS post-order (inputs first, in
    mxnet's order); ``inputs_of(node)``: the input entries to follow (default: the
    node's own)."""
    follow = inputs_of or (lambda n: n.inputs)
    inputs_of = lambda n: in_mxnet_order(n, follow(n))  # noqa: E731
    order, seen = [], set()
    for head, _ in entries:
        if id(head) in seen:
            continue
        stack = [(head, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0 and id(node) in seen:
                continue
            ins = inputs_of(node)
            if i < len(ins):
                stack.append((node, i + 1))
                child = ins[i][0]
                if id(child) not in seen:
                    stack.append((child, 0))
            else:
                if id(node) not in seen:
                    seen.add(id(node))
                    order.append(node)
    return order
