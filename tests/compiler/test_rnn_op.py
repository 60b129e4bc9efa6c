"""The fused ``RNN`` operator: signature and shapes as mxnet 1.9.1, values of
mxnet's parameter packing, and the compiled op (forward and every gradient)
against torch.nn.LSTM / GRU / RNN holding the same weights."""
import math

import pytest
import torch

from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from compiler.errors import MXNetError
from compiler.ops.rnn import param_size, unpack_params
from compiler.frontend.reference import check_gradient
from runtime.context import cpu
from tests.compiler._rules_helpers import infer, reference

RTOL, ATOL = 1e-4, 1e-5


def _rnn(mode, layers=1, bidirectional=False, state_outputs=True, **kw):
    return sym.RNN(data=sym.Variable('data'), state_size=kw.pop('H', 4), num_layers=layers,
                   mode=mode, bidirectional=bidirectional, state_outputs=state_outputs,
                   name='rnn', **kw)


def test_signature_matches_mxnet():
    r = _rnn('lstm', 2)
    assert r.list_arguments() == ['data', 'rnn_parameters', 'rnn_state', 'rnn_state_cell']
    assert r.list_outputs() == ['rnn_output', 'rnn_state_output', 'rnn_statecell_output']
    g = _rnn('gru', 2, state_outputs=False)
    assert g.list_arguments() == ['data', 'rnn_parameters', 'rnn_state']
    assert g.list_outputs() == ['rnn_output']
    assert _rnn('rnn_tanh', p=0.3, layers=3).list_outputs() == ['rnn_output',
                                                                'rnn_state_output']


def test_shapes_match_mxnet():
    # mxnet 1.9.1: RNN(state_size=4, num_layers=2).infer_shape(data=(5, 3, 6))
    args, outs, _ = _rnn('lstm', 2).infer_shape(data=(5, 3, 6))
    assert args == [(5, 3, 6), (352,), (2, 3, 4), (2, 3, 4)]
    assert outs == [(5, 3, 4), (2, 3, 4), (2, 3, 4)]
    args, outs, _ = _rnn('gru', 2, True, state_outputs=False).infer_shape(data=(5, 3, 6))
    assert args == [(5, 3, 6), (624,), (4, 3, 4)] and outs == [(5, 3, 8)]
    assert param_size(6, 4, 2, 'lstm') == 352 and param_size(6, 4, 2, 'gru', True) == 624
    assert param_size(10, 3, 1, 'rnn_relu') == 3 * (10 + 3) + 2 * 3
    ins, outs = infer('RNN', [(7, 2, 3), None, None], state_size=5, num_layers=1,
                      mode='rnn_tanh', bidirectional=True)
    assert ins == [(7, 2, 3), (2 * (5 * 8 + 10),), (2, 2, 5)] and outs[0] == (7, 2, 10)


def test_errors():
    with pytest.raises(MXNetError, match="3-D"):
        _rnn('lstm').infer_shape(data=(5, 3))
    with pytest.raises(MXNetError, match="projection_size"):
        _rnn('lstm', projection_size=2).infer_shape(data=(5, 3, 2))
    with pytest.raises(MXNetError, match="use_sequence_length"):
        _rnn('gru', use_sequence_length=True).infer_shape(data=(5, 3, 2))
    with pytest.raises(MXNetError, match="mode"):
        _rnn('lstmp')
    with pytest.raises(MXNetError, match="state_size"):
        sym.RNN(data=sym.Variable('data'), num_layers=1, mode='gru')
    with pytest.raises(MXNetError, match="RNN parameters"):
        _rnn('gru').infer_shape(data=(5, 3, 2), rnn_parameters=(7,))
    # clip attributes are accepted
    _rnn('lstm', lstm_state_clip_min=-1.0, lstm_state_clip_max=1.0,
         lstm_state_clip_nan=True).infer_shape(data=(2, 1, 2))


