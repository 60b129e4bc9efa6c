"""Embedding tables read through their batch's rows (runtime/executor_rows.py): the
Program never holds the table or a table-sized gradient, and the sparse path's
results equal the dense path's, step by step."""
import os
import re

import numpy as np
import pytest

import module_api as mx
from runtime.executor_rows import gather_rows, sum_rows


def _loss(emb):
    return mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(emb)))


def _embedding(data, weight, rows, dim, kind):
    if kind == "contrib":
        return mx.sym.contrib.SparseEmbedding(data=data, weight=weight, input_dim=rows,
                                              output_dim=dim, name="embed")
    return mx.sym.Embedding(data=data, weight=weight, input_dim=rows, output_dim=dim,
                            sparse_grad=True, name="embed")


def _dense_grad(table, ids):
    """The gradient of sum(table[clip(int(ids))]^2) with respect to table, and its rows."""
    idx = np.clip(ids.astype(np.int64), 0, table.shape[0] - 1).ravel()
    want = np.zeros_like(table)
    np.add.at(want, idx, 2 * table[idx])
    return want, np.unique(idx)


@pytest.mark.parametrize("kind", ["grad", "contrib"])
def test_row_sparse_table_is_read_through_rows(cpu_target, kind):
    w = mx.sym.var("w", stype="row_sparse")
    ex = _loss(_embedding(mx.sym.var("data"), w, 10, 3, kind)).simple_bind(
        mx.cpu(), data=(2, 3), grad_req={"data": "null", "w": "write"})
    assert ex._rows is not None and not ex._shadows
    assert "w" not in ex._rows.symbol.list_arguments()
    table = np.arange(30, dtype=np.float32).reshape(10, 3) / 10
    # the bound table stores rows 1, 2, 5 only: the others read as zeros, as in mxnet
    ex.arg_dict["w"][:] = mx.nd.array(table).tostype("row_sparse")
    ex.arg_dict["w"][:] = mx.nd.sparse.retain(ex.arg_dict["w"], mx.nd.array([1, 2, 5]))
    stored = np.zeros_like(table)
    stored[[1, 2, 5]] = table[[1, 2, 5]]
    ids = np.array([[1, 2, 2.7], [0, 5, 12]], dtype=np.float32)   # 2.7 -> 2, 12 -> 9
    ex.arg_dict["data"][:] = mx.nd.array(ids)
    out = ex.forward(is_train=True)[0].asnumpy()
    idx = np.clip(ids.astype(np.int64), 0, 9)
    np.testing.assert_allclose(out, (stored[idx] ** 2).sum(), rtol=1e-6)
    ex.backward()
    want, rows = _dense_grad(stored, ids)
    g = ex.grad_dict["w"]
    assert g.stype == "row_sparse"
    np.testing.assert_array_equal(g.indices.asnumpy(), rows)
    np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-6)


def test_sparse_embedding_takes_mxnets_own_attributes():
    """mxnet's SparseEmbeddingParam: ``deterministic`` (a fixed summation order, which
    every backward has here: two backwards agree bit for bit), and no ``sparse_grad``."""
    ids = np.array([1, 2, 1, 0, 9, 1])
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    emb = mx.sym.contrib.SparseEmbedding(data=mx.sym.var("data"), input_dim=10, output_dim=4,
                                         deterministic=True, name="embed")
    exe = _loss(emb).simple_bind(mx.cpu(), grad_req={"data": "null", "embed_weight": "write"},
                                 data=(6,))
    exe.arg_dict["data"][:] = ids
    exe.arg_dict["embed_weight"][:] = table
    exe.forward(is_train=True)
    exe.backward()
    first = exe.grad_dict["embed_weight"].asnumpy()
    exe.backward()
    np.testing.assert_array_equal(exe.grad_dict["embed_weight"].asnumpy(), first)
    np.testing.assert_allclose(first, _dense_grad(table, ids)[0])
    with pytest.raises(mx.MXNetError, match="sparse_grad"):
        mx.sym.contrib.SparseEmbedding(data=mx.sym.var("data"), input_dim=10, output_dim=4,
                                       sparse_grad=True)


