"""LeNet on MNIST: samples per second and validation accuracy of symtriton, beside
PyTorch eager (same process) and mxnet 1.9.1 (its own venv), in one run.

    python benchmarks/lenet.py                               # 3 epochs, batch 64
    python benchmarks/lenet.py --mxnet-python .mxnet-venv/bin/python

Every side trains mxnet's ``symbols/lenet.py`` (conv 5x5x20, tanh, max-pool 2,
conv 5x5x50, tanh, max-pool 2, FC 500, tanh, FC 10, softmax cross-entropy) with
SGD (lr 0.05, momentum 0.9, weight decay 1e-4, gradients averaged over the
batch), Xavier gaussian/in/2 initialisation, batch 64, on the MNIST split of
``examples/mnist_data.py`` (8,000 training and 2,000 validation images of the
official test set) read with ``mx.io.MNISTIter`` (mxnet's shuffle order, seed 0),
with ``--threads`` threads each. A step is ``forward_backward`` + ``update``
(symtriton, mxnet) or ``zero_grad`` + loss + ``backward`` + ``step`` (eager, from
its own initial weights, on the same batches). symtriton's and eager's steps
alternate batch by batch, so a slow spell of the shared machine falls on both;
mxnet (``benchmarks/mxnet_peer.py lenet``) runs the same epochs afterwards.
Samples/s count training steps only; validation accuracy is measured after the
last epoch on the 1,984 validation images that fill whole batches (MNISTIter
drops the incomplete last batch, on every side).
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
os.environ.setdefault("SYMTRITON_CACHE_DIR", tempfile.mkdtemp(prefix="symtriton-lenet-bench-"))

if __name__ == "__main__":   # --threads (default: all cores) for every side, before torch loads
    from benchmarks.data import set_thread_env
    set_thread_env(sys.argv[1:], os.cpu_count() or 1)

import torch  # noqa: E402

import module_api as mx  # noqa: E402
from examples.mnist_data import DEFAULT_DIR, split_files  # noqa: E402
from examples.mnist_symbols import lenet  # noqa: E402
from runtime.launcher import LaunchCounter  # noqa: E402


def eager_lenet(args):
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 20, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Conv2d(20, 50, 5), torch.nn.Tanh(), torch.nn.MaxPool2d(2, 2),
        torch.nn.Flatten(), torch.nn.Linear(800, 500), torch.nn.Tanh(),
        torch.nn.Linear(500, 10))
    for m in model:
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):   # Xavier gaussian, in, 2
            torch.nn.init.kaiming_normal_(m.weight, nonlinearity="linear")
            m.weight.data.mul_(2 ** 0.5)
            torch.nn.init.zeros_(m.bias)
    # mxnet's wd is added to the gradient (torch's SGD weight_decay does the same)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.mom,
                          weight_decay=args.wd)
    return model, opt


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--mom", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=0.0001)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=DEFAULT_DIR)
    p.add_argument("--max-batches", type=int, default=None,
                   help="batches per epoch (smoke tests; default: the whole split)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="threads for every side")
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet==1.9.1: adds the mxnet column")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger().setLevel(logging.WARNING)
    files = split_files(args.data_dir)
    train = mx.io.MNISTIter(image=files["train_images"], label=files["train_labels"],
                            batch_size=args.batch, shuffle=True, seed=args.seed, silent=True)
    val = mx.io.MNISTIter(image=files["val_images"], label=files["val_labels"],
                          batch_size=args.batch, shuffle=False, silent=True)
    mx.random.seed(args.seed)
    t0 = time.perf_counter()
    mod = mx.mod.Module(lenet(), context=mx.cpu())
    mod.bind(train.provide_data, train.provide_label)          # compiles (cold cache)
    mod.init_params(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    mod.init_optimizer(optimizer="sgd", optimizer_params={
        "learning_rate": args.lr, "momentum": args.mom, "wd": args.wd})
    model, opt = eager_lenet(args)
    batches = []
    for i, b in enumerate(train):
        if args.max_batches is not None and i >= args.max_batches:
            break
        batches.append((b, torch.from_numpy(b.data[0].asnumpy()),
                        torch.from_numpy(b.label[0].asnumpy()).long()))

    mod.forward_backward(batches[0][0])            # warm-up
    mod.update()
    compile_s = time.perf_counter() - t0           # bind, init and the first step
    LaunchCounter.reset()
    sym_s = eager_s = 0.0
    for _ in range(args.epochs):
        for b, xb, yb in batches:
            t0 = time.perf_counter()
            mod.forward_backward(b)
            mod.update()
            t1 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            t2 = time.perf_counter()
            sym_s += t1 - t0
            eager_s += t2 - t1
    steps = args.epochs * len(batches)
    launches = LaunchCounter.total / steps
    sym_sps, eager_sps = steps * args.batch / sym_s, steps * args.batch / eager_s
    sym_acc = dict(mod.score(val, mx.metric.Accuracy()))["accuracy"]
    val.reset()
    right = total = 0
    with torch.no_grad():
        for b in val:
            pred = model(torch.from_numpy(b.data[0].asnumpy())).argmax(1).numpy()
            right += int((pred == b.label[0].asnumpy()).sum())
            total += len(pred)
    eager_acc = right / total
    mx_sps = mx_acc = None
    if args.mxnet_python:
        from benchmarks.data import run_mxnet_peer
        peer = ["--threads", args.threads, "lenet", "--train-images", files["train_images"],
                "--train-labels", files["train_labels"], "--val-images", files["val_images"],
                "--val-labels", files["val_labels"], "--epochs", args.epochs,
                "--batch", args.batch, "--lr", args.lr, "--mom", args.mom, "--wd", args.wd,
                "--seed", args.seed]
        if args.max_batches is not None:
            peer += ["--max-batches", args.max_batches]
        res = run_mxnet_peer(args.mxnet_python, peer)
        if res is not None:
            mx_sps = res["steps"] * res["batch"] / sum(res["epoch_seconds"])
            mx_acc = res["val_acc"]
    from runtime.context import cpu_target
    print(f"LeNet on MNIST (8,000 / 2,000), batch {args.batch}, {args.epochs} epoch(s), "
          f"{steps} steps; symtriton target {cpu_target()}, {args.threads} thread(s) on "
          f"every side")
    cols = ["symtriton", "eager"] + (["mxnet 1.9.1"] if mx_sps else [])
    sps = [sym_sps, eager_sps] + ([mx_sps] if mx_sps else [])
    accs = [sym_acc, eager_acc] + ([mx_acc] if mx_sps else [])
    print(f"{'':26}" + "".join(f"{c:>14}" for c in cols))
    print(f"{'samples / s':26}" + "".join(f"{v:14.1f}" for v in sps))
    print(f"{'symtriton speed / side':26}" + "".join(f"{sym_sps / v:14.3f}" for v in sps))
    print(f"{'validation accuracy':26}" + "".join(f"{a:14.4f}" for a in accs))
    print(f"{'launches / step':26}{launches:14.1f}")
    print(f"{'bind + first step s':26}{compile_s:14.2f}   (cold cache: includes compiling)")
    from benchmarks.flops import print_machine_distance, train_step_gflop
    gflop = train_step_gflop(lenet(), data=(args.batch, 1, 28, 28),
                             softmax_label=(args.batch,)) / args.batch
    gflops, peak = print_machine_distance(26, cols, sps, gflop, args.threads)
    print(f"RESULT lenet sym_sps={sym_sps:.2f} eager_sps={eager_sps:.2f} "
          f"ratio={sym_sps / eager_sps:.5f} sym_acc={sym_acc:.4f} eager_acc={eager_acc:.4f} "
          f"mxnet_sps={None if mx_sps is None else f'{mx_sps:.2f}'} "
          f"ratio_mxnet={None if mx_sps is None else f'{sym_sps / mx_sps:.5f}'} "
          f"mxnet_acc={None if mx_acc is None else f'{mx_acc:.4f}'} launches={launches:.1f} "
          f"threads={args.threads} gflops={gflops:.2f} peak_gflops={peak:.2f}")
    return {"sym_sps": sym_sps, "eager_sps": eager_sps, "sym_acc": sym_acc,
            "eager_acc": eager_acc, "mxnet_sps": mx_sps, "mxnet_acc": mx_acc}


if __name__ == "__main__":
    main()
