"""Row-split runs: a separable training step as two half-batch Programs on two threads.

* the analysis (``compiler/row_split.py``) accepts a LeNet-like conv net, an MLP and
  an unrolled LSTM language model, and refuses graphs that mix rows, draw random
  numbers, keep auxiliary states, normalize by the batch, or have an odd batch;
* a split run gives the single run's outputs, input gradients and parameter
  gradients (``write``, ``add``, ``null``) up to the rounding of the halves' sum;
* a backward runs the way its forward ran, whatever the policy says in between;
* from a phase's second split run on, both halves run as one TorchScript call
  (``compiler/cpu/script.py``) with no Python thread, and give what the threads gave;
  a launch list TorchScript cannot take keeps the threads, with its reason;
* the policy (``runtime/threads_policy.py``) tries ``SPLIT`` as one more count and keeps
  it only when it measured faster; ``fixed`` never splits.
"""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.cpu.script import NotScriptable, ScriptDiffers, phase_source
from compiler.row_split import analyse
from runtime import executor_rowsplit, threads, threads_policy
from runtime.launcher import LaunchCounter
from runtime.threads import SPLIT, ThreadPolicy


class AlwaysSplit(threads.FixedCount):
    """A policy that asks every launch list for a row-split run."""

    def __init__(self):
        super().__init__(1)

    def choose(self, cap, key=None):
        return SPLIT

    @property
    def count(self):
        return SPLIT


@pytest.fixture(autouse=True)
def restore_policy(monkeypatch):
    monkeypatch.delenv("SYMTRITON_CPU_TARGET", raising=False)
    cap = torch.get_num_threads()
    yield
    threads.reset()
    torch.set_num_threads(cap)


def lenet_like():
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), num_filter=4, name="c1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=8, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=5, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax"), {"data": (6, 1, 8, 8),
                                                       "softmax_label": (6,)}


def mlp():
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=7, name="fc1")
    net = mx.sym.Activation(net, act_type="sigmoid")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc2")
    return mx.sym.LinearRegressionOutput(net, name="lro"), {"data": (4, 5),
                                                           "lro_label": (4, 3)}


def lstm_lm(seq_len=3, hidden=6, vocab=11):
    """lstm_bucketing's graph, small: Embedding, an unrolled LSTMCell with merged
    outputs, (B, T, H) -> (B * T, H), FullyConnected, SoftmaxOutput."""
    cell = mx.rnn.LSTMCell(num_hidden=hidden, prefix="lstm_")
    embed = mx.sym.Embedding(mx.sym.var("data"), input_dim=vocab, output_dim=4, name="embed")
    outputs = cell.unroll(seq_len, inputs=embed, merge_outputs=True)[0]
    pred = mx.sym.FullyConnected(mx.sym.Reshape(outputs, shape=(-1, hidden)),
                                 num_hidden=vocab, name="pred")
    label = mx.sym.Reshape(mx.sym.var("softmax_label"), shape=(-1,))
    return mx.sym.SoftmaxOutput(pred, label, name="softmax"), {"data": (4, seq_len),
                                                               "softmax_label": (4, seq_len)}


NETS = {"lenet": lenet_like, "mlp": mlp, "lstm": lstm_lm}


def full_shapes(sym, shapes):
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    return dict(zip(sym.list_arguments(), arg_shapes))


