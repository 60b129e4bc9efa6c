"""The analysis graph: a ``networkx.MultiDiGraph`` with one node per operator
instance or variable and one edge per tensor value.

Edges carry ``out`` (the producer's output index) and are keyed by ``slot``
(the consumer's input position), so ``inputs(n)`` is a sorted read of the
in-edges. All passes read and write this structure; :class:`Builder` is the
one way passes add operators (gradients, decompositions), and it infers the
new node's shapes on the spot.
"""
from __future__ import annotations

import functools
import heapq
import inspect
import itertools
import numbers
import os
from dataclasses import dataclass
from typing import Optional

import networkx as nx

from ..errors import MXNetError
from ..ops import get_op
from ..ops.registry import ShapeError

Entry = tuple  # (node_id, output_index)

# The largest tensor, in elements, shape inference accepts (an int32 index
# space): a bad symbol or shape fails here, before any memory is allocated.
# ``SYMTRITON_MAX_ELEMENTS`` overrides it.
DEFAULT_MAX_ELEMENTS = 2 ** 31


def max_elements() -> int:
    """The per-tensor element limit: ``SYMTRITON_MAX_ELEMENTS`` or ``2**31``."""
    raw = os.environ.get("SYMTRITON_MAX_ELEMENTS", "").strip()
    if not raw:
        return DEFAULT_MAX_ELEMENTS
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if limit < 1:
        raise MXNetError(f"SYMTRITON_MAX_ELEMENTS={raw[:40]!r} must be a positive integer")
    return limit


def check_shape(shape, what, limit: int = None) -> tuple:
    """``shape`` as a tuple of ints, or an MXNetError naming ``what`` if it has a
    negative dim or more elements than :func:`max_elements` (``limit`` when given).

    ``what`` may be a function giving the text: shape inference checks every
    input and output of every node, and the text is needed only for an error.
    """
    shape = tuple(map(int, shape))
    if shape and min(shape) < 0:
        raise MXNetError(f"{_text(what)}: shape {shape} has a negative dim")
    limit = max_elements() if limit is None else limit
    numel = 0 if 0 in shape else 1
    for x in shape:
        numel *= x
        if numel > limit:
            raise MXNetError(
                f"{_text(what)}: shape {shape} has more than {limit} elements, the limit per "
                f"tensor (set SYMTRITON_MAX_ELEMENTS to change it)")
    return shape


def _text(what) -> str:
    return what() if callable(what) else what


def without_cached_views(base):
    """A subclass of the networkx graph class ``base`` whose views (``nodes``,
    ``out_degree`` ...) are made on each use instead of cached on the graph: a cached
    view refers back to its graph, a reference cycle that leaves every graph a pass
    drops (and all its node data) to the cyclic collector, one walk over every object
    of the compile (``frontend/collector.py``)."""
    cls = type(base.__name__, (base,), {"__doc__": without_cached_views.__doc__,
                                        "__module__": __name__})
    for name in dir(base):
        attr = inspect.getattr_static(base, name)
        if isinstance(attr, functools.cached_property):
            setattr(cls, name, property(attr.func))
    return cls


_Uncached = without_cached_views(nx.MultiDiGraph)
UncachedDiGraph = without_cached_views(nx.DiGraph)     # fuse's graph of groups


def _changing(method):
    """``method`` counting the change in ``_version`` (what :meth:`Graph.topo` keeps)."""
    @functools.wraps(method)
    def change(self, *args, **kwargs):
        self._version += 1
        return method(self, *args, **kwargs)
    return change


_Uncached._version = 0         # bumped by every change of nodes or edges
for _name in ("add_node", "add_nodes_from", "remove_node", "remove_nodes_from", "add_edge",
              "add_edges_from", "add_weighted_edges_from", "remove_edge", "remove_edges_from",
              "update", "clear", "clear_edges"):
    setattr(_Uncached, _name, _changing(getattr(nx.MultiDiGraph, _name)))


