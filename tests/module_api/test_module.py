"""Module: mxnet 1.9.1 semantics (bind, reshape, params, grad_req, states, checkpoints,
predict/score, multi-device) on compiled Programs."""
import logging
import warnings

import numpy as np
import pytest
import torch

import compiler
import module_api as mx
import module_api.callback  # noqa: F401
import module_api.initializer  # noqa: F401
import module_api.io  # noqa: F401
import module_api.metric  # noqa: F401
import module_api.model  # noqa: F401
import module_api.module  # noqa: F401
import module_api.ndarray  # noqa: F401
from runtime import optimizer  # mx.optimizer

nd = mx.ndarray


def mlp(hidden=8, classes=3):
    data = mx.sym.Variable('data')
    fc1 = mx.sym.FullyConnected(data, num_hidden=hidden, name='fc1')
    act = mx.sym.Activation(fc1, act_type='relu', name='relu1')
    fc2 = mx.sym.FullyConnected(act, num_hidden=classes, name='fc2')
    return mx.sym.SoftmaxOutput(fc2, name='softmax')


def dataset(n=64, dim=5, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    centers = rng.randn(classes, dim) * 3
    y = rng.randint(0, classes, size=n)
    x = centers[y] + rng.randn(n, dim) * 0.5
    return x.astype(np.float32), y.astype(np.float32)


def params_of(mod):
    arg, aux = mod.get_params()
    return {k: v.asnumpy().copy() for k, v in arg.items()}


def init_fixed(mod, seed=1):
    rng = np.random.RandomState(seed)
    arg = {}
    for name, shape in zip(mod.symbol.list_arguments(),
                           mod.symbol.infer_shape(**dict(mod.data_shapes))[0]):
        if name in mod._param_names:
            arg[name] = nd.array(rng.uniform(-0.3, 0.3, size=shape))
    mod.init_params(arg_params=arg, allow_missing=False)
    return arg


# ------------------------------------------------------------------ bind / rebind
def test_bind_rebind_force_rebind(caplog):
    mod = mx.module.Module(mlp(), context=mx.cpu())
    mod.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))])
    group = mod._exec_group
    assert mod.binded and mod.for_training and not mod.inputs_need_grad
    with caplog.at_level(logging.WARNING):
        mod.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))])
    assert 'Already bound, ignoring bind()' in caplog.text
    assert mod._exec_group is group
    init_fixed(mod)
    before = params_of(mod)
    mod.bind(data_shapes=[('data', (4, 5))], for_training=False, force_rebind=True)
    assert mod._exec_group is not group and not mod.for_training
    assert mod.label_shapes is None
    # parameters survive the re-bind (copied into the new executors)
    w = mod._exec_group.execs[0].arg_dict['fc1_weight'].asnumpy()
    np.testing.assert_allclose(w, before['fc1_weight'])
    assert mod.output_shapes == [('softmax_output', (4, 3))]


def test_names_checked_like_mxnet():
    with pytest.raises(ValueError, match="input with name 'dat' is not found in "
                                         "symbol.list_arguments"):
        mx.module.Module(mlp(), data_names=['dat'])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        mx.module.Module(mlp(), label_names=['lbl'])
    assert any("label_names=['lbl']" in str(x.message) for x in w)
    mod = mx.module.Module(mlp())
    with pytest.raises(ValueError, match="Data provided by data_shapes don't match names "
                                         "specified by data_names"):
        mod.bind(data_shapes=[('x', (4, 5))])


# ------------------------------------------------------------------ reshape / auto reshape
def programs_made():
    """Programs compiled or read from the disk cache: a persistent cache (``make test``'s)
    turns a compile of an earlier run into a disk hit."""
    stats = compiler.cache_stats()
    return stats['compiles'] + stats['disk_hits']


