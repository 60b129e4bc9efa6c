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



def test_init_params_without_initializer_leaves_missing_names_as_they_are():
    """initializer=None with allow_missing: the given names are copied and the others
    keep their values (mxnet 1.9.1 prints fc_bias 0.25, fc_weight 2.0 here)."""
    mod = _module()
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params(arg_params={"fc_weight": mx.nd.ones((3, 5)) * 0.5,
                                "fc_bias": mx.nd.ones((3,)) * 0.25})
    mod.init_params(initializer=None, arg_params={"fc_weight": mx.nd.ones((3, 5)) * 2},
                    allow_missing=True, force_init=True)
    args, _ = mod.get_params()
    assert args["fc_bias"].asnumpy().tolist() == [0.25] * 3
    assert args["fc_weight"].asnumpy().tolist() == [[2.0] * 5] * 3

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


# --- optimizer states of another model are refused when they load ------------------------
def _trained(num_hidden=3, dim=5, optimizer="sgd", **kw):
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=num_hidden, name="fc")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"), **kw)
    mod.bind([("data", (4, dim))], [("softmax_label", (4,))])
    mod.init_params()
    mod.init_optimizer(optimizer=optimizer, optimizer_params={"momentum": 0.9}
                       if optimizer == "sgd" else ())
    mod.forward_backward(_batch(d=dim))
    mod.update()
    return mod


def test_states_of_another_model_are_refused_at_load(tmp_path):
    fname = str(tmp_path / "other.states")
    _trained(num_hidden=7).save_optimizer_states(fname)
    mod = _trained()
    before = {k: v.clone() for k, v in mod._updater.states.items()}
    with pytest.raises(MXNetError) as err:
        mod.load_optimizer_states(fname)
    msg = str(err.value)
    for part in (fname, "'fc_weight'", "shape (7, 5) in the file",
                 "the bound parameter has shape (3, 5)"):
        assert part in msg, (part, msg)
    # nothing was installed: the module trains on with its own states
    assert all(bool((mod._updater.states[k] == v).all()) for k, v in before.items())
    mod.forward_backward(_batch())
    mod.update()


def test_states_of_another_optimizer_or_device_count(tmp_path):
    fname = str(tmp_path / "adam.states")
    _trained(optimizer="adam").save_optimizer_states(fname)
    sgd = _trained()
    with pytest.raises(MXNetError, match=r"'fc_weight' \(index 0\) holds 2 array\(s\) in "
                                         r"the file where SGD keeps 1"):
        sgd.load_optimizer_states(fname)     # Adam's (mean, var) is not SGD's momentum
    two_devices = str(tmp_path / "two.states")
    _trained(context=[mx.cpu(0), mx.cpu(1)]).save_optimizer_states(two_devices)
    # saved on a kvstore (keyed by name): accepted as mxnet accepts it, shapes checked
    _trained().load_optimizer_states(two_devices)
    with pytest.raises(MXNetError, match="'fc_weight'.*shape"):
        _trained(num_hidden=4).load_optimizer_states(two_devices)


def test_states_checked_on_the_kvstore_too(tmp_path):
    fname = str(tmp_path / "kv.states")
    _trained(num_hidden=7, context=[mx.cpu(0), mx.cpu(1)]).save_optimizer_states(fname)
    mod = _trained(context=[mx.cpu(0), mx.cpu(1)])
    assert mod._update_on_kvstore
    with pytest.raises(MXNetError, match=r"'fc_bias'.*\(7,\) in the file.*\(3,\)|"
                                         r"'fc_weight'.*\(7, 5\) in the file.*\(3, 5\)"):
        mod.load_optimizer_states(fname)


def test_states_of_another_dtype_are_refused():
    import torch
    from runtime import optimizer as opt
    from runtime.updater import check_states
    bound = {0: ("fc_weight", torch.zeros(3, 5))}
    sgd = opt.create("sgd", momentum=0.9)
    check_states({0: torch.zeros(3, 5)}, bound, sgd)
    with pytest.raises(MXNetError, match="'fc_weight' .*dtype float64 in the file, but SGD "
                                         "keeps float32 for the bound float32 parameter"):
        check_states({0: torch.zeros(3, 5, dtype=torch.float64)}, bound, sgd)
    # float16 weights under multi_precision keep a float32 master copy and momentum
    half = {0: ("fc_weight", torch.zeros(3, 5, dtype=torch.float16))}
    mp = opt.create("sgd", momentum=0.9, multi_precision=True)
    check_states({0: (torch.zeros(3, 5), torch.zeros(3, 5))}, half, mp)
    with pytest.raises(MXNetError, match=r"state\[1\] .*dtype float16"):
        check_states({0: (torch.zeros(3, 5), torch.zeros(3, 5, dtype=torch.float16))},
                     half, mp)


def test_no_progress_bar_thread_off_a_terminal(monkeypatch):
    """tqdm starts its monitor thread even for a bar it disables; off a terminal fit
    makes no bar, so no thread of it outlives a job that fails mid-epoch."""
    import io
    from module_api.module import base_module
    it = mx.io.NDArrayIter(mx.nd.ones((8, 5)), mx.nd.zeros((8,)), batch_size=4)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert isinstance(base_module._epoch_progress(it, 0), base_module._NoBar)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stderr", Terminal())
    bar = base_module._epoch_progress(it, 0)
    assert type(bar).__name__ == "tqdm" and bar.total == 2
    bar.close()


def test_abstract_module_and_cell_methods_name_the_class_and_what_to_define():
    class Bare(mx.mod.BaseModule):
        pass

    with pytest.raises(NotImplementedError, match=r"Bare does not define forward\(\); a module "
                                                  r"subclass must"):
        Bare().forward(None)
    with pytest.raises(NotImplementedError, match=r"Bare does not define data_names\(\)"):
        Bare().data_names

    class NoStep(mx.rnn.BaseRNNCell):
        pass

    with pytest.raises(NotImplementedError, match=r"NoStep defines no step"):
        NoStep()(None, [])

    class NoUpdate(mx.metric.EvalMetric):
        pass

    with pytest.raises(NotImplementedError, match=r"NoUpdate defines no update"):
        NoUpdate('x').update([], [])
