"""The behaviours mxnet 1.9.1's own module, model-parallel and bucketing tests check,
tested here in this project's own words so that they are covered without an mxnet
checkout (tests/mxnet_unittest/test_mxnet_1_9_1.py runs mxnet's files themselves when
MXNET_SOURCE names one).

Each section is headed by the mxnet test whose behaviour it covers; the oracles are
numpy or torch computations and mxnet's documented semantics. Two are covered by
files of their own and not repeated here: test_module_switch_bucket
(test_bucketing_module.py::test_module_switch_bucket_port) and test_monitor
(test_monitor.py::test_monitor_names_count_and_values, against mxnet's printed
values). What this project does not have is not tested: sparse storage (csr,
row_sparse; the sparse halves of test_executor_group,
test_factorization_machine_module and test_module_initializer, whose dense
behaviour is tested below) and NDArray.dtype compared equal to a numpy type.
"""
import collections
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import module_api as mx
from runtime.executor_group import DataParallelExecutorGroup

nd = mx.nd


@pytest.fixture(autouse=True)
def _keep_global_random_state():
    """Tests here seed python's and numpy's generators (BucketSentenceIter shuffles with
    them): later test files get the state they would have had without this file."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    yield
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])


def _rand(shape, seed, scale=1.0):
    return (np.random.RandomState(seed).randn(*shape) * scale).astype(np.float32)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# --- mxnet: test_module_dtype -------------------------------------------------------------
def test_float16_module_on_two_contexts_computes_in_float16():
    """A float16 DataDesc makes a float16 Module: outputs and input gradients are
    float16 and exact (relu only selects), split over two contexts on the batch
    axis of the TNC layout. (mxnet's own check, ``x.dtype == np.float16``, is not
    met yet: NDArray.dtype is torch's dtype here.)"""
    sym = mx.sym.Activation(mx.sym.Variable('data'), act_type='relu', __layout__='TNC')
    mod = mx.mod.Module(sym, ('data',), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[mx.io.DataDesc('data', (3, 8, 7), np.float16, layout='TNC')],
             inputs_need_grad=True)
    mod.init_params()
    x = _rand((3, 8, 7), 0).astype(np.float16)
    head = _rand((3, 8, 7), 1).astype(np.float16)
    mod.forward(mx.io.DataBatch([nd.array(x, dtype=np.float16)]), is_train=True)
    mod.backward([nd.array(head, dtype=np.float16)])
    out = mod.get_outputs()[0].asnumpy()
    grad = mod.get_input_grads()[0].asnumpy()
    assert out.dtype == np.float16 and grad.dtype == np.float16
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    np.testing.assert_array_equal(grad, np.where(x > 0, head, np.float16(0)))
    assert [tuple(o.shape) for o in mod.get_outputs(merge_multi_context=False)[0]] == \
        [(3, 4, 7), (3, 4, 7)]


# --- mxnet: test_module_bind --------------------------------------------------------------
def test_bind_given_an_array_where_a_shape_belongs_raises_type_error():
    sym = mx.sym.Activation(mx.sym.Variable('data'), act_type='relu')
    mod = mx.mod.Module(sym, ('data',), None, context=[mx.cpu(0), mx.cpu(1)])
    with pytest.raises(TypeError):
        mod.bind(data_shapes=[('data', nd.array([10, 10]))])
    assert not mod.binded
    mod.bind(data_shapes=[('data', (4, 3))])          # the module is still usable
    assert mod.binded
    mod.init_params()
    x = _rand((4, 3), 2)
    mod.forward(mx.io.DataBatch([nd.array(x)]), is_train=False)
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.maximum(x, 0))


# --- mxnet: test_module_input_grads -------------------------------------------------------
def test_input_grads_come_in_data_names_order():
    """data_names in an order of their own (not the symbol's argument order): the
    input gradients follow data_names. out = a + 2 b + 3 c."""
    a, b, c = (mx.sym.Variable(n, __layout__='NC') for n in 'abc')
    mod = mx.mod.Module(a + 2 * b + 3 * c, data_names=['b', 'c', 'a'], label_names=None,
                        context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('b', (4, 3)), ('c', (4, 3)), ('a', (4, 3))], inputs_need_grad=True)
    mod.init_params()
    xb, xc, xa = _rand((4, 3), 3), _rand((4, 3), 4), _rand((4, 3), 5)
    head = _rand((4, 3), 6)
    mod.forward(mx.io.DataBatch([nd.array(xb), nd.array(xc), nd.array(xa)]), is_train=True)
    mod.backward([nd.array(head)])
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), xa + 2 * xb + 3 * xc,
                               rtol=1e-6, atol=1e-6)
    gb, gc, ga = (g.asnumpy() for g in mod.get_input_grads())
    np.testing.assert_allclose(gb, 2 * head, rtol=1e-6)
    np.testing.assert_allclose(gc, 3 * head, rtol=1e-6)
    np.testing.assert_allclose(ga, head, rtol=1e-6)


# --- mxnet: test_module_ctx_group ---------------------------------------------------------
def _two_group_sum():
    with mx.AttrScope(ctx_group='dev1'):
        a = mx.sym.Variable('a') * 2
    with mx.AttrScope(ctx_group='dev2'):
        return a + mx.sym.Variable('b')


C = mx.cpu


