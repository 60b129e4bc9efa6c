"""``mx.mod.Module``: one Symbol run data-parallel over a list of contexts.

The executors, the batch slicing and everything compiled live in
``runtime.executor_group.DataParallelExecutorGroup``; this class keeps the
bookkeeping of the module API (which step has run, the host copy of the
parameters, the optimizer, updater and kvstore) and hands each call on to the
group. The private attributes are mxnet 1.9.1's (``_exec_group``,
``_param_names``, ``_arg_params``, ``_params_dirty``, ``_updater`` ...), since
``BucketingModule``, ``amp`` and user subclasses written against mxnet read them.
"""
from __future__ import annotations

import logging
import warnings

import numpy as np
import torch

from compiler.artifacts.atomic import atomic_write_bytes
from compiler.errors import MXNetError
from runtime import context as ctx
from runtime import threads
from runtime.executor_group import DataParallelExecutorGroup
from runtime.ndarray import torch_dtype
from runtime.updater import load_states_file

from .. import ndarray as nd
from ..initializer import InitDesc, Uniform
from ..io import DataDesc
from ..model_base import (_create_kvstore, _initialize_kvstore, _update_params,
                          _update_params_on_kvstore, checkpoint_files, checkpoint_writer,
                          load_checkpoint)
from .base_module import (BaseModule, ModuleStateError, _check_input_names,  # noqa: F401
                          _parse_data_desc, _require, _require_input_grads)

_LOG = logging.getLogger(__name__)


def _optimizers():
    """``runtime.optimizer``, imported on first use (it imports module_api pieces)."""
    from runtime import optimizer
    return optimizer


def _stype(arr):
    """Storage type of an NDArray; ``'default'`` for tensors and numpy arrays."""
    return getattr(arr, "stype", "default")


def _names(given):
    """A fresh list of the names in ``given`` (``None`` meaning none)."""
    return [] if given is None else list(given)


def _dense_tensor(value):
    """``value`` as a dense torch tensor (numpy and lists become float32)."""
    if _stype(value) != "default":
        value = value.tostype("default")
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(np.asarray(value, dtype=np.float32))


def _copyto(source, target):
    """Copy ``source`` into the parameter array ``target`` in place.

    Two sparse arrays of one storage type copy their stored pattern; a sparse
    ``target`` given a dense value keeps that value's non-zero part; a dense
    ``target`` takes the value cast to its own dtype and device.
    """
    if _stype(source) != "default" and _stype(source) == _stype(target):
        if source is not target:
            source.copyto(target)
        return
    value = _dense_tensor(source)
    if _stype(target) != "default":
        target[:] = value
        return
    if tuple(value.shape) != tuple(target.shape):
        raise ValueError(f"cannot copy an array of shape {tuple(value.shape)} into one "
                         f"of shape {tuple(target.shape)}")
    with torch.no_grad():
        target.copy_(value.detach().to(device=target.device, dtype=torch_dtype(target)))


def _checkpoint_paths(prefix, epoch):
    """The ``.params`` and ``.states`` file names of ``prefix`` at ``epoch``."""
    stem = f"{prefix}-{int(epoch):04d}"
    return stem + ".params", stem + ".states"


def _updater_keys(param_names, num_device, on_kvstore):
    """The optimizer's ``idx2name``.

    A kvstore that updates keys the optimizer by parameter position; a local
    updater sees one index per (parameter, device), ``position * num_device +
    device``. The dict is filled device by device, as mxnet fills it.
    """
    if on_kvstore:
        return dict(enumerate(param_names))
    return {pos * num_device + dev: name
            for dev in range(num_device) for pos, name in enumerate(param_names)}


def _batch_data_shapes(data_batch):
    """The data shapes ``forward`` is asked to run, as a tuple of tuples.

    A list of batches runs as one batch: their arrays must agree in shape, and
    the batch axis grows by the number of batches.
    """
    if not isinstance(data_batch, list):
        return tuple(tuple(arr.shape) for arr in data_batch.data)
    if not data_batch:
        raise MXNetError("forward: got an empty list of DataBatch; give one DataBatch "
                         "or a non-empty list of them")
    merged = []
    for pos, first in enumerate(data_batch[0].data):
        shape = tuple(first.shape)
        for other in data_batch[1:]:
            assert tuple(other.data[pos].shape) == shape, (
                "All data batches in a list need to have the same shape "
                f"(data array {pos}: {shape} vs. {tuple(other.data[pos].shape)})")
        merged.append((len(data_batch) * shape[0],) + shape[1:])
    return tuple(merged)


