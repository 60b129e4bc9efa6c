"""mx.rnn cells, unrolled and run through simple_bind / forward / backward,
against torch implementations of the same cells with the same weights
(outputs and every gradient). Parameter and node names are mxnet 1.9.1's."""
import json

import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from compiler.ops.rnn import unpack_params
from module_api import rnn
from runtime.context import cpu

RTOL, ATOL = 1e-4, 1e-5
N, T, C, H = 2, 3, 5, 4


# -- helpers ------------------------------------------------------------------------------

def _run(out, seed=0, is_train=True, **shapes):
    """Bind ``out``, fill every argument with random values, run forward and
    backward with random head gradients."""
    exe = out.simple_bind(cpu(), **shapes)
    g = torch.Generator().manual_seed(seed)
    vals = {}
    for name in out.list_arguments():
        v = torch.randn(tuple(exe.arg_dict[name].shape), generator=g) * 0.5
        exe.arg_dict[name][:] = v
        vals[name] = v
    outs = [o.clone() for o in exe.forward(is_train=is_train)]
    ogs = [torch.randn(tuple(o.shape), generator=g) for o in outs]
    grads = None
    if is_train:
        exe.backward(ogs)
        grads = {k: exe.grad_dict[k].clone() for k in out.list_arguments()}
    return vals, outs, ogs, grads


def _check(run, torch_fn):
    """Compare a ``_run`` result with ``torch_fn(leaves) -> list of outputs``."""
    vals, outs, ogs, grads = run
    leaves = {k: v.clone().requires_grad_(True) for k, v in vals.items()}
    ref = torch_fn(leaves)
    assert len(ref) == len(outs)
    for o, r in zip(outs, ref):
        torch.testing.assert_close(o, r.detach(), rtol=RTOL, atol=ATOL)
    total = sum((r * og).sum() for r, og in zip(ref, ogs))
    names = list(leaves)
    tg = torch.autograd.grad(total, [leaves[k] for k in names], allow_unused=True)
    for k, t in zip(names, tg):
        t = torch.zeros_like(vals[k]) if t is None else t
        torch.testing.assert_close(grads[k], t, rtol=RTOL, atol=ATOL, msg=f"gradient of {k}")


def _steps(x, layout):
    return list(x.unbind(layout.find('T')))


def _zeros(x):
    return torch.zeros(x.shape[0], H)


def t_rnn(p, prefix, act):
    def step(x, states):
        fn = torch.rnn_tanh_cell if act == 'tanh' else torch.rnn_relu_cell
        h = fn(x, states[0], p[prefix + 'i2h_weight'], p[prefix + 'h2h_weight'],
               p[prefix + 'i2h_bias'], p[prefix + 'h2h_bias'])
        return h, [h]
    return step


def t_lstm(p, prefix):
    def step(x, states):
        h, c = torch.lstm_cell(x, tuple(states), p[prefix + 'i2h_weight'],
                               p[prefix + 'h2h_weight'], p[prefix + 'i2h_bias'],
                               p[prefix + 'h2h_bias'])
        return h, [h, c]
    return step


def t_gru(p, prefix):
    def step(x, states):
        h = torch.gru_cell(x, states[0], p[prefix + 'i2h_weight'], p[prefix + 'h2h_weight'],
                           p[prefix + 'i2h_bias'], p[prefix + 'h2h_bias'])
        return h, [h]
    return step


def t_unroll(step, xs, states):
    outs = []
    for x in xs:
        o, states = step(x, states)
        outs.append(o)
    return outs, states


# -- single cells ---------------------------------------------------------------------------

@pytest.mark.parametrize("act", ["tanh", "relu"])
def test_rnn_cell_unrolled_matches_torch(act):
    cell = rnn.RNNCell(H, activation=act, prefix='rnn_')
    outs, states = cell.unroll(T, sym.Variable('data'), layout='NTC', merge_outputs=False)
    assert isinstance(outs, list) and len(outs) == T
    assert [o.name for o in outs] == ['rnn_t0_out', 'rnn_t1_out', 'rnn_t2_out']
    run = _run(sym.Group(outs), data=(N, T, C))

    def ref(p):
        xs = _steps(p['data'], 'NTC')
        o, _ = t_unroll(t_rnn(p, 'rnn_', act), xs, [_zeros(xs[0])])
        return o
    _check(run, ref)


