"""A text corpus generated from a seeded stochastic grammar whose best achievable
perplexity is known exactly.

The grammar is a first-order Markov chain over ``vocab_size`` words with
sparse, peaked transition rows; each sentence starts from a start
distribution and stops with a per-word probability. A language model sees
``w_1 .. w_t`` and predicts ``w_{t+1}``; the generator knows
``P(w_{t+1} | w_t)``, so the perplexity of the true model on a data set,
``exp(mean -log P(w_{t+1} | w_t))`` over its predicted positions, is the best
any model can reach on it (in expectation), and the example prints it beside
the perplexity it reaches.
"""
from __future__ import annotations

import math

import numpy as np


class MarkovGrammar:
    """Seeded Markov-chain sentence source with known conditional probabilities."""

    def __init__(self, vocab_size=60, branching=4, stop_prob=0.08, seed=0):
        rng = np.random.RandomState(seed)
        self.words = [f"w{i}" for i in range(vocab_size)]
        self.start = rng.dirichlet(np.ones(vocab_size) * 0.5)
        self.trans = np.zeros((vocab_size, vocab_size))
        for i in range(vocab_size):
            nexts = rng.choice(vocab_size, size=branching, replace=False)
            self.trans[i, nexts] = rng.dirichlet(np.ones(branching))
        self.stop_prob = stop_prob
        self.rng = rng

    def sentence(self, min_len=3, max_len=40):
        """One sentence (list of words), between ``min_len`` and ``max_len`` long."""
        w = self.rng.choice(len(self.words), p=self.start)
        out = [w]
        while len(out) < max_len and (len(out) < min_len or self.rng.rand() > self.stop_prob):
            w = self.rng.choice(len(self.words), p=self.trans[w])
            out.append(w)
        return [self.words[i] for i in out]

    def sentences(self, n, **kw):
        return [self.sentence(**kw) for _ in range(n)]

    def best_perplexity(self, sentences, max_len=None):
        """The true model's perplexity on the predicted positions of ``sentences``.

        ``max_len`` drops sentences longer than the largest bucket, as the
        bucketing iterator does.
        """
        index = {w: i for i, w in enumerate(self.words)}
        nll, count = 0.0, 0
        for s in sentences:
            if max_len is not None and len(s) > max_len:
                continue
            ids = [index[w] for w in s]
            for a, b in zip(ids[:-1], ids[1:]):
                nll -= math.log(self.trans[a, b])
                count += 1
        return math.exp(nll / max(count, 1))