def test_reshape_and_forward_auto_reshape_compile_cache():
    mod = mx.module.Module(mlp(), context=mx.cpu())
    mod.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    init_fixed(mod)
    mod.init_optimizer(optimizer_params={'learning_rate': 0.1})
    x, y = dataset(8)
    mod.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]), is_train=True)
    ref = mod.get_outputs()[0].asnumpy()
    c0 = programs_made()
    # a new batch size: forward reshapes by itself and compiles a new Program (or loads it
    # from a persistent cache a run before wrote)
    mod.forward(mx.io.DataBatch([nd.array(x[:3])], [nd.array(y[:3])]), is_train=True)
    assert mod.data_shapes[0].shape == (3, 5) and mod.label_shapes[0].shape == (3,)
    out3 = mod.get_outputs()[0]
    assert tuple(out3.shape) == (3, 3)
    np.testing.assert_allclose(out3.asnumpy(), ref[:3], rtol=1e-5, atol=1e-6)
    c1 = programs_made()
    assert c1 > c0
    mod.backward()
    mod.update()                     # parameters are shared with the first binding
    # back to the old shape: no compile, the updated weights are seen
    mod.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]), is_train=True)
    assert programs_made() == c1
    assert not np.allclose(mod.get_outputs()[0].asnumpy(), ref)
    # explicit reshape
    mod.reshape([('data', (2, 5))], [('softmax_label', (2,))])
    assert mod._exec_group.batch_size == 2
    # label-less forward on a module bound with labels
    mod.forward(mx.io.DataBatch([nd.array(x[:5])]), is_train=False)
    assert tuple(mod.get_outputs()[0].shape) == (5, 3)


def test_forward_list_of_batches():
    mod = mx.module.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))],
             for_training=False)
    init_fixed(mod)
    x, y = dataset(8)
    mod.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))
    full = mod.get_outputs()[0].asnumpy()
    batches = [mx.io.DataBatch([nd.array(x[:4])], [nd.array(y[:4])]),
               mx.io.DataBatch([nd.array(x[4:])], [nd.array(y[4:])])]
    mod.forward(batches)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), full, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ gradients
def test_inputs_need_grad():
    data = mx.sym.Variable('data')
    out = mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(
        mx.sym.FullyConnected(data, num_hidden=2, no_bias=True, name='fc'))), name='loss')
    mod = mx.module.Module(out, label_names=None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (4, 3))], inputs_need_grad=True)
    w = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    mod.init_params(arg_params={'fc_weight': nd.array(w)})
    x = np.random.RandomState(0).randn(4, 3).astype(np.float32)
    mod.forward_backward(mx.io.DataBatch([nd.array(x)]))
    g = mod.get_input_grads()[0].asnumpy()
    np.testing.assert_allclose(g, 2 * (x @ w.T) @ w, rtol=1e-5, atol=1e-6)
    assert len(mod.get_input_grads(merge_multi_context=False)[0]) == 2
    mod2 = mx.module.Module(out, label_names=None)
    mod2.bind(data_shapes=[('data', (4, 3))])
    mod2.init_params()
    with pytest.raises(AssertionError):
        mod2.get_input_grads()


def test_grad_req_add_accumulates():
    mod = mx.module.Module(mlp(), context=mx.cpu())
    mod.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))],
             grad_req='add')
    init_fixed(mod)
    x, y = dataset(4)
    batch = mx.io.DataBatch([nd.array(x)], [nd.array(y)])
    for arr in mod._exec_group.grad_arrays:
        arr[0].zero_()
    mod.forward_backward(batch)
    g1 = mod._exec_group.execs[0].grad_dict['fc1_weight'].asnumpy().copy()
    mod.forward_backward(batch)
    g2 = mod._exec_group.execs[0].grad_dict['fc1_weight'].asnumpy()
    np.testing.assert_allclose(g2, 2 * g1, rtol=1e-5, atol=1e-7)
    assert mod._grad_req == 'add' and mod._exec_group.grad_req['fc1_weight'] == 'add'


def test_fixed_params_never_change():
    x, y = dataset(32)
    it = mx.io.NDArrayIter(x, y, batch_size=8)
    mod = mx.module.Module(mlp(), fixed_param_names=['fc1_weight', 'fc2_bias'])
    mod.fit(it, num_epoch=1, optimizer_params={'learning_rate': 0.5},
            initializer=mx.initializer.Uniform(0.3))
    assert mod._exec_group.grad_req['fc1_weight'] == 'null'
    it.reset()
    before = params_of(mod)
    mod.fit(it, num_epoch=2, begin_epoch=1)
    after = params_of(mod)
    np.testing.assert_array_equal(before['fc1_weight'], after['fc1_weight'])
    np.testing.assert_array_equal(before['fc2_bias'], after['fc2_bias'])
    assert not np.allclose(before['fc2_weight'], after['fc2_weight'])


