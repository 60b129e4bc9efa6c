"""Samples per second of data-parallel training on 1 and 2 worker processes:
symtriton's ``Module.fit`` with kvstore ``dist_sync`` beside PyTorch's
``DistributedDataParallel`` (gloo, CPU) training the same network in the same run,
an MLP and LeNet.

    python benchmarks/dist_training.py [--models mlp,lenet] [--hidden 64] [--batch 32]
                                       [--steps N] [--workers 1,2] [--ddp-passes N]
                                       [--repeats 3] [--plain]

Models: ``mlp`` (64-64-64-10 on 64 features) and ``lenet`` (mxnet's
``symbols/lenet.py``, examples/mnist_symbols.py, on 1x28x28 images of the same
kind of blobs; the same layers in torch on the DDP side). ``--plain`` adds a
third side in the same rounds: symtriton with ``SYMTRITON_DIST_OVERLAP=0``, whose
push reduces the gradients after the backward instead of during it
(runtime/kvstore_overlap.py).

The script is both the driver and the worker. For each worker count W and each
side it starts W processes of itself with the environment torchrun gives its
workers (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK; a free port,
OMP_NUM_THREADS=1, TRITON_INTERPRET=1, one SYMTRITON_CACHE_DIR shared by all
runs so later runs reuse the kernels the first one compiled). Each worker
trains on its shard of the data (``NDArrayIter(num_parts=W, part_index=rank)``
on our side, the same contiguous rows for DDP) with the same per-worker batch,
SGD with momentum and the gradient averaged over the global batch, and prints
its figures as one JSON line. The driver runs ``--repeats`` rounds over all
configurations (so that load from other processes hits each of them) and
prints one table, each column from the run with the median samples/s:

* samples / s: all workers' samples of the timed steps over the slowest rank's
  wall time between two barriers, after one warm-up step (kernel loading, DDP's
  bucket rebuild). Both sides time the same number of steps, ``--steps``
  (default: 1,000 for the MLP, 100 for LeNet: two seconds or more, so that a
  slow spell of the machine or a step's hiccup is not most of the window; with
  50 MLP steps, a 150 ms window, the ratio moved between 0.65 and 0.86 from run
  to run); ``--ddp-passes N`` has DDP go over its shard N times instead.
  The range over the repeats is in brackets.
* symtriton / DDP at each W, and the scaling (the largest W's samples/s over
  the smallest W's) of each side.
* per step: symtriton's kernel launches (``LaunchCounter``) and the
  collectives its kvstore calls (counted by wrapping ``torch.distributed``'s
  functions), with the time spent starting them and waiting for them; DDP's ATen operators and
  collectives, counted with a ``TorchDispatchMode`` over one extra step after
  the clock stops, and DDP's own average backward communication time.
* ms per step (slowest rank); on our side split into ``forward_backward``
  and ``update`` (push/pull through the kvstore: all-reduce and optimizer);
  each worker's CPU time over the timed window's wall time (mean over ranks:
  below 1 when it waits for a peer or other processes take its core); the
  validation accuracy rank 0 reaches.

The last lines are ``RESULT dist model=M workers=W ...`` per model and worker
count and ``RESULT dist_scaling model=M ...``.
"""
from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


from benchmarks.data import make_data  # noqa: E402
from tests.distributed.launch import finish, start_command  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

TAG = "DIST_TRAINING_JSON "
CELL = 28                      # width of a table column
MODELS = ("mlp", "lenet")
STEPS = {"mlp": 1000, "lenet": 100}     # timed steps: a window of seconds on both sides
COLLECTIVES = ("all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all")


# ------------------------------------------------------------------ data and model

def job_data(args, world):
    """Training rows for ``world`` workers (one warm-up + ``steps`` batches each), and
    the held-out rows every run scores on. LeNet's rows are 1x28x28 images of blobs."""
    per_worker = (args.steps + 1) * args.batch
    n = per_worker * world
    dim = 28 * 28 if args.model == "lenet" else args.dim
    x, y = make_data(n + args.val, dim, args.classes)
    if args.model == "lenet":
        x = x.reshape(-1, 1, 28, 28)
    return x[:n], y[:n], x[n:], y[n:]


