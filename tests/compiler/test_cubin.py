"""Every generated kernel compiles to cubin for a CUDA target, with its GPU tiles.

No GPU is needed: ``compiler.triton.cubin`` runs Triton's GPU compiler (to PTX and
through the bundled ptxas) in worker processes without the interpreter. The
configuration compiled is the GPU one (``tile_config(..., "cuda:90")``), not
the interpreter's whole-tensor tiles, which are wrong for a GPU.

Two checks:

* ``test_model_kernels_compile_to_cubin``: a representative set of models (MLP
  training, an LSTM cell step with gradients for x/h/c, BatchNorm+Dropout,
  Embedding, reductions and softmaxes, batch_dot, Concat/slices/reverse,
  LeakyReLU and friends, regression outputs) compiled for ``cuda:90``; each
  kernel with its ``Launch.config``.
* ``test_cached_kernels_compile_to_cubin``: every kernel source in this
  session's kernel cache (``cache_dir()/kernels``) when it runs, with the GPU
  configuration re-derived from the source. The kernels written by tests
  that run *after* it (in this process or, under pytest-xdist, in another
  worker) are compiled when the session ends, by ``tests/conftest.py``'s
  ``pytest_sessionfinish`` (in the controller): a failure there is printed with
  the kernels and fails the run (``tests/cubin_sweep.py`` keeps the record).

Failures name the kernel (hash and its summary line). A kernel that spills
(any local-memory bytes per thread) fails. Registers and spill bytes per
kernel are printed (visible with ``-s``). The end-of-session sweep
costs about 0.15 s per unique kernel on 2 cores with a cold Triton cache
(``~/.triton/cache`` makes unchanged kernels free on later runs);
``SYMTRITON_CUBIN_SWEEP=0`` skips it for quick local runs.
"""
import time

import pytest

from compiler.artifacts import cache
from compiler.triton import cubin
from compiler import symbol as sym
from tests.models import lstm_cell, mlp
from compiler.artifacts.compile import compile_symbol
from tests.cubin_sweep import TARGET, WORKERS, report as _report, sweep

# ----------------------------------------------------------------- models

def _mlp():
    return mlp(), {"data": (64, 784), "softmax_label": (64,)}, ("data", "softmax_label")


def _lstm_cell():
    """One step of mx.rnn.LSTMCell (num_hidden 256): the LSTM gate math."""
    H = 256
    cell = lstm_cell(num_hidden=H)
    loss = sym.MakeLoss(sym.sum(cell[0] * cell[0]) + sym.sum(cell[1]), name="loss")
    return loss, {"data": (32, 128), "prev_h": (32, H), "prev_c": (32, H)}, ()


def _bn_dropout():
    x = sym.Variable("data")
    y = sym.FullyConnected(x, num_hidden=96, name="fc1")
    y = sym.BatchNorm(y, fix_gamma=False, name="bn1")
    y = sym.Activation(y, act_type="relu")
    y = sym.Dropout(y, p=0.3)
    y = sym.FullyConnected(y, num_hidden=10, name="fc2")
    y = sym.SoftmaxOutput(y, name="softmax")
    return y, {"data": (48, 40), "softmax_label": (48,)}, ("data", "softmax_label")


def _embedding():
    x = sym.Variable("data")
    e = sym.Embedding(x, input_dim=500, output_dim=48, name="embed")
    y = sym.sum(e, axis=1)
    y = sym.FullyConnected(y, num_hidden=20, name="fc")
    y = sym.SoftmaxOutput(y, name="softmax")
    return y, {"data": (16, 12), "softmax_label": (16,)}, ("data", "softmax_label")


def _reductions():
    x = sym.Variable("data")
    a = sym.softmax(x, axis=-1)
    b = sym.log_softmax(x, axis=-1)
    c = sym.sum(x * x, axis=1, keepdims=True)
    d = sym.max(x, axis=0)
    e = sym.min(x, axis=1)
    m = sym.mean(x, axis=0)
    loss = sym.MakeLoss(sym.sum(a * b) + sym.sum(c) + sym.sum(d) + sym.sum(e) + sym.sum(m * m))
    return loss, {"data": (24, 130)}, ()


def _wide_softmax():
    x = sym.Variable("data")
    y = sym.FullyConnected(x, num_hidden=2000, name="fc")
    y = sym.SoftmaxOutput(y, name="softmax")
    return y, {"data": (32, 64), "softmax_label": (32,)}, ("data", "softmax_label")


def _batch_dot():
    a, b, c = sym.Variable("a"), sym.Variable("b"), sym.Variable("c")
    y = sym.batch_dot(a, b)
    z = sym.batch_dot(y, c, transpose_b=True)
    loss = sym.MakeLoss(sym.sum(sym.square(z)))
    return loss, {"a": (4, 20, 16), "b": (4, 16, 12), "c": (4, 9, 12)}, ()


def _concat_slices():
    x, y = sym.Variable("x"), sym.Variable("y")
    z = sym.Concat(x, y, dim=1)
    s = sym.slice_axis(z, axis=1, begin=2, end=15)
    r = sym.reverse(s, axis=1)
    t = sym.transpose(r)
    parts = sym.SliceChannel(x, num_outputs=2, axis=1)
    loss = sym.MakeLoss(sym.sum(t * t) + sym.sum(parts[0] * parts[1]) + sym.sum(sym.flip(y, axis=0)))
    return loss, {"x": (8, 10), "y": (8, 6)}, ()


