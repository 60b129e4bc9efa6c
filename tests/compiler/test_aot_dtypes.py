"""``symtriton compile --dtype`` / ``inspect --dtype``: programs for float16 inputs ahead of
time. A fresh process binding the same Module with float16 DataDesc runs offline from the
directory with zero compiles; the manifest records the dtypes, and ``cache verify
--rebuild`` rebuilds the same bytes from them."""
import json
import subprocess
import sys

import pytest

import module_api as mx
from compiler import cli
from tests.compiler.test_aot import ROOT, _env

OFFLINE_RUN = r'''
import json, numpy as np
import compiler, module_api as mx
s = mx.sym.load("{sym}")
mod = mx.mod.Module(s, context=mx.cpu())
mod.bind([mx.io.DataDesc("data", (4, 16), dtype="float16")],
         [mx.io.DataDesc("softmax_label", (4,), dtype="float16")])
mod.init_params(initializer=mx.init.Xavier())
mod.init_optimizer(optimizer_params={{"multi_precision": True}})
batch = mx.io.DataBatch([mx.nd.ones((4, 16))], [mx.nd.array([0, 1, 2, 3])])
mod.forward_backward(batch)
mod.update()
print("DTYPE", mod.get_outputs()[0].dtype.__name__)
print("STATS " + json.dumps(compiler.cache_stats()))
'''


def _mlp(path):
    d = mx.sym.Variable("data")
    y = mx.sym.Activation(mx.sym.FullyConnected(d, num_hidden=32, name="fc1"), act_type="relu")
    s = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(y, num_hidden=8, name="fc2"), name="softmax")
    s.save(str(path))
    return path


def test_compile_float16_then_run_offline_and_rebuild(tmp_path, capsys):
    sym = _mlp(tmp_path / "mlp-symbol.json")
    out = tmp_path / "cache"
    r = subprocess.run([sys.executable, "-m", "compiler", "compile", str(sym),
                        "--shape", "data=4,16", "--shape", "softmax_label=4",
                        "--dtype", "data=float16", "--dtype", "softmax_label=float16",
                        "--train", "--optimizer", "sgd",
                        "--optimizer-param", "multi_precision=True",
                        "--target", "cpu", "--out", str(out), "--no-progress"],
                       cwd=ROOT, env=_env(tmp_path / "unused"), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = json.loads((out / "symtriton-manifest.json").read_text())
    recs = [p["compile"] for p in manifest["programs"]]
    assert recs and all(rec["dtypes"] == {"data": "float16", "softmax_label": "float16"}
                        for rec in recs)
    script = tmp_path / "run.py"
    script.write_text(OFFLINE_RUN.format(sym=sym))
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=_env(out, offline=True),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    assert lines["DTYPE"] == "float16"
    stats = json.loads(lines["STATS"])
    assert stats["compiles"] == 0 and stats["kernels_compiled"] == 0, stats
    capsys.readouterr()
    rc = cli.main(["cache", "verify", "--rebuild", str(out)])
    text = capsys.readouterr()
    assert rc == 0, text.out + text.err


def test_inspect_dtype(tmp_path, capsys):
    sym = _mlp(tmp_path / "mlp-symbol.json")
    rc = cli.main(["inspect", str(sym), "--shape", "data=4,16", "--shape", "softmax_label=4",
                   "--dtype", "data=bfloat16", "--dtype", "softmax_label=bfloat16", "--json"])
    info = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert set(info["dtypes"]["arguments"].values()) == {"bfloat16"}
    assert info["dtypes"]["outputs"] == ["bfloat16"]
    with pytest.raises(SystemExit) as info:
        cli.main(["inspect", str(sym), "--shape", "data=4,16", "--dtype", "data=complex64"])
    assert info.value.code == 2 and "complex64 is not one of" in capsys.readouterr().err
