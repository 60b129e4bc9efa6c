"""``mx.mod.PythonModule`` / ``PythonLossModule`` against mxnet 1.9.1.

The program of mxnet's python_loss Module example (an MLP ``Module`` chained
with a ``PythonLossModule`` whose gradient is a multi-class hinge loss in numpy, fed
by ``MNISTIter(data_shape=..., flat=True)``), on small IDX files, from the
parameters mxnet started from: the parameters after ``fit``, the validation
accuracy ``fit`` logs and ``predict``'s output equal mxnet's
(``tests/fixtures/python_loss_module.npz``, made by
``make_python_module_fixtures.py``).
"""
import logging
import os
import re
import struct

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "python_loss_module.npz")


def hinge_grad(scores, labels):
    """mxnet's example's gradient (without numba): +1 at the most violating class,
    -1 at the label."""
    scores = scores.asnumpy()
    labels = labels.asnumpy().astype(int)
    grad = np.zeros_like(scores)
    for i in range(scores.shape[0]):
        margin = 1 + scores[i] - scores[i, labels[i]]
        margin[labels[i]] = 0
        grad[i, labels[i]] -= 1
        grad[i, margin.argmax()] += 1
    return grad


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    rec = dict(np.load(FIXTURE))
    d = tmp_path_factory.mktemp("idx")
    images, labels = rec["images"], rec["labels"]
    n, rows, cols = images.shape
    (d / "images").write_bytes(struct.pack(">IIII", 2051, n, rows, cols) + images.tobytes())
    (d / "labels").write_bytes(struct.pack(">II", 2049, n) + labels.tobytes())
    return rec, str(d / "images"), str(d / "labels")


def _mlp(classes):
    data = mx.symbol.Variable('data')
    fc1 = mx.symbol.FullyConnected(data, name='fc1', num_hidden=8)
    act1 = mx.symbol.Activation(fc1, name='relu1', act_type="relu")
    return mx.symbol.FullyConnected(act1, name='fc2', num_hidden=classes)


def test_python_loss_example_equals_mxnet(recorded, caplog):
    rec, img, lab = recorded
    classes = rec["final_fc2_bias"].shape[0]
    mlp = mx.mod.Module(_mlp(classes), context=mx.cpu())
    loss = mx.mod.PythonLossModule(grad_func=hinge_grad)
    mod = mx.mod.SequentialModule().add(mlp).add(loss, take_labels=True, auto_wiring=True)
    size = rec["images"].shape[1] * rec["images"].shape[2]
    train = mx.io.MNISTIter(image=img, label=lab, data_shape=(size,), batch_size=10,
                            shuffle=True, flat=True, silent=False, seed=10)
    val = mx.io.MNISTIter(image=img, label=lab, data_shape=(size,), batch_size=10,
                          shuffle=False, flat=True, silent=False)
    init = {k[5:]: mx.nd.array(v) for k, v in rec.items() if k.startswith("init_")}
    with caplog.at_level(logging.INFO):
        mod.fit(train, eval_data=val, num_epoch=3, arg_params=init,
                optimizer_params={'learning_rate': 0.05, 'momentum': 0.9})
    val_acc = [float(m.group(1)) for r in caplog.records
               for m in [re.match(r"Epoch\[\d+\] Validation-accuracy=([0-9.]+)",
                                  r.getMessage())] if m]
    np.testing.assert_allclose(val_acc, rec["val_accuracy"], atol=1e-6)
    arg, aux = mod.get_params()
    assert aux == {}
    assert sorted(arg) == sorted(init)
    for name, value in arg.items():
        np.testing.assert_allclose(value.asnumpy(), rec["final_" + name], rtol=1e-4,
                                   atol=1e-5, err_msg=name)
    np.testing.assert_allclose(mod.predict(val).asnumpy(), rec["predict"], rtol=1e-4,
                               atol=1e-5)
    # the loss module hands the scores on, named after it, and stays un-"binded" as in mxnet
    assert loss.output_names == ['pyloss_output']
    assert loss.output_shapes == [('pyloss_output', (10, classes))]
    assert loss.binded is False and mod.binded is True
    assert loss.get_params() == ({}, {})