def test_dense_table_with_sparse_grad_keeps_no_table_sized_buffer():
    rows, dim = 20000, 16
    data = mx.sym.var("data")
    emb = _embedding(data, mx.sym.var("w"), rows, dim, "grad")
    ex = _loss(emb).simple_bind(mx.cpu(), data=(4, 5), grad_req="write")
    assert ex.grad_dict["w"].stype == "row_sparse" and ex.arg_dict["w"].stype == "default"
    rng = np.random.RandomState(0)
    table = rng.uniform(-1, 1, (rows, dim)).astype(np.float32)
    ex.arg_dict["w"][:] = table
    ids = rng.randint(0, rows, (4, 5)).astype(np.float32)
    ids[0, :2] = ids[1, 3]                       # repeated ids sum their rows
    ex.arg_dict["data"][:] = ids
    ex.forward(is_train=True)
    ex.backward()
    assert ex._total_exec_bytes < table.nbytes / 100
    want, rows_ = _dense_grad(table, ids)
    g = ex.grad_dict["w"]
    np.testing.assert_array_equal(g.indices.asnumpy(), rows_)
    np.testing.assert_allclose(g.data.asnumpy(), want[rows_], rtol=1e-6)
    # the data leaves the Program: its gradient is zero (mxnet's Embedding gives none)
    np.testing.assert_array_equal(ex.grad_dict["data"].asnumpy(), 0)


def test_two_reads_of_one_table_sum_into_one_gradient():
    w = mx.sym.var("w", stype="row_sparse")
    a = _embedding(mx.sym.var("a"), w, 8, 2, "grad")
    b = mx.sym.contrib.SparseEmbedding(data=mx.sym.var("b"), weight=w, input_dim=8,
                                       output_dim=2, name="embed_b")
    loss = mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(a)) + 3 * mx.sym.sum(b))
    ex = loss.simple_bind(mx.cpu(), a=(3,), b=(2, 2),
                          grad_req={"a": "null", "b": "null", "w": "write"})
    assert [r for r, _ in ex._rows.tables["w"]] == ["w_rows0", "w_rows1"]
    table = np.arange(16, dtype=np.float32).reshape(8, 2) - 4
    ex.arg_dict["w"][:] = mx.nd.array(table).tostype("row_sparse")
    ida, idb = np.array([1, 4, 4], np.float32), np.array([[4, 7], [0, 7]], np.float32)
    out = ex.forward(is_train=True, a=mx.nd.array(ida), b=mx.nd.array(idb))[0].asnumpy()
    ia, ib = ida.astype(int), idb.astype(int).ravel()
    np.testing.assert_allclose(out, (table[ia] ** 2).sum() + 3 * table[ib].sum(), rtol=1e-6)
    ex.backward()
    want = np.zeros_like(table)
    np.add.at(want, ia, 2 * table[ia])
    np.add.at(want, ib, 3.0)
    g = ex.grad_dict["w"]
    np.testing.assert_array_equal(g.indices.asnumpy(), [0, 1, 4, 7])
    np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-6)


def test_grad_req_add_is_refused_at_backward_as_mxnet():
    ex = _loss(_embedding(mx.sym.var("data"), mx.sym.var("w", stype="row_sparse"), 10, 3,
                          "grad")).simple_bind(mx.cpu(), data=(2, 3),
                                               grad_req={"data": "null", "w": "add"})
    ex.forward(is_train=True)               # a forward alone is fine, as in mxnet
    with pytest.raises(mx.MXNetError, match="req != write"):
        ex.backward()


def test_other_consumers_keep_the_dense_shadow():
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", stype="row_sparse")
    # v is read by a dot (which alone would read it through rows) and by _square_sum
    both = mx.sym.dot(x, v) + mx.sym.dot(
        mx.sym.square(x), mx.sym._internal._square_sum(v, axis=1, keepdims=True))
    ex = mx.sym.LinearRegressionOutput(both, mx.sym.var("label")).simple_bind(
        mx.cpu(), data=(4, 6), v=(6, 1), label=(4, 1),
        grad_req={"data": "null", "v": "write", "label": "null"})
    assert ex._rows is None and ex._shadows


