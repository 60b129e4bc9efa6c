"""Chains of ``mx.rnn.LSTMCell`` steps as one LSTM layer call each (the ``cpu`` target).

An unrolled LSTMCell step is, in the symbol mxnet's ``LSTMCell.__call__`` builds::

    gates = FullyConnected(x_t, i2h) + FullyConnected(h_{t-1}, h2h)     (N, 4H)
    i, f, c~, o = SliceChannel(gates, 4): sigmoid, sigmoid, tanh, sigmoid
    c_t = f * c_{t-1} + i * c~ ;  h_t = o * tanh(c_t)

A step is matched when its intermediate values are read by nothing but the step (and
are not outputs of the graph); steps join a chain when one reads the previous step's
``h`` and ``c`` with the same four weights and ``c`` is read by nothing else. Each
chain becomes one ``_lstm_layer`` node (``ops/lstm_layer.py``: oneDNN's LSTM over the
whole sequence) reading the steps' inputs stacked along time; each ``h_t`` becomes a
view of the layer's output and the last ``c_t`` its final cell state, so whatever read
them (the next layer's steps, the merged outputs, the states returned by ``unroll``)
reads the same values. A chain whose inputs depend on its own steps (a decoder feeding
its output back) is left as it is, since one call cannot compute it.

mxnet's fused ``RNN`` operator in LSTM mode (``mx.rnn.FusedRNNCell``, ``sym.RNN``)
becomes one layer node per layer and direction the same way, reading its weights as
views of the packed parameter vector (without dropout between layers, state clipping,
sequence lengths or projections: those keep the operator's own decomposition).

It runs before ``autodiff`` (the layer's gradient is one oneDNN call too) and only where
``compiler/artifacts/compile.py`` asks for it: the ``cpu`` target, float32, a torch
with oneDNN, ``SYMTRITON_LSTM_LAYERS`` not ``0``. The Triton targets keep the steps,
whose kernels a GPU runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..frontend.graph import Builder, Graph
from ..ops.lstm_layer import workspace_bytes
from ..ops.registry import prod
from ..ops.rnn import param_layout

_ADD = frozenset({"elemwise_add", "_plus", "_Plus", "broadcast_add", "_add"})
_MUL = frozenset({"elemwise_mul", "_mul", "_Mul", "broadcast_mul"})
_GATE_ACTS = ("sigmoid", "sigmoid", "tanh", "sigmoid")      # i, f, c~, o


@dataclass
class _Step:
    x: tuple                 # input entry (N, I)
    h_prev: tuple
    c_prev: tuple
    weights: tuple           # i2h_weight, h2h_weight, i2h_bias, h2h_bias entries
    h: tuple                 # this step's h entry
    c: tuple
    tanh_c: int              # the node computing tanh(c_t), read only by the step
    f_mul: int               # the node computing f * c_{t-1}
    nodes: frozenset         # every node of the step


def fuse_lstm_layers(graph: Graph, with_workspace: bool) -> int:
    """Replace every chain of LSTMCell steps in ``graph`` (changed in place) by one
    ``_lstm_layer`` node; return the number of layers made.

    ``with_workspace``: the Program differentiates the graph, so the layer keeps
    oneDNN's training workspace for its gradient.
    """
    order = graph.topo()
    made = sum(_replace_rnn(graph, n, with_workspace) for n in order
               if graph.node(n)["op"] == "RNN")
    if made:
        order = graph.topo()
    heads = {tuple(h) for h in graph.heads}
    steps = [s for s in (_match_step(graph, n, heads)
                         for n in order if graph.node(n)["op"] == "SliceChannel")
             if s is not None]
    if not steps:
        return made
    by_state = {(s.h, s.c, s.weights): s for s in steps}
    following = {}
    for s in steps:
        prev = by_state.get((s.h_prev, s.c_prev, s.weights))
        if prev is not None and _c_read_only_by(graph, prev, s, heads):
            following[id(prev)] = s
    followed = {id(s) for s in following.values()}
    moved = {}                # entry of a replaced chain -> the entry that now holds it
    for first in steps:       # in node order: a layer's steps before the next layer's
        if id(first) in followed:
            continue
        chain = [first]
        while id(chain[-1]) in following:
            chain.append(following[id(chain[-1])])
        if _replace_chain(graph, chain, with_workspace, moved):
            made += 1
    return made


def _single_reader(graph, n, index=0):
    readers = graph.consumers(n, index)
    return readers[0][0] if len(readers) == 1 else None


def _op(graph, n):
    return graph.node(n)["op"]


def _is_act(graph, n, act):
    d = graph.node(n)
    return d["op"] == "Activation" and d["attrs"].get("act_type") == act


def _other_input(graph, n, entry):
    """The input of binary node ``n`` that is not ``entry`` (None if ``entry`` is not
    one of exactly two inputs)."""
    ins = graph.inputs(n)
    if len(ins) != 2 or entry not in ins:
        return None
    return ins[1] if ins[0] == entry else ins[0]


def _match_step(graph: Graph, s, heads):
    """The LSTMCell step whose gate split is SliceChannel node ``s``, or None."""
    d = graph.node(s)
    attrs = d["attrs"]
    shapes = d["shapes"]
    if d["phase"] != "fwd" or attrs.get("num_outputs") != 4 or attrs.get("squeeze_axis") or \
            not shapes or len(shapes[0]) != 2 or attrs.get("axis") not in (1, -1):
        return None
    (gates,) = graph.inputs(s)
    n, hidden = shapes[0]
    if gates[1] != 0 or _op(graph, gates[0]) not in _ADD or \
            _single_reader(graph, gates[0]) != s or gates in heads:
        return None
    fcs = graph.inputs(gates[0])
    if len(fcs) != 2:
        return None
    proj = []
    for fc, idx in fcs:
        fd = graph.node(fc)
        if fd["op"] != "FullyConnected" or idx != 0 or fd["attrs"].get("no_bias") or \
                _single_reader(graph, fc) != gates[0] or (fc, 0) in heads or \
                tuple(fd["shapes"][0]) != (n, 4 * hidden):
            return None
        ins = graph.inputs(fc)
        if len(ins) != 3 or len(graph.shape(ins[0]) or ()) != 2:
            return None
        proj.append(ins)
    (x, wi, bi), (h_prev, wh, bh) = proj
    if tuple(graph.shape(wh)) != (4 * hidden, hidden) or \
            tuple(graph.shape(h_prev)) != (n, hidden):
        return None
    acts = []
    for k, act in enumerate(_GATE_ACTS):
        a = _single_reader(graph, s, k)
        if a is None or not _is_act(graph, a, act) or (s, k) in heads:
            return None
        acts.append(a)
    i_act, f_act, g_act, o_act = acts
    mul_ig, f_mul, h_mul = (_single_reader(graph, a) for a in (i_act, f_act, o_act))
    if mul_ig is None or _single_reader(graph, g_act) != mul_ig or \
            _op(graph, mul_ig) not in _MUL or _other_input(graph, mul_ig, (i_act, 0)) != (g_act, 0):
        return None
    if f_mul is None or _op(graph, f_mul) not in _MUL:
        return None
    c_prev = _other_input(graph, f_mul, (f_act, 0))
    if c_prev is None or tuple(graph.shape(c_prev) or ()) != (n, hidden):
        return None
    c_node = _single_reader(graph, f_mul)
    if c_node is None or _single_reader(graph, mul_ig) != c_node or \
            _op(graph, c_node) not in _ADD or \
            _other_input(graph, c_node, (f_mul, 0)) != (mul_ig, 0):
        return None
    if h_mul is None or _op(graph, h_mul) not in _MUL:
        return None
    tanh_c = _other_input(graph, h_mul, (o_act, 0))
    if tanh_c is None or tanh_c[1] != 0 or not _is_act(graph, tanh_c[0], "tanh") or \
            graph.inputs(tanh_c[0]) != [(c_node, 0)] or \
            _single_reader(graph, tanh_c[0]) != h_mul:
        return None
    inner = {gates[0], fcs[0][0], fcs[1][0], s, *acts, mul_ig, f_mul, tanh_c[0]}
    if any((v, 0) in heads for v in inner):
        return None
    nodes = frozenset(inner | {c_node, h_mul})
    for v in nodes:
        vd = graph.node(v)
        if vd["phase"] != "fwd" or any(t != "float32" for t in vd["dtypes"] or ("?",)):
            return None
    for e in (x, wi, bi, h_prev, wh, bh, c_prev):
        if graph.dtype(e) != "float32":
            return None
    return _Step(x=tuple(x), h_prev=tuple(h_prev), c_prev=tuple(c_prev),
                 weights=(tuple(wi), tuple(wh), tuple(bi), tuple(bh)),
                 h=(h_mul, 0), c=(c_node, 0), tanh_c=tanh_c[0], f_mul=f_mul, nodes=nodes)


def _c_read_only_by(graph, prev: _Step, nxt: _Step, heads) -> bool:
    """``prev``'s cell state feeds ``nxt`` and nothing outside the two steps."""
    readers = {v for v, _ in graph.consumers(prev.c[0], 0)}
    return readers == {prev.tanh_c, nxt.f_mul} and prev.c not in heads


