"""A Module subclass written against mxnet 1.9.1's Module internals, as detection
code (mx-rcnn's DetModule) writes them, runs with only its imports changed.

The subclass overrides ``bind`` (building its own ``DataParallelExecutorGroup``
with fixed parameters, sharing another module's parameters) and ``init_params``
(zero biases, its own use of the initializer), and reads or sets the attributes
such code relies on: ``_symbol``, ``_context``, ``_work_load_list``,
``_param_names``, ``_aux_names``, ``_state_names``, ``_fixed_param_names``,
``_exec_group``, ``_arg_params``, ``_aux_params``, ``_params_dirty``, ``binded``,
``params_initialized``, ``for_training``, ``inputs_need_grad``, ``_grad_req``.
The same file, with ``mxnet`` imported instead, passes under mxnet 1.9.1.
"""
import logging

import numpy as np

import module_api as mx                                    # was: import mxnet as mx
from module_api.initializer import Uniform                 # was: from mxnet.initializer
from module_api.module import Module                       # was: from mxnet.module import Module
from module_api.module.base_module import _parse_data_desc  # was: mxnet.module.base_module
from module_api.module.executor_group import DataParallelExecutorGroup  # was: mxnet.module...

# ---------------------------------------------------------------- user code


class FrozenPrefixModule(Module):
    """A Module that never trains the parameters whose names contain one of
    ``frozen_prefixes``; it binds its executors and sets its parameters itself."""

    def __init__(self, symbol, data_names, label_names, frozen_prefixes=(), **kwargs):
        super().__init__(symbol, data_names, label_names, **kwargs)
        self._fixed_param_names = [arg for arg in self._symbol.list_arguments()
                                   if any(part in arg for part in frozen_prefixes)]
        self.init_calls = []

    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('bind() again without force_rebind: kept the first binding')
            return
        data_descs, label_descs = _parse_data_desc(self.data_names, self.label_names,
                                                   data_shapes, label_shapes)
        self._data_shapes, self._label_shapes = data_descs, label_descs
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._grad_req = grad_req
        other = shared_module._exec_group if shared_module is not None else None
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, data_descs, label_descs,
            self._param_names, for_training, inputs_need_grad, other, logger=self.logger,
            fixed_param_names=self._fixed_param_names, grad_req=grad_req,
            state_names=self._state_names)
        self.binded = True
        if shared_module is not None:        # the other module's host copies, shared
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
            self.params_initialized = True
        elif self.params_initialized:        # rebound: the devices get the host copies
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            self._arg_params = self._host_zeros(self._param_names,
                                                self._exec_group.param_arrays)
            self._aux_params = self._host_zeros(self._aux_names, self._exec_group.aux_arrays)

    @staticmethod
    def _host_zeros(names, per_device):
        return {name: mx.nd.zeros(arrays[0].shape) for name, arrays in zip(names, per_device)}

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        self.init_calls.append(dict(allow_missing=allow_missing, force_init=force_init,
                                    allow_extra=allow_extra))
        if self.params_initialized and not force_init:
            return
        assert self.binded, 'bind the module before init_params'
        for given, mine, zero_bias in ((arg_params, self._arg_params, True),
                                       (aux_params, self._aux_params, False)):
            for name, array in mine.items():
                if given and name in given:
                    given[name].copyto(array)
                elif zero_bias and name.endswith('_bias'):
                    array[:] = 0.0
                else:
                    initializer(mx.init.InitDesc(name), array)
        self.params_initialized = True
        self._params_dirty = False
        self._exec_group.set_params(self._arg_params, self._aux_params,
                                    allow_extra=allow_extra)

# ---------------------------------------------------------------- test


def _net():
    data = mx.sym.Variable('data')
    body = mx.sym.FullyConnected(data, num_hidden=8, name='conv_body')
    body = mx.sym.Activation(body, act_type='relu')
    cls = mx.sym.FullyConnected(body, num_hidden=3, name='cls_score')
    return mx.sym.SoftmaxOutput(cls, name='cls_prob')


def _clusters():
    rng = np.random.RandomState(0)
    centers = rng.randn(3, 4) * 3
    y = rng.randint(0, 3, size=48)
    x = (centers[y] + rng.randn(48, 4) * 0.3).astype(np.float32)
    return mx.io.NDArrayIter(x, y.astype(np.float32), batch_size=12,
                             label_name='cls_prob_label')


def _trained():
    # the fixed (never trained) body keeps its Xavier draw: unseeded, about one
    # draw in twelve leaves 8 ReLU features that do not separate the clusters
    mx.random.seed(0)
    it = _clusters()
    mod = FrozenPrefixModule(_net(), data_names=['data'], label_names=['cls_prob_label'],
                             context=[mx.cpu(0), mx.cpu(1)], frozen_prefixes=['conv_body'],
                             logger=logging)
    mod.fit(it, num_epoch=4, optimizer='sgd',
            optimizer_params={'learning_rate': 0.2, 'momentum': 0.9},
            initializer=mx.init.Xavier(), kvstore='local')
    return mod, it


def test_subclass_trains_with_imports_changed():
    mod, it = _trained()
    assert mod._fixed_param_names == ['conv_body_weight', 'conv_body_bias']
    # fit -> init_params(allow_missing=, force_init=) ; epoch end -> set_params ->
    # init_params(..., allow_extra=False): the 1.9.1 call pattern
    assert mod.init_calls[0] == dict(allow_missing=False, force_init=False, allow_extra=False)
    assert mod.init_calls[1] == dict(allow_missing=False, force_init=True, allow_extra=False)
    assert len(mod.init_calls) == 1 + 4
    arg, _ = mod.get_params()
    assert np.all(arg['conv_body_bias'].asnumpy() == 0)          # fixed: never updated
    assert mod._exec_group.grad_req['conv_body_weight'] == 'null'
    assert not np.all(arg['cls_score_bias'].asnumpy() == 0)
    assert dict(mod.score(it, 'acc'))['accuracy'] >= 0.9


def test_subclass_shares_and_rebinds(caplog):
    mod, it = _trained()
    accuracy = dict(mod.score(it, 'acc'))['accuracy']
    infer = FrozenPrefixModule(_net(), data_names=['data'], label_names=['cls_prob_label'],
                               context=[mx.cpu(0), mx.cpu(1)], frozen_prefixes=['conv_body'],
                               logger=logging)
    infer.bind(it.provide_data, it.provide_label, for_training=False, shared_module=mod)
    assert infer.params_initialized and infer._arg_params is mod._arg_params
    assert not infer.for_training and infer._grad_req == 'write'
    assert dict(infer.score(it, 'acc'))['accuracy'] == accuracy
    with caplog.at_level(logging.WARNING):
        infer.bind(it.provide_data, it.provide_label, for_training=False)
    assert 'kept the first binding' in caplog.text
    # a forced rebind, parameters already known: set_params copies them in
    infer.bind(it.provide_data, it.provide_label, for_training=False, force_rebind=True)
    assert dict(infer.score(it, 'acc'))['accuracy'] == accuracy