def test_loss_module_alone():
    seen = {}

    def grad_func(scores, labels):
        seen["args"] = (scores, labels)
        return scores.asnumpy() - 1.0       # a numpy array becomes an NDArray

    loss = mx.mod.PythonLossModule(name="sq", data_names=["x"], label_names=["y"],
                                   grad_func=grad_func)
    assert loss.data_names == ["x"] and loss.output_names == ["sq_output"]
    loss.bind(data_shapes=[("x", (2, 3))], label_shapes=[("y", (2,))])
    assert loss.data_shapes == [("x", (2, 3))] and loss.label_shapes == [("y", (2,))]
    x, y = mx.nd.array(np.arange(6).reshape(2, 3)), mx.nd.array([0, 2])
    loss.forward(mx.io.DataBatch(data=[x], label=[y]), is_train=True)
    assert loss.get_outputs()[0] is x
    loss.backward()
    assert seen["args"][0] is x and seen["args"][1] is y
    grad = loss.get_input_grads()[0]
    assert isinstance(grad, mx.nd.NDArray)
    np.testing.assert_array_equal(grad.asnumpy(), np.arange(6).reshape(2, 3) - 1.0)
    with pytest.raises(AssertionError):
        loss.backward(out_grads=[x])              # a loss takes no output gradient
    metric = mx.metric.create("acc")
    loss.update_metric(metric, [mx.nd.array([2, 0])])
    assert metric.get() == ("accuracy", 0.5)      # argmax of both rows is 2
    with pytest.raises(RuntimeError):
        loss.update_metric(metric, [y], pre_sliced=True)
    with pytest.raises(NotImplementedError):
        loss.install_monitor(None)


def test_loss_module_without_grad_func_and_bind_checks():
    loss = mx.mod.PythonLossModule()
    with pytest.raises(AssertionError):
        loss.bind(data_shapes=[("scores", (2, 3))])             # wrong data name
    with pytest.raises(AssertionError):
        loss.bind(data_shapes=[("data", (2, 3))], grad_req="add")
    loss.bind(data_shapes=[("data", (2, 3))], label_shapes=[("softmax_label", (2,))])
    loss.forward(mx.io.DataBatch(data=[mx.nd.ones((2, 3))], label=[mx.nd.ones((2,))]))
    with pytest.raises(NotImplementedError):
        loss.backward()
    with pytest.raises(AssertionError):
        mx.mod.PythonLossModule(data_names=("a", "b"))