def test_lstm_cell_merged_ntc_with_states_matches_torch():
    cell = rnn.LSTMCell(H, prefix='lstm_')
    outs, states = cell.unroll(T, sym.Variable('data'), layout='NTC', merge_outputs=True)
    assert isinstance(outs, sym.Symbol)
    assert [s.name for s in states] == ['lstm_t2_out', 'lstm_t2_state']
    run = _run(sym.Group([outs] + states), data=(N, T, C))
    assert tuple(run[1][0].shape) == (N, T, H)

    def ref(p):
        xs = _steps(p['data'], 'NTC')
        o, st = t_unroll(t_lstm(p, 'lstm_'), xs, [_zeros(xs[0]), _zeros(xs[0])])
        return [torch.stack(o, 1)] + st
    _check(run, ref)


def test_gru_cell_merged_tnc_matches_torch():
    cell = rnn.GRUCell(H, prefix='gru_')
    outs, states = cell.unroll(T, sym.Variable('data'), layout='TNC', merge_outputs=True)
    run = _run(sym.Group([outs] + states), data=(T, N, C))
    assert tuple(run[1][0].shape) == (T, N, H)

    def ref(p):
        xs = _steps(p['data'], 'TNC')
        o, st = t_unroll(t_gru(p, 'gru_'), xs, [_zeros(xs[0])])
        return [torch.stack(o, 0)] + st
    _check(run, ref)


def test_lstm_given_begin_states_and_list_inputs():
    cell = rnn.LSTMCell(H, prefix='lstm_')
    begin = cell.begin_state(func=sym.Variable)
    assert [b.name for b in begin] == ['lstm_begin_state_0', 'lstm_begin_state_1']
    assert begin[0].attr('__layout__') == 'NC'
    xs = [sym.Variable('x%d' % i) for i in range(T)]
    outs, states = cell.unroll(T, xs, begin_state=begin, merge_outputs=None)
    assert isinstance(outs, list)          # list in, list out
    shapes = {f'x{i}': (N, C) for i in range(T)}
    shapes.update(lstm_begin_state_0=(N, H), lstm_begin_state_1=(N, H))
    run = _run(sym.Group(outs + states), **shapes)

    def ref(p):
        o, st = t_unroll(t_lstm(p, 'lstm_'), [p[f'x{i}'] for i in range(T)],
                         [p['lstm_begin_state_0'], p['lstm_begin_state_1']])
        return o + st
    _check(run, ref)


def test_lstm_step_call_names():
    cell = rnn.LSTMCell(H, prefix='lstm_')
    out, states = cell(sym.Variable('data'), cell.begin_state())
    assert out.name == 'lstm_t0_out' and [s.name for s in states] == ['lstm_t0_out',
                                                                       'lstm_t0_state']
    out, _ = cell(sym.Variable('data'), states)
    assert out.name == 'lstm_t1_out'
    internals = out.get_internals().list_outputs()
    assert 'lstm_t1_i2h_output' in internals and 'lstm_t1_slice_output3' in internals


