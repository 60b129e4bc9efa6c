"""benchmarks/nd_call_cost.py runs with tiny flags and prints its table: one row per
operator with the mx.nd time, the torch time and their difference."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_nd_call_cost_tiny(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import nd_call_cost
    finally:
        sys.path.pop(0)
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "nd_call_cost.py"),
                           "--calls", "3", "--rounds", "1"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(ln for ln in proc.stdout.splitlines() if ln.startswith("operator"))
    for col in ("mx.nd (us)", "torch (us)", "above torch"):
        assert col in header, header
    rows = re.findall(r"^RESULT nd_call_cost op=(\S+) nd_us=([0-9.]+) torch_us=([0-9.]+) "
                      r"above_us=(-?[0-9.]+)", proc.stdout, re.M)
    assert sorted(r[0] for r in rows) == sorted(n.replace(" ", "_") for n in nd_call_cost.CASES)
    for _, nd_us, torch_us, above in rows:
        assert float(nd_us) > 0 and float(torch_us) > 0
        assert abs(float(nd_us) - float(torch_us) - float(above)) < 0.02
