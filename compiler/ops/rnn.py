"""The fused recurrent layer ``RNN`` (mxnet's cuDNN-style op): LSTM, GRU and
Elman RNNs with tanh / relu, several layers, optionally bidirectional.

Parameters come packed in one vector, in mxnet's order: for every layer and
direction the input-to-hidden weights ``(G*H, in)`` then the
hidden-to-hidden weights ``(G*H, H)``; after all weights, for every layer and
direction the i2h bias ``(G*H,)`` then the h2h bias ``(G*H,)``. Gates are
stacked in the order ``i, f, c, o`` (LSTM) and ``r, z, n`` (GRU), which is
also torch's order.

The op is rewritten (``Decompose``) into one input projection per layer and
direction (a single ``dot`` over all time steps), then per time step a
``dot`` with the recurrent weights and the gate pointwise ops; outputs are
stacked along time with ``Concat``. Its gradient is built the same way:
the decomposition is rebuilt with the builder and differentiated with the
per-op gradient rules (the rebuilt forward is identical to the decomposed
one, so the ``simplify`` pass merges the two). Dropout between layers
(``p`` in training) keeps its masks as hidden outputs so forward and
gradient use the same ones. On the ``cpu`` target an LSTM without dropout, clipping,
sequence lengths or projection never gets here: ``passes/fuse_lstm_layers.py`` makes it
one oneDNN layer call per layer and direction first.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .chain_rule import differentiate_node, sum_refs
from .registry import (Attr, Decompose, OpDef, ShapeError, choice, merge_shape, parse_bool,
                       parse_count, parse_float, parse_int, parse_optional_float,
                       parse_optional_int, register)

MODES = ("rnn_relu", "rnn_tanh", "lstm", "gru")
_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _dims(attrs):
    """``(H, L, D, G)``: state size, layers, directions, gates."""
    return (attrs["state_size"], attrs["num_layers"], 2 if attrs["bidirectional"] else 1,
            _GATES[attrs["mode"]])


def _check_supported(attrs):
    if attrs["projection_size"] is not None:
        raise MXNetError("RNN: projection_size (LSTMP) is not supported by this project; "
                         "leave projection_size unset")
    if attrs["use_sequence_length"]:
        raise MXNetError("RNN: use_sequence_length=True is not supported by this project")
    if attrs["num_layers"] < 1 or attrs["state_size"] < 1:
        raise MXNetError("RNN: num_layers and state_size must be positive")


def param_layout(attrs, input_size):
    """The packed parameter vector's pieces: ``[(kind, layer, dir, offset, shape)]``
    with kind ``wx`` / ``wh`` / ``bx`` / ``bh``, and the total size."""
    h, L, D, G = _dims(attrs)
    pieces, p = [], 0
    for layer in range(L):
        n_in = input_size if layer == 0 else D * h
        for d in range(D):
            pieces.append(("wx", layer, d, p, (G * h, n_in)))
            p += G * h * n_in
            pieces.append(("wh", layer, d, p, (G * h, h)))
            p += G * h * h
    for layer in range(L):
        for d in range(D):
            pieces.append(("bx", layer, d, p, (G * h,)))
            p += G * h
            pieces.append(("bh", layer, d, p, (G * h,)))
            p += G * h
    return pieces, p


def param_size(input_size, state_size, num_layers=1, mode="lstm", bidirectional=False):
    """Size of the packed parameter vector (as mxnet infers it)."""
    attrs = {"state_size": state_size, "num_layers": num_layers, "mode": mode,
             "bidirectional": bidirectional}
    return param_layout(attrs, input_size)[1]


def unpack_params(params, input_size, state_size, num_layers=1, mode="lstm",
                  bidirectional=False):
    """``{(kind, layer, dir): tensor}`` views of a packed parameter vector."""
    attrs = {"state_size": state_size, "num_layers": num_layers, "mode": mode,
             "bidirectional": bidirectional}
    pieces, total = param_layout(attrs, input_size)
    if params.numel() != total:
        raise ValueError(f"parameter vector has {params.numel()} elements, expected {total}")
    flat = params.reshape(-1)
    return {(k, layer, d): flat[off:off + _numel(shape)].reshape(shape)
            for k, layer, d, off, shape in pieces}


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _num_states(attrs):
    return 2 if attrs["mode"] == "lstm" else 1


def _num_masks(attrs):
    return attrs["num_layers"] - 1 if attrs["p"] > 0 else 0


def _arguments(attrs):
    args = ["data", "parameters", "state"]
    if attrs["mode"] == "lstm":
        args.append("state_cell")
    if attrs["use_sequence_length"]:
        args.append("sequence_length")
    return args


def _outputs(attrs):
    outs = ["output", "state_output"]
    if attrs["mode"] == "lstm":
        outs.append("statecell_output")
    return outs + [f"dropout_mask{i}" for i in range(_num_masks(attrs))]


def _num_visible(attrs):
    return 1 + _num_states(attrs) if attrs["state_outputs"] else 1


# -- shapes -------------------------------------------------------------------------------

def _rnn_shape(attrs, in_shapes):
    _check_supported(attrs)
    h, L, D, G = _dims(attrs)
    ns = _num_states(attrs)
    dshape = in_shapes[0]
    nmask = _num_masks(attrs)
    if dshape is None:
        return in_shapes, [None] * (1 + ns + nmask)
    if len(dshape) != 3:
        raise ShapeError(f"RNN: data must be 3-D (sequence length, batch, input size) "
                         f"in TNC layout, got shape {tuple(dshape)}")
    t, n, i = dshape
    total = param_layout(attrs, i)[1]
    shapes = [tuple(dshape), merge_shape(in_shapes[1], (total,), "RNN parameters")]
    for k in range(ns):
        shapes.append(merge_shape(in_shapes[2 + k], (L * D, n, h),
                                  "RNN state" if k == 0 else "RNN state_cell"))
    out = (t, n, D * h)
    return shapes, [out] + [(L * D, n, h)] * ns + [out] * nmask


# -- torch reference ------------------------------------------------------------------------

def _cell_torch(mode, xg, hg, h, c, clip):
    H = h.shape[-1]
    if mode == "lstm":
        g = xg + hg
        i, f, gg, o = (g[:, k * H:(k + 1) * H] for k in range(4))
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
        if clip is not None:
            c = torch.clamp(c, clip[0], clip[1])
        return torch.sigmoid(o) * torch.tanh(c), c
    if mode == "gru":
        r = torch.sigmoid(xg[:, :H] + hg[:, :H])
        z = torch.sigmoid(xg[:, H:2 * H] + hg[:, H:2 * H])
        nn_ = torch.tanh(xg[:, 2 * H:] + r * hg[:, 2 * H:])
        return (1 - z) * nn_ + z * h, c
    act = torch.relu if mode == "rnn_relu" else torch.tanh
    return act(xg + hg), c


def _clip_range(attrs):
    lo, hi = attrs["lstm_state_clip_min"], attrs["lstm_state_clip_max"]
    if attrs["mode"] != "lstm" or (lo is None and hi is None):
        return None
    return (float("-inf") if lo is None else lo, float("inf") if hi is None else hi)


def _rnn_ref(attrs, ins, is_train):
    _check_supported(attrs)
    h_size, L, D, G = _dims(attrs)
    mode = attrs["mode"]
    x, params, h0 = ins[0], ins[1], ins[2]
    c0 = ins[3] if mode == "lstm" else None
    t_len, n, i_size = x.shape
    w = unpack_params(params, i_size, h_size, L, mode, attrs["bidirectional"])
    clip = _clip_range(attrs)
    hy, cy, masks = [], [], []
    for layer in range(L):
        outs = []
        for d in range(D):
            k = layer * D + d
            h = h0[k]
            c = c0[k] if c0 is not None else None
            xg_all = x.reshape(t_len * n, -1) @ w[("wx", layer, d)].t() + w[("bx", layer, d)]
            xg_all = xg_all.reshape(t_len, n, -1)
            steps = [None] * t_len
            for t in (range(t_len) if d == 0 else reversed(range(t_len))):
                hg = h @ w[("wh", layer, d)].t() + w[("bh", layer, d)]
                h, c = _cell_torch(mode, xg_all[t], hg, h, c, clip)
                steps[t] = h
            outs.append(torch.stack(steps, 0))
            hy.append(h)
            cy.append(c)
        x = torch.cat(outs, dim=2) if D > 1 else outs[0]
        if layer < L - 1 and attrs["p"] > 0:
            if is_train:
                keep = (torch.rand(x.shape, device=x.device) >= attrs["p"]).to(x.dtype)
                mask = keep * (0.0 if attrs["p"] >= 1 else 1.0 / (1.0 - attrs["p"]))
            else:
                mask = torch.ones_like(x)
            x = x * mask
            masks.append(mask)
    res = [x, torch.stack(hy, 0)]
    if mode == "lstm":
        res.append(torch.stack(cy, 0))
    return res + masks


# -- decomposition ---------------------------------------------------------------------------

def _split(b, x, num, axis):
    """``num`` squeezed slices of ``x`` along ``axis`` (a list even for one)."""
    if num == 1:
        shape = tuple(s for k, s in enumerate(x.shape) if k != axis)
        return [b.op("Reshape", x, shape=shape)]
    return list(b.op("SliceChannel", x, num_outputs=num, axis=axis, squeeze_axis=True))


def _stack(b, refs, axis=0):
    parts = [b.op("expand_dims", r, axis=axis) for r in refs]
    if len(parts) == 1:
        return parts[0]
    return b.op("Concat", *parts, num_args=len(parts), dim=axis)


def _cell_graph(b, mode, xg, hg, h, c, h_size, clip):
    if mode == "lstm":
        g = b.op("elemwise_add", xg, hg)
        i, f, gg, o = b.op("SliceChannel", g, num_outputs=4, axis=1)
        c = b.op("elemwise_add", b.op("elemwise_mul", b.op("sigmoid", f), c),
                 b.op("elemwise_mul", b.op("sigmoid", i), b.op("tanh", gg)))
        if clip is not None:
            c = b.op("clip", c, a_min=clip[0], a_max=clip[1])
        return b.op("elemwise_mul", b.op("sigmoid", o), b.op("tanh", c)), c
    if mode == "gru":
        xr, xz, xn = b.op("SliceChannel", xg, num_outputs=3, axis=1)
        hr, hz, hn = b.op("SliceChannel", hg, num_outputs=3, axis=1)
        r = b.op("sigmoid", b.op("elemwise_add", xr, hr))
        z = b.op("sigmoid", b.op("elemwise_add", xz, hz))
        nn_ = b.op("tanh", b.op("elemwise_add", xn, b.op("elemwise_mul", r, hn)))
        one_minus_z = b.op("_rminus_scalar", z, scalar=1.0)
        return b.op("elemwise_add", b.op("elemwise_mul", one_minus_z, nn_),
                    b.op("elemwise_mul", z, h)), c
    act = "relu" if mode == "rnn_relu" else "tanh"
    return b.op(act, b.op("elemwise_add", xg, hg)), c


def _build_graph(b, attrs, inputs, in_shapes, is_train, masks=None):
    """Build the unrolled layer. Returns ``(outputs, new_masks, param_slices)``:
    ``outputs`` = [out, hy(, cy)], ``param_slices`` = [(slice ref, size)] in
    packing order (they tile the parameter vector)."""
    _check_supported(attrs)
    h_size, L, D, G = _dims(attrs)
    mode = attrs["mode"]
    t_len, n, i_size = in_shapes[0]
    x, params, h0 = inputs[0], inputs[1], inputs[2]
    pieces, _ = param_layout(attrs, i_size)
    w, slices = {}, []
    for kind, layer, d, off, shape in pieces:
        size = _numel(shape)
        s = b.op("slice_axis", params, axis=0, begin=off, end=off + size)
        slices.append((s, size))
        w[(kind, layer, d)] = s if len(shape) == 1 else b.op("Reshape", s, shape=shape)
    h0s = _split(b, h0, L * D, 0)
    c0s = _split(b, inputs[3], L * D, 0) if mode == "lstm" else [None] * (L * D)
    clip = _clip_range(attrs)
    hy, cy, new_masks = [], [], []
    for layer in range(L):
        n_in = i_size if layer == 0 else D * h_size
        x2 = b.op("Reshape", x, shape=(t_len * n, n_in))
        outs = []
        for d in range(D):
            k = layer * D + d
            xg = b.op("dot", x2, w[("wx", layer, d)], transpose_b=True)
            xg = b.op("broadcast_add", xg, w[("bx", layer, d)])
            xg = b.op("Reshape", xg, shape=(t_len, n, G * h_size))
            xsteps = _split(b, xg, t_len, 0)
            h, c = h0s[k], c0s[k]
            steps = [None] * t_len
            for t in (range(t_len) if d == 0 else reversed(range(t_len))):
                hg = b.op("dot", h, w[("wh", layer, d)], transpose_b=True)
                hg = b.op("broadcast_add", hg, w[("bh", layer, d)])
                h, c = _cell_graph(b, mode, xsteps[t], hg, h, c, h_size, clip)
                steps[t] = h
            outs.append(_stack(b, steps, 0))
            hy.append(h)
            cy.append(c)
        x = outs[0] if D == 1 else b.op("Concat", *outs, num_args=D, dim=2)
        if layer < L - 1 and attrs["p"] > 0:
            if masks is not None:
                mask = masks[layer]
            elif is_train and attrs["p"] >= 1.0:
                # mxnet's RNN sets a dropped element to 0 (Dropout's p = 1 is NaN)
                mask = b.op("zeros_like", x)
            elif is_train:
                mask = b.op("Dropout", x, p=attrs["p"])[1]
            else:
                mask = b.op("ones_like", x)
            new_masks.append(mask)
            x = b.op("elemwise_mul", x, mask)
    outputs = [x, _stack(b, hy, 0)]
    if mode == "lstm":
        outputs.append(_stack(b, cy, 0))
    return outputs, new_masks, slices


def _rnn_build(b, n, is_train):
    outs, masks, _ = _build_graph(b, n.attrs, n.inputs, n.in_shapes, is_train)
    return outs + masks


def _rnn_gradient(b, n):
    """Rebuild the decomposition and differentiate it with the per-op rules."""
    graph = b.graph
    before = set(graph.g.nodes)
    ns = _num_states(n.attrs)
    masks = list(n.outputs[1 + ns:]) or None
    phase = b.phase
    b.phase = "fwd"   # the same ops as the forward decomposition: simplify merges them
    try:
        outs, _, slices = _build_graph(b, n.attrs, n.inputs, n.in_shapes, True, masks)
    finally:
        b.phase = phase
    built = sorted(set(graph.g.nodes) - before)
    contributions = {}
    for ref, og in zip(outs, n.ograds[:1 + ns]):
        contributions.setdefault(tuple(ref.entry), []).append(og)
    skip = {s.node for s, _ in slices}
    for node in reversed(built):
        if node in skip:
            continue
        differentiate_node(graph, b, node, contributions)
    grads, seen = [], set()
    for k, ref in enumerate(n.inputs):
        e = tuple(ref.entry)
        if k == 1:
            parts = []
            for s, size in slices:
                g = sum_refs(b, contributions.get(tuple(s.entry), []))
                parts.append(b.op("_zeros", shape=(size,)) if g is None else g)
            g = b.op("Concat", *parts, num_args=len(parts), dim=0)
            if e in seen:   # the same value fed twice: its contributions are summed
                g = None
        else:
            g = None if e in seen else sum_refs(b, contributions.get(e, []))
            if g is None and e not in seen:
                g = b.zeros_like(ref)
        seen.add(e)
        grads.append(g)
    return grads


register(OpDef(
    name="RNN", pattern="composite", lowering=Decompose(_rnn_build),
    arguments=_arguments, outputs=_outputs, num_visible=_num_visible, mode_dependent=True,
    attrs=[Attr("state_size", parse_int), Attr("num_layers", parse_count),
           Attr("mode", choice(*MODES)), Attr("bidirectional", parse_bool, False),
           Attr("p", parse_float, 0.0), Attr("state_outputs", parse_bool, False),
           Attr("projection_size", parse_optional_int, None),
           Attr("lstm_state_clip_min", parse_optional_float, None),
           Attr("lstm_state_clip_max", parse_optional_float, None),
           Attr("lstm_state_clip_nan", parse_bool, False),
           Attr("use_sequence_length", parse_bool, False)],
    infer_shape=_rnn_shape, reference=_rnn_ref, gradient=_rnn_gradient,
    doc="Fused multi-layer (bidirectional) LSTM / GRU / tanh-RNN / relu-RNN over TNC data "
        "with mxnet's packed parameter vector; outputs (out, hy[, cy]) with state_outputs."))
