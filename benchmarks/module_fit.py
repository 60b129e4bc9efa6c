"""Samples per second of Module training on an MLP, beside PyTorch eager (same process)
and mxnet 1.9.1 (its own venv), in one run.

    python benchmarks/module_fit.py                       # MLP 784-512-512-10, batch 128
    python benchmarks/module_fit.py --mxnet-python ~/mxnet-venv/bin/python

Each side trains the same MLP (ReLU, softmax cross-entropy, SGD with momentum 0.9,
gradients averaged over the batch) with ``--threads`` threads. A training step is
``forward_backward`` + ``update`` for symtriton and mxnet (``Module``), and
``zero_grad`` + loss + ``backward`` + ``step`` for eager. symtriton's and eager's
steps alternate batch by batch (a slow spell of the shared machine falls on both);
mxnet runs ``benchmarks/mxnet_peer.py mlp`` for the same number of steps. Prints
samples/s and ratios, launches per step (forward + backward + one optimizer
launch), and the validation accuracy both in-process sides reach (both learn).
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


if __name__ == "__main__":   # --threads (default: all cores) for every side, before torch loads
    from benchmarks.data import set_thread_env
    set_thread_env(sys.argv[1:], os.cpu_count() or 1)


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


def symtriton_module(args, train):
    contexts = [mx.cpu(i) for i in range(args.contexts)]
    mod = mx.mod.Module(mlp(args.hidden, args.classes), context=contexts)
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": args.lr,
                                                          "momentum": 0.9})
    return mod


def eager_model(args, dim):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(dim, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.classes))
    # SoftmaxOutput's gradient is not divided by the batch; Module sets
    # rescale_grad = 1/batch, which is what reduction='mean' does here.
    return model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)


def train_interleaved(args, mod, model, opt, batches):
    """Every batch: one symtriton step, then one eager step; their seconds."""
    sym_s = eager_s = 0.0
    for batch, (xb, yb) in batches:
        t0 = time.perf_counter()
        mod.forward_backward(batch)
        mod.update()
        t1 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
        t2 = time.perf_counter()
        sym_s += t1 - t0
        eager_s += t2 - t1
    return sym_s, eager_s


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--dim", type=int, default=784)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--epochs", type=int, default=2, help="timed epochs over the samples")
    p.add_argument("--contexts", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="threads for every side")
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet==1.9.1: adds the mxnet column")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger().setLevel(logging.WARNING)
    x, y = make_data(args.samples + 1024, args.dim, args.classes)
    x, y, xv, yv = x[:args.samples], y[:args.samples], x[args.samples:], y[args.samples:]
    train = mx.io.NDArrayIter(x, y, batch_size=args.batch, shuffle=False)
    mod = symtriton_module(args, train)
    model, opt = eager_model(args, args.dim)
    batches = [(b, (torch.from_numpy(b.data[0].asnumpy()), torch.from_numpy(
        b.label[0].asnumpy()).long())) for b in train]
    train_interleaved(args, mod, model, opt, batches[:2])          # warm-up
    LaunchCounter.reset()
    sym_s = eager_s = 0.0
    for _ in range(args.epochs):
        a, b = train_interleaved(args, mod, model, opt, batches)
        sym_s, eager_s = sym_s + a, eager_s + b
    steps = args.epochs * len(batches)
    launches = LaunchCounter.total / steps
    sym_sps, eager_sps = steps * args.batch / sym_s, steps * args.batch / eager_s
    sym_acc = dict(mod.score(mx.io.NDArrayIter(xv, yv, batch_size=args.batch), "acc"))[
        "accuracy"]
    with torch.no_grad():
        eager_acc = float((model(torch.from_numpy(xv)).argmax(1).numpy() == yv).mean())
    mx_sps = None
    if args.mxnet_python:
        from benchmarks.data import run_mxnet_peer
        res = run_mxnet_peer(args.mxnet_python, [
            "--threads", args.threads, "mlp", "--batch", args.batch, "--hidden", args.hidden,
            "--steps", steps])
        if res is not None:
            mx_sps = len(res["step_seconds"]) * args.batch / sum(res["step_seconds"])
    from runtime.context import cpu_target
    print(f"Module training vs PyTorch eager{' vs mxnet 1.9.1' if mx_sps else ''}: MLP "
          f"{args.dim}-{args.hidden}-{args.hidden}-{args.classes}, batch {args.batch}, "
          f"{steps} steps, {args.contexts} context(s); symtriton target {cpu_target()}, "
          f"{args.threads} thread(s) on every side")
    cols = ["symtriton", "eager"] + (["mxnet 1.9.1"] if mx_sps else [])
    vals = [sym_sps, eager_sps] + ([mx_sps] if mx_sps else [])
    print(f"{'':26}" + "".join(f"{c:>14}" for c in cols))
    print(f"{'samples / s':26}" + "".join(f"{v:14.1f}" for v in vals))
    print(f"{'symtriton speed / side':26}" + "".join(f"{sym_sps / v:14.3f}" for v in vals))
    print(f"{'launches / step':26}{launches:14.1f}")
    print(f"{'validation accuracy':26}{sym_acc:14.3f}{eager_acc:14.3f}")
    from benchmarks.flops import print_machine_distance, train_step_gflop
    gflop = train_step_gflop(mlp(args.hidden, args.classes), data=(args.batch, args.dim),
                             softmax_label=(args.batch,)) / args.batch
    gflops, peak = print_machine_distance(26, cols, vals, gflop, args.threads)
    print(f"RESULT fit sym_sps={sym_sps:.2f} eager_sps={eager_sps:.2f} "
          f"ratio={sym_sps / eager_sps:.5f} launches={launches:.1f} sym_acc={sym_acc:.4f} "
          f"eager_acc={eager_acc:.4f} mxnet_sps={None if mx_sps is None else f'{mx_sps:.2f}'} "
          f"ratio_mxnet={None if mx_sps is None else f'{sym_sps / mx_sps:.5f}'} "
          f"threads={args.threads} gflops={gflops:.2f} peak_gflops={peak:.2f}")


if __name__ == "__main__":
    main()
