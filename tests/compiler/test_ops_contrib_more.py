"""mxnet's SyncBatchNorm, BatchNormWithReLU, fft, ifft and count_sketch
(``compiler/ops/contrib_more.py``) through the full compile path on both cpu targets.

``ROWS`` run ``tests/compiler/test_ops_compiled.check``: forward against an independent
torch version in float64 (``F.batch_norm``, ``torch.fft``, a scatter-add written out),
every gradient against torch autograd, a few entries against finite differences,
inference with the moving statistics the step left; ``test_ops_after_views.py`` sweeps
them after views. fft, ifft and count_sketch run only on GPUs in mxnet (its CPU build
refuses them), so no mxnet fixture exists for them: their rows follow mxnet's documented
layout (interleaved re/im, unnormalised transforms). SyncBatchNorm and BatchNormWithReLU
also replay mxnet's numbers (``test_mxnet_fixtures_contrib_more.py``).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets
from runtime.ndarray import torch_dtype

C = sym.contrib
AUX = {"bn_moving_mean": "randn", "bn_moving_var": "pos"}


def _bn(x, gamma, beta, fix_gamma, eps=1e-3, mm=None, mv=None):
    g = torch.ones_like(gamma) if fix_gamma else gamma
    return F.batch_norm(x, mm, mv, g, beta, training=mm is None, eps=eps)


def _sync_torch(fix_gamma, eps=1e-3, mean_var=False):
    def f(x, gamma, beta, mm, mv):
        out = _bn(x, gamma, beta, fix_gamma, eps)
        if not mean_var:
            return out
        red = [i for i in range(x.dim()) if i != 1]
        # mxnet's backward ignores the gradients of the mean / var outputs
        return [out, x.mean(red).detach(), x.var(red, unbiased=False).detach()]
    return f


def _sync_infer(fix_gamma, eps=1e-3, mean_var=False):
    def f(x, gamma, beta, mm, mv):
        out = _bn(x, gamma, beta, fix_gamma, eps, mm, mv)
        return [out, mm, mv] if mean_var else out
    return f


def _relu_torch(fix_gamma):
    return lambda x, g, b, mm, mv: torch.relu(_bn(x, g, b, fix_gamma))


def _relu_infer(fix_gamma):
    return lambda x, g, b, mm, mv: torch.relu(_bn(x, g, b, fix_gamma, 1e-3, mm, mv))


BN_SHAPES = [[(4, 3, 2, 2), (3,), (3,)], [(5, 2), (2,), (2,)], [(2, 3, 1, 5), (3,), (3,)],
             [(3, 1, 7), (1,), (1,)]]
BN4_SHAPES = [[(4, 3, 2, 2), (3,), (3,)], [(2, 3, 1, 5), (3,), (3,)], [(3, 1, 3, 3), (1,), (1,)]]

ROWS = [
    *[Op(f"SyncBatchNorm_fix_gamma_{fg}",
         lambda x, g, b, fg=fg: C.SyncBatchNorm(x, g, b, fix_gamma=fg, key="k", name="bn"),
         _sync_torch(fg), BN_SHAPES, inputs=("x", "g", "b"), aux=AUX,
         infer_torch=_sync_infer(fg)) for fg in (True, False)],
    Op("SyncBatchNorm_mean_var",
       lambda x, g, b: C.SyncBatchNorm(x, g, b, fix_gamma=False, eps=1e-5, ndev=1, key="k",
                                       output_mean_var=True, name="bn"),
       _sync_torch(False, 1e-5, True), BN_SHAPES[:3], inputs=("x", "g", "b"), aux=AUX,
       infer_torch=_sync_infer(False, 1e-5, True), fd=False),   # mxnet ignores d mean, d var
    *[Op(f"BatchNormWithReLU_fix_gamma_{fg}",
         lambda x, g, b, fg=fg: C.BatchNormWithReLU(x, g, b, fix_gamma=fg, name="bn"),
         _relu_torch(fg), BN4_SHAPES, inputs=("x", "g", "b"), aux=AUX,
         infer_torch=_relu_infer(fg)) for fg in (True, False)],
    Op("fft", lambda x: C.fft(x),
       lambda x: torch.view_as_real(torch.fft.fft(x.to(torch.complex128))).flatten(-2),
       [[(3, 5)], [(1, 8)], [(2, 1, 3, 6)], [(1, 2, 2, 1)]]),
    Op("ifft", lambda x: C.ifft(x, compute_size=4),
       lambda z: (torch.fft.ifft(torch.complex(z[..., 0::2], z[..., 1::2])) *
                  (z.shape[-1] // 2)).real,
       [[(3, 10)], [(1, 8)], [(2, 1, 3, 6)], [(1, 2, 2, 2)]]),
    Op("count_sketch", lambda x, h, s: C.count_sketch(x, h, s, out_dim=5),
       lambda x, h, s: x @ (F.one_hot(h.reshape(-1).long(), 5).double() * s.reshape(-1, 1)),
       [[(3, 7), (1, 7), (1, 7)], [(1, 4), (1, 4), (1, 4)], [(2, 1, 3, 6), (1, 6), (1, 6)]],
       inputs=("x", "h", "s"), gen={"h": "index:5", "s": "cond"}, nograd=("h", "s")),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_row(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_sync_batch_norm_updates_moving_statistics():
    """One training step: moving = moving * momentum + batch * (1 - momentum), the
    variance biased, as mxnet's backward writes them."""
    x = sym.Variable("x")
    s = C.SyncBatchNorm(x, momentum=0.8, key="k", name="bn")
    exe = s.simple_bind(cpu(), x=(6, 2, 3))
    data = torch.randn(6, 2, 3)
    exe.arg_dict["x"][:] = data
    exe.arg_dict["bn_beta"][:] = 0
    exe.aux_dict["bn_moving_mean"][:] = torch.tensor([1.0, -1.0])
    exe.aux_dict["bn_moving_var"][:] = torch.tensor([2.0, 0.5])
    exe.forward(is_train=True)
    exe.backward([torch.ones(6, 2, 3)])
    mean, var = data.mean((0, 2)), data.var((0, 2), unbiased=False)
    torch.testing.assert_close(exe.aux_dict["bn_moving_mean"].clone(),
                               torch.tensor([1.0, -1.0]) * 0.8 + mean * 0.2)
    torch.testing.assert_close(exe.aux_dict["bn_moving_var"].clone(),
                               torch.tensor([2.0, 0.5]) * 0.8 + var * 0.2)


