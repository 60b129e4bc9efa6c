"""``BucketingModule``: one ``Module`` per bucket key, sharing parameters,
gradients, the optimizer and internal memory (mxnet 1.9.1 ``bucketing_module.py``).

``sym_gen(bucket_key)`` returns ``(symbol, data_names, label_names)`` and is
called under a fresh :class:`compiler.frontend.name.NameManager`, so automatically named
operators get the same names in every bucket. The default bucket is bound by
``bind``; every other bucket is bound on first use by ``switch_bucket`` with
``shared_module=`` the *default* bucket's module (mxnet #5133), so its
parameter, gradient and auxiliary arrays are the default bucket's tensors and its
internal buffers come from the default bucket's memory pool. Returning to a
bucket already seen is a dict lookup: no bind, no compile. A bucket whose
inputs are larger than the default bucket's grows the shared pool; that draws
a warning, since users are told to make the default bucket the largest.

``save_checkpoint`` writes mxnet's layout (``prefix-%04d.params``,
``prefix-KEY-symbol.json`` per bucket, ``prefix.buckets``) and, in addition,
``prefix-symbol.json`` holding the *default* bucket's symbol (mxnet #5289:
never the symbol of whichever bucket happens to be current), plus
``prefix-%04d.states`` with ``save_optimizer_states=True``.
"""
from __future__ import annotations

import logging
import os
import warnings

import numpy as np

from compiler import symbol as sym
from compiler.frontend.name import NameManager
from runtime import context as ctx

from .. import ndarray as nd
from ..initializer import Uniform
from ..model_base import checkpoint_files, checkpoint_writer, load_params
from .base_module import BaseModule, _check_input_names, _require, _require_input_grads
from .module import Module

_LOG = logging.getLogger(__name__)


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _input_numel(shapes):
    """Total element count of ``[(name, shape)]`` / DataDesc lists (None -> 0)."""
    total = 0
    for desc in shapes or []:
        shape = desc.shape if hasattr(desc, "shape") else desc[1]
        total += _numel(shape)
    return total


def _pool_bytes(module):
    """Bytes held by the memory pools of ``module``'s executors (distinct pools once)."""
    if module is None or module._exec_group is None:
        return 0
    seen, total = set(), 0
    for exe in module._exec_group.execs:
        pool = getattr(exe, "_pool", None)
        if pool is not None and id(pool) not in seen:
            seen.add(id(pool))
            total += pool.nbytes()
    return total


