"""``mx.io.LibSVMIter`` against the batches mxnet 1.9.1 cuts from the same files
(``tests/fixtures/libsvm_cases.json``, made by ``tests/fixtures/make_libsvm_fixtures.py``),
its argument checks, and the parser on its own."""
import json
import os
import time

import numpy as np
import pytest

import module_api as mx
from module_api import libsvm_parse
from module_api.ndarray.sparse import CSRNDArray

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = json.load(open(os.path.join(HERE, "..", "fixtures", "libsvm_cases.json")))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("libsvm")
    for path, text in FIXTURES["files"].items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _make(folder, kwargs):
    kwargs = dict(kwargs)
    for key in ("data_libsvm", "label_libsvm"):
        if key in kwargs:
            kwargs[key] = ";".join(str(folder / p) for p in kwargs[key].split(";"))
    return mx.io.LibSVMIter(**kwargs)


def _check_csr(ours, theirs):
    assert isinstance(ours, CSRNDArray)
    assert list(ours.shape) == theirs["shape"]
    assert ours.indptr.asnumpy().tolist() == theirs["indptr"]
    assert ours.indices.asnumpy().tolist() == theirs["indices"]
    np.testing.assert_array_equal(ours.data.asnumpy(), np.float32(theirs["data"]))


@pytest.mark.parametrize("name", sorted(FIXTURES["cases"]))
def test_batches_match_mxnet(folder, name):
    case = FIXTURES["cases"][name]
    it = _make(folder, case["kwargs"])
    assert [[d.name, list(d.shape)] for d in it.provide_data] == case["provide_data"]
    assert [[d.name, list(d.shape)] for d in it.provide_label] == case["provide_label"]
    assert it.provide_data[0].dtype == np.float32
    for epoch in case["epochs"]:
        batches = list(it)
        assert len(batches) == len(epoch)
        for ours, theirs in zip(batches, epoch):
            _check_csr(ours.data[0], theirs["data"])
            assert ours.pad == theirs["pad"]
            assert ours.index.dtype == np.uint64
            assert ours.index.tolist() == theirs["index"]
            if isinstance(theirs["label"], dict):
                _check_csr(ours.label[0], theirs["label"])
            else:
                np.testing.assert_array_equal(ours.label[0].asnumpy(),
                                              np.float32(theirs["label"]))
        it.reset()


def test_reset_mid_epoch_starts_over(folder):
    it = _make(folder, dict(data_libsvm="parts.t", data_shape=[10], batch_size=4))
    first = it.next().label[0].asnumpy()
    it.next()
    it.reset()
    np.testing.assert_array_equal(it.next().label[0].asnumpy(), first)


@pytest.mark.parametrize("kwargs, message", [
    (dict(data_shape=[3, 1]), "dimension of data_shape is expected to be 1"),
    (dict(label_shape=[3]), "label_shape is expected to be (1,)"),
    (dict(label_libsvm="label.t"), "label_shape is not expected to be (1,)"),
    (dict(round_batch=False), "round_batch == false"),
    (dict(dtype="float64"), "dtype must be float32"),
    (dict(batch_size=9), "number of input must be bigger than batch size"),
    (dict(data_shape=[2]), "feature index 2, outside data_shape=(2,)"),
    (dict(data_libsvm="missing.t"), "does not exist"),
])
def test_bad_arguments(folder, kwargs, message):
    args = dict(data_libsvm="data.t", data_shape=[3], batch_size=3)
    args.update(kwargs)
    with pytest.raises(mx.MXNetError) as err:
        _make(folder, args)
    assert message in str(err.value)


def test_feature_without_value_is_refused(tmp_path):
    (tmp_path / "bad.t").write_text("1 0:1 2:1\n0 1 2:5\n")
    with pytest.raises(mx.MXNetError, match="row 1 .* the feature '1', not index:value"):
        mx.io.LibSVMIter(data_libsvm=str(tmp_path / "bad.t"), data_shape=(3,), batch_size=1)


def test_label_file_shorter_than_data(tmp_path):
    (tmp_path / "d.t").write_text("1 0:1\n0 1:1\n")
    (tmp_path / "l.t").write_text("0 0:1\n")
    with pytest.raises(mx.MXNetError, match="fewer than the 2"):
        mx.io.LibSVMIter(data_libsvm=str(tmp_path / "d.t"), data_shape=(2,), batch_size=1,
                         label_libsvm=str(tmp_path / "l.t"), label_shape=(2,))


def test_numbers_are_read_as_python_reads_them():
    texts = [b"-1.5", b"0.001", b"+3", b"12345.678", b"1e-3", b".5", b"7.", b"-0",
             b"3.14159265358979323", b"123456789012345", b"0.1", b"2.25", b"inf"]
    got = libsvm_parse._numbers(texts, False)
    assert got.tolist() == [float(t) for t in texts]
    assert libsvm_parse._numbers([b"0", b"999999", b"12345678901234567"], True).tolist() == \
        [0, 999999, 12345678901234567]


def test_parser_is_vectorised(tmp_path):
    """100,000 lines of 39 features (a Criteo-sized row) parse in seconds, not minutes."""
    rng = np.random.RandomState(0)
    cols = np.sort(rng.randint(0, 10 ** 6, size=(100000, 39)), axis=1)
    text = "\n".join("%d %s" % (i % 2, " ".join("%d:1" % c for c in row))
                     for i, row in enumerate(cols)).encode()
    start = time.perf_counter()
    labels, indptr, indices, values = libsvm_parse.parse(text + b"\n", "test")
    assert time.perf_counter() - start < 30     # 4 s on a loaded 2-core machine
    assert indptr[-1] == 39 * 100000 and (values == 1).all()
    np.testing.assert_array_equal(indices, cols.ravel())
    np.testing.assert_array_equal(labels[:4], [0, 1, 0, 1])


@pytest.mark.parametrize("contexts", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]])
def test_module_forward_on_libsvm_batches(folder, contexts):
    """csr batches go into a Module as csr (sliced by rows across devices)."""
    it = _make(folder, dict(data_libsvm="parts.t", data_shape=[10], batch_size=4))
    x = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("w", shape=(10, 2))
    out = mx.sym.LinearRegressionOutput(mx.sym.dot(x, w), mx.sym.Variable("lab"))
    mod = mx.mod.Module(out, data_names=["data"], label_names=["lab"], context=contexts)
    mod.bind(data_shapes=it.provide_data, label_shapes=[("lab", (4, 2))])
    weight = np.arange(20, dtype=np.float32).reshape(10, 2) / 7
    mod.init_params(arg_params={"w": mx.nd.array(weight)})
    for batch in it:
        dense = batch.data[0].asnumpy()
        mod.forward(mx.io.DataBatch(batch.data, [mx.nd.zeros((4, 2))]), is_train=False)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), dense @ weight,
                                   rtol=1e-6)
