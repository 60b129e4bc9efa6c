"""The program cache under concurrency, crashes, version changes and read-only dirs.

(a) several processes compiling one key at once build it once and agree;
(b) a builder killed at any point never leaves an entry that loads unverified, and the
    next run repairs it (``SYMTRITON_TEST_CRASH_AT`` test hook plus random SIGKILLs);
(c) an entry built with other versions is rebuilt online and refused offline;
(d) a read-only cache dir falls back to memory with one warning;
(e) the key is stable across processes and changes with each of its components;
plus ``SYMTRITON_FORCE_RECOMPILE`` and the lock timeout.
"""
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import compiler
from compiler.artifacts import cache, cache_entries, cache_keys
from compiler.ir import rendering
from compiler.artifacts.compile import all_argument_shapes, compile_symbol, program_parts
from compiler.errors import MXNetError
from tests.models import mlp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A child process: compile the test MLP (after an optional go-file barrier) and print
# what it did as JSON on its last line.
CHILD = r"""
import hashlib, json, os, sys, time
sys.path.insert(0, %(root)r)
import compiler
from compiler.artifacts.compile import compile_symbol
from tests.models import mlp
go = os.environ.get("TEST_GO_FILE")
print("ready", flush=True)
while go and not os.path.exists(go):
    time.sleep(0.005)
s = mlp(hidden=(16, 16))
p = compile_symbol(s, {"data": (4, 12), "softmax_label": (4,)}, True,
                   {n: "write" for n in s.list_arguments()}, True)
st = compiler.cache_stats()
print(json.dumps({"compiles": st["compiles"], "disk_hits": st["disk_hits"],
                  "program": hashlib.sha256(p.to_json().encode()).hexdigest()}), flush=True)
""" % {"root": ROOT}


def _model():
    return mlp(hidden=(16, 16))


def _compile_here():
    s = _model()
    return compile_symbol(s, {"data": (4, 12), "softmax_label": (4,)}, True,
                          {n: "write" for n in s.list_arguments()}, True)


def _env(cache_dir, **extra):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(cache_dir))
    env.pop("SYMTRITON_OFFLINE", None)
    env.pop("SYMTRITON_FORCE_RECOMPILE", None)
    env.pop("SYMTRITON_TEST_CRASH_AT", None)
    env.update(extra)
    return env