# ------------------------------------------------------------------ params
def test_set_params_missing_and_extra():
    mod = mx.module.Module(mlp())
    mod.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))])
    mod.init_params()
    arg, aux = mod.get_params()
    partial = {k: v for k, v in arg.items() if k != 'fc2_bias'}
    with pytest.raises(RuntimeError, match='fc2_bias is not presented'):
        mod.set_params(partial, aux)
    mod.set_params(partial, aux, allow_missing=True)
    extra = dict(arg)
    extra['junk'] = nd.zeros((2,))
    # as mxnet 1.9.1: ignored through init_params (with a warning naming them), an
    # error where the values go to the executors directly (allow_missing=True)
    with pytest.warns(UserWarning, match=r"ignoring \['junk'\]"):
        mod.set_params(extra, aux)
    with pytest.raises(ValueError, match='Find name "junk" that is not in the arguments'):
        mod.set_params(extra, aux, allow_missing=True)
    mod.set_params(extra, aux, allow_missing=True, allow_extra=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        mod.init_params()
    assert any('Parameters already initialized and force_init=False. init_params call '
               'ignored.' in str(x.message) for x in w)
    # init_params copies given values and fills the rest with the initializer
    mod.init_params(mx.initializer.Constant(0.25), arg_params={'fc1_bias': nd.ones((8,))},
                    allow_missing=True, force_init=True)
    p = params_of(mod)
    assert np.all(p['fc1_bias'] == 1) and np.all(p['fc2_weight'] == 0.25)


def test_states_module():
    data = mx.sym.Variable('data')
    state = mx.sym.Variable('state', shape=(1, 2))
    out = mx.sym.broadcast_add(mx.sym.FullyConnected(data, num_hidden=2, name='fc'), state)
    mod = mx.module.Module(out, label_names=None, state_names=['state'],
                           context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (4, 3))], for_training=False)
    mod.init_params(mx.initializer.Zero())
    mod.set_states(value=2.0)
    mod.forward(mx.io.DataBatch([nd.ones((4, 3))]))
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), 2.0)
    mod.set_states(states=[[nd.array([[1.0, 3.0]]), nd.array([[5.0, 7.0]])]])
    mod.forward(mx.io.DataBatch([nd.ones((4, 3))]))
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(),
                               [[1, 3], [1, 3], [5, 7], [5, 7]])
    assert len(mod.get_states(merge_multi_context=False)[0]) == 2


# ------------------------------------------------------------------ predict / score
def _trained(ctx=mx.cpu(), epochs=3):
    x, y = dataset(48)
    it = mx.io.NDArrayIter(x, y, batch_size=8)
    mod = mx.module.Module(mlp(), context=ctx)
    mod.fit(it, num_epoch=epochs, optimizer_params={'learning_rate': 0.3},
            initializer=mx.initializer.Xavier())
    return mod, x, y


def test_predict_merge_batches_and_score():
    mod, x, y = _trained()
    it = mx.io.NDArrayIter(x[:20], y[:20], batch_size=8)     # last batch padded by 4
    out = mod.predict(it)
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == (20, 3)
    out_list = mod.predict(it, always_output_list=True)
    assert isinstance(out_list, list) and len(out_list) == 1
    per_batch = mod.predict(it, merge_batches=False)
    assert len(per_batch) == 3 and [tuple(b[0].shape) for b in per_batch] == \
        [(8, 3), (8, 3), (4, 3)]
    np.testing.assert_allclose(np.concatenate([b[0].asnumpy() for b in per_batch]),
                               out.asnumpy(), rtol=1e-6)
    assert len(mod.predict(it, num_batch=1, merge_batches=False)) == 1
    # an NDArray or a numpy array is accepted too (any batch size)
    direct = mod.predict(x[:7])
    np.testing.assert_allclose(direct.asnumpy(), out.asnumpy()[:7], rtol=1e-5, atol=1e-6)
    direct = mod.predict(nd.array(x[:1]))
    assert tuple(direct.shape) == (1, 3)
    with pytest.raises(ValueError, match='eval_data must be of type NDArray or DataIter'):
        mod.predict([1, 2, 3])
    # score
    res = mod.score(mx.io.NDArrayIter(x, y, batch_size=8), 'acc')
    acc = (out.asnumpy().argmax(1) == y[:20]).mean()
    assert res[0][0] == 'accuracy' and 0.0 <= res[0][1] <= 1.0
    res2 = mod.score(mx.io.NDArrayIter(x[:20], y[:20], batch_size=10), mx.metric.Accuracy())
    assert res2[0][1] == pytest.approx(acc)
    seen = []
    mod.score(mx.io.NDArrayIter(x, y, batch_size=8), ['acc', 'ce'], num_batch=2,
              batch_end_callback=lambda p: seen.append(p.nbatch),
              score_end_callback=lambda p: seen.append(('end', p.nbatch)))
    assert seen == [0, 1, ('end', 2)]
    preds = list(mod.iter_predict(it))
    assert [p[1] for p in preds] == [0, 1, 2] and tuple(preds[2][0][0].shape) == (4, 3)


