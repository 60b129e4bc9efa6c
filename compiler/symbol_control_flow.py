"""``mx.sym.contrib.foreach`` / ``while_loop`` / ``cond``: Python functions traced into
subgraphs, as mxnet 1.9.1's ``python/mxnet/symbol/contrib.py`` does.

The body runs once on fresh variables inside ``AttrScope(__subgraph_name__=...)``; every
node it creates carries that name, so the body's graph is the marked nodes. An input
of a marked node that is not marked (a symbol from outside, a weight) is cut: the
subgraph reads a new variable named after that entry's output, and the operator takes
the entry as an input. The operator node (``ops/control_flow.py``) holds the subgraphs
as their mxnet JSON and the ``*_locs`` that bind its inputs to theirs.
"""
from __future__ import annotations

import collections
import json

from .errors import MXNetError
from .frontend import attribute as _attribute
from .symbol import Group, Symbol, Variable, _create, _Node, _topo

_SUBGRAPH_NAMES = collections.Counter()


def _unique_subgraph_name(name):
    outer = _attribute.current().get(None).get("__subgraph_name__", "")
    if outer:
        name = f"{outer}${name}"
    k = _SUBGRAPH_NAMES[name]
    _SUBGRAPH_NAMES[name] += 1
    return f"{name}{k}"


def _flatten(args, what):
    """Nested lists of Symbols -> (flat list, format), mxnet's ``_flatten``."""
    if isinstance(args, Symbol):
        k = len(args.list_outputs())
        return [args], (k if k > 1 else 0)
    if not isinstance(args, (list, tuple)):
        raise MXNetError(f"{what} must be a (nested) list of Symbol, got "
                         f"{type(args).__name__}")
    flat, fmts = [], []
    for a in args:
        f, fmt = _flatten(a, what)
        flat.extend(f)
        fmts.append(fmt)
    return flat, fmts


def _regroup(args, fmt):
    if isinstance(fmt, int):
        return (args[0], args[1:]) if fmt == 0 else (args[:fmt], args[fmt:])
    out = []
    for f in fmt:
        r, args = _regroup(args, f)
        out.append(r)
    return out, args


def _uniq_name(sym):
    node, idx = sym._single_entry("a control-flow input")
    return f"{node.name}-{idx}"


def _in_subgraph(sym, name):
    node, _ = sym._single_entry("a control-flow output")
    return node.attrs.get("__subgraph_name__", "") == name


def _identity(s):
    """mxnet's ``symbol.op.identity``: a ``_copy`` node named ``identity<k>``."""
    return _create("_copy", [s], {}, None, hint="identity")


def _construct_subgraph(outs, states, name):
    """The body's outputs then states as one group, with an ``identity`` where one is an
    input, comes from outside the body, or repeats an output (as mxnet)."""
    inputs = set(Group(outs + states).list_inputs())
    out_names = {o.name for o in outs}
    flat = [(_identity(o) if o.name in inputs or not _in_subgraph(o, name) else o)
            for o in outs]
    flat += [(_identity(s) if s.name in inputs or s.name in out_names
              or not _in_subgraph(s, name) else s) for s in states]
    return Group(flat)


def _cut_subgraph(g, name):
    """Replace the body's inputs from outside by variables (mxnet's ``CutGraphInputs``).

    Returns ``(subgraph, {variable name: outside entry})``."""
    cut, made = {}, {}
    for node in _topo(g._outputs):
        if node.attrs.get("__subgraph_name__", "") != name:
            continue
        for j, (src, i) in enumerate(node.inputs):
            if src.attrs.get("__subgraph_name__", "") == name:
                continue
            key = (id(src), i)
            if key not in made:
                made[key] = _Node("null", src.output_names()[i])
                cut.setdefault(made[key].name, (src, i))
            node.inputs[j] = (made[key], 0)
    return Symbol(list(g._outputs)), cut


def _subgraph_json(g) -> dict:
    doc = g._json_doc()
    doc.pop("attrs", None)
    return doc


def _outer_inputs(g, cut, named):
    """For each subgraph input (``list_inputs`` order): the outside entry it reads.
    ``named``: loop inputs by their in-body variable name."""
    vars_by_name = {n.name: n for n in g._variables()[0] + g._variables()[1]}
    out = []
    for in_name in g.list_inputs():
        if in_name in named:
            out.append(named[in_name])
        elif in_name in cut:
            out.append(Symbol([cut[in_name]]))
        else:   # a variable made inside the body: the operator's own copy of it
            v = vars_by_name[in_name]
            out.append(Symbol([(_Node("null", v.name, dict(v.attrs)), 0)]))
    return out


def foreach(body, data, init_states, name="foreach"):
    """Run ``body`` over the first axis of ``data`` (``mx.sym.contrib.foreach``).

    Parameters
    ----------
    body : callable
        ``body(data_slice, states) -> (outputs, new_states)``; Symbols or nested lists.
    data : Symbol or list of Symbols
        Sliced along their first axis (of one length, known when bound).
    init_states : Symbol or nested list of Symbols
        The states before the first step.
    name : str
        The subgraph's name (the operator node is named ``_foreach<k>``).

    Returns
    -------
    outputs, states
        The step outputs stacked on a new first axis, and the last states, in the
        nesting ``body`` gave them.
    """
    flat_data, data_fmt = _flatten(data, "foreach input")
    flat_states, state_fmt = _flatten(init_states, "foreach states")
    name = _unique_subgraph_name(name)
    with _attribute.AttrScope(subgraph_name=name):
        in_eles, _ = _regroup([Variable(_uniq_name(s)) for s in flat_data], data_fmt)
        states, _ = _regroup([Variable(_uniq_name(s)) for s in flat_states], state_fmt)
        sym_out, sym_states = body(in_eles, states)
        sym_out, out_fmt = _flatten(sym_out, "foreach output")
        sym_states, new_fmt = _flatten(sym_states, "foreach loop_vars")
        if new_fmt != state_fmt:
            raise MXNetError("foreach: the input and output loop_vars have different formats")
        g = _construct_subgraph(sym_out, sym_states, name)
    g, cut = _cut_subgraph(g, name)
    names = g.list_inputs()
    if len(set(names)) != len(names):
        raise MXNetError(f"foreach: the inputs of the subgraph don't have unique names: {names}")
    data_names = [_uniq_name(s) for s in flat_data]
    state_names = [_uniq_name(s) for s in flat_states]
    for what, group in (("data arrays", data_names), ("state arrays", state_names)):
        if any(n not in names for n in group):
            raise MXNetError(f"foreach: the {what} have to be used in the loop body")
    remain = [k for k, n in enumerate(names) if n not in data_names and n not in state_names]
    outer = _outer_inputs(g, cut, {})
    ordered = flat_data + flat_states + [outer[k] for k in remain]
    num_outputs = len(sym_out) + len(sym_states)
    ret = _create("_foreach", ordered, {
        "num_args": len(ordered) + 1, "num_outputs": num_outputs,
        "num_out_data": len(sym_out),
        "in_state_locs": str([names.index(n) for n in state_names]),
        "in_data_locs": str([names.index(n) for n in data_names]),
        "remain_locs": str(remain), "subgraphs": json.dumps([_subgraph_json(g)])},
        None, hint="_foreach")
    outs, _ = _regroup([ret[i] for i in range(len(sym_out))], out_fmt)
    finals, _ = _regroup([ret[len(sym_out) + i] for i in range(len(sym_states))], state_fmt)
    return outs, finals
