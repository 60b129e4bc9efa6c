"""LSTM language model with BucketingModule: symtriton beside PyTorch eager and mxnet 1.9.1.

The default is mxnet's own lstm_bucketing example's configuration on
its data, the Sherlock Holmes corpus (``examples/data/sherlockholmes``): Embedding 200,
a 2-layer ``mx.rnn`` LSTMCell stack of 200 unrolled to the bucket length,
FullyConnected, SoftmaxOutput; batch 32, buckets 10,20,...,60, SGD lr 0.01, wd 1e-5,
Xavier(in, 2.34).

    python benchmarks/lstm_bucketing.py                              # symtriton and eager
    python benchmarks/lstm_bucketing.py --mxnet-python ~/mxnet-venv/bin/python

Prints, in one run:

* tokens / s of a training epoch (``forward`` + ``backward`` + ``update`` per
  batch, tokens = batch x bucket length) for symtriton (``cpu()`` contexts: the
  cpu target), PyTorch eager (``nn.Embedding``, ``nn.LSTM``, ``nn.Linear``,
  ``cross_entropy``, SGD, same weights and batches, in this process) and, with
  ``--mxnet-python``, mxnet 1.9.1 running ``benchmarks/mxnet_peer.py`` in its own
  venv. Each of ``--rounds`` rounds times one epoch of symtriton and eager with
  their steps interleaved batch by batch (a slow spell of this shared machine
  falls on both), then one epoch of mxnet after its warm-up; medians and their
  ratios are reported. Every side uses ``--threads`` threads.
* per bucket: kernel launches of one training step (forward, backward,
  optimizer update) beside the unfused graph's operator count, bytes moved per
  step fused vs unfused, the seconds of the first ``bind`` / ``switch_bucket``
  of the key with a cold kernel cache (the compile) and of its first forward +
  backward;
* forward launches per layer per time step, from the smallest and largest bucket;
* the cost of ``switch_bucket`` to a seen bucket (median of many) and the
  compiles / cache lookups it made (none expected);
* bytes held by all buckets' executors after the epoch against a
  BucketingModule that only ever saw the largest bucket.

One ``RESULT lstm_bucketing key=value ...`` line and one ``RESULT bucket ...`` line
per bucket for scripts. ``--generated N`` trains on N sentences of the Markov corpus of
``examples/corpus.py`` instead (the smoke test's tiny run).
"""
from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PAD = 0          # invalid_label: padding of data and label
START_LABEL = 1


def build_parser():
    from benchmarks.data import SHERLOCK
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--train-data", default=os.path.join(SHERLOCK, "sherlockholmes.train.txt"),
                   help="training text, one sentence per line (mxnet's tokenizer)")
    p.add_argument("--generated", type=int, default=0,
                   help="instead of --train-data: this many sentences of the generated "
                        "Markov corpus")
    p.add_argument("--vocab", type=int, default=60, help="words of the generated corpus")
    p.add_argument("--num-layers", type=int, default=2, help="stacked LSTM layers")
    p.add_argument("--num-hidden", type=int, default=200, help="LSTM hidden size")
    p.add_argument("--num-embed", type=int, default=200, help="embedding size")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--buckets", type=str, default="10,20,30,40,50,60", help="bucket lengths")
    p.add_argument("--optimizer", type=str, default="sgd", choices=("sgd", "adam"))
    p.add_argument("--lr", type=float, default=0.01, help="learning rate")
    p.add_argument("--mom", type=float, default=0.0, help="sgd momentum")
    p.add_argument("--wd", type=float, default=0.00001, help="weight decay")
    p.add_argument("--ignore-pad", action="store_true",
                   help="SoftmaxOutput(use_ignore=True) on the padding label (mxnet's "
                        "example does not ignore it)")
    p.add_argument("--rounds", type=int, default=5,
                   help="timed epochs per side, alternating the sides; medians reported")
    p.add_argument("--mxnet-python", default=None,
                   help="python of a venv with mxnet==1.9.1 (numpy<1.24): adds the mxnet "
                        "column (benchmarks/mxnet_peer.py); skipped when absent")
    p.add_argument("--switches", type=int, default=300,
                   help="timed switch_bucket calls to seen buckets")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="torch / BLAS / OpenMP threads, the same for every side")
    p.add_argument("--cache-dir", default=None,
                   help="kernel cache directory (default: a fresh one under $SYMTRITON_CACHE_DIR "
                        "or the system temp dir, so the first compile of each bucket is cold)")
    return p


