"""mxnet 1.9.1's remaining contrib layers: ``_contrib_SyncBatchNorm``,
``_contrib_BatchNormWithReLU``, ``_contrib_fft``, ``_contrib_ifft``,
``_contrib_count_sketch`` and ``_contrib_hawkesll`` (as mxnet's contrib operators of those
names define them), ``mx.sym.contrib.X``. All but hawkesll are ``Decompose`` rewrites
into operators that already have kernels; hawkesll (a recurrence over events) and its
gradient are extern launches.

* ``SyncBatchNorm`` in one process is BatchNorm over axis 1 (``ndev`` and ``key`` are
  accepted and, with every device in one executor group's process, change nothing: the
  statistics of one device are the statistics). Unlike BatchNorm its ``var`` output is the
  biased batch variance itself (BatchNorm's is ``1/sqrt(var + eps)``). mxnet updates the
  moving statistics in its backward; here a training forward updates them, as for
  BatchNorm (a Module step runs both). Where mxnet leaves the ``mean``/``var`` outputs
  unwritten (inference, ``use_global_stats``) they are the moving statistics here.
* ``BatchNormWithReLU`` is ``relu(BatchNorm(...))`` with BatchNorm's attributes and
  outputs, plus a hidden ``workspace`` output (MKLDNN's opaque relu workspace in mxnet;
  here the 0/1 mask of positive outputs). mxnet runs it only through MKLDNN, for 4-D data
  with ``axis=1``; other shapes are refused at shape inference, as mxnet refuses them when
  it runs.
* ``fft`` / ``ifft`` (GPU-only in mxnet, cuFFT) are one matmul with the DFT matrix, built
  from ``_axis_index`` coordinates: ``fft`` maps the last axis of ``(N, d)`` or
  ``(N1, N2, N3, d)`` real data to ``2d`` interleaved ``[re0, im0, re1, im1, ...]``
  (unnormalised forward transform); ``ifft`` maps ``2d`` interleaved values to the real part
  of the unnormalised inverse transform (mxnet does not divide by ``d``). Their matrices
  are each other's transpose, so each one's gradient (mxnet's: the other transform) is
  the matmul's.
* ``count_sketch`` (GPU-only in mxnet) is ``out[n, h[i]] += s[i] * data[n, i]``: one matmul
  with the ``(in_dim, out_dim)`` matrix ``one_hot(h) * s``. mxnet's backward writes only the
  data gradient; ``h`` and ``s`` get zeros here. An ``h`` outside ``[0, out_dim)`` adds
  nothing (mxnet's CUDA kernel would write out of bounds).
* ``hawkesll`` returns the log likelihood ``(N,)`` and the states at ``max_time``; its
  gradient (mxnet's ``_contrib_backward_hawkesll``) reaches ``lda`` (per sample), ``alpha``
  and ``beta`` (summed over samples) and is the exact derivative; the states' head gradient
  is unused and ``state`` gets zeros, as mxnet leaves it unwritten. mxnet stops when
  ``lags``, ``marks``, ``valid_length`` or ``max_time`` ask for a gradient; here they get
  zeros. A mark outside ``[0, K)`` is clamped (mxnet reads out of bounds).
"""
from __future__ import annotations

import math

import torch

from . import nn as _nn
from .contrib_common import gradient_of_decomposition
from .registry import (Attr, Decompose, Extern, NodeView, OpDef, ShapeError, get_op, merge_shape,
                       parse_bool, parse_float, parse_int, parse_positive_int, parse_str,
                       prod, register)


# -- SyncBatchNorm -----------------------------------------------------------------------

def _sbn_shape(attrs, in_shapes):
    dshape = in_shapes[0]
    if dshape is None:
        return in_shapes, [None, None, None]
    if len(dshape) < 2:
        raise ShapeError(f"SyncBatchNorm: data of shape {tuple(dshape)} must have at least "
                         f"2 dimensions (channels on axis 1)")
    c = (dshape[1],)
    names = ("gamma", "beta", "moving_mean", "moving_var")
    return ([tuple(dshape)] + [merge_shape(s, c, f"SyncBatchNorm {nm}")
                               for s, nm in zip(in_shapes[1:], names)],
            [tuple(dshape), c, c])


