"""Bytes each worker sends per training step of an embedding table over ``dist_sync``:
row_sparse (``contrib.SparseEmbedding``, rows pulled with ``sparse_row_id_fn``) beside
the dense table (``Embedding``, whole-table gradients).

    python benchmarks/sparse_dist_bytes.py [--rows 1000000] [--dim 64] [--batch 512]
                                           [--steps 10] [--dense-steps 3] [--workers 2]

The script is the driver and the worker. For each side it starts ``--workers``
processes of itself with torchrun's environment (``tests/distributed/launch.py``);
each trains ``Embedding(data) -> sum -> LinearRegressionOutput`` with SGD on the
kvstore on its own batches of ``--batch`` random row ids, and counts what it hands
to ``torch.distributed``'s collectives after one warm-up step: the payload bytes
(``all_reduce``: the tensor; ``all_gather``: this worker's input; ``broadcast``: the
tensor on its source rank) and the calls. The driver prints one table and a
``RESULT sparse_dist_bytes ...`` line. Payload bytes are what the store asks to move;
the wire carries more for a ring all-reduce (2 (W-1)/W of the tensor per worker).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.distributed.launch import finish, start_command  # noqa: E402

COLLECTIVES = ("all_reduce", "all_gather", "broadcast")


class ByteCounter:
    """Wraps ``torch.distributed``'s collectives: payload bytes and calls of this rank."""

    def __init__(self, rank):
        import torch.distributed as dist
        self.rank, self.bytes, self.calls = rank, 0, Counter()
        for name in COLLECTIVES:
            setattr(dist, name, self._wrap(name, getattr(dist, name)))

    def _wrap(self, name, fn):
        def counted(*a, **kw):
            self.calls[name] += 1
            self.bytes += self._payload(name, a, kw)
            return fn(*a, **kw)
        return counted

    def _payload(self, name, a, kw):
        if name == "all_gather":
            t = a[1] if len(a) > 1 else kw["tensor"]
        else:
            t = a[0] if a else kw["tensor"]
        if name == "broadcast":
            src = a[1] if len(a) > 1 else kw.get("src", 0)
            return t.numel() * t.element_size() if src == self.rank else 0
        return t.numel() * t.element_size()

    def reset(self):
        self.bytes, self.calls = 0, Counter()


def _symbol(mx, rows, dim, sparse):
    data = mx.sym.var("data")
    if sparse:
        weight = mx.sym.var("embed_weight", stype="row_sparse")
        emb = mx.sym.contrib.SparseEmbedding(data=data, weight=weight, input_dim=rows,
                                             output_dim=dim, name="embed")
    else:
        emb = mx.sym.Embedding(data=data, input_dim=rows, output_dim=dim, name="embed")
    return mx.sym.LinearRegressionOutput(mx.sym.sum(emb, axis=(1, 2)), mx.sym.var("label"))


def run_worker(args):
    import numpy as np
    import module_api as mx                      # noqa: PLC0415 - workers only
    sparse = args.worker == "sparse"
    kv = mx.kv.create("dist_sync")
    rng = np.random.RandomState(1 + kv.rank)
    steps = args.steps if sparse else args.dense_steps
    ids = rng.randint(0, args.rows, size=(steps + 1, args.batch, 1)).astype(np.float32)
    labels = rng.randn(steps + 1, args.batch).astype(np.float32)
    mod = mx.mod.Module(_symbol(mx, args.rows, args.dim, sparse), context=mx.cpu(),
                        label_names=["label"])
    mod.bind(data_shapes=[("data", (args.batch, 1))], label_shapes=[("label", (args.batch,))])
    mod.init_params(mx.init.Normal(0.01))
    mod.init_optimizer(kvstore=kv, optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    counter = ByteCounter(kv.rank)
    t0 = None
    for i in range(steps + 1):
        if i == 1:                      # after one warm-up step
            kv.barrier()
            counter.reset()
            t0 = time.perf_counter()
        batch = mx.io.DataBatch([mx.nd.array(ids[i])], [mx.nd.array(labels[i])])
        if sparse:
            rows = {"embed_weight": mx.nd.array(np.unique(ids[i]), dtype="int64")}
            mod.prepare(batch, sparse_row_id_fn=lambda _: rows)
        mod.forward_backward(batch)
        mod.update()
    sent, calls = counter.bytes, dict(counter.calls)
    kv.barrier()
    seconds = time.perf_counter() - t0
    print(json.dumps({"rank": kv.rank, "side": args.worker, "steps": steps,
                      "bytes_per_step": sent / steps, "calls_per_step":
                      {k: v / steps for k, v in calls.items()},
                      "ms_per_step": seconds / steps * 1e3}), flush=True)


def run_side(args, side):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side] + [
        f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
        if k not in ("worker",) and v is not None]
    results = finish(start_command(cmd, args.workers), timeout=1800)
    rows = []
    for rank, (rc, out) in enumerate(results):
        if rc != 0:
            raise SystemExit(f"{side} worker {rank} failed:\n{out[-3000:]}")
        rows.append(json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1]))
    return rows


def _mb(b):
    return f"{b / 2**20:.3f} MB"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dense-steps", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker", choices=("sparse", "dense"), default=None)
    args = p.parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    table = args.rows * args.dim * 4
    got = {side: run_side(args, side) for side in ("sparse", "dense")}
    print(f"embedding {args.rows} x {args.dim} float32 ({_mb(table)}), batch {args.batch} "
          f"row ids per worker, dist_sync on {args.workers} workers, SGD on the kvstore")
    print(f"{'side':8} {'bytes sent / step / worker':>28} {'of the table':>13} "
          f"{'ms / step':>10}  collectives / step")
    for side, rows in got.items():
        b = max(r["bytes_per_step"] for r in rows)
        ms = max(r["ms_per_step"] for r in rows)
        calls = ", ".join(f"{v:g} {k}" for k, v in sorted(rows[0]["calls_per_step"].items()))
        print(f"{side:8} {_mb(b):>28} {b / table:>13.5f} {ms:>10.1f}  {calls}")
    sb = max(r["bytes_per_step"] for r in got["sparse"])
    db = max(r["bytes_per_step"] for r in got["dense"])
    print(f"RESULT sparse_dist_bytes rows={args.rows} dim={args.dim} batch={args.batch} "
          f"workers={args.workers} sparse_bytes={sb:.0f} dense_bytes={db:.0f} "
          f"ratio={sb / db:.6f} sparse_ms={max(r['ms_per_step'] for r in got['sparse']):.1f} "
          f"dense_ms={max(r['ms_per_step'] for r in got['dense']):.1f}")


if __name__ == "__main__":
    main()
