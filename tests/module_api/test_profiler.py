"""``mx.profiler``: mxnet's profiler API writes a Chrome trace with one range per kernel launch."""
import json

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError
from module_api import profiler
from runtime import launcher


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "profile.json"
    profiler.set_config(filename=str(path))
    yield path
    profiler.set_state("stop")
    # dump what is owed into this test's folder: otherwise the process writes it at exit,
    # as mxnet does, into profile.json in the working directory
    profiler.dump()
    profiler.set_config(filename="profile.json")
    assert launcher.PROFILING is False


def _mlp():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _events(path):
    return json.loads(path.read_text())["traceEvents"]


def test_module_fit_trace_has_every_kernel_launch(trace_file):
    x = np.random.rand(40, 5).astype(np.float32)
    y = np.random.randint(0, 3, 40).astype(np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=10)
    mod = mx.mod.Module(_mlp())
    profiler.set_config(profile_all=True, filename=str(trace_file), aggregate_stats=True)
    profiler.set_state("run")
    assert profiler.state() == "run" and launcher.PROFILING
    n0 = launcher.LaunchCounter.total
    mod.fit(it, num_epoch=2, optimizer="sgd")
    launches = launcher.LaunchCounter.total - n0
    profiler.set_state("stop")
    assert not launcher.PROFILING
    profiler.dump()
    events = _events(trace_file)
    # the executors' kernel launches (named by phase and kernel); the mx.nd calls the
    # Module makes (its metric's, the initializer's) are ranges named by their operator
    ops = [e for e in events if e.get("cat") == "operator" and e.get("ph") == "X"
           and e["name"].split()[0] in ("fwd", "bwd")]
    train = mod._exec_group.execs[0].programs[0]
    names = {launcher.launch_name(ln) for ln in train.launches}
    assert names <= {e["name"] for e in ops}
    # 2 epochs x 4 batches x (forward + backward) launches of the training program, plus
    # the optimizer (not wrapped in a range, but counted by LaunchCounter)
    assert len(ops) == 8 * len(train.launches)
    assert launches >= len(ops)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ops)
    table = profiler.dumps()
    assert "Profile Statistics:" in table and "operator" in table
    fwd = launcher.launch_name(train.launches_in("fwd")[0])
    row = next(line for line in table.splitlines() if line.startswith(fwd[:39]))
    assert row.split()[len(fwd[:39].split())] == "8"       # Total Count


def test_domain_task_counter_marker(trace_file):
    domain = profiler.Domain("mydomain")
    task = domain.new_task("mytask")
    frame = domain.new_frame("myframe")
    counter = domain.new_counter("mycounter", 5)
    marker = domain.new_marker("mymarker")
    event = profiler.Event("myevent")
    assert str(domain) == "mydomain" and str(task) == "mytask"
    profiler.set_state("run")
    task.start()
    frame.start()
    mx.nd.ones((3,)).asnumpy()
    frame.stop()
    event.start()
    event.stop()
    task.stop()
    counter.set_value(7)
    counter += 3
    counter -= 1
    counter.increment(2)
    counter.decrement()
    marker.mark()
    marker.mark("global")
    profiler.set_state("stop")
    profiler.dump()
    events = _events(trace_file)
    by_name = {}
    for e in events:
        by_name.setdefault(e["name"], []).append(e)
    assert by_name["mytask"][0]["cat"] == "mydomain" and by_name["mytask"][0]["ph"] == "X"
    assert by_name["myframe"][0]["cat"] == "mydomain"
    assert by_name["myevent"][0]["cat"] == "Events"
    task_ev, frame_ev = by_name["mytask"][0], by_name["myframe"][0]
    assert task_ev["ts"] <= frame_ev["ts"] and \
        frame_ev["ts"] + frame_ev["dur"] <= task_ev["ts"] + task_ev["dur"] + 1e-3
    values = [e["args"]["mycounter"] for e in by_name["mycounter"] if e["ph"] == "C"]
    assert values == [7, 10, 9, 11, 10]
    assert counter.value == 10
    marks = [e for e in by_name["mymarker"] if e["ph"] == "i"]
    assert [m["s"] for m in marks] == ["p", "g"] and marks[0]["cat"] == "mydomain"
    assert not any(e["name"].startswith("__symtriton_") for e in events)
    table = profiler.dumps(reset=True)
    assert "mydomain" in table and "mytask" in table and "mycounter" in table
    assert "mytask" not in profiler.dumps()                 # reset cleared the statistics
    with pytest.raises(MXNetError, match="not started"):
        task.stop()


