"""``mx.model.FeedForward``: mxnet 1.9.1's deprecated single-input model, trained by
a ``Module``.

What it keeps from mxnet: the constructor (optimizer keyword arguments ride in
``**kwargs``), numpy / NDArray inputs turned into ``NDArrayIter`` (training:
shuffled, ``last_batch_handle='roll_over'``, batches of ``min(n,
numpy_batch_size)``), parameters made by the initializer unless given, the
optimizer created with ``rescale_grad = 1 / batch_size``, the training loop's
order and logs (``epoch_size`` batches per epoch, carrying on through the data
iterator; ``Epoch[%d] Resetting Data Iterator``; ``Epoch[%d] Time cost=%.3f``;
batch-end callbacks counting from 1; no ``Train-`` line), evaluation through
``eval_end_callback`` (default ``LogValidationMetricsCallback``), ``predict`` /
``score`` on one context, and the checkpoint files of ``save`` / ``load``.

Difference: an evaluation batch of another size than the training batch is
evaluated whole (mxnet's executor manager evaluates its first training-batch-size
rows only).

The training steps run on a ``Module`` (bound for training on ``ctx``, with the
kvstore / update decisions ``Module.init_optimizer`` makes); prediction binds
the symbol with ``grad_req='null'`` on ``ctx[0]``, as mxnet does.
"""
from __future__ import annotations

import logging
import time
import warnings

import numpy as np

from compiler.symbol import Symbol
from runtime import optimizer as opt
from runtime.context import Context, cpu
from runtime.data_desc import DataDesc

from . import metric
from . import ndarray as nd
from .callback import LogValidationMetricsCallback
from .initializer import InitDesc, Uniform
from .io import DataIter, NDArrayIter
from .model_base import BatchEndParam, load_checkpoint, save_checkpoint
from .module.module import Module

_LOG = logging.getLogger(__name__)

__all__ = ["FeedForward"]

_ARRAYS = (np.ndarray, nd.NDArray)


# -- small helpers ---------------------------------------------------------------------

def _fire(callbacks, *args):
    """Call ``callbacks`` (one callable, a list of them, or None) with ``args``."""
    if not callbacks:
        return
    for callback in (callbacks if isinstance(callbacks, list) else [callbacks]):
        callback(*args)


def _as_metric(eval_metric):
    """An ``EvalMetric`` as is, anything else through ``metric.create``."""
    return eval_metric if isinstance(eval_metric, metric.EvalMetric) \
        else metric.create(eval_metric)


def _context_list(ctx):
    """``ctx`` as a list of contexts (``[cpu()]`` when None)."""
    if ctx is None:
        return [cpu()]
    return [ctx] if isinstance(ctx, Context) else ctx


def _check_unique_arguments(symbol):
    """Refuse a symbol in which an argument or auxiliary-state name repeats (two
    layers given the same ``name=`` share a weight name), with mxnet's message."""
    for kind, names in (("argument", symbol.list_arguments()),
                        ("auxiliary state", symbol.list_auxiliary_states())):
        seen = set()
        for name in names:
            if name in seen:
                raise ValueError(f'Find duplicated {kind} name "{name}", please make the '
                                 f'weight name non-duplicated(using name arguments), '
                                 f'arguments are {names}')
            seen.add(name)


def _only_known(params, known):
    """The entries of ``params`` whose names are in ``known`` (``params`` may be None)."""
    if not params:
        return params
    known = set(known)
    return {k: v for k, v in params.items() if k in known}


def _label_vector(y):
    """Labels as a 1-D array; an ``(n, 1)`` column is flattened."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.flatten()
    if y.ndim != 1:
        raise ValueError("Label must be 1D or 2D (with 2nd dimension being 1)")
    return y


def _list_to_array(value):
    return np.array(value) if isinstance(value, list) else value


def _rows_kept(arrays, real):
    """The first ``real`` rows of each array (the rest is padding), as numpy."""
    return [a[0:real].asnumpy() for a in arrays]


def _joined(per_output):
    """Concatenate each output's batches; one output comes back bare."""
    whole = [np.concatenate(parts) for parts in per_output]
    return whole[0] if len(whole) == 1 else whole


