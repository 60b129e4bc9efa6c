"""``BucketingModule``: a family of ``Module``s, one per bucket key, that train
one set of weights.

Each batch names its bucket (``data_batch.bucket_key``, e.g. a sequence
length). ``sym_gen(key)`` builds that bucket's network as
``(symbol, data_names, label_names)``; it always runs inside a new
:class:`compiler.frontend.name.NameManager`, so unnamed operators are numbered
from zero in every bucket and their parameters match by name.

Memory. ``bind`` binds the default bucket only. A bucket first seen later is
bound against the default bucket's module (``shared_module=``, mxnet #5133):
its weights, gradients and aux states *are* the default bucket's tensors, and
its internal buffers are carved from the default bucket's pool, so the default
bucket should be the largest (a larger bucket grows the pool and draws a
warning). A bucket seen before is a dict lookup: nothing is bound and nothing
compiled, since each bucket's Program is compiled once, under its own cache key.

Checkpoints. ``save_checkpoint`` keeps mxnet's files (``prefix-%04d.params``,
one ``prefix-KEY-symbol.json`` per bucket, ``prefix.buckets``) and adds
``prefix-symbol.json`` with the default bucket's symbol (mxnet #5289: not the
symbol of whichever bucket ran last) and, when asked, ``prefix-%04d.states``.
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


# --------------------------------------------------------------------- helpers
def _as_list(names):
    """``names`` as a fresh list; None is the empty list."""
    return [] if names is None else list(names)


def _elements_in(shapes):
    """How many elements ``[(name, shape)]`` or ``[DataDesc]`` describe (None: 0)."""
    count = 0
    for entry in shapes or ():
        dims = entry.shape if hasattr(entry, "shape") else entry[1]
        count += int(np.prod([int(d) for d in dims], dtype=np.int64))
    return count


def _pool_nbytes(module):
    """Bytes in the buffer pools of ``module``'s executors, each pool counted once."""
    group = getattr(module, "_exec_group", None)
    if group is None:
        return 0
    pools = {}
    for exe in group.execs:
        pool = getattr(exe, "_pool", None)
        if pool is not None:
            pools[id(pool)] = pool
    return sum(pool.nbytes() for pool in pools.values())


def _shapes_from_arrays(names, arrays):
    """``[(name, shape)]`` read off a batch's arrays."""
    return [(name, tuple(arr.shape)) for name, arr in zip(names, arrays)]


def _saved_bucket_keys(prefix, default_bucket_key):
    """The bucket keys a checkpoint lists in ``prefix.buckets`` (integers only,
    as mxnet writes them); just the default key when the file is absent."""
    listing = "%s.buckets" % prefix
    if not os.path.exists(listing):
        return [default_bucket_key]
    keys = np.asarray(nd.load(listing)[0].asnumpy()).astype("int32").ravel()
    return [int(k) for k in keys]


def _bucket_symbol_file(prefix, bucket_key, default_bucket_key):
    """``prefix-KEY-symbol.json``; for the default bucket, ``prefix-symbol.json``
    stands in when a checkpoint (e.g. a ``Module``'s) has no per-bucket file."""
    per_bucket = "%s-%s-symbol.json" % (prefix, bucket_key)
    if bucket_key == default_bucket_key and not os.path.exists(per_bucket):
        return "%s-symbol.json" % prefix
    return per_bucket


def _all_int_keys(keys):
    return all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys)


