"""mxnet 1.9.1 itself, as the peer column of the benchmarks. Runs in mxnet's own venv:

    python3 -m venv mxnet-venv && mxnet-venv/bin/pip install mxnet==1.9.1 "numpy<1.24"
    mxnet-venv/bin/python benchmarks/mxnet_peer.py lstm --train T.txt --valid V.txt --epochs 1
    mxnet-venv/bin/python benchmarks/mxnet_peer.py mlp --batch 128 --steps 60

The benchmarks start it as a subprocess (their ``--mxnet-python PATH``); this project
never imports mxnet. It prints one JSON object on its last line.

* ``lstm``: mxnet's lstm_bucketing example (Embedding, a
  2-layer ``mx.rnn.LSTMCell`` stack unrolled per bucket, FullyConnected,
  SoftmaxOutput; BucketSentenceIter; SGD; Xavier(in, 2.34)), its arguments and
  defaults. ``--mode speed`` times training epochs as a loop of
  ``forward_backward`` + ``update`` over the epoch's batches after one warm-up
  step per bucket (``mx.nd.waitall()`` before the clock stops: mxnet's engine
  is asynchronous). ``--mode fit`` runs the example's ``Module.fit`` and
  reports the validation perplexity after every epoch (the reference figures
  ``examples/lstm_bucketing.py`` prints beside its own).
* ``mlp``: ``Module`` training steps (``forward_backward`` + ``update``) of an
  MLP (784-512-512-10, ReLU, SoftmaxOutput) on fixed random batches.
* ``lenet``: mxnet's ``symbols/lenet.py`` trained on MNIST IDX files read with
  ``mx.io.MNISTIter`` (SGD with momentum and weight decay, Xavier gaussian/in/2),
  epochs timed, then the validation accuracy.
* ``chain``, ``bindstep``, ``buckets``: the cold-start figures of
  ``benchmarks/cold_start.py`` (a chain of ReLUs bound and run once; a saved
  symbol bound, initialised and stepped once; lstm_bucketing's model bound for
  every bucket).

The thread count is set with ``--threads`` (``OMP_NUM_THREADS``) before mxnet loads;
``--threads 0`` leaves the environment as it is (mxnet's own defaults).

``--serve`` (``lstm`` and ``lenet``) keeps the process for a caller that alternates
sides in rounds (``benchmarks/contention.py``): after binding and one warm-up step it
prints ``{"ready": true, ...}``, then for each line ``steps N`` on stdin runs the
next N training steps (cycling over the batches) and prints ``{"seconds": S,
"steps": N}``, timed to ``mx.nd.waitall()``; ``quit`` or the end of stdin ends it.
"""
import argparse
import json
import logging
import os
import sys
import time


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2,
                   help="OMP/MKL/OpenBLAS threads; 0 leaves the environment as it is")
    p.add_argument("--serve", action="store_true",
                   help="lstm, lenet: run steps on request from stdin (see the module doc)")
    sub = p.add_subparsers(dest="cmd", required=True)
    lstm = sub.add_parser("lstm")
    lstm.add_argument("--train", required=True)
    lstm.add_argument("--valid", required=True)
    lstm.add_argument("--mode", choices=("speed", "fit"), default="speed")
    lstm.add_argument("--num-layers", type=int, default=2)
    lstm.add_argument("--num-hidden", type=int, default=200)
    lstm.add_argument("--num-embed", type=int, default=200)
    lstm.add_argument("--epochs", type=int, default=1)
    lstm.add_argument("--lr", type=float, default=0.01)
    lstm.add_argument("--mom", type=float, default=0.0)
    lstm.add_argument("--wd", type=float, default=0.00001)
    lstm.add_argument("--batch-size", type=int, default=32)
    lstm.add_argument("--buckets", default="10,20,30,40,50,60")
    lstm.add_argument("--seed", type=int, default=None)
    lenet = sub.add_parser("lenet")
    lenet.add_argument("--train-images", required=True)
    lenet.add_argument("--train-labels", required=True)
    lenet.add_argument("--val-images", required=True)
    lenet.add_argument("--val-labels", required=True)
    lenet.add_argument("--epochs", type=int, default=3)
    lenet.add_argument("--batch", type=int, default=64)
    lenet.add_argument("--lr", type=float, default=0.05)
    lenet.add_argument("--mom", type=float, default=0.9)
    lenet.add_argument("--wd", type=float, default=0.0001)
    lenet.add_argument("--max-batches", type=int, default=None)
    lenet.add_argument("--seed", type=int, default=0)
    chain = sub.add_parser("chain")
    chain.add_argument("--n", type=int, default=20000)
    chain.add_argument("--shape", default="8,16")
    bindstep = sub.add_parser("bindstep")
    bindstep.add_argument("--symbol", required=True)
    bindstep.add_argument("--data-shape", required=True)
    bindstep.add_argument("--classes", type=int, default=1000)
    buckets = sub.add_parser("buckets")
    buckets.add_argument("--train", default=None)
    buckets.add_argument("--vocab", type=int, default=None)
    buckets.add_argument("--buckets", default="10,20,30,40,50,60")
    buckets.add_argument("--batch-size", type=int, default=32)
    buckets.add_argument("--num-hidden", type=int, default=200)
    buckets.add_argument("--num-embed", type=int, default=200)
    buckets.add_argument("--num-layers", type=int, default=2)
    mlp = sub.add_parser("mlp")
    mlp.add_argument("--batch", type=int, default=128)
    mlp.add_argument("--hidden", type=int, default=512)
    mlp.add_argument("--steps", type=int, default=60)
    mlp.add_argument("--seed", type=int, default=0)
    return p