def test_pause_resume_and_counters_outside_a_run(trace_file):
    domain = profiler.Domain("d2")
    counter = domain.new_counter("c2")
    counter.set_value(1)                          # not running: nothing recorded
    profiler.set_state("run")
    profiler.pause()
    assert not launcher.PROFILING
    counter.set_value(2)                          # paused: nothing recorded
    profiler.resume()
    assert launcher.PROFILING
    counter.set_value(3)
    profiler.dump(finished=False)                 # keeps running
    assert profiler.state() == "run"
    counter.set_value(4)
    profiler.dump()                               # finished: stops
    assert profiler.state() == "stop"
    values = [e["args"]["c2"] for e in _events(trace_file) if e["name"] == "c2"]
    assert values == [3, 4]


def test_dumps_json_and_arguments_checked(trace_file):
    profiler.set_state("run")
    ev = profiler.Event("ev_json")
    ev.start()
    ev.stop()
    profiler.set_state("stop")
    doc = json.loads(profiler.dumps(format="json"))
    assert doc["Unit"]["Time"] == "ms"
    with pytest.raises(AssertionError):
        profiler.dumps(format="xml")
    with pytest.raises(AssertionError):
        profiler.dumps(sort_by="median")
    with pytest.raises(MXNetError, match="unknown option"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(MXNetError, match="'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(MXNetError, match="server"):
        profiler.set_state("run", profile_process="server")


def test_launches_run_unwrapped_when_off():
    assert launcher.PROFILING is False
    a = mx.sym.Variable("a")
    exe = (a * 2).bind(mx.cpu(), {"a": mx.nd.ones((2,))})
    assert hasattr(exe._launches(exe.programs[1], "fwd"), "names")
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), [2, 2])


def test_launches_recorded_by_id_and_the_trace_built_on_dump(trace_file):
    a = mx.sym.Variable("a")
    exe = (mx.sym.exp(a) * 2).bind(mx.cpu(), {"a": mx.nd.ones((3,))})
    exe.forward()
    bound = exe._launches(exe.programs[1], "fwd")
    assert [launcher.LAUNCH_IDS[i] for i in bound.ids] == bound.names
    events_before = len(profiler._events)
    profiler.set_state("run")
    exe.forward()
    exe.forward()
    # while running, a launch is one tuple (id, start ns, end ns, thread): no event is built
    recorded = [r for r in launcher.RECORD if r[0] in bound.ids]
    assert len(recorded) == 2 * len(bound) and all(r[1] <= r[2] for r in recorded)
    assert len(profiler._events) == events_before
    profiler.dump()
    assert not launcher.RECORD
    ops = [e for e in _events(trace_file)
           if e.get("cat") == "operator" and e["name"] in bound.names]   # the trace is cumulative
    assert sorted(e["name"] for e in ops) == sorted(bound.names * 2)
    assert all(e["dur"] >= 0 for e in ops)


def test_nd_calls_are_filed_under_mxnets_operator_names(trace_file):
    """As mxnet's aggregate statistics: an mx.nd call is one range named by its
    operator (the arithmetic's and creation functions' too), counted per call."""
    profiler.dumps(reset=True)
    profiler.set_state("run")
    x = mx.nd.zeros((10, 10))
    mx.nd.sqrt(x)
    x = x + 1
    x = x + 1
    x = x * x
    profiler.set_state("stop")
    doc = json.loads(profiler.dumps(format="json"))
    ops = doc["Time"]["operator"]
    assert {k: ops[k]["Count"] for k in ("_zeros", "sqrt", "_plus_scalar", "broadcast_mul")} \
        == {"_zeros": 1, "sqrt": 1, "_plus_scalar": 2, "broadcast_mul": 1}
    assert doc["Memory"] == {} and doc["Unit"] == {"Time": "ms", "Memory": "kB"}
    for sort_by, key in (("count", "Count"), ("total", "Total"), ("min", "Min")):
        for ascending in (False, True):
            rows = json.loads(profiler.dumps(format="json", sort_by=sort_by,
                                             ascending=ascending))["Time"]["operator"]
            values = [row[key] for row in rows.values()]
            assert values == sorted(values, reverse=not ascending), (sort_by, ascending)


def test_custom_operator_code_is_filed_under_its_op_type(trace_file):
    class Twice(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * 2)
            mx.nd.ones((2, 2))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], out_grad[0] * 2)

    @mx.operator.register("ProfiledTwice")
    class TwiceProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            return Twice()

    profiler.dumps(reset=True)
    profiler.set_state("run")
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(x, op_type="ProfiledTwice")
    y.backward()
    x + 1
    profiler.set_state("stop")
    time_stats = json.loads(profiler.dumps(format="json"))["Time"]
    assert {"ProfiledTwice::pure_python", "_backward_ProfiledTwice::pure_python",
            "ProfiledTwice::_mul_scalar", "ProfiledTwice::_ones"} <= \
        set(time_stats["Custom Operator"])
    assert "_plus_scalar" in time_stats["operator"]             # outside the op again
    assert "_mul_scalar" not in time_stats["operator"]
    assert x.grad.asnumpy().tolist() == [2.0, 2.0]