@pytest.mark.parametrize("name", sorted(NETS))
def test_analysis_accepts_lenet_mlp_and_lstm(name):
    sym, shapes = NETS[name]()
    plan, reason = analyse(sym, full_shapes(sym, shapes))
    assert reason is None
    assert sorted(plan.rows) == sorted(shapes) and plan.batch == shapes["data"][0]
    for n, s in shapes.items():
        assert plan.half_shapes[n] == (s[0] // 2,) + s[1:]


def _refused():
    x = mx.sym.var("data")
    fc = mx.sym.FullyConnected(x, num_hidden=4, name="fc")
    fc2 = mx.sym.FullyConnected(x, num_hidden=4, name="fc2")
    yield "sum over the batch", mx.sym.broadcast_add(fc, mx.sym.sum(fc, axis=0, keepdims=True)), \
        {"data": (4, 3)}, "mixes rows"
    yield "BatchNorm", mx.sym.BatchNorm(fc, name="bn"), {"data": (4, 3)}, "auxiliary"
    yield "Dropout", mx.sym.Dropout(fc, p=0.5), {"data": (4, 3)}, "mixes rows"
    yield "softmax over axis 0", mx.sym.softmax(fc, axis=0), {"data": (4, 3)}, "mixes rows"
    for norm in ("batch", "valid"):
        yield f"SoftmaxOutput {norm}", mx.sym.SoftmaxOutput(fc, normalization=norm, name="so"), \
            {"data": (4, 3), "so_label": (4,)}, "mixes rows"
    yield "Concat on axis 0", mx.sym.Concat(fc, fc2, dim=0), {"data": (4, 3)}, "mixes rows"
    yield "time on axis 0", mx.sym.SequenceMask(mx.sym.SwapAxis(x, dim1=0, dim2=1)), \
        {"data": (4, 3, 2)}, "mixes rows"
    yield "reshape across rows", mx.sym.Reshape(fc, shape=(2, -1)), {"data": (4, 3)}, \
        "output 0"
    yield "odd batch", fc, {"data": (5, 3)}, "even"
    yield "batch 1", fc, {"data": (1, 3)}, "even"


@pytest.mark.parametrize("what,sym,shapes,reason", list(_refused()),
                         ids=[r[0] for r in _refused()])
def test_analysis_refuses(what, sym, shapes, reason):
    plan, why = analyse(sym, full_shapes(sym, shapes))
    assert plan is None and reason in why, why


def _fill(exe, seed):
    """Arguments and gradients (seen by 'add'; 'write' overwrites them) from ``seed``."""
    rng = np.random.RandomState(seed)
    for n, a in exe.arg_dict.items():
        a[:] = rng.randint(0, 5, a.shape) if n == "softmax_label" else rng.randn(*a.shape) * 0.5
    for g in exe.grad_dict.values():
        g[:] = rng.randn(*g.shape)


def _bind_and_run(sym, shapes, req, policy, seed=0):
    """Bind, fill from ``seed``, one training step under ``policy``: (executor,
    outputs, gradients)."""
    threads.reset(policy)
    exe = sym.simple_bind(mx.cpu(), grad_req=req, **shapes)
    _fill(exe, seed)
    outs = [o.asnumpy().copy() for o in exe.forward(is_train=True)]
    exe.backward()
    return exe, outs, {n: g.asnumpy().copy() for n, g in exe.grad_dict.items()}


def _requests(sym, shapes):
    """write for most parameters, add for one, null for another, the data's gradient
    written, labels null."""
    params = [n for n in sym.list_arguments() if n not in shapes]
    req = {n: "write" for n in params}
    req[params[0]], req[params[-1]] = "add", "null"
    req.update({n: "null" for n in shapes})
    if "embed" not in params[0]:
        req["data"] = "write"            # ids have no gradient worth checking
    return req


@pytest.mark.parametrize("name", sorted(NETS))
def test_split_run_equals_the_single_run(name):
    sym, shapes = NETS[name]()
    req = _requests(sym, shapes)
    _, outs, grads = _bind_and_run(sym, shapes, req, None)
    LaunchCounter.reset()
    exe, outs2, grads2 = _bind_and_run(sym, shapes, req, AlwaysSplit())
    assert exe._row_split.halves is not None, exe._row_split.reason
    # the phase counts as its Program's launches, once
    assert LaunchCounter.total == len(exe._train_prog.launches)
    for a, b in zip(outs, outs2):
        # rows never mix; BLAS may block a half's GEMM differently (last-bit changes)
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    assert sorted(grads) == sorted(grads2)
    for n in grads:
        np.testing.assert_allclose(grads2[n], grads[n], rtol=1e-5, atol=1e-5, err_msg=n)


def _no_worker():
    raise AssertionError("a scripted phase ran a half on a Python thread")


@pytest.mark.parametrize("name", sorted(NETS))
def test_later_split_runs_are_torchscript_and_equal_the_single_run(name, monkeypatch):
    """Steps 2 and 3 of a split executor run each phase as TorchScript (no worker
    thread; the LSTM's oneDNN layer, an extern launch, through its operator's
    TorchScript form); the outputs and gradients (``add`` accumulating over the steps)
    stay those of a whole executor given the same steps."""
    sym, shapes = NETS[name]()
    req = _requests(sym, shapes)
    runs = {}
    for policy in (None, AlwaysSplit()):
        threads.reset(policy)
        exe = sym.simple_bind(mx.cpu(), grad_req=req, **shapes)
        _fill(exe, 0)
        got = []
        for step in range(3):
            if step == 1 and policy is not None:      # the halves' lists are bound now
                monkeypatch.setattr(executor_rowsplit, "_worker", _no_worker)
            rng = np.random.RandomState(10 + step)
            for n, a in exe.arg_dict.items():
                if n in shapes:
                    ids = "label" in n or (n == "data" and name == "lstm")
                    a[:] = rng.randint(0, 5, a.shape) if ids else rng.randn(*a.shape)
            got.append([o.asnumpy().copy() for o in exe.forward(is_train=True)])
            exe.backward()
        got.append({n: g.asnumpy().copy() for n, g in exe.grad_dict.items()})
        runs[policy is None] = (exe, got)
    exe, split = runs[False]
    rs = exe._row_split
    assert rs.script_reasons == {}, rs.script_reasons
    assert rs.scripts["fwd"][1] is not None and rs.scripts["bwd"][1] is not None
    whole = runs[True][1]
    for a, b in zip(whole[:3], split[:3]):
        for x, y in zip(a, b):
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-6)
    for n in whole[3]:
        np.testing.assert_allclose(split[3][n], whole[3][n], rtol=1e-5, atol=1e-5, err_msg=n)


