"""Metric numerics where mxnet 1.9.1's own tests compare with ``==``
(its metric unit tests)."""
import numpy as np

import module_api as mx


def test_nll_loss_equals_mxnets_float32_arithmetic():
    metric = mx.metric.create('nll_loss')
    pred = mx.nd.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    label = mx.nd.array([2, 1])
    metric.update([label], [pred])
    _, loss = metric.get()
    expected = -(np.log(pred[0][2].asscalar()) + np.log(pred[1][1].asscalar())) / 2
    assert type(pred[0][2].asscalar()) is np.float32
    assert loss == expected


def test_cross_entropy_equals_mxnets():
    metric = mx.metric.create('ce')
    pred = mx.nd.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    label = mx.nd.array([2, 1])
    metric.update([label], [pred])
    _, loss = metric.get()
    expected = -(np.log(pred[0][2].asscalar()) + np.log(pred[1][1].asscalar())) / 2
    assert loss == expected
