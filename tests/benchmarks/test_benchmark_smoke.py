"""Smoke test: ``benchmarks/compiled_vs_eager.py --quick`` runs and prints its table."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "compiled_vs_eager.py")


def test_compiled_vs_eager_quick(tmp_path):
    env = dict(os.environ)
    env.pop("SYMTRITON_OFFLINE", None)
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for row in ("launches / step", "bytes moved / step", "compile (cold)",
                "compile (warm, memory hit)", "compile (disk hit)",
                "ms / train step (median)", "cold compile passes (s):"):
        assert out.count(row) == 2, f"row {row!r} missing:\n{out}"
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, model, *fields = line.split()
            results[model] = {k: float(v) for k, v in (f.split("=") for f in fields)}
    assert set(results) == {"mlp", "lstm", "host_overhead"}, out
    assert results.pop("host_overhead")["mlp_us_per_launch"] > 0
    for model, r in results.items():
        assert 0 < r["fused_launches"] < r["unfused_ops"], (model, r)
        assert 0 < r["bytes"] <= r["unfused_bytes"], (model, r)
        assert r["sym_ms"] > 0 and r["eager_ms"] > 0, (model, r)
        assert r["compile_warm_s"] < r["compile_cold_s"], (model, r)
        assert r["grad_rel_err"] < 1e-3, (model, r)
    assert re.search(r"machine: .*CPU", out)


def test_gpu_training_benchmark_runs_on_cpu_contexts():
    """benchmarks/gpu_training.py's code path, on cpu() and eager CPU at one step."""
    from benchmarks import gpu_training
    med = gpu_training.main(["--device", "cpu", "--models", "mlp", "--steps", "1",
                             "--warmup", "0", "--rounds", "1", "--no-compile"])
    assert set(med["mlp"]) == {"symtriton", "eager"}
    assert all(v > 0 for v in med["mlp"].values())
