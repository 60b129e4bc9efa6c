"""benchmarks/module_fit.py runs and reports samples/s beside eager, and one
optimizer launch per step on top of the fused forward and backward."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_module_fit_benchmark_quick(tmp_path):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "module_fit.py"),
                          "--hidden", "16", "--dim", "20", "--samples", "256", "--epochs", "1",
                          "--batch", "32", "--threads", "1"],
                         capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    m = re.search(r"RESULT fit sym_sps=([\d.]+) eager_sps=([\d.]+) ratio=([\d.]+) "
                  r"launches=([\d.]+)", out)
    assert m, out
    sym_sps, eager_sps, _, launches = map(float, m.groups())
    assert sym_sps > 0 and eager_sps > 0
    # MLP: at most 3 forward + 8 backward launches, plus ONE optimizer launch
    assert launches <= 12