def _workspace(steps, batch, inputs, hidden, with_workspace):
    """The layer's workspace bytes (0 without gradients), or None where oneDNN refuses
    these sizes: the steps then keep their own kernels."""
    if not with_workspace:
        return 0
    try:
        return workspace_bytes(steps, batch, inputs, hidden)
    except RuntimeError:
        return None


def _replace_chain(graph: Graph, chain: list, with_workspace: bool, moved: dict) -> bool:
    """Replace ``chain`` by one layer; ``moved`` maps the ``h`` / ``c`` entries of
    chains replaced before to their new entries (a stacked layer reads the one below)
    and gets this chain's."""
    first, last = chain[0], chain[-1]
    steps_nodes = set().union(*(s.nodes for s in chain))
    for s in chain:
        s.x = moved.get(s.x, s.x)
    first.h_prev = moved.get(first.h_prev, first.h_prev)
    first.c_prev = moved.get(first.c_prev, first.c_prev)
    first.weights = tuple(moved.get(e, e) for e in first.weights)
    feeds = [s.x for s in chain] + [first.h_prev, first.c_prev] + list(first.weights)
    if graph.ancestors({e[0] for e in feeds}) & steps_nodes:
        return False              # an input computed from the chain's own steps
    n, hidden = graph.shape(first.h_prev)
    size = _workspace(len(chain), n, graph.shape(first.x)[1], hidden, with_workspace)
    if size is None:
        return False
    b = Builder(graph, "fwd", "lstm_layer")
    seq = _unsplit(graph, [s.x for s in chain])
    seq = b.ref(seq) if seq is not None else \
        b.op("stack", *[b.ref(s.x) for s in chain], axis=0, num_args=len(chain))
    wi, wh, bi, bh = (b.ref(e) for e in first.weights)
    outs = b.op("_lstm_layer", seq, wi, wh, bi, bh, b.ref(first.h_prev), b.ref(first.c_prev),
                workspace=size)
    heads = {tuple(h) for h in graph.heads}
    read = [t for t, s in enumerate(chain)
            if s.h in heads or any(v not in steps_nodes for v, _ in graph.consumers(*s.h))]
    if read:
        # one split of the output along time: its gradient joins the steps' gradients
        # in one kernel (a slice per step would add T padded gradients)
        hs = b.op("SliceChannel", outs[0], num_outputs=len(chain), axis=0, squeeze_axis=True)
        hs = hs if isinstance(hs, list) else [hs]
        for t in read:
            graph.replace_entry(chain[t].h, hs[t].entry)
            moved[chain[t].h] = hs[t].entry
    graph.replace_entry(last.c, outs[2].entry)
    moved[last.c] = outs[2].entry
    graph.g.remove_nodes_from(steps_nodes)
    return True


