"""mx.io: DataDesc, DataBatch, NDArrayIter (every last_batch_handle), PrefetchingIter,
ResizeIter.

Batch layouts marked "mxnet 1.9.1" were read off mxnet 1.9.1's NDArrayIter on
the same inputs.
"""
import numpy as np
import pytest
import torch

from module_api import io
from runtime.ndarray import NDArray, as_ndarray
from runtime.ndarray import torch_dtype


def _labels(it, epochs=1):
    """[[(pad, [label ints])...] per epoch], resetting between epochs."""
    out = []
    for _ in range(epochs):
        out.append([(b.pad, [int(x) for x in b.label[0].asnumpy()]) for b in it])
        it.reset()
    return out


def _iter(num, bs, mode, **kw):
    data = np.arange(num * 2, dtype=np.float32).reshape(num, 2)
    label = np.arange(num, dtype=np.float32)
    return io.NDArrayIter(data, label, bs, last_batch_handle=mode, **kw)


def test_datadesc():
    d = io.DataDesc('data', (2, 3))
    assert d.name == 'data' and d.shape == (2, 3)
    assert d.dtype == np.float32 and d.layout == 'NCHW'
    assert d == ('data', (2, 3))
    name, shape = d
    assert (name, shape) == ('data', (2, 3))
    assert repr(d) == "DataDesc[data,(2, 3),<class 'numpy.float32'>,NCHW]"
    assert io.DataDesc.get_batch_axis('TNC') == 1
    assert io.DataDesc.get_batch_axis(None) == 0
    descs = io.DataDesc.get_list([('a', (1,)), ('b', (2,))], [('a', np.int32), ('b', np.float16)])
    assert [(x.name, x.dtype) for x in descs] == [('a', np.int32), ('b', np.float16)]
    assert [x.dtype for x in io.DataDesc.get_list([('a', (1,))], None)] == [np.float32]


def test_databatch():
    b = io.DataBatch([torch.zeros(2, 3)], [torch.zeros(2)], pad=1, bucket_key=5,
                     provide_data=[io.DataDesc('data', (2, 3))])
    assert b.pad == 1 and b.bucket_key == 5 and b.index is None
    assert str(b) == "DataBatch: data shapes: [torch.Size([2, 3])] label shapes: [torch.Size([2])]"
    with pytest.raises(AssertionError):
        io.DataBatch(torch.zeros(2))


@pytest.mark.parametrize("num,bs,expected", [
    # mxnet 1.9.1
    (10, 3, [(0, [0, 1, 2]), (0, [3, 4, 5]), (0, [6, 7, 8]), (2, [9, 0, 1])]),
    (10, 5, [(0, [0, 1, 2, 3, 4]), (0, [5, 6, 7, 8, 9])]),
    (7, 4, [(0, [0, 1, 2, 3]), (1, [4, 5, 6, 0])]),
    (3, 8, [(5, [0, 1, 2, 0, 1, 2, 0, 1])]),      # pad larger than the data: tiled
])
def test_pad(num, bs, expected):
    it = _iter(num, bs, 'pad')
    assert _labels(it, 2) == [expected, expected]


@pytest.mark.parametrize("num,bs,nbatch", [(10, 3, 3), (10, 5, 2), (7, 4, 1), (3, 8, 0)])
def test_discard(num, bs, nbatch):
    it = _iter(num, bs, 'discard')
    for epoch in _labels(it, 2):
        assert len(epoch) == nbatch
        assert all(pad == 0 and lab == list(range(i * bs, (i + 1) * bs))
                   for i, (pad, lab) in enumerate(epoch))


def test_roll_over_across_epochs():
    # mxnet 1.9.1
    assert _labels(_iter(10, 3, 'roll_over'), 3) == [
        [(0, [0, 1, 2]), (0, [3, 4, 5]), (0, [6, 7, 8])],
        [(1, [9, 0, 1]), (0, [2, 3, 4]), (0, [5, 6, 7])],
        [(2, [8, 9, 0]), (0, [1, 2, 3]), (0, [4, 5, 6]), (0, [7, 8, 9])],
    ]
    assert _labels(_iter(10, 4, 'roll_over'), 3) == [
        [(0, [0, 1, 2, 3]), (0, [4, 5, 6, 7])],
        [(2, [8, 9, 0, 1]), (0, [2, 3, 4, 5]), (0, [6, 7, 8, 9])],
        [(0, [0, 1, 2, 3]), (0, [4, 5, 6, 7])],
    ]


def test_roll_over_data_follows_label():
    it = _iter(10, 3, 'roll_over')
    list(it)
    it.reset()
    batch = it.next()
    assert batch.data[0].asnumpy().tolist() == [[18, 19], [0, 1], [2, 3]]
    it.hard_reset()
    assert it.next().label[0].asnumpy().tolist() == [0, 1, 2]


