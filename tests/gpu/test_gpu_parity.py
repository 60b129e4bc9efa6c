"""The GPU test mode: ``make test-gpu`` (``SYMTRITON_TEST_GPU=1``) on a machine with a
CUDA device and a CUDA build of torch.

Everything here runs the same work on ``gpu(0)`` (Triton kernels compiled for the
device) and on ``cpu(0)`` (the cpu target's ATen calls, which the rest of the suite
checks against torch, finite differences and mxnet fixtures) and compares: the
operator table (and its float16 / bfloat16 / float64 version against torch), an Executor, Module training, BucketingModule training of the
bucketed LSTM, several GPUs, Dropout's on-device masks, and an ahead-of-time
directory that a GPU process runs with zero Triton compiles. Without the mode (or
without a device) every test here is skipped with that reason.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

GPU_MODE = os.environ.get("SYMTRITON_TEST_GPU", "0") not in ("", "0")
pytestmark = pytest.mark.skipif(
    not (GPU_MODE and torch.cuda.is_available()),
    reason="GPU test mode: run `make test-gpu` (SYMTRITON_TEST_GPU=1) on a machine with a "
           "CUDA device and a CUDA build of torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL, ATOL = 1e-4, 1e-5       # fp32 IEEE matmuls on both sides; only summation order differs


def _close(got, want, what, rtol=RTOL, atol=ATOL):
    got = torch.as_tensor(got).detach().float().cpu()
    want = torch.as_tensor(want).detach().float().cpu()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    err = (got - want).abs().max().item() if got.numel() else 0.0
    assert torch.allclose(got, want, rtol=rtol, atol=atol), f"{what}: max abs error {err:.3g}"


def _table_params():
    """Every row of every operator table: ``OPS`` of test_ops_compiled.py and the
    ``ROWS`` of each operator family's test_ops_*.py (ids of the latter start with the
    family's file name)."""
    from tests.compiler.test_ops_after_views import _tables
    from tests.compiler.test_ops_compiled import OPS
    main = {id(op) for op in OPS}
    return [pytest.param(op, op.shapes[i],
                         id=f"{op.name}-{i}" if id(op) in main else f"family-{op.name}-{i}")
            for op in _tables() for i in range(min(2, len(op.shapes)))]


@pytest.mark.parametrize("op,shapes", _table_params() if GPU_MODE else [])
def test_operator_table_on_gpu_matches_cpu(op, shapes):
    """Every row of the operator table: forward (training and inference) and every
    input gradient on gpu(0) equal the cpu target's."""
    from compiler import symbol as sym
    from runtime.context import cpu, gpu
    from tests.compiler.test_ops_compiled import _make, _seed

    gen = torch.Generator().manual_seed(_seed(op.name, shapes))
    vars_ = [sym.Variable(n) for n in op.inputs]
    s = op.build(*vars_, shapes=shapes) if op.needs_shapes else op.build(*vars_)
    values = {n: _make(op.gen.get(n, "randn"), shp, gen) for n, shp in zip(op.inputs, shapes)}
    diff = [n for n in op.inputs if n not in op.nograd] if op.grad else []
    grad_req = {n: "write" if n in diff else "null" for n in s.list_arguments()}
    exes = {}
    for name, ctx in (("cpu", cpu(0)), ("gpu", gpu(0))):
        exe = s.simple_bind(ctx, grad_req=grad_req, **dict(zip(op.inputs, shapes)))
        for n, v in values.items():
            exe.arg_dict[n][:] = v
        aux_gen = torch.Generator().manual_seed(_seed(op.name, "aux"))
        for n in s.list_auxiliary_states():
            exe.aux_dict[n][:] = _make(op.aux[n], tuple(exe.aux_dict[n].shape), aux_gen)
        exes[name] = exe
    outs = {k: [o.clone() for o in e.forward(is_train=True)] for k, e in exes.items()}
    for i, (g, c) in enumerate(zip(outs["gpu"], outs["cpu"])):
        _close(g, c, f"{op.name}{shapes} forward output {i}")
    if diff:
        ograds = None if op.mx_grad is not None else \
            [torch.randn(tuple(o.shape), generator=gen) for o in outs["cpu"]]
        for k, e in exes.items():
            e.backward(ograds)
        for n in diff:
            _close(exes["gpu"].grad_dict[n], exes["cpu"].grad_dict[n], f"{op.name} d/d{n}")
    if op.infer:
        inf = {k: e.forward(is_train=False) for k, e in exes.items()}
        for i, (g, c) in enumerate(zip(inf["gpu"], inf["cpu"])):
            _close(g, c, f"{op.name}{shapes} inference output {i}")