# mxnet 1.9.1, T=2, N=1, I=2, H=2, two bidirectional layers, data = cos(arange),
# parameters = 0.5 * sin(arange), state = 0.1 * arange, state_cell = -0.1 * arange
MXNET_VALUES = {
    'lstm': (224, [
        [-0.08785274624824524, -0.0854683369398117, -0.14462141692638397, -0.011785081587731838,
         0.02600962296128273, -0.05431748926639557, -0.05578381195664406, -0.270340234041214],
        [0.11668814718723297, 0.035811588168144226, -0.1918044239282608, -0.2776331305503845,
         0.02600962296128273, -0.05431748926639557, -0.14462141692638397, -0.011785081587731838],
        [0.27904558181762695, 0.159310445189476, -0.3087522089481354, -0.37717151641845703,
         0.07607924193143845, -0.15025544166564941, -0.23265331983566284, -0.0181035827845335]]),
    'gru': (168, [
        [0.2176433801651001, 0.184132382273674, 0.268362820148468, 0.3168175220489502,
         0.08268050104379654, -0.03372621163725853, 0.4352187216281891, 0.47264569997787476],
        [-0.23216934502124786, -0.052544984966516495, -0.003374113468453288,
         -0.380099892616272, 0.08268050104379654, -0.03372621163725853, 0.268362820148468,
         0.3168175220489502]]),
}


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_values_from_mxnet(mode):
    size, expected = MXNET_VALUES[mode]
    ins = [torch.cos(torch.arange(4.0)).reshape(2, 1, 2),
           0.5 * torch.sin(torch.arange(float(size))),
           0.1 * torch.arange(8.0).reshape(4, 1, 2)]
    if mode == 'lstm':
        ins.append(-0.1 * torch.arange(8.0).reshape(4, 1, 2))
    attrs = dict(state_size=2, num_layers=2, mode=mode, bidirectional=True, state_outputs=True)
    outs = reference('RNN', ins, **attrs)
    for o, e in zip(outs, expected):
        torch.testing.assert_close(o.reshape(-1), torch.tensor(e), rtol=1e-5, atol=1e-6)
    # the compiled op gives the same
    exe = sym.RNN(data=sym.Variable('data'), name='rnn', **attrs).simple_bind(
        cpu(), grad_req='null', data=(2, 1, 2))
    for name, v in zip(['data', 'rnn_parameters', 'rnn_state', 'rnn_state_cell'], ins):
        exe.arg_dict[name][:] = v
    for o, e in zip(exe.forward(), expected):
        torch.testing.assert_close(o.reshape(-1), torch.tensor(e), rtol=1e-5, atol=1e-6)


def _torch_net(mode, layers, bidirectional, input_size, hidden):
    klass = {'lstm': torch.nn.LSTM, 'gru': torch.nn.GRU}.get(mode, torch.nn.RNN)
    kw = {'nonlinearity': mode[4:]} if klass is torch.nn.RNN else {}
    return klass(input_size, hidden, layers, bidirectional=bidirectional, **kw)


def _torch_params(mode, layers, bidirectional, input_size, hidden, packed):
    """torch.nn parameter names -> views of mxnet's packed vector."""
    names = {'wx': 'weight_ih', 'wh': 'weight_hh', 'bx': 'bias_ih', 'bh': 'bias_hh'}
    w = unpack_params(packed, input_size, hidden, layers, mode, bidirectional)
    return {f'{names[k]}_l{layer}' + ('_reverse' if d else ''): t
            for (k, layer, d), t in w.items()}


@pytest.mark.parametrize("mode,layers,bidirectional", [
    ("lstm", 1, False), ("lstm", 2, True), ("gru", 1, True), ("gru", 2, False),
    ("rnn_tanh", 2, True), ("rnn_relu", 1, False)])
