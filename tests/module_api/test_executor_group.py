"""DataParallelExecutorGroup: mxnet 1.9.1 slicing, per-context executors, merging, sharing."""
import numpy as np
import pytest

import module_api as mx
import module_api.io  # noqa: F401
import module_api.metric  # noqa: F401
import module_api.ndarray  # noqa: F401
from runtime.executor_group import DataParallelExecutorGroup, split_input_slice

# (batch, workload) -> slices, as mxnet 1.9.1's executor_manager._split_input_slice gives them
# (values produced by mxnet 1.9.1 itself).
SLICE_TABLE = [
    (32, [1, 1], [(0, 16), (16, 32)]),
    (10, [1, 1, 1], [(0, 3), (3, 6), (6, 10)]),
    (5, [1, 1], [(0, 2), (2, 5)]),          # round(2.5) == 2: the remainder goes last
    (7, [1, 2, 1], [(0, 2), (2, 6), (6, 7)]),
    (3, [1, 2], [(0, 1), (1, 3)]),
    (4, [1, 2], [(0, 1), (1, 4)]),
    (32, [1, 2, 1], [(0, 8), (8, 24), (24, 32)]),
    (9, [1, 1, 1, 1], [(0, 2), (2, 4), (4, 6), (6, 9)]),
    (6, [1, 2], [(0, 2), (2, 6)]),
    (8, [3, 1], [(0, 6), (6, 8)]),
    (13, [1, 1, 1, 1], [(0, 3), (3, 6), (6, 9), (9, 13)]),
    (1, [1], [(0, 1)]),
]


@pytest.mark.parametrize("batch,workload,expected", SLICE_TABLE)
def test_split_input_slice_table(batch, workload, expected):
    got = [(s.start, s.stop) for s in split_input_slice(batch, workload)]
    assert got == expected


@pytest.mark.parametrize("batch,workload", [(2, [1, 1, 1]), (1, [1, 1]), (3, [1, 1, 1, 1])])
def test_split_input_slice_empty(batch, workload):
    with pytest.raises(ValueError, match='Too many slices. Some splits are empty.'):
        split_input_slice(batch, workload)


def _net():
    data = mx.sym.Variable('data')
    fc = mx.sym.FullyConnected(data, num_hidden=3, name='fc')
    return mx.sym.SoftmaxOutput(fc, name='softmax')


def _group(contexts, workload, batch=6, **kw):
    sym = _net()
    return DataParallelExecutorGroup(
        sym, contexts, workload, [('data', (batch, 4))], [('softmax_label', (batch,))],
        ['fc_weight', 'fc_bias'], kw.pop('for_training', True), kw.pop('inputs_need_grad', False),
        **kw)


def test_group_attributes_and_grad_req():
    grp = _group([mx.cpu(0), mx.cpu(1)], [1, 2], fixed_param_names=['fc_bias'])
    assert len(grp.execs) == 2 and grp.execs[0] is not grp.execs[1]
    assert grp.batch_size == 6
    assert [(s.start, s.stop) for s in grp.slices] == [(0, 2), (2, 6)]
    assert grp.grad_req == {'data': 'null', 'fc_weight': 'write', 'fc_bias': 'null',
                            'softmax_label': 'null'}
    assert len(grp.param_arrays) == 2 and len(grp.param_arrays[0]) == 2
    assert grp.grad_arrays[1] == [None, None]           # fixed: no gradient memory
    assert tuple(grp.execs[0].arg_dict['data'].shape) == (2, 4)
    assert tuple(grp.execs[1].arg_dict['data'].shape) == (4, 4)
    assert [d.name for d in grp.data_shapes] == ['data']
    assert isinstance(grp.shared_data_arrays, list) and len(grp.shared_data_arrays) == 2
    assert grp._total_exec_bytes > 0
    for exe in grp.execs:
        assert set(exe.arg_dict) == {'data', 'fc_weight', 'fc_bias', 'softmax_label'}


