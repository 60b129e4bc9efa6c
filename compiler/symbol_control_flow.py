"""``mx.sym.contrib.foreach`` / ``while_loop`` / ``cond``: Python functions traced into
subgraphs, as mxnet 1.9.1's ``mx.sym.contrib`` does.

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
import types

from .errors import MXNetError
from .frontend import attribute as _attribute
from .symbol_json import json_doc
from .symbol_node import Node, topo

_SUBGRAPH_NAMES = collections.Counter()

# What this module uses of ``symbol.py``, which installs it (``install``) after defining
# it: symbol.py imports this module, never the other way round.
_S = types.SimpleNamespace()


def install(**names):
    """Called by ``symbol.py`` with ``Symbol``, ``Group``, ``Variable`` and ``create``."""
    _S.__dict__.update(names)


def _unique_subgraph_name(name):
    outer = _attribute.current().get(None).get("__subgraph_name__", "")
    if outer:
        name = f"{outer}${name}"
    k = _SUBGRAPH_NAMES[name]
    _SUBGRAPH_NAMES[name] += 1
    return f"{name}{k}"


def _flatten(args, what):
    """Nested lists of Symbols -> (flat list, format), mxnet's ``_flatten``."""
    if isinstance(args, _S.Symbol):
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
    return _S.create("_copy", [s], {}, None, hint="identity")


def _construct_subgraph(outs, states, name, apart=True):
    """The body's outputs then states as one group, with an ``identity`` where one is an
    input, comes from outside the body, or (``apart``: foreach) repeats an output, as
    mxnet builds them."""
    inputs = set(_S.Group(outs + states).list_inputs())
    out_names = {o.name for o in outs}
    flat = [(_identity(o) if o.name in inputs or not _in_subgraph(o, name) else o)
            for o in outs]
    flat += [(_identity(s) if s.name in inputs or (apart and s.name in out_names)
              or not _in_subgraph(s, name) else s) for s in states]
    return _S.Group(flat)


def _cut_subgraph(g, name):
    """Replace the body's inputs from outside by variables (mxnet's ``CutGraphInputs``).

    Returns ``(subgraph, {variable name: outside entry})``."""
    cut, made = {}, {}
    for node in topo(g._outputs):
        if node.attrs.get("__subgraph_name__", "") != name:
            continue
        for j, (src, i) in enumerate(node.inputs):
            if src.attrs.get("__subgraph_name__", "") == name:
                continue
            key = (id(src), i)
            if key not in made:
                made[key] = Node("null", src.output_names()[i])
                cut.setdefault(made[key].name, (src, i))
            node.inputs[j] = (made[key], 0)
    return _S.Symbol(list(g._outputs)), cut


def _subgraph_json(g) -> dict:
    doc = json_doc(g._outputs, g._effects)
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
            out.append(_S.Symbol([cut[in_name]]))
        else:   # a variable made inside the body: the operator's own copy of it
            v = vars_by_name[in_name]
            out.append(_S.Symbol([(Node("null", v.name, dict(v.attrs)), 0)]))
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
    with _attribute.AttrScope(__subgraph_name__=name):
        in_eles, _ = _regroup([_S.Variable(_uniq_name(s)) for s in flat_data], data_fmt)
        states, _ = _regroup([_S.Variable(_uniq_name(s)) for s in flat_states], state_fmt)
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
    ret = _S.create("_foreach", ordered, {
        "num_args": len(ordered) + 1, "num_outputs": num_outputs,
        "num_out_data": len(sym_out),
        "in_state_locs": str([names.index(n) for n in state_names]),
        "in_data_locs": str([names.index(n) for n in data_names]),
        "remain_locs": str(remain), "subgraphs": json.dumps([_subgraph_json(g)])},
        None, hint="_foreach")
    outs, _ = _regroup([ret[i] for i in range(len(sym_out))], out_fmt)
    finals, _ = _regroup([ret[len(sym_out) + i] for i in range(len(sym_states))], state_fmt)
    return outs, finals


def _traced(flat_vars, trace, name):
    """Run ``trace(new_vars) -> (outputs, states, out_fmt)`` in a fresh subgraph scope on
    variables named after ``flat_vars``; the subgraph cut, its outside entries, counts."""
    name = _unique_subgraph_name(name)
    with _attribute.AttrScope(__subgraph_name__=name):
        outs, states, fmt = trace([_S.Variable(_uniq_name(s)) for s in flat_vars])
        g = _construct_subgraph(outs, states, name, apart=False)
    g, cut = _cut_subgraph(g, name)
    names = g.list_inputs()
    if len(set(names)) != len(names):
        raise MXNetError(f"the inputs of the subgraph don't have unique names: {names}")
    return g, cut, len(outs), len(outs) + len(states), fmt


def _union_inputs(graphs, named, by_name):
    """The operator's inputs for several subgraphs and each subgraph's locations in them.

    ``named``: loop variables by their in-body name (shared by every subgraph);
    ``by_name``: an outside variable already taken is reused by name (``cond``)."""
    inputs, locs, where = [], [], {}
    for g, cut in graphs:
        got = _outer_inputs(g, cut, named)
        here = []
        for in_name, s in zip(g.list_inputs(), got):
            prior = {x.name: x for x in inputs} if by_name else {}
            s = prior.get(in_name, s)
            if id(s) not in where:
                where[id(s)] = len(inputs)
                inputs.append(s)
            here.append(where[id(s)])
        locs.append(here)
    return inputs, locs


