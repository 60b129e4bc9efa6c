"""benchmarks/profiler_overhead.py runs, and the trace it dumps holds one kernel event per
profiled launch of the forward and backward (the optimizer launch is not wrapped)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_profiler_overhead_benchmark_quick(tmp_path):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    trace = tmp_path / "trace.json"
    out = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "profiler_overhead.py"),
                          "--hidden", "16", "--dim", "20", "--batch", "8", "--rounds", "3",
                          "--steps", "4", "--warmup", "2", "--threads", "1",
                          "--trace", str(trace)],
                         capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    m = re.search(r"RESULT profiler ratio=([\d.]+) overhead_pct=(-?[\d.]+) plain_ms=([\d.]+) "
                  r"launches=(\d+) kernel_events=(\d+)", out)
    assert m, out
    ratio, _, plain_ms, launches, kernels = map(float, m.groups())
    assert ratio > 0 and plain_ms > 0
    steps = 3 * 4
    # each step: forward + backward launches, each one kernel event, and one optimizer launch
    assert launches > 0 and kernels == launches - steps
    assert trace.exists()