def test_inputs_need_grad_and_inference_grad_req():
    grp = _group([mx.cpu(0)], [1], inputs_need_grad=True)
    assert grp.grad_req['data'] == 'write'
    grp = _group([mx.cpu(0)], [1], for_training=False)
    assert set(grp.grad_req.values()) == {'null'} and grp.grad_arrays is None


def test_grad_req_dict_and_list():
    grp = _group([mx.cpu(0)], [1], grad_req={'fc_weight': 'add'})
    assert grp.grad_req['fc_weight'] == 'add' and grp.grad_req['fc_bias'] == 'write'
    grp = _group([mx.cpu(0)], [1], grad_req=['null', 'write', 'add', 'null'])
    assert grp.grad_req == {'data': 'null', 'fc_weight': 'write', 'fc_bias': 'add',
                            'softmax_label': 'null'}


def test_forward_backward_merge_equals_single_device():
    rng = np.random.RandomState(0)
    x = mx.ndarray.array(rng.randn(6, 4))
    y = mx.ndarray.array(rng.randint(0, 3, size=6))
    w = mx.ndarray.array(rng.randn(3, 4) * 0.3)
    b = mx.ndarray.array(rng.randn(3) * 0.1)
    batch = mx.io.DataBatch([x], [y])
    results = []
    for ctxs, wl in [([mx.cpu(0)], [1]), ([mx.cpu(0), mx.cpu(1), mx.cpu(2)], [1, 2, 1])]:
        grp = _group(ctxs, wl)
        grp.set_params({'fc_weight': w, 'fc_bias': b}, {})
        grp.forward(batch, is_train=True)
        grp.backward()
        out = grp.get_outputs()[0]
        assert tuple(out.shape) == (6, 3)
        assert grp.get_output_shapes() == [('softmax_output', (6, 3))]
        unmerged = grp.get_outputs(merge_multi_context=False)
        assert len(unmerged) == 1 and len(unmerged[0]) == len(ctxs)
        gsum = sum(g.clone() for g in grp.grad_arrays[0])
        results.append((out.asnumpy(), gsum.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-6)


def test_set_params_extra_and_get_params():
    grp = _group([mx.cpu(0), mx.cpu(1)], [1, 1])
    w = mx.ndarray.array(np.ones((3, 4)))
    with pytest.raises(ValueError, match='Find name "junk" that is not in the arguments'):
        grp.set_params({'fc_weight': w, 'junk': w}, {})
    grp.set_params({'fc_weight': w, 'junk': w}, {}, allow_extra=True)
    arg = {'fc_weight': mx.ndarray.zeros((3, 4)), 'fc_bias': mx.ndarray.zeros((3,))}
    grp.get_params(arg, {})
    np.testing.assert_allclose(arg['fc_weight'].asnumpy(), 1.0)


def test_set_params_refuses_a_stray_name_before_copying_anything():
    grp = _group([mx.cpu(0), mx.cpu(1)], [1, 1])
    before = [w.clone() for w in grp.param_arrays[0]]
    w = mx.ndarray.array(np.full((3, 4), 7.0))
    # 'fc_weight' comes first: a group that copied as it went would have changed it
    with pytest.raises(ValueError, match='Find name "junk"'):
        grp.set_params({'fc_weight': w, 'junk': w}, {})
    for kept, now in zip(before, grp.param_arrays[0]):
        np.testing.assert_array_equal(kept.numpy(), now.numpy())
    with pytest.raises(ValueError, match="Find name moving_mean that is not in the auxiliary"):
        grp.set_params({'fc_weight': w}, {'moving_mean': w})
    for kept, now in zip(before, grp.param_arrays[0]):
        np.testing.assert_array_equal(kept.numpy(), now.numpy())


def _state_group(contexts):
    data = mx.sym.Variable('data')
    state = mx.sym.Variable('state')
    out = mx.sym.FullyConnected(data, num_hidden=2, name='fc') + state
    return DataParallelExecutorGroup(
        out, contexts, [1] * len(contexts), [('data', (4, 3))], None, ['fc_weight', 'fc_bias'],
        False, False, state_names=['state'])


def test_set_states_per_device_lists_or_one_value():
    grp = _state_group([mx.cpu(0), mx.cpu(1)])
    first = mx.ndarray.array(np.full((2, 2), 1.5))
    second = mx.ndarray.array(np.full((2, 2), -2.0))
    grp.set_states(states=[[first, second]])
    got = grp.get_states(merge_multi_context=False)
    np.testing.assert_array_equal(got[0][0].asnumpy(), np.full((2, 2), 1.5))
    np.testing.assert_array_equal(got[0][1].asnumpy(), np.full((2, 2), -2.0))
    grp.set_states(value=3)
    for array in grp.get_states(merge_multi_context=False)[0]:
        np.testing.assert_array_equal(array.asnumpy(), np.full((2, 2), 3.0))
    with pytest.raises(AssertionError, match="Only one of states & value"):
        grp.set_states(states=[[first, second]], value=1)
    with pytest.raises(AssertionError, match="At least one of states & value"):
        grp.set_states()
    # one array where a list per device is due: said, not read row by row
    with pytest.raises(ValueError, match=r"states\[0\] \(state\) must be a list with one "
                                         r"array per device \(2\)"):
        grp.set_states(states=[first])
    with pytest.raises(AssertionError, match="not supported for get_states"):
        grp.get_states()


def test_shared_group_shares_parameter_tensors():
    g1 = _group([mx.cpu(0), mx.cpu(1)], [1, 1], batch=8)
    g2 = _group([mx.cpu(0), mx.cpu(1)], [1, 1], batch=4, shared_group=g1)
    for a, b in zip(g1.param_arrays, g2.param_arrays):
        for x, y in zip(a, b):
            assert x is y
    assert g2.shared_data_arrays is g1.shared_data_arrays
    # the smaller bucket's data is a view of the larger one's
    d1 = g1.execs[0].arg_dict['data']
    d2 = g2.execs[0].arg_dict['data']
    assert d2.data_ptr() == d1.data_ptr()


def test_reshape_recomputes_slices_and_shares_params():
    grp = _group([mx.cpu(0), mx.cpu(1)], [1, 1], batch=6)
    before = [list(p) for p in grp.param_arrays]
    D = mx.io.DataDesc
    grp.reshape([D('data', (5, 4))], [D('softmax_label', (5,))])
    assert grp.batch_size == 5
    assert [(s.start, s.stop) for s in grp.slices] == [(0, 2), (2, 5)]
    for a, b in zip(before, grp.param_arrays):
        assert all(x is y for x, y in zip(a, b))
    with pytest.raises(ValueError, match='Too many slices'):
        grp.reshape([D('data', (1, 4))], [D('softmax_label', (1,))])


def test_update_metric_slices_labels():
    grp = _group([mx.cpu(0), mx.cpu(1)], [1, 2])
    grp.set_params({'fc_weight': mx.ndarray.zeros((3, 4)), 'fc_bias': mx.ndarray.array([0, 0, 1])}, {})
    x = mx.ndarray.array(np.random.randn(6, 4))
    y = mx.ndarray.array([2, 2, 2, 0, 2, 1])
    grp.forward(mx.io.DataBatch([x], [y]), is_train=False)
    acc = mx.metric.Accuracy()
    grp.update_metric(acc, [y])
    assert acc.get() == ('accuracy', pytest.approx(4 / 6))


def test_states():
    data = mx.sym.Variable('data')
    state = mx.sym.Variable('state', shape=(1, 3))
    out = mx.sym.broadcast_add(mx.sym.FullyConnected(data, num_hidden=3, name='fc'), state)
    grp = DataParallelExecutorGroup(out, [mx.cpu(0), mx.cpu(1)], [1, 1], [('data', (4, 2))],
                                    None, ['fc_weight', 'fc_bias'], False, False,
                                    state_names=['state'])
    grp.set_states(value=1.5)
    states = grp.get_states(merge_multi_context=False)
    assert len(states) == 1 and len(states[0]) == 2
    assert float(states[0][1].sum()) == pytest.approx(1.5 * 3)
    with pytest.raises(AssertionError):
        grp.get_states()