# ------------------------------------------------------------------ checkpoints
def _run(mod, it, nbatches):
    it.reset()
    for i, batch in enumerate(it):
        if i == nbatches:
            break
        mod.forward_backward(batch)
        mod.update()


def test_checkpoint_resume_with_optimizer_states(tmp_path):
    x, y = dataset(32)
    opt_params = {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 1e-3}

    def fresh():
        mod = mx.module.Module(mlp())
        mod.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
        init_fixed(mod, seed=3)
        mod.init_optimizer(optimizer='sgd', optimizer_params=opt_params)
        return mod

    it = mx.io.NDArrayIter(x, y, batch_size=8)
    straight = fresh()
    _run(straight, it, 4)
    _run(straight, it, 4)

    first = fresh()
    _run(first, it, 4)
    prefix = str(tmp_path / 'mlp')
    first.save_checkpoint(prefix, 3, save_optimizer_states=True)
    for suffix in ('-symbol.json', '-0003.params', '-0003.states'):
        assert (tmp_path / ('mlp' + suffix)).exists()
    saved = mx.ndarray.load(prefix + '-0003.params')
    assert set(saved) == {'arg:fc1_weight', 'arg:fc1_bias', 'arg:fc2_weight', 'arg:fc2_bias'}

    resumed = mx.module.Module.load(prefix, 3, load_optimizer_states=True)
    assert resumed._preload_opt_states == prefix + '-0003.states'
    resumed.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    resumed.init_optimizer(optimizer='sgd', optimizer_params=opt_params)
    assert resumed._preload_opt_states is None
    assert set(resumed._updater.states) == set(first._updater.states)
    _run(resumed, it, 4)
    a, b = params_of(straight), params_of(resumed)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)
    # without the states the momentum is lost and the trajectory differs
    lost = mx.module.Module.load(prefix, 3)
    lost.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    lost.init_optimizer(optimizer='sgd', optimizer_params=opt_params)
    _run(lost, it, 4)
    assert not np.allclose(params_of(lost)['fc2_weight'], a['fc2_weight'], atol=1e-6)


def test_save_load_params_roundtrip(tmp_path):
    mod, x, _ = _trained(epochs=1)
    fname = str(tmp_path / 'p.params')
    mod.save_params(fname)
    other = mx.module.Module(mlp())
    other.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    other.load_params(fname)
    np.testing.assert_allclose(other.predict(x[:8]).asnumpy(), mod.predict(x[:8]).asnumpy(),
                               rtol=1e-6)


