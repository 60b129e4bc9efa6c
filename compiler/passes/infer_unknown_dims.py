"""mxnet's unknown dims: a 0 in a shape is filled in from the other operands.

mxnet 1.x (legacy shape semantics) reads 0 in a shape as "not known yet":
``sym.zeros(shape=(0, H))`` (the begin states ``mx.rnn`` cells make) and
``Variable(shape=(0, H))`` hints take their batch size from the operands they
meet. This pass runs before :func:`~compiler.passes.infer_shapes.infer_shapes`
on graphs that hold such shapes. It propagates partial shapes forwards
through the operators' own shape rules and, both ways, through the dims an
operator links:

* ``pattern == "elemwise"``: every input of the output's rank has the
  output's shape;
* ``OpDef.dim_links``: the operator's own list (FullyConnected's batch dims,
  Concat's and SliceChannel's other axes, transpose's permuted dims);

and backwards through ``OpDef.infer_shape_back`` where a known output decides
an input dim no link names (Reshape: its input's one unknown dim; Convolution: its
data's spatial dims of stride 1).

What it learns becomes the variables' shapes and the constants' ``shape``
attributes; :func:`infer_shapes` then checks everything as usual, so a dim
nothing fills stays 0 and a real disagreement is reported there.
"""
from __future__ import annotations

from ..frontend.graph import Graph
from ..ops.registry import ShapeError, parse_shape
from ..shape_semantics import check_unmixed, is_np_shape, to_legacy, unknown_whole_shape

Partial = list   # dims, 0 where unknown
# a rule that raises on partial shapes teaches nothing here: infer_shapes, after this
# pass, runs the operator's rules on the completed shapes and reports what is wrong
_RULE_ERRORS = (ShapeError, ZeroDivisionError, ValueError, TypeError, IndexError)


def has_unknown_dims(graph: Graph, shapes: dict) -> bool:
    """Whether the given shapes, variable hints or constants hold an unknown dim: 0,
    or -1 under NumPy shape semantics (where a 0 is a size)."""
    if is_np_shape():
        asked = dict(shapes)
        for n in graph.variables():
            d = graph.node(n)
            if d["name"] not in asked and d["raw"].get("__shape__"):
                asked[d["name"]] = _parsed(d["raw"]["__shape__"])
        return check_unmixed(asked) or any(unknown_source_shape(graph, n) for n in graph.ops())
    if any(0 in tuple(s) for s in shapes.values() if s is not None):
        return True
    for n in graph.g.nodes:
        d = graph.node(n)
        if d["op"] == "null":
            hint = d["raw"].get("__shape__")
            if hint and d["name"] not in shapes and 0 in _hint(hint):
                return True
        elif not graph.inputs(n) and (0 in tuple(d["attrs"].get("shape", ()) or ())
                                      or unknown_source_shape(graph, n)):
            return True
    return False


def unknown_source_shape(graph: Graph, n) -> bool:
    """Whether ``n`` is an operator without inputs (a sampler, a constant) whose whole
    ``shape`` attribute is unknown (``shape_semantics.unknown_whole_shape``)."""
    d = graph.node(n)
    # the attribute first: this runs on every node of every shape sweep
    return ("shape" in d["attrs"] and unknown_whole_shape(d["attrs"]["shape"])
            and d["op"] != "null" and not graph.inputs(n))


def infer_unknown_dims(graph: Graph, shapes: dict) -> dict:
    """Fill unknown (0) dims; return the completed variable shapes.

    Parameters
    ----------
    graph : Graph
        Constant nodes whose ``shape`` attribute had unknown dims get the
        completed shape (modified in place).
    shapes : dict of str -> tuple
        Shapes given for variables, possibly with 0 dims.

    Returns
    -------
    dict of str -> tuple
        ``shapes`` plus every variable whose shape became fully known here.
    """
    known = partial_shapes(graph, shapes)
    var_of = {(n, 0): graph.node(n)["name"] for n in graph.variables()}
    ops = graph.ops()
    out = dict(shapes)
    for entry, name in var_of.items():
        dims = known.get(entry)
        if dims is not None and 0 not in dims and name not in shapes:
            out[name] = tuple(dims)
        elif dims is not None and 0 not in dims and 0 in tuple(shapes[name]):
            out[name] = tuple(dims)
    for n in ops:
        d = graph.node(n)
        shape = d["attrs"].get("shape")
        dims = known.get((n, 0))
        unknown = unknown_source_shape(graph, n) or (
            not graph.inputs(n) and shape is not None and 0 in tuple(shape))
        if unknown and dims and 0 not in dims:
            d["attrs"] = dict(d["attrs"], shape=tuple(dims))
    return out


