"""What ``mx.profiler`` adds to a Module training step on an MLP.

    python benchmarks/profiler_overhead.py                 # MLP 784-256-256-10, batch 64
    python benchmarks/profiler_overhead.py --rounds 3 --steps 5 --hidden 16 --dim 20

A step is ``forward_backward`` + ``update`` of a bound, initialised Module (the
first steps, which compile, run before any timing). Rounds alternate: ``--steps``
steps with the profiler stopped, then ``--steps`` steps with it running
(``set_state('run')`` before the round, ``pause()`` after: starting, stopping
and dumping are outside the timed steps, each timed on its own below), so a slow
spell of the shared machine falls on both sides. Each round gives the ratio of
its profiled step time to its plain one; the median ratio over the rounds is
the overhead. Prints a table row per round and a ``RESULT`` line, and checks
that the dumped trace holds a kernel event per launch of the profiled steps.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-prof-bench-"))

if __name__ == "__main__":   # --threads before torch loads
    from benchmarks.data import set_thread_env
    set_thread_env(sys.argv[1:], os.cpu_count() or 1)

import numpy as np  # noqa: E402

import module_api as mx  # noqa: E402
from runtime.launcher import LaunchCounter  # noqa: E402


def mlp_module(args):
    """A bound MLP Module with SGD, and one batch to train on."""
    net = mx.sym.var("data")
    for i in range(2):
        net = mx.sym.FullyConnected(net, num_hidden=args.hidden, name=f"fc{i + 1}")
        net = mx.sym.Activation(net, act_type="relu", name=f"relu{i + 1}")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind([("data", (args.batch, args.dim))], [("softmax_label", (args.batch,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01,
                                                          "momentum": 0.9})
    rng = np.random.RandomState(0)
    batch = mx.io.DataBatch([mx.nd.array(rng.randn(args.batch, args.dim))],
                            [mx.nd.array(rng.randint(0, 10, args.batch))])
    return mod, batch


def step(mod, batch):
    """One training step, waited for."""
    mod.forward_backward(batch)
    mod.update()
    mod.get_outputs()[0].wait_to_read()


def timed_steps(mod, batch, steps):
    """Seconds per step over ``steps`` steps."""
    start = time.perf_counter()
    for _ in range(steps):
        step(mod, batch)
    return (time.perf_counter() - start) / steps


def rounds(mod, batch, args):
    """``(plain, profiled)`` seconds per step for each round, and the launches profiled."""
    out, launches = [], 0
    mx.profiler.set_state("run")
    mx.profiler.pause()
    for _ in range(args.rounds):
        plain = timed_steps(mod, batch, args.steps)
        mx.profiler.resume()
        before = LaunchCounter.total
        profiled = timed_steps(mod, batch, args.steps)
        launches += LaunchCounter.total - before
        mx.profiler.pause()
        out.append((plain, profiled))
    return out, launches


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dim", type=int, default=784)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--trace", default=None, help="where the trace goes (default: a temp file)")
    args = p.parse_args(argv)
    trace = args.trace or os.path.join(tempfile.mkdtemp(prefix="symtriton-prof-"), "trace.json")
    mx.profiler.set_config(filename=trace, profile_all=True)
    mod, batch = mlp_module(args)
    for _ in range(args.warmup):
        step(mod, batch)
    results, launches = rounds(mod, batch, args)
    print(f"{'round':>5} {'plain ms':>10} {'profiled ms':>12} {'ratio':>7}")
    for i, (plain, prof) in enumerate(results):
        print(f"{i:>5} {plain * 1e3:>10.3f} {prof * 1e3:>12.3f} {prof / plain:>7.3f}")
    ratio = statistics.median(prof / plain for plain, prof in results)
    toggle = timed(lambda: (mx.profiler.resume(), mx.profiler.pause()))
    dump = timed(lambda: mx.profiler.dump())
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    kernels = sum(1 for e in events if e.get("cat") == "operator" and e.get("ph") == "X")
    print(f"RESULT profiler ratio={ratio:.3f} overhead_pct={(ratio - 1) * 100:.1f} "
          f"plain_ms={statistics.median(r[0] for r in results) * 1e3:.3f} "
          f"launches={launches} kernel_events={kernels} toggle_ms={toggle * 1e3:.1f} "
          f"dump_ms={dump * 1e3:.1f}")
    return ratio, launches, kernels


if __name__ == "__main__":
    main()
