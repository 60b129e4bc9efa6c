"""Programs cached by key, in memory and on disk; kernels shared by source hash.

:func:`lookup` finds the Program for a key: in this process's memory, then in the
cache directory, else it builds it (once across processes) and publishes it there.
The key is a sha256 over a canonical, sorted JSON of *named* parts, so
``SYMTRITON_LOG=cache`` can say which part changed on a surprise miss
(``cache_keys``).

On disk (``cache_dir()``, per user by default, ``SYMTRITON_CACHE_DIR`` to move it)::

    programs/<key>/program.json      the Program
    programs/<key>/manifest.json     sha256 of program.json and of every kernel it uses,
                                     and the versions it was built with
    kernels/k_<sha256 prefix>.py     kernel sources, content-addressed, written atomically
    symbols/<sha256 prefix>.json     the symbols programs were compiled from
    locks/<key>.lock                 held while one process builds <key>

Who does what:

* ``cache_state``: the directory, the environment switches, the counters
  (:func:`cache_stats`), and the directories found unwritable (a cache directory
  that cannot be written, read-only or full, is reported once with a warning, and
  that process keeps its Programs in memory);
* ``cache_keys``: the key and the versions an entry is built with;
* ``kernel_files``: the kernel sources (written, found, checked for import);
* ``cache_entries``: one entry: the build lock, publishing by one atomic rename,
  reading and verifying its manifest (readers never lock), the leftovers of crashed
  builders, and :func:`~compiler.artifacts.cache_entries.verify_cache`;
* ``cache_trust``: who may write the directory.

Who may write it: a cache directory is code (its kernel files are imported, its
programs choose what runs on which buffers), so whoever can write it can run code in
every process that loads it; checksums only catch accidents. Before an entry or a
kernel is read, ``cache_trust`` checks that the file and every directory up to the
cache root are owned by this user (or root) and not group- or world-writable, as ssh
does for its keys, and refuses anything else with an error naming the path and the
fix. The directories created here are ``0o755`` and the files ``0o644``,
whatever the umask.

Environment: ``SYMTRITON_OFFLINE=1`` turns a miss (or a stale entry) into an error naming
the key; ``SYMTRITON_FORCE_RECOMPILE=1`` ignores hits and rebuilds (replacing entries).
"""
from __future__ import annotations

import os
import time

from . import cache_trust
from .cache_entries import _Entry, _key_lock, _read_entry, _REPORTED_STALE, _write_entry
from .cache_keys import describe_key
from .cache_state import _MEMORY_ONLY_DIRS, _flag, _memory_only, bump, cache_dir, offline
from .kernel_files import _FRESH, write_kernel
# imported from here by compiler/__init__, the runtime, the CLI, benchmarks and tests
from .cache_state import cache_stats, reset_cache_stats  # noqa: F401
from .kernel_files import kernel_path  # noqa: F401
from ..errors import MXNetError

_MEMORY: dict = {}


def clear_memory_cache():
    """Forget in-memory Programs (tests use it to exercise the disk cache)."""
    _MEMORY.clear()
    _REPORTED_STALE.clear()
    _FRESH.clear()


def _compile_hint(parts: dict) -> str:
    return ("symtriton compile SYMBOL.json "
            + " ".join(f"--shape {k}={','.join(map(str, v))}" for k, v in
                       sorted(parts.get("shapes", {}).items()))
            + (" --train" if parts.get("for_training") else "")
            + f" --target {parts.get('target')} --out {cache_dir()}")


def lookup(key: str, parts: dict, build, record=None):
    """Return the Program for ``key``: memory, then disk, then ``build()``.

    ``build()`` returns ``(program, {kernel hash: source})``.  Reading needs no lock;
    building holds ``locks/<key>.lock`` so that concurrent processes build a key once.
    ``record()``, when given, returns ``(symbol JSON, compile record)``: what the
    entry's manifest keeps so that the entry can be rebuilt and compared.

    An entry whose checksums do not match (a kernel changed after it was written) is
    rebuilt when the cache directory belongs to this user; in a directory that belongs
    to someone else (a shared, root-owned AOT directory) it is refused with the command
    that repairs it.
    """
    from .program import Program
    force = _flag("SYMTRITON_FORCE_RECOMPILE")
    if not force:
        prog = _MEMORY.get(key)
        if prog is not None:
            bump("hits")
            return prog
    root = cache_dir()
    if os.path.isdir(root):   # refuse a root others may write before reading or writing it
        cache_trust.check_dir(root, root)
    entry = os.path.join(root, "programs", key)
    found = _Entry(status="forced") if force else _read_entry(entry, Program)
    if found.program is not None:
        return _disk_hit(key, found.program)
    bump("misses")
    if offline():
        _refuse_offline(key, parts, found)
    if found.status == "corrupt" and not cache_trust.owned_by_user(root):
        raise MXNetError(
            f"the symtriton cache entry {entry} is corrupt ({found.detail}), and {root} "
            f"belongs to {cache_trust.owner_of(root)}, not to you, so it is not rewritten. "
            f"Its owner repairs it with: symtriton cache verify --rebuild --repair {root}; "
            f"or set SYMTRITON_CACHE_DIR to a directory you own")

    with _key_lock(root, key, parts):
        if not force:
            again = _read_entry(entry, Program, report=False)
            if again.program is not None:     # another process built it while we waited
                return _disk_hit(key, again.program)
        t0 = time.perf_counter()
        prog, sources = build()
        bump("compiles")
        bump("compile_seconds", time.perf_counter() - t0)
        _MEMORY[key] = prog
        if root not in _MEMORY_ONLY_DIRS:
            try:
                _write_entry(entry, prog, sources, record() if record is not None else None)
            except OSError as exc:  # read-only or full disk: keep working from memory
                _memory_only(root, exc)
        if root in _MEMORY_ONLY_DIRS:
            for h, src in sources.items():
                write_kernel(h, src)
    return prog


def _disk_hit(key, prog):
    bump("hits")
    bump("disk_hits")
    _MEMORY[key] = prog
    return prog


def _refuse_offline(key, parts, found):
    why = {"stale": f"the cached entry was built with other versions ({found.detail}), "
                    f"and rebuilding it is not allowed offline",
           "corrupt": f"the cached entry is corrupt ({found.detail}; repair it with "
                      f"'symtriton cache verify --rebuild --repair {cache_dir()}')",
           }.get(found.status, "no compiled program")
    raise MXNetError(
        f"SYMTRITON_OFFLINE=1 and {why} for key {key} ({describe_key(parts)}) "
        f"in {cache_dir()}. Add it on a build machine with: {_compile_hint(parts)}")
