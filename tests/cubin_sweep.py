"""The test session's Triton kernels compiled to cubin, shared by
``tests/compiler/test_cubin.py`` and the end-of-session sweep in ``tests/conftest.py``.

``make test`` may run the suite in several processes (pytest-xdist): the test that
compiles the kernels written so far runs in one worker, kernels keep being written by
the others, and the session ends in the controller after every worker has finished.
Each sweep therefore records the kernel files it compiled in a file of the session's
kernel cache (one per session, named by ``SYMTRITON_TEST_SESSION``, which the
controller sets and its workers inherit), and the last sweep compiles every kernel
file no sweep has recorded: none is compiled twice and none is missed. The sweeps
never run at the same time (the last one starts after the workers are gone), so the
record needs no lock; the last one removes it.
"""
import glob
import os
import time

from compiler.artifacts import cache
from compiler.triton import cubin

TARGET = "cuda:90"
WORKERS = max(1, min(4, os.cpu_count() or 1))


def record_path() -> str:
    """The file listing the kernel files this session's sweeps have compiled."""
    return os.path.join(cache.cache_dir(), f"cubin-swept-{os.environ['SYMTRITON_TEST_SESSION']}")


def kernel_files() -> list:
    """The session cache's Triton kernels (the cpu target's torch sources have no cubin)."""
    out = []
    for f in sorted(glob.glob(os.path.join(cache.cache_dir(), "kernels", "k_*.py"))):
        with open(f) as fh:
            if "@triton.jit" in fh.read():
                out.append(f)
    return out


def report(results, title) -> list:
    """Print one line per kernel; return the failure messages."""
    failures, lines = [], []
    for r in results:
        if isinstance(r, Exception):
            failures.append(str(r))
            continue
        c = r["config"]
        if r["n_spills"] or r["n_regs"] > 255:   # a spill is a failure, not a statistic
            failures.append(f"kernel {r['hash']} ({r['summary']}) spills {r['n_spills']} bytes "
                            f"a thread with {r['n_regs']} registers at BM={c['BM']} "
                            f"BN={c['BN']} BK={c['BK']} warps={c['num_warps']}: shrink its "
                            f"tiles in compiler/ir/tiles.py")
        lines.append(f"  {r['hash']}  regs={r['n_regs']:>3} spill_bytes={r['n_spills']:>5} "
                     f"shared={r['shared']:>6}  BM={c['BM']} BN={c['BN']} BK={c['BK']} "
                     f"warps={c['num_warps']}  {r['summary']}")
    print(f"\n{title}: {len(results)} kernels, {len(failures)} failed")
    for line in sorted(lines):
        print(line)
    return failures


def swept() -> set:
    """The kernel files this session's sweeps have compiled; empty before the first."""
    try:
        with open(record_path()) as f:
            return set(f.read().split("\n")) - {""}
    except FileNotFoundError:
        return set()


def sweep(title) -> list:
    """Compile the session's kernel files no sweep has compiled yet, record them, and
    return the failure messages (:func:`report`)."""
    done = swept()
    files = [f for f in kernel_files() if f not in done]
    t0 = time.perf_counter()
    results = cubin.compile_many([(f, TARGET, None) for f in files], workers=WORKERS)
    with open(record_path(), "a") as f:
        f.write("".join(name + "\n" for name in files))
    return report(results, f"{title} ({time.perf_counter() - t0:.1f}s)")
