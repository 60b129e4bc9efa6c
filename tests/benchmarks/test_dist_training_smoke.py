"""benchmarks/dist_training.py runs 1 and 2 workers beside DDP, on the MLP and on
LeNet, and reports what each side's step communicates: nothing on 1 worker for
us; on 2, one all-reduce per gradient bucket, started during the backward (the
MLP's gradients fill one bucket, LeNet's two: the output layer's first), and no
all_gather (the keys are checked once, when the workers agree on the buckets)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_dist_training_benchmark_quick():
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "dist_training.py"),
           "--steps", "3", "--ddp-passes", "1", "--repeats", "1", "--models", "mlp,lenet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = proc.stdout
    rows = {(m.group(1), int(m.group(2))): dict(kv.split("=") for kv in m.group(3).split())
            for m in re.finditer(r"RESULT dist model=(\w+) workers=(\d+) (.*)", out)}
    assert sorted(rows) == [("lenet", 1), ("lenet", 2), ("mlp", 1), ("mlp", 2)], out
    launches = {"mlp": 12, "lenet": 20}
    buckets = {"mlp": "1", "lenet": "2"}
    for (model, w), row in rows.items():
        assert float(row["sym_sps"]) > 0 and float(row["ddp_sps"]) > 0
        assert int(row["sym_launches"]) <= launches[model]
        expected = ("0", "0") if w == 1 else (buckets[model], "0")
        assert (row["sym_allreduce"], row["sym_allgather"]) == expected, (model, w, row)
    assert out.count("RESULT dist_scaling") == 2