def _sbn_types(attrs, in_types):
    """mxnet's SyncBatchNormProp::InferType: parameters, statistics and the mean/var
    outputs are float32 for float16 data, else the data's dtype."""
    data = in_types[0]
    param = None if data is None else "float32" if data == "float16" else data
    return [data] + [param] * (len(in_types) - 1), [data, param, param]


def _sbn_ref(attrs, ins, is_train):
    x, gamma, beta, mm, mv = ins
    red = tuple(i for i in range(x.dim()) if i != 1)
    bshape = [1] * x.dim()
    bshape[1] = x.shape[1]
    batch = is_train and not attrs["use_global_stats"]
    mean = x.mean(dim=red) if batch else mm
    var = x.var(dim=red, unbiased=False) if batch else mv
    g = torch.ones_like(gamma) if attrs["fix_gamma"] else gamma
    scale = (g / torch.sqrt(var + attrs["eps"])).reshape(bshape)
    out = (x - mean.reshape(bshape)) * scale + beta.reshape(bshape)
    outs = [out, mean.clone(), var.clone()]
    if is_train:
        mom = attrs["momentum"]
        outs += ([mm * mom + mean.detach() * (1 - mom), mv * mom + var.detach() * (1 - mom)]
                 if batch else [mm, mv])
    return outs


def _sbn_build(b, n, is_train):
    x, gamma, beta, mm, mv = n.inputs
    eps, mom = n.attrs["eps"], n.attrs["momentum"]
    shape = n.in_shapes[0]
    red = tuple(i for i in range(len(shape)) if i != 1)
    bshape = tuple(s if i == 1 else 1 for i, s in enumerate(shape))
    c = (shape[1],)
    if is_train and not n.attrs["use_global_stats"]:
        mean_k = b.op("mean", x, axis=red, keepdims=True)
        xc = x - mean_k
        var_k = b.op("mean", xc * xc, axis=red, keepdims=True)
        out = xc * (1.0 / b.op("sqrt", var_k + eps))
        if not n.attrs["fix_gamma"]:
            out = out * _nn._reshape(b, gamma, bshape)
        out = out + _nn._reshape(b, beta, bshape)
        mean, var = _nn._reshape(b, mean_k, c), _nn._reshape(b, var_k, c)
        return [out, mean, var,
                b.op("_mul_scalar", mm, scalar=mom) + b.op("_mul_scalar", mean, scalar=1 - mom),
                b.op("_mul_scalar", mv, scalar=mom) + b.op("_mul_scalar", var, scalar=1 - mom)]
    invstd = 1.0 / b.op("sqrt", mv + eps)
    scale = invstd if n.attrs["fix_gamma"] else invstd * gamma
    shift = beta - mm * scale
    out = x * _nn._reshape(b, scale, bshape) + _nn._reshape(b, shift, bshape)
    outs = [out, b.op("_copy", mm), b.op("_copy", mv)]
    return outs + [mm, mv] if is_train else outs


def _sbn_gradient(b, n):
    """BatchNorm's gradient (mxnet's formulas are the same algebra) with the ``var``
    output turned into BatchNorm's ``1/sqrt(var + eps)``."""
    invstd = 1.0 / b.op("sqrt", n.outputs[2] + n.attrs["eps"])
    attrs = {"axis": 1, "fix_gamma": n.attrs["fix_gamma"],
             "use_global_stats": n.attrs["use_global_stats"]}
    view = NodeView(n.name, attrs, n.inputs, [n.outputs[0], n.outputs[1], invstd], n.ograds,
                    n.in_shapes, n.out_shapes)
    return _nn._bn_gradient(b, view)


register(OpDef(
    name="_contrib_SyncBatchNorm", pattern="composite", lowering=Decompose(_sbn_build),
    arguments=("data", "gamma", "beta"), aux=("moving_mean", "moving_var"),
    outputs=("output", "mean", "var"),
    num_visible=lambda attrs: 3 if attrs["output_mean_var"] else 1, mode_dependent=True,
    attrs=[Attr("eps", parse_float, 1e-3), Attr("momentum", parse_float, 0.9),
           Attr("fix_gamma", parse_bool, True), Attr("use_global_stats", parse_bool, False),
           Attr("output_mean_var", parse_bool, False), Attr("ndev", parse_int, 1),
           Attr("key", parse_str)],
    infer_shape=_sbn_shape, infer_type=_sbn_types, reference=_sbn_ref,
    gradient=_sbn_gradient,
    doc="BatchNorm over axis 1 with the statistics of every device of the process; "
        "outputs (out, batch mean, batch variance)."))


