"""mxnet 1.9.1's symbolic control flow (its control-flow operators): ``_foreach``,
``_while_loop`` and ``_cond``, each holding its body as subgraphs.

A subgraph is kept in the node's ``subgraphs`` attribute as the JSON text of mxnet's
list of subgraph symbols (``{"nodes", "arg_nodes", "node_row_ptr", "heads"}`` each);
``symbol.py`` moves it to and from the JSON node's own ``subgraphs`` field, so files move
both ways with mxnet. Subgraph input ``k`` is bound to an operator input by the
``*_locs`` attributes, as mxnet binds them.

Shapes are known at bind, so every operator is a ``Decompose``: the body is inlined
once per step into the graph, where the steps fuse as any ops; the gradient is that of
the rebuilt decomposition, which the forward's readers then read too (one unrolled
body for both: ``gradient_sharing_forward``).

* ``_foreach``: inputs ``data..., states..., remain...``; subgraph inputs
  ``in_data_locs``, ``in_state_locs``, ``remain_locs``. Step ``t`` sees ``data[t]``
  (a (1,) slice of 1-D data, as mxnet's ``NDArray::At``); outputs are the per-step
  outputs stacked on a new first axis, then the last states.
* ``_while_loop``: ``max_iterations`` steps (at most ``MAX_UNROLL``) are inlined with a
  running "still looping" flag: a step's new loop variables are taken only while the
  flag holds (``where``), and the flag is the condition of the variables so far. The
  step outputs have ``max_iterations`` rows, as mxnet's; rows past the last step taken
  are zeros here (mxnet leaves them unwritten).
* ``_cond``: both branches are computed and the result is selected by ``pred``
  (mxnet's result where the branches have no side effects); the gradient of ``where``
  flows only into the taken branch.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .registry import (Attr, Decompose, OpDef, ShapeError, parse_count, parse_int,
                       parse_shape, register)
from .subgraph import (check_locs, evaluate, gradient_sharing_forward, infer_subgraph,
                       inline, parse_subgraphs, subgraphs)


# -- helpers ---------------------------------------------------------------------------------

def _safe_infer(name, doc, shapes, dtypes=None):
    try:
        return infer_subgraph(doc, shapes, dtypes)
    except (KeyError, IndexError, TypeError) as exc:
        raise ShapeError(f"{name}: the subgraph is malformed ({exc!r})") from None


def _head_types(doc, in_types, count):
    """A subgraph's head dtypes from its input dtypes (shapes unknown, so an operator
    whose shape rule cannot run without them leaves the first known input dtype)."""
    try:
        return list(infer_subgraph(doc, [None] * len(in_types), in_types)[2])
    except (MXNetError, TypeError, ValueError, KeyError, IndexError):
        known = [t for t in in_types if t is not None]
        return [known[0] if known else None] * count


def _locs(v):
    return tuple(parse_shape(v))


def _output_names(attrs):
    k = attrs["num_outputs"]
    return ["output"] if k == 1 else [f"output{i}" for i in range(k)]


# -- _foreach --------------------------------------------------------------------------------

def _fe_split(attrs):
    nd, ns = len(attrs["in_data_locs"]), len(attrs["in_state_locs"])
    return nd, ns


def _fe_sub_order(attrs):
    """Subgraph input position of each operator input (data, states, remain)."""
    return list(attrs["in_data_locs"]) + list(attrs["in_state_locs"]) + list(attrs["remain_locs"])


def _fe_to_sub(attrs, values):
    order = _fe_sub_order(attrs)
    out = [None] * len(order)
    for pos, v in zip(order, values):
        out[pos] = v
    return out


def _fe_check(attrs, name, in_shapes):
    nd, _ = _fe_split(attrs)
    if len(_fe_sub_order(attrs)) != attrs["num_args"] - 1:
        raise ShapeError(f"{name}: num_args={attrs['num_args']} does not match "
                         f"{len(_fe_sub_order(attrs))} located subgraph inputs plus the subgraph")
    order = _fe_sub_order(attrs)
    if len(attrs["in_state_locs"]) != attrs["num_outputs"] - attrs["num_out_data"]:
        raise ShapeError(f"{name}: {len(attrs['in_state_locs'])} states for "
                         f"{attrs['num_outputs'] - attrs['num_out_data']} final outputs")
    if sorted(order) != list(range(len(order))):
        raise ShapeError(f"{name}: the *_locs {order} must place each subgraph input once")
    check_locs(name, "the *_locs", order, len(order), subgraphs(attrs["subgraphs"])[0])
    lens = {s[0] for s in in_shapes[:nd] if s is not None}
    if any(s is not None and len(s) < 1 for s in in_shapes[:nd]):
        raise ShapeError(f"{name}: data inputs must have at least one dim, got "
                         f"{in_shapes[:nd]}")
    if len(lens) > 1:
        raise ShapeError(f"{name}: data inputs have different lengths {in_shapes[:nd]}")
    return lens.pop() if lens else None


def _step_shape(shape):
    """One step's slice of a data input: its shape without the first dim, and (1,) for
    1-D data (mxnet 1.x's ``NDArray::At`` keeps one element as a (1,) slice)."""
    return tuple(shape[1:]) or (1,)


def _fe_shape(attrs, in_shapes):
    nd, ns = _fe_split(attrs)
    steps = _fe_check(attrs, "_foreach", in_shapes)
    step_in = [None if s is None else _step_shape(s) for s in in_shapes[:nd]] + in_shapes[nd:]
    doc = subgraphs(attrs["subgraphs"])[0]
    sub_in, outs, _ = _safe_infer("_foreach", doc, _fe_to_sub(attrs, step_in))
    order = _fe_sub_order(attrs)
    new_in = list(in_shapes[:nd]) + [sub_in[p] for p in order[nd:]]
    nod = attrs["num_out_data"]
    for i in range(ns):
        got, want = outs[nod + i], new_in[nd + i]
        if got is not None and want is not None and tuple(got) != tuple(want):
            raise ShapeError(f"_foreach: state {i} enters the body as {tuple(want)} and leaves "
                             f"it as {tuple(got)}")
    data_out = [None if s is None or steps is None else (steps,) + tuple(s) for s in outs[:nod]]
    return new_in, data_out + list(outs[nod:])


def _fe_type(attrs, in_types):
    doc = subgraphs(attrs["subgraphs"])[0]
    return list(in_types), _head_types(doc, _fe_to_sub(attrs, list(in_types)),
                                       attrs["num_outputs"])


def _fe_ref(attrs, ins, is_train):
    nd, ns = _fe_split(attrs)
    doc = subgraphs(attrs["subgraphs"])[0]
    states, rest = list(ins[nd:nd + ns]), list(ins[nd + ns:])
    outs = []
    for t in range(ins[0].shape[0]):
        xs = [x[t].reshape(_step_shape(tuple(x.shape))) for x in ins[:nd]]
        res = evaluate(doc, _fe_to_sub(attrs, xs + states + rest),
                       is_train)
        outs.append(res[:attrs["num_out_data"]])
        states = res[attrs["num_out_data"]:]
    stacked = [torch.stack([o[i] for o in outs]) for i in range(attrs["num_out_data"])]
    return stacked + states


def _fe_unroll(b, n, is_train=True):
    nd, ns = _fe_split(n.attrs)
    doc = subgraphs(n.attrs["subgraphs"])[0]
    nod = n.attrs["num_out_data"]
    steps = n.in_shapes[0][0]
    states, rest = list(n.inputs[nd:nd + ns]), list(n.inputs[nd + ns:])
    outs = []
    for t in range(steps):
        xs = [b.op("Reshape", b.op("slice_axis", x, axis=0, begin=t, end=t + 1),
                   shape=_step_shape(s)) for x, s in zip(n.inputs[:nd], n.in_shapes)]
        res = inline(b, doc, _fe_to_sub(n.attrs, xs + states + rest))
        outs.append(res[:nod])
        states = res[nod:]
    stacked = [b.op("stack", *[o[i] for o in outs], axis=0, num_args=steps) for i in range(nod)]
    return stacked + states


_FE_ATTRS = [Attr("num_args", parse_count), Attr("num_outputs", parse_count),
             Attr("num_out_data", parse_count), Attr("in_state_locs", _locs),
             Attr("in_data_locs", _locs), Attr("remain_locs", _locs),
             Attr("subgraphs", parse_subgraphs)]

register(OpDef(
    name="_foreach", pattern="composite",
    lowering=Decompose(_fe_unroll),
    arguments=lambda attrs: [f"data{i}" for i in range(attrs["num_args"] - 1)],
    outputs=_output_names, attrs=_FE_ATTRS, infer_shape=_fe_shape, infer_type=_fe_type,
    reference=_fe_ref, gradient=gradient_sharing_forward(_fe_unroll),
    doc="A for loop over the first axis of its data with the body subgraph; "
        "outputs the stacked step outputs and the last states (mx.sym.contrib.foreach)."))


# -- _while_loop -----------------------------------------------------------------------------

# Every step up to max_iterations is inlined (the trip count is data): a bound on the
# graph that makes.
MAX_UNROLL = 4096


def _wl_docs(attrs):
    docs = subgraphs(attrs["subgraphs"])
    if len(docs) != 2:
        raise ShapeError(f"_while_loop: needs 2 subgraphs (cond, func), got {len(docs)}")
    return docs


def _wl_var_inputs(attrs):
    """The operator input each loop variable starts from (and is replaced in)."""
    return [attrs["func_input_locs"][k] for k in attrs["func_var_locs"]]


def _wl_shape(attrs, in_shapes):
    if attrs["max_iterations"] > MAX_UNROLL:
        raise ShapeError(f"_while_loop: max_iterations={attrs['max_iterations']} is more "
                         f"than the {MAX_UNROLL} steps symtriton inlines")
    cond_doc, func_doc = _wl_docs(attrs)
    n = len(in_shapes)
    check_locs("_while_loop", "cond_input_locs", attrs["cond_input_locs"], n, cond_doc)
    check_locs("_while_loop", "func_input_locs", attrs["func_input_locs"], n, func_doc)
    check_locs("_while_loop", "func_var_locs", attrs["func_var_locs"],
               len(attrs["func_input_locs"]))
    if len(attrs["func_var_locs"]) != attrs["num_outputs"] - attrs["num_out_data"]:
        raise ShapeError(f"_while_loop: {len(attrs['func_var_locs'])} loop variables for "
                         f"{attrs['num_outputs'] - attrs['num_out_data']} final outputs")
    fin = [in_shapes[k] for k in attrs["func_input_locs"]]
    sub_in, outs, _ = _safe_infer("_while_loop", func_doc, fin)
    new_in = list(in_shapes)
    for k, s in zip(attrs["func_input_locs"], sub_in):
        new_in[k] = new_in[k] if new_in[k] is not None else s
    _safe_infer("_while_loop", cond_doc, [new_in[k] for k in attrs["cond_input_locs"]])
    nod = attrs["num_out_data"]
    for j, k in enumerate(_wl_var_inputs(attrs)):
        got = outs[nod + j]
        if got is not None and new_in[k] is not None and tuple(got) != tuple(new_in[k]):
            raise ShapeError(f"_while_loop: loop_var {j} enters func as {tuple(new_in[k])} "
                             f"and leaves it as {tuple(got)}")
    data = [None if s is None else (attrs["max_iterations"],) + tuple(s) for s in outs[:nod]]
    return new_in, data + [new_in[k] for k in _wl_var_inputs(attrs)]


def _wl_type(attrs, in_types):
    _, func_doc = _wl_docs(attrs)
    sub = [in_types[k] for k in attrs["func_input_locs"]]
    out_types = _head_types(func_doc, sub, attrs["num_outputs"])
    nod = attrs["num_out_data"]
    return list(in_types), list(out_types[:nod]) + [in_types[k] for k in _wl_var_inputs(attrs)]


def _wl_ref(attrs, ins, is_train):
    cond_doc, func_doc = _wl_docs(attrs)
    vals, nod, steps = list(ins), attrs["num_out_data"], []
    for _ in range(attrs["max_iterations"]):
        c = evaluate(cond_doc, [vals[k] for k in attrs["cond_input_locs"]], is_train)[0]
        if not bool(c.reshape(-1)[0] != 0):
            break
        res = evaluate(func_doc, [vals[k] for k in attrs["func_input_locs"]], is_train)
        steps.append(res[:nod])
        for j, k in enumerate(_wl_var_inputs(attrs)):
            vals[k] = res[nod + j]
    if not steps and nod:   # no step taken: the outputs are zeros of the steps' shapes
        fin = [ins[k] for k in attrs["func_input_locs"]]
        _, shapes, types = infer_subgraph(func_doc, [tuple(t.shape) for t in fin],
                                          [str(t.dtype).replace("torch.", "") for t in fin])
        zeros = [torch.zeros(shapes[i], dtype=getattr(torch, types[i])) for i in range(nod)]
    outs = []
    for i in range(nod):
        rows = [s[i] for s in steps] or [zeros[i]]
        pad = [torch.zeros_like(rows[0])] * (attrs["max_iterations"] - len(rows))
        outs.append(torch.stack((rows + pad) if steps else pad + rows))
    return outs + [vals[k] for k in _wl_var_inputs(attrs)]


def _mask_like(b, flag, like):
    """The (1,)-shaped 0/1 ``flag`` broadcast to ``like``'s shape, for ``where``."""
    flag = b.op("Cast", flag, dtype=like.dtype) if flag.dtype != like.dtype else flag
    flag = b.op("Reshape", flag, shape=(1,) * max(len(like.shape), 1))
    return b.op("broadcast_like", flag, like) if tuple(like.shape) != flag.shape else flag


def _truth(b, value):
    """1 where a one-element condition is nonzero (mxnet's as_bool_scalar), shape (1,)."""
    if len(value.shape) != 1 or value.shape[0] != 1:
        value = b.op("Reshape", value, shape=(1,))
    return b.op("_not_equal_scalar", value, scalar=0.0)


def _wl_unroll(b, n, is_train=True):
    cond_doc, func_doc = _wl_docs(n.attrs)
    attrs, vals, nod = n.attrs, list(n.inputs), n.attrs["num_out_data"]
    active, rows = None, [[] for _ in range(nod)]
    for _ in range(attrs["max_iterations"]):
        c = _truth(b, inline(b, cond_doc, [vals[k] for k in attrs["cond_input_locs"]])[0])
        active = c if active is None else b.op("elemwise_mul", active, c)
        res = inline(b, func_doc, [vals[k] for k in attrs["func_input_locs"]])
        for i in range(nod):
            rows[i].append(b.op("where", _mask_like(b, active, res[i]), res[i],
                                b.zeros_like(res[i])))
        for j, k in enumerate(_wl_var_inputs(attrs)):
            new = res[nod + j]
            vals[k] = b.op("where", _mask_like(b, active, new), new, vals[k])
    outs = [b.op("stack", *r, axis=0, num_args=len(r)) for r in rows]
    return outs + [b.op("_copy", vals[k]) for k in _wl_var_inputs(attrs)]


register(OpDef(
    name="_while_loop", pattern="composite",
    lowering=Decompose(_wl_unroll),
    arguments=lambda attrs: [f"data{i}" for i in range(attrs["num_args"] - 2)],
    outputs=_output_names,
    attrs=[Attr("num_args", parse_count), Attr("num_outputs", parse_count),
           Attr("num_out_data", parse_count), Attr("max_iterations", parse_int),
           Attr("cond_input_locs", _locs), Attr("func_input_locs", _locs),
           Attr("func_var_locs", _locs), Attr("subgraphs", parse_subgraphs)],
    infer_shape=_wl_shape, infer_type=_wl_type, reference=_wl_ref,
    gradient=gradient_sharing_forward(_wl_unroll),
    doc="A while loop of at most max_iterations steps (cond and func subgraphs); step "
        "outputs stacked to max_iterations rows (zeros past the last step), then the "
        "final loop variables (mx.sym.contrib.while_loop)."))


# -- _cond -----------------------------------------------------------------------------------

def _cd_docs(attrs):
    docs = subgraphs(attrs["subgraphs"])
    if len(docs) != 3:
        raise ShapeError(f"_cond: needs 3 subgraphs (cond, then, else), got {len(docs)}")
    return docs


def _cd_pick(attrs, values, which):
    return [values[k] for k in attrs[f"{which}_input_locs"]]


def _cd_shape(attrs, in_shapes):
    cond_doc, then_doc, else_doc = _cd_docs(attrs)
    for which, doc in (("cond", cond_doc), ("then", then_doc), ("else", else_doc)):
        check_locs("_cond", f"{which}_input_locs", attrs[f"{which}_input_locs"],
                   len(in_shapes), doc)
    new_in = list(in_shapes)
    branch_outs = []
    for which, doc in (("cond", cond_doc), ("then", then_doc), ("else", else_doc)):
        sub_in, outs, _ = _safe_infer("_cond", doc, _cd_pick(attrs, new_in, which))
        for k, s in zip(attrs[f"{which}_input_locs"], sub_in):
            new_in[k] = new_in[k] if new_in[k] is not None else s
        branch_outs.append(outs)
    pred, then_s, else_s = branch_outs
    if pred[0] is not None and int(torch.Size(pred[0]).numel()) != 1:
        raise ShapeError(f"_cond: the condition must have one element, got shape {pred[0]}")
    for i, (t, e) in enumerate(zip(then_s, else_s)):
        if t is not None and e is not None and tuple(t) != tuple(e):
            raise ShapeError(f"_cond: output {i} is {tuple(t)} in then_func and {tuple(e)} "
                             f"in else_func")
    return new_in, [t if t is not None else e for t, e in zip(then_s, else_s)]


def _cd_type(attrs, in_types):
    _, then_doc, _ = _cd_docs(attrs)
    return list(in_types), _head_types(then_doc, _cd_pick(attrs, list(in_types), "then"),
                                       attrs["num_outputs"])


def _cd_ref(attrs, ins, is_train):
    cond_doc, then_doc, else_doc = _cd_docs(attrs)
    c = evaluate(cond_doc, _cd_pick(attrs, ins, "cond"), is_train)[0]
    which, doc = ("then", then_doc) if bool(c.reshape(-1)[0] != 0) else ("else", else_doc)
    return evaluate(doc, _cd_pick(attrs, ins, which), is_train)


def _cd_build(b, n, is_train=True):
    cond_doc, then_doc, else_doc = _cd_docs(n.attrs)
    c = _truth(b, inline(b, cond_doc, _cd_pick(n.attrs, n.inputs, "cond"))[0])
    then_v = inline(b, then_doc, _cd_pick(n.attrs, n.inputs, "then"))
    else_v = inline(b, else_doc, _cd_pick(n.attrs, n.inputs, "else"))
    return [b.op("where", _mask_like(b, c, t), t, e) for t, e in zip(then_v, else_v)]


register(OpDef(
    name="_cond", pattern="composite",
    lowering=Decompose(_cd_build),
    arguments=lambda attrs: [f"data{i}" for i in range(attrs["num_args"] - 3)],
    outputs=_output_names,
    attrs=[Attr("num_args", parse_count), Attr("num_outputs", parse_count),
           Attr("cond_input_locs", _locs), Attr("then_input_locs", _locs),
           Attr("else_input_locs", _locs), Attr("subgraphs", parse_subgraphs)],
    infer_shape=_cd_shape, infer_type=_cd_type, reference=_cd_ref,
    gradient=gradient_sharing_forward(_cd_build),
    doc="If-then-else on a one-element condition (cond, then and else subgraphs); both "
        "branches are computed and the taken one selected (mx.sym.contrib.cond)."))
