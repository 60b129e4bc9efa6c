"""The kernels a GPU runs, with the tiles a GPU gets, checked in Triton's interpreter.

A kernel's source does not depend on its tiles, so the interpreter can run a
Program's kernels with the ``cuda:90`` / ``cuda:80`` configuration
(compiler/ir/tiles.py) instead of its own whole-array tiles: rows then loop over
several column chunks, online softmax rescales across chunks, and batched
matmuls fold their batch into grid axis 0. Each result must equal the one
with the interpreter's tiles and torch's. Also: the issue's large cases in
the interpreter (a sum over 2,097,152 elements, a softmax over 33,278
columns), and sums of matmuls that share one accumulator.
"""
import copy

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.artifacts import cache
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from compiler.ir.tiles import MAX_TILE_NUMEL, tile_config


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "interpret")


def _bind(net, shapes, seed=0):
    exe = net.simple_bind(mx.cpu(), **shapes)
    gen = torch.Generator().manual_seed(seed)
    for name, arr in exe.arg_dict.items():
        if name.endswith("label"):
            arr[:] = torch.randint(0, arr.shape[-1] if arr.ndim > 1 else 7, tuple(arr.shape),
                                   generator=gen).float()
        else:
            arr[:] = torch.randn(tuple(arr.shape), generator=gen)
    return exe


def _with_gpu_tiles(exe, target):
    """Swap the executor's Programs for copies whose launches carry ``target``'s tiles;
    return ``(kind, N, config)`` of each Triton launch."""
    seen, shapes = {}, []
    for attr in ("_train_prog", "_infer_prog"):
        prog = getattr(exe, attr)
        if prog is None:
            continue
        if id(prog) not in seen:
            new = copy.deepcopy(prog)
            for ln in new.launches:
                with open(cache.kernel_path(ln.kernel)) as f:
                    source = f.read()
                if "@triton.jit" not in source:
                    continue
                ln.config = _gpu_config(source, ln.config, target)
                if "BN" in ln.config:
                    from compiler.triton.cubin import source_shape
                    sh = source_shape(source)
                    shapes.append((sh["kind"], sh["N"], ln.config))
            seen[id(prog)] = new
        setattr(exe, attr, seen[id(prog)])
    exe._bound.clear()
    exe._buffers.clear()
    return shapes


def _gpu_config(source, interp_cfg, target):
    from compiler.triton.cubin import declared_signature, source_shape
    if declared_signature(source) is not None:
        return interp_cfg
    s = source_shape(source)
    batch = 1
    if "gb = pid // tiles" in source:   # a batched matmul: keep the interpreter's batch count
        m, n = s["M"], s["N"]
        per = -(-m // interp_cfg["BM"]) * -(-n // interp_cfg["BN"])
        batch = interp_cfg["grid"][0] // per
    return tile_config(s["kind"], s["M"], s["N"], s["K"], target, s["reduce_cols"], batch)


def _step(exe, out_grads=None):
    exe.forward(is_train=True)
    exe.backward(out_grads)
    return [o.asnumpy().copy() for o in exe.outputs], \
        {n: g.asnumpy().copy() for n, g in exe.grad_dict.items()}


def _softmax_family():
    x = sym.Variable("x")
    a = sym.softmax(x, axis=-1)
    b = sym.log_softmax(x, axis=-1)
    return sym.MakeLoss(sym.sum(a * b) + sym.sum(sym.max(x, axis=1)) + sym.sum(sym.mean(x * x, axis=1))), \
        {"x": (3, 5000)}


def _softmax_output():
    x = sym.Variable("data")
    h = sym.FullyConnected(x, num_hidden=4100, name="fc")
    return sym.SoftmaxOutput(h, name="softmax"), {"data": (5, 24), "softmax_label": (5,)}


def _column_sums():
    x = sym.Variable("x")
    return sym.MakeLoss(sym.sum(sym.sum(x, axis=0) * sym.min(x, axis=0)) +
                        sym.sum(sym.sqrt(sym.sum(x * x, axis=1)))), {"x": (3000, 7)}


def _batched_and_summed_matmuls():
    a, b = sym.Variable("a"), sym.Variable("b")
    w = sym.Variable("w")
    y = sym.batch_dot(a, b)
    # one weight read at three steps: its gradient is a sum of three matmuls
    steps = sym.SliceChannel(sym.Variable("s"), num_outputs=3, axis=1, squeeze_axis=True)
    z = sum(sym.sum(sym.tanh(sym.FullyConnected(steps[t], weight=w, num_hidden=40,
                                                 no_bias=True, name=f"fc{t}")))
            for t in range(3))
    return sym.MakeLoss(sym.sum(y * y) + z), {"a": (70, 9, 20), "b": (70, 20, 33),
                                              "s": (20, 3, 30), "w": (40, 30)}


CASES = {"softmax_family": _softmax_family, "softmax_output": _softmax_output,
         "column_sums": _column_sums, "batched_and_summed_matmuls": _batched_and_summed_matmuls}


@pytest.mark.parametrize("target", ["cuda:90", "cuda:80"])
@pytest.mark.parametrize("case", list(CASES))
def test_gpu_tiles_give_the_interpreters_results(case, target):
    net, shapes = CASES[case]()
    whole = _bind(net, shapes)
    tiled = _bind(net, shapes)
    launches = _with_gpu_tiles(tiled, target)
    if case == "batched_and_summed_matmuls":   # 70 batches fold into grid axis 0
        assert any(k == "matmul" and c["grid"][0] >= 70 and c["grid"][1] == 1
                   for k, _, c in launches)
    else:                                     # some row really loops over chunks
        assert any(k == "reduce" and c["BN"] < n for k, n, c in launches), launches
    out_w, grads_w = _step(whole)
    out_t, grads_t = _step(tiled)
    for a, b in zip(out_w, out_t):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-5)
    for n in grads_w:
        np.testing.assert_allclose(grads_t[n], grads_w[n], rtol=2e-4, atol=1e-4, err_msg=n)