def test_batches_are_ndarrays_and_copies():
    data = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    it = io.NDArrayIter(data, batch_size=2)
    batch = it.next()
    assert isinstance(batch.data[0], NDArray) and batch.label == []
    batch.data[0][:] = -1
    assert data.min().item() == 0              # the source is untouched
    assert it.getpad() == 0 and it.getindex() is None


def test_dtypes_like_mxnet():
    # numpy inputs become float32 (mx.nd.array); NDArray / torch inputs keep theirs
    it = io.NDArrayIter(np.arange(6), torch.arange(6, dtype=torch.int32), batch_size=2)
    assert it.provide_data[0].dtype == np.float32
    assert it.provide_label[0].dtype == np.int32
    assert torch_dtype(it.next().label[0]) == torch.int32
    # shuffling goes through mx.nd.array too, so everything becomes float32
    it = io.NDArrayIter(np.arange(6), torch.arange(6, dtype=torch.int32), 2, shuffle=True)
    assert it.provide_label[0].dtype == np.float32


def test_provide_data_names_and_order():
    x = np.zeros((10, 2), np.float32)
    it = io.NDArrayIter({'b': x, 'a': np.zeros((10, 3))}, {'lab': np.zeros(10)}, batch_size=4)
    # mxnet 1.9.1 orders dict inputs by sorted key
    assert [(d.name, d.shape) for d in it.provide_data] == [('a', (4, 3)), ('b', (4, 2))]
    assert [(d.name, d.shape) for d in it.provide_label] == [('lab', (4,))]
    batch = it.next()
    assert [tuple(d.shape) for d in batch.data] == [(4, 3), (4, 2)]

    it = io.NDArrayIter([x, x], [np.zeros(10)], batch_size=5)
    assert [d.name for d in it.provide_data] == ['_0_data', '_1_data']
    assert [d.name for d in it.provide_label] == ['softmax_label']
    it = io.NDArrayIter(x, np.zeros(10), 5, data_name='x', label_name='y')
    assert [d.name for d in it.provide_data + it.provide_label] == ['x', 'y']
    assert repr(it.provide_data) == "[DataDesc[x,(5, 2),<class 'numpy.float32'>,NCHW]]"


def test_layout_batch_axis():
    data = np.arange(24, dtype=np.float32).reshape(3, 8)   # T x N
    it = io.NDArrayIter(data, batch_size=4, layout='TN')
    assert it.provide_data[0].shape == (3, 4)
    assert it.provide_data[0].layout == 'TN'


def test_shuffle_keeps_data_and_label_aligned():
    np.random.seed(3)
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    label = np.arange(10, dtype=np.float32)
    it = io.NDArrayIter(data, label, 3, shuffle=True, last_batch_handle='pad')
    seen = []
    for b in it:
        d, l = b.data[0].asnumpy(), b.label[0].asnumpy()
        np.testing.assert_array_equal(d[:, 0], 2 * l)
        seen.extend(l[:len(l) - b.pad].tolist())
    assert sorted(seen) == list(range(10))
    assert seen != list(range(10))


def test_shuffle_order_matches_mxnet():
    # mxnet 1.9.1, np.random.seed(42), 10 examples, batch 3, 'pad': first epoch
    np.random.seed(42)
    it = io.NDArrayIter({'x': np.arange(20, dtype=np.float32).reshape(10, 2)},
                        np.arange(10, dtype=np.float32), 3, shuffle=True)
    assert it.next().label[0].asnumpy().tolist() == [8.0, 1.0, 5.0]


def test_iter_next_getdata_protocol():
    it = _iter(5, 2, 'pad')
    pads = []
    while it.iter_next():
        assert tuple(it.getdata()[0].shape) == (2, 2)
        pads.append(it.getpad())
    assert pads == [0, 0, 1]
    with pytest.raises(StopIteration):
        it.next()


def test_bad_inputs():
    with pytest.raises(AssertionError):
        io.NDArrayIter(None)
    with pytest.raises(TypeError):
        io.NDArrayIter(object())


def test_resize_iter():
    base = _iter(10, 4, 'pad')                 # 3 batches per epoch
    it = io.ResizeIter(base, 5)
    assert it.provide_data == base.provide_data and it.batch_size == 4
    epoch = _labels(it, 1)[0]
    assert len(epoch) == 5
    assert [lab for _, lab in epoch[3:]] == [[0, 1, 2, 3], [4, 5, 6, 7]]   # wrapped round
    assert len(list(it)) == 5                  # reset() restarts both
    short = io.ResizeIter(_iter(10, 4, 'pad'), 2, reset_internal=False)
    first = [b.label[0].asnumpy().tolist() for b in short]
    short.reset()
    second = [b.label[0].asnumpy().tolist() for b in short]
    assert first[0] == [0, 1, 2, 3] and second[0] == [8, 9, 0, 1]


