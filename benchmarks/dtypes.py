"""Training in float32, float16 and bfloat16 on the cpu target: samples/s and the
accuracy / perplexity each dtype reaches, in one run.

    python benchmarks/dtypes.py                    # MLP on MNIST and the lstm_bucketing model
    python benchmarks/dtypes.py --mxnet-python .mxnet-venv/bin/python
    python benchmarks/dtypes.py --models mlp --mlp-epochs 2 --max-batches 10

Two models, each trained in the three dtypes from the same initial weights on the same
batches, with ``--threads`` threads:

* ``mlp``: the MLP of ``benchmarks/module_fit.py`` (784-512-512-10, ReLU,
  SoftmaxOutput, SGD lr 0.05 momentum 0.9, batch 128) on the repository's MNIST split
  (``examples/mnist_data.py``: 8,000 training and 2,000 validation images of the
  official test set, pixels / 255); the figure is the validation accuracy after
  ``--mlp-epochs`` epochs.
* ``lstm``: mxnet's lstm_bucketing model of ``benchmarks/lstm_bucketing.py``
  (Embedding 200, 2 x LSTMCell 200, FullyConnected to the vocabulary, SoftmaxOutput;
  BucketingModule, batch 32, buckets 10-60, SGD lr 0.01 wd 1e-5, Xavier(in, 2.34)) on
  the Sherlock Holmes corpus; the figure is the perplexity on ``sherlockholmes.test.txt``
  (``Perplexity(0)``) after ``--lstm-epochs`` epochs.

A low-precision Module is built as a user would: the MLP bound with ``DataDesc(dtype=)``
for data and label; the LSTM with ``Embedding(dtype=)`` and begin states in that dtype,
its token ids float32 and a ``Cast`` to float32 before the softmax (as AMP does). Both
use SGD with ``multi_precision=True`` (float32 master weights).

The three modules train in lockstep, one step of each per batch (the order rotates from
batch to batch), so a slow spell of this shared machine falls on all of them; samples/s
is the batches' samples over that dtype's summed step seconds (``forward`` +
``backward`` + ``update``), and the ratio to float32 is within this run. ``bytes / step``
is ``Program.stats['bytes_per_step']`` of the training program.

The cpu target computes float16 / bfloat16 in float32: its generated ATen calls widen
what they load and narrow what they store. Low precision there halves the bytes held
and moved, not the arithmetic; the time it pays is on a GPU, where the matmuls run on
tensor cores (``benchmarks/gpu_kernels.py --dtype float16``: the ``mma`` column).

With ``--mxnet-python`` this script also runs itself under mxnet 1.9.1's interpreter
(``--mxnet-probe``): mxnet on CPU trains the MLP in float32 on the same data (its
samples/s is the last column) and is asked to bind and step it in float16 and
bfloat16; mxnet 1.9.1's CPU FullyConnected refuses float16 (CuDNN only) and
``bfloat16`` is no numpy dtype there, and the column says what mxnet answered.

One ``RESULT dtypes model=... dtype=...`` line per row for scripts.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DTYPES = ("float32", "float16", "bfloat16")
# How far a low-precision run may end from float32's figure, relative to it. float16:
# the issue's 2%. bfloat16 keeps 8 significant bits to float16's 11 (its values round 8x
# coarser); with float32 master weights tests/module_api/test_dtype_training.py measured
# the LSTM's perplexity 3.5% from float32's on its corpus, and holds bfloat16 to 5%: so
# does this table.
MARGIN = {"float16": 0.02, "bfloat16": 0.05}
PAD = 0   # invalid_label of the LSTM's data and label


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--models", default="mlp,lstm", help="comma-separated: mlp, lstm")
    p.add_argument("--dtypes", default=",".join(DTYPES),
                   help="comma-separated; float32 (the reference) is always trained")
    p.add_argument("--mlp-epochs", type=int, default=5)
    p.add_argument("--mlp-batch", type=int, default=128)
    p.add_argument("--mlp-hidden", type=int, default=512)
    p.add_argument("--mlp-lr", type=float, default=0.05)
    p.add_argument("--lstm-epochs", type=int, default=1)
    p.add_argument("--lstm-batch", type=int, default=32)
    p.add_argument("--num-hidden", type=int, default=200)
    p.add_argument("--num-embed", type=int, default=200)
    p.add_argument("--buckets", default="10,20,30,40,50,60")
    p.add_argument("--lstm-lr", type=float, default=0.01)
    p.add_argument("--wd", type=float, default=0.00001)
    p.add_argument("--max-batches", type=int, default=None,
                   help="training batches per epoch, both models (smoke tests; default all)")
    p.add_argument("--max-val-batches", type=int, default=None,
                   help="validation batches (smoke tests; default all)")
    p.add_argument("--generated", type=int, default=0,
                   help="LSTM on this many sentences of examples/corpus.py's Markov corpus "
                        "instead of Sherlock Holmes (smoke tests)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="threads for every side")
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet==1.9.1: adds the mxnet column")
    p.add_argument("--mxnet-probe", default=None, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------------------- data

def mnist_arrays():
    """The MNIST split as float32 (rows, 784) pixels / 255 and float32 labels."""
    import numpy as np
    from examples.mnist_data import split_files
    files = split_files()

    def idx(path, header):
        with open(path, "rb") as f:
            return np.frombuffer(f.read()[header:], dtype=np.uint8)
    out = []
    for part in ("train", "val"):
        x = idx(files[f"{part}_images"], 16).reshape(-1, 784).astype(np.float32) / 255.0
        y = idx(files[f"{part}_labels"], 8).astype(np.float32)
        out += [x, y]
    return out


# ---------------------------------------------------------------------------- mxnet 1.9.1

def mxnet_probe(args):
    """Runs under mxnet's interpreter: the MLP in float32 on the same data (samples/s,
    accuracy), and whether mxnet binds and steps it in float16 / bfloat16."""
    import logging
    logging.basicConfig(level=logging.ERROR)
    import numpy as np
    import mxnet as mx
    d = np.load(args.mxnet_probe)
    x, y, xv, yv = d["x"], d["y"], d["xv"], d["yv"]
    B = args.mlp_batch

    def module(dtype):
        net = mx.sym.var("data")
        for i in (1, 2):
            net = mx.sym.FullyConnected(net, num_hidden=args.mlp_hidden, name="fc%d" % i)
            net = mx.sym.Activation(net, act_type="relu", name="relu%d" % i)
        net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
        net = mx.sym.SoftmaxOutput(net, name="softmax")
        mod = mx.mod.Module(net, context=mx.cpu(0))
        mod.bind([mx.io.DataDesc("data", (B, x.shape[1]), dtype=dtype)],
                 [mx.io.DataDesc("softmax_label", (B,), dtype=dtype)])
        mx.random.seed(args.seed)
        mod.init_params(mx.init.Xavier())
        mod.init_optimizer(optimizer="sgd", optimizer_params={
            "learning_rate": args.mlp_lr, "momentum": 0.9,
            "multi_precision": dtype != "float32"})
        return mod

    out = {"mxnet": mx.__version__, "support": {}}
    for dtype in DTYPES:
        try:
            mod = module(dtype)
            batch = mx.io.DataBatch([mx.nd.array(x[:B], dtype=dtype)],
                                    [mx.nd.array(y[:B], dtype=dtype)])
            mod.forward_backward(batch)
            mod.update()
            mx.nd.waitall()
            out["support"][dtype] = "ok"
        except Exception as e:          # mxnet's own answer, reported as it is
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
            out["support"][dtype] = (lines[-1] if lines else type(e).__name__)[:200]
    mod = module("float32")
    train = mx.io.NDArrayIter(x, y, batch_size=B, shuffle=False)
    batches = list(train)[:args.max_batches]
    mod.forward_backward(batches[0])
    mod.update()
    mx.nd.waitall()
    mod = module("float32")            # the timed run starts from fresh weights
    seconds = 0.0
    for _ in range(args.mlp_epochs):
        for b in batches:
            t0 = time.perf_counter()
            mod.forward_backward(b)
            mod.update()
            mx.nd.waitall()
            seconds += time.perf_counter() - t0
    out["sps"] = args.mlp_epochs * len(batches) * B / seconds
    out["acc"] = dict(mod.score(mx.io.NDArrayIter(xv, yv, batch_size=B), "acc"))["accuracy"]
    print(json.dumps(out))
    return 0


def run_mxnet(args, x, y, xv, yv):
    """This script under mxnet's interpreter (its own process and venv), or None."""
    import numpy as np
    tmp = tempfile.mkdtemp(prefix="dtypes-mxnet-")
    path = os.path.join(tmp, "mnist.npz")
    np.savez(path, x=x, y=y, xv=xv, yv=yv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SYMTRITON_", "TRITON_"))}
    env.pop("PYTHONPATH", None)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    cmd = [args.mxnet_python, os.path.abspath(__file__), "--mxnet-probe", path,
           "--threads", str(args.threads), "--mlp-epochs", str(args.mlp_epochs),
           "--mlp-batch", str(args.mlp_batch), "--mlp-hidden", str(args.mlp_hidden),
           "--mlp-lr", str(args.mlp_lr), "--seed", str(args.seed)]
    if args.max_batches is not None:
        cmd += ["--max-batches", str(args.max_batches)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        print(f"mxnet peer failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- training

def train_lockstep(mods, batches, epochs, step):
    """``epochs`` passes over ``batches``, one step of every module per batch, the
    order rotating; returns each module's summed step seconds."""
    names = list(mods)
    seconds = {n: 0.0 for n in names}
    i = 0
    for _ in range(epochs):
        for batch in batches:
            for k in range(len(names)):
                n = names[(i + k) % len(names)]
                t0 = time.perf_counter()
                step(mods[n], batch)
                seconds[n] += time.perf_counter() - t0
            i += 1
    return seconds


def train_bytes(mod):
    """Bytes a training step moves (the training program's stats)."""
    if hasattr(mod, "_buckets"):
        mod = mod._buckets[mod._curr_bucket_key]
    train_prog, infer_prog = mod._exec_group.execs[0].programs
    return (train_prog or infer_prog).stats["bytes_per_step"]


def mlp_symbol(mx, hidden):
    net = mx.sym.var("data")
    for i in (1, 2):
        net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc%d" % i)
        net = mx.sym.Activation(net, act_type="relu", name="relu%d" % i)
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def sgd(dtype, lr, **extra):
    params = {"learning_rate": lr, **extra}
    if dtype != "float32":
        params["multi_precision"] = True
    return params


def run_mlp(args, dtypes, data):
    import module_api as mx
    x, y, xv, yv = data
    B = args.mlp_batch
    train = mx.io.NDArrayIter(x, y, batch_size=B, shuffle=False)
    batches = list(train)[:args.max_batches]
    mods = {}
    for dtype in dtypes:
        mod = mx.mod.Module(mlp_symbol(mx, args.mlp_hidden), context=mx.cpu())
        mod.bind([mx.io.DataDesc("data", (B, x.shape[1]), dtype=dtype)],
                 [mx.io.DataDesc("softmax_label", (B,), dtype=dtype)])
        if dtype == "float32":
            mx.random.seed(args.seed)
            mod.init_params(mx.init.Xavier())
            init = mod.get_params()[0]
        else:
            mod.set_params(init, {})
        mod.init_optimizer(optimizer="sgd", optimizer_params=sgd(dtype, args.mlp_lr,
                                                                 momentum=0.9))
        mods[dtype] = mod

    def step(mod, batch):
        mod.forward_backward(batch)
        mod.update()

    for dtype, mod in mods.items():                # warm-up (the first step loads kernels),
        mod.forward_backward(batches[0])           # then the weights start over
        mod.set_params(init, {})
        mod.init_optimizer(optimizer="sgd", optimizer_params=sgd(dtype, args.mlp_lr,
                                                                 momentum=0.9),
                           force_init=True)
    seconds = train_lockstep(mods, batches, args.mlp_epochs, step)
    samples = args.mlp_epochs * len(batches) * B
    rows = {}
    for dtype, mod in mods.items():
        val = mx.io.NDArrayIter(xv, yv, batch_size=B)
        acc = dict(mod.score(val, "acc", num_batch=args.max_val_batches))["accuracy"]
        rows[dtype] = dict(sps=samples / seconds[dtype], metric=acc, bytes=train_bytes(mod))
    return rows, f"{len(batches)} batches x {args.mlp_epochs} epoch(s)"


def lstm_sym_gen(mx, dtype, num_hidden, num_embed, vocab_size, num_layers=2):
    """mxnet's lstm_bucketing symbol; in a low-precision ``dtype`` from the embedding on,
    the softmax in float32 after a Cast (token ids stay float32)."""
    stack = mx.rnn.SequentialRNNCell()
    for i in range(num_layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=num_hidden, prefix="lstm_l%d_" % i))
    low = dtype != "float32"

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=vocab_size, output_dim=num_embed,
                                 name="embed", **({"dtype": dtype} if low else {}))
        stack.reset()
        outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True,
                               **({"begin_state": stack.begin_state(dtype=dtype)}
                                  if low else {}))[0]
        pred = mx.sym.Reshape(outputs, shape=(-1, num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab_size, name="pred")
        if low:
            pred = mx.sym.Cast(pred, dtype="float32")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)
    return sym_gen


