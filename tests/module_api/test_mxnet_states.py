"""Optimizer states mxnet 1.9.1 saved (a pickled ``.states``,
tests/fixtures/make_states_fixtures.py) load here with ``allow_pickle=True`` and
continue training exactly where mxnet would."""
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures")
PREFIX = os.path.join(FIX, "mxstates")
OPT = {"learning_rate": 0.1, "momentum": 0.9}


def _expected():
    return np.load(PREFIX + "-expected.npz")


def _one_step(mod, exp):
    batch = mx.io.DataBatch([mx.nd.array(exp["x"])], [mx.nd.array(exp["y"])])
    mod.forward_backward(batch)
    mod.update()
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


def _bind_and_init_optimizer(mod, exp):
    mod.bind([("data", exp["x"].shape)], [("softmax_label", exp["y"].shape)])
    mod.init_optimizer(optimizer="sgd", optimizer_params=OPT, kvstore=None)


def _assert_one_step_as_mxnet(mod, exp):
    for name, value in _one_step(mod, exp).items():
        np.testing.assert_allclose(value, exp[f"after/{name}"], rtol=1e-5, atol=1e-6)


def test_module_load_with_mxnets_states_continues_as_mxnet():
    exp = _expected()
    mod = mx.mod.Module.load(PREFIX, 2, load_optimizer_states=True, allow_pickle=True,
                             context=mx.cpu())
    _bind_and_init_optimizer(mod, exp)
    _assert_one_step_as_mxnet(mod, exp)


def test_load_optimizer_states_needs_allow_pickle_for_a_pickle():
    exp = _expected()
    mod = mx.mod.Module.load(PREFIX, 2, context=mx.cpu())
    mod.bind([("data", exp["x"].shape)], [("softmax_label", exp["y"].shape)])
    mod.init_optimizer(optimizer="sgd", optimizer_params=OPT, kvstore=None)
    with pytest.raises(MXNetError, match="allow_pickle=True"):
        mod.load_optimizer_states(PREFIX + "-0002.states")
    mod.load_optimizer_states(PREFIX + "-0002.states", allow_pickle=True)
    states = mod._updater.states
    for i, name in enumerate(mod._exec_group.param_names):
        np.testing.assert_array_equal(states[i].asnumpy(), exp[f"mom/{name}"])


def test_bucketing_module_loads_mxnets_states():
    exp = _expected()
    sym, _, _ = mx.model.load_checkpoint(PREFIX, 2)

    def sym_gen(key):
        return sym, ("data",), ("softmax_label",)
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=8, context=mx.cpu())
    mod.bind([("data", exp["x"].shape)], [("softmax_label", exp["y"].shape)])
    arg, aux = mx.model.load_params(PREFIX, 2)
    mod.set_params(arg, aux)
    mod.init_optimizer(optimizer="sgd", optimizer_params=OPT, kvstore=None)
    mod.load_optimizer_states(PREFIX + "-0002.states", allow_pickle=True)
    got = _one_step(mod, exp)
    for name, value in got.items():
        np.testing.assert_allclose(value, exp[f"after/{name}"], rtol=1e-5, atol=1e-6)


def test_bucketing_module_load_with_mxnets_states_continues_as_mxnet():
    """BucketingModule.load of a Module checkpoint (prefix-symbol.json stands in for the
    default bucket's symbol file) passes allow_pickle on to init_optimizer."""
    exp = _expected()
    sym, _, _ = mx.model.load_checkpoint(PREFIX, 2)

    def sym_gen(key):
        return sym, ("data",), ("softmax_label",)
    refused = mx.mod.BucketingModule.load(PREFIX, 2, sym_gen=sym_gen, default_bucket_key=8,
                                          load_optimizer_states=True, context=mx.cpu())
    with pytest.raises(MXNetError, match="allow_pickle=True"):
        _bind_and_init_optimizer(refused, exp)
    mod = mx.mod.BucketingModule.load(PREFIX, 2, sym_gen=sym_gen, default_bucket_key=8,
                                      load_optimizer_states=True, allow_pickle=True,
                                      context=mx.cpu())
    _bind_and_init_optimizer(mod, exp)
    _assert_one_step_as_mxnet(mod, exp)
