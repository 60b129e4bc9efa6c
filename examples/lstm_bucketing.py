"""Train an LSTM language model with BucketingModule: mxnet's lstm_bucketing example.

The arguments, defaults and model are those of mxnet 1.9.1's
lstm_bucketing example, and so is the data: the Sherlock Holmes
corpus, shipped in ``examples/data/sherlockholmes`` (train on ``train.txt``,
validate on ``test.txt``); its 25 epochs take about five minutes on two CPU cores.
The additions: ``--train-data`` / ``--valid-data`` name other text files,
``--generated N`` trains on a generated Markov corpus instead (``examples/corpus.py``,
whose best reachable perplexity is known and printed), and ``--dtype float16`` /
``bfloat16`` trains the model in that dtype from the embedding on (``Embedding(dtype=)``
and begin states in it; the token ids stay float32 and the softmax runs in float32 after
a ``Cast``, as mxnet's AMP does) with SGD ``multi_precision=True`` (float32 master
weights). The default, ``float32``, is mxnet's example unchanged. On ``cpu()`` the
kernels compute low precision in float32 (they widen loads and narrow stores): it
halves the bytes, not the time (``benchmarks/dtypes.py``); on a GPU the matmuls run on
tensor cores.

After each epoch the validation perplexity is logged beside mxnet 1.9.1's at the same
epoch and configuration, from ``examples/data/mxnet_lstm_bucketing_perplexity.json``
(recorded by ``benchmarks/record_mxnet_perplexity.py`` with mxnet in its own venv:
the mean of its runs, with their range). A plot of both goes to ``--plot``.

    python examples/lstm_bucketing.py                    # mxnet's configuration, ~5 min on 2 cores
    python examples/lstm_bucketing.py --num-epochs 5     # a shorter run
    python examples/lstm_bucketing.py --gpus 0           # on a GPU
    python examples/lstm_bucketing.py --generated 1200 --num-hidden 32 --num-embed 32
    python examples/lstm_bucketing.py --dtype float16 --gpus 0

Data-parallel on two worker processes (each trains on its half of the sentences;
gradients are summed across workers every step):

    torchrun --nproc_per_node 2 examples/lstm_bucketing.py --kv-store dist_sync

and across machines, the same command on every machine with
``--nnodes 2 --rdzv-backend c10d --rdzv-endpoint HOST:PORT`` added (README,
"Training on several machines").
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import module_api as mx  # noqa: E402  (was: import mxnet as mx)
from examples.corpus import MarkovGrammar  # noqa: E402

DATA = os.path.join(ROOT, "examples", "data")
SHERLOCK = os.path.join(DATA, "sherlockholmes")
REFERENCE = os.path.join(DATA, "mxnet_lstm_bucketing_perplexity.json")
# mxnet's example runs 25 epochs: about four to five minutes on two cores here.
DEMO_EPOCHS = 25

parser = argparse.ArgumentParser(description="Train an LSTM language model with bucketing",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--num-layers", type=int, default=2, help="number of stacked RNN layers")
parser.add_argument("--num-hidden", type=int, default=200, help="hidden layer size")
parser.add_argument("--num-embed", type=int, default=200, help="embedding layer size")
parser.add_argument("--gpus", type=str, help="list of gpus to run, e.g. 0 or 0,2; empty: cpu")
parser.add_argument("--kv-store", type=str, default="device", help="key-value store type")
parser.add_argument("--num-epochs", type=int, default=DEMO_EPOCHS, help="max num of epochs")
parser.add_argument("--lr", type=float, default=0.01, help="initial learning rate")
parser.add_argument("--optimizer", type=str, default="sgd", help="the optimizer type")
parser.add_argument("--mom", type=float, default=0.0, help="momentum for sgd")
parser.add_argument("--wd", type=float, default=0.00001, help="weight decay for sgd")
parser.add_argument("--batch-size", type=int, default=32, help="the batch size")
parser.add_argument("--disp-batches", type=int, default=50, help="log every n batches")
parser.add_argument("--train-data", type=str,
                    default=os.path.join(SHERLOCK, "sherlockholmes.train.txt"),
                    help="training text, one sentence per line")
parser.add_argument("--valid-data", type=str,
                    default=os.path.join(SHERLOCK, "sherlockholmes.test.txt"),
                    help="validation text, one sentence per line")
parser.add_argument("--generated", type=int, default=0,
                    help="train on this many sentences of a generated Markov corpus instead "
                         "of the text files")
parser.add_argument("--buckets", type=str, default="10,20,30,40,50,60", help="bucket lengths")
parser.add_argument("--seed", type=int, default=0, help="seed of the model (and corpus)")
parser.add_argument("--dtype", type=str, default="float32",
                    choices=("float32", "float16", "bfloat16"),
                    help="dtype of the model from the embedding to the output layer "
                         "(low precision: float32 softmax, multi_precision SGD)")
parser.add_argument("--reference", type=str, default=REFERENCE,
                    help="mxnet 1.9.1's per-epoch validation perplexity (JSON), shown beside "
                         "ours when the configuration is the one it was recorded with")
parser.add_argument("--plot", type=str, default="lstm_bucketing_perplexity.png",
                    help="where to write the perplexity plot ('' for none)")


def tokenize_text(fname, vocab=None, invalid_label=-1, start_label=0):
    with open(fname) as f:
        lines = [list(filter(None, line.split(" "))) for line in f]
    return mx.rnn.encode_sentences(lines, vocab=vocab, invalid_label=invalid_label,
                                   start_label=start_label)


def load_corpus(args, invalid_label, start_label):
    """Sentences (as ids), the vocabulary, and the best reachable perplexity (or None)."""
    if not args.generated:
        train, vocab = tokenize_text(args.train_data, invalid_label=invalid_label,
                                     start_label=start_label)
        val, _ = tokenize_text(args.valid_data or args.train_data, vocab=vocab,
                               invalid_label=invalid_label, start_label=start_label)
        return train, val, vocab, None
    grammar = MarkovGrammar(seed=args.seed)
    train_words = grammar.sentences(args.generated)
    val_words = grammar.sentences(max(args.generated // 6, 50))
    train, vocab = mx.rnn.encode_sentences(train_words, invalid_label=invalid_label,
                                           start_label=start_label)
    val, _ = mx.rnn.encode_sentences(val_words, vocab=vocab, invalid_label=invalid_label,
                                     start_label=start_label)
    buckets = [int(b) for b in args.buckets.split(",")]
    return train, val, vocab, grammar.best_perplexity(val_words, max_len=max(buckets))


def load_reference(args):
    """mxnet's figures when this run has the configuration they were recorded with."""
    if not args.reference or not os.path.exists(args.reference) or args.generated:
        return None
    with open(args.reference) as f:
        ref = json.load(f)
    c = ref["configuration"]
    same = (args.num_layers == c["num_layers"] and args.num_hidden == c["num_hidden"]
            and args.num_embed == c["num_embed"] and args.batch_size == c["batch_size"]
            and [int(b) for b in args.buckets.split(",")] == c["buckets"]
            and args.optimizer == c["optimizer"] and args.lr == c["lr"]
            and args.mom == c["momentum"] and args.wd == c["wd"]
            and os.path.samefile(args.train_data, os.path.join(SHERLOCK,
                                                               "sherlockholmes.train.txt"))
            and os.path.samefile(args.valid_data, os.path.join(SHERLOCK,
                                                               "sherlockholmes.test.txt")))
    if not same:
        logging.info("not comparing with mxnet 1.9.1: this configuration differs from the "
                     "one %s was recorded with", os.path.relpath(args.reference, ROOT))
        return None
    if args.dtype != "float32":
        logging.info("mxnet 1.9.1's figures beside ours are of its float32 runs (its CPU "
                     "FullyConnected has no float16)")
    return ref


