"""Sentence encoding and the bucketing iterator of mxnet's ``mx.rnn``."""
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
    """Encode sentences (lists of str tokens) as lists of ints, building the
    vocabulary as needed.

    Parameters
    ----------
    sentences : list of list of str
    vocab : dict of str -> int, optional
        Given: unknown tokens are an error unless ``unknown_token`` is set.
        None: a new vocabulary ``{invalid_key: invalid_label}`` grows with
        every new token, numbered from ``start_label`` (skipping
        ``invalid_label``).
    invalid_label : int, default -1
    invalid_key : str, default '\\n'
    start_label : int, default 0
    unknown_token : str, optional
        Token that unknown words are mapped to (added to the vocabulary).

    Returns
    -------
    (list of list of int, dict of str -> int)
    """
    idx = start_label
    if vocab is None:
        vocab = {invalid_key: invalid_label}
        new_vocab = True
    else:
        new_vocab = False
    res = []
    for sent in sentences:
        coded = []
        for word in sent:
            if word not in vocab:
                assert (new_vocab or unknown_token), "Unknown token %s" % word
                if idx == invalid_label:
                    idx += 1
                if unknown_token:
                    word = unknown_token
                vocab[word] = idx
                idx += 1
            coded.append(vocab[word])
        res.append(coded)

    return res, vocab


def _part_num_batches(sentences, buckets, batch_size, num_parts, part_index):
    """Full batches of ``batch_size`` that one part's chunk of ``sentences``
    gives over the (sorted) ``buckets``."""
    lo, hi = _part_bounds(len(sentences), num_parts, part_index)
    counts = np.bincount([bisect.bisect_left(buckets, len(s)) for s in sentences[lo:hi]],
                         minlength=len(buckets) + 1)
    return int(sum(n // batch_size for n in counts[:len(buckets)]))


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
    """
    def __init__(self, sentences, batch_size, buckets=None, invalid_label=-1,
                 data_name='data', label_name='softmax_label', dtype='float32',
                 layout='NT', num_parts=1, part_index=0):
        super(BucketSentenceIter, self).__init__()
        _check_parts(num_parts, part_index, len(sentences), 'sentences')
        if not buckets:
            buckets = [i for i, j in enumerate(np.bincount([len(s) for s in sentences]))
                       if j >= batch_size]
        buckets.sort()

        # buckets that no sentence (of any part) falls into are dropped
        used = {bisect.bisect_left(buckets, len(sent)) for sent in sentences}
        kept = [i for i in range(len(buckets)) if i in used]
        lo, hi = _part_bounds(len(sentences), num_parts, part_index)
        ndiscard = 0
        self.data = [[] for _ in buckets]
        for sent in sentences[lo:hi]:
            buck = bisect.bisect_left(buckets, len(sent))
            if buck == len(buckets):
                ndiscard += 1
                continue
            buff = np.full((buckets[buck],), invalid_label, dtype=dtype)
            buff[:len(sent)] = sent
            self.data[buck].append(buff)
        self.data = [np.asarray(self.data[i], dtype=dtype) if self.data[i]
                     else np.empty((0, buckets[i]), dtype=dtype) for i in kept]
        buckets = [buckets[i] for i in kept]

        print("WARNING: discarded %d sentences longer than the largest bucket." % ndiscard)

        self.batch_size = batch_size
        self.buckets = buckets
        self.data_name = data_name
        self.label_name = label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.nddata = []
        self.ndlabel = []
        self.major_axis = layout.find('N')
        self.layout = layout
        self.default_bucket_key = max(buckets)
        self.num_parts = num_parts
        self.part_index = part_index

        if self.major_axis == 0:
            shape = (batch_size, self.default_bucket_key)
        elif self.major_axis == 1:
            shape = (self.default_bucket_key, batch_size)
        else:
            raise ValueError("Invalid layout %s: Must by NT (batch major) or TN (time major)"
                             % layout)
        self.provide_data = [DataDesc(name=self.data_name, shape=shape, layout=self.layout)]
        self.provide_label = [DataDesc(name=self.label_name, shape=shape, layout=self.layout)]

        self.idx = []
        for i, buck in enumerate(self.data):
            self.idx.extend([(i, j) for j in range(0, len(buck) - batch_size + 1, batch_size)])
        self._all_idx = self.idx
        self.num_batches = min(_part_num_batches(sentences, buckets, batch_size, num_parts, q)
                               for q in range(num_parts))
        if num_parts > 1:
            _log.debug("BucketSentenceIter part %d/%d: %d of %d full batches per epoch",
                       part_index, num_parts, self.num_batches, len(self._all_idx))
        self.curr_idx = 0

        self.reset()

    def reset(self):
        """Rewind, shuffling the batch order (``random``) and the sentences
        within each bucket (``numpy.random``)."""
        self.curr_idx = 0
        random.shuffle(self._all_idx)
        # every part serves the same number of batches: keep this many
        if self.num_batches < len(self._all_idx):
            self.idx = self._all_idx[:self.num_batches]
        else:
            self.idx = self._all_idx
        for buck in self.data:
            np.random.shuffle(buck)

        self.nddata = []
        self.ndlabel = []
        for buck in self.data:
            label = np.empty_like(buck)
            label[:, :-1] = buck[:, 1:]
            label[:, -1] = self.invalid_label
            self.nddata.append(ndarray.array(buck, dtype=self.dtype))
            self.ndlabel.append(ndarray.array(label, dtype=self.dtype))

    def next(self):
        """The next batch, with ``bucket_key`` set to its bucket length."""
        if self.curr_idx == len(self.idx):
            raise StopIteration
        i, j = self.idx[self.curr_idx]
        self.curr_idx += 1

        if self.major_axis == 1:
            data = self.nddata[i][j:j + self.batch_size].T
            label = self.ndlabel[i][j:j + self.batch_size].T
        else:
            data = self.nddata[i][j:j + self.batch_size]
            label = self.ndlabel[i][j:j + self.batch_size]

        return DataBatch([data], [label], pad=0,
                         bucket_key=self.buckets[i],
                         provide_data=[DataDesc(name=self.data_name, shape=tuple(data.shape),
                                                layout=self.layout)],
                         provide_label=[DataDesc(name=self.label_name, shape=tuple(label.shape),
                                                 layout=self.layout)])