def tokenize_text(mx, fname, vocab=None, invalid_label=-1, start_label=0):
    lines = [list(filter(None, line.split(" "))) for line in open(fname)]
    return mx.rnn.encode_sentences(lines, vocab=vocab, invalid_label=invalid_label,
                                   start_label=start_label)


def lstm_model(mx, args, vocab):
    stack = mx.rnn.SequentialRNNCell()
    for i in range(args.num_layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=args.num_hidden, prefix="lstm_l%d_" % i))

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=len(vocab), output_dim=args.num_embed,
                                 name="embed")
        stack.reset()
        outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True)[0]
        pred = mx.sym.Reshape(outputs, shape=(-1, args.num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=len(vocab), name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)
    return sym_gen


def run_lstm(mx, args):
    import numpy as np
    if args.seed is not None:
        mx.random.seed(args.seed)
        np.random.seed(args.seed)
    buckets = [int(b) for b in args.buckets.split(",")]
    start_label, invalid_label = 1, 0
    train_sent, vocab = tokenize_text(mx, args.train, start_label=start_label,
                                      invalid_label=invalid_label)
    val_sent, _ = tokenize_text(mx, args.valid, vocab=vocab, start_label=start_label,
                                invalid_label=invalid_label)
    data_train = mx.rnn.BucketSentenceIter(train_sent, args.batch_size, buckets=buckets,
                                           invalid_label=invalid_label)
    data_val = mx.rnn.BucketSentenceIter(val_sent, args.batch_size, buckets=buckets,
                                         invalid_label=invalid_label)
    model = mx.mod.BucketingModule(sym_gen=lstm_model(mx, args, vocab),
                                   default_bucket_key=data_train.default_bucket_key,
                                   context=mx.cpu(0))
    opt_params = {"learning_rate": args.lr, "momentum": args.mom, "wd": args.wd}
    init = mx.init.Xavier(factor_type="in", magnitude=2.34)
    if args.mode == "fit":
        valid = []
        model.fit(train_data=data_train, eval_data=data_val,
                  eval_metric=mx.metric.Perplexity(invalid_label), kvstore="device",
                  optimizer="sgd", optimizer_params=opt_params, initializer=init,
                  num_epoch=args.epochs,
                  eval_end_callback=lambda p: valid.append(p.eval_metric.get()[1]))
        return {"valid_perplexity": valid, "vocab": len(vocab)}
    model.bind(data_train.provide_data, data_train.provide_label)
    model.init_params(initializer=init)
    model.init_optimizer(kvstore="device", optimizer="sgd", optimizer_params=opt_params)
    batches = list(data_train)
    seen = set()
    for b in batches:                    # warm-up: one step per bucket (bind, first run)
        if b.bucket_key not in seen:
            seen.add(b.bucket_key)
            model.forward_backward(b)
            model.update()
    mx.nd.waitall()
    if args.serve:
        return serve(mx, model, batches)
    epochs = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        for b in batches:
            model.forward_backward(b)
            model.update()
        mx.nd.waitall()
        epochs.append(time.perf_counter() - t0)
    tokens = sum(b.data[0].shape[0] * b.data[0].shape[1] for b in batches)
    real = sum(int((b.label[0].asnumpy() != invalid_label).sum()) for b in batches)
    return {"epoch_seconds": epochs, "batches": len(batches), "tokens": tokens,
            "real_tokens": real, "vocab": len(vocab)}


def run_chain(mx, args):
    """A chain of ``--n`` ReLUs: ``simple_bind`` (grad_req 'write') and the first forward,
    timed until its output is read (benchmarks/cold_start.py)."""
    shape = tuple(int(x) for x in args.shape.split(","))
    x = mx.sym.Variable("data")
    for _ in range(args.n):
        x = mx.sym.Activation(data=x, act_type="relu")
    c0, t0 = time.process_time(), time.perf_counter()
    exe = x.simple_bind(mx.cpu(), data=shape)
    t1 = time.perf_counter()
    exe.forward(is_train=False)
    exe.outputs[0].asnumpy()
    t2 = time.perf_counter()
    return {"seconds": t2 - t0, "bind_seconds": t1 - t0, "forward_seconds": t2 - t1,
            "cpu_seconds": time.process_time() - c0}


def run_bindstep(mx, args):
    """A saved symbol: ``Module.bind``, ``init_params`` (Xavier) and the first
    forward + backward, timed to ``mx.nd.waitall()`` (benchmarks/cold_start.py)."""
    import numpy as np
    sym = mx.sym.load(args.symbol)
    shape = tuple(int(x) for x in args.data_shape.split(","))
    rng = np.random.RandomState(0)
    batch = mx.io.DataBatch([mx.nd.array(rng.uniform(-1, 1, shape))],
                            [mx.nd.array(rng.randint(0, args.classes, shape[0]))])
    mx.nd.waitall()
    c0, t0 = time.process_time(), time.perf_counter()
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.bind(data_shapes=[("data", shape)], label_shapes=[("softmax_label", (shape[0],))])
    t1 = time.perf_counter()
    mod.init_params(mx.init.Xavier())
    mx.nd.waitall()
    t2 = time.perf_counter()
    mod.forward(batch, is_train=True)
    mod.backward()
    mod.get_outputs()[0].asnumpy()
    mx.nd.waitall()
    t3 = time.perf_counter()
    return {"seconds": t3 - t0, "bind_seconds": t1 - t0, "init_seconds": t2 - t1,
            "step_seconds": t3 - t2, "cpu_seconds": time.process_time() - c0}


def run_buckets(mx, args):
    """lstm_bucketing's model: ``BucketingModule.bind`` of the largest bucket,
    ``init_params``, then ``switch_bucket`` to every other bucket
    (benchmarks/cold_start.py)."""
    if args.vocab is not None:
        vocab = {i: i for i in range(args.vocab)}
    else:
        _, vocab = tokenize_text(mx, args.train, start_label=1, invalid_label=0)
    buckets = sorted(int(b) for b in args.buckets.split(","))
    B, default = args.batch_size, buckets[-1]
    c0, t0 = time.process_time(), time.perf_counter()
    mod = mx.mod.BucketingModule(sym_gen=lstm_model(mx, args, vocab),
                                 default_bucket_key=default, context=mx.cpu(0))
    mod.bind(data_shapes=[("data", (B, default))],
             label_shapes=[("softmax_label", (B, default))])
    mod.init_params()
    mx.nd.waitall()
    per = {str(default): time.perf_counter() - t0}
    for key in reversed(buckets[:-1]):
        t = time.perf_counter()
        mod.switch_bucket(key, [("data", (B, key))], [("softmax_label", (B, key))])
        per[str(key)] = time.perf_counter() - t
    mx.nd.waitall()
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "per_bucket": per, "vocab": len(vocab)}


