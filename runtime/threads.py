"""How many threads the cpu target's launches use: a policy that notices a busy machine.

The cpu target runs each launch as ATen calls on torch's intra-op (OpenMP) thread
pool. Every ATen call large enough to split (ATen's grain: 32,768 elements) opens a
parallel region, and a region ends only when every thread of the team has done its
static share: a LeNet training step at batch 64 opens 52 of them. On an idle
machine that is what makes the step fast. On a machine whose cores are busy with
other processes, a team thread is often descheduled when its region starts, and
the others wait for it, spinning, for up to a scheduler time slice: each region
then costs milliseconds, and a step slows down several times (LeNet on 2 cores
with two busy loops beside it: 5x slower with 2 threads than with 1). mxnet 1.9.1
at its default settings gives OpenMP half the processors of an x86 machine (it
assumes hyper-threading): one thread on a 2-core machine, which loses only its
fair share of the cores when they are busy.

The policy measures instead of guessing. :func:`run` times each run of a bound
launch list (one Program phase of one executor: a "key") with the count it
chose. Once a key has a baseline at the current count (the mean of its last
2 to 4 runs), the policy tries the neighbouring count of a ladder (the user's count,
its half, its quarter, ..., 1) for a few runs, compares them with the same
keys' baselines, keeps the faster (by 10% at least: a near tie keeps the count
in use), and tries again later, since the load of a machine changes.

Where each piece lives: the trials and decisions, ``runtime/threads_policy.py``;
the load reading that holds back a trial of more threads on a busy machine,
``runtime/threads_load.py``; the ladder's row-split rung (two half-batch
executors of one thread each), ``runtime/threads_split.py``. This module holds
the process's policy and :func:`run`, which every cpu launch list goes through.

The user's setting is the cap: the policy never uses more threads than
``torch.get_num_threads()`` (``OMP_NUM_THREADS`` or ``torch.set_num_threads``)
says, starts at that count, and sets it back after each launch list, so the
user's own torch code never sees a changed count. A change of that setting
starts the policy over at the new count.

Numerics: ATen's element-wise ops, matmuls and convolutions give the same bits at
any thread count; reductions to a few values (a full ``sum``) may differ in the
last bit, as they do between two machines with different core counts. So
results can differ at rounding level between runs whose load differed. For
bit-for-bit reproducible runs, use ``SYMTRITON_THREADS=fixed`` (or
``torch.use_deterministic_algorithms(True)``, which the policy also honours by
leaving the count alone and never splitting rows). A row-split step sums each
parameter's gradient over two halves: one more rounding than a whole step.

``SYMTRITON_THREADS`` (read at the first launch; :func:`reset` reads it again):

* unset or ``adaptive``: the policy above;
* ``fixed``: launches run with torch's current count, never changed;
* ``N`` (a positive integer): launches run with ``min(N, torch.get_num_threads())``
  threads.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time

import torch

from compiler.errors import MXNetError

from .threads_load import others_running
from .threads_policy import FixedCount, ThreadPolicy
from .threads_split import _LOCAL, SPLIT, _one_thread, _split_now, _threads_of, pinned

__all__ = ["ENV", "SPLIT", "FixedCount", "ThreadPolicy", "chosen_count", "others_running",
           "parse_mode", "pinned", "policy", "reset", "run", "state"]

ENV = "SYMTRITON_THREADS"

_LOCK = threading.Lock()
_POLICY: list = []          # [the policy object, or None for ``fixed``] once read


def parse_mode(value: str | None):
    """The policy ``SYMTRITON_THREADS=value`` asks for: a :class:`ThreadPolicy`
    (unset, empty, ``adaptive``), None (``fixed``), or :class:`FixedCount`."""
    v = (value or "").strip().lower()
    if v in ("", "adaptive", "auto"):
        return ThreadPolicy(others_running=others_running)
    if v == "fixed":
        return None
    if v.isdigit() and int(v) > 0:
        return FixedCount(int(v))
    raise MXNetError(f"{ENV}={value!r}: use 'adaptive' (the default: fewer threads when the "
                     f"machine is busy), 'fixed' (torch's count, never changed) or a positive "
                     f"thread count")


def policy():
    """The process's policy (read from ``SYMTRITON_THREADS`` at the first call)."""
    if not _POLICY:
        with _LOCK:
            if not _POLICY:
                _POLICY.append(parse_mode(os.environ.get(ENV)))
    return _POLICY[0]


_UNSET = object()


