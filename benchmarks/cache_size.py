"""Compile time against the size of the disk cache.

A cache directory lives for months and holds tens of thousands of program entries
(every bucket, shape and dtype a user ever ran). A compile that misses must not pay
for them: this measures the mean time of ``--compiles`` cache-missing compiles of a
small MLP (a new batch size each) into a cache holding 0 and then ``--entries``
program entries, each in a fresh process, and prints the ratio. ``--before-root
PATH`` measures another checkout (the code before a change) in the same run.

    python benchmarks/cache_size.py --entries 50000
    python benchmarks/cache_size.py --entries 50000 --before-root /tmp/base

The entries are empty directories named as program keys: a compile that misses
never reads another entry, so only their number matters here.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r"""
import json, sys, time
import compiler
from compiler.artifacts.compile import compile_symbol
from tests.models import mlp
count = int(sys.argv[1])
net = mlp(hidden=(16,))
times = []
for batch in range(2, 2 + count):
    t = time.perf_counter()
    compile_symbol(net, {"data": (batch, 12), "softmax_label": (batch,)}, True,
                   {n: "write" for n in net.list_arguments()}, True)
    times.append(time.perf_counter() - t)
assert compiler.cache_stats()["compiles"] == count
print(json.dumps({"mean_ms": 1e3 * sum(times) / count, "first_ms": 1e3 * times[0]}))
"""


def fill(cache_dir: str, entries: int):
    """``entries`` empty program directories under ``cache_dir/programs``."""
    programs = os.path.join(cache_dir, "programs")
    os.makedirs(programs, exist_ok=True)
    for i in range(entries):
        os.mkdir(os.path.join(programs, f"{i:032x}"))


def measure(root: str, cache_dir: str, compiles: int) -> dict:
    env = dict(os.environ, PYTHONPATH=root, SYMTRITON_CACHE_DIR=cache_dir,
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    out = subprocess.run([sys.executable, "-c", WORKER, str(compiles)], cwd=root, env=env,
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"worker in {root} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--entries", type=int, default=50000)
    p.add_argument("--compiles", type=int, default=40)
    p.add_argument("--before-root", default=None)
    args = p.parse_args(argv)
    roots = [("this checkout", ROOT)] + ([("before", args.before_root)]
                                          if args.before_root else [])
    print(f"| code | entries in the cache | mean ms per missing compile | ratio to an empty "
          f"cache |\n| --- | --- | --- | --- |")
    for label, root in roots:
        base = None
        for entries in (0, args.entries):
            work = tempfile.mkdtemp(prefix="symtriton-cache-size-")
            try:
                fill(work, entries)
                got = measure(root, work, args.compiles)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            base = base or got["mean_ms"]
            print(f"| {label} | {entries} | {got['mean_ms']:.1f} | "
                  f"{got['mean_ms'] / base:.2f} |", flush=True)
            print(f"RESULT {label} entries={entries} mean_ms={got['mean_ms']:.2f}", flush=True)


if __name__ == "__main__":
    main()
