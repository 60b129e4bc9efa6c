"""``dot(csr, W)`` read through W's rows at the csr's columns (runtime/executor_csrdot.py):
no dense copy of the csr batch, no W-sized gradient, the same numbers as numpy and as
the dense path step by step. mxnet-made numbers of the same path:
tests/module_api/test_sparse_symbols.py (``dot/*``, ``fm/*``, ``train/*``)."""
import numpy as np
import pytest

import module_api as mx


def _csr(rng, shape, density):
    dense = rng.uniform(-1, 1, shape).astype(np.float32)
    return dense * (rng.uniform(size=shape) < density)


def _bind(features, batch, n, w_stype="row_sparse", grad_req=None):
    x = mx.sym.var("data", stype="csr")
    w = mx.sym.var("w", stype=w_stype)
    y = mx.sym.LinearRegressionOutput(mx.sym.sparse.dot(x, w), mx.sym.var("label"))
    req = {"data": "null", "w": "write", "label": "null"}
    req.update(grad_req or {})
    return y.simple_bind(mx.cpu(), data=(batch, features), w=(features, n),
                         label=(batch, n), grad_req=req)


def test_dot_csr_row_sparse_weight_against_numpy(cpu_target):
    rng = np.random.RandomState(0)
    ex = _bind(30, 5, 2)
    assert ex._rows.dots == {"w_rows0"} and not ex._shadows
    assert ex._rows.symbol.list_arguments() == ["w_rows0", "label"]
    d = _csr(rng, (5, 30), 0.2)
    d[2] = 0                                     # an empty row: a zero output row
    d[0, 3] = d[1, 3] = 0.5                      # a column two rows store
    table = rng.uniform(-1, 1, (30, 2)).astype(np.float32)
    kept = np.array([0, 3, 4, 9, 17, 25])        # W stores these rows only: others are 0
    stored = np.zeros_like(table)
    stored[kept] = table[kept]
    lab = rng.uniform(size=(5, 2)).astype(np.float32)
    ex.arg_dict["data"][:] = mx.nd.array(d).tostype("csr")
    ex.arg_dict["w"][:] = mx.nd.sparse.retain(mx.nd.array(table).tostype("row_sparse"),
                                              mx.nd.array(kept))
    ex.arg_dict["label"][:] = lab
    out = ex.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out, d @ stored, rtol=1e-5, atol=1e-6)
    ex.backward()
    g = ex.grad_dict["w"]
    # LinearRegressionOutput's gradient is (out - label) / num_output
    want = d.T @ ((out - lab) / 2)
    assert g.stype == "row_sparse"
    np.testing.assert_array_equal(g.indices.asnumpy(), np.unique(np.nonzero(d)[1]))
    np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_columns_stored_with_zero_values_are_gradient_rows():
    """mxnet's DotCsrDnsRspImpl marks every column the csr stores, zero values too;
    an empty csr gives a gradient with no rows."""
    ex = _bind(6, 2, 1)
    data = mx.nd.sparse.csr_matrix((np.array([0.0, 2.0], np.float32), np.array([1, 4]),
                                    np.array([0, 1, 2])), shape=(2, 6))
    ex.arg_dict["data"][:] = data
    ex.arg_dict["w"][:] = mx.nd.ones((6, 1)).tostype("row_sparse")
    ex.forward(is_train=True)
    ex.backward()
    g = ex.grad_dict["w"]
    assert g.indices.asnumpy().tolist() == [1, 4]
    np.testing.assert_allclose(g.data.asnumpy(), [[0.0], [2.0 * (2.0 - 0.0)]])
    ex.arg_dict["data"][:] = mx.nd.sparse.zeros("csr", (2, 6))
    np.testing.assert_array_equal(ex.forward(is_train=True)[0].asnumpy(), 0)
    ex.backward()
    assert ex.grad_dict["w"].indices.asnumpy().size == 0


def test_wide_csr_batch_keeps_no_feature_sized_buffer():
    features, batch = 200001, 8
    ex = _bind(features, batch, 1, w_stype="default")
    assert ex.arg_dict["w"].stype == "default" and ex.grad_dict["w"].stype == "row_sparse"
    assert ex._shadows.resolve("arg", "data") is None
    rng = np.random.RandomState(1)
    cols = np.sort(rng.choice(features, (batch, 5), replace=True), axis=1)
    cols[0, :2] = [7, 7 + 1]
    cols[1, :2] = [7, features - 1]              # the last feature, and a shared one
    vals = rng.uniform(-1, 1, cols.shape).astype(np.float32)
    rows = np.repeat(np.arange(batch), 5)
    d = mx.nd.sparse.csr_matrix((vals.ravel(), (rows, cols.ravel())), shape=(batch, features))
    table = rng.uniform(-1, 1, (features, 1)).astype(np.float32)
    ex.arg_dict["w"][:] = table
    ex.arg_dict["data"][:] = d
    ex.arg_dict["label"][:] = np.zeros((batch, 1), np.float32)
    out = ex.forward(is_train=True)[0].asnumpy()
    dense = d.asnumpy()
    np.testing.assert_allclose(out, dense @ table, rtol=1e-5, atol=1e-6)
    ex.backward()
    g = ex.grad_dict["w"]
    used = np.unique(d.indices.asnumpy())
    np.testing.assert_array_equal(g.indices.asnumpy(), used)
    np.testing.assert_allclose(g.data.asnumpy(), (dense.T @ out)[used], rtol=1e-5, atol=1e-6)
    assert ex._total_exec_bytes < table.nbytes / 100