def test_python_module_subclass_in_a_chain():
    """A parameter-free PythonModule between two modules: forward hands its outputs
    on, backward its input gradients, and the chain's update skips it."""

    class Double(mx.mod.PythonModule):
        def __init__(self):
            super().__init__(data_names=["in"], label_names=None, output_names=["twice"])

        def _compute_output_shapes(self):
            return [("twice", self.data_shapes[0][1])]

        def forward(self, data_batch, is_train=None):
            self._out = data_batch.data[0] * 2

        def get_outputs(self, merge_multi_context=True):
            return [self._out]

        def backward(self, out_grads=None):
            self._grad = out_grads[0] * 2

        def get_input_grads(self, merge_multi_context=True):
            return [self._grad]

    fc = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc")
    first = mx.mod.Module(fc, label_names=None)
    out = mx.sym.LinearRegressionOutput(mx.sym.var("in"), name="lro")
    last = mx.mod.Module(out, data_names=["in"], label_names=["lro_label"])
    double = Double()
    seq = mx.mod.SequentialModule().add(first).add(double, auto_wiring=True) \
        .add(last, take_labels=True, auto_wiring=True)
    seq.bind(data_shapes=[("data", (4, 2))], label_shapes=[("lro_label", (4, 3))])
    assert double.output_shapes == [("twice", (4, 3))]
    seq.init_params(mx.init.One())
    seq.init_optimizer(optimizer_params={"learning_rate": 0.1})
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    label = np.zeros((4, 3), np.float32)
    seq.forward(mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(label)]),
                is_train=True)
    y = 2 * x.sum(1, keepdims=True) * np.ones((1, 3), np.float32)   # biases start at 0
    np.testing.assert_allclose(seq.get_outputs()[0].asnumpy(), y)
    seq.backward()
    seq.update()
    # the same network as one symbol, doubling inside the graph, takes the same step
    whole = mx.mod.Module(mx.sym.LinearRegressionOutput(fc * 2, name="lro"),
                          label_names=["lro_label"])
    whole.bind(data_shapes=[("data", (4, 2))], label_shapes=[("lro_label", (4, 3))])
    whole.init_params(mx.init.One())
    whole.init_optimizer(optimizer_params={"learning_rate": 0.1})
    whole.forward_backward(mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(label)]))
    whole.update()
    want = whole.get_params()[0]["fc_weight"].asnumpy()
    assert not np.allclose(want, 1.0)
    np.testing.assert_allclose(seq.get_params()[0]["fc_weight"].asnumpy(), want, rtol=1e-5)


def test_python_module_bookkeeping_as_in_mxnet():
    """What mxnet 1.9.1's PythonModule / PythonLossModule do besides the arithmetic
    (the same test passes against mxnet's classes)."""
    seen = []
    loss = mx.mod.PythonLossModule(name="l", data_names=("x",), label_names=("y",),
                                   grad_func=lambda s, l: seen.append(l) or s)
    assert loss.data_names == ["x"] and loss._label_names == ["y"]   # tuples become lists
    assert loss.get_params() == ({}, {})
    assert loss.init_params() is None and loss.init_optimizer() is None
    assert loss.update() is None
    assert loss.output_shapes is None and loss.data_shapes is None
    # bound for prediction, without labels: forward keeps no label, the metric is untouched
    loss.bind(data_shapes=[("x", (2, 3))], for_training=False)
    assert loss.label_shapes is None and loss.output_shapes == [("l_output", (2, 3))]
    assert not loss.for_training and not loss.binded
    scores = mx.nd.array([[0, 1, 2], [2, 1, 0]])
    loss.forward(mx.io.DataBatch(data=[scores], label=[mx.nd.array([2, 0])]))
    assert loss._labels is None and loss.get_outputs()[0] is scores
    metric = mx.metric.create("acc")
    loss.update_metric(metric, [mx.nd.array([2, 0])])
    assert metric.num_inst == 0
    with pytest.raises(AssertionError):
        loss.backward()                               # not bound for training
    with pytest.raises(AssertionError):
        loss.get_outputs(merge_multi_context=False)
    with pytest.raises(AssertionError):
        loss.get_input_grads(merge_multi_context=False)
    # rebound for training (binded stays False, so no force_rebind is needed)
    loss.bind(data_shapes=[("x", (2, 3))], label_shapes=[("y", (2,))],
              inputs_need_grad=True)
    assert loss.for_training and loss.inputs_need_grad
    loss.forward(mx.io.DataBatch(data=[scores], label=[mx.nd.array([2, 0])]))
    loss.backward()
    assert seen[0].asnumpy().tolist() == [2, 0]
    np.testing.assert_array_equal(loss.get_input_grads()[0].asnumpy(), scores.asnumpy())
    loss.update_metric(metric, [mx.nd.array([2, 0])])
    assert metric.get() == ("accuracy", 1.0)
    with pytest.raises(AssertionError):
        mx.mod.PythonLossModule(grad_func="not callable")
    with pytest.raises(AssertionError):
        mx.mod.PythonLossModule(label_names=("a", "b"))
    unlabelled = mx.mod.PythonLossModule()
    unlabelled._label_names = None
    with pytest.raises(AssertionError):
        unlabelled.bind(data_shapes=[("data", (2, 3))], label_shapes=[("y", (2,))])


