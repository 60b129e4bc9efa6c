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



def test_forward_reshapes_for_a_list_of_batches_and_after_a_label_less_batch():
    """A list of batches whose joint size is not the bound one reshapes to that size
    (labels dropped: a list carries no provide_label); a labelled batch after a
    label-less reshape takes its label names from label_names (mxnet 1.9.1 fails
    there, zipping over the None label shapes)."""
    mod = mx.module.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))],
             for_training=False)
    init_fixed(mod)
    x, y = dataset(12)
    mod.forward(mx.io.DataBatch([nd.array(x[:8])], [nd.array(y[:8])]))
    full = mod.get_outputs()[0].asnumpy()
    mod.forward([mx.io.DataBatch([nd.array(x[:2])]), mx.io.DataBatch([nd.array(x[2:4])])])
    assert mod.data_shapes[0].shape == (4, 5) and mod.label_shapes is None
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), full[:4], rtol=1e-5, atol=1e-6)
    mod.forward(mx.io.DataBatch([nd.array(x[:6])], [nd.array(y[:6])]))
    assert [(d.name, d.shape) for d in mod.label_shapes] == [('softmax_label', (6,))]
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), full[:6], rtol=1e-5, atol=1e-6)

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



def test_local_updater_idx2name_order_and_checkpoint_log_lines(tmp_path, caplog):
    """Two contexts without a kvstore: the optimizer's idx2name is
    ``position * num_device + device`` filled device by device, in mxnet 1.9.1's
    order (printed by mxnet for this network); save_checkpoint logs mxnet's lines."""
    mod = mx.module.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (8, 5))], label_shapes=[('softmax_label', (8,))])
    mod.init_params()
    mod.init_optimizer(kvstore=None)
    assert list(mod._optimizer.idx2name.items()) == [
        (0, 'fc1_weight'), (2, 'fc1_bias'), (4, 'fc2_weight'), (6, 'fc2_bias'),
        (1, 'fc1_weight'), (3, 'fc1_bias'), (5, 'fc2_weight'), (7, 'fc2_bias')]
    prefix = str(tmp_path / 'm')
    with caplog.at_level(logging.INFO):
        mod.save_checkpoint(prefix, 7, save_optimizer_states=True)
    assert 'Saved checkpoint to "%s-0007.params"' % prefix in caplog.text
    assert 'Saved optimizer state to "%s-0007.states"' % prefix in caplog.text

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