@pytest.mark.parametrize("contexts,group2ctxs,placed", [
    # every form mxnet's Module takes: a dict for all contexts, one dict per context,
    # and per-group lists of one context or of one per data-parallel context
    ([C(0)], {'dev1': C(1), 'dev2': C(2)}, [(C(1), C(2))]),
    ([C(0), C(1)], [{'dev1': C(2), 'dev2': C(3)}, {'dev1': C(4), 'dev2': C(5)}],
     [(C(2), C(3)), (C(4), C(5))]),
    ([C(0), C(1)], {'dev1': C(2), 'dev2': C(3)}, [(C(2), C(3)), (C(2), C(3))]),
    ([C(0), C(1)], {'dev1': C(2), 'dev2': [C(3)]}, [(C(2), C(3)), (C(2), C(3))]),
    ([C(0), C(1)], {'dev1': [C(2), C(4)], 'dev2': [C(3), C(5)]}, [(C(2), C(3)), (C(4), C(5))]),
])
def test_group2ctxs_places_each_executors_groups(contexts, group2ctxs, placed):
    mod = mx.mod.Module(_two_group_sum(), context=contexts, data_names=['a', 'b'],
                        label_names=None, group2ctxs=group2ctxs)
    mod.bind(data_shapes=[('a', (4, 5)), ('b', (4, 5))], inputs_need_grad=True)
    mod.init_params()
    xa, xb, head = _rand((4, 5), 7), _rand((4, 5), 8), _rand((4, 5), 9)
    mod.forward(mx.io.DataBatch([nd.array(xa), nd.array(xb)]), is_train=True)
    mod.backward([nd.array(head)])
    for exe, (ctx_a, ctx_b) in zip(mod._exec_group.execs, placed):
        assert exe.arg_dict['a'].context == ctx_a and exe.grad_dict['a'].context == ctx_a
        assert exe.arg_dict['b'].context == ctx_b and exe.grad_dict['b'].context == ctx_b
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), 2 * xa + xb, rtol=1e-6)
    ga, gb = mod.get_input_grads()
    np.testing.assert_allclose(ga.asnumpy(), 2 * head, rtol=1e-6)
    np.testing.assert_allclose(gb.asnumpy(), head, rtol=1e-6)
    if len(contexts) == 1:             # one executor: its gradients are returned as they are
        assert (ga.context, gb.context) == placed[0]


def test_group2ctxs_with_the_wrong_number_of_contexts_is_refused():
    mod = mx.mod.Module(_two_group_sum(), context=[C(0), C(1)], data_names=['a', 'b'],
                        label_names=None, group2ctxs={'dev1': [C(2), C(3), C(4)], 'dev2': C(5)})
    with pytest.raises(AssertionError):
        mod.bind(data_shapes=[('a', (4, 5)), ('b', (4, 5))])


# --- mxnet: test_bucket_module_ctx_group --------------------------------------------------
NUM_HIDDEN = 6


def _grouped_chain_sym_gen(seq_len):
    """seq_len FullyConnected layers sharing one weight on dev1, then seq_len more
    sharing another on dev2, then a softmax."""
    with mx.AttrScope(ctx_group='dev1'):
        fc = mx.sym.Variable('data')
        w, b = mx.sym.Variable('dev1_weight'), mx.sym.Variable('dev1_bias')
        for i in range(seq_len):
            fc = mx.sym.FullyConnected(fc, weight=w, bias=b, num_hidden=NUM_HIDDEN,
                                       name='dev1_fc_%d' % i)
    with mx.AttrScope(ctx_group='dev2'):
        w, b = mx.sym.Variable('dev2_weight'), mx.sym.Variable('dev2_bias')
        for i in range(seq_len):
            fc = mx.sym.FullyConnected(fc, weight=w, bias=b, num_hidden=NUM_HIDDEN,
                                       name='dev2_fc_%d' % i)
        out = mx.sym.SoftmaxOutput(fc, mx.sym.Variable('label'), name='softmax')
    return out, ('data',), ('label',)


def _grouped_chain_numpy(x, p, seq_len):
    for group in ('dev1', 'dev2'):
        for _ in range(seq_len):
            x = x @ p[group + '_weight'].T + p[group + '_bias']
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_bucketing_module_places_every_bucket_by_group2ctxs():
    rng = np.random.RandomState(10)
    params = {'dev1_weight': rng.randn(NUM_HIDDEN, NUM_HIDDEN) * 0.4,
              'dev1_bias': rng.randn(NUM_HIDDEN) * 0.1,
              'dev2_weight': rng.randn(NUM_HIDDEN, NUM_HIDDEN) * 0.4,
              'dev2_bias': rng.randn(NUM_HIDDEN) * 0.1}
    mod = mx.mod.BucketingModule(_grouped_chain_sym_gen, default_bucket_key=3,
                                 context=[C(0)], group2ctxs=[{'dev1': C(1), 'dev2': C(2)}])
    mod.bind(data_shapes=[('data', (5, NUM_HIDDEN))], label_shapes=[('label', (5,))],
             for_training=True, inputs_need_grad=True)
    mod.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    x = _rand((5, NUM_HIDDEN), 11)
    y = np.array([0, 1, 2, 3, 4], np.float32)
    for key in (3, 2):
        batch = mx.io.DataBatch([nd.array(x)], [nd.array(y)], bucket_key=key,
                                provide_data=[mx.io.DataDesc('data', (5, NUM_HIDDEN))],
                                provide_label=[mx.io.DataDesc('label', (5,))])
        mod.forward(batch, is_train=True)
        mod.backward()
        prob = _grouped_chain_numpy(x.astype(np.float64), params, key)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), prob, rtol=1e-4, atol=1e-6)
        # backward through the chain: dx = (prob - onehot) W2^key W1^key
        dx = prob - np.eye(NUM_HIDDEN)[y.astype(int)]
        for group in ('dev2', 'dev1'):
            for _ in range(key):
                dx = dx @ params[group + '_weight']
        np.testing.assert_allclose(mod.get_input_grads()[0].asnumpy(), dx, rtol=1e-4, atol=1e-6)
        exe = mod._buckets[key]._exec_group.execs[0]
        assert exe.arg_dict['dev1_weight'].context == C(1)
        assert exe.arg_dict['dev2_weight'].context == C(2)
        assert exe.grad_dict['dev2_bias'].context == C(2)
    assert sorted(mod._buckets) == [2, 3]


# --- mxnet: test_module_layout ------------------------------------------------------------
def test_tnc_layout_splits_the_batch_along_axis_1():
    """__layout__='TNC': the batch is axis 1, so two contexts take 4 of 8 columns
    each, and merging joins them on axis 1 again."""
    sym = mx.sym.Activation(mx.sym.Variable('data'), act_type='relu', __layout__='TNC')
    mod = mx.mod.Module(sym, ('data',), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[mx.io.DataDesc('data', (3, 8, 7), layout='TNC')],
             inputs_need_grad=True)
    mod.init_params()
    x, head = _rand((3, 8, 7), 12), _rand((3, 8, 7), 13)
    mod.forward(mx.io.DataBatch([nd.array(x)]), is_train=True)
    mod.backward([nd.array(head)])
    parts = mod.get_outputs(merge_multi_context=False)[0]
    assert [tuple(p.shape) for p in parts] == [(3, 4, 7), (3, 4, 7)]
    np.testing.assert_array_equal(parts[0].asnumpy(), np.maximum(x[:, :4], 0))
    np.testing.assert_array_equal(parts[1].asnumpy(), np.maximum(x[:, 4:], 0))
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.maximum(x, 0))
    np.testing.assert_array_equal(mod.get_input_grads()[0].asnumpy(),
                                  np.where(x > 0, head, 0))


