"""benchmarks/contention.py runs with tiny flags: a RESULT line per model and load, the
busy loops it started are gone when it ends, it says how the row halves ran, and it
sets no thread variable."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_contention_benchmark_tiny(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "SYMTRITON_THREADS")}
    env["SYMTRITON_CACHE_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "contention.py"),
         "--models", "lenet,lstm", "--generated", "40", "--num-hidden", "8",
         "--batch-size", "4", "--max-batches", "4", "--rounds", "1", "--seconds", "0.05",
         "--busy", "1", "--sides", "symtriton,fixed,eager"],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "OMP_NUM_THREADS unset" in out
    for model in ("lenet", "lstm"):
        for load in ("idle", "busy1"):
            m = re.search(rf"^RESULT contention model={model} load={load} (.*)$", out, re.M)
            assert m, out
            r = dict(kv.split("=", 1) for kv in m.group(1).split())
            assert float(r["ratio_eager"]) > 0 and float(r["ratio_fixed"]) > 0
            for side in ("symtriton", "fixed", "eager"):      # each side's share of the cores
                assert 0 < float(r[f"{side}_cpu_share"]) < 2 * os.cpu_count() + 1
    halves = re.findall(r"symtriton row halves (.*)$", out, re.M)     # a line per load
    assert len(halves) == 4 and all(h == "never split" or "scripted" in h for h in halves), out
    pids = [int(p) for line in re.findall(r"busy-loop pids ([\d ]+)", out) for p in line.split()]
    assert len(pids) == 2                                  # one per model
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or \
            open(f"/proc/{pid}/stat").read().split()[2] == "Z", f"busy loop {pid} survived"
