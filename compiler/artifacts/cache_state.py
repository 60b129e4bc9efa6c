"""Where the cache directory is, and what this process knows about it.

:func:`cache_dir` (``SYMTRITON_CACHE_DIR``, else per user), the switches read from
the environment (:func:`offline`; ``SYMTRITON_FORCE_RECOMPILE`` through
:func:`_flag`), the cache directories this process found it cannot write (reported
once with a warning; the process then keeps its Programs in memory and its kernels
in a private directory, see ``kernel_files``), and the counters of
:func:`cache_stats`. It imports no other cache module: ``kernel_files``,
``cache_entries`` and ``cache`` build on it.
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("symtriton.cache")

_stats_lock = threading.Lock()
_STATS = {"hits": 0, "misses": 0, "disk_hits": 0, "compiles": 0, "kernels_compiled": 0,
          "kernels_loaded": 0, "compile_seconds": 0.0, "corrupt_entries": 0}
_MEMORY_ONLY_DIRS: set = set()      # cache dirs found unwritable (warned once per process)


def cache_stats() -> dict:
    """Counters since the process started (or the last :func:`reset_cache_stats`).

    ``hits`` (memory or disk), ``misses``, ``disk_hits``, ``compiles`` (Programs
    built), ``kernels_compiled`` (kernels loaded that this process generated: their
    files were not in the cache), ``kernels_loaded`` (ready kernel files loaded: from
    an AOT directory or an earlier run),
    ``compile_seconds`` and ``corrupt_entries``.
    """
    with _stats_lock:
        return dict(_STATS)


def reset_cache_stats():
    """Zero the counters (the caches themselves are kept)."""
    with _stats_lock:
        for k in _STATS:
            _STATS[k] = 0.0 if isinstance(_STATS[k], float) else 0


def bump(name, amount=1):
    with _stats_lock:
        _STATS[name] += amount


def cache_dir() -> str:
    path = os.environ.get("SYMTRITON_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "symtriton")
    return path


def offline() -> bool:
    return _flag("SYMTRITON_OFFLINE")


def _flag(name) -> bool:
    return os.environ.get(name, "0") not in ("", "0")


def _memory_only(root, exc):
    if root not in _MEMORY_ONLY_DIRS:
        _MEMORY_ONLY_DIRS.add(root)
        log.warning("symtriton: cache directory %s is not writable (%s); compiled programs are "
                    "kept in memory only in this process (set SYMTRITON_CACHE_DIR to a "
                    "writable directory to share them)", root, exc)
