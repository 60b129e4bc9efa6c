"""The convolutional RNN cells of ``mx.rnn`` against mxnet 1.9.1.

``tests/fixtures/make_conv_rnn_fixtures.py`` unrolled each cell 3 steps in mxnet with
fixed inputs and parameters; here the same cell must have mxnet's parameter, argument
and output names and give its outputs and every gradient, on both cpu targets.
"""
import json
import os

import numpy as np
import pytest

import module_api as mx

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
with open(os.path.join(HERE, "conv_rnn_cells.json")) as _f:
    META = json.load(_f)["cases"]
ARRAYS = np.load(os.path.join(HERE, "conv_rnn_cells.npz"))


def _unrolled(case):
    meta = META[case]
    cell = getattr(mx.rnn, meta["cell"])(prefix="cell_", **meta["kwargs"])
    steps = [mx.sym.Variable("cell_t%d_data" % i) for i in range(3)]
    begin = [mx.sym.Variable("cell_begin_%d" % i) for i in range(len(cell.state_info))]
    outputs, _ = cell.unroll(3, steps, begin_state=begin)
    return cell, mx.sym.Group(outputs)


@pytest.mark.parametrize("case", sorted(META))
def test_conv_cell_matches_mxnet(case, cpu_target):
    meta = META[case]
    cell, out = _unrolled(case)
    assert sorted(cell.params._params.keys()) == meta["params"]
    assert out.list_arguments() == meta["args"]
    assert out.list_outputs() == meta["outputs"]
    args = {n: mx.nd.array(ARRAYS[f"{case}:arg:{n}"]) for n in meta["args"]}
    ex = out.simple_bind(mx.cpu(), **{n: a.shape for n, a in args.items()})
    for n, a in args.items():
        ex.arg_dict[n][:] = a
    ex.forward(is_train=True)
    ex.backward([mx.nd.ones(o.shape) for o in ex.outputs])
    for i, o in enumerate(ex.outputs):
        np.testing.assert_allclose(o.asnumpy(), ARRAYS[f"{case}:out{i}"], rtol=1e-4, atol=1e-5)
    for n in meta["args"]:
        np.testing.assert_allclose(ex.grad_dict[n].asnumpy(), ARRAYS[f"{case}:grad:{n}"],
                                   rtol=1e-4, atol=1e-4, err_msg=f"{case}: d/d{n}")


def test_state_shape_follows_the_i2h_convolution():
    cell = mx.rnn.ConvLSTMCell(input_shape=(1, 3, 16, 10), num_hidden=10, prefix="rnn_")
    assert cell.state_shape == [(0, 10, 16, 10)] * 2
    strided = mx.rnn.ConvGRUCell(input_shape=(1, 3, 16, 10), num_hidden=5, i2h_stride=(2, 2))
    assert strided.state_shape == [(0, 5, 8, 5)]


def test_unroll_without_begin_state_infers_the_batch():
    # mxnet 1.9.1's test_convlstm: default zero begin states, shapes inferred from the data
    cell = mx.rnn.ConvLSTMCell(input_shape=(1, 3, 16, 10), num_hidden=10, prefix="rnn_")
    outputs, _ = cell.unroll(3, [mx.sym.Variable("rnn_t%d_data" % i) for i in range(3)])
    outputs = mx.sym.Group(outputs)
    assert outputs.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output",
                                      "rnn_t2_out_output"]
    _, outs, _ = outputs.infer_shape(**{"rnn_t%d_data" % i: (1, 3, 16, 10) for i in range(3)})
    assert outs == [(1, 10, 16, 10)] * 3


def test_even_h2h_kernel_is_refused():
    with pytest.raises(ValueError, match="h2h_kernel=\\(2, 2\\) must have odd sizes"):
        mx.rnn.ConvRNNCell(input_shape=(1, 3, 8, 8), num_hidden=4, h2h_kernel=(2, 2))


# the operator nodes of two unrolled steps, in the saved JSON's order, and the name the
# next automatically named Convolution gets (the constructor's shape probe took
# 'convolution0'), as mxnet 1.9.1 gives them in a fresh NameManager
_MXNET_NODES = {
    "ConvRNNCell": "c_t0_i2h c_t0_h2h _plus0 c_t0_out c_t1_i2h c_t1_h2h _plus1 c_t1_out",
    "ConvLSTMCell": "c_t0_i2h c_t0_h2h _plus0 c_t0_slice c_t0_o c_t0_f _mul0 c_t0_i c_t0_c "
                    "_mul1 c_t0_state leakyrelu0 c_t0_out c_t1_i2h c_t1_h2h _plus1 c_t1_slice "
                    "c_t1_o c_t1_f _mul2 c_t1_i c_t1_c _mul3 c_t1_state leakyrelu1 c_t1_out",
    "ConvGRUCell": "c_t0_i2h c_t0__i2h_slice c_t0_h2h c_t0__h2h_slice _plus1 c_t0__z_act "
                   "_rminusscalar0 _plus0 c_t0__r_act _mul0 _plus2 c_t0__h_act _mul1 _mul2 "
                   "c_t0_out c_t1_i2h c_t1__i2h_slice c_t1_h2h c_t1__h2h_slice _plus4 "
                   "c_t1__z_act _rminusscalar1 _plus3 c_t1__r_act _mul3 _plus5 c_t1__h_act "
                   "_mul4 _mul5 c_t1_out",
}


@pytest.mark.parametrize("cls", sorted(_MXNET_NODES))
def test_node_names_and_automatic_numbers_are_mxnets(cls):
    with mx.name.NameManager():
        cell = getattr(mx.rnn, cls)(input_shape=(1, 2, 5, 5), num_hidden=2, prefix="c_",
                                    **({"activation": "tanh"} if cls == "ConvGRUCell" else {}))
        begin = [mx.sym.Variable("s%d" % i) for i in range(len(cell.state_info))]
        outputs, states = cell.unroll(2, [mx.sym.Variable("x%d" % i) for i in range(2)],
                                      begin_state=begin)
        nodes = json.loads(mx.sym.Group(outputs + list(states)).tojson())["nodes"]
        after = mx.sym.Convolution(mx.sym.Variable("q"), num_filter=2, kernel=(1, 1))
    assert " ".join(n["name"] for n in nodes if n["op"] != "null") == _MXNET_NODES[cls]
    assert after.name == "convolution1"
    i2h = {n["name"]: n.get("attrs") for n in nodes}["c_t1_i2h"]
    assert i2h == {"num_filter": str(2 * len(cell._gate_names)), "kernel": "(3, 3)",
                   "stride": "(1, 1)", "pad": "(1, 1)", "dilate": "(1, 1)", "layout": "NCHW"}
    slices = {"ConvLSTMCell": ("c_t1_slice", {"axis": "1", "num_outputs": "4"}),
              # mxnet's ConvGRUCell slices on the default axis: no axis attribute
              "ConvGRUCell": ("c_t1__i2h_slice", {"num_outputs": "3"})}
    if cls in slices:
        name, attrs = slices[cls]
        assert {n["name"]: n.get("attrs") for n in nodes}[name] == attrs