class BucketingModule(BaseModule):
    """Train and run a network whose symbol depends on each batch's bucket key.

    Parameters
    ----------
    sym_gen : callable
        ``sym_gen(bucket_key) -> (symbol, data_names, label_names)``.
    default_bucket_key : str or any hashable
        The bucket bound by ``bind``. Every other bucket borrows its memory, so
        make it the largest.
    logger : logging.Logger
    context : Context or list of Context
        Devices to run on (``cpu()`` by default).
    work_load_list : list of float, optional
        Share of each batch per device; uniform when None.
    fixed_param_names : list of str, optional
        Parameters the optimizer leaves alone.
    state_names : list of str, optional
        Inputs that are neither data nor label (see ``set_states``).
    group2ctxs : dict or list of dict, optional
        Where each ``ctx_group`` runs, as for ``Module``.
    compression_params : dict, optional
        Gradient compression settings handed to the kvstore.
    """

    def __init__(self, sym_gen, default_bucket_key=None, logger=_LOG,
                 context=ctx.cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None):
        super().__init__(logger=logger)
        assert default_bucket_key is not None, \
            "BucketingModule needs default_bucket_key: the key of its largest bucket"
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen

        fixed_param_names = _as_list(fixed_param_names)
        state_names = _as_list(state_names)
        self._check_default_symbol(fixed_param_names, state_names)

        self._context = context
        self._work_load_list = work_load_list
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._group2ctxs = group2ctxs
        self._compression_params = compression_params

        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None
        self._preload_opt_states = None
        self._preload_allow_pickle = False

    def _check_default_symbol(self, fixed_param_names, state_names):
        """Check the names given against the default bucket's symbol."""
        symbol, data_names, label_names = self._call_sym_gen(self._default_bucket_key)
        _check_input_names(symbol, _as_list(data_names), "data", True)
        _check_input_names(symbol, _as_list(label_names), "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)

    def _call_sym_gen(self, bucket_key):
        """``sym_gen(bucket_key)`` in a name scope of its own, so automatic names
        (``fullyconnected0``) are the same in every bucket."""
        with NameManager():
            return self._sym_gen(bucket_key)

    def _module_kwargs(self):
        """The settings every bucket's ``Module`` is built with."""
        return {"logger": self.logger, "context": self._context,
                "work_load_list": self._work_load_list,
                "fixed_param_names": self._fixed_param_names,
                "state_names": self._state_names, "group2ctxs": self._group2ctxs,
                "compression_params": self._compression_params}

    def _new_bucket_module(self, bucket_key):
        """An unbound ``Module`` for ``bucket_key``'s symbol."""
        symbol, data_names, label_names = self._call_sym_gen(bucket_key)
        return Module(symbol, data_names, label_names, **self._module_kwargs())

    def _reset_bind(self):
        """Forget every bucket (``bind(force_rebind=True)``)."""
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    # ------------------------------------------------------------- names and shapes
    @property
    def data_names(self):
        """Data input names (the current bucket's; the default bucket's before bind)."""
        if self.binded:
            return self._curr_module.data_names
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def label_names(self):
        """Label input names (the current bucket's; the default bucket's before bind)."""
        if self.binded:
            return self._curr_module.label_names
        return self._call_sym_gen(self._default_bucket_key)[2]

    @property
    def output_names(self):
        """Output names (the current bucket's; the default bucket's before bind)."""
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self):
        """``[(name, shape)]`` of the current bucket's data."""
        _require(self, "data_shapes", "binded")
        return self._curr_module.data_shapes

    @property
    def label_shapes(self):
        """``[(name, shape)]`` of the current bucket's labels; None without labels."""
        _require(self, "label_shapes", "binded")
        return self._curr_module.label_shapes

    @property
    def output_shapes(self):
        """``[(name, shape)]`` of the current bucket's outputs."""
        _require(self, "output_shapes", "binded")
        return self._curr_module.output_shapes

    @property
    def symbol(self):
        """The current bucket's symbol."""
        _require(self, "symbol", "binded")
        return self._curr_module.symbol

    # ------------------------------------------------------------- parameters
    def get_params(self):
        """Return ``(arg_params, aux_params)``, the weights all buckets share."""
        _require(self, "get_params", "params_initialized")
        # the current module copies from its executors only when told they moved on
        self._curr_module._params_dirty = self._params_dirty
        arg_and_aux = self._curr_module.get_params()
        self._params_dirty = False
        return arg_and_aux

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise the shared weights through the current bucket's module.

        Parameters are as for ``Module.init_params``; a second call without
        ``force_init`` does nothing.
        """
        if self.params_initialized and not force_init:
            return
        _require(self, "init_params", "binded",
                 hint="call bind before initializing the parameters")
        self._curr_module.init_params(
            initializer=initializer, arg_params=arg_params, aux_params=aux_params,
            allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Give the shared weights these values.

        Without ``allow_missing`` this is ``init_params(initializer=None, ...)``:
        every parameter must be given. With it, the current bucket's module takes
        what is there and keeps the rest.
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
        _require(self, "set_params", "binded",
                 hint="call bind before setting parameters with allow_missing=True")
        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing,
                                     force_init=force_init, allow_extra=allow_extra)
        # the values went to the executors: what get_params returns must be reread
        self._params_dirty = True
        self.params_initialized = True

    def get_states(self, merge_multi_context=True):
        """The current bucket's state inputs (see ``Module.get_states``)."""
        _require(self, "get_states", "binded", "params_initialized")
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        """Set the current bucket's state inputs from ``states`` or to ``value``."""
        _require(self, "set_states", "binded", "params_initialized")
        self._curr_module.set_states(states, value)

    # ------------------------------------------------------------- binding
    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Bind the default bucket; other buckets bind when their first batch comes.

        Parameters
        ----------
        data_shapes : list of (str, tuple) or DataDesc
            Inputs of the default bucket's symbol.
        label_shapes : list of (str, tuple) or DataDesc, optional
        for_training : bool
        inputs_need_grad : bool
        force_rebind : bool
            Drop every bound bucket first (the weights are kept), e.g. to go from
            training to prediction.
        shared_module : None
            Must be None: a BucketingModule cannot borrow another's memory.
        grad_req : str, list of str or dict of str to str
            Used for every bucket.
        """
        kept = self.get_params() if self.params_initialized else None
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return
        assert shared_module is None, 'shared_module for BucketingModule is not supported'

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        key = self._default_bucket_key
        # a module load() made for this key is bound rather than built again
        default = self._buckets.get(key)
        if default is None:
            default = self._new_bucket_module(key)
        default.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                     force_rebind=False, shared_module=None, grad_req=grad_req)
        self._buckets[key] = default
        self._curr_module = default
        self._curr_bucket_key = key
        self.binded = True
        if kept is not None:
            self.set_params(*kept)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make ``bucket_key`` the current bucket, binding it the first time.

        Parameters
        ----------
        bucket_key : str or any hashable
        data_shapes : list of (str, tuple) or DataDesc
            The bucket's data shapes (``data_batch.provide_data``); read only when
            the bucket is bound here.
        label_shapes : list of (str, tuple) or DataDesc, optional
            Likewise for the labels (``data_batch.provide_label``).
        """
        _require(self, "switch_bucket", "binded", hint="call bind before switching bucket")
        module = self._buckets.get(bucket_key)
        if module is None:
            module = self._new_bucket_module(bucket_key)
        if not module.binded:
            self._bind_bucket(bucket_key, module, data_shapes, label_shapes)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        self._curr_module = module
        self._curr_bucket_key = bucket_key

    def _bind_bucket(self, bucket_key, module, data_shapes, label_shapes):
        """Bind ``module`` on the default bucket's weights, gradients and pool."""
        default = self._buckets[self._default_bucket_key]
        own, default_size = _elements_in(data_shapes), _elements_in(default.data_shapes)
        if own > default_size:
            self.logger.warning(
                "BucketingModule: bucket %r has larger inputs (%d elements) than the default "
                "bucket %r (%d elements); its memory cannot all come from the default bucket's "
                "pool, which grows. Make the default bucket the largest one.",
                bucket_key, own, self._default_bucket_key, default_size)
        pool_before = _pool_nbytes(default)
        module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                    self._curr_module.inputs_need_grad, force_rebind=False,
                    shared_module=default, grad_req=self._grad_req)
        growth = _pool_nbytes(default) - pool_before
        if growth > 0 and own <= default_size:
            self.logger.info("BucketingModule: bucket %r grew the shared memory pool by %d "
                             "bytes", bucket_key, growth)

    def _batch_shapes(self, data_batch):
        """``(data_shapes, label_shapes)`` to switch to ``data_batch``'s bucket.

        mxnet binds a new bucket from ``provide_data``; a batch without it
        gets the shapes of its arrays instead.
        """
        data_shapes, label_shapes = data_batch.provide_data, data_batch.provide_label
        known = self._buckets.get(data_batch.bucket_key)
        if data_shapes or (known is not None and known.binded):
            return data_shapes, label_shapes
        _, data_names, label_names = self._call_sym_gen(data_batch.bucket_key)
        data_shapes = _shapes_from_arrays(data_names, data_batch.data)
        if label_shapes is None and data_batch.label:
            label_shapes = _shapes_from_arrays(label_names, data_batch.label)
        return data_shapes, label_shapes

    # ------------------------------------------------------------- optimizer
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Create the optimizer on the current bucket; every other bucket uses it.

        One optimizer, updater and kvstore serve all buckets, so a step in any
        bucket moves the same optimizer state. States that ``load(...,
        load_optimizer_states=True)`` named are read here.
        """
        _require(self, "init_optimizer", "binded", "params_initialized")
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring.')
            return
        owner = self._curr_module
        owner.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        # a distributed kvstore has just put rank 0's values on the devices
        self._params_dirty = self._params_dirty or owner._params_dirty
        for module in self._buckets.values():
            if module is not owner:
                module.borrow_optimizer(owner)
        self.optimizer_initialized = True
        self._load_pending_states()

    def _load_pending_states(self):
        """Read the ``.states`` file ``load`` left for ``init_optimizer``, once."""
        fname, self._preload_opt_states = self._preload_opt_states, None
        if fname is not None:
            self._curr_module.load_optimizer_states(
                fname, allow_pickle=self._preload_allow_pickle)

    def borrow_optimizer(self, shared_module):
        """Make every bucket use ``shared_module``'s optimizer."""
        for module in self._buckets.values():
            module.borrow_optimizer(shared_module)
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname):
        """Write the optimizer state (one for all buckets) to ``fname``."""
        _require(self, "save_optimizer_states", "optimizer_initialized")
        self._curr_module.save_optimizer_states(fname)

    def load_optimizer_states(self, fname, allow_pickle=False):
        """Read the optimizer state of all buckets from ``fname``.

        ``allow_pickle=True`` also accepts a ``.states`` file mxnet wrote (see
        ``Module.load_optimizer_states``).
        """
        _require(self, "load_optimizer_states", "optimizer_initialized")
        self._curr_module.load_optimizer_states(fname, allow_pickle=allow_pickle)

    # ------------------------------------------------------------- computation
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Bind ``data_batch``'s bucket if it is new and let it prepare the batch;
        the current bucket stays the current one."""
        _require(self, "prepare", "binded", "params_initialized")
        current = self._curr_bucket_key
        data_shapes, label_shapes = self._batch_shapes(data_batch)
        self.switch_bucket(data_batch.bucket_key, data_shapes, label_shapes)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(current, None, None)

    def forward(self, data_batch, is_train=None):
        """Run ``data_batch`` through the module of its ``bucket_key``.

        A batch size the bucket has not seen reshapes that bucket's module, as
        ``Module.forward`` does.

        Parameters
        ----------
        data_batch : DataBatch
        is_train : bool, optional
            Defaults to ``for_training``.
        """
        _require(self, "forward", "binded", "params_initialized")
        data_shapes, label_shapes = self._batch_shapes(data_batch)
        self.switch_bucket(data_batch.bucket_key, data_shapes, label_shapes)
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        """Backward pass of the bucket that ran the last forward."""
        _require(self, "backward", "binded", "params_initialized")
        self._curr_module.backward(out_grads=out_grads)

    def update(self):
        """Step the shared weights with the current bucket's gradients."""
        _require(self, "update", "binded", "params_initialized", "optimizer_initialized")
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the last forward."""
        _require(self, "get_outputs", "binded", "params_initialized")
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the inputs (needs ``bind(..., inputs_need_grad=True)``)."""
        _require_input_grads(self, "get_input_grads")
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Add the last forward's outputs against ``labels`` to ``eval_metric``."""
        _require(self, "update_metric", "binded", "params_initialized")
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        """Attach ``mon`` to every bucket, including buckets bound from now on."""
        _require(self, "install_monitor", "binded")
        self._monitor = mon
        for module in self._buckets.values():
            module.install_monitor(mon)

    # ------------------------------------------------------------- checkpoints
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False, save_optimizer_states=False):
        """Write the shared weights and every bucket's symbol.

        Files: ``prefix-%04d.params``; ``prefix-symbol.json`` with the default
        bucket's symbol (what ``mx.model.load_checkpoint`` and ``Module.load``
        read); ``prefix-KEY-symbol.json`` per bucket; ``prefix.buckets`` listing
        the keys when they are integers (mxnet's format); and, with
        ``save_optimizer_states``, ``prefix-%04d.states``.
        """
        assert len(self._buckets) > 0, "Empty BucketingModule cannot be saved"
        self._save_symbols(prefix, remove_amp_cast)
        keys = list(self._buckets)
        listing = "%s.buckets" % prefix
        if _all_int_keys(keys):
            nd.save(listing, nd.array(keys, dtype=np.int32))
        elif os.path.exists(listing):
            # an earlier save's listing under this prefix would make load() bind its
            # buckets from their (older) symbol files
            os.remove(listing)
        # .params and .states are published together (mx.model.checkpoint_writer)
        with checkpoint_writer(prefix, epoch, save_optimizer_states) as (params_tmp, states_tmp):
            self.save_params(params_tmp)
            if save_optimizer_states:
                self.save_optimizer_states(states_tmp)
        _LOG.info('Saved checkpoint to "%s"', "%s-%04d.params" % (prefix, epoch))
        if save_optimizer_states:
            _LOG.info('Saved optimizer state to "%s"', "%s-%04d.states" % (prefix, epoch))

    def _save_symbols(self, prefix, remove_amp_cast):
        """``prefix-symbol.json`` (default bucket) and ``prefix-KEY-symbol.json``."""
        default = self._buckets.get(self._default_bucket_key)
        if default is not None:
            default_symbol = default.symbol
        else:
            default_symbol = self._call_sym_gen(self._default_bucket_key)[0]
        default_symbol.save("%s-symbol.json" % prefix, remove_amp_cast=remove_amp_cast)
        for key, module in self._buckets.items():
            module.symbol.save("%s-%s-symbol.json" % (prefix, key),
                               remove_amp_cast=remove_amp_cast)

    def _add_loaded_bucket(self, bucket_key, symbol, names_key, module_kwargs):
        """Register an unbound module of ``symbol`` for ``bucket_key``; its data and
        label names are those ``sym_gen(names_key)`` gives."""
        _, data_names, label_names = self._call_sym_gen(names_key)
        self._buckets[bucket_key] = Module(symbol, data_names, label_names, **module_kwargs)

    def _take_loaded_params(self, arg_params, aux_params, module_kwargs):
        """Make the default bucket current and hand it the loaded weights; ``bind``
        then copies them into the executors."""
        key = self._default_bucket_key
        if key not in self._buckets:
            self._add_loaded_bucket(key, self._call_sym_gen(key)[0], key, module_kwargs)
        self._curr_module = self._buckets[key]
        self._curr_module._arg_params = arg_params
        self._curr_module._aux_params = aux_params
        self._curr_module.params_initialized = True
        self.params_initialized = True

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None,
             load_optimizer_states=False, allow_pickle=False, **kwargs):
        """Rebuild a BucketingModule from ``save_checkpoint``'s files.

        Parameters
        ----------
        prefix : str
        epoch : int
        sym_gen : callable
            The ``sym_gen`` the saved module had (it gives each bucket's input names).
        default_bucket_key : str or any hashable
        load_optimizer_states : bool
            Read ``prefix-%04d.states`` at ``init_optimizer``.
        allow_pickle : bool
            Accept a ``.states`` file that mxnet wrote (a pickle; see
            ``Module.load_optimizer_states``).
        **kwargs
            The constructor's ``logger``, ``context``, ``work_load_list``,
            ``fixed_param_names``, ``state_names``, ``group2ctxs``,
            ``compression_params``.

        Returns
        -------
        BucketingModule
            Unbound, with its parameters set: call ``bind`` next.
        """
        assert sym_gen is not None, \
            "sym_gen is required for loading BucketingModule"
        assert default_bucket_key is not None, \
            "default_bucket_key is required for loading BucketingModule"
        _, states_file = checkpoint_files(prefix, epoch, load_optimizer_states, symbol=False)
        loaded = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for key in _saved_bucket_keys(prefix, default_bucket_key):
            symbol = sym.load(_bucket_symbol_file(prefix, key, default_bucket_key))
            loaded._add_loaded_bucket(key, symbol, key, kwargs)
        loaded._take_loaded_params(*load_params(prefix, epoch), kwargs)
        if load_optimizer_states:
            loaded._preload_opt_states = states_file
            loaded._preload_allow_pickle = allow_pickle
        return loaded

    @staticmethod
    def load_dict(sym_dict=None, sym_gen=None, default_bucket_key=None, arg_params=None,
                  aux_params=None, **kwargs):
        """Build a BucketingModule from ``{bucket_key: symbol}`` and the shared weights.

        Parameters
        ----------
        sym_dict : dict
            A symbol per bucket key.
        sym_gen : callable
            Gives the buckets' data and label names (and later buckets' symbols).
        default_bucket_key : str or any hashable
        arg_params, aux_params : dict of str to NDArray
        **kwargs
            As for ``load``.
        """
        assert sym_dict is not None, \
            "sym_dict needs to be provided for BucketingModule.load_dict"
        assert arg_params is not None, \
            "arg_params need to be provided for BucketingModule.load_dict"
        assert aux_params is not None, \
            "aux_params need to be provided for BucketingModule.load_dict"
        assert default_bucket_key is not None, \
            "default_bucket_key needs to be provided for BucketingModule.load_dict"
        built = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for key, symbol in sym_dict.items():
            # mxnet names every bucket's inputs after the default bucket's
            built._add_loaded_bucket(key, symbol, default_bucket_key, kwargs)
        built._take_loaded_params(arg_params, aux_params, kwargs)
        return built