# ------------------------------------------------------------------ BaseModule's own loops
# A BaseModule of plain Python (no compile): the values asserted below are what mxnet
# 1.9.1's BaseModule gives for the same class (the class run under mxnet's venv).
class _Doubler(mx.module.BaseModule):
    """Outputs ``data * w`` written into one buffer that every forward reuses (as an
    executor's output array is); ``update`` takes 0.5 off ``w``."""

    def __init__(self, logger=logging.getLogger(__name__)):
        super().__init__(logger=logger)
        self.w, self.seen, self.buf, self.n_out, self.calls = 2.0, [], None, 1, []

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        self.calls.append('bind')
        self.binded, self.for_training = True, for_training

    def install_monitor(self, mon):
        self.calls.append('install_monitor')

    def init_params(self, initializer=None, arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        self.calls.append('init_params')
        if arg_params:
            self.w = float(arg_params['w'].asnumpy()[0])
        self.params_initialized = True

    def init_optimizer(self, kvstore='local', optimizer='sgd', optimizer_params=(),
                       force_init=False):
        self.calls.append('init_optimizer')
        self.optimizer_initialized = True

    def get_params(self):
        self.calls.append('get_params')
        return {'w': nd.array([self.w])}, {}

    def prepare(self, data_batch, sparse_row_id_fn=None):
        self.calls.append('prepare')

    def forward(self, data_batch, is_train=None):
        self.calls.append('forward:%s' % is_train)
        x = data_batch.data[0]
        self.seen.append(float(x.asnumpy().ravel()[0]))
        if self.buf is None or self.buf.shape != x.shape:
            self.buf = nd.zeros(x.shape)
        self.buf[:] = x * self.w

    def backward(self, out_grads=None):
        self.calls.append('backward')

    def update(self):
        self.calls.append('update')
        self.w -= 0.5

    def get_outputs(self, merge_multi_context=True):
        return [self.buf] * self.n_out

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self.calls.append('update_metric')
        eval_metric.update(labels, [self.buf])


def _ten(batch_size=4):
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    return mx.io.NDArrayIter(x, np.zeros(10, np.float32), batch_size=batch_size)


def _bound_doubler():
    mod = _Doubler()
    mod.bind([('data', (4, 2))])
    mod.init_params()
    return mod


def test_fit_calls_callbacks_metric_and_monitor_in_mxnets_order(caplog):
    """The whole call sequence of fit, as mxnet 1.9.1's, except update_metric before
    update (README: "fit's order within a batch")."""
    mod = _Doubler()
    seen = mod.calls

    class Monitor:
        def tic(self):
            seen.append('tic')

        def toc_print(self):
            seen.append('toc')

    metric = mx.metric.MSE()
    with caplog.at_level(logging.INFO, logger=__name__):
        mod.fit(_ten(), eval_data=_ten(), eval_metric=metric, num_epoch=3, begin_epoch=2,
                monitor=Monitor(),
                batch_end_callback=[lambda p: seen.append(('batch', p.epoch, p.nbatch)),
                                    lambda p: seen.append(p.locals['data_batch'].pad)],
                epoch_end_callback=lambda e, sym, arg, aux: seen.append(
                    ('epoch', e, sym, float(arg['w'].asnumpy()[0]), aux)),
                eval_batch_end_callback=lambda p: seen.append(('vbatch', p.epoch, p.nbatch)),
                eval_end_callback=lambda p: seen.append(('vend', p.epoch, p.nbatch)))
    step = ['forward:True', 'backward', 'update_metric', 'update', 'prepare', 'toc']
    train = [['tic'] + step + [('batch', 2, i), 0 if i < 2 else 2] for i in range(3)]
    train[-1].remove('prepare')                    # the last batch has no next one
    validation = [c for i in range(3) for c in
                  ['prepare', 'forward:False', 'update_metric', ('vbatch', 2, i)]]
    assert seen == (['bind', 'install_monitor', 'init_params', 'init_optimizer']
                    + sum(train, []) + ['get_params', 'init_params', ('epoch', 2, None, 0.5, {})]
                    + validation + [('vend', 2, 3)])
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split('=')[0] for line in lines] == \
        ['Epoch[2] Train-mse', 'Epoch[2] Time cost', 'Epoch[2] Validation-mse']
    # the train value is the epoch's, the validation value the last score's; eval_metric
    # was given as an object, so validation scored into it too
    assert lines[0] == 'Epoch[2] Train-mse=178.291667'
    assert lines[2] == 'Epoch[2] Validation-mse=25.875000'
    assert metric.get() == ('mse', 25.875)
    with pytest.raises(AssertionError, match='please specify number of epochs'):
        _Doubler().fit(_ten())


def test_fit_logs_the_epochs_metric_read_before_batch_end_callback(caplog):
    """A callback that resets the metric (a Speedometer does after it logs) does not
    empty the Train line: fit reads the value at the last batch, before the callbacks."""
    mod = _Doubler()
    with caplog.at_level(logging.INFO, logger=__name__):
        mod.fit(_ten(), eval_data=_ten(8), eval_metric='mse', num_epoch=2,
                batch_end_callback=lambda p: p.eval_metric.reset())
    lines = [r.getMessage() for r in caplog.records if 'Time cost' not in r.getMessage()]
    assert lines == ['Epoch[0] Train-mse=155.500000', 'Epoch[0] Validation-mse=23.250000',
                     'Epoch[1] Train-mse=38.875000', 'Epoch[1] Validation-mse=93.000000']