def _early_setup(argv):
    """Thread count and cache directory, before torch / module_api are imported."""
    args, _ = build_parser().parse_known_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if args.cache_dir:
        cache_dir = args.cache_dir
    else:
        base = os.environ.get("SYMTRITON_CACHE_DIR") or None
        if base:
            os.makedirs(base, exist_ok=True)
        cache_dir = tempfile.mkdtemp(prefix="symtriton-lstm-bucketing-", dir=base)
    os.environ["SYMTRITON_CACHE_DIR"] = cache_dir
    os.environ.pop("SYMTRITON_OFFLINE", None)


if __name__ == "__main__":
    _early_setup(sys.argv[1:])

import numpy as np                   # noqa: E402
import torch                         # noqa: E402
import torch.nn.functional as F      # noqa: E402

import module_api as mx              # noqa: E402
from compiler.artifacts import cache as ccache  # noqa: E402
from examples.corpus import MarkovGrammar  # noqa: E402
from runtime.launcher import LaunchCounter  # noqa: E402

nd = mx.nd if hasattr(mx, "nd") else mx.ndarray


# ---------------------------------------------------------------------------- models

def make_sym_gen(num_layers, num_hidden, num_embed, vocab_size, ignore_pad=False):
    stack = mx.rnn.SequentialRNNCell()
    for i in range(num_layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=num_hidden, prefix="lstm_l%d_" % i))

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=vocab_size, output_dim=num_embed,
                                 name="embed")
        stack.reset()
        outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True)[0]
        pred = mx.sym.Reshape(outputs, shape=(-1, num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab_size, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax",
                                    use_ignore=ignore_pad, ignore_label=PAD)
        return pred, ("data",), ("softmax_label",)

    return sym_gen


class EagerLM(torch.nn.Module):
    def __init__(self, num_layers, num_hidden, num_embed, vocab_size):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, num_embed)
        self.lstm = torch.nn.LSTM(num_embed, num_hidden, num_layers=num_layers,
                                  batch_first=True)
        self.pred = torch.nn.Linear(num_hidden, vocab_size)
        self.num_hidden = num_hidden

    def forward(self, data):
        out, _ = self.lstm(self.embed(data))
        return self.pred(out.reshape(-1, self.num_hidden))

    def load_from_mx(self, arg_params, num_layers):
        """Copy symtriton's parameters (mx.rnn LSTMCell gates i, f, c, o = torch's
        i, f, g, o; the same weight layouts)."""
        def a(name):
            return torch.from_numpy(arg_params[name].asnumpy().copy())
        with torch.no_grad():
            self.embed.weight.copy_(a("embed_weight"))
            for i in range(num_layers):
                p = "lstm_l%d_" % i
                getattr(self.lstm, f"weight_ih_l{i}").copy_(a(p + "i2h_weight"))
                getattr(self.lstm, f"weight_hh_l{i}").copy_(a(p + "h2h_weight"))
                getattr(self.lstm, f"bias_ih_l{i}").copy_(a(p + "i2h_bias"))
                getattr(self.lstm, f"bias_hh_l{i}").copy_(a(p + "h2h_bias"))
            self.pred.weight.copy_(a("pred_weight"))
            self.pred.bias.copy_(a("pred_bias"))


def eager_loss(model, data, label, batch_size, ignore_pad=False):
    # SoftmaxOutput's gradient (softmax - onehot; zero on padding with use_ignore)
    # scaled by Module's rescale_grad = 1 / batch_size
    z = model(data)
    return F.cross_entropy(z, label.reshape(-1), ignore_index=PAD if ignore_pad else -100,
                           reduction="sum") / batch_size