def test_sync_batch_norm_attributes_and_names():
    x = sym.Variable("x")
    s = C.SyncBatchNorm(x, ndev=4, key="layer1", name="sbn")
    assert s.list_arguments() == ["x", "sbn_gamma", "sbn_beta"]
    assert s.list_auxiliary_states() == ["sbn_moving_mean", "sbn_moving_var"]
    assert s.list_outputs() == ["sbn_output"]
    with pytest.raises(MXNetError, match="at least 2 dimensions"):
        s.infer_shape(x=(5,))
    with pytest.raises(MXNetError, match="key"):
        C.SyncBatchNorm(x, name="nokey").infer_shape(x=(2, 3))


def test_batch_norm_with_relu_shapes():
    x = sym.Variable("x")
    s = C.BatchNormWithReLU(x, output_mean_var=True, name="bnr")
    assert s.list_outputs() == ["bnr_output", "bnr_mean", "bnr_var"]
    _, outs, aux = s.infer_shape(x=(2, 3, 4, 5))
    assert outs == [(2, 3, 4, 5), (3,), (3,)] and aux == [(3,), (3,)]
    for bad, axis in (((2, 3), 1), ((2, 3, 4, 5), 3)):
        with pytest.raises(MXNetError, match="4-D data with axis=1"):
            C.BatchNormWithReLU(x, axis=axis).infer_shape(x=bad)


