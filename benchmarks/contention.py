"""Training speed on a busy machine: LeNet and lstm_bucketing, symtriton beside mxnet 1.9.1
and PyTorch eager, idle and with competing busy loops, at default thread settings.

    python benchmarks/contention.py --mxnet-python .mxnet-venv/bin/python
    python benchmarks/contention.py --models lenet --busy 2 --rounds 5 --seconds 2

No side gets a thread setting from this script: neither ``OMP_NUM_THREADS`` nor
``torch.set_num_threads`` is touched, and the mxnet peer inherits this process's
environment (its ``--threads 0``), so each library runs with its own defaults (the
variables the environment already holds are printed). For each model:

* **idle**: ``--rounds`` rounds; in each, every side trains for about ``--seconds``
  (mxnet, then symtriton, then the other in-process sides), so a slow spell of
  the shared machine falls on all of them;
* **busy**: ``--busy`` processes that spin (``while True: pass``) are started, and
  the same rounds run beside them; the processes are killed when the rounds end
  (and stop on their own after a time bound, should this script die first).

Sides: ``mxnet`` (``benchmarks/mxnet_peer.py --serve``: one process kept for the
whole run, each round's steps timed to ``mx.nd.waitall()``), ``symtriton`` (this
process, ``SYMTRITON_THREADS`` as the environment says: the adaptive policy by
default), ``fixed`` (the same module with ``runtime.threads`` set to ``fixed``:
torch's count for every launch, the behaviour before the policy; only with
``--sides``), ``eager`` (PyTorch eager, the same model from its own weights).
Every side steps through the same batches. A round's ratio compares symtriton
with another side in that round; the table gives the median over rounds, and
``busy / idle`` divides the median busy ratio against mxnet by the idle one.
Each round also prints every side's CPU seconds per wall second over its turn (its
process's, every thread counted; the peer reports mxnet's): the share of the cores
it got, about 2 N / (N + 2) cores for N runnable threads beside two busy loops on 2
cores; the RESULT lines give its median as ``<side>_cpu_share``.

Each model prints ``RESULT contention model=... load=... key=value`` lines.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-contention-"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import module_api as mx  # noqa: E402
from benchmarks.data import SHERLOCK, busy_loops  # noqa: E402
from runtime import threads  # noqa: E402

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "OMP_WAIT_POLICY", "SYMTRITON_THREADS")


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="lenet,lstm", help="comma-separated: lenet, lstm")
    p.add_argument("--busy", type=int, default=2, help="competing busy-loop processes")
    p.add_argument("--rounds", type=int, default=5, help="rounds per load")
    p.add_argument("--seconds", type=float, default=2.0,
                   help="about this long per side per round")
    p.add_argument("--sides", default="mxnet,symtriton,eager",
                   help="comma-separated, in round order: mxnet, symtriton, fixed, eager")
    p.add_argument("--loads", default="idle,busy", help="idle, busy or both")
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet==1.9.1: the mxnet side")
    p.add_argument("--max-batches", type=int, default=40,
                   help="batches each side cycles through (LeNet: of the MNIST split)")
    p.add_argument("--generated", type=int, default=0,
                   help="lstm: train on this many generated sentences instead of the "
                        "Sherlock Holmes corpus (smoke tests)")
    p.add_argument("--num-hidden", type=int, default=200, help="lstm hidden and embed size")
    p.add_argument("--batch-size", type=int, default=32, help="lstm batch")
    p.add_argument("--seed", type=int, default=0)
    return p


# ---------------------------------------------------------------------------- sides

class Side:
    """One contender: ``steps(n)`` trains n steps and returns their seconds."""

    name = ""
    unit = 1            # samples (LeNet) or tokens (lstm) per step

    def run_for(self, seconds, min_steps=2):
        """Train until ``seconds`` have passed (at least ``min_steps`` steps);
        returns (steps, seconds, CPU seconds of this process over them)."""
        n, spent = 0, 0.0
        c0 = time.process_time()
        while n < min_steps or spent < seconds:
            spent += self.steps(1)
            n += 1
        return n, spent, time.process_time() - c0

    def warm_up(self):
        """Untimed first steps (kernel loads, oneDNN primitives, buckets' compiles)."""
        self.steps(2)

    def close(self):
        pass


class SymSide(Side):
    """symtriton in this process; ``fixed``: with the thread policy off for its steps."""

    def __init__(self, name, mod, batches, step, unit, policy):
        self.name, self.mod, self.batches, self.step, self.unit = name, mod, batches, step, unit
        self.policy = policy       # the policy object its steps run with (None: fixed)
        self.i = 0

    def warm_up(self):
        # a step in each bucket first: a bucket's first step compiles its Program
        first = {}
        for i, b in enumerate(self.batches):
            first.setdefault(getattr(b, "bucket_key", None), i)
        threads.reset(self.policy)
        for i in first.values():
            self.step(self.mod, self.batches[i])
        self.steps(2)

    def steps(self, n):
        threads.reset(self.policy)
        t0 = time.perf_counter()
        for _ in range(n):
            self.step(self.mod, self.batches[self.i % len(self.batches)])
            self.i += 1
        return time.perf_counter() - t0


def row_halves(mod):
    """How the row-split phases of a (Bucketing)Module's executors ran: per phase, the
    executors whose halves run as TorchScript (``compiler/cpu/script.py``), and why the
    others keep Python threads."""
    modules = list(getattr(mod, "_buckets", {}).values()) or [mod]
    splitters = [e._row_split for m in modules for e in m._exec_group.execs
                 if getattr(e, "_row_split", None) is not None and e._row_split.halves]
    if not splitters:
        return "never split"
    out = {}
    for phase in ("fwd", "bwd"):
        scripted = sum(1 for rs in splitters if rs.scripts.get(phase, (0, None))[1] is not None)
        reasons = sorted({rs.script_reasons[phase] for rs in splitters
                          if phase in rs.script_reasons})
        out[phase] = f"{scripted} of {len(splitters)} scripted" + \
            (f" ({'; '.join(reasons)})" if reasons else "")
    return out


class EagerSide(Side):
    name = "eager"

    def __init__(self, step, batches, unit):
        self.step, self.batches, self.unit, self.i = step, batches, unit, 0

    def steps(self, n):
        t0 = time.perf_counter()
        for _ in range(n):
            self.step(self.batches[self.i % len(self.batches)])
            self.i += 1
        return time.perf_counter() - t0


class MxnetSide(Side):
    """mxnet 1.9.1 in its own process (``mxnet_peer.py --serve``), steps on request."""

    name = "mxnet"

    def __init__(self, python, peer_args, unit):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SYMTRITON_", "TRITON_"))}
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [python, os.path.join(ROOT, "benchmarks", "mxnet_peer.py"), "--threads", "0",
             "--serve"] + [str(a) for a in peer_args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env)
        self.unit = unit
        self.rate = None      # steps per second of the last round
        self.ready = self._read()

    def _read(self):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"mxnet peer ended (exit {self.proc.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    def steps(self, n):
        return self._steps(n)["seconds"]

    def _steps(self, n):
        self.proc.stdin.write(f"steps {n}\n")
        self.proc.stdin.flush()
        return self._read()

    def run_for(self, seconds, min_steps=2):
        # its engine is asynchronous: ask for as many steps as its last round's rate
        # says fit in ``seconds`` (the first round: a few), timed to waitall
        n = min_steps if self.rate is None else max(min_steps, round(seconds * self.rate))
        reply = self._steps(n)
        spent = reply["seconds"]
        self.rate = n / spent
        return n, spent, reply["cpu_seconds"]

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------------- models

def lenet_sides(args, names, policy):
    from benchmarks.lenet import eager_lenet
    from examples.mnist_data import DEFAULT_DIR, split_files
    from examples.mnist_symbols import lenet
    files = split_files(DEFAULT_DIR)
    batch = 64
    train = mx.io.MNISTIter(image=files["train_images"], label=files["train_labels"],
                            batch_size=batch, shuffle=True, seed=args.seed, silent=True)
    batches = [b for i, b in zip(range(args.max_batches), train)]
    mx.random.seed(args.seed)
    mod = mx.mod.Module(lenet(), context=mx.cpu())
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    hyper = argparse.Namespace(seed=args.seed, lr=0.05, mom=0.9, wd=0.0001)
    mod.init_optimizer(optimizer="sgd", optimizer_params={
        "learning_rate": hyper.lr, "momentum": hyper.mom, "wd": hyper.wd})

    def sym_step(m, b):
        m.forward_backward(b)
        m.update()

    model, opt = eager_lenet(hyper)
    tensors = [(torch.from_numpy(b.data[0].asnumpy()),
                torch.from_numpy(b.label[0].asnumpy()).long()) for b in batches]

    def eager_step(xy):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xy[0]), xy[1]).backward()
        opt.step()

    sides = {}
    for name in names:
        if name in ("symtriton", "fixed"):
            sides[name] = SymSide(name, mod, batches, sym_step, batch,
                                  policy if name == "symtriton" else None)
        elif name == "eager":
            sides[name] = EagerSide(eager_step, tensors, batch)
        elif name == "mxnet" and args.mxnet_python:
            sides[name] = MxnetSide(args.mxnet_python, [
                "lenet", "--train-images", files["train_images"], "--train-labels",
                files["train_labels"], "--val-images", files["val_images"], "--val-labels",
                files["val_labels"], "--batch", batch, "--lr", hyper.lr, "--mom", hyper.mom,
                "--wd", hyper.wd, "--seed", args.seed, "--max-batches", args.max_batches], batch)
    return sides, "LeNet (mxnet's symbols/lenet.py) on MNIST, batch 64, SGD momentum", "samples"