def test_python_module_refused_bind_changes_nothing():
    """symtriton checks every name before it records anything (mxnet 1.9.1 records
    for_training and the data shapes before it checks the labels)."""
    loss = mx.mod.PythonLossModule()
    loss.bind(data_shapes=[("data", (2, 3))], label_shapes=[("softmax_label", (2,))])
    with pytest.raises(AssertionError, match=r"label_shapes name \['lbl'\].*"
                                             r"label_names=\['softmax_label'\]"):
        loss.bind(data_shapes=[("data", (5, 3))], label_shapes=[("lbl", (5,))],
                  for_training=False)
    assert loss.for_training and loss.data_shapes == [("data", (2, 3))]
    assert loss.output_shapes == [("pyloss_output", (2, 3))]


class _Delegating(mx.mod.BaseModule):
    """A BaseModule subclass with no symbol of its own that runs an inner Module, as
    mxnet's stochastic-depth example's module does."""

    def __init__(self, symbol, data_names):
        super().__init__()
        self._inner = mx.mod.Module(symbol, data_names=data_names, label_names=None)
        self.binded = self.params_initialized = self.optimizer_initialized = False

    data_names = property(lambda self: self._inner.data_names)
    output_names = property(lambda self: self._inner.output_names)
    data_shapes = property(lambda self: self._inner.data_shapes)
    label_shapes = property(lambda self: self._inner.label_shapes)
    output_shapes = property(lambda self: self._inner.output_shapes)

    def get_params(self):
        return self._inner.get_params()

    def init_params(self, *args, **kwargs):
        self._inner.init_params(*args, **kwargs)
        self.params_initialized = True

    def bind(self, *args, **kwargs):
        self._inner.bind(*args, **kwargs)
        self.binded = True

    def init_optimizer(self, *args, **kwargs):
        self._inner.init_optimizer(*args, **kwargs)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        self._inner.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        self._inner.backward(out_grads=out_grads)

    def update(self):
        self._inner.update()

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        pass

    def get_outputs(self, merge_multi_context=True):
        return self._inner.get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        return self._inner.get_input_grads(merge_multi_context)


def test_a_chain_hands_its_parameters_to_modules_without_a_symbol(recwarn):
    """``fit`` ends each epoch with ``set_params`` of the whole chain's parameters: each
    module takes its own and, as in mxnet, no name is refused or warned about (mxnet's
    stochastic-depth example stopped here at its first epoch's end)."""
    hidden = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=4,
                                                     name="fc1"), act_type="relu")
    head = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("h"), num_hidden=2,
                                                      name="fc2"), name="softmax")
    first = _Delegating(hidden, ["data"])
    seq = mx.mod.SequentialModule().add(first).add(
        mx.mod.Module(head, data_names=["h"]), take_labels=True, auto_wiring=True)
    rng = np.random.RandomState(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=10, label_name="softmax_label")
    seq.fit(train, num_epoch=2, optimizer_params={"learning_rate": 0.1})
    args, _ = seq.get_params()
    assert sorted(args) == ["fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight"]
    # values from the chain's checkpoint reach each module; a name nobody holds is ignored
    given = {k: mx.nd.ones(v.shape) * (i + 1) for i, (k, v) in enumerate(sorted(args.items()))}
    seq.set_params(dict(given, stray=mx.nd.zeros((1,))), {})
    got, _ = seq.get_params()
    for k, v in given.items():
        np.testing.assert_array_equal(got[k].asnumpy(), v.asnumpy())
    assert not [w for w in recwarn if "ignoring" in str(w.message)]
