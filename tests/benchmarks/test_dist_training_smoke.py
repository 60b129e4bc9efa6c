"""benchmarks/dist_training.py runs 1 and 2 workers beside DDP and reports what
each side's step communicates: nothing on 1 worker for us, one bucketed
all-reduce on 2 (the key summary rides in it: no all_gather)."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_dist_training_benchmark_quick():
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "dist_training.py"),
           "--steps", "3", "--ddp-passes", "1", "--repeats", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = proc.stdout
    rows = {int(m.group(1)): dict(kv.split("=") for kv in m.group(2).split())
            for m in re.finditer(r"RESULT dist workers=(\d+) (.*)", out)}
    assert sorted(rows) == [1, 2], out
    for w, row in rows.items():
        assert float(row["sym_sps"]) > 0 and float(row["ddp_sps"]) > 0
        assert int(row["sym_launches"]) <= 12
    assert (rows[1]["sym_allreduce"], rows[1]["sym_allgather"]) == ("0", "0")
    assert (rows[2]["sym_allreduce"], rows[2]["sym_allgather"]) == ("1", "0")
    assert "RESULT dist_scaling" in out