# ------------------------------------------------------------------ optimizer setup
def test_init_optimizer_rescale_grad_and_warning():
    mod = mx.module.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    mod.init_params()
    mod.init_optimizer(kvstore='local')
    assert mod._optimizer.rescale_grad == pytest.approx(1.0 / 8)
    assert mod._update_on_kvstore is True and mod._kvstore is not None
    assert mod._kvstore._updater is not None and mod._updater is None
    assert mod._optimizer.idx2name == dict(enumerate(mod._exec_group.param_names))
    mod2 = mx.module.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod2.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    mod2.init_params()
    opt = optimizer.SGD(learning_rate=0.1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        mod2.init_optimizer(kvstore=None, optimizer=opt)
    assert any("Optimizer created manually outside Module but rescale_grad is not normalized "
               "to 1.0/batch_size/num_workers (1.0 vs. 0.125). Is this intended?"
               in str(x.message) for x in w)
    assert mod2._kvstore is None and mod2._update_on_kvstore is False
    assert mod2._updater is not None
    n = len(mod2._exec_group.param_names)
    assert sorted(opt.idx2name) == list(range(2 * n))


# ------------------------------------------------------------------ multi-device
def _fit_params(ctx, work_load_list=None, kvstore='local', nbatch=4):
    x, y = dataset(48, seed=5)
    it = mx.io.NDArrayIter(x, y, batch_size=12)
    mod = mx.module.Module(mlp(), context=ctx, work_load_list=work_load_list)
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    init_fixed(mod, seed=7)
    mod.init_optimizer(kvstore=kvstore, optimizer='sgd',
                       optimizer_params={'learning_rate': 0.2, 'momentum': 0.9})
    _run(mod, it, nbatch)
    return params_of(mod), mod


@pytest.mark.parametrize("ctx,wl,kv", [
    ([mx.cpu(0), mx.cpu(1)], None, 'local'),
    ([mx.cpu(0), mx.cpu(1), mx.cpu(2)], [1, 2, 1], 'local'),
    ([mx.cpu(0), mx.cpu(1)], [2, 1], 'device'),
])
def test_multi_device_equals_single_device(ctx, wl, kv):
    ref, _ = _fit_params([mx.cpu(0)])
    got, mod = _fit_params(ctx, wl, kv)
    assert len(mod._exec_group.execs) == len(ctx)
    if wl == [1, 2, 1]:
        assert [(s.start, s.stop) for s in mod._exec_group.slices] == [(0, 3), (3, 9), (9, 12)]
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5)


def test_multi_device_update_not_on_kvstore(monkeypatch):
    monkeypatch.setenv('MXNET_UPDATE_ON_KVSTORE', '0')
    ref, _ = _fit_params([mx.cpu(0)])
    got, mod = _fit_params([mx.cpu(0), mx.cpu(1)])
    assert mod._update_on_kvstore is False and mod._updater is not None
    # one state per (parameter, device): index i*num_device + k
    assert sorted(mod._updater.states) == list(range(2 * len(mod._exec_group.param_names)))
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ fit end to end
def test_fit_mlp_reaches_accuracy_with_speedometer(caplog):
    mx.random.seed(42)  # shuffling and Xavier draw from the global generators
    rng = np.random.RandomState(42)
    n, dim, classes = 400, 10, 4
    centers = rng.randn(classes, dim) * 1.5
    y = rng.randint(0, classes, size=n)
    x = (centers[y] + rng.randn(n, dim)).astype(np.float32)
    y = y.astype(np.float32)
    train = mx.io.NDArrayIter(x[:320], y[:320], batch_size=32, shuffle=True)
    val = mx.io.NDArrayIter(x[320:], y[320:], batch_size=40)
    mod = mx.module.Module(mlp(hidden=32, classes=classes), context=mx.cpu())
    ends = []
    with caplog.at_level(logging.INFO):
        mod.fit(train, eval_data=val, eval_metric='acc', num_epoch=5,
                optimizer='sgd', optimizer_params={'learning_rate': 0.1, 'momentum': 0.9},
                initializer=mx.initializer.Xavier(),
                batch_end_callback=mx.callback.Speedometer(32, frequent=5),
                epoch_end_callback=lambda e, s, a, x: ends.append(e))
    assert ends == list(range(5))
    assert 'Epoch[0] Train-accuracy=' in caplog.text
    assert 'Epoch[4] Validation-accuracy=' in caplog.text
    assert 'samples/sec' in caplog.text
    res = dict(mod.score(val, 'acc'))
    assert res['accuracy'] >= 0.95


# ------------------------------------------------------------------ shared_module / Sequential
def test_bind_shared_module_shares_parameters_and_optimizer():
    big = mx.module.Module(mlp())
    big.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    big.init_params()
    big.init_optimizer()
    small = mx.module.Module(mlp())
    small.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))],
               shared_module=big)
    assert small.params_initialized and small.optimizer_initialized
    assert small._updater is big._updater and small._arg_params is big._arg_params
    for a, b in zip(big._exec_group.param_arrays, small._exec_group.param_arrays):
        assert a[0] is b[0]
    x, y = dataset(4)
    small.forward_backward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))
    before = big._exec_group.param_arrays[0][0].clone()
    small.update()
    assert not torch.equal(before, big._exec_group.param_arrays[0][0])


