"""``BaseModule``: the module API (mxnet 1.9.1 ``mxnet.module.base_module``).

The high-level ``fit`` / ``score`` / ``predict`` / ``iter_predict`` are
written against the intermediate API (``bind``, ``init_params``,
``init_optimizer``, ``forward``, ``backward``, ``update``, ...) with the same
call pattern and keyword arguments as mxnet 1.9.1, so subclasses that
override those methods with mxnet's signatures keep working.
"""
from __future__ import annotations

import logging
import sys
import time
import warnings

import numpy as np
import torch

from compiler.errors import MXNetError
from runtime.context import cpu
from runtime.ndarray import as_ndarray

from .. import metric
from .. import ndarray
from ..initializer import Uniform
from ..io import DataBatch, DataDesc, DataIter
from ..model_base import BatchEndParam

_LOG = logging.getLogger(__name__)


class ModuleStateError(MXNetError, AssertionError):
    """A module method called out of order (before ``bind``, ``init_params`` or
    ``init_optimizer``). mxnet 1.9.1 asserts there; this says which step is missing.
    An ``AssertionError`` too, so code written against mxnet still catches it."""


# (flag, what it takes, the call that sets it)
_STEPS = {"binded": ("bound", "bind()"),
          "params_initialized": ("its parameters initialised", "init_params()"),
          "optimizer_initialized": ("its optimizer initialised", "init_optimizer()")}


def _require(mod, what, *flags, hint=None):
    """Raise :class:`ModuleStateError` unless every flag in ``flags`` is set on ``mod``.

    Parameters
    ----------
    mod : BaseModule
    what : str
        The method called, for the message.
    *flags : str
        ``binded``, ``params_initialized``, ``optimizer_initialized``.
    hint : str, optional
        mxnet's own wording, where it has one (``call bind before initializing the
        parameters``); it leads the message.
    """
    if all(getattr(mod, f, False) for f in flags):
        return
    needs = [_STEPS[f][0] for f in flags]
    wanted = needs[0] if len(needs) == 1 else \
        ", ".join(needs[:-1]) + " and " + needs[-1]
    state = ", ".join(f"{f}={bool(getattr(mod, f, False))}" for f in flags)
    calls = [_STEPS[f][1] for f in flags if not getattr(mod, f, False)]
    lead = f"{hint}: " if hint else ""
    raise ModuleStateError(
        f"{type(mod).__name__}.{what}: {lead}the module must be {wanted} first ({state}); "
        f"call {' and '.join(calls)}, or fit(), which does every step")


def _require_input_grads(mod, what):
    """``get_input_grads`` needs a module bound with ``inputs_need_grad=True``."""
    _require(mod, what, "binded", "params_initialized")
    if not mod.inputs_need_grad:
        raise ModuleStateError(
            f"{type(mod).__name__}.{what}: the module was bound with inputs_need_grad="
            f"False, so no input gradients are computed; bind(..., inputs_need_grad=True, "
            f"force_rebind=True) first")


def _empty_epoch(train_data, epoch, begin_epoch):
    """The error of ``fit`` when ``train_data`` yields no batch in an epoch."""
    size = ""
    data = getattr(train_data, "data", None)
    batch_size = getattr(train_data, "batch_size", None)
    if isinstance(data, list) and data and hasattr(data[0][1], "shape") and batch_size:
        handle = getattr(train_data, "last_batch_handle", None)
        size = (f" (it holds {data[0][1].shape[0]} samples, batch_size={batch_size}"
                f"{'' if handle is None else f', last_batch_handle={handle!r}'})")
    why = ("the iterator is empty" if epoch == begin_epoch else
           "the iterator yielded batches in the previous epoch but none after reset(): "
           "its reset() does not restart it")
    return MXNetError(f"fit: train_data yielded no batch in epoch {epoch}{size}: {why}. "
                      f"Training needs at least one batch per epoch; check the data and "
                      f"batch_size, or reset() of a custom DataIter")


def _as_list(obj):
    """A list or tuple as it is; anything else wrapped in a list."""
    if isinstance(obj, (list, tuple)):
        return obj
    return [obj]


def _check_input_names(symbol, names, typename, throw):
    """Check that all input names are in symbol's arguments."""
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [arg for arg in args if
                      not arg.endswith('_weight') and
                      not arg.endswith('_bias') and
                      not arg.endswith('_gamma') and
                      not arg.endswith('_beta')]
        msg = "\033[91mYou created Module with Module(..., %s_names=%s) but " \
              "input with name '%s' is not found in symbol.list_arguments(). " \
              "Did you mean one of:\n\t%s\033[0m" % (
                  typename, str(names), name, '\n\t'.join(candidates))
        if throw:
            raise ValueError(msg)
        warnings.warn(msg)