def partial_shapes(graph: Graph, shapes: dict) -> dict:
    """Every value's shape as far as it is known, 0 where a dim is not.

    Parameters
    ----------
    graph : Graph
    shapes : dict of str -> tuple
        Shapes given for variables, possibly with 0 dims (``__shape__`` hints are
        read for the others).

    Returns
    -------
    dict
        ``{(node, output index): [dims]}`` for the values whose rank is known
        (mxnet's partial answers: ``infer_shape_partial`` gives ``(64, 0, 7, 7)``).
    """
    known = {}                       # entry -> Partial
    for n in graph.variables():
        d = graph.node(n)
        given = shapes.get(d["name"])
        if given is None and d["raw"].get("__shape__"):
            given = _hint(d["raw"]["__shape__"])
        if given is not None:
            known[(n, 0)] = [int(x) for x in given]
    ops = graph.ops()
    for _ in range(2 * len(ops) + 2):
        changed = False
        for n in ops:
            changed |= _visit(graph, n, known)
        if not changed:
            break
    return known


def _parsed(text) -> tuple:
    try:
        return tuple(parse_shape(text))
    except ValueError:
        return ()


def _hint(text) -> tuple:
    """A ``__shape__`` hint in this pass's spelling (0 for an unknown dim)."""
    dims = _parsed(text)
    return to_legacy(dims) if is_np_shape() else dims


def _visit(graph: Graph, n, known: dict) -> bool:
    d = graph.node(n)
    opdef = d["opdef"]
    ins = graph.inputs(n)
    in_dims = [known.get(e) for e in ins]
    changed = False
    # forwards, through the operator's own rule (0 dims pass through as sizes); a
    # source of unknown shape learns it from its consumers' links alone
    try:
        new_in, outs = ([], []) if unknown_source_shape(graph, n) else opdef.infer_shape(
            d["attrs"], [None if s is None else tuple(s) for s in in_dims])
    except _RULE_ERRORS:
        new_in, outs = [None] * len(ins), []
    for e, s in zip(ins, new_in):
        if s is not None:
            changed |= _merge(known, e, s)
    for i, s in enumerate(outs):
        if s is not None:
            changed |= _merge(known, (n, i), s)
    # backwards, through the operator's own rule (Reshape's one unknown input dim)
    if opdef.infer_shape_back is not None and ins:
        out_dims = [known.get((n, i)) for i in range(len(outs) or 1)]
        try:
            back = opdef.infer_shape_back(d["attrs"], [known.get(e) for e in ins], out_dims)
        except _RULE_ERRORS:
            back = None
        for e, s in zip(ins, back or ()):
            if s is not None:
                changed |= _merge(known, e, s)
    # both ways, through the dims the operator links
    num_out = len(outs) or len(d["shapes"] or []) or 1
    out_entries = [(n, i) for i in range(num_out)]
    try:
        groups = _links(graph, n, ins, out_entries, known)
    except _RULE_ERRORS:
        groups = []
    for group in groups:
        values = {known[e][k] for e, k in group if known.get(e) and known[e][k]}
        if len(values) != 1:
            continue            # nothing to give, or a conflict infer_shapes reports
        v = values.pop()
        for e, k in group:
            dims = known.get(e)
            if dims is not None and dims[k] == 0:
                dims[k] = v
                changed = True
    return changed


def _links(graph, n, ins, outs, known) -> list:
    """Groups of ``(entry, dim)`` that must be equal."""
    d = graph.node(n)
    opdef = d["opdef"]
    rank = lambda e: None if known.get(e) is None else len(known[e])  # noqa: E731
    if opdef.pattern == "elemwise":
        if outs and rank(outs[0]) is not None:
            for e in ins:           # an elemwise input has its output's shape
                if known.get(e) is None:
                    known[e] = [0] * rank(outs[0])
        same = [e for e in ins + outs[:1] if rank(e) is not None]
        ranks = {rank(e) for e in same}
        if outs and rank(outs[0]) is not None:
            same = [e for e in same if rank(e) == rank(outs[0])]
        elif len(ranks) != 1:
            return []
        if len(same) < 2:
            return []
        return [[(e, k) for e in same] for k in range(rank(same[0]))]
    if opdef.dim_links is None:
        return []
    groups = opdef.dim_links(d["attrs"], [rank(e) for e in ins], [rank(e) for e in outs])
    entries = {("in", i): e for i, e in enumerate(ins)}
    entries.update({("out", i): e for i, e in enumerate(outs)})
    return [[(entries[(side, i)], k) for side, i, k in group
             if (side, i) in entries and rank(entries[(side, i)]) is not None]
            for group in groups]


def _merge(known: dict, entry, dims) -> bool:
    dims = [int(x) for x in dims]
    old = known.get(entry)
    if old is None:
        known[entry] = dims
        return True
    if len(old) != len(dims):
        return False
    changed = False
    for k, (a, b) in enumerate(zip(old, dims)):
        if a == 0 and b:
            old[k] = b
            changed = True
    return changed
