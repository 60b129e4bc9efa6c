"""Every convolution kernel compiles to cubin for cuda:90 with its GPU tiles, spilling nothing.

No GPU is needed (``compiler/triton/cubin.py`` runs Triton's GPU compiler and ptxas in worker
processes). Compiled: training and inference Programs of a small network (grouped,
depthwise, dilated, 1-D and 3-D convolutions and Deconvolutions, BatchNorm and
activation epilogues fused into the convolutions' kernels) and of LeNet's
convolutions at the benchmark's size (batch 64, 28x28, 5x5 kernels with 20 and 50
filters), every kernel with the ``Launch.config`` a cuda:90 Program gives it. The
implicit-GEMM kernels describe themselves as matmuls over (M, N) with a K loop, so the
configuration ``cubin.gpu_config`` re-derives from their source (what the session's
kernel sweep compiles) must be the launch's own.
"""
import os
import re

import pytest

from compiler.artifacts import cache
from compiler.triton import cubin
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol

TARGET = "cuda:90"
WORKERS = max(1, min(4, os.cpu_count() or 1))


def _small():
    x = sym.Variable("data")
    y = sym.Convolution(x, kernel=(3, 3), num_filter=8, pad=(1, 1), stride=(2, 2), name="c1")
    y = sym.BatchNorm(y, fix_gamma=False, name="bn")     # inference: the conv's epilogue
    y = sym.Activation(y, act_type="relu")
    y = sym.Convolution(y, kernel=(3, 3), num_filter=8, pad=(2, 2), dilate=(2, 2),
                        num_group=8, no_bias=True, name="dw")
    y = sym.Convolution(y, kernel=(1, 1), num_filter=6, num_group=2, name="pw")
    y = sym.Deconvolution(y, kernel=(4, 4), num_filter=3, stride=(2, 2), pad=(1, 1),
                          no_bias=False, name="up")
    z = sym.Convolution(sym.Variable("seq"), kernel=(5,), num_filter=4, pad=(2,), name="c1d")
    v = sym.Convolution(sym.Variable("vol"), kernel=(3, 3, 3), num_filter=2, pad=(1, 1, 1),
                        stride=(2, 1, 1), name="c3d")
    v = sym.Deconvolution(v, kernel=(2, 2, 2), num_filter=2, stride=(2, 2, 2), name="up3d")
    loss = sym.MakeLoss(sym.sum(y * y) + sym.sum(z * z) + sym.sum(v * v))
    return loss, {"data": (2, 3, 9, 9), "seq": (3, 5, 11), "vol": (1, 3, 4, 5, 5)}, ()


def _lenet():
    """LeNet's convolutions as in mxnet's symbols/lenet.py, batch 64 on 28x28 images."""
    x = sym.Variable("data")
    y = sym.Convolution(x, kernel=(5, 5), num_filter=20, name="conv1")
    y = sym.Activation(y, act_type="tanh")
    y = sym.Convolution(y, kernel=(5, 5), num_filter=50, name="conv2")
    y = sym.Activation(y, act_type="tanh")
    loss = sym.MakeLoss(sym.sum(y * y))
    return loss, {"data": (64, 1, 28, 28)}, ("data",)


MODELS = {"small": _small, "lenet": _lenet}


def _conv_launches(name):
    net, shapes, no_grad = MODELS[name]()
    req = {a: ("null" if a in no_grad else "write") for a in net.list_arguments()}
    progs = [compile_symbol(net, shapes, True, req, True, TARGET),
             compile_symbol(net, shapes, False, {}, False, TARGET)]
    seen, out = set(), []
    for prog in progs:
        for ln in prog.launches:
            if "implicit-GEMM" in ln.summary and ln.kernel not in seen:
                seen.add(ln.kernel)
                out.append(ln)
    return out


def _source(kernel_hash):
    with open(cache.kernel_path(kernel_hash)) as f:
        return f.read()


@pytest.mark.parametrize("model", list(MODELS))
def test_conv_kernels_compile_without_spills(model):
    launches = _conv_launches(model)
    modes = {mode for ln in launches for mode in ("forward", "data gradient", "weight gradient")
             if mode in ln.summary}
    assert modes == {"forward", "data gradient", "weight gradient"}, modes
    fused = re.compile(r"= (_tanh\(v\d+\)|tl\.maximum\(v\d+, 0\.0(, propagate_nan=[\w.]+)?\))")
    assert any(fused.search(_source(ln.kernel)) for ln in launches), \
        "no convolution kernel with a fused activation"
    results = cubin.compile_many([(ln.kernel, TARGET, ln.config) for ln in launches],
                                 workers=WORKERS)
    failures = [str(r) for r in results if isinstance(r, Exception)]
    assert not failures, "\n".join(failures)
    for ln, r in zip(launches, results):
        print(f"  regs={r['n_regs']:>3} spills={r['n_spills']} BM={r['config']['BM']} "
              f"BN={r['config']['BN']} BK={r['config']['BK']}  {ln.summary[:100]}")
        assert r["cubin"][:4] == b"\x7fELF" and r["name"] == "kernel"
        assert r["n_spills"] == 0, f"{ln.summary} spills {r['n_spills']} bytes a thread"
        assert 0 < r["n_regs"] <= 255


@pytest.mark.parametrize("model", list(MODELS))
def test_conv_gpu_config_rederived_from_source(model):
    for ln in _conv_launches(model):
        derived = cubin.gpu_config(_source(ln.kernel), TARGET)
        for k in ("BM", "BN", "BK", "num_warps", "num_stages"):
            assert derived[k] == ln.config[k], (ln.summary, k, derived, ln.config)