def _check_names_match(data_names, data_shapes, name, throw):
    """Check that input names matches input data descriptors."""
    actual = [x[0] for x in data_shapes]
    if sorted(data_names) != sorted(actual):
        msg = "Data provided by %s_shapes don't match names specified by %s_names (%s vs. %s)" % (
            name, name, str(data_shapes), str(data_names))
        if throw:
            raise ValueError(msg)
        warnings.warn(msg)


def _parse_data_desc(data_names, label_names, data_shapes, label_shapes):
    """Parse data_attrs into DataDesc format and check that names match."""
    data_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in data_shapes]
    _check_names_match(data_names, data_shapes, 'data', True)
    if label_shapes is not None:
        label_shapes = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in label_shapes]
        _check_names_match(label_names, label_shapes, 'label', False)
    else:
        _check_names_match(label_names, [], 'label', False)
    return data_shapes, label_shapes


def _copy_array(arr):
    """``NDArray.copy()``: a new NDArray with the same values and context."""
    return as_ndarray(arr.detach().clone(), getattr(arr, "context", None))


class BaseModule:
    """The base class of a module (mxnet 1.9.1).

    A module is bound (memory allocated), has its parameters initialized,
    and has an optimizer installed, in that order; ``binded``,
    ``for_training``, ``inputs_need_grad``, ``params_initialized`` and
    ``optimizer_initialized`` record the state.

    Parameters
    ----------
    logger : Logger
        Defaults to this module's logger (``module_api.module.base_module``), which
        propagates to the root logger; the library never configures the root logger.
    """

    def __init__(self, logger=_LOG):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None
        self._total_exec_bytes = 0

    # ------------------------------------------------------------------ high level
    def forward_backward(self, data_batch):
        """A convenient function that calls both ``forward`` and ``backward``."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Run prediction on ``eval_data`` and evaluate ``eval_metric``.

        Returns
        -------
        list of (name, value)
            ``eval_metric.get_name_value()``.
        """
        _require(self, "score", "binded", "params_initialized")
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        eval_metric.reset()
        actual_num_batch = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            if isinstance(eval_batch, list):
                self.update_metric(eval_metric, [eb.label for eb in eval_batch], pre_sliced=True)
            else:
                self.update_metric(eval_metric, eval_batch.label)
            if batch_end_callback is not None:
                batch_end_params = BatchEndParam(epoch=epoch, nbatch=nbatch,
                                                 eval_metric=eval_metric, locals=locals())
                for callback in _as_list(batch_end_callback):
                    callback(batch_end_params)
            actual_num_batch += 1
        if score_end_callback:
            params = BatchEndParam(epoch=epoch, nbatch=actual_num_batch,
                                   eval_metric=eval_metric, locals=locals())
            for callback in _as_list(score_end_callback):
                callback(params)
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Iterate over predictions: yields ``(outputs, nbatch, batch)``, padding removed."""
        _require(self, "iter_predict", "binded", "params_initialized")
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield (outputs, nbatch, eval_batch)

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Run prediction and collect the outputs.

        Parameters
        ----------
        eval_data : DataIter or NDArray or numpy array
        num_batch : int, optional
        merge_batches : bool
            Concatenate the batches' outputs (``[out1, out2]``; a single
            output alone unless ``always_output_list``); otherwise a list of
            per-batch output lists.
        reset : bool
        always_output_list : bool

        Returns
        -------
        NDArray, list of NDArray or list of list of NDArray
        """
        _require(self, "predict", "binded", "params_initialized")
        if isinstance(eval_data, (torch.Tensor, np.ndarray)):
            if not isinstance(eval_data, ndarray.NDArray):
                eval_data = ndarray.array(eval_data)
            self.forward(DataBatch([eval_data]))
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter):
            raise ValueError('eval_data must be of type NDArray or DataIter')
        if reset:
            eval_data.reset()
        output_list = []
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad or 0
            outputs = [_copy_array(out[0:out.shape[0] - pad]) for out in self.get_outputs()]
            output_list.append(outputs)
        if len(output_list) == 0:
            return output_list
        if merge_batches:
            num_outputs = len(output_list[0])
            for out in output_list:
                assert len(out) == num_outputs, \
                    'Cannot merge batches, as num of outputs is not the same ' + \
                    'in mini-batches. Maybe bucketing is used?'
            output_list2 = [ndarray.concatenate([out[i] for out in output_list])
                            for i in range(num_outputs)]
            if num_outputs == 1 and not always_output_list:
                return output_list2[0]
            return output_list2
        return output_list

    def fit(self, train_data, eval_data=None, eval_metric='acc',
            epoch_end_callback=None, batch_end_callback=None, kvstore='local',
            optimizer='sgd', optimizer_params=(('learning_rate', 0.01),),
            eval_end_callback=None,
            eval_batch_end_callback=None, initializer=Uniform(0.01),
            arg_params=None, aux_params=None, allow_missing=False,
            force_rebind=False, force_init=False, begin_epoch=0, num_epoch=None,
            validation_metric=None, monitor=None, sparse_row_id_fn=None):
        """Train the module parameters (mxnet 1.9.1's loop).

        ``bind(for_training=True, force_rebind=)`` → ``install_monitor`` →
        ``init_params(initializer=, arg_params=, aux_params=, allow_missing=,
        force_init=)`` → ``init_optimizer(kvstore=, optimizer=,
        optimizer_params=)``, then per batch ``forward_backward``,
        ``update_metric``, ``update`` and ``prepare`` of the next batch; per epoch
        ``get_params`` / ``set_params``, ``epoch_end_callback``, ``score``. (mxnet
        calls ``update`` before ``update_metric`` and its engine runs the two
        overlapped; here the metric comes first, so that it runs while a
        distributed update's all-reduce is in flight.)

        With a distributed kvstore, ``epoch_end_callback`` runs on rank 0 only
        (every worker holds the same parameters under ``dist_sync``).
        """
        assert num_epoch is not None, 'please specify number of epochs'

        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)

        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            try:
                next_data_batch = next(data_iter)
            except StopIteration:
                raise _empty_epoch(train_data, epoch, begin_epoch) from None
            bar = _epoch_progress(train_data, epoch)
            try:    # the bar (and tqdm's monitor thread) also ends when a step fails
                while not end_of_batch:
                    data_batch = next_data_batch
                    if monitor is not None:
                        monitor.tic()
                    self.forward_backward(data_batch)
                    # the metric reads the forward's outputs, which update() leaves as
                    # they are: updated first, it runs while the gradients' all-reduce
                    # (started during the backward) is in flight, as mxnet's engine
                    # overlaps the two
                    if isinstance(data_batch, list):
                        self.update_metric(eval_metric, [db.label for db in data_batch],
                                           pre_sliced=True)
                    else:
                        self.update_metric(eval_metric, data_batch.label)
                    self.update()

                    try:
                        # pre fetch next batch
                        next_data_batch = next(data_iter)
                        self.prepare(next_data_batch, sparse_row_id_fn=sparse_row_id_fn)
                    except StopIteration:
                        end_of_batch = True

                    if monitor is not None:
                        monitor.toc_print()

                    if end_of_batch:
                        eval_name_vals = eval_metric.get_global_name_value()

                    if batch_end_callback is not None:
                        batch_end_params = BatchEndParam(epoch=epoch, nbatch=nbatch,
                                                         eval_metric=eval_metric, locals=locals())
                        for callback in _as_list(batch_end_callback):
                            callback(batch_end_params)
                    nbatch += 1
                    bar.update(1)
            finally:
                bar.close()

            # one epoch of training is finished
            for name, val in eval_name_vals:
                self.logger.info('Epoch[%d] Train-%s=%f', epoch, name, val)
            toc = time.time()
            self.logger.info('Epoch[%d] Time cost=%.3f', epoch, (toc - tic))

            # sync aux params across devices
            arg_params, aux_params = self.get_params()
            self.set_params(arg_params, aux_params)

            if epoch_end_callback is not None and self._worker_rank() == 0:
                for callback in _as_list(epoch_end_callback):
                    callback(epoch, self.symbol, arg_params, aux_params)

            if eval_data is not None:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info('Epoch[%d] Validation-%s=%f', epoch, name, val)

            # end of 1 epoch, reset the data-iter for another epoch
            train_data.reset()

    def _worker_rank(self):
        """This worker's rank in a distributed job, 0 otherwise. ``fit`` runs
        ``epoch_end_callback`` (checkpoints) on rank 0 only, so that workers never
        write the same files."""
        holders = [self, getattr(self, "_curr_module", None)] + \
            list(getattr(self, "_modules", None) or [])
        for holder in holders:
            kv = getattr(holder, "_kvstore", None)
            if kv is not None and not isinstance(kv, str):
                return int(getattr(kv, "rank", 0))
        return 0

    # ------------------------------------------------------------------ symbol information
    @property
    def data_names(self):
        """A list of names for data required by this module."""
        raise NotImplementedError()

    @property
    def output_names(self):
        """A list of names for the outputs of this module."""
        raise NotImplementedError()

    @property
    def data_shapes(self):
        """A list of (name, shape) pairs specifying the data inputs to this module."""
        raise NotImplementedError()

    @property
    def label_shapes(self):
        """A list of (name, shape) pairs specifying the label inputs to this module."""
        raise NotImplementedError()

    @property
    def output_shapes(self):
        """A list of (name, shape) pairs specifying the outputs of this module."""
        raise NotImplementedError()

    # ------------------------------------------------------------------ parameters
    def get_params(self):
        """``(arg_params, aux_params)``: dicts of name to NDArray (copies on the CPU)."""
        raise NotImplementedError()

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialize the parameters and auxiliary states."""
        raise NotImplementedError()

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter and aux state values (through ``init_params``)."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname):
        """Save the parameters to ``fname`` (mxnet's ``.params`` format, ``arg:``/``aux:``)."""
        arg_params, aux_params = self.get_params()
        save_dict = {('arg:%s' % k): v.as_in_context(cpu()) for k, v in arg_params.items()}
        save_dict.update({('aux:%s' % k): v.as_in_context(cpu()) for k, v in aux_params.items()})
        ndarray.save(fname, save_dict)

    def load_params(self, fname):
        """Load parameters from ``fname`` and ``set_params`` them."""
        save_dict = ndarray.load(fname)
        arg_params = {}
        aux_params = {}
        for k, value in save_dict.items():
            arg_type, name = k.split(':', 1)
            if arg_type == 'arg':
                arg_params[name] = value
            elif arg_type == 'aux':
                aux_params[name] = value
            else:
                raise ValueError("Invalid param file " + fname)
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context=True):
        """States of all devices (none for a module without states)."""
        _require(self, "get_states", "binded", "params_initialized")
        assert not merge_multi_context
        return []

    def set_states(self, states=None, value=None):
        """Set the states (none for a module without states)."""
        _require(self, "set_states", "binded", "params_initialized")
        assert not states and not value

    def install_monitor(self, mon):
        """Install a monitor on all executors."""
        raise NotImplementedError()

    # ------------------------------------------------------------------ computations
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Prepare the module for a batch (bucket switch, reshape); nothing by default."""
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("sparse_row_id_fn is not invoked for BaseModule."))

    def forward(self, data_batch, is_train=None):
        """Forward computation."""
        raise NotImplementedError()

    def backward(self, out_grads=None):
        """Backward computation."""
        raise NotImplementedError()

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the previous forward computation."""
        raise NotImplementedError()

    def get_input_grads(self, merge_multi_context=True):
        """Gradients with respect to the inputs, from the previous backward."""
        raise NotImplementedError()

    def update(self):
        """Update the parameters with the installed optimizer."""
        raise NotImplementedError()

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Accumulate ``eval_metric`` on the outputs of the last forward."""
        raise NotImplementedError()

    # ------------------------------------------------------------------ setup
    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Bind the symbols to construct executors."""
        raise NotImplementedError()

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install and initialize the optimizer (and kvstore)."""
        raise NotImplementedError()

    # ------------------------------------------------------------------ misc
    @property
    def symbol(self):
        """The symbol associated with this module."""
        return self._symbol


def _epoch_progress(train_data, epoch):
    """A tqdm bar over one epoch's batches: shown on a terminal, and only once an
    epoch has run for 10 s (short epochs and logs stay as mxnet prints them).

    Off a terminal no tqdm object is made at all: tqdm starts its monitor thread even
    for a bar it disables, and that thread would outlive a failed job's last step."""
    isatty = getattr(sys.stderr, "isatty", None)
    if not (isatty and isatty()):
        return _NoBar()
    from tqdm import tqdm
    total = None
    num_data, batch_size = getattr(train_data, "num_data", None), getattr(train_data,
                                                                          "batch_size", None)
    if num_data and batch_size:
        total = -(-int(num_data) // int(batch_size))
    return tqdm(total=total, desc=f"Epoch[{epoch}]", unit="batch", leave=False, delay=10,
                disable=None)


class _NoBar:
    """The progress bar of an epoch that shows none."""

    def update(self, n=1):
        """Nothing to show."""

    def close(self):
        """Nothing to close."""
