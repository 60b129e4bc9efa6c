"""The ``cpu`` target: what ``cpu()`` contexts run by default.

* A fresh process with no ``TRITON_INTERPRET`` trains on ``cpu()`` without Triton's
  interpreter (triton is never imported) and matches torch.
* ``SYMTRITON_CPU_TARGET`` selects the interpreter, and nothing else.
* Generated cpu kernels read their inputs as strided views made once in ``bind``;
  ``run`` writes the planned arrays in place.
* ``OMP_NUM_THREADS`` is honoured: torch's count is the cap of the launches' thread count
  (``runtime.threads``) and is the same after them.
"""
import os
import subprocess
import sys

import pytest
import torch

from compiler.artifacts import cache
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from runtime.context import Context, cpu, cpu_target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NO_INTERPRETER = r'''
import os, sys
import numpy as np
import torch
import module_api as mx

assert "TRITON_INTERPRET" not in os.environ
rng = np.random.RandomState(0)
x = rng.randn(64, 10).astype(np.float32)
y = (x[:, 0] > 0).astype(np.float32)
net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=16, name="fc1")
net = mx.sym.Activation(net, act_type="tanh")
net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(net, num_hidden=2, name="fc2"), name="softmax")
mod = mx.mod.Module(net, context=mx.cpu())
it = mx.io.NDArrayIter(x, y, batch_size=16)
mod.fit(it, optimizer="sgd", optimizer_params={"learning_rate": 0.5}, num_epoch=8,
        initializer=mx.init.Xavier())
acc = dict(mod.score(it, "acc"))["accuracy"]
# the same forward in torch from the trained weights
w = {k: torch.from_numpy(v.asnumpy()) for k, v in mod.get_params()[0].items()}
h = torch.tanh(torch.from_numpy(x) @ w["fc1_weight"].t() + w["fc1_bias"])
p = torch.softmax(h @ w["fc2_weight"].t() + w["fc2_bias"], dim=1)
out = mod.predict(mx.io.NDArrayIter(x, None, batch_size=16)).asnumpy()
print("ERR", float(np.abs(out - p.numpy()).max()))
print("ACC", acc)
print("TARGET", mx.cpu().target)
print("TRITON_LOADED", "triton" in sys.modules)
print("INTERPRET_ENV", os.environ.get("TRITON_INTERPRET"))
'''


def _run(code, env_extra=None, drop=("TRITON_INTERPRET", "SYMTRITON_CPU_TARGET"), tmp=None):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra or {})
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if tmp is not None:
        env["SYMTRITON_CACHE_DIR"] = str(tmp)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)


def test_cpu_context_trains_without_the_interpreter(tmp_path):
    out = _run(NO_INTERPRETER, tmp=tmp_path)
    assert out["TARGET"] == "cpu"
    assert out["TRITON_LOADED"] == "False", "the cpu target must not import triton"
    assert out["INTERPRET_ENV"] == "None"
    assert float(out["ERR"]) < 1e-5
    assert float(out["ACC"]) > 0.9


def test_cpu_target_is_chosen_by_the_environment(monkeypatch):
    monkeypatch.delenv("SYMTRITON_CPU_TARGET", raising=False)
    assert cpu_target() == "cpu" and cpu(1).target == "cpu"
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "interpret")
    assert Context("cpu", 0).target == "interpret"
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cuda:90")
    with pytest.raises(ValueError, match="SYMTRITON_CPU_TARGET='cuda:90'.*'cpu'.*'interpret'"):
        cpu().target


def _mlp():
    net = sym.FullyConnected(sym.Variable("data"), num_hidden=8, name="fc1")
    net = sym.Activation(net, act_type="relu")
    return sym.SoftmaxOutput(sym.FullyConnected(net, num_hidden=3, name="fc2"), name="softmax")


def test_cpu_kernels_load_views_made_once_at_bind():
    net = _mlp()
    req = {n: "write" for n in net.list_arguments()}
    prog = compile_symbol(net, {"data": (5, 7), "softmax_label": (5,)}, True, req, True, "cpu")
    for ln in prog.launches:
        with open(cache.kernel_path(ln.kernel)) as f:
            src = f.read()
        bind, run = src.split("    def run(")   # run() takes what bind made as defaults
        assert "@triton" not in src and "import triton" not in src
        # loads are strided views of the planned flat buffers, made in bind()
        assert "as_strided" in bind or "fill_" in run
        for word in ("as_strided", ".contiguous(", ".clone(", "gather(", ".reshape("):
            assert word not in run, (word, src)


def test_run_writes_the_planned_arrays_in_place():
    net = _mlp()
    exe = net.simple_bind(cpu(), data=(5, 7), softmax_label=(5,))
    ptrs = {n: g.data_ptr() for n, g in exe.grad_dict.items()}
    out_ptr = exe.outputs[0].data_ptr()
    for n, a in exe.arg_dict.items():
        a[:] = torch.rand(a.shape) if n != "softmax_label" else torch.randint(0, 3, a.shape)
    exe.forward(is_train=True)
    exe.backward()
    assert exe.outputs[0].data_ptr() == out_ptr
    assert {n: g.data_ptr() for n, g in exe.grad_dict.items()} == ptrs
    torch.testing.assert_close(exe.outputs[0].sum(1), torch.ones(5))


def test_thread_count_follows_omp_num_threads(tmp_path):
    code = ("import torch, module_api as mx\n"
            "e = mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=3).simple_bind("
            "mx.cpu(), data=(2, 4))\n"
            "e.forward()\nprint('THREADS', torch.get_num_threads())\n")
    assert _run(code, {"OMP_NUM_THREADS": "1"}, tmp=tmp_path)["THREADS"] == "1"


@pytest.mark.parametrize("steps", [3, 6])
def test_sum_of_thin_matmuls_stacks_along_k(steps):
    """dW = sum_t x_t^T . g_t (an RNN weight gradient): from 4 terms on, the cpu target
    joins the operands along K and makes one matmul; the numbers are torch's."""
    xs = [sym.Variable(f"x{t}") for t in range(steps)]
    gs = [sym.Variable(f"g{t}") for t in range(steps)]
    total = sym.dot(xs[0], gs[0], transpose_a=True)
    for x, g in zip(xs[1:], gs[1:]):
        total = total + sym.dot(x, g, transpose_a=True)
    shapes = {**{f"x{t}": (5, 7) for t in range(steps)}, **{f"g{t}": (5, 3) for t in range(steps)}}
    exe = total.simple_bind(cpu(), grad_req="null", **shapes)
    vals = {n: torch.randn(s) for n, s in shapes.items()}
    for n, v in vals.items():
        exe.arg_dict[n][:] = v
    want = sum(vals[f"x{t}"].t() @ vals[f"g{t}"] for t in range(steps))
    torch.testing.assert_close(exe.forward()[0], want, rtol=1e-5, atol=1e-5)
    prog = exe.programs[1]
    src = "".join(open(cache.kernel_path(ln.kernel)).read() for ln in prog.launches)
    assert ("torch.mm(torch.cat(" in src) == (steps >= 4), src
