"""row_sparse init / push / pull / row_sparse_pull on 'local' and 'device' stores,
against mxnet 1.9.1 (tests/fixtures/make_sparse_fixtures.py, kvstore_cases)."""
import logging
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "sparse_cases.npz"))


def rsp(prefix):
    return mx.nd.sparse.row_sparse_array((FIX[prefix + "/data"], FIX[prefix + "/indices"]),
                                         shape=FIX[prefix + "/dense"].shape)


def assert_parts(arr, prefix):
    assert arr.stype == "row_sparse"
    np.testing.assert_array_equal(arr.indices.asnumpy(), FIX[prefix + "/indices"])
    np.testing.assert_array_equal(arr.data.asnumpy(), FIX[prefix + "/data"])
    np.testing.assert_array_equal(arr.asnumpy(), FIX[prefix + "/dense"])


@pytest.mark.parametrize("kv_type", ["local", "device"])
def test_row_sparse_sequence_matches_mxnet(kv_type):
    pre = f"kv_{kv_type}/"
    kv = mx.kv.create(kv_type)
    kv.init("w", rsp(pre + "init"))
    pulled = mx.nd.sparse.zeros("row_sparse", (10, 4))
    # duplicated, unsorted ids: the store makes them unique and sorted
    kv.row_sparse_pull("w", out=pulled, row_ids=mx.nd.array([7, 1, 1, 3, 9], dtype="int64"))
    assert_parts(pulled, pre + "pull_ids")
    kv.push("w", [rsp(pre + "g1"), rsp(pre + "g2")])        # no optimizer: the sum replaces
    outs = [mx.nd.sparse.zeros("row_sparse", (10, 4)) for _ in range(2)]
    kv.row_sparse_pull("w", out=outs, row_ids=[mx.nd.array([0, 2, 5], dtype="int64")])
    assert_parts(outs[0], pre + "pull_after_push0")
    assert_parts(outs[1], pre + "pull_after_push1")
    dense = mx.nd.zeros((10, 4))
    kv.pull("w", out=dense, ignore_sparse=False)
    np.testing.assert_allclose(dense.asnumpy(), FIX[pre + "pull_dense"], rtol=1e-6, atol=1e-6)
    kv.init("d", mx.nd.ones((10, 4)))
    kv.push("d", rsp(pre + "g1"))
    dense2 = mx.nd.zeros((10, 4))
    kv.pull("d", out=dense2)
    np.testing.assert_array_equal(dense2.asnumpy(), FIX[pre + "dense_key_after_rsp_push"])


def test_row_ids_per_output_and_int_keys():
    kv = mx.kv.create("local")
    kv.init(3, rsp("kv_local/init"))
    outs = [mx.nd.sparse.zeros("row_sparse", (10, 4)) for _ in range(2)]
    kv.row_sparse_pull(3, out=outs, row_ids=[mx.nd.array([9, 1]), mx.nd.array([3])])
    full = FIX["kv_local/init/dense"]
    assert outs[0].indices.asnumpy().tolist() == [1, 9]
    np.testing.assert_array_equal(outs[0].data.asnumpy(), full[[1, 9]])
    assert outs[1].indices.asnumpy().tolist() == [3]
    np.testing.assert_array_equal(outs[1].data.asnumpy(), full[[3]])


def test_sparse_pull_ignored_unless_asked(caplog):
    kv = mx.kv.create("local")
    kv.init("w", rsp("kv_local/init"))
    out = mx.nd.sparse.zeros("row_sparse", (10, 4))
    with caplog.at_level(logging.WARNING):
        kv.pull("w", out=out)
    assert out.indices.shape == (0,) and "row_sparse_pull" in caplog.text
    kv.pull("w", out=out, ignore_sparse=False)
    np.testing.assert_array_equal(out.asnumpy(), FIX["kv_local/init/dense"])


def test_refusals():
    kv = mx.kv.create("local")
    kv.init("d", mx.nd.ones((4, 2)))
    with pytest.raises(MXNetError, match="expects a row_sparse"):
        kv.row_sparse_pull("d", out=mx.nd.sparse.zeros("row_sparse", (4, 2)),
                           row_ids=mx.nd.array([0]))
    kv.init("w", mx.nd.ones((4, 2)).tostype("row_sparse"))
    with pytest.raises(MXNetError, match="row_sparse storage type"):
        kv.row_sparse_pull("w", out=mx.nd.zeros((4, 2)), row_ids=mx.nd.array([0]))
    with pytest.raises(MXNetError, match="Unexpected storage type"):
        kv.push("w", mx.nd.ones((4, 2)).tostype("csr"))
    with pytest.raises(MXNetError, match="csr"):
        kv.init("c", mx.nd.ones((4, 2)).tostype("csr"))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1))
    with pytest.raises(MXNetError, match="dense gradient for a row_sparse weight"):
        kv.push("w", mx.nd.ones((4, 2)))