def test_fft_shape_rules():
    x = sym.Variable("x")
    assert C.fft(x).infer_shape(x=(2, 3, 4, 5))[1] == [(2, 3, 4, 10)]
    assert C.ifft(x).infer_shape(x=(3, 8))[1] == [(3, 4)]
    for op, shape, msg in ((C.fft, (2, 3, 4), "2-D"), (C.ifft, (3, 7), "even")):
        with pytest.raises(MXNetError, match=msg):
            op(x).infer_shape(x=shape)


def test_ifft_of_fft_is_d_times_the_signal():
    """mxnet's transforms are unnormalised: ifft(fft(x)) = d * x."""
    x = sym.Variable("x")
    exe = C.ifft(C.fft(x)).simple_bind(cpu(), x=(2, 6))
    data = torch.randn(2, 6)
    exe.arg_dict["x"][:] = data
    torch.testing.assert_close(exe.forward()[0].clone(), data * 6, rtol=1e-5, atol=1e-5)


def test_count_sketch_h_and_s_get_zero_gradients():
    x, h, s = sym.Variable("x"), sym.Variable("h"), sym.Variable("s")
    exe = C.count_sketch(x, h, s, out_dim=3).simple_bind(cpu(), x=(2, 4))
    assert exe.arg_dict["h"].shape == (1, 4) and exe.arg_dict["s"].shape == (1, 4)
    exe.arg_dict["x"][:] = torch.randn(2, 4)
    exe.arg_dict["h"][:] = torch.tensor([[0.0, 2.0, 2.0, 1.0]])
    exe.arg_dict["s"][:] = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    out = exe.forward(is_train=True)[0].clone()
    xv = exe.arg_dict["x"].clone()
    want = torch.stack([xv[:, 0], -xv[:, 3], xv[:, 2] - xv[:, 1]], 1)
    torch.testing.assert_close(out, want)
    exe.backward([torch.ones(2, 3)])
    assert float(exe.grad_dict["h"].abs().sum()) == 0.0
    assert float(exe.grad_dict["s"].abs().sum()) == 0.0
    torch.testing.assert_close(exe.grad_dict["x"].clone(),
                               torch.tensor([[1.0, -1.0, 1.0, -1.0]]).expand(2, 4))


# -- hawkesll: an independent event-by-event loop in float64, its autograd gradients -----

def _hawkes_loop(mu, alpha, beta, state, lags, marks, vl, mt):
    lls, states = [], []
    for i in range(mu.shape[0]):
        t, ll = 0.0, 0.0
        last = [0.0] * mu.shape[1]
        phi = list(state[i])
        for j in range(lags.shape[1]):
            if j >= float(vl[i]):
                break
            c = int(marks[i, j])
            t = t + lags[i, j]
            d = t - last[c]
            ed = torch.exp(-beta[c] * d)
            ll = ll + torch.log(mu[i, c] + alpha[c] * beta[c] * phi[c] * ed) \
                - mu[i, c] * d - alpha[c] * phi[c] * (1 - ed)
            phi[c], last[c] = 1 + phi[c] * ed, t
        for c in range(mu.shape[1]):
            d = mt[i] - last[c]
            ed = torch.exp(-beta[c] * d)
            ll = ll - mu[i, c] * d - alpha[c] * phi[c] * (1 - ed)
            phi[c] = ed * phi[c]
        lls.append(ll)
        states.append(torch.stack([torch.as_tensor(p) for p in phi]))
    return torch.stack(lls), torch.stack(states)


