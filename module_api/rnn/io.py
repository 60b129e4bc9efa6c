"""Sentence encoding and the bucketing sentence iterator of mxnet 1.x's ``mx.rnn``.

``encode_sentences`` turns tokenised sentences into integer ids, growing a
vocabulary as it meets new tokens. ``BucketSentenceIter`` pads every sentence to
the shortest bucket that holds it and serves next-token language-model batches,
each batch from a single bucket. Both number, pad and shuffle as mxnet 1.9.1 does
(the batch order with ``random``, the rows of each bucket with ``numpy.random``),
so seeded runs see mxnet's batches.
"""
from __future__ import annotations

import bisect
import logging
import random

import numpy as np

from .. import ndarray
from ..io import DataBatch, DataDesc, DataIter, _check_parts, _part_bounds

__all__ = ["encode_sentences", "BucketSentenceIter"]

_log = logging.getLogger(__name__)


def encode_sentences(sentences, vocab=None, invalid_label=-1, invalid_key='\n',
                     start_label=0, unknown_token=None):
    """Map sentences of str tokens to lists of int ids.

    Parameters
    ----------
    sentences : list of list of str
    vocab : dict of str -> int, optional
        An existing vocabulary: a token missing from it is an error unless
        ``unknown_token`` is given. If None, a new vocabulary
        ``{invalid_key: invalid_label}`` is built, each new token taking the next
        id counted from ``start_label`` (``invalid_label`` is skipped).
    invalid_label : int, default -1
        The id reserved for padding.
    invalid_key : str, default '\\n'
        The key of ``invalid_label`` in a new vocabulary.
    start_label : int, default 0
        The first id handed out.
    unknown_token : str, optional
        The key missing tokens are entered under. As in mxnet, each missing token
        takes the next free id and ``vocab[unknown_token]`` is set to it.

    Returns
    -------
    tuple
        ``(encoded, vocab)``: a list of lists of int, and the vocabulary (the
        given dict, updated in place, or the new one).
    """
    building = vocab is None
    if building:
        vocab = {invalid_key: invalid_label}
    next_id = start_label
    encoded = []
    for sentence in sentences:
        ids = []
        for token in sentence:
            if token not in vocab:
                _refuse_unknown(token, building, unknown_token)
                next_id = _enter_token(vocab, token, next_id, invalid_label, unknown_token)
                token = unknown_token or token
            ids.append(vocab[token])
        encoded.append(ids)
    return encoded, vocab


def _refuse_unknown(token, building, unknown_token):
    """AssertionError (mxnet's type) for a token a given vocabulary lacks."""
    if not (building or unknown_token):
        raise AssertionError(
            "Unknown token %s: it is not in the given vocab; pass unknown_token=... "
            "to map missing tokens to one entry, or vocab=None to build a new "
            "vocabulary" % (token,))


def _enter_token(vocab, token, next_id, invalid_label, unknown_token):
    """Give ``token`` (or ``unknown_token`` in its place) the id ``next_id``,
    stepping once over ``invalid_label``; return the id after it."""
    if next_id == invalid_label:
        next_id += 1
    vocab[unknown_token or token] = next_id
    return next_id + 1


def _default_buckets(sentences, batch_size):
    """Every sentence length that occurs at least ``batch_size`` times."""
    counts = np.bincount([len(sentence) for sentence in sentences])
    return [length for length, count in enumerate(counts) if count >= batch_size]


def _sorted_buckets(buckets, sentences, batch_size):
    if not buckets:
        return _default_buckets(sentences, batch_size)
    if isinstance(buckets, list):
        buckets.sort()                   # in place, as mxnet does with the caller's list
        return buckets
    return sorted(buckets)


def _bucket_index(buckets, length):
    """Index of the shortest bucket holding ``length``; ``len(buckets)`` if none."""
    return bisect.bisect_left(buckets, length)