def test_begin_state_shapes_and_state_info():
    assert rnn.LSTMCell(H).state_shape == [(0, H), (0, H)]
    assert rnn.GRUCell(H).state_info == [{'shape': (0, H), '__layout__': 'NC'}]
    f = rnn.FusedRNNCell(H, num_layers=3, mode='lstm', bidirectional=True)
    assert f.state_shape == [(6, 0, H), (6, 0, H)]
    assert rnn.FusedRNNCell(H, num_layers=2, mode='gru').state_shape == [(2, 0, H)]
    begin = rnn.LSTMCell(H, prefix='p_').begin_state()
    assert [b.name for b in begin] == ['p_begin_state_0', 'p_begin_state_1']
    assert [b.infer_shape_partial()[1][0] for b in begin] == [(0, H), (0, H)]
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.LSTMCell(H, prefix='l0_'))
    stack.add(rnn.GRUCell(H, prefix='l1_'))
    assert [b.name for b in stack.begin_state()] == ['l0_begin_state_0', 'l0_begin_state_1',
                                                     'l1_begin_state_0']
    # begin_state(func=...) forwards kwargs; each call numbers on
    cell = rnn.GRUCell(H, prefix='g_')
    cell.begin_state()
    assert cell.begin_state(func=sym.Variable)[0].name == 'g_begin_state_1'
    cell.reset()
    assert cell.begin_state(func=sym.Variable)[0].name == 'g_begin_state_0'


def test_parameter_names_match_mxnet():
    # mxnet 1.9.1: list_arguments of the unrolled cells
    stack = rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(rnn.LSTMCell(H, prefix='lstm_l%d_' % i))
    outs, _ = stack.unroll(T, sym.Variable('data'), merge_outputs=True)
    assert outs.list_arguments() == [
        'data', 'lstm_l0_i2h_weight', 'lstm_l0_i2h_bias', 'lstm_l0_h2h_weight',
        'lstm_l0_h2h_bias', 'lstm_l1_i2h_weight', 'lstm_l1_i2h_bias', 'lstm_l1_h2h_weight',
        'lstm_l1_h2h_bias']
    assert sorted(stack.params._params) == sorted(outs.list_arguments()[1:])
    bi = rnn.BidirectionalCell(rnn.LSTMCell(H, prefix='l_'), rnn.GRUCell(H, prefix='r_'))
    outs, states = bi.unroll(T, sym.Variable('data'))
    assert sym.Group(outs).list_outputs() == ['bi_t0_output', 'bi_t1_output', 'bi_t2_output']
    assert [[s.name for s in st] for st in states] == [['l_t2_out', 'l_t2_state'],
                                                       ['r_t2_out']]
    res = rnn.ResidualCell(rnn.GRUCell(5, prefix='rgru_'))
    outs, _ = res.unroll(T, sym.Variable('data'))
    assert sym.Group(outs).list_outputs() == ['rgru_t0_out_plus_residual_output',
                                              'rgru_t1_out_plus_residual_output',
                                              'rgru_t2_out_plus_residual_output']
    fused = rnn.FusedRNNCell(H, num_layers=2, mode='lstm', bidirectional=True,
                             get_next_state=True, prefix='lstm_')
    outs, states = fused.unroll(T, sym.Variable('data'), layout='TNC')
    assert outs.list_arguments() == ['data', 'lstm_parameters']
    assert [s.name for s in states] == ['lstm_rnn', 'lstm_rnn']
    assert states[0].list_outputs() == ['lstm_rnn_state_output']
    assert states[1].list_outputs() == ['lstm_rnn_statecell_output']
    assert [b.name for b in fused.unfuse().begin_state()] == [
        'lstm_l0_begin_state_0', 'lstm_l0_begin_state_1', 'lstm_r0_begin_state_0',
        'lstm_r0_begin_state_1', 'lstm_l1_begin_state_0', 'lstm_l1_begin_state_1',
        'lstm_r1_begin_state_0', 'lstm_r1_begin_state_1']


# -- composite cells --------------------------------------------------------------------------

def test_sequential_cell_matches_torch():
    stack = rnn.SequentialRNNCell()
    stack.add(rnn.LSTMCell(H, prefix='l0_'))
    stack.add(rnn.GRUCell(H, prefix='l1_'))
    outs, states = stack.unroll(T, sym.Variable('data'), layout='NTC', merge_outputs=False)
    assert len(outs) == T and len(states) == 3
    run = _run(sym.Group(outs + states), data=(N, T, C))

    def ref(p):
        xs = _steps(p['data'], 'NTC')
        o, s0 = t_unroll(t_lstm(p, 'l0_'), xs, [_zeros(xs[0]), _zeros(xs[0])])
        o, s1 = t_unroll(t_gru(p, 'l1_'), o, [_zeros(xs[0])])
        return o + s0 + s1
    _check(run, ref)