# ---------------------------------------------------------------------------- helpers

def _tensors_of(exe):
    for d in (exe.arg_dict, exe.grad_dict, exe.aux_dict):
        yield from d.values()
    yield from exe.outputs
    # the pool, the row-split halves' own pools, and values kept by reference (the
    # oneDNN workspaces) in each
    for pool in (exe._pool,) + tuple(getattr(exe._pool, "row_halves", ())):
        yield from pool.tensors
        yield from pool.kept.values()
    for bufs in exe._buffers.values():
        yield from bufs
    for heads in exe._head_grads.values():
        yield from heads.values()


def held_bytes(bmod):
    """Bytes of the distinct storages (by data_ptr) held by all buckets' executors:
    parameters, gradients, aux states, inputs, outputs, head gradients, the
    internal buffer pools (the row-split halves' too) and the values kept by reference
    (as tests/module_api/test_bucketing_module.py counts, and more)."""
    storages = {}
    for mod in bmod._buckets.values():
        group = mod._exec_group
        for exe in list(group.execs) + list(getattr(group, "_exec_cache", {}).values()):
            for t in _tensors_of(exe):
                if t is None:
                    continue
                st = t.untyped_storage()
                storages[st.data_ptr()] = st.nbytes()
    return sum(storages.values())


def program_of(bmod, key):
    train_prog, infer_prog = bmod._buckets[key]._exec_group.execs[0].programs
    return train_prog or infer_prog


def synthetic_batch(key, batch_size, vocab_size, rng):
    """A batch of bucket ``key`` (random tokens, a padded tail) for warm-up steps."""
    x = rng.randint(START_LABEL, vocab_size, size=(batch_size, key)).astype(np.float32)
    x[:, key - max(1, key // 5):] = PAD
    y = np.full_like(x, PAD)
    y[:, :-1] = x[:, 1:]
    return mx.io.DataBatch([nd.array(x)], [nd.array(y)], bucket_key=key,
                           provide_data=[mx.io.DataDesc("data", (batch_size, key))],
                           provide_label=[mx.io.DataDesc("softmax_label", (batch_size, key))])


def _fmt_bytes(n):
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0


def new_module(sym_gen, default_key, batch_size, args):
    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=default_key,
                                 context=mx.cpu(0))
    t0 = time.perf_counter()
    mod.bind(data_shapes=[("data", (batch_size, default_key))],
             label_shapes=[("softmax_label", (batch_size, default_key))])
    bind_s = time.perf_counter() - t0
    mx.random.seed(args.seed)
    mod.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    params = {"learning_rate": args.lr, "wd": args.wd}
    if args.optimizer == "sgd":
        params["momentum"] = args.mom
    mod.init_optimizer(optimizer=args.optimizer, optimizer_params=params)
    return mod, bind_s


def make_optimizer(args, params):
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.mom, weight_decay=args.wd)
    return torch.optim.Adam(params, lr=args.lr, weight_decay=args.wd)


def sym_batch_loss(mod, label_np, ignore_pad=False):
    """Sum of -log p(label) over the tokens the loss counts, from the last outputs."""
    prob = mod.get_outputs()[0].asnumpy()
    lab = label_np.reshape(-1).astype(np.int64)
    keep = lab != PAD if ignore_pad else np.ones(lab.shape, bool)
    return float(-np.log(prob[np.arange(lab.size)[keep], lab[keep]] + 1e-30).sum())


# ---------------------------------------------------------------------------- main

def load_corpus(args):
    """Sentences as ids and the vocabulary size (mxnet's tokenizer and encoder)."""
    if args.generated:
        grammar = MarkovGrammar(vocab_size=args.vocab, seed=args.seed)
        words = grammar.sentences(args.generated)
    else:
        with open(args.train_data) as f:
            words = [list(filter(None, line.split(" "))) for line in f]
    sentences, vocab = mx.rnn.encode_sentences(words, invalid_label=PAD,
                                               start_label=START_LABEL)
    return sentences, len(vocab)