def _fill_buckets(sentences, buckets, invalid_label, dtype):
    """Pad each sentence with ``invalid_label`` to its bucket's length.

    Returns
    -------
    tuple
        ``(rows, discarded)``: for each bucket a 2-d array of its sentences in
        order of appearance (``(0, length)`` if none), and how many sentences were
        longer than the largest bucket.
    """
    members = [[] for _ in buckets]
    discarded = 0
    for sentence in sentences:
        slot = _bucket_index(buckets, len(sentence))
        if slot == len(buckets):
            discarded += 1
        else:
            members[slot].append(sentence)
    rows = []
    for length, group in zip(buckets, members):
        padded = np.full((len(group), length), invalid_label, dtype=dtype)
        for row, sentence in zip(padded, group):
            row[:len(sentence)] = sentence
        rows.append(padded)
    return rows, discarded


def _part_num_batches(sentences, buckets, batch_size, num_parts, part_index):
    """Full batches of ``batch_size`` that one part's chunk of ``sentences``
    gives over the (sorted) ``buckets``."""
    lo, hi = _part_bounds(len(sentences), num_parts, part_index)
    per_bucket = np.bincount([_bucket_index(buckets, len(s)) for s in sentences[lo:hi]],
                             minlength=len(buckets) + 1)
    return int(sum(count // batch_size for count in per_bucket[:len(buckets)]))


def _batch_major_axis(layout):
    """Axis of the batch in ``layout``: 0 for 'NT', 1 for 'TN'."""
    axis = layout.find('N')
    if axis not in (0, 1):
        raise ValueError("Invalid layout %s: Must by NT (batch major) or TN (time major)"
                         % layout)
    return axis


def _next_token_labels(rows, invalid_label):
    """Each row shifted left by one step, ending in ``invalid_label``."""
    labels = np.empty_like(rows)
    labels[:, :-1] = rows[:, 1:]
    labels[:, -1] = invalid_label
    return labels


class BucketSentenceIter(DataIter):
    """Bucketing iterator for language models: each sentence is padded with
    ``invalid_label`` to the smallest bucket that holds it; the label is the
    data shifted left by one step (the next token), ending in ``invalid_label``.

    Parameters
    ----------
    sentences : list of list of int
        Encoded sentences.
    batch_size : int
    buckets : list of int, optional
        Bucket lengths; by default every sentence length that occurs at least
        ``batch_size`` times. Sentences longer than the largest bucket are
        discarded, and buckets that no sentence falls into are dropped.
    invalid_label : int, default -1
    data_name : str, default 'data'
    label_name : str, default 'softmax_label'
    dtype : str, default 'float32'
    layout : str, default 'NT'
        'NT' gives (batch_size, length) batches, 'TN' (length, batch_size).
    num_parts : int, default 1
        Number of parts the sentences are split into, one per worker of a
        distributed job (e.g. ``kv.num_workers``).
    part_index : int, default 0
        The part this iterator serves, ``0 <= part_index < num_parts``
        (e.g. ``kv.rank``). With N sentences, part p holds sentences
        ``[p*N//P, (p+1)*N//P)``. The bucket list (also when computed from
        ``buckets=None``), ``default_bucket_key``, ``provide_data`` and
        ``provide_label`` are decided from all sentences, so they are the same
        on every part, and a bucket that is empty in this part keeps its place
        (``self.data[i]`` has no rows). Every part yields the same number of
        batches per epoch: the least number of full batches any part's chunk
        gives; each ``reset`` keeps that many of the shuffled batches.

    Raises
    ------
    ValueError
        For a layout other than 'NT' / 'TN', or when no sentence fits a bucket.
    """
    def __init__(self, sentences, batch_size, buckets=None, invalid_label=-1,
                 data_name='data', label_name='softmax_label', dtype='float32',
                 layout='NT', num_parts=1, part_index=0):
        super().__init__()
        _check_parts(num_parts, part_index, len(sentences), 'sentences')
        buckets = self._buckets_in_use(sentences, batch_size, buckets)
        lo, hi = _part_bounds(len(sentences), num_parts, part_index)
        self.data, discarded = _fill_buckets(sentences[lo:hi], buckets, invalid_label, dtype)
        print("WARNING: discarded %d sentences longer than the largest bucket." % discarded)

        self.batch_size = batch_size
        self.buckets = buckets
        self.data_name = data_name
        self.label_name = label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.layout = layout
        self.num_parts = num_parts
        self.part_index = part_index
        self.nddata = []
        self.ndlabel = []
        self.default_bucket_key = max(buckets)
        self.major_axis = _batch_major_axis(layout)
        full_shape = self._shape(self.default_bucket_key)
        self.provide_data = [DataDesc(name=data_name, shape=full_shape, layout=layout)]
        self.provide_label = [DataDesc(name=label_name, shape=full_shape, layout=layout)]

        self._index_batches(sentences)
        self.reset()

    @staticmethod
    def _buckets_in_use(sentences, batch_size, buckets):
        """The sorted buckets that at least one sentence (of any part) falls into."""
        buckets = _sorted_buckets(buckets, sentences, batch_size)
        used = {_bucket_index(buckets, len(sentence)) for sentence in sentences}
        kept = [length for slot, length in enumerate(buckets) if slot in used]
        if not kept:
            raise ValueError(
                "BucketSentenceIter: no bucket holds any of the %d sentences (buckets=%s, "
                "batch_size=%d); pass buckets reaching the sentence lengths, or, with "
                "buckets=None, a batch_size no larger than the count of the most common "
                "length" % (len(sentences), buckets, batch_size))
        return kept

    def _shape(self, length):
        """A batch's shape in this iterator's layout."""
        if self.major_axis == 0:
            return (self.batch_size, length)
        return (length, self.batch_size)

    def _index_batches(self, sentences):
        """``(bucket, first row)`` of every full batch of this part, and the
        number of batches every part serves per epoch."""
        self.idx = [(slot, start) for slot, rows in enumerate(self.data)
                    for start in range(0, len(rows) - self.batch_size + 1, self.batch_size)]
        self._all_idx = self.idx
        self.num_batches = min(
            _part_num_batches(sentences, self.buckets, self.batch_size, self.num_parts, part)
            for part in range(self.num_parts))
        if self.num_parts > 1:
            _log.debug("BucketSentenceIter part %d/%d: %d of %d full batches per epoch",
                       self.part_index, self.num_parts, self.num_batches, len(self._all_idx))
        self.curr_idx = 0

    def reset(self):
        """Rewind, shuffling the batch order (``random``) and the sentences
        within each bucket (``numpy.random``)."""
        self.curr_idx = 0
        random.shuffle(self._all_idx)
        # every part serves the same number of batches: keep the first that many
        if self.num_batches < len(self._all_idx):
            self.idx = self._all_idx[:self.num_batches]
        else:
            self.idx = self._all_idx
        for rows in self.data:
            np.random.shuffle(rows)
        self.nddata = [ndarray.array(rows, dtype=self.dtype) for rows in self.data]
        self.ndlabel = [ndarray.array(_next_token_labels(rows, self.invalid_label),
                                      dtype=self.dtype) for rows in self.data]

    def next(self):
        """The next batch, with ``bucket_key`` set to its bucket length."""
        if self.curr_idx == len(self.idx):
            raise StopIteration
        slot, start = self.idx[self.curr_idx]
        self.curr_idx += 1
        rows = slice(start, start + self.batch_size)
        data, label = self.nddata[slot][rows], self.ndlabel[slot][rows]
        if self.major_axis == 1:
            data, label = data.T, label.T
        return DataBatch([data], [label], pad=0, bucket_key=self.buckets[slot],
                         provide_data=[self._desc(self.data_name, data)],
                         provide_label=[self._desc(self.label_name, label)])

    def _desc(self, name, array):
        return DataDesc(name=name, shape=tuple(array.shape), layout=self.layout)