def lstm_sides(args, names, policy):
    from benchmarks.lstm_bucketing import (EagerLM, eager_loss, load_corpus, make_sym_gen,
                                           new_module)
    B, H, L = args.batch_size, args.num_hidden, 2
    hyper = argparse.Namespace(
        generated=args.generated, vocab=60, seed=args.seed, lr=0.01, mom=0.0, wd=0.00001,
        optimizer="sgd", train_data=os.path.join(SHERLOCK, "sherlockholmes.train.txt"))
    buckets = [10, 20, 30, 40, 50, 60]
    sentences, vocab_size = load_corpus(hyper)
    it = mx.rnn.BucketSentenceIter(sentences, B, buckets=buckets, invalid_label=0)
    batches = [b for i, b in zip(range(args.max_batches), it)]
    mod, _ = new_module(make_sym_gen(L, H, H, vocab_size), buckets[-1], B, hyper)

    def sym_step(m, b):
        m.forward(b, is_train=True)
        m.backward()
        m.update()

    model = EagerLM(L, H, H, vocab_size)
    model.load_from_mx(mod.get_params()[0], L)
    opt = torch.optim.SGD(model.parameters(), lr=hyper.lr, momentum=hyper.mom,
                          weight_decay=hyper.wd)
    tensors = [(torch.from_numpy(b.data[0].asnumpy().astype(np.int64)),
                torch.from_numpy(b.label[0].asnumpy().astype(np.int64))) for b in batches]

    def eager_step(dl):
        opt.zero_grad()
        eager_loss(model, dl[0], dl[1], B).backward()
        opt.step()

    tokens = B * batches[0].bucket_key
    if any(b.bucket_key != batches[0].bucket_key for b in batches):
        tokens = B * sum(b.bucket_key for b in batches) / len(batches)   # a mean step
    sides = {}
    for name in names:
        if name in ("symtriton", "fixed"):
            sides[name] = SymSide(name, mod, batches, sym_step, tokens,
                                  policy if name == "symtriton" else None)
        elif name == "eager":
            sides[name] = EagerSide(eager_step, tensors, tokens)
        elif name == "mxnet" and args.mxnet_python and not args.generated:
            sides[name] = MxnetSide(args.mxnet_python, [
                "lstm", "--train", hyper.train_data, "--valid", hyper.train_data,
                "--num-hidden", H, "--num-embed", H, "--batch-size", B, "--lr", hyper.lr,
                "--wd", hyper.wd], tokens)
    title = (f"lstm_bucketing (2 x {H} LSTM, BucketingModule, batch {B}, bucket "
             f"{batches[0].bucket_key}), SGD")
    return sides, title, "tokens"