# --- mxnet: test_save_load ----------------------------------------------------------------
def test_checkpoint_of_a_two_context_module_keeps_the_kvstore_updaters_states(tmp_path):
    """Two contexts update on the kvstore, so the momentum lives in the kvstore's
    updater (keyed by parameter name); save_checkpoint writes those states. Loaded
    into one context they are the local updater's states; loaded into two contexts
    again the next step goes on with the momentum, as the original's does."""
    sym = mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=4, name='fc')
    sym = mx.sym.LinearRegressionOutput(sym, name='out')
    x, y = _rand((6, 5), 14), _rand((6, 4), 15)
    batch = mx.io.DataBatch([nd.array(x)], [nd.array(y)])
    opt = {'learning_rate': 0.1, 'momentum': 0.9}
    two = [mx.cpu(0), mx.cpu(1)]
    mod = mx.mod.Module(sym, ('data',), ('out_label',), context=two)
    mod.bind(data_shapes=[('data', (6, 5))], label_shapes=[('out_label', (6, 4))])
    mod.init_params(mx.init.Uniform(0.5))
    mod.init_optimizer(optimizer_params=opt)
    assert mod._update_on_kvstore and mod._updater is None
    for _ in range(2):
        mod.forward_backward(batch)
        mod.update()
    prefix = str(tmp_path / 'fc')
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)
    saved = {k: v.asnumpy() for k, v in mod._kvstore._updater.states.items()}
    want = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    assert sorted(saved) == ['fc_bias', 'fc_weight'] and np.abs(saved['fc_bias']).max() > 0

    def load(contexts):
        m = mx.mod.Module.load(prefix, 3, load_optimizer_states=True, data_names=('data',),
                               label_names=('out_label',), context=contexts)
        m.bind(data_shapes=[('data', (6, 5))], label_shapes=[('out_label', (6, 4))])
        m.init_optimizer(optimizer_params=opt)
        assert m.symbol.tojson() == mod.symbol.tojson()
        for k, v in m.get_params()[0].items():
            np.testing.assert_array_equal(v.asnumpy(), want[k])
        return m

    one = load(mx.cpu(0))
    assert sorted(one._updater.states) == sorted(saved)
    for k in saved:
        np.testing.assert_array_equal(one._updater.states[k].asnumpy(), saved[k])
    again = load(two)
    # SGD with momentum by hand: m = 0.9 m - lr grad; w += m, where the gradient is
    # LinearRegressionOutput's (out - label) / (outputs per sample), over the batch
    err = (x @ want['fc_weight'].T + want['fc_bias'] - y) / 4 / 6
    grads = {'fc_weight': err.T @ x, 'fc_bias': err.sum(axis=0)}
    for m in (mod, again):
        m.forward_backward(batch)
        m.update()
        for name, w in m.get_params()[0].items():
            np.testing.assert_allclose(w.asnumpy(), want[name] + 0.9 * saved[name]
                                       - 0.1 * grads[name], rtol=1e-5, atol=1e-6)


# --- mxnet: test_module_reshape -----------------------------------------------------------
def test_reshape_keeps_the_rescale_grad_of_the_first_bind():
    """rescale_grad is fixed at 1/batch by init_optimizer; a reshape to a larger batch
    does not change it. With every head gradient 1 and lr 1 the bias moves by
    -(batch / 7) per step: 0 -> -1 (batch 7) -> -3 (batch 14)."""
    sym = mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=5, name='fc')
    mod = mx.mod.Module(sym, ('data',), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[('data', (7, 3))])
    mod.init_params(mx.init.Zero())
    mod.init_optimizer(optimizer_params={'learning_rate': 1})
    assert mod._optimizer.rescale_grad == pytest.approx(1 / 7)
    for batch, bias in ((7, -1.0), (14, -3.0)):
        if batch != 7:
            mod.reshape(data_shapes=[('data', (batch, 3))])
        x = _rand((batch, 3), batch)
        mod.forward(mx.io.DataBatch([nd.array(x)]), is_train=True)
        assert mod.get_outputs()[0].shape == (batch, 5)
        mod.backward([nd.ones((batch, 5))])
        mod.update()
        np.testing.assert_allclose(mod.get_params()[0]['fc_bias'].asnumpy(), bias, rtol=1e-6)
    assert mod._exec_group.batch_size == 14
    # weights: the first step moved each row by -sum(x)/7, with x of batch 7; the
    # second by -sum(x)/7 with x of batch 14
    expect = -(_rand((7, 3), 7).sum(axis=0) + _rand((14, 3), 14).sum(axis=0)) / 7
    np.testing.assert_allclose(mod.get_params()[0]['fc_weight'].asnumpy(),
                               np.tile(expect, (5, 1)), rtol=1e-5, atol=1e-6)


# --- mxnet: test_module_states ------------------------------------------------------------
def _lstm_numpy(x, p, h, c, layers):
    """Unrolled stacked LSTM (mxnet's gate order i, f, c, o), x: (batch, T, input)."""
    h, c = list(h), list(c)
    for t in range(x.shape[1]):
        inp = x[:, t]
        for l in range(layers):
            pre = 'l%d_' % l
            g = inp @ p[pre + 'i2h_weight'].T + p[pre + 'i2h_bias'] \
                + h[l] @ p[pre + 'h2h_weight'].T + p[pre + 'h2h_bias']
            i, f, cc, o = np.split(g, 4, axis=1)
            c[l] = _sigmoid(f) * c[l] + _sigmoid(i) * np.tanh(cc)
            h[l] = _sigmoid(o) * np.tanh(c[l])
            inp = h[l]
    return h, c


