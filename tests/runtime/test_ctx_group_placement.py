"""mxnet's ctx_group / group2ctx placement: arrays of a group live on (and report)
the context the group maps to; results equal the unplaced executor's. The
copies between contexts are tested in test_model_parallel.py."""
import numpy as np
import torch

import module_api as mx


def _symbol():
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.Variable("a")
        w = mx.sym.Variable("fc_weight")
        h = mx.sym.FullyConnected(a, weight=w, num_hidden=3, no_bias=True, name="fc")
    with mx.AttrScope(ctx_group="dev2"):
        b = mx.sym.Variable("b")
        out = mx.sym.tanh(h) * b
    return out


def _run(exe):
    torch.manual_seed(0)
    for name in ("a", "fc_weight", "b"):
        exe.arg_dict[name][:] = torch.randn(exe.arg_dict[name].shape)
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((2, 3))])
    return {n: g.asnumpy() for n, g in exe.grad_dict.items()}, exe.outputs[0].asnumpy()


def test_arrays_live_on_their_groups_context_and_results_match():
    placed = _symbol().simple_bind(mx.cpu(0), a=(2, 4), b=(2, 3),
                                   group2ctx={"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    plain = _symbol().simple_bind(mx.cpu(0), a=(2, 4), b=(2, 3))
    assert placed.arg_dict["a"].context == mx.cpu(1)
    assert placed.arg_dict["fc_weight"].context == mx.cpu(1)
    assert placed.grad_dict["fc_weight"].context == mx.cpu(1)
    assert placed.arg_dict["b"].context == mx.cpu(2)
    assert placed.grad_dict["b"].context == mx.cpu(2)
    grads_p, out_p = _run(placed)
    grads_u, out_u = _run(plain)
    np.testing.assert_array_equal(out_p, out_u)
    for n in grads_u:
        np.testing.assert_array_equal(grads_p[n], grads_u[n])


def test_module_input_grads_report_their_groups_context():
    mod = mx.mod.Module(_symbol(), context=[mx.cpu(0)], data_names=["a", "b"],
                        label_names=None, group2ctxs={"dev1": mx.cpu(3), "dev2": mx.cpu(4)})
    mod.bind(data_shapes=[("a", (2, 4)), ("b", (2, 3))], inputs_need_grad=True)
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones((2, 4)), mx.nd.ones((2, 3))]), is_train=True)
    mod.backward([mx.nd.ones((2, 3))])
    ga, gb = mod.get_input_grads()
    assert ga.context == mx.cpu(3) and gb.context == mx.cpu(4)