@pytest.mark.parametrize("merge", [True, False])  # False once closed a cycle through a group
def test_bidirectional_cell_matches_torch(merge):
    bi = rnn.BidirectionalCell(rnn.LSTMCell(H, prefix='l_'), rnn.GRUCell(H, prefix='r_'))
    outs, states = bi.unroll(T, sym.Variable('data'), layout='TNC', merge_outputs=merge)
    heads = ([outs] if merge else outs) + states[0] + states[1]
    run = _run(sym.Group(heads), data=(T, N, C))

    def ref(p):
        xs = _steps(p['data'], 'TNC')
        lo, ls = t_unroll(t_lstm(p, 'l_'), xs, [_zeros(xs[0]), _zeros(xs[0])])
        ro, rs = t_unroll(t_gru(p, 'r_'), xs[::-1], [_zeros(xs[0])])
        o = [torch.cat([a, b], 1) for a, b in zip(lo, ro[::-1])]
        return ([torch.stack(o, 0)] if merge else o) + ls + rs
    _check(run, ref)


@pytest.mark.parametrize("merge", [True, False])
def test_residual_cell_matches_torch(merge):
    cell = rnn.ResidualCell(rnn.GRUCell(C, prefix='rgru_'))
    outs, states = cell.unroll(T, sym.Variable('data'), layout='NTC', merge_outputs=merge)
    assert isinstance(outs, sym.Symbol) == merge
    run = _run(sym.Group(([outs] if merge else outs) + states), data=(N, T, C))

    def ref(p):
        xs = _steps(p['data'], 'NTC')
        o, st = t_unroll(t_gru(p, 'rgru_'), xs, [torch.zeros(N, C)])
        o = [a + x for a, x in zip(o, xs)]
        return ([torch.stack(o, 1)] if merge else o) + st
    _check(run, ref)


def test_dropout_cell():
    cell = rnn.DropoutCell(0.5)
    assert cell.state_info == [] and cell.begin_state() == []
    outs, states = cell.unroll(T, sym.Variable('data'), merge_outputs=True)
    assert states == [] and isinstance(outs, sym.Symbol)
    vals, o, ogs, grads = _run(outs, data=(N, T, 64))
    x = vals['data']
    kept = torch.ne(o[0], 0)      # a bool mask (NDArray's `!=` gives mxnet's 0/1)
    torch.testing.assert_close(o[0][kept], 2 * x[kept])
    assert 0.25 < kept.float().mean() < 0.75
    torch.testing.assert_close(grads['data'], ogs[0] * kept.float() * 2)
    _, o, _, _ = _run(outs, is_train=False, data=(N, T, 64))
    assert torch.equal(o[0], vals['data'])
    outs, _ = rnn.DropoutCell(0.5).unroll(T, [sym.Variable('x%d' % i) for i in range(T)],
                                          merge_outputs=False)
    assert isinstance(outs, list) and len(outs) == T
    with pytest.raises(AssertionError):
        rnn.DropoutCell("0.5")


def test_zoneout_cell():
    base = rnn.RNNCell(H, prefix='z_')
    cell = rnn.ZoneoutCell(base, zoneout_outputs=0.5, zoneout_states=0.5)
    with pytest.raises(AssertionError, match="modifier"):
        base.begin_state()
    outs, states = cell.unroll(T, sym.Variable('data'), merge_outputs=False)
    heads = sym.Group(outs)
    # inference: zoneout is off, so the cell is its base cell
    vals, o, _, _ = _run(heads, is_train=False, data=(N, T, C))
    xs = _steps(vals['data'], 'NTC')
    ref, _ = t_unroll(t_rnn(vals, 'z_', 'tanh'), xs, [_zeros(xs[0])])
    for a, b in zip(o, ref):
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)
    # training: every output element is the new output or the previous one
    _, o, _, grads = _run(heads, data=(N, T, C))
    assert all(torch.isfinite(g).all() for g in grads.values())
    with pytest.raises(AssertionError, match="FusedRNNCell"):
        rnn.ZoneoutCell(rnn.FusedRNNCell(H))
    with pytest.raises(AssertionError, match="Bidirectional"):
        rnn.ZoneoutCell(rnn.BidirectionalCell(rnn.GRUCell(H), rnn.GRUCell(H, prefix='q_')))


