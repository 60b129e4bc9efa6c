"""``mx.contrib.svrg_optimization``: SVRGModule's full gradients and update rule against
numpy on a linear regression, one device against two, the optimizers it installs,
and ``fit`` beside plain SGD (mxnet's own tests of these are skipped as flaky there)."""
import numpy as np
import pytest

import module_api as mx
from module_api.contrib.svrg_optimization.svrg_module import SVRGModule
from module_api.contrib.svrg_optimization.svrg_optimizer import _SVRGOptimizer

X = np.random.RandomState(0).randint(1, 5, (20, 2)).astype(np.float32)
Y = X @ np.array([1.0, 2.0], np.float32)


def _net():
    fc = mx.sym.FullyConnected(mx.sym.var("data"), name="fc1", num_hidden=1)
    return mx.sym.LinearRegressionOutput(fc, label=mx.sym.var("lin_reg_label"), name="lro")


def _module(context=mx.cpu(), batch=5, lr=0.01):
    it = mx.io.NDArrayIter(X, Y, batch_size=batch, shuffle=False, label_name="lin_reg_label")
    mod = SVRGModule(_net(), data_names=["data"], label_names=["lin_reg_label"],
                     context=context, update_freq=2)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(mx.init.One())          # weight 1, bias 0
    mod.init_optimizer(kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", lr),))
    return it, mod


def _batch_grads(w, b, batch=5):
    """Each batch's summed gradient of LinearRegressionOutput's (pred - y)^2 / 2."""
    err = X @ w + b - Y
    gw = (err[:, None] * X).reshape(-1, batch, 2).sum(1)
    gb = err.reshape(-1, batch).sum(1)
    return gw, gb


def test_full_gradient_is_the_mean_of_the_batch_gradients_on_every_pass():
    it, mod = _module()
    gw, gb = _batch_grads(np.ones(2), 0.0)
    for _ in range(2):      # mxnet 1.9.1 adds the first pass's mean into the second's
        mod.update_full_grads(it)
        np.testing.assert_allclose(mod._param_dict[0]["fc1_weight"].asnumpy(), [gw.mean(0)])
        np.testing.assert_allclose(mod._param_dict[0]["fc1_bias"].asnumpy(), [gb.mean()])


def test_each_step_updates_with_the_svrg_gradient():
    it, mod = _module(lr=0.01)
    mod.update_full_grads(it)
    mu_w = _batch_grads(np.ones(2), 0.0)[0].mean(0)
    w, snap = np.ones(2), np.ones(2)
    b, snap_b = 0.0, 0.0
    mu_b = _batch_grads(np.ones(2), 0.0)[1].mean()
    it.reset()
    for k, batch in enumerate(it):
        mod.forward_backward(batch)
        mod.update()
        cur_w, cur_b = _batch_grads(w, b)
        old_w, old_b = _batch_grads(snap, snap_b)
        w = w - 0.01 / 5 * (cur_w[k] - old_w[k] + mu_w)       # rescale_grad = 1 / batch
        b = b - 0.01 / 5 * (cur_b[k] - old_b[k] + mu_b)
        args = mod.get_params()[0]
        np.testing.assert_allclose(args["fc1_weight"].asnumpy()[0], w, rtol=1e-5)
        np.testing.assert_allclose(args["fc1_bias"].asnumpy()[0], b, rtol=1e-5, atol=1e-6)


def test_two_devices_take_the_steps_of_one():
    """Each device's full gradient is its share of the kvstore's sum: the devices' SVRG
    gradients sum to the one-device gradient, so the parameters agree step by step."""
    results = []
    for context in (mx.cpu(0), [mx.cpu(0), mx.cpu(1)]):
        it, mod = _module(context=context, batch=10)
        mod.update_full_grads(it)
        it.reset()
        for batch in it:
            mod.forward_backward(batch)
            mod.update()
        results.append(mod.get_params()[0]["fc1_weight"].asnumpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5)
    assert mod._kvstore is not None            # the two-device run summed in a kvstore


def test_fit_beats_plain_sgd_on_the_same_steps():
    def train(module_class, **extra):
        it = mx.io.NDArrayIter(X, Y, batch_size=5, shuffle=False, label_name="lin_reg_label")
        mod = module_class(_net(), data_names=["data"], label_names=["lin_reg_label"], **extra)
        metric = mx.metric.create("mse")
        mod.fit(it, eval_metric=metric, optimizer="sgd", initializer=mx.init.One(),
                optimizer_params=(("learning_rate", 0.02),), num_epoch=12, kvstore="local")
        return metric.get()[1]
    assert train(SVRGModule, update_freq=2) < train(mx.mod.Module)


def test_the_optimizer_assigns_full_keys_and_updates_the_others():
    opt = _SVRGOptimizer(default_optimizer="sgd", learning_rate=1.0,
                         param_idx2name={0: "weight", 1: "weight_full"})
    assert opt.default_opt.lr == 1.0 and type(opt.default_opt).__name__ == "SGD"
    kv = mx.kv.create("local")
    kv.set_optimizer(opt)
    weight, full = mx.nd.array([0, 0, 0]), mx.nd.array([1, 1, 1])
    kv.init(0, weight)
    kv.init(1, full)
    kv.push(0, mx.nd.array([1, 1, 1]))
    kv.push(1, mx.nd.array([2, 2, 2]))
    kv.pull(0, weight)
    kv.pull(1, full)
    assert weight.asnumpy().tolist() == [-1, -1, -1]        # SGD, learning rate 1
    assert full.asnumpy().tolist() == [2, 2, 2]             # assigned
    assert isinstance(mx.optimizer.create("_SVRGOptimizer", default_optimizer="adam"),
                      _SVRGOptimizer)


@pytest.mark.parametrize("freq, error", [(None, TypeError), (2.0, TypeError), (True, TypeError),
                                         (0, ValueError)])
def test_update_freq_is_checked(freq, error):
    with pytest.raises(error, match="update_freq"):
        SVRGModule(_net(), data_names=["data"], label_names=["lin_reg_label"],
                   update_freq=freq)
