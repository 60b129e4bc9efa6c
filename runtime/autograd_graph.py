"""Higher-order gradients: one tape entry's gradient run as recorded ``mx.nd`` calls.

``autograd.grad(..., create_graph=True)`` must give gradients that are themselves on
the tape, so that a later ``grad`` goes back through them (mxnet records the
backward pass then). Here an entry's gradient is built from its registry entry's
``gradient`` rule, the one place it is written: the rule's graph ops are built on
the entry's one-operator graph (``chain_rule.differentiate_node``, as
``passes/autodiff.py`` does for a whole graph), then each op runs through
``imperative.invoke`` while recording, reading the entry's real input, output and
head-gradient arrays. Every op a gradient rule writes has a gradient rule of its own
or says it has none, so a third order goes back through the second.

An output the operator keeps hidden (Dropout's mask) is not on the tape. A rule may
read it only where the operator lists it in ``OpDef.constant_outputs``: a random
draw, the same whatever the inputs, recomputed here with the entry's recorded seed.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import ndarray_mx


def recorded_grads(e, ograds, engine):
    """The gradients of entry ``e``'s inputs, computed by recorded ``mx.nd`` calls.

    Parameters
    ----------
    e : runtime.autograd_tape.Entry
        A recorded operator call (not an ``autograd.Function``).
    ograds : list of NDArray or None
        The gradient reaching each visible output (None: none reaches it).
    engine : dict
        ``imperative``'s ``symbol`` (one-operator Symbol of a call), as the tape holds it.

    Returns
    -------
    list of NDArray or None
        One per input of ``e``, None where the rule gives none.
    """
    from compiler.frontend.graph import Builder
    from compiler.ops.chain_rule import differentiate_node, sum_refs
    from compiler.passes.infer_shapes import infer_shapes
    sym = engine["symbol"](e.op_name, e.names, e.attr_args, e.attrs)
    graph = sym.to_graph()
    infer_shapes(graph, {n: tuple(t.shape) for n, t in zip(e.names, e.inputs)},
                 dtypes={n: _dtype_name(t) for n, t in zip(e.names, e.inputs)})
    node = next(n for n in graph.ops())
    b = Builder(graph, "bwd", "grad")
    values, contributions = {}, {}
    for i in range(len(graph.node(node)["shapes"])):
        # every output gets a head gradient, zeros where none reached it: the rule then
        # reads an output only where its math does (not for a zeros_like of it)
        g = ograds[i] if i < len(ograds) else None
        if g is None:
            g = _zeros(graph.shape((node, i)), graph.dtype((node, i)), e)
        v = graph.add_node("null", f"head_grad{i}", role="head_grad", phase="bwd")
        graph.node(v)["shapes"] = [tuple(g.shape)]
        graph.node(v)["dtypes"] = [_dtype_name(g)]
        values[(v, 0)] = g
        contributions[(node, i)] = [b.ref((v, 0))]
    differentiate_node(graph, b, node, contributions)
    by_name = dict(zip(e.names, e.inputs))
    for v in graph.variables():
        if graph.node(v)["role"] != "head_grad":
            values[(v, 0)] = by_name[graph.node(v)["name"]]
    for i, out in enumerate(e.outputs):
        values[(node, i)] = out
    wanted = []
    for v in graph.inputs(node):
        total = sum_refs(b, contributions.get(tuple(v), []))
        wanted.append(None if total is None else total.entry)
    _run_gradient_ops(graph, node, values, e, engine)
    return [None if w is None else values[tuple(w)] for w in wanted]


def _run_gradient_ops(graph, node, values, e, engine):
    """Run the graph's gradient ops in order through ``invoke`` (recorded; the tape
    sets the training flag the entry was recorded in)."""
    for n in graph.topo():
        d = graph.node(n)
        if d["op"] == "null" or n == node:
            continue
        ins = [_value(graph, node, values, src, e, engine) for src in graph.inputs(n)]
        res = ndarray_mx._invoke(d["op"], tuple(ins), dict(d["raw"]))
        res = res if isinstance(res, list) else [res]
        for i, r in enumerate(res):
            values[(n, i)] = r


def _value(graph, node, values, src, e, engine):
    src = tuple(src)
    if src in values:
        return values[src]
    # an output of the operator that the call did not return
    opdef = graph.node(node)["opdef"]
    if src[0] != node or src[1] not in opdef.constant_outputs:
        names = opdef.list_outputs(graph.node(node)["attrs"])
        raise MXNetError(
            f"autograd.grad(create_graph=True) through {e.op_name}: its gradient reads its "
            f"hidden output '{names[src[1]]}', which is not recorded; higher-order gradients "
            f"through {e.op_name} are not supported")
    for i, t in enumerate(_constant_outputs(e, graph.node(node)["opdef"], engine)):
        values.setdefault((node, i), t)
    return values[src]


def _constant_outputs(e, opdef, engine):
    """Every output of the entry's operator, its random draws made again from the
    recorded seed (not on the tape: a draw has no gradient)."""
    from compiler.symbol import Symbol
    from .executor import Executor
    sym = engine["symbol"](e.op_name, e.names, e.attr_args, e.attrs)
    head = sym._outputs[0][0]
    n_out = len(opdef.list_outputs(head.parsed()))
    every = Symbol([(head, i) for i in range(n_out)])
    given = {n: t.detach().as_subclass(torch.Tensor).clone(
        memory_format=torch.contiguous_format) for n, t in zip(e.names, e.inputs)}
    exe = Executor(every, e.ctx, {n: given[n] for n in every.list_arguments()},
                   grad_req="null",
                   aux_states={n: given[n] for n in every.list_auxiliary_states()})

    def pin_seed(prog):
        if prog.seed_buffer is not None and e.seed is not None:
            buf = exe._buffers_for(prog)[int(prog.seed_buffer)]
            buf.reshape(-1)[:1].view(torch.int32).fill_(e.seed)

    exe._set_seed = pin_seed
    return [o.clone() for o in exe.forward(is_train=e.is_train)]


def _zeros(shape, dtype, e):
    """A constant zero head gradient (not on the tape) on the entry's device."""
    device = e.outputs[0].device if e.outputs else None
    t = torch.zeros(tuple(shape), dtype=getattr(torch, dtype or "float32"), device=device)
    return ndarray_mx._like(t, e.outputs[0]) if e.outputs else t


def _dtype_name(t) -> str:
    return str(ndarray_mx.torch_dtype(t)).replace("torch.", "")
