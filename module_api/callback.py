"""``mx.callback``: epoch-end and batch-end callbacks with mxnet 1.9.1's log lines.

Batch-end callbacks receive a ``BatchEndParam`` (``epoch``, ``nbatch``,
``eval_metric``, ``locals``); any object with those attributes will do. Epoch-end
callbacks are called as ``callback(epoch, symbol, arg_params, aux_params)``. The log
lines are mxnet's, word for word: programs and tools parse them.
"""
import logging
import math
import time

_LOG = logging.getLogger(__name__)

__all__ = ['module_checkpoint', 'do_checkpoint', 'log_train_metric',
           'Speedometer', 'ProgressBar', 'LogValidationMetricsCallback']


def _every(period) -> int:
    """A period in epochs or batches: at least 1."""
    return max(1, int(period))


def module_checkpoint(mod, prefix, period=1, save_optimizer_states=False):
    """Epoch-end callback: ``mod.save_checkpoint(prefix, epoch, save_optimizer_states)``
    after every ``period``-th epoch (epochs counted from 1 in the file names)."""
    every = _every(period)

    def _callback(iter_no, sym=None, arg=None, aux=None):
        epoch = iter_no + 1
        if epoch % every == 0:
            mod.save_checkpoint(prefix, epoch, save_optimizer_states)
    return _callback


def do_checkpoint(prefix, period=1):
    """Epoch-end callback: ``prefix-symbol.json`` and ``prefix-%04d.params`` written
    after every ``period``-th epoch, from the symbol and parameters it is given."""
    every = _every(period)

    def _callback(iter_no, sym, arg, aux):
        epoch = iter_no + 1
        if epoch % every == 0:
            from .model_base import save_checkpoint  # late: built after this module
            save_checkpoint(prefix, epoch, sym, arg, aux)
    return _callback


def log_train_metric(period, auto_reset=False):
    """Batch-end callback: one ``Iter[e] Batch[b] Train-name=value`` line per metric
    every ``period`` batches; ``auto_reset`` then restarts the metric's local part."""
    def _callback(param):
        metric = param.eval_metric
        if metric is None or param.nbatch % period:
            return
        for name, value in metric.get_name_value():
            _LOG.info('Iter[%d] Batch[%d] Train-%s=%f', param.epoch, param.nbatch, name, value)
        if auto_reset:
            metric.reset_local()
    return _callback


class Speedometer(object):
    """Batch-end callback: samples per second and the metric, every ``frequent`` batches.

    The first batch an epoch shows this callback only starts its clock (a batch
    number lower than the last one seen means a new epoch). With ``auto_reset`` the
    metric's local part restarts after each line, which reads ``Epoch[e] Batch
    [a-b]``; without, ``Epoch[e] Batch [0-b]`` (the metric since the epoch began).
    """

    def __init__(self, batch_size, frequent=50, auto_reset=True):
        self.batch_size = batch_size
        self.frequent = frequent
        self.auto_reset = auto_reset
        self.init = False           # the clock runs (mxnet's attribute names)
        self.tic = 0
        self.last_count = 0

    def __call__(self, param):
        nbatch = param.nbatch
        if nbatch < self.last_count:
            self.init = False
        self.last_count = nbatch
        if not self.init:
            self.init, self.tic = True, time.time()
            return
        if nbatch % self.frequent:
            return
        elapsed = time.time() - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed else float('inf')
        self._log(param, nbatch, speed)
        self.tic = time.time()

    def _log(self, param, nbatch, speed):
        metric = param.eval_metric
        if metric is None:
            _LOG.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, nbatch, speed)
            return
        pairs = metric.get_name_value()
        if self.auto_reset:
            metric.reset_local()
            line = 'Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec'
            values = (param.epoch, nbatch - self.frequent, nbatch, speed)
        else:
            line = 'Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec'
            values = (param.epoch, nbatch, speed)
        _LOG.info(line + '\t%s=%f' * len(pairs), *values,
                  *[item for pair in pairs for item in pair])


class ProgressBar(object):
    """Batch-end callback: a ``[====----] 50%`` bar of the epoch's ``total`` batches,
    ``length`` characters wide, logged (as in mxnet) where the training log goes."""

    def __init__(self, total, length=80):
        self.total = total
        self.bar_len = length

    def __call__(self, param):
        # products before the division, as mxnet rounds them (100 * (7 / 100) is 7.000...1)
        filled = int(round(self.bar_len * param.nbatch / float(self.total)))
        bar = '=' * filled + '-' * (self.bar_len - filled)
        _LOG.info('[%s] %s%s\r', bar, math.ceil(100.0 * param.nbatch / float(self.total)), '%')


class LogValidationMetricsCallback(object):
    """Epoch-end callback for ``score``/``fit``'s validation: one ``Epoch[e]
    Validation-name=value`` line per metric."""

    def __call__(self, param):
        metric = param.eval_metric
        if not metric:
            return
        for name, value in metric.get_name_value():
            _LOG.info('Epoch[%d] Validation-%s=%f', param.epoch, name, value)