def test_zoneout_training_picks_new_or_previous():
    cell = rnn.ZoneoutCell(rnn.RNNCell(H, prefix='z_'), zoneout_outputs=0.5)
    outs, _ = cell.unroll(2, sym.Variable('data'), merge_outputs=False)
    base_out = outs[1].get_internals()['z_t1_out_output']
    prev = outs[0]
    _, o, _, _ = _run(sym.Group([outs[1], base_out, prev]), data=(N, 2, C))
    new_or_old = torch.eq(o[0], o[1]) | torch.eq(o[0], o[2])
    assert new_or_old.all()


# -- FusedRNNCell -------------------------------------------------------------------------------

def _torch_rnn(mode, num_layers, bidirectional, input_size, p):
    """A torch.nn RNN module holding the weights of the packed vector ``p``."""
    klass = {'lstm': torch.nn.LSTM, 'gru': torch.nn.GRU}.get(mode, torch.nn.RNN)
    kw = {} if klass is not torch.nn.RNN else {'nonlinearity': mode[4:]}
    net = klass(input_size, H, num_layers, bidirectional=bidirectional, **kw)
    w = unpack_params(p, input_size, H, num_layers, mode, bidirectional)
    with torch.no_grad():
        for (kind, layer, d), t in w.items():
            name = {'wx': 'weight_ih', 'wh': 'weight_hh', 'bx': 'bias_ih', 'bh': 'bias_hh'}[kind]
            getattr(net, f'{name}_l{layer}' + ('_reverse' if d else '')).copy_(t)
    return net


def test_fused_lstm_cell_ntc_matches_torch_lstm():
    cell = rnn.FusedRNNCell(H, num_layers=2, mode='lstm', bidirectional=True,
                            get_next_state=True, prefix='lstm_')
    outs, states = cell.unroll(T, sym.Variable('data'), layout='NTC', merge_outputs=True)
    run = _run(sym.Group([outs] + states), data=(N, T, C))
    assert tuple(run[1][0].shape) == (N, T, 2 * H)

    def ref(p):
        net = _torch_rnn('lstm', 2, True, C, p['lstm_parameters'].detach())
        # route the parameter gradient through the packed vector
        w = unpack_params(p['lstm_parameters'], C, H, 2, 'lstm', True)
        params = {}
        for (kind, layer, d), t in w.items():
            name = {'wx': 'weight_ih', 'wh': 'weight_hh', 'bx': 'bias_ih', 'bh': 'bias_hh'}[kind]
            params[f'{name}_l{layer}' + ('_reverse' if d else '')] = t
        y, (hy, cy) = torch.func.functional_call(net, params, (p['data'].transpose(0, 1),))
        return [y.transpose(0, 1), hy, cy]
    _check(run, ref)


def test_fused_gru_matches_its_unfused_cells():
    fused = rnn.FusedRNNCell(H, num_layers=2, mode='gru', prefix='gru_')
    f_out, _ = fused.unroll(T, sym.Variable('data'), layout='TNC', merge_outputs=True)
    vals, f_o, _, _ = _run(f_out, is_train=False, data=(T, N, C))
    unfused = fused.unfuse()
    u_out, _ = unfused.unroll(T, sym.Variable('data'), layout='TNC', merge_outputs=True)
    # fused vector -> per-gate arrays -> the unfused cells' i2h / h2h weights, and back
    per_cell = unfused.pack_weights(fused.unpack_weights({'gru_parameters':
                                                          vals['gru_parameters']}))
    back = fused.pack_weights(unfused.unpack_weights(per_cell))
    assert list(back) == ['gru_parameters']
    torch.testing.assert_close(back['gru_parameters'], vals['gru_parameters'])
    assert sorted(per_cell) == sorted(u_out.list_arguments()[1:])
    exe = u_out.simple_bind(cpu(), grad_req='null', data=(T, N, C))
    exe.arg_dict['data'][:] = vals['data']
    for k, v in per_cell.items():
        exe.arg_dict[k][:] = v
    torch.testing.assert_close(exe.forward()[0], f_o[0], rtol=RTOL, atol=ATOL)