def _optimizer_for(optimizer, batch_size, kvstore, kwargs):
    """An optimizer name made into an Optimizer whose ``rescale_grad`` averages the
    gradient over the batch (over every worker's batch on a synchronous dist kvstore)."""
    if not isinstance(optimizer, str):
        return optimizer
    kind = kvstore if isinstance(kvstore, str) else getattr(kvstore, "type", "")
    if 'dist' in kind and '_async' not in kind:
        batch_size *= getattr(kvstore, "num_workers", 1)
    return opt.create(optimizer, rescale_grad=(1.0 / batch_size), **kwargs)


def _epoch_batches(data, epoch, epoch_size, logger):
    """The batches of one epoch: a whole pass over ``data``, or ``epoch_size``
    batches that may run on through resets (mxnet logs each reset)."""
    taken = 0
    while True:
        for batch in data:
            yield batch
            taken += 1
            if epoch_size is not None and taken >= epoch_size:
                return          # the next epoch carries on from here, no reset
        logger.info('Epoch[%d] Resetting Data Iterator', epoch)
        data.reset()
        if epoch_size is None or taken >= epoch_size:
            return


class FeedForward:
    """A feed-forward model with one data input and one output (deprecated in
    mxnet in favour of ``mx.mod.Module``).

    Parameters
    ----------
    symbol : Symbol or callable
        The network, or ``sym_gen(bucket_key)`` returning it (called with the
        training iterator's ``default_bucket_key``).
    ctx : Context or list of Context, optional
        Where to train (default ``cpu()``); prediction uses the first.
    num_epoch : int, optional
        Epochs ``fit`` runs up to.
    epoch_size : int, optional
        Batches per epoch (default: one pass over the data).
    optimizer : str or Optimizer
        Default ``'sgd'``.
    initializer : Initializer
        For parameters not given in ``arg_params`` / ``aux_params``.
    numpy_batch_size : int
        Batch size when the data are numpy arrays or NDArrays (default 128).
    arg_params, aux_params : dict of str to NDArray, optional
        Parameters to start from.
    allow_extra_params : bool
        Drop entries of ``arg_params`` / ``aux_params`` the symbol does not use
        instead of failing.
    begin_epoch : int
        The first epoch's number.
    **kwargs
        Passed to the optimizer (``learning_rate``, ``momentum``, ``wd`` ...).
    """

    def __init__(self, symbol, ctx=None, num_epoch=None, epoch_size=None, optimizer='sgd',
                 initializer=Uniform(0.01), numpy_batch_size=128, arg_params=None,
                 aux_params=None, allow_extra_params=False, begin_epoch=0, **kwargs):
        warnings.warn('\033[91mmxnet.model.FeedForward has been deprecated. '
                      'Please use mxnet.mod.Module instead.\033[0m',
                      DeprecationWarning, stacklevel=2)
        # the public attributes are mxnet's: user programs read and set them
        self.symbol, self.sym_gen = (symbol, None) if isinstance(symbol, Symbol) \
            else (None, symbol)
        assert self.symbol is not None or callable(symbol), \
            "symbol must be a Symbol or a function returning one"
        self.arg_params, self.aux_params = arg_params, aux_params
        self.allow_extra_params = allow_extra_params
        self.argument_checked = False
        if self.symbol is not None:
            self._check_arguments()
        self.ctx = _context_list(ctx)
        self.num_epoch, self.epoch_size = num_epoch, epoch_size
        self.kwargs = dict(kwargs)
        self.optimizer, self.initializer = optimizer, initializer
        self.numpy_batch_size = numpy_batch_size
        self._pred_exec = None
        self.begin_epoch = begin_epoch

    def __getstate__(self):
        # an executor does not pickle; prediction binds again after loading
        return dict(self.__dict__, _pred_exec=None)

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ------------------------------------------------------------------ set-up
    def _check_arguments(self):
        """Check the symbol's names once; drop unused given parameters if allowed."""
        if self.argument_checked:
            return
        assert self.symbol is not None
        self.argument_checked = True
        _check_unique_arguments(self.symbol)
        if self.allow_extra_params:
            self.arg_params = _only_known(self.arg_params, self.symbol.list_arguments())
            self.aux_params = _only_known(self.aux_params, self.symbol.list_auxiliary_states())

    def _init_params(self, inputs, overwrite=False):
        """Make every parameter and auxiliary state: a copy of the given value, or
        the initializer's draw (with ``overwrite``, always the draw).

        Returns
        -------
        (list of str, list of str, list of str)
            The symbol's arguments, the parameters among them, the auxiliary states.
        """
        descs = [d if isinstance(d, DataDesc) else DataDesc(*d) for d in inputs]
        input_names = {d.name for d in descs}
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**{d.name: d.shape for d in descs})
        assert arg_shapes is not None
        arg_types, _, aux_types = self.symbol.infer_type(**{d.name: d.dtype for d in descs})
        assert arg_types is not None
        arg_names = self.symbol.list_arguments()
        aux_names = self.symbol.list_auxiliary_states()
        param_names = [n for n in arg_names if n not in input_names]
        attrs = self.symbol.attr_dict()
        given = None if overwrite else self.arg_params
        self.arg_params = {
            name: self._new_param(name, shape, dtype, given, attrs)
            for name, shape, dtype in zip(arg_names, arg_shapes, arg_types)
            if name not in input_names}
        given = None if overwrite else self.aux_params
        self.aux_params = {
            name: self._new_param(name, shape, dtype, given, attrs)
            for name, shape, dtype in zip(aux_names, aux_shapes, aux_types)}
        return arg_names, param_names, aux_names

    def _new_param(self, name, shape, dtype, given, attrs):
        """One parameter array: ``given[name]`` copied in, else the initializer's draw."""
        value = nd.zeros(shape, dtype=dtype)
        if given and name in given:
            value[:] = given[name]
        else:
            self.initializer(InitDesc(name, attrs.get(name, {})), value)
        return value

    def _init_iter(self, X, y, is_train):
        """An iterator over ``X`` (and ``y``): a DataIter as is, arrays as NDArrayIter
        (training: shuffled and rolling over; otherwise in order, labels zero if absent)."""
        if not isinstance(X, _ARRAYS):
            if not isinstance(X, DataIter):
                raise TypeError('X must be DataIter, NDArray or numpy.ndarray')
            return X
        if y is None:
            if is_train:
                raise ValueError('y must be specified when X is numpy.ndarray')
            y = np.zeros(X.shape[0])
        if not isinstance(y, _ARRAYS):
            raise TypeError('y must be ndarray when X is numpy.ndarray')
        if X.shape[0] != y.shape[0]:
            raise ValueError("The numbers of data points and labels not equal")
        y = _label_vector(y)
        size = min(X.shape[0], self.numpy_batch_size)
        if is_train:
            return NDArrayIter(X, y, size, shuffle=True, last_batch_handle='roll_over')
        return NDArrayIter(X, y, size, shuffle=False)

    def _init_eval_iter(self, eval_data):
        """``eval_data`` as an iterator: a DataIter, or a ``(data, label)`` pair."""
        if eval_data is None or isinstance(eval_data, DataIter):
            return eval_data
        if not (isinstance(eval_data, (tuple, list)) and len(eval_data) == 2):
            raise TypeError('Eval data must be DataIter, or NDArray/numpy.ndarray/list pair '
                            '(i.e. tuple/list of length 2)')
        data, label = eval_data
        if data is None:
            raise ValueError("Eval data is NONE")
        if label is None and isinstance(data, DataIter):
            return data
        return self._init_iter(_list_to_array(data), _list_to_array(label), is_train=True)

    # ------------------------------------------------------------------ prediction
    def _prediction_executor(self, X):
        """The ``grad_req='null'`` executor for ``X``'s shapes; the one made before
        is reused while the argument shapes stay the same."""
        shapes = {k: tuple(v.shape) for k, v in self.arg_params.items()}
        shapes.update({desc[0]: tuple(desc[1]) for desc in X.provide_data})
        if self._pred_exec is not None and self._binds_shapes(self._pred_exec, shapes):
            return self._pred_exec
        dtypes = {k: v.dtype for k, v in self.arg_params.items()}
        for desc in X.provide_data:
            dtypes[desc[0]] = desc.dtype if isinstance(desc, DataDesc) else np.float32
        executor = self.symbol.simple_bind(self.ctx[0], grad_req='null', type_dict=dtypes,
                                           **shapes)
        executor.copy_params_from(self.arg_params, self.aux_params)
        _check_unique_arguments(self.symbol)
        self._pred_exec = executor
        return executor

    def _binds_shapes(self, executor, shapes):
        """Whether ``executor``'s arguments have the shapes ``shapes`` infer."""
        wanted, _, _ = self.symbol.infer_shape(**shapes)
        assert wanted is not None, "Incomplete input shapes"
        return [tuple(s) for s in wanted] == [tuple(a.shape) for a in executor.arg_arrays]

    @staticmethod
    def _forward(executor, X, batch):
        """Load ``batch``'s data into ``executor`` and run it for inference."""
        for desc, array in zip(X.provide_data, batch.data):
            executor.arg_dict[desc[0]][:] = array
        executor.forward(is_train=False)
        return executor.outputs

    def _prepared(self, X, reset):
        X = self._init_iter(X, None, is_train=False)
        if reset:
            X.reset()
        return X, self._prediction_executor(X)

    def predict(self, X, num_batch=None, return_data=False, reset=True):
        """Run the network forward over ``X`` on the first context.

        Parameters
        ----------
        X : DataIter or numpy.ndarray or NDArray
            The data.
        num_batch : int, optional
            Stop after this many batches (default: all).
        return_data : bool
            Also return the data and labels that were read.
        reset : bool
            Reset the iterator first (default True).

        Returns
        -------
        numpy.ndarray or list of numpy.ndarray
            The outputs (padding removed); with ``return_data``, ``(outputs,
            data, label)``.
        """
        X, executor = self._prepared(X, reset)
        kept = {"out": [[] for _ in executor.outputs],
                "data": [[] for _ in X.provide_data],
                "label": [[] for _ in X.provide_label]}
        for count, batch in enumerate(X, start=1):
            real = X.batch_size - batch.pad
            sources = {"out": self._forward(executor, X, batch)}
            if return_data:
                sources.update(data=batch.data, label=batch.label)
            for key, arrays in sources.items():
                for parts, rows in zip(kept[key], _rows_kept(arrays, real)):
                    parts.append(rows)
            if count == num_batch:
                break
        if return_data:
            return _joined(kept["out"]), _joined(kept["data"]), _joined(kept["label"])
        return _joined(kept["out"])

    def score(self, X, eval_metric='acc', num_batch=None, batch_end_callback=None, reset=True):
        """Evaluate ``eval_metric`` over ``X``.

        Parameters
        ----------
        X : DataIter or numpy.ndarray or NDArray
            The data (with labels).
        eval_metric : str or EvalMetric
            The metric (default accuracy).
        num_batch : int, optional
            Stop after this many batches.
        batch_end_callback : callable or list of callable, optional
            Called with a ``BatchEndParam`` after each batch.
        reset : bool
            Reset the iterator first.

        Returns
        -------
        float
            The metric's value.
        """
        eval_metric = _as_metric(eval_metric)
        X, executor = self._prepared(X, reset)
        for nbatch, batch in enumerate(X):
            if nbatch == num_batch:
                break
            eval_metric.update(batch.label, self._forward(executor, X, batch))
            _fire(batch_end_callback, BatchEndParam(epoch=0, nbatch=nbatch,
                                                    eval_metric=eval_metric, locals=locals()))
        return eval_metric.get()[1]

    # ------------------------------------------------------------------ training
    def fit(self, X, y=None, eval_data=None, eval_metric='acc', epoch_end_callback=None,
            batch_end_callback=None, kvstore='local', logger=None, work_load_list=None,
            monitor=None, eval_end_callback=LogValidationMetricsCallback(),
            eval_batch_end_callback=None):
        """Train from ``begin_epoch`` to ``num_epoch``.

        Parameters
        ----------
        X : DataIter or numpy.ndarray or NDArray
            Training data (with ``y`` when an array).
        y : numpy.ndarray or NDArray, optional
            Labels, 1-D or ``(n, 1)``.
        eval_data : DataIter or (data, label) pair, optional
            Evaluated after each epoch.
        eval_metric : str or EvalMetric
            Training and evaluation metric (default accuracy).
        epoch_end_callback : callable or list, optional
            ``callback(epoch, symbol, arg_params, aux_params)`` after each epoch.
        batch_end_callback : callable or list, optional
            Called with a ``BatchEndParam`` after each batch (``nbatch`` from 1).
        kvstore : str or KVStore
            As ``Module.init_optimizer`` (default ``'local'``).
        logger : Logger, optional
            Where the epoch lines go (default: this module's logger).
        work_load_list : list of float, optional
            Relative work per context.
        monitor : Monitor, optional
            Installed on the training module.
        eval_end_callback : callable or list, optional
            Called after each evaluation (default logs ``Validation-`` values).
        eval_batch_end_callback : callable or list, optional
            Called after each evaluation batch.
        """
        logger = logger or _LOG
        data = self._init_iter(X, y, is_train=True)
        eval_data = self._init_eval_iter(eval_data)
        if self.sym_gen:
            self.symbol = self.sym_gen(data.default_bucket_key)
            self._check_arguments()
        self.kwargs["sym"] = self.symbol        # lets the optimizer read lr_mult / wd_mult
        self._init_params(list(data.provide_data) + list(data.provide_label))
        eval_metric = _as_metric(eval_metric)
        logger.info('Start training with %s', str(self.ctx))
        mod = self._training_module(data, logger, work_load_list, monitor, kvstore)

        data.reset()
        for epoch in range(self.begin_epoch, self.num_epoch):
            started = time.time()
            self._train_epoch(mod, data, epoch, eval_metric, monitor, batch_end_callback,
                              logger)
            logger.info('Epoch[%d] Time cost=%.3f', epoch, (time.time() - started))
            if epoch_end_callback or epoch + 1 == self.num_epoch:
                self._take_params(mod)
            _fire(epoch_end_callback, epoch, self.symbol, self.arg_params, self.aux_params)
            if eval_data:
                self._evaluate_epoch(mod, eval_data, epoch, eval_metric,
                                     eval_batch_end_callback, eval_end_callback)
        self._pred_exec = None      # parameters changed: predict binds afresh

    def _training_module(self, data, logger, work_load_list, monitor, kvstore):
        """A Module bound for training on ``self.ctx``, parameters and optimizer set."""
        mod = Module(self.symbol, data_names=[d[0] for d in data.provide_data],
                     label_names=[d[0] for d in data.provide_label], logger=logger,
                     context=self.ctx, work_load_list=work_load_list)
        mod.bind(data_shapes=data.provide_data, label_shapes=data.provide_label,
                 for_training=True)
        if monitor is not None:
            mod.install_monitor(monitor)
        mod.init_params(arg_params=self.arg_params, aux_params=self.aux_params)
        mod.init_optimizer(kvstore=kvstore, optimizer=_optimizer_for(
            self.optimizer, data.batch_size, kvstore, self.kwargs))
        return mod

    def _train_epoch(self, mod, data, epoch, eval_metric, monitor, batch_end_callback,
                     logger):
        eval_metric.reset()
        for nbatch, batch in enumerate(_epoch_batches(data, epoch, self.epoch_size, logger),
                                       start=1):
            if monitor is not None:
                monitor.tic()
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
            if monitor is not None:
                monitor.toc_print()
            mod.update_metric(eval_metric, batch.label)
            _fire(batch_end_callback, BatchEndParam(epoch=epoch, nbatch=nbatch,
                                                    eval_metric=eval_metric, locals=locals()))

    def _take_params(self, mod):
        """Copy the module's trained values into ``arg_params`` / ``aux_params``."""
        trained_args, trained_aux = mod.get_params()
        for ours, trained in ((self.arg_params, trained_args), (self.aux_params, trained_aux)):
            for name, value in trained.items():
                ours[name][:] = value

    @staticmethod
    def _evaluate_epoch(mod, eval_data, epoch, eval_metric, batch_callback, end_callback):
        eval_metric.reset()
        eval_data.reset()
        seen = 0
        for nbatch, batch in enumerate(eval_data):
            mod.forward(batch, is_train=False)
            mod.update_metric(eval_metric, batch.label)
            _fire(batch_callback, BatchEndParam(epoch=epoch, nbatch=nbatch,
                                                eval_metric=eval_metric, locals=locals()))
            seen = nbatch + 1
        _fire(end_callback, BatchEndParam(epoch=epoch, nbatch=seen, eval_metric=eval_metric,
                                          locals=locals()))
        eval_data.reset()

    # ------------------------------------------------------------------ files
    def save(self, prefix, epoch=None, remove_amp_cast=True):
        """Write ``prefix-symbol.json`` and ``prefix-%04d.params``.

        Parameters
        ----------
        prefix : str
            Path prefix of the files.
        epoch : int, optional
            The epoch number in the file name (default ``num_epoch``).
        remove_amp_cast : bool
            Drop AMP cast operators from the saved symbol.
        """
        epoch = self.num_epoch if epoch is None else epoch
        assert epoch is not None, "FeedForward.save: give epoch= (num_epoch is not set)"
        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params,
                        remove_amp_cast=remove_amp_cast)

    @staticmethod
    def load(prefix, epoch, ctx=None, **kwargs):
        """A model from ``prefix-symbol.json`` and ``prefix-%04d.params``.

        Parameters
        ----------
        prefix : str
            Path prefix of the files.
        epoch : int
            Which parameter file; also the model's ``begin_epoch``.
        ctx : Context or list of Context, optional
            Where the model runs.
        **kwargs
            Other constructor arguments (``num_epoch``, ``optimizer``,
            ``numpy_batch_size``, optimizer parameters ...).

        Returns
        -------
        FeedForward
        """
        net, args, auxs = load_checkpoint(prefix, epoch)
        return FeedForward(net, ctx=ctx, arg_params=args, aux_params=auxs, begin_epoch=epoch,
                           **kwargs)

    @staticmethod
    def create(symbol, X, y=None, ctx=None, num_epoch=None, epoch_size=None, optimizer='sgd',
               initializer=Uniform(0.01), eval_data=None, eval_metric='acc',
               epoch_end_callback=None, batch_end_callback=None, kvstore='local', logger=None,
               work_load_list=None, eval_end_callback=LogValidationMetricsCallback(),
               eval_batch_end_callback=None, **kwargs):
        """Make a model and ``fit`` it (the functional form).

        Parameters
        ----------
        symbol, ctx, num_epoch, epoch_size, optimizer, initializer, **kwargs
            As the constructor.
        X, y, eval_data, eval_metric, epoch_end_callback, batch_end_callback, kvstore,
        logger, work_load_list, eval_end_callback, eval_batch_end_callback
            As ``fit``.

        Returns
        -------
        FeedForward
            The trained model.
        """
        model = FeedForward(symbol, ctx=ctx, num_epoch=num_epoch, epoch_size=epoch_size,
                            optimizer=optimizer, initializer=initializer, **kwargs)
        fit_args = dict(eval_data=eval_data, eval_metric=eval_metric,
                        epoch_end_callback=epoch_end_callback,
                        batch_end_callback=batch_end_callback, kvstore=kvstore, logger=logger,
                        work_load_list=work_load_list, eval_end_callback=eval_end_callback,
                        eval_batch_end_callback=eval_batch_end_callback)
        model.fit(X, y, **fit_args)
        return model