def test_states_fed_back_continue_the_sequence():
    """A stacked LSTM whose begin states are Module states: set_states(value=1), one
    forward over T steps, then the final states (unmerged, per context) set back as
    the states: the second forward is where a 2T-step run from the same start ends."""
    H, D, T, B, layers = 4, 3, 3, 4, 2
    stack = mx.rnn.SequentialRNNCell()
    for l in range(layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=H, prefix='l%d_' % l))
    begin = stack.begin_state(func=mx.sym.Variable)
    _, states = stack.unroll(T, begin_state=begin, inputs=mx.sym.Variable('data'))
    mod = mx.mod.Module(mx.sym.Group(states), context=[mx.cpu(0), mx.cpu(1)],
                        label_names=None, state_names=[s.name for s in begin])
    mod.bind(data_shapes=[('data', (B, T, D))], for_training=False)
    rng = np.random.RandomState(16)
    params = {}
    for l in range(layers):
        width = D if l == 0 else H
        params.update({'l%d_i2h_weight' % l: rng.randn(4 * H, width) * 0.5,
                       'l%d_h2h_weight' % l: rng.randn(4 * H, H) * 0.5,
                       'l%d_i2h_bias' % l: rng.randn(4 * H) * 0.1,
                       'l%d_h2h_bias' % l: rng.randn(4 * H) * 0.1})
    mod.init_params(arg_params={k: nd.array(v) for k, v in params.items()})
    x = _rand((B, T, D), 17)
    batch = mx.io.DataBatch([nd.array(x)], [])
    mod.set_states(value=1)
    mod.forward(batch)
    first = [o.asnumpy() for o in mod.get_outputs()]
    mod.set_states(states=mod.get_outputs(merge_multi_context=False))
    mod.forward(batch)
    second = [o.asnumpy() for o in mod.get_outputs()]
    ones = [np.ones((B, H))] * layers
    for steps, got in ((x, first), (np.concatenate([x, x], axis=1), second)):
        h, c = _lstm_numpy(steps.astype(np.float64), params, ones, ones, layers)
        want = [v for l in range(layers) for v in (h[l], c[l])]   # [h0, c0, h1, c1]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
# --- mxnet: test_module_set_params --------------------------------------------------------
def _two_layer_regression():
    x = mx.sym.Variable('data')
    x = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=2, name='fc_0'),
                          act_type='sigmoid', name='act_0')
    x = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=2, name='fc_1'),
                          act_type='sigmoid', name='act_1')
    return mx.sym.LinearRegressionOutput(x, name='out', grad_scale=2)


@pytest.mark.filterwarnings("ignore:init_params. ignoring")
def test_set_params_missing_and_extra_names():
    """allow_missing keeps what the executors hold for a missing name; allow_extra
    ignores names the symbol lacks; otherwise a missing name is a RuntimeError (it
    is checked first) and an extra one a ValueError."""
    mod = mx.mod.Module(_two_layer_regression(), label_names=['out_label'])
    mod.bind([('data', (1, 2))], [('out_label', (1, 2))])
    full = {'fc_0_weight': np.array([[.15, .20], [.25, .30]]), 'fc_0_bias': np.array([.35, .35]),
            'fc_1_weight': np.array([[.40, .45], [.50, .55]]), 'fc_1_bias': np.array([.60, .60])}

    def arrays(**kw):
        return {k: nd.array(v) for k, v in kw.items()}

    def params():
        return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}

    def forward():
        mod.forward(mx.io.DataBatch([nd.array([[0.05, 0.10]])]), is_train=False)
        return mod.get_outputs()[0].asnumpy()

    def numpy_forward(p):
        h = _sigmoid(np.array([[0.05, 0.10]]) @ p['fc_0_weight'].T + p['fc_0_bias'])
        return _sigmoid(h @ p['fc_1_weight'].T + p['fc_1_bias'])

    mod.set_params(arrays(**full), {}, force_init=True)
    np.testing.assert_allclose(forward(), numpy_forward(full), rtol=1e-6)
    missing = {k: v * 2 for k, v in full.items() if k != 'fc_1_bias'}
    mod.set_params(arrays(**missing), {}, force_init=True, allow_missing=True)
    got = params()
    np.testing.assert_allclose(got['fc_1_bias'], full['fc_1_bias'], rtol=1e-6)  # kept
    np.testing.assert_allclose(got['fc_0_weight'], 2 * full['fc_0_weight'], rtol=1e-6)
    np.testing.assert_allclose(forward(), numpy_forward(dict(missing, fc_1_bias=full['fc_1_bias'])),
                               rtol=1e-6)
    with pytest.raises(RuntimeError):
        mod.set_params(arrays(**missing), {}, force_init=True, allow_missing=False)
    extra = dict(full, fc_2_weight=np.array([.6, .6]))
    mod.set_params(arrays(**extra), {}, force_init=True, allow_missing=True, allow_extra=True)
    np.testing.assert_allclose(forward(), numpy_forward(full), rtol=1e-6)
    with pytest.raises(ValueError):
        mod.set_params(arrays(**extra), {}, force_init=True, allow_missing=True,
                       allow_extra=False)
    only_extra = arrays(fc_2_weight=np.array([.6, .6]))
    with pytest.raises(RuntimeError):
        mod.set_params(only_extra, {}, force_init=True, allow_missing=False, allow_extra=False)
    with pytest.raises(ValueError):
        mod.set_params(only_extra, {}, force_init=True, allow_missing=True, allow_extra=False)
    np.testing.assert_allclose(forward(), numpy_forward(full), rtol=1e-6)   # nothing changed


# --- mxnet: test_executor_group -----------------------------------------------------------
def _fc_stack(layers):
    x = mx.sym.Variable('data')
    for i in range(layers):
        x = mx.sym.FullyConnected(x, num_hidden=4, name='fc%d' % i)
    return mx.sym.LinearRegressionOutput(x, name='out')