def test_score_predict_and_iter_predict_of_a_base_module():
    mod = _bound_doubler()
    data = _ten()
    mod.score(data, 'mse', num_batch=1)
    mod.score(data, 'mse', reset=False)      # as mxnet: the batch after num_batch is used up
    assert mod.seen == [0.0, 16.0]
    out = mod.predict(_ten())
    np.testing.assert_array_equal(out.asnumpy(), 2 * np.arange(20).reshape(10, 2))
    per_batch = mod.predict(_ten(), merge_batches=False)
    assert [[tuple(o.shape) for o in b] for b in per_batch] == [[(4, 2)], [(4, 2)], [(2, 2)]]
    # predict copies each batch out of the reused buffer; iter_predict hands out views
    assert [b[0].asnumpy()[0, 0] for b in per_batch] == [0.0, 16.0, 32.0]
    views = list(mod.iter_predict(_ten()))
    assert [tuple(v[0][0].shape) for v in views] == [(4, 2), (4, 2), (2, 2)]
    assert [v[0][0].asnumpy()[0, 0] for v in views] == [32.0, 32.0, 32.0]
    empty = mx.io.NDArrayIter(np.zeros((3, 2), np.float32), batch_size=4,
                              last_batch_handle='discard')
    assert mod.predict(empty) == []
    mod.n_out = 2
    assert len(mod.predict(_ten())) == 2 and len(mod.predict(_ten(), num_batch=1)) == 2
    mod.n_out = 1
    assert len(mod.predict(_ten(), always_output_list=True)) == 1

    class Varying(_Doubler):
        def get_outputs(self, merge_multi_context=True):
            return [self.buf] * (1 + len(self.seen) % 2)

    varying = Varying()
    varying.bind([('data', (4, 2))])
    varying.init_params()
    with pytest.raises(AssertionError, match='Cannot merge batches'):
        varying.predict(_ten())
    assert len(varying.predict(_ten(), merge_batches=False)) == 3


def test_base_module_states_params_file_and_prepare(tmp_path):
    mod = _bound_doubler()
    assert mod.get_states(merge_multi_context=False) == []
    mod.set_states()
    with pytest.raises(AssertionError):
        mod.get_states()
    with pytest.raises(AssertionError):
        mod.set_states(value=1.0)
    with pytest.warns(UserWarning, match='sparse_row_id_fn is not invoked for BaseModule'):
        mx.module.BaseModule.prepare(mod, None, sparse_row_id_fn=lambda batch: {})
    fname = str(tmp_path / 'w.params')
    mod.save_params(fname)
    assert sorted(nd.load(fname)) == ['arg:w']
    nd.save(fname, {'arg:w': nd.array([3.0]), 'aux:a': nd.array([1.0])})
    mod.load_params(fname)
    assert mod.w == 3.0
    nd.save(fname, {'arg:w': nd.array([4.0]), 'zzz:a': nd.array([1.0])})
    with pytest.raises(ValueError, match='Invalid param file ' + fname):
        mod.load_params(fname)
    nd.save(fname, {'w': nd.array([4.0])})       # mxnet: a ValueError of tuple unpacking
    with pytest.raises(ValueError):
        mod.load_params(fname)
    assert mod.w == 3.0


def test_parse_data_desc_and_input_name_suggestions():
    from module_api.module.base_module import _check_input_names, _parse_data_desc
    data, label = _parse_data_desc(['data'], ['softmax_label'], [('data', (4, 5))],
                                   [mx.io.DataDesc('softmax_label', (4,))])
    assert isinstance(data[0], mx.io.DataDesc) and data[0].shape == (4, 5)
    assert label[0].name == 'softmax_label'
    with pytest.warns(UserWarning, match=r"label_shapes don't match names specified by "
                                         r"label_names \(\[\] vs. \['softmax_label'\]\)"):
        assert _parse_data_desc(['data'], ['softmax_label'], [('data', (4, 5))], None)[1] \
            is None
    with pytest.raises(ValueError, match="Did you mean one of:\n\tdata\n\tsoftmax_label"):
        _check_input_names(mlp(), ['data', 'x'], 'data', True)   # parameters not offered
    with pytest.warns(UserWarning, match="label_names=\\['y', 'z'\\]") as record:
        _check_input_names(mlp(), ['y', 'z'], 'label', False)
    assert len(record) == 2                                       # one per missing name