def test_prefetching_iter_equals_wrapped():
    ref = [(b.pad, b.label[0].asnumpy().tolist(), b.data[0].asnumpy().tolist())
           for b in _iter(10, 3, 'pad')]
    it = io.PrefetchingIter(_iter(10, 3, 'pad'))
    assert it.batch_size == 3
    for _ in range(2):
        got = [(b.pad, b.label[0].asnumpy().tolist(), b.data[0].asnumpy().tolist()) for b in it]
        assert got == ref
        it.reset()
    it.close()


def test_prefetching_iter_several_and_rename():
    a = io.NDArrayIter({'data': np.ones((8, 2))}, {'lab': np.zeros(8)}, batch_size=4)
    b = io.NDArrayIter({'data': np.zeros((8, 3))}, {'lab': np.ones(8)}, batch_size=4)
    it = io.PrefetchingIter([a, b], rename_data=[{'data': 'd1'}, {'data': 'd2'}],
                            rename_label=[{'lab': 'l1'}, {'lab': 'l2'}])
    assert [(d.name, d.shape) for d in it.provide_data] == [('d1', (4, 2)), ('d2', (4, 3))]
    assert [d.name for d in it.provide_label] == ['l1', 'l2']
    batches = list(it)
    assert len(batches) == 2
    assert [tuple(x.shape) for x in batches[0].data] == [(4, 2), (4, 3)]
    assert [float(x.asnumpy().sum()) for x in batches[0].label] == [0.0, 4.0]
    assert [d.name for d in batches[0].provide_data] == ['d1', 'd2']
    it.close()


def test_custom_dataiter_subclass():
    class Counter(io.DataIter):
        def __init__(self):
            super().__init__(batch_size=2)
            self.i = 0

        def reset(self):
            self.i = 0

        def iter_next(self):
            self.i += 1
            return self.i <= 3

        def getdata(self):
            return [as_ndarray(torch.full((2,), float(self.i)))]

        def getlabel(self):
            return None

        def getpad(self):
            return 0

    it = Counter()
    assert [b.data[0].asnumpy().tolist() for b in it] == [[1, 1], [2, 2], [3, 3]]
    assert it.batch_size == 2


def _ints(arr):
    return [int(x) for x in arr.asnumpy().reshape(-1)]


def test_shuffle_compounds_across_epochs_like_mxnet():
    # mxnet 1.9.1, np.random.seed(7): each reset reshuffles the already shuffled rows
    np.random.seed(7)
    it = io.NDArrayIter(np.arange(20, dtype=np.float32).reshape(10, 2),
                        np.arange(10, dtype=np.float32), 3, shuffle=True)
    assert _labels(it, 3) == [
        [(0, [8, 5, 0]), (0, [2, 1, 9]), (0, [7, 3, 6]), (2, [4, 8, 5])],
        [(0, [9, 0, 8]), (0, [4, 1, 6]), (0, [5, 3, 2]), (2, [7, 9, 0])],
        [(0, [9, 1, 8]), (0, [5, 0, 4]), (0, [3, 6, 2]), (2, [7, 9, 1])],
    ]
    np.random.seed(5)
    it = io.NDArrayIter(np.arange(14, dtype=np.float32).reshape(7, 2),
                        np.arange(7, dtype=np.float32), 3, shuffle=True,
                        last_batch_handle='discard')
    assert _labels(it, 2) == [[(0, [6, 2, 4]), (0, [1, 0, 5])],
                              [(0, [5, 4, 6]), (0, [0, 3, 2])]]


def test_roll_over_with_shuffle_like_mxnet():
    # mxnet 1.9.1, np.random.seed(11): the leftover rows are those of the old order,
    # the rest of the rolled-over batch comes from the new one
    np.random.seed(11)
    it = io.NDArrayIter(np.arange(20, dtype=np.float32).reshape(10, 2),
                        np.arange(10, dtype=np.float32), 4, shuffle=True,
                        last_batch_handle='roll_over')
    epochs = []
    for _ in range(4):
        epochs.append([(b.pad, _ints(b.label[0]), _ints(b.data[0][:, 0])) for b in it])
        it.reset()
    assert epochs == [
        [(0, [7, 8, 2, 6], [14, 16, 4, 12]), (0, [4, 5, 1, 3], [8, 10, 2, 6])],
        [(2, [0, 9, 1, 0], [0, 18, 2, 0]), (0, [7, 2, 8, 6], [14, 4, 16, 12]),
         (0, [4, 5, 9, 3], [8, 10, 18, 6])],
        [(0, [1, 3, 8, 4], [2, 6, 16, 8]), (0, [7, 9, 0, 6], [14, 18, 0, 12])],
        [(2, [5, 2, 5, 9], [10, 4, 10, 18]), (0, [8, 2, 1, 6], [16, 4, 2, 12]),
         (0, [7, 4, 3, 0], [14, 8, 6, 0])],
    ]


