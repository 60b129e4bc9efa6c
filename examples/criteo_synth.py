"""A Criteo-shaped synthetic click data set in LibSVM format, for mxnet's sparse examples
(linear_classification and factorization_machine),
which download Avazu and Criteo (tens of GB) where this machine has no internet.

How a data set is made (all from one ``numpy.random.RandomState(seed)``):

* 39 fields, as Criteo's 13 integer and 26 categorical columns: each integer field
  has 8 buckets, each categorical field a vocabulary of 3 to 40 values. A row takes
  one value per field, drawn with Zipf-like frequencies (value ``k`` of a field with
  weight ``1 / (k + 1)``), so every row stores 39 binary features (``index:1``).
* Every (field, value) pair is one feature, placed at a distinct random index below
  ``num_features`` (hashed, as the real data's are), written in ascending order.
* A hidden model gives each row a logit: a weight ``w ~ N(0, 0.5)`` per feature
  summed (``kind='linear'``), plus, with ``kind='fm'``, the pairwise interactions
  ``sum_{i<j} <v_i, v_j>`` of 4-dimensional factors ``v ~ N(0, 0.25)``; then
  Gaussian noise (sd 0.5) and a shift that makes about 30% of the labels 1. The
  label is 1 with the sigmoid of that logit.

The best reachable log-loss is therefore well under ``ln 2`` (the model is learnable)
but not 0 (labels are Bernoulli draws). Train and test rows come from the same
model, drawn one after the other.

    python examples/criteo_synth.py OUT_DIR --kind fm --num-features 100000
"""
from __future__ import annotations

import argparse
import os

import numpy as np

INT_FIELDS, CAT_FIELDS, INT_BUCKETS = 13, 26, 8


def _vocab_sizes(rng):
    return np.concatenate([np.full(INT_FIELDS, INT_BUCKETS),
                           rng.randint(3, 41, size=CAT_FIELDS)]).astype(np.int64)


def _draw_rows(rng, sizes, count):
    """(count, fields) global feature numbers: one Zipf-like value per field."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cols = []
    for size, offset in zip(sizes, offsets):
        p = 1.0 / np.arange(1, size + 1)
        cols.append(offset + rng.choice(size, size=count, p=p / p.sum()))
    return np.stack(cols, axis=1)


def _logits(rng, rows, total, kind):
    w = rng.normal(0, 0.5, size=total)
    logit = w[rows].sum(axis=1)
    if kind == "fm":
        v = rng.normal(0, 0.25, size=(total, 4))
        s = v[rows].sum(axis=1)
        logit += 0.5 * ((s * s).sum(axis=1) - (v[rows] ** 2).sum(axis=(1, 2)))
    logit += rng.normal(0, 0.5, size=len(rows))
    return logit - np.quantile(logit, 0.7)


def make(out_dir, num_features, kind="linear", train_rows=20000, test_rows=5000, seed=0,
         names=("train.libsvm", "test.libsvm")):
    """Write ``names`` (train, test) under ``out_dir``; returns their paths.

    Parameters
    ----------
    out_dir : str
    num_features : int
        Feature indices are below this (the examples' ``data_shape``).
    kind : {'linear', 'fm'}
        The hidden model.
    train_rows, test_rows : int
    seed : int
    names : tuple of str
    """
    rng = np.random.RandomState(seed)
    sizes = _vocab_sizes(rng)
    total = int(sizes.sum())
    index = rng.choice(num_features, size=total, replace=False)
    rows = _draw_rows(rng, sizes, train_rows + test_rows)
    labels = rng.uniform(size=len(rows)) < 1 / (1 + np.exp(-_logits(rng, rows, total, kind)))
    cols = np.sort(index[rows], axis=1)
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, n) for n in names]
    for path, part in zip(paths, (slice(0, train_rows), slice(train_rows, None))):
        with open(path, "w") as f:
            for label, row in zip(labels[part], cols[part]):
                f.write("%d %s\n" % (label, " ".join("%d:1" % c for c in row)))
    return paths


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--kind", choices=("linear", "fm"), default="linear")
    p.add_argument("--num-features", type=int, default=1000001)
    p.add_argument("--train-rows", type=int, default=20000)
    p.add_argument("--test-rows", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(make(args.out_dir, args.num_features, args.kind, args.train_rows, args.test_rows,
               args.seed))


if __name__ == "__main__":
    main()
