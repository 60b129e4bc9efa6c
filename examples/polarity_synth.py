"""A movie-review-polarity-shaped synthetic set for mxnet's example/cnn_text_classification,
which clones the MR polarity data (``rt-polarity.pos`` / ``.neg``) from GitHub where this
machine has no internet.

The files hold one review sentence a line, as MR's: ``count`` positive and ``count``
negative ones. How they are made (all from one ``numpy.random.RandomState(seed)``):

* a vocabulary of ``words`` made-up lower-case words (two to four syllables), drawn
  with Zipf-like frequencies (word ``k`` with weight ``1 / (k + 10)``), and two lists
  of 40 sentiment words each, one per class;
* a sentence has 4 to 40 words; each word is a sentiment word with probability 0.12,
  of its own class with probability 0.8 (so a few reviews read the other way), else a
  vocabulary word; sentences end with `` .`` and some carry a comma, as MR's.

A sentence's class is learnable from its words but not always (short sentences may
hold no sentiment word, and 20% of the sentiment words belong to the other class).

    python examples/polarity_synth.py OUT_DIR [--count 5331]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "gi",
             "bu", "fe", "ha", "jo", "ly", "qu", "we", "xi"]


def _words(rng, count, taken):
    out = []
    while len(out) < count:
        w = "".join(rng.choice(SYLLABLES, size=rng.randint(2, 5)))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


def _sentence(rng, vocab, weights, own, other):
    words = []
    for _ in range(rng.randint(4, 41)):
        if rng.uniform() < 0.12:
            pool = own if rng.uniform() < 0.8 else other
            words.append(pool[rng.randint(len(pool))])
        else:
            words.append(vocab[rng.choice(len(vocab), p=weights)])
    if len(words) > 8 and rng.uniform() < 0.3:
        words.insert(rng.randint(2, len(words) - 2), ",")
    return " ".join(words) + " .\n"


def make(out_dir, count=5331, words=3000, seed=3):
    """Write ``rt-polarity.pos`` and ``rt-polarity.neg`` into ``out_dir`` (created)."""
    rng = np.random.RandomState(seed)
    taken = set()
    vocab = _words(rng, words, taken)
    positive, negative = _words(rng, 40, taken), _words(rng, 40, taken)
    weights = 1.0 / (np.arange(words) + 10.0)
    weights /= weights.sum()
    os.makedirs(out_dir, exist_ok=True)
    for name, own, other in (("rt-polarity.pos", positive, negative),
                             ("rt-polarity.neg", negative, positive)):
        with open(os.path.join(out_dir, name), "w") as f:
            f.writelines(_sentence(rng, vocab, weights, own, other) for _ in range(count))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--count", type=int, default=5331)
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args(argv)
    make(args.out_dir, args.count, seed=args.seed)


if __name__ == "__main__":
    main()
