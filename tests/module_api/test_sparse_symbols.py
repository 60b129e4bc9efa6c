"""Sparse storage inside bound symbols and Modules, against mxnet 1.9.1
(tests/fixtures/make_sparse_symbol_fixtures.py): storage-type inference, csr data and
row_sparse weights in executors, row_sparse gradients (their rows and values), and a
Module trained by SGD's lazy update."""
import json
import os

import numpy as np
import pytest

import module_api as mx
from compiler.passes.storage_type import infer_storage

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                           "sparse_symbol_cases.npz"))


def fm_symbol(feature_dim, factor):
    """The factorization machine of mxnet's test_module.py."""
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", shape=(feature_dim, factor), stype="row_sparse")
    w1_weight = mx.sym.var("w1_weight", shape=(feature_dim, 1), stype="row_sparse")
    w1_bias = mx.sym.var("w1_bias", shape=(1,))
    w1 = mx.sym.broadcast_add(mx.sym.dot(x, w1_weight), w1_bias)
    v_s = mx.sym._internal._square_sum(data=v, axis=1, keepdims=True)
    bd_sum = mx.sym.dot(mx.sym.square(data=x), v_s)
    w2_squared = 0.5 * mx.sym.square(data=mx.sym.dot(x, v))
    w_all = mx.sym.Concat(w1, w2_squared, dim=1)
    model = mx.sym.elemwise_add(mx.sym.sum(data=w_all, axis=1, keepdims=True),
                                0.5 * mx.sym.negative(bd_sum))
    return mx.sym.LinearRegressionOutput(data=model, label=mx.sym.var("label"))


def assert_grad(arr, prefix):
    """``arr`` has the storage, rows and values mxnet's gradient had."""
    assert arr.stype == str(FIX[prefix + "/stype"])
    np.testing.assert_allclose(arr.asnumpy(), FIX[prefix + "/dense"], rtol=1e-5, atol=1e-6)
    if arr.stype == "row_sparse":
        np.testing.assert_array_equal(arr.indices.asnumpy(), FIX[prefix + "/indices"])


def test_storage_inference_follows_mxnet_rules():
    got = infer_storage(fm_symbol(12, 3))
    assert got["args"] == {"data": "csr", "w1_weight": "row_sparse", "w1_bias": "default",
                           "v": "row_sparse", "label": "default"}
    assert got["grads"]["v"] == got["grads"]["w1_weight"] == "row_sparse"
    assert got["grads"]["w1_bias"] == got["grads"]["data"] == "default"
    assert got["outputs"] == ["default"]
    x = mx.sym.var("x", stype="csr")
    w = mx.sym.var("w")
    cases = {"default": mx.sym.dot(x, w), "row_sparse": mx.sym.dot(x, w, transpose_a=True),
             "csr": mx.sym.square(x)}
    for want, sym in cases.items():
        assert infer_storage(sym)["outputs"] == [want]
    assert infer_storage(mx.sym.cast_storage(w, stype="row_sparse"))["outputs"] == ["row_sparse"]
    # one dense consumer makes the gradient dense (mxnet's ElementWiseSum fallback)
    both = mx.sym.dot(x, w) + mx.sym.sum(w)
    assert infer_storage(both)["grads"]["w"] == "default"
    assert infer_storage(mx.sym.dot(x, w, transpose_a=True))["grads"]["w"] == "default"


def test_square_sum_and_cast_storage_values():
    a = np.random.RandomState(0).uniform(-1, 1, (4, 3)).astype(np.float32)
    x = mx.sym.var("x")
    ex = mx.sym._internal._square_sum(x, axis=1, keepdims=True).simple_bind(
        mx.cpu(), x=(4, 3))
    ex.arg_dict["x"][:] = mx.nd.array(a)
    out = ex.forward(is_train=True)[0].asnumpy()
    np.testing.assert_allclose(out, (a * a).sum(1, keepdims=True), rtol=1e-6)
    ex.backward(mx.nd.ones((4, 1)))
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), 2 * a, rtol=1e-6)
    ex = mx.sym.cast_storage(x, stype="default").simple_bind(mx.cpu(), x=(4, 3))
    ex.arg_dict["x"][:] = mx.nd.array(a)
    np.testing.assert_array_equal(ex.forward()[0].asnumpy(), a)
    assert mx.sym._internal._square_sum is not None and hasattr(mx.sym._internal, "_copy")