def test_hawkesll_against_an_event_loop(cpu_target):
    gen = torch.Generator().manual_seed(5)
    n, k, t = 3, 2, 4
    lags = torch.rand(n, t, generator=gen) + 0.1
    vals = {"lda": torch.rand(n, k, generator=gen) + 0.5, "alpha": torch.rand(k, generator=gen),
            "beta": torch.rand(k, generator=gen) + 0.5, "state": torch.rand(n, k, generator=gen),
            "lags": lags, "marks": torch.randint(0, k, (n, t), generator=gen).int(),
            "valid_length": torch.tensor([4.0, 1.0, 2.5]), "max_time": lags.sum(1) + 0.5}
    names = list(vals)
    s = C.hawkesll(*[sym.Variable(v) for v in names])
    req = {v: "write" if v in names[:3] else "null" for v in names}
    exe = s.simple_bind(cpu(), grad_req=req, type_dict={"marks": "int32"},
                        **{v: tuple(x.shape) for v, x in vals.items()})
    for v, x in vals.items():
        exe.arg_dict[v][:] = x
    outs = [o.clone() for o in exe.forward(is_train=True)]
    xs = {v: x.double().requires_grad_(v in names[:3]) for v, x in vals.items()}
    ll, st = _hawkes_loop(*[xs[v] for v in names])
    torch.testing.assert_close(outs[0].double(), ll.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[1].double(), st.detach(), rtol=1e-5, atol=1e-5)
    og = torch.randn(n, generator=gen)
    exe.backward([og, torch.randn(n, k, generator=gen)])   # the states' head is unused
    want = torch.autograd.grad((ll * og.double()).sum(), [xs[v] for v in names[:3]])
    for v, w in zip(names[:3], want):
        torch.testing.assert_close(exe.grad_dict[v].double(), w, rtol=1e-4, atol=1e-5)
    with pytest.raises(MXNetError, match="max_time of shape"):
        s.infer_shape(**{**{v: tuple(x.shape) for v, x in vals.items()}, "max_time": (n + 1,)})


# -- rand_zipfian: mxnet's Python composition over the Philox uniform sampler ------------

def test_rand_zipfian_counts_and_distribution(cpu_target):
    import math
    t = sym.Variable("t")
    n, rmax = 4000, 7
    samples, ect, ecs = C.rand_zipfian(t, n, rmax)
    exe = sym.Group([samples, ect, ecs]).simple_bind(cpu(), t=(2, 3))
    classes = torch.tensor([[0.0, 1, 6], [3, 2, 0]])
    exe.arg_dict["t"][:] = classes
    s, ct, cs = [o.clone() for o in exe.forward(is_train=False)]
    assert torch_dtype(s) == torch.int64 and torch_dtype(ct) == torch_dtype(cs) == torch.float64
    prob = lambda c: torch.log((c + 2.0) / (c + 1.0)) / math.log(rmax + 1)   # noqa: E731
    torch.testing.assert_close(ct, prob(classes.double()) * n)
    torch.testing.assert_close(cs, prob(s.double()) * n)
    assert int(s.min()) >= 0 and int(s.max()) < rmax
    # (exp(U(0, log 8)) - 1) floored: class c with probability log((c+2)/(c+1)) / log 8
    freq = torch.bincount(s, minlength=rmax).double() / n
    want = prob(torch.arange(rmax).double())
    sigma = (want * (1 - want) / n).sqrt()
    assert bool(((freq - want).abs() < 5 * sigma).all()), (freq, want)
    again = exe.forward(is_train=False)[0].clone()
    assert not torch.equal(again, s), "a second draw repeats the first"
    with pytest.raises(TypeError, match="unexpected type"):
        C.rand_zipfian(classes, 3, 5)


# -- quantization: mxnet's reference kernels, values worked out by hand ------------------

def _run(s, cpu_target=None, types=None, **arrays):
    exe = s.simple_bind(cpu(), grad_req="null", type_dict=types or {},
                        **{n: tuple(v.shape) for n, v in arrays.items()})
    for n, v in arrays.items():
        exe.arg_dict[n][:] = v
    return [o.clone() for o in exe.forward()]


def _vars(*names):
    return [sym.Variable(n) for n in names]


