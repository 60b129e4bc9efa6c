"""A Program holding extern launches (``linalg.inverse`` and its gradient), compiled
ahead of time with ``symtriton compile`` for ``cpu`` and ``cuda:90``, then trained with
a Module in a fresh process under ``SYMTRITON_OFFLINE=1``: nothing is compiled there,
and the cuda Program's extern launches have no kernel file or cubin."""
import json
import os
import subprocess
import sys

from compiler.artifacts import aot
from compiler.artifacts.program import Program
from tests.compiler.test_aot import ROOT, _env, _symtriton

OFFLINE_RUN = r'''
import json, os, sys
sys.path.insert(0, os.getcwd())
import numpy as np
import compiler
import module_api as mx

s = mx.sym.load(sys.argv[1])
mod = mx.mod.Module(s, data_names=["data"], label_names=None, context=mx.cpu())
mod.bind(data_shapes=[("data", (4, 9))])
mod.init_params(initializer=mx.init.Xavier())
mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01})
data = mx.nd.array(np.random.RandomState(0).uniform(-1, 1, (4, 9)))
losses = []
for _ in range(3):
    mod.forward_backward(mx.io.DataBatch([data], None))
    mod.update()
    losses.append(float(mod.get_outputs()[0].asnumpy().sum()))
assert all(np.isfinite(losses)), losses
print("STATS " + json.dumps(compiler.cache_stats()))
'''


def _model(path):
    from compiler import symbol as sym
    x = sym.FullyConnected(sym.Variable("data"), num_hidden=9, name="fc")
    m = sym.broadcast_add(sym.reshape(x, shape=(-1, 3, 3)), sym.eye(3) * 4.0)
    loss = sym.MakeLoss(sym.sum(sym.linalg.inverse(m)), name="loss")
    loss.save(str(path))


def test_extern_program_compiles_ahead_and_runs_offline(tmp_path):
    sym_file = tmp_path / "inv-symbol.json"
    _model(sym_file)
    out = tmp_path / "cache"
    r = _symtriton(["compile", str(sym_file), "--shape", "data=4,9", "--train",
                    "--optimizer", "sgd", "--target", "cpu", "--target", "cuda:90",
                    "--out", str(out), "--json",
                    "--no-progress"], cache_dir=tmp_path / "unused")
    assert r.returncode == 0, r.stderr[-4000:]
    progs = [Program.from_json((p / "program.json").read_text())
             for p in (out / "programs").iterdir() if (p / "program.json").exists()]
    assert {p.target for p in progs} == {"cpu", "cuda:90"}
    for prog in progs:
        ext = [ln for ln in prog.launches if ln.is_extern]
        assert [ln.config["op"] for ln in ext] == ["_linalg_inverse",
                                                   "_backward_linalg_inverse"]
        assert not any((out / "kernels" / f"k_{ln.kernel}.py").exists() for ln in ext)
    manifest = json.dumps(json.loads((out / aot.MANIFEST).read_text()))
    assert "extern:" not in manifest
    run = subprocess.run([sys.executable, "-c", OFFLINE_RUN, str(sym_file)], cwd=ROOT,
                         env=_env(out, offline=True), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("STATS "))
    stats = json.loads(line[len("STATS "):])
    assert stats["compiles"] == 0 and stats["kernels_compiled"] == 0, stats
    assert stats["hits"] >= 1, stats
    assert os.path.isdir(out)
