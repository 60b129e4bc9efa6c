"""Neural-network layers: FullyConnected, Embedding, Dropout and BatchNorm,
with the internal ops they lower to (``_embedding_backward``, ``_philox_uniform``;
``_random_uniform`` is mxnet's sampler, ``compiler/ops/random.py``).

FullyConnected, Dropout and BatchNorm are rewritten into dot / reductions /
pointwise ops (``Decompose``); their gradients are written on the layer
itself so the backward graph stays as small as mxnet's.
"""
from __future__ import annotations

import math

import torch

from ..ir.dtypes import LOW_PRECISION
from ..ir.expr import ops
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, Special, choice,
                       merge_shape, normalize_axis, parse_bool, parse_float, parse_int,
                       parse_dtype, parse_optional_float, parse_shape, prod,
                       register)


def _reshape(b, ref, shape):
    shape = tuple(shape)
    return ref if tuple(ref.shape) == shape else b.op("Reshape", ref, shape=shape)


# -- FullyConnected ---------------------------------------------------------------

def _fc_dims(attrs, dshape):
    """``(rows, K, out_shape)``: the 2-D view ``(rows, K)`` of the data."""
    h = attrs["num_hidden"]
    if attrs["flatten"]:
        k = prod(dshape[1:])
        return dshape[0], k, (dshape[0], h)
    return prod(dshape[:-1]), dshape[-1], tuple(dshape[:-1]) + (h,)


def _fc_shape(attrs, in_shapes):
    dshape = in_shapes[0]
    h = attrs["num_hidden"]
    if dshape is None:
        return in_shapes, [None]
    if len(dshape) == 0:
        raise ShapeError("FullyConnected: data must have at least one dimension")
    _, k, out = _fc_dims(attrs, dshape)
    shapes = [dshape, merge_shape(in_shapes[1], (h, k), "FullyConnected weight")]
    if not attrs["no_bias"]:
        # mxnet takes a (num_hidden, 1) bias too
        bias = in_shapes[2]
        shapes.append(tuple(bias) if bias is not None and tuple(bias) == (h, 1) else
                      merge_shape(bias, (h,), "FullyConnected bias"))
    return shapes, [out]


def _fc_ref(attrs, ins, is_train):
    x, w = ins[0], ins[1]
    rows, k, out = _fc_dims(attrs, tuple(x.shape))
    y = x.reshape(rows, k) @ w.t()
    if not attrs["no_bias"]:
        y = y + ins[2].reshape(-1)
    return [y.reshape(out)]


def _fc_build(b, n, is_train):
    x, w = n.inputs[0], n.inputs[1]
    dshape = n.in_shapes[0]
    if _needs_flatten(n.attrs, dshape):
        x = (b.op("Flatten", x) if len(dshape) > 2
             else _reshape(b, x, (dshape[0], prod(dshape[1:]))))
    y = b.op("dot", x, w, transpose_b=True)
    if not n.attrs["no_bias"]:
        y = b.op("broadcast_add", y, _reshape(b, n.inputs[2], (n.attrs["num_hidden"],)))
    return [y]


def _needs_flatten(attrs, dshape):
    return attrs["flatten"] and len(dshape) != 2


def _fc_gradient(b, n):
    """dx = dy . W, dW = dy2^T . x2, db = sum of dy over all but the last axis."""
    x, w = n.inputs[0], n.inputs[1]
    dy = n.ograds[0]
    dshape = n.in_shapes[0]
    rows, k, _ = _fc_dims(n.attrs, dshape)
    h = n.attrs["num_hidden"]
    dy2 = _reshape(b, dy, (rows, h))
    dx = _reshape(b, b.op("dot", dy2 if n.attrs["flatten"] else dy, w), dshape)
    dw = b.op("dot", dy2, _reshape(b, x, (rows, k)), transpose_a=True)
    grads = [dx, dw]
    if not n.attrs["no_bias"]:
        grads.append(_reshape(b, b.op("_sum_to_shape", dy2, shape=(h,)),
                              tuple(n.in_shapes[2])))
    return grads


