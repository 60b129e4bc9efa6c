"""Programs cached by key, in memory and on disk; kernels shared by source hash.

The key is a sha256 over a canonical, sorted JSON of *named* parts (graph
JSON, input shapes, dtypes, mode, grad_req, target, template hash, versions),
so ``SYMTRITON_LOG=cache`` can say which part changed on a surprise miss.
Disk entries are one directory per key, published by an atomic rename, with
a manifest holding the checksum of every file; an entry that fails its
checksum is reported and rebuilt, never trusted. ``SYMTRITON_OFFLINE=1``
turns a miss into an error naming the key.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time

from ._atomic import atomic_write_text
from .codegen import template_hash
from .errors import MXNetError

log = logging.getLogger("symtriton.cache")

_stats_lock = threading.Lock()
_STATS = {"hits": 0, "misses": 0, "disk_hits": 0, "compiles": 0, "kernels_compiled": 0,
          "compile_seconds": 0.0, "corrupt_entries": 0}
_MEMORY: dict = {}


def cache_stats() -> dict:
    """Counters since the process started (or the last :func:`reset_cache_stats`).

    ``hits`` (memory or disk), ``misses``, ``disk_hits``, ``compiles`` (Programs
    built), ``kernels_compiled`` (Triton sources first loaded in this
    process), ``compile_seconds`` and ``corrupt_entries``.
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
    return os.environ.get("SYMTRITON_OFFLINE", "0") not in ("", "0")


def _versions() -> dict:
    import triton
    try:
        from importlib.metadata import version
        ours = version("symtriton")
    except Exception:  # not installed: running from a checkout
        ours = "checkout"
    return {"symtriton": ours, "triton": triton.__version__, "templates": template_hash(),
            "compiler": _compiler_hash()}


_COMPILER_HASH = None


def _compiler_hash() -> str:
    """Hash of the compiler's own sources: a code change invalidates entries."""
    global _COMPILER_HASH
    if _COMPILER_HASH is None:
        h = hashlib.sha256()
        root = os.path.dirname(os.path.abspath(__file__))
        for folder, _, files in sorted(os.walk(root)):
            for name in sorted(files):
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), "rb") as f:
                        h.update(name.encode() + f.read())
        _COMPILER_HASH = h.hexdigest()[:16]
    return _COMPILER_HASH


def make_key(parts: dict) -> str:
    """sha256 over the canonical JSON of named parts (plus versions)."""
    full = dict(parts)
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


def lookup(key: str, parts: dict, build):
    """Return the Program for ``key``: memory, then disk, then ``build()``."""
    from .program import Program
    prog = _MEMORY.get(key)
    if prog is not None:
        bump("hits")
        return prog
    entry = os.path.join(cache_dir(), "programs", key)
    prog = _read_entry(entry, Program)
    if prog is not None:
        bump("hits")
        bump("disk_hits")
        _MEMORY[key] = prog
        return prog
    bump("misses")
    if offline():
        raise MXNetError(
            f"SYMTRITON_OFFLINE=1 and no compiled program for key {key} ({describe_key(parts)}) "
            f"in {cache_dir()}. Add it on a build machine with: symtriton compile SYMBOL.json "
            + " ".join(f"--shape {k}={','.join(map(str, v))}" for k, v in
                       sorted(parts.get("shapes", {}).items()))
            + (" --train" if parts.get("for_training") else "")
            + f" --target {parts.get('target')} --out {cache_dir()}")
    t0 = time.perf_counter()
    prog, sources = build()
    bump("compiles")
    bump("compile_seconds", time.perf_counter() - t0)
    _MEMORY[key] = prog
    try:
        _write_entry(entry, prog, sources)
    except OSError as exc:  # read-only or full disk: keep working from memory
        log.warning("symtriton: cannot write cache entry %s (%s); using memory only", entry, exc)
    return prog


def kernel_path(source_hash: str) -> str:
    return os.path.join(cache_dir(), "kernels", f"k_{source_hash}.py")


def write_kernel(source_hash: str, source: str) -> str:
    path = kernel_path(source_hash)
    if not os.path.exists(path):
        atomic_write_text(path, source)
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_entry(entry: str, prog, sources: dict):
    for h, src in sources.items():
        write_kernel(h, src)
    parent = os.path.dirname(entry)
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(entry):
        return
    tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-")
    try:
        body = prog.to_json().encode()
        with open(os.path.join(tmp, "program.json"), "wb") as f:
            f.write(body)
        files = {"program.json": _sha(body)}
        for h in sources:
            files[f"kernel:{h}"] = _sha(sources[h].encode())
        manifest = {"files": files, "versions": _versions()}
        with open(os.path.join(tmp, "manifest.json"), "w") as f:
            json.dump(manifest, f, sort_keys=True)
        try:
            os.rename(tmp, entry)   # publish: atomic; a racing writer's entry wins, same content
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _read_entry(entry: str, program_cls):
    manifest_path = os.path.join(entry, "manifest.json")
    if not os.path.exists(manifest_path):
        return None
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
        with open(os.path.join(entry, "program.json"), "rb") as f:
            body = f.read()
        if _sha(body) != manifest["files"]["program.json"]:
            raise ValueError("program.json checksum mismatch")
        for name, digest in manifest["files"].items():
            if name.startswith("kernel:"):
                h = name.split(":", 1)[1]
                with open(kernel_path(h), "rb") as f:
                    if _sha(f.read()) != digest:
                        raise ValueError(f"kernel {h} checksum mismatch")
        return program_cls.from_json(body.decode())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        bump("corrupt_entries")
        log.warning("symtriton: cache entry %s is unreadable (%s); rebuilding it", entry, exc)
        quarantine = entry + f".bad-{os.getpid()}-{int(time.time() * 1000)}"
        try:
            os.rename(entry, quarantine)
            shutil.rmtree(quarantine, ignore_errors=True)
        except OSError:
            pass
        return None
