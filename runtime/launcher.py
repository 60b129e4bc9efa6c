"""Load generated kernels from the cache directory and launch them.

A kernel file is imported only if its content hashes to its name (a cache
directory is never a way to run arbitrary code). On CUDA tensors Triton
compiles for the GPU; without a GPU the same kernels run in Triton's
interpreter, with whole-tensor tiles chosen at compile time.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import threading

from compiler import cache
from compiler.errors import MXNetError

_KERNELS: dict = {}
# Triton's interpreter keeps the running grid in module-level state, so two threads
# must not launch at once (dist_async applies updates from a server thread).
LAUNCH_LOCK = threading.RLock()


def load_kernel(source_hash: str):
    """The ``@triton.jit`` function of a cached kernel source (verified)."""
    fn = _KERNELS.get(source_hash)
    if fn is not None:
        return fn
    path = cache.kernel_path(source_hash)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        raise MXNetError(f"kernel {source_hash} is missing from the cache ({path}); delete the "
                         f"program entry or recompile") from None
    if hashlib.sha256(data).hexdigest()[:24] != source_hash:
        raise MXNetError(f"kernel file {path} does not match its checksum; refusing to load it")
    name = f"symtriton_k_{source_hash}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module.kernel
    _KERNELS[source_hash] = fn
    cache.bump("kernels_compiled")
    return fn


class LaunchCounter:
    """Counts launches by phase; tests and benchmarks read it."""
    total = 0

    @classmethod
    def reset(cls):
        cls.total = 0


def run_launches(launches, resolve):
    """Launch each kernel; ``resolve(kind, name, offset, numel)`` gives its tensor."""
    for ln in launches:
        kernel = load_kernel(ln.kernel)
        ptrs = [resolve(*arg) for arg in ln.args]
        cfg = ln.config
        grid = (int(cfg["grid"][0]), int(cfg["grid"][1]))
        with LAUNCH_LOCK:
            kernel[grid](*ptrs, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
                         num_warps=cfg["num_warps"])
        LaunchCounter.total += 1
