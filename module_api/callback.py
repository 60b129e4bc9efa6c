"""``mx.callback``: epoch-end and batch-end callbacks with mxnet 1.9.1's log lines.

Batch-end callbacks receive a ``BatchEndParam`` (``epoch``, ``nbatch``,
``eval_metric``, ``locals``); any object with those attributes will do.
"""
import logging
import math
import time

_LOG = logging.getLogger(__name__)

__all__ = ['module_checkpoint', 'do_checkpoint', 'log_train_metric',
           'Speedometer', 'ProgressBar', 'LogValidationMetricsCallback']


def module_checkpoint(mod, prefix, period=1, save_optimizer_states=False):
    """Epoch-end callback calling ``mod.save_checkpoint(prefix, epoch + 1, ...)``
    every ``period`` epochs."""
    period = int(max(1, period))

    def _callback(iter_no, sym=None, arg=None, aux=None):  # pylint: disable=unused-argument
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)
    return _callback


def do_checkpoint(prefix, period=1):
    """Epoch-end callback saving ``prefix-symbol.json`` and
    ``prefix-%04d.params`` every ``period`` epochs."""
    period = int(max(1, period))

    def _callback(iter_no, sym, arg, aux):
        if (iter_no + 1) % period == 0:
            from .model_base import save_checkpoint  # late: built after this module
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)
    return _callback


def log_train_metric(period, auto_reset=False):
    """Batch-end callback logging the training metric every ``period`` batches."""
    def _callback(param):
        if param.nbatch % period == 0 and param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            for name, value in name_value:
                _LOG.info('Iter[%d] Batch[%d] Train-%s=%f',
                             param.epoch, param.nbatch, name, value)
            if auto_reset:
                param.eval_metric.reset_local()
    return _callback


class Speedometer(object):
    """Log training speed and metrics every ``frequent`` batches.

    With ``auto_reset`` the local metric is reset after each log and the line
    reads ``Epoch[e] Batch [a-b]``; otherwise ``Epoch[e] Batch [0-b]``.
    """

    def __init__(self, batch_size, frequent=50, auto_reset=True):
        self.batch_size = batch_size
        self.frequent = frequent
        self.init = False
        self.tic = 0
        self.last_count = 0
        self.auto_reset = auto_reset

    def __call__(self, param):
        count = param.nbatch
        if self.last_count > count:
            self.init = False
        self.last_count = count

        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        try:
            speed = self.frequent * self.batch_size / (time.time() - self.tic)
        except ZeroDivisionError:
            speed = float('inf')
        if param.eval_metric is not None:
            name_value = param.eval_metric.get_name_value()
            if self.auto_reset:
                param.eval_metric.reset_local()
                msg = 'Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec'
                msg += '\t%s=%f' * len(name_value)
                _LOG.info(msg, param.epoch, count - self.frequent, count, speed,
                             *sum(name_value, ()))
            else:
                msg = 'Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec'
                msg += '\t%s=%f' * len(name_value)
                _LOG.info(msg, param.epoch, count, speed, *sum(name_value, ()))
        else:
            _LOG.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec",
                         param.epoch, count, speed)
        self.tic = time.time()


class ProgressBar(object):
    """Log a ``[====----] 50%`` bar of the batches done in the epoch.

    ``total`` is the number of batches per epoch, ``length`` the bar width.
    (The bar goes to ``logging`` as in mxnet, so it lands wherever the
    training log goes.)
    """

    def __init__(self, total, length=80):
        self.bar_len = length
        self.total = total

    def __call__(self, param):
        count = param.nbatch
        filled_len = int(round(self.bar_len * count / float(self.total)))
        percents = math.ceil(100.0 * count / float(self.total))
        prog_bar = '=' * filled_len + '-' * (self.bar_len - filled_len)
        _LOG.info('[%s] %s%s\r', prog_bar, percents, '%')


class LogValidationMetricsCallback(object):
    """Log the evaluation metrics at the end of an epoch."""

    def __call__(self, param):
        if not param.eval_metric:
            return
        name_value = param.eval_metric.get_name_value()
        for name, value in name_value:
            _LOG.info('Epoch[%d] Validation-%s=%f', param.epoch, name, value)
