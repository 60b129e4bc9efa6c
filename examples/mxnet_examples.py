"""Run mxnet 1.9.1's own example programs, from an apache/mxnet checkout, with mxnet or with
symtriton (``import mxnet`` resolved to ``module_api`` by ``tests/mxnet_unittest/shim``),
on the same data, and read the metric they log.

    python examples/mxnet_examples.py --source /tmp/mxnet-src --side mxnet \\
        --python /work/main/.mxnet-venv/bin/python --record    # writes the JSON below
    python examples/mxnet_examples.py --source /tmp/mxnet-src --side symtriton

Nothing of mxnet's is kept in this repository: each run copies the example's folder
from the checkout into a temporary folder. The programs are run unchanged except for
what a machine without a GPU and without the internet needs, the same on both sides:

* their GPU switches are set to the CPU branch each program has
  (``num_gpu = 0``, ``demo_data_model_parallelism = False``, ``ctx = mx.cpu()``);
  ``dsd``'s pruning schedule counts epochs of 8,000 images, not MNIST's 60,000;
  ``stochastic_depth`` runs 6 epochs, not 2 (after 2 its accuracy is the draws');
* ``numba`` (python_loss.py jit-compiles its numpy loss gradient) is replaced by a
  module whose ``jit`` returns the function unchanged (the same arithmetic, slower);
* MNIST is this project's split of the official test set (:mod:`examples.mnist_data`:
  8,000 training and 2,000 validation images) under the names the programs read;
  word_lm and rnn/bucketing's cudnn_rnn_bucketing read the Sherlock Holmes corpus
  (``examples/data/sherlockholmes``);
* ``example/sparse``'s linear_classification (Avazu) and factorization_machine (Criteo)
  read a Criteo-shaped synthetic LibSVM data set (:mod:`examples.criteo_synth`, a fixed
  seed) under the names they read: linear_classification at its own 1,000,001 features
  (Avazu's), factorization_machine at 20,000 (``--input-size``); ``_small`` runs use
  fewer rows and epochs; ``nce_toy`` (example/nce-loss) makes its own random data;
  ``example/sparse/matrix_factorization`` reads MovieLens-shaped synthetic ratings
  (:mod:`examples.movielens_synth`, 20,000 for training and 4,000 for validation) in
  ``data/ml-10M100K``, where the program looks before it downloads (model-parallel's
  matrix_factorization in ``./ml-10M100K``, beside an empty ``ml-10m.zip``, the file it
  checks for);
  ``example/sparse/wide_deep`` reads census-shaped synthetic rows
  (:mod:`examples.adult_synth`: 6,000 and 1,500) as ``data/adult.data`` / ``adult.test``,
  run with ``PYTHONHASHSEED=0`` on both sides (it hashes its features with ``hash``);
  ``example/cnn_text_classification`` reads MR-polarity-shaped synthetic sentences
  (:mod:`examples.polarity_synth`) as ``data/rt-polaritydata``, and imports ``word2vec``
  (for pre-trained vectors it does not use here): a module that refuses to load is
  put beside it, as numba's stand-in is.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from examples import adult_synth, criteo_synth, movielens_synth, polarity_synth  # noqa: E402
from examples.mnist_data import split_files  # noqa: E402

FIGURES = os.path.join(ROOT, "examples", "data", "mxnet_module_examples.json")
SHIM = os.path.join(ROOT, "tests", "mxnet_unittest", "shim")
SHERLOCK = os.path.join(ROOT, "examples", "data", "sherlockholmes")
WORD_LM_ARGS = ["--emsize", "64", "--nhid", "64", "--nlayers", "1", "--epochs", "1",
                "--batch_size", "32", "--bptt", "35", "--log-interval", "50"]
TRAIN_MNIST_ARGS = ["--num-epochs", "4", "--num-examples", "8000", "--kv-store", "local",
                    "--disp-batches", "50"]
# train_mnist.py reads the gzipped IDX files into NDArrayIter; here it reads the .rec files
# that im2rec packed from the same images, through ImageRecordIter (pixels / 255 as it does)
REC_ITER = ("    fit.fit(args, sym, lambda args, kv: tuple(mx.io.ImageRecordIter("
            "path_imgrec='data/mnist_%s.rec' % part, data_shape=(1, 28, 28), "
            "batch_size=args.batch_size, scale=1.0 / 255, shuffle=part == 'train') "
            "for part in ('train', 'val')))")
LINEAR_NLL = r"epoch \d+, eval nll = ([\d.]+)"
FM_LOG_LOSS = r"epoch \d+, eval log loss = ([\d.]+)"
FM_ARGS = ["--data-train", "data/train.libsvm", "--data-test", "data/test.libsvm",
           "--input-size", "20000", "--log-interval", "10"]
# the synthetic data of example/sparse (examples/criteo_synth.py): name -> (kind,
# num_features, train rows, test rows, file names, seed)
SPARSE_DATA = {
    "sparse_linear_classification": ("linear", 1000001, 10000, 2500,
                                     ("avazu-app", "avazu-app.t"), 0),
    "sparse_linear_classification_small": ("linear", 1000001, 2000, 500,
                                           ("avazu-app", "avazu-app.t"), 0),
    "sparse_factorization_machine": ("fm", 20000, 10000, 2500,
                                     ("train.libsvm", "test.libsvm"), 1),
    "sparse_factorization_machine_small": ("fm", 20000, 2000, 500,
                                           ("train.libsvm", "test.libsvm"), 1),
}
# name: (folder in example/, script, arguments, edits (old line, new line), metric pattern)
EXAMPLES = {
    "python_loss": ("module", "python_loss.py", [], [("    num_gpu = 2", "    num_gpu = 0")],
                    r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    # 10 epochs stop while the accuracy still climbs (0.62 at 10, 0.95 at 30, on mxnet)
    "python_loss_30_epochs": ("module", "python_loss.py", [],
                              [("    num_gpu = 2", "    num_gpu = 0"),
                               ("    n_epoch = 10", "    n_epoch = 30")],
                              r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    "mnist_mlp": ("module", "mnist_mlp.py", [], [], r"^accuracy=([\d.]+)"),
    # on 8,000 images neither side leaves chance in 2 epochs from mxnet's default
    # Uniform(0.01) initialization, and when it does depends on the draw (about epoch 6):
    # after 30 epochs (the loop, then fit from a new Module) both have converged
    "mnist_mlp_30_epochs": ("module", "mnist_mlp.py", [], [("n_epoch = 2", "n_epoch = 30")],
                            r"^accuracy=([\d.]+)"),
    "sequential_module": ("module", "sequential_module.py", [],
                          [("demo_data_model_parallelism = True",
                            "demo_data_model_parallelism = False")],
                          r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    "sequential_module_30_epochs": ("module", "sequential_module.py", [],
                                    [("demo_data_model_parallelism = True",
                                      "demo_data_model_parallelism = False"),
                                     ("n_epoch = 2", "n_epoch = 30")],
                                    r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    "word_lm": ("rnn/word_lm", "train.py", WORD_LM_ARGS,
                [("    ctx = mx.gpu()", "    ctx = mx.cpu()")],
                r"Iter\[\d+\] Valid loss:\s+[\d.]+, Perplexity: ([\d.]+)"),
    "train_mnist_rec": ("image-classification", "train_mnist.py", TRAIN_MNIST_ARGS,
                        [("    fit.fit(args, sym, get_mnist_iter)", REC_ITER)],
                        r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    # DSD training: an SGD subclass registered as 'sparsesgd' prunes each layer's smallest
    # weights with topk masks (0%, then 50%, then 70% of weights; 0 / 30 / 50% of biases),
    # Module over two cpu contexts, checkpoints each epoch. Its epoch count is
    # hard-coded for MNIST's 60,000 training images: set to the split's 8,000
    "dsd": ("dsd", "mlp.py", ["--pruning_switch_epoch", "2,4,6", "--weight_sparsity",
                              "0,50,70", "--bias_sparsity", "0,30,50"],
            [("    batches_per_epoch = ceil(60000.0/batch_size)",
              "    batches_per_epoch = ceil(8000.0/batch_size)")],
            r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    # stochastic depth: a BaseModule subclass around two Modules (the residual block and
    # its skip), chained by SequentialModule; its blocks die at random each batch. Two
    # epochs leave the figure to the draws (0.92-0.95 on both sides): six converge
    "stochastic_depth": ("stochastic-depth", "sd_mnist.py", [],
                         [("n_epoch = 2", "n_epoch = 6")],
                         r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    # noise-contrastive estimation on the example's own random data (20 epochs)
    "nce_toy": ("nce-loss", "toy_nce.py", [], [],
                r"Epoch\[\d+\] Validation-nce-accuracy=([\d.]+)"),
    "sparse_linear_classification": ("sparse/linear_classification", "train.py",
                                     ["--batch-size", "64", "--num-epoch", "5"],
                                     [], LINEAR_NLL),
    "sparse_linear_classification_small": ("sparse/linear_classification", "train.py",
                                           ["--batch-size", "16", "--num-epoch", "2"],
                                           [], LINEAR_NLL),
    "sparse_factorization_machine": ("sparse/factorization_machine", "train.py",
                                     FM_ARGS + ["--batch-size", "100", "--num-epoch", "5"],
                                     [], FM_LOG_LOSS),
    # embeddings of 71,569 users and 65,135 movies with row_sparse weights and
    # sparse_grad, Module with a 'device' kvstore, prepare(None, ...) before scoring
    "sparse_matrix_factorization": ("sparse/matrix_factorization", "train.py",
                                    ["--num-epoch", "3", "--log-interval", "100"], [],
                                    r"epoch \d+, eval MSE = ([\d.]+)"),
    # the bucketed LSTM language model on FusedRNNCell (the RNN operator), BucketingModule.fit
    # with a device kvstore and do_rnn_checkpoint; stacked: one FusedRNNCell per layer in a
    # SequentialRNNCell with DropoutCells between (epoch 1 spreads 182-185 over mxnet's runs)
    "cudnn_rnn_bucketing": ("rnn/bucketing", "cudnn_rnn_bucketing.py",
                            ["--num-epochs", "2", "--disp-batches", "100", "--model-prefix",
                             "lm"], [], r"Epoch\[\d+\] Validation-perplexity=([\d.]+)"),
    "cudnn_rnn_bucketing_stacked": ("rnn/bucketing", "cudnn_rnn_bucketing.py",
                                    ["--num-epochs", "2", "--disp-batches", "100",
                                     "--stack-rnn", "1", "--dropout", "0.3"], [],
                                    r"Epoch\[\d+\] Validation-perplexity=([\d.]+)"),
    # model parallelism: the embeddings on one context group, the rest on another
    # (group2ctxs, mx.AttrScope(ctx_group=)), over two contexts of data parallelism; its
    # second group is GPUs: cpu(i) on both sides
    "model_parallel_matrix_factorization": (
        "model-parallel/matrix_factorization", "train.py", ["--num-epoch", "3"],
        [("'dev2':[mx.gpu(i) for i in range(num_gpus)]",
          "'dev2':[mx.cpu(i) for i in range(num_gpus)]")],
        r"Epoch\[\d+\] Validation-mse=([\d.]+)"),
    # a CNN over word embeddings (convolutions of 3, 4 and 5 words, max pooling over the
    # sentence, Concat, FullyConnected), Module.fit with RMSProp; its --gpus default ('')
    # fails its own 'is not None' test on a CPU: both sides get the edit
    "cnn_text_classification": ("cnn_text_classification", "text_cnn.py",
                                ["--num-epochs", "3", "--disp-batches", "100"],
                                [("    if args.gpus is not None:", "    if args.gpus:")],
                                r"Epoch\[\d+\] Validation-accuracy=([\d.]+)"),
    # wide (a csr . row_sparse linear part) and deep (row_sparse embeddings, sparse_grad)
    # on census-shaped rows, Adam, checkpoints with optimizer states each epoch
    "sparse_wide_deep": ("sparse/wide_deep", "train.py", ["--log-interval", "20"], [],
                         r"epoch \d+, accuracy = ([\d.]+)"),
    "sparse_factorization_machine_small": ("sparse/factorization_machine", "train.py",
                                           FM_ARGS + ["--batch-size", "50",
                                                      "--num-epoch", "2"],
                                           [], FM_LOG_LOSS),
}


# wide_deep hashes its crossed columns with Python's hash(): the same features on both
# sides need the same string hashes
EXAMPLE_ENV = {"sparse_wide_deep": {"PYTHONHASHSEED": "0"}}


def _prepare(source, name, work):
    """Copy the example's folder into ``work``, apply the CPU edits, link the data."""
    folder, script, _, edits, _ = EXAMPLES[name]
    dest = os.path.join(work, folder)
    shutil.copytree(os.path.join(source, "example", folder), dest)
    path = os.path.join(dest, script)
    with open(path) as f:
        text = f.read()
    for old, new in edits:
        if old not in text:
            raise ValueError(f"{path}: expected the line {old!r} (is the checkout 1.9.1?)")
        text = text.replace(old, new)
    with open(path, "w") as f:
        f.write(text)
    data = os.path.join(dest, "data")
    os.makedirs(data, exist_ok=True)
    if folder == "image-classification":
        pack_mnist_rec(os.path.join(work, "split"), data)
    elif folder in ("module", "dsd", "stochastic-depth"):
        split = split_files(out_dir=os.path.join(work, "split"))
        for ours, theirs in (("train_images", "train-images-idx3-ubyte"),
                             ("train_labels", "train-labels-idx1-ubyte"),
                             ("val_images", "t10k-images-idx3-ubyte"),
                             ("val_labels", "t10k-labels-idx1-ubyte")):
            os.symlink(split[ours], os.path.join(data, theirs))
    elif name == "sparse_matrix_factorization":
        movielens_synth.make(os.path.join(data, "ml-10M100K"))
    elif name == "sparse_wide_deep":
        adult_synth.make(data)
    elif name == "model_parallel_matrix_factorization":
        # the program reads ./ml-10M100K and downloads unless ./ml-10m.zip exists
        movielens_synth.make(os.path.join(dest, "ml-10M100K"))
        open(os.path.join(dest, "ml-10m.zip"), "w").close()
    elif name == "cnn_text_classification":
        polarity_synth.make(os.path.join(data, "rt-polaritydata"))
    elif name in SPARSE_DATA:
        kind, features, train, test, names, seed = SPARSE_DATA[name]
        criteo_synth.make(data, features, kind, train, test, seed, names)
    elif folder in ("rnn/word_lm", "rnn/bucketing"):
        for part in ("train", "valid", "test"):
            os.symlink(os.path.join(SHERLOCK, f"sherlockholmes.{part}.txt"),
                       os.path.join(data, f"sherlockholmes.{part}.txt"))
    with open(os.path.join(work, "numba.py"), "w") as f:
        f.write("def jit(*args, **kwargs):\n    if args and callable(args[0]):\n"
                "        return args[0]\n    return lambda fn: fn\n")
    with open(os.path.join(work, "word2vec.py"), "w") as f:
        # cnn_text_classification imports it for pre-trained vectors, which are not used
        f.write("def load(*args, **kwargs):\n    raise ImportError('word2vec is not "
                "installed: the examples run without pre-trained vectors')\n")
    return dest


