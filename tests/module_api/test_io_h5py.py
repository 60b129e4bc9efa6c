"""NDArrayIter over h5py datasets (mxnet 1.9.1's test_io.py test_NDArrayIter_h5py, in
this project's words): a dataset stays on disk and each batch reads its rows, giving
the batches the same arrays in memory give, for every last_batch_handle, with
shuffling and with num_parts."""
import numpy as np
import pytest

import module_api as mx

h5py = pytest.importorskip("h5py")


@pytest.fixture
def h5(tmp_path):
    data = np.random.RandomState(0).rand(103, 2, 2).astype(np.float32)
    label = (np.arange(103) % 10).astype(np.float32)
    with h5py.File(tmp_path / "ndarraytest.h5", "w") as f:
        f.create_dataset("data", data=data)
        f.create_dataset("label", data=label)
        yield f, data, label


def _same_epochs(a, b, epochs=3):
    """Iterate both for some epochs (each reset under the same numpy seed): equal
    batches, pads and counts."""
    counts = []
    for epoch in range(epochs):
        got, want = list(a), list(b)
        assert len(got) == len(want) > 0
        for x, y in zip(got, want):
            assert x.pad == y.pad
            for u, v in zip(x.data + x.label, y.data + y.label):
                assert u.dtype == v.dtype and u.shape == v.shape
                np.testing.assert_array_equal(u.asnumpy(), v.asnumpy())
        counts.append(len(got))
        np.random.seed(epoch)
        a.reset()
        np.random.seed(epoch)
        b.reset()
    return counts


@pytest.mark.parametrize("handle, batches", [("pad", 9), ("discard", 8), ("roll_over", 8)])
def test_h5py_batches_equal_in_memory_batches(h5, handle, batches):
    f, data, label = h5
    for lab, mem_lab in ((f["label"], label), (None, None)):
        a = mx.io.NDArrayIter(f["data"], lab, 12, last_batch_handle=handle)
        b = mx.io.NDArrayIter(data, mem_lab, 12, last_batch_handle=handle)
        assert isinstance(a.data[0][1], h5py.Dataset)      # on disk, not read whole
        assert a.provide_data == b.provide_data and a.provide_label == b.provide_label
        assert _same_epochs(a, b)[0] == batches


def test_h5py_with_shuffle_and_parts_reads_the_rows_in_memory_arrays_would(h5):
    f, data, label = h5
    np.random.seed(7)
    a = mx.io.NDArrayIter({"x": f["data"]}, {"y": f["label"]}, 5, shuffle=True,
                          num_parts=3, part_index=2)
    np.random.seed(7)
    b = mx.io.NDArrayIter({"x": data}, {"y": label}, 5, shuffle=True,
                          num_parts=3, part_index=2)
    _same_epochs(a, b)
    # a dataset mixed with an in-memory array stays row-aligned with it, epoch after
    # epoch (each reshuffle reorders the in-memory rows again)
    np.random.seed(2)
    mixed = mx.io.NDArrayIter({"x": f["data"], "y": np.arange(103, dtype=np.float32)}, None,
                              4, shuffle=True)
    for _ in range(2):
        for batch in mixed:
            x, ids = batch.data[0].asnumpy(), batch.data[1].asnumpy().astype(int)
            np.testing.assert_array_equal(x, data[ids])
        mixed.reset()
