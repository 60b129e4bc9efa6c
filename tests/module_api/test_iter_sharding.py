"""Data sharding (``num_parts`` / ``part_index``) of NDArrayIter and
BucketSentenceIter: every part yields the same number of batches per epoch,
serves only its own contiguous chunk, and ``num_parts=1`` is unchanged."""
import random

import numpy as np
import pytest

from module_api import io
from module_api import rnn

MODES = ('pad', 'discard', 'roll_over')


# --------------------------------------------------------------------------
# NDArrayIter
# --------------------------------------------------------------------------

def _rows(num, seed=0):
    """(data, label): data row i starts with i, label i is 100 + i."""
    rng = np.random.RandomState(seed)
    data = rng.uniform(size=(num, 3)).astype(np.float32)
    data[:, 0] = np.arange(num)
    label = 100 + np.arange(num, dtype=np.float32)
    return data, label


def _chunk(num, parts, part):
    return part * num // parts, (part + 1) * num // parts


def _served(it, epochs=1):
    """Per epoch: list of (row ids, label ids, pad) per batch; resets after each epoch."""
    out = []
    for _ in range(epochs):
        epoch = []
        for batch in it:
            rows = batch.data[0].asnumpy()[:, 0].astype(int).tolist()
            labels = (batch.label[0].asnumpy() - 100).astype(int).tolist()
            epoch.append((rows, labels, batch.pad))
        out.append(epoch)
        it.reset()
    return out


@pytest.mark.parametrize('num', [10, 11, 13])
@pytest.mark.parametrize('parts', [2, 3])
@pytest.mark.parametrize('mode', MODES)
def test_ndarrayiter_parts_equal_batches_and_own_chunk(num, parts, mode):
    data, label = _rows(num)
    counts, served_all = [], set()
    for part in range(parts):
        it = io.NDArrayIter(data, label, batch_size=3, last_batch_handle=mode,
                            num_parts=parts, part_index=part)
        epochs = _served(it, epochs=2)
        counts.append([len(e) for e in epochs])
        lo, hi = _chunk(num, parts, part)
        for epoch in epochs:
            for rows, labels, _ in epoch:
                assert rows == labels                       # labels aligned with data
                assert all(lo <= r < hi for r in rows)      # own chunk (+ wrap-around)
                served_all.update(rows)
        assert it.provide_data[0].shape == (3, 3)
        assert it.provide_label[0].shape == (3,)
    assert all(c == counts[0] for c in counts), counts
    if mode == 'pad':
        assert served_all == set(range(num))


