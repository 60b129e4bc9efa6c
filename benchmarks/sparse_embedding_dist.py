"""``sparse_embedding.py``'s model over ``dist_sync`` on 2 worker processes: the bytes
each worker sends per step, row_sparse table against dense.

    python benchmarks/sparse_embedding_dist.py [--rows 1000000 --workers 2]

Each configuration starts ``--workers`` processes of this script with torchrun's
environment (``tests/distributed/launch.py``), one thread each. A worker trains
``sparse_embedding.model`` by ``Module`` on a ``dist_sync`` KVStore (SGD; the sparse
table pulled by ``prepare(batch, sparse_row_id_fn)``) and counts the bytes it hands
to ``torch.distributed``'s collectives (an ``all_reduce`` / ``all_gather`` sends its
tensor, a ``broadcast`` its tensor from the source rank) over the timed steps. The
dense table is all-reduced whole every step; the row_sparse one moves the rows a
step pushed (``kvstore_sparse.dist_combine``: row counts, then the rows and ids
padded to the largest count).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
TAG = "SPARSE_DIST_JSON "
SENDS = {"all_reduce": 0, "all_gather": 1, "broadcast": 0, "all_gather_into_tensor": 1,
         "reduce_scatter_tensor": 1}


class ByteCounter:
    """Wraps ``torch.distributed``'s collectives: the bytes this rank contributes."""

    def __init__(self, rank):
        import torch.distributed as dist
        self.rank, self.bytes, self.calls = rank, 0, 0
        for name, slot in SENDS.items():
            if hasattr(dist, name):
                setattr(dist, name, self._wrap(name, slot, getattr(dist, name)))

    def _wrap(self, name, slot, fn):
        def counted(*a, **kw):
            t = a[slot] if len(a) > slot else kw.get("tensor", kw.get("input_tensor"))
            src = a[1] if name == "broadcast" and len(a) > 1 else kw.get("src", self.rank)
            if t is not None and (name != "broadcast" or src == self.rank):
                self.bytes += t.element_size() * t.numel()
            self.calls += 1
            return fn(*a, **kw)
        return counted


def worker(args):
    import torch
    torch.set_num_threads(1)
    import logging
    import module_api as mx
    from benchmarks import sparse_embedding as se
    logging.getLogger().setLevel(logging.ERROR)
    kv = mx.kv.create("dist_sync")
    counter = ByteCounter(kv.rank)
    sparse = args.storage == "sparse"
    mod = mx.mod.Module(se.model(mx, args.rows, args.dim, sparse), data_names=["data"],
                        label_names=["label"], context=mx.cpu())
    mod.bind(data_shapes=[("data", (args.batch, args.fields))],
             label_shapes=[("label", (args.batch, 1))])
    mod.init_params(initializer=mx.init.Uniform(0.05))
    mod.init_optimizer(kvstore=kv, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1,
                                         "rescale_grad": 1.0 / args.batch})
    data = se.batches(mx, args, args.rows, args.warmup + args.steps, seed=kv.rank)
    fn = se.row_ids if sparse else None
    for i, b in enumerate(data):
        if i == args.warmup:
            kv._barrier()
            counter.bytes, counter.calls, t0 = 0, 0, time.perf_counter()
        mod.prepare(b, sparse_row_id_fn=fn)
        mod.forward_backward(b)
        mod.update()
    seconds = time.perf_counter() - t0
    print(TAG + json.dumps({"rank": kv.rank, "step_ms": 1e3 * seconds / args.steps,
                            "bytes": counter.bytes / args.steps,
                            "calls": counter.calls / args.steps}), flush=True)
    sys.stdout.flush()
    os._exit(0)


def launch(args, storage, steps):
    """Run ``args.workers`` workers on one configuration; their results, rank order."""
    from tests.distributed.launch import finish, start_command
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--storage", storage,
           "--rows", str(args.rows), "--dim", str(args.dim), "--fields", str(args.fields),
           "--batch", str(args.batch), "--steps", str(steps), "--warmup", str(args.warmup)]
    cache = tempfile.mkdtemp(prefix="sparse-dist-cache-")
    outs = finish(start_command(cmd, args.workers, {"SYMTRITON_CACHE_DIR": cache}), 1800)
    got = [json.loads(line[len(TAG):]) for _, out in outs for line in out.splitlines()
           if line.startswith(TAG)]
    if len(got) != args.workers:
        raise SystemExit("workers failed:\n" + "\n".join(o[-3000:] for _, o in outs))
    return sorted(got, key=lambda r: r["rank"])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--fields", type=int, default=4)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=20, help="timed steps (sparse)")
    p.add_argument("--dense-steps", type=int, default=3, help="timed steps (dense)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--storage", default="sparse", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    res = {s: launch(args, s, n) for s, n in (("sparse", args.steps),
                                              ("dense", args.dense_steps))}
    print(f"dist_sync, {args.workers} workers x 1 thread: Embedding {args.rows} x {args.dim}, "
          f"batch {args.batch} x {args.fields} ids per worker, SGD")
    print(f"{'storage':>8} {'step ms':>10} {'bytes sent / worker / step':>28} "
          f"{'collectives / step':>20}")
    for s, r in res.items():
        print(f"{s:>8} {max(x['step_ms'] for x in r):10.1f} {r[0]['bytes']:28,.0f} "
              f"{r[0]['calls']:20.1f}")
    ratio = res["dense"][0]["bytes"] / max(res["sparse"][0]["bytes"], 1)
    print(f"dense / sparse bytes per step: {ratio:.1f}")
    print(f"RESULT sparse_embedding_dist sparse_bytes={res['sparse'][0]['bytes']:.0f} "
          f"dense_bytes={res['dense'][0]['bytes']:.0f} "
          f"sparse_ms={max(x['step_ms'] for x in res['sparse']):.2f} "
          f"dense_ms={max(x['step_ms'] for x in res['dense']):.2f}")
    return res


if __name__ == "__main__":
    main()