def _fc_dim_links(attrs, in_ranks, out_ranks):
    """The batch dims: data's first (flatten) or all but its last, and the output's."""
    data, out = in_ranks[0], out_ranks[0]
    if data is None or out is None:
        return []
    lead = 1 if attrs["flatten"] else min(data, out) - 1
    return [[("in", 0, k), ("out", 0, k)] for k in range(lead)]


register(OpDef(
    name="FullyConnected", pattern="composite", lowering=Decompose(_fc_build),
    rows_independent=True,
    dim_links=_fc_dim_links,
    arguments=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    attrs=[Attr("num_hidden", parse_int), Attr("no_bias", parse_bool, False),
           Attr("flatten", parse_bool, True)],
    infer_shape=_fc_shape, reference=_fc_ref, gradient=_fc_gradient,
    doc="y = x2 . W^T + b with x2 the (batch, K) view of x (flatten) or its last axis."))


# -- Embedding ----------------------------------------------------------------------

def _emb_shape(attrs, in_shapes):
    dshape, wshape = in_shapes
    wshape = merge_shape(wshape, (attrs["input_dim"], attrs["output_dim"]), "Embedding weight")
    out = None if dshape is None else tuple(dshape) + (attrs["output_dim"],)
    if attrs["input_dim"] < 1 and out is not None and prod(out):
        # no row to look up (a zero-size table, NumPy shape semantics)
        raise ShapeError(f"Embedding: input_dim={attrs['input_dim']} leaves no row to look up "
                         f"for data of shape {tuple(dshape)}")
    return [dshape, wshape], [out]


def _emb_type(attrs, in_types):
    dtype = attrs["dtype"]
    return [in_types[0] or dtype, dtype], [dtype]


def _emb_ref(attrs, ins, is_train):
    data, w = ins
    idx = data.detach().long().clamp(0, attrs["input_dim"] - 1)
    return [w[idx]]


def _emb_gradient(b, n):
    return [b.zeros_like(n.inputs[0]),
            b.op("_embedding_backward", n.ograds[0], n.inputs[0],
                 input_dim=n.attrs["input_dim"], output_dim=n.attrs["output_dim"])]


register(OpDef(
    name="Embedding", pattern="injective", lowering=Special("gather"), rows_independent=True,
    arguments=("data", "weight"),
    attrs=[Attr("input_dim", parse_int), Attr("output_dim", parse_int),
           Attr("dtype", parse_dtype, "float32"), Attr("sparse_grad", parse_bool, False)],
    infer_shape=_emb_shape, infer_type=_emb_type, reference=_emb_ref, gradient=_emb_gradient,
    doc="out[i..., :] = weight[clip(int(data[i...]), 0, input_dim - 1), :]."))


def _emb_bwd_shape(attrs, in_shapes):
    return in_shapes, [(attrs["input_dim"], attrs["output_dim"])]


def _emb_bwd_ref(attrs, ins, is_train):
    dy, data = ins
    d = attrs["output_dim"]
    idx = data.detach().long().clamp(0, attrs["input_dim"] - 1).reshape(-1)
    out = torch.zeros(attrs["input_dim"], d, dtype=dy.dtype, device=dy.device)
    return [out.index_add_(0, idx, dy.reshape(-1, d))]


register(OpDef(
    name="_embedding_backward", pattern="opaque", lowering=Special("scatter_add"),
    arguments=("ograd", "data"),
    attrs=[Attr("input_dim", parse_int), Attr("output_dim", parse_int)],
    infer_shape=_emb_bwd_shape, reference=_emb_bwd_ref,
    infer_type=lambda attrs, in_types: (in_types, [in_types[0]]),
    doc="out = zeros(input_dim, output_dim); out[int(data[i]), :] += ograd[i, :] "
        "(indices clipped; repeated indices accumulate)."))


# -- random source and Dropout --------------------------------------------------------
#
# Random numbers are drawn inside the kernels that use them: ``_random_uniform`` (what
# Dropout and LeakyReLU's rrelu ask for; mxnet's sampler, registered with the other
# samplers in compiler/ops/random.py) expands into ``_philox_uniform``, an ordinary
# fusable pointwise op whose value at linear index i of its shape is Triton's
# ``tl.rand(seed, i)`` (Philox 4x32). The seed is the graph's one seed variable, a
# one-element buffer the runtime sets from ``mx.random``'s generator before each forward
# that draws (runtime/random.py), plus the source's stream number in the key's high word.
# The cpu target computes the same numbers bit for bit (compiler/ir/philox.py).