def test_quantize_reference_values(cpu_target):
    d, a, b = _vars("d", "a", "b")
    lo, hi = torch.tensor([-3.0]), torch.tensor([4.0])
    # uint8: (x - min) * fl32(255 / 7) + 0.5, truncated: 3.5 * 36.42857 is 127.49999 in
    # float32, so 0.5 gives 127; 255.5 truncates to 255
    q, qlo, qhi = _run(C.quantize(d, a, b), d=torch.tensor([-3.0, 0.5, 4.0]), a=lo, b=hi)
    assert torch_dtype(q) == torch.uint8 and q.tolist() == [0, 127, 255]
    assert qlo.tolist() == [-3.0] and qhi.tolist() == [4.0]
    # int8: sign(x) * min(|x| * 127 / 4 + 0.5, 127), truncated, range (-4, 4)
    q, qlo, qhi = _run(C.quantize(d, a, b, out_type="int8"),
                       d=torch.tensor([-1.0, 0.26, 4.0, -3.99]), a=lo, b=hi)
    assert torch_dtype(q) == torch.int8 and q.tolist() == [-32, 8, 127, -127]
    assert qlo.tolist() == [-4.0] and qhi.tolist() == [4.0]


def test_quantize_v2_reference_values(cpu_target):
    (d,) = _vars("d")
    x = torch.tensor([[-1.0, 0.26], [2.5, 0.0]])
    q, qlo, qhi = _run(C.quantize_v2(d), d=x)         # the data's own range: R = 2.5
    assert q.tolist() == [[-51, 13], [127, 0]] and (qlo.item(), qhi.item()) == (-2.5, 2.5)
    q, qlo, qhi = _run(C.quantize_v2(d, out_type="auto", min_calib_range=0.0,
                                     max_calib_range=5.1), d=x.abs())
    assert torch_dtype(q) == torch.uint8 and q.tolist() == [[50, 13], [125, 0]]
    q8 = torch.tensor([[3, -7]], dtype=torch.int8)
    q, qlo, qhi = _run(C.quantize_v2(d), types={"d": "int8"}, d=q8)   # passes through
    assert torch.equal(q, q8) and (qlo.item(), qhi.item()) == (-127.0, 127.0)


def test_dequantize_reference_values(cpu_target):
    d, a, b = _vars("d", "a", "b")
    (x,) = _run(C.dequantize(d, a, b), types={"d": "int8"},
                d=torch.tensor([-127, 0, 64], dtype=torch.int8), a=torch.tensor([-2.54]),
                b=torch.tensor([1.0]))
    torch.testing.assert_close(x, torch.tensor([-2.54, 0.0, 1.28]))
    (x,) = _run(C.dequantize(d, a, b), types={"d": "uint8"},
                d=torch.tensor([0, 255, 51], dtype=torch.uint8), a=torch.tensor([-1.0]),
                b=torch.tensor([4.0]))
    torch.testing.assert_close(x, torch.tensor([-1.0, 4.0, 0.0]))


def test_quantize_round_trip_within_half_a_level(cpu_target):
    (d,) = _vars("d")
    x = torch.linspace(-2, 2, 37).reshape(1, 37)
    s = C.dequantize(*C.quantize_v2(d, min_calib_range=-2.0, max_calib_range=2.0))
    (back,) = _run(s, d=x)
    assert float((back - x).abs().max()) <= 2.0 / 127 / 2 + 1e-6


def test_quantization_dtype_rules():
    d, a, b = _vars("d", "a", "b")
    with pytest.raises(MXNetError, match="expected int8, got float32"):
        C.dequantize(d, a, b).simple_bind(cpu(), type_dict={"d": "float32"}, d=(2, 3),
                                          a=(1,), b=(1,))
    with pytest.raises(MXNetError, match="MKLDNN"):
        C.requantize(d, a, b, out_type="uint8").simple_bind(
            cpu(), type_dict={"d": "int32"}, d=(2, 3), a=(1,), b=(1,))
    _, outs, _ = C.quantized_flatten(d, a, b).infer_shape(d=(2, 3, 4))
    assert outs == [(2, 12), (1,), (1,)]


