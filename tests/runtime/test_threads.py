"""``runtime.threads``: the thread count of the cpu target's launches.

The policy's decisions are driven here with made-up timings (its clock is the
sum of the runs' seconds), so each test is deterministic:

* on an idle machine (more threads faster) it keeps torch's count, and tries
  fewer threads less and less often;
* on a busy machine (one thread faster) it moves to one thread at the first
  trial, and a trial of more threads stops after one slow run;
* when the load goes away, the faster runs ask for a trial at once, and it
  moves back up;
* a change of torch's count starts it over at the new count (the user's cap);
* trials cost at most about the budget of the time spent in launches.

``run`` sets the chosen count around the call and torch's own afterwards (also
when the call raises), leaves it alone for ``fixed`` and under
``torch.use_deterministic_algorithms``, and cuts a slow trial run short. A
model trained with one thread per launch and with torch's count agrees to
rounding, with the same launches.
"""
import threading
import time

import numpy as np
import pytest
import torch

from compiler.errors import MXNetError
from runtime import threads, threads_policy
from runtime.threads import SPLIT, FixedCount, ThreadPolicy
from runtime.threads_policy import _ladder


class Key:
    """A stand-in for a bound launch list (the policy keeps its figures on it)."""

    def __init__(self, name):
        self.name = name


def drive(policy, cap, timing, keys, steps):
    """Run ``steps`` rounds of ``keys`` through ``policy`` (as ``threads.run`` does),
    each run taking ``timing(key, n)`` seconds; returns the counts used per step."""
    used = []
    for _ in range(steps):
        row = []
        for k in keys:
            n = policy.choose(cap, k)
            seconds = timing(k, n)
            limit = policy.limit(k, n)
            cut = limit is not None and seconds > limit
            if cut:        # run() goes back to the count in use once past the limit
                seconds = limit + timing(k, policy.count) * 0.5
            policy.observe(k, n, seconds, cut)
            row.append(n)
        used.append(row)
    return used


IDLE = {1: 0.014, 2: 0.010}          # 2 threads 1.4x faster
BUSY = {1: 0.012, 2: 0.060}          # descheduled team threads: 2 threads 5x slower


def table(t, scale=None):
    scale = scale or {"fwd": 1.0, "bwd": 2.0}
    return lambda k, n: t[n] * scale[k.name]


@pytest.fixture
def keys():
    return [Key("fwd"), Key("bwd")]


def test_ladder_halves_down_to_one():
    assert _ladder(1) == [1]
    assert _ladder(2) == [2, SPLIT, 1]       # SPLIT: two row halves of one thread
    assert _ladder(6) == [6, 3, SPLIT, 1]
    assert _ladder(16) == [16, 8, 4, 2, SPLIT, 1]


def test_idle_machine_keeps_the_users_count_and_backs_off(keys):
    p = ThreadPolicy()
    used = drive(p, 2, table(IDLE), keys, 400)
    assert p.count == 2
    assert p.trials >= 1 and not [d for d in p.decisions if d[3] != 2]
    # each trial kept 2, and the interval between trials doubled
    ends = [d[0] for d in p.decisions]
    gaps = np.diff(ends)
    assert all(b >= a * 1.9 for a, b in zip(gaps, gaps[1:]) if b < p.max_interval)
    ones = sum(row.count(1) for row in used)
    assert ones < 0.05 * sum(len(r) for r in used)        # trials are a small part


def test_busy_machine_moves_to_one_thread_at_the_first_trial(keys):
    p = ThreadPolicy()
    used = drive(p, 2, table(BUSY), keys, 200)
    assert p.count == 1
    first = p.decisions[0]
    assert (first[1], first[3]) == (2, 1) and first[4] < 0.5
    # the first steps ran with 2 threads (warm-up, then the baseline), then 1
    assert used[0] == [2, 2] and used[-1] == [1, 1]
    # later trials of 2 threads lost after one run each
    later = list(p.decisions)[1:]
    assert later and all(d[2] == 2 and d[3] == 1 for d in later)


def test_a_trial_of_more_threads_on_a_busy_machine_stops_early(keys):
    p = ThreadPolicy()
    drive(p, 2, table(BUSY), keys, 60)
    assert p.count == 1
    before = p.trials
    lost_before = p.lost
    # force the next trial now, then run the cheapest key once at the tried count
    p.due = p.clock
    n = p.choose(2, keys[0])
    assert n == 2 and p.trials == before + 1
    limit = p.limit(keys[0], n)
    assert limit == pytest.approx(3.0 * BUSY[1])            # abort_first x the baseline
    p.observe(keys[0], n, limit + 0.001, cut=True)
    assert p.probe is None and p.count == 1                 # lost at once
    assert p.lost - lost_before == pytest.approx(limit + 0.001 - BUSY[1])
    # the next trial waits for the lost time / budget at least
    assert p.due - p.clock >= (limit + 0.001 - BUSY[1]) / p.budget - 1e-9


