"""Programs cached by key, in memory and on disk; kernels shared by source hash.

The key is a sha256 over a canonical, sorted JSON of *named* parts (graph
JSON, input shapes, dtypes, mode, grad_req, target, template hash, versions),
so ``SYMTRITON_LOG=cache`` can say which part changed on a surprise miss.

On disk (``cache_dir()``, per user by default, ``SYMTRITON_CACHE_DIR`` to move it)::

    programs/<key>/program.json      the Program
    programs/<key>/manifest.json     sha256 of program.json and of every kernel it uses,
                                     and the versions it was built with
    kernels/k_<sha256 prefix>.py     kernel sources, content-addressed, written atomically
    symbols/<sha256 prefix>.json     the symbols programs were compiled from
    locks/<key>.lock                 held while one process builds <key>

Each entry's manifest also records its compile inputs (``compile``: the symbol file,
every argument's shape and dtype, grad_req, mode, target), so that ``symtriton cache
verify --rebuild`` can compile it again and compare, in a directory filled at run time
as in one ``symtriton compile`` wrote.

Concurrency and crashes:

* An entry is written into a private temp directory ``programs/.tmp-<key>-<host>-<pid>-…``
  and published by one atomic directory rename, so a reader sees a whole entry or none
  (never one writer's program with another's manifest).
* Readers never take a lock: they verify the manifest (checksums and versions); anything
  unreadable, corrupt or built with other versions is a miss.
* Builders take ``locks/<key>.lock`` (``filelock``; ``SYMTRITON_CACHE_LOCK_TIMEOUT``
  seconds, 600 by default), then look again: when several processes compile the same key
  at once, one builds and the others load its entry.  Only a builder holding the lock
  replaces an entry (corrupt, stale or forced) and it does so by renaming the old one aside
  and then removing it; shared directories are never deleted otherwise.  Temp directories
  left by a crashed builder are removed by the next builder of that key.
* A cache directory that cannot be written (read-only, full) is reported once with a
  warning, and that process keeps its Programs in memory.

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

Test hook: ``SYMTRITON_TEST_CRASH_AT=<stage>`` makes a builder call ``os._exit(1)`` at a
named stage (see ``CRASH_STAGES``) to simulate a crash or kill; only the crash tests use it.
"""
from __future__ import annotations

import concurrent.futures
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import threading
import time

from . import cache_trust
from ..ir import rendering
from .atomic import atomic_write_bytes, atomic_write_text
from ..errors import MXNetError

log = logging.getLogger("symtriton.cache")

_stats_lock = threading.Lock()
_STATS = {"hits": 0, "misses": 0, "disk_hits": 0, "compiles": 0, "kernels_compiled": 0,
          "kernels_loaded": 0, "compile_seconds": 0.0, "corrupt_entries": 0}
_GENERATED: set = set()             # kernel hashes whose source this process generated
# kernel hash -> (path, source bytes) of the kernels this process wrote and has not yet
# imported: their first import compiles these bytes, not the file read back and checked
_FRESH: dict = {}
_MEMORY: dict = {}
_MEMORY_ONLY_DIRS: set = set()      # cache dirs found unwritable (warned once per process)
_REPORTED_STALE: set = set()        # (entry, versions) already reported as a version mismatch

#: Stages at which ``SYMTRITON_TEST_CRASH_AT`` kills a builder (test hook).
CRASH_STAGES = ("locked", "kernels", "program", "manifest", "aside", "published")

#: Where the symbols that programs were compiled from are kept (``symbols/<hash>.json``).
SYMBOLS = "symbols"
_TMP_PREFIX = ".tmp-"

# filelock logs each acquire and release at DEBUG on its "filelock" logger: four lines
# per compile in the log of a user who calls logging.basicConfig(level=logging.DEBUG).
# They are symtriton's business, so that logger stops at WARNING unless the user has
# given it a level of their own.
if logging.getLogger("filelock").level == logging.NOTSET:
    logging.getLogger("filelock").setLevel(logging.WARNING)
