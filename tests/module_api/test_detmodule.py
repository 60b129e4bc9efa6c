"""A Module subclass written against mxnet 1.9.1 internals (in the style of mx-rcnn's
DetModule) runs with only its imports changed."""
import logging

import numpy as np

import module_api as mx                                    # was: import mxnet as mx
import module_api.io  # noqa: F401
import module_api.ndarray  # noqa: F401
from module_api import context as ctx                      # was: from mxnet import context
from module_api.initializer import Uniform                 # was: from mxnet.initializer
from module_api.module import Module                       # was: from mxnet.module import Module
from module_api.module.base_module import _parse_data_desc  # was: mxnet.module.base_module
from module_api.module.executor_group import DataParallelExecutorGroup  # was: mxnet.module...

# ---------------------------------------------------------------- user code (unchanged)


class DetModule(Module):
    """Fixes every parameter whose name contains one of ``fixed_param_prefix``, binds its
    own executor group, and initializes parameters its own way."""

    def __init__(self, symbol, data_names, label_names, logger=logging, context=ctx.cpu(),
                 work_load_list=None, fixed_param_prefix=None):
        super(DetModule, self).__init__(symbol, data_names, label_names, logger=logger,
                                        context=context, work_load_list=work_load_list)
        fixed_param_names = []
        if fixed_param_prefix is not None:
            for name in self._symbol.list_arguments():
                for prefix in fixed_param_prefix:
                    if prefix in name:
                        fixed_param_names.append(name)
        self._fixed_param_names = fixed_param_names
        self.init_calls = []

    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('Already binded, ignoring bind()')
            return
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        shared_group = None if shared_module is None else shared_module._exec_group
        self._exec_group = DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list, self._data_shapes,
            self._label_shapes, self._param_names, for_training, inputs_need_grad,
            shared_group, logger=self.logger, fixed_param_names=self._fixed_param_names,
            grad_req=grad_req, state_names=self._state_names)
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            self._arg_params = {name: mx.nd.zeros(arr[0].shape)
                                for name, arr in zip(self._param_names,
                                                     self._exec_group.param_arrays)}
            self._aux_params = {name: mx.nd.zeros(arr[0].shape)
                                for name, arr in zip(self._aux_names,
                                                     self._exec_group.aux_arrays)}

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        self.init_calls.append(dict(allow_missing=allow_missing, force_init=force_init,
                                    allow_extra=allow_extra))
        if self.params_initialized and not force_init:
            return
        assert self.binded, 'call bind before initializing the parameters'
        for name, arr in self._arg_params.items():
            if arg_params is not None and name in arg_params:
                arg_params[name].copyto(arr)
            elif name.endswith('_bias'):
                arr[:] = 0.0
            else:
                initializer(mx.init.InitDesc(name), arr)
        for name, arr in self._aux_params.items():
            if aux_params is not None and name in aux_params:
                aux_params[name].copyto(arr)
            else:
                initializer(mx.init.InitDesc(name), arr)
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


def test_detmodule_trains_with_imports_changed(monkeypatch):
    import module_api.initializer as _init
    # the aliases module_api re-exports (mx.nd, mx.init), for as long as it may not yet
    monkeypatch.setattr(mx, 'nd', getattr(mx, 'nd', mx.ndarray), raising=False)
    monkeypatch.setattr(mx, 'init', getattr(mx, 'init', _init), raising=False)
    # the fixed (never trained) body keeps its Xavier draw: unseeded, about one
    # draw in twelve leaves 8 ReLU features that do not separate the clusters
    mx.random.seed(0)
    rng = np.random.RandomState(0)
    centers = rng.randn(3, 4) * 3
    y = rng.randint(0, 3, size=48)
    x = (centers[y] + rng.randn(48, 4) * 0.3).astype(np.float32)
    it = mx.io.NDArrayIter(x, y.astype(np.float32), batch_size=12, label_name='cls_prob_label')
    mod = DetModule(_net(), data_names=['data'], label_names=['cls_prob_label'],
                    context=[mx.cpu(0), mx.cpu(1)], fixed_param_prefix=['conv_body'])
    assert mod._fixed_param_names == ['conv_body_weight', 'conv_body_bias']
    mod.fit(it, num_epoch=4, optimizer='sgd',
            optimizer_params={'learning_rate': 0.2, 'momentum': 0.9},
            initializer=mx.init.Xavier(), kvstore='local')
    # fit -> init_params(allow_missing=, force_init=) ; epoch end -> set_params ->
    # init_params(..., allow_extra=False): the 1.9.1 call pattern
    assert mod.init_calls[0] == dict(allow_missing=False, force_init=False, allow_extra=False)
    assert mod.init_calls[1] == dict(allow_missing=False, force_init=True, allow_extra=False)
    assert len(mod.init_calls) == 1 + 4
    arg, _ = mod.get_params()
    assert np.all(arg['conv_body_bias'].asnumpy() == 0)          # fixed: never updated
    assert mod._exec_group.grad_req['conv_body_weight'] == 'null'
    assert not np.all(arg['cls_score_bias'].asnumpy() == 0)
    acc = dict(mod.score(it, 'acc'))['accuracy']
    assert acc >= 0.9