def pack_mnist_rec(work, data, count=None):
    """Write the MNIST split's images as PNG files with a ``.lst`` per part, and pack each
    into ``data/mnist_<part>.rec`` with this project's im2rec (``--pass-through``).

    Parameters
    ----------
    work : str
        A folder for the split and the PNG files.
    data : str
        Where ``mnist_train.rec`` / ``mnist_val.rec`` (and their .lst, .idx) go.
    count : int, optional
        Pack only the first ``count`` images of each part (tests).
    """
    import numpy as np
    from PIL import Image

    split = split_files(out_dir=work)
    for part in ("train", "val"):
        images = _read_idx(split[f"{part}_images"])[:count]
        labels = _read_idx(split[f"{part}_labels"])[:count]
        root = os.path.join(work, f"png_{part}")
        os.makedirs(root, exist_ok=True)
        prefix = os.path.join(data, f"mnist_{part}")
        with open(prefix + ".lst", "w") as lst:
            for i, (image, label) in enumerate(zip(images, labels)):
                Image.fromarray(np.ascontiguousarray(image)).save(os.path.join(root, f"{i}.png"))
                lst.write(f"{i}\t{float(label)}\t{i}.png\n")
        subprocess.run([sys.executable, "-m", "module_api.tools.im2rec", "--pass-through",
                        "--no-shuffle", prefix, root], check=True, capture_output=True,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=600)