class PerplexityHistory:
    """Training and validation perplexity per epoch, and mxnet's beside them."""

    def __init__(self, reference, num_epochs, show_progress):
        self.train, self.valid = {}, {}
        self.reference = reference
        self.bar = None
        if show_progress:
            from tqdm import tqdm
            self.bar = tqdm(total=num_epochs, desc="training", unit="epoch", disable=None)

    def __call__(self, param):          # batch_end_callback: the epoch's running metric
        self.train[param.epoch] = dict(param.eval_metric.get_global_name_value())

    def on_eval(self, param):           # eval_end_callback: after each validation pass
        value = dict(param.eval_metric.get_name_value())["perplexity"]
        self.valid[param.epoch] = value
        ref = self.reference_at(param.epoch)
        if ref is None:
            logging.info("Epoch[%d] Validation-perplexity=%.3f", param.epoch, value)
        else:
            mean, low, high = ref
            logging.info("Epoch[%d] Validation-perplexity=%.3f  mxnet 1.9.1: %.3f (runs %.3f "
                         "to %.3f)  ratio %.3f", param.epoch, value, mean, low, high,
                         value / mean)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(perplexity=f"{value:.2f}")

    def reference_at(self, epoch):
        if self.reference is None or epoch >= len(self.reference["mean"]):
            return None
        runs = [r["valid_perplexity"][epoch] for r in self.reference["runs"]]
        return self.reference["mean"][epoch], min(runs), max(runs)


