"""``Module``: a Symbol bound to one executor per context (mxnet 1.9.1 ``module.py``).

Every method, property, signature and private attribute of mxnet's
``Module`` is kept, so subclasses written against mxnet internals
(``_exec_group``, ``_param_names``, ``_arg_params``, ``_params_dirty`` ...)
run unchanged.
"""
from __future__ import annotations

import logging
import os
import warnings

import numpy as np
import torch

from compiler.artifacts.atomic import atomic_write_bytes
from compiler.errors import MXNetError
from runtime import context as ctx
from runtime import threads
from runtime.executor_group import DataParallelExecutorGroup
from runtime.updater import load_states_file

from .. import ndarray as nd
from ..initializer import InitDesc, Uniform
from ..io import DataDesc
from ..model_base import (_create_kvstore, _initialize_kvstore, _update_params,
                          _update_params_on_kvstore, checkpoint_files, checkpoint_writer,
                          load_checkpoint)
from .base_module import (BaseModule, ModuleStateError, _check_input_names,  # noqa: F401
                          _parse_data_desc, _require, _require_input_grads)
from runtime.ndarray import torch_dtype

_LOG = logging.getLogger(__name__)


def _opt():
    from runtime import optimizer as opt
    return opt


def _copyto(src, dst):
    """``src.copyto(dst)`` for NDArray, torch tensor, numpy or sparse sources (a sparse
    ``dst`` takes the source's stored pattern, or a dense source's non-zero part)."""
    src_stype = getattr(src, "stype", "default")
    if src_stype != "default" and src_stype == getattr(dst, "stype", "default"):
        if src is not dst:
            src.copyto(dst)
        return
    if src_stype != "default":
        src = src.tostype("default")
    if getattr(dst, "stype", "default") != "default":
        dst[:] = src if isinstance(src, torch.Tensor) else \
            torch.as_tensor(np.asarray(src, dtype=np.float32))
        return
    if not isinstance(src, torch.Tensor):
        src = torch.as_tensor(np.asarray(src, dtype=np.float32))
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError("cannot copy an array of shape %s into one of shape %s"
                         % (tuple(src.shape), tuple(dst.shape)))
    with torch.no_grad():
        dst.copy_(src.detach().to(device=dst.device, dtype=torch_dtype(dst)))


