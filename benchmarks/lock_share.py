"""How much of a busy machine's cores threads of small ATen calls get, by how they are called.

    python benchmarks/lock_share.py
    python benchmarks/lock_share.py --threads 1,2,4 --busy 2 --seconds 4

The row-split rung of the thread policy (``runtime/threads_split.py``) runs two half
batches on two Python threads, each a list of cpu kernels: Python functions that call
ATen one operator at a time. Linux shares the cores per runnable thread, so more
threads beside other busy processes should take a larger share; this benchmark
measures what they get when each call re-enters the Python interpreter, against the
same work as one TorchScript function, whose interpreter runs the whole sequence
without the interpreter lock.

Each thread repeats one *body*: ``--ops`` rounds of a small matrix product, a ReLU
and a scale (32 x 64 by 64 x 64, about LeNet's per-call sizes), each thread at one
intra-op thread, under ``torch.inference_mode``, beside ``--busy`` spinning processes.
Per calling mode and thread count it prints bodies per second, the process's CPU
seconds per wall second (the share of the cores it got: 2 busy loops and N threads
on 2 cores give N threads 2N / (N + 2) of a core when nothing else holds them back)
and CPU microseconds per body.

Prints ``RESULT lock_share mode=python|script threads=N busy=B key=value`` lines.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from benchmarks.data import busy_loops  # noqa: E402


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2,4", help="thread counts, comma-separated")
    p.add_argument("--busy", type=int, default=2, help="spinning processes beside the threads")
    p.add_argument("--seconds", type=float, default=4.0, help="seconds per measurement")
    p.add_argument("--ops", type=int, default=20, help="product-ReLU-scale rounds per body")
    return p


def make_body(ops: int):
    """The Python body and its TorchScript twin (the same ATen calls in the same order)."""
    def body(x: torch.Tensor, w: torch.Tensor, n: int) -> torch.Tensor:
        for _ in range(n):
            x = torch.relu(torch.mm(x, w)) * 0.5
        return x
    return body, torch.jit.script(body)


def measure(fn, n_threads, seconds, ops, x, w):
    """Run ``fn`` in ``n_threads`` threads for ``seconds``: (bodies/s, cpu/wall, cpu us/body)."""
    done = [0] * n_threads
    start = threading.Barrier(n_threads + 1)
    stop = [0.0]

    def work(i):
        torch.set_num_threads(1)
        with torch.inference_mode():
            start.wait()
            while time.perf_counter() < stop[0]:
                fn(x, w, ops)
                done[i] += 1

    ts = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in ts:
        t.start()
    stop[0] = time.perf_counter() + seconds
    c0, t0 = time.process_time(), time.perf_counter()
    start.wait()
    for t in ts:
        t.join()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    total = max(sum(done), 1)
    return total / wall, cpu / wall, 1e6 * cpu / total


def main(argv=None):
    args = build_parser().parse_args(argv)
    counts = [int(c) for c in args.threads.split(",")]
    torch.set_num_threads(1)
    python_body, script_body = make_body(args.ops)
    x, w = torch.randn(32, 64), torch.randn(64, 64) * 0.1
    for fn in (python_body, script_body):      # TorchScript's profiling runs, warm caches
        for _ in range(20):
            fn(x, w, args.ops)
    print(f"{args.ops} product-ReLU-scale rounds per body, 32 x 64 by 64 x 64; "
          f"{os.cpu_count()} cores; {args.busy} busy loops beside the threads")
    bound = len(counts) * 2 * args.seconds + 60
    rows = []
    with busy_loops(args.busy, bound):
        time.sleep(0.3)
        for n in counts:
            for mode, fn in (("python", python_body), ("script", script_body)):
                rate, share, us = measure(fn, n, args.seconds, args.ops, x, w)
                rows.append((mode, n, rate, share, us))
                print(f"RESULT lock_share mode={mode} threads={n} busy={args.busy} "
                      f"bodies_s={rate:.1f} cpu_per_wall={share:.3f} cpu_us_per_body={us:.1f}",
                      flush=True)
    print("\n| threads | Python calls: bodies/s | cpu / wall | TorchScript: bodies/s | "
          "cpu / wall |")
    print("| --- | --- | --- | --- | --- |")
    by = {(m, n): (r, s) for m, n, r, s, _ in rows}
    for n in counts:
        (pr, ps), (sr, ss) = by[("python", n)], by[("script", n)]
        print(f"| {n} | {pr:,.0f} | {ps:.2f} | {sr:,.0f} | {ss:.2f} |")


if __name__ == "__main__":
    main()
