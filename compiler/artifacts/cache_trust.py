"""Who may write a cache directory: the checks made before anything in it is loaded.

A cache directory is code. Its kernel files are imported into the processes that
use it, and its programs say which kernels run on which buffers, so whoever can
write the directory can run code in those processes. Checksums do not change
that: anyone who can write a kernel file can also write one that hashes to its
own name. Triton's own cache (``~/.triton/cache``) has the same trust model.

What this module enforces, as ssh does for its keys: before a kernel or program
is loaded from a cache directory, the file and every directory from it up to the
cache root (the root included) must be

* owned by the current user or by root, and
* neither group- nor world-writable (``st_mode & 0o022 == 0``),

and the file must resolve (after symlinks) to a path inside the cache root.
Anything else is refused with :class:`UntrustedCacheError`, which names the path,
its owner and mode, and what to do. A directory that passed is remembered for the
life of the process (one ``stat`` per directory, not per launch); a directory
whose permissions change later is not checked again until :func:`forget_checks`.

The directories symtriton creates (:func:`make_dirs`) get mode ``0o755``, and the
files it writes ``0o644``, whatever the umask, so they pass. ``locks/`` is checked
like every other directory, and a lock file that is a symlink is refused
(:func:`check_lock_file`).

On systems without POSIX owners and modes (Windows) only the "inside the root"
rule applies.
"""
from __future__ import annotations

import os
import stat
import threading

from ..errors import MXNetError

#: Mode of the directories symtriton creates in a cache directory (never group-writable).
DIR_MODE = 0o755
#: Mode of the files symtriton writes into a cache directory (never group-writable).
FILE_MODE = 0o644

_POSIX = hasattr(os, "getuid")
_TRUSTED_DIRS: set = set()          # real paths of directories that passed
_lock = threading.Lock()


class UntrustedCacheError(MXNetError):
    """A cache directory or file that someone other than this user (or root) could
    have written; nothing in it is loaded. The message names the path and the fix."""


def forget_checks():
    """Forget which directories passed (tests change permissions after a first check)."""
    with _lock:
        _TRUSTED_DIRS.clear()


def inside(path, root) -> bool:
    """Whether ``path`` resolves (symlinks followed) to ``root`` or a path under it."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def unsafe_reason(st) -> str:
    """Why a file or directory with ``os.stat`` result ``st`` is not trusted ('' if it is)."""
    if not _POSIX:
        return ""
    why = []
    if st.st_uid not in (os.getuid(), 0):
        why.append(f"owned by {_owner(st.st_uid)}, not by you ({_owner(os.getuid())}) or root")
    writable = [who for who, bit in (("group", stat.S_IWGRP), ("world", stat.S_IWOTH))
                if st.st_mode & bit]
    if writable:
        why.append(f"{'- and '.join(writable)}-writable (mode {oct(stat.S_IMODE(st.st_mode))})")
    return "; ".join(why)


def _owner(uid) -> str:
    try:
        import pwd
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _refuse(path, root, reason, fix) -> UntrustedCacheError:
    return UntrustedCacheError(
        f"refusing to load from the symtriton cache directory {root}: {path} is {reason}. "
        f"A cache directory is code: whoever can write it can run code in every process "
        f"that loads it. {fix}; or set SYMTRITON_CACHE_DIR to a directory you own.")


def _fix_for(path, root, st) -> str:
    if not _POSIX or st.st_uid in (os.getuid(), 0):
        return f"If only you should write it, remove the others' write access: chmod go-w {path}"
    return (f"Check it with 'symtriton cache verify --rebuild {root}', then copy it to a "
            f"directory you own (cp -r {root} MYDIR) and point SYMTRITON_CACHE_DIR there")


def _outside(path, root, real) -> UntrustedCacheError:
    return _refuse(path, root, f"outside it (it resolves to {real})",
                   f"Remove the symbolic link {path} (symtriton creates none)")


def check_dir(path, root):
    """Raise :class:`UntrustedCacheError` unless directory ``path`` and every directory
    above it up to the cache root ``root`` (included) are trusted. Cached per directory."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if not inside(real, real_root):
        raise _outside(path, root, real)
    while True:
        _check_one_dir(real, root)
        if real == real_root:
            return
        real = os.path.dirname(real)


def _check_one_dir(real, root):
    if real in _TRUSTED_DIRS:
        return
    st = os.stat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(real, root, "not a directory", f"Remove {real}")
    reason = unsafe_reason(st)
    if reason:
        raise _refuse(real, root, reason, _fix_for(real, root, st))
    with _lock:
        _TRUSTED_DIRS.add(real)


def check_file(path, root) -> str:
    """Check one file before it is read as code or as a program; return its real path.

    Raises :class:`UntrustedCacheError` (a file or directory others may write, or a
    file resolving outside ``root``) or ``FileNotFoundError`` (no such file).
    """
    real = os.path.realpath(path)
    if not inside(real, root):
        raise _outside(path, root, real)
    st = os.stat(real)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, root, "not a regular file", f"Remove {path}")
    reason = unsafe_reason(st)
    if reason:
        raise _refuse(path, root, reason, _fix_for(path, root, st))
    check_dir(os.path.dirname(real), root)
    return real


def check_lock_file(path, root):
    """Refuse a lock file that is a symlink, not a regular file, or someone else's.

    The builder opens (creates) ``locks/<key>.lock``: a planted symlink there would
    make it create a file wherever the link points. A missing lock file is fine (it is
    created with ``O_NOFOLLOW``).
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(path, root, f"a symbolic link (to {os.readlink(path)})",
                      f"Remove {path} (symtriton creates lock files, never links)")
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, root, "not a regular file", f"Remove {path}")
    reason = unsafe_reason(st)
    if reason:
        raise _refuse(path, root, reason, _fix_for(path, root, st))


def owned_by_user(path) -> bool:
    """Whether ``path`` belongs to the current user (always True without POSIX owners)."""
    return not _POSIX or os.stat(path).st_uid == os.getuid()


def owner_of(path) -> str:
    """``uid N (name)`` of ``path``'s owner, for messages."""
    return _owner(os.stat(path).st_uid) if _POSIX else "another user"


def make_dirs(path, mode: int = DIR_MODE):
    """``os.makedirs(path, exist_ok=True)``, but every directory it creates gets ``mode``.

    ``os.makedirs`` gives intermediate directories ``0o777 & ~umask``: group-writable
    under the common ``umask 002``, which :func:`check_dir` would then refuse.
    ``mkdir(mode)`` can only lose bits to the umask, so ``0o755`` stays unwritable by
    others. Existing directories are left as they are.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        make_dirs(parent, mode)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise


def audit(root) -> list:
    """``(relative path, reason)`` for everything under ``root`` the loader would refuse.

    Walks without following symlinks; a symlink is reported when it resolves outside
    ``root`` (the loader refuses it; ``cache verify`` never reads through it).
    """
    problems = []
    real_root = os.path.realpath(root)
    reason = unsafe_reason(os.stat(real_root))
    if reason:
        problems.append((".", f"{reason}: the runtime refuses to load from it "
                              f"(chmod go-w {root})"))
    for folder, dirs, files in os.walk(real_root):
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, real_root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                if not inside(path, real_root):
                    problems.append((rel, f"a symbolic link to {os.path.realpath(path)}, "
                                          f"outside the directory; not followed"))
                continue
            reason = unsafe_reason(st)
            if reason:
                problems.append((rel, f"{reason}: the runtime refuses to load it "
                                      f"(chmod go-w {path})"))
    return problems