def test_trials_start_on_the_cheapest_key(keys):
    p = ThreadPolicy()
    drive(p, 2, table(BUSY, {"fwd": 1.0, "bwd": 5.0}), keys, 30)
    p.due = p.clock
    assert p.choose(2, keys[1]) == p.count          # bwd is five times fwd: no trial
    assert p.probe is None
    assert p.choose(2, keys[0]) != p.count          # fwd starts it
    assert p.probe is not None


def test_load_that_goes_away_brings_the_threads_back(keys):
    p = ThreadPolicy()
    drive(p, 2, table(BUSY), keys, 100)
    assert p.count == 1
    clock, earliest, due = p.clock, p.earliest, p.due
    quiet = {1: 0.007, 2: 0.005}                   # the one thread now has a core of its own
    drive(p, 2, table(quiet), keys, 200)
    assert p.count == 2
    back = [d for d in p.decisions if d[1] == 1 and d[3] == 2]
    # drift asked for the trial as soon as the budget allowed: before the interval said
    assert back and back[0][0] < max(earliest, clock + p.min_interval) + 0.2 < due


def test_load_that_comes_moves_down_soon(keys):
    p = ThreadPolicy()
    drive(p, 2, table(IDLE), keys, 600)
    assert p.count == 2 and p.interval > 8
    clock = p.clock
    drive(p, 2, table(BUSY), keys, 40)
    assert p.count == 1
    down = [d for d in p.decisions if d[1] == 2 and d[3] == 1]
    assert down and down[0][0] - clock < 2.0


def test_a_team_stalled_by_load_that_came_is_left_at_the_first_slow_run(keys, monkeypatch):
    """Load arrives (two busy tasks on 2 cores) while 2 threads are in use: the first
    run slower than the stall factor (3x) times its baseline, with the load reading
    saying the team no longer fits, moves the policy to one thread at once, without a
    window or a trial, and trials of more threads wait while the cores stay taken."""
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    others = [0]
    p = ThreadPolicy(others_running=lambda: others[0])
    drive(p, 2, table(IDLE), keys, 300)
    assert p.count == 2
    decided = len(p.decisions)
    others[0] = 2
    used = drive(p, 2, table(BUSY), keys, 100)
    assert p.count == 1
    assert used[0] == [2, 1]                       # one slow run at 2 threads, then 1
    assert sum(row.count(2) for row in used) == 1   # trials of 2 never ran
    left = p.decisions[decided]
    assert (left[1], left[2], left[3]) == (2, 1, 1)
    assert left[4] == pytest.approx(BUSY[2] / IDLE[2])
    assert p.skipped >= 1


@pytest.mark.parametrize("reading, slower", [(0, 10.0), (None, 10.0), (2, 2.0)])
def test_a_slow_run_is_not_load_that_came(keys, monkeypatch, reading, slower):
    """A slow run (a page fault storm, a collection) with the cores free or the load
    unknown, or a run under the stall factor beside a passing task, leaves the count
    alone: only the window's drift and a trial may move it."""
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    load = [0]
    p = ThreadPolicy(others_running=lambda: load[0])
    drive(p, 2, table(IDLE), keys, 300)
    decided = len(p.decisions)
    load[0] = reading
    p.choose(2, keys[0])
    p.observe(keys[0], 2, slower * IDLE[2])
    assert p.count == 2 and len(p.decisions) == decided


def test_trials_stay_within_the_budget(keys):
    p = ThreadPolicy()
    drive(p, 2, table(BUSY), keys, 3000)
    assert p.count == 1
    assert p.lost <= p.budget * p.clock + 0.5      # one early trial plus the budget


def test_trials_of_more_threads_wait_while_other_tasks_take_the_cores(keys, monkeypatch):
    """With another runnable task for each core, the policy starts at one thread and
    a trial of more threads is not run (it would lose, several runs slower): it stays
    at one thread at no cost and backs off; once the cores free up, the trial runs
    and the threads come back."""
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    others = [2]
    p = ThreadPolicy(others_running=lambda: others[0])
    used = drive(p, 2, table(BUSY), keys, 400)
    assert p.count == 1 and p.skipped >= 3
    # no run ever used 2 threads, and no trial ran
    assert list(p.decisions) == []
    assert sum(row.count(2) for row in used) == 0
    lost = p.lost
    others[0] = 0                                  # the machine is idle now
    drive(p, 2, table({1: 0.014, 2: 0.010}), keys, 600)
    assert p.count == 2 and p.lost >= lost


@pytest.mark.parametrize("cores, others, start", [
    (2, 2, 1), (2, 1, 1), (2, 0, 2), (2, None, 2), (16, 5, 8), (16, 13, 2), (16, 40, 1)])