class Graph:
    """A symbol graph under compilation.

    Attributes
    ----------
    g : networkx.MultiDiGraph
        Node data: ``op`` (``'null'`` for variables), ``name``, ``attrs``
        (parsed), ``raw`` (mxnet string attributes), ``role`` (``arg``,
        ``aux``, ``head_grad``, ``grad_in``, ``random`` or ``op``), ``phase``
        (``fwd`` or ``bwd``), ``shapes`` and ``dtypes`` (per output).
    heads : list of (node, index)
        The graph outputs: the symbol's outputs first, then gradients.
    meta : dict
        Pass results (``num_forward_heads``, ``grad_names`` ...).
    """

    def __init__(self):
        self.g = _Uncached()
        self.heads: list = []
        self.meta: dict = {}
        self._ids = itertools.count()

    # -- construction -------------------------------------------------------
    def add_node(self, op: str, name: str, inputs=(), attrs=None, raw=None,
                 role: str = "op", phase: str = "fwd") -> int:
        nid = next(self._ids)
        opdef = None if op == "null" else get_op(op, name)
        self.g._version += 1
        # written into networkx's dicts as ``add_node`` / ``add_edge`` would write them (one
        # keyed edge dict shared by both directions): autodiff and decompose add a node
        # per operator, and the generic calls cost several times more
        g = self.g
        g._node[nid] = {"op": op, "opdef": opdef, "name": name, "attrs": attrs or {},
                        "raw": dict(raw or {}), "role": role, "phase": phase,
                        "shapes": None, "dtypes": None}
        succ, pred = g._succ, g._pred
        succ[nid], pred[nid] = {}, {}
        for slot, (src, idx) in enumerate(inputs):
            keyed = succ[src].get(nid)
            if keyed is None:
                keyed = succ[src][nid] = pred[nid][src] = {}
            keyed[slot] = {"out": idx}
        nx._clear_cache(g)
        return nid

    def copy(self) -> "Graph":
        """A copy whose nodes, edges, heads and meta can change independently.

        Built straight into networkx's adjacency dicts (one keyed edge dict shared
        by successor and predecessor maps, as networkx keeps it): every pass
        copies its input, and ``MultiDiGraph.copy`` costs several times more.
        """
        new = Graph()
        node, succ, pred = new.g._node, new.g._succ, new.g._pred
        for n, d in self.g._node.items():
            d = dict(d)            # copy the mutable parts; the rest is shared and read-only
            d["attrs"] = dict(d["attrs"])
            d["raw"] = dict(d["raw"])
            d["shapes"] = None if d["shapes"] is None else list(d["shapes"])
            d["dtypes"] = None if d["dtypes"] is None else list(d["dtypes"])
            node[n] = d
            succ[n] = {}
            pred[n] = {}
        for u, nbrs in self.g._succ.items():
            out = succ[u]
            for v, keyed in nbrs.items():
                edges = {k: dict(data) for k, data in keyed.items()}
                out[v] = edges
                pred[v][u] = edges
        new.g.graph.update(self.g.graph)
        nx._clear_cache(new.g)
        new.heads = list(self.heads)
        new.meta = dict(self.meta)
        new._ids = itertools.count(max(self.g._node, default=-1) + 1)
        memo = self._topo_memo
        if memo is not None and memo[0] is self.g and memo[1] == self.g._version:
            new._topo_memo = (new.g, new.g._version, memo[2])     # the same nodes and edges
        return new

    # -- reading ------------------------------------------------------------
    def node(self, n) -> dict:
        # networkx's own dict of node data: ``g.nodes[n]`` goes through a view object,
        # which costs as much again on a call every pass makes per node
        return self.g._node[n]

    # Set by a reader that keeps the graph unchanged for a while (fuse): node -> inputs,
    # sorted once instead of once per call. Callers never modify the lists they get.
    _inputs_memo = None

    def inputs(self, n) -> list:
        """Input entries of ``n`` in slot order."""
        memo = self._inputs_memo
        if memo is not None:
            return memo[n]
        # straight from networkx's adjacency (no edge views): fusion calls this a lot
        pred = self.g._pred[n]
        if len(pred) == 1:                    # one producer, most often read once
            (u, keyed), = pred.items()
            if len(keyed) == 1:
                (data,) = keyed.values()
                return [(u, data["out"])]
        elif len(pred) == 2:                  # two producers, each read once
            (u, keyed), (w, keyed_w) = pred.items()
            if len(keyed) == 1 and len(keyed_w) == 1:
                (slot, data), = keyed.items()
                (slot_w, data_w), = keyed_w.items()
                if slot < slot_w:
                    return [(u, data["out"]), (w, data_w["out"])]
                return [(w, data_w["out"]), (u, data["out"])]
        edges = [(slot, u, data["out"]) for u, keyed in pred.items()
                 for slot, data in keyed.items()]
        edges.sort()
        return [(u, out) for _, u, out in edges]

    def consumers(self, n, index: Optional[int] = None) -> list:
        """``(consumer, slot)`` pairs reading ``n`` (output ``index`` if given)."""
        return [(v, k) for v, keyed in self.g._succ[n].items() for k, data in keyed.items()
                if index is None or data["out"] == index]

    # (networkx graph, its _version, order) of the last sort: passes sort an unchanged
    # graph (or its copy) again and again
    _topo_memo = None

    def topo(self) -> list:
        """Nodes in topological order, the smallest id first among those ready.

        The order of ``networkx.lexicographical_topological_sort``, read straight
        from the adjacency dicts: passes sort the graph often, and networkx's
        generator costs several times more per node. Kept until a node or an edge
        changes (a new list each call: callers may change theirs).
        """
        memo = self._topo_memo
        if memo is not None and memo[0] is self.g and memo[1] == self.g._version:
            return list(memo[2])
        order = self._sorted()
        self._topo_memo = (self.g, self.g._version, order)
        return list(order)

    def _sorted(self) -> list:
        pred, succ = self.g._pred, self.g._succ
        indegree = {n: sum(map(len, p.values())) for n, p in pred.items()}
        ready = [n for n, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            n = heapq.heappop(ready)
            order.append(n)
            for v, keyed in succ[n].items():
                left = indegree[v] - len(keyed)
                indegree[v] = left
                if left == 0:
                    heapq.heappush(ready, v)
        if len(order) != len(indegree):
            raise nx.NetworkXUnfeasible("the graph contains a cycle")
        return order

    def ancestors(self, nodes) -> set:
        """``nodes`` and every node they depend on: one search from all of them
        (a search per node would revisit what they share)."""
        return _reach(self.g._pred, nodes)

    def descendants(self, nodes) -> set:
        """``nodes`` and every node depending on them, in one search."""
        return _reach(self.g._succ, nodes)

    def shape(self, entry: Entry):
        shapes = self.g._node[entry[0]]["shapes"]
        return None if shapes is None else shapes[entry[1]]

    def dtype(self, entry: Entry):
        dtypes = self.g._node[entry[0]]["dtypes"]
        return "float32" if dtypes is None else dtypes[entry[1]]

    def variables(self, role: Optional[str] = None) -> list:
        """Variables (of ``role``) in topological order. A variable reads nothing, so
        it is ready from the start of the sort: their order is the order of their ids,
        found without sorting the graph."""
        nodes, pred = self.g._node, self.g._pred
        found = [n for n, d in nodes.items() if d["op"] == "null"
                 and (role is None or d["role"] == role)]
        if any(pred[n] for n in found):       # never made so; keep the sort's order if it were
            keep = set(found)
            return [n for n in self.topo() if n in keep]
        return sorted(found)

    def ops(self) -> list:
        nodes = self.g._node
        return [n for n in self.topo() if nodes[n]["op"] != "null"]

    def describe(self, n) -> str:
        d = self.g._node[n]
        return f"{d['op']} '{d['name']}'" if d["op"] != "null" else f"variable '{d['name']}'"

    def replace_entry(self, old: Entry, new: Entry):
        """Point every reader of ``old`` (edges and heads) at ``new``."""
        for v, slot in self.consumers(old[0], old[1]):
            self.g.remove_edge(old[0], v, key=slot)
            self.g.add_edge(new[0], v, key=slot, out=new[1])
        self.heads = [new if h == tuple(old) else h for h in self.heads]

    def remove_dead(self):
        """Drop nodes that no head depends on (variables included)."""
        live = self.ancestors(h for h, _ in self.heads)
        keep_vars = self.meta.get("keep_variables", True)
        dead = [n for n in self.g.nodes if n not in live
                and not (keep_vars and self.g._node[n]["op"] == "null")]
        self.g.remove_nodes_from(dead)


def _reach(adjacency, nodes) -> set:
    seen = set(nodes)
    stack = list(seen)
    while stack:
        for u in adjacency[stack.pop()]:
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen


def _through_cast(graph: Graph, src, idx):
    """The entry behind output ``idx`` of ``src`` when ``src`` passes shapes through
    (``OpDef.passes_shape``: casts), else that output itself."""
    d = graph.g._node[src]
    if d["op"] == "null":
        return src, idx
    passes = d["opdef"].passes_shape
    if passes is True:
        return graph.inputs(src)[idx]
    if passes is not False and idx == 0:    # an int: output 0 has input ``passes``'s shape
        return graph.inputs(src)[passes]
    return src, idx


def infer_node(graph: Graph, n, limit: int = None, types: bool = True):
    """Run the operator's shape and dtype rules for node ``n`` once.

    Returns True when something new was learned. Raises MXNetError naming
    the node, the operator, its inputs and their shapes on a conflict.
    ``limit``: :func:`max_elements`, read once by a caller inferring many nodes
    (reading the environment costs more than the rest of a small node's rules).
    ``types`` False: the dtypes are left to ``passes/infer_types`` (whole graphs).
    """
    d = graph.g._node[n]
    opdef = d["opdef"]
    ins = graph.inputs(n)
    in_shapes = [graph.shape(e) for e in ins]
    try:
        new_in, out_shapes = opdef.infer_shape(d["attrs"], list(in_shapes))
    except ShapeError as exc:
        raise MXNetError(_shape_message(graph, n, in_shapes, str(exc))) from None
    limit = max_elements() if limit is None else limit

    def input_text(i, src):
        names = opdef.list_arguments(d["attrs"]) + opdef.list_aux(d["attrs"])
        label = names[i] if i < len(names) else f"arg{i}"
        return f"{graph.describe(n)}: input {label} ('{graph.node(src)['name']}')"

    def output_text(i):
        names = opdef.list_outputs(d["attrs"])
        return f"{graph.describe(n)}: output {names[i] if i < len(names) else f'output{i}'}"

    known = d["shapes"]
    # a shape already known (and checked when it was set) needs no second check
    for i, ((src, idx), new) in enumerate(zip(ins, new_in)):
        if new is not None and (in_shapes[i] is None or tuple(new) != tuple(in_shapes[i])):
            check_shape(new, lambda i=i, src=src: input_text(i, src), limit)
    for i, s in enumerate(out_shapes):
        if s is not None and (known is None or i >= len(known) or known[i] != tuple(s)):
            check_shape(s, lambda i=i: output_text(i), limit)
    changed = False
    for (src, idx), old, new in zip(ins, in_shapes, new_in):
        if new is None or old is not None:
            if new is not None and old is not None and tuple(new) != tuple(old):
                raise MXNetError(_shape_message(
                    graph, n, in_shapes,
                    f"input {idx} of {graph.describe(src)} has shape {tuple(old)} "
                    f"but the operator needs {tuple(new)}"))
            continue
        src, idx = _through_cast(graph, src, idx)
        sd = graph.g._node[src]
        if sd["op"] != "null" or sd["shapes"] is not None:
            continue
        sd["shapes"] = [tuple(new)]
        changed = True
    if d["shapes"] is None or any(s is None for s in d["shapes"]):
        if d["shapes"] != out_shapes:
            changed = changed or any(s is not None for s in out_shapes)
        d["shapes"] = [None if s is None else tuple(s) for s in out_shapes]
    if not types:
        return changed
    in_types = [graph.dtype(e) if graph.g._node[e[0]]["dtypes"] else None for e in ins]
    _, out_types = opdef.infer_type(d["attrs"], in_types)
    out_types = list(out_types) + [out_types[-1] if out_types else None] * len(out_shapes)
    d["dtypes"] = [t or "float32" for t in out_types[:len(out_shapes)]]
    return changed


def _shape_message(graph: Graph, n, in_shapes, why: str) -> str:
    d = graph.g._node[n]
    names = d["opdef"].list_arguments(d["attrs"]) + d["opdef"].list_aux(d["attrs"])
    parts = []
    for i, (src, idx) in enumerate(graph.inputs(n)):
        label = names[i] if i < len(names) else f"arg{i}"
        shape = in_shapes[i]
        parts.append(f"{label}={graph.node(src)['name']}{'' if idx == 0 else f'[{idx}]'}"
                     f":{'?' if shape is None else tuple(shape)}")
    return (f"shape inference failed at {d['op']} '{d['name']}' with inputs "
            f"({', '.join(parts)}): {why}")


@dataclass(frozen=True)
class Ref:
    """A value produced while building graph ops: ``(node, index)`` of a graph."""
    builder: "Builder"
    node: int
    index: int = 0

    @property
    def entry(self) -> Entry:
        return (self.node, self.index)

    @property
    def shape(self):
        return self.builder.graph.shape(self.entry)

    @property
    def dtype(self) -> str:
        return self.builder.graph.dtype(self.entry)

    def _bin(self, other, op, scalar_op, reverse=False):
        b = self.builder
        if isinstance(other, Ref):
            lhs, rhs = (other, self) if reverse else (self, other)
            return b.op(op, lhs, rhs)
        return b.op(scalar_op, self, scalar=float(other))

    def __add__(self, o): return self._bin(o, "broadcast_add", "_plus_scalar")
    def __radd__(self, o): return self._bin(o, "broadcast_add", "_plus_scalar", True)
    def __sub__(self, o): return self._bin(o, "broadcast_sub", "_minus_scalar")
    def __rsub__(self, o):
        if isinstance(o, Ref):
            return self._bin(o, "broadcast_sub", None, True)
        return self.builder.op("_rminus_scalar", self, scalar=float(o))
    def __mul__(self, o): return self._bin(o, "broadcast_mul", "_mul_scalar")
    def __rmul__(self, o): return self._bin(o, "broadcast_mul", "_mul_scalar", True)
    def __truediv__(self, o): return self._bin(o, "broadcast_div", "_div_scalar")
    def __rtruediv__(self, o):
        if isinstance(o, Ref):
            return self._bin(o, "broadcast_div", None, True)
        return self.builder.op("_rdiv_scalar", self, scalar=float(o))
    def __neg__(self): return self.builder.op("negative", self)


class Builder:
    """Adds operator nodes to a graph, inferring their shapes immediately.

    ``b.op('dot', x, w, transpose_b=True)`` or ``b.dot(x, w, transpose_b=True)``
    returns a :class:`Ref` (a list of Refs for multi-output operators).
    """

    def __init__(self, graph: Graph, phase: str, prefix: str):
        self.graph = graph
        self.phase = phase
        self.prefix = prefix
        self._count = itertools.count()
        self._limit = max_elements()

    def ref(self, entry: Entry) -> Ref:
        return Ref(self, entry[0], entry[1])

    def op(self, name: str, *inputs, **attrs):
        if name in _LITERAL_TARGETS and set(attrs) == {"shape"} and 0 in tuple(attrs["shape"]):
            # a rule's target shape is literal, where these operators read 0 as "copy
            # the input's dim"; a zero-size result (NumPy shape semantics) has no
            # element to compute
            return self.op("_zeros", shape=tuple(attrs["shape"]),
                           dtype=self.graph.dtype(_entry(inputs[0])) or "float32")
        opdef = get_op(name)
        raw = {k: _raw(v) for k, v in attrs.items()}
        node_name = f"{self.prefix}_{name.strip('_').lower()}{next(self._count)}"
        parsed = opdef.parse_attrs(raw, node_name)
        entries = [r.entry if isinstance(r, Ref) else tuple(r) for r in inputs]
        n = self.graph.add_node(name, node_name, entries, parsed, raw, phase=self.phase)
        infer_node(self.graph, n, self._limit)
        num_out = len(opdef.list_outputs(parsed))
        refs = [Ref(self, n, i) for i in range(num_out)]
        return refs[0] if num_out == 1 else refs

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *inputs, **attrs: self.op(name, *inputs, **attrs)


# operators whose ``shape`` reads 0 as "the input's dim" (Builder.op)
_LITERAL_TARGETS = ("Reshape", "reshape", "broadcast_to")


def _entry(x) -> tuple:
    return x.entry if isinstance(x, Ref) else tuple(x)


def _raw(v) -> str:
    """mxnet's string form of an attribute value."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        # as mxnet's str(tuple): None entries (slice's ``begin=(None, 1)``), integers
        # (numpy's too) as integers, floats as floats (histogram's ``range=(0.1, 0.4)``)
        return "(" + ", ".join(_raw_entry(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return str(v)


def _raw_entry(x) -> str:
    if x is None:
        return "None"
    if isinstance(x, numbers.Integral):
        return str(int(x))
    if isinstance(x, numbers.Real):
        return repr(float(x))
    return str(x)