@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("mom", [0.0, 0.9])
@pytest.mark.parametrize("wstype", ["row_sparse", "default"])
def test_sgd_on_the_store_with_row_sparse_gradients(lazy, mom, wstype):
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=mom, wd=0.01,
                                      lazy_update=lazy, rescale_grad=0.5, clip_gradient=0.8))
    kv.init("w", mx.nd.array(FIX["sgd/w0"]).tostype(wstype))
    for i in range(3):
        kv.push("w", mx.nd.array(FIX[f"sgd/g{i}"]).tostype("row_sparse"))
    res = mx.nd.zeros((6, 3))
    kv.pull("w", out=res, ignore_sparse=False)
    want = FIX[f"sgd/{int(lazy)}_{mom}_{wstype}"]
    np.testing.assert_allclose(res.asnumpy(), want, rtol=1e-6, atol=1e-7)
    if lazy:        # rows 3 and 4 never had a gradient: untouched by wd and momentum
        np.testing.assert_array_equal(res.asnumpy()[[3, 4]], FIX["sgd/w0"][[3, 4]])


def test_sparse_update_refusals():
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    partial = mx.nd.sparse.row_sparse_array(([[1.0, 2.0]], [1]), shape=(3, 2))
    kv.init("p", partial)
    with pytest.raises(MXNetError, match="every row"):
        kv.push("p", mx.nd.ones((3, 2)).tostype("row_sparse"))


@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("wstype", ["row_sparse", "default"])
def test_updater_with_row_sparse_gradients_matches_the_store(lazy, wstype):
    # mxnet's store runs this same updater: the numbers are the store's fixture
    upd = mx.optimizer.get_updater(mx.optimizer.SGD(
        learning_rate=0.1, momentum=0.9, wd=0.01, lazy_update=lazy, rescale_grad=0.5,
        clip_gradient=0.8))
    w = mx.nd.array(FIX["sgd/w0"]).tostype(wstype)
    dense_other = mx.nd.ones((2, 2))
    for i in range(3):
        upd([0, 1], [mx.nd.array(FIX[f"sgd/g{i}"]).tostype("row_sparse"), mx.nd.ones((2, 2))],
            [w, dense_other])
    np.testing.assert_allclose(w.asnumpy(), FIX[f"sgd/{int(lazy)}_0.9_{wstype}"],
                               rtol=1e-6, atol=1e-7)
    assert upd.optimizer._index_update_count == {0: 3, 1: 3}
    assert float(dense_other.asnumpy()[0, 0]) != 1.0      # the dense one updated as before


def test_dense_key_pushed_beside_row_sparse_ones_updates():
    """example/sparse pushes its dense bias with its row_sparse weights in one call: the
    bias gets the optimizer's dense update, as when pushed alone."""
    def run(together):
        kv = mx.kv.create("local")
        kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
        kv.init(["w", "b"], [mx.nd.array(FIX["sgd/w0"]).tostype("row_sparse"),
                             mx.nd.ones((2,))])
        for i in range(3):
            grads = [mx.nd.array(FIX[f"sgd/g{i}"]).tostype("row_sparse"),
                     mx.nd.array([0.5, -1.0])]
            if together:
                kv.push(["w", "b"], grads)
            else:
                kv.push("w", grads[0])
                kv.push("b", grads[1])
        bias, weight = mx.nd.zeros((2,)), mx.nd.zeros((6, 3))
        kv.pull("b", out=bias)
        kv.pull("w", out=weight, ignore_sparse=False)
        return bias.asnumpy(), weight.asnumpy()
    (b1, w1), (b2, w2) = run(True), run(False)
    np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(w1, w2)
    want, mom = np.ones(2), np.zeros(2)
    for _ in range(3):      # mxnet's sgd_mom_update
        mom = 0.9 * mom - 0.1 * (np.array([0.5, -1.0]) + 0.01 * want)
        want = want + mom
    np.testing.assert_allclose(b1, want, rtol=1e-6)