def _activations():
    x = sym.Variable("data")
    a = sym.LeakyReLU(x, act_type="leaky", slope=0.1)
    b = sym.LeakyReLU(x, act_type="elu", slope=0.5)
    c = sym.Activation(x, act_type="softrelu") + sym.Activation(x, act_type="tanh")
    d = sym.clip(x, a_min=-0.5, a_max=0.5) + sym.sqrt(sym.abs(x) + 1.0) + sym.softsign(x)
    e = sym.exp(x * 0.1) + sym.log(sym.square(x) + 1.0) + sym.reciprocal(sym.abs(x) + 2.0)
    loss = sym.MakeLoss(sym.sum(a * b + c * d + e))
    return loss, {"data": (33, 17)}, ()


def _regression():
    x = sym.Variable("data")
    h = sym.FullyConnected(x, num_hidden=8, name="fc")
    lin = sym.LinearRegressionOutput(h, name="lin")
    log = sym.LogisticRegressionOutput(sym.FullyConnected(x, num_hidden=8, name="fc2"), name="log")
    return sym.Group([lin, log]), {"data": (10, 7), "lin_label": (10, 8), "log_label": (10, 8)}, \
        ("data", "lin_label", "log_label")


MODELS = {"mlp": _mlp, "lstm_cell": _lstm_cell, "bn_dropout": _bn_dropout,
          "embedding": _embedding, "reductions": _reductions, "wide_softmax": _wide_softmax,
          "batch_dot": _batch_dot, "concat_slices": _concat_slices,
          "activations": _activations, "regression": _regression}


@pytest.fixture(scope="module")
def model_cubins():
    """Compile every model (training and inference) for TARGET, then all their kernels
    to cubin in one batch. Returns {model: (exception or None, [result, ...])}."""
    t0 = time.perf_counter()
    per_model, items, index = {}, [], {}
    for name, build in MODELS.items():
        keys = []
        try:
            net, shapes, no_grad = build()
            grad_req = {a: ("null" if a in no_grad else "write") for a in net.list_arguments()}
            progs = [compile_symbol(net, shapes, True, grad_req, True, TARGET),
                     compile_symbol(net, shapes, False, {}, False, TARGET)]
        except Exception as exc:  # reported by that model's test
            per_model[name] = (exc, keys)
            continue
        for prog in progs:
            assert prog.target == TARGET
            for ln in prog.launches:
                key = (ln.kernel, cubin._config_key(ln.config))
                if key not in index:
                    index[key] = len(items)
                    items.append((ln.kernel, TARGET, ln.config))
                keys.append(key)
        per_model[name] = (None, keys)
    t1 = time.perf_counter()
    results = cubin.compile_many(items, workers=WORKERS)
    _report(results, f"models on {TARGET} (programs {t1 - t0:.1f}s, cubin "
                     f"{time.perf_counter() - t1:.1f}s)")
    return {name: (exc, [results[index[k]] for k in dict.fromkeys(keys)])
            for name, (exc, keys) in per_model.items()}


@pytest.mark.parametrize("model", list(MODELS))
def test_model_kernels_compile_to_cubin(model, model_cubins):
    exc, results = model_cubins[model]
    if exc is not None:
        raise exc
    assert results
    failures = [str(r) for r in results if isinstance(r, Exception)]
    assert not failures, f"{model}: kernels that do not compile to cubin:\n" + "\n".join(failures)
    for r in results:
        assert r["cubin"][:4] == b"\x7fELF" and r["n_regs"] > 0 and r["name"] == "kernel"
        # a GPU configuration, not the interpreter's whole-tensor tiles
        assert r["config"]["BM"] * max(r["config"]["BN"], r["config"]["BK"]) <= 64 * 2048, r


def test_gpu_config_is_rederived_from_source():
    """The config read back from a source equals the one compile put in the Launch."""
    net, shapes, no_grad = _mlp()
    grad_req = {a: ("null" if a in no_grad else "write") for a in net.list_arguments()}
    gpu = compile_symbol(net, shapes, True, grad_req, True, TARGET)
    cpu = compile_symbol(net, shapes, True, grad_req, True, "interpret")
    derived = list(cubin.program_gpu_launches(cpu, TARGET))
    assert [h for h, _ in derived] == [ln.kernel for ln in gpu.launches]
    for (h, cfg), ln in zip(derived, gpu.launches):
        for k in ("BM", "BN", "BK", "num_warps"):
            assert cfg[k] == ln.config[k], (h, k, cfg, ln.config)
    # and they differ from the interpreter's somewhere (whole-tensor tiles)
    assert any(a.config != b.config for a, b in zip(cpu.launches, gpu.launches))


def test_compile_cubin_rejects_tampered_source(tmp_path):
    net, shapes, _ = _regression()
    prog = compile_symbol(net, shapes, False, {}, False, TARGET)
    h = prog.launches[0].kernel
    with open(cache.kernel_path(h)) as f:
        src = f.read()
    bad = tmp_path / f"k_{h}.py"
    bad.write_text(src + "\nimport os\n")
    with pytest.raises(cubin.CubinError, match="checksum"):
        cubin.compile_cubin(str(bad))
    with pytest.raises(cubin.CubinError, match="cuda:<arch>"):
        cubin.compile_cubin(h, target="interpret")


# ----------------------------------------------------------------- the session's kernels

def test_cached_kernels_compile_to_cubin():
    """Every kernel the session generated so far, with the GPU config from its source; the
    ones written after it are compiled when the session ends (``tests/conftest.py``)."""
    failures = sweep(f"kernels in the session cache, compiled for {TARGET}")
    assert not failures, "kernels that do not compile to cubin:\n" + "\n".join(failures)
