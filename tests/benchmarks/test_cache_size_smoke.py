"""benchmarks/cache_size.py runs with tiny flags: a RESULT line per cache size, with
positive times, and the table."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cache_size_benchmark_tiny():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "cache_size.py"),
         "--entries", "50", "--compiles", "2"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = re.findall(r"^RESULT this checkout entries=(\d+) mean_ms=([\d.]+)$", proc.stdout,
                      re.M)
    assert [int(n) for n, _ in rows] == [0, 50], proc.stdout
    assert all(float(ms) > 0 for _, ms in rows)
    assert "| this checkout | 50 |" in proc.stdout