_OLD_PREFIX = ".old-"
_STALE_TEMP_SECONDS = 3600.0
_KERNEL_HASH = re.compile(r"[0-9a-f]{24}")


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


def clear_memory_cache():
    """Forget in-memory Programs (tests use it to exercise the disk cache)."""
    _MEMORY.clear()
    _REPORTED_STALE.clear()
    _FRESH.clear()


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


def _crash_point(stage: str):
    """Test hook: ``SYMTRITON_TEST_CRASH_AT=<stage>`` exits abruptly here."""
    if os.environ.get("SYMTRITON_TEST_CRASH_AT") == stage:
        os._exit(1)


_VERSIONS = None


def _versions() -> dict:
    # importlib.metadata, not ``import triton``: the cpu target never imports triton,
    # and importing it early would fix the interpreter choice (triton_mode.py)
    global _VERSIONS
    if _VERSIONS is None:
        from importlib.metadata import PackageNotFoundError, version
        try:
            ours = version("symtriton")
        except PackageNotFoundError:  # not installed: running from a checkout
            ours = "checkout"
        try:
            triton_version = version("triton")
        except PackageNotFoundError:
            import triton
            triton_version = triton.__version__
        _VERSIONS = {"symtriton": ours, "triton": triton_version}
    return dict(_VERSIONS, templates=rendering.template_hash(), compiler=_compiler_hash())


def generated_here(source_hash: str) -> bool:
    """Whether this process generated the kernel ``source_hash`` (a real compile)."""
    return source_hash in _GENERATED


_COMPILER_HASH = None


def _compiler_hash() -> str:
    """Hash of the compiler's own sources: a code change invalidates entries."""
    global _COMPILER_HASH
    if _COMPILER_HASH is None:
        h = hashlib.sha256()
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # compiler/
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(folder, root)
            for name in sorted(files):
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), "rb") as f:
                        h.update(os.path.join(rel, name).encode() + b"\0" + f.read())
        _COMPILER_HASH = h.hexdigest()[:16]
    return _COMPILER_HASH


def make_key(parts: dict) -> str:
    """sha256 over the canonical JSON of named parts (plus versions)."""
    # "name" is for messages only: auto names (makeloss0, makeloss1) depend on
    # how many symbols the process built before, and must not split the cache
    full = {k: v for k, v in parts.items() if k != "name"}
    full["versions"] = _versions()
    text = json.dumps(full, sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(text.encode()).hexdigest()[:32]
    if "cache" in os.environ.get("SYMTRITON_LOG", ""):
        for name, value in sorted(full.items()):
            digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]
            log.warning("cache key %s part %s = %s", key, name, digest)
    return key


def describe_key(parts: dict) -> str:
    shapes = ", ".join(f"{k}={tuple(v)}" for k, v in sorted(parts.get("shapes", {}).items()))
    return (f"symbol '{parts.get('name')}', shapes {shapes}, "
            f"{'training' if parts.get('for_training') else 'inference'}"
            f"{'' if parts.get('is_train', True) else ' (forward is_train=False)'}, "
            f"target {parts.get('target')}")


def _compile_hint(parts: dict) -> str:
    return ("symtriton compile SYMBOL.json "
            + " ".join(f"--shape {k}={','.join(map(str, v))}" for k, v in
                       sorted(parts.get("shapes", {}).items()))
            + (" --train" if parts.get("for_training") else "")
            + f" --target {parts.get('target')} --out {cache_dir()}")


class _Entry:
    """What reading one entry found: ``program``, or why not (``missing``/``corrupt``/``stale``)."""
    __slots__ = ("program", "status", "detail")

    def __init__(self, program=None, status="ok", detail=""):
        self.program, self.status, self.detail = program, status, detail