def test_gather_rows_and_sum_rows():
    import torch
    table = mx.nd.array(np.arange(12, dtype=np.float32).reshape(6, 2)).tostype("row_sparse")
    part = mx.nd.sparse.retain(table, mx.nd.array([0, 3, 4]))
    ids = torch.tensor([3, 1, 0, 3, 5])
    for src, zero in ((table, []), (part, [1, 4])):
        out = torch.empty(5, 2)
        gather_rows(src, ids, out)
        want = np.arange(12, dtype=np.float32).reshape(6, 2)[ids.numpy()]
        want[zero] = 0
        np.testing.assert_array_equal(out.numpy(), want)
    data, rows = sum_rows(ids, torch.arange(10.).reshape(5, 2))
    assert rows.tolist() == [0, 1, 3, 5]
    assert data.tolist() == [[4, 5], [2, 3], [6, 8], [8, 9]]


def _module(rows, dim, sparse, arg_params, momentum=0.0):
    data = mx.sym.var("data")
    weight = mx.sym.var("embed_weight", stype="row_sparse" if sparse else "default")
    emb = mx.sym.Embedding(data, weight=weight, input_dim=rows, output_dim=dim,
                           sparse_grad=sparse, name="embed")
    pred = mx.sym.FullyConnected(mx.sym.sum(emb, axis=1), num_hidden=1, name="fc")
    sym = mx.sym.LinearRegressionOutput(pred, mx.sym.var("label"), name="out")
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["label"], context=mx.cpu())
    mod.bind(data_shapes=[("data", (6, 3))], label_shapes=[("label", (6, 1))])
    params = dict(arg_params)
    if sparse:
        params["embed_weight"] = mx.nd.array(params["embed_weight"]).tostype("row_sparse")
    mod.init_params(arg_params={k: v if not isinstance(v, np.ndarray) else mx.nd.array(v)
                                for k, v in params.items()})
    mod.init_optimizer(kvstore=mx.kv.create("local") if sparse else None, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.5, "momentum": momentum,
                                         "rescale_grad": 1 / 6})
    return mod


def test_module_sparse_steps_equal_the_dense_steps():
    """Plain SGD, no weight decay: the lazy update of the pulled rows and the dense update
    of every row give the same table, step by step."""
    rows, dim = 40, 4
    rng = np.random.RandomState(3)
    init = {"embed_weight": rng.uniform(-1, 1, (rows, dim)).astype(np.float32),
            "fc_weight": rng.uniform(-1, 1, (1, dim)).astype(np.float32),
            "fc_bias": np.zeros(1, np.float32)}
    sparse, dense = _module(rows, dim, True, init), _module(rows, dim, False, init)
    assert sparse._exec_group.execs[0]._rows is not None
    assert dense._exec_group.execs[0]._rows is None

    def ids_of(b):
        return {"embed_weight": b.data[0].reshape((-1,)).astype("int64")}
    for step in range(4):
        ids = rng.randint(0, rows, (6, 3)).astype(np.float32)
        ids[0] = ids[1]                                  # repeats within the batch
        batch = mx.io.DataBatch([mx.nd.array(ids)],
                                [mx.nd.array(rng.uniform(-1, 1, (6, 1)))])
        sparse.prepare(batch, sparse_row_id_fn=ids_of)
        for mod in (sparse, dense):
            mod.forward_backward(batch)
            mod.update()
        np.testing.assert_allclose(sparse.get_outputs()[0].asnumpy(),
                                   dense.get_outputs()[0].asnumpy(), rtol=1e-5, atol=1e-6)
        got, want = sparse.get_params()[0], dense.get_params()[0]
        for k in init:
            np.testing.assert_allclose(got[k].asnumpy(), want[k].asnumpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=f"{k} after step {step}")


