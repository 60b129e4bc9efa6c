"""Train an LSTM language model with BucketingModule (mxnet's lstm_bucketing example).

Same arguments as mxnet 1.9.1's ``example/rnn/bucketing/lstm_bucketing.py``,
plus ``--train-data`` / ``--valid-data`` (text files, one sentence per line,
tokens separated by spaces). Without data files it trains on a corpus
generated from a seeded Markov grammar (``examples/corpus.py``) and prints the
best perplexity reachable on the validation set beside the one it reached.

    python examples/lstm_bucketing.py                       # small CPU run, a few minutes
    python examples/lstm_bucketing.py --gpus 0 --num-hidden 200 --num-embed 200 \\
        --train-data ../shared/data/sherlockholmes/sherlockholmes.train.txt \\
        --valid-data ../shared/data/sherlockholmes/sherlockholmes.test.txt   # mxnet's configuration

Data-parallel on two worker processes (each trains on its half of the sentences;
gradients are summed across workers every step):

    torchrun --nproc_per_node 2 examples/lstm_bucketing.py --kv-store dist_sync

and across machines, the same command on every machine with
``--nnodes 2 --rdzv-backend c10d --rdzv-endpoint HOST:PORT`` added (README,
"Training on several machines").
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import module_api as mx  # noqa: E402  (was: import mxnet as mx)
from examples.corpus import MarkovGrammar  # noqa: E402

parser = argparse.ArgumentParser(description="Train an LSTM language model with bucketing",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--num-layers", type=int, default=2, help="number of stacked RNN layers")
parser.add_argument("--num-hidden", type=int, default=32, help="hidden layer size")
parser.add_argument("--num-embed", type=int, default=32, help="embedding layer size")
parser.add_argument("--gpus", type=str, help="list of gpus to run, e.g. 0 or 0,2; empty: cpu")
parser.add_argument("--kv-store", type=str, default="device", help="key-value store type")
parser.add_argument("--num-epochs", type=int, default=4, help="max num of epochs")
parser.add_argument("--lr", type=float, default=0.01, help="initial learning rate")
parser.add_argument("--optimizer", type=str, default="adam", help="the optimizer type")
parser.add_argument("--mom", type=float, default=0.0, help="momentum for sgd")
parser.add_argument("--wd", type=float, default=0.00001, help="weight decay")
parser.add_argument("--batch-size", type=int, default=32, help="the batch size")
parser.add_argument("--disp-batches", type=int, default=10, help="log every n batches")
parser.add_argument("--train-data", type=str, help="training text, one sentence per line")
parser.add_argument("--valid-data", type=str, help="validation text, one sentence per line")
parser.add_argument("--buckets", type=str, default="10,20,30", help="bucket lengths")
parser.add_argument("--num-sentences", type=int, default=1200,
                    help="generated training sentences (without --train-data)")
parser.add_argument("--seed", type=int, default=0, help="seed of the corpus and the model")
parser.add_argument("--plot", type=str, default="lstm_bucketing_perplexity.png",
                    help="where to write the perplexity plot ('' for none)")


def tokenize_text(fname, vocab=None, invalid_label=-1, start_label=0):
    with open(fname) as f:
        lines = [list(filter(None, line.split(" "))) for line in f]
    return mx.rnn.encode_sentences(lines, vocab=vocab, invalid_label=invalid_label,
                                   start_label=start_label)


def load_corpus(args, invalid_label, start_label):
    """Sentences (as ids), the vocabulary, and the best reachable perplexity (or None)."""
    if args.train_data:
        train, vocab = tokenize_text(args.train_data, invalid_label=invalid_label,
                                     start_label=start_label)
        val, _ = tokenize_text(args.valid_data or args.train_data, vocab=vocab,
                               invalid_label=invalid_label, start_label=start_label)
        return train, val, vocab, None
    grammar = MarkovGrammar(seed=args.seed)
    train_words = grammar.sentences(args.num_sentences)
    val_words = grammar.sentences(max(args.num_sentences // 6, 50))
    train, vocab = mx.rnn.encode_sentences(train_words, invalid_label=invalid_label,
                                           start_label=start_label)
    val, _ = mx.rnn.encode_sentences(val_words, vocab=vocab, invalid_label=invalid_label,
                                     start_label=start_label)
    buckets = [int(b) for b in args.buckets.split(",")]
    return train, val, vocab, grammar.best_perplexity(val_words, max_len=max(buckets))


class PerplexityHistory:
    """Keeps the last training metric value of each epoch (a batch_end_callback)."""

    def __init__(self):
        self.train, self.valid = {}, {}

    def __call__(self, param):
        self.train[param.epoch] = dict(param.eval_metric.get_global_name_value())

    def on_eval(self, param):
        self.valid[param.epoch] = dict(param.eval_metric.get_name_value())


def write_plot(history, path, best):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logging.warning("matplotlib is not installed (pip install 'symtriton[examples]'); "
                        "no plot written")
        return
    epochs = sorted(history.train)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(epochs, [history.train[e]["perplexity"] for e in epochs], "o-", label="train")
    ax.plot(sorted(history.valid), [history.valid[e]["perplexity"] for e in sorted(history.valid)],
            "s-", label="validation")
    if best is not None:
        ax.axhline(best, color="gray", linestyle="--", label="best reachable")
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity")
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

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=len(vocab) + start_label,
                                 output_dim=args.num_embed, name="embed")
        stack.reset()
        outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True)[0]
        pred = mx.sym.Reshape(outputs, shape=(-1, args.num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=len(vocab) + start_label, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)

    contexts = [mx.gpu(int(i)) for i in args.gpus.split(",")] if args.gpus else mx.cpu(0)
    model = mx.mod.BucketingModule(sym_gen=sym_gen,
                                   default_bucket_key=data_train.default_bucket_key,
                                   context=contexts)
    history = PerplexityHistory()
    model.fit(
        train_data=data_train,
        eval_data=data_val,
        eval_metric=mx.metric.Perplexity(invalid_label),
        kvstore=kv,
        optimizer=args.optimizer,
        optimizer_params={"learning_rate": args.lr, "wd": args.wd,
                          **({"momentum": args.mom} if args.optimizer == "sgd" else {})},
        initializer=mx.init.Xavier(factor_type="in", magnitude=2.34),
        num_epoch=args.num_epochs,
        batch_end_callback=[mx.callback.Speedometer(args.batch_size, args.disp_batches,
                                                    auto_reset=False), history],
        eval_end_callback=history.on_eval)
    reached = history.valid[max(history.valid)]["perplexity"]
    if best is not None:
        logging.info("validation perplexity reached %.3f; best reachable on this data %.3f "
                     "(ratio %.3f)", reached, best, reached / best)
    else:
        logging.info("validation perplexity reached %.3f", reached)
    if args.plot and rank == 0:
        write_plot(history, args.plot, best)
    return reached, best, history


if __name__ == "__main__":
    main()