def test_compiled_matches_torch_nn(mode, layers, bidirectional):
    T, N, I, H = 3, 2, 5, 4
    r = _rnn(mode, layers, bidirectional, H=H)
    exe = r.simple_bind(cpu(), data=(T, N, I))
    g = torch.Generator().manual_seed(layers * 7 + len(mode))
    vals = {}
    for name in r.list_arguments():
        vals[name] = torch.randn(tuple(exe.arg_dict[name].shape), generator=g) * 0.5
        exe.arg_dict[name][:] = vals[name]
    outs = [o.clone() for o in exe.forward(is_train=True)]
    ogs = [torch.randn(tuple(o.shape), generator=g) for o in outs]
    exe.backward(ogs)

    leaves = {k: v.clone().requires_grad_(True) for k, v in vals.items()}
    net = _torch_net(mode, layers, bidirectional, I, H)
    params = _torch_params(mode, layers, bidirectional, I, H, leaves['rnn_parameters'])
    hx = leaves['rnn_state']
    if mode == 'lstm':
        hx = (hx, leaves['rnn_state_cell'])
    y, hy = torch.func.functional_call(net, params, (leaves['data'], hx))
    ref = [y] + (list(hy) if mode == 'lstm' else [hy])
    for o, e in zip(outs, ref):
        torch.testing.assert_close(o, e.detach(), rtol=RTOL, atol=ATOL)
    total = sum((e * og).sum() for e, og in zip(ref, ogs))
    names = list(leaves)
    for k, t in zip(names, torch.autograd.grad(total, [leaves[k] for k in names])):
        torch.testing.assert_close(exe.grad_dict[k], t, rtol=RTOL, atol=ATOL,
                                   msg=f"gradient of {k}")


def test_output_only_gradient_and_shared_state_input():
    """state_outputs=False; the same variable fed as state and state_cell."""
    T, N, I, H = 2, 3, 2, 3
    s = sym.Variable('s')
    r = sym.RNN(data=sym.Variable('data'), state=s, state_cell=s, state_size=H, num_layers=1,
                mode='lstm', name='rnn')
    assert r.list_arguments() == ['data', 'rnn_parameters', 's']
    exe = r.simple_bind(cpu(), data=(T, N, I))
    g = torch.Generator().manual_seed(3)
    vals = {k: torch.randn(tuple(exe.arg_dict[k].shape), generator=g) for k in exe.arg_dict}
    for k, v in vals.items():
        exe.arg_dict[k][:] = v
    out = exe.forward(is_train=True)[0].clone()
    og = torch.randn(tuple(out.shape), generator=g)
    exe.backward([og])
    leaves = {k: v.clone().requires_grad_(True) for k, v in vals.items()}
    net = _torch_net('lstm', 1, False, I, H)
    y, _ = torch.func.functional_call(
        net, _torch_params('lstm', 1, False, I, H, leaves['rnn_parameters']),
        (leaves['data'], (leaves['s'], leaves['s'])))
    torch.testing.assert_close(out, y.detach(), rtol=RTOL, atol=ATOL)
    grads = torch.autograd.grad((y * og).sum(), [leaves[k] for k in r.list_arguments()])
    for k, t in zip(r.list_arguments(), grads):
        torch.testing.assert_close(exe.grad_dict[k], t, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_gradient_rule_with_references(mode):
    """The rebuilt-decomposition gradient, evaluated op by op, equals autograd
    of the reference (state outputs get gradients too), with state clipping."""
    g = torch.Generator().manual_seed(1)
    T, N, I, H = 3, 2, 3, 2
    size = param_size(I, H, 2, mode, True)
    ins = [torch.randn(T, N, I, generator=g), torch.randn(size, generator=g) * 0.5,
           torch.randn(4, N, H, generator=g)]
    if mode == 'lstm':
        ins.append(torch.randn(4, N, H, generator=g))
    attrs = dict(state_size=H, num_layers=2, mode=mode, bidirectional=True,
                 state_outputs=True)
    if mode == 'lstm':
        attrs.update(lstm_state_clip_min=-0.5, lstm_state_clip_max=0.5)
    graph_grads, auto = check_gradient('RNN', ins, attrs)
    for a, b in zip(graph_grads, auto):
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL)


