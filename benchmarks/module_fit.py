"""Samples per second of ``Module.fit`` on an MLP, beside PyTorch eager doing the
same training (same model, data, batch size, SGD with momentum) in the same run.

    python benchmarks/module_fit.py [--hidden 128] [--batch 64] [--samples 2048]
                                    [--epochs 2] [--contexts 1] [--threads 1]

Prints one table: samples/s for each side and the ratio, the launches per
training step (forward + backward + one optimizer launch) and the accuracy
both reach, so the comparison is between two trainings that both learn.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-fit-bench-"))

import numpy as np  # noqa: E402

from benchmarks.data import make_data  # noqa: E402
import torch  # noqa: E402

import module_api as mx  # noqa: E402
from runtime.launcher import LaunchCounter  # noqa: E402


def mlp(hidden, classes):
    net = mx.sym.var("data")
    net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=classes, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def fit_symtriton(args, x, y, xv, yv):
    train = mx.io.NDArrayIter(x, y, batch_size=args.batch, shuffle=False)
    val = mx.io.NDArrayIter(xv, yv, batch_size=args.batch)
    contexts = [mx.cpu(i) for i in range(args.contexts)]
    mod = mx.mod.Module(mlp(args.hidden, args.classes), context=contexts)
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": args.lr,
                                                          "momentum": 0.9})
    metric = mx.metric.create("acc")
    batch = next(iter(train))          # warm-up step: loads the kernels
    mod.forward_backward(batch)
    mod.update()
    train.reset()
    LaunchCounter.reset()
    t0 = time.perf_counter()
    steps = 0
    for _ in range(args.epochs):
        train.reset()
        for batch in train:
            mod.forward_backward(batch)
            mod.update()
            steps += 1
    elapsed = time.perf_counter() - t0
    launches = LaunchCounter.total / max(steps, 1)
    acc = dict(mod.score(val, metric))["accuracy"]
    return steps * args.batch / elapsed, launches, acc


def fit_eager(args, x, y, xv, yv):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.classes))
    # SoftmaxOutput's gradient is not divided by the batch; Module.fit sets
    # rescale_grad = 1/batch, which is what reduction='mean' does here.
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    t0 = time.perf_counter()
    steps = 0
    for _ in range(args.epochs):
        for i in range(0, len(xt) - args.batch + 1, args.batch):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[i:i + args.batch]),
                                                     yt[i:i + args.batch])
            loss.backward()
            opt.step()
            steps += 1
    elapsed = time.perf_counter() - t0
    with torch.no_grad():
        acc = (model(torch.from_numpy(xv)).argmax(1).numpy() == yv).mean()
    return steps * args.batch / elapsed, float(acc)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--contexts", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger().setLevel(logging.WARNING)
    x, y = make_data(args.samples + 512, args.dim, args.classes)
    x, y, xv, yv = x[:args.samples], y[:args.samples], x[args.samples:], y[args.samples:]
    sym_sps, launches, sym_acc = fit_symtriton(args, x, y, xv, yv)
    eager_sps, eager_acc = fit_eager(args, x, y, xv, yv)
    print(f"Module.fit vs PyTorch eager: MLP {args.dim}-{args.hidden}-{args.hidden}-"
          f"{args.classes}, batch {args.batch}, {args.epochs} epochs of {args.samples}, "
          f"{args.contexts} context(s); Triton interpreter on CPU, {args.threads} thread(s)")
    print(f"{'':24}{'symtriton':>14}{'eager':>14}{'ratio':>10}")
    print(f"{'samples / s':24}{sym_sps:14.1f}{eager_sps:14.1f}{sym_sps / eager_sps:10.4f}")
    print(f"{'launches / step':24}{launches:14.1f}")
    print(f"{'validation accuracy':24}{sym_acc:14.3f}{eager_acc:14.3f}")
    print(f"RESULT fit sym_sps={sym_sps:.2f} eager_sps={eager_sps:.2f} "
          f"ratio={sym_sps / eager_sps:.5f} launches={launches:.1f} sym_acc={sym_acc:.4f} "
          f"eager_acc={eager_acc:.4f}")


if __name__ == "__main__":
    main()
