"""Cold start: what a first run costs, beside mxnet 1.9.1.

A new user's first run compiles everything: nothing is in the kernel cache yet.
Three figures, each measured in a fresh process (imports done, symbol built,
then the clock starts), every side with the same number of threads:

* **a chain of N ReLUs** (default 20,000): ``simple_bind`` (``grad_req='write'``,
  so the backward is compiled too) and the first ``forward`` until its output is
  read, against mxnet 1.9.1 doing the same;
* **Inception-BN** (the inception-bn network of mxnet's image-classification example,
  rebuilt here by :func:`inception_bn`, 1,000 classes, batch 2, 3x224x224):
  ``Module.bind``, ``init_params`` and the first ``forward`` + ``backward``,
  with an empty cache (cold) and again in a new process over the cache the cold
  run filled (warm), against mxnet's bind and first step on the same symbol
  (its JSON, written here, loaded there);
* **lstm_bucketing's six buckets** (``benchmarks/lstm_bucketing.py``'s model: a
  2 x 200 LSTM, vocabulary of the Sherlock Holmes corpus, batch 32, buckets
  10..60): ``BucketingModule.bind`` of the default bucket 60, ``init_params``,
  then ``switch_bucket`` to each other bucket, cold; mxnet binds the same.

``--busy N`` keeps N spinning processes (``while True: pass``) on the machine for
every measurement of every side: a first run as a user on a shared machine meets it.

``--before-root PATH`` runs the same measurements on another checkout (the code
before a change) in the same session, for a before column; a run past
``--before-timeout`` seconds is reported as such. ``--mxnet-python PATH`` adds
mxnet 1.9.1 (``benchmarks/mxnet_peer.py``); without it the column is skipped.

    python benchmarks/cold_start.py --mxnet-python .mxnet-venv/bin/python
    python benchmarks/cold_start.py --before-root /tmp/base --mxnet-python ...

Each worker prints one JSON line; the script prints a table and ``RESULT`` lines.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))

EPS = 1e-10 + 1e-5          # inception-bn.py's BatchNorm epsilon and momentum
BN_MOMENTUM = 0.9


def build_parser():
    sherlock = os.path.join(ROOT, "examples", "data", "sherlockholmes",
                            "sherlockholmes.train.txt")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mxnet-python", default=None,
                   help="mxnet 1.9.1's interpreter (benchmarks/mxnet_peer.py); skipped if absent")
    p.add_argument("--before-root", default=None,
                   help="another checkout to measure the same way (the before column)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--only", default="chain,inception,lstm",
                   help="comma-separated subset of chain, inception, lstm")
    p.add_argument("--chain", type=int, default=20000, help="ReLUs in the chain")
    p.add_argument("--chain-shape", default="8,16")
    p.add_argument("--batch", type=int, default=2, help="Inception-BN batch")
    p.add_argument("--image-size", type=int, default=224,
                   help="Inception-BN input side (28 or less: the CIFAR variant)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lstm-buckets", default="10,20,30,40,50,60")
    p.add_argument("--lstm-batch", type=int, default=32)
    p.add_argument("--lstm-hidden", type=int, default=200)
    p.add_argument("--lstm-embed", type=int, default=200)
    p.add_argument("--lstm-layers", type=int, default=2)
    p.add_argument("--lstm-data", default=sherlock, help="corpus whose vocabulary sizes the model")
    p.add_argument("--lstm-vocab", type=int, default=None,
                   help="vocabulary size instead of reading --lstm-data (tiny runs)")
    p.add_argument("--rounds", type=int, default=3,
                   help="measurements of each figure (each cold, in its own process); "
                        "the median is reported, with the range")
    p.add_argument("--busy", type=int, default=0,
                   help="spinning processes kept on the machine during every measurement")
    p.add_argument("--timeout", type=float, default=900, help="seconds per measurement")
    p.add_argument("--before-timeout", type=float, default=120,
                   help="seconds per measurement of --before-root")
    # internal: one measurement in this process
    p.add_argument("--worker", choices=("chain", "inception", "lstm"), help=argparse.SUPPRESS)
    p.add_argument("--code-root", default=ROOT, help=argparse.SUPPRESS)
    p.add_argument("--symbol-out", default=None, help=argparse.SUPPRESS)
    return p


# ------------------------------------------------------------------------------- models

def inception_bn(mx, num_classes, image_shape):
    """Inception with batch normalization (Ioffe and Szegedy, 2015), the network of
    mxnet 1.9.1's image-classification example's ``inception-bn`` symbol: its
    layers, names and attributes, written as a table of blocks. Images of side 28 or
    less get that symbol's smaller CIFAR-size variant."""
    def conv(x, name, filters, kernel, stride=(1, 1), pad=(0, 0), suffix=""):
        x = mx.sym.Convolution(data=x, num_filter=filters, kernel=kernel, stride=stride,
                               pad=pad, name=f"conv_{name}{suffix}")
        x = mx.sym.BatchNorm(data=x, fix_gamma=False, eps=EPS, momentum=BN_MOMENTUM,
                             name=f"bn_{name}{suffix}")
        return mx.sym.Activation(data=x, act_type="relu", name=f"relu_{name}{suffix}")

    def block_a(x, name, n1, n3r, n3, nd3r, nd3, pool, proj):
        one = conv(x, f"{name}_1x1", n1, (1, 1))
        three = conv(conv(x, f"{name}_3x3", n3r, (1, 1), suffix="_reduce"),
                     f"{name}_3x3", n3, (3, 3), pad=(1, 1))
        double = conv(x, f"{name}_double_3x3", nd3r, (1, 1), suffix="_reduce")
        double = conv(double, f"{name}_double_3x3_0", nd3, (3, 3), pad=(1, 1))
        double = conv(double, f"{name}_double_3x3_1", nd3, (3, 3), pad=(1, 1))
        pooled = mx.sym.Pooling(data=x, kernel=(3, 3), stride=(1, 1), pad=(1, 1),
                                pool_type=pool, name=f"{pool}_pool_{name}_pool")
        projected = conv(pooled, f"{name}_proj", proj, (1, 1))
        return mx.sym.Concat(one, three, double, projected, name=f"ch_concat_{name}_chconcat")

    def block_b(x, name, n3r, n3, nd3r, nd3):
        three = conv(conv(x, f"{name}_3x3", n3r, (1, 1), suffix="_reduce"),
                     f"{name}_3x3", n3, (3, 3), stride=(2, 2), pad=(1, 1))
        double = conv(x, f"{name}_double_3x3", nd3r, (1, 1), suffix="_reduce")
        double = conv(double, f"{name}_double_3x3_0", nd3, (3, 3), pad=(1, 1))
        double = conv(double, f"{name}_double_3x3_1", nd3, (3, 3), stride=(2, 2), pad=(1, 1))
        pooled = mx.sym.Pooling(data=x, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                pool_type="max", name=f"max_pool_{name}_pool")
        return mx.sym.Concat(three, double, pooled, name=f"ch_concat_{name}_chconcat")

    def simple(x, name, n1, n3):
        return mx.sym.Concat(conv(x, f"{name}_1x1", n1, (1, 1)),
                             conv(x, f"{name}_3x3", n3, (3, 3), pad=(1, 1)),
                             name=f"{name}_ch_concat")

    def downsample(x, name, n3):
        return mx.sym.Concat(conv(x, f"{name}_conv", n3, (3, 3), stride=(2, 2), pad=(1, 1)),
                             mx.sym.Pooling(data=x, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                            pool_type="max", name=f"{name}_pool"),
                             name=f"{name}_ch_concat")

    x = mx.sym.Variable("data")
    pool_stride = {}          # the large variant states the global pool's (default) stride
    if image_shape[1] <= 28:
        x = conv(x, "1", 96, (3, 3), pad=(1, 1))
        for name, kind, *sizes in (("in3a", simple, 32, 32), ("in3b", simple, 32, 48),
                                   ("in3c", downsample, 80), ("in4a", simple, 112, 48),
                                   ("in4b", simple, 96, 64), ("in4c", simple, 80, 80),
                                   ("in4d", simple, 48, 96), ("in4e", downsample, 96),
                                   ("in5a", simple, 176, 160), ("in5b", simple, 176, 160)):
            x = kind(x, name, *sizes)
    else:
        pool_stride = {"stride": (1, 1)}
        x = conv(x, "1", 64, (7, 7), stride=(2, 2), pad=(3, 3))
        x = mx.sym.Pooling(data=x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool_1")
        x = conv(conv(x, "2_red", 64, (1, 1)), "2", 192, (3, 3), pad=(1, 1))
        x = mx.sym.Pooling(data=x, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool_2")
        for name, *sizes in (("3a", 64, 64, 64, 64, 96, "avg", 32),
                             ("3b", 64, 64, 96, 64, 96, "avg", 64),
                             ("3c", 128, 160, 64, 96),
                             ("4a", 224, 64, 96, 96, 128, "avg", 128),
                             ("4b", 192, 96, 128, 96, 128, "avg", 128),
                             ("4c", 160, 128, 160, 128, 160, "avg", 128),
                             ("4d", 96, 128, 192, 160, 192, "avg", 128),
                             ("4e", 128, 192, 192, 256),
                             ("5a", 352, 192, 320, 160, 224, "avg", 128),
                             ("5b", 352, 192, 320, 192, 224, "max", 128)):
            x = (block_a if len(sizes) == 7 else block_b)(x, name, *sizes)
    x = mx.sym.Pooling(data=x, kernel=(7, 7), pool_type="avg", name="global_pool",
                       **pool_stride)
    x = mx.sym.FullyConnected(data=mx.sym.Flatten(data=x), num_hidden=num_classes)
    return mx.sym.SoftmaxOutput(data=x, name="softmax")


def relu_chain(mx, n):
    x = mx.sym.Variable("data")
    for _ in range(n):
        x = mx.sym.Activation(data=x, act_type="relu")
    return x


def _lstm_bucketing_module():
    """``benchmarks/lstm_bucketing.py`` of this checkout, whatever code root is on the
    path (its model is the one measured)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_lstm_bucketing",
                                                  os.path.join(HERE, "lstm_bucketing.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vocabulary_size(mx, path):
    with open(path) as f:
        words = [list(filter(None, line.split(" "))) for line in f]
    _, vocab = mx.rnn.encode_sentences(words, invalid_label=0, start_label=1)
    return len(vocab)


# ------------------------------------------------------------------------------ workers

def _stats():
    import compiler            # the public counters: the same name in every layout
    st = compiler.cache_stats()
    return {"compiles": st["compiles"], "compile_seconds": st["compile_seconds"],
            "kernels_compiled": st["kernels_compiled"], "disk_hits": st["disk_hits"]}


def worker_chain(args):
    import module_api as mx
    shape = tuple(int(x) for x in args.chain_shape.split(","))
    sym = relu_chain(mx, args.chain)
    c0, t0 = time.process_time(), time.perf_counter()
    exe = sym.simple_bind(mx.cpu(), data=shape)
    t1 = time.perf_counter()
    exe.forward(is_train=False)
    exe.outputs[0].asnumpy()
    t2, c2 = time.perf_counter(), time.process_time()
    out = {"seconds": t2 - t0, "bind_seconds": t1 - t0, "forward_seconds": t2 - t1,
           "cpu_seconds": c2 - c0, **_stats()}
    prog = getattr(exe, "_train_prog", None) or getattr(exe, "_infer_prog", None)
    if prog is not None and "fuse_work" in prog.stats:
        out["fuse_work"] = prog.stats["fuse_work"]
    return out


def worker_inception(args):
    import numpy as np
    import module_api as mx
    shape = (args.batch, 3, args.image_size, args.image_size)
    sym = inception_bn(mx, args.classes, shape[1:])
    if args.symbol_out:
        sym.save(args.symbol_out)
    rng = np.random.RandomState(0)
    batch = mx.io.DataBatch([mx.nd.array(rng.uniform(-1, 1, shape))],
                            [mx.nd.array(rng.randint(0, args.classes, args.batch))])
    c0, t0 = time.process_time(), time.perf_counter()
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.bind(data_shapes=[("data", shape)], label_shapes=[("softmax_label", (args.batch,))])
    t1 = time.perf_counter()
    mod.init_params(mx.init.Xavier())
    t2 = time.perf_counter()
    mod.forward(batch, is_train=True)
    mod.backward()
    mod.get_outputs()[0].asnumpy()
    t3, c3 = time.perf_counter(), time.process_time()
    return {"seconds": t3 - t0, "bind_seconds": t1 - t0, "init_seconds": t2 - t1,
            "step_seconds": t3 - t2, "cpu_seconds": c3 - c0, **_stats()}


def worker_lstm(args):
    import module_api as mx
    lstm = _lstm_bucketing_module()
    vocab = args.lstm_vocab or vocabulary_size(mx, args.lstm_data)
    buckets = sorted(int(b) for b in args.lstm_buckets.split(","))
    sym_gen = lstm.make_sym_gen(args.lstm_layers, args.lstm_hidden, args.lstm_embed, vocab)
    B, default = args.lstm_batch, buckets[-1]
    per = {}
    c0, t0 = time.process_time(), time.perf_counter()
    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=default,
                                 context=mx.cpu(0))
    mod.bind(data_shapes=[("data", (B, default))],
             label_shapes=[("softmax_label", (B, default))])
    mod.init_params()
    per[default] = time.perf_counter() - t0
    for key in reversed(buckets[:-1]):
        t = time.perf_counter()
        mod.switch_bucket(key, [("data", (B, key))], [("softmax_label", (B, key))])
        per[key] = time.perf_counter() - t
    t1, c1 = time.perf_counter(), time.process_time()
    return {"seconds": t1 - t0, "cpu_seconds": c1 - c0, "vocab": vocab,
            "per_bucket": {str(k): v for k, v in per.items()}, **_stats()}


WORKERS = {"chain": worker_chain, "inception": worker_inception, "lstm": worker_lstm}


def run_worker(args):
    sys.path.insert(0, os.path.abspath(args.code_root))
    import torch
    torch.set_num_threads(args.threads)
    import logging
    logging.getLogger().setLevel(logging.ERROR)
    print(json.dumps(WORKERS[args.worker](args)))


# --------------------------------------------------------------------------------- main

def _env(threads, cache_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYMTRITON_", "TRITON_"))}
    env.pop("PYTHONPATH", None)
    env.update(SYMTRITON_CACHE_DIR=cache_dir, OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def measure(args, what, code_root, cache_dir, timeout, extra=()):
    """One worker in a fresh process; its JSON, or ``{"timeout": s}`` / ``{"error": text}``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", what,
           "--code-root", code_root] + _forwarded(args) + list(extra)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=_env(args.threads, cache_dir), cwd=code_root)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _forwarded(args):
    out = ["--threads", str(args.threads)]
    for name in ("chain", "chain_shape", "batch", "image_size", "classes", "lstm_buckets",
                 "lstm_batch", "lstm_hidden", "lstm_embed", "lstm_layers", "lstm_data",
                 "lstm_vocab"):
        value = getattr(args, name)
        if value is not None:
            out += ["--" + name.replace("_", "-"), str(value)]
    return out