def test_gpu_tiles_loop_over_long_rows():
    """The softmax case really loops on a GPU: 5,000 columns in chunks of 2,048."""
    cfg = tile_config("reduce", 3, 5000, 0, "cuda:90")
    assert cfg["BN"] == 2048 and cfg["BM"] == 1 and cfg["grid"] == [3, 1]
    cfg80 = tile_config("reduce", 3, 5000, 0, "cuda:80")
    assert cfg80["BN"] == 1024


def test_sum_over_two_million_elements_in_the_interpreter():
    """MakeLoss(sum(x*x)) on (2048, 1024): the tile is capped at Triton's 2**20 elements
    and the row loops (it failed with 'numel exceeds triton maximum tensor numel')."""
    x = sym.Variable("x")
    net = sym.MakeLoss(sym.sum(x * x))
    exe = net.simple_bind(mx.cpu(), x=(2048, 1024))
    data = torch.randn(2048, 1024, generator=torch.Generator().manual_seed(1))
    exe.arg_dict["x"][:] = data
    exe.forward(is_train=True)
    exe.backward()
    ref = (data.double() ** 2).sum()
    assert float(exe.outputs[0].asnumpy().ravel()[0]) == pytest.approx(float(ref), rel=1e-5)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * data.numpy(), rtol=1e-6)
    for ln in exe._train_prog.launches:
        assert ln.config["BM"] * ln.config["BN"] <= MAX_TILE_NUMEL


def test_softmax_over_33278_columns_in_the_interpreter():
    x = sym.Variable("x")
    net = sym.MakeLoss(sym.sum(sym.softmax(x, axis=-1) * sym.Variable("w")))
    exe = net.simple_bind(mx.cpu(), x=(3, 33278), w=(3, 33278))
    gen = torch.Generator().manual_seed(2)
    xs, ws = torch.randn(3, 33278, generator=gen) * 4, torch.randn(3, 33278, generator=gen)
    exe.arg_dict["x"][:] = xs
    exe.arg_dict["w"][:] = ws
    exe.forward(is_train=True)
    exe.backward()
    xr = xs.double().requires_grad_()
    loss = (torch.softmax(xr, -1) * ws.double()).sum()
    loss.backward()
    assert float(exe.outputs[0].asnumpy().ravel()[0]) == pytest.approx(float(loss), rel=1e-5,
                                                                      abs=1e-6)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), xr.grad.numpy(), rtol=1e-4,
                               atol=1e-9)


def test_summed_matmuls_share_one_accumulator():
    """dW = sum_t dG_t^T X_t over 12 steps: one zeroed accumulator, not twelve."""
    steps = sym.SliceChannel(sym.Variable("s"), num_outputs=12, axis=1, squeeze_axis=True)
    w = sym.Variable("w")
    h = sym.Variable("h0")
    for t in range(12):   # a recurrence, so the per-step matmuls stay per step
        h = sym.tanh(sym.FullyConnected(steps[t], weight=w, num_hidden=8, no_bias=True) + h)
    net = sym.MakeLoss(sym.sum(h))
    prog = compile_symbol(net, {"s": (4, 12, 8), "w": (8, 8), "h0": (4, 8)}, True,
                          {"s": "null", "w": "write", "h0": "null"}, True, "interpret")
    sources = []
    for ln in prog.launches:
        with open(cache.kernel_path(ln.kernel)) as f:
            sources.append(f.read())
    summed = [s for s in sources if s.count("tl.dot(") >= 12]
    assert summed, "the weight gradient's matmuls were not fused into one kernel"
    for s in summed:
        assert s.count("tl.zeros((BM, BN)") == 1, s