def symbol_file(symbol_json: str) -> str:
    """Where a symbol's JSON is stored in a cache directory: ``symbols/<sha256 prefix>.json``."""
    return f"{SYMBOLS}/{hashlib.sha256(symbol_json.encode()).hexdigest()[:24]}.json"


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


def _memory_only(root, exc):
    if root not in _MEMORY_ONLY_DIRS:
        _MEMORY_ONLY_DIRS.add(root)
        log.warning("symtriton: cache directory %s is not writable (%s); compiled programs are "
                    "kept in memory only in this process (set SYMTRITON_CACHE_DIR to a "
                    "writable directory to share them)", root, exc)


class _key_lock:
    """``locks/<key>.lock`` for building ``key``; a no-op when the cache dir is unwritable."""

    def __init__(self, root, key, parts):
        self.root, self.key, self.parts, self.lock = root, key, parts, None

    def __enter__(self):
        if self.root in _MEMORY_ONLY_DIRS:
            return self
        import filelock
        path = os.path.join(self.root, "locks", f"{self.key}.lock")
        timeout = float(os.environ.get("SYMTRITON_CACHE_LOCK_TIMEOUT", "600"))
        try:
            cache_trust.make_dirs(os.path.dirname(path))
            # locks/ is checked as the rest of the directory, and the lock file is never
            # reached through a symlink: a planted locks/<key>.lock -> /elsewhere would
            # make this process create or truncate a file outside the cache
            cache_trust.check_dir(os.path.dirname(path), self.root)
            cache_trust.check_lock_file(path, self.root)
            # created here with an explicit mode: filelock's is 0o666 & ~umask
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                             cache_trust.FILE_MODE))
            lock = filelock.FileLock(path, timeout=timeout)
            lock.acquire()
        except filelock.Timeout:
            raise MXNetError(
                f"timed out after {timeout:g} s waiting for the cache lock {path}: another "
                f"process is compiling key {self.key} ({describe_key(self.parts)}). If no other "
                f"symtriton process is running, delete the lock file; or raise "
                f"SYMTRITON_CACHE_LOCK_TIMEOUT") from None
        except OSError as exc:
            _memory_only(self.root, exc)
            return self
        self.lock = lock
        _crash_point("locked")
        _remove_leftovers(os.path.join(self.root, "programs"), self.key)
        return self

    def __exit__(self, *exc):
        if self.lock is not None:
            self.lock.release()
        return False