def test_state_clip_forward():
    ins = [torch.full((1, 1, 1), 3.0), torch.ones(param_size(1, 1, 1, 'lstm')),
           torch.zeros(1, 1, 1), torch.zeros(1, 1, 1)]
    attrs = dict(state_size=1, num_layers=1, mode='lstm', state_outputs=True)
    s5 = torch.sigmoid(torch.tensor(5.0)).item()          # every gate's input is 5
    _, _, c = reference('RNN', ins, **attrs)
    assert c.item() == pytest.approx(s5 * math.tanh(5.0))
    _, h, c = reference('RNN', ins, lstm_state_clip_min=-0.5, lstm_state_clip_max=0.5, **attrs)
    assert c.item() == 0.5
    assert h.item() == pytest.approx(s5 * math.tanh(0.5))


def test_dropout_between_layers():
    """p=1 drops the whole first layer's output in training (deterministically):
    forward and gradient both see the same mask; inference keeps it."""
    T, N, I, H = 2, 2, 3, 2
    r = _rnn('gru', 2, H=H, p=1.0)
    exe = r.simple_bind(cpu(), data=(T, N, I))
    g = torch.Generator().manual_seed(5)
    vals = {k: torch.randn(tuple(exe.arg_dict[k].shape), generator=g) for k in exe.arg_dict}
    for k, v in vals.items():
        exe.arg_dict[k][:] = v
    out = exe.forward(is_train=True)[0].clone()
    exe.backward([torch.ones_like(out), torch.zeros(2, N, H)])
    assert torch.equal(exe.grad_dict['data'], torch.zeros(T, N, I))
    w = unpack_params(exe.grad_dict['rnn_parameters'], I, H, 2, 'gru')
    assert torch.equal(w[('wx', 0, 0)], torch.zeros(3 * H, I))
    assert w[('wh', 1, 0)].abs().sum() > 0
    # the output is layer 2 run on zeros
    ref = reference('RNN', [torch.zeros(T, N, H), _layer_params(vals['rnn_parameters'], I, H),
                            vals['rnn_state'][1:]], state_size=H, num_layers=1, mode='gru')
    torch.testing.assert_close(out, ref[0], rtol=RTOL, atol=ATOL)
    ref_inf = reference('RNN', [vals['data'], vals['rnn_parameters'], vals['rnn_state']],
                        state_size=H, num_layers=2, mode='gru')
    torch.testing.assert_close(exe.forward(is_train=False)[0], ref_inf[0], rtol=RTOL, atol=ATOL)


def _layer_params(packed, input_size, hidden):
    """The packed vector of a 1-layer GRU holding layer 1 of a 2-layer one."""
    w = unpack_params(packed, input_size, hidden, 2, 'gru')
    return torch.cat([w[('wx', 1, 0)].reshape(-1), w[('wh', 1, 0)].reshape(-1),
                      w[('bx', 1, 0)], w[('bh', 1, 0)]])


def test_one_gate_kernel_per_step(monkeypatch):
    # the decomposition's kernels (GPUs; on the cpu target an LSTM is otherwise one oneDNN
    # call per layer and direction: tests/compiler/test_fuse_lstm_layers.py)
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "0")
    r = _rnn('lstm', H=8)
    req = {n: 'write' for n in r.list_arguments()}
    counts = {}
    for T in (3, 6):
        prog = compile_symbol(r, {'data': (T, 4, 6)}, True, req, True)
        counts[T] = (prog.stats['forward_launches'], prog.stats['backward_launches'])
    # per extra step: the recurrent matmul and one fused gate kernel forward
    assert counts[6][0] - counts[3][0] == 2 * 3
    assert counts[6][1] - counts[3][1] <= 3 * 3
    assert counts[3][0] <= 2 * 3 + 4, counts