def _spawn(cache_dir, **extra):
    return subprocess.Popen([sys.executable, "-c", CHILD], env=_env(cache_dir, **extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(autouse=True)
def current_compiler_hash(monkeypatch):
    """Hash the compiler sources now, as the child processes will (this process may have
    cached the hash of an older checkout earlier in the session)."""
    monkeypatch.setattr(cache_keys, "_COMPILER_HASH", None)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("SYMTRITON_OFFLINE", "SYMTRITON_FORCE_RECOMPILE", "SYMTRITON_TEST_CRASH_AT"):
        monkeypatch.delenv(name, raising=False)
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    yield tmp_path / "cache"
    cache.clear_memory_cache()


def _program_dirs(cache_dir):
    programs = cache_dir / "programs"
    return sorted(os.listdir(programs)) if programs.is_dir() else []


def _entries(cache_dir):
    return [n for n in _program_dirs(cache_dir) if not n.startswith(".")]


# (a) ---------------------------------------------------------------------------------------

def test_concurrent_processes_build_a_key_once(fresh_cache, tmp_path):
    go = tmp_path / "go"
    procs = [_spawn(fresh_cache, TEST_GO_FILE=str(go)) for _ in range(4)]
    for p in procs:                              # all imported: release them together
        assert p.stdout.readline().strip() == "ready"
    go.write_text("go")
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert len({r["program"] for r in results}) == 1          # identical Programs
    assert sum(r["compiles"] for r in results) == 1           # built once (the lock)
    assert sum(r["disk_hits"] for r in results) == 3
    assert cache_entries.verify_cache(str(fresh_cache)) == []
    assert _program_dirs(fresh_cache) == _entries(fresh_cache)   # no temp dirs left
    assert len(_entries(fresh_cache)) == 1                    # one directory per key
    # and this process loads the same Program from disk without compiling
    import hashlib
    prog = _compile_here()
    assert compiler.cache_stats()["compiles"] == 0
    assert hashlib.sha256(prog.to_json().encode()).hexdigest() == results[0]["program"]


# (b) ---------------------------------------------------------------------------------------

def _check_repaired(cache_dir):
    """After a crash: nothing unverified loads; one compile repairs; then it hits."""
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    os.environ["SYMTRITON_CACHE_DIR"] = str(cache_dir)
    before = cache_entries.verify_cache(str(cache_dir))
    prog = _compile_here()
    st = compiler.cache_stats()
    # the crash left either a good entry (a disk hit) or none/bad (exactly one compile)
    assert st["compiles"] + st["disk_hits"] == 1, (st, before)
    if before:                                   # a bad entry was detected, not loaded
        assert st["compiles"] == 1
    assert prog.stats["forward_launches"] >= 1
    assert cache_entries.verify_cache(str(cache_dir)) == []
    assert len(_entries(cache_dir)) == 1
    assert _program_dirs(cache_dir) == _entries(cache_dir)    # crash leftovers removed
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    _compile_here()
    st = compiler.cache_stats()
    assert st["compiles"] == 0 and st["disk_hits"] == 1
    return st


def test_crash_at_each_stage_then_repair(fresh_cache, tmp_path, monkeypatch):
    # ("aside" needs an existing entry to replace: see the next test)
    stages = [s for s in cache_entries.CRASH_STAGES if s != "aside"]
    procs = {s: _spawn(tmp_path / f"c-{s}", SYMTRITON_TEST_CRASH_AT=s) for s in stages}
    for stage, p in procs.items():
        _, err = p.communicate(timeout=120)
        assert p.returncode == 1, (stage, err)   # os._exit(1) at the stage
    for stage in stages:
        d = tmp_path / f"c-{stage}"
        if stage in ("locked", "kernels", "program", "manifest"):
            assert _entries(d) == [], stage       # nothing published yet: invisible
        if stage == "published":
            assert cache_entries.verify_cache(str(d)) == []
        _check_repaired(d)


def test_crash_while_replacing_a_corrupt_entry(fresh_cache, tmp_path):
    _compile_here()
    entry = fresh_cache / "programs" / _entries(fresh_cache)[0]
    (entry / "program.json").write_bytes(b"{ truncated")
    p = _spawn(fresh_cache, SYMTRITON_TEST_CRASH_AT="aside")
    p.communicate(timeout=120)
    assert p.returncode == 1
    assert _entries(fresh_cache) == []           # the bad entry was set aside, not loaded
    _check_repaired(fresh_cache)


def test_random_sigkill_then_repair(fresh_cache, tmp_path):
    rng = random.Random(1234)
    delays = [0.0, 0.05, 0.1, 0.2, rng.uniform(0, 0.3), rng.uniform(0, 0.3)]
    procs = []
    for i, delay in enumerate(delays):
        d = tmp_path / f"k-{i}"
        procs.append((d, delay, _spawn(d)))
    t_ready = []
    for d, delay, p in procs:
        assert p.stdout.readline().strip() == "ready"
        t_ready.append(time.monotonic())
    for (d, delay, p), t0 in zip(procs, t_ready):
        time.sleep(max(0.0, t0 + delay - time.monotonic()))
        p.send_signal(signal.SIGKILL)
    for d, delay, p in procs:
        p.communicate(timeout=60)
    for d, delay, p in procs:
        _check_repaired(d)


# (c) ---------------------------------------------------------------------------------------

def _tamper_versions(cache_dir):
    entry = cache_dir / "programs" / _entries(cache_dir)[0]
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["versions"]["triton"] = "0.0.1-old"
    (entry / "manifest.json").write_text(json.dumps(manifest))
    return entry


def test_version_mismatch_rebuilds_online(fresh_cache, caplog):
    _compile_here()
    entry = _tamper_versions(fresh_cache)
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    with caplog.at_level(logging.WARNING, logger="symtriton.cache"):
        _compile_here()
    st = compiler.cache_stats()
    assert st["compiles"] == 1 and st["disk_hits"] == 0 and st["corrupt_entries"] == 0
    reports = [r for r in caplog.records if "other versions" in r.getMessage()]
    assert len(reports) == 1 and "triton" in reports[0].getMessage()
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["versions"] == cache_keys._versions()          # rebuilt with ours
    assert cache_entries.verify_cache(str(fresh_cache)) == []
    assert _program_dirs(fresh_cache) == _entries(fresh_cache)


def test_version_mismatch_refused_offline(fresh_cache, monkeypatch, caplog):
    _compile_here()
    entry = _tamper_versions(fresh_cache)
    cache.clear_memory_cache()
    monkeypatch.setenv("SYMTRITON_OFFLINE", "1")
    with caplog.at_level(logging.WARNING, logger="symtriton.cache"):
        for _ in range(2):
            with pytest.raises(MXNetError) as err:
                _compile_here()
            msg = str(err.value)
            assert "SYMTRITON_OFFLINE=1" in msg and "other versions" in msg
            assert "0.0.1-old" in msg and "symtriton compile" in msg
    assert len([r for r in caplog.records if "other versions" in r.getMessage()]) == 1
    assert json.loads((entry / "manifest.json").read_text())["versions"]["triton"] == "0.0.1-old"


# (d) ---------------------------------------------------------------------------------------

def test_read_only_cache_dir_uses_memory_with_one_warning(tmp_path, monkeypatch, caplog):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o555)
    try:
        probe = ro / "probe"
        probe.write_text("x")                # root ignores permissions ...
        probe.unlink()
        writable = True
    except OSError:
        writable = False
    if writable:                             # ... so give root a cache dir it cannot create
        (tmp_path / "file").write_text("not a directory")
        ro = tmp_path / "file" / "cache"
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(ro))
    cache.clear_memory_cache()
    compiler.reset_cache_stats()
    try:
        with caplog.at_level(logging.WARNING, logger="symtriton.cache"):
            a = _compile_here()
            s = mlp(hidden=(8,))
            b = compile_symbol(s, {"data": (2, 12), "softmax_label": (2,)}, True,
                               {n: "write" for n in s.list_arguments()}, True)
            again = _compile_here()
        st = compiler.cache_stats()
        assert st["compiles"] == 2 and again is a and st["hits"] == 1
        warnings = [r for r in caplog.records if "not writable" in r.getMessage()]
        assert len(warnings) == 1 and "memory only" in warnings[0].getMessage()
        # the Programs run: their kernels load (from this process's private copy)
        from runtime.launcher import load_module
        for ln in a.launches + b.launches:
            assert load_module(ln.kernel) is not None
    finally:
        os.chmod(tmp_path / "ro", 0o755)
        cache.clear_memory_cache()


