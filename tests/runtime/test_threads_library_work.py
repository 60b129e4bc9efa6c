"""The library's own ATen work outside launch lists runs at the thread policy's count
(``runtime/threads.py``): on a busy machine a parallel region at the user's count waits
for descheduled threads. mxnet's stochastic-depth example, whose module adds arrays
between Modules and hands gradients on, ran 2.9x slower beside one busy loop when this
work kept two threads (5.5 s an epoch against 1.9 s idle; 3.6 s now)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import module_api as mx
from runtime import ndarray_mx, threads
from runtime.threads_policy import FixedCount


@pytest.fixture
def counts(monkeypatch):
    """torch at 2 threads, the policy fixed at 1; yields the ``(work, count)`` of every
    :func:`threads.run` call, the count read inside the work."""
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    threads.reset(FixedCount(1))
    seen, real = [], threads.run

    def spy(key, fn, *args):
        def counted(*a, **k):
            seen.append((getattr(fn, "__name__", "?"), torch.get_num_threads()))
            return fn(*a, **k)
        return real(key, counted, *args)

    monkeypatch.setattr(threads, "run", spy)
    yield seen
    torch.set_num_threads(old)
    threads.reset()


def test_large_ndarray_arithmetic_runs_at_the_policys_count(counts):
    big = mx.nd.ones((300, 200))
    big += mx.nd.ones((300, 200))
    doubled = big * 2
    small = mx.nd.ones((10,))
    small += 1                              # below ATen's grain: no region, no policy
    assert [c for _, c in counts] == [1, 1] and torch.get_num_threads() == 2
    assert doubled.shape == (300, 200) and (doubled.asnumpy() == 4).all()
    assert (small.asnumpy() == 2).all() and ndarray_mx.PARALLEL_GRAIN == 32768


def test_head_gradients_are_copied_at_the_policys_count(counts):
    x = mx.sym.var("x")
    exe = (x * 3).simple_bind(mx.cpu(), x=(300, 200))
    exe.forward(is_train=True)
    counts.clear()
    exe.backward(mx.nd.ones((300, 200)) * 2)
    assert ("_set_head_grads", 1) in counts
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), 6)


def test_a_lazy_sparse_update_runs_at_the_policys_count(counts):
    """The Updater's lazy row update of a row_sparse gradient (mxnet's
    example/sparse/matrix_factorization: 15-19k samples/s beside one busy loop at two
    threads, 32-45k at the policy's count, 78k in mxnet)."""
    opt = mx.optimizer.create("sgd", learning_rate=0.5)
    updater = mx.optimizer.get_updater(opt)
    weight = mx.nd.ones((50, 4))
    grad = mx.nd.sparse.row_sparse_array((np.ones((2, 4), np.float32), [3, 7]), shape=(50, 4))
    counts.clear()
    updater(0, grad, weight)
    assert ("sparse_step", 1) in counts and torch.get_num_threads() == 2
    want = np.ones((50, 4), np.float32)
    want[[3, 7]] = 0.5
    np.testing.assert_allclose(weight.asnumpy(), want)
