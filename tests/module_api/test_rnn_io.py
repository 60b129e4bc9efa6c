"""mx.rnn's encode_sentences, BucketSentenceIter and rnn checkpoints; the
expected values were produced by mxnet 1.9.1 with the same seeds."""
import random

import numpy as np
import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from module_api import rnn

SENTS = [s.split() for s in ["a b c", "b c d e", "a a", "c d", "e f g h i", "b b b", "a c e",
                             "d e", "f g h i j k", "a b"]]
ENCODED = [[1, 2, 3], [2, 3, 4, 5], [1, 1], [3, 4], [5, 6, 7, 8, 9], [2, 2, 2], [1, 3, 5],
           [4, 5], [6, 7, 8, 9, 10, 11], [1, 2]]


def test_encode_sentences_builds_vocab_like_mxnet():
    enc, vocab = rnn.encode_sentences(SENTS, start_label=1, invalid_label=0)
    assert enc == ENCODED
    assert vocab == {'\n': 0, 'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5, 'f': 6, 'g': 7, 'h': 8,
                     'i': 9, 'j': 10, 'k': 11}
    enc, vocab = rnn.encode_sentences([["x", "y"], ["y", "z"]], invalid_label=-1)
    assert enc == [[0, 1], [1, 2]] and vocab == {'\n': -1, 'x': 0, 'y': 1, 'z': 2}
    # the invalid label is skipped when numbering
    enc, vocab = rnn.encode_sentences([["a", "b", "c"]], invalid_label=1, start_label=0)
    assert enc == [[0, 2, 3]] and vocab == {'\n': 1, 'a': 0, 'b': 2, 'c': 3}


def test_encode_sentences_with_given_vocab():
    enc, vocab = rnn.encode_sentences([["a", "q"]], vocab={'a': 5, '\n': 0},
                                      unknown_token='<unk>')
    assert enc == [[5, 0]] and vocab == {'a': 5, '\n': 0, '<unk>': 0}
    with pytest.raises(AssertionError, match="Unknown token"):
        rnn.encode_sentences([["zz"]], vocab={'a': 1})


def test_encode_sentences_unknown_token_takes_the_next_id_each_time():
    # mxnet 1.9.1: every missing token (a repeated one too) takes the next id and
    # vocab[unknown_token] is left at the last of them
    enc, vocab = rnn.encode_sentences([["a", "q", "r", "q"]], vocab={'a': 5, '\n': 0},
                                      unknown_token='<unk>')
    assert enc == [[5, 0, 1, 2]] and vocab == {'a': 5, '\n': 0, '<unk>': 2}
    # building a vocabulary with unknown_token: every new token goes under it
    enc, vocab = rnn.encode_sentences([["x", "y", "x"], ["z"]], unknown_token='<unk>',
                                      start_label=-1, invalid_label=-1)
    assert enc == [[0, 1, 2], [3]] and vocab == {'\n': -1, '<unk>': 3}
    enc, vocab = rnn.encode_sentences([["x", "y"]], start_label=2, invalid_label=2)
    assert enc == [[3, 4]] and vocab == {'\n': 2, 'x': 3, 'y': 4}


def test_bucket_iter_sorts_the_callers_buckets_and_names_a_bucketless_corpus():
    buckets = [5, 3]
    it = rnn.BucketSentenceIter([[1, 2, 3], [1, 2], [4, 5, 6, 7, 8], [1]], 1, buckets=buckets,
                                invalid_label=0)
    assert buckets == [3, 5] and it.buckets == [3, 5]   # sorted in place, as mxnet does
    # mxnet fails on max([]) here; the error says why
    with pytest.raises(ValueError, match="no bucket holds any of the 2 sentences"):
        rnn.BucketSentenceIter([[1, 2, 3], [1, 2]], 3)
    with pytest.raises(ValueError, match=r"buckets=\[1\], batch_size=1"):
        rnn.BucketSentenceIter([[1, 2, 3], [1, 2]], 1, buckets=[1])


def test_bucket_iter_automatic_buckets():
    it = rnn.BucketSentenceIter(ENCODED, 2, invalid_label=0)
    assert it.buckets == [2, 3] and it.default_bucket_key == 3
    assert [d.shape for d in it.data] == [(4, 2), (3, 3)]
    assert sorted(it.idx) == [(0, 0), (0, 2), (1, 0)]
    assert it.provide_data[0].name == 'data' and tuple(it.provide_data[0].shape) == (2, 3)
    assert it.provide_label[0].name == 'softmax_label'
    assert it.provide_data[0].layout == 'NT'


def _batches(it):
    return [(b.bucket_key, b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist(),
             tuple(b.provide_data[0].shape)) for b in it]


def test_bucket_iter_batches_match_mxnet_nt():
    random.seed(3)
    np.random.seed(3)
    it = rnn.BucketSentenceIter(ENCODED, 2, buckets=[3, 5], invalid_label=0)
    assert it.buckets == [3, 5]
    assert [d.tolist() for d in it.data] == [
        [[1, 3, 5], [1, 2, 0], [4, 5, 0], [2, 2, 2], [1, 1, 0], [1, 2, 3], [3, 4, 0]],
        [[5, 6, 7, 8, 9], [2, 3, 4, 5, 0]]]
    assert it.idx == [(1, 0), (0, 0), (0, 4), (0, 2)]
    assert _batches(it) == [
        (5, [[5, 6, 7, 8, 9], [2, 3, 4, 5, 0]], [[6, 7, 8, 9, 0], [3, 4, 5, 0, 0]], (2, 5)),
        (3, [[1, 3, 5], [1, 2, 0]], [[3, 5, 0], [2, 0, 0]], (2, 3)),
        (3, [[1, 1, 0], [1, 2, 3]], [[1, 0, 0], [2, 3, 0]], (2, 3)),
        (3, [[4, 5, 0], [2, 2, 2]], [[5, 0, 0], [2, 2, 0]], (2, 3))]


