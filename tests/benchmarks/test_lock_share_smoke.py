"""benchmarks/lock_share.py runs with tiny flags: a RESULT line per calling mode and
thread count, with positive rates and shares, and the table."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_lock_share_benchmark_tiny():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "lock_share.py"),
         "--threads", "1,2", "--busy", "1", "--seconds", "0.2", "--ops", "2"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = re.findall(r"^RESULT lock_share mode=(\w+) threads=(\d+) busy=1 (.*)$",
                      proc.stdout, re.M)
    assert sorted((m, int(n)) for m, n, _ in rows) == [
        ("python", 1), ("python", 2), ("script", 1), ("script", 2)], proc.stdout
    for _, _, rest in rows:
        r = {k: float(v) for k, v in (kv.split("=", 1) for kv in rest.split())}
        assert r["bodies_s"] > 0 and 0 < r["cpu_per_wall"] < 4 and r["cpu_us_per_body"] > 0
    assert "| 2 |" in proc.stdout
