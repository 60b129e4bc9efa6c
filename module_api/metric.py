"""``mx.metric``: online evaluation metrics under mxnet 1.9.1's names, giving its
numbers.

Labels and predictions arrive as ``NDArray`` / ``torch.Tensor`` (or numpy
arrays); every metric reads them on the host as numpy arrays. ``create`` takes a
registered name or nickname ('acc', 'ce', 'top_k_accuracy', 'nll_loss',
'pearsonr', 'mcc', 'f1', 'perplexity', 'rmse', ...), a config dict or its JSON,
an instance, a list of these (a CompositeEvalMetric), or a function
``feval(label, pred)`` (a CustomMetric).

The classes are written in ``metric_base``, ``metric_classification`` and
``metric_regression``; this module adds the metrics made of other metrics or of
user functions, and is the namespace programs import.
"""
import math  # noqa: F401  (mx.metric.math, as in mxnet)
from collections import OrderedDict

import numpy  # noqa: F401  (mx.metric.numpy, as in mxnet)

from .metric_base import NUMERIC_TYPES as _NUMERIC_TYPES
from .metric_base import EvalMetric, _create, alias, check_label_shapes, register
from .metric_base import host_array as _host_array
from .metric_classification import (  # noqa: F401  (mxnet's mx.metric has the private class too)
    F1, MCC, PCC, Accuracy, Perplexity, TopKAccuracy, _BinaryClassificationMetrics)
from .metric_regression import (MAE, MSE, RMSE, Caffe, CrossEntropy, Loss,
                                NegativeLogLikelihood, PearsonCorrelation, Torch)

__all__ = ['EvalMetric', 'create', 'register', 'alias', 'check_label_shapes',
           'CompositeEvalMetric', 'Accuracy', 'TopKAccuracy', 'F1', 'MCC',
           'Perplexity', 'MAE', 'MSE', 'RMSE', 'CrossEntropy',
           'NegativeLogLikelihood', 'PearsonCorrelation', 'PCC', 'Loss',
           'Torch', 'Caffe', 'CustomMetric', 'np']


def create(metric, *args, **kwargs):
    """Build a metric.

    Parameters
    ----------
    metric : str, dict, EvalMetric, callable or list
        A registered name or nickname, a config from ``get_config`` (or its
        JSON), an instance (returned as is), a function ``feval(label, pred)``
        wrapped in a ``CustomMetric``, or a list of any of these, which makes a
        ``CompositeEvalMetric``.
    *args, **kwargs
        Passed to the metric's constructor (to each one, for a list).

    Examples
    --------
    >>> create('acc').name
    'accuracy'
    >>> create(['acc', 'ce']).get()[0]
    ['accuracy', 'cross-entropy']
    """
    if callable(metric) and not isinstance(metric, EvalMetric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        combined = CompositeEvalMetric()
        for part in metric:
            combined.add(create(part, *args, **kwargs))
        return combined
    return _create(metric, *args, **kwargs)


def _only(mapping, names):
    """``mapping`` without the keys not in ``names`` (all of it when None)."""
    if names is None:
        return mapping
    return OrderedDict((key, value) for key, value in mapping.items() if key in names)


@register
@alias('composite')
class CompositeEvalMetric(EvalMetric):
    """Several metrics fed the same batches; ``get`` gives a list of names and a
    list of values.

    Parameters
    ----------
    metrics : list, or None
        Child metrics, or anything ``create`` takes for each.
    name, output_names, label_names
        As for ``EvalMetric``; the name lists narrow what ``update_dict`` hands
        to the children.
    """

    def __init__(self, metrics=None, name='composite',
                 output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, has_global_stats=True)
        self.metrics = [create(each) for each in (metrics if metrics is not None else [])]

    def add(self, metric):
        """Append a child metric (anything ``create`` takes)."""
        self.metrics.append(create(metric))

    def get_metric(self, index):
        """The child at ``index``. Out of range, the ``ValueError`` is returned,
        not raised, as mxnet 1.9.1 does."""
        try:
            return self.metrics[index]
        except IndexError:
            return ValueError("Metric index {} is out of range 0 and {}".format(
                index, len(self.metrics)))

    def update_dict(self, labels, preds):  # pylint: disable=arguments-differ
        labels = _only(labels, self.label_names)
        preds = _only(preds, self.output_names)
        for child in self.metrics:
            child.update_dict(labels, preds)

    def update(self, labels, preds):
        for child in self.metrics:
            child.update(labels, preds)

    # EvalMetric.__init__ resets before the children exist: nothing to do then.
    def reset(self):
        for child in getattr(self, 'metrics', ()):
            child.reset()

    def reset_local(self):
        for child in getattr(self, 'metrics', ()):
            child.reset_local()

    def _gather(self, read):
        """``read(child)`` of every child, flattened into (names, values)."""
        names, values = [], []
        for child in self.metrics:
            name, value = read(child)
            names.extend([name] if isinstance(name, str) else name)
            values.extend([value] if isinstance(value, _NUMERIC_TYPES) else value)
        return (names, values)

    def get(self):
        return self._gather(lambda child: child.get())

    def get_global(self):
        return self._gather(lambda child: child.get_global())

    def get_config(self):
        config = super().get_config()
        config['metrics'] = [child.get_config() for child in self.metrics]
        return config


@register
class CustomMetric(EvalMetric):
    """A metric from a function ``feval(label, pred)`` of numpy arrays that
    returns one batch's value, or a ``(sum_metric, num_inst)`` pair.

    Parameters
    ----------
    feval : callable
        The function; called once per (label, prediction) pair.
    name : str, or None
        Defaults to ``feval.__name__`` (``custom(<lambda>)`` for a lambda).
    allow_extra_outputs : bool
        Accept more predictions than labels (the extra ones are not read).
    output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, feval, name=None, allow_extra_outputs=False,
                 output_names=None, label_names=None):
        if name is None:
            name = feval.__name__
            if '<' in name:
                name = 'custom(%s)' % name
        super().__init__(name, output_names, label_names, feval=feval,
                         allow_extra_outputs=allow_extra_outputs, has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        # with extra outputs allowed, the predictions past the last label go unread
        for label, pred in zip(labels, preds):
            result = self._feval(_host_array(label), _host_array(pred))
            if isinstance(result, tuple):
                total, count = result
                self._add(total, count)
            else:
                self._add(result, 1)

    def get_config(self):
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval, name=None, allow_extra_outputs=False):  # pylint: disable=invalid-name
    """A ``CustomMetric`` from ``numpy_feval(label, pred)`` (numpy arrays in, a
    number out), named after the function unless ``name`` is given."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