def test_the_policy_starts_at_the_threads_the_free_cores_hold(monkeypatch, cores, others,
                                                                start):
    """The first count is the user's, or on a busy machine the most threads of the
    ladder that the cores other tasks leave free can hold (never the row-split rung,
    which needs a key that can split); from there the first trial goes up."""
    monkeypatch.setattr(threads_policy, "_cores", lambda: cores)
    p = ThreadPolicy(others_running=lambda: others)
    assert p.choose(cores) == start and p.count == start
    assert p.direction == (-1 if start == cores else 1)


def test_one_other_task_on_two_cores_leaves_room_for_no_second_thread(monkeypatch):
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    assert ThreadPolicy(others_running=lambda: 1)._cores_taken(2)
    assert not ThreadPolicy(others_running=lambda: 0)._cores_taken(2)
    assert not ThreadPolicy(others_running=lambda: None)._cores_taken(2)   # unknown
    assert not ThreadPolicy()._cores_taken(2)                              # no probe
    n = threads.others_running()
    assert n is None or n >= 0
    assert threads.parse_mode(None).others_running is threads.others_running


def test_a_near_tie_keeps_the_count_in_use(keys):
    p = ThreadPolicy()
    drive(p, 2, table({1: 0.0098, 2: 0.010}), keys, 300)     # 2% faster: noise
    assert p.count == 2


def test_first_run_at_a_count_is_a_warm_up(keys):
    p = ThreadPolicy()
    assert p.choose(2, keys[0]) == 2
    p.observe(keys[0], 2, 5.0)                     # a first run that made primitives
    for _ in range(2):
        assert p.choose(2, keys[0]) == 2
        p.observe(keys[0], 2, 0.01)
    assert keys[0]._thread_stats.recent == [0.01] * 2
    # two runs make a baseline: the first trial comes with the next run
    assert p.choose(2, keys[0]) == 1 and p.probe == 1


def test_a_new_cap_starts_over_at_it(keys):
    p = ThreadPolicy()
    drive(p, 4, table({1: 0.012, 2: 0.03, 4: 0.06}), keys, 300)
    assert p.count == 1 and p.ladder == [4, 2, SPLIT, 1]
    assert p.choose(2, keys[0]) == 2               # the user set 2: start there
    assert p.cap == 2 and p.ladder == [2, SPLIT, 1] and p.count == 2
    assert p.choose(1, keys[0]) == 1 and p.ladder == [1]


def test_many_cores_walk_the_ladder_down_to_the_best_count(keys):
    p = ThreadPolicy()
    drive(p, 16, table({16: 0.080, 8: 0.040, 4: 0.020, 2: 0.012, 1: 0.015}), keys, 2000)
    assert p.count == 2


def test_fixed_count_caps_at_torchs_count():
    f = FixedCount(3)
    assert f.choose(8) == 3 and f.choose(2) == 2 and f.limit(None, 3) is None


def test_mode_from_the_environment(monkeypatch):
    assert isinstance(threads.parse_mode(None), ThreadPolicy)
    assert isinstance(threads.parse_mode("adaptive"), ThreadPolicy)
    assert threads.parse_mode("fixed") is None
    assert threads.parse_mode("2").n == 2
    for bad in ("0", "-1", "many"):
        with pytest.raises(MXNetError, match="SYMTRITON_THREADS"):
            threads.parse_mode(bad)
    monkeypatch.setenv("SYMTRITON_THREADS", "fixed")
    threads.reset()
    try:
        assert threads.policy() is None and threads.state() == {"mode": "fixed"}
    finally:
        monkeypatch.delenv("SYMTRITON_THREADS")
        threads.reset()


# ---------------------------------------------------------------------------- run()

@pytest.fixture
def torch_threads():
    """torch's count set to 2 for the test (the cap), restored after."""
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(old)
    threads.reset()


def test_run_sets_the_chosen_count_and_torchs_back(torch_threads):
    threads.reset(FixedCount(1))
    seen = []
    threads.run(Key("k"), lambda check: seen.append(torch.get_num_threads()))
    threads.run(None, lambda: seen.append(torch.get_num_threads()))
    assert seen == [1, 1] and torch.get_num_threads() == 2

    def boom(check):
        raise RuntimeError("launch failed")
    with pytest.raises(RuntimeError, match="launch failed"):
        threads.run(Key("k"), boom)
    assert torch.get_num_threads() == 2


