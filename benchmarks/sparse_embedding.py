"""A large embedding table trained by ``Module``: row_sparse against dense storage, a
1,000,000-row table against a 10,000-row one, symtriton against mxnet 1.9.1.

    python benchmarks/sparse_embedding.py --mxnet-python .mxnet-venv/bin/python

The model is a bag of ``--fields`` ids per sample looked up in a ``rows x --dim``
table, summed, and a ``FullyConnected(1)`` + ``LinearRegressionOutput`` head; batch
``--batch``, plain SGD (``lr=0.1``). Four configurations per framework:

* ``sparse``: the table is ``Variable(stype='row_sparse')`` read by
  ``Embedding(sparse_grad=True)``; the Module updates on a ``local`` KVStore object
  (mxnet's sparse examples), so ``prepare(batch, sparse_row_id_fn)`` pulls the
  rows the batch reads and SGD's lazy update changes only those rows;
* ``dense``: default storage and ``sparse_grad=False`` (the whole table's gradient
  and update every step; a single device updates on the workers);
* ``updater``: the sparse table without a KVStore (``kvstore=None``): the Module's
  own Updater runs SGD's lazy update on the rows the gradient stores, as mxnet's
  example/sparse/matrix_factorization trains (not in the default ``--configs``);

each at ``--rows`` (1,000,000) and ``--small-rows`` (10,000) rows. A step is
``prepare`` + ``forward_backward`` + ``update``; the figure is the median step over
``--rounds`` rounds of ``--steps`` steps of every configuration in turn, after
``--warmup`` steps each; with ``--busy N``, N processes spin on the cores while both
sides run (other load on the machine). mxnet runs THIS script in its own venv
(``--peer``: ``import mxnet as mx`` in place of ``import module_api as mx``, JSON on
stdout), with the same ``--threads`` on both sides.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [("sparse", "rows"), ("sparse", "small_rows"), ("dense", "rows"),
           ("dense", "small_rows")]


def _thread_env(argv):
    n = 2
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            n = int(argv[i + 1])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    return n


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--small-rows", type=int, default=10_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--fields", type=int, default=4, help="ids per sample")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=20, help="timed steps per configuration "
                   "and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="threads for every side")
    p.add_argument("--configs", default="sparse:rows,sparse:small_rows,dense:rows,"
                   "dense:small_rows", help="storage:size pairs to run")
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet==1.9.1: adds the mxnet column")
    p.add_argument("--busy", type=int, default=0,
                   help="competing busy-loop processes while both sides run")
    p.add_argument("--peer", action="store_true",
                   help="run as the mxnet side (import mxnet; JSON on stdout)")
    return p


def model(mx, rows, dim, sparse):
    """Embedding bag -> FullyConnected(1) -> LinearRegressionOutput."""
    data = mx.sym.Variable("data")
    weight = mx.sym.Variable("embed_weight", stype="row_sparse" if sparse else "default")
    emb = mx.sym.Embedding(data, weight=weight, input_dim=rows, output_dim=dim,
                           sparse_grad=sparse, name="embed")
    pred = mx.sym.FullyConnected(mx.sym.sum(emb, axis=1), num_hidden=1, name="fc")
    return mx.sym.LinearRegressionOutput(pred, mx.sym.Variable("label"), name="out")


def batches(mx, args, rows, count, seed=0):
    """``count`` batches of uniform ids in ``[0, rows)`` (seeded: both sides read the
    same ids) and unit-range labels."""
    import numpy as np
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(count):
        ids = rng.randint(0, rows, size=(args.batch, args.fields)).astype("float32")
        label = rng.uniform(-1, 1, size=(args.batch, 1)).astype("float32")
        out.append(mx.io.DataBatch([mx.nd.array(ids)], [mx.nd.array(label)]))
    return out


def row_ids(batch):
    """sparse_row_id_fn: the ids of the batch, for the table."""
    return {"embed_weight": batch.data[0].reshape((-1,)).astype("int64")}


def trainer(mx, args, storage, rows):
    """A bound, initialized Module and its step: ``prepare`` + ``forward_backward`` +
    ``update`` of the next batch (cycling over a few), returning its seconds."""
    sparse = storage in ("sparse", "updater")
    mod = mx.mod.Module(model(mx, rows, args.dim, sparse), data_names=["data"],
                        label_names=["label"], context=mx.cpu())
    mod.bind(data_shapes=[("data", (args.batch, args.fields))],
             label_shapes=[("label", (args.batch, 1))])
    mod.init_params(initializer=mx.init.Uniform(0.05))
    kv = {"sparse": mx.kv.create("local"), "updater": None}.get(storage, "local")
    mod.init_optimizer(kvstore=kv, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1,
                                         "rescale_grad": 1.0 / args.batch})
    fn = row_ids if storage == "sparse" else None
    data = batches(mx, args, rows, 16)
    count = [0]

    def step():
        b = data[count[0] % len(data)]
        count[0] += 1
        t0 = time.perf_counter()
        mod.prepare(b, sparse_row_id_fn=fn)
        mod.forward_backward(b)
        mod.update()
        mx.nd.waitall()
        return time.perf_counter() - t0
    return step


def run_all(mx, args):
    """Seconds of every timed step per configuration: ``--rounds`` rounds, each running
    ``--steps`` steps of every configuration in turn (so a neighbour's load falls on
    all of them alike), after ``--warmup`` steps each."""
    steps = {}
    for pair in args.configs.split(","):
        storage, size = pair.split(":")
        rows = getattr(args, size)
        steps[f"{storage}:{rows}"] = trainer(mx, args, storage, rows)
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    out = {k: [] for k in steps}
    for _ in range(args.rounds):
        for k, step in steps.items():
            out[k] += [step() for _ in range(args.steps)]
    return out


def _peer(args):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYMTRITON_", "TRITON_"))}
    env.pop("PYTHONPATH", None)
    import subprocess
    cmd = [args.mxnet_python, os.path.abspath(__file__), "--peer"] + \
        [a for a in sys.argv[1:] if a != "--peer"]
    if "--mxnet-python" in cmd:
        i = cmd.index("--mxnet-python")
        del cmd[i:i + 2]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        print(f"mxnet peer failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(args, ours, theirs):
    """The table of median step milliseconds and the ratios."""
    med = {k: statistics.median(v) * 1e3 for k, v in ours.items()}
    mxm = {k: statistics.median(v) * 1e3 for k, v in (theirs or {}).items()}
    print(f"Embedding {args.dim}-wide, batch {args.batch} x {args.fields} ids, SGD, "
          f"{args.threads} thread(s) on every side; median ms per step over "
          f"{args.rounds} x {args.steps} steps" +
          (f"; {args.busy} busy loop(s) beside both sides" if args.busy else "; idle"))
    head = f"{'config':>16} {'symtriton ms':>13}" + (
        f" {'mxnet 1.9.1 ms':>15} {'ratio mx/sym':>13}" if theirs else "")
    print(head)
    for k, v in med.items():
        line = f"{k:>16} {v:13.2f}"
        if k in mxm:
            line += f" {mxm[k]:15.2f} {mxm[k] / v:13.2f}"
        print(line)
    big, small = f"sparse:{args.rows}", f"sparse:{args.small_rows}"
    dense = f"dense:{args.rows}"
    for name, table in (("symtriton", med), ("mxnet", mxm)):
        if big in table and small in table:
            print(f"{name}: sparse {args.rows} / {args.small_rows} rows step ratio "
                  f"{table[big] / table[small]:.2f} (target <= 2)")
        if big in table and dense in table:
            print(f"{name}: dense / sparse step ratio at {args.rows} rows "
                  f"{table[dense] / table[big]:.2f}")
    fields = [f"{side}_{k.replace(':', '_')}_ms={v:.3f}"
              for side, table in (("sym", med), ("mxnet", mxm)) for k, v in table.items()]
    print("RESULT sparse_embedding " + " ".join(fields) + f" threads={args.threads}")
    return med, mxm


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.peer:
        import mxnet as mx
        print(json.dumps(run_all(mx, args)))
        return
    sys.path.insert(0, ROOT)
    import logging
    import torch
    import module_api as mx
    torch.set_num_threads(args.threads)
    logging.getLogger().setLevel(logging.ERROR)
    from benchmarks.data import busy_loops
    with busy_loops(args.busy, seconds=7200):
        ours = run_all(mx, args)
        theirs = _peer(args) if args.mxnet_python else None
    return report(args, ours, theirs)


if __name__ == "__main__":
    _thread_env(sys.argv)
    main()
