"""Model-parallel matrix factorization, as mxnet 1.x's
model-parallel matrix_factorization example sets it up, written for this
project: one program that runs on symtriton or on mxnet 1.9.1 with only the
import changed.

    python examples/matrix_factorization.py                       # module_api
    .mxnet-venv/bin/python examples/matrix_factorization.py --framework mxnet

The model: user and item embeddings (placed on the ``dev1`` context group), a
ReLU and a FullyConnected layer on each (``dev2``), the dot product of the two
as ``sum(user * item, axis=1)``, ``Flatten``, and ``LinearRegressionOutput``
against the rating. Its head is an identity-like operator over a view, the
graph that once returned all-zero predictions here (mxnet's example trained to a
validation MSE of 5.67 here against 0.58 in mxnet). ``group2ctxs`` maps the two
groups to ``cpu(0)`` and ``cpu(1)``; SGD with momentum 0.9, lr 0.1, wd 1e-4 and
``rescale_grad = 1/batch``, Xavier(in, 2.34) initialisation, as the example.

The data: mxnet's example downloads MovieLens 10M, which this machine cannot
reach, so ratings are generated in its file format (``user::item::rating::time``)
from a low-rank model with noise, rounded to MovieLens's half-star scale and
clipped to [0.5, 5]: a problem of the same shape whose best reachable MSE is the
noise's. ``--train`` / ``--val`` read real MovieLens files instead.
Prints the validation MSE after each epoch, and ``RESULT mse=<last epoch>``;
``--json`` also writes them (``examples/data/mxnet_matrix_factorization_mse.json``
is mxnet 1.9.1's run, which ``tests/examples/test_matrix_factorization_example.py``
compares with this project's).
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_ratings(path, users, items, n, seed, rank=8, noise=0.5):
    """``n`` ratings of a rank-``rank`` model of ``users`` x ``items`` in MovieLens's
    ``::`` format; the same seed gives the same users' and items' factors."""
    rng = np.random.RandomState(1234)
    u = rng.randn(users, rank) / np.sqrt(rank)
    v = rng.randn(items, rank) / np.sqrt(rank)
    pick = np.random.RandomState(seed)
    ui, ii = pick.randint(1, users, n), pick.randint(1, items, n)
    r = 3.5 + 1.2 * np.einsum("nk,nk->n", u[ui], v[ii]) + noise * pick.randn(n)
    r = np.clip(np.round(r * 2) / 2, 0.5, 5.0)
    with open(path, "w") as f:
        for a, b, c in zip(ui, ii, r):
            f.write(f"{a}::{b}::{c}::0\n")


def read_iter(mx, path, batch_size, shuffle):
    """The example's reader: user, item and score columns into an NDArrayIter."""
    cols = _parse(path)
    data = {"user": mx.nd.array(cols[:, 0]), "item": mx.nd.array(cols[:, 1])}
    label = {"score": mx.nd.array(cols[:, 2])}
    return mx.io.NDArrayIter(data=data, label=label, batch_size=batch_size, shuffle=shuffle)


def _parse(path):
    with open(path) as f:
        rows = [line.strip().split("::")[:3] for line in f if line.count("::") == 3]
    return np.asarray(rows, dtype=np.float64)


def build_net(mx, factor_size, num_hidden, max_user, max_item):
    """The example's two-group network (embeddings on dev1, the rest on dev2)."""
    with mx.AttrScope(ctx_group="dev1"):
        user = mx.sym.Embedding(data=mx.sym.Variable("user"), input_dim=max_user,
                                output_dim=factor_size, weight=mx.sym.Variable("user_weight"))
        item = mx.sym.Embedding(data=mx.sym.Variable("item"), input_dim=max_item,
                                output_dim=factor_size, weight=mx.sym.Variable("item_weight"))
    with mx.AttrScope(ctx_group="dev2"):
        user = mx.sym.FullyConnected(data=mx.sym.Activation(user, act_type="relu"),
                                     num_hidden=num_hidden, name="fc_user")
        item = mx.sym.FullyConnected(data=mx.sym.Activation(item, act_type="relu"),
                                     num_hidden=num_hidden, name="fc_item")
        pred = mx.sym.Flatten(data=mx.sym.sum(data=user * item, axis=1))
        return mx.sym.LinearRegressionOutput(data=pred, label=mx.sym.Variable("score"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", default="module_api", choices=("module_api", "mxnet"))
    p.add_argument("--num-epoch", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--factor-size", type=int, default=32)
    p.add_argument("--users", type=int, default=2000, help="generated users")
    p.add_argument("--items", type=int, default=1500, help="generated items")
    p.add_argument("--ratings", type=int, default=60000, help="generated training ratings")
    p.add_argument("--train", default=None, help="a MovieLens ratings file (r1.train)")
    p.add_argument("--val", default=None, help="a MovieLens ratings file (r1.test)")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "out", "matrix_factorization"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None,
                   help="write the per-epoch validation MSE and the settings to this file")
    args = p.parse_args(argv)
    if args.framework == "module_api" and ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    mx = importlib.import_module(args.framework)
    logging.basicConfig(level=logging.INFO, format="%(asctime)-15s %(message)s")

    train, val = args.train, args.val
    if train is None:
        os.makedirs(args.data_dir, exist_ok=True)
        train, val = (os.path.join(args.data_dir, f) for f in ("r1.train", "r1.test"))
        write_ratings(train, args.users, args.items, args.ratings, seed=1)
        write_ratings(val, args.users, args.items, args.ratings // 10, seed=2)
    max_user = int(max(_parse(train)[:, 0].max(), _parse(val)[:, 0].max())) + 1
    max_item = int(max(_parse(train)[:, 1].max(), _parse(val)[:, 1].max())) + 1

    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    net = build_net(mx, args.factor_size, args.factor_size, max_user, max_item)
    mod = mx.mod.Module(symbol=net, context=[mx.cpu(0)], data_names=["user", "item"],
                        label_names=["score"],
                        group2ctxs={"dev1": [mx.cpu(0)], "dev2": [mx.cpu(1)]})
    metric = mx.metric.create(["MSE"])
    history = []

    def epoch_end(epoch, symbol, arg_params, aux_params):
        score = mod.score(read_iter(mx, val, args.batch_size, False), mx.metric.create("mse"))
        history.append(score[0][1])
        print(f"epoch {epoch + 1}: validation mse {history[-1]:.4f}", flush=True)

    mod.fit(read_iter(mx, train, args.batch_size, True), eval_metric=metric,
            num_epoch=args.num_epoch, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "wd": 1e-4, "momentum": 0.9,
                              "rescale_grad": 1.0 / args.batch_size},
            initializer=mx.init.Xavier(factor_type="in", magnitude=2.34),
            epoch_end_callback=epoch_end)
    print(f"RESULT mse={history[-1]:.6f}")
    if args.json:
        record = {"framework": args.framework, "version": mx.__version__,
                  "settings": {k: v for k, v in vars(args).items()
                               if k not in ("framework", "json", "data_dir")},
                  "validation_mse": history}
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return history


if __name__ == "__main__":
    main()