def test_bucket_iter_batches_match_mxnet_tn():
    random.seed(3)
    np.random.seed(3)
    it = rnn.BucketSentenceIter(ENCODED, 2, buckets=[3, 5], invalid_label=0, layout='TN')
    assert tuple(it.provide_data[0].shape) == (5, 2)
    assert tuple(it.provide_label[0].shape) == (5, 2)
    assert _batches(it) == [
        (5, [[5, 2], [6, 3], [7, 4], [8, 5], [9, 0]], [[6, 3], [7, 4], [8, 5], [9, 0], [0, 0]],
         (5, 2)),
        (3, [[1, 1], [3, 2], [5, 0]], [[3, 2], [5, 0], [0, 0]], (3, 2)),
        (3, [[1, 1], [1, 2], [0, 3]], [[1, 2], [0, 3], [0, 0]], (3, 2)),
        (3, [[4, 2], [5, 2], [0, 2]], [[5, 2], [0, 2], [0, 0]], (3, 2))]


def test_bucket_iter_shuffle_keeps_pairs_and_padding():
    random.seed(0)
    np.random.seed(0)
    it = rnn.BucketSentenceIter(ENCODED, 1, buckets=[4, 8], invalid_label=-1)
    seen = []
    for epoch in range(2):
        it.reset()
        for b in it:
            d, lab = b.data[0].asnumpy()[0], b.label[0].asnumpy()[0]
            assert b.bucket_key == len(d)
            np.testing.assert_array_equal(lab[:-1], d[1:])   # next token
            assert lab[-1] == -1
            sent = [int(x) for x in d if x != -1]
            assert list(d[len(sent):]) == [-1] * (len(d) - len(sent))  # padded with invalid
            seen.append(tuple(sent))
    assert sorted(seen) == sorted([tuple(s) for s in ENCODED] * 2)
    with pytest.raises(ValueError, match="Invalid layout"):
        rnn.BucketSentenceIter(ENCODED, 1, layout='CT')


def test_rnn_checkpoint_round_trip(tmp_path):
    cell = rnn.LSTMCell(3, prefix='lstm_')
    outs, _ = cell.unroll(2, sym.Variable('data'), merge_outputs=True)
    g = torch.Generator().manual_seed(0)
    args = {'lstm_i2h_weight': mx.nd.array(torch.randn(12, 4, generator=g)),
            'lstm_i2h_bias': mx.nd.array(torch.randn(12, generator=g)),
            'lstm_h2h_weight': mx.nd.array(torch.randn(12, 3, generator=g)),
            'lstm_h2h_bias': mx.nd.array(torch.randn(12, generator=g))}
    prefix = str(tmp_path / "lstm")
    rnn.save_rnn_checkpoint(cell, prefix, 3, outs, args, {})
    _, saved, _ = mx.model.load_checkpoint(prefix, 3)
    assert sorted(saved) == sorted(f'lstm_{g}2h_{gate}_{kind}' for g in 'ih'
                                   for gate in 'ifco' for kind in ('weight', 'bias'))
    assert torch.equal(saved['lstm_i2h_f_weight'], args['lstm_i2h_weight'][3:6])
    loaded_sym, arg, aux = rnn.load_rnn_checkpoint([cell], prefix, 3)
    assert loaded_sym.list_arguments() == outs.list_arguments()
    assert sorted(arg) == sorted(args) and aux == {}
    for k in args:
        assert torch.equal(arg[k], args[k])
    cb = rnn.do_rnn_checkpoint(cell, str(tmp_path / "cb"), period=2)
    cb(0, outs, args, {})
    cb(1, outs, args, {})
    assert not (tmp_path / "cb-0001.params").exists()
    assert (tmp_path / "cb-0002.params").exists()


def test_fused_checkpoint_round_trip(tmp_path):
    cell = rnn.FusedRNNCell(3, num_layers=2, mode='gru', bidirectional=True, prefix='gru_')
    outs, _ = cell.unroll(2, sym.Variable('data'), layout='TNC', merge_outputs=True)
    size = outs.infer_shape(data=(2, 1, 4))[0][1][0]
    params = mx.nd.array(torch.randn(size, generator=torch.Generator().manual_seed(1)))
    prefix = str(tmp_path / "fused")
    rnn.save_rnn_checkpoint(cell, prefix, 1, outs, {'gru_parameters': params}, {})
    _, saved, _ = mx.model.load_checkpoint(prefix, 1)
    assert 'gru_r1_h2h_z_weight' in saved and 'gru_parameters' not in saved
    _, arg, _ = rnn.load_rnn_checkpoint(cell, prefix, 1)
    assert list(arg) == ['gru_parameters'] and torch.equal(arg['gru_parameters'], params)
