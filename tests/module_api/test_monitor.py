"""Monitor: mxnet 1.9.1's statistic names, count and values (its module unit test
test_monitor, values as mxnet 1.9.1 prints them)."""
import logging
from functools import reduce

import pytest

import module_api as mx
import module_api.io  # noqa: F401
import module_api.metric  # noqa: F401
import module_api.module  # noqa: F401
import module_api.monitor  # noqa: F401
import module_api.ndarray  # noqa: F401

nd = mx.ndarray

# mxnet 1.9.1's output for this network (the two gradients that mxnet leaves
# uncomputed -- fc_0's data and the label -- are omitted: mxnet prints stale memory there)
MXNET_STATS = {
    'act_0_backward_output': 0.009362806, 'act_0_output': 0.59507716,
    'act_1_backward_output': 0.088298395, 'act_1_output': 0.7621468, 'data': 0.075,
    'fc_0_backward_output1': 0.00070221035, 'fc_0_backward_output2': 0.009362806,
    'fc_0_bias': 0.35, 'fc_0_output': 0.385, 'fc_0_weight': 0.22500001,
    'fc_1_backward_output0': 0.038860314, 'fc_1_backward_output1': 0.05254436,
    'fc_1_backward_output2': 0.088298395, 'fc_1_bias': 0.6, 'fc_1_output': 1.1654137,
    'fc_1_weight': 0.475, 'softmax_backward_output0': 0.4792183, 'softmax_label': 0.5,
    'softmax_output': 0.7621468,
}


def _setup(pattern='.*', interval=1, contexts=(mx.cpu(),)):
    data = nd.array([[0.05, .10]])
    label = nd.array([[.01, 0.99]])
    train_data = mx.io.NDArrayIter(data, label, batch_size=1)
    x = mx.sym.Variable('data')
    x = mx.sym.FullyConnected(name='fc_0', data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_0", data=x, act_type='sigmoid')
    x = mx.sym.FullyConnected(name='fc_1', data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_1", data=x, act_type='sigmoid')
    x = mx.sym.LinearRegressionOutput(data=x, name='softmax', grad_scale=2)

    def mean_abs(x):
        sum_abs = nd.sum(nd.abs(x))
        return nd.divide(sum_abs, reduce(lambda x, y: x * y, x.shape))
    mon = mx.monitor.Monitor(interval, stat_func=mean_abs, pattern=pattern, sort=True)
    mod = mx.module.Module(x, context=list(contexts))
    mod.bind(train_data.provide_data, label_shapes=train_data.provide_label, for_training=True)
    mod.install_monitor(mon)
    arg_params = {'fc_0_weight': nd.array([[.15, .20], [.25, .30]]),
                  'fc_0_bias': nd.array([.35, .35]),
                  'fc_1_weight': nd.array([[.40, .45], [.50, .55]]),
                  'fc_1_bias': nd.array([.60, .60])}
    mod.init_params(arg_params=arg_params)
    return mon, mod, mx.io.DataBatch([data], [label])


def test_monitor_names_count_and_values():
    mon, mod, batch = _setup()
    mon.tic()
    mod.forward_backward(batch)
    res = mon.toc()
    keys = ['act_0', 'act_1', 'data', 'fc_0', 'fc_1', 'softmax']
    counts = [0] * 6
    assert len(res) == 21
    for n, k, v in res:
        for idx, key in enumerate(keys):
            if k.startswith(key):
                counts[idx] += 1
                break
    assert counts == [2, 2, 1, 6, 6, 4]
    names = [k for _, k, _ in res]
    assert names == sorted(names)
    got = {k: float(v.strip()) for _, k, v in res}
    for k, v in MXNET_STATS.items():
        assert got[k] == pytest.approx(v, rel=1e-5), k
    assert all(n == 1 for n, _, _ in res)


def test_monitor_pattern_interval_and_print(caplog):
    mon, mod, batch = _setup(pattern='.*weight|.*output$', interval=2)
    seen = []
    for _ in range(3):
        mon.tic()
        mod.forward_backward(batch)
        seen.append(mon.toc())
    assert [len(s) for s in seen] == [9, 0, 9]
    assert {k for _, k, _ in seen[0]} == {'act_0_output', 'act_1_output', 'fc_0_output',
                                          'fc_1_output', 'softmax_output', 'fc_0_weight',
                                          'fc_1_weight', 'act_0_backward_output',
                                          'act_1_backward_output'}
    mon.tic()
    mod.forward_backward(batch)
    with caplog.at_level(logging.INFO):
        mon.toc_print()       # step 4 is not collected (interval 2)
        mon.tic()
        mod.forward_backward(batch)
        mon.toc_print()
    assert 'fc_0_weight' in caplog.text and 'Batch:       5' in caplog.text


def test_monitor_default_stat_and_multi_device():
    data = mx.sym.Variable('data')
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=3, name='fc'),
                               name='softmax')
    mod = mx.module.Module(net, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind([('data', (4, 2))], [('softmax_label', (4,))])
    mod.init_params()
    mon = mx.monitor.Monitor(1, pattern='fc_output')
    mod.install_monitor(mon)
    mon.tic()
    mod.forward(mx.io.DataBatch([nd.ones((4, 2))], [nd.zeros((4,))]), is_train=False)
    res = mon.toc()
    assert [k for _, k, _ in res] == ['fc_output', 'fc_output']      # one per executor
    # monitors follow the executors a reshape creates
    mon.tic()
    mod.forward(mx.io.DataBatch([nd.ones((6, 2))], [nd.zeros((6,))]), is_train=False)
    assert [k for _, k, _ in mon.toc()] == ['fc_output', 'fc_output']