def test_dot_csr_row_sparse_executor():
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", stype="row_sparse")
    y = mx.sym.LinearRegressionOutput(mx.sym.dot(x, v), mx.sym.var("label"))
    ex = y.simple_bind(mx.cpu(), data=(5, 8), v=(8, 2), label=(5, 2),
                       grad_req={"data": "null", "v": "write", "label": "null"})
    assert [ex.arg_dict[n].stype for n in ("data", "v", "label")] == list(FIX["dot/arg_stypes"])
    # v and the csr data are read through v's rows (runtime/executor_csrdot.py)
    assert list(ex._rows.tables) == ["v"] and not ex._shadows
    ex.arg_dict["data"][:] = mx.nd.array(FIX["dot/data"]).tostype("csr")
    ex.arg_dict["v"][:] = mx.nd.array(FIX["dot/v"]).tostype("row_sparse")
    ex.arg_dict["label"][:] = mx.nd.array(FIX["dot/label"])
    np.testing.assert_allclose(ex.forward(is_train=True)[0].asnumpy(), FIX["dot/out"],
                               rtol=1e-5)
    ex.backward()
    assert_grad(ex.grad_dict["v"], "dot/grad_v")


def test_factorization_machine_gradients():
    sym = fm_symbol(12, 3)
    ex = sym.simple_bind(mx.cpu(), data=(6, 12), label=(6, 1),
                         grad_req={"data": "null", "v": "write", "w1_weight": "write",
                                   "w1_bias": "write", "label": "null"})
    # w1_weight (read by one dot) through its rows; v (also by _square_sum) on shadows
    assert list(ex._rows.tables) == ["w1_weight"]
    assert ex._shadows.resolve("grad", "v") is not None
    ex.arg_dict["data"][:] = mx.nd.array(FIX["fm/data"]).tostype("csr")
    for k in ("v", "w1_weight", "w1_bias", "label"):
        src = mx.nd.array(FIX["fm/" + k])
        stype = ex.arg_dict[k].stype
        ex.arg_dict[k][:] = src.tostype(stype) if stype != "default" else src
    np.testing.assert_allclose(ex.forward(is_train=True)[0].asnumpy(), FIX["fm/out"],
                               rtol=1e-5, atol=1e-6)
    ex.backward()
    for k in ("v", "w1_weight", "w1_bias"):
        assert_grad(ex.grad_dict[k], "fm/grad_" + k)


@pytest.mark.parametrize("tag", ["sparse", "grad"])
def test_sparse_embedding_weight_gradient(tag):
    data = mx.sym.var("data")
    emb = mx.sym.contrib.SparseEmbedding(data=data, input_dim=10, output_dim=3, name="embed") \
        if tag == "sparse" else mx.sym.Embedding(data=data, input_dim=10, output_dim=3,
                                                 sparse_grad=True, name="embed")
    sym = mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(emb)))
    ex = sym.simple_bind(mx.cpu(), data=(2, 3),
                         grad_req={"data": "null", "embed_weight": "write"})
    ex.arg_dict["data"][:] = mx.nd.array(FIX[f"emb/{tag}/idx"])
    ex.arg_dict["embed_weight"][:] = mx.nd.array(FIX[f"emb/{tag}/w"])
    ex.forward(is_train=True)
    ex.backward()
    assert_grad(ex.grad_dict["embed_weight"], f"emb/{tag}/grad")


