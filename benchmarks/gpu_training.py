"""Training steps on a GPU: symtriton's Triton kernels beside PyTorch eager and
``torch.compile`` on the same device, in one run.

    python benchmarks/gpu_training.py                  # gpu(0); needs a CUDA build of torch
    python benchmarks/gpu_training.py --device cpu --steps 3 --no-compile   # smoke run

Two models, each from the same initial weights on every side:

* **mlp**: 784-512-512-10, ReLU, softmax cross-entropy, SGD momentum 0.9, batch 128
  (``benchmarks/module_fit.py``'s model);
* **lstm**: the lstm_bucketing model at one bucket (2 x 200 LSTM, embedding 200,
  2,000 words, batch 32, 30 steps; ``benchmarks/lstm_bucketing.py``'s model), whose
  eager peer is ``nn.LSTM`` (cuDNN on a GPU).

A step is ``forward_backward`` + ``update`` for symtriton (``Module``), and
``zero_grad`` + loss + ``backward`` + ``step`` for the peers. Each side runs
``--warmup`` steps (compiles included), then ``--steps`` timed steps ended by a
device synchronisation, in ``--rounds`` rounds taken in turn. Prints samples/s,
the ratios against eager and ``torch.compile`` (median over rounds), kernel
launches per step, and symtriton's and ``torch.compile``'s first-step seconds.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-gpu-bench-"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import module_api as mx  # noqa: E402
from benchmarks.lstm_bucketing import EagerLM, make_sym_gen  # noqa: E402
from benchmarks.module_fit import mlp  # noqa: E402
from runtime.launcher import LaunchCounter  # noqa: E402


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _mlp_case(args, ctx, device):
    batch, dim = 128, 784
    rng = np.random.RandomState(0)
    x = rng.randn(batch, dim).astype(np.float32)
    y = rng.randint(0, 10, batch).astype(np.float32)
    mod = mx.mod.Module(mlp(512, 10), context=[ctx])
    mod.bind([("data", (batch, dim))], [("softmax_label", (batch,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.05,
                                                          "momentum": 0.9})
    db = mx.io.DataBatch([mx.nd.array(x, ctx=ctx)], [mx.nd.array(y, ctx=ctx)])
    model = torch.nn.Sequential(torch.nn.Linear(dim, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(device)
    xt, yt = torch.from_numpy(x).to(device), torch.from_numpy(y).long().to(device)
    return mod, db, model, lambda m: F.cross_entropy(m(xt), yt), batch


def _lstm_case(args, ctx, device):
    batch, seq, vocab = 32, 30, 2000
    sym, _, _ = make_sym_gen(2, 200, 200, vocab)(seq)
    rng = np.random.RandomState(0)
    data = rng.randint(1, vocab, (batch, seq)).astype(np.float32)
    label = np.roll(data, -1, axis=1)
    mod = mx.mod.Module(sym, data_names=("data",), label_names=("softmax_label",),
                        context=[ctx])
    mod.bind([("data", (batch, seq))], [("softmax_label", (batch, seq))])
    mod.init_params(mx.init.Xavier(factor_type="in", magnitude=2.34))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01, "wd": 1e-5})
    db = mx.io.DataBatch([mx.nd.array(data, ctx=ctx)], [mx.nd.array(label, ctx=ctx)])
    model = EagerLM(2, 200, 200, vocab)
    model.load_from_mx(mod.get_params()[0], 2)
    model = model.to(device)
    dt = torch.from_numpy(data).long().to(device)
    lt = torch.from_numpy(label).long().to(device)
    return mod, db, model, (lambda m: F.cross_entropy(m(dt), lt.reshape(-1),
                                                      reduction="sum") / batch), batch


def _timed(step, n, device):
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    _sync(device)
    return time.perf_counter() - t0


def run_case(name, args, ctx, device):
    """Samples/s of each side per round, launches per step and first-step seconds."""
    mod, db, model, loss_of, batch = (_mlp_case if name == "mlp" else _lstm_case)(args, ctx, device)

    def sym_step():
        mod.forward_backward(db)
        mod.update()

    sides = {"symtriton": sym_step}
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def eager_step(m=model):
        opt.zero_grad(set_to_none=False)
        loss_of(m).backward()
        opt.step()

    sides["eager"] = eager_step
    if args.compile:
        compiled = torch.compile(model)
        sides["torch.compile"] = lambda: eager_step(compiled)
    first = {}
    for side, step in sides.items():
        first[side] = _timed(step, 1, device)
        _timed(step, args.warmup, device)
    LaunchCounter.reset()
    sym_step()
    launches = LaunchCounter.total
    rates = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, step in sides.items():
            rates[side].append(batch * args.steps / _timed(step, args.steps, device))
    return rates, launches, first


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--models", default="mlp,lstm")
    p.add_argument("--steps", type=int, default=50, help="timed steps a round")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="leave out the torch.compile column")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA device: run on a GPU machine, or pass --device cpu")
    ctx = mx.gpu(0) if args.device == "cuda" else mx.cpu(0)
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    print(f"device: {where}; torch {torch.__version__}")
    header = f"{'model':<6} {'side':<14} {'samples/s':>11} {'vs eager':>9} {'first step s':>13}"
    print(header)
    results = {}
    for name in args.models.split(","):
        rates, launches, first = run_case(name, args, ctx, device)
        med = {s: statistics.median(r) for s, r in rates.items()}
        for side in rates:
            print(f"{name:<6} {side:<14} {med[side]:>11.0f} {med[side] / med['eager']:>8.2f}x "
                  f"{first[side]:>13.2f}")
        extra = (f", {med['symtriton'] / med['torch.compile']:.2f}x torch.compile"
                 if "torch.compile" in med else "")
        print(f"RESULT {name}: symtriton {med['symtriton'] / med['eager']:.2f}x eager{extra}; "
              f"{launches} launches a step; rounds {[round(r) for r in rates['symtriton']]}")
        results[name] = med
    return results


if __name__ == "__main__":
    main()