def reset(value=_UNSET) -> None:
    """Forget the policy and its state. With no argument ``SYMTRITON_THREADS`` is read
    again at the next launch; otherwise ``value`` is used from now on (a policy
    object, or None: ``fixed``)."""
    with _LOCK:
        _POLICY.clear()
        if value is not _UNSET:
            _POLICY.append(value)


def state() -> dict:
    """The policy's :meth:`ThreadPolicy.state` (``{"mode": "fixed"}`` when fixed)."""
    p = policy()
    return {"mode": "fixed"} if p is None else p.state()


@contextlib.contextmanager
def chosen_count():
    """A block of ATen work outside the launch lists (allocating and zeroing a bind's
    arrays, initialising parameters) run with the policy's current count, torch's
    count set back after.

    Such work opens parallel regions as a step does (``torch.zeros`` of a large
    buffer fills it on the whole team), so on a busy machine it stalls the same
    way: Inception-BN's bind and ``init_params`` took 2.5 s at 2 threads beside
    other load and 0.2 s at 1. The block is not timed; it may be the first thing a
    program does, and then the policy starts here, at the count the machine's load
    allows (``ThreadPolicy._restart``). Launch lists run inside it still see the
    user's count as the cap. Nothing changes under ``SYMTRITON_THREADS=fixed``,
    deterministic algorithms, or inside a row-split half.
    """
    p = policy()
    if p is None or getattr(_LOCAL, "pinned", False) or \
            torch.are_deterministic_algorithms_enabled():
        yield
        return
    entry = torch.get_num_threads()
    outer = getattr(_LOCAL, "cap", None)
    cap = outer or entry
    with _LOCK:
        n = _threads_of(p.choose(cap, None))
    if n != entry:
        torch.set_num_threads(n)
    _LOCAL.cap = cap
    try:
        yield
    finally:
        _LOCAL.cap = outer
        if n != entry:
            torch.set_num_threads(entry)


def run(key, fn, *args):
    """``fn(*args)`` with the policy's thread count; the run timed under ``key``.

    ``key`` is an object that stays the same for the same work (a bound launch
    list); None runs with the chosen count without timing. A keyed ``fn`` takes
    a keyword ``check``: a callable to call between its launches, or None; in a
    trial run it sets the count in use back once the run is too slow (see
    :meth:`ThreadPolicy.limit`). torch's count is set back afterwards, also when
    ``fn`` raises. A key with a ``row_split`` (``executor_rowsplit.PhaseSplit``)
    runs as two row halves on one thread each instead where the policy chose
    :data:`SPLIT` or the key's ``forced`` says so (then ``fn`` is not called).
    """
    if getattr(_LOCAL, "pinned", False):
        return fn(*args) if key is None else fn(*args, check=None)
    p = policy()
    rs = getattr(key, "row_split", None)
    if p is None or torch.are_deterministic_algorithms_enabled():
        if rs is not None and rs.forced:    # the forward ran split before the change
            return _one_thread(rs.run)
        return fn(*args) if key is None else fn(*args, check=None)
    entry = torch.get_num_threads()
    cap = getattr(_LOCAL, "cap", None) or entry     # the user's, inside chosen_count too
    clock = time.perf_counter
    with _LOCK:
        n = p.choose(cap, key)
        split = _split_now(rs, n)
        limit = None if key is None or split else p.limit(key, n)
        back = _threads_of(p.count)
    if split and not rs.prepare():      # the halves bind (and compile) once, untimed
        split, n = False, (1 if n == SPLIT else n)
    if split:
        n = SPLIT
    threads_n = _threads_of(n)
    t0 = clock()
    if threads_n != entry:
        torch.set_num_threads(threads_n)
    cut = []
    outer, _LOCAL.cap = getattr(_LOCAL, "cap", None), cap   # for a chosen_count inside
    try:
        if split:
            # a trial's runs build no script (compiler/cpu/script.py): a loser would pay
            out = rs.run(build=getattr(p, "probe", None) is None)
        elif key is None:
            out = fn(*args)
        elif limit is None:
            out = fn(*args, check=None)
        else:
            limit += t0

            def check():
                if not cut and clock() > limit:
                    torch.set_num_threads(back)
                    cut.append(True)
            out = fn(*args, check=check)
    finally:
        _LOCAL.cap = outer
        if threads_n != entry or cut:
            torch.set_num_threads(entry)
    if key is not None and not (split and rs.untimed):   # (a run that built a script)
        t1 = clock()
        with _LOCK:
            p.observe(key, n if split or n != SPLIT else 1, t1 - t0, bool(cut))
    return out