def test_executor_group_shared_by_a_larger_symbol():
    """A group bound for 3 layers on the memory of one bound for 2 (as BucketingModule
    binds buckets): the 2-layer parameters and their gradients are the same arrays in
    both; what the first group does not own as parameters (inputs, labels, and here
    the third layer) comes from one shared pool per context."""
    contexts = [mx.cpu(0), mx.cpu(1)]
    data, label = [('data', (6, 3))], [('out_label', (6, 4))]
    small = _fc_stack(2)
    params = [n for n in small.list_arguments() if n not in ('data', 'out_label')]
    g1 = DataParallelExecutorGroup(small, contexts, [1, 1], data, label, params, True, False)
    assert [sorted(d) for d in g1.shared_data_arrays] == [['data', 'out_label']] * 2
    big = _fc_stack(3)
    g2 = DataParallelExecutorGroup(big, contexts, [1, 1], data, label, params, True, False,
                                   shared_group=g1)
    extra = [n for n in big.list_arguments() if n not in params]
    for i in range(len(contexts)):
        for pool in (g1.shared_data_arrays[i], g2.shared_data_arrays[i]):
            assert sorted(pool) == sorted(extra)
        e1, e2 = g1.execs[i], g2.execs[i]
        for name in params:
            assert e2.arg_dict[name] is e1.arg_dict[name]
            assert e2.grad_dict[name] is e1.grad_dict[name]
        for name in extra:
            assert mx.test_utils.same_array(g2.shared_data_arrays[i][name], e2.arg_dict[name])
    assert all(g2.grad_req[n] == r for n, r in g1.grad_req.items())
    assert g2.grad_req['fc2_weight'] == 'null'          # not a parameter of the group
    # values set through the first group reach the second
    rng = np.random.RandomState(18)
    p = {n: rng.randn(*g1.execs[0].arg_dict[n].shape) for n in params}
    g1.set_params({k: nd.array(v) for k, v in p.items()}, {})
    p['fc2_weight'], p['fc2_bias'] = rng.randn(4, 4), rng.randn(4)
    for exe in g2.execs:
        exe.arg_dict['fc2_weight'][:] = nd.array(p['fc2_weight'])
        exe.arg_dict['fc2_bias'][:] = nd.array(p['fc2_bias'])
    x = _rand((6, 3), 19)
    g2.forward(mx.io.DataBatch([nd.array(x)], [nd.zeros((6, 4))]), is_train=False)
    want = x
    for i in range(3):
        want = want @ p['fc%d_weight' % i].T + p['fc%d_bias' % i]
    np.testing.assert_allclose(g2.get_outputs()[0].asnumpy(), want, rtol=1e-5, atol=1e-5)


# --- mxnet: test_factorization_machine_module ---------------------------------------------
def _fm_symbol(features, factors):
    """A factorization machine, dense: y = x w + b + 1/2 sum_f ((x v)_f^2 - (x^2)(v^2)_f)."""
    x = mx.sym.Variable('data')
    v = mx.sym.Variable('v', shape=(features, factors))
    w = mx.sym.Variable('w1_weight', shape=(features, 1))
    b = mx.sym.Variable('w1_bias', shape=(1,))
    linear = mx.sym.broadcast_add(mx.sym.dot(x, w), b)
    pair = 0.5 * mx.sym.square(mx.sym.dot(x, v))
    both = mx.sym.sum(mx.sym.Concat(linear, pair, dim=1), axis=1, keepdims=True)
    self_terms = mx.sym.dot(mx.sym.square(x), mx.sym.sum(mx.sym.square(v), axis=1,
                                                         keepdims=True))
    model = mx.sym.elemwise_add(both, -0.5 * self_terms)
    return mx.sym.LinearRegressionOutput(model, mx.sym.Variable('label'))


def test_factorization_machine_trains_like_torch():
    """mxnet's factorization-machine flow on dense arrays (this project has no csr /
    row_sparse storage): Module.fit-style loop with SGD momentum, gradient clipping
    and rescale_grad (the clipping bites: some rescaled gradients exceed 0.1), against
    the same model and optimizer written in torch."""
    features, factors, batch, nbatch, EPOCHS = 12, 3, 8, 4, 8
    rng = np.random.RandomState(20)
    x = (rng.rand(batch * nbatch, features) < 0.3) * rng.rand(batch * nbatch, features)
    y = x @ rng.randn(features) * 0.5 + 1.0
    x, y = x.astype(np.float32), y.astype(np.float32).reshape(-1, 1)
    init = {'v': rng.randn(features, factors) * 0.1, 'w1_weight': rng.randn(features, 1) * 0.1,
            'w1_bias': np.zeros(1)}
    it = mx.io.NDArrayIter(x, {'label': y}, batch_size=batch, last_batch_handle='discard')
    mod = mx.mod.Module(_fm_symbol(features, factors), data_names=['data'],
                        label_names=['label'])
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(arg_params={k: nd.array(v) for k, v in init.items()})
    sgd = mx.optimizer.SGD(momentum=0.1, clip_gradient=0.1, learning_rate=0.5,
                           rescale_grad=1.0 / batch)
    mod.init_optimizer(optimizer=sgd)
    metric = mx.metric.create('MSE')
    for _ in range(EPOCHS):
        it.reset()
        metric.reset()
        for b in it:
            mod.forward(b, is_train=True)
            mod.update_metric(metric, b.label)
            mod.backward()
            mod.update()

    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in init.items()}
    mom = {k: torch.zeros_like(v) for k, v in p.items()}
    epoch_mse = []
    for _ in range(EPOCHS):
        sq_errors = []
        for i in range(nbatch):
            xb = torch.tensor(x[i * batch:(i + 1) * batch], dtype=torch.float64)
            yb = torch.tensor(y[i * batch:(i + 1) * batch], dtype=torch.float64)
            xv = xb @ p['v']
            out = xb @ p['w1_weight'] + p['w1_bias'] + 0.5 * (
                (xv ** 2).sum(1, keepdim=True) - (xb ** 2) @ (p['v'] ** 2).sum(1, keepdim=True))
            sq_errors.append(((out - yb) ** 2).mean().item())
            out.backward(out.detach() - yb)       # LinearRegressionOutput: out - label
            with torch.no_grad():
                for k, t in p.items():
                    g = torch.clamp(t.grad / batch, -0.1, 0.1)
                    mom[k] = 0.1 * mom[k] - 0.5 * g
                    t += mom[k]
                    t.grad = None
        epoch_mse.append(np.mean(sq_errors))
    got = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    for k, t in p.items():
        np.testing.assert_allclose(got[k], t.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
    assert metric.get()[1] == pytest.approx(epoch_mse[-1], rel=1e-4)
    assert epoch_mse[-1] < 0.25 * epoch_mse[0], epoch_mse           # it learned


# --- mxnet: test_module_initializer -------------------------------------------------------
def test_variable_init_attributes_override_the_modules_initializer():
    """A Variable's ``init`` is used for it by Module.init_params; the initializer
    given to init_params fills the rest."""
    x = mx.sym.Variable('data')
    v = mx.sym.Variable('v', shape=(10, 1), init=mx.init.Uniform(scale=0.1))
    c = mx.sym.Variable('c', shape=(1,), init=mx.init.Constant(0.75))
    out = mx.sym.broadcast_add(mx.sym.dot(x, v), c)
    out = mx.sym.FullyConnected(out, num_hidden=3, name='fc')
    mod = mx.mod.Module(out, data_names=['data'], label_names=None)
    mod.bind(data_shapes=[('data', (4, 10))])
    mod.init_params(initializer=mx.init.Constant(-2.0))
    arg = {k: a.asnumpy() for k, a in mod.get_params()[0].items()}
    np.testing.assert_array_equal(arg['c'], [0.75])
    assert np.all(np.abs(arg['v']) <= 0.1) and len(np.unique(arg['v'])) == 10
    np.testing.assert_array_equal(arg['fc_weight'], np.full((3, 1), -2.0))
    np.testing.assert_array_equal(arg['fc_bias'], np.zeros(3))     # biases start at 0


# --- mxnet: test_forward_reshape ----------------------------------------------------------
def _two_image_net(classes):
    """Two images of any size: conv + pool each, global mean, joined, one classifier
    (no parameter depends on the image size)."""
    a = mx.sym.Convolution(mx.sym.Variable('data1'), kernel=(2, 2), stride=(2, 2), num_filter=2,
                           name='conv1')
    a = mx.sym.Pooling(a, kernel=(2, 2), stride=(1, 1), pool_type='avg')
    b = mx.sym.Convolution(mx.sym.Variable('data2'), kernel=(3, 3), num_filter=3, name='conv2')
    b = mx.sym.Pooling(b, kernel=(2, 2), stride=(1, 1), pool_type='max')
    joined = mx.sym.Concat(mx.sym.mean(a, axis=(2, 3)), mx.sym.mean(b, axis=(2, 3)), dim=1)
    fc = mx.sym.FullyConnected(joined, num_hidden=classes, name='fc')
    return mx.sym.SoftmaxOutput(fc, name='softmax')


def _two_image_torch(p, x1, x2):
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in p.items()}
    a = F.avg_pool2d(F.conv2d(torch.tensor(x1, dtype=torch.float64), t['conv1_weight'],
                              t['conv1_bias'], stride=2), 2, stride=1)
    b = F.max_pool2d(F.conv2d(torch.tensor(x2, dtype=torch.float64), t['conv2_weight'],
                              t['conv2_bias']), 2, stride=1)
    joined = torch.cat([a.mean((2, 3)), b.mean((2, 3))], dim=1)
    return torch.softmax(joined @ t['fc_weight'].T + t['fc_bias'], dim=1).numpy()


