"""The load reading of the thread policy: how many cores, how many runnable tasks.

A trial of more threads is not run while other runnable tasks (Linux's
``/proc/loadavg`` count, read when a trial is due) leave fewer cores free than it
would use: such a trial loses, several runs slower, every time (LeNet on 2 cores
with two busy loops: 5-10x); it counts as a lost trial that cost nothing
(``ThreadPolicy._cores_taken`` and ``_skip_trial`` in ``runtime/threads_policy.py``).
:data:`~runtime.threads_split.SPLIT` counts as one thread there.
"""
from __future__ import annotations

import os


def _cores() -> int:
    """The machine's cores: the scope of ``/proc/loadavg``'s count (an affinity mask
    does not say where the other tasks run)."""
    return os.cpu_count() or 1


def others_running():
    """How many runnable tasks the machine has besides the calling thread, from Linux's
    ``/proc/loadavg`` (its fourth field: running / total, counting the caller), or
    None where that is not available."""
    try:
        with open("/proc/loadavg") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None

