"""Bad input to a Module: a clear error, and the module unchanged afterwards."""
import warnings

import pytest

import module_api as mx
from compiler.errors import MXNetError


def _module():
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc")
    return mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"))


def _batch(n=4, d=5, **kw):
    return mx.io.DataBatch([mx.nd.ones((n, d))], [mx.nd.zeros((n,))], **kw)


def test_forward_before_bind_or_init_params():
    mod = _module()
    with pytest.raises(AssertionError, match="bound and its parameters initialised"):
        mod.forward(_batch())
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    with pytest.raises(MXNetError, match="params_initialized=False"):
        mod.forward(_batch())


def test_wrong_data_names_at_bind():
    mod = _module()
    with pytest.raises(ValueError, match="don't match names specified by data_names"):
        mod.bind([("dat", (4, 5))], [("softmax_label", (4,))])
    assert not mod.binded


def test_batch_disagreeing_with_provide_data_and_array_count():
    mod = _module()
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params()
    with pytest.raises(MXNetError, match=r"provide_data gives 'data' shape \(4, 7\).*\(4, 5\)"):
        mod.forward(_batch(provide_data=[mx.io.DataDesc("data", (4, 7))]))
    with pytest.raises(MXNetError, match="2 data arrays, the module expects 1"):
        mod.forward(mx.io.DataBatch([mx.nd.ones((4, 5))] * 2, [mx.nd.zeros((4,))]))


def test_shapes_that_do_not_fit_the_parameters_leave_the_module_unchanged():
    mod = _module()
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params()
    weight = mod.get_params()[0]["fc_weight"].clone()
    with pytest.raises(MXNetError, match=r"'fc_weight' has shape \(3, 5\).*\(3, 6\)"):
        mod.forward(_batch(d=6))
    assert [tuple(d.shape) for d in mod.data_shapes] == [(4, 5)]
    mod.forward(_batch(), is_train=False)
    assert tuple(mod.get_outputs()[0].shape) == (4, 3)
    assert (mod.get_params()[0]["fc_weight"] == weight).all()


def test_init_params_missing_and_extra():
    mod = _module()
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    with pytest.raises(RuntimeError, match="fc_bias is not presented"):
        mod.init_params(arg_params={"fc_weight": mx.nd.zeros((3, 5))})
    assert not mod.params_initialized
    with pytest.warns(UserWarning, match=r"ignoring \['other'\]"):
        mod.init_params(arg_params={"fc_weight": mx.nd.zeros((3, 5)),
                                    "fc_bias": mx.nd.zeros((3,)), "other": mx.nd.zeros((1,))})
    assert mod.params_initialized
    # missing and extra at once: mxnet's RuntimeError for the missing name
    with pytest.raises(RuntimeError, match="fc_bias is not presented"):   # sorted order
        mod.init_params(arg_params={"other": mx.nd.zeros((1,))}, force_init=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod.init_params(arg_params={"fc_weight": mx.nd.zeros((3, 5)), "fc_bias":
                                    mx.nd.zeros((3,)), "other": mx.nd.zeros((1,))},
                        allow_extra=True, force_init=True)


# --- calls out of order: mxnet asserts bare; here the message names the missing step -----
def test_update_before_init_optimizer_names_the_step():
    mod = _module()
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params()
    mod.forward_backward(_batch())
    with pytest.raises(MXNetError) as err:
        mod.update()
    assert isinstance(err.value, AssertionError)        # what mxnet raises, still caught
    msg = str(err.value)
    assert "Module.update" in msg and "optimizer_initialized=False" in msg
    assert "call init_optimizer()" in msg and "init_params()" not in msg.split("call")[1]


def test_init_optimizer_before_bind_names_the_steps():
    with pytest.raises(MXNetError, match=r"Module.init_optimizer: the module must be bound "
                                         r"and its parameters initialised first \(binded="
                                         r"False, params_initialized=False\); call bind\(\) "
                                         r"and init_params\(\)"):
        _module().init_optimizer()


def test_init_params_before_bind_keeps_mxnets_wording():
    with pytest.raises(MXNetError, match="call bind before initializing the parameters"):
        _module().init_params()


def test_states_calls_without_an_optimizer():
    mod = _module()
    with pytest.raises(MXNetError, match="save_optimizer_states.*call init_optimizer"):
        mod.save_optimizer_states("never-written.states")
    assert not __import__("os").path.exists("never-written.states")


def test_fit_on_an_empty_iterator():
    it = mx.io.NDArrayIter(mx.nd.ones((3, 5)), mx.nd.zeros((3,)), batch_size=4,
                           last_batch_handle="discard")
    with pytest.raises(MXNetError) as err:
        _module().fit(it, num_epoch=1)
    msg = str(err.value)
    assert "no batch in epoch 0" in msg and "3 samples, batch_size=4" in msg
    assert "'discard'" in msg


def test_fit_on_an_iterator_that_does_not_reset():
    class Once(mx.io.DataIter):
        def __init__(self):
            super().__init__(4)
            self.done = False
            self.provide_data = [mx.io.DataDesc("data", (4, 5))]
            self.provide_label = [mx.io.DataDesc("softmax_label", (4,))]

        def next(self):
            if self.done:
                raise StopIteration
            self.done = True
            return _batch()

        def reset(self):
            pass

    with pytest.raises(MXNetError, match="no batch in epoch 1.*reset"):
        _module().fit(Once(), num_epoch=2)