def _dtype_params():
    from tests.compiler.test_ops_dtypes import _rows
    return [p for p in _rows() if p.values[2] == "cpu"]


@pytest.mark.parametrize("op,dtype,target", _dtype_params() if GPU_MODE else [])
def test_operator_table_dtypes_on_gpu(op, dtype, target, monkeypatch):
    """The float16 / bfloat16 / float64 operator table (tests/compiler/test_ops_dtypes.py)
    on gpu(0): real tensor-core matmuls, rounded stores, against the same float64 torch
    reference and tolerances as the cpu target."""
    import tests.compiler.test_ops_dtypes as table
    from runtime.context import gpu
    monkeypatch.setattr(table, "cpu", lambda: gpu(0))
    table.check_dtype(op, dtype)


def _mlp():
    import module_api as mx
    data = mx.sym.Variable("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=64, name="fc1"), act_type="relu")
    h = mx.sym.Activation(mx.sym.FullyConnected(h, num_hidden=32, name="fc2"), act_type="tanh")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=10, name="fc3"),
                                name="softmax")


def _train(contexts, steps=5, batch=32):
    """Params after ``steps`` SGD-momentum steps of the MLP from one fixed start."""
    import module_api as mx
    torch.manual_seed(0)
    x = torch.randn(batch, 50)
    y = torch.randint(0, 10, (batch,)).float()
    mod = mx.mod.Module(_mlp(), context=contexts)
    mod.bind(data_shapes=[("data", (batch, 50))], label_shapes=[("softmax_label", (batch,))])
    mx.random.seed(3)
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                          "momentum": 0.9, "wd": 1e-4})
    db = mx.io.DataBatch(data=[mx.nd.array(x.numpy())], label=[mx.nd.array(y.numpy())])
    for _ in range(steps):
        mod.forward_backward(db)
        mod.update()
    args, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in args.items()}, mod.get_outputs()[0].asnumpy()


def test_module_training_on_gpu_matches_cpu():
    from runtime.context import cpu, gpu
    want, want_out = _train([cpu(0)])
    got, got_out = _train([gpu(0)])
    for k in want:
        _close(got[k], want[k], f"param {k} after 5 steps", rtol=1e-3, atol=1e-5)
    _close(got_out, want_out, "outputs", rtol=1e-3, atol=1e-5)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_module_on_two_gpus_matches_one_cpu():
    """The batch sliced over gpu(0) and gpu(1), each launching on its own device."""
    from runtime.context import cpu, gpu
    want, _ = _train([cpu(0)])
    got, _ = _train([gpu(0), gpu(1)])
    for k in want:
        _close(got[k], want[k], f"param {k} after 5 steps", rtol=1e-3, atol=1e-5)


def test_bucketing_lstm_on_gpu_matches_cpu():
    import random
    import numpy as np
    import module_api as mx
    from runtime.context import cpu, gpu
    from tests import aot_models as M

    def run(ctx):
        random.seed(0)              # the iterator shuffles with random and numpy.random
        np.random.seed(0)
        rng = random.Random(0)
        sents = [[rng.randrange(1, M.VOCAB) for _ in range(rng.choice([4, 9, 15, 19]))]
                 for _ in range(32)]
        it = mx.rnn.BucketSentenceIter(sents, 4, buckets=[10, 20], invalid_label=0)
        mod = mx.mod.BucketingModule(sym_gen=M.lstm_sym_gen,
                                     default_bucket_key=it.default_bucket_key, context=[ctx])
        mod.bind(it.provide_data, it.provide_label)
        mx.random.seed(5)
        mod.init_params(initializer=mx.init.Xavier())
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                              "momentum": 0.9})
        for batch in it:
            mod.forward_backward(batch)
            mod.update()
        args, _ = mod.get_params()
        return {k: v.asnumpy() for k, v in args.items()}

    want, got = run(cpu(0)), run(gpu(0))
    for k in want:
        _close(got[k], want[k], f"LSTM param {k}", rtol=1e-3, atol=1e-5)