def shard(x, rank, world):
    """The contiguous rows ``NDArrayIter(num_parts=world, part_index=rank)`` serves."""
    n = len(x)
    return x[rank * n // world:(rank + 1) * n // world]


def mlp_symbol(mx, hidden, classes):
    net = mx.sym.var("data")
    net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=classes, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def mlp_torch(dim, hidden, classes):
    return torch.nn.Sequential(
        torch.nn.Linear(dim, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, classes))


def lenet_torch(classes):
    """mxnet's ``symbols/lenet.py`` (examples/mnist_symbols.py) in torch."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 20, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Conv2d(20, 50, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Flatten(), torch.nn.Linear(800, 500), torch.nn.Tanh(),
        torch.nn.Linear(500, classes))


def model_symbol(mx, args):
    if args.model == "lenet":
        from examples.mnist_symbols import lenet     # noqa: PLC0415 - imports module_api
        return lenet(num_classes=args.classes)
    return mlp_symbol(mx, args.hidden, args.classes)


def model_torch(args):
    if args.model == "lenet":
        return lenet_torch(args.classes)
    return mlp_torch(args.dim, args.hidden, args.classes)


def describe(args, model):
    if model == "lenet":
        return "LeNet (conv 5x5x20, conv 5x5x50, FC 500, FC 10; tanh, max-pool) on 1x28x28"
    return f"MLP {args.dim}-{args.hidden}-{args.hidden}-{args.classes}"


# ------------------------------------------------------------------ worker: symtriton

class CollectiveCounter:
    """Wraps ``torch.distributed``'s collectives: calls and seconds inside them."""

    def __init__(self):
        import torch.distributed as dist
        self.calls, self.seconds = Counter(), 0.0
        for name in COLLECTIVES:
            setattr(dist, name, self._wrap(name, getattr(dist, name)))

    def _wrap(self, name, fn):
        def counted(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.calls[name] += 1
                self.seconds += time.perf_counter() - t0
        return counted

    def reset(self):
        self.calls, self.seconds = Counter(), 0.0


class PhaseTimer:
    """Wraps methods of one object to add up the seconds spent in each."""

    def __init__(self, obj, names):
        self.seconds = Counter()
        for name in names:
            setattr(obj, name, self._wrap(name, getattr(obj, name)))

    def _wrap(self, name, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds[name] += time.perf_counter() - t0
        return timed

    def reset(self):
        self.seconds = Counter()


class StepClock:
    """``batch_end_callback`` that starts the clock after ``warmup`` batches and stops
    it after the last one, each time behind a barrier; resets the counters at start."""

    def __init__(self, barrier, warmup, last, on_start, on_stop):
        self.barrier, self.warmup, self.last = barrier, warmup, last
        self.on_start, self.on_stop = on_start, on_stop
        self.t0 = self.seconds = self.cpu0 = self.cpu_seconds = None

    def __call__(self, param):
        if param.nbatch == self.warmup - 1:
            self.barrier()
            self.on_start()
            self.t0, self.cpu0 = time.perf_counter(), time.process_time()
        elif param.nbatch == self.last:
            self.on_stop()       # counters first: the barrier calls no wrapped function
            self.barrier()
            self.seconds = time.perf_counter() - self.t0
            self.cpu_seconds = time.process_time() - self.cpu0


def run_symtriton(args):
    import module_api as mx                         # noqa: PLC0415 - workers only
    from runtime.launcher import LaunchCounter      # noqa: PLC0415
    from runtime import kvstore_overlap as overlap  # noqa: PLC0415
    kv = mx.kv.create("dist_sync")
    mx.random.seed(0)               # init takes rank 0's values anyway
    counter = CollectiveCounter()
    x, y, xv, yv = job_data(args, kv.num_workers)
    train = mx.io.NDArrayIter(x, y, batch_size=args.batch, shuffle=False,
                              num_parts=kv.num_workers, part_index=kv.rank)
    mod = mx.mod.Module(model_symbol(mx, args), context=mx.cpu())
    phases = PhaseTimer(mod, ("forward_backward", "update"))
    snap = {}

    def start():
        LaunchCounter.reset()
        counter.reset()
        phases.reset()
        overlap.STATS["wait_s"] = 0.0

    def stop():
        # ms in collectives: starting them, and waiting for the ones started in backward
        snap.update(launches=LaunchCounter.total, calls=dict(counter.calls),
                    comm_s=counter.seconds + overlap.STATS["wait_s"],
                    phases=dict(phases.seconds))

    clock = StepClock(kv.barrier, 1, args.steps, start, stop)
    mod.fit(train, num_epoch=1, kvstore=kv, optimizer="sgd", initializer=mx.init.Xavier(),
            optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
            batch_end_callback=clock)
    acc = dict(mod.score(mx.io.NDArrayIter(xv, yv, batch_size=args.batch), "acc"))["accuracy"]
    steps = args.steps
    return {"rank": kv.rank, "world": kv.num_workers, "samples": steps * args.batch,
            "steps": steps, "seconds": clock.seconds, "cpu_seconds": clock.cpu_seconds,
            "launches": snap["launches"] / steps,
            "collectives": {k: v / steps for k, v in snap["calls"].items()},
            "comm_ms": 1e3 * snap["comm_s"] / steps, "accuracy": float(acc),
            "phase_ms": {k: 1e3 * v / steps for k, v in snap["phases"].items()}}


# ------------------------------------------------------------------ worker: DDP

class CountOps(TorchDispatchMode):
    """Counts the operators PyTorch dispatches, by namespace (aten, c10d, ...)."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def run_ddp(args):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y, xv, yv = job_data(args, world)
    xs, ys = torch.from_numpy(shard(x, rank, world)), torch.from_numpy(shard(y, rank, world))
    torch.manual_seed(0)
    model = DistributedDataParallel(model_torch(args))
    # SoftmaxOutput's gradient with rescale_grad 1/(batch * workers) is the mean
    # cross entropy over the global batch: reduction='mean' here, DDP averages.
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    b = args.batch

    def step(i):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xs[i * b:(i + 1) * b]),
                                                 ys[i * b:(i + 1) * b].long())
        loss.backward()
        opt.step()

    step(0)                                         # warm-up: DDP rebuilds its buckets
    dist.barrier()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(args.ddp_passes):
        for i in range(1, args.steps + 1):
            step(i)
    dist.barrier()
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - cpu0
    # DDP's own sampled timing of its backward all-reduces (a private accessor)
    comm_ns = model._get_ddp_logging_data().get("avg_backward_comm_time", 0)
    with torch.no_grad():
        acc = (model.module(torch.from_numpy(xv)).argmax(1).numpy() == yv).mean()
    with CountOps() as counted:                     # one extra step, after the clock
        step(1)
    ops = counted.ops
    collectives = {k.split(".")[1].rstrip("_"): v for k, v in ops.items()
                   if k.startswith("c10d.")}
    aten = sum(v for k, v in ops.items() if k.startswith("aten."))
    steps = args.steps * args.ddp_passes
    dist.destroy_process_group()
    return {"rank": rank, "world": world, "samples": steps * b, "steps": steps,
            "seconds": seconds, "cpu_seconds": cpu_seconds, "launches": aten,
            "collectives": collectives, "comm_ms": comm_ns / 1e6, "accuracy": float(acc)}


def worker_main(args):
    torch.set_num_threads(1)
    logging.getLogger().setLevel(logging.WARNING)
    if args.worker == "symtriton_plain":    # every worker: the push reduces, as before
        os.environ["SYMTRITON_DIST_OVERLAP"] = "0"
    result = run_ddp(args) if args.worker == "ddp" else run_symtriton(args)
    print(TAG + json.dumps(result), flush=True)
    # PyTorch's teardown at interpreter exit can abort a worker whose work is done
    # ("terminate called without an active exception", exit -6: a DDP rank 1 in 1 of
    # 40 runs of this benchmark, after it had printed its result). That was the
    # smoke test's rare failure. Run the atexit handlers (symtriton's worker marks
    # itself finished there), then leave without C++ static destructors.
    atexit._run_exitfuncs()
    sys.stderr.flush()
    os._exit(0)


# ------------------------------------------------------------------ driver

def launch(side, world, argv, cache_dir, timeout):
    """Run ``world`` workers of ``side``; their JSON results, rank order. Fails with
    every worker's output unless all exit 0."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side] + argv
    outputs = finish(start_command(cmd, world, {"SYMTRITON_CACHE_DIR": cache_dir}), timeout)
    results = [json.loads(line[len(TAG):]) for _, out in outputs
               for line in out.splitlines() if line.startswith(TAG)]
    if any(rc != 0 for rc, _ in outputs) or len(results) != world:
        logs = "\n".join(f"--- {side} rank {r} (exit {rc}) ---\n{out[-4000:]}"
                         for r, (rc, out) in enumerate(outputs))
        raise SystemExit(f"{side} on {world} worker(s) failed:\n{logs}")
    return sorted(results, key=lambda r: r["rank"])


def combine(results):
    """Global figures of one run: samples/s over the slowest rank's time."""
    slowest = max(r["seconds"] for r in results)
    rank0 = results[0]
    return {"sps": sum(r["samples"] for r in results) / slowest,
            "step_ms": 1e3 * slowest / rank0["steps"], "launches": rank0["launches"],
            "collectives": rank0["collectives"],
            "comm_ms": max(r["comm_ms"] for r in results), "accuracy": rank0["accuracy"],
            "cpu_share": sum(r["cpu_seconds"] / r["seconds"] for r in results) / len(results),
            "phase_ms": {k: max(r["phase_ms"][k] for r in results)
                         for k in rank0.get("phase_ms", {})}}


def median_run(runs):
    """The run with the median samples/s (the lower middle one for an even count),
    with the range of all runs' samples/s."""
    ordered = sorted(runs, key=lambda r: r["sps"])
    mid = dict(ordered[(len(ordered) - 1) // 2])
    mid["range"] = (ordered[0]["sps"], ordered[-1]["sps"])
    return mid


def fmt_collectives(calls):
    calls = {k: v for k, v in calls.items() if v}
    return ", ".join(f"{v:g} {k}" for k, v in sorted(calls.items())) or "none"


def print_table(args, workers, sym, ddp, plain=None):
    first = workers[0]
    head = "".join(f"{f'{w} worker' + ('s' if w > 1 else ''):>{CELL}}" for w in workers)
    scale_head = f"{'scaling ' + str(workers[-1]) + '/' + str(first):>16}" \
        if len(workers) > 1 else ""
    print(f"{'':34}{head}{scale_head}")

    def row(label, values, scaling=None):
        cells = "".join(f"{v:>{CELL}}" for v in values)
        tail = f"{scaling:>16}" if scaling is not None and len(workers) > 1 else ""
        print(f"{label:34}{cells}{tail}")

    def scale(res):
        return f"{res[workers[-1]]['sps'] / res[first]['sps']:.3f}x"

    def sps(res, w):
        lo, hi = res[w]["range"]
        return f"{res[w]['sps']:.1f} ({lo:.0f}-{hi:.0f})" if args.repeats > 1 \
            else f"{res[w]['sps']:.1f}"

    row("symtriton samples / s", [sps(sym, w) for w in workers], scale(sym))
    row("DDP samples / s", [sps(ddp, w) for w in workers], scale(ddp))
    row("ratio symtriton / DDP", [f"{sym[w]['sps'] / ddp[w]['sps']:.5f}" for w in workers])
    if plain is not None:
        row("symtriton overlap off samples / s", [sps(plain, w) for w in workers], scale(plain))
        row("ratio overlap off / DDP", [f"{plain[w]['sps'] / ddp[w]['sps']:.5f}"
                                        for w in workers])
        row("overlap off ms / step", [f"{plain[w]['step_ms']:.2f}" for w in workers])
    row("symtriton ms / step", [f"{sym[w]['step_ms']:.2f}" for w in workers])
    row("  of which forward_backward", [f"{sym[w]['phase_ms']['forward_backward']:.2f}"
                                        for w in workers])
    row("  of which update (kvstore)", [f"{sym[w]['phase_ms']['update']:.2f}"
                                        for w in workers])
    row("DDP ms / step", [f"{ddp[w]['step_ms']:.3f}" for w in workers])
    row("symtriton kernel launches / step", [f"{sym[w]['launches']:g}" for w in workers])
    row("DDP ATen ops / step", [f"{ddp[w]['launches']:g}" for w in workers])
    row("symtriton collectives / step",
        [fmt_collectives(sym[w]["collectives"]) for w in workers])
    row("DDP collectives / step", [fmt_collectives(ddp[w]["collectives"]) for w in workers])
    row("symtriton ms in collectives/step", [f"{sym[w]['comm_ms']:.2f}" for w in workers])
    row("DDP backward comm ms / step", [f"{ddp[w]['comm_ms']:.3f}" for w in workers])
    row("CPU time / wall per worker (s/D)",
        [f"{sym[w]['cpu_share']:.2f} / {ddp[w]['cpu_share']:.2f}" for w in workers])
    row("validation accuracy (sym / DDP)",
        [f"{sym[w]['accuracy']:.3f} / {ddp[w]['accuracy']:.3f}" for w in workers])


def print_results(model, workers, sym, ddp, plain=None):
    for w in workers:
        s, d = sym[w], ddp[w]
        print(f"RESULT dist model={model} workers={w} sym_sps={s['sps']:.2f} "
              f"ddp_sps={d['sps']:.2f} "
              f"ratio={s['sps'] / d['sps']:.6f} sym_step_ms={s['step_ms']:.3f} "
              f"ddp_step_ms={d['step_ms']:.4f} sym_launches={s['launches']:g} "
              f"sym_allreduce={s['collectives'].get('all_reduce', 0):g} "
              f"sym_allgather={s['collectives'].get('all_gather', 0):g} "
              f"ddp_ops={d['launches']:g} ddp_allreduce={d['collectives'].get('allreduce', 0):g} "
              f"sym_comm_ms={s['comm_ms']:.3f} sym_cpu_share={s['cpu_share']:.3f} "
              f"ddp_cpu_share={d['cpu_share']:.3f} sym_acc={s['accuracy']:.4f} "
              f"ddp_acc={d['accuracy']:.4f}" +
              (f" plain_sps={plain[w]['sps']:.2f} plain_ratio={plain[w]['sps'] / d['sps']:.6f}"
               if plain is not None else ""))
    if len(workers) > 1:
        a, b = workers[0], workers[-1]
        print(f"RESULT dist_scaling model={model} from={a} to={b} "
              f"sym={sym[b]['sps'] / sym[a]['sps']:.4f} "
              f"ddp={ddp[b]['sps'] / ddp[a]['sps']:.4f}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=32, help="per-worker batch")
    p.add_argument("--steps", type=int, default=None,
                   help="timed steps per worker, each side (default: MLP 1000, LeNet 100)")
    p.add_argument("--ddp-passes", type=int, default=1,
                   help="times DDP goes over its timed steps (default 1)")
    p.add_argument("--models", default="mlp,lenet", help="comma-separated: mlp, lenet")
    p.add_argument("--model", choices=MODELS, default="mlp", help=argparse.SUPPRESS)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--val", type=int, default=512, help="held-out rows")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--repeats", type=int, default=3,
                   help="rounds over all configurations; the median run is shown")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run")
    p.add_argument("--plain", action="store_true",
                   help="also run symtriton with SYMTRITON_DIST_OVERLAP=0 (gradients "
                        "reduced at the push, not during the backward), in the same rounds")
    p.add_argument("--worker", choices=("symtriton", "symtriton_plain", "ddp"),
                   help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_model(args, argv, model, workers, cache_dir):
    """The rounds of one model: (symtriton, DDP) median runs per worker count."""
    argv = argv + ["--model", model]
    sides = ("symtriton", "ddp") + (("symtriton_plain",) if args.plain else ())
    runs = {(side, w): [] for side in sides for w in workers}
    for _ in range(args.repeats):           # rounds, so load drifts hit every config
        for w in workers:
            for side in sides:
                runs[side, w].append(combine(launch(side, w, argv, cache_dir, args.timeout)))

    def medians(side):
        return {w: median_run(runs[side, w]) for w in workers} if side in sides else None
    return medians("symtriton"), medians("ddp"), medians("symtriton_plain")


def report(args, model, workers, sym, ddp, plain):
    """One model's table."""
    print(f"model: {describe(args, model)}, per-worker batch {args.batch}, SGD lr {args.lr} "
          f"momentum 0.9; timed steps per worker: symtriton {timed_steps(args, model)}, DDP "
          f"{timed_steps(args, model)} x {args.ddp_passes} passes; 1 warm-up step; figures "
          f"of the median of "
          f"{args.repeats} runs (samples/s range in brackets)")
    print()
    print_table(args, workers, sym, ddp, plain)
    print()


def timed_steps(args, model):
    return args.steps if args.steps is not None else STEPS[model]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.worker:
        args.steps = timed_steps(args, args.model)
        return worker_main(args)
    workers = sorted({int(w) for w in args.workers.split(",")})
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"--models: unknown {', '.join(unknown)} (choose from "
                         f"{', '.join(MODELS)})")
    cache_dir = os.environ.get("SYMTRITON_CACHE_DIR") or \
        tempfile.mkdtemp(prefix="symtriton-dist-bench-")
    t_start, load_before = time.perf_counter(), os.getloadavg()[0]
    results = {m: run_model(args, argv, m, workers, cache_dir) for m in models}
    print("Data-parallel training: symtriton Module.fit (kvstore dist_sync) vs PyTorch "
          "DistributedDataParallel (gloo), worker processes on this machine")
    from runtime.context import cpu_target
    print(f"machine: {os.cpu_count()}-core CPU, symtriton target {cpu_target()}, 1 thread per "
          f"worker; torch {torch.__version__}; load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after; cache dir {cache_dir}")
    if len(workers) > 1 and workers[-1] >= (os.cpu_count() or 1):
        print(f"note: {workers[-1]} workers on {os.cpu_count()} cores leave no core for anything "
              f"else on the machine; the ratios, not the absolute numbers, are the figures "
              f"that count")
    print()
    for m in models:
        report(args, m, workers, *results[m])
    print("(samples / s: all workers' timed samples over the slowest rank's time between "
          "barriers; collectives: symtriton's counted by wrapping torch.distributed, DDP's "
          "c10d ops over one extra step; with 1 worker our kvstore skips communication, DDP "
          "still all-reduces; ms in collectives: symtriton's time starting them and waiting "
          "for them (those started during the backward included), with the wait for the "
          "peer; CPU time / wall: the worker process's CPU seconds over the timed window, "
          "mean over ranks, below 1 when it waits or other processes take its core)")
    print()
    for m in models:
        print_results(m, workers, *results[m])
    print(f"total benchmark time {time.perf_counter() - t_start:.1f} s")
    return None


if __name__ == "__main__":
    main()
