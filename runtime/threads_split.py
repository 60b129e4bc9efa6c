"""The ladder's row-split rung, :data:`SPLIT`, and the glue that runs it.

Below two threads the ladder (``runtime/threads_policy.py``) holds one more
candidate, :data:`SPLIT`: a training executor's phase run as two half-batch
executors, one on a worker thread and one on the caller's, each on ONE intra-op
thread (ATen releases the GIL), joined once per phase
(``runtime/executor_rowsplit.py``; the graph must be provably separable along the
batch axis: ``compiler/row_split.py``). The two threads never wait for each other
inside a phase: Linux shares the cores per runnable thread, so beside two busy
loops on 2 cores they get about a core where one thread gets two thirds of one,
and on an idle machine they skip the barriers of an intra-op team. It is tried
and kept like any count (only when 10% faster), counts as one thread for the load
rule (``runtime/threads_load.py``: a stalled half costs its share, not a
barrier), starts only on a launch list that can split, and the half-batch Program
compiles only when a trial of it is due. A backward runs the way its forward ran,
whatever was chosen between.

This module owns the rung's constants, how a rung counts in threads, and what
:func:`runtime.threads.run` calls to decide on and run a split: :func:`pinned`
(the halves' launches run as they are), :func:`_one_thread` and
:func:`_split_now`.
"""
from __future__ import annotations

import threading

import torch

SPLIT = 0                   # the ladder's "2 row halves x 1 thread" (executor_rowsplit.py)
MIN_SPLIT_S = 0.002         # a launch list faster than this is not worth two halves
MAX_DEFER = 16              # runs of other keys a due SPLIT trial waits for a key that splits
_LOCAL = threading.local()  # ``pinned``: inside a row-split half, launches run as they are


def _threads_of(n: int) -> int:
    """The intra-op team a ladder entry runs: :data:`SPLIT` counts as one (its two
    threads never wait for each other, so a busy core costs it a share, not a stall)."""
    return 1 if n == SPLIT else n


def _label(n):
    return "split" if n == SPLIT else n


def pinned(fn, *args):
    """``fn(*args)`` with every launch list inside run as it is: no policy, no timing,
    torch's count untouched (the halves of a row-split run, each on one thread)."""
    _LOCAL.pinned = True
    try:
        return fn(*args)
    finally:
        _LOCAL.pinned = False


def _one_thread(fn):
    cap = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(cap)


def _split_now(rs, n) -> bool:
    """Whether a run with row-split ``rs`` (or None) and chosen count ``n`` runs split."""
    if rs is None:
        return False
    if rs.forced is not None:
        return rs.forced
    return n == SPLIT and rs.usable()

