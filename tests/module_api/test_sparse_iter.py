"""NDArrayIter over csr data and a Module fed by it, against mxnet 1.9.1
(tests/fixtures/make_sparse_fixtures.py, iter_cases). Executors bind data dense: a
csr batch is converted when it is loaded, as mxnet's copy into a dense input does."""
import os

import numpy as np
import pytest

import module_api as mx

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "sparse_cases.npz"))


def _csr_iter(**kw):
    return mx.io.NDArrayIter(mx.nd.array(FIX["iter/x"]).tostype("csr"),
                             mx.nd.array(FIX["iter/y"]), batch_size=4,
                             last_batch_handle="discard", **kw)


def test_batches_are_dense_row_slices_as_in_mxnet():
    # mxnet 1.9.1 slices with slice_axis, which has no csr kernel: its batches are dense
    batches = list(_csr_iter())
    assert len(batches) == int(FIX["iter/nbatch"])
    for i, b in enumerate(batches):
        arr = b.data[0]
        assert arr.stype == "default" and arr.shape == (4, 6)
        np.testing.assert_array_equal(arr.asnumpy(), FIX[f"iter/batch{i}/dense"])
        assert f"iter/batch{i}/indptr" not in FIX.files


def test_only_discard_and_shuffle_matches_dense():
    with pytest.raises(NotImplementedError, match="discard"):
        mx.io.NDArrayIter(mx.nd.array(FIX["iter/x"]).tostype("csr"), batch_size=4)
    with pytest.raises(TypeError, match="RowSparseNDArray"):
        mx.io.NDArrayIter(mx.nd.array(FIX["iter/x"]).tostype("row_sparse"), batch_size=4,
                          last_batch_handle="discard")
    np.random.seed(3)
    sparse = [b.data[0].asnumpy() for b in _csr_iter(shuffle=True)]
    np.random.seed(3)
    dense = [b.data[0].asnumpy() for b in mx.io.NDArrayIter(
        FIX["iter/x"], FIX["iter/y"], batch_size=4, shuffle=True, last_batch_handle="discard")]
    assert len(sparse) == len(dense) == 4
    for s, d in zip(sparse, dense):
        np.testing.assert_array_equal(s, d)


def test_module_trains_on_csr_batches_like_mxnet():
    data = mx.sym.Variable("data")
    pred = mx.sym.FullyConnected(data, num_hidden=1, no_bias=True, name="fc")
    net = mx.sym.LinearRegressionOutput(pred, name="lro")
    mod = mx.mod.Module(net, label_names=["lro_label"])
    it = mx.io.NDArrayIter(mx.nd.array(FIX["iter/x"]).tostype("csr"),
                           {"lro_label": mx.nd.array(FIX["iter/y"])}, batch_size=4,
                           last_batch_handle="discard")
    mod.fit(it, num_epoch=2, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
            arg_params={"fc_weight": mx.nd.array(FIX["iter/w0"])}, eval_metric="mse")
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(),
                               FIX["iter/w_final"], rtol=1e-5, atol=1e-6)


def test_parts_of_csr_data_match_dense_parts():
    x = FIX["iter/x"]
    for part in range(3):
        got = [b.data[0].asnumpy() for b in mx.io.NDArrayIter(
            mx.nd.array(x).tostype("csr"), batch_size=2, last_batch_handle="discard",
            num_parts=3, part_index=part)]
        want = [b.data[0].asnumpy() for b in mx.io.NDArrayIter(
            x, batch_size=2, last_batch_handle="discard", num_parts=3, part_index=part)]
        assert len(got) == len(want) == 3
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_forward_of_a_csr_batch_equals_the_dense_batch():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    mod = mx.mod.Module(net, label_names=None)
    mod.bind(data_shapes=[("data", (4, 6))], for_training=False)
    mod.init_params(initializer=mx.init.Uniform(0.5))
    x = FIX["iter/x"][:4]
    mod.forward(mx.io.DataBatch([mx.nd.array(x).tostype("csr")]), is_train=False)
    got = mod.get_outputs()[0].asnumpy()
    mod.forward(mx.io.DataBatch([mx.nd.array(x)]), is_train=False)
    np.testing.assert_array_equal(got, mod.get_outputs()[0].asnumpy())