def test_module_trains_row_sparse_weights_by_lazy_sgd():
    it = mx.io.NDArrayIter(data=mx.nd.array(FIX["train/data"]).tostype("csr"),
                           label={"label": mx.nd.array(FIX["train/label"])},
                           batch_size=4, last_batch_handle="discard")
    mod = mx.mod.Module(fm_symbol(20, 2), data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    names = ("v", "w1_weight", "w1_bias")
    arg = {k: mx.nd.array(FIX["train/init_" + k]) for k in names}
    arg = {k: a.tostype("row_sparse") if k != "w1_bias" else a for k, a in arg.items()}
    mod.init_params(arg_params=arg)
    assert mod._arg_params["v"].stype == "row_sparse"
    assert mod._exec_group.grad_arrays[0][0].stype in ("row_sparse", "default")
    mod.init_optimizer(optimizer=mx.optimizer.SGD(momentum=0.5, learning_rate=0.1, wd=0.01,
                                                  rescale_grad=0.25))
    step = 0
    for _ in range(2):
        it.reset()
        for batch in it:
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
            args, _ = mod.get_params()
            for k in names:
                np.testing.assert_allclose(args[k].asnumpy(), FIX[f"train/{step}/{k}"],
                                           rtol=1e-5, atol=1e-6, err_msg=f"{k} step {step}")
            step += 1
    assert step == int(FIX["train/steps"])


def test_executor_group_binds_row_sparse_weights_on_each_device():
    from module_api.module.executor_group import DataParallelExecutorGroup
    data = mx.sym.var("data")
    weight = mx.sym.var("embed_weight", stype="row_sparse")
    emb = mx.sym.contrib.SparseEmbedding(data=data, weight=weight, input_dim=10, output_dim=3,
                                         name="embed")
    sym = mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(emb)))
    contexts = [mx.cpu(0), mx.cpu(1)]
    group = DataParallelExecutorGroup(sym, contexts, [1, 1], [("data", (4, 3))], None,
                                      ["embed_weight"], for_training=True,
                                      inputs_need_grad=False)
    shared = DataParallelExecutorGroup(sym, contexts, [1, 1], [("data", (4, 3))], None,
                                       ["embed_weight"], for_training=True,
                                       inputs_need_grad=False, shared_group=group)
    for i in range(2):
        w = group.execs[i].arg_dict["embed_weight"]
        assert w.stype == "row_sparse" and shared.execs[i].arg_dict["embed_weight"] is w
        assert group.execs[i].grad_dict["embed_weight"].stype == "row_sparse"
    table = np.arange(30, dtype=np.float32).reshape(10, 3) / 10
    group.set_params({"embed_weight": mx.nd.array(table).tostype("row_sparse")}, {})
    idx = np.array([[1, 2, 2], [0, 0, 0], [9, 1, 1], [5, 5, 4]], dtype=np.float32)
    group.forward(mx.io.DataBatch([mx.nd.array(idx)], None), is_train=True)
    group.backward()
    for i, rows in enumerate(([0, 1, 2], [1, 4, 5, 9])):
        g = group.execs[i].grad_dict["embed_weight"]
        np.testing.assert_array_equal(g.indices.asnumpy(), rows)
        part = idx[2 * i:2 * i + 2].astype(int).ravel()
        want = np.zeros_like(table)
        np.add.at(want, part, 2 * table[part])
        np.testing.assert_allclose(g.asnumpy(), want, rtol=1e-6)
    got = {"embed_weight": mx.nd.sparse.zeros("row_sparse", (10, 3))}
    group.get_params(got, {})
    np.testing.assert_allclose(got["embed_weight"].asnumpy(), table, rtol=1e-6)


def test_executor_reshape_copy_params_and_forward_kwargs_keep_storage():
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", stype="row_sparse")
    y = mx.sym.LinearRegressionOutput(mx.sym.dot(x, v), mx.sym.var("label"))
    ex = y.simple_bind(mx.cpu(), data=(4, 6), v=(6, 1), label=(4, 1),
                       grad_req={"data": "null", "v": "write", "label": "null"})
    w = np.arange(6, dtype=np.float32).reshape(6, 1)
    ex.copy_params_from({"v": mx.nd.array(w)})
    assert ex.arg_dict["v"].stype == "row_sparse"
    small = ex.reshape(data=(2, 6), label=(2, 1))
    assert small.arg_dict["v"] is ex.arg_dict["v"] and small.arg_dict["data"].stype == "csr"
    d = np.array([[0, 0, 3, 0, 0, 0], [1, 0, 0, 0, 0, 2]], dtype=np.float32)
    out = small.forward(is_train=True, data=mx.nd.array(d).tostype("csr"),
                        label=mx.nd.zeros((2, 1)))[0]
    np.testing.assert_allclose(out.asnumpy(), d @ w)
    small.backward()
    grad = small.grad_dict["v"]
    assert grad is ex.grad_dict["v"]
    np.testing.assert_array_equal(grad.indices.asnumpy(), [0, 2, 5])
    np.testing.assert_allclose(grad.asnumpy(), d.T @ (d @ w), rtol=1e-6)