def test_fused_pack_unpack_round_trip_and_names():
    cell = rnn.FusedRNNCell(3, num_layers=2, mode='lstm', bidirectional=True, prefix='lstm_')
    outs, _ = cell.unroll(2, sym.Variable('data'), layout='TNC')
    size = outs.infer_shape(data=(2, 1, 5))[0][1][0]
    assert size == 4 * 2 * (3 * (5 + 3) + 2 * 3) + 4 * 2 * (3 * (6 + 3) + 2 * 3)
    packed = mx.nd.array(torch.arange(size, dtype=torch.float32))
    args = cell.unpack_weights({'lstm_parameters': packed, 'other': packed})
    assert 'lstm_parameters' not in args and 'other' in args
    assert args['lstm_l0_i2h_i_weight'].shape == (3, 5)
    assert args['lstm_l1_i2h_o_weight'].shape == (3, 6)
    assert args['lstm_r1_h2h_f_bias'].shape == (3,)
    assert torch.equal(args['lstm_l0_i2h_i_weight'].reshape(-1), torch.arange(15.0))
    assert torch.equal(args['lstm_l0_i2h_f_weight'].reshape(-1), torch.arange(15.0, 30.0))
    assert len([k for k in args if k.startswith('lstm_')]) == 2 * 2 * 2 * 4 * 2
    back = cell.pack_weights(args)
    assert torch.equal(back['lstm_parameters'], packed) and 'other' in back
    # the unpacked names are the unfused cells' per-gate names
    unfused = cell.unfuse()
    assert sorted(unfused.unpack_weights(unfused.pack_weights(args))) == sorted(args)


def test_fused_initializer_sets_forget_bias():
    cell = rnn.FusedRNNCell(H, num_layers=1, mode='lstm', forget_bias=2.5, prefix='lstm_')
    outs, _ = cell.unroll(T, sym.Variable('data'), layout='TNC')
    size = outs.infer_shape(data=(T, N, C))[0][1][0]
    arr = mx.nd.zeros((size,))
    attrs = outs.attr_dict()['lstm_parameters']
    mx.init.Xavier()(mx.init.InitDesc('lstm_parameters', attrs), arr)
    args = cell.unpack_weights({'lstm_parameters': arr})
    assert torch.equal(args['lstm_l0_i2h_f_bias'], torch.full((H,), 2.5))
    assert torch.equal(args['lstm_l0_h2h_i_bias'], torch.zeros(H))
    assert args['lstm_l0_i2h_c_weight'].abs().sum() > 0


def test_lstm_cell_forget_bias_initializer():
    cell = rnn.LSTMCell(H, prefix='lstm_', forget_bias=3.0)
    outs, _ = cell.unroll(T, sym.Variable('data'))
    attrs = sym.Group(outs).attr_dict()['lstm_i2h_bias']
    arr = mx.nd.ones((4 * H,))
    mx.init.Uniform()(mx.init.InitDesc('lstm_i2h_bias', attrs), arr)
    expect = torch.zeros(4 * H)
    expect[H:2 * H] = 3.0
    assert torch.equal(arr, expect)


def test_rnn_params_sharing():
    params = rnn.RNNParams('shared_')
    a = rnn.GRUCell(H, prefix='a_', params=params)
    b = rnn.GRUCell(H, prefix='b_', params=params)
    oa, _ = a.unroll(2, sym.Variable('data'), merge_outputs=True)
    ob, _ = b.unroll(2, oa, merge_outputs=True)
    assert ob.list_arguments() == ['data', 'shared_i2h_weight', 'shared_i2h_bias',
                                   'shared_h2h_weight', 'shared_h2h_bias']
    assert params.get('i2h_weight') is params.get('i2h_weight')