def run_mlp(mx, args):
    import numpy as np
    rng = np.random.RandomState(args.seed)
    net = mx.sym.var("data")
    for i in (1, 2):
        net = mx.sym.FullyConnected(net, num_hidden=args.hidden, name="fc%d" % i)
        net = mx.sym.Activation(net, act_type="relu", name="relu%d" % i)
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu(0))
    mod.bind([("data", (args.batch, 784))], [("softmax_label", (args.batch,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01,
                                                          "momentum": 0.9})
    batches = [mx.io.DataBatch([mx.nd.array(rng.rand(args.batch, 784))],
                               [mx.nd.array(rng.randint(0, 10, args.batch))])
               for _ in range(8)]
    for b in batches[:3]:
        mod.forward_backward(b)
        mod.update()
    mx.nd.waitall()
    times = []
    for i in range(args.steps):
        t0 = time.perf_counter()
        mod.forward_backward(batches[i % len(batches)])
        mod.update()
        mx.nd.waitall()
        times.append(time.perf_counter() - t0)
    return {"step_seconds": times, "batch": args.batch}


def run_lenet(mx, args):
    """mxnet's symbols/lenet.py trained with Module (forward_backward + update) on
    MNISTIter batches, epochs timed to ``mx.nd.waitall()``; then validation accuracy."""
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data=data, kernel=(5, 5), num_filter=20)
    net = mx.sym.Activation(data=net, act_type="tanh")
    net = mx.sym.Pooling(data=net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Convolution(data=net, kernel=(5, 5), num_filter=50)
    net = mx.sym.Activation(data=net, act_type="tanh")
    net = mx.sym.Pooling(data=net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.FullyConnected(data=mx.sym.Flatten(data=net), num_hidden=500)
    net = mx.sym.Activation(data=net, act_type="tanh")
    net = mx.sym.FullyConnected(data=net, num_hidden=10)
    net = mx.sym.SoftmaxOutput(data=net, name="softmax")
    train = mx.io.MNISTIter(image=args.train_images, label=args.train_labels,
                            batch_size=args.batch, shuffle=True, seed=args.seed, silent=True)
    val = mx.io.MNISTIter(image=args.val_images, label=args.val_labels,
                          batch_size=args.batch, shuffle=False, silent=True)
    mx.random.seed(args.seed)
    mod = mx.mod.Module(net, context=mx.cpu(0))
    mod.bind(train.provide_data, train.provide_label)
    mod.init_params(mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2))
    mod.init_optimizer(optimizer="sgd", optimizer_params={
        "learning_rate": args.lr, "momentum": args.mom, "wd": args.wd})
    if args.serve:
        batches = [b for i, b in enumerate(train)
                   if args.max_batches is None or i < args.max_batches]
        mod.forward_backward(batches[0])        # warm-up
        mod.update()
        mx.nd.waitall()
        return serve(mx, mod, batches)
    seconds, steps = [], 0
    for _ in range(args.epochs):
        train.reset()
        mx.nd.waitall()
        t0 = time.perf_counter()
        for i, batch in enumerate(train):
            if args.max_batches is not None and i >= args.max_batches:
                break
            mod.forward_backward(batch)
            mod.update()
            steps += 1
        mx.nd.waitall()
        seconds.append(time.perf_counter() - t0)
    acc = dict(mod.score(val, mx.metric.Accuracy()))["accuracy"]
    return {"epoch_seconds": seconds, "steps": steps, "batch": args.batch, "val_acc": acc}


def serve(mx, mod, batches):
    """Training steps on request: ``steps N`` on stdin runs the next N steps of
    ``batches`` (cycling) and answers their seconds, timed to ``mx.nd.waitall()``
    (the engine is asynchronous), and the process's CPU seconds over them (all its
    threads: the share of the cores it got); ``quit`` or the end of stdin returns."""
    print(json.dumps({"ready": True, "batches": len(batches), "mxnet": mx.__version__}),
          flush=True)
    i = 0
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        n = int(words[1])
        mx.nd.waitall()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            mod.forward_backward(batches[i % len(batches)])
            mod.update()
            i += 1
        mx.nd.waitall()
        print(json.dumps({"seconds": time.perf_counter() - t0, "steps": n,
                          "cpu_seconds": time.process_time() - c0}), flush=True)
    return {"served": i}


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.threads > 0:
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    logging.basicConfig(level=logging.WARNING)
    import mxnet as mx
    out = {"lstm": run_lstm, "mlp": run_mlp, "lenet": run_lenet, "chain": run_chain,
           "bindstep": run_bindstep, "buckets": run_buckets}[args.cmd](mx, args)
    out.update(mxnet=mx.__version__, threads=args.threads)
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
