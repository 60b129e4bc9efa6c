"""Defaults a distributed worker needs before torch is imported.

torch reads ``TORCH_CPP_LOG_LEVEL`` and ``TORCH_SHOW_CPP_STACKTRACES`` once, when it is
imported; after that they cannot be changed from Python. A worker of a distributed job
(``RANK`` and ``WORLD_SIZE`` set, as torchrun sets them) whose peer dies would otherwise
print, after symtriton's one-line ``WorkerLostError``, every warning and error the c10d
store client logs, each with some twenty lines of C++ stack frames (a rank that cannot
reach rank 0 logs them at ERROR level). So ``import module_api`` sets, for such a worker,
``TORCH_CPP_LOG_LEVEL=FATAL`` and ``TORCH_SHOW_CPP_STACKTRACES=0``, unless the user set
them or asked for the details with ``SYMTRITON_LOG=dist``; every failure those logs
describe reaches Python as an exception, which symtriton names in one line. A script that imports
torch before ``module_api`` keeps torch's own defaults.
"""
from __future__ import annotations

import os

#: What a distributed worker gets unless the user set the variable.
WORKER_DEFAULTS = {"TORCH_CPP_LOG_LEVEL": "FATAL", "TORCH_SHOW_CPP_STACKTRACES": "0"}


def apply(environ=None) -> dict:
    """Set :data:`WORKER_DEFAULTS` in ``environ`` (``os.environ``) for a distributed worker.

    Parameters
    ----------
    environ : dict, optional
        The environment to change; ``os.environ`` by default.

    Returns
    -------
    dict
        The variables it set (empty outside a distributed job, under
        ``SYMTRITON_LOG=dist``, or when the user set them all).
    """
    env = os.environ if environ is None else environ
    if "RANK" not in env or "WORLD_SIZE" not in env or \
            "dist" in env.get("SYMTRITON_LOG", ""):
        return {}
    added = {k: v for k, v in WORKER_DEFAULTS.items() if k not in env}
    env.update(added)
    return added


apply()
