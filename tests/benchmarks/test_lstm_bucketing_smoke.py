"""benchmarks/lstm_bucketing.py runs with tiny flags and its RESULT line holds:
about two forward launches per layer per time step, all buckets' memory within
1.25x of the largest bucket alone, no compile on a switch to a seen bucket."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _result(out, name):
    m = re.search(r"^RESULT %s (.*)$" % name, out, re.M)
    assert m, out
    return dict(kv.split("=", 1) for kv in m.group(1).split())


def test_lstm_bucketing_benchmark_tiny(tmp_path):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "lstm_bucketing.py"),
         "--num-hidden", "8", "--num-embed", "8", "--generated", "60",
         "--buckets", "5,10", "--batch-size", "4", "--switches", "50", "--rounds", "1",
         "--ignore-pad", "--lr", "0.1", "--threads", "1"],
        capture_output=True, text=True, env=env, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    r = _result(out, "lstm_bucketing")
    assert float(r["sym_tps"]) > 0 and float(r["eager_tps"]) > 0
    assert float(r["launches_per_layer_step_fwd"]) <= 2.0
    assert float(r["mem_ratio"]) <= 1.25
    assert int(r["switch_compiles"]) == 0 and int(r["switch_lookups"]) == 0
    # both trainings start from the same weights on the same batches
    assert float(r["first_loss_rel_diff"]) < 1e-4
    for key in ("5", "10"):
        b = _result(out, "bucket key=%s" % key)
        assert int(b["compiles"]) == 1                       # cold cache: one compile per bucket
        fused = int(b["fwd"]) + int(b["bwd"])
        assert fused < int(b["unfused_fwd"]) + int(b["unfused_bwd"])
        assert int(b["upd"]) == 1                            # one multi-tensor optimizer launch