def _read_idx(path):
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def run(source, name, side, python=None, timeout=1800):
    """Run example ``name`` on ``side`` ('mxnet' or 'symtriton'); returns (metrics, log)."""
    folder, script, args, _, pattern = EXAMPLES[name]
    with tempfile.TemporaryDirectory(prefix=f"mxnet-example-{name}-") as work:
        dest = _prepare(source, name, work)
        paths = [work] + ([SHIM, ROOT] if side == "symtriton" else [])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), **EXAMPLE_ENV.get(name, {}))
        proc = subprocess.run([python or sys.executable, script] + args, cwd=dest, env=env,
                              capture_output=True, text=True, timeout=timeout)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"{name} on {side} exited with {proc.returncode}:\n{log[-3000:]}")
    found = [float(next(g for g in m.groups() if g))
             for m in re.finditer(pattern, log, re.MULTILINE)]
    if not found:
        raise RuntimeError(f"{name} on {side}: no metric matching {pattern!r} in:\n{log[-3000:]}")
    return found, log


def record(figures, names):
    """Merge ``figures`` (mxnet's) into the JSON, each with the command and date that made it."""
    doc = json.load(open(FIGURES)) if os.path.exists(FIGURES) else {}
    repeat = max((len(f.get("finals", [0])) for f in figures.values()), default=1)
    command = ("python examples/mxnet_examples.py --side mxnet --python "
               "<mxnet 1.9.1 venv>/bin/python --record " +
               (f"--repeat {repeat} " if repeat > 1 else "") + "--only " + " ".join(names))
    for figure in figures.values():
        figure.update(command=command, date=datetime.date.today().isoformat())
    doc.setdefault("examples", {}).update(figures)
    doc["provenance"] = {
        "mxnet": "1.9.1 (pip, CPU build with MKL-DNN)",
        "source": "apache/mxnet tag 1.9.1, example/ (the CPU edits and the data: "
                  "examples/mxnet_examples.py's docstring)",
        "command": "each example's own 'command' and 'date'"}
    with open(FIGURES, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", default=os.environ.get("MXNET_SOURCE", "/tmp/mxnet-src"))
    p.add_argument("--side", choices=("mxnet", "symtriton"), default="symtriton")
    p.add_argument("--python", default=None, help="the interpreter (mxnet's venv for mxnet)")
    p.add_argument("--only", nargs="*", default=list(EXAMPLES))
    p.add_argument("--record", action="store_true", help=f"write {FIGURES} (mxnet side)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each example: an unseeded program's figure spreads; with "
                        "more than one, the median is recorded as 'final' and every run's in "
                        "'finals' (the test accepts the whole spread)")
    args = p.parse_args(argv)
    figures = {}
    for name in args.only:
        finals = []
        for _ in range(max(1, args.repeat)):
            metrics, _ = run(args.source, name, args.side, args.python)
            finals.append(metrics[-1])
            print(f"RESULT {name} {args.side} final={metrics[-1]:.6f}", flush=True)
        figures[name] = {"final": sorted(finals)[len(finals) // 2], "per_epoch": metrics}
        if len(finals) > 1:
            figures[name]["finals"] = finals
    if args.record:
        record(figures, args.only)

if __name__ == "__main__":
    main()