def test_chosen_count_runs_a_block_at_the_policys_count_and_keeps_the_users_cap(
        torch_threads, monkeypatch):
    """A bind's allocations run at the count the load allows (one thread beside two
    busy tasks on 2 cores), torch's count comes back after, also on an error, and a
    launch list inside still sees the user's 2 as the cap (no restart at 1)."""
    monkeypatch.setattr(threads_policy, "_cores", lambda: 2)
    p = ThreadPolicy(others_running=lambda: 2)
    threads.reset(p)
    seen = []
    with threads.chosen_count():
        seen.append(torch.get_num_threads())
        gen = p.gen
        with threads.chosen_count():                    # nested: the same count
            seen.append(torch.get_num_threads())
        threads.run(Key("k"), lambda check: seen.append(torch.get_num_threads()))
        seen.append(torch.get_num_threads())
    assert seen == [1, 1, 1, 1] and torch.get_num_threads() == 2
    assert p.cap == 2 and p.count == 1 and p.gen == gen    # never restarted at 1
    with pytest.raises(RuntimeError, match="init failed"):
        with threads.chosen_count():
            raise RuntimeError("init failed")
    assert torch.get_num_threads() == 2
    threads.reset(None)                                 # fixed: left alone
    with threads.chosen_count():
        assert torch.get_num_threads() == 2


def test_own_threads_are_not_other_load():
    """A process's own runnable threads (an intra-op team spinning after a region,
    the kernel-file writers of a cold start) are not counted as other tasks: the
    policy would start at one thread on an idle machine."""
    from runtime.threads_load import _runnable, own_running
    assert _runnable(b"12 (python3) R 1 2 3")
    assert not _runnable(b"12 (python3) S 1 2 3")
    assert _runnable(b"12 (a) S (b)) R 1 2")               # a name holding ") S "
    assert own_running() >= 1                              # the caller runs
    stop = threading.Event()
    a = torch.rand(600, 600)

    def spin():                                            # GIL-free ATen work
        while not stop.is_set():
            torch.mm(a, a)
    workers = [threading.Thread(target=spin) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        time.sleep(0.05)
        assert max(own_running() for _ in range(20)) >= 2
    finally:
        stop.set()
        for w in workers:
            w.join()


def test_run_leaves_the_count_alone_when_fixed_or_deterministic(torch_threads):
    threads.reset(None)
    seen = []
    threads.run(Key("k"), lambda check: seen.append((torch.get_num_threads(), check)))
    threads.reset(FixedCount(1))
    torch.use_deterministic_algorithms(True)
    try:
        threads.run(Key("k"), lambda check: seen.append((torch.get_num_threads(), check)))
    finally:
        torch.use_deterministic_algorithms(False)
    assert seen == [(2, None), (2, None)]


def test_run_cuts_a_slow_trial_short(torch_threads, keys):
    p = ThreadPolicy()
    drive(p, 2, table(BUSY), keys, 40)
    assert p.count == 1
    threads.reset(p)
    for k in keys:                     # tiny baselines: any real run is past the limit
        k._thread_stats.recent = [1e-6] * p.window
        k._thread_stats.seen.add(2)
    p.least = 1e-6
    p.due = p.clock
    seen = []

    def launches(check):
        seen.append(torch.get_num_threads())
        time.sleep(0.002)
        check()
        seen.append(torch.get_num_threads())
    threads.run(keys[0], launches)
    assert seen == [2, 1]               # tried 2, went back to 1 after the first launch
    assert p.probe is None and p.count == 1 and p.decisions[-1][2] == 2
    assert torch.get_num_threads() == 2


def _train(mode, steps=6):
    """A small conv net trained a few steps with ``SYMTRITON_THREADS=mode``; its
    parameters, outputs and the launches it made."""
    import module_api as mx
    from runtime.launcher import LaunchCounter
    threads.reset(threads.parse_mode(mode))
    rng = np.random.RandomState(0)
    x = rng.rand(32, 1, 12, 12).astype(np.float32)
    y = rng.randint(0, 4, 32).astype(np.float32)
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), num_filter=6, name="c1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=4, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    it = mx.io.NDArrayIter(x, y, batch_size=16)
    mod.bind(it.provide_data, it.provide_label)
    mx.random.seed(0)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                          "momentum": 0.9})
    LaunchCounter.reset()
    for _ in range(steps):
        it.reset()
        for b in it:
            mod.forward_backward(b)
            mod.update()
    params = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    return params, mod.get_outputs()[0].asnumpy(), LaunchCounter.total


def test_results_and_launches_do_not_depend_on_the_count(torch_threads, monkeypatch):
    monkeypatch.delenv("SYMTRITON_CPU_TARGET", raising=False)
    p2, o2, n2 = _train("fixed")
    p1, o1, n1 = _train("1")
    pa, oa, na = _train("adaptive")
    assert n1 == n2 == na
    for k in p2:
        np.testing.assert_allclose(p1[k], p2[k], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pa[k], p2[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o1, o2, rtol=1e-5, atol=1e-6)
    assert torch.get_num_threads() == 2