def time_interleaved_epoch(mod, model, opt, host, epoch_batches, tensors, B, ignore_pad,
                           losses=None, steps=None):
    """One epoch on each side, batch by batch in turn (symtriton step, eager step), so a
    slow spell of a shared machine falls on both; returns their seconds.

    A symtriton step is ``forward`` + ``backward`` + ``update``; an eager step is
    ``zero_grad``, the loss, ``backward`` and ``step``.
    """
    sym_total = eager_total = 0.0
    for (key, _, lab), batch, (d, elab) in zip(host, epoch_batches, tensors):
        t0 = time.perf_counter()
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()
        t1 = time.perf_counter()
        opt.zero_grad()
        loss = eager_loss(model, d, elab, B, ignore_pad)
        loss.backward()
        opt.step()
        t2 = time.perf_counter()
        sym_total += t1 - t0
        eager_total += t2 - t1
        if steps is not None:
            steps[0][key].append(t1 - t0)
            steps[1][key].append(t2 - t1)
        if losses is not None:
            losses[0].append(sym_batch_loss(mod, lab, ignore_pad))
            losses[1].append(loss.item() * B)
    return sym_total, eager_total


def mxnet_epoch(args, train_file):
    """One timed epoch of mxnet 1.9.1 (its own process and venv), or None."""
    from benchmarks.data import run_mxnet_peer
    res = run_mxnet_peer(args.mxnet_python, [
        "--threads", args.threads, "lstm", "--train", train_file, "--valid", train_file,
        "--epochs", 1, "--num-layers", args.num_layers, "--num-hidden", args.num_hidden,
        "--num-embed", args.num_embed, "--batch-size", args.batch_size, "--buckets",
        args.buckets, "--lr", args.lr, "--mom", args.mom, "--wd", args.wd])
    return res


