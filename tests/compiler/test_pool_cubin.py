"""Every pooling kernel compiles to cubin for cuda:90 with its GPU tiles, spilling nothing.

No GPU is needed (``compiler/triton/cubin.py`` runs Triton's GPU compiler and ptxas in worker
processes). Compiled: the forward and data-gradient kernels of a small network (max,
avg with and without count_include_pad, sum and Lp pooling; 1-D, 2-D and 3-D; padding
and the full convention; global pooling; ROIPooling) and of LeNet's two max-pools at the
benchmark's size (2x2, stride 2, on (64, 20, 24, 24) and (64, 50, 8, 8)), each with the
``Launch.config`` a cuda:90 Program gives it. The kernels describe themselves as
pointwise over the flat output (or data), so the configuration ``cubin.gpu_config``
re-derives from their source must be the launch's own. Last, the same kernels run in
the interpreter with those GPU tiles (several programs) and give the whole-tile results.
"""
import os

import numpy as np
import pytest
import torch

from compiler.artifacts import cache
from compiler.triton import cubin
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol

TARGET = "cuda:90"
WORKERS = max(1, min(4, os.cpu_count() or 1))


def _small():
    x = sym.Variable("data")
    a = sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max",
                    pooling_convention="full")
    b = sym.Pooling(x, kernel=(3, 2), stride=(2, 1), pad=(1, 1), pool_type="avg",
                    count_include_pad=False)
    c = sym.Pooling(x, kernel=(2, 2), pool_type="sum")
    d = sym.Pooling(x, kernel=(2, 2), pool_type="lp", p_value=2)
    e = sym.Pooling(x, pool_type="avg", global_pool=True)
    s = sym.Pooling(sym.Variable("seq"), kernel=(3,), stride=(2,), pool_type="max")
    v = sym.Pooling(sym.Variable("vol"), kernel=(2, 2, 2), stride=(2, 2, 2), pad=(1, 0, 1),
                    pool_type="avg")
    r = sym.ROIPooling(x, sym.Variable("rois"), pooled_size=(2, 3), spatial_scale=0.5)
    loss = sym.MakeLoss(sum(sym.sum(t * t) for t in (a, b, c, d, e, s, v, r)))
    return loss, {"data": (2, 3, 9, 9), "seq": (3, 5, 11), "vol": (1, 3, 4, 5, 5),
                  "rois": (4, 5)}, ("rois",)


def _lenet():
    """LeNet's max-pools (mxnet's symbols/lenet.py) at batch 64 on 28x28 images."""
    p1 = sym.Pooling(sym.Variable("c1"), kernel=(2, 2), stride=(2, 2), pool_type="max")
    p2 = sym.Pooling(sym.Variable("c2"), kernel=(2, 2), stride=(2, 2), pool_type="max")
    loss = sym.MakeLoss(sym.sum(p1 * p1) + sym.sum(p2 * p2))
    return loss, {"c1": (64, 20, 24, 24), "c2": (64, 50, 8, 8)}, ()


MODELS = {"small": _small, "lenet": _lenet}


def _pool_launches(name):
    net, shapes, no_grad = MODELS[name]()
    req = {a: ("null" if a in no_grad else "write") for a in net.list_arguments()}
    seen, out = set(), []
    for prog in (compile_symbol(net, shapes, True, req, True, TARGET),
                 compile_symbol(net, shapes, False, {}, False, TARGET)):
        for ln in prog.launches:
            if "pooling" in ln.summary.lower() and ln.kernel not in seen:
                seen.add(ln.kernel)
                out.append(ln)
    return out


def _source(kernel_hash):
    with open(cache.kernel_path(kernel_hash)) as f:
        return f.read()


@pytest.mark.parametrize("model", list(MODELS))
def test_pool_kernels_compile_without_spills(model):
    launches = _pool_launches(model)
    kinds = {w for ln in launches for w in ("forward", "data gradient") if w in ln.summary}
    assert kinds == {"forward", "data gradient"}, kinds
    if model == "lenet":   # per shape: forward with the mask (training), without, gradient
        assert len(launches) == 6
    results = cubin.compile_many([(ln.kernel, TARGET, ln.config) for ln in launches],
                                 workers=WORKERS)
    failures = [str(r) for r in results if isinstance(r, Exception)]
    assert not failures, "\n".join(failures)
    for ln, r in zip(launches, results):
        print(f"  regs={r['n_regs']:>3} spills={r['n_spills']} BM={r['config']['BM']} "
              f"warps={r['config']['num_warps']}  {ln.summary[:110]}")
        assert r["cubin"][:4] == b"\x7fELF" and r["name"] == "kernel"
        assert r["n_spills"] == 0, f"{ln.summary} spills {r['n_spills']} bytes a thread"
        assert 0 < r["n_regs"] <= 255


@pytest.mark.parametrize("model", list(MODELS))
def test_pool_gpu_config_rederived_from_source(model):
    for ln in _pool_launches(model):
        derived = cubin.gpu_config(_source(ln.kernel), TARGET)
        for k in ("BM", "BN", "BK", "num_warps", "num_stages"):
            assert derived[k] == ln.config[k], (ln.summary, k, derived, ln.config)


def test_gpu_tiles_give_the_interpreters_results(monkeypatch):
    """The kernels with cuda:90's tiles (several programs: the ROI scan's trip counts are
    per program) run in the interpreter and give the whole-tile results."""
    from tests.compiler.test_gpu_tiles import _bind, _step, _with_gpu_tiles
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "interpret")
    x = sym.Variable("data")
    a = sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pooling_convention="full")
    b = sym.Pooling(x, kernel=(2, 3), stride=(1, 2), pool_type="avg", pad=(1, 1),
                    count_include_pad=False)
    r = sym.ROIPooling(x, sym.Variable("rois"), pooled_size=(3, 3), spatial_scale=0.5)
    net = sym.MakeLoss(sym.sum(a * a) + sym.sum(b * b) + sym.sum(r * r))
    shapes = {"data": (2, 3, 30, 30), "rois": (40, 5)}
    gen = torch.Generator().manual_seed(5)
    rois = torch.cat([torch.randint(0, 2, (40, 1), generator=gen).float(),
                      torch.rand(40, 2, generator=gen) * 40,
                      torch.rand(40, 2, generator=gen) * 40 + 10], 1)
    runs = []
    for tiled in (False, True):
        exe = _bind(net, shapes)
        exe.arg_dict["rois"][:] = rois
        if tiled:
            launches = _with_gpu_tiles(exe, TARGET)
            assert any(c["grid"][0] > 1 for _, _, c in launches)
        runs.append(_step(exe))
    (out_w, grads_w), (out_t, grads_t) = runs
    for u, v in zip(out_w, out_t):
        np.testing.assert_allclose(v, u, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grads_t["data"], grads_w["data"], rtol=1e-6, atol=1e-6)