def _owner_tag() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _remove_leftovers(parent, key):
    """Temp and set-aside directories of ``key`` left by crashed builders (lock held).

    Names are ``<prefix><key>-<host>-<pid>-<suffix>``: on this host one whose process is
    gone is removed; from another host, one untouched for an hour.
    """
    try:
        names = os.listdir(parent)
    except OSError:
        return
    host = socket.gethostname()
    for name in names:
        prefix = next((p for p in (_TMP_PREFIX, _OLD_PREFIX) if name.startswith(f"{p}{key}-")),
                      None)
        if prefix is None:
            continue
        path = os.path.join(parent, name)
        rest = name[len(prefix) + len(key) + 1:]
        parts = rest.split("-")
        if rest.startswith(host + "-") and len(parts) >= 3 and parts[-2].isdigit():
            pid = int(parts[-2])
            dead = pid == os.getpid() or not _pid_alive(pid)
        else:
            try:
                dead = time.time() - os.stat(path).st_mtime > _STALE_TEMP_SECONDS
            except OSError:
                dead = False
        if dead:
            shutil.rmtree(path, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def kernel_path(source_hash: str) -> str:
    path = os.path.join(cache_dir(), "kernels", f"k_{source_hash}.py")
    if _FALLBACK_DIR is not None and not os.path.exists(path):
        private = os.path.join(_FALLBACK_DIR, f"k_{source_hash}.py")
        if os.path.exists(private):
            return private
    return path


#: Triton's own cache of compiled GPU kernels, inside the cache directory: written by
#: ``symtriton compile --target cuda:<arch>`` and by a GPU process's own compiles.
TRITON_DIR = "triton"


def triton_dir():
    """``<cache dir>/triton``, created if needed and checked for trust: the directory
    where a GPU process keeps (and finds) its compiled Triton kernels (None when it
    cannot be created: Triton then keeps its own default cache).

    Everything in it must pass ``cache_trust.audit`` (cubins are code as much as
    kernel sources); raises ``UntrustedCacheError`` naming the first problem.
    """
    root = cache_dir()
    path = os.path.join(root, TRITON_DIR)
    try:
        cache_trust.make_dirs(path)
    except OSError:
        # a read-only directory without compiled kernels: Triton's default cache, or
        # this process's private directory when it has one
        if _FALLBACK_DIR is None:
            return None
        root, path = _FALLBACK_DIR, os.path.join(_FALLBACK_DIR, TRITON_DIR)
        cache_trust.make_dirs(path)
    cache_trust.check_dir(path, root)
    problems = cache_trust.audit(path)
    if problems:
        rel, why = problems[0]
        raise cache_trust.UntrustedCacheError(
            f"refusing to use Triton's cache {path}: {rel} is {why}. A cache directory is "
            f"code: whoever can write it can run code in every process that loads it.")
    return path


def trusted_kernel_path(source_hash: str) -> str:
    """:func:`kernel_path`, checked for import (see ``cache_trust``).

    Raises ``UntrustedCacheError`` when the file or a directory up to its cache root
    may be written by someone else, ``FileNotFoundError`` when there is no such file.
    """
    if not _KERNEL_HASH.fullmatch(source_hash):
        raise MXNetError(f"kernel name {source_hash!r} is not 24 hex digits: the program "
                         f"that names it is not one symtriton wrote; delete its cache entry")
    path = kernel_path(source_hash)
    private = _FALLBACK_DIR is not None and cache_trust.inside(path, _FALLBACK_DIR)
    cache_trust.check_file(path, _FALLBACK_DIR if private else cache_dir())
    return path


def write_kernel(source_hash: str, source: str) -> str:
    """Write a kernel source under its hash (atomically); a corrupt copy is replaced.

    When the cache directory cannot be written, the source goes to a private temp
    directory of this process instead (Triton imports kernels from files), and
    :func:`kernel_path` finds it there.
    """
    root = cache_dir()
    if root not in _MEMORY_ONLY_DIRS:
        path = os.path.join(root, "kernels", f"k_{source_hash}.py")
        data = source.encode("utf-8")
        try:
            with open(path, "rb") as f:
                if f.read() == data:      # already in the cache: loading it is not a compile
                    return path
        except OSError:
            pass
        _GENERATED.add(source_hash)
        try:
            cache_trust.make_dirs(os.path.dirname(path))
            atomic_write_bytes(path, data, cache_trust.FILE_MODE)
            _FRESH[source_hash] = (path, data)
            return path
        except OSError as exc:
            _memory_only(root, exc)
    return _write_private_kernel(source_hash, source)


_FALLBACK_DIR = None


def _write_private_kernel(source_hash: str, source: str) -> str:
    global _FALLBACK_DIR
    _GENERATED.add(source_hash)
    if _FALLBACK_DIR is None:
        import atexit
        _FALLBACK_DIR = tempfile.mkdtemp(prefix=f"symtriton-{os.getpid()}-kernels-")
        atexit.register(shutil.rmtree, _FALLBACK_DIR, True)
    path = os.path.join(_FALLBACK_DIR, f"k_{source_hash}.py")
    if not os.path.exists(path):
        atomic_write_text(path, source, cache_trust.FILE_MODE)
    _FRESH[source_hash] = (path, source.encode("utf-8"))
    return path


def fresh_kernel(source_hash: str):
    """``(path, source bytes)`` of a kernel this process wrote since the last
    :func:`clear_memory_cache` and asks for the first time, where :func:`kernel_path`
    still finds it; else None (then the file is read back and checked for trust).

    The bytes are the ones hashed into ``source_hash`` and written: importing them
    needs neither the file read back nor the walk over its directories that
    :func:`trusted_kernel_path` makes (Inception-BN's 271 kernels: 5,400 ``lstat``
    calls on a cold first step)."""
    item = _FRESH.pop(source_hash, None)
    if item is None or item[0] != kernel_path(source_hash):
        return None
    return item


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class KernelSources(dict):
    """``{kernel hash: source}`` of a Program being built, whose kernel files start being
    written (by a few threads, as :func:`write_kernels` writes them) as each new kernel
    is added: the writes, each waiting on its ``fsync``, overlap the rest of code
    generation, which holds the interpreter on the other core. :func:`write_kernels`
    waits for them and finishes the bookkeeping; :meth:`close` only waits (a build that
    failed).
    """

    def __init__(self):
        super().__init__()
        self.root = cache_dir()
        self.pool = None
        self.started = []        # (hash, path, bytes, future of _write_if_changed)
        self.off = self.root in _MEMORY_ONLY_DIRS

    def __setitem__(self, source_hash, source):
        if source_hash not in self and not self.off:
            self._start(source_hash, source)
        super().__setitem__(source_hash, source)

    def _start(self, source_hash, source):
        if self.pool is None:
            try:
                cache_trust.make_dirs(os.path.join(self.root, "kernels"))
            except OSError:
                self.off = True          # write_kernels finds out again, and says so
                return
            self.pool = concurrent.futures.ThreadPoolExecutor(8)
        path = os.path.join(self.root, "kernels", f"k_{source_hash}.py")
        data = source.encode("utf-8")
        self.started.append((source_hash, path, data,
                             self.pool.submit(_write_if_changed, path, data)))

    def close(self):
        """Wait for the writes started; ``[(hash, path, bytes, outcome)]``, the outcome
        ``"same"`` (the file was there), ``"written"`` or the ``OSError``."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        done = [(h, path, data, fut.result()) for h, path, data, fut in self.started]
        self.pool, self.started = None, []
        return done


def _write_if_changed(path, data: bytes):
    try:
        with open(path, "rb") as f:
            if f.read() == data:          # already in the cache: loading it is not a compile
                return "same"
    except OSError:
        pass
    return _try_write((None, path, data)) or "written"


def _finish_started(sources: KernelSources):
    """:func:`write_kernels` of a :class:`KernelSources`: its started writes waited
    for, the kernels this process wrote recorded, the failed ones and any not
    started written as :func:`write_kernels` writes them."""
    done = sources.close()
    todo = [(h, path, data) for h, path, data, outcome in done if outcome != "same"]
    _GENERATED.update(h for h, _, _ in todo)
    failed = [(h, outcome) for h, _, _, outcome in done if isinstance(outcome, OSError)]
    bad = {h for h, _ in failed}
    _FRESH.update((h, (path, data)) for h, path, data in todo if h not in bad)
    if failed:
        _memory_only(sources.root, failed[0][1])
        for h, _ in failed:
            _write_private_kernel(h, sources[h])
    seen = {h for h, *_ in done}
    rest = {h: src for h, src in sources.items() if h not in seen}
    if rest:
        write_kernels(rest)


def write_kernels(sources: dict):
    """:func:`write_kernel` for every ``{hash: source}`` of a Program, the files that
    are missing (or differ) written by a few threads at once (for a
    :class:`KernelSources`, the writes it started are waited for).

    Each atomic write waits on its own ``fsync``; the file system commits concurrent
    ones together, so eight writers publish a few hundred kernels (an Inception
    network) in a tenth of the time one does. What is decided per file (already
    there? which directory when the cache cannot be written?) stays in this thread.
    """
    if isinstance(sources, KernelSources):
        _finish_started(sources)
        return
    root = cache_dir()
    if root in _MEMORY_ONLY_DIRS or len(sources) < 2:
        for h, src in sources.items():
            write_kernel(h, src)
        return
    todo = []
    for h, src in sources.items():
        path = os.path.join(root, "kernels", f"k_{h}.py")
        data = src.encode("utf-8")
        try:
            with open(path, "rb") as f:
                if f.read() == data:      # already in the cache: loading it is not a compile
                    continue
        except OSError:
            pass
        todo.append((h, path, data))
    if not todo:
        return
    _GENERATED.update(h for h, _, _ in todo)
    try:
        cache_trust.make_dirs(os.path.join(root, "kernels"))
        with concurrent.futures.ThreadPoolExecutor(min(8, len(todo))) as pool:
            failed = [(h, exc) for (h, _, _), exc in zip(todo, pool.map(_try_write, todo))
                      if exc is not None]
    except OSError as exc:
        failed = [(h, exc) for h, _, _ in todo]
    bad = {h for h, _ in failed}
    _FRESH.update((h, (path, data)) for h, path, data in todo if h not in bad)
    if failed:
        _memory_only(root, failed[0][1])
        for h, _ in failed:
            _write_private_kernel(h, sources[h])


def _try_write(item):
    """Write one kernel file atomically; the OSError if it could not be."""
    _, path, data = item
    try:
        atomic_write_bytes(path, data, cache_trust.FILE_MODE)
    except OSError as exc:
        return exc
    return None


def _write_symbol(rel: str, text: str):
    """``symbols/<hash>.json`` of a compile record (content-addressed: kept if present)."""
    path = os.path.join(cache_dir(), *rel.split("/"))
    data = text.encode("utf-8")
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except OSError:
        pass
    cache_trust.make_dirs(os.path.dirname(path))
    atomic_write_text(path, text, cache_trust.FILE_MODE)


def _write_entry(entry: str, prog, sources: dict, record=None):
    """Publish ``entry`` (caller holds its lock): temp dir, then one atomic rename.

    ``record``: ``(symbol JSON, compile record)``; the symbol is written under
    ``symbols/`` and the record into the manifest (``compile``).
    """
    write_kernels(sources)
    if cache_dir() in _MEMORY_ONLY_DIRS:     # kernels could not be shared: publish nothing
        return
    if record is not None:
        _write_symbol(record[1]["symbol"], record[0])
    _crash_point("kernels")
    parent, key = os.path.split(entry)
    cache_trust.make_dirs(parent)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f"{_TMP_PREFIX}{key}-{_owner_tag()}-")
    try:
        body = prog.to_json().encode()
        _write_synced(os.path.join(tmp, "program.json"), body)
        _crash_point("program")
        files = {"program.json": _sha(body)}
        for h in sources:
            files[f"kernel:{h}"] = _sha(sources[h].encode())
        manifest = {"key": key, "files": files, "versions": _versions()}
        if record is not None:
            manifest["compile"] = record[1]
        _write_synced(os.path.join(tmp, "manifest.json"),
                      json.dumps(manifest, sort_keys=True).encode())
        _crash_point("manifest")
        aside = None
        if os.path.lexists(entry):       # corrupt, stale or forced: replace it atomically
            aside = os.path.join(parent, f"{_OLD_PREFIX}{key}-{_owner_tag()}-"
                                         f"{int(time.time() * 1000)}")
            try:
                os.rename(entry, aside)
            except FileNotFoundError:
                aside = None
            _crash_point("aside")
        try:
            os.rename(tmp, entry)          # publish
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            # a lockless writer published first: its entry stands
            shutil.rmtree(tmp, ignore_errors=True)
        _crash_point("published")
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_synced(path, data: bytes):
    # an explicit mode: open()'s 0o666 & ~umask is group-writable under umask 002
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, cache_trust.FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _check_entry(entry: str, root: str) -> tuple:
    """``(body, manifest)`` of a verified entry; raises ValueError/OSError/KeyError.

    Never reads a file that resolves outside ``root`` (a symlinked entry or kernel).
    """
    def read(path):
        if not cache_trust.inside(path, root):
            raise ValueError(f"{path} resolves outside the cache directory; not read")
        with open(path, "rb") as f:
            return f.read()

    manifest = json.loads(read(os.path.join(entry, "manifest.json")))
    body = read(os.path.join(entry, "program.json"))
    if _sha(body) != manifest["files"]["program.json"]:
        raise ValueError("program.json checksum mismatch")
    for name, digest in manifest["files"].items():
        if name.startswith("kernel:"):
            h = name.split(":", 1)[1]
            if not _KERNEL_HASH.fullmatch(h):
                raise ValueError(f"manifest names kernel {h!r}, not 24 hex digits")
            if _sha(read(os.path.join(root, "kernels", f"k_{h}.py"))) != digest:
                raise ValueError(f"kernel {h} checksum mismatch")
    return body, manifest


def _read_entry(entry: str, program_cls, report: bool = True) -> _Entry:
    """Read and verify one entry; never modifies the cache (replacing is the builder's job).

    An entry others may write is refused (``UntrustedCacheError``), not rebuilt: the
    rebuilt entry would land in the same directory.
    """
    root = cache_dir()
    if not os.path.lexists(os.path.join(entry, "manifest.json")):
        return _Entry(status="missing")
    for name in ("manifest.json", "program.json"):
        try:
            cache_trust.check_file(os.path.join(entry, name), root)
        except FileNotFoundError:
            pass        # a half-removed entry: reported as corrupt below
    try:
        body, manifest = _check_entry(entry, root)
        built, ours = manifest.get("versions"), _versions()
        if built != ours:
            diff = ", ".join(f"{k} {(built or {}).get(k)!r} != {v!r}" for k, v in sorted(ours.items())
                             if (built or {}).get(k) != v) or "versions missing"
            tag = (entry, json.dumps(built, sort_keys=True))
            if tag not in _REPORTED_STALE:
                _REPORTED_STALE.add(tag)
                log.warning("symtriton: cache entry %s was built with other versions (%s); "
                            "it is a miss and will be rebuilt", entry, diff)
            return _Entry(status="stale", detail=diff)
        return _Entry(program_cls.from_json(body.decode()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if report:
            bump("corrupt_entries")
            log.warning("symtriton: cache entry %s is unreadable (%s)%s", entry, exc,
                        "" if offline() or not cache_trust.owned_by_user(cache_dir())
                        else "; rebuilding it")
        return _Entry(status="corrupt", detail=str(exc))


def verify_cache(path: str = None) -> list:
    """Check every program entry under ``path`` (default :func:`cache_dir`).

    Returns a list of problems (``[]`` when every entry's checksums and versions match);
    temp directories being written by live builders are not problems. Nothing that
    resolves outside ``path`` is read: such entries and kernels are problems.
    """
    root = path or cache_dir()
    problems = []
    programs = os.path.join(root, "programs")
    names = sorted(os.listdir(programs)) if os.path.isdir(programs) else []
    ours = _versions()
    for name in names:
        if name.startswith("."):
            continue
        entry = os.path.join(programs, name)
        if not cache_trust.inside(entry, root):
            problems.append(f"{name}: resolves to {os.path.realpath(entry)}, outside "
                            f"{root}; not read")
            continue
        try:
            _, manifest = _check_entry(entry, root)
            if manifest.get("key", name) != name:
                problems.append(f"{name}: manifest names key {manifest.get('key')}")
            elif manifest.get("versions") != ours:
                built = manifest.get("versions") or {}
                problems.append(f"{name}: built with other versions (" + ", ".join(
                    f"{k} {built.get(k)!r} != {v!r}" for k, v in sorted(ours.items())
                    if built.get(k) != v) + ")")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problems.append(f"{name}: {exc}")
    return problems