SEED_VARIABLE = "__random_seed__"


def seed_entry(graph):
    """The graph's seed variable (made on first use): one float32 element whose
    bits are the step's 32-bit seed; ``plan_memory`` gives it a buffer of its own."""
    n = graph.meta.get("random_seed_node")
    if n is None or n not in graph.g:
        n = graph.add_node("null", SEED_VARIABLE, role="random")
        graph.node(n)["shapes"] = [(1,)]
        graph.node(n)["dtypes"] = ["float32"]
        graph.meta["random_seed_node"] = n
    return (n, 0)


def _parse_stream(v) -> int:
    """A stream number: the high word of a 64-bit Philox key."""
    n = parse_int(v)
    if not 0 <= n < 2 ** 32:
        raise ValueError(f"stream {n} is outside [0, 2**32)")
    return n


def _philox_expr(attrs, seed, *, coords):
    """``tl.rand`` of the seed buffer's 32 bits with the stream in the key's high word,
    at the linear index of each element in ``shape`` (int64 past 2**31 elements).

    ``coords`` (given by ``ir/tile_program`` to every ``needs_random`` op) holds, per dim
    of ``shape``, the coordinate of the domain position it runs along, or None where
    it does not vary.
    """
    shape = attrs["shape"]
    offsets = [(c, prod(shape[j + 1:])) for j, c in enumerate(coords) if c is not None]
    return ops.philox_uniform(seed, offsets, attrs["stream"], prod(shape) > 2 ** 31)


def _philox_ref(attrs, ins, is_train):
    from ..ir.philox import stream_uniform
    shape = tuple(attrs["shape"])
    offset = torch.arange(prod(shape), dtype=torch.int64).reshape(shape)
    return [stream_uniform(ins[0], attrs["stream"], offset).to(ins[0].device)]


register(OpDef(
    name="_philox_uniform", pattern="broadcast",
    lowering=Pointwise(_philox_expr),
    arguments=("seed",), attrs=[Attr("shape", parse_shape), Attr("stream", _parse_stream)],
    needs_random=True,
    infer_shape=lambda attrs, in_shapes: ([merge_shape(in_shapes[0], (1,), "_philox_uniform "
                                                       "seed")], [tuple(attrs["shape"])]),
    infer_type=lambda attrs, in_types: (["float32"], ["float32"]),
    reference=_philox_ref,
    doc="out[i] = tl.rand(bits(seed) + (stream << 32), i) at linear index i of `shape`: "
        "U[0, 1) from Triton's Philox, the same bits on every target."))


def _types_for(n_out):
    """Every input and all ``n_out`` outputs take the first known input dtype."""
    def infer_type(attrs, in_types):
        known = [t for t in in_types if t is not None]
        t = known[0] if known else None
        return [t if x is None else x for x in in_types], [t] * n_out
    return infer_type


def _bn_types(attrs, in_types):
    """mxnet's BatchNormType: gamma, beta and the moving statistics are in the data's
    accumulation type (float32 for float16/bfloat16 data), as are the mean/var outputs."""
    data = in_types[0]
    param = None if data is None else "float32" if data in LOW_PRECISION else data
    return [data] + [param] * (len(in_types) - 1), [data, param, param]


def _drop_active(attrs, is_train):
    return (is_train or attrs["mode"] == "always") and attrs["p"] > 0


def _drop_mask_shape(attrs, shape):
    axes = {normalize_axis(a, len(shape), "Dropout") for a in attrs["axes"]}
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _drop_scale(p):
    # p = 1: 1 / 0 = inf, and the dropped elements 0 * inf = NaN, as in mxnet
    return math.inf if p >= 1.0 else 1.0 / (1.0 - p)


def _drop_shape(attrs, in_shapes):
    s = in_shapes[0]
    if s is not None:
        _drop_mask_shape(attrs, s)  # validates axes
    return in_shapes, [s, s]


