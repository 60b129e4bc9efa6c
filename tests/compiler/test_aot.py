"""``symtriton compile`` (ahead of time) and ``symtriton cache``: compile the bucketed LSTM
for cpu, interpret and cuda:90 in one process, then train offline from that directory in a
fresh process (cpu() contexts: the cpu target) with zero compiles."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from compiler.artifacts import aot
from compiler import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUCKETS = "10,20,30"

OFFLINE_RUN = r'''
import json, os, random, sys
sys.path.insert(0, os.getcwd())
import compiler
import module_api as mx
from tests import aot_models as M

rng = random.Random(0)
sents = [[rng.randrange(1, M.VOCAB) for _ in range(rng.choice([4, 9, 15, 19, 25, 29]))]
         for _ in range(48)]
it = mx.rnn.BucketSentenceIter(sents, 4, buckets=[10, 20, 30], invalid_label=0)
mod = mx.mod.BucketingModule(sym_gen=M.lstm_sym_gen, default_bucket_key=it.default_bucket_key,
                             context=[mx.cpu(0), mx.cpu(1)])
mod.bind(it.provide_data, it.provide_label)
mod.init_params(initializer=mx.init.Xavier())
mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.9})
seen = set()
for i, batch in enumerate(it):
    mod.forward_backward(batch)
    mod.update()
    seen.add(batch.bucket_key)
    if i >= 5 and len(seen) == 3:
        break
out = mod.get_outputs()[0].asnumpy()
assert out.shape[1] == M.VOCAB and (out == out).all()
print("STATS " + json.dumps(compiler.cache_stats()))
print("BUCKETS " + json.dumps(sorted(seen)))
try:
    mod.switch_bucket(40, [mx.io.DataDesc("data", (4, 40), layout="NT")],
                      [mx.io.DataDesc("softmax_label", (4, 40), layout="NT")])
    print("UNSEEN COMPILED")
except Exception as exc:
    print("UNSEEN ERROR " + " ".join(str(exc).split()))
'''


def _env(cache_dir, offline=False):
    env = dict(os.environ)
    env["SYMTRITON_CACHE_DIR"] = str(cache_dir)
    env["TRITON_INTERPRET"] = "1"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("SYMTRITON_OFFLINE", None)
    env.pop("SYMTRITON_FORCE_RECOMPILE", None)
    if offline:
        env["SYMTRITON_OFFLINE"] = "1"
    return env


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _inproc(capsys, args):
    """``symtriton ARGS`` in this process (the commands that compile nothing)."""
    capsys.readouterr()
    rc = cli.main(list(args))
    out = capsys.readouterr()
    return _Result(rc, out.out, out.err)


def _symtriton(args, cache_dir, offline=False, timeout=300):
    return subprocess.run([sys.executable, "-m", "compiler"] + list(args), cwd=ROOT,
                          env=_env(cache_dir, offline), capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The bucketed LSTM compiled ahead of time: 3 buckets, 2 contexts, SGD momentum."""
    out = tmp_path_factory.mktemp("aot") / "cache"
    r = _symtriton(["compile", "--sym-gen", "tests.aot_models:lstm_sym_gen",
                    "--bucket-keys", BUCKETS, "--shape", "data=4,{key}",
                    "--shape", "softmax_label=4,{key}", "--train",
                    "--optimizer", "sgd", "--optimizer-param", "momentum=0.9",
                    "--contexts", "2", "--target", "cpu", "--target", "interpret",
                    "--target", "cuda:90",
                    "--out", str(out)], cache_dir=out.parent / "unused")
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r


def test_compile_then_train_offline_with_zero_compiles(compiled, tmp_path):
    out, r = compiled
    # the summary
    assert "programs: 9 (9 compiled, 0 already cached)" in r.stdout
    assert "2 optimizer kernel(s) (sgd)" in r.stdout      # the Triton kernel, the cpu function
    assert "total compile time:" in r.stdout and "regs" in r.stdout
    assert "kernels (cubin)" in r.stderr            # the progress bar
    # a fresh process trains the BucketingModule on [cpu(0), cpu(1)] offline
    script = tmp_path / "offline_run.py"
    script.write_text(OFFLINE_RUN)
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=_env(out, offline=True),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    stats = json.loads(lines["STATS"])
    assert stats["compiles"] == 0 and stats["kernels_compiled"] == 0, stats
    assert stats["kernels_loaded"] > 0, stats
    assert stats["hits"] >= 3 and stats["corrupt_entries"] == 0, stats
    assert json.loads(lines["BUCKETS"]) == [10, 20, 30]
    # an unseen bucket fails clearly, naming the key and the command that adds it
    err = lines["UNSEEN"]
    assert err.startswith("ERROR"), err
    assert "SYMTRITON_OFFLINE=1" in err and "symtriton compile" in err
    assert "data=(2, 40)" in err   # each context's slice of the (4, 40) batch
    keys = {p["key"] for p in json.loads((out / aot.MANIFEST).read_text())["programs"]}
    import re
    missing = re.search(r"for key ([0-9a-f]{32})", err).group(1)
    assert missing not in keys