# ---------------------------------------------------------------------------- rounds

def run_rounds(sides, order, rounds, seconds, label, unit_name):
    """Rounds of every side in ``order``; returns ({side: [units per second per round]},
    {side: [CPU seconds per wall second per round]})."""
    rates = {n: [] for n in order}
    shares = {n: [] for n in order}
    for r in range(rounds):
        parts = []
        for name in order:
            steps, spent, cpu = sides[name].run_for(seconds)
            rates[name].append(steps * sides[name].unit / spent)
            shares[name].append(cpu / spent)
            parts.append(f"{name} {rates[name][-1]:.0f} ({shares[name][-1]:.2f} cpu/wall)")
        sym = rates["symtriton"][-1] if "symtriton" in rates else None
        ratios = ", ".join(f"sym/{n} {sym / rates[n][-1]:.3f}" for n in order
                           if sym is not None and n != "symtriton")
        print(f"  {label} round {r + 1}: {unit_name}/s " + ", ".join(parts)
              + (f" ({ratios})" if ratios else ""), flush=True)
    return rates, shares


def ratio_rounds(rates, other):
    return [s / o for s, o in zip(rates["symtriton"], rates[other])]


def main(argv=None):
    args = build_parser().parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    names = [n.strip() for n in args.sides.split(",") if n.strip()]
    loads = [x.strip() for x in args.loads.split(",") if x.strip()]
    env_threads = ", ".join(f"{v}={os.environ[v]}" if v in os.environ else f"{v} unset"
                            for v in THREAD_VARS)
    print(f"machine: {os.cpu_count()} cores; torch {torch.__version__} "
          f"(default {torch.get_num_threads()} threads); thread settings: {env_threads}")
    summary = []
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        policy = threads.parse_mode(os.environ.get(threads.ENV))  # a fresh one per model
        make = {"lenet": lenet_sides, "lstm": lstm_sides}[model]
        sides, title, unit_name = make(args, names, policy)
        order = [n for n in names if n in sides]
        try:
            for name in order:             # warm-up: first runs (kernels, primitives)
                sides[name].warm_up()
            print(f"\n== {model}: {title}; sides {', '.join(order)}; {unit_name}/s ==")
            results, shares = {}, {}
            for load in loads:
                label = "idle" if load == "idle" else f"busy {args.busy}"
                n_busy = 0 if load == "idle" else args.busy
                bound_s = 120 + 10 * args.rounds * len(order) * args.seconds
                with busy_loops(n_busy, bound_s) as procs:
                    if procs:
                        time.sleep(1.0)    # let the scheduler spread them
                    # the machine's own load besides ours (a shared machine is never idle)
                    print(f"  {label}: 1-minute load average before the rounds "
                          f"{os.getloadavg()[0]:.2f}", flush=True)
                    results[label], shares[label] = run_rounds(
                        sides, order, args.rounds, args.seconds, label, unit_name)
                    if procs:
                        print(f"  {label}: busy-loop pids {' '.join(str(p.pid) for p in procs)}")
                if "symtriton" in order and policy is not None:
                    print(f"  {label}: symtriton thread policy {policy.state()}")
                    print(f"  {label}: symtriton row halves {row_halves(sides['symtriton'].mod)}")
            summary.append((model, unit_name, order, results, shares))
        finally:
            for s in sides.values():
                s.close()
            threads.reset()
    print()
    report(summary, args)


