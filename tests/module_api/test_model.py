"""mx.model: the kvstore decision table, the update index formula, checkpoints."""
import os

import numpy as np
import pytest

import module_api as mx
import module_api.model  # noqa: F401
import module_api.ndarray  # noqa: F401
from module_api.model import (BatchEndParam, _create_kvstore, _initialize_kvstore,
                              _update_params, _update_params_on_kvstore, load_checkpoint,
                              save_checkpoint)
from runtime import kvstore as kvs

nd = mx.ndarray
SMALL = {'w': nd.zeros((4, 4))}


class _Shape:
    """A stand-in whose only use is its shape (a 16M+1 element parameter)."""
    def __init__(self, *shape):
        self.shape = shape


@pytest.mark.parametrize("kv,num_device,params,env,expect_kv,expect_update", [
    (None, 2, SMALL, None, None, False),
    ('local', 1, SMALL, None, None, False),          # one device: no kvstore
    ('device', 1, SMALL, None, None, False),
    ('local', 2, SMALL, None, 'local', True),
    ('device', 2, SMALL, None, 'device', True),
    ('local', 2, {'big': _Shape(4097, 4096)}, None, 'local', False),   # > 16M elements
    ('local', 2, {'ok': _Shape(4096, 4096)}, None, 'local', True),     # == 16M: still on kv
    ('device', 2, {'big': _Shape(4097, 4096)}, None, 'device', True),  # rule is local-only
    ('local', 2, SMALL, '0', 'local', False),        # MXNET_UPDATE_ON_KVSTORE=0
])
def test_create_kvstore_decision_table(monkeypatch, kv, num_device, params, env, expect_kv,
                                       expect_update):
    if env is None:
        monkeypatch.delenv('MXNET_UPDATE_ON_KVSTORE', raising=False)
    else:
        monkeypatch.setenv('MXNET_UPDATE_ON_KVSTORE', env)
    store, update = _create_kvstore(kv, num_device, params)
    assert (store.type if store is not None else None) == expect_kv
    assert update is expect_update


def test_create_kvstore_object_and_errors():
    store = kvs.create('local')
    got, update = _create_kvstore(store, 1, SMALL)
    assert got is store and update is True
    with pytest.raises(TypeError, match='kvstore must be KVStore, str or None'):
        _create_kvstore(3, 2, SMALL)


class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, index, grad, weight):
        self.calls.append((list(index), [g for g in grad], [w for w in weight]))


def test_update_params_index_formula_and_one_call_per_device():
    num_device = 3
    params = [[nd.ones((2,)) * (i + 1) for _ in range(num_device)] for i in range(2)]
    grads = [[nd.ones((2,)) * (k + 1) for k in range(num_device)] for _ in range(2)]
    grads.insert(1, [None] * num_device)        # a parameter without gradient is skipped
    params.insert(1, [nd.zeros((2,))] * num_device)
    rec = _Recorder()
    _update_params(params, grads, rec, num_device)
    assert [c[0] for c in rec.calls] == [[0 * 3 + k, 2 * 3 + k] for k in range(num_device)]
    assert rec.calls[1][2][0] is params[0][1] and rec.calls[2][1][1] is grads[2][2]
    # with a kvstore the gradients are summed over the devices first
    store = kvs.create('local')
    for i in (0, 2):
        store.init(f'p{i}', params[i][0])
    rec = _Recorder()
    _update_params(params, grads, rec, num_device, kvstore=store,
                   param_names=['p0', 'p1', 'p2'])
    for _, gs, _ in rec.calls:
        for g in gs:
            np.testing.assert_allclose(g.asnumpy(), 6.0)


def test_update_params_on_kvstore():
    store = kvs.create('local')
    from runtime import optimizer
    store.set_optimizer(optimizer.SGD(learning_rate=1.0, rescale_grad=1.0))
    params = [[nd.ones((3,)), nd.ones((3,))]]
    grads = [[nd.ones((3,)) * 0.25, nd.ones((3,)) * 0.5]]
    _initialize_kvstore(store, params, {'w': nd.ones((3,))}, ['w'], True)
    _update_params_on_kvstore(params, grads, store, ['w'])
    for p in params[0]:
        np.testing.assert_allclose(p.asnumpy(), 1 - 0.75)


def test_checkpoint_layout_roundtrip(tmp_path):
    data = mx.sym.Variable('data')
    net = mx.sym.BatchNorm(mx.sym.FullyConnected(data, num_hidden=3, name='fc'), name='bn')
    arg = {'fc_weight': nd.array(np.arange(12).reshape(3, 4)), 'fc_bias': nd.zeros((3,)),
           'bn_gamma': nd.ones((3,)), 'bn_beta': nd.zeros((3,))}
    aux = {'bn_moving_mean': nd.ones((3,)) * 0.5, 'bn_moving_var': nd.ones((3,))}
    prefix = str(tmp_path / 'net')
    save_checkpoint(prefix, 12, net, arg, aux)
    assert sorted(os.listdir(tmp_path)) == ['net-0012.params', 'net-symbol.json']
    raw = mx.ndarray.load(prefix + '-0012.params')
    assert set(raw) == {'arg:' + k for k in arg} | {'aux:' + k for k in aux}
    sym, arg2, aux2 = load_checkpoint(prefix, 12)
    assert sym.list_arguments() == net.list_arguments()
    assert sym.list_auxiliary_states() == ['bn_moving_mean', 'bn_moving_var']
    for k in arg:
        np.testing.assert_array_equal(arg2[k].asnumpy(), arg[k].asnumpy())
    np.testing.assert_array_equal(aux2['bn_moving_mean'].asnumpy(), 0.5)


def test_batch_end_param_fields():
    p = BatchEndParam(epoch=1, nbatch=2, eval_metric=None, locals={})
    assert p._fields == ('epoch', 'nbatch', 'eval_metric', 'locals')
    assert type(p).__name__ == 'BatchEndParams'