class BucketingModule(BaseModule):
    """A module that switches between symbols by the ``bucket_key`` of each batch.

    Parameters
    ----------
    sym_gen : function
        Called with a bucket key, returns ``(symbol, data_names, label_names)``.
    default_bucket_key : str (or any python object)
        The key of the default bucket; make it the largest bucket, whose
        memory the others share.
    logger : Logger
    context : Context or list of Context
        Defaults to ``cpu()``.
    work_load_list : list of number
        Defaults to ``None``, a uniform workload.
    fixed_param_names : list of str
        Parameters that are never updated.
    state_names : list of str
        Inputs that are neither data nor label; zero until ``set_states``.
    group2ctxs : dict of str to context or list of context, or list of dict
        mxnet's ``ctx_group`` placement.
    compression_params : dict
        Gradient compression, passed to the kvstore.
    """

    def __init__(self, sym_gen, default_bucket_key=None, logger=_LOG,
                 context=ctx.cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None):
        super().__init__(logger=logger)

        assert default_bucket_key is not None
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen

        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []

        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)

        self._compression_params = compression_params
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._context = context
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs

        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None
        self._preload_opt_states = None

    def _reset_bind(self):
        """Internal utility function to reset binding."""
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    def _call_sym_gen(self, *args, **kwargs):
        """``sym_gen`` under a fresh name scope (same auto names in every bucket)."""
        with NameManager():
            return self._sym_gen(*args, **kwargs)

    def _module_kwargs(self):
        return dict(logger=self.logger, context=self._context,
                    work_load_list=self._work_load_list,
                    fixed_param_names=self._fixed_param_names,
                    state_names=self._state_names,
                    group2ctxs=self._group2ctxs,
                    compression_params=self._compression_params)

    # ------------------------------------------------------------------ symbol information
    @property
    def data_names(self):
        """A list of names for data required by this module."""
        if self.binded:
            return self._curr_module.data_names
        _, data_names, _ = self._call_sym_gen(self._default_bucket_key)
        return data_names

    @property
    def label_names(self):
        """A list of names for labels required by this module."""
        if self.binded:
            return self._curr_module.label_names
        _, _, label_names = self._call_sym_gen(self._default_bucket_key)
        return label_names

    @property
    def output_names(self):
        """A list of names for the outputs of this module."""
        if self.binded:
            return self._curr_module.output_names
        symbol, _, _ = self._call_sym_gen(self._default_bucket_key)
        return symbol.list_outputs()

    @property
    def data_shapes(self):
        """Data shapes of the current bucket (``[(name, shape)]``)."""
        _require(self, "data_shapes", "binded")
        return self._curr_module.data_shapes

    @property
    def label_shapes(self):
        """Label shapes of the current bucket, or None when bound without labels."""
        _require(self, "label_shapes", "binded")
        return self._curr_module.label_shapes

    @property
    def output_shapes(self):
        """Output shapes of the current bucket (``[(name, shape)]``)."""
        _require(self, "output_shapes", "binded")
        return self._curr_module.output_shapes

    @property
    def symbol(self):
        """The symbol of the current bucket being used."""
        _require(self, "symbol", "binded")
        return self._curr_module.symbol

    # ------------------------------------------------------------------ parameters
    def get_params(self):
        """``(arg_params, aux_params)``: the parameters shared by every bucket."""
        _require(self, "get_params", "params_initialized")
        self._curr_module._params_dirty = self._params_dirty
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter and aux state values (shared by every bucket).

        Without ``allow_missing`` this is ``init_params(initializer=None, ...)``.
        """
        if not allow_missing:
            kwargs = {"allow_extra": True} if allow_extra else {}
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init, **kwargs)
            return

        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return

        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing,
                                     force_init=force_init, allow_extra=allow_extra)

        # because we didn't update self._arg_params, they are dirty now.
        self._params_dirty = True
        self.params_initialized = True

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialize the parameters (those of the current bucket, which all share)."""
        if self.params_initialized and not force_init:
            return
        _require(self, "init_params", "binded",
                 hint="call bind before initializing the parameters")
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params,
                                      aux_params=aux_params, allow_missing=allow_missing,
                                      force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context=True):
        """States of the current bucket (see ``Module.get_states``)."""
        _require(self, "get_states", "binded", "params_initialized")
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set the current bucket's states from arrays, or fill them with ``value``."""
        _require(self, "set_states", "binded", "params_initialized")
        self._curr_module.set_states(states, value)

    # ------------------------------------------------------------------ binding
    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Set up the buckets and bind the executors of the default bucket.

        Other buckets are bound by ``switch_bucket`` (from ``forward`` /
        ``prepare``) when a batch with their key first arrives.

        Parameters
        ----------
        data_shapes : list of (str, tuple)
            For the default bucket's symbol.
        label_shapes : list of (str, tuple)
            For the default bucket's symbol.
        for_training : bool
        inputs_need_grad : bool
        force_rebind : bool
        shared_module : BucketingModule
            Not supported (must be None), as in mxnet.
        grad_req : str, list of str, dict of str to str
        """
        # in case we already initialized params, keep it
        if self.params_initialized:
            arg_params, aux_params = self.get_params()

        # force rebinding is typically used when one want to switch from
        # training to prediction phase.
        if force_rebind:
            self._reset_bind()

        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return

        assert shared_module is None, 'shared_module for BucketingModule is not supported'

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.binded = True
        self._grad_req = grad_req

        symbol, data_names, label_names = self._call_sym_gen(self._default_bucket_key)
        if self._default_bucket_key not in self._buckets:
            module = Module(symbol, data_names, label_names, **self._module_kwargs())
        else:
            module = self._buckets[self._default_bucket_key]
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=self._grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module

        # copy back saved params, if already initialized
        if self.params_initialized:
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make ``bucket_key`` the current bucket, binding it on first use.

        A new bucket's module is bound with ``shared_module=`` the default
        bucket's module: the same parameter / gradient / aux tensors, the
        default bucket's memory pool and optimizer. A bucket seen before is
        looked up, nothing is bound or compiled.

        Parameters
        ----------
        bucket_key : str (or any python object)
        data_shapes : list of (str, tuple)
            Typically ``data_batch.provide_data``.
        label_shapes : list of (str, tuple)
            Typically ``data_batch.provide_label``.
        """
        _require(self, "switch_bucket", "binded",
                 hint="call bind before switching bucket")
        if bucket_key not in self._buckets:
            symbol, data_names, label_names = self._call_sym_gen(bucket_key)
            module = Module(symbol, data_names, label_names, **self._module_kwargs())
            self._bind_bucket(bucket_key, module, data_shapes, label_shapes)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        else:
            module = self._buckets[bucket_key]
            if not module.binded:
                self._bind_bucket(bucket_key, module, data_shapes, label_shapes)
                if self._monitor is not None:
                    module.install_monitor(self._monitor)

        self._curr_module = self._buckets[bucket_key]
        self._curr_bucket_key = bucket_key

    def _bind_bucket(self, bucket_key, module, data_shapes, label_shapes):
        """Bind a non-default bucket's module sharing the default bucket's module."""
        default = self._buckets[self._default_bucket_key]
        pool_before = _pool_bytes(default)
        default_numel = _input_numel(default.data_shapes)
        new_numel = _input_numel(data_shapes)
        if new_numel > default_numel:
            self.logger.warning(
                "BucketingModule: bucket %r has larger inputs (%d elements) than the default "
                "bucket %r (%d elements); its memory cannot all come from the default bucket's "
                "pool, which grows. Make the default bucket the largest one.",
                bucket_key, new_numel, self._default_bucket_key, default_numel)
        module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                    self._curr_module.inputs_need_grad,
                    force_rebind=False, shared_module=default,
                    grad_req=self._grad_req)
        grown = _pool_bytes(default) - pool_before
        if grown > 0 and new_numel <= default_numel:
            self.logger.info("BucketingModule: bucket %r grew the shared memory pool by %d "
                             "bytes", bucket_key, grown)

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),),
                       force_init=False):
        """Install the optimizer on the current bucket; every other bucket borrows it
        (one optimizer, one updater state, one kvstore for all buckets)."""
        _require(self, "init_optimizer", "binded", "params_initialized")
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring.')
            return

        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params,
                                         force_init=force_init)
        # a distributed kvstore has just put rank 0's values on the devices
        self._params_dirty = self._params_dirty or self._curr_module._params_dirty
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)

        self.optimizer_initialized = True

        if self._preload_opt_states is not None:
            self._curr_module.load_optimizer_states(
                self._preload_opt_states,
                allow_pickle=getattr(self, "_preload_allow_pickle", False))
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module):
        """Use ``shared_module``'s optimizer in every bucket."""
        for mod in self._buckets.values():
            mod.borrow_optimizer(shared_module)
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname):
        """Save the optimizer state shared by all buckets."""
        _require(self, "save_optimizer_states", "optimizer_initialized")
        self._curr_module.save_optimizer_states(fname)

    def load_optimizer_states(self, fname, allow_pickle=False):
        """Load the optimizer state shared by all buckets (``allow_pickle``: also
        mxnet's pickled ``.states``, see ``Module.load_optimizer_states``)."""
        _require(self, "load_optimizer_states", "optimizer_initialized")
        self._curr_module.load_optimizer_states(fname, allow_pickle=allow_pickle)

    # ------------------------------------------------------------------ computation
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Prepare for a batch: bind its bucket if new, then switch back."""
        # perform bind if haven't done so
        _require(self, "prepare", "binded", "params_initialized")
        bucket_key = data_batch.bucket_key
        original_bucket_key = self._curr_bucket_key
        data_shapes = data_batch.provide_data
        label_shapes = data_batch.provide_label
        self.switch_bucket(bucket_key, data_shapes, label_shapes)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        # switch back
        self.switch_bucket(original_bucket_key, None, None)

    def forward(self, data_batch, is_train=None):
        """Switch to ``data_batch.bucket_key`` and run its forward (a new batch size
        reshapes that bucket's module, as ``Module.forward`` does).

        Parameters
        ----------
        data_batch : DataBatch
        is_train : bool
            Defaults to ``for_training``.
        """
        _require(self, "forward", "binded", "params_initialized")
        data_shapes, label_shapes = data_batch.provide_data, data_batch.provide_label
        known = self._buckets.get(data_batch.bucket_key)
        if not data_shapes and (known is None or not known.binded):
            # mxnet needs provide_data to bind a new bucket; derive it from the arrays
            _, data_names, label_names = self._call_sym_gen(data_batch.bucket_key)
            data_shapes = [(n, tuple(a.shape)) for n, a in zip(data_names, data_batch.data)]
            if label_shapes is None and data_batch.label:
                label_shapes = [(n, tuple(a.shape))
                                for n, a in zip(label_names, data_batch.label)]
        self.switch_bucket(data_batch.bucket_key, data_shapes, label_shapes)
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        """Backward computation of the current bucket."""
        _require(self, "backward", "binded", "params_initialized")
        self._curr_module.backward(out_grads=out_grads)

    def update(self):
        """Update the (shared) parameters with the current bucket's gradients."""
        _require(self, "update", "binded", "params_initialized", "optimizer_initialized")
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the last forward (of the current bucket)."""
        _require(self, "get_outputs", "binded", "params_initialized")
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients with respect to the inputs (bind with ``inputs_need_grad=True``)."""
        _require_input_grads(self, "get_input_grads")
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Accumulate ``eval_metric`` on the current bucket's outputs."""
        _require(self, "update_metric", "binded", "params_initialized")
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        """Install a monitor on every bucket's executors (and on buckets bound later)."""
        _require(self, "install_monitor", "binded")
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False, save_optimizer_states=False):
        """Save the parameters and the symbols of the buckets.

        Writes ``prefix-%04d.params``, ``prefix-symbol.json`` (the *default*
        bucket's symbol, so ``mx.model.load_checkpoint`` / ``Module.load`` read
        it), ``prefix-KEY-symbol.json`` for every bucket and ``prefix.buckets``
        (mxnet's layout, int keys), and with ``save_optimizer_states``
        ``prefix-%04d.states``.
        """
        assert len(self._buckets) > 0, "Empty BucketingModule cannot be saved"
        param_name = "%s-%04d.params" % (prefix, epoch)
        default = self._buckets.get(self._default_bucket_key)
        default_symbol = (default.symbol if default is not None
                          else self._call_sym_gen(self._default_bucket_key)[0])
        default_symbol.save("%s-symbol.json" % prefix, remove_amp_cast=remove_amp_cast)
        for bucket_key, mod in self._buckets.items():
            mod.symbol.save("%s-%s-symbol.json" % (prefix, bucket_key),
                            remove_amp_cast=remove_amp_cast)
        keys = list(self._buckets.keys())
        if all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys):
            nd.save("%s.buckets" % prefix, nd.array(keys, dtype=np.int32))
        # the epoch's .params and .states as one unit (see mx.model.checkpoint_writer)
        with checkpoint_writer(prefix, epoch, save_optimizer_states) as (params_tmp, states_tmp):
            self.save_params(params_tmp)
            if save_optimizer_states:
                self.save_optimizer_states(states_tmp)
        _LOG.info('Saved checkpoint to "%s"', param_name)
        if save_optimizer_states:
            _LOG.info('Saved optimizer state to "%s"', "%s-%04d.states" % (prefix, epoch))

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None,
             load_optimizer_states=False, allow_pickle=False, **kwargs):
        """Create a BucketingModule from a checkpoint written by ``save_checkpoint``.

        Parameters
        ----------
        prefix : str
        epoch : int
        sym_gen : function
            The ``sym_gen`` used when saving.
        default_bucket_key : str (or any python object)
        load_optimizer_states : bool
            Restore ``prefix-%04d.states`` at ``init_optimizer``.
        allow_pickle : bool
            Also accept a ``.states`` file mxnet wrote (a pickle; see
            ``Module.load_optimizer_states``).
        **kwargs
            ``logger``, ``context``, ``work_load_list``, ``fixed_param_names``,
            ``state_names``, ``group2ctxs``, ``compression_params``.
        """
        assert sym_gen is not None, \
            "sym_gen is required for loading BucketingModule"
        assert default_bucket_key is not None, \
            "default_bucket_key is required for loading BucketingModule"
        _, state_name = checkpoint_files(prefix, epoch, load_optimizer_states, symbol=False)
        bucketing_mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        buckets_file = "%s.buckets" % prefix
        if os.path.exists(buckets_file):
            buckets = nd.load(buckets_file)
            buckets = [int(k) for k in np.asarray(buckets[0].asnumpy()).astype('int32').ravel()]
        else:
            buckets = [default_bucket_key]
        for bucket_key in buckets:
            _, data_names, label_names = bucketing_mod._call_sym_gen(bucket_key)
            fname = "%s-%s-symbol.json" % (prefix, bucket_key)
            if not os.path.exists(fname) and bucket_key == default_bucket_key:
                fname = "%s-symbol.json" % prefix
            symbol = sym.load(fname)
            bucketing_mod._buckets[bucket_key] = Module(symbol, data_names, label_names,
                                                        **kwargs)
            if bucket_key == default_bucket_key:
                bucketing_mod._curr_module = bucketing_mod._buckets[bucket_key]
        if bucketing_mod._curr_module is None:
            symbol, data_names, label_names = bucketing_mod._call_sym_gen(default_bucket_key)
            bucketing_mod._curr_module = Module(symbol, data_names, label_names, **kwargs)
            bucketing_mod._buckets[default_bucket_key] = bucketing_mod._curr_module
        arg_params, aux_params = load_params(prefix, epoch)
        bucketing_mod._curr_module._arg_params = arg_params
        bucketing_mod._curr_module._aux_params = aux_params
        bucketing_mod._curr_module.params_initialized = True
        bucketing_mod.params_initialized = True
        if load_optimizer_states:
            bucketing_mod._preload_opt_states = state_name
            bucketing_mod._preload_allow_pickle = allow_pickle   # mxnet's pickled .states
        return bucketing_mod

    @staticmethod
    def load_dict(sym_dict=None, sym_gen=None, default_bucket_key=None, arg_params=None,
                  aux_params=None, **kwargs):
        """Create a BucketingModule from ``{bucket_key: symbol}`` and shared
        ``arg_params`` / ``aux_params``."""
        assert sym_dict is not None, \
            "sym_dict needs to be provided for BucketingModule.load_dict"
        assert arg_params is not None, \
            "arg_params need to be provided for BucketingModule.load_dict"
        assert aux_params is not None, \
            "aux_params need to be provided for BucketingModule.load_dict"
        assert default_bucket_key is not None, \
            "default_bucket_key needs to be provided for BucketingModule.load_dict"

        bucketing_mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for bucket_key, loaded_sym in sym_dict.items():
            _, data_names, label_names = bucketing_mod._call_sym_gen(default_bucket_key)
            bucketing_mod._buckets[bucket_key] = Module(loaded_sym, data_names, label_names,
                                                        **kwargs)
            if bucket_key == default_bucket_key:
                bucketing_mod._curr_module = bucketing_mod._buckets[bucket_key]
        bucketing_mod._curr_module._arg_params = arg_params
        bucketing_mod._curr_module._aux_params = aux_params
        bucketing_mod._curr_module.params_initialized = True
        bucketing_mod.params_initialized = True
        return bucketing_mod
