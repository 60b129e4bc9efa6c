"""benchmarks/dtypes.py runs with tiny flags and prints its table: a row per model and
dtype with samples/s, the ratio to float32, bytes per step, the figure and its delta
and margin; float16 and bfloat16 move about half float32's bytes per step."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_dtypes_benchmark_tiny(tmp_path):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "dtypes.py"),
         "--mlp-epochs", "1", "--mlp-hidden", "32", "--max-batches", "4",
         "--max-val-batches", "2", "--lstm-epochs", "1", "--generated", "60",
         "--num-hidden", "8", "--num-embed", "8", "--buckets", "5,10", "--lstm-batch", "4",
         "--threads", "1"],
        capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    header = next(ln for ln in out.splitlines() if ln.startswith("model "))
    for col in ("dtype", "samples / s", "/ float32", "bytes / step", "figure", "value",
                "delta", "margin", "within"):
        assert col in header, header
    rows = {}
    for m in re.finditer(r"^RESULT dtypes (model=.*)$", out, re.M):
        r = dict(kv.split("=", 1) for kv in m.group(1).split())
        rows[r["model"], r["dtype"]] = r
    assert set(rows) == {(m, d) for m in ("mlp", "lstm")
                         for d in ("float32", "float16", "bfloat16")}, out
    for (model, dtype), r in rows.items():
        # the table row carries the same numbers (printed to fewer places: the RESULT
        # line's rounding and the table's may differ in the last one)
        row = re.search(rf"^{model}\s+{dtype}\s+([0-9.]+)\s+([0-9.]+)\s", out, re.M)
        assert row, (model, dtype, out)
        assert abs(float(row.group(1)) - float(r["sps"])) <= 0.051, (row.group(0), r)
        assert abs(float(row.group(2)) - float(r["ratio"])) <= 0.00051, (row.group(0), r)
        assert float(r["sps"]) > 0
        assert r["metric"] == ("accuracy" if model == "mlp" else "perplexity")
        value = float(r["value"])
        assert (0.0 <= value <= 1.0) if model == "mlp" else value > 1.0
        if dtype == "float32":
            assert float(r["ratio"]) == 1.0 and float(r["delta"]) == 0.0
        else:
            assert r["margin"] == {"float16": "0.02", "bfloat16": "0.05"}[dtype]
            assert r["within"] in ("yes", "NO")
            # two bytes an element instead of four (token ids and the softmax stay float32)
            assert int(r["bytes"]) < 0.75 * int(rows[model, "float32"]["bytes"])
    assert "computes float16 / bfloat16 in float32" in out
