"""``BaseModule``, the module API of mxnet 1.9.1 (``mx.mod.BaseModule``).

A module takes three steps before it trains: ``bind`` (input shapes known, memory
allocated), ``init_params`` and ``init_optimizer``. The flags ``binded``,
``params_initialized`` and ``optimizer_initialized`` record how far it got.

The high-level calls of this class (``fit``, ``score``, ``predict``,
``iter_predict``) are made only of the intermediate ones (``bind``, ``forward``,
``backward``, ``update``, ``update_metric``, ``prepare``, ``get_params``, ...),
called with mxnet's keywords: a subclass that overrides one of those with mxnet's
signature (``Module``, ``BucketingModule``, ``SequentialModule``, user code) gets
the loops for free.
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

# the end of an epoch's iterator (a batch may be any object)
_NO_MORE_BATCHES = object()

# names that end so are parameters: never offered as the input a user meant
_PARAM_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta")


class ModuleStateError(MXNetError, AssertionError):
    """A module method called out of order (before ``bind``, ``init_params`` or
    ``init_optimizer``). mxnet 1.9.1 asserts there; this says which step is missing.
    An ``AssertionError`` too, so code written against mxnet still catches it."""


# flag -> (what the module must be, the call that gets it there)
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
    unset = [flag for flag in flags if not getattr(mod, flag, False)]
    if not unset:
        return
    needs = [_STEPS[flag][0] for flag in flags]
    wanted = needs[0] if len(needs) == 1 else ", ".join(needs[:-1]) + " and " + needs[-1]
    state = ", ".join(f"{flag}={flag not in unset}" for flag in flags)
    calls = " and ".join(_STEPS[flag][1] for flag in unset)
    lead = f"{hint}: " if hint else ""
    raise ModuleStateError(
        f"{type(mod).__name__}.{what}: {lead}the module must be {wanted} first ({state}); "
        f"call {calls}, or fit(), which does every step")


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


def _call_each(callbacks, *args):
    """Call ``callbacks`` (one callable, or a list or tuple of them) with ``args``."""
    for callback in callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]:
        callback(*args)


# ---------------------------------------------------------------------- input names
def _check_input_names(symbol, names, typename, throw):
    """Check that every name of ``names`` is an argument of ``symbol``.

    Parameters
    ----------
    symbol : Symbol
    names : list of str
        What the module was given as ``<typename>_names``.
    typename : str
        ``data``, ``label``, ``state`` or ``fixed_param``, for the message.
    throw : bool
        Raise ``ValueError`` for a name that is not an argument; otherwise warn (a
        module built for prediction may lack its loss, hence its label).
    """
    arguments = symbol.list_arguments()
    inputs = [arg for arg in arguments if not arg.endswith(_PARAM_SUFFIXES)]
    for missing in [name for name in names if name not in arguments]:
        # mxnet's text and colour codes: users and tests match them
        text = (f"\033[91mYou created Module with Module(..., {typename}_names={names}) "
                f"but input with name '{missing}' is not found in symbol.list_arguments(). "
                "Did you mean one of:\n\t" + "\n\t".join(inputs) + "\033[0m")
        if throw:
            raise ValueError(text)
        warnings.warn(text)


def _check_names_match(names, descs, kind, throw):
    """Check that ``descs`` (``DataDesc`` list) names exactly ``names``, in any order.

    ``kind`` is ``data`` or ``label``; ``throw`` raises ``ValueError``, else a warning.
    """
    if sorted(names) == sorted(desc[0] for desc in descs):
        return
    text = (f"Data provided by {kind}_shapes don't match names specified by "
            f"{kind}_names ({descs} vs. {names})")
    if throw:
        raise ValueError(text)
    warnings.warn(text)


def _as_descs(shapes):
    """Each ``(name, shape)`` pair of ``shapes`` as a ``DataDesc`` (one kept as it is)."""
    return [shape if isinstance(shape, DataDesc) else DataDesc(*shape) for shape in shapes]


def _parse_data_desc(data_names, label_names, data_shapes, label_shapes):
    """``data_shapes`` and ``label_shapes`` as ``DataDesc`` lists, their names checked.

    Data names that differ from ``data_names`` raise ``ValueError``; label names that
    differ from ``label_names`` (no labels given, as for prediction) only warn.

    Returns
    -------
    (list of DataDesc, list of DataDesc or None)
    """
    data_descs = _as_descs(data_shapes)
    _check_names_match(data_names, data_descs, 'data', True)
    label_descs = None if label_shapes is None else _as_descs(label_shapes)
    _check_names_match(label_names, label_descs or [], 'label', False)
    return data_descs, label_descs


# ---------------------------------------------------------------------- predictions
def _copy_array(arr):
    """``NDArray.copy()``: a new NDArray with the same values and context."""
    return as_ndarray(arr.detach().clone(), getattr(arr, "context", None))


def _merge_outputs(per_batch, always_output_list):
    """Join ``predict``'s per-batch output lists along the batch axis.

    Returns one NDArray per output; a single output alone unless
    ``always_output_list``.
    """
    counts = sorted({len(outputs) for outputs in per_batch})
    if len(counts) > 1:
        raise AssertionError(
            'Cannot merge batches, as num of outputs is not the same in mini-batches. '
            f'Maybe bucketing is used? (the batches give {counts} outputs; '
            'predict(..., merge_batches=False) returns them batch by batch)')
    merged = [ndarray.concatenate(list(column)) for column in zip(*per_batch)]
    if len(merged) == 1 and not always_output_list:
        return merged[0]
    return merged


def _undefined(module, method):
    """The error of an abstract method a module class left undefined."""
    return NotImplementedError(f"{type(module).__name__} does not define {method}(); "
                               f"a module subclass must")


class BaseModule:
    """The base class of modules (mxnet 1.9.1's ``BaseModule``).

    Parameters
    ----------
    logger : Logger
        Where ``fit``'s ``Epoch[..]`` lines go. Defaults to this module's logger
        (``module_api.module.base_module``), which propagates to the root logger; the
        library never configures the root logger.

    Attributes
    ----------
    binded, for_training, inputs_need_grad, params_initialized, optimizer_initialized : bool
        How far the module got, as in mxnet.
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
        """``forward(data_batch, is_train=True)`` then ``backward()``."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Evaluate ``eval_metric`` on the predictions for ``eval_data``.

        Parameters
        ----------
        eval_data : DataIter
        eval_metric : EvalMetric or str or list
            Reset first; a name (or list of names) makes a new metric.
        num_batch : int, optional
            Stop after this many batches (default: the whole iterator).
        batch_end_callback : callable or list of callable, optional
            Called with a ``BatchEndParam`` after each batch.
        score_end_callback : callable or list of callable, optional
            Called once at the end; its ``nbatch`` is the number of batches scored.
        reset : bool
            ``eval_data.reset()`` first.
        epoch : int
            Reported to the callbacks.
        sparse_row_id_fn : callable, optional
            Passed to ``prepare``.

        Returns
        -------
        list of (str, float)
            ``eval_metric.get_name_value()``.
        """
        _require(self, "score", "binded", "params_initialized")
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        eval_metric.reset()
        scored = 0
        for nbatch, eval_batch in self._forward_each(eval_data, num_batch, sparse_row_id_fn):
            self._update_metric_from(eval_metric, eval_batch)
            if batch_end_callback is not None:
                _call_each(batch_end_callback, BatchEndParam(
                    epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
            scored += 1
        if score_end_callback:
            _call_each(score_end_callback, BatchEndParam(
                epoch=epoch, nbatch=scored, eval_metric=eval_metric, locals=locals()))
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Predict batch by batch.

        Yields
        ------
        (list of NDArray, int, DataBatch)
            The outputs with the batch's padding cut off (views of the module's output
            arrays, overwritten by the next forward), the batch's index and the batch.
        """
        _require(self, "iter_predict", "binded", "params_initialized")
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in self._forward_each(eval_data, num_batch, sparse_row_id_fn):
            yield self._unpadded_outputs(eval_batch), nbatch, eval_batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Run prediction and collect the outputs.

        Parameters
        ----------
        eval_data : DataIter or NDArray or numpy array
            An array is one batch: a single ``forward``, its first output returned.
        num_batch : int, optional
            Stop after this many batches.
        merge_batches : bool
            Join the batches' outputs along the batch axis (``[out1, out2]``; a single
            output alone unless ``always_output_list``); otherwise return a list of
            per-batch output lists.
        reset : bool
            ``eval_data.reset()`` first.
        always_output_list : bool
            Return a list even for a single output.
        sparse_row_id_fn : callable, optional
            Passed to ``prepare``.

        Returns
        -------
        NDArray, list of NDArray or list of list of NDArray
            Copies, padding cut off; ``[]`` when the iterator yields no batch.
        """
        _require(self, "predict", "binded", "params_initialized")
        if isinstance(eval_data, (torch.Tensor, np.ndarray)):
            return self._predict_array(eval_data)
        if not isinstance(eval_data, DataIter):
            raise ValueError('eval_data must be of type NDArray or DataIter, got '
                             f'{type(eval_data).__name__}')
        if reset:
            eval_data.reset()
        per_batch = [[_copy_array(out) for out in self._unpadded_outputs(batch)]
                     for _, batch in self._forward_each(eval_data, num_batch, sparse_row_id_fn)]
        if not per_batch or not merge_batches:
            return per_batch
        return _merge_outputs(per_batch, always_output_list)

    def _predict_array(self, array):
        """``predict`` of an array: one forward of it as one batch; the first output."""
        if not isinstance(array, ndarray.NDArray):
            array = ndarray.array(array)
        self.forward(DataBatch([array]))
        return self.get_outputs()[0]

    def _forward_each(self, eval_data, num_batch, sparse_row_id_fn):
        """``prepare`` and ``forward(is_train=False)`` each batch of ``eval_data``.

        Yields ``(nbatch, batch)`` after each forward, for at most ``num_batch`` batches.
        As in mxnet, the batch after the last one is still drawn from the iterator.
        """
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                return
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            yield nbatch, batch

    def _unpadded_outputs(self, batch):
        """The outputs of the last forward without the ``batch.pad`` filler samples."""
        pad = batch.pad or 0
        return [out[0:out.shape[0] - pad] for out in self.get_outputs()]

    def _update_metric_from(self, eval_metric, batch):
        """``update_metric`` with the labels of ``batch``: a list of batches is one per
        device, already sliced."""
        if isinstance(batch, list):
            self.update_metric(eval_metric, [part.label for part in batch], pre_sliced=True)
        else:
            self.update_metric(eval_metric, batch.label)

    def fit(self, train_data, eval_data=None, eval_metric='acc',
            epoch_end_callback=None, batch_end_callback=None, kvstore='local',
            optimizer='sgd', optimizer_params=(('learning_rate', 0.01),),
            eval_end_callback=None,
            eval_batch_end_callback=None, initializer=Uniform(0.01),
            arg_params=None, aux_params=None, allow_missing=False,
            force_rebind=False, force_init=False, begin_epoch=0, num_epoch=None,
            validation_metric=None, monitor=None, sparse_row_id_fn=None):
        """Train the module for epochs ``begin_epoch`` .. ``num_epoch - 1``.

        Sets up with ``bind(for_training=True)``, ``install_monitor``, ``init_params``
        and ``init_optimizer``. Each batch: ``forward_backward``, ``update_metric``,
        ``update``, then the next batch's ``prepare``, then ``batch_end_callback``.
        Each epoch: the ``Epoch[%d] Train-..`` and ``Time cost`` log lines,
        ``get_params`` / ``set_params``, ``epoch_end_callback(epoch, symbol,
        arg_params, aux_params)``, ``score`` of ``eval_data`` with
        ``validation_metric`` (default: ``eval_metric``), ``eval_end_callback``
        and the ``Validation`` lines, and ``train_data.reset()``.

        mxnet calls ``update`` before ``update_metric`` and its engine runs the two
        overlapped; here the metric comes first, so that it runs while a distributed
        update's all-reduce is in flight. With a distributed kvstore,
        ``epoch_end_callback`` runs on rank 0 only (every worker holds the same
        parameters under ``dist_sync``).
        """
        if num_epoch is None:
            raise AssertionError('please specify number of epochs: fit(..., num_epoch=N)')
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params,
                         aux_params=aux_params, allow_missing=allow_missing,
                         force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        # taken before eval_metric becomes an object: a name gives validation a metric
        # of its own, an EvalMetric is shared (and reset by score)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        for epoch in range(begin_epoch, num_epoch):
            started = time.time()
            train_values = self._fit_epoch(train_data, epoch, begin_epoch, eval_metric,
                                           monitor, batch_end_callback, sparse_row_id_fn)
            for name, value in train_values:
                self.logger.info('Epoch[%d] Train-%s=%f', epoch, name, value)
            self.logger.info('Epoch[%d] Time cost=%.3f', epoch, time.time() - started)
            self._end_epoch(epoch, epoch_end_callback)
            if eval_data is not None:
                scores = self.score(eval_data, validation_metric,
                                    score_end_callback=eval_end_callback,
                                    batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, value in scores:
                    self.logger.info('Epoch[%d] Validation-%s=%f', epoch, name, value)
            train_data.reset()

    def _fit_epoch(self, train_data, epoch, begin_epoch, eval_metric, monitor,
                   batch_end_callback, sparse_row_id_fn):
        """Train on each batch of ``train_data`` once.

        Returns
        -------
        list of (str, float)
            The metric's global values, read after the last batch's update and before
            its ``batch_end_callback`` (a ``Speedometer`` may reset the metric).
        """
        eval_metric.reset()
        batches = iter(train_data)
        upcoming = next(batches, _NO_MORE_BATCHES)
        if upcoming is _NO_MORE_BATCHES:
            raise _empty_epoch(train_data, epoch, begin_epoch)
        nbatch, epoch_values = 0, None
        bar = _epoch_progress(train_data, epoch)
        try:    # the bar (and tqdm's monitor thread) also ends when a step fails
            while upcoming is not _NO_MORE_BATCHES:
                data_batch = upcoming      # the name callbacks read from param.locals
                if monitor is not None:
                    monitor.tic()
                self._fit_step(data_batch, eval_metric)
                upcoming = self._next_prepared(batches, sparse_row_id_fn)
                if monitor is not None:
                    monitor.toc_print()
                if upcoming is _NO_MORE_BATCHES:
                    epoch_values = eval_metric.get_global_name_value()
                if batch_end_callback is not None:
                    _call_each(batch_end_callback, BatchEndParam(
                        epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
                nbatch += 1
                bar.update(1)
        finally:
            bar.close()
        return epoch_values

    def _fit_step(self, data_batch, eval_metric):
        """One training step. The metric reads the forward's outputs, which ``update``
        leaves as they are: run first, it overlaps the gradients' all-reduce (started
        during the backward), as mxnet's engine overlaps the two."""
        self.forward_backward(data_batch)
        self._update_metric_from(eval_metric, data_batch)
        self.update()

    def _next_prepared(self, batches, sparse_row_id_fn):
        """The next batch of the iterator ``batches``, ``prepare``d for the next step;
        ``_NO_MORE_BATCHES`` at the end."""
        try:
            batch = next(batches)
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
        except StopIteration:
            return _NO_MORE_BATCHES
        return batch

    def _end_epoch(self, epoch, epoch_end_callback):
        """Settle the parameters after an epoch and hand them to ``epoch_end_callback``."""
        # setting get_params' copies back makes every device hold the same aux states
        arg_params, aux_params = self.get_params()
        self.set_params(arg_params, aux_params)
        if epoch_end_callback is not None and self._worker_rank() == 0:
            _call_each(epoch_end_callback, epoch, self.symbol, arg_params, aux_params)

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
        """list of str: the names of the data inputs."""
        raise _undefined(self, "data_names")

    @property
    def output_names(self):
        """list of str: the names of the outputs."""
        raise _undefined(self, "output_names")

    @property
    def data_shapes(self):
        """list of DataDesc: the data inputs (name and shape)."""
        raise _undefined(self, "data_shapes")

    @property
    def label_shapes(self):
        """list of DataDesc: the label inputs (name and shape)."""
        raise _undefined(self, "label_shapes")

    @property
    def output_shapes(self):
        """list of (str, tuple): the outputs (name and shape)."""
        raise _undefined(self, "output_shapes")

    # ------------------------------------------------------------------ parameters
    def get_params(self):
        """The parameters.

        Returns
        -------
        (dict of str to NDArray, dict of str to NDArray)
            ``arg_params`` and ``aux_params``.
        """
        raise _undefined(self, "get_params")

    def init_params(self, initializer=Uniform(0.01), arg_params=None,
                    aux_params=None, allow_missing=False, force_init=False,
                    allow_extra=False):
        """Initialise the parameters and auxiliary states (from ``arg_params`` /
        ``aux_params`` where given, ``initializer`` otherwise)."""
        raise _undefined(self, "init_params")

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter and auxiliary state values: ``init_params`` without an
        initializer.

        Parameters
        ----------
        arg_params, aux_params : dict of str to NDArray
        allow_missing : bool
            Leave the parameters not in the dicts as they are.
        force_init : bool
            Assign even if already initialised.
        allow_extra : bool
            Ignore names that are not parameters of the module (else ``ValueError``).
        """
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname):
        """Write the parameters to ``fname`` in mxnet's ``.params`` format (keys
        ``arg:<name>`` and ``aux:<name>``, arrays on the CPU)."""
        arg_params, aux_params = self.get_params()
        named = {}
        for prefix, params in (("arg", arg_params), ("aux", aux_params)):
            for name, value in params.items():
                named[f"{prefix}:{name}"] = value.as_in_context(cpu())
        ndarray.save(fname, named)

    def load_params(self, fname):
        """Read a ``.params`` file written by ``save_params`` (or a checkpoint) and
        ``set_params`` its values."""
        loaded = ndarray.load(fname)
        if not isinstance(loaded, dict):
            raise ValueError(f"Invalid param file {fname}: it holds a list of "
                             f"{len(loaded)} unnamed arrays, not 'arg:'/'aux:' parameters")
        arg_params, aux_params = {}, {}
        by_prefix = {"arg": arg_params, "aux": aux_params}
        for key, value in loaded.items():
            prefix, colon, name = key.partition(":")
            if not colon or prefix not in by_prefix:
                raise ValueError(f"Invalid param file {fname}: key {key!r} is neither "
                                 "'arg:<name>' nor 'aux:<name>'")
            by_prefix[prefix][name] = value
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context=True):
        """The states of a module that has none: ``[]``.

        Only ``merge_multi_context=False`` is accepted, as in mxnet.
        """
        _require(self, "get_states", "binded", "params_initialized")
        if merge_multi_context:
            raise AssertionError(f"{type(self).__name__} has no states to merge; call "
                                 "get_states(merge_multi_context=False)")
        return []

    def set_states(self, states=None, value=None):
        """Set the states of a module that has none: only empty ``states`` and
        ``value`` are accepted."""
        _require(self, "set_states", "binded", "params_initialized")
        if states or value:
            raise AssertionError(f"{type(self).__name__} has no states to set")

    def install_monitor(self, mon):
        """Have ``mon`` (a ``Monitor``) watch every executor."""
        raise _undefined(self, "install_monitor")

    # ------------------------------------------------------------------ computations
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Get ready for ``data_batch`` (switch bucket, reshape, pull sparse rows).

        Nothing by default; ``sparse_row_id_fn`` is ignored here with a warning.
        """
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("sparse_row_id_fn is not invoked for BaseModule."))

    def forward(self, data_batch, is_train=None):
        """Forward computation (``is_train`` defaults to ``for_training``)."""
        raise _undefined(self, "forward")

    def backward(self, out_grads=None):
        """Backward computation (``out_grads``: gradients of the outputs, for modules
        that do not end in a loss)."""
        raise _undefined(self, "backward")

    def get_outputs(self, merge_multi_context=True):
        """The outputs of the last forward, list of NDArray."""
        raise _undefined(self, "get_outputs")

    def get_input_grads(self, merge_multi_context=True):
        """The gradients of the data inputs from the last backward, list of NDArray
        (needs ``bind(..., inputs_need_grad=True)``)."""
        raise _undefined(self, "get_input_grads")

    def update(self):
        """Apply one optimizer step to the parameters."""
        raise _undefined(self, "update")

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Add the last forward's outputs against ``labels`` to ``eval_metric``
        (``pre_sliced``: ``labels`` holds one list per device)."""
        raise _undefined(self, "update_metric")

    # ------------------------------------------------------------------ setup
    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Allocate the executors for inputs of ``data_shapes`` / ``label_shapes``."""
        raise _undefined(self, "bind")

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer (and the kvstore that applies it)."""
        raise _undefined(self, "init_optimizer")

    # ------------------------------------------------------------------ misc
    @property
    def symbol(self):
        """Symbol: the symbol of the module (``None`` for a module without one)."""
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
    num_data = getattr(train_data, "num_data", None)
    batch_size = getattr(train_data, "batch_size", None)
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