# -- BatchNormWithReLU -------------------------------------------------------------------

def _bnr_shape(attrs, in_shapes):
    dshape = in_shapes[0]
    if dshape is not None and (len(dshape) != 4 or attrs["axis"] not in (1, -3)):
        raise ShapeError(f"BatchNormWithReLU: data of shape {tuple(dshape)} with axis="
                         f"{attrs['axis']}: mxnet runs this operator only through MKLDNN, "
                         f"for 4-D data with axis=1")
    shapes, outs = _nn._bn_shape(attrs, in_shapes)
    return shapes, outs + [None if dshape is None else tuple(dshape)]


def _bnr_types(attrs, in_types):
    ins, outs = _nn._bn_types(attrs, in_types)
    return ins, outs + [outs[1]]


def _bnr_ref(attrs, ins, is_train):
    outs = _nn._bn_ref(attrs, ins, is_train)
    y = torch.relu(outs[0])
    return [y, outs[1], outs[2], (y > 0).to(outs[1].dtype)] + outs[3:]


def _bnr_build(b, n, is_train):
    outs = _nn._bn_build(b, n, is_train)
    y = b.op("relu", outs[0])
    mask = b.op("_greater_scalar", y, scalar=0.0)
    if mask.dtype != outs[1].dtype:
        mask = b.op("Cast", mask, dtype=outs[1].dtype)
    return [y, outs[1], outs[2], mask] + outs[3:]


def _bnr_gradient(b, n):
    """BatchNorm's gradient of the head gradient where the output is positive."""
    dy = n.ograds[0] * b.op("_greater_scalar", n.outputs[0], scalar=0.0)
    view = NodeView(n.name, n.attrs, n.inputs, n.outputs, [dy] + list(n.ograds[1:]),
                    n.in_shapes, n.out_shapes)
    return _nn._bn_gradient(b, view)


register(OpDef(
    name="_contrib_BatchNormWithReLU", pattern="composite", lowering=Decompose(_bnr_build),
    arguments=("data", "gamma", "beta"), aux=("moving_mean", "moving_var"),
    outputs=("output", "mean", "var", "workspace"),
    num_visible=lambda attrs: 3 if attrs["output_mean_var"] else 1, mode_dependent=True,
    var_attrs=lambda attrs: {"moving_mean": {"__init__": '["zero", {}]'},
                             "moving_var": {"__init__": '["one", {}]'}},
    attrs=list(get_op("BatchNorm").attrs),
    infer_shape=_bnr_shape, infer_type=_bnr_types, reference=_bnr_ref,
    gradient=_bnr_gradient,
    doc="relu(BatchNorm(data, ...)) over 4-D data, channels on axis 1; BatchNorm's "
        "outputs and a hidden relu mask."))


# -- fft, ifft ---------------------------------------------------------------------------

def _dft_matrix(b, d, dtype):
    """The ``(d, 2d)`` real matrix of the unnormalised forward DFT of a real row:
    column ``2k`` is ``cos(2 pi k n / d)``, column ``2k + 1`` is ``-sin(2 pi k n / d)``
    (the product ``k * n`` is reduced mod ``d`` first, exact in float32 below 2^22)."""
    shape = (d, 2 * d)
    n = b.op("_axis_index", shape=shape, axis=0)
    j = b.op("_axis_index", shape=shape, axis=1)
    k = b.op("floor", b.op("_div_scalar", j, scalar=2.0))
    odd = b.op("elemwise_sub", j, b.op("_mul_scalar", k, scalar=2.0))
    # k n mod d through floor (a float remainder followed by a cosine spills on CUDA:
    # the pair compiles to local-memory code); one step back where the quotient rounded up
    kn = b.op("elemwise_mul", k, n)
    m = b.op("elemwise_sub", kn, b.op("_mul_scalar", b.op("floor", b.op(
        "_div_scalar", kn, scalar=float(d))), scalar=float(d)))
    m = b.op("where", b.op("_lesser_scalar", m, scalar=0.0),
             b.op("_plus_scalar", m, scalar=float(d)), m)
    # -sin(t) = cos(t + pi/2): one cosine per entry. (A kernel taking both the sine and
    # the cosine of one value gets them from CUDA's sincosf, whose two results go
    # through local memory: a spill.) The quarter turn is added in exact integer steps
    # of pi / (2 d), so the angle stays in [0, 2 pi + pi / 2).
    steps = b.op("elemwise_add", b.op("_mul_scalar", m, scalar=4.0),
                 b.op("_mul_scalar", odd, scalar=float(d)))
    w = b.op("cos", b.op("_mul_scalar", steps, scalar=math.pi / (2.0 * d)))
    return w if dtype == "float32" else b.op("Cast", w, dtype=dtype)


