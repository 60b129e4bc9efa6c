"""``SequentialModule``: modules run as a chain, each one's outputs the next one's data
(mxnet 1.9.1's ``mx.mod.SequentialModule``)."""
from __future__ import annotations

import copy
import logging

from compiler.errors import MXNetError

from ..initializer import Uniform
from .base_module import BaseModule, _require, _require_input_grads

_LOG = logging.getLogger(__name__)


class SequentialModuleError(MXNetError, AssertionError):
    """A chain that cannot be built or bound as asked. mxnet 1.9.1 asserts in these
    places; an ``AssertionError`` too, so code written against mxnet still catches it."""


class SequentialModule(BaseModule):
    """Modules run one after another: the first reads the batch's data, every later one
    the outputs of the module before it, and ``backward`` hands each module's input
    gradients back to the one before.

    ``add(module, take_labels=True)`` also gives that module the batch's labels (its
    outputs then update the metric); ``add(module, auto_wiring=True)`` binds the arrays
    coming in under that module's own data names.
    """
    META_TAKE_LABELS = 'take_labels'
    META_AUTO_WIRING = 'auto_wiring'
    _OPTIONS = (META_TAKE_LABELS, META_AUTO_WIRING)

    def __init__(self, logger=_LOG):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []            # per module: the options given to add()
        self._label_shapes = None

    def add(self, module, **kwargs):
        """Append ``module`` to the chain (options: ``take_labels``, ``auto_wiring``);
        returns ``self``. The chain is then neither bound nor initialised."""
        unknown = sorted(set(kwargs) - set(self._OPTIONS))
        if unknown:
            raise SequentialModuleError(f"SequentialModule.add: unknown option(s) {unknown}; "
                                        f"the options are {list(self._OPTIONS)}")
        self._modules.append(module)
        self._metas.append(dict(kwargs))
        self.binded = self.params_initialized = self.optimizer_initialized = False
        return self

    def _option(self, i, name) -> bool:
        return bool(self._metas[i].get(name, False))

    @property
    def data_names(self):
        """The first module's data names ([] for an empty chain)."""
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self):
        """The last module's output names ([] for an empty chain)."""
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self):
        """The first module's data shapes."""
        _require(self, "data_shapes", "binded")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        """The label shapes bound, or None when no module takes labels."""
        _require(self, "label_shapes", "binded")
        return self._label_shapes

    @property
    def output_shapes(self):
        """The last module's output shapes."""
        _require(self, "output_shapes", "binded")
        return self._modules[-1].output_shapes

    def get_params(self):
        """Every module's parameters, in one ``(arg_params, aux_params)`` pair."""
        _require(self, "get_params", "binded", "params_initialized")
        merged_args, merged_aux = {}, {}
        for module in self._modules:
            args, aux = module.get_params()
            merged_args.update(args)
            merged_aux.update(aux)
        return merged_args, merged_aux

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise every module's parameters (each takes its own from ``arg_params``
        / ``aux_params``); no two modules may hold a parameter of the same name."""
        if self.params_initialized and not force_init:
            return
        _require(self, "init_params", "binded",
                 hint="call bind before initializing the parameters")
        # each module takes its own names from the chain's; as in mxnet, a name no
        # module holds is ignored (a BaseModule subclass in the chain need not have a
        # symbol to ask), so no module warns about the others' names
        for module in self._modules:
            module.init_params(initializer=initializer, arg_params=arg_params,
                               aux_params=aux_params, allow_missing=allow_missing,
                               force_init=force_init, allow_extra=True)
        self._check_distinct_parameters()
        self.params_initialized = True

    def _check_distinct_parameters(self):
        """Raise where two modules hold an argument (or two an auxiliary state) of one
        name: the merged parameters would keep only one of them."""
        for kind in (0, 1):                         # arguments, then auxiliary states
            holder = {}
            for i, module in enumerate(self._modules):
                for name in module.get_params()[kind]:
                    j = holder.setdefault(name, i)
                    if j != i:
                        raise SequentialModuleError(
                            f"SequentialModule: parameter '{name}' of module {i} "
                            f"({type(module).__name__}) is already module {j}'s "
                            f"({type(self._modules[j]).__name__}); parameter names must "
                            f"differ across the chain")

    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Bind the modules in order, each on the output shapes of the one before;
        every module after the first computes its input gradients when training, the
        first where ``inputs_need_grad`` asks (then ``get_input_grads`` gives them)."""
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if inputs_need_grad and not for_training:
            raise SequentialModuleError("SequentialModule.bind: inputs_need_grad=True needs "
                                        "for_training=True")
        if shared_module is not None:
            raise SequentialModuleError("SequentialModule.bind: shared_module is not "
                                        "supported")
        if not self._modules:
            raise SequentialModuleError("SequentialModule.bind: the chain is empty; add() "
                                        "modules first")
        shapes = data_shapes
        for i, module in enumerate(self._modules):
            if self._option(i, self.META_AUTO_WIRING):
                names = module.data_names
                if len(names) != len(shapes):
                    raise SequentialModuleError(
                        f"SequentialModule.bind: module {i} has {len(names)} data inputs "
                        f"{names} and receives {len(shapes)} arrays; auto_wiring needs as "
                        f"many")
                shapes = [(name, shape) for name, (_, shape) in zip(names, shapes)]
            module.bind(data_shapes=shapes,
                        label_shapes=label_shapes if self._option(i, self.META_TAKE_LABELS)
                        else None,
                        for_training=for_training,
                        inputs_need_grad=bool(inputs_need_grad or (for_training and i > 0)),
                        force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            shapes = module.output_shapes
        takes_labels = any(self._option(i, self.META_TAKE_LABELS)
                           for i in range(len(self._modules)))
        self._label_shapes = label_shapes if takes_labels else None
        # kept here too (mxnet 1.9.1 does not, and its get_input_grads always refuses)
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self.binded = True

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
        """Run the chain forward on ``data_batch``."""
        _require(self, "forward", "binded", "params_initialized")
        # a copy whose data is replaced link by link; the caller's batch stays as it is,
        # and whatever else it carries (bucket_key, pad) goes along
        batch = copy.copy(data_batch)
        last = len(self._modules) - 1
        for i, module in enumerate(self._modules):
            module.forward(batch, is_train=is_train)
            if i == last:
                break
            batch.data = module.get_outputs()
            if hasattr(batch, 'provide_data'):
                # what the next module is told it receives (a bucketing module reads it)
                batch.provide_data = [(name, array.shape) for (name, _), array
                                      in zip(module.output_shapes, batch.data)]

    def backward(self, out_grads=None):
        """Run the chain backward, the last module first."""
        _require(self, "backward", "binded", "params_initialized")
        grads = out_grads
        for i in range(len(self._modules) - 1, -1, -1):
            self._modules[i].backward(out_grads=grads)
            if i > 0:
                grads = self._modules[i].get_input_grads()

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
        """Update ``eval_metric`` with the outputs of every module that takes labels."""
        _require(self, "update_metric", "binded", "params_initialized")
        for i, module in enumerate(self._modules):
            if self._option(i, self.META_TAKE_LABELS):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        """Install ``mon`` on every module."""
        _require(self, "install_monitor", "binded")
        for module in self._modules:
            module.install_monitor(mon)
