"""The synthetic data sets the example runner gives mxnet's programs
(``examples/movielens_synth.py``, ``adult_synth.py``, ``polarity_synth.py``): the formats
the programs parse, the ranges their tables assume, the documented label balance, and
the same files from the same seed."""
from __future__ import annotations

import collections
import filecmp
import os

import numpy as np

from examples import adult_synth, movielens_synth, polarity_synth


def test_movielens_ratings_as_the_program_parses_them(tmp_path):
    movielens_synth.make(str(tmp_path / "a"), train=500, test=100)
    movielens_synth.make(str(tmp_path / "b"), train=500, test=100)
    assert filecmp.cmp(tmp_path / "a" / "r1.train", tmp_path / "b" / "r1.train", shallow=False)
    lines = (tmp_path / "a" / "r1.train").read_text().splitlines()
    assert len(lines) == 500
    fields = np.array([line.split("::") for line in lines])
    assert fields.shape == (500, 4)
    users, movies, stars = (fields[:, i].astype(float) for i in range(3))
    assert users.max() < 71569 and movies.max() < 65135 and users.min() >= 1
    assert set(stars) <= set(np.arange(1, 11) / 2) and stars.std() > 0.5


def test_adult_rows_use_the_programs_vocabularies(tmp_path):
    adult_synth.make(str(tmp_path), train=400, test=100)
    rows = [line.split(", ") for line in (tmp_path / "adult.data").read_text().splitlines()]
    assert len(rows) == 400 and {len(r) for r in rows} == {15}
    columns = list(zip(*rows))
    for index, values in ((1, adult_synth.WORKCLASS), (3, adult_synth.EDUCATION),
                          (5, adult_synth.MARITAL), (7, adult_synth.RELATIONSHIP),
                          (9, adult_synth.GENDER)):
        assert set(columns[index]) <= set(values)
    rich = np.mean([c.startswith(">") for c in columns[14]])
    assert 0.1 < rich < 0.5            # about a quarter, as Adult's
    test_labels = [line.rsplit(", ", 1)[1] for line in
                   (tmp_path / "adult.test").read_text().splitlines()]
    assert all(label.endswith(".") for label in test_labels)


def test_polarity_sentences_carry_their_class(tmp_path):
    polarity_synth.make(str(tmp_path), count=300)
    pos = (tmp_path / "rt-polarity.pos").read_text().splitlines()
    neg = (tmp_path / "rt-polarity.neg").read_text().splitlines()
    assert len(pos) == len(neg) == 300 and all(s.endswith(" .") for s in pos + neg)
    counts = [collections.Counter(" ".join(side).split()) for side in (pos, neg)]
    # each class has its sentiment words: frequent, and 4x as frequent there as in the
    # other class (80% / 20%) -- a learnable signal
    for own, other in (counts, counts[::-1]):
        marked = [w for w, n in own.items() if n >= 8 and n >= 2.5 * other.get(w, 0)]
        assert len(marked) >= 30, marked
    assert os.path.getsize(tmp_path / "rt-polarity.pos") > 10000