def _unsplit(graph: Graph, xs: list):
    """The entry the steps' inputs ``xs`` are the time steps of, in order, when they are
    the outputs of one split of it along axis 0 (a stacked layer reading the layer
    below): stacking them again would copy it."""
    node = xs[0][0]
    d = graph.node(node)
    a = d["attrs"]
    if d["op"] != "SliceChannel" or xs != [(node, t) for t in range(len(xs))] or \
            a.get("axis") != 0 or not a.get("squeeze_axis") or \
            a.get("num_outputs") != len(xs):
        return None
    return graph.inputs(node)[0]


def _replace_rnn(graph: Graph, n, with_workspace: bool) -> int:
    """Replace fused ``RNN`` node ``n`` (LSTM mode, nothing the layer call lacks) by one
    layer node per layer and direction; return the layers made (0: left as it is)."""
    d = graph.node(n)
    a = d["attrs"]
    ins = graph.inputs(n)
    if a["mode"] != "lstm" or a["p"] > 0 or a["use_sequence_length"] or \
            a["projection_size"] is not None or a["lstm_state_clip_min"] is not None or \
            a["lstm_state_clip_max"] is not None or len(ins) != 4 or \
            any(graph.dtype(e) != "float32" for e in ins):
        return 0
    steps, n_batch, n_in = graph.shape(ins[0])
    hidden, layers = a["state_size"], a["num_layers"]
    dirs = 2 if a["bidirectional"] else 1
    sizes = [_workspace(steps, n_batch, n_in if layer == 0 else dirs * hidden, hidden,
                        with_workspace) for layer in range(layers)]
    if None in sizes:
        return 0
    b = Builder(graph, d["phase"], "lstm_layer")
    x, params, state, cell = (b.ref(e) for e in ins)

    def rows(ref, begin, end, shape):
        return b.op("Reshape", b.op("slice_axis", ref, axis=0, begin=begin, end=end),
                    shape=shape)

    pieces = param_layout(a, n_in)[0]
    weights = {(kind, layer, di): rows(params, off, off + prod(shape), shape)
               for kind, layer, di, off, shape in pieces}
    hy, cy = [], []
    for layer in range(layers):
        outs = []
        for di in range(dirs):
            k = layer * dirs + di
            seq = x if di == 0 else b.op("reverse", x, axis=0)
            got = b.op("_lstm_layer", seq, weights[("wx", layer, di)],
                       weights[("wh", layer, di)], weights[("bx", layer, di)],
                       weights[("bh", layer, di)], rows(state, k, k + 1, (n_batch, hidden)),
                       rows(cell, k, k + 1, (n_batch, hidden)), workspace=sizes[layer])
            outs.append(got[0] if di == 0 else b.op("reverse", got[0], axis=0))
            hy.append(got[1])
            cy.append(got[2])
        x = outs[0] if dirs == 1 else b.op("Concat", *outs, dim=2, num_args=dirs)
    heads = {tuple(h) for h in graph.heads}
    graph.replace_entry((n, 0), x.entry)
    for i, states in ((1, hy), (2, cy)):
        if (n, i) in heads or graph.consumers(n, i):
            graph.replace_entry((n, i), b.op("stack", *states, axis=0,
                                             num_args=len(states)).entry)
    graph.g.remove_nodes_from([n])
    return layers * dirs