def _check_batch(mod, data_batch):
    """Each DataBatch carries one array per data name, agreeing with its provide_data."""
    batches = data_batch if isinstance(data_batch, list) else [data_batch]
    expected = mod._data_names
    for batch in batches:
        arrays = list(batch.data or [])
        if len(arrays) != len(expected):
            raise MXNetError(f"the DataBatch has {len(arrays)} data arrays, the module "
                             f"expects {len(expected)} ({', '.join(expected)})")
        for desc, arr in zip(getattr(batch, "provide_data", None) or [], arrays):
            name, shape = (desc.name, desc.shape) if hasattr(desc, "shape") else desc[:2]
            if tuple(shape) != tuple(arr.shape):
                raise MXNetError(f"DataBatch.provide_data gives '{name}' shape "
                                 f"{tuple(shape)} but its array has shape "
                                 f"{tuple(arr.shape)}")


class Module(BaseModule):
    """A module that runs one ``Symbol``, data-parallel over ``context``.

    Parameters
    ----------
    symbol : Symbol
        The network.
    data_names : list of str
        Arguments fed from ``DataBatch.data``; ``('data',)`` by default.
    label_names : list of str
        Arguments fed from ``DataBatch.label``; ``('softmax_label',)`` by default.
        A name the symbol lacks is warned about, not refused.
    logger : Logger
    context : Context or list of Context
        One executor per context; ``cpu()`` by default.
    work_load_list : list of number, optional
        Each context's relative share of a batch; equal shares by default.
    fixed_param_names : list of str, optional
        Parameters that are never updated (no gradient is computed for them).
    state_names : list of str, optional
        Inputs that are neither data nor labels (an RNN's carried state); they
        hold zeros until ``set_states``.
    group2ctxs : dict or list, optional
        Model parallelism: the context of each ``ctx_group`` attribute of the
        symbol (one dict for all contexts, or a list with one per context).
    compression_params : dict, optional
        Given to the kvstore's ``set_gradient_compression``.
    """

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=_LOG, context=ctx.cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None):
        super().__init__(logger=logger)
        self._symbol = symbol
        self._context = [context] if isinstance(context, ctx.Context) else context
        self._work_load_list = self._checked_work_load(work_load_list)
        self._group2ctxs = group2ctxs
        self._compression_params = compression_params
        self._take_input_names(symbol, _names(data_names), _names(label_names),
                               _names(state_names), _names(fixed_param_names))
        self._clear_parameters()
        self._clear_optimizer()
        self._grad_req = None
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    def _checked_work_load(self, work_load_list):
        """``work_load_list``, or equal shares; one entry per context."""
        if work_load_list is None:
            return [1] * len(self._context)
        assert len(work_load_list) == len(self._context), (
            f"work_load_list has {len(work_load_list)} entries but there are "
            f"{len(self._context)} contexts; give one share per context")
        return work_load_list

    def _take_input_names(self, symbol, data, label, state, fixed):
        """Check the input names against the symbol and record every name list.

        The parameters are the symbol's arguments that are not inputs.
        """
        for names, kind, strict in ((data, "data", True), (label, "label", False),
                                    (state, "state", True), (fixed, "fixed_param", True)):
            _check_input_names(symbol, names, kind, strict)
        inputs = set(data) | set(label) | set(state)
        self._data_names = data
        self._label_names = label
        self._state_names = state
        self._fixed_param_names = fixed
        self._param_names = [arg for arg in symbol.list_arguments() if arg not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()

    def _clear_parameters(self):
        """No host copy of the parameters yet."""
        self._arg_params = None
        self._aux_params = None
        self._params_dirty = False

    def _clear_optimizer(self):
        """No optimizer, kvstore, updater, nor states waiting to be loaded."""
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states = None
        self._preload_allow_pickle = False

    # ------------------------------------------------------------------ checkpoints
    @staticmethod
    def load(prefix, epoch, load_optimizer_states=False, allow_pickle=False, **kwargs):
        """Create a Module from a checkpoint.

        Parameters
        ----------
        prefix : str
            Reads ``prefix-symbol.json`` and ``prefix-%04d.params``.
        epoch : int
        load_optimizer_states : bool
            Also read ``prefix-%04d.states``; the states load when
            ``init_optimizer`` runs.
        allow_pickle : bool
            Accept a ``.states`` file mxnet wrote (a pickle, read through a loader
            that admits NDArrays and optimizers only).
        **kwargs
            Passed to ``Module(...)`` (``context``, ``data_names`` ...).

        Returns
        -------
        Module
            Not bound; its parameters count as initialized.
        """
        _, states_file = checkpoint_files(prefix, epoch, load_optimizer_states)
        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        mod = Module(symbol=symbol, **kwargs)
        mod._arg_params, mod._aux_params = arg_params, aux_params
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = states_file
            mod._preload_allow_pickle = allow_pickle
        return mod

    def save_checkpoint(self, prefix, epoch, save_optimizer_states=False, remove_amp_cast=True):
        """Write ``prefix-symbol.json``, ``prefix-%04d.params`` and, if asked,
        ``prefix-%04d.states``.

        The epoch's ``.params`` and ``.states`` form one unit: both go to temp
        files and ``.states`` is published first, so a save cut short leaves the
        whole checkpoint or no ``.params`` for the epoch
        (``mx.model.checkpoint_writer``).
        """
        self._symbol.save(f"{prefix}-symbol.json", remove_amp_cast=remove_amp_cast)
        params_file, states_file = _checkpoint_paths(prefix, epoch)
        with checkpoint_writer(prefix, epoch, save_optimizer_states) as (params_tmp, states_tmp):
            self.save_params(params_tmp)
            if save_optimizer_states:
                self.save_optimizer_states(states_tmp)
        _LOG.info('Saved checkpoint to "%s"', params_file)
        if save_optimizer_states:
            _LOG.info('Saved optimizer state to "%s"', states_file)

    def _reset_bind(self):
        """Forget the executors and the shapes they were bound for."""
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    # ------------------------------------------------------------------ descriptions
    @property
    def data_names(self):
        """Names of the data inputs."""
        return self._data_names

    @property
    def label_names(self):
        """Names of the label inputs."""
        return self._label_names

    @property
    def output_names(self):
        """Names of the symbol's outputs."""
        return self._output_names

    @property
    def data_shapes(self):
        """The data descriptors (``DataDesc``) the module is bound for."""
        _require(self, "data_shapes", "binded")
        return self._data_shapes

    @property
    def label_shapes(self):
        """The label descriptors, or ``None`` when bound without labels."""
        _require(self, "label_shapes", "binded")
        return self._label_shapes

    @property
    def output_shapes(self):
        """``[(name, shape)]`` of the outputs."""
        _require(self, "output_shapes", "binded")
        return self._exec_group.get_output_shapes()

    # ------------------------------------------------------------------ parameters
    def get_params(self):
        """Return ``(arg_params, aux_params)``, copied back from the devices first
        when an update or ``set_params`` changed them there."""
        _require(self, "get_params", "params_initialized")
        if self._params_dirty:
            self._sync_params_from_devices()
        return self._arg_params, self._aux_params

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Give every parameter and auxiliary state its first value.

        Parameters
        ----------
        initializer : Initializer
            Fills what ``arg_params`` / ``aux_params`` do not give.
        arg_params, aux_params : dict of str to NDArray, optional
            Values to copy. When a dict is given, a name it lacks raises
            ``RuntimeError('NAME is not presented')`` unless ``allow_missing``.
        allow_missing : bool
            Let ``initializer`` fill names the dicts lack.
        force_init : bool
            Initialize again even if already initialized.
        allow_extra : bool
            Names the module does not have are ignored either way, as in mxnet;
            without ``allow_extra`` a warning lists them.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        _require(self, "init_params", "binded",
                 hint="call bind before initializing the parameters")
        if not allow_extra:
            self._warn_unknown_names(arg_params, aux_params)

        attrs = self._symbol.attr_dict()
        # filling and copying open parallel regions as a training step does, so
        # they run under the thread policy's count (fewer on a busy machine)
        with threads.chosen_count():
            for held, given in ((self._arg_params, arg_params), (self._aux_params, aux_params)):
                for name in sorted(held):
                    desc = InitDesc(name, attrs.get(name))
                    self._fill_one(desc, held[name], given, initializer, allow_missing)
            self.params_initialized = True
            self._params_dirty = False
            self._exec_group.set_params(self._arg_params, self._aux_params,
                                        allow_extra=allow_extra)

    def _warn_unknown_names(self, arg_params, aux_params):
        """Warn about given names that are not parameters of this module.

        mxnet 1.9.1 skips them silently (a checkpoint with extra layers loads);
        the warning keeps a misspelt name from going unseen.
        """
        unknown = [name for given, held in ((arg_params, self._arg_params),
                                            (aux_params, self._aux_params))
                   for name in (given or {}) if name not in held]
        if unknown:
            warnings.warn(f"init_params: ignoring {sorted(unknown)}: not parameters of "
                          f"this module (allow_extra=True ignores them silently)",
                          stacklevel=3)

    @staticmethod
    def _fill_one(desc, target, given, initializer, allow_missing):
        """Set one parameter from ``given`` when it holds the name, else from
        ``initializer`` (a name ``given`` lacks needs ``allow_missing``)."""
        if given is not None and desc in given:
            if given[desc] is not target:      # the dict may hold the array itself
                _copyto(given[desc], target)
            return
        if given is not None:
            if not allow_missing:
                raise RuntimeError(f"{desc} is not presented (it is missing from the "
                                   f"given parameters; allow_missing=True initializes it)")
            if initializer is None:
                return
        initializer(desc, target)

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter and auxiliary state values.

        Without ``allow_missing`` this is ``init_params(initializer=None, ...)``;
        with it, the given values are copied to the devices as they are, and the
        host copy is refreshed from there when next read.
        """
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=False, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return
        self._exec_group.set_params(arg_params, aux_params, allow_extra=allow_extra)
        self._params_dirty = True       # the host dicts were not written
        self.params_initialized = True

    # ------------------------------------------------------------------ binding
    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Bind the symbol: build one executor per context.

        Parameters
        ----------
        data_shapes : list of DataDesc or (name, shape)
        label_shapes : list of DataDesc or (name, shape), optional
        for_training : bool
            Whether gradients are computed (``False`` for prediction).
        inputs_need_grad : bool
            Also compute gradients of the data (needs ``for_training``).
        force_rebind : bool
            Bind again even if bound (to switch from training to prediction,
            say); otherwise a second ``bind`` is ignored with a warning.
        shared_module : Module, optional
            A bound module with initialized parameters whose parameter arrays
            and memory this one shares (bucketing).
        grad_req : str, list of str or dict of str to str
            ``'write'``, ``'add'`` or ``'null'``, for all arguments or per name.
        """
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return
        assert for_training or not inputs_need_grad, (
            "inputs_need_grad=True needs for_training=True: input gradients come "
            "from the backward pass")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)

        self._exec_group = self._new_exec_group(self._shared_group(shared_module))
        self._total_exec_bytes = self._exec_group._total_exec_bytes
        self._place_params(shared_module)
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)
        self.binded = True

    def _shared_group(self, shared_module):
        """The executor group of ``shared_module``, or ``None`` without one."""
        if shared_module is None:
            return None
        assert isinstance(shared_module, Module), (
            f"shared_module must be a Module, not {type(shared_module).__name__}")
        assert shared_module.binded and shared_module.params_initialized, (
            "shared_module must be bound and have its parameters initialized "
            f"(binded={shared_module.binded}, "
            f"params_initialized={shared_module.params_initialized})")
        group = shared_module._exec_group
        assert len(group.execs) >= len(self._context), (
            f"shared_module runs on {len(group.execs)} contexts, fewer than this "
            f"module's {len(self._context)}")
        return group

    def _new_exec_group(self, shared_group):
        """The runtime's executor group for the current shapes and settings."""
        return DataParallelExecutorGroup(
            self._symbol, self._context, self._work_load_list,
            self._data_shapes, self._label_shapes, self._param_names,
            self.for_training, self.inputs_need_grad, shared_group,
            logger=self.logger, fixed_param_names=self._fixed_param_names,
            grad_req=self._grad_req, group2ctxs=self._group2ctxs,
            state_names=self._state_names)

    def _place_params(self, shared_module):
        """Give the new executors their parameters.

        A shared module lends its host dicts (the arrays are the same); a module
        bound again copies the values it holds; a first bind makes zero-filled
        host arrays of each parameter's shape, dtype and storage type.
        """
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            assert self._arg_params is None and self._aux_params is None, (
                "the module holds parameters but params_initialized is False")
            self._arg_params, self._aux_params = self._zero_host_params()

    def _zero_host_params(self):
        """Zero arrays shaped like the first device's parameters and aux states."""
        group = self._exec_group
        with threads.chosen_count():
            args = {name: nd.zeros(shape=arrays[0].shape, dtype=arrays[0].dtype,
                                   stype=_stype(arrays[0]))
                    for name, arrays in zip(self._param_names, group.param_arrays)}
            auxs = {name: nd.zeros(arrays[0].shape, dtype=arrays[0].dtype)
                    for name, arrays in zip(self._aux_names, group.aux_arrays)}
        return args, auxs

    def reshape(self, data_shapes, label_shapes=None):
        """Run on new input shapes; the parameters stay the same arrays.

        Shapes not seen before compile a new Program. A reshape that fails (shapes
        the parameters do not fit) leaves the module as it was.
        """
        _require(self, "reshape", "binded")
        data_descs, label_descs = _parse_data_desc(
            self.data_names, self.label_names, data_shapes, label_shapes)
        group = self._exec_group
        before = dict(group.__dict__)
        try:
            group.reshape(data_descs, label_descs)
        except Exception:
            group.__dict__.clear()
            group.__dict__.update(before)
            raise
        self._data_shapes, self._label_shapes = data_descs, label_descs

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Create the kvstore and install the optimizer.

        Parameters
        ----------
        kvstore : str or KVStore
            ``'local'``, ``'device'``, ``'dist_sync'`` ..., or a KVStore.
        optimizer : str or Optimizer
        optimizer_params : dict or sequence of pairs
            Arguments of a named optimizer. ``rescale_grad`` defaults to
            ``1/(batch_size * num_workers)``; an Optimizer built by the caller
            with another value draws mxnet's warning.
        force_init : bool
            Install again even if an optimizer is installed.
        """
        _require(self, "init_optimizer", "binded", "params_initialized")
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring...')
            return
        if self._params_dirty:
            self._sync_params_from_devices()

        kvstore, on_kvstore = _create_kvstore(kvstore, len(self._context), self._arg_params)
        optimizer = self._make_optimizer(optimizer, optimizer_params,
                                         self._grad_scale(kvstore), on_kvstore)
        self._optimizer = optimizer
        self._kvstore = kvstore
        self._update_on_kvstore = on_kvstore
        self._updater = None
        if kvstore:
            self._connect_kvstore(kvstore, on_kvstore)
        if not on_kvstore:
            self._updater = _optimizers().get_updater(optimizer)
        self.optimizer_initialized = True

        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states,
                                       allow_pickle=self._preload_allow_pickle)
            self._preload_opt_states = None

    def _grad_scale(self, kvstore):
        """The ``rescale_grad`` that averages over the global batch: the bound
        batch, times the workers when a synchronous distributed kvstore sums them."""
        total = self._exec_group.batch_size
        if kvstore and "dist" in kvstore.type and "_sync" in kvstore.type:
            total *= kvstore.num_workers
        return 1.0 / total

    def _make_optimizer(self, optimizer, optimizer_params, rescale_grad, on_kvstore):
        """The Optimizer to install: created by name, or the caller's own, checked."""
        opt = _optimizers()
        idx2name = _updater_keys(self._exec_group.param_names, len(self._context), on_kvstore)
        if isinstance(optimizer, str):
            kwargs = dict(optimizer_params)
            kwargs.setdefault("rescale_grad", rescale_grad)
            return opt.create(optimizer, sym=self.symbol, param_idx2name=idx2name, **kwargs)
        assert isinstance(optimizer, opt.Optimizer), (
            f"optimizer must be a name or an mx.optimizer.Optimizer, not "
            f"{type(optimizer).__name__}")
        if optimizer.rescale_grad != rescale_grad:
            warnings.warn(f"Optimizer created manually outside Module but rescale_grad is "
                          f"not normalized to 1.0/batch_size/num_workers "
                          f"({optimizer.rescale_grad} vs. {rescale_grad}). Is this intended?",
                          stacklevel=3)
        if not optimizer.idx2name:
            optimizer.idx2name = dict(idx2name)
        return optimizer

    def _connect_kvstore(self, kvstore, on_kvstore):
        """Hand the kvstore its compression, its optimizer (when it updates) and the
        initial parameter values."""
        if self._compression_params:
            kvstore.set_gradient_compression(self._compression_params)
        if on_kvstore:
            kvstore.set_optimizer(self._optimizer)
        _initialize_kvstore(kvstore=kvstore, param_arrays=self._exec_group.param_arrays,
                            arg_params=self._arg_params, param_names=self._param_names,
                            update_on_kvstore=on_kvstore)
        if "dist" in kvstore.type:
            self._params_dirty = True       # the devices now hold rank 0's values

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer, kvstore and updater (bucketing)."""
        _require(shared_module, "borrow_optimizer (of the shared module)",
                 "optimizer_initialized")
        for attr in ("_optimizer", "_kvstore", "_update_on_kvstore", "_updater"):
            setattr(self, attr, getattr(shared_module, attr))
        self.optimizer_initialized = True

    # ------------------------------------------------------------------ computation
    def forward(self, data_batch, is_train=None):
        """Run the forward pass.

        A batch whose data shapes differ from the bound ones reshapes the module
        first, as mxnet 1.9.1 does.

        Parameters
        ----------
        data_batch : DataBatch or list of DataBatch
            A list runs as one batch, the lists' arrays stacked along the batch axis.
        is_train : bool, optional
            Defaults to ``for_training``.
        """
        _require(self, "forward", "binded", "params_initialized")
        _check_batch(self, data_batch)
        wanted = _batch_data_shapes(data_batch)
        if wanted != tuple(tuple(desc.shape) for desc in self._data_shapes):
            self.reshape(self._data_descs_for(data_batch, wanted),
                         self._label_descs_for(data_batch))
        self._exec_group.forward(data_batch, is_train)

    def _data_descs_for(self, data_batch, shapes):
        """The batch's ``provide_data``, or the bound descriptors at ``shapes``."""
        provided = getattr(data_batch, "provide_data", None)
        if provided:
            return provided
        return [DataDesc(desc.name, shape, desc.dtype, desc.layout)
                for desc, shape in zip(self._data_shapes, shapes)]

    def _label_descs_for(self, data_batch):
        """The batch's ``provide_label``, else descriptors of its label arrays, else
        ``None`` (a batch without labels)."""
        provided = getattr(data_batch, "provide_label", None)
        if provided:
            return provided
        labels = getattr(data_batch, "label", None)
        if not labels:
            return None
        if self._label_shapes is None:
            # mxnet 1.9.1 fails here (zip over None) after a label-less reshape;
            # the names come from label_names instead
            return [DataDesc(name, tuple(arr.shape))
                    for name, arr in zip(self._label_names, labels)]
        return [DataDesc(desc.name, tuple(arr.shape), desc.dtype, desc.layout)
                for desc, arr in zip(self._label_shapes, labels)]

    def backward(self, out_grads=None):
        """Run the backward pass; ``out_grads`` for outputs that are not losses."""
        _require(self, "backward", "binded", "params_initialized")
        self._exec_group.backward(out_grads=out_grads)

    def update(self):
        """Apply the optimizer to the gradients of the last forward-backward.

        With updates on the kvstore, each gradient is pushed and the new weight
        pulled. Otherwise the gradients are summed over the devices (through the
        kvstore when there is one) and each device's parameters are updated by
        one ``updater(indices, grads, weights)`` call.
        """
        _require(self, "update", "binded", "params_initialized", "optimizer_initialized")
        self._params_dirty = True
        group = self._exec_group
        if self._update_on_kvstore:
            _update_params_on_kvstore(group.param_arrays, group.grad_arrays,
                                      self._kvstore, group.param_names)
            return
        _update_params(group.param_arrays, group.grad_arrays, updater=self._updater,
                       num_device=len(self._context), kvstore=self._kvstore,
                       param_names=group.param_names)

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the last forward, merged over the devices by default."""
        _require(self, "get_outputs", "binded", "params_initialized")
        return self._exec_group.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (bind with ``inputs_need_grad=True``)."""
        _require_input_grads(self, "get_input_grads")
        return self._exec_group.get_input_grads(merge_multi_context=merge_multi_context)

    def get_states(self, merge_multi_context=True):
        """The state inputs' arrays (per device with ``merge_multi_context=False``)."""
        _require(self, "get_states", "binded", "params_initialized")
        return self._exec_group.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set the state inputs from per-device arrays, or fill them with ``value``."""
        _require(self, "set_states", "binded", "params_initialized")
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Accumulate ``eval_metric`` over the outputs of the last forward."""
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def _sync_params_from_devices(self):
        """Copy the device parameters into ``_arg_params`` / ``_aux_params``.

        With updates on the kvstore, row_sparse parameters are pulled from it whole:
        the devices hold only the rows the last ``prepare`` asked for.
        """
        self._exec_group.get_params(self._arg_params, self._aux_params)
        if self._kvstore and self._update_on_kvstore:
            for name in sorted(self._arg_params):
                value = self._arg_params[name]
                if _stype(value) == "row_sparse":
                    every_row = nd.arange(0, value.shape[0], dtype="int64")
                    self._kvstore.row_sparse_pull(name, value, row_ids=every_row)
        self._params_dirty = False

    # ------------------------------------------------------------------ optimizer states
    def save_optimizer_states(self, fname):
        """Write the optimizer state to ``fname`` (a temp file, then a rename)."""
        _require(self, "save_optimizer_states", "optimizer_initialized")
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            atomic_write_bytes(fname, self._updater.get_states())

    def load_optimizer_states(self, fname, allow_pickle=False):
        """Read the optimizer state from ``fname``.

        The states are checked against the bound parameters before they replace
        the current ones: a file of another model (other shapes, parameters or
        dtypes) is refused with an :class:`MXNetError` naming the parameter and
        both shapes.

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
                             bound=self._state_slots())

    def _state_slots(self):
        """Where each saved state belongs: ``{key: (parameter name, weight)}``.

        The keys are the local updater's indices (``position * num_device +
        device``) and also the parameter names, since a kvstore's updater saves
        states by name and mxnet loads those into a local updater as they are.
        """
        group = self._exec_group
        num_device = len(self._context)
        slots = {}
        for pos, (name, arrays) in enumerate(zip(group.param_names, group.param_arrays)):
            slots[name] = (name, arrays[0])
            slots.update({pos * num_device + dev: (name, arr)
                          for dev, arr in enumerate(arrays)})
        return slots

    # ------------------------------------------------------------------ extras
    def install_monitor(self, mon):
        """Install a monitor on every executor."""
        _require(self, "install_monitor", "binded")
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Get ready for ``data_batch``: pull the rows of row_sparse parameters it needs.

        Parameters
        ----------
        data_batch : DataBatch
        sparse_row_id_fn : callable, optional
            ``sparse_row_id_fn(data_batch)`` gives ``{parameter name: row ids}``;
            those rows are pulled from the kvstore onto every device. Only
            meaningful when the kvstore updates the parameters.
        """
        _require(self, "prepare", "binded")
        if sparse_row_id_fn is None:
            return
        if not (self._kvstore and self._update_on_kvstore):
            warnings.warn(UserWarning("Parameters are not updated in the KVStore. "
                                      "No need to call sparse_row_id_fn."))
            return
        wanted = sparse_row_id_fn(data_batch)
        assert isinstance(wanted, dict), (
            "Expected dict output from sparse_row_id_fn (parameter name -> row ids), "
            f"got {type(wanted).__name__}")
        for name, row_ids in wanted.items():
            self._pull_rows(name, row_ids)

    def _pull_rows(self, name, row_ids):
        """Pull ``row_ids`` of the row_sparse parameter ``name`` onto every device."""
        names = self._exec_group.param_names
        if name not in names:
            raise ValueError(f"sparse_row_id_fn returned rows for '{name}', which is not "
                             f"a parameter of this module (parameters: {', '.join(names)})")
        pos = names.index(name)
        per_device = self._exec_group.param_arrays[pos]
        assert isinstance(per_device, (tuple, list))
        if _stype(per_device[0]) != "row_sparse":
            warnings.warn(UserWarning(f"{name}.stype is not 'row_sparse'. No need to "
                                      f"perform row_sparse_pull."))
            return
        self._kvstore.row_sparse_pull(name, per_device, row_ids=row_ids, priority=-pos)