def while_loop(cond, func, loop_vars, max_iterations=None, name="while_loop"):
    """Run ``func`` while ``cond`` holds, at most ``max_iterations`` times
    (``mx.sym.contrib.while_loop``).

    Parameters
    ----------
    cond : callable
        ``cond(*loop_vars) -> Symbol`` of one element; the loop stops where it is zero.
    func : callable
        ``func(*loop_vars) -> (step_output, new_loop_vars)``; Symbols or nested lists.
    loop_vars : Symbol or nested list of Symbols
    max_iterations : int
        The most steps taken; the step outputs have this many rows.
    name : str

    Returns
    -------
    outputs, loop_vars
        The step outputs stacked (rows past the last step are zeros; mxnet leaves them
        unwritten), and the final loop variables.
    """
    if max_iterations is None:
        raise ValueError("max_iterations should be specified")
    max_iterations = int(max_iterations)
    flat_vars, var_fmt = _flatten(loop_vars, "while loop_vars")
    if not flat_vars:
        raise ValueError("loop_vars should contain at least one element")

    def trace_cond(new_vars):
        result = cond(*_regroup(new_vars, var_fmt)[0])
        if not isinstance(result, _S.Symbol):
            raise ValueError("Return of cond must be a Symbol")
        return [], [result], None

    def trace_func(new_vars):
        step, new = func(*_regroup(new_vars, var_fmt)[0])
        step, out_fmt = _flatten(list(step) if isinstance(step, tuple) else
                                 ([] if step is None else step), "while output")
        new, _ = _flatten(list(new) if isinstance(new, tuple) else
                          ([] if new is None else new), "while loop_vars")
        if len(new) != len(flat_vars):
            raise ValueError("The number of loop_vars should be consistent during the loop")
        return step, new, out_fmt

    cond_g, cond_cut, _, n_cond, _ = _traced(flat_vars, trace_cond, name + "_cond")
    if n_cond != 1:
        raise ValueError("cond must return one Symbol")
    func_g, func_cut, nod, nout, out_fmt = _traced(flat_vars, trace_func, name + "_func")
    named = {_uniq_name(s): s for s in flat_vars}
    inputs, (cond_locs, func_locs) = _union_inputs(
        [(cond_g, cond_cut), (func_g, func_cut)], named, by_name=False)
    func_names = func_g.list_inputs()
    var_locs = [func_names.index(_uniq_name(s)) if _uniq_name(s) in func_names else -1
                for s in flat_vars]
    for i, loc in enumerate(var_locs, 1):
        if loc == -1:
            raise ValueError(f"The {i}-th loop_var doesn't involve into the computation")
    ret = _S.create("_while_loop", inputs, {
        "num_args": len(inputs) + 2, "num_outputs": nout, "num_out_data": nod,
        "max_iterations": max_iterations, "cond_input_locs": str(cond_locs),
        "func_input_locs": str(func_locs), "func_var_locs": str(var_locs),
        "subgraphs": json.dumps([_subgraph_json(cond_g), _subgraph_json(func_g)])},
        None, hint="_while_loop")
    outs, _ = _regroup([ret[i] for i in range(nod)], out_fmt)
    finals, _ = _regroup([ret[i] for i in range(nod, nout)], var_fmt)
    return outs, finals


def cond(pred, then_func, else_func, name="cond"):
    """``then_func()`` where ``pred`` is nonzero, else ``else_func()``
    (``mx.sym.contrib.cond``).

    Both branches are computed and the result selected (mxnet's result for branches
    without side effects); gradients flow only into the branch taken.

    Parameters
    ----------
    pred : Symbol
        One element.
    then_func, else_func : callable
        ``() -> Symbol or nested list of Symbols``, of the same shapes and dtypes.
    name : str

    Returns
    -------
    Symbol or nested list of Symbols
    """
    def branch(fn, tag):
        def trace(_):
            outs, fmt = _flatten(fn(), "cond outputs")
            return [], outs, fmt
        return _traced([], trace, name + tag)

    cond_g, cond_cut, _, n_pred, _ = branch(lambda: pred, "_pred")
    if n_pred != 1:
        raise ValueError("pred should always be a single output")
    then_g, then_cut, _, n_then, then_fmt = branch(then_func, "_then")
    else_g, else_cut, _, n_else, _ = branch(else_func, "_else")
    if n_then != n_else:
        raise ValueError("Number of outputs differs between then-branch and else-branch")
    inputs, (c_locs, t_locs, e_locs) = _union_inputs(
        [(cond_g, cond_cut), (then_g, then_cut), (else_g, else_cut)], {}, by_name=True)
    ret = _S.create("_cond", inputs, {
        "num_args": len(inputs) + 3, "num_outputs": n_then,
        "cond_input_locs": str(c_locs), "then_input_locs": str(t_locs),
        "else_input_locs": str(e_locs),
        "subgraphs": json.dumps([_subgraph_json(g) for g in (cond_g, then_g, else_g)])},
        None, hint="_cond")
    outs, _ = _regroup([ret[i] for i in range(n_then)], then_fmt)
    return outs