# -- mxnet 1.9.1's names, orders and layouts (recorded from mxnet in its venv) ------------------

def test_automatic_node_names_follow_mxnet_creation_order():
    # nodes without an explicit name are numbered in the order the cells make them;
    # saved symbols and checkpoints of unrolled cells rely on mxnet's numbering
    with mx.name.NameManager():
        stack = rnn.SequentialRNNCell()
        stack.add(rnn.LSTMCell(3, prefix='l0_'))
        stack.add(rnn.DropoutCell(0.5, prefix='d_'))
        stack.add(rnn.GRUCell(3, prefix='g_'))
        outs, states = stack.unroll(2, sym.Variable('data'), merge_outputs=True,
                                    begin_state=stack.begin_state(func=sym.Variable))
        names = sym.Group([outs] + states).get_internals().list_outputs()
    assert [n for n in names if not n.startswith(('l0_', 'g_', 'data'))] == [
        'split0_output0', 'split0_output1', '_plus0_output', '_mul0_output', '_mul1_output',
        'activation0_output', 'dropout0_output', '_plus3_output', '_rminusscalar0_output',
        '_plus2_output', '_mul4_output', '_plus4_output', '_mul5_output', '_mul6_output',
        'expand_dims0_output', '_plus1_output', '_mul2_output', '_mul3_output',
        'activation1_output', 'dropout1_output', '_plus6_output', '_rminusscalar1_output',
        '_plus5_output', '_mul7_output', '_plus7_output', '_mul8_output', '_mul9_output',
        'expand_dims1_output', 'concat0_output']


def test_bidirectional_mixed_outputs_are_split_into_steps():
    # the fused forward cell gives one Symbol, the backward cell a list: with
    # merge_outputs=None mxnet slices the Symbol and concatenates step by step
    with mx.name.NameManager():
        bi = rnn.BidirectionalCell(rnn.FusedRNNCell(3, prefix='f_'), rnn.LSTMCell(3, prefix='b_'))
        outs, _ = bi.unroll(2, sym.Variable('data'), layout='TNC',
                            begin_state=bi.begin_state(func=sym.Variable))
    assert isinstance(outs, list) and sym.Group(outs).list_outputs() == ['bi_t0_output',
                                                                        'bi_t1_output']
    internals = sym.Group(outs).get_internals().list_outputs()
    assert [n for n in internals if not n.startswith(('b_', 'f_', 'data'))] == [
        'split0_output0', 'split0_output1', 'expand_dims0_output', 'expand_dims1_output',
        'concat0_output', 'slicechannel0_output0', 'slicechannel0_output1', '_plus0_output',
        '_mul0_output', '_mul1_output', 'activation0_output', '_plus1_output', '_mul2_output',
        '_mul3_output', 'activation1_output', 'bi_t0_output', 'bi_t1_output']