@pytest.mark.parametrize("kvstore", ["local", "device"])
def test_two_device_module_updates_sparse_embedding_on_kvstore(kvstore):
    data = mx.sym.var("data")
    weight = mx.sym.var("embed_weight", stype="row_sparse")
    emb = mx.sym.contrib.SparseEmbedding(data=data, weight=weight, input_dim=10, output_dim=3,
                                         name="embed")
    sym = mx.sym.LinearRegressionOutput(mx.sym.sum(emb, axis=(1, 2)), mx.sym.var("label"))
    it = mx.io.NDArrayIter(FIX["kv/idx"], {"label": np.ones(4, np.float32)}, batch_size=4)
    mod = mx.mod.Module(sym, context=[mx.cpu(0), mx.cpu(1)], label_names=["label"])
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(arg_params={"embed_weight": mx.nd.array(FIX["kv/w"]).tostype("row_sparse")})
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    batch = next(it)
    every_row = {"embed_weight": mx.nd.arange(10)}
    mod.prepare(batch, sparse_row_id_fn=lambda b: every_row)
    mod.forward(batch, is_train=True)
    mod.backward()
    mod.update()
    mod.prepare(batch, sparse_row_id_fn=lambda b: every_row)
    np.testing.assert_allclose(mod.get_params()[0]["embed_weight"].asnumpy(),
                               FIX["kv/" + kvstore], rtol=1e-5, atol=1e-6)


def test_init_params_gives_row_sparse_parameters():
    """mxnet's test_module_initializer, in this project's words."""
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", shape=(100, 1), init=mx.init.Uniform(scale=.1), stype="row_sparse")
    model = mx.sym.LinearRegressionOutput(mx.sym.dot(lhs=x, rhs=v), mx.sym.var("label"))
    it = mx.io.NDArrayIter(data=mx.nd.zeros(shape=(16, 100), stype="csr"),
                           label={"label": mx.nd.zeros((16, 1))}, batch_size=16,
                           last_batch_handle="discard")
    mod = mx.mod.Module(symbol=model, data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params()
    value = mod._arg_params["v"]
    assert value.stype == "row_sparse" and np.sum(value.asnumpy()) != 0
    assert np.all(np.abs(value.asnumpy()) <= 0.1)
    assert mod._exec_group.param_arrays[0][0].stype == "row_sparse"
    np.testing.assert_array_equal(mod._exec_group.param_arrays[0][0].asnumpy(), value.asnumpy())


def test_sym_sparse_namespace_makes_the_operators_own_nodes():
    """``mx.sym.sparse.X`` (mxnet's ``_sparse_X`` aliases) builds the operator ``X``."""
    x = mx.sym.Variable("data", stype="csr")
    w = mx.sym.Variable("w", stype="row_sparse")
    with mx.name.NameManager():
        out = mx.sym.sparse.dot(x, w)
    node = json.loads(out.tojson())["nodes"][-1]
    assert (node["op"], node["name"]) == ("dot", "dot0")
    assert callable(mx.sym.sparse.cast_storage) and callable(mx.sym.sparse.square)
    assert not hasattr(mx.sym.sparse, "batch_dot")      # not one of mxnet's _sparse_ names


def test_symbol_functions_drop_out_as_mxnet():
    """mxnet's generated symbol functions take the NDArray functions' ``out=`` and drop
    it (its test_sparse_operator.py writes ``sparse.elemwise_add(l, r, out=l)``)."""
    lhs, rhs = mx.sym.Variable("l"), mx.sym.Variable("r")
    s = mx.sym.sparse.elemwise_add(lhs, rhs, out=lhs)
    assert s.list_arguments() == ["l", "r"]
    out = s.bind(mx.cpu(), args={"l": mx.nd.ones(2), "r": mx.nd.ones(2)}).forward()[0]
    np.testing.assert_array_equal(out.asnumpy(), [2, 2])


@pytest.mark.parametrize("axis,keepdims,stype", [(1, True, "row_sparse"), (1, False, "default"),
                                                 (0, True, "default"), (0, False, "default")])
def test_imperative_square_sum_takes_mxnets_result_storage(axis, keepdims, stype):
    value = np.zeros((5, 3), np.float32)
    value[[1, 4]] = [[1, 2, 3], [4, 5, 6]]
    res = mx.nd._internal._square_sum(mx.nd.array(value).tostype("row_sparse"), axis=axis,
                                      keepdims=keepdims)
    assert res.stype == stype
    np.testing.assert_allclose(res.asnumpy(), (value ** 2).sum(axis=axis, keepdims=keepdims))