class Module(BaseModule):
    """A module that wraps a ``Symbol`` and one executor per context.

    Parameters
    ----------
    symbol : Symbol
    data_names : list of str
        Defaults to ``('data',)``.
    label_names : list of str
        Defaults to ``('softmax_label',)``.
    logger : Logger
    context : Context or list of Context
        Defaults to ``cpu()``.
    work_load_list : list of number
        Relative batch share per context; uniform by default.
    fixed_param_names : list of str
        Parameters that are never updated (no gradient is computed).
    state_names : list of str
        Inputs that are neither data nor labels; zero until ``set_states``.
    group2ctxs : dict or list, optional
        Model parallelism: the context of each ``ctx_group`` attribute in
        the symbol (a list per context in ``context``, or one list of dicts).
    compression_params : dict, optional
        Passed to the kvstore's ``set_gradient_compression``.
    """

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=_LOG, context=ctx.cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None):
        super().__init__(logger=logger)
        if isinstance(context, ctx.Context):
            context = [context]
        self._context = context
        if work_load_list is None:
            work_load_list = [1] * len(self._context)
        assert len(work_load_list) == len(self._context)
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._symbol = symbol

        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []

        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)

        arg_names = symbol.list_arguments()
        input_names = data_names + label_names + state_names
        self._param_names = [x for x in arg_names if x not in input_names]
        self._fixed_param_names = fixed_param_names
        self._aux_names = symbol.list_auxiliary_states()
        self._data_names = data_names
        self._label_names = label_names
        self._state_names = state_names
        self._output_names = symbol.list_outputs()

        self._arg_params = None
        self._aux_params = None
        self._params_dirty = False

        self._compression_params = compression_params
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states = None
        self._grad_req = None

        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, allow_pickle=False, **kwargs):
        """Create a module from a checkpoint (``prefix-symbol.json``, ``prefix-%04d.params``
        and, with ``load_optimizer_states``, ``prefix-%04d.states``, loaded by
        ``init_optimizer``).

        ``allow_pickle=True`` accepts a ``.states`` file mxnet wrote (a pickle, read
        through a loader that admits NDArrays and optimizers only). Other keyword
        arguments go to ``Module(...)``.
        """
        _, state_name = checkpoint_files(prefix, epoch, load_optimizer_states)
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = Module(symbol=sym, **kwargs)
        mod._arg_params = args
        mod._aux_params = auxs
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = state_name
            mod._preload_allow_pickle = allow_pickle
        return mod

    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        """Save ``prefix-symbol.json``, ``prefix-%04d.params`` and optionally
        ``prefix-%04d.states``.

        The epoch's ``.params`` and ``.states`` are one unit: both are written to
        temp files, then published ``.states`` first, so an interrupted save leaves
        the whole checkpoint or no ``.params`` for the epoch (see
        ``mx.model.checkpoint_writer``).
        """
        self._symbol.save('%s-symbol.json' % prefix, remove_amp_cast=remove_amp_cast)
        param_name = '%s-%04d.params' % (prefix, epoch)
        state_name = '%s-%04d.states' % (prefix, epoch)
        with checkpoint_writer(prefix, epoch, save_optimizer_states) as (params_tmp, states_tmp):
            self.save_params(params_tmp)
            if save_optimizer_states:
                self.save_optimizer_states(states_tmp)
        _LOG.info('Saved checkpoint to \"%s\"', param_name)
        if save_optimizer_states:
            _LOG.info('Saved optimizer state to \"%s\"', state_name)

    def _reset_bind(self):
        """Reset the bound state."""
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    @property
    def data_names(self):
        """A list of names for data required by this module."""
        return self._data_names

    @property
    def label_names(self):
        """A list of names for labels required by this module."""
        return self._label_names

    @property
    def output_names(self):
        """A list of names for the outputs of this module."""
        return self._output_names

    @property
    def data_shapes(self):
        """The data descriptors (``[(name, shape)]``)."""
        _require(self, "data_shapes", "binded")
        return self._data_shapes

    @property
    def label_shapes(self):
        """The label descriptors, or None when bound without labels."""
        _require(self, "label_shapes", "binded")
        return self._label_shapes

    @property
    def output_shapes(self):
        """``[(name, shape)]`` of the outputs."""
        _require(self, "output_shapes", "binded")
        return self._exec_group.get_output_shapes()

    # ------------------------------------------------------------------ parameters
    def get_params(self):
        """``(arg_params, aux_params)``, synced from the devices when they changed."""
        _require(self, "get_params", "params_initialized")
        if self._params_dirty:
            self._sync_params_from_devices()
        return (self._arg_params, self._aux_params)

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialize the parameters and auxiliary states.

        Parameters
        ----------
        initializer : Initializer
            Fills what ``arg_params`` / ``aux_params`` do not give.
        arg_params, aux_params : dict, optional
            Values to copy; a missing name raises ``RuntimeError('NAME is not
            presented')`` unless ``allow_missing``.
        allow_missing : bool
        force_init : bool
            Re-initialize even if already initialized.
        allow_extra : bool
            Names the module does not have are ignored either way, as in mxnet;
            without ``allow_extra`` a warning names them.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        _require(self, "init_params", "binded",
                 hint="call bind before initializing the parameters")
        if not allow_extra:
            # mxnet 1.9.1 ignores names the module does not have (a checkpoint with
            # extra layers loads); a warning names them, so a typo does not go unseen
            extra = sorted(name for given, known in ((arg_params, self._arg_params),
                                                     (aux_params, self._aux_params))
                           for name in (given or {}) if name not in known)
            if extra:
                warnings.warn(f"init_params: ignoring {extra}: not parameters of this "
                              f"module (allow_extra=True ignores them silently)", stacklevel=2)

        def _impl(name, arr, cache):
            """Internal helper for parameter initialization"""
            if cache is not None:
                if name in cache:
                    cache_arr = cache[name]
                    # just in case the cached array is just the target itself
                    if cache_arr is not arr:
                        _copyto(cache_arr, arr)
                else:
                    if not allow_missing:
                        raise RuntimeError("%s is not presented" % name)
                    if initializer is not None:
                        initializer(name, arr)
            else:
                initializer(name, arr)

        attrs = self._symbol.attr_dict()
        # filling and copying the parameters opens parallel regions as a step does:
        # the thread policy's count (fewer threads on a busy machine)
        with threads.chosen_count():
            for name, arr in sorted(self._arg_params.items()):
                desc = InitDesc(name, attrs.get(name, None))
                _impl(desc, arr, arg_params)
            for name, arr in sorted(self._aux_params.items()):
                desc = InitDesc(name, attrs.get(name, None))
                _impl(desc, arr, aux_params)

            self.params_initialized = True
            self._params_dirty = False

            # copy the initialized parameters to devices
            self._exec_group.set_params(self._arg_params, self._aux_params,
                                        allow_extra=allow_extra)

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter and aux state values.

        Without ``allow_missing`` this is ``init_params(initializer=None, ...)``;
        with it, the given values are copied to the devices directly.
        """
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
        # because we didn't update self._arg_params, they are dirty now.
        self._params_dirty = True
        self.params_initialized = True

    # ------------------------------------------------------------------ binding
    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Bind the symbol: one executor per context.

        Parameters
        ----------
        data_shapes : list of DataDesc or (name, shape)
        label_shapes : list of DataDesc or (name, shape), optional
        for_training : bool
        inputs_need_grad : bool
        force_rebind : bool
            Rebind even if already bound (otherwise a second bind is ignored
            with a warning).
        shared_module : Module, optional
            A bound, initialized module whose parameters (the same arrays)
            and memory this one shares (bucketing).
        grad_req : str, list of str or dict of str to str
        """
        # force rebinding is typically used when one want to switch from
        # training to prediction phase.
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        if not for_training:
            assert not inputs_need_grad

        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)

        if shared_module is not None:
            assert isinstance(shared_module, Module) and \
                shared_module.binded and shared_module.params_initialized
            shared_group = shared_module._exec_group
            assert len(shared_group.execs) >= len(self._context)
        else:
            shared_group = None

        self._exec_group = DataParallelExecutorGroup(self._symbol, self._context,
                                                     self._work_load_list, self._data_shapes,
                                                     self._label_shapes, self._param_names,
                                                     for_training, inputs_need_grad,
                                                     shared_group, logger=self.logger,
                                                     fixed_param_names=self._fixed_param_names,
                                                     grad_req=grad_req, group2ctxs=self._group2ctxs,
                                                     state_names=self._state_names)
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            # if the parameters are already initialized, we are re-binding
            # so automatically copy the already initialized params
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            assert self._arg_params is None and self._aux_params is None
            with threads.chosen_count():
                param_arrays = [nd.zeros(shape=x[0].shape, dtype=x[0].dtype,
                                         stype=getattr(x[0], "stype", "default"))
                                for x in self._exec_group.param_arrays]
                aux_arrays = [nd.zeros(x[0].shape, dtype=x[0].dtype)
                              for x in self._exec_group.aux_arrays]
            self._arg_params = {name: arr for name, arr in zip(self._param_names, param_arrays)}
            self._aux_params = {name: arr for name, arr in zip(self._aux_names, aux_arrays)}

        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)

        self.binded = True

    def reshape(self, data_shapes, label_shapes=None):
        """Reshape the module for new input shapes (a new Program is compiled
        for shapes not seen before; parameters stay the same arrays)."""
        _require(self, "reshape", "binded")
        new_data, new_label = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        group = self._exec_group
        saved = dict(group.__dict__)
        try:
            group.reshape(new_data, new_label)
        except Exception:
            group.__dict__.clear()       # a failed reshape leaves the module as it was
            group.__dict__.update(saved)
            raise
        self._data_shapes, self._label_shapes = new_data, new_label

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install and initialize the optimizer and the kvstore.

        ``rescale_grad`` defaults to ``1/(batch_size * num_workers)``; an
        optimizer built by the user with another value draws mxnet's warning.
        """
        _require(self, "init_optimizer", "binded", "params_initialized")
        opt = _opt()

        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring...')
            return

        if self._params_dirty:
            self._sync_params_from_devices()

        (kvstore, update_on_kvstore) = \
            _create_kvstore(kvstore, len(self._context), self._arg_params)

        batch_size = self._exec_group.batch_size
        if kvstore and 'dist' in kvstore.type and '_sync' in kvstore.type:
            batch_size *= kvstore.num_workers
        rescale_grad = 1.0 / batch_size

        idx2name = {}
        if update_on_kvstore:
            idx2name.update(enumerate(self._exec_group.param_names))
        else:
            for k in range(len(self._context)):
                idx2name.update({i * len(self._context) + k: n
                                 for i, n in enumerate(self._exec_group.param_names)})
        if isinstance(optimizer, str):
            optimizer_params = dict(optimizer_params)
            if 'rescale_grad' not in optimizer_params:
                optimizer_params['rescale_grad'] = rescale_grad
            optimizer = opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name,
                                   **optimizer_params)
        else:
            assert isinstance(optimizer, opt.Optimizer)
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn(
                    "Optimizer created manually outside Module but rescale_grad " +
                    "is not normalized to 1.0/batch_size/num_workers (%s vs. %s). " % (
                        optimizer.rescale_grad, rescale_grad) +
                    "Is this intended?", stacklevel=2)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()

        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = update_on_kvstore
        self._updater = None

        if kvstore:
            if self._compression_params:
                kvstore.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kvstore.set_optimizer(self._optimizer)
            # copy initialized local parameters to kvstore
            _initialize_kvstore(kvstore=kvstore,
                                param_arrays=self._exec_group.param_arrays,
                                arg_params=self._arg_params,
                                param_names=self._param_names,
                                update_on_kvstore=update_on_kvstore)
            if 'dist' in kvstore.type:
                self._params_dirty = True     # the devices now hold rank 0's values
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)

        self.optimizer_initialized = True

        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states,
                                       allow_pickle=getattr(self, "_preload_allow_pickle", False))
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer, kvstore and updater (bucketing)."""
        _require(shared_module, "borrow_optimizer (of the shared module)",
                 "optimizer_initialized")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    # ------------------------------------------------------------------ computation
    def forward(self, data_batch, is_train=None):
        """Forward computation; a batch (or list of batches) with new shapes reshapes
        the module first, as mxnet 1.9.1 does.

        Parameters
        ----------
        data_batch : DataBatch or list of DataBatch
        is_train : bool, optional
            Defaults to ``for_training``.
        """
        _check_ready(self, "forward")
        _check_batch(self, data_batch)

        curr_data_shapes = tuple(i.shape for i in self._data_shapes)
        if isinstance(data_batch, list):
            assert data_batch is not None, "Encountered empty data batch"
            new_data_shapes = []
            for i in range(len(data_batch[0].data)):
                shape = data_batch[0].data[i].shape
                for db in data_batch:
                    assert shape == db.data[i].shape, \
                        "All data batches in a list need to have the same shape"
                new_batch_size = len(data_batch) * shape[0]
                new_data_shapes.append((new_batch_size,) + tuple(shape[1:]))
            new_data_shapes = tuple(new_data_shapes)
        else:
            new_data_shapes = tuple(tuple(i.shape) for i in data_batch.data)

        if tuple(tuple(s) for s in curr_data_shapes) != new_data_shapes:
            if hasattr(data_batch, "provide_data") and data_batch.provide_data:
                new_dshape = data_batch.provide_data
            else:
                new_dshape = [DataDesc(i.name, shape, i.dtype, i.layout)
                              for i, shape in zip(self._data_shapes, new_data_shapes)]

            if hasattr(data_batch, "provide_label") and data_batch.provide_label:
                new_lshape = data_batch.provide_label
            elif hasattr(data_batch, "label") and data_batch.label:
                if self._label_shapes is not None:
                    new_lshape = [DataDesc(i.name, tuple(j.shape), i.dtype, i.layout)
                                  for i, j in zip(self._label_shapes, data_batch.label)]
                else:
                    # mxnet 1.9.1 fails here (zip over None) after a label-less
                    # reshape; take the names from label_names instead
                    new_lshape = [DataDesc(name, tuple(j.shape))
                                  for name, j in zip(self._label_names, data_batch.label)]
            else:
                new_lshape = None

            self.reshape(new_dshape, new_lshape)

        self._exec_group.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        """Backward computation; ``out_grads`` for outputs that are not losses."""
        _require(self, "backward", "binded", "params_initialized")
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        """Update the parameters with the gradients of the last forward-backward.

        On the kvstore, each gradient is pushed and the weight pulled; otherwise
        the gradients are summed over the devices (through the kvstore when
        there is one) and each device's parameters are updated by one
        ``updater(indices, grads, weights)`` call.
        """
        _require(self, "update", "binded", "params_initialized", "optimizer_initialized")

        self._params_dirty = True
        if self._update_on_kvstore:
            _update_params_on_kvstore(self._exec_group.param_arrays,
                                      self._exec_group.grad_arrays,
                                      self._kvstore, self._exec_group.param_names)
        else:
            _update_params(self._exec_group.param_arrays,
                           self._exec_group.grad_arrays,
                           updater=self._updater,
                           num_device=len(self._context),
                           kvstore=self._kvstore,
                           param_names=self._exec_group.param_names)

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the last forward (merged over devices by default)."""
        _require(self, "get_outputs", "binded", "params_initialized")
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients with respect to the data (bind with ``inputs_need_grad=True``)."""
        _require_input_grads(self, "get_input_grads")
        return self._exec_group.get_input_grads(merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context=True):
        """State arrays per device (``merge_multi_context=False``)."""
        _require(self, "get_states", "binded", "params_initialized")
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set the states from per-device arrays, or fill them with ``value``."""
        _require(self, "set_states", "binded", "params_initialized")
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Accumulate ``eval_metric`` on the outputs of the last forward."""
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def _sync_params_from_devices(self):
        """Copy the device parameters into ``_arg_params`` / ``_aux_params``; with
        updates on the kvstore, row_sparse parameters are pulled from it whole (the
        devices hold only the rows the last ``prepare`` pulled)."""
        self._exec_group.get_params(self._arg_params, self._aux_params)
        if self._kvstore and self._update_on_kvstore:
            for param_name, param_val in sorted(self._arg_params.items()):
                if getattr(param_val, "stype", "default") == "row_sparse":
                    row_ids = nd.arange(0, param_val.shape[0], dtype="int64")
                    self._kvstore.row_sparse_pull(param_name, param_val, row_ids=row_ids)
        self._params_dirty = False

    def save_optimizer_states(self, fname):
        """Save the optimizer (updater) state to ``fname`` (atomically: a temp file,
        then a rename)."""
        _require(self, "save_optimizer_states", "optimizer_initialized")
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            atomic_write_bytes(fname, self._updater.get_states())

    def load_optimizer_states(self, fname, allow_pickle=False):
        """Load the optimizer (updater) state from ``fname``.

        The states are checked against the bound parameters before they replace the
        current ones: a file saved from another model (other shapes, other
        parameters, other dtypes) is refused with an :class:`MXNetError` naming the
        parameter and both shapes.

        Parameters
        ----------
        fname : str
        allow_pickle : bool
            Also accept mxnet's ``.states`` (a pickle), through a loader that
            admits NDArrays, optimizers and lr schedulers only.
        """
        _require(self, "load_optimizer_states", "optimizer_initialized")
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname, allow_pickle=allow_pickle)
        else:
            load_states_file(self._updater, fname, allow_pickle=allow_pickle,
                             bound=self._bound_state_slots())

    def _bound_state_slots(self):
        """Updater index -> ``(parameter name, weight)``: mxnet's ``i * num_device + k``;
        and parameter name -> the same, since states saved from a kvstore's updater
        (several devices) are keyed by name, which mxnet loads into a local updater
        as they are."""
        group = self._exec_group
        n = len(self._context)
        slots = {}
        for i, (name, arrays) in enumerate(zip(group.param_names, group.param_arrays)):
            slots[name] = (name, arrays[0])
            for k, arr in enumerate(arrays):
                slots[i * n + k] = (name, arr)
        return slots

    def install_monitor(self, mon):
        """Install a monitor on all executors."""
        _require(self, "install_monitor", "binded")
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Prepare for a batch: ``sparse_row_id_fn(data_batch)`` gives ``{name: row_ids}``,
        and those rows of each row_sparse parameter are pulled from the kvstore onto
        every device (mxnet 1.9.1's ``Module.prepare``)."""
        _require(self, "prepare", "binded")
        if sparse_row_id_fn is not None:
            if not self._kvstore or not self._update_on_kvstore:
                warnings.warn(UserWarning("Parameters are not updated in the KVStore. "
                                          "No need to call sparse_row_id_fn."))
            else:
                row_ids = sparse_row_id_fn(data_batch)
                assert isinstance(row_ids, dict), "Expected dict output from sparse_row_id_fn"
                for param_name, row_id in row_ids.items():
                    param_idx = self._exec_group.param_names.index(param_name)
                    param_val = self._exec_group.param_arrays[param_idx]
                    assert isinstance(param_val, (tuple, list))
                    if getattr(param_val[0], "stype", "default") != "row_sparse":
                        warnings.warn(UserWarning("%s.stype is not 'row_sparse'. No need to "
                                                  "perform row_sparse_pull." % param_name))
                    else:
                        self._kvstore.row_sparse_pull(param_name, param_val, row_ids=row_id,
                                                      priority=-param_idx)


def _check_ready(mod, what):
    _require(mod, what, "binded", "params_initialized")


def _check_batch(mod, data_batch):
    """A DataBatch must carry one array per data name, agreeing with its provide_data."""
    for batch in (data_batch if isinstance(data_batch, list) else [data_batch]):
        data = list(batch.data or [])
        if len(data) != len(mod._data_names):
            raise MXNetError(f"the DataBatch has {len(data)} data arrays, the module expects "
                             f"{len(mod._data_names)} ({', '.join(mod._data_names)})")
        provided = getattr(batch, "provide_data", None)
        if provided:
            for desc, arr in zip(provided, data):
                name, shape = (desc.name, desc.shape) if hasattr(desc, "shape") else desc[:2]
                if tuple(shape) != tuple(arr.shape):
                    raise MXNetError(f"DataBatch.provide_data gives '{name}' shape "
                                     f"{tuple(shape)} but its array has shape "
                                     f"{tuple(arr.shape)}")
