"""benchmarks/lenet.py runs (a few batches) and reports samples/s and validation
accuracy beside eager: both sides learn from the same batches."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lenet_benchmark_quick(tmp_path):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "lenet.py"),
                          "--epochs", "1", "--max-batches", "30", "--threads", "1"],
                         capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    m = re.search(r"RESULT lenet sym_sps=([\d.]+) eager_sps=([\d.]+) ratio=([\d.]+) "
                  r"sym_acc=([\d.]+) eager_acc=([\d.]+)", out)
    assert m, out
    sym_sps, eager_sps, _, sym_acc, eager_acc = map(float, m.groups())
    assert sym_sps > 0 and eager_sps > 0
    assert sym_acc > 0.6 and eager_acc > 0.6          # 30 steps; chance is 0.1
    assert "launches / step" in out
