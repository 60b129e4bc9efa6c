"""``mx.io.MNISTIter`` against mxnet 1.9.1: the batches it hands out for small IDX
files (``tests/fixtures/mnist_iter_cases.json``, made by mxnet), shuffled order
included, and its errors."""
import gzip
import json
import logging
import os
import struct

import numpy as np
import pytest

import module_api as mx
from module_api.mnist_iter import std_shuffle_order

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mnist_iter_cases.json")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    with open(FIXTURE) as f:
        rec = json.load(f)
    n, rows, cols = rec["shape"]
    d = tmp_path_factory.mktemp("idx")
    images = np.asarray(rec["images"], dtype=np.uint8)
    labels = np.asarray(rec["labels"], dtype=np.uint8)
    (d / "images").write_bytes(struct.pack(">IIII", 2051, n, rows, cols) + images.tobytes())
    (d / "labels").write_bytes(struct.pack(">II", 2049, n) + labels.tobytes())
    # the same files gzipped, which mxnet cannot read and this iterator can
    (d / "images.gz").write_bytes(gzip.compress((d / "images").read_bytes()))
    (d / "labels.gz").write_bytes(gzip.compress((d / "labels").read_bytes()))
    return rec, d


@pytest.mark.parametrize("case", range(5))
@pytest.mark.parametrize("gz", [False, True])
def test_batches_equal_mxnets(recorded, case, gz):
    rec, d = recorded
    want = rec["cases"][case]
    ext = ".gz" if gz else ""
    it = mx.io.MNISTIter(image=str(d / f"images{ext}"), label=str(d / f"labels{ext}"),
                         silent=True, **want["kwargs"])
    assert [[x.name, list(x.shape)] for x in it.provide_data] == want["provide_data"]
    assert [[x.name, list(x.shape)] for x in it.provide_label] == want["provide_label"]
    got = list(it)
    assert len(got) == len(want["batches"])          # the incomplete last batch is dropped
    for b, w in zip(got, want["batches"]):
        assert b.pad == w["pad"] == 0
        np.testing.assert_array_equal(b.data[0].asnumpy().ravel(), np.float32(w["data"]))
        np.testing.assert_array_equal(b.label[0].asnumpy(), np.float32(w["label"]))
    it.reset()                                       # no new shuffle on reset, as mxnet
    assert [b.label[0].asnumpy().tolist() for b in it] == want["labels_after_reset"]


@pytest.mark.parametrize("which", [0, 1])
def test_shuffle_is_mxnets_order(recorded, which):
    """The permutation of 256 and of 60,000 examples equals mxnet's (its libstdc++'s
    std::shuffle over mt19937; the first 2,000 positions recorded for 60,000)."""
    rec, _ = recorded
    want = rec["shuffles"][which]
    order = std_shuffle_order(want["n"], want["seed"])
    assert sorted(order.tolist()) == list(range(want["n"]))
    got = (order[:len(want["index_mod_256"])] % 256).tolist()
    assert got == want["index_mod_256"]


def test_module_trains_from_it(tmp_path):
    """A softmax regression learns 'the label is the one bright pixel' from IDX files
    read by MNISTIter (flat)."""
    rs = np.random.RandomState(1)
    n = 400
    labels = rs.randint(0, 10, n).astype(np.uint8)
    images = rs.randint(0, 96, (n, 12)).astype(np.uint8)       # dim noise, and one
    images[np.arange(n), labels] = 255                             # bright pixel: the label
    images = images.reshape(n, 4, 3)
    (tmp_path / "img").write_bytes(struct.pack(">IIII", 2051, n, 4, 3) + images.tobytes())
    (tmp_path / "lab").write_bytes(struct.pack(">II", 2049, n) + labels.tobytes())
    it = mx.io.MNISTIter(image=str(tmp_path / "img"), label=str(tmp_path / "lab"),
                         batch_size=20, flat=True, silent=True, seed=2)
    data = mx.sym.Variable("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=10), name="softmax")
    mod = mx.mod.Module(net)
    mod.fit(it, num_epoch=10, optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Xavier())
    score = dict(mod.score(it, mx.metric.Accuracy()))
    assert score["accuracy"] > 0.97, score            # chance is 0.1; 1.0 for 5 seeds


def test_errors_name_the_file_and_the_fix(recorded, tmp_path):
    _, d = recorded
    with pytest.raises(FileNotFoundError, match="image file .*missing-images"):
        mx.io.MNISTIter(image=str(tmp_path / "missing-images"), label=str(d / "labels"))
    with pytest.raises(ValueError, match="swap image= and label="):
        mx.io.MNISTIter(image=str(d / "labels"), label=str(d / "images"))
    with pytest.raises(ValueError, match="part_index"):
        mx.io.MNISTIter(image=str(d / "images"), label=str(d / "labels"), num_parts=2,
                        part_index=2)
    with pytest.raises(ValueError, match="float32"):
        mx.io.MNISTIter(image=str(d / "images"), label=str(d / "labels"), dtype="float16")


def test_ignored_arguments_as_mxnet(recorded, caplog):
    """mxnet's MNISTIter takes any keyword (its parameters are read with
    InitAllowUnknown): ``data_shape`` and the other C++ iterators' parameters are
    ignored quietly, and a name no mxnet iterator has is ignored with a warning."""
    _, d = recorded
    files = dict(image=str(d / "images"), label=str(d / "labels"))
    with caplog.at_level(logging.WARNING):
        it = mx.io.MNISTIter(batch_size=5, flat=True, data_shape=(12,), preprocess_threads=4,
                             round_batch=True, **files)
    assert it.provide_data[0].shape == (5, 12)
    assert caplog.records == []
    with caplog.at_level(logging.WARNING):
        it = mx.io.MNISTIter(batchsize=3, **files)
    assert it.batch_size == 128              # the typo changes nothing, as in mxnet
    (record,) = caplog.records
    assert record.name == "module_api.mnist_iter" and "['batchsize']" in record.getMessage()


def test_silent_false_logs_on_a_module_logger(recorded, caplog):
    _, d = recorded
    with caplog.at_level(logging.INFO):
        mx.io.MNISTIter(image=str(d / "images"), label=str(d / "labels"), batch_size=5,
                        silent=False, shuffle=False)
    (record,) = [r for r in caplog.records if "MNISTIter" in r.getMessage()]
    assert record.name == "module_api.mnist_iter" and record.levelno == logging.INFO
    assert record.getMessage() == "MNISTIter: load 50 images, shuffle=0, shape=(5,1,4,3)"  # as mxnet prints it