def test_sequential_module_fits():
    data = mx.sym.Variable('data')
    net1 = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=8, name='fc1'),
                             act_type='relu', name='relu1')
    net2 = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=3,
                                                      name='fc2'), name='softmax')
    seq = mx.module.SequentialModule()
    seq.add(mx.module.Module(net1, label_names=None))
    seq.add(mx.module.Module(net2), take_labels=True, auto_wiring=True)
    x, y = dataset(48)
    it = mx.io.NDArrayIter(x, y, batch_size=8)
    seq.fit(it, num_epoch=4, optimizer_params={'learning_rate': 0.3},
            initializer=mx.initializer.Xavier())
    assert seq.output_shapes == [('softmax_output', (8, 3))]
    assert seq._modules[1].inputs_need_grad
    arg, _ = seq.get_params()
    assert set(arg) == {'fc1_weight', 'fc1_bias', 'fc2_weight', 'fc2_bias'}
    assert dict(seq.score(it, 'acc'))['accuracy'] >= 0.9


def test_sequential_module_chains_gradients_and_checks_its_links():
    """The chain's input gradients are the first module's, computed from the second's
    (mxnet 1.9.1 refuses get_input_grads on a SequentialModule: it never records
    inputs_need_grad); a chain's errors are MXNetErrors and AssertionErrors."""
    fc1 = mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=4, name='fc1')
    fc2 = mx.sym.FullyConnected(mx.sym.Variable('x'), num_hidden=2, name='fc2')
    seq = mx.module.SequentialModule()
    seq.add(mx.module.Module(fc1, label_names=None))
    seq.add(mx.module.Module(fc2, data_names=['x'], label_names=None), auto_wiring=True)
    seq.bind([('data', (3, 5))], inputs_need_grad=True)
    seq.init_params(mx.initializer.Xavier())
    x = np.random.RandomState(1).randn(3, 5).astype(np.float32)
    seq.forward(mx.io.DataBatch([nd.array(x)]), is_train=True)
    head = np.random.RandomState(2).randn(3, 2).astype(np.float32)
    seq.backward([nd.array(head)])
    arg, _ = seq.get_params()
    w1, w2 = (arg[k].asnumpy().astype(np.float64) for k in ('fc1_weight', 'fc2_weight'))
    np.testing.assert_allclose(seq.get_input_grads()[0].asnumpy(), head @ w2 @ w1,
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="unknown option"):
        seq.add(mx.module.Module(fc1, label_names=None), take_label=True)
    with pytest.raises(AssertionError, match="chain is empty"):
        mx.module.SequentialModule().bind([('data', (3, 5))])
    twice = mx.module.SequentialModule().add(mx.module.Module(fc1, label_names=None)) \
        .add(mx.module.Module(mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=5,
                                                    name='fc1'), label_names=None),
             auto_wiring=True)
    twice.bind([('data', (3, 5))])
    with pytest.raises(AssertionError, match="parameter 'fc1_weight' of module 1"):
        twice.init_params()


def test_fit_from_a_checkpoint_with_extra_layers_as_in_mxnet():
    """mxnet's fine-tuning pattern: a pretrained checkpoint with layers this model
    does not have; allow_missing fills the new ones, the extras are ignored."""
    head = mx.sym.FullyConnected(mx.sym.Activation(mlp().get_internals()['fc2_output'],
                                                   act_type='relu'), num_hidden=3, name='fc3')
    big = mx.module.Module(mx.sym.SoftmaxOutput(head, name='softmax'))
    big.bind(data_shapes=[('data', (4, 5))], label_shapes=[('softmax_label', (4,))])
    big.init_params()
    pretrained, aux = big.get_params()
    small = mx.module.Module(mlp())
    extra = sorted(set(pretrained) - set(small.symbol.list_arguments()))
    assert extra
    x = np.random.RandomState(0).randn(8, 5).astype(np.float32)
    it = mx.io.NDArrayIter(x, np.zeros(8, np.float32), batch_size=4)
    small.bind(it.provide_data, it.provide_label)
    with pytest.warns(UserWarning, match=r"ignoring \['fc3_bias', 'fc3_weight'\]"):
        small.init_params(arg_params=pretrained, aux_params=aux, allow_missing=True)
    got, _ = small.get_params()
    for name in ('fc1_weight', 'fc1_bias', 'fc2_weight', 'fc2_bias'):
        np.testing.assert_array_equal(got[name].asnumpy(), pretrained[name].asnumpy())
    with pytest.warns(UserWarning, match="ignoring"):
        small.fit(it, num_epoch=1, arg_params=pretrained, aux_params=aux, allow_missing=True,
                  force_init=True)
