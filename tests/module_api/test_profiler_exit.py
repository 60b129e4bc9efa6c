"""``mx.profiler`` at exit, as mxnet: the trace is written when no ``dump()`` followed the
last run, an exit with the profiler running is clean, and ``set_state('run')`` is cheap."""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROGRAM = """
import sys, time
import numpy as np
import module_api as mx
mx.profiler.set_config(profile_all=True, filename=sys.argv[1])
t0 = time.perf_counter()
mx.profiler.set_state('run')
print('START', time.perf_counter() - t0)
data = mx.sym.Variable('data')
net = mx.sym.FullyConnected(data, num_hidden=4, name='fc')
ex = net.simple_bind(mx.cpu(), data=(2, 3))
ex.forward(is_train=False, data=np.ones((2, 3), np.float32))
ex.outputs[0].asnumpy()
"""


def _run(tmp_path, tail):
    trace = tmp_path / "exit_profile.json"
    script = tmp_path / "prog.py"
    script.write_text(_PROGRAM + textwrap.dedent(tail))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script), str(trace)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return trace, proc.stdout


def _operator_events(trace):
    events = json.loads(trace.read_text())["traceEvents"]
    return [e for e in events if e.get("cat") == "operator" and e.get("ph") == "X"]


def test_exit_while_running_writes_the_trace_and_exits_cleanly(tmp_path):
    trace, out = _run(tmp_path, "")
    ops = _operator_events(trace)
    assert ops and all(e["name"].startswith("fwd ") for e in ops)
    # the first run once cost seconds (torch.profiler imported torch._inductor)
    start = float(out.split("START")[1].split()[0])
    assert start < 1.0, start


def test_exit_after_stop_without_dump_writes_the_trace(tmp_path):
    trace, _ = _run(tmp_path, "mx.profiler.set_state('stop')\n")
    assert _operator_events(trace)


def test_no_trace_at_exit_when_dumped_after_the_last_run(tmp_path):
    # mxnet's dump() clears the owed output: the file the program removed stays removed
    trace, _ = _run(tmp_path, """
        mx.profiler.dump()
        import os
        os.remove(sys.argv[1])
        """)
    assert not trace.exists()


def test_no_trace_when_the_profiler_never_ran(tmp_path):
    trace = tmp_path / "never.json"
    code = ("import sys, module_api as mx\n"
            "mx.profiler.set_config(profile_all=True, filename=sys.argv[1])\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code, str(trace)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not trace.exists()