def test_quantized_fully_connected_reference_bias(cpu_target):
    """The bias starts the int32 sum at trunc(b * (Rb / 127) / (Rout / (2^31 - 1))), with
    Rout = (Rd / 127) * (Rw / 127) * 2^31, in float32 as mxnet's reference kernel."""
    import numpy as np
    gen = torch.Generator().manual_seed(3)
    d = torch.randint(-127, 128, (2, 6), generator=gen, dtype=torch.int8)
    w = torch.randint(-127, 128, (3, 6), generator=gen, dtype=torch.int8)
    bias = torch.tensor([100, -77, 5], dtype=torch.int8)
    r = {"dlo": -2.0, "dhi": 1.0, "wlo": -0.5, "whi": 0.3, "blo": -0.01, "bhi": 0.04}
    names = ["d", "w", "bias"] + list(r)
    s = C.quantized_fully_connected(*[sym.Variable(n) for n in names], num_hidden=3)
    arrays = {"d": d, "w": w, "bias": bias, **{k: torch.tensor([v]) for k, v in r.items()}}
    out, lo, hi = _run(s, types={"d": "int8", "w": "int8", "bias": "int8"}, **arrays)
    f32 = np.float32
    top = f32(f32(f32(2.0) / f32(127)) * f32(f32(0.5) / f32(127))) * f32(2147483648.0)
    out_level, bias_level = f32(top / 2147483647.0), f32(f32(0.04) / 127.0)
    start = [int(f32(f32(f32(b) * bias_level) / out_level)) for b in (100, -77, 5)]
    want = d.long() @ w.long().t() + torch.tensor(start)
    assert torch_dtype(out) == torch.int32 and torch.equal(out.long(), want)
    assert hi.item() == pytest.approx(float(top)) and lo.item() == -hi.item()


def test_quantize_asym_reference_values(cpu_target):
    """scale = 255 / (max - min), shift = 255 - max * scale, q = trunc(x * scale + shift +
    0.5) (no mxnet fixture: mxnet 1.9.1's pip build crashes in this operator)."""
    (d,) = _vars("d")
    x = torch.tensor([[-1.0, 0.0], [1.5, 3.0]])
    q, scale, shift = _run(C.quantize_asym(d), d=x)       # the data's range [-1, 3]
    assert torch_dtype(q) == torch.uint8 and q.tolist() == [[0, 64], [159, 255]]
    assert (scale.item(), shift.item()) == (63.75, 63.75)
    q, scale, shift = _run(C.quantize_asym(d, min_calib_range=0.0, max_calib_range=5.1),
                           d=torch.tensor([[1.0, 2.0]]))
    assert q.tolist() == [[50, 100]] and scale.item() == pytest.approx(50.0)


def test_quantized_conv_reference_bias(cpu_target):
    """mxnet's reference bias add: trunc((v * f_out + b * f_bias) / f_out) in float32."""
    import numpy as np
    gen = torch.Generator().manual_seed(4)
    d = torch.randint(-127, 128, (1, 2, 3, 3), generator=gen, dtype=torch.int8)
    w = torch.randint(-127, 128, (2, 2, 2, 2), generator=gen, dtype=torch.int8)
    bias = torch.tensor([90, -60], dtype=torch.int8)
    r = {"dlo": -1.0, "dhi": 1.0, "wlo": -0.2, "whi": 0.2, "blo": -0.03, "bhi": 0.01}
    names = ["d", "w", "bias"] + list(r)
    s = C.quantized_conv(*[sym.Variable(n) for n in names], kernel=(2, 2), num_filter=2)
    arrays = {"d": d, "w": w, "bias": bias, **{k: torch.tensor([v]) for k, v in r.items()}}
    out, lo, hi = _run(s, types={"d": "int8", "w": "int8", "bias": "int8"}, **arrays)
    f32 = np.float32
    top = f32(f32(f32(1.0) / f32(127)) * f32(f32(0.2) / f32(127))) * f32(2147483648.0)
    f_out, f_bias = f32(top / 2147483647.0), f32(f32(0.03) / 127.0)
    v = torch.nn.functional.conv2d(d.double(), w.double()).long().numpy()
    want = np.trunc((v.astype(f32) * f_out + bias.numpy().astype(f32).reshape(1, 2, 1, 1)
                     * f_bias) / f_out).astype(np.int64)
    assert torch_dtype(out) == torch.int32 and np.array_equal(out.long().numpy(), want)
    assert hi.item() == pytest.approx(float(top))