def test_a_launch_list_torchscript_cannot_take_is_refused_with_its_reason():
    def run():
        pass
    with pytest.raises(NotScriptable, match="launch 0 .* is not a generated cpu kernel"):
        phase_source([run])


class RecordingSplit(AlwaysSplit):
    """AlwaysSplit, keeping what the runs tell the policy."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def observe(self, key, n, seconds, cut=False):
        self.seen.append(key.row_split.phase)


def _mlp_steps(policy, steps, exe=None):
    """``steps`` training steps of the MLP under ``policy`` (a new executor unless
    ``exe`` is given); the executor."""
    threads.reset(policy)
    if exe is None:
        sym, shapes = mlp()
        exe = sym.simple_bind(mx.cpu(), grad_req=_requests(sym, shapes), **shapes)
        _fill(exe, 0)
    for _ in range(steps):
        exe.forward(is_train=True)
        exe.backward()
    return exe


def test_the_run_that_builds_a_script_gives_the_policy_no_sample():
    """It runs the phase twice over and copies its arrays (the Python lists on the
    arrays, the script on a replica): as a sample it would make the halves look slower."""
    policy = RecordingSplit()
    exe = _mlp_steps(policy, 3)
    assert exe._row_split.scripts["fwd"][1] is not None
    # step 1 (threads) and step 3 (script) are samples; step 2 built the scripts
    assert policy.seen == ["fwd", "bwd", "fwd", "bwd"]


def test_no_script_is_built_during_a_trial():
    """A trial's split runs keep the threads (a trial that loses would pay for the
    build); the first run after it builds the script."""
    policy = RecordingSplit()
    policy.probe = SPLIT                    # a trial in progress
    exe = _mlp_steps(policy, 3)
    assert exe._row_split.scripts == {} and exe._row_split.script_reasons == {}
    policy.probe = None
    _mlp_steps(policy, 1, exe)
    assert all(exe._row_split.scripts[p][1] is not None for p in ("fwd", "bwd"))


def _refuse(lists):
    raise NotScriptable("launch 0: refused by the test")


def _run_then_differ(lists):
    """What ``checked_parts`` does when the script's numbers differ: the phase has run
    (its Python runs' results kept), then the refusal."""
    with torch.inference_mode():
        for runs in lists:
            for r in runs:
                r()
    raise ScriptDiffers("array 0 differs (the test)")


@pytest.mark.parametrize("check", [_refuse, _run_then_differ])
def test_a_phase_that_does_not_script_keeps_the_threads(check, monkeypatch):
    """The reason is kept and the halves run on the threads, giving the same numbers;
    where the check ran the phase, it is not run again (``add`` adds once)."""
    sym, shapes = mlp()
    req = _requests(sym, shapes)
    want = None
    for policy in (None, AlwaysSplit()):
        threads.reset(policy)
        exe = sym.simple_bind(mx.cpu(), grad_req=req, **shapes)
        _fill(exe, 0)
        if policy is not None:
            monkeypatch.setattr(executor_rowsplit, "checked_parts", check)
        for _ in range(2):
            exe.forward(is_train=True)
            exe.backward()
        got = {n: g.asnumpy().copy() for n, g in exe.grad_dict.items()}
        want = want or got
    reason = str(pytest.raises(NotScriptable, check, [[]]).value)
    assert exe._row_split.script_reasons == {"fwd": reason, "bwd": reason}
    for n in want:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-5, atol=1e-6, err_msg=n)