def _fft_shape(op, factor):
    def infer(attrs, in_shapes):
        s = in_shapes[0]
        if s is None:
            return in_shapes, [None]
        if len(s) not in (2, 4):
            raise ShapeError(f"{op}: data of shape {tuple(s)} must be 2-D (N, d) or 4-D "
                             f"(N1, N2, N3, d)")
        if factor < 1 and s[-1] % 2:
            raise ShapeError(f"{op}: data of shape {tuple(s)}: the last dimension holds "
                             f"interleaved (real, imag) pairs and must be even")
        return [tuple(s)], [tuple(s[:-1]) + (int(s[-1] * factor),)]
    return infer


def _fft_build(b, n, is_train):
    x = n.inputs[0]
    shape = n.in_shapes[0]
    d = shape[-1]
    rows = _nn._reshape(b, x, (prod(shape[:-1]), d))
    out = b.op("dot", rows, _dft_matrix(b, d, x.dtype))
    return [_nn._reshape(b, out, n.out_shapes[0])]


def _ifft_build(b, n, is_train):
    z = n.inputs[0]
    shape = n.in_shapes[0]
    d = shape[-1] // 2
    rows = _nn._reshape(b, z, (prod(shape[:-1]), 2 * d))
    out = b.op("dot", rows, _dft_matrix(b, d, z.dtype), transpose_b=True)
    return [_nn._reshape(b, out, n.out_shapes[0])]


def _interleave(c):
    return torch.view_as_real(c).flatten(-2)


def _fft_ref(attrs, ins, is_train):
    x = ins[0]
    return [_interleave(torch.fft.fft(x.to(torch.complex128 if x.dtype == torch.float64
                                           else torch.complex64), dim=-1)).to(x.dtype)]


def _ifft_ref(attrs, ins, is_train):
    z = ins[0]
    c = torch.complex(z[..., 0::2], z[..., 1::2])
    return [(torch.fft.ifft(c, dim=-1) * c.shape[-1]).real.to(z.dtype)]


_COMPUTE_SIZE = [Attr("compute_size", parse_int, 128)]

register(OpDef(
    name="_contrib_fft", pattern="composite", lowering=Decompose(_fft_build),
    attrs=_COMPUTE_SIZE, infer_shape=_fft_shape("fft", 2), reference=_fft_ref,
    gradient=gradient_of_decomposition(_fft_build),
    doc="Unnormalised 1-D DFT of the last axis of real data; (re, im) interleaved."))

register(OpDef(
    name="_contrib_ifft", pattern="composite", lowering=Decompose(_ifft_build),
    attrs=_COMPUTE_SIZE, infer_shape=_fft_shape("ifft", 0.5), reference=_ifft_ref,
    gradient=gradient_of_decomposition(_ifft_build),
    doc="Real part of the unnormalised 1-D inverse DFT of interleaved (re, im) pairs."))


# -- count_sketch ------------------------------------------------------------------------

def _cs_shape(attrs, in_shapes):
    d, h, s = in_shapes
    if d is None:
        return in_shapes, [None]
    if len(d) not in (2, 4):
        raise ShapeError(f"count_sketch: data of shape {tuple(d)} must be 2-D or 4-D")
    want = (1, d[-1])
    h = merge_shape(h, want, "count_sketch h")
    s = merge_shape(s, want, "count_sketch s")
    return [tuple(d), h, s], [tuple(d[:-1]) + (attrs["out_dim"],)]