def write_plot(history, path, best):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        logging.warning("matplotlib is not installed (pip install 'symtriton[examples]'); "
                        "no plot written")
        return
    epochs = sorted(history.valid)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sorted(history.train), [history.train[e]["perplexity"] for e in sorted(history.train)],
            "o-", label="train (symtriton)")
    ax.plot(epochs, [history.valid[e] for e in epochs], "s-", label="validation (symtriton)")
    refs = [(e, history.reference_at(e)) for e in epochs]
    refs = [(e, r) for e, r in refs if r is not None]
    if refs:
        ax.plot([e for e, _ in refs], [r[0] for _, r in refs], "k--",
                label="validation (mxnet 1.9.1, mean of runs)")
        ax.fill_between([e for e, _ in refs], [r[1] for _, r in refs], [r[2] for _, r in refs],
                        color="gray", alpha=0.3)
    if best is not None:
        ax.axhline(best, color="gray", linestyle="--", label="best reachable")
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("perplexity")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    logging.info("wrote %s", path)


def main(argv=None):
    head = "%(asctime)-15s %(message)s"
    logging.basicConfig(level=logging.INFO, format=head)
    args = parser.parse_args(argv)
    mx.random.seed(args.seed)
    buckets = [int(b) for b in args.buckets.split(",")]
    start_label, invalid_label = 1, 0
    train_sent, val_sent, vocab, best = load_corpus(args, invalid_label, start_label)

    # a distributed kvstore: each worker reads its share, checkpoints and plots on rank 0
    kv = mx.kv.create(args.kv_store) if "dist" in args.kv_store else args.kv_store
    rank, workers = (kv.rank, kv.num_workers) if "dist" in args.kv_store else (0, 1)
    if workers > 1:
        logging.getLogger().handlers[0].setFormatter(
            logging.Formatter("%(asctime)-15s [rank " + str(rank) + "] %(message)s"))
    data_train = mx.rnn.BucketSentenceIter(train_sent, args.batch_size, buckets=buckets,
                                           invalid_label=invalid_label, num_parts=workers,
                                           part_index=rank)
    data_val = mx.rnn.BucketSentenceIter(val_sent, args.batch_size, buckets=buckets,
                                         invalid_label=invalid_label)

    stack = mx.rnn.SequentialRNNCell()
    for i in range(args.num_layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=args.num_hidden, prefix="lstm_l%d_" % i))

    # low precision from the embedding on; token ids and the softmax stay float32
    low = {"dtype": args.dtype} if args.dtype != "float32" else {}

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=len(vocab),
                                 output_dim=args.num_embed, name="embed", **low)
        stack.reset()
        outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True,
                               **({"begin_state": stack.begin_state(**low)} if low else {}))[0]
        pred = mx.sym.Reshape(outputs, shape=(-1, args.num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=len(vocab), name="pred")
        if low:
            pred = mx.sym.Cast(pred, dtype="float32")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)

    contexts = [mx.gpu(int(i)) for i in args.gpus.split(",")] if args.gpus else mx.cpu(0)
    model = mx.mod.BucketingModule(sym_gen=sym_gen,
                                   default_bucket_key=data_train.default_bucket_key,
                                   context=contexts)
    history = PerplexityHistory(load_reference(args), args.num_epochs, show_progress=rank == 0)
    t0 = time.perf_counter()
    model.fit(
        train_data=data_train,
        eval_data=data_val,
        eval_metric=mx.metric.Perplexity(invalid_label),
        kvstore=kv,
        optimizer=args.optimizer,
        optimizer_params={"learning_rate": args.lr, "wd": args.wd,
                          **({"momentum": args.mom} if args.optimizer == "sgd" else {}),
                          **({"multi_precision": True} if low else {})},
        initializer=mx.init.Xavier(factor_type="in", magnitude=2.34),
        num_epoch=args.num_epochs,
        batch_end_callback=[mx.callback.Speedometer(args.batch_size, args.disp_batches,
                                                    auto_reset=False), history],
        eval_end_callback=history.on_eval)
    if history.bar is not None:
        history.bar.close()
    last = max(history.valid)
    reached = history.valid[last]
    logging.info("trained %d epochs in %.0f s", args.num_epochs, time.perf_counter() - t0)
    ref = history.reference_at(last)
    if best is not None:
        logging.info("validation perplexity reached %.3f; best reachable on this data %.3f "
                     "(ratio %.3f)", reached, best, reached / best)
    elif ref is not None:
        logging.info("validation perplexity reached %.3f after %d epochs; mxnet 1.9.1 reached "
                     "%.3f (mean of %d runs, %.3f to %.3f): ratio %.3f", reached, last + 1,
                     ref[0], len(history.reference["runs"]), ref[1], ref[2], reached / ref[0])
    else:
        logging.info("validation perplexity reached %.3f", reached)
    if args.plot and rank == 0:
        write_plot(history, args.plot, best)
    return reached, best, history


if __name__ == "__main__":
    main()