def test_head_gradients_of_a_non_loss_output_are_split_too():
    x = mx.sym.var("data")
    sym = mx.sym.tanh(mx.sym.FullyConnected(x, num_hidden=3, name="fc"))
    g = np.random.RandomState(1).randn(4, 3).astype(np.float32)
    results = []
    for policy in (None, AlwaysSplit()):
        threads.reset(policy)
        exe = sym.simple_bind(mx.cpu(), data=(4, 2))
        exe.arg_dict["data"][:] = np.arange(8).reshape(4, 2) * 0.1
        exe.arg_dict["fc_weight"][:] = np.ones((3, 2)) * 0.2
        for _ in range(2):      # the second forward scripted, its backward on the threads
            exe.forward(is_train=True)
            exe.backward(out_grads=[mx.nd.array(g)])
        results.append({n: v.asnumpy() for n, v in exe.grad_dict.items()})
    assert exe._row_split.halves is not None
    assert exe._row_split.scripts["fwd"][1] is not None and "bwd" not in exe._row_split.scripts
    for n in results[0]:
        np.testing.assert_allclose(results[1][n], results[0][n], rtol=1e-5, atol=1e-6)


def test_a_backward_runs_the_way_its_forward_ran():
    sym, shapes = mlp()
    req = _requests(sym, shapes)
    _, _, want = _bind_and_run(sym, shapes, req, None)
    exe = sym.simple_bind(mx.cpu(), grad_req=req, **shapes)
    _fill(exe, 0)
    exe.forward(is_train=True)              # whole (fixed) ...
    threads.reset(AlwaysSplit())
    exe.backward()                          # ... so the backward runs whole
    assert exe._row_split.halves is None
    for n in want:
        np.testing.assert_array_equal(exe.grad_dict[n].asnumpy(), want[n])
    _fill(exe, 0)
    exe.forward(is_train=True)              # split ...
    assert exe._row_split.halves is not None
    threads.reset(None)
    exe.backward()                          # ... so the backward runs split
    for n in want:
        np.testing.assert_allclose(exe.grad_dict[n].asnumpy(), want[n], rtol=1e-5,
                                   atol=1e-6, err_msg=n)