# (e) ---------------------------------------------------------------------------------------

KEYS = r"""
import json, sys
sys.path.insert(0, %(root)r)
from compiler import symbol as sym
from compiler.artifacts import cache_keys
from compiler.artifacts.compile import all_argument_shapes, program_parts

def net(act="relu"):
    x = sym.FullyConnected(sym.Variable("data"), num_hidden=8, name="fc1")
    x = sym.Activation(x, act_type=act, name="act1")
    return sym.SoftmaxOutput(sym.FullyConnected(x, num_hidden=3, name="fc2"), name="softmax")

def parts(act="relu", shape=(4, 12), dtype=None, grad_req="write", for_training=True,
          is_train=None, target="interpret"):
    s = net(act)
    shapes = all_argument_shapes(s, {"data": shape, "softmax_label": (shape[0],)})
    req = {n: "write" for n in s.list_arguments()}
    req["fc1_weight"] = grad_req
    p = program_parts(s, shapes, for_training, req,
                      for_training if is_train is None else is_train, target)
    if dtype:
        p["dtypes"] = dtype
    return p

TABLE = {
    "base": {}, "base_again": {},
    "shape": {"shape": (6, 12)},
    "dtype": {"dtype": "float16"},
    "grad_req": {"grad_req": "null"},
    "for_training": {"for_training": False},
    "is_train": {"is_train": False},
    "target": {"target": "cuda:80"},
    "graph_attr": {"act": "tanh"},
}

def keys():
    return {name: cache_keys.make_key(parts(**kw)) for name, kw in TABLE.items()}

if __name__ == "__main__":
    print(json.dumps(keys()))
""" % {"root": ROOT}


