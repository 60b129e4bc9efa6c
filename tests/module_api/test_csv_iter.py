"""``mx.io.CSVIter`` against mxnet 1.9.1's batches (``tests/fixtures/make_io_fixtures.py``)."""
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "io")
ORACLE = np.load(os.path.join(FIX, "oracle.npz"))
CASES = {"round": dict(batch_size=4), "noround": dict(batch_size=4, round_batch=False),
         "nolabel": dict(batch_size=5, label_csv=None), "int": dict(batch_size=3, dtype="int32")}


def _make(kwargs):
    args = dict(data_csv=os.path.join(FIX, "data.csv"), data_shape=(2, 3),
                label_csv=os.path.join(FIX, "label.csv"), label_shape=(1,))
    args.update(kwargs)
    if args["label_csv"] is None:
        del args["label_csv"], args["label_shape"]
    return mx.io.CSVIter(**args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_batches_and_epochs_as_mxnet(name):
    it = _make(CASES[name])
    for epoch in range(2):
        if epoch:
            it.reset()
        batches = list(it)
        prefix = f"csv_{name}_e{epoch}_"
        keys = sorted({k.rsplit("_", 1)[0] for k in ORACLE if k.startswith(prefix)})
        assert len(batches) == len(keys), (name, epoch)
        for b, batch in enumerate(batches):
            key = f"csv_{name}_e{epoch}_b{b}"
            assert batch.pad == int(ORACLE[key + "_pad"])
            for got, want in [(batch.data[0], ORACLE[key + "_data"]),
                              (batch.label[0], ORACLE[key + "_label"])]:
                got = got.asnumpy()
                assert got.dtype == want.dtype and got.shape == want.shape, key
                if got.dtype == np.float32:
                    # mxnet's own text-to-float (dmlc's strtof) is not always correctly
                    # rounded: 1.491 reads as 1.4909999 there, 1.4910001 here
                    np.testing.assert_array_max_ulp(got, want, maxulp=1)
                else:
                    np.testing.assert_array_equal(got, want, err_msg=key)


def test_descriptions_and_errors(tmp_path):
    it = _make(dict(batch_size=4, dtype="int64"))
    assert it.provide_data[0].shape == (4, 2, 3) and it.provide_data[0].name == "data"
    assert it.provide_label[0].shape == (4,) and it.provide_label[0].name == "softmax_label"
    assert it.provide_data[0].dtype == np.int64
    # getdata / getlabel give one array, as mxnet's C++ iterators (MXDataIter) do
    assert it.iter_next() and it.getdata().shape == (4, 2, 3) and it.getlabel().shape == (4,)
    assert it.getpad() == 0 and list(it.getindex()) == [0, 1, 2, 3]
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n4,5\n")
    with pytest.raises(MXNetError, match=r"row-length=2"):
        mx.io.CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=1)
    with pytest.raises(MXNetError, match="does not exist"):
        mx.io.CSVIter(data_csv=str(tmp_path / "none.csv"), data_shape=(3,), batch_size=1)
    with pytest.raises(MXNetError, match="bigger than batch size"):
        list(mx.io.CSVIter(data_csv=os.path.join(FIX, "data.csv"), data_shape=(6,),
                           batch_size=32))
    # mxnet's iterator arguments it has no use for are accepted
    it = mx.io.CSVIter(data_csv=os.path.join(FIX, "data.csv"), data_shape=6, batch_size=2,
                       prefetch_buffer=2, preprocess_threads=2)
    assert it.provide_data[0].shape == (2, 6)


def test_int64_values_beyond_float_precision(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("9007199254740993,-3\n2147483648,7.9\n")
    it = mx.io.CSVIter(data_csv=str(path), data_shape=(2,), batch_size=2, dtype="int64")
    assert it.next().data[0].asnumpy().tolist() == [[9007199254740993, -3], [2147483648, 7]]