def test_roll_over_without_label_and_by_protocol():
    # mxnet 1.9.1
    it = io.NDArrayIter(np.arange(7, dtype=np.float32), None, 3, last_batch_handle='roll_over')
    got = []
    for _ in range(3):
        got.append([(b.pad, _ints(b.data[0]), b.label) for b in it])
        it.reset()
    assert got == [[(0, [0, 1, 2], []), (0, [3, 4, 5], [])],
                   [(1, [6, 0, 1], []), (0, [2, 3, 4], [])],
                   [(2, [5, 6, 0], []), (0, [1, 2, 3], []), (0, [4, 5, 6], [])]]
    it = io.NDArrayIter(np.arange(10, dtype=np.float32), np.arange(10, dtype=np.float32), 4,
                        last_batch_handle='roll_over')
    list(it)
    it.reset()
    assert it.iter_next() and it.getpad() == 2
    assert _ints(it.getdata()[0]) == [8, 9, 0, 1] and _ints(it.getlabel()[0]) == [8, 9, 0, 1]


def test_pad_tiles_every_source_and_pads_along_the_layout_batch_axis():
    # mxnet 1.9.1
    it = io.NDArrayIter([np.arange(5, dtype=np.float32),
                         np.arange(10, dtype=np.float32).reshape(5, 2)], np.arange(5), 12)
    (batch,) = list(it)
    assert batch.pad == 7
    assert _ints(batch.data[0]) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert _ints(batch.data[1][:, 0]) == [0, 2, 4, 6, 8, 0, 2, 4, 6, 8, 0, 2]
    it = io.NDArrayIter(np.arange(2, dtype=np.float32), np.arange(2, dtype=np.float32), 7)
    assert [(b.pad, _ints(b.data[0]), _ints(b.label[0])) for b in it] == [
        (5, [0, 1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1, 0])]
    it = io.NDArrayIter(np.arange(24, dtype=np.float32).reshape(3, 8), batch_size=2,
                        layout='TN')
    assert [(b.pad, b.data[0].asnumpy().tolist()) for b in it] == [
        (0, [[0, 1], [8, 9], [16, 17]]), (1, [[2, 0], [10, 8], [18, 16]])]
    assert it.num_data == 3 and it.num_source == 1


def test_prefetching_iter_reports_mismatch_and_worker_errors():
    short = io.NDArrayIter(np.ones((4, 2)), batch_size=2)
    long_ = io.NDArrayIter(np.ones((8, 2)), batch_size=2)
    it = io.PrefetchingIter([short, long_])
    assert len([it.next() for _ in range(2)]) == 2
    with pytest.raises(AssertionError, match="Number of entry mismatches"):
        it.next()
    it.close()

    class Failing(io.DataIter):
        provide_data = [io.DataDesc('data', (2, 2))]
        provide_label = []

        def next(self):
            raise ValueError("broken source")
    it = io.PrefetchingIter(Failing(batch_size=2))
    with pytest.raises(ValueError, match="broken source"):
        it.next()
    it.close()


def test_resize_iter_keeps_the_bucket_key():
    base = _iter(10, 4, 'pad')
    assert not hasattr(io.ResizeIter(base, 2), 'default_bucket_key')
    base.default_bucket_key = 7
    assert io.ResizeIter(base, 2).default_bucket_key == 7


def test_ndarray_iter_refuses_arrays_of_other_row_counts():
    """mxnet 1.9.1 counts samples in the first data array and clamps the others' reads:
    a label one row short would pair samples with other samples' labels, silently."""
    with pytest.raises(ValueError, match="'softmax_label' has 8 rows but 'data' has 10; "
                                         "every data and label array needs one row"):
        io.NDArrayIter(np.zeros((10, 3)), np.zeros(8), batch_size=4)
    with pytest.raises(ValueError, match="'b' has 9 rows but 'a' has 10"):
        io.NDArrayIter({"a": np.zeros((10, 3)), "b": np.zeros((9, 3))}, batch_size=4)
    # equal counts, and mxnet's layout with the batch on axis 1, still build
    assert io.NDArrayIter(np.zeros((10, 3)), np.zeros(10), batch_size=4).num_data == 10
    assert io.NDArrayIter(np.zeros((5, 8, 2)), np.zeros((5, 8)), batch_size=4,
                          layout="TN").num_data == 5