def test_no_split_while_the_profiler_records(monkeypatch):
    """A profiled run shows the graph's own launches once a phase (the trace's
    operators and counts), even where the policy would split."""
    from runtime import launcher
    sym, shapes = mlp()
    req = _requests(sym, shapes)
    _, _, want = _bind_and_run(sym, shapes, req, None)
    monkeypatch.setattr(launcher, "PROFILING", True)
    recorded = len(launcher.RECORD)
    try:
        exe, _, got = _bind_and_run(sym, shapes, req, AlwaysSplit())
    finally:
        del launcher.RECORD[recorded:]          # no profiler session owns these
    assert exe._row_split.halves is None
    for n in want:
        np.testing.assert_array_equal(got[n], want[n], err_msg=n)
    monkeypatch.setattr(launcher, "PROFILING", False)
    exe.forward(is_train=True)
    assert exe._row_split.halves is not None      # the same executor splits after


def test_fixed_and_deterministic_never_split():
    sym, shapes = mlp()
    req = _requests(sym, shapes)
    exe, _, _ = _bind_and_run(sym, shapes, req, None)
    assert exe._row_split.halves is None
    torch.use_deterministic_algorithms(True)
    try:
        exe, _, _ = _bind_and_run(sym, shapes, req, AlwaysSplit())
    finally:
        torch.use_deterministic_algorithms(False)
    assert exe._row_split.halves is None


def test_module_training_split_matches_whole():
    sym, _ = lenet_like()
    rng = np.random.RandomState(0)
    x = rng.rand(12, 1, 8, 8).astype(np.float32)
    y = rng.randint(0, 5, 12).astype(np.float32)
    got = []
    for policy in (None, AlwaysSplit()):
        threads.reset(policy)
        mod = mx.mod.Module(sym, context=mx.cpu())
        it = mx.io.NDArrayIter(x, y, batch_size=6)
        mod.bind(it.provide_data, it.provide_label)
        mx.random.seed(0)
        mod.init_params(mx.init.Xavier())
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                              "momentum": 0.9})
        for _ in range(3):
            it.reset()
            for b in it:
                mod.forward_backward(b)
                mod.update()
        got.append({k: v.asnumpy() for k, v in mod.get_params()[0].items()})
    for k in got[0]:
        np.testing.assert_allclose(got[1][k], got[0][k], rtol=1e-4, atol=1e-5, err_msg=k)


# -- the policy, driven with made-up timings ------------------------------------------------

class Splittable:
    """A stand-in for ``executor_rowsplit.PhaseSplit``."""

    def __init__(self, usable=True):
        self.forced, self._usable, self.analysed = None, usable, 0

    def usable(self):
        self.analysed += 1
        return self._usable


class Key:
    def __init__(self, name, usable=True):
        self.name, self.row_split = name, Splittable(usable)


def drive(policy, timing, keys, steps, cap=2):
    counts = []
    for _ in range(steps):
        for k in keys:
            n = policy.choose(cap, k)
            split = n == SPLIT and k.row_split._usable
            n = SPLIT if split else (1 if n == SPLIT else n)
            policy.observe(k, n, timing(k, n))
            counts.append(n)
    return counts


def timing(table):
    scale = {"fwd": 1.0, "bwd": 2.0}
    return lambda k, n: table[n] * scale[k.name]


def test_busy_machine_tries_split_from_one_thread_and_keeps_it(monkeypatch):
    # two busy loops on 2 cores: 2 threads with barriers collapse, split has a bigger
    # share than 1 (the core count is the test's: the load rule reads the machine's)
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    busy = {2: 0.060, 1: 0.012, SPLIT: 0.008}
    p = ThreadPolicy(others_running=lambda: 2)
    counts = drive(p, timing(busy), [Key("fwd"), Key("bwd")], 300)
    assert p.count == SPLIT
    # the load says one thread from the start; the first trial goes up to the halves
    assert [(d[1], d[3]) for d in p.decisions] == [(1, SPLIT)]
    assert 2 not in counts
    assert p.state()["count"] == "split"