def _drop_ref(attrs, ins, is_train):
    x = ins[0]
    if not _drop_active(attrs, is_train):
        return [x, torch.ones_like(x)]
    u = torch.rand(_drop_mask_shape(attrs, tuple(x.shape)), device=x.device)
    mask = (u >= attrs["p"]).to(x.dtype) * _drop_scale(attrs["p"])
    mask = mask.expand(x.shape).contiguous()
    return [x * mask, mask]


def _drop_build(b, n, is_train):
    x = n.inputs[0]
    if not _drop_active(n.attrs, is_train):
        return [b.op("_copy", x), b.op("ones_like", x)]
    u = b.op("_random_uniform", shape=_drop_mask_shape(n.attrs, n.in_shapes[0]))
    keep = b.op("_greater_equal_scalar", u, scalar=n.attrs["p"])
    mask = b.op("_mul_scalar", keep, scalar=_drop_scale(n.attrs["p"]))
    if tuple(mask.shape) != tuple(n.in_shapes[0]):
        mask = b.op("ones_like", x) * mask
    return [x * mask, mask]


register(OpDef(
    name="Dropout", pattern="composite", lowering=Decompose(_drop_build),
    outputs=("output", "mask"), num_visible=lambda attrs: 1, mode_dependent=True,
    needs_random=True, constant_outputs=(1,),
    attrs=[Attr("p", parse_float, 0.5), Attr("mode", choice("training", "always"), "training"),
           Attr("axes", parse_shape, ()), Attr("cudnn_off", parse_bool, False)],
    infer_shape=_drop_shape, infer_type=_types_for(2), reference=_drop_ref,
    gradient=lambda b, n: [n.ograds[0] * n.outputs[1]],
    doc="out = x * mask, mask = (U[0,1) >= p) / (1 - p) shared along `axes`; identity "
        "in inference unless mode='always'."))


# -- BatchNorm ---------------------------------------------------------------------------

def _bn_axes(attrs, shape):
    ax = normalize_axis(attrs["axis"], len(shape), "BatchNorm")
    red = tuple(i for i in range(len(shape)) if i != ax)
    bshape = tuple(s if i == ax else 1 for i, s in enumerate(shape))
    return ax, red, bshape


def _bn_shape(attrs, in_shapes):
    dshape = in_shapes[0]
    if dshape is None:
        return in_shapes, [None, None, None]
    if len(dshape) < 2:
        raise ShapeError(f"BatchNorm: data must have at least 2 dimensions, got {tuple(dshape)}")
    ax, _, _ = _bn_axes(attrs, dshape)
    c = (dshape[ax],)
    names = ("gamma", "beta", "moving_mean", "moving_var")
    shapes = [dshape] + [merge_shape(s, c, f"BatchNorm {nm}")
                         for s, nm in zip(in_shapes[1:], names)]
    return shapes, [tuple(dshape), c, c]


def _bn_stats_used(attrs, is_train):
    return is_train and not attrs["use_global_stats"]


def _bn_ref(attrs, ins, is_train):
    """Outputs ``[out, mean, invstd]`` (mxnet's 'var' output is 1/sqrt(var + eps)),
    then in training the new moving mean / var (biased batch variance)."""
    x, gamma, beta, mm, mv = ins
    _, red, bshape = _bn_axes(attrs, tuple(x.shape))
    if _bn_stats_used(attrs, is_train):
        mean = x.mean(dim=red)
        var = x.var(dim=red, unbiased=False)
    else:
        mean, var = mm, mv
    invstd = 1.0 / torch.sqrt(var + attrs["eps"])
    g = torch.ones_like(gamma) if attrs["fix_gamma"] else gamma
    out = (x - mean.reshape(bshape)) * (invstd * g).reshape(bshape) + beta.reshape(bshape)
    outs = [out, mean, invstd]
    if is_train:
        if attrs["use_global_stats"]:
            outs += [mm, mv]
        else:
            mom = attrs["momentum"]
            outs += [mm * mom + mean.detach() * (1 - mom), mv * mom + var.detach() * (1 - mom)]
    return outs


