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


def _callbacks(callbacks, *args):
    """Call one callback, each of a list, or none."""
    if isinstance(callbacks, list):
        for callback in callbacks:
            callback(*args)
    elif callbacks:
        callbacks(*args)


def _check_unique_arguments(symbol):
    """mxnet's check that no argument or auxiliary name repeats."""
    for names, kind in ((symbol.list_arguments(), "argument"),
                        (symbol.list_auxiliary_states(), "auxiliary state")):
        seen = set()
        for name in names:
            if name in seen:
                raise ValueError(f'Find duplicated {kind} name "{name}", please make the '
                                 f'weight name non-duplicated(using name arguments), '
                                 f'arguments are {names}')
            seen.add(name)


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
        if isinstance(symbol, Symbol):
            self.symbol, self.sym_gen = symbol, None
        else:
            assert callable(symbol), "symbol must be a Symbol or a function returning one"
            self.symbol, self.sym_gen = None, symbol
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        self.argument_checked = False
        if self.sym_gen is None:
            self._check_arguments()
        if ctx is None:
            ctx = [cpu()]
        elif isinstance(ctx, Context):
            ctx = [ctx]
        self.ctx = ctx
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.kwargs = kwargs.copy()
        self.optimizer = optimizer
        self.initializer = initializer
        self.numpy_batch_size = numpy_batch_size
        self._pred_exec = None
        self.begin_epoch = begin_epoch

    # ------------------------------------------------------------------ set-up
    def _check_arguments(self):
        """Check the symbol's names once; drop unused given parameters if allowed."""
        if self.argument_checked:
            return
        assert self.symbol is not None
        self.argument_checked = True
        _check_unique_arguments(self.symbol)
        if self.allow_extra_params:
            if self.arg_params:
                names = set(self.symbol.list_arguments())
                self.arg_params = {k: v for k, v in self.arg_params.items() if k in names}
            if self.aux_params:
                names = set(self.symbol.list_auxiliary_states())
                self.aux_params = {k: v for k, v in self.aux_params.items() if k in names}

    def _init_params(self, inputs, overwrite=False):
        """Make every parameter and auxiliary state: copied from the given ones,
        otherwise drawn by the initializer. Returns the argument, parameter and
        auxiliary names."""
        inputs = [x if isinstance(x, DataDesc) else DataDesc(*x) for x in inputs]
        shapes = {d.name: d.shape for d in inputs}
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**shapes)
        assert arg_shapes is not None
        arg_types, _, aux_types = self.symbol.infer_type(**{d.name: d.dtype for d in inputs})
        assert arg_types is not None
        arg_names = self.symbol.list_arguments()
        param_names = [n for n in arg_names if n not in shapes]
        aux_names = self.symbol.list_auxiliary_states()
        made = []
        for names, shapes_, types, given in (
                (arg_names, arg_shapes, arg_types, self.arg_params),
                (aux_names, aux_shapes, aux_types, self.aux_params)):
            params = {}
            attrs = self.symbol.attr_dict()
            for name, shape, dtype in zip(names, shapes_, types):
                if names is arg_names and name not in param_names:
                    continue
                arr = nd.zeros(shape, dtype=dtype)
                if given and name in given and not overwrite:
                    arr[:] = given[name]
                else:
                    self.initializer(InitDesc(name, attrs.get(name, {})), arr)
                params[name] = arr
            made.append(params)
        self.arg_params, self.aux_params = made
        return arg_names, param_names, aux_names

    def __getstate__(self):
        state = self.__dict__.copy()
        state['_pred_exec'] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _init_iter(self, X, y, is_train):
        """An iterator over ``X`` (and ``y``): a DataIter as is, arrays as NDArrayIter."""
        if isinstance(X, (np.ndarray, nd.NDArray)):
            if y is None:
                if is_train:
                    raise ValueError('y must be specified when X is numpy.ndarray')
                y = np.zeros(X.shape[0])
            if not isinstance(y, (np.ndarray, nd.NDArray)):
                raise TypeError('y must be ndarray when X is numpy.ndarray')
            if X.shape[0] != y.shape[0]:
                raise ValueError("The numbers of data points and labels not equal")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.flatten()
            if y.ndim != 1:
                raise ValueError("Label must be 1D or 2D (with 2nd dimension being 1)")
            batch = min(X.shape[0], self.numpy_batch_size)
            if is_train:
                return NDArrayIter(X, y, batch, shuffle=True, last_batch_handle='roll_over')
            return NDArrayIter(X, y, batch, shuffle=False)
        if not isinstance(X, DataIter):
            raise TypeError('X must be DataIter, NDArray or numpy.ndarray')
        return X

    def _init_eval_iter(self, eval_data):
        """``eval_data`` as an iterator: a DataIter, or a ``(data, label)`` pair."""
        if eval_data is None:
            return None
        if isinstance(eval_data, (tuple, list)) and len(eval_data) == 2:
            if eval_data[0] is None:
                raise ValueError("Eval data is NONE")
            if eval_data[1] is None and isinstance(eval_data[0], DataIter):
                return eval_data[0]
            data = np.array(eval_data[0]) if isinstance(eval_data[0], list) else eval_data[0]
            label = np.array(eval_data[1]) if isinstance(eval_data[1], list) else eval_data[1]
            return self._init_iter(data, label, is_train=True)
        if not isinstance(eval_data, DataIter):
            raise TypeError('Eval data must be DataIter, or NDArray/numpy.ndarray/list pair '
                            '(i.e. tuple/list of length 2)')
        return eval_data

    # ------------------------------------------------------------------ prediction
    def _predictor(self, X):
        """The ``grad_req='null'`` executor for ``X``'s shapes (made again when they change)."""
        type_dict = {k: v.dtype for k, v in self.arg_params.items()}
        for desc in X.provide_data:
            type_dict[desc[0]] = desc.dtype if isinstance(desc, DataDesc) else np.float32
        shapes = {k: tuple(v.shape) for k, v in self.arg_params.items()}
        shapes.update({d[0]: tuple(d[1]) for d in X.provide_data})
        if self._pred_exec is not None:
            arg_shapes, _, _ = self.symbol.infer_shape(**shapes)
            assert arg_shapes is not None, "Incomplete input shapes"
            if [tuple(s) for s in arg_shapes] == \
                    [tuple(a.shape) for a in self._pred_exec.arg_arrays]:
                return self._pred_exec
        exe = self.symbol.simple_bind(self.ctx[0], grad_req='null', type_dict=type_dict,
                                      **shapes)
        exe.copy_params_from(self.arg_params, self.aux_params)
        _check_unique_arguments(self.symbol)
        self._pred_exec = exe
        return exe

    def _run(self, exe, X, batch):
        for desc, array in zip(X.provide_data, batch.data):
            exe.arg_dict[desc[0]][:] = array
        exe.forward(is_train=False)
        return exe.outputs

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
        X = self._init_iter(X, None, is_train=False)
        if reset:
            X.reset()
        exe = self._predictor(X)
        outputs = [[] for _ in exe.outputs]
        datas = [[] for _ in X.provide_data]
        labels = [[] for _ in X.provide_label]
        for i, batch in enumerate(X):
            real = X.batch_size - batch.pad
            for kept, out in zip(outputs, self._run(exe, X, batch)):
                kept.append(out[0:real].asnumpy())
            if return_data:
                for kept, x in zip(datas, batch.data):
                    kept.append(x[0:real].asnumpy())
                for kept, x in zip(labels, batch.label):
                    kept.append(x[0:real].asnumpy())
            if num_batch is not None and i + 1 == num_batch:
                break

        def joined(parts):
            parts = [np.concatenate(p) for p in parts]
            return parts[0] if len(parts) == 1 else parts
        if return_data:
            return joined(outputs), joined(datas), joined(labels)
        return joined(outputs)

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
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        X = self._init_iter(X, None, is_train=False)
        if reset:
            X.reset()
        exe = self._predictor(X)
        for i, batch in enumerate(X):
            if num_batch is not None and i == num_batch:
                break
            eval_metric.update(batch.label, self._run(exe, X, batch))
            if batch_end_callback is not None:
                _callbacks(batch_end_callback, BatchEndParam(epoch=0, nbatch=i,
                                                             eval_metric=eval_metric,
                                                             locals=locals()))
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
        self.kwargs["sym"] = self.symbol
        self._init_params(list(data.provide_data) + list(data.provide_label))
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)

        logger.info('Start training with %s', str(self.ctx))
        mod = Module(self.symbol, data_names=[d[0] for d in data.provide_data],
                     label_names=[d[0] for d in data.provide_label], logger=logger,
                     context=self.ctx, work_load_list=work_load_list)
        mod.bind(data_shapes=data.provide_data, label_shapes=data.provide_label,
                 for_training=True)
        if monitor is not None:
            mod.install_monitor(monitor)
        mod.init_params(arg_params=self.arg_params, aux_params=self.aux_params)
        optimizer = self.optimizer
        if isinstance(optimizer, str):
            batch_size = data.batch_size
            kv_type = kvstore if isinstance(kvstore, str) else getattr(kvstore, "type", "")
            if 'dist' in kv_type and '_async' not in kv_type:
                batch_size *= getattr(kvstore, "num_workers", 1)
            optimizer = opt.create(optimizer, rescale_grad=(1.0 / batch_size), **self.kwargs)
        mod.init_optimizer(kvstore=kvstore, optimizer=optimizer)

        data.reset()
        for epoch in range(self.begin_epoch, self.num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            while True:
                exhausted = True
                for batch in data:
                    if monitor is not None:
                        monitor.tic()
                    mod.forward(batch, is_train=True)
                    mod.backward()
                    mod.update()
                    if monitor is not None:
                        monitor.toc_print()
                    mod.update_metric(eval_metric, batch.label)
                    nbatch += 1
                    if batch_end_callback is not None:
                        _callbacks(batch_end_callback, BatchEndParam(
                            epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                            locals=locals()))
                    if self.epoch_size is not None and nbatch >= self.epoch_size:
                        exhausted = False
                        break
                if exhausted:
                    logger.info('Epoch[%d] Resetting Data Iterator', epoch)
                    data.reset()
                if self.epoch_size is None or nbatch >= self.epoch_size:
                    break
            logger.info('Epoch[%d] Time cost=%.3f', epoch, (time.time() - tic))
            if epoch_end_callback or epoch + 1 == self.num_epoch:
                arg, aux = mod.get_params()
                for mine, theirs in ((self.arg_params, arg), (self.aux_params, aux)):
                    for name, value in theirs.items():
                        mine[name][:] = value
            _callbacks(epoch_end_callback, epoch, self.symbol, self.arg_params, self.aux_params)
            if eval_data:
                eval_metric.reset()
                eval_data.reset()
                total = 0
                for i, batch in enumerate(eval_data):
                    mod.forward(batch, is_train=False)
                    mod.update_metric(eval_metric, batch.label)
                    if eval_batch_end_callback is not None:
                        _callbacks(eval_batch_end_callback, BatchEndParam(
                            epoch=epoch, nbatch=i, eval_metric=eval_metric, locals=locals()))
                    total += 1
                if eval_end_callback is not None:
                    _callbacks(eval_end_callback, BatchEndParam(
                        epoch=epoch, nbatch=total, eval_metric=eval_metric, locals=locals()))
                eval_data.reset()
        self._pred_exec = None      # parameters changed: predict binds afresh

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
        if epoch is None:
            epoch = self.num_epoch
        assert epoch is not None
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
        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        return FeedForward(symbol, ctx=ctx, arg_params=arg_params, aux_params=aux_params,
                           begin_epoch=epoch, **kwargs)

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
        model.fit(X, y, eval_data=eval_data, eval_metric=eval_metric,
                  epoch_end_callback=epoch_end_callback, batch_end_callback=batch_end_callback,
                  kvstore=kvstore, logger=logger, work_load_list=work_load_list,
                  eval_end_callback=eval_end_callback,
                  eval_batch_end_callback=eval_batch_end_callback)
        return model