@pytest.mark.parametrize('num,parts', [(10, 3), (11, 2), (13, 3), (12, 3)])
def test_ndarrayiter_part_rows_wrap_to_equal_length(num, parts):
    data, label = _rows(num)
    size = -(-num // parts)
    for part in range(parts):
        it = io.NDArrayIter(data, label, batch_size=size, last_batch_handle='discard',
                            num_parts=parts, part_index=part)
        (epoch,) = _served(it)
        lo, hi = _chunk(num, parts, part)
        expected = [lo + i % (hi - lo) for i in range(size)]
        assert epoch == [(expected, expected, 0)]


def test_ndarrayiter_pad_mode_serves_each_chunk_once():
    data, label = _rows(11)
    # 11 rows, 3 parts: chunks of 3, 4, 4 rows, all padded to 4
    for part, expected in enumerate([[0, 1, 2, 0], [3, 4, 5, 6], [7, 8, 9, 10]]):
        it = io.NDArrayIter(data, label, batch_size=3, num_parts=3, part_index=part)
        (epoch,) = _served(it)
        assert [rows for rows, _, _ in epoch] == [expected[:3], expected[3:] + expected[:2]]
        assert [pad for _, _, pad in epoch] == [0, 2]


def test_ndarrayiter_dict_and_list_inputs_sharded_alike():
    data, label = _rows(13)
    it = io.NDArrayIter({'a': data, 'b': data * 2}, [label, label + 1], batch_size=5,
                        last_batch_handle='discard', num_parts=3, part_index=1)
    (batch,) = list(it)
    names = [d.name for d in it.provide_data] + [d.name for d in it.provide_label]
    assert names == ['a', 'b', '_0_softmax_label', '_1_softmax_label']
    rows = [4, 5, 6, 7, 4]                    # chunk [4, 8), wrapped to 5 rows
    np.testing.assert_array_equal(batch.data[0].asnumpy(), data[rows])
    np.testing.assert_array_equal(batch.data[1].asnumpy(), data[rows] * 2)
    np.testing.assert_array_equal(batch.label[0].asnumpy(), label[rows])
    np.testing.assert_array_equal(batch.label[1].asnumpy(), label[rows] + 1)


def test_ndarrayiter_shuffle_stays_within_part():
    data, label = _rows(13)
    np.random.seed(3)
    it = io.NDArrayIter(data, label, batch_size=2, shuffle=True, num_parts=2, part_index=1)
    for epoch in _served(it, epochs=3):
        rows = [r for rows, labels, _ in epoch for r in rows]
        assert all(6 <= r < 13 for r in rows)
        assert len(epoch) == 4
        assert all(rows_ == labels for rows_, labels, _ in epoch)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('shuffle', [False, True])
def test_ndarrayiter_one_part_unchanged(mode, shuffle):
    data, label = _rows(11)
    np.random.seed(7)
    old = _served(io.NDArrayIter(data, label, 4, shuffle, mode), epochs=3)
    np.random.seed(7)
    new = _served(io.NDArrayIter(data, label, 4, shuffle, mode, num_parts=1, part_index=0),
                  epochs=3)
    assert new == old
    assert [len(e) for e in old] == {'pad': [3, 3, 3], 'discard': [2, 2, 2],
                                     'roll_over': [2, 3, 3]}[mode]


@pytest.mark.parametrize('kwargs,name', [
    ({'num_parts': 0}, 'num_parts'), ({'num_parts': 2.0}, 'num_parts'),
    ({'num_parts': True}, 'num_parts'), ({'num_parts': 2, 'part_index': 2}, 'part_index'),
    ({'num_parts': 2, 'part_index': -1}, 'part_index'), ({'part_index': 1}, 'part_index'),
    ({'num_parts': 12, 'part_index': 0}, 'num_parts=12'),
])
def test_ndarrayiter_bad_parts_raise(kwargs, name):
    data, label = _rows(11)
    with pytest.raises(ValueError, match=name):
        io.NDArrayIter(data, label, batch_size=2, **kwargs)


# --------------------------------------------------------------------------
# BucketSentenceIter
# --------------------------------------------------------------------------

def _sentences(num=200, seed=0, sort=False):
    """Sentence i starts with token i + 1 (so it can be recognised); no token is 0."""
    rng = np.random.RandomState(seed)
    lengths = rng.randint(3, 31, size=num)
    if sort:
        lengths = np.sort(lengths)
    return [[i + 1] + rng.randint(1, 50, size=n - 1).tolist() for i, n in enumerate(lengths)]


def _bucket_iter(sents, buckets, **kw):
    buckets = list(buckets) if buckets else None
    return rnn.BucketSentenceIter(sents, 4, buckets=buckets, invalid_label=0, **kw)


def _check_batch(batch, layout='NT'):
    data, label = batch.data[0].asnumpy(), batch.label[0].asnumpy()
    if layout == 'TN':
        data, label = data.T, label.T
    assert data.shape == (4, batch.bucket_key)
    np.testing.assert_array_equal(label[:, :-1], data[:, 1:])
    assert (label[:, -1] == 0).all()
    return [int(row[0]) - 1 for row in data]    # sentence ids


def _expected_batches(sents, buckets, parts):
    """Least number of full batches (size 4) over the parts' chunks."""
    out = []
    for part in range(parts):
        lo, hi = _chunk(len(sents), parts, part)
        lens = [len(s) for s in sents[lo:hi]]
        out.append(sum(sum(1 for n in lens if lo_b < n <= b) // 4
                       for lo_b, b in zip([0] + buckets[:-1], buckets)))
    return min(out)


@pytest.mark.parametrize('buckets', [[10, 20, 30], None])
@pytest.mark.parametrize('parts', [2, 3, 4])
@pytest.mark.parametrize('sort', [False, True])
def test_bucket_iter_parts_agree(buckets, parts, sort):
    sents = _sentences(sort=sort)
    random.seed(0)
    np.random.seed(0)
    whole = _bucket_iter(sents, buckets)
    expected = _expected_batches(sents, whole.buckets, parts)
    assert expected > 0
    for part in range(parts):
        it = _bucket_iter(sents, buckets, num_parts=parts, part_index=part)
        assert it.buckets == whole.buckets
        assert it.default_bucket_key == whole.default_bucket_key
        assert it.provide_data == whole.provide_data
        assert it.provide_label == whole.provide_label
        assert [d.shape[1] for d in it.data] == it.buckets    # empty buckets keep their place
        lo, hi = _chunk(len(sents), parts, part)
        for _ in range(2):
            ids = [i for batch in it for i in _check_batch(batch)]
            assert len(ids) == 4 * expected
            assert len(set(ids)) == len(ids)
            assert all(lo <= i < hi for i in ids)
            it.reset()


def test_bucket_iter_sorted_parts_have_empty_buckets():
    sents = _sentences(sort=True)
    parts = [_bucket_iter(sents, [10, 20, 30], num_parts=4, part_index=p) for p in range(4)]
    # part 0 holds the shortest sentences only, part 3 the longest
    assert [len(d) for d in parts[0].data][1:] == [0, 0]
    assert len(parts[3].data[0]) == 0
    for it in parts:
        for batch in it:
            rows = _check_batch(batch)
            assert all(len(sents[i]) <= batch.bucket_key for i in rows)
    assert len({len(it.idx) for it in parts}) == 1


def test_bucket_iter_sentences_served_intact():
    sents = _sentences()
    it = _bucket_iter(sents, [10, 20, 30], num_parts=3, part_index=2, layout='TN')
    for batch in it:
        data = batch.data[0].asnumpy().T
        for row, i in zip(data, _check_batch(batch, layout='TN')):
            assert row[row != 0].astype(int).tolist() == sents[i]


@pytest.mark.parametrize('buckets', [[10, 20, 30], None, [5, 10, 20, 25, 30, 40]])
def test_bucket_iter_one_part_unchanged(buckets):
    sents = _sentences()

    def epochs(**kw):
        random.seed(5)
        np.random.seed(5)
        it = _bucket_iter(sents, buckets, **kw)
        out = [it.buckets, it.default_bucket_key, [d.shape for d in it.data]]
        for _ in range(2):
            out.append([(b.bucket_key, b.data[0].asnumpy().tolist()) for b in it])
            it.reset()
        return out

    old = epochs()
    assert epochs(num_parts=1, part_index=0) == old
    if buckets and buckets[-1] == 40:
        assert old[0] == [5, 10, 20, 25, 30]     # the unused bucket 40 is dropped


def test_bucket_iter_keeps_discard_warning(capsys):
    sents = _sentences()
    n_long = sum(len(s) > 20 for s in sents[:100])
    _bucket_iter(sents, [10, 20], num_parts=2, part_index=0)
    assert "discarded %d sentences" % n_long in capsys.readouterr().out


@pytest.mark.parametrize('kwargs,name', [
    ({'num_parts': 0}, 'num_parts'), ({'num_parts': 3, 'part_index': 3}, 'part_index'),
    ({'num_parts': 201}, 'num_parts=201'),
])
def test_bucket_iter_bad_parts_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        _bucket_iter(_sentences(), [10, 20, 30], **kwargs)
