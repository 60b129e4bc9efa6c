"""Atomic file writes: a temp file in the same folder, fsync, then ``os.replace``.

A crash leaves either the old file or the new one, never half of either. Every temp
file is named ``.symtriton-tmp.<pid>.<host>.<random>.<name>``: a writer killed
between creating it and renaming it (kill -9, power loss) leaves it behind, and
:func:`sweep_temps` removes such leftovers of dead processes of this host the next
time something is written into that folder through :func:`write_group`.

:func:`write_group` publishes several files as one unit (a checkpoint's ``.params``
and ``.states``): everything is written to temp files first, and the renames are
ordered so that the file that marks the unit complete appears last.

Test hook: ``SYMTRITON_TEST_PAUSE_AT=<stage>`` makes :func:`write_group` print
``symtriton-test: paused at <stage>`` to stderr and sleep at that stage (``written``:
every temp file written, nothing published; ``cleared``: the old files removed;
``published-1``: the first file renamed into place, not yet the others), so a test
can kill the process there; only the crash tests set it.

Modes: by default a file gets ``0o666`` less the umask, as ``open()`` would give it
(``0o644`` under the usual umask). Callers with stricter needs (the kernel cache,
whose files must never be group-writable) pass ``mode``, which is applied exactly.

Durability: by default the temp file is fsynced before the rename, so the new file
survives power loss or an operating-system crash whole. ``durable=False`` skips that
``fsync``: the write is still atomic for a process that is killed (the page cache
keeps what was written), but after power loss the renamed file may be empty or hold
zeros. Only files whose readers check their bytes and can write them again take it
(kernel sources: each Program entry's manifest holds their sha256, and a mismatch
makes the entry a miss that is rebuilt).
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
import sys
import time

_TEMP_PREFIX = ".symtriton-tmp."
_TEMP_NAME = re.compile(r"\.symtriton-tmp\.(\d+)\.([0-9a-f]{8})\.[0-9a-f]+\.")


def _host_tag() -> str:
    return hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def temp_path(path) -> str:
    """A fresh temp name beside ``path`` that :func:`sweep_temps` recognises."""
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f"{_TEMP_PREFIX}{os.getpid()}.{_host_tag()}."
                                f"{secrets.token_hex(4)}.{name}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host may still be running (a process of another
    user, or one whose state cannot be read, counts as alive: its files are kept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True     # someone else's live process (or no way to tell): keep its files
    return True


def sweep_temps(folder) -> list:
    """Remove the temp files that dead processes of this host left in ``folder``.

    Only names this module makes are touched, and only when the process that made
    them (named in the file name, with a hash of the host name) no longer runs, so a
    write in progress in another process is never disturbed.

    Parameters
    ----------
    folder : str or os.PathLike

    Returns
    -------
    list of str
        The paths removed.
    """
    folder = os.fspath(folder) or "."
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    host, removed = _host_tag(), []
    for name in names:
        m = _TEMP_NAME.match(name)
        if m is None or m.group(2) != host:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or pid_alive(pid):
            continue
        path = os.path.join(folder, name)
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


def _open_new(path, mode):
    """Create ``path`` (it must not exist) for writing with ``mode``: umask-respecting
    ``0o666`` when None, else exactly ``mode``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                 0o666 if mode is None else mode & 0o777)
    if mode is not None:
        try:
            os.fchmod(fd, mode)
        except (AttributeError, OSError):
            pass
    return os.fdopen(fd, "wb")


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def write_temp(path, data: bytes, mode=None, durable: bool = True) -> str:
    """Write ``data`` to a fresh temp file beside ``path``, flushed to disk unless
    ``durable`` is False (see Durability above); return its name. The temp file is
    removed again if writing fails."""
    tmp = temp_path(path)
    try:
        with _open_new(tmp, mode) as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path, data: bytes, mode=None, durable: bool = True):
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename).

    Parameters
    ----------
    path : str or os.PathLike
    data : bytes
    mode : int, optional
        The file's exact mode; by default ``0o666`` less the umask, as ``open()``.
    durable : bool, default True
        False: no fsync, for files whose readers verify them (see Durability above).
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = write_temp(path, data, mode, durable)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def atomic_write_text(path, text: str, mode=None):
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


#: Stages at which ``SYMTRITON_TEST_PAUSE_AT`` stops :func:`write_group` (test hook).
PAUSE_STAGES = ("written", "cleared", "published-1")


def _test_pause(stage):
    """Test hook: at ``SYMTRITON_TEST_PAUSE_AT=<stage>`` say so and wait to be killed."""
    if os.environ.get("SYMTRITON_TEST_PAUSE_AT") == stage:
        print(f"symtriton-test: paused at {stage}", file=sys.stderr, flush=True)
        time.sleep(float(os.environ.get("SYMTRITON_TEST_PAUSE_SECONDS", "60")))


@contextlib.contextmanager
def write_group(paths, stale=()):
    """Publish several files as one unit; the last of ``paths`` appears last.

    Yields one temp path per entry of ``paths`` (None entries are skipped: they
    yield None). The body writes each file to its temp path; when it returns, every
    existing file of the unit is removed, *last first* (so at no moment is the last
    file present beside an incomplete set), then the temp files are renamed into
    place in order, the last one last. A process killed at any moment therefore
    leaves either the complete unit or no last file: readers treat the last file as
    the mark of a complete unit. If the body raises, the temp files are removed and
    the old files are left as they were; if publishing fails (a rename raises), the
    files of the unit already renamed are removed too. Before anything is written,
    temp files that dead processes left in the folders are swept (:func:`sweep_temps`).

    Parameters
    ----------
    paths : list of (str or None)
        The unit's files, the one that marks it complete last.
    stale : list of str, optional
        Files of the unit that this write does not produce (a checkpoint saved
        without optimizer states): removed with the old files, so no file of an
        earlier write stays beside the new unit.
    """
    paths = [None if p is None else os.path.abspath(os.fspath(p)) for p in paths]
    real = [p for p in paths if p is not None]
    for folder in sorted({os.path.dirname(p) for p in real}):
        os.makedirs(folder, exist_ok=True)
        sweep_temps(folder)
    temps = [None if p is None else temp_path(p) for p in paths]
    published = []
    try:
        yield temps
        missing = [t for t in temps if t is not None and not os.path.exists(t)]
        if missing:
            raise FileNotFoundError(f"write_group: the body wrote no {missing[0]}")
        _test_pause("written")
        for p in list(reversed(real)) + [os.fspath(s) for s in stale]:
            _unlink_quietly(p)
        _test_pause("cleared")
        done = 0
        for t, p in zip(temps, paths):
            if t is not None:
                os.replace(t, p)
                published.append(p)
                done += 1
                if done < len(real):
                    _test_pause(f"published-{done}")
        for folder in sorted({os.path.dirname(p) for p in real}):
            _fsync_dir(folder)
    except BaseException:
        # nothing of a failed unit stays: its temp files, and what it already published
        # (the unit's old files are gone by then; a partial new set must not stand)
        for t in temps:
            if t is not None:
                _unlink_quietly(t)
        if len(published) < len(real):
            for p in published:
                _unlink_quietly(p)
        raise
