"""Convolution, Deconvolution and Pooling in float16, bfloat16 and float64.

The rows of ``test_ops_conv`` and ``test_ops_pool`` run through
``test_ops_dtypes.check_dtype`` (tolerances: its ``TOLERANCE``): on the cpu target in
every dtype, and on the interpreter in float16 (the Triton kernels' loads, dot operands
and stores). Then LeNet end to end in float16 and float64, and the hidden index outputs
(max pooling's mask) in float32 under float16 data.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from runtime.context import cpu
from tests.compiler.test_ops_conv import CONV, DECONV, EPILOGUE
from tests.compiler.test_ops_dtypes import TOLERANCE, check_dtype
from tests.compiler.test_ops_pool import ROWS
from runtime.ndarray import torch_dtype

_CPU_ROWS = CONV + DECONV + EPILOGUE + ROWS
# the interpreter is slow: one forward / transposed / epilogue convolution and the pools
_INTERPRET_ROWS = [CONV[0], DECONV[0], EPILOGUE[0]] + ROWS


def _params():
    out = [pytest.param(op, dt, "cpu", id=f"cpu-{op.name}-{dt}") for op in _CPU_ROWS
           for dt in ("float16", "bfloat16", "float64")]
    out += [pytest.param(op, "float16", "interpret", id=f"interpret-{op.name}-float16")
            for op in _INTERPRET_ROWS]
    return out


@pytest.mark.parametrize("op,dtype,target", _params())
def test_conv_pool_dtype(op, dtype, target, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    check_dtype(op, dtype)


def _lenet():
    x = sym.Variable("data")
    c1 = sym.Convolution(x, kernel=(5, 5), num_filter=4, name="c1")
    p1 = sym.Pooling(sym.Activation(c1, act_type="tanh"), kernel=(2, 2), stride=(2, 2),
                     pool_type="max")
    c2 = sym.Convolution(p1, kernel=(3, 3), num_filter=6, name="c2")
    p2 = sym.Pooling(sym.Activation(c2, act_type="relu"), kernel=(2, 2), stride=(2, 2),
                     pool_type="avg")
    fc = sym.FullyConnected(sym.flatten(p2), num_hidden=5, name="fc")
    return sym.SoftmaxOutput(fc, name="softmax")


def _lenet_torch(x, w1, b1, w2, b2, w3, b3):
    h = F.max_pool2d(torch.tanh(F.conv2d(x, w1, b1)), 2, 2)
    h = F.avg_pool2d(torch.relu(F.conv2d(h, w2, b2)), 2, 2)
    return torch.softmax(F.linear(h.flatten(1), w3, b3), dim=1)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_lenet_forward_backward(dtype, monkeypatch):
    """Every argument, gradient and output of a LeNet in the data's dtype, against torch
    in float64 (the SoftmaxOutput gradient: softmax minus the one-hot label)."""
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cpu")
    s = _lenet()
    exe = s.simple_bind(cpu(), data=(4, 1, 16, 16), type_dict={"data": dtype})
    gen = torch.Generator().manual_seed(7)
    names = ["data", "c1_weight", "c1_bias", "c2_weight", "c2_bias", "fc_weight", "fc_bias"]
    vals = {}
    for n in names:
        a = exe.arg_dict[n]
        assert torch_dtype(a) == getattr(torch, dtype), f"{n}: {a.dtype}"
        v = (torch.randn(tuple(a.shape), generator=gen) * 0.3).to(torch_dtype(a))
        a[:] = v
        vals[n] = v.double().requires_grad_(n != "data")
    label = torch.tensor([0, 3, 1, 4])
    exe.arg_dict["softmax_label"][:] = label.to(torch_dtype(exe.arg_dict["softmax_label"]))
    (out,) = exe.forward(is_train=True)
    exe.backward()
    want = _lenet_torch(*(vals[n] for n in names))
    assert torch_dtype(out) == getattr(torch, dtype)
    rtol, atol = TOLERANCE[dtype]
    assert float((out.double() - want.detach()).abs().max()) <= atol + rtol
    loss = -(want[torch.arange(4), label].log()).sum()
    grads = torch.autograd.grad(loss, [vals[n] for n in names[1:]])
    for n, g in zip(names[1:], grads):
        got = exe.grad_dict[n]
        assert torch_dtype(got) == getattr(torch, dtype), n
        scale = max(float(g.abs().max()), 1.0)
        err = float((got.double() - g).abs().max())
        # float16: a gradient goes through several kernels' stores of the dtype
        bound = (atol + rtol * scale) * (4 if dtype == "float16" else 1)
        assert err <= bound, f"d/d{n}: error {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_max_pool_gradient_routes_past_low_precision_integers(dtype, monkeypatch):
    """Max pooling's hidden mask holds window positions in float32 under float16 /
    bfloat16 data (their 11 / 8 significant bits would round the cpu target's positions
    in a 48 x 48 plane, past 2048 / 256): the gradient still reaches each window's
    maximum."""
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cpu")
    s = sym.Pooling(sym.Variable("x"), kernel=(2, 2), stride=(2, 2), pool_type="max",
                    name="pool")
    exe = s.simple_bind(cpu(), x=(1, 2, 48, 48), type_dict={"x": dtype})
    gen = torch.Generator().manual_seed(3)
    # each window a permutation of 0, 1, 2, 3: exact in every dtype, no ties
    perm = torch.argsort(torch.rand(1, 2, 24, 24, 4, generator=gen), dim=-1).double()
    x = perm.reshape(1, 2, 24, 24, 2, 2).permute(0, 1, 2, 4, 3, 5).reshape(1, 2, 48, 48)
    exe.arg_dict["x"][:] = x.to(getattr(torch, dtype))
    (y,) = exe.forward(is_train=True)
    dy = torch.rand(1, 2, 24, 24, generator=gen)
    exe.backward([dy.to(torch_dtype(y))])
    xr = x.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(F.max_pool2d(xr, 2, 2), xr, dy.to(torch_dtype(y)).double())
    assert torch.equal(exe.grad_dict["x"].double(), want)
    assert torch.equal(y.double(), F.max_pool2d(x, 2, 2))


def test_float16_conv_kernel_dots_float16_operands():
    """The Triton convolution loads float16 operand tiles and dots them as they are
    (tensor cores on a GPU), accumulating in float32; its pointers line names the dtypes."""
    from compiler.artifacts.cache import kernel_path
    from compiler.artifacts.compile import compile_symbol
    s = sym.Convolution(sym.Variable("x"), kernel=(3, 3), num_filter=8, no_bias=True,
                        name="conv")
    prog = compile_symbol(s, {"x": (2, 4, 8, 8)}, False, {}, False, "interpret",
                          {"x": "float16"})
    srcs = [open(kernel_path(ln.kernel)).read() for ln in prog.launches]
    src = next(t for t in srcs if "implicit-GEMM" in t)
    assert "# dot operands: float16" in src
    assert "acc += tl.dot(a, b)" in src
    assert "# pointers: float16 float16 float16" in src
    assert "acc = tl.zeros((BM, BN), dtype=tl.float32)" in src


@pytest.mark.parametrize("dtype,target", [("float16", "cpu"), ("float64", "cpu"),
                                          ("float16", "interpret")])
def test_roi_pooling_dtypes(dtype, target, monkeypatch):
    """ROIPooling's forward and data gradient in the data's dtype (rois too, as mxnet
    types them), against mxnet's loops transcribed in ``test_ops_pool``; a maximum is
    one of the data's values, so the forward is exact in any dtype."""
    from tests.compiler.test_ops_pool import _ROIS, _roi_oracle
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    dshape, pooled, scale = (2, 3, 7, 9), (3, 2), 0.9
    s = sym.ROIPooling(sym.Variable("data"), sym.Variable("rois"), pooled_size=pooled,
                       spatial_scale=scale)
    exe = s.simple_bind(cpu(), grad_req={"data": "write", "rois": "null"}, data=dshape,
                        rois=(len(_ROIS), 5), type_dict={"data": dtype})
    torch_dt = getattr(torch, dtype)
    assert torch_dtype(exe.arg_dict["rois"]) == torch_dt
    gen = torch.Generator().manual_seed(11)
    data = torch.randn(dshape, generator=gen).to(torch_dt)
    # rois representable in the dtype, so the oracle sees the same corners
    rois = torch.tensor(_ROIS).to(torch_dt)
    exe.arg_dict["data"][:] = data
    exe.arg_dict["rois"][:] = rois
    (out,) = exe.forward(is_train=True)
    xd = data.double().requires_grad_(True)
    want = _roi_oracle(xd, rois.double(), pooled, scale)
    assert torch_dtype(out) == torch_dt
    assert torch.equal(out.double(), want.detach())
    dy = torch.randn(tuple(want.shape), generator=gen).to(torch_dt)
    exe.backward([dy])
    (dx,) = torch.autograd.grad((want * dy.double()).sum(), xd)
    rtol, atol = TOLERANCE[dtype]
    got = exe.grad_dict["data"]
    assert torch_dtype(got) == torch_dt
    assert float((got.double() - dx).abs().max()) <= atol + rtol * float(dx.abs().max())