@pytest.mark.filterwarnings("ignore:Data provided by label_shapes")   # the predict-only bind
def test_forward_takes_new_batch_and_image_sizes_then_predicts_at_batch_one():
    """Bound for one batch and image size, forward takes batches of other sizes and
    other image sizes (a reshape of its own each time), trains on them, and after a
    force_rebind to batch 1 predicts a whole iterator; every output against torch."""
    classes = 4
    mod = mx.mod.Module(_two_image_net(classes), data_names=['data1', 'data2'],
                        label_names=['softmax_label'])
    mod.bind(data_shapes=[('data1', (4, 3, 8, 8)), ('data2', (4, 3, 6, 6))],
             label_shapes=[('softmax_label', (4,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer_params={'learning_rate': 0.1})
    rng = np.random.RandomState(21)
    for n, s1, s2 in ((4, 8, 6), (2, 8, 6), (5, 8, 6), (5, 12, 10), (3, 6, 8)):
        x1 = rng.uniform(0, 2, (n, 3, s1, s1)).astype(np.float32)
        x2 = rng.uniform(0, 2, (n, 3, s2, s2 + 2)).astype(np.float32)
        batch = mx.io.DataBatch([nd.array(x1), nd.array(x2)], [nd.array(np.arange(n) % classes)])
        p = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
        mod.forward(batch, is_train=True)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), _two_image_torch(p, x1, x2),
                                   rtol=1e-4, atol=1e-6)
        mod.backward()
        mod.update()
        assert any(not np.array_equal(v.asnumpy(), p[k])
                   for k, v in mod.get_params()[0].items())        # it trained on them
    x1 = rng.uniform(0, 2, (6, 3, 10, 10)).astype(np.float32)
    x2 = rng.uniform(0, 2, (6, 3, 7, 9)).astype(np.float32)
    labels = np.arange(6) % classes
    p = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    want = _two_image_torch(p, x1, x2)
    scored = mod.score(mx.io.NDArrayIter([nd.array(x1), nd.array(x2)], [nd.array(labels)],
                                         batch_size=3), eval_metric='acc')
    assert scored == [('accuracy', pytest.approx(np.mean(want.argmax(1) == labels)))]
    mod.bind(data_shapes=[('data1', (1, 3, 10, 10)), ('data2', (1, 3, 7, 9))],
             for_training=False, force_rebind=True)
    got = mod.predict(mx.io.NDArrayIter([nd.array(x1), nd.array(x2)], batch_size=1))
    assert got.shape == (6, classes)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-6)


# --- mxnet: test_forward_types ------------------------------------------------------------
def test_forward_takes_any_object_with_data_and_predict_takes_arrays():
    """forward needs only a ``data`` attribute (a namedtuple will do), of any shape;
    predict takes an NDArray or a numpy array."""
    Batch = collections.namedtuple('Batch', ['data'])
    mod = mx.mod.Module(mx.sym.Variable('data') * 2, label_names=None)
    mod.bind(data_shapes=[('data', (1, 10))])
    mod.init_params()
    for shape in ((1, 10), (3, 5)):
        x = _rand(shape, 22)
        mod.forward(Batch([nd.array(x)]))
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), 2 * x, rtol=1e-6)
    x = _rand((1, 10), 23)
    for given in (nd.array(x), x.astype(np.float64)):
        np.testing.assert_allclose(mod.predict(given).asnumpy(), 2 * x, rtol=1e-6)