def test_load_that_comes_moves_a_splittable_key_to_the_halves_at_once(monkeypatch):
    """Two busy tasks arrive while 2 threads are in use: the first slow run moves the
    policy straight to the row halves where the key can split (their share of the
    cores is larger than one thread's), to one thread where it cannot; the next trial
    then weighs one thread against the halves."""
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    idle = {2: 0.010, 1: 0.016, SPLIT: 0.0125}
    busy = {2: 0.060, 1: 0.024, SPLIT: 0.016}
    for usable, target in ((True, SPLIT), (False, 1)):
        others = [0]
        p = ThreadPolicy(others_running=lambda: others[0])
        keys = [Key("fwd", usable), Key("bwd", usable)]
        drive(p, timing(idle), keys, 300)
        assert p.count == 2
        others[0] = 2
        counts = drive(p, timing(busy), keys, 200)
        assert counts[0] == 2 and counts.count(2) == 1
        assert counts[1] == target and p.count == target
        if usable:
            # the trial of one thread that followed lost to the halves
            assert any(d[1] == SPLIT and d[2] == 1 and d[3] == SPLIT for d in p.decisions)


def test_idle_machine_keeps_two_threads_when_split_is_not_faster():
    idle = {2: 0.010, 1: 0.016, SPLIT: 0.0105}
    p = ThreadPolicy(others_running=lambda: 0)
    counts = drive(p, timing(idle), [Key("fwd"), Key("bwd")], 400)
    assert p.count == 2
    assert SPLIT in counts                      # it was tried
    assert counts.count(SPLIT) < 0.05 * len(counts)


def test_idle_machine_moves_to_split_when_it_is_faster():
    idle = {2: 0.017, 1: 0.023, SPLIT: 0.0135}
    p = ThreadPolicy(others_running=lambda: 0)
    drive(p, timing(idle), [Key("fwd"), Key("bwd")], 200)
    assert p.count == SPLIT


def test_keys_that_cannot_split_step_over_it():
    busy = {2: 0.060, 1: 0.012, SPLIT: 0.001}
    p = ThreadPolicy(others_running=lambda: 2)
    counts = drive(p, timing(busy), [Key("fwd", False), Key("bwd", False)], 200)
    assert p.count == 1 and SPLIT not in counts


def test_launch_lists_under_two_ms_are_not_worth_splitting():
    tiny = {2: 0.0006, 1: 0.0004, SPLIT: 0.0001}
    p = ThreadPolicy(others_running=lambda: 2)
    keys = [Key("fwd"), Key("bwd")]
    counts = drive(p, timing(tiny), keys, 2000)
    assert p.count == 1 and SPLIT not in counts
    assert all(k.row_split.analysed == 0 for k in keys)       # never analysed either


def test_bucketing_lstm_split_matches_whole_and_buckets_share_half_pools():
    def sym_gen(seq_len):
        sym, _ = lstm_lm(seq_len)
        return sym, ("data",), ("softmax_label",)
    rng = np.random.RandomState(0)
    batches = [(k, rng.randint(0, 11, (4, k)).astype(np.float32),
                rng.randint(0, 11, (4, k)).astype(np.float32)) for k in (3, 2, 3, 2)]
    got = []
    for policy in (None, AlwaysSplit()):
        threads.reset(policy)
        mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=3, context=mx.cpu())
        mod.bind([("data", (4, 3))], [("softmax_label", (4, 3))])
        mx.random.seed(0)
        mod.init_params(mx.init.Xavier())
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5})
        for key, x, y in batches:
            mod.forward_backward(mx.io.DataBatch(
                [mx.nd.array(x)], [mx.nd.array(y)], bucket_key=key,
                provide_data=[("data", (4, key))], provide_label=[("softmax_label", (4, key))]))
            mod.update()
        got.append({k: v.asnumpy() for k, v in mod.get_params()[0].items()})
    execs = [m._exec_group.execs[0] for m in mod._buckets.values()]
    assert all(e._row_split.halves is not None for e in execs)
    for e in execs:     # every phase scripted, oneDNN's LSTM layer (where used) included
        rs = e._row_split
        assert rs.script_reasons == {} and all(rs.scripts[p][1] for p in ("fwd", "bwd"))
    assert execs[0]._pool.row_halves is execs[1]._pool.row_halves
    for k in got[0]:
        np.testing.assert_allclose(got[1][k], got[0][k], rtol=1e-4, atol=1e-5, err_msg=k)