def median_of(results):
    """The run with the median ``seconds`` (``range`` added: the lowest and highest);
    a timeout or failure of the first run stands for all (they are not repeated)."""
    done = [r for r in results if r and "seconds" in r]
    if not done:
        return results[0] if results else None
    done.sort(key=lambda r: r["seconds"])
    out = dict(done[(len(done) - 1) // 2])
    out["range"] = (done[0]["seconds"], done[-1]["seconds"])
    out["rounds"] = len(done)
    return out


def measure_round(args, code_root, timeout, tmp, r, going, symbol_path=None):
    """Round ``r`` of every figure for one checkout, each cold (an empty cache) in its
    own process; a figure that timed out or failed in an earlier round is skipped."""
    only = set(args.only.split(","))
    out = {}
    if "chain" in only and going.get("chain", True):
        out["chain"] = measure(args, "chain", code_root, os.path.join(tmp, f"chain{r}"), timeout)
    if "inception" in only and going.get("inception_cold", True):
        cache_dir = os.path.join(tmp, f"inception{r}")
        extra = ["--symbol-out", symbol_path] if symbol_path and r == 0 else []
        out["inception_cold"] = measure(args, "inception", code_root, cache_dir, timeout, extra)
        out["inception_warm"] = measure(args, "inception", code_root, cache_dir, timeout)
    if "lstm" in only and going.get("lstm", True):
        out["lstm"] = measure(args, "lstm", code_root, os.path.join(tmp, f"lstm{r}"), timeout)
    for name, res in out.items():
        going[name] = bool(res) and "seconds" in res
    return out


def mxnet_round(args, symbol_path, going):
    from benchmarks.data import run_mxnet_peer
    only = set(args.only.split(","))
    out = {}
    common = ["--threads", args.threads]
    if "chain" in only and going.get("chain", True):
        out["chain"] = run_mxnet_peer(args.mxnet_python, common + [
            "chain", "--n", args.chain, "--shape", args.chain_shape], timeout=args.timeout)
    if "inception" in only and symbol_path and os.path.exists(symbol_path) and \
            going.get("inception", True):
        out["inception"] = run_mxnet_peer(args.mxnet_python, common + [
            "bindstep", "--symbol", symbol_path,
            "--data-shape", f"{args.batch},3,{args.image_size},{args.image_size}",
            "--classes", args.classes], timeout=args.timeout)
    if "lstm" in only and going.get("lstm", True):
        extra = ["--vocab", args.lstm_vocab] if args.lstm_vocab else ["--train", args.lstm_data]
        out["lstm"] = run_mxnet_peer(args.mxnet_python, common + [
            "buckets", "--buckets", args.lstm_buckets, "--batch-size", args.lstm_batch,
            "--num-hidden", args.lstm_hidden, "--num-embed", args.lstm_embed,
            "--num-layers", args.lstm_layers] + extra, timeout=args.timeout)
    for name, res in out.items():
        going[name] = res is not None
    return out


def measure_all(args, symbol_path):
    """``--rounds`` rounds, each measuring every side in turn (this checkout, the
    ``--before-root`` one, mxnet), so a slow spell of the machine falls on all of
    them; the median run of each figure, with the range."""
    sides = {"after": (ROOT, args.timeout)}
    if args.before_root:
        sides["before"] = (os.path.abspath(args.before_root), args.before_timeout)
    runs = {name: {} for name in list(sides) + (["mxnet"] if args.mxnet_python else [])}
    going = {name: {} for name in runs}
    tmp = tempfile.mkdtemp(prefix="symtriton-cold-start-")
    try:
        for r in range(max(1, args.rounds)):
            for name, (root, timeout) in sides.items():
                found = measure_round(args, root, timeout, os.path.join(tmp, f"{name}{r}"), r,
                                      going[name], symbol_path if name == "after" else None)
                for what, res in found.items():
                    runs[name].setdefault(what, []).append(res)
            if args.mxnet_python:
                for what, res in mxnet_round(args, symbol_path, going["mxnet"]).items():
                    runs["mxnet"].setdefault(what, []).append(res)
            print(f"round {r + 1}: " + "; ".join(
                f"{name} " + ", ".join(f"{what} {_fmt(res[-1])}" for what, res in figs.items())
                for name, figs in runs.items()), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {name: {what: median_of(res) for what, res in figs.items()}
            for name, figs in runs.items()}


def _fmt(result, key="seconds"):
    if result is None:
        return "-"
    if "timeout" in result:
        return f"> {result['timeout']:.0f} s"
    if "error" in result:
        return "failed"
    text = f"{result[key]:.2f} s"
    lo, hi = result.get("range", (None, None))
    if lo is not None and result.get("rounds", 1) > 1:
        text += f" ({lo:.1f}-{hi:.1f})"
    return text


def _ratio(a, b, key_a="seconds", key_b="seconds"):
    if not a or not b or key_a not in a or key_b not in b:
        return "-"
    return f"{a[key_a] / b[key_b]:.2f}x"


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.worker:
        run_worker(args)
        return 0
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]
    print("Cold start: a first run with an empty kernel cache, symtriton beside mxnet 1.9.1")
    print(f"machine: {platform.machine()} {os.cpu_count()}-core CPU; {args.threads} thread(s) "
          f"on every side; each figure in a fresh process, imports and symbol building "
          f"excluded; {args.rounds} round(s), the sides in turn; load average {load0:.2f} "
          f"before")
    if args.busy:
        print(f"busy: {args.busy} spinning process(es) beside every measurement")
    sym_dir = tempfile.mkdtemp(prefix="symtriton-cold-start-sym-")
    symbol_path = os.path.join(sym_dir, "inception-bn-symbol.json")
    from benchmarks.data import busy_loops
    # bounded: the loops end on their own should this process die first
    with busy_loops(args.busy, seconds=args.rounds * 3 * args.timeout + 600):
        found = measure_all(args, symbol_path)
    shutil.rmtree(sym_dir, ignore_errors=True)
    after, before, mxnet = found["after"], found.get("before"), found.get("mxnet")

    rows = []
    mx_ = mxnet or {}
    b_ = before or {}
    if "chain" in after:
        rows.append((f"{args.chain:,}-ReLU chain: simple_bind + 1st forward",
                     b_.get("chain"), after["chain"], mx_.get("chain"), "<= 5 s"))
    if "inception_cold" in after:
        rows.append(("Inception-BN cold: bind + init + 1st fwd/bwd",
                     b_.get("inception_cold"), after["inception_cold"], mx_.get("inception"),
                     "<= 2x mxnet"))
        rows.append(("Inception-BN warm (cache filled)",
                     b_.get("inception_warm"), after["inception_warm"], mx_.get("inception"),
                     ""))
    if "lstm" in after:
        buckets = args.lstm_buckets.count(",") + 1
        rows.append((f"lstm_bucketing {buckets} buckets cold: bind + switch_bucket",
                     b_.get("lstm"), after["lstm"], mx_.get("lstm"), "<= 10 s"))
    cols = ["before" if before else None, "after", "mxnet 1.9.1" if mxnet else None,
            "after / mxnet" if mxnet else None, "before / after" if before else None, "goal"]
    print()
    print(f"{'figure (wall seconds: median (range))':52}" + "".join(f"{c:>20}" for c in cols if c))
    for name, b, a, m, goal in rows:
        cells = [_fmt(b) if before else None, _fmt(a), _fmt(m) if mxnet else None,
                 _ratio(a, m) if mxnet else None, _ratio(b, a) if before else None, goal]
        print(f"{name:52}" + "".join(f"{c:>20}" for c in cells if c is not None))

    print()
    for label, side in (("after", after), ("before", before)):
        for what, res in (side or {}).items():
            if res and "seconds" in res:
                detail = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in res.items() if k not in ("per_bucket",
                                                                        "fuse_work", "range"))
                print(f"{label} {what}: {detail}")
                if "per_bucket" in res:
                    print(f"  per bucket (s): " + ", ".join(
                        f"{k}: {v:.2f}" for k, v in res["per_bucket"].items()))
                if "fuse_work" in res:
                    print(f"  fuse work: {res['fuse_work']}")
    for what, res in mx_.items():
        if res:
            print(f"mxnet {what}: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()
                if k not in ("per_bucket", "range")))

    for label, side in (("after", after), ("before", before), ("mxnet", mxnet)):
        for what, res in (side or {}).items():
            if res is None:
                continue
            value = (f"{res['seconds']:.3f}" if "seconds" in res else
                     f"timeout>{res['timeout']:.0f}" if "timeout" in res else "failed")
            cpu = f" cpu_s={res['cpu_seconds']:.3f}" if "cpu_seconds" in res else ""
            if "range" in res:
                cpu += f" min_s={res['range'][0]:.3f} max_s={res['range'][1]:.3f}"
            comp = f" compile_s={res['compile_seconds']:.3f}" if "compile_seconds" in res else ""
            print(f"RESULT cold_start side={label} figure={what} seconds={value}{cpu}{comp} "
                  f"threads={args.threads} busy={args.busy}")
    print(f"load average {os.getloadavg()[0]:.2f} after; total benchmark time "
          f"{time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
