"""Low-precision matmuls reach the tensor cores: the cuda:90 SASS of a network's matmul
kernels, per dtype, holds tensor-core instructions, and nothing spills.

No GPU is needed: ``compiler/triton/cubin.py`` compiles the generated kernels with Triton and
ptxas and reads the machine code back with ``cuobjdump -sass``. The network is an MLP's
training step (forward, data and weight gradients: plain, transposed-A and
transposed-B matmuls). float16 and bfloat16 operands go to ``tl.dot`` as they are
(HMMA / HGMMA with float32 accumulation), float64 makes DMMA, and float32 stays on the
FMA pipes unless mxnet's tensor-core conversion switch asks for TF32.
"""
import os

import pytest

from compiler.triton import cubin
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol

TARGET = "cuda:90"
WORKERS = max(1, min(4, os.cpu_count() or 1))


def _mlp():
    x = sym.Variable("data")
    y = sym.Activation(sym.FullyConnected(x, num_hidden=256, name="fc1"), act_type="relu")
    y = sym.FullyConnected(y, num_hidden=128, name="fc2")
    return sym.LinearRegressionOutput(y, sym.Variable("label"), name="out")


def _matmul_sass(dtype, target=TARGET):
    net = _mlp()
    req = {a: ("null" if a in ("data", "label") else "write") for a in net.list_arguments()}
    prog = compile_symbol(net, {"data": (128, 512), "label": (128, 128)}, True, req, True,
                          target, {"data": dtype, "label": dtype})
    launches = list({ln.kernel: ln for ln in prog.launches
                     if ln.summary.startswith("matmul")}.values())
    assert len(launches) >= 4, [ln.summary for ln in prog.launches]
    results = cubin.compile_many([(ln.kernel, target, dict(ln.config, aligned=cubin.launch_alignment(ln)))
                                  for ln in launches], workers=WORKERS)
    failures = [str(r) for r in results if isinstance(r, Exception)]
    assert not failures, "\n".join(failures)
    out = []
    for ln, r in zip(launches, results):
        assert r["n_spills"] == 0, f"{dtype} {ln.summary} spills {r['n_spills']} bytes"
        out.append((ln, r, cubin.tensor_core_instructions(cubin.sass(r["cubin"]))))
    return out


@pytest.mark.parametrize("dtype,target,wanted", [("float16", TARGET, ("HGMMA",)),
                                                 ("bfloat16", TARGET, ("HGMMA",)),
                                                 ("float16", "cuda:80", ("HMMA",)),
                                                 ("float64", TARGET, ("DMMA",))])
def test_matmuls_use_tensor_cores(dtype, target, wanted):
    for ln, r, mma in _matmul_sass(dtype, target):
        forms = sorted(mma)
        print(f"  {dtype} {target} regs={r['n_regs']} {forms} {ln.summary[:60]}")
        assert any(f.startswith(wanted) for f in mma), \
            f"{dtype} matmul without {wanted} instructions: {forms} ({ln.summary})"
        if dtype != "float64":      # float32 accumulation: the .F32 forms
            assert all(".F32" in f for f in mma), forms


def test_float32_is_ieee_unless_mxnet_allows_conversion(monkeypatch):
    for _, _, mma in _matmul_sass("float32"):
        assert not mma, f"float32 matmuls should stay off the tensor cores (ieee): {mma}"
    monkeypatch.setenv("MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION", "1")
    for ln, _, mma in _matmul_sass("float32"):
        assert any("TF32" in f or f.startswith("HGMMA") for f in mma), (ln.summary, mma)


def test_float16_convolutions_use_tensor_cores():
    """A float16 convolution's training step (forward, data and weight gradients: the
    three implicit GEMMs of ``compiler/triton/conv.py``) dots float16 tiles: HGMMA or
    HMMA with float32 accumulation on cuda:90, no spills."""
    x = sym.Variable("data")
    c = sym.Convolution(x, kernel=(3, 3), num_filter=64, pad=(1, 1), name="conv")
    net = sym.LinearRegressionOutput(sym.Activation(c, act_type="relu"), sym.Variable("label"),
                                     name="out")
    req = {a: ("null" if a == "label" else "write") for a in net.list_arguments()}
    prog = compile_symbol(net, {"data": (8, 32, 16, 16), "label": (8, 64, 16, 16)}, True, req,
                          True, TARGET, {"data": "float16", "label": "float16"})
    launches = list({ln.kernel: ln for ln in prog.launches
                     if "implicit-GEMM" in ln.summary}.values())
    assert len(launches) == 3, [ln.summary for ln in prog.launches]
    results = cubin.compile_many([(ln.kernel, TARGET, dict(ln.config, aligned=cubin.launch_alignment(ln)))
                                  for ln in launches], workers=WORKERS)
    failures = [str(r) for r in results if isinstance(r, Exception)]
    assert not failures, "\n".join(failures)
    for ln, r in zip(launches, results):
        mma = cubin.tensor_core_instructions(cubin.sass(r["cubin"]))
        print(f"  float16 conv regs={r['n_regs']} {sorted(mma)} {ln.summary[:70]}")
        assert r["n_spills"] == 0, f"{ln.summary} spills {r['n_spills']} bytes"
        assert mma and all(f.startswith(("HGMMA", "HMMA")) and ".F32" in f for f in mma), \
            (ln.summary, sorted(mma))
