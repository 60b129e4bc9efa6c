"""Cache keys: a sha256 over a canonical, sorted JSON of *named* parts.

The parts are the graph JSON, input shapes, dtypes, mode, grad_req, target and the
versions the entry is built with (symtriton, Triton, the templates' hash and a hash
of the compiler's own sources: :func:`_versions`), so ``SYMTRITON_LOG=cache`` can
say which part changed on a surprise miss. The same versions are written into each
entry's manifest, and an entry built with other versions is a miss
(``cache_entries``).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os

from ..ir import rendering

log = logging.getLogger("symtriton.cache")

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