def test_manifest_lists_keys_files_and_cubins(compiled, capsys):
    out, _ = compiled
    m = json.loads((out / aot.MANIFEST).read_text())
    assert m["format"] == aot.FORMAT and m["targets"] == ["cpu", "interpret", "cuda:90"]
    assert {"triton", "torch", "symtriton"} <= set(m["versions"])
    assert m["bucket_keys"] == [10, 20, 30] and m["contexts"] == 2
    progs = m["programs"]
    assert sorted((p["bucket"], p["target"]) for p in progs) == sorted(
        (b, t) for b in (10, 20, 30) for t in ("cpu", "interpret", "cuda:90"))
    for p in progs:
        assert p["contexts"] == [0, 1] and p["mode"] == "train"
        assert p["inputs"]["data"] == [2, p["bucket"]]
        assert "training" in p["description"] and "target " + p["target"] in p["description"]
        assert (out / "programs" / p["key"] / "manifest.json").exists()
        assert f"programs/{p['key']}/program.json" in m["files"]
    # every kernel of a cuda:90 program (and the optimizer's) has a cubin and its metadata
    wanted = {h for p in progs if p["target"] == "cuda:90" for h in p["kernels"]}
    wanted |= {h for h in m["optimizer"]["kernels"]
               if "@triton.jit" in (out / "kernels" / f"k_{h}.py").read_text()}
    assert {n.split("/", 1)[1] for n in m["cubins"]} == wanted
    for h in wanted:
        meta = json.loads((out / "cubin" / "cuda_90" / f"{h}.json").read_text())
        assert {"num_warps", "shared", "constexprs", "signature", "n_regs",
                "n_spills"} <= set(meta)
        assert meta["n_regs"] > 0
        assert (out / "cubin" / "cuda_90" / f"{h}.cubin").stat().st_size > 0
    # inspect --from-cache describes the directory
    r = _inproc(capsys, ["inspect", "--from-cache", str(out)])
    assert r.returncode == 0, r.stderr
    for p in progs:
        assert p["key"] in r.stdout
    assert "bucket keys: 10, 20, 30" in r.stdout


def test_cache_verify_ls_prune_clear(compiled, tmp_path, capsys):
    src, _ = compiled
    d = tmp_path / "copy"
    shutil.copytree(src, d)
    r = _inproc(capsys, ["cache", "verify", str(d)])
    assert r.returncode == 0, r.stdout + r.stderr
    r = _inproc(capsys, ["cache", "ls", str(d)])
    assert r.returncode == 0 and "9 program entries" in r.stdout
    # corrupt one kernel file and one cubin
    m = json.loads((d / aot.MANIFEST).read_text())
    kernel = next(f for f in m["files"] if f.startswith("kernels/"))
    cub = next(f for f in m["files"] if f.endswith(".cubin"))
    with open(d / kernel, "a") as f:
        f.write("# tampered\n")
    with open(d / cub, "r+b") as f:
        f.write(b"\0\0\0\0")
    r = _inproc(capsys, ["cache", "verify", str(d)])
    assert r.returncode == 1
    assert f"BAD {kernel}: checksum mismatch" in r.stdout
    assert f"BAD {cub}: checksum mismatch" in r.stdout
    # prune removes an entry the manifest does not list
    (d / "programs" / ("0" * 32)).mkdir()
    r = _inproc(capsys, ["cache", "prune", str(d)])
    assert r.returncode == 0 and f"removed programs/{'0' * 32}" in r.stdout
    assert len(os.listdir(d / "programs")) == 9
    r = _inproc(capsys, ["cache", "clear", str(d)])
    assert r.returncode == 0
    assert not (d / "programs").exists() and not (d / aot.MANIFEST).exists()


def test_help_documents_the_workflow(capsys):
    with pytest.raises(SystemExit):
        cli.main(["compile", "--help"])
    text = capsys.readouterr().out
    for words in ("no GPU", "copy the directory", "SYMTRITON_OFFLINE=1", "--bucket-keys",
                  "{key}", "--contexts", "cuda:90"):
        assert words in text, words


def test_slices_follow_the_executor_group():
    from runtime.executor_group import split_input_slice
    assert aot.context_slices(5, contexts=2) == [s.stop - s.start
                                                 for s in split_input_slice(5, [1, 1])]
    assert aot.context_slices(32, batch_per_context=[24, 8]) == [24, 8]
    with pytest.raises(aot.AOTError, match="adds up to"):
        aot.context_slices(32, batch_per_context=[16, 8])


_CALLS = []


def _unstable_sym_gen(key):
    import module_api as mx
    _CALLS.append(key)   # a graph that changes from call to call (not just its auto names)
    data = mx.sym.Variable("data")
    return mx.sym.FullyConnected(mx.sym.Activation(data, act_type="relu"),
                                 num_hidden=3 + len(_CALLS), name="fc"), ("data",), ()


def _auto_named_sym_gen(key):
    import module_api as mx
    data = mx.sym.Variable("data")   # unnamed Activation: 'activation0', 'activation1', ...
    return mx.sym.FullyConnected(mx.sym.Activation(data, act_type="relu"), num_hidden=4,
                                 name="fc"), ("data",), ()


def test_nondeterministic_sym_gen_is_refused(tmp_path):
    with pytest.raises(aot.AOTError, match="different graph on each call"):
        aot.compile_aot(sym_gen=_unstable_sym_gen, bucket_keys=[3],
                        shapes=[("data", [2, "{key}"])], out=tmp_path, progress=False)
    # automatic names alone do not matter: keys ignore operator node names
    aot.compile_aot(sym_gen=_auto_named_sym_gen, bucket_keys=[3],
                    shapes=[("data", [2, "{key}"])], out=tmp_path, progress=False)


def test_usage_errors(capsys):
    assert cli.main(["compile", "--sym-gen", "tests.aot_models:lstm_sym_gen",
                     "--bucket-keys", "10", "--shape", "data=4,{key}", "--no-progress"]) == 2
    assert "softmax_label" in capsys.readouterr().err
    assert cli.main(["compile", "--sym-gen", "nosuchmodule:f", "--bucket-keys", "1",
                     "--shape", "data=1"]) == 2
    assert "cannot import" in capsys.readouterr().err