def test_dropout_masks_on_gpu_equal_the_cpu_targets(monkeypatch):
    """Philox on the device and compiler/ir/philox.py on the host: one seed, one mask."""
    import runtime.random
    from compiler import symbol as sym
    from runtime.context import cpu, gpu
    monkeypatch.setattr(runtime.random, "next_step_seed", lambda ctx: 123456789)
    s = sym.Dropout(sym.Variable("x"), p=0.5)
    x = torch.randn(64, 333)
    outs = {}
    for name, ctx in (("cpu", cpu(0)), ("gpu", gpu(0))):
        exe = s.simple_bind(ctx, grad_req={"x": "write"}, x=(64, 333))
        exe.arg_dict["x"][:] = x
        outs[name] = exe.forward(is_train=True)[0].asnumpy()
        exe.backward([torch.ones(64, 333)])
        outs[name + "_grad"] = exe.grad_dict["x"].asnumpy()
    assert (outs["gpu"] == outs["cpu"]).all()
    assert (outs["gpu_grad"] == outs["cpu_grad"]).all()
    kept = (outs["cpu"] != 0).mean()
    assert 0.45 < kept < 0.55


OFFLINE_GPU_RUN = r'''
import json, os, sys
sys.path.insert(0, os.getcwd())
from triton import knobs
compiles = []
knobs.compilation.listener = (
    lambda *, src, metadata, metadata_group, times, cache_hit: compiles.append(cache_hit))
import compiler
import module_api as mx
mod = mx.mod.Module(mx.sym.load(sys.argv[1]), context=mx.gpu(0))
mod.bind(data_shapes=[("data", (32, 50))], label_shapes=[("softmax_label", (32,))])
mod.init_params(initializer=mx.init.Xavier())
mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
db = mx.io.DataBatch(data=[mx.nd.ones((32, 50))], label=[mx.nd.zeros((32,))])
for _ in range(3):
    mod.forward_backward(db)
    mod.update()
mx.nd.waitall()
print("RESULT " + json.dumps({"hits": compiles.count(True), "misses": compiles.count(False),
                             "programs": compiler.cache_stats()["compiles"]}))
'''


def test_aot_directory_runs_with_zero_triton_compiles(tmp_path):
    """`symtriton compile --target cuda:<this device>` in one process; a fresh process
    training from the directory compiles nothing: every Triton kernel is a cache hit."""
    major, minor = torch.cuda.get_device_capability(0)
    symbol = tmp_path / "mlp-symbol.json"
    _mlp().save(str(symbol))
    out = tmp_path / "aot"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_CACHE_DIR", "SYMTRITON_OFFLINE", "TRITON_INTERPRET")}
    env["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, "-m", "compiler", "compile", str(symbol),
                        "--shape", "data=32,50", "--shape", "softmax_label=32", "--train",
                        "--optimizer", "sgd", "--optimizer-param", "momentum=0.9",
                        "--target", f"cuda:{major}{minor}", "--out", str(out), "--no-progress"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    script = tmp_path / "offline.py"
    script.write_text(OFFLINE_GPU_RUN)
    env.update(SYMTRITON_CACHE_DIR=str(out), SYMTRITON_OFFLINE="1")
    run = subprocess.run([sys.executable, str(script), str(symbol)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    res = json.loads([ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    assert res["programs"] == 0 and res["misses"] == 0 and res["hits"] > 0, res
