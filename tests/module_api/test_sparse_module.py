"""Module.prepare(sparse_row_id_fn) and _sync_params_from_devices as mxnet 1.9.1's Module
does them. Executors here hold dense parameters only (no ``Variable(stype=...)``
binding yet), so the row_sparse case places row_sparse arrays in the executor group
itself, standing in for what mxnet's binding of a row_sparse weight gives."""
import warnings

import numpy as np
import pytest

import module_api as mx
from tests.models import mlp


def _bound_module():
    mod = mx.mod.Module(mlp(hidden=(4,), classes=2), context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (4, 3))], label_shapes=[("softmax_label", (4,))])
    mod.init_params(initializer=mx.init.Uniform(0.5))
    mod.init_optimizer(kvstore="local", optimizer="sgd")
    assert mod._kvstore is not None and mod._update_on_kvstore
    return mod


def _batch():
    return mx.io.DataBatch([mx.nd.ones((4, 3))], [mx.nd.zeros((4,))])


def test_prepare_warns_for_dense_parameters():
    mod = _bound_module()
    with pytest.warns(UserWarning, match="fc1_weight.stype is not 'row_sparse'"):
        mod.prepare(_batch(), sparse_row_id_fn=lambda b: {"fc1_weight": mx.nd.array([0])})
    with pytest.raises(AssertionError, match="dict"):
        mod.prepare(_batch(), sparse_row_id_fn=lambda b: [mx.nd.array([0])])


def test_prepare_without_kvstore_updates_warns():
    mod = mx.mod.Module(mlp(hidden=(4,), classes=2), context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 3))], label_shapes=[("softmax_label", (4,))])
    mod.init_params()
    mod.init_optimizer()
    with pytest.warns(UserWarning, match="not updated in the KVStore"):
        mod.prepare(_batch(), sparse_row_id_fn=lambda b: {})


def _place_row_sparse(mod, name):
    """Make ``name`` a row_sparse parameter of the store and of every device."""
    full = mod._arg_params[name].asnumpy()
    mod._kvstore.init(name + "_rsp", mx.nd.array(full).tostype("row_sparse"))
    mod._kvstore._store[name] = mod._kvstore._store.pop(name + "_rsp")
    idx = mod._exec_group.param_names.index(name)
    mod._exec_group.param_arrays[idx] = [mx.nd.sparse.zeros("row_sparse", full.shape)
                                         for _ in range(2)]
    return full, idx


def test_prepare_pulls_the_requested_rows_onto_every_device():
    mod = _bound_module()
    full, idx = _place_row_sparse(mod, "fc1_weight")
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # a row_sparse parameter: no warning
        mod.prepare(_batch(), sparse_row_id_fn=lambda b: {
            "fc1_weight": mx.nd.array([3, 1, 3], dtype="int64")})
    for dev_arr in mod._exec_group.param_arrays[idx]:
        assert dev_arr.indices.asnumpy().tolist() == [1, 3]
        np.testing.assert_array_equal(dev_arr.data.asnumpy(), full[[1, 3]])


def test_sync_params_from_devices_pulls_every_row():
    mod = _bound_module()
    full, _ = _place_row_sparse(mod, "fc1_weight")
    mod._arg_params["fc1_weight"] = mx.nd.sparse.zeros("row_sparse", full.shape)
    mod._exec_group.get_params = lambda arg, aux: None     # the devices hold no full copy
    mod._sync_params_from_devices()
    got = mod._arg_params["fc1_weight"]
    assert got.stype == "row_sparse"
    assert got.indices.asnumpy().tolist() == list(range(full.shape[0]))
    np.testing.assert_array_equal(got.asnumpy(), full)


def test_variable_records_the_storage_type_id_as_mxnet():
    # mxnet 1.9.1: Variable('w', stype='row_sparse').list_attr() == {'__storage_type__': '1'}
    assert mx.sym.Variable("w", stype="row_sparse").list_attr() == {"__storage_type__": "1"}
    assert mx.sym.var("c", stype="csr").list_attr() == {"__storage_type__": "2"}
    assert mx.sym.var("d", stype="default").list_attr() == {"__storage_type__": "0"}
    with pytest.raises(KeyError):
        mx.sym.Variable("e", stype="bogus")