def report(summary, args):
    """The table: median units/s per side and load, symtriton's ratios (range over
    rounds), and busy / idle of the ratio against mxnet."""
    print("| model | load | " + " | ".join(
        ["mxnet 1.9.1", "symtriton", "fixed threads", "eager", "sym / mxnet (rounds)",
         "sym / eager", "busy / idle vs mxnet"]) + " |")
    print("| --- " * 9 + "|")
    for model, unit_name, order, results, _ in summary:
        idle_mx = None
        for label, rates in results.items():
            med = {n: statistics.median(v) for n, v in rates.items()}
            cells = [model, label]
            for n in ("mxnet", "symtriton", "fixed", "eager"):
                cells.append(f"{med[n]:,.0f}" if n in med else "-")
            rx = ratio_rounds(rates, "mxnet") if "mxnet" in rates and "symtriton" in rates \
                else None
            re_ = ratio_rounds(rates, "eager") if "eager" in rates and "symtriton" in rates \
                else None
            cells.append(f"{statistics.median(rx):.2f} ({min(rx):.2f}-{max(rx):.2f})"
                         if rx else "-")
            cells.append(f"{statistics.median(re_):.2f}" if re_ else "-")
            if rx and label == "idle":
                idle_mx = statistics.median(rx)
            cells.append(f"{statistics.median(rx) / idle_mx:.2f}"
                         if rx and idle_mx and label != "idle" else "-")
            print("| " + " | ".join(cells) + " |")
    print(f"(LeNet samples/s, lstm tokens/s: median over {args.rounds} rounds of about "
          f"{args.seconds} s per side; ratios: median of the per-round ratios, range in "
          f"brackets; busy / idle: the busy ratio against mxnet over the idle one)")
    for model, unit_name, order, results, shares in summary:
        for label, rates in results.items():
            med = {n: statistics.median(v) for n, v in rates.items()}
            kv = " ".join(f"{n}_{unit_name}_s={med[n]:.2f}" for n in order)
            kv += "".join(f" {n}_cpu_share={statistics.median(shares[label][n]):.3f}"
                          for n in order)
            extra = ""
            if "symtriton" in rates:
                for other in ("mxnet", "eager", "fixed"):
                    if other in rates:
                        rr = ratio_rounds(rates, other)
                        extra += (f" ratio_{other}={statistics.median(rr):.4f} "
                                  f"ratio_{other}_rounds={','.join(f'{x:.3f}' for x in rr)}")
            print(f"RESULT contention model={model} load={label.replace(' ', '')} {kv}{extra}")


if __name__ == "__main__":
    main()