def test_a_weight_read_by_a_dot_and_an_embedding_sums_both():
    x = mx.sym.var("data", stype="csr")
    w = mx.sym.var("w", stype="row_sparse")
    emb = mx.sym.Embedding(mx.sym.var("ids"), weight=w, input_dim=8, output_dim=2,
                           sparse_grad=True)
    loss = mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(mx.sym.dot(x, w))) + 3 * mx.sym.sum(emb))
    ex = loss.simple_bind(mx.cpu(), data=(3, 8), ids=(4,),
                          grad_req={"data": "null", "ids": "null", "w": "write"})
    assert [r for r, _ in ex._rows.tables["w"]] == ["w_rows0", "w_rows1"]
    rng = np.random.RandomState(2)
    d = _csr(rng, (3, 8), 0.3)
    table = rng.uniform(-1, 1, (8, 2)).astype(np.float32)
    ids = np.array([1, 6, 6, 0], np.float32)
    ex.arg_dict["w"][:] = mx.nd.array(table).tostype("row_sparse")
    out = ex.forward(is_train=True, data=mx.nd.array(d).tostype("csr"),
                     ids=mx.nd.array(ids))[0].asnumpy()
    prod = d @ table
    np.testing.assert_allclose(out, (prod ** 2).sum() + 3 * table[ids.astype(int)].sum(),
                               rtol=1e-5)
    ex.backward()
    want = d.T @ (2 * prod)
    np.add.at(want, ids.astype(int), 3.0)
    g = ex.grad_dict["w"]
    rows = np.union1d(np.nonzero(d)[1], ids.astype(int))
    np.testing.assert_array_equal(g.indices.asnumpy(), rows)
    np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("req", [{"w": "add"}, {"data": "write"}])
def test_what_sparse_dot_refuses_keeps_the_dense_shadows(req):
    """mxnet's sparse dot refuses grad_req 'add' on W and a gradient of the csr: those
    bindings keep the dense shadows (their behaviour before this path)."""
    ex = _bind(6, 2, 1, grad_req=req)
    assert ex._rows is None and ex._shadows.resolve("arg", "data") is not None


def _linear_module(features, sparse_data, init):
    x = mx.sym.var("data", stype="csr" if sparse_data else "default")
    w = mx.sym.var("weight", shape=(features, 1),
                   stype="row_sparse" if sparse_data else "default")
    pred = mx.sym.broadcast_add(mx.sym.sparse.dot(x, w), mx.sym.var("bias", shape=(1,)))
    sym = mx.sym.LogisticRegressionOutput(pred, mx.sym.var("softmax_label"), name="out")
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"],
                        context=mx.cpu())
    mod.bind(data_shapes=[("data", (6, features))], label_shapes=[("softmax_label", (6, 1))])
    params = {k: mx.nd.array(v) for k, v in init.items()}
    if sparse_data:
        params["weight"] = params["weight"].tostype("row_sparse")
    mod.init_params(arg_params=params)
    mod.init_optimizer(kvstore=mx.kv.create("local") if sparse_data else None,
                       optimizer="sgd", optimizer_params={"learning_rate": 0.5,
                                                          "rescale_grad": 1 / 6})
    return mod


def test_module_sparse_steps_equal_the_dense_steps():
    """Plain SGD without weight decay: the lazy update of the csr's columns and the
    dense update of every row give the same weight, step by step."""
    features = 50
    rng = np.random.RandomState(3)
    init = {"weight": rng.uniform(-1, 1, (features, 1)).astype(np.float32),
            "bias": np.zeros((1,), np.float32)}
    sparse, dense = _linear_module(features, True, init), _linear_module(features, False, init)
    assert sparse._exec_group.execs[0]._rows.dots
    assert not sparse._exec_group.execs[0]._shadows
    assert dense._exec_group.execs[0]._rows is None

    def ids_of(b):
        return {"weight": b.data[0].indices}
    for step in range(4):
        d = _csr(rng, (6, features), 0.1)
        lab = (rng.uniform(size=(6, 1)) > 0.5).astype(np.float32)
        batches = [mx.io.DataBatch([mx.nd.array(d).tostype("csr")], [mx.nd.array(lab)]),
                   mx.io.DataBatch([mx.nd.array(d)], [mx.nd.array(lab)])]
        sparse.prepare(batches[0], sparse_row_id_fn=ids_of)
        for mod, batch in zip((sparse, dense), batches):
            mod.forward_backward(batch)
            mod.update()
        np.testing.assert_allclose(sparse.get_outputs()[0].asnumpy(),
                                   dense.get_outputs()[0].asnumpy(), rtol=1e-5, atol=1e-6)
        got, want = sparse.get_params()[0], dense.get_params()[0]
        for k in init:
            np.testing.assert_allclose(got[k].asnumpy(), want[k].asnumpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=f"{k} after step {step}")
