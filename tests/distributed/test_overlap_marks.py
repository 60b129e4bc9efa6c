"""The pieces of dist_sync's overlap that need no second process: the executor's
backward marks, the group's "last launch touching each gradient", and the buckets
(runtime/kvstore_overlap.py)."""
import numpy as np
import pytest
import torch

import module_api as mx
from runtime import kvstore_overlap, threads
from runtime.kvstore_overlap import _cut, eligible_owner
from tests.models import mlp


@pytest.fixture(autouse=True)
def whole_runs():
    """Launch lists run whole, as the marks need: on a loaded machine the thread policy
    may try a row-split run (runtime/threads_split.py), whose backward fires no marks
    (the push then sends the buckets the backward did not)."""
    threads.reset(threads.FixedCount(torch.get_num_threads()))
    yield
    threads.reset()


def _trained_module(grad_req="write", contexts=None):
    mod = mx.mod.Module(mlp(hidden=(16,), classes=3), context=contexts or mx.cpu())
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))], grad_req=grad_req)
    mod.init_params(mx.init.Xavier())
    return mod


def _batch(seed):
    rng = np.random.RandomState(seed)
    return mx.io.DataBatch([mx.nd.array(rng.randn(4, 5))],
                           [mx.nd.array(rng.randint(0, 3, size=4))])


def test_a_mark_sees_each_gradient_final_after_its_last_launch():
    mod = _trained_module()
    group = mod._exec_group
    mod.forward_backward(_batch(0))
    exe = group.execs[0]
    last = group._last_touch(exe)
    assert set(last) == set(exe.grad_dict), "every gradient is written by a backward launch"
    seen = {}

    def mark_at(pos):
        def mark():
            seen[pos] = {n: exe.grad_dict[n].asnumpy().copy() for n, p in last.items()
                         if p <= pos}
        return mark
    exe.set_backward_marks({pos: mark_at(pos) for pos in set(last.values())})
    mod.forward_backward(_batch(1))
    assert sorted(seen) == sorted(set(last.values()))
    final = {n: g.asnumpy() for n, g in exe.grad_dict.items()}
    for pos, grads in seen.items():
        for n, g in grads.items():
            np.testing.assert_array_equal(g, final[n], err_msg=f"{n} at launch {pos}")
    # the gradients differ from the first batch's: the marks saw this backward's values
    exe.set_backward_marks(None)
    mod.forward_backward(_batch(0))
    assert any(not np.array_equal(final[n], g.asnumpy()) for n, g in exe.grad_dict.items())


def test_gradient_finish_follows_the_backward_launch_order():
    mod = _trained_module()
    group = mod._exec_group
    mod.forward_backward(_batch(0))
    grads = [g[0] for g in group.grad_arrays]
    assert all(eligible_owner(g) is group for g in grads)
    finish = group.gradient_finish(grads)
    last = group._last_touch(group.execs[0])
    names = [n for n in group.arg_names if n in group.param_names]
    assert finish == [last[n] for n in names]
    # the output layer's gradients are finished before the first layer's
    assert finish[names.index("fc1_weight")] > finish[names.index("fc2_weight")]


def test_only_write_single_device_gradients_are_eligible():
    add = _trained_module(grad_req="add")
    assert all(eligible_owner(g[0]) is None for g in add._exec_group.grad_arrays)
    two = _trained_module(contexts=[mx.cpu(0), mx.cpu(1)])
    assert all(eligible_owner(g) is None for gs in two._exec_group.grad_arrays for g in gs)


def test_buckets_follow_the_order_and_the_caps():
    grads = [torch.zeros(n) for n in (10, 300_000, 10, 20, 5)] + [torch.zeros(4, dtype=torch.float64)]
    order = [2, 0, 1, 3, 4, 5]
    first = kvstore_overlap.FIRST_BUCKET_BYTES
    assert 300_000 * 4 > first
    # the first bucket closes at 1 MiB; the rest share one under a 25 MiB cap; a dtype
    # change starts a new bucket
    assert _cut(order, grads, 25 << 20) == [[2, 0], [1, 3, 4], [5]]
    # a cap below one gradient's size: each its own bucket
    assert _cut(order, grads, 8) == [[2], [0], [1], [3], [4], [5]]


def test_a_marked_backward_still_runs_the_way_its_forward_ran():
    """Under a row-split run (runtime/executor_rowsplit.py) the marked launch list
    keeps the split: a split forward's backward runs split (its marks do not run: the
    halves' gradients are summed after both, so the push sends those buckets), and
    gives the whole run's gradients."""
    from runtime import threads
    from tests.runtime.test_row_split import AlwaysSplit, _fill, mlp as split_mlp
    sym, shapes = split_mlp()
    cap = torch.get_num_threads()
    try:
        threads.reset(None)
        whole = sym.simple_bind(mx.cpu(), grad_req="write", **shapes)
        _fill(whole, 0)
        whole.forward(is_train=True)
        whole.backward()
        want = {n: g.asnumpy().copy() for n, g in whole.grad_dict.items()}
        exe = sym.simple_bind(mx.cpu(), grad_req="write", **shapes)
        fired = []
        exe.set_backward_marks({0: lambda: fired.append(0)})
        _fill(exe, 0)
        threads.reset(AlwaysSplit())
        exe.forward(is_train=True)
        assert exe._row_split.halves is not None
        threads.reset(None)
        exe.backward()
        assert fired == []
        for n in want:
            np.testing.assert_allclose(exe.grad_dict[n].asnumpy(), want[n], rtol=1e-5,
                                       atol=1e-6, err_msg=n)
    finally:
        threads.reset()
        torch.set_num_threads(cap)