def _cs_ref(attrs, ins, is_train):
    x, h, s = ins
    m = torch.nn.functional.one_hot(h.reshape(-1).long().clamp(0), attrs["out_dim"])
    m = m * (h.reshape(-1, 1) < attrs["out_dim"]) * (h.reshape(-1, 1) >= 0)
    m = m.to(x.dtype) * s.reshape(-1, 1).detach()
    return [x @ m]


def _cs_build(b, n, is_train):
    x, h, s = n.inputs
    shape = n.in_shapes[0]
    k = shape[-1]
    hot = b.op("one_hot", _nn._reshape(b, h, (k,)), depth=n.attrs["out_dim"], dtype=x.dtype)
    m = b.op("broadcast_mul", hot, _nn._reshape(b, s, (k, 1)))
    out = b.op("dot", _nn._reshape(b, x, (prod(shape[:-1]), k)), m)
    return [_nn._reshape(b, out, n.out_shapes[0])]


def _cs_gradient(b, n):
    """mxnet's backward: ``dx[n, i] = s[i] * dy[n, h[i]]``; ``h`` and ``s`` get zeros."""
    x, h, s = n.inputs
    shape = n.in_shapes[0]
    k = shape[-1]
    hot = b.op("one_hot", _nn._reshape(b, h, (k,)), depth=n.attrs["out_dim"], dtype=x.dtype)
    m = b.op("broadcast_mul", hot, _nn._reshape(b, s, (k, 1)))
    dy = _nn._reshape(b, n.ograds[0], (prod(shape[:-1]), n.attrs["out_dim"]))
    dx = b.op("dot", dy, m, transpose_b=True)
    return [_nn._reshape(b, dx, shape), b.zeros_like(h), b.zeros_like(s)]


register(OpDef(
    name="_contrib_count_sketch", pattern="composite", lowering=Decompose(_cs_build),
    arguments=("data", "h", "s"),
    attrs=[Attr("out_dim", parse_positive_int), Attr("processing_batch_size", parse_int, 32)],
    infer_shape=_cs_shape, reference=_cs_ref, gradient=_cs_gradient,
    doc="out[..., h[i]] += s[i] * data[..., i] over the last axis."))


# -- hawkesll ----------------------------------------------------------------------------
# The log likelihood of marked self-exciting (Hawkes) processes with exponential kernels,
# one per sample: a recurrence over the events, so an extern launch. Vectorised over the
# samples, one step per event position; events at or past ``valid_length`` change nothing.

_HAWKES_ARGS = ("lda", "alpha", "beta", "state", "lags", "marks", "valid_length", "max_time")


def _hawkes_shape(attrs, in_shapes):
    if any(s is None for s in in_shapes):
        return in_shapes, [None, None]
    mu, alpha, beta, state, lags, marks, vl, mt = (tuple(s) for s in in_shapes)
    ranks = (2, 1, 1, 2, 2, 2, 1, 1)
    for name, s, r in zip(_HAWKES_ARGS, in_shapes, ranks):
        if len(s) != r:
            raise ShapeError(f"hawkesll: {name} of shape {tuple(s)} must have {r} dims")
    n, t = lags
    k = mu[1]
    want = {"lda": (n, k), "alpha": (k,), "beta": (k,), "state": (n, k), "marks": (n, t),
            "valid_length": (n,), "max_time": (n,)}
    for name, s in zip(_HAWKES_ARGS, in_shapes):
        if name in want and tuple(s) != want[name]:
            raise ShapeError(f"hawkesll: {name} of shape {tuple(s)} must be {want[name]} "
                             f"(N={n} samples of T={t} events, K={k} marks; lags {lags})")
    return [tuple(s) for s in in_shapes], [(n,), (n, k)]


def _hawkes_type(attrs, in_types):
    known = [t for i, t in enumerate(in_types) if t is not None and i != 5]
    t = known[0] if known else None
    return [("int32" if i == 5 else t) for i in range(8)], [t, t]


