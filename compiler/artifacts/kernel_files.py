"""Kernel sources on disk: ``kernels/k_<sha256 prefix>.py``, content-addressed.

A kernel's file is written once under the hash of its source, atomically and with
mode ``0o644`` (``atomic``, ``cache_trust``), and shared by every Program (and
every process) that uses it; Triton imports kernels from files. The writes are not
fsynced (``atomic``'s ``durable=False``): every Program entry's manifest holds the
sha256 of each kernel it uses and a read checks them (``cache_entries``), so a kernel
file left empty or zeroed by power loss makes the entries that use it a miss, and
their rebuild writes it again. An Inception network's 271 kernels took about 0.04 s
more to publish with an fsync each (``benchmarks/README.md``, cold start). This module owns

* where a kernel is (:func:`kernel_path`; :func:`trusted_kernel_path` checks it for
  import), and Triton's own cache of compiled GPU kernels (:func:`triton_dir`);
* writing them: :func:`write_kernel` one at a time, :func:`write_kernels` a
  Program's at once from a few threads (their system calls wait outside the
  interpreter lock), and :class:`KernelSources`, which starts those writes as code
  generation adds each kernel, so they overlap the rest of the build;
* which kernels this process generated (:func:`generated_here`: a real compile, not
  a load) and the bytes of those it wrote and has not imported yet
  (:func:`fresh_kernel`: their first import compiles these bytes instead of
  reading the file back and walking its directories for trust);
* where kernels go when the cache directory cannot be written: a private temp
  directory of this process, removed at exit, that :func:`kernel_path` also
  searches.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import tempfile

from . import cache_trust
from .atomic import atomic_write_bytes, atomic_write_text
from .cache_state import _MEMORY_ONLY_DIRS, _memory_only, cache_dir
from ..errors import MXNetError

_GENERATED: set = set()             # kernel hashes whose source this process generated
# kernel hash -> (path, source bytes) of the kernels this process wrote and has not yet
# imported: their first import compiles these bytes, not the file read back and checked
_FRESH: dict = {}
_KERNEL_HASH = re.compile(r"[0-9a-f]{24}")


def generated_here(source_hash: str) -> bool:
    """Whether this process generated the kernel ``source_hash`` (a real compile)."""
    return source_hash in _GENERATED


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
            atomic_write_bytes(path, data, cache_trust.FILE_MODE, durable=False)
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


class KernelSources(dict):
    """``{kernel hash: source}`` of a Program being built, whose kernel files start being
    written (by a few threads, as :func:`write_kernels` writes them) as each new kernel
    is added: the writes' system calls overlap the rest of code generation, which
    holds the interpreter. :func:`write_kernels` waits for them and finishes the
    bookkeeping; :meth:`close` only waits (a build that failed).
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

    The writers' system calls (open, write, rename) wait outside the interpreter lock.
    What is decided per file (already there? which directory when the cache cannot be
    written?) stays in this thread.
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
        atomic_write_bytes(path, data, cache_trust.FILE_MODE, durable=False)
    except OSError as exc:
        return exc
    return None
