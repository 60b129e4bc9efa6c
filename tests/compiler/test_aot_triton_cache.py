"""``symtriton compile --target cuda:90`` fills Triton's own cache, under the keys a GPU
process's launches compute, so that process runs with zero Triton compiles.

No GPU is needed: a stand-in process runs a Module's training step through the real
runtime and Triton's real ``JITFunction.run`` (binder, specialisation, cache key,
``triton.compile``), with a fake CUDA driver whose launches do nothing. Triton's
compilation listener then says, for every kernel, whether ``triton.compile`` found
it in the cache (a hit) or had to compile it (a miss).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from compiler.artifacts import aot
from compiler.triton import cubin

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL = r'''
import module_api as mx


def mlp():
    data = mx.sym.Variable("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=16, name="fc1"),
                          act_type="relu")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=10, name="fc2"),
                                name="softmax")
'''

GPU_STAND_IN = r'''
import json, os, sys
sys.path.insert(0, os.getcwd())
os.environ["TRITON_INTERPRET"] = "0"          # what a process with a GPU decides
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver

launched = []
compiles = []


class _Utils:
    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132,
                "max_num_regs": 65536, "warpSize": 32}

    def load_binary(self, name, kernel, shared, device):
        return 1, 1, 0, 0, 1024


class FakeH100:
    """A CUDA device (sm_90) whose launches do nothing."""
    utils = _Utils()

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def launcher_cls(self, src, metadata):
        return lambda *args: launched.append(metadata.name)


driver.set_active(FakeH100())
knobs.compilation.listener = (
    lambda *, src, metadata, metadata_group, times, cache_hit: compiles.append(cache_hit))

import runtime.context
runtime.context.cpu_target = lambda: "cuda:90"     # cpu(0) arrays, the kernels of an sm_90
import compiler
import module_api as mx

mod = mx.mod.Module(mx.sym.load(sys.argv[1]), context=mx.cpu())
mod.bind(data_shapes=[("data", (8, 20))], label_shapes=[("softmax_label", (8,))])
mod.init_params(initializer=mx.init.Xavier())
mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
batch = mx.io.DataBatch(data=[mx.nd.ones((8, 20))], label=[mx.nd.zeros((8,))])
for _ in range(2):
    mod.forward_backward(batch)
    mod.update()
print("RESULT " + json.dumps({"hits": compiles.count(True), "misses": compiles.count(False),
                             "launched": len(launched), "stats": compiler.cache_stats(),
                             "triton_dir": knobs.cache.dir}))
'''


def _env(cache_dir, offline=False):
    env = dict(os.environ)
    env["SYMTRITON_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = ROOT
    for name in ("SYMTRITON_OFFLINE", "SYMTRITON_FORCE_RECOMPILE", "TRITON_CACHE_DIR",
                 "TRITON_INTERPRET"):
        env.pop(name, None)
    if offline:
        env["SYMTRITON_OFFLINE"] = "1"
    return env


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The MLP's training step and SGD update compiled for cuda:90 ahead of time."""
    base = tmp_path_factory.mktemp("aot_triton")
    namespace = {}
    exec(MODEL, namespace)
    namespace["mlp"]().save(str(base / "mlp-symbol.json"))
    out = base / "cache"
    env = _env(out)
    env["TRITON_INTERPRET"] = "1"       # the build machine: no GPU
    r = subprocess.run([sys.executable, "-m", "compiler", "compile",
                        str(base / "mlp-symbol.json"), "--shape", "data=8,20", "--shape",
                        "softmax_label=8", "--train", "--optimizer", "sgd",
                        "--optimizer-param", "momentum=0.9", "--target", "cuda:90",
                        "--out", str(out)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def _stand_in(cache_dir, tmp_path):
    script = tmp_path / "gpu_stand_in.py"
    script.write_text(GPU_STAND_IN)
    symbol = cache_dir / aot.SYMBOLS
    symbol = symbol / sorted(os.listdir(symbol))[0]     # the symbol the compile recorded
    run = subprocess.run([sys.executable, str(script), str(symbol)], cwd=ROOT,
                         env=_env(cache_dir, offline=True), capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    line = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_gpu_process_finds_every_kernel_compiled(compiled, tmp_path):
    # a copy elsewhere: nothing in the directory may depend on where it was written
    moved = tmp_path / "copied-cache"
    shutil.copytree(compiled, moved)
    r = _stand_in(moved, tmp_path)
    assert r["triton_dir"] == str(moved / "triton")
    assert r["stats"]["compiles"] == 0, r                 # every Program a hit
    m = json.loads((moved / aot.MANIFEST).read_text())
    n_kernels = len({h for p in m["programs"] for h in p["kernels"]})
    n_triton = sum(1 for h in m["optimizer"]["kernels"]
                   if "@triton.jit" in (moved / "kernels" / f"k_{h}.py").read_text())
    # every kernel the step launches, and the update's, found by Triton: no compile
    assert r["misses"] == 0, r
    assert r["hits"] == n_kernels + n_triton == len(m["cubins"]), r
    assert r["launched"] >= 2 * n_kernels, r


def test_stored_specialisation_is_the_launch_specialisation(compiled):
    m = json.loads((compiled / aot.MANIFEST).read_text())
    for name, meta in m["cubins"].items():
        entry = aot.triton_entry(str(compiled), meta["triton_hash"])
        with open(os.path.join(entry, "kernel.json")) as f:
            stored = json.load(f)
        assert stored["hash"] == meta["triton_hash"]
        assert stored["num_warps"] == meta["num_warps"]
        if "BM" in meta["constexprs"] and meta["constexprs"]["BM"]:
            assert stored["num_stages"] == meta["config"]["num_stages"]
        pointers = [k for k, v in meta["signature"].items() if v.startswith("*")]
        # every array the runtime binds is its own allocation at a 16-byte multiple
        assert len(meta["divisible_by_16"]) == len(pointers), (name, meta)
        # the group file names its files relative to the entry (relocatable)
        with open(os.path.join(entry, "__grp__kernel.json")) as f:
            assert all("/" not in p for p in json.load(f)["child_paths"])


def test_a_kernel_missing_from_the_triton_cache_is_compiled_again(compiled, tmp_path):
    moved = tmp_path / "partial"
    shutil.copytree(compiled, moved)
    m = json.loads((moved / aot.MANIFEST).read_text())
    victim = sorted(m["cubins"].values(), key=lambda c: c["triton_hash"])[0]
    shutil.rmtree(aot.triton_entry(str(moved), victim["triton_hash"]))
    r = _stand_in(moved, tmp_path)
    assert r["misses"] == 1 and r["hits"] == len(m["cubins"]) - 1, r


def test_pointer_alignment_follows_element_offsets():
    args = [["buf", 0, 0, 10], ["buf", 1, 6, 4], ["arg", "x", 8, 3], ["grad", "w", 1, 1]]
    assert cubin.pointer_alignment(args) == "1010"
    assert aot._cubin_stem("ab", {"aligned": "1111"}) == "ab"
    assert aot._cubin_stem("ab", {"aligned": "1010"}) == "ab-a1010"


def test_triton_cache_that_others_may_write_is_refused(tmp_path, monkeypatch):
    from compiler.artifacts import cache_trust, kernel_files
    root = tmp_path / "cache"
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(root))
    cache_trust.forget_checks()
    path = kernel_files.triton_dir()
    assert path == str(root / "triton") and os.path.isdir(path)
    entry = root / "triton" / "ENTRY"
    entry.mkdir()
    (entry / "kernel.cubin").write_bytes(b"planted")
    os.chmod(entry / "kernel.cubin", 0o666)
    cache_trust.forget_checks()
    with pytest.raises(cache_trust.UntrustedCacheError, match="kernel.cubin"):
        kernel_files.triton_dir()
    os.chmod(entry / "kernel.cubin", 0o644)
    assert kernel_files.triton_dir() == path


def test_entries_written_under_umask_002_pass_the_trust_check(tmp_path):
    """Triton writes its entries with the umask's modes; symtriton's manager makes them
    writable by their owner only, so the next process does not refuse its own cache."""
    script = tmp_path / "umask_compile.py"
    script.write_text(r'''
import os, sys, json
sys.path.insert(0, os.getcwd())
os.umask(0o002)
import module_api as mx
from compiler.artifacts import cache, cache_trust, kernel_files
from compiler.triton import cubin
from compiler.artifacts.compile import compile_symbol
net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=4),
                           name="softmax")
prog = compile_symbol(net, {"data": (2, 3), "softmax_label": (2,)}, for_training=False,
                      grad_req={}, is_train=False, target="cuda:90")
root = cache.cache_dir()
triton_dir = os.path.join(root, "triton")
cache_trust.make_dirs(triton_dir)
items = [(ln.kernel, "cuda:90", dict(ln.config, aligned=cubin.pointer_alignment(ln.args)))
         for ln in prog.launches]
res = cubin.compile_many(items, workers=1, triton_cache=triton_dir)
assert not [r for r in res if isinstance(r, Exception)], res
print("PROBLEMS " + json.dumps(cache_trust.audit(triton_dir)))
print("ENTRIES " + str(len(os.listdir(triton_dir))))
''')
    env = _env(tmp_path / "cache")
    env["TRITON_INTERPRET"] = "1"
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = dict(ln.split(" ", 1) for ln in run.stdout.splitlines() if " " in ln)
    assert int(lines["ENTRIES"]) >= 1
    assert json.loads(lines["PROBLEMS"]) == []
