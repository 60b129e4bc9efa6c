"""``SequentialModule``: modules chained output to input (mxnet 1.9.1)."""
from __future__ import annotations

import copy
import logging

from ..initializer import Uniform
from .base_module import BaseModule, _require, _require_input_grads

_LOG = logging.getLogger(__name__)


class SequentialModule(BaseModule):
    """A container module that chains several modules together.

    Each module's outputs are the next one's data; ``add(mod,
    take_labels=True)`` gives a module the batch's labels, and
    ``auto_wiring=True`` renames the incoming data to the module's data names.
    """
    META_TAKE_LABELS = 'take_labels'
    META_AUTO_WIRING = 'auto_wiring'

    def __init__(self, logger=_LOG):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []
        self._label_shapes = None
        self._data_shapes = None
        self._meta_keys = set([getattr(SequentialModule, x)
                               for x in dir(SequentialModule) if x.startswith('META_')])

    def add(self, module, **kwargs):
        """Add a module to the chain; returns ``self``."""
        self._modules.append(module)
        for key in kwargs:
            assert key in self._meta_keys, ('Unknown meta "%s", a typo?' % key)
        self._metas.append(kwargs)
        # after adding new modules, we are reset back to raw states, needs
        # to bind, init_params, etc.
        self.binded = False
        self.params_initialized = False
        self.optimizer_initialized = False
        return self

    @property
    def data_names(self):
        """The first module's data names."""
        if len(self._modules) > 0:
            return self._modules[0].data_names
        return []

    @property
    def output_names(self):
        """The last module's output names."""
        if len(self._modules) > 0:
            return self._modules[-1].output_names
        return []

    @property
    def data_shapes(self):
        """The first module's data shapes."""
        _require(self, "data_shapes", "binded")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        """The label shapes (None when no module takes labels)."""
        _require(self, "label_shapes", "binded")
        return self._label_shapes

    @property
    def output_shapes(self):
        """The last module's output shapes."""
        _require(self, "output_shapes", "binded")
        return self._modules[-1].output_shapes

    def get_params(self):
        """All modules' parameters merged into two dicts."""
        _require(self, "get_params", "binded", "params_initialized")
        arg_params = dict()
        aux_params = dict()
        for module in self._modules:
            arg, aux = module.get_params()
            arg_params.update(arg)
            aux_params.update(aux)
        return (arg_params, aux_params)

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialize every module's parameters; parameter names must not repeat."""
        if self.params_initialized and not force_init:
            return
        _require(self, "init_params", "binded",
                 hint="call bind before initializing the parameters")
        given = set(arg_params or {}) | set(aux_params or {})
        symbols = [m.symbol for m in self._modules if m.symbol is not None]
        # names no module knows (each module reads its own part); a module without a
        # symbol (a PythonModule) knows no names
        if given and not allow_extra:
            known = set()
            for symbol in symbols:
                known.update(symbol.list_arguments(), symbol.list_auxiliary_states())
            for name in sorted(given):
                if name not in known:
                    raise ValueError(f'Find name "{name}" that is not in the arguments: '
                                     f'pass allow_extra=True to ignore extra parameters')
        for module in self._modules:
            module.init_params(initializer=initializer, arg_params=arg_params,
                               aux_params=aux_params, allow_missing=allow_missing,
                               force_init=force_init, allow_extra=True)

        def _check_name(known_names, new_names, modules, i):
            """Internal function to help checking duplicated names."""
            for name in new_names:
                assert name not in known_names, "Duplicated parameter names: " + \
                    ('name "%s" in layer %d (%s) is already ' % (name, i, type(modules[i]))) + \
                    ('used in layer %d (%s).' % (known_names[name],
                                                 type(modules[known_names[name]])))
                known_names[name] = i

        arg_names = dict()
        aux_names = dict()
        for i_layer, module in enumerate(self._modules):
            arg_params, aux_params = module.get_params()
            _check_name(arg_names, arg_params.keys(), self._modules, i_layer)
            _check_name(aux_names, aux_params.keys(), self._modules, i_layer)
        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Bind every module, each on the previous one's output shapes."""
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if inputs_need_grad:
            assert for_training is True
        assert shared_module is None, 'Shared module is not supported'
        assert len(self._modules) > 0, 'Attempting to bind an empty SequentialModule'

        self.binded = True
        # the same label shapes are used for all chained modules
        self._label_shapes = label_shapes
        my_data_shapes = data_shapes
        anybody_ever_needs_label = False
        for i_layer, module in enumerate(self._modules):
            meta = self._metas[i_layer]
            if SequentialModule.META_TAKE_LABELS in meta and \
                    meta[SequentialModule.META_TAKE_LABELS]:
                my_label_shapes = label_shapes
                anybody_ever_needs_label = True
            else:
                my_label_shapes = None
            my_inputs_need_grad = bool(inputs_need_grad or (for_training and i_layer > 0))
            if meta.get(SequentialModule.META_AUTO_WIRING, False):
                data_names = module.data_names
                assert len(data_names) == len(my_data_shapes)
                my_data_shapes = [(new_name, shape) for (new_name, (_, shape))
                                  in zip(data_names, my_data_shapes)]
            module.bind(data_shapes=my_data_shapes, label_shapes=my_label_shapes,
                        for_training=for_training, inputs_need_grad=my_inputs_need_grad,
                        force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            # the output of the previous module is the data of the next module
            my_data_shapes = module.output_shapes
        if not anybody_ever_needs_label:
            # then I do not need label either
            self._label_shapes = None

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer on every module."""
        _require(self, "init_optimizer", "binded", "params_initialized")
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring.')
            return
        for module in self._modules:
            module.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                                  optimizer_params=optimizer_params, force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        """Forward through the chain."""
        _require(self, "forward", "binded", "params_initialized")
        # make a shallow copy, just to maintain necessary properties (if any) like
        # bucket_key, pad, etc.
        data_batch = copy.copy(data_batch)
        for i_layer, module in enumerate(self._modules):
            module.forward(data_batch, is_train=is_train)
            if i_layer + 1 == len(self._modules):
                # the last layer, do not need to do the followings
                break
            data_batch.data = module.get_outputs()
            if hasattr(data_batch, 'provide_data'):
                # need to update this, in case the internal module is using bucketing
                # or whatever
                data_names = [x[0] for x in module.output_shapes]
                assert len(data_names) == len(data_batch.data)
                data_batch.provide_data = [(name, x.shape) for name, x in
                                           zip(data_names, data_batch.data)]

    def backward(self, out_grads=None):
        """Backward through the chain, last module first."""
        _require(self, "backward", "binded", "params_initialized")
        for i_layer, module in reversed(list(zip(range(len(self._modules)), self._modules))):
            module.backward(out_grads=out_grads)
            if i_layer == 0:
                break
            out_grads = module.get_input_grads()

    def update(self):
        """Update every module's parameters."""
        _require(self, "update", "binded", "params_initialized", "optimizer_initialized")
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context=True):
        """The last module's outputs."""
        _require(self, "get_outputs", "binded", "params_initialized")
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """The first module's input gradients."""
        _require_input_grads(self, "get_input_grads")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update the metric with the outputs of every module that takes labels."""
        _require(self, "update_metric", "binded", "params_initialized")
        for meta, module in zip(self._metas, self._modules):
            if SequentialModule.META_TAKE_LABELS in meta and \
                    meta[SequentialModule.META_TAKE_LABELS]:
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        """Install the monitor on every module."""
        _require(self, "install_monitor", "binded")
        for module in self._modules:
            module.install_monitor(mon)