# --- mxnet: test_reference_single_batch_during_fit ----------------------------------------
class _RecyclingIter(mx.io.DataIter):
    """Serves its batches the way a C++ iterator does: one buffer, overwritten with NaN
    as soon as the next batch is asked for, so a batch used after ``next()`` is garbage."""

    def __init__(self, x, y, batch_size):
        super().__init__(batch_size)
        self.x, self.y = x, y
        self.provide_data = [mx.io.DataDesc('data', (batch_size,) + x.shape[1:])]
        self.provide_label = [mx.io.DataDesc('softmax_label', (batch_size,))]
        self.cur, self.last = 0, None

    def reset(self):
        self.cur = 0

    def next(self):
        if self.last is not None:                   # the previous batch is freed now
            for arr in self.last.data + self.last.label:
                arr[:] = float('nan')
        if self.cur + self.batch_size > len(self.x):
            raise StopIteration
        s = slice(self.cur, self.cur + self.batch_size)
        self.cur += self.batch_size
        self.last = mx.io.DataBatch([nd.array(self.x[s])], [nd.array(self.y[s])])
        return self.last


def test_fit_uses_each_batch_before_asking_for_the_next():
    x = _rand((24, 5), 24)
    y = (np.arange(24) % 3).astype(np.float32)
    sym = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=3,
                                                     name='fc'), name='softmax')
    results = []
    for it in (mx.io.NDArrayIter(x, y, batch_size=6), _RecyclingIter(x, y, 6)):
        mod = mx.mod.Module(sym)
        metric = mx.metric.Accuracy()
        mod.fit(it, eval_metric=metric, num_epoch=2, optimizer_params={'learning_rate': 0.5},
                arg_params={'fc_weight': nd.array(_rand((3, 5), 25, 0.1)),
                            'fc_bias': nd.zeros((3,))})
        results.append(({k: v.asnumpy() for k, v in mod.get_params()[0].items()},
                        metric.get()[1]))
    (want, want_acc), (got, got_acc) = results
    for k in want:
        assert np.all(np.isfinite(got[k]))
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7)
    assert got_acc == want_acc


# --- mxnet: test_bucket_module_grad_req ---------------------------------------------------
def _scale_sym_gen(_key):
    data = mx.sym.Variable('data')
    a = mx.sym.Variable('a', shape=(1,), init=mx.init.One())
    return mx.sym.make_loss(mx.sym.broadcast_mul(data, a)), ('data',), None


@pytest.mark.parametrize("grad_req", ['write', 'add'])
def test_bucketing_grad_req_is_every_buckets(grad_req):
    """loss = sum(data * a): d loss / d a = sum(data). The buckets share the gradient
    array, so with 'add' a step in bucket 5 adds to what bucket 10 left there."""
    mod = mx.mod.BucketingModule(_scale_sym_gen, default_bucket_key=10)
    mod.bind(data_shapes=[('data', (3,))], for_training=True, grad_req=grad_req)
    mod.init_params()
    x = np.array([1.5, -0.25, 2.0], np.float32)
    total = 0.0
    for key in (10, 5):
        mod.forward_backward(mx.io.DataBatch([nd.array(x)], None, bucket_key=key,
                                             provide_data=[mx.io.DataDesc('data', (3,))]))
        assert mod._curr_module._grad_req == grad_req
        total = total + x.sum() if grad_req == 'add' else x.sum()
        grad = mod._curr_module._exec_group.execs[0].grad_dict['a'].asnumpy()
        np.testing.assert_allclose(grad, [total], rtol=1e-6)
    assert sorted(mod._buckets) == [5, 10]


# --- mxnet: test_module_update_no_pragram -------------------------------------------------
def test_module_without_parameters_steps_without_error():
    """A Module with no parameters (Dropout only) takes init_optimizer and update;
    its training output is the input dropped or scaled by 1 / (1 - p)."""
    mod = mx.mod.Module(mx.sym.Dropout(mx.sym.Variable('data'), p=0.5), label_names=None)
    mod.bind(data_shapes=[('data', (10, 10))])
    mod.init_params()
    mod.init_optimizer()
    assert mod.get_params() == ({}, {})
    mod.forward_backward(mx.io.DataBatch([nd.ones((10, 10))]))
    mod.update()
    out = mod.get_outputs()[0].asnumpy()
    assert out.shape == (10, 10) and set(np.unique(out)) == {0.0, 2.0}
    mod.forward(mx.io.DataBatch([nd.ones((10, 10))]), is_train=False)
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.ones((10, 10)))


# --- mxnet: test_module_init_optimizer ----------------------------------------------------
@pytest.mark.parametrize("how", ['name', 'object'])
def test_optimizer_knows_the_parameter_names(how):
    """init_optimizer gives the optimizer idx2name (index -> parameter name), whether
    it is named or passed as an Optimizer, so per-name settings apply: lr_mult 0 for
    the weight keeps it, the bias takes lr * mean gradient."""
    sym = mx.sym.FullyConnected(mx.sym.Variable('data'), num_hidden=3, name='fc')
    mod = mx.mod.Module(sym, ('data',), None, context=mx.cpu(0))
    mod.bind(data_shapes=[('data', (8, 4))])
    mod.init_params(mx.init.Uniform(0.5))
    params = {'learning_rate': 1.0, 'rescale_grad': 1.0 / 8}
    if how == 'name':
        mod.init_optimizer(optimizer='sgd', optimizer_params=params)
    else:
        mod.init_optimizer(optimizer=mx.optimizer.SGD(**params))
    assert mod._optimizer.idx2name == dict(enumerate(mod._exec_group.param_names))
    mod._optimizer.set_lr_mult({'fc_weight': 0.0})
    before = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    head = _rand((8, 3), 26)
    mod.forward(mx.io.DataBatch([nd.array(_rand((8, 4), 27))]), is_train=True)
    mod.backward([nd.array(head)])
    mod.update()
    after = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    np.testing.assert_array_equal(after['fc_weight'], before['fc_weight'])
    np.testing.assert_allclose(after['fc_bias'], before['fc_bias'] - head.mean(axis=0),
                               rtol=1e-5, atol=1e-6)


