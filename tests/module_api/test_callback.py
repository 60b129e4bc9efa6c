"""mx.callback: mxnet 1.9.1's log lines, reset behaviour and checkpoint periods."""
import logging
import sys
import types
from collections import namedtuple

import numpy as np
import pytest
import torch

from module_api import callback, metric
from runtime.ndarray import as_ndarray

Param = namedtuple('BatchEndParams', ['epoch', 'nbatch', 'eval_metric', 'locals'])


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(callback.time, 'time', c)
    return c


def _acc(correct, total=4):
    m = metric.Accuracy()
    label = np.zeros(total, np.float32)
    label[:correct] = 1
    m.update([as_ndarray(torch.from_numpy(label))],
             [as_ndarray(torch.ones(total, dtype=torch.float32))])
    return m


def _messages(caplog):
    return [r.getMessage() for r in caplog.records]


def test_speedometer_auto_reset(caplog, clock):
    caplog.set_level(logging.INFO)
    speed = callback.Speedometer(batch_size=4, frequent=2)
    m = _acc(2)
    speed(Param(0, 0, m, None))          # first call only starts the clock
    clock.now += 1.0
    speed(Param(0, 1, m, None))
    speed(Param(0, 2, m, None))
    assert _messages(caplog) == ['Epoch[0] Batch [0-2]\tSpeed: 8.00 samples/sec\taccuracy=0.500000']
    assert m.num_inst == 0 and m.global_num_inst == 4     # reset_local() after logging


def test_speedometer_no_auto_reset_and_composite(caplog, clock):
    caplog.set_level(logging.INFO)
    speed = callback.Speedometer(batch_size=10, frequent=5, auto_reset=False)
    m = metric.create(['acc', 'mse'])
    m.metrics[0] = _acc(1)
    for n in range(11):
        clock.now += {1: 5.0, 6: 2.0}.get(n, 0.0)
        speed(Param(3, n, m, None))
    assert _messages(caplog) == [
        'Epoch[3] Batch [0-5]\tSpeed: 10.00 samples/sec\taccuracy=0.250000\tmse=nan',
        'Epoch[3] Batch [0-10]\tSpeed: 25.00 samples/sec\taccuracy=0.250000\tmse=nan',
    ]
    assert m.metrics[0].num_inst == 4     # not reset


def test_speedometer_without_metric_and_new_epoch(caplog, clock):
    caplog.set_level(logging.INFO)
    speed = callback.Speedometer(batch_size=2, frequent=1)
    speed(Param(0, 0, None, None))
    clock.now += 0.5
    speed(Param(0, 1, None, None))
    speed(Param(1, 0, None, None))        # nbatch went back: restart, no log
    assert _messages(caplog) == ['Iter[0] Batch [1]\tSpeed: 4.00 samples/sec']


def test_speedometer_zero_elapsed(caplog, clock):
    caplog.set_level(logging.INFO)
    speed = callback.Speedometer(batch_size=2, frequent=1)
    speed(Param(0, 0, None, None))
    speed(Param(0, 1, None, None))
    assert _messages(caplog) == ['Iter[0] Batch [1]\tSpeed: inf samples/sec']


def test_log_train_metric(caplog):
    caplog.set_level(logging.INFO)
    m = _acc(3)
    cb = callback.log_train_metric(2, auto_reset=True)
    cb(Param(1, 1, m, None))
    assert _messages(caplog) == []
    cb(Param(1, 2, m, None))
    assert _messages(caplog) == ['Iter[1] Batch[2] Train-accuracy=0.750000']
    assert m.num_inst == 0


def test_progress_bar(caplog):
    caplog.set_level(logging.INFO)
    bar = callback.ProgressBar(total=4, length=8)
    bar(Param(0, 1, None, None))
    bar(Param(0, 4, None, None))
    assert _messages(caplog) == ['[==------] 25%\r', '[========] 100%\r']


def test_progress_bar_percent_rounds_as_mxnet(caplog):
    """100 * 7 / 100 is 7, where 100 * (7 / 100) is 7.000...1 and would show 8%."""
    caplog.set_level(logging.INFO)
    callback.ProgressBar(total=100, length=10)(Param(0, 7, None, None))
    assert _messages(caplog) == ['[=---------] 7%\r']


def test_log_validation_metrics(caplog):
    caplog.set_level(logging.INFO)
    cb = callback.LogValidationMetricsCallback()
    cb(Param(2, 0, None, None))
    cb(Param(2, 0, _acc(1), None))
    assert _messages(caplog) == ['Epoch[2] Validation-accuracy=0.250000']


def test_module_checkpoint_period():
    calls = []

    class Mod:
        def save_checkpoint(self, prefix, epoch, save_optimizer_states):
            calls.append((prefix, epoch, save_optimizer_states))

    cb = callback.module_checkpoint(Mod(), 'pre', period=2, save_optimizer_states=True)
    for epoch in range(5):
        cb(epoch)
    assert calls == [('pre', 2, True), ('pre', 4, True)]
    calls.clear()
    cb = callback.module_checkpoint(Mod(), 'p', period=0)   # period is at least 1
    cb(0)
    assert calls == [('p', 1, False)]


def test_do_checkpoint_calls_model_save_checkpoint(monkeypatch):
    calls = []
    fake = types.ModuleType('module_api.model_base')
    fake.save_checkpoint = lambda *args: calls.append(args)
    import module_api
    monkeypatch.setitem(sys.modules, 'module_api.model_base', fake)
    monkeypatch.setattr(module_api, 'model_base', fake, raising=False)
    cb = callback.do_checkpoint('run', period=3)
    for epoch in range(6):
        cb(epoch, 'SYM', {'w': 1}, {})
    assert calls == [('run', 3, 'SYM', {'w': 1}, {}), ('run', 6, 'SYM', {'w': 1}, {})]