def _bn_build(b, n, is_train):
    x, gamma, beta, mm, mv = n.inputs
    eps, mom = n.attrs["eps"], n.attrs["momentum"]
    _, red, bshape = _bn_axes(n.attrs, n.in_shapes[0])
    c = (n.in_shapes[1][0],)
    if _bn_stats_used(n.attrs, is_train):
        mean_k = b.op("mean", x, axis=red, keepdims=True)
        xc = x - mean_k
        var_k = b.op("mean", xc * xc, axis=red, keepdims=True)
        invstd_k = 1.0 / b.op("sqrt", var_k + eps)
        xhat = xc * invstd_k
        out = xhat if n.attrs["fix_gamma"] else xhat * _reshape(b, gamma, bshape)
        out = out + _reshape(b, beta, bshape)
        mean, var = _reshape(b, mean_k, c), _reshape(b, var_k, c)
        outs = [out, mean, _reshape(b, invstd_k, c)]
        if is_train:
            outs += [b.op("_mul_scalar", mm, scalar=mom) + b.op("_mul_scalar", mean,
                                                                   scalar=1.0 - mom),
                     b.op("_mul_scalar", mv, scalar=mom) + b.op("_mul_scalar", var,
                                                                   scalar=1.0 - mom)]
        return outs
    invstd = 1.0 / b.op("sqrt", mv + eps)
    scale = invstd if n.attrs["fix_gamma"] else invstd * gamma
    shift = beta - mm * scale
    out = x * _reshape(b, scale, bshape) + _reshape(b, shift, bshape)
    outs = [out, b.op("_copy", mm), invstd]
    if is_train:   # use_global_stats: the moving statistics stay as they are
        outs += [mm, mv]
    return outs


def _bn_gradient(b, n):
    """Standard BN backward; mxnet ignores the gradients of the mean/var outputs."""
    x, gamma = n.inputs[0], n.inputs[1]
    dy = n.ograds[0]
    _, red, bshape = _bn_axes(n.attrs, n.in_shapes[0])
    c = n.in_shapes[1]
    m = float(prod(n.in_shapes[0][i] for i in red))
    mean_k = _reshape(b, n.outputs[1], bshape)
    invstd_k = _reshape(b, n.outputs[2], bshape)
    xhat = (x - mean_k) * invstd_k
    sum_dy = b.op("sum", dy, axis=red, keepdims=True)
    sum_dyx = b.op("sum", dy * xhat, axis=red, keepdims=True)
    gscale = invstd_k if n.attrs["fix_gamma"] else invstd_k * _reshape(b, gamma, bshape)
    if n.attrs["use_global_stats"]:
        dx = dy * gscale
    else:
        dx = (dy - sum_dy * (1.0 / m) - xhat * (sum_dyx * (1.0 / m))) * gscale
    dgamma = b.zeros_like(gamma) if n.attrs["fix_gamma"] else _reshape(b, sum_dyx, c)
    return [dx, dgamma, _reshape(b, sum_dy, c), None, None]


register(OpDef(
    name="BatchNorm", pattern="composite", lowering=Decompose(_bn_build),
    # BatchNorm_v1: mxnet 1.9.1's legacy operator, the same computation over axis 1
    aliases=("BatchNorm_v1",), json_names=(("BatchNorm_v1", "BatchNorm_v1"),),
    arguments=("data", "gamma", "beta"), aux=("moving_mean", "moving_var"),
    outputs=("output", "mean", "var"),
    num_visible=lambda attrs: 3 if attrs["output_mean_var"] else 1, mode_dependent=True,
    # mxnet's FSetInputVarAttrOnCompose: the moving statistics start at 0 and 1
    var_attrs=lambda attrs: {"moving_mean": {"__init__": '["zero", {}]'},
                             "moving_var": {"__init__": '["one", {}]'}},
    attrs=[Attr("eps", parse_float, 1e-3), Attr("momentum", parse_float, 0.9),
           Attr("fix_gamma", parse_bool, True), Attr("use_global_stats", parse_bool, False),
           Attr("output_mean_var", parse_bool, False), Attr("axis", parse_int, 1),
           Attr("cudnn_off", parse_bool, False),
           Attr("min_calib_range", parse_optional_float, None),
           Attr("max_calib_range", parse_optional_float, None)],
    infer_shape=_bn_shape, infer_type=_bn_types, reference=_bn_ref, gradient=_bn_gradient,
    doc="Batch normalization over all axes but `axis`; outputs (out, mean, 1/sqrt(var+eps))."))
