"""Train LeNet or an MLP on MNIST: mxnet's image-classification train_mnist example
(with its common ``fit`` module) through symtriton (``import module_api as mx``).

Data: the official MNIST test set in ``examples/data/mnist`` (see PROVENANCE.md),
split 8,000 for training and 2,000 for validation (``examples/mnist_data.py``),
read with ``mx.io.MNISTIter``. Training as ``fit.py`` does it: ``Module.fit`` with
SGD (momentum, weight decay, the learning rate divided by ``--lr-factor`` at
``--lr-step-epochs``), Xavier initialisation (gaussian, ``in``, magnitude 2),
accuracy on the validation set after every epoch, a Speedometer every
``--disp-batches`` batches and an optional checkpoint per epoch.

Run from the repository root::

    python examples/train_mnist.py --network lenet --num-epochs 3
    python examples/train_mnist.py --network mlp --lr 0.1 --gpus 0,1

The last line printed is ``final validation accuracy <value>``.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:          # running from a checkout without `pip install -e .`
    sys.path.insert(0, ROOT)

import module_api as mx                          # noqa: E402
from examples.mnist_data import DEFAULT_DIR, split_files   # noqa: E402
from examples.mnist_symbols import NETWORKS      # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="train mnist",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--network", choices=sorted(NETWORKS), default="mlp",
                   help="the network (mxnet's symbols/lenet.py or symbols/mlp.py)")
    p.add_argument("--num-classes", type=int, default=10, help="the number of classes")
    p.add_argument("--data-dir", default=DEFAULT_DIR,
                   help="holds t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz")
    p.add_argument("--num-examples", type=int, default=8000,
                   help="training examples (the split's training part)")
    p.add_argument("--gpus", default=None,
                   help="GPUs to run on, e.g. 0 or 0,2 (default: the CPU)")
    p.add_argument("--kv-store", default="device", help="key-value store type")
    p.add_argument("--num-epochs", type=int, default=20, help="max num of epochs")
    p.add_argument("--lr", type=float, default=0.05, help="initial learning rate")
    p.add_argument("--lr-factor", type=float, default=0.1,
                   help="the ratio to reduce lr on each step")
    p.add_argument("--lr-step-epochs", default="10",
                   help="the epochs to reduce the lr, e.g. 30,60")
    p.add_argument("--mom", type=float, default=0.9, help="momentum for sgd")
    p.add_argument("--wd", type=float, default=0.0001, help="weight decay for sgd")
    p.add_argument("--batch-size", type=int, default=64, help="the batch size")
    p.add_argument("--disp-batches", type=int, default=100,
                   help="show progress for every n batches")
    p.add_argument("--model-prefix", default=None, help="model prefix (checkpoints)")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffle and the weights")
    p.add_argument("--max-batches", type=int, default=None,
                   help="stop each epoch after this many batches (smoke tests)")
    return p.parse_args(argv)


def data_iters(args, kv):
    """Training and validation MNISTIters over the split (the training part sharded
    over the kvstore's workers, as fit.py shards)."""
    files = split_files(args.data_dir)
    flat = args.network == "mlp"
    train = mx.io.MNISTIter(image=files["train_images"], label=files["train_labels"],
                            batch_size=args.batch_size, shuffle=True, flat=flat,
                            seed=args.seed, silent=True, num_parts=kv.num_workers,
                            part_index=kv.rank)
    val = mx.io.MNISTIter(image=files["val_images"], label=files["val_labels"],
                          batch_size=args.batch_size, shuffle=False, flat=flat, silent=True)
    if args.max_batches:
        train = mx.io.ResizeIter(train, args.max_batches)
    return train, val


def lr_scheduler(args, kv):
    """fit.py's schedule: ``lr * lr_factor ** k`` from each of ``--lr-step-epochs``."""
    epoch_size = max(args.num_examples // args.batch_size // kv.num_workers, 1)
    steps = [epoch_size * int(e) for e in args.lr_step_epochs.split(",") if e.strip()]
    steps = [s for s in steps if s > 0]
    if not steps or args.lr_factor >= 1:
        return None
    return mx.lr_scheduler.MultiFactorScheduler(step=steps, factor=args.lr_factor,
                                                base_lr=args.lr)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    mx.random.seed(args.seed)
    kv = mx.kvstore.create(args.kv_store)
    devs = [mx.gpu(int(i)) for i in args.gpus.split(",")] if args.gpus else [mx.cpu()]
    train, val = data_iters(args, kv)
    net = NETWORKS[args.network](num_classes=args.num_classes)
    mod = mx.mod.Module(net, context=devs)
    optimizer_params = {"learning_rate": args.lr, "wd": args.wd, "momentum": args.mom}
    sched = lr_scheduler(args, kv)
    if sched is not None:
        optimizer_params["lr_scheduler"] = sched
    checkpoint = mx.callback.do_checkpoint(args.model_prefix) if args.model_prefix else None
    started = time.perf_counter()
    mod.fit(train, eval_data=val, eval_metric="acc", kvstore=kv, optimizer="sgd",
            optimizer_params=optimizer_params,
            initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2),
            batch_end_callback=mx.callback.Speedometer(args.batch_size, args.disp_batches),
            epoch_end_callback=checkpoint, num_epoch=args.num_epochs, allow_missing=True)
    seconds = time.perf_counter() - started
    acc = dict(mod.score(val, mx.metric.Accuracy()))["accuracy"]
    trained = args.num_epochs * (args.max_batches * args.batch_size if args.max_batches
                                 else args.num_examples)
    print(f"trained {args.network} for {args.num_epochs} epoch(s) in {seconds:.1f} s "
          f"({trained / seconds:.0f} samples/s, validation included)")
    print(f"final validation accuracy {acc:.4f}")
    return acc


if __name__ == "__main__":
    main()