def test_gate_unpack_and_pack_keep_mxnets_names_order_and_rows():
    cell = rnn.LSTMCell(2, prefix='p_')
    shapes = {'p_i2h_weight': (8, 3), 'p_i2h_bias': (8,), 'p_h2h_weight': (8, 2),
              'p_h2h_bias': (8,), 'z': (1,)}
    args = {k: torch.arange(float(torch.Size(s).numel())).reshape(s) for k, s in shapes.items()}
    unpacked = cell.unpack_weights(args)
    assert list(args) == list(shapes)                  # the argument is left alone
    expect = [('z', [0.0])]
    for group, width in (('i2h', 3), ('h2h', 2)):
        for n, gate in enumerate('ifco'):
            expect.append((f'p_{group}_{gate}_weight',
                           [float(v) for v in range(2 * width * n, 2 * width * (n + 1))]))
            expect.append((f'p_{group}_{gate}_bias', [2.0 * n, 2.0 * n + 1]))
    assert [(k, v.reshape(-1).tolist()) for k, v in unpacked.items()] == expect
    packed = cell.pack_weights(unpacked)
    assert list(packed) == ['z', 'p_i2h_weight', 'p_i2h_bias', 'p_h2h_weight', 'p_h2h_bias']
    for k in shapes:
        assert torch.equal(packed[k], args[k])
    # one gate: the names do not change, the arrays go to the end
    plain = rnn.RNNCell(2, prefix='q_').unpack_weights(
        {'q_i2h_weight': args['p_i2h_weight'][:2], 'q_i2h_bias': args['p_i2h_bias'][:2],
         'q_h2h_weight': args['p_h2h_weight'][:2], 'q_h2h_bias': args['p_h2h_bias'][:2], 'y': 0})
    assert list(plain) == ['y', 'q_i2h_weight', 'q_i2h_bias', 'q_h2h_weight', 'q_h2h_bias']
    assert rnn.DropoutCell(0.1).unpack_weights({'a': 1}) == {'a': 1}


def test_composite_cell_given_params_and_child_params():
    # mxnet: a step cell has handed out its params once made, so it cannot join a
    # SequentialRNNCell given its own params; a DropoutCell (no variables) can
    seq = rnn.SequentialRNNCell(params=rnn.RNNParams('x_'))
    with pytest.raises(AssertionError, match="Either specify params for SequentialRNNCell "
                                             "or child cells, not both."):
        seq.add(rnn.LSTMCell(3, prefix='y_'))
    seq = rnn.SequentialRNNCell(params=rnn.RNNParams('x_'))
    shared = seq.params.get('w')
    drop = rnn.DropoutCell(0.1)
    seq.add(drop)
    assert sorted(seq.params._params) == ['x_w'] and drop.params._params['x_w'] is shared
    with pytest.raises(AssertionError, match="BidirectionalCell"):
        rnn.BidirectionalCell(rnn.GRUCell(3, prefix='a_'), rnn.GRUCell(3, prefix='b_'),
                              params=rnn.RNNParams('c_'))


def test_fused_initializer_with_its_own_init():
    init = rnn.rnn_cell.FusedRNN(mx.init.One(), 2, 1, 'lstm', forget_bias=3.0)
    assert json.loads(init.dumps()) == ['fusedrnn', {
        'init': '["one", {}]', 'num_hidden': 2, 'num_layers': 1, 'mode': 'lstm',
        'bidirectional': False, 'forget_bias': 3.0}]
    arr = mx.nd.zeros((4 * 2 * (3 + 2 + 2),))
    init._init_weight(mx.init.InitDesc('f_parameters', global_init=mx.init.Uniform()), arr)
    # mxnet 1.9.1: weights by `init`, biases zero, both forget-gate biases 3
    bias = [0.0, 0.0, 3.0, 3.0, 0.0, 0.0, 0.0, 0.0]
    assert arr.tolist() == [1.0] * 40 + bias + bias
    # made again from its dumps() (mxnet 1.9.1 fails here on its registry lookup)
    again = mx.init.create(init.dumps())
    arr2 = mx.nd.zeros((56,))
    again._init_weight(mx.init.InitDesc('f_parameters', global_init=mx.init.Uniform()), arr2)
    assert torch.equal(arr2, arr)


def test_modifier_begin_state_takes_func_or_init_sym():
    base = rnn.GRUCell(3, prefix='m_')
    res = rnn.ResidualCell(base)
    assert [s.name for s in res.begin_state(func=sym.Variable)] == ['m_begin_state_0']
    assert [s.name for s in res.begin_state(sym.Variable)] == ['m_begin_state_1']
    assert res.begin_state(init_sym=sym.Variable)[0].list_arguments() == ['m_begin_state_2']
    with pytest.raises(AssertionError, match="modifier"):    # the base stays wrapped
        base.begin_state()
    assert res.params is base.params and res.state_info == base.state_info
