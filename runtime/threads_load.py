"""The load reading of the thread policy: how many cores, how many runnable tasks.

A trial of more threads is not run while other runnable tasks (Linux's
``/proc/loadavg`` count, read when a trial is due) leave fewer cores free than it
would use: such a trial loses, several runs slower, every time (LeNet on 2 cores
with two busy loops: 5-10x); it counts as a lost trial that cost nothing
(``ThreadPolicy._cores_taken`` and ``_skip_trial`` in ``runtime/threads_policy.py``).
The same reading picks the count the policy starts at (``ThreadPolicy._restart``):
the most threads the free cores hold, so the first steps and a bind on a busy
machine do not stall either. :data:`~runtime.threads_split.SPLIT` counts as one
thread there.

"Other" tasks are the machine's runnable tasks less this process's own: the intra-op
team's threads spin for a while after each parallel region, and a cold start writes
kernel files on worker threads; counted as load, they would hold the policy at one
thread on an idle machine.
"""
from __future__ import annotations

import os


def _cores() -> int:
    """The machine's cores: the scope of ``/proc/loadavg``'s count (an affinity mask
    does not say where the other tasks run)."""
    return os.cpu_count() or 1


def _runnable(stat: bytes) -> bool:
    """Whether a ``/proc/<pid>/task/<tid>/stat`` line is of a runnable task (state
    ``R``: running or waiting for a core). The state follows the command name, which
    is in parentheses and may itself hold ``)``."""
    end = stat.rfind(b")")
    return end >= 0 and stat[end + 2:end + 3] == b"R"


def own_running() -> int:
    """This process's runnable threads (the caller among them), from
    ``/proc/self/task``; 1 where that is not available."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 1
    n = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                n += _runnable(f.read())
        except OSError:          # the thread ended meanwhile
            continue
    return max(n, 1)


def others_running():
    """How many runnable tasks the machine has besides this process's own threads,
    from Linux's ``/proc/loadavg`` (its fourth field: running / total, the caller
    included) and ``/proc/self/task``, or None where that is not available."""
    try:
        with open("/proc/loadavg") as f:
            total = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, total - own_running())