def test_key_table_stable_across_processes_and_sensitive(tmp_path, monkeypatch):
    script = tmp_path / "keys.py"
    script.write_text(KEYS)
    env = _env(tmp_path / "cache")
    procs = [subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    tables = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        tables.append(json.loads(out.strip().splitlines()[-1]))
    assert tables[0] == tables[1]                       # same inputs, same key, two processes
    keys = tables[0]
    assert keys["base"] == keys["base_again"]
    changed = {name: k for name, k in keys.items() if name not in ("base", "base_again")}
    assert len(set(changed.values())) == len(changed)   # each component gives its own key
    assert keys["base"] not in changed.values()

    namespace = {"__name__": "keys_in_test"}
    exec(compile(KEYS, str(script), "exec"), namespace)
    assert namespace["keys"]() == keys                  # and the same in this process
    monkeypatch.setattr(rendering, "template_hash", lambda: "edited-template")
    assert namespace["keys"]()["base"] != keys["base"]  # a template edit changes the key


# FORCE_RECOMPILE and the lock ------------------------------------------------------------

def test_force_recompile_bypasses_hits(fresh_cache, monkeypatch):
    _compile_here()
    _compile_here()
    assert compiler.cache_stats()["compiles"] == 1
    monkeypatch.setenv("SYMTRITON_FORCE_RECOMPILE", "1")
    _compile_here()
    cache.clear_memory_cache()
    _compile_here()
    st = compiler.cache_stats()
    assert st["compiles"] == 3 and st["disk_hits"] == 0
    assert cache_entries.verify_cache(str(fresh_cache)) == []
    assert len(_entries(fresh_cache)) == 1
    assert _program_dirs(fresh_cache) == _entries(fresh_cache)
    monkeypatch.delenv("SYMTRITON_FORCE_RECOMPILE")
    cache.clear_memory_cache()
    _compile_here()
    assert compiler.cache_stats()["disk_hits"] == 1


def test_lock_timeout_is_a_clear_error(fresh_cache, monkeypatch):
    import filelock
    s = _model()
    shapes = all_argument_shapes(s, {"data": (4, 12), "softmax_label": (4,)})
    key = cache_keys.make_key(program_parts(s, shapes, True,
                                            {n: "write" for n in s.list_arguments()},
                                            True, "cpu"))
    os.makedirs(fresh_cache / "locks", exist_ok=True)
    held = filelock.FileLock(str(fresh_cache / "locks" / f"{key}.lock"))
    monkeypatch.setenv("SYMTRITON_CACHE_LOCK_TIMEOUT", "0.2")
    with held:
        with pytest.raises(MXNetError) as err:
            _compile_here()
    msg = str(err.value)
    assert "timed out" in msg and key in msg and "SYMTRITON_CACHE_LOCK_TIMEOUT" in msg
    _compile_here()                                      # released: builds normally
    assert compiler.cache_stats()["compiles"] == 1
