"""One program entry on disk: built under a lock, published whole, read and verified.

Layout, under the cache directory::

    programs/<key>/program.json      the Program
    programs/<key>/manifest.json     sha256 of program.json and of every kernel it uses,
                                     and the versions it was built with
    symbols/<sha256 prefix>.json     the symbols programs were compiled from
    locks/<key>.lock                 held while one process builds <key>
    locks/<key>.building             while <key>'s builder writes; left by a crash

(kernel sources: ``kernel_files``). Each entry's manifest also records its compile
inputs (``compile``: the symbol file, every argument's shape and dtype, grad_req,
mode, target), so that ``symtriton cache verify --rebuild`` can compile it again and
compare.

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
  left by a crashed builder are removed by the next builder of that key (its marker,
  ``locks/<key>.building``, says one crashed), and by the first builder of each process.
* Nothing that resolves outside the cache directory is read (a symlinked entry or
  kernel), and every entry file is checked for trust first (``cache_trust``).

Test hook: ``SYMTRITON_TEST_CRASH_AT=<stage>`` makes a builder call ``os._exit(1)`` at a
named stage (see ``CRASH_STAGES``) to simulate a crash or kill; only the crash tests use it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time

from . import cache_trust
from .atomic import atomic_write_text, pid_alive
from .cache_keys import _versions, describe_key
from .cache_state import _MEMORY_ONLY_DIRS, _memory_only, bump, cache_dir, offline
from .kernel_files import _KERNEL_HASH, write_kernels
from ..errors import MXNetError

log = logging.getLogger("symtriton.cache")

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
_SWEPT: set = set()     # programs/ directories this process has swept for every key


def _crash_point(stage: str):
    """Test hook: ``SYMTRITON_TEST_CRASH_AT=<stage>`` exits abruptly here."""
    if os.environ.get("SYMTRITON_TEST_CRASH_AT") == stage:
        os._exit(1)


class _Entry:
    """What reading one entry found: ``program``, or why not (``missing``/``corrupt``/``stale``)."""
    __slots__ = ("program", "status", "detail")

    def __init__(self, program=None, status="ok", detail=""):
        self.program, self.status, self.detail = program, status, detail


def symbol_file(symbol_json: str) -> str:
    """Where a symbol's JSON is stored in a cache directory: ``symbols/<sha256 prefix>.json``."""
    return f"{SYMBOLS}/{hashlib.sha256(symbol_json.encode()).hexdigest()[:24]}.json"


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
        _remove_leftovers(self.root, self.key)
        return self

    def __exit__(self, *exc):
        if self.lock is not None:
            self.lock.release()
        return False


def _owner_tag() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _building_marker(root, key) -> str:
    """``locks/<key>.building``: made before a builder writes its temp directory and
    removed once it has published (or cleaned up); one left behind says it crashed."""
    return os.path.join(root, "locks", f"{key}.building")


def _remove_leftovers(root, key):
    """Temp and set-aside directories left by crashed builders (``key``'s lock held).

    Listing ``programs/`` costs as much as the cache is large (tens of ms at 70,000
    entries), so it is done once per process and directory for every key, and after
    that only for a key whose builder left its marker (:func:`_building_marker`).
    """
    parent = os.path.join(root, "programs")
    marker = _building_marker(root, key)
    if parent not in _SWEPT:
        _SWEPT.add(parent)
        _sweep(parent, None)
    elif os.path.lexists(marker):
        _sweep(parent, key)
    if os.path.lexists(marker):
        try:
            os.unlink(marker)
        except OSError:
            pass


def _sweep(parent, key=None):
    """Remove the leftovers of ``key`` (every key's when None) whose builder is gone
    (``key``'s lock is held; another key's leftovers are only ever a dead builder's).

    Names are ``<prefix><key>-<host>-<pid>-<suffix>``: on this host one whose process is
    gone is removed; from another host, one untouched for an hour.
    """
    try:
        names = os.listdir(parent)
    except OSError:
        return
    host = socket.gethostname()
    for name in names:
        if not name.startswith((_TMP_PREFIX, _OLD_PREFIX)):
            continue
        prefix = _TMP_PREFIX if name.startswith(_TMP_PREFIX) else _OLD_PREFIX
        owner, _, rest = name[len(prefix):].partition("-")
        if key is not None and owner != key:
            continue
        path = os.path.join(parent, name)
        parts = rest.split("-")
        if rest.startswith(host + "-") and len(parts) >= 3 and parts[-2].isdigit():
            pid = int(parts[-2])
            if pid == os.getpid():
                # ours: stale under the key's lock; in a sweep of every key, another
                # thread's build in progress
                dead = key is not None
            else:
                dead = not pid_alive(pid)
        else:
            try:
                dead = time.time() - os.stat(path).st_mtime > _STALE_TEMP_SECONDS
            except OSError:
                dead = False
        if dead:
            shutil.rmtree(path, ignore_errors=True)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
    marker = _building_marker(os.path.dirname(parent), key)
    try:        # never through a symlink (as the lock file); without it, a crash's
        # leftovers wait for the next process's sweep
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
                         cache_trust.FILE_MODE))
    except OSError:
        pass
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
    finally:
        try:
            os.unlink(marker)
        except OSError:
            pass


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