def main(argv=None):
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger().setLevel(logging.WARNING)
    from runtime.context import cpu_target

    buckets = sorted({int(b) for b in args.buckets.split(",")})
    L, B = args.num_layers, args.batch_size

    # -- corpus and the epoch's batches (the same list for symtriton and eager)
    random.seed(args.seed)
    np.random.seed(args.seed)
    sentences, vocab_size = load_corpus(args)
    it = mx.rnn.BucketSentenceIter(sentences, B, buckets=list(buckets), invalid_label=PAD)
    epoch_batches = list(it)
    assert epoch_batches, "no batches: use more sentences or a smaller --batch-size"
    host = [(b.bucket_key, b.data[0].asnumpy().astype(np.int64),
             b.label[0].asnumpy().astype(np.int64)) for b in epoch_batches]
    tokens = sum(lab.size for _, _, lab in host)
    real_tokens = sum(int((lab != PAD).sum()) for _, _, lab in host)
    per_bucket_batches = {k: sum(1 for kk, _, _ in host if kk == k) for k in buckets}
    default_key = buckets[-1]
    visited = sorted({k for k, _, _ in host} | {default_key})

    corpus = (f"generated Markov corpus, {args.generated} sentences" if args.generated else
              os.path.relpath(args.train_data, ROOT))
    print("LSTM language model with BucketingModule: symtriton vs PyTorch eager"
          + (" vs mxnet 1.9.1" if args.mxnet_python else ""))
    print(f"machine: {platform.machine()} {os.cpu_count()}-core CPU; symtriton target "
          f"{cpu_target()}; torch {torch.__version__}; {args.threads} thread(s) on every side")
    print(f"model: embed {args.num_embed}, {L}-layer LSTM {args.num_hidden}, vocab {vocab_size}; "
          f"batch {B}; buckets {','.join(map(str, buckets))}; {args.optimizer} lr {args.lr} "
          f"wd {args.wd}; data {corpus}")
    print(f"epoch: {len(epoch_batches)} batches "
          f"({', '.join(f'{k}: {n}' for k, n in per_bucket_batches.items() if n)}), "
          f"{tokens} tokens ({real_tokens} not padding)")
    print(f"cache dir: {os.environ['SYMTRITON_CACHE_DIR']}")

    sym_gen = make_sym_gen(L, args.num_hidden, args.num_embed, vocab_size, args.ignore_pad)
    rng = np.random.RandomState(args.seed + 1)

    # -- first visit of each bucket in use (largest = default first): compile, launches
    ccache.reset_cache_stats()
    mod, bind_s = new_module(sym_gen, default_key, B, args)
    bind_compiles = ccache.cache_stats()["compiles"]
    arg_params0 = {k: v.copy() for k, v in mod.get_params()[0].items()}
    per = {}
    for key in reversed(visited):
        c0 = ccache.cache_stats()["compiles"]
        t0 = time.perf_counter()
        if key != default_key:
            mod.switch_bucket(key, [("data", (B, key))], [("softmax_label", (B, key))])
        compile_s = bind_s if key == default_key else time.perf_counter() - t0
        compiles = (bind_compiles if key == default_key
                    else ccache.cache_stats()["compiles"] - c0)
        batch = synthetic_batch(key, B, vocab_size, rng)
        t0 = time.perf_counter()
        n0 = LaunchCounter.total
        mod.forward(batch, is_train=True)
        n1 = LaunchCounter.total
        mod.backward()
        n2 = LaunchCounter.total
        first_s = time.perf_counter() - t0
        st = program_of(mod, key).stats
        per[key] = dict(fwd=n1 - n0, bwd=n2 - n1, upd=None, compile_s=compile_s,
                        compiler_s=st["total_seconds"], compiles=compiles, first_s=first_s,
                        unf_fwd=st["unfused_forward_ops"], unf_bwd=st["unfused_backward_ops"],
                        bytes=st["bytes_per_step"], unf_bytes=st["unfused_bytes_per_step"])
    # warm-up steps left no update: the parameters are still the initial ones
    mod.switch_bucket(default_key, None, None)
    n0 = LaunchCounter.total
    mod.update()
    mod.set_params(arg_params0, {})           # (that update was only counted)
    for key in visited:
        per[key]["upd"] = LaunchCounter.total - n0

    # -- eager: the same initial weights and batches; warm-up per bucket length
    torch.manual_seed(args.seed)
    model = EagerLM(L, args.num_hidden, args.num_embed, vocab_size)
    model.load_from_mx(arg_params0, L)
    opt = make_optimizer(args, model.parameters())
    tensors = [(torch.from_numpy(d), torch.from_numpy(lab)) for _, d, lab in host]
    for key in visited:
        d = torch.from_numpy(synthetic_batch(key, B, vocab_size, rng).data[0].asnumpy()).long()
        eager_loss(model, d, torch.roll(d, -1, 1), B, args.ignore_pad).backward()
    opt.zero_grad()

    # -- timed rounds: symtriton epoch, eager epoch, mxnet epoch, and again
    sym_times, eager_times, mx_times = [], [], []
    sym_losses, eager_losses = [], []
    sym_step_s, eager_step_s = {k: [] for k in buckets}, {k: [] for k in buckets}
    mx_info = None
    for r in range(max(1, args.rounds)):
        st, et = time_interleaved_epoch(mod, model, opt, host, epoch_batches, tensors, B,
                                        args.ignore_pad,
                                        (sym_losses, eager_losses) if r == 0 else None,
                                        (sym_step_s, eager_step_s))
        sym_times.append(st)
        eager_times.append(et)
        if args.mxnet_python:
            res = mxnet_epoch(args, args.train_data)
            if res is not None:
                mx_times.append(res["epoch_seconds"][0])
                mx_info = res
        print(f"round {r + 1}: epoch seconds symtriton {sym_times[-1]:.2f}, eager "
              f"{eager_times[-1]:.2f} (symtriton speed / eager {et / st:.3f})"
              + (f", mxnet {mx_times[-1]:.2f} (/ mxnet {mx_times[-1] / st:.3f})"
                 if mx_times and len(mx_times) == r + 1 else ""), flush=True)
    sym_s, eager_s = statistics.median(sym_times), statistics.median(eager_times)
    sym_tps, eager_tps = tokens / sym_s, tokens / eager_s
    mx_tps = mx_info["tokens"] / statistics.median(mx_times) if mx_times else None
    first_loss_diff = abs(sym_losses[0] - eager_losses[0]) / max(1e-12, abs(eager_losses[0]))
    counted = real_tokens if args.ignore_pad else tokens
    sym_nll = sum(sym_losses) / counted
    eager_nll = sum(eager_losses) / counted

    # -- switch_bucket to seen buckets: median of many, no compile, no cache lookup
    cs = ccache.cache_stats()
    times = []
    for i in range(args.switches):
        key = visited[i % len(visited)]
        t0 = time.perf_counter()
        mod.switch_bucket(key, [("data", (B, key))], [("softmax_label", (B, key))])
        times.append(time.perf_counter() - t0)
    cs2 = ccache.cache_stats()
    switch_us = statistics.median(times) * 1e6
    switch_compiles = cs2["compiles"] - cs["compiles"]
    switch_lookups = cs2["hits"] + cs2["misses"] - cs["hits"] - cs["misses"]
    mod.switch_bucket(default_key, None, None)

    # -- memory: all buckets visited vs a module that only ever saw the largest
    all_bytes = held_bytes(mod)
    pool_all = mod._buckets[default_key]._exec_group.execs[0]._pool.nbytes()
    alone, _ = new_module(sym_gen, default_key, B, args)
    alone.forward(synthetic_batch(default_key, B, vocab_size, rng), is_train=True)
    alone.backward()
    alone.update()
    alone_bytes = held_bytes(alone)
    pool_alone = alone._buckets[default_key]._exec_group.execs[0]._pool.nbytes()
    mem_ratio = all_bytes / alone_bytes

    # -- launches per layer per time step, forward
    t1, t2 = visited[0], visited[-1]
    lpls = (per[t2]["fwd"] - per[t1]["fwd"]) / ((t2 - t1) * L) if t2 > t1 else float("nan")

    # ------------------------------------------------------------------------ report
    print()
    cols = ["symtriton", "eager"] + (["mxnet 1.9.1"] if mx_tps else [])
    print(f"{'':30}" + "".join(f"{c:>14}" for c in cols))
    vals = [sym_tps, eager_tps] + ([mx_tps] if mx_tps else [])
    print(f"{'tokens / s (median epoch)':30}" + "".join(f"{v:14.1f}" for v in vals))
    secs = [sym_s, eager_s] + ([statistics.median(mx_times)] if mx_tps else [])
    print(f"{'epoch seconds (median)':30}" + "".join(f"{v:14.2f}" for v in secs))
    print(f"{'symtriton speed / side':30}" + "".join(f"{sym_tps / v:14.3f}" for v in vals))
    print(f"(rounds: {len(sym_times)}; symtriton {', '.join(f'{t:.2f}' for t in sym_times)} s; "
          f"eager {', '.join(f'{t:.2f}' for t in eager_times)} s"
          + (f"; mxnet {', '.join(f'{t:.2f}' for t in mx_times)} s" if mx_times else "") + ")")
    from benchmarks.flops import print_machine_distance, train_step_gflop
    key = max(visited)                       # matrix FLOPs per token do not depend on it
    gflop = train_step_gflop(sym_gen(key)[0], data=(args.batch_size, key),
                             softmax_label=(args.batch_size, key)) / (args.batch_size * key)
    gflops, peak = print_machine_distance(30, cols, vals, gflop, args.threads)
    print(f"mean NLL per counted token, first epoch: symtriton {sym_nll:.4f}, eager "
          f"{eager_nll:.4f}; first batch loss relative difference {first_loss_diff:.1e}")
    print()
    hdr = ("bucket", "batches", "sym ms/step", "eager ms", "launches f+b+u", "unfused f+b",
           "ratio", "bytes/step", "unfused bytes", "ratio", "compile s", "compiler s",
           "1st f+b s")
    w = (7, 8, 12, 9, 16, 14, 7, 11, 14, 7, 10, 11, 10)
    print("".join(h.rjust(x) for h, x in zip(hdr, w)))
    for key in visited:
        r = per[key]
        fb, unf = r["fwd"] + r["bwd"], r["unf_fwd"] + r["unf_bwd"]
        sms = (f"{statistics.median(sym_step_s[key]) * 1e3:.1f}" if sym_step_s[key] else "-")
        ems = (f"{statistics.median(eager_step_s[key]) * 1e3:.1f}" if eager_step_s[key] else "-")
        row = (str(key), str(per_bucket_batches[key]), sms, ems,
               f"{r['fwd']}+{r['bwd']}+{r['upd']}",
               f"{r['unf_fwd']}+{r['unf_bwd']}", f"{fb / unf:.3f}", _fmt_bytes(r["bytes"]),
               _fmt_bytes(r["unf_bytes"]), f"{r['bytes'] / r['unf_bytes']:.3f}",
               f"{r['compile_s']:.2f}", f"{r['compiler_s']:.2f}", f"{r['first_s']:.2f}")
        print("".join(c.rjust(x) for c, x in zip(row, w)))
    print("(ms/step: median training step of the bucket over the rounds; compile s: first "
          "bind (largest bucket) / switch_bucket of the key with a cold cache; compiler s: "
          "Program.stats total_seconds; ratios: fused forward+backward over unfused; u = "
          "optimizer update launches, not in the unfused count)")
    print()
    print(f"forward launches per layer per time step: ({per[t2]['fwd']} - {per[t1]['fwd']}) / "
          f"(({t2} - {t1}) * {L}) = {lpls:.3f}")
    print(f"switch_bucket to a seen bucket: median {switch_us:.1f} us over {args.switches}; "
          f"{switch_compiles} compiles, {switch_lookups} cache lookups")
    print(f"bytes held after all buckets: {_fmt_bytes(all_bytes)} vs largest bucket alone "
          f"{_fmt_bytes(alone_bytes)} ({mem_ratio:.3f}x); buffer pool {_fmt_bytes(pool_all)} vs "
          f"{_fmt_bytes(pool_alone)}")
    for key in visited:
        r = per[key]
        print(f"RESULT bucket key={key} fwd={r['fwd']} bwd={r['bwd']} upd={r['upd']} "
              f"unfused_fwd={r['unf_fwd']} unfused_bwd={r['unf_bwd']} bytes={r['bytes']} "
              f"unfused_bytes={r['unf_bytes']} compile_s={r['compile_s']:.3f} "
              f"compiles={r['compiles']} first_step_s={r['first_s']:.3f}")
    print(f"RESULT lstm_bucketing sym_tps={sym_tps:.2f} eager_tps={eager_tps:.2f} "
          f"ratio={sym_tps / eager_tps:.5f} "
          f"mxnet_tps={mx_tps if mx_tps is None else f'{mx_tps:.2f}'} "
          f"ratio_mxnet={None if mx_tps is None else f'{sym_tps / mx_tps:.5f}'} "
          f"threads={args.threads} gflops={gflops:.2f} peak_gflops={peak:.2f} "
          f"launches_per_layer_step_fwd={lpls:.3f} "
          f"mem_ratio={mem_ratio:.4f} switch_us={switch_us:.2f} "
          f"switch_compiles={switch_compiles} switch_lookups={switch_lookups} "
          f"bytes_all={all_bytes} bytes_largest_alone={alone_bytes} "
          f"sym_nll={sym_nll:.4f} eager_nll={eager_nll:.4f} first_loss_rel_diff={first_loss_diff:.2e}")


if __name__ == "__main__":
    main()