def _hawkes_walk(mu, alpha, beta, state, lags, marks, vl, grads=False):
    """Run the recurrence; with ``grads``, also the derivatives of the log likelihood
    with respect to mu (per sample), alpha and beta (per sample, then summed)."""
    n, t_len = lags.shape
    rows = torch.arange(n, device=mu.device)
    t = torch.zeros(n, dtype=mu.dtype, device=mu.device)
    last, phi = torch.zeros_like(state), state.clone()
    ll = torch.zeros_like(t)
    g = [torch.zeros_like(state) for _ in range(4)]   # d mu, d alpha, d beta, d phi/d beta
    for j in range(t_len):
        on = vl > j
        c = marks[:, j].long().clamp(0, mu.shape[1] - 1)
        t = torch.where(on, t + lags[:, j], t)
        d = t - last[rows, c]
        a, b, p, m = alpha[c], beta[c], phi[rows, c], mu[rows, c]
        ed = torch.exp(-b * d)
        lda = m + a * b * p * ed
        ll = ll + torch.where(on, torch.log(lda) - (m * d + a * p * (1 - ed)), 0.0)
        if grads:
            dp = g[3][rows, c]
            upd = [1 / lda - d, b * p * ed / lda - p * (1 - ed),
                   a * ed * (p * (1 - b * d) + b * dp) / lda - a * (dp * (1 - ed) + p * d * ed),
                   ed * (dp - d * p)]
            for gi, u in zip(g, upd):
                gi[rows, c] = torch.where(on, (gi[rows, c] + u) if gi is not g[3] else u,
                                          gi[rows, c])
        phi[rows, c] = torch.where(on, 1 + p * ed, p)
        last[rows, c] = torch.where(on, t, last[rows, c])
    return ll, phi, last, g


def _hawkes_forward(attrs, ins):
    mu, alpha, beta, state, lags, marks, vl, mt = ins
    ll, phi, last, _ = _hawkes_walk(mu, alpha, beta, state, lags, marks, vl)
    ed = torch.exp(-beta * (mt[:, None] - last))
    rem = mu * (mt[:, None] - last) + alpha * phi * (1 - ed)
    return [ll - rem.sum(1), ed * phi]


def _hawkes_backward(attrs, ins):
    """mxnet's ``_contrib_backward_hawkesll``: d mu ``(N, K)``, d alpha and d beta ``(K,)``
    of the log likelihood, times its head gradient (the states' head gradient unused)."""
    dll, mu, alpha, beta, state, lags, marks, vl, mt = ins
    _, phi, last, (gmu, galpha, gbeta, gphi) = _hawkes_walk(mu, alpha, beta, state, lags,
                                                            marks, vl, grads=True)
    d = mt[:, None] - last
    ed = torch.exp(-beta * d)
    gmu = (gmu - d) * dll[:, None]
    galpha = (galpha - phi * (1 - ed)) * dll[:, None]
    gbeta = (gbeta - alpha * (gphi * (1 - ed) + phi * d * ed)) * dll[:, None]
    return [gmu, galpha.sum(0), gbeta.sum(0)]


def _hawkes_gradient(b, n):
    dmu, dalpha, dbeta = b.op("_contrib_backward_hawkesll", n.ograds[0], *n.inputs)
    return [dmu, dalpha, dbeta] + [b.zeros_like(r) for r in n.inputs[3:]]


register(OpDef(
    name="_contrib_hawkesll", pattern="opaque", lowering=Extern(_hawkes_forward),
    arguments=_HAWKES_ARGS, outputs=("output", "out_state"),
    infer_shape=_hawkes_shape, infer_type=_hawkes_type,
    reference=lambda attrs, ins, is_train: _hawkes_forward(attrs, ins),
    gradient=_hawkes_gradient,
    doc="Log likelihood (N,) of marked Hawkes processes with exponential kernels and the "
        "processes' states (N, K) at max_time."))

register(OpDef(
    name="_contrib_backward_hawkesll", pattern="opaque", lowering=Extern(_hawkes_backward),
    arguments=("out_grad",) + _HAWKES_ARGS, outputs=("lda", "alpha", "beta"),
    infer_shape=lambda attrs, s: (s, [s[1], s[2], s[3]]),
    infer_type=lambda attrs, t: ([t[0]] + _hawkes_type(attrs, t[1:])[0], [t[0]] * 3),
    reference=lambda attrs, ins, is_train: _hawkes_backward(attrs, ins),
    doc="Gradients of hawkesll's log likelihood with respect to lda, alpha and beta."))