def lstm_corpus(mx, args):
    from benchmarks.data import SHERLOCK
    if args.generated:
        from examples.corpus import MarkovGrammar
        grammar = MarkovGrammar(seed=args.seed)
        train_words = grammar.sentences(args.generated)
        val_words = grammar.sentences(max(args.generated // 6, 50))
        label = f"generated Markov corpus, {args.generated} sentences"
    else:
        def read(name):
            with open(os.path.join(SHERLOCK, name)) as f:
                return [list(filter(None, line.split(" "))) for line in f]
        train_words = read("sherlockholmes.train.txt")
        val_words = read("sherlockholmes.test.txt")
        label = "sherlockholmes train / test"
    train, vocab = mx.rnn.encode_sentences(train_words, invalid_label=PAD, start_label=1)
    val, _ = mx.rnn.encode_sentences(val_words, vocab=vocab, invalid_label=PAD, start_label=1)
    return train, val, len(vocab), label


def run_lstm(args, dtypes):
    import numpy as np
    import module_api as mx
    random.seed(args.seed)            # BucketSentenceIter shuffles with Python's random
    np.random.seed(args.seed)
    buckets = sorted(int(b) for b in args.buckets.split(","))
    B = args.lstm_batch
    train, val, vocab_size, corpus = lstm_corpus(mx, args)
    it = mx.rnn.BucketSentenceIter(train, B, buckets=buckets, invalid_label=PAD)
    batches = list(it)[:args.max_batches]
    mods = {}
    for dtype in dtypes:
        mod = mx.mod.BucketingModule(
            sym_gen=lstm_sym_gen(mx, dtype, args.num_hidden, args.num_embed, vocab_size),
            default_bucket_key=it.default_bucket_key, context=mx.cpu(0))
        mod.bind(it.provide_data, it.provide_label)
        if dtype == "float32":
            mx.random.seed(args.seed)
            mod.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
            init = mod.get_params()[0]
        else:
            mod.set_params(init, {})
        mods[dtype] = mod

    def opt(mod, dtype, force=False):
        mod.init_optimizer(optimizer="sgd", optimizer_params=sgd(dtype, args.lstm_lr,
                                                                 wd=args.wd, momentum=0.0),
                           force_init=force)

    def step(mod, batch):
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()

    seen = {}
    for b in batches:
        seen.setdefault(b.bucket_key, b)
    for dtype, mod in mods.items():       # warm-up: each bucket's first step compiles
        opt(mod, dtype)
        for b in seen.values():
            mod.forward(b, is_train=True)
            mod.backward()
        mod.set_params(init, {})
        opt(mod, dtype, force=True)
    seconds = train_lockstep(mods, batches, args.lstm_epochs, step)
    samples = args.lstm_epochs * sum(b.data[0].shape[0] for b in batches)
    tokens = args.lstm_epochs * sum(b.data[0].shape[0] * b.data[0].shape[1] for b in batches)
    rows = {}
    for dtype, mod in mods.items():
        vit = mx.rnn.BucketSentenceIter(val, B, buckets=buckets, invalid_label=PAD)
        ppl = dict(mod.score(vit, mx.metric.Perplexity(PAD),
                             num_batch=args.max_val_batches))["perplexity"]
        mod.switch_bucket(it.default_bucket_key, None, None)
        rows[dtype] = dict(sps=samples / seconds[dtype], tps=tokens / seconds[dtype],
                           metric=ppl, bytes=train_bytes(mod))
    keys = sorted({b.bucket_key for b in batches})
    return rows, (f"{corpus}, vocab {vocab_size}; {len(batches)} batches (buckets "
                  f"{','.join(map(str, keys))}) x {args.lstm_epochs} epoch(s)")


# ---------------------------------------------------------------------------- report

def _mb(n):
    return f"{n / 2 ** 20:.1f} MB"


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.mxnet_probe:
        return mxnet_probe(args)
    import torch
    torch.set_num_threads(args.threads)
    import logging
    logging.getLogger().setLevel(logging.WARNING)
    from runtime.context import cpu_target
    dtypes = ["float32"] + [d for d in args.dtypes.split(",") if d and d != "float32"]
    for d in dtypes:
        if d not in DTYPES:
            raise SystemExit(f"--dtypes: {d!r} is not one of {', '.join(DTYPES)}")
    models = [m for m in args.models.split(",") if m]
    t_start = time.perf_counter()
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results, notes, mx_res, seconds = {}, {}, None, {}
    for model in models:
        t0 = time.perf_counter()
        if model == "mlp":
            data = mnist_arrays()
            results["mlp"], notes["mlp"] = run_mlp(args, dtypes, data)
            if args.mxnet_python:
                mx_res = run_mxnet(args, *data)
        elif model == "lstm":
            results["lstm"], notes["lstm"] = run_lstm(args, dtypes)
        else:
            raise SystemExit(f"--models: unknown model {model!r} (mlp, lstm)")
        seconds[model] = time.perf_counter() - t0
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    print(f"Training in float32, float16, bfloat16 on the symtriton target {cpu_target()}: "
          f"samples/s and the figure each dtype reaches, one run")
    print(f"machine: {platform.machine()} {os.cpu_count()}-core CPU; torch "
          f"{torch.__version__}; {args.threads} thread(s) on every side; seed {args.seed}; "
          f"load average {load_before:.2f} before, {load_after:.2f} after")
    if "mlp" in results:
        print(f"mlp: 784-{args.mlp_hidden}-{args.mlp_hidden}-10, MNIST split 8,000 / 2,000, "
              f"batch {args.mlp_batch}, SGD lr {args.mlp_lr} momentum 0.9; {notes['mlp']}; "
              f"figure: validation accuracy; {seconds['mlp']:.0f} s")
    if "lstm" in results:
        print(f"lstm: embed {args.num_embed}, 2-layer LSTM {args.num_hidden}, batch "
              f"{args.lstm_batch}, SGD lr {args.lstm_lr} wd {args.wd}; {notes['lstm']}; "
              f"figure: test perplexity; {seconds['lstm']:.0f} s")
    print("low precision: Module bound with the dtype (MLP: DataDesc dtype of data and label; "
          "LSTM: Embedding dtype and begin states, Cast to float32 before the softmax), "
          "SGD multi_precision=True")
    print()
    mx_col = mx_res is not None
    hdr = ["model", "dtype", "samples / s", "/ float32", "bytes / step", "figure", "value",
           "delta", "rel delta", "margin", "within"] + (["mxnet 1.9.1"] if mx_col else [])
    w = [6, 9, 12, 10, 13, 11, 9, 9, 10, 7, 7] + ([14] if mx_col else [])
    print("  ".join(h.rjust(x) if i > 1 else h.ljust(x) for i, (h, x) in enumerate(zip(hdr, w))))
    result_lines = []
    for model, rows in results.items():
        ref = rows["float32"]
        figure = "accuracy" if model == "mlp" else "perplexity"
        for dtype, r in rows.items():
            delta = r["metric"] - ref["metric"]
            rel = delta / ref["metric"]
            margin = MARGIN.get(dtype)
            within = "-" if margin is None else ("yes" if abs(rel) <= margin else "NO")
            cells = [model, dtype, f"{r['sps']:.1f}", f"{r['sps'] / ref['sps']:.3f}",
                     _mb(r["bytes"]), figure,
                     f"{r['metric']:.4f}" if model == "mlp" else f"{r['metric']:.2f}",
                     f"{delta:+.4f}" if model == "mlp" else f"{delta:+.2f}",
                     f"{100 * rel:+.2f}%", "-" if margin is None else f"{100 * margin:.0f}%",
                     within]
            if mx_col:
                if model != "mlp":
                    cells.append("-")
                elif dtype == "float32":
                    cells.append(f"{mx_res['sps']:.1f}")
                else:
                    cells.append("ok" if mx_res["support"][dtype] == "ok" else "refused")
            print("  ".join(c.rjust(x) if i > 1 else c.ljust(x)
                            for i, (c, x) in enumerate(zip(cells, w))))
            result_lines.append(
                f"RESULT dtypes model={model} dtype={dtype} sps={r['sps']:.2f} "
                f"ratio={r['sps'] / ref['sps']:.4f} bytes={r['bytes']} metric={figure} "
                f"value={r['metric']:.4f} delta={delta:+.4f} rel_delta={rel:+.5f} "
                f"margin={margin} within={within}"
                + (f" tokens_per_s={r['tps']:.1f}" if "tps" in r else "")
                + f" threads={args.threads}")
    print("(samples / s: the dtype's training steps in lockstep with the others on the same "
          "batches; a sample is an image (mlp) or a sentence of the batch's bucket length "
          "(lstm); / float32: within this run; delta and rel delta: the figure minus "
          "float32's; margin: the largest |rel delta| allowed, 2% for float16 (the issue), "
          "5% for bfloat16 (8 significant bits to float16's 11; the LSTM test measured "
          "3.5%))")
    print("note: the cpu target computes float16 / bfloat16 in float32 (its ATen calls widen "
          "loads and narrow stores), so low precision halves the bytes held and moved, not "
          "the arithmetic: its samples/s ratio is the cost of the conversions, not a "
          "speed-up. GPUs are where it pays: the matmuls run on tensor cores "
          "(benchmarks/gpu_kernels.py --dtype float16, column mma).")
    if args.mxnet_python:
        if mx_res is None:
            print("mxnet 1.9.1: the peer failed (above); no mxnet column")
        else:
            print(f"mxnet {mx_res['mxnet']} on CPU (same MLP and data, float32, "
                  f"{args.threads} threads): {mx_res['sps']:.1f} samples/s, validation "
                  f"accuracy {mx_res['acc']:.4f}; float16 / bfloat16 Module: "
                  + "; ".join(f"{d}: {mx_res['support'][d]}" for d in DTYPES[1:]))
            if "lstm" in results:
                print("mxnet 1.9.1 has no LSTM row: its CPU FullyConnected (the LSTM's "
                      "gates and output layer) has no float16 either")
    for line in result_lines:
        print(line)
    if mx_res is not None:
        print(f"RESULT dtypes_mxnet sps={mx_res['sps']:.2f} acc={mx_res['acc']:.4f} "
              + " ".join(f"{d}={'ok' if mx_res['support'][d] == 'ok' else 'refused'}"
                         for d in DTYPES))
    print(f"total benchmark time {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    if "--mxnet-probe" not in sys.argv:      # --threads before torch loads its pools
        from benchmarks.data import set_thread_env
        set_thread_env(sys.argv[1:], os.cpu_count() or 1)
        os.environ.setdefault("SYMTRITON_CACHE_DIR",
                              tempfile.mkdtemp(prefix="symtriton-dtypes-bench-"))
    sys.exit(main())