def test_module_with_sparse_row_id_fn_matches_mxnet():
    """tests/fixtures/make_sparse_embedding_fixtures.py: a row_sparse table read by an
    Embedding and a SparseEmbedding, pulled by ``prepare`` and updated lazily on a
    ``local`` kvstore (momentum and weight decay), against mxnet 1.9.1 step by step."""
    fix = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                               "sparse_embedding_cases.npz"))
    rows, dim = fix["init/embed_weight"].shape
    weight = mx.sym.var("embed_weight", stype="row_sparse")
    a = mx.sym.Embedding(mx.sym.var("data"), weight=weight, input_dim=rows, output_dim=dim,
                         sparse_grad=True, name="embed")
    b = mx.sym.contrib.SparseEmbedding(mx.sym.var("data2"), weight=weight, input_dim=rows,
                                       output_dim=dim, name="embed2")
    pred = mx.sym.FullyConnected(mx.sym.sum(a, axis=1) + mx.sym.sum(b, axis=1),
                                 num_hidden=1, name="fc")
    sym = mx.sym.LinearRegressionOutput(pred, mx.sym.var("label"), name="out")
    batch = fix["0/data"].shape[0]
    mod = mx.mod.Module(sym, data_names=["data", "data2"], label_names=["label"])
    mod.bind(data_shapes=[("data", fix["0/data"].shape), ("data2", fix["0/data2"].shape)],
             label_shapes=[("label", (batch, 1))])
    params = ("embed_weight", "fc_weight", "fc_bias")
    arg = {k: mx.nd.array(fix["init/" + k]) for k in params}
    arg["embed_weight"] = arg["embed_weight"].tostype("row_sparse")
    mod.init_params(arg_params=arg)
    mod.init_optimizer(kvstore=mx.kv.create("local"), optimizer="sgd",
                       optimizer_params={"learning_rate": 0.2, "momentum": 0.9, "wd": 0.01,
                                         "rescale_grad": 1.0 / batch})
    assert mod._exec_group.execs[0]._rows is not None

    def ids_of(bt):
        ids = mx.nd.concat(bt.data[0].reshape((-1,)), bt.data[1].reshape((-1,)), dim=0)
        return {"embed_weight": ids.astype("int64")}
    for step in range(int(fix["steps"])):
        bt = mx.io.DataBatch([mx.nd.array(fix[f"{step}/data"]),
                              mx.nd.array(fix[f"{step}/data2"])],
                             [mx.nd.array(fix[f"{step}/label"])])
        mod.prepare(bt, sparse_row_id_fn=ids_of)
        mod.forward_backward(bt)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), fix[f"{step}/out"],
                                   rtol=1e-5, atol=1e-6, err_msg=f"output of step {step}")
        mod.update()
        got = mod.get_params()[0]
        for k in params:
            np.testing.assert_allclose(got[k].asnumpy(), fix[f"{step}/{k}"], rtol=1e-5,
                                       atol=1e-6, err_msg=f"{k} after step {step}")


def test_a_table_that_is_also_an_output_stays_whole():
    w = mx.sym.var("w", stype="row_sparse")
    emb = _embedding(mx.sym.var("data"), w, 10, 3, "grad")
    ex = mx.sym.Group([_loss(emb), w]).simple_bind(
        mx.cpu(), data=(2, 3), grad_req={"data": "null", "w": "write"})
    assert ex._rows is None


def test_debug_str_describes_the_program_that_runs():
    ex = _loss(_embedding(mx.sym.var("data"), mx.sym.var("w", stype="row_sparse"), 1000, 8,
                          "grad")).simple_bind(mx.cpu(), data=(2, 3),
                                               grad_req={"data": "null", "w": "write"})
    text = ex.debug_str()
    # the memory plan names the values of the Program that runs (the rewritten symbol)
    assert "shared by 0 value(s)" not in text
    assert re.search(r"square\d+ shape=\(2, 3, 8\)", text)
    assert ex._total_exec_bytes < 1000 * 8 * 4


def test_autograd_with_sparse_grad_refuses_a_default_gradient_as_mxnet():
    w = mx.nd.array(np.arange(30).reshape(10, 3) / 10.0)
    w.attach_grad()                  # default storage: mxnet refuses sparse_grad then
    with mx.autograd.record():
        y = mx.nd.Embedding(mx.nd.array([[1, 2, 2]]), w, input_dim=10, output_dim=3,
                            sparse_grad=True)
        loss = (y * y).sum()
    with pytest.raises(mx.MXNetError, match="Cannot use sparse_grad = 1"):
        loss.backward()
    plain = mx.nd.array(np.arange(30).reshape(10, 3) / 10.0)
    plain.attach_grad()
    with mx.autograd.record():
        loss = (mx.nd.Embedding(mx.nd.array([[1, 2, 2]]), plain, input_dim=10,
                                output_dim=3) ** 2).sum()
    loss.backward()
    want = np.zeros((10, 3))
    np.add.at(want, [1, 2, 2], 2 * plain.asnumpy()[[1, 2, 2]])
    np.testing.assert_allclose(plain.grad.asnumpy(), want, rtol=1e-6)