# --- mxnet: test_chain, test_chain_type_device (test_model_parallel.py) -------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_bind_with_arrays_on_two_contexts_chains_the_groups(dtype):
    """mxnet's test_chain: bind (not simple_bind) with argument and gradient arrays
    made on the contexts of their groups; out = (d1 + d2) * 3 + d3 runs dev1 on
    cpu(0) and dev2 on cpu(1), and the gradients land in the arrays given. Small
    integers keep every dtype exact."""
    d1, d2, d3 = (mx.sym.Variable('d%d' % i, dtype=dtype) for i in (1, 2, 3))
    with mx.AttrScope(ctx_group='dev1'):
        net = (d1 + d2) * dtype(3)
    with mx.AttrScope(ctx_group='dev2'):
        net = net + d3
    rng = np.random.RandomState(28)
    v1, v2, v3, head = (rng.randint(-4, 5, size=(4, 5)).astype(dtype) for _ in range(4))
    ctxs = [mx.cpu(0), mx.cpu(0), mx.cpu(1)]
    args = [nd.array(v, ctx=c, dtype=dtype) for v, c in zip((v1, v2, v3), ctxs)]
    grads = [nd.zeros((4, 5), ctx=c, dtype=dtype) for c in ctxs]
    exe = net.bind(mx.cpu(0), args=args, args_grad=grads,
                   group2ctx={'dev1': mx.cpu(0), 'dev2': mx.cpu(1)})
    exe.forward(is_train=True)
    exe.backward([nd.array(head, dtype=dtype)])
    out = exe.outputs[0]
    assert out.context == mx.cpu(1) and out.asnumpy().dtype == dtype
    np.testing.assert_array_equal(out.asnumpy(), (v1 + v2) * 3 + v3)
    for name, given, want in zip(('d1', 'd2', 'd3'), grads, (3 * head, 3 * head, head)):
        assert exe.grad_dict[name] is given
        np.testing.assert_array_equal(given.asnumpy(), want)


# --- mxnet: test_bucketing_save_load, train/test_bucketing.py -----------------------------
VOCAB, EMBED, HIDDEN, BUCKETS, EPOCHS = 8, 8, 12, [4, 8], 4


def _counting_sentences(n, seed):
    """Token t is followed by t % (VOCAB - 1) + 1 (tokens 1..VOCAB-1; 0 is padding)."""
    rng = np.random.RandomState(seed)
    sentences = []
    for _ in range(n):
        tok, sent = rng.randint(1, VOCAB), []
        for _ in range(rng.randint(3, max(BUCKETS) + 1)):
            sent.append(tok)
            tok = tok % (VOCAB - 1) + 1
        sentences.append(sent)
    return sentences


def _lstm_lm_sym_gen():
    stack = mx.rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(mx.rnn.LSTMCell(num_hidden=HIDDEN, prefix='lstm_l%d_' % i))

    def sym_gen(seq_len):
        embed = mx.sym.Embedding(mx.sym.Variable('data'), input_dim=VOCAB, output_dim=EMBED,
                                 name='embed')
        stack.reset()
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.FullyConnected(mx.sym.Reshape(outputs, shape=(-1, HIDDEN)),
                                     num_hidden=VOCAB, name='pred')
        label = mx.sym.Reshape(mx.sym.Variable('softmax_label'), shape=(-1,))
        return (mx.sym.SoftmaxOutput(pred, label, name='softmax', use_ignore=True,
                                     ignore_label=0), ('data',), ('softmax_label',))
    return sym_gen


def _fit(mod, epochs, seed):
    """fit on a fresh iterator over the same sentences; ``seed`` fixes its shuffles."""
    random.seed(seed)
    np.random.seed(seed)
    train = mx.rnn.BucketSentenceIter(_counting_sentences(96, 0), 16, buckets=BUCKETS,
                                      invalid_label=0)
    mod.fit(train, eval_metric=mx.metric.Perplexity(0), kvstore='device', optimizer='adam',
            optimizer_params={'learning_rate': 0.05, 'wd': 1e-5},
            initializer=mx.init.Xavier(factor_type='in', magnitude=2.34), num_epoch=epochs,
            batch_end_callback=mx.callback.Speedometer(16, 50))
    return train


def test_bucketing_lstm_trains_saves_loads_and_trains_on(tmp_path):
    """mxnet's bucketing LSTM language model flow: BucketingModule.fit on a
    BucketSentenceIter (Perplexity, kvstore 'device', Speedometer), save_checkpoint,
    BucketingModule.load with the sym_gen, then fit again. The task is learnable
    (each token fixes the next), so perplexity must fall far below the vocabulary
    size; the loaded module must predict what the saved one did in every bucket and
    train on exactly as the saved one does."""
    val = mx.rnn.BucketSentenceIter(_counting_sentences(48, 1), 8, buckets=BUCKETS,
                                    invalid_label=0)
    mod = mx.mod.BucketingModule(_lstm_lm_sym_gen(), default_bucket_key=val.default_bucket_key,
                                 context=mx.cpu())
    mod.bind(data_shapes=val.provide_data, label_shapes=val.provide_label)
    mx.random.seed(0)
    mod.init_params(mx.init.Xavier(factor_type='in', magnitude=2.34))
    before = dict(mod.score(val, mx.metric.Perplexity(0)))['perplexity']
    train = _fit(mod, EPOCHS, seed=0)
    assert sorted(mod._buckets) == BUCKETS
    trained = dict(mod.score(val, mx.metric.Perplexity(0)))['perplexity']
    assert before > 5.0 and trained < 2.0, (before, trained)    # 7 tokens to choose from

    prefix = str(tmp_path / 'lm')
    mod.save_checkpoint(prefix, EPOCHS)
    loaded = mx.mod.BucketingModule.load(prefix, EPOCHS, sym_gen=_lstm_lm_sym_gen(),
                                         default_bucket_key=train.default_bucket_key)
    loaded.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    want = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    got = {k: v.asnumpy() for k, v in loaded.get_params()[0].items()}
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    val.reset()
    keys = set()
    for batch in val:
        keys.add(batch.bucket_key)
        mod.forward(batch, is_train=False)
        loaded.forward(batch, is_train=False)
        np.testing.assert_allclose(loaded.get_outputs()[0].asnumpy(),
                                   mod.get_outputs()[0].asnumpy(), rtol=1e-6, atol=1e-7)
    assert sorted(keys) == BUCKETS
    # both train on: a fresh optimizer on each (the states were not saved), same batches
    mod.init_optimizer(optimizer='adam', optimizer_params={'learning_rate': 0.05, 'wd': 1e-5},
                       force_init=True)
    _fit(mod, 1, seed=3)
    _fit(loaded, 1, seed=3)
    on = {k: v.asnumpy() for k, v in loaded.get_params()[0].items()}
    assert any(not np.array_equal(on[k], got[k]) for k in got)
    for k, v in mod.get_params()[0].items():
        np.testing.assert_allclose(on[k], v.asnumpy(), rtol=1e-5, atol=1e-6, err_msg=k)
