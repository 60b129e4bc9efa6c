"""``mx.metric``: online evaluation metrics with mxnet 1.9.1's names and numbers.

Labels and predictions arrive as ``NDArray`` / ``torch.Tensor`` (or numpy
arrays); every metric reads them on the host as numpy arrays.
"""
import json
import math
import warnings
from collections import OrderedDict

import numpy

__all__ = ['EvalMetric', 'create', 'register', 'alias', 'check_label_shapes',
           'CompositeEvalMetric', 'Accuracy', 'TopKAccuracy', 'F1', 'MCC',
           'Perplexity', 'MAE', 'MSE', 'RMSE', 'CrossEntropy',
           'NegativeLogLikelihood', 'PearsonCorrelation', 'PCC', 'Loss',
           'Torch', 'Caffe', 'CustomMetric', 'np']

_numeric_types = (float, int, numpy.generic)


def _is_array(x):
    """One array (not a list of arrays)."""
    if isinstance(x, numpy.ndarray):
        return True
    try:
        import torch
        return isinstance(x, torch.Tensor)
    except ImportError:  # pragma: no cover
        return False


def _asnumpy(x):
    """Host numpy copy of an NDArray / torch tensor / array-like."""
    if hasattr(x, 'asnumpy'):
        return x.asnumpy()
    if hasattr(x, 'detach') and hasattr(x, 'cpu'):
        return x.detach().cpu().numpy()
    return numpy.asarray(x)


def _shape(x):
    return tuple(x.shape)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Check that labels and preds have the same length (or shape when ``shape``).

    With ``wrap``, a single array is wrapped into a one-element list.
    """
    if not shape:
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = _shape(labels), _shape(preds)

    if label_shape != pred_shape:
        raise ValueError("Shape of labels {} does not match shape of "
                         "predictions {}".format(label_shape, pred_shape))

    if wrap:
        if _is_array(labels):
            labels = [labels]
        if _is_array(preds):
            preds = [preds]

    return labels, preds


class EvalMetric(object):
    """Base class for all evaluation metrics.

    Parameters
    ----------
    name : str
        Name of this metric instance for display.
    output_names : list of str, or None
        Names of predictions used by ``update_dict`` (all by default).
    label_names : list of str, or None
        Names of labels used by ``update_dict`` (all by default).
    """

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return "EvalMetric: {}".format(dict(self.get_name_value()))

    def get_config(self):
        """Configuration from which ``metric.create(**config)`` rebuilds the metric."""
        config = self._kwargs.copy()
        config.update({
            'metric': self.__class__.__name__,
            'name': self.name,
            'output_names': self.output_names,
            'label_names': self.label_names})
        return config

    def update_dict(self, label, pred):
        """Update with name -> array mappings of labels and predictions."""
        if self.output_names is not None:
            pred = [pred[name] for name in self.output_names]
        else:
            pred = list(pred.values())

        if self.label_names is not None:
            label = [label[name] for name in self.label_names]
        else:
            label = list(label.values())

        self.update(label, pred)

    def update(self, labels, preds):
        """Update the internal evaluation result with one batch."""
        raise NotImplementedError()

    def reset(self):
        """Reset local and global statistics."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def _add(self, value, count):
        """Add ``value`` over ``count`` instances to the local and global sums."""
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count

    def reset_local(self):
        """Reset the local statistics only."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        """``(name, value)`` of the local statistics (``nan`` when empty)."""
        if self.num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self):
        """``(name, value)`` of the global statistics."""
        if self._has_global_stats:
            if self.global_num_inst == 0:
                return (self.name, float('nan'))
            return (self.name, self.global_sum_metric / self.global_num_inst)
        return self.get()

    def get_name_value(self):
        """List of ``(name, value)`` pairs."""
        name, value = self.get()
        if not isinstance(name, list):
            name = [name]
        if not isinstance(value, list):
            value = [value]
        return list(zip(name, value))

    def get_global_name_value(self):
        """List of ``(name, value)`` pairs of the global statistics."""
        if self._has_global_stats:
            name, value = self.get_global()
            if not isinstance(name, list):
                name = [name]
            if not isinstance(value, list):
                value = [value]
            return list(zip(name, value))
        return self.get_name_value()


# --------------------------------------------------------------------------
# registry (mxnet.registry semantics: lower-cased names, aliases, json config)
# --------------------------------------------------------------------------
_REGISTRY = {}


def register(klass, name=None):
    """Register a metric class under its lower-cased class name (or ``name``)."""
    assert issubclass(klass, EvalMetric), \
        "Can only register subclass of %s" % EvalMetric.__name__
    if name is None:
        name = klass.__name__
    name = name.lower()
    if name in _REGISTRY:
        warnings.warn(
            "New metric %s.%s registered with name %s is overriding existing "
            "metric %s.%s" % (klass.__module__, klass.__name__, name,
                              _REGISTRY[name].__module__, _REGISTRY[name].__name__),
            UserWarning, stacklevel=2)
    _REGISTRY[name] = klass
    return klass


def alias(*aliases):
    """Class decorator registering the class under extra names."""
    def reg(klass):
        for name in aliases:
            register(klass, name)
        return klass
    return reg


def _create(*args, **kwargs):
    if args:
        name = args[0]
        args = args[1:]
    else:
        name = kwargs.pop('metric')

    if isinstance(name, EvalMetric):
        assert not args and not kwargs, \
            "metric is already an instance. Additional arguments are invalid"
        return name

    if isinstance(name, dict):
        return _create(**name)

    assert isinstance(name, str), "metric must be of string type"

    if name.startswith('['):
        assert not args and not kwargs
        name, kwargs = json.loads(name)
        return _create(name, **kwargs)
    if name.startswith('{'):
        assert not args and not kwargs
        kwargs = json.loads(name)
        return _create(**kwargs)

    name = name.lower()
    assert name in _REGISTRY, \
        "%s is not registered. Please register with metric.register first" % str(name)
    return _REGISTRY[name](*args, **kwargs)


def create(metric, *args, **kwargs):
    """Create a metric from a name, an instance, a list of these, or a function.

    >>> create('acc')
    >>> create(lambda label, pred: ...)        # CustomMetric
    >>> create(['acc', 'ce'])                  # CompositeEvalMetric
    """
    if callable(metric) and not isinstance(metric, EvalMetric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        composite_metric = CompositeEvalMetric()
        for child_metric in metric:
            composite_metric.add(create(child_metric, *args, **kwargs))
        return composite_metric
    return _create(metric, *args, **kwargs)


@register
@alias('composite')
class CompositeEvalMetric(EvalMetric):
    """Manages several metrics; ``get`` returns lists of names and values."""

    def __init__(self, metrics=None, name='composite',
                 output_names=None, label_names=None):
        super(CompositeEvalMetric, self).__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=True)
        if metrics is None:
            metrics = []
        self.metrics = [create(i) for i in metrics]

    def add(self, metric):
        """Add a child metric."""
        self.metrics.append(create(metric))

    def get_metric(self, index):
        """The ``index``-th child metric."""
        try:
            return self.metrics[index]
        except IndexError:
            return ValueError("Metric index {} is out of range 0 and {}".format(
                index, len(self.metrics)))

    def update_dict(self, labels, preds):  # pylint: disable=arguments-differ
        if self.label_names is not None:
            labels = OrderedDict([i for i in labels.items()
                                  if i[0] in self.label_names])
        if self.output_names is not None:
            preds = OrderedDict([i for i in preds.items()
                                 if i[0] in self.output_names])
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        try:
            for metric in self.metrics:
                metric.reset()
        except AttributeError:
            pass

    def reset_local(self):
        try:
            for metric in self.metrics:
                metric.reset_local()
        except AttributeError:
            pass

    def _collect(self, getter):
        names = []
        values = []
        for metric in self.metrics:
            name, value = getter(metric)
            if isinstance(name, str):
                name = [name]
            if isinstance(value, _numeric_types):
                value = [value]
            names.extend(name)
            values.extend(value)
        return (names, values)

    def get(self):
        return self._collect(lambda m: m.get())

    def get_global(self):
        return self._collect(lambda m: m.get_global())

    def get_config(self):
        config = super(CompositeEvalMetric, self).get_config()
        config.update({'metrics': [i.get_config() for i in self.metrics]})
        return config


########################
# CLASSIFICATION METRICS
########################

@register
@alias('acc')
class Accuracy(EvalMetric):
    """Classification accuracy; predictions are class indices or scores along ``axis``."""

    def __init__(self, axis=1, name='accuracy',
                 output_names=None, label_names=None):
        super(Accuracy, self).__init__(
            name, axis=axis,
            output_names=output_names, label_names=label_names,
            has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred_label in zip(labels, preds):
            pred_np = _asnumpy(pred_label)
            label_np = _asnumpy(label)
            if pred_np.shape != label_np.shape:
                pred_np = numpy.argmax(pred_np, axis=self.axis)
            pred_np = pred_np.astype('int32').ravel()
            label_np = label_np.astype('int32').ravel()
            check_label_shapes(label_np, pred_np)
            num_correct = int((pred_np == label_np).sum())
            self._add(num_correct, len(pred_np))


@register
@alias('top_k_accuracy', 'top_k_acc')
class TopKAccuracy(EvalMetric):
    """Counts a prediction correct when the label is among the ``top_k`` scores."""

    def __init__(self, top_k=1, name='top_k_accuracy',
                 output_names=None, label_names=None):
        super(TopKAccuracy, self).__init__(
            name, top_k=top_k,
            output_names=output_names, label_names=label_names,
            has_global_stats=True)
        self.top_k = top_k
        assert self.top_k > 1, 'Please use Accuracy if top_k is no more than 1'
        self.name += '_%d' % self.top_k

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred_label in zip(labels, preds):
            assert len(_shape(pred_label)) <= 2, 'Predictions should be no more than 2 dims'
            pred_np = numpy.argpartition(_asnumpy(pred_label).astype('float32'), -self.top_k)
            label_np = _asnumpy(label).astype('int32')
            check_label_shapes(label_np, pred_np)
            num_samples = pred_np.shape[0]
            num_dims = len(pred_np.shape)
            if num_dims == 1:
                # mxnet 1.9.1 updates only the local sum here
                self.sum_metric += int((pred_np.flat == label_np.flat).sum())
            elif num_dims == 2:
                num_classes = pred_np.shape[1]
                top_k = min(num_classes, self.top_k)
                for j in range(top_k):
                    num_correct = int(
                        (pred_np[:, num_classes - 1 - j].flat == label_np.flat).sum())
                    self.sum_metric += num_correct
                    self.global_sum_metric += num_correct
            self.num_inst += num_samples
            self.global_num_inst += num_samples


class _BinaryClassificationMetrics(object):
    """True/false positive/negative counts across mini-batches."""

    def __init__(self):
        self.reset_stats()

    def update_binary_stats(self, label, pred):
        pred = _asnumpy(pred)
        label = _asnumpy(label).astype('int32')
        pred_label = numpy.argmax(pred, axis=1)

        check_label_shapes(label, pred)
        if len(numpy.unique(label)) > 2:
            raise ValueError("%s currently only supports binary classification."
                             % self.__class__.__name__)
        pred_true = (pred_label == 1)
        pred_false = 1 - pred_true
        label_true = (label == 1)
        label_false = 1 - label_true

        true_pos = int((pred_true * label_true).sum())
        false_pos = int((pred_true * label_false).sum())
        false_neg = int((pred_false * label_true).sum())
        true_neg = int((pred_false * label_false).sum())
        self.true_positives += true_pos
        self.global_true_positives += true_pos
        self.false_positives += false_pos
        self.global_false_positives += false_pos
        self.false_negatives += false_neg
        self.global_false_negatives += false_neg
        self.true_negatives += true_neg
        self.global_true_negatives += true_neg

    @staticmethod
    def _ratio(a, b):
        return float(a) / (a + b) if a + b > 0 else 0.

    @property
    def precision(self):
        return self._ratio(self.true_positives, self.false_positives)

    @property
    def global_precision(self):
        return self._ratio(self.global_true_positives, self.global_false_positives)

    @property
    def recall(self):
        return self._ratio(self.true_positives, self.false_negatives)

    @property
    def global_recall(self):
        return self._ratio(self.global_true_positives, self.global_false_negatives)

    @property
    def fscore(self):
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.

    @property
    def global_fscore(self):
        p, r = self.global_precision, self.global_recall
        return 2 * p * r / (p + r) if p + r > 0 else 0.

    def matthewscc(self, use_global=False):
        """Matthews correlation coefficient (zero denominator terms replaced by 1)."""
        if use_global:
            if not self.global_total_examples:
                return 0.
            tp, fp = float(self.global_true_positives), float(self.global_false_positives)
            fn, tn = float(self.global_false_negatives), float(self.global_true_negatives)
        else:
            if not self.total_examples:
                return 0.
            tp, fp = float(self.true_positives), float(self.false_positives)
            fn, tn = float(self.false_negatives), float(self.true_negatives)
        denom = 1.
        for t in (tp + fp, tp + fn, tn + fp, tn + fn):
            if t != 0.:
                denom *= t
        return ((tp * tn) - (fp * fn)) / math.sqrt(denom)

    @property
    def total_examples(self):
        return self.false_negatives + self.false_positives + \
            self.true_negatives + self.true_positives

    @property
    def global_total_examples(self):
        return self.global_false_negatives + self.global_false_positives + \
            self.global_true_negatives + self.global_true_positives

    def local_reset_stats(self):
        self.false_positives = 0
        self.false_negatives = 0
        self.true_positives = 0
        self.true_negatives = 0

    def reset_stats(self):
        self.local_reset_stats()
        self.global_false_positives = 0
        self.global_false_negatives = 0
        self.global_true_positives = 0
        self.global_true_negatives = 0


@register
class F1(EvalMetric):
    """Binary F1 score; ``average`` 'macro' (per batch) or 'micro' (over all batches)."""

    def __init__(self, name='f1',
                 output_names=None, label_names=None, average="macro"):
        self.average = average
        self.metrics = _BinaryClassificationMetrics()
        EvalMetric.__init__(self, name=name,
                            output_names=output_names, label_names=label_names,
                            has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self.metrics.update_binary_stats(label, pred)

        if self.average == "macro":
            self.sum_metric += self.metrics.fscore
            self.global_sum_metric += self.metrics.global_fscore
            self.num_inst += 1
            self.global_num_inst += 1
            self.metrics.reset_stats()
        else:
            self.sum_metric = self.metrics.fscore * self.metrics.total_examples
            self.global_sum_metric = self.metrics.global_fscore * \
                self.metrics.global_total_examples
            self.num_inst = self.metrics.total_examples
            self.global_num_inst = self.metrics.global_total_examples

    def reset(self):
        self.sum_metric = 0.
        self.num_inst = 0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0
        self.metrics.reset_stats()

    def reset_local(self):
        self.sum_metric = 0.
        self.num_inst = 0
        self.metrics.local_reset_stats()


@register
class MCC(EvalMetric):
    """Binary Matthews correlation coefficient; ``average`` 'macro' or 'micro'."""

    def __init__(self, name='mcc',
                 output_names=None, label_names=None, average="macro"):
        self._average = average
        self._metrics = _BinaryClassificationMetrics()
        EvalMetric.__init__(self, name=name,
                            output_names=output_names, label_names=label_names,
                            has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self._metrics.update_binary_stats(label, pred)

        if self._average == "macro":
            self.sum_metric += self._metrics.matthewscc()
            self.global_sum_metric += self._metrics.matthewscc(use_global=True)
            self.num_inst += 1
            self.global_num_inst += 1
            self._metrics.reset_stats()
        else:
            self.sum_metric = self._metrics.matthewscc() * self._metrics.total_examples
            self.global_sum_metric = self._metrics.matthewscc(use_global=True) * \
                self._metrics.global_total_examples
            self.num_inst = self._metrics.total_examples
            self.global_num_inst = self._metrics.global_total_examples

    def reset(self):
        self.sum_metric = 0.
        self.num_inst = 0.
        self.global_sum_metric = 0.
        self.global_num_inst = 0.
        self._metrics.reset_stats()

    def reset_local(self):
        self.sum_metric = 0.
        self.num_inst = 0.
        self._metrics.local_reset_stats()


@register
class Perplexity(EvalMetric):
    """Perplexity ``exp(-mean(log p(label)))``, skipping ``ignore_label`` entries."""

    def __init__(self, ignore_label, axis=-1, name='perplexity',
                 output_names=None, label_names=None):
        super(Perplexity, self).__init__(
            name, ignore_label=ignore_label,
            output_names=output_names, label_names=label_names,
            has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        assert len(labels) == len(preds)
        loss = 0.
        num = 0
        for label, pred in zip(labels, preds):
            pred_np = _asnumpy(pred)
            label_np = _asnumpy(label)
            assert label_np.size == pred_np.size / pred_np.shape[-1], \
                "shape mismatch: %s vs. %s" % (label_np.shape, pred_np.shape)
            label_np = label_np.reshape((label_np.size,))
            # ndarray.pick(pred, label, axis) with mxnet's default 'clip' mode
            moved = numpy.moveaxis(pred_np, self.axis, -1)
            ncls = moved.shape[-1]
            moved = moved.reshape(-1, ncls)
            idx = numpy.clip(label_np.astype('int32'), 0, ncls - 1).astype(numpy.int64)
            picked = moved[numpy.arange(moved.shape[0]), idx]
            if self.ignore_label is not None:
                ignore = (label_np == self.ignore_label).astype(picked.dtype)
                num -= float(ignore.sum())
                picked = picked * (1 - ignore) + ignore
            floor = numpy.asarray(1e-10, dtype=picked.dtype)
            loss -= float(numpy.log(numpy.maximum(floor, picked)).sum())
            num += picked.size
        self._add(loss, num)

    def get(self):
        if self.num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self):
        if self.global_num_inst == 0:
            return (self.name, float('nan'))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


####################
# REGRESSION METRICS
####################

def _as_2d(x):
    if len(x.shape) == 1:
        return x.reshape(x.shape[0], 1)
    return x


@register
class MAE(EvalMetric):
    """Mean absolute error, averaged per batch."""

    def __init__(self, name='mae', output_names=None, label_names=None):
        super(MAE, self).__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _as_2d(_asnumpy(label))
            pred = _as_2d(_asnumpy(pred))
            mae = float(numpy.abs(label - pred).mean())
            self._add(mae, 1)


@register
class MSE(EvalMetric):
    """Mean squared error, averaged per batch."""

    def __init__(self, name='mse', output_names=None, label_names=None):
        super(MSE, self).__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _as_2d(_asnumpy(label))
            pred = _as_2d(_asnumpy(pred))
            mse = float(((label - pred) ** 2.0).mean())
            self._add(mse, 1)


@register
class RMSE(EvalMetric):
    """Root mean squared error, averaged per batch."""

    def __init__(self, name='rmse', output_names=None, label_names=None):
        super(RMSE, self).__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _as_2d(_asnumpy(label))
            pred = _as_2d(_asnumpy(pred))
            rmse = float(numpy.sqrt(((label - pred) ** 2.0).mean()))
            self._add(rmse, 1)


def _nll(label, pred, eps):
    label = _asnumpy(label).ravel()
    pred = _asnumpy(pred)
    assert label.shape[0] == pred.shape[0], (label.shape[0], pred.shape[0])
    prob = pred[numpy.arange(label.shape[0], dtype=numpy.int64), numpy.int64(label)]
    return float((-numpy.log(prob + eps)).sum()), label.shape[0]


@register
@alias('ce')
class CrossEntropy(EvalMetric):
    """Cross entropy ``-log(p[label] + eps)`` averaged over samples."""

    def __init__(self, eps=1e-12, name='cross-entropy',
                 output_names=None, label_names=None):
        super(CrossEntropy, self).__init__(
            name, eps=eps,
            output_names=output_names, label_names=label_names,
            has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            ce, n = _nll(label, pred, self.eps)
            self._add(ce, n)


@register
@alias('nll_loss')
class NegativeLogLikelihood(EvalMetric):
    """Negative log-likelihood, averaged over samples."""

    def __init__(self, eps=1e-12, name='nll-loss',
                 output_names=None, label_names=None):
        super(NegativeLogLikelihood, self).__init__(
            name, eps=eps,
            output_names=output_names, label_names=label_names,
            has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            nll, n = _nll(label, pred, self.eps)
            self._add(nll, n)


@register
@alias('pearsonr')
class PearsonCorrelation(EvalMetric):
    """Pearson correlation; ``average`` 'macro' (per batch) or 'micro'."""

    def __init__(self, name='pearsonr',
                 output_names=None, label_names=None, average='macro'):
        self.average = average
        super(PearsonCorrelation, self).__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=True)
        if self.average == 'micro':
            self.reset_micro()

    def reset_micro(self):
        self._sse_p = 0
        self._mean_p = 0
        self._sse_l = 0
        self._mean_l = 0
        self._pred_nums = 0
        self._label_nums = 0
        self._conv = 0

    def reset(self):
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0
        if self.average == 'micro':
            self.reset_micro()

    def update_variance(self, new_values, *aggregate):
        count, mean, m_2 = aggregate
        count += len(new_values)
        delta = new_values - mean
        mean += numpy.sum(delta / count)
        delta_2 = new_values - mean
        m_2 += numpy.sum(delta * delta_2)
        return count, mean, m_2

    def update_cov(self, label, pred):
        self._conv = self._conv + numpy.sum((label - self._mean_l) * (pred - self._mean_p))

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            check_label_shapes(label, pred, False, True)
            label = _asnumpy(label).ravel().astype(numpy.float64)
            pred = _asnumpy(pred).ravel().astype(numpy.float64)
            if self.average == 'macro':
                pearson_corr = float(numpy.corrcoef(pred, label)[0, 1])
                self._add(pearson_corr, 1)
            else:
                self.global_num_inst += 1
                self.num_inst += 1
                self._label_nums, self._mean_l, self._sse_l = \
                    self.update_variance(label, self._label_nums, self._mean_l, self._sse_l)
                self.update_cov(label, pred)
                self._pred_nums, self._mean_p, self._sse_p = \
                    self.update_variance(pred, self._pred_nums, self._mean_p, self._sse_p)

    def get(self):
        if self.num_inst == 0:
            return (self.name, float('nan'))
        if self.average == 'macro':
            return (self.name, self.sum_metric / self.num_inst)
        n = self._label_nums
        pearsonr = self._conv / ((n - 1) * numpy.sqrt(self._sse_p / (n - 1))
                                 * numpy.sqrt(self._sse_l / (n - 1)))
        return (self.name, float(pearsonr))


@register
class PCC(EvalMetric):
    """Multiclass Matthews correlation from a growing confusion matrix."""

    def __init__(self, name='pcc',
                 output_names=None, label_names=None,
                 has_global_stats=True):
        self.k = 2
        super(PCC, self).__init__(
            name=name, output_names=output_names, label_names=label_names,
            has_global_stats=has_global_stats)

    def _grow(self, inc):
        self.lcm = numpy.pad(self.lcm, ((0, inc), (0, inc)), 'constant', constant_values=(0))
        self.gcm = numpy.pad(self.gcm, ((0, inc), (0, inc)), 'constant', constant_values=(0))
        self.k += inc

    def _calc_mcc(self, cmat):
        n = cmat.sum()
        x = cmat.sum(axis=1)
        y = cmat.sum(axis=0)
        cov_xx = numpy.sum(x * (n - x))
        cov_yy = numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float('nan')
        i = cmat.diagonal()
        cov_xy = numpy.sum(i * n - x * y)
        return cov_xy / (cov_xx * cov_yy) ** 0.5

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _asnumpy(label).astype('int32')
            pred = _asnumpy(pred)
            if pred.shape != label.shape:
                pred = pred.argmax(axis=1)
            else:
                pred = pred.astype('int32')
            n = max(pred.max(), label.max())
            if n >= self.k:
                self._grow(n + 1 - self.k)
            bcm = numpy.zeros((self.k, self.k))
            for i, j in zip(pred, label):
                bcm[i, j] += 1
            self.lcm += bcm
            self.gcm += bcm
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self):
        return self._calc_mcc(self.lcm) * self.num_inst

    @property
    def global_sum_metric(self):
        return self._calc_mcc(self.gcm) * self.global_num_inst

    def reset(self):
        self.global_num_inst = 0.
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0.
        self.lcm = numpy.zeros((self.k, self.k))


@register
class Loss(EvalMetric):
    """Dummy metric that averages the (loss) outputs themselves."""

    def __init__(self, name='loss', output_names=None, label_names=None):
        super(Loss, self).__init__(
            name, output_names=output_names, label_names=label_names,
            has_global_stats=True)

    def update(self, _, preds):
        if _is_array(preds):
            preds = [preds]
        for pred in preds:
            pred_np = _asnumpy(pred)
            loss = float(pred_np.sum())
            self._add(loss, pred_np.size)


@register
class Torch(Loss):
    """Dummy metric for torch criterions."""

    def __init__(self, name='torch', output_names=None, label_names=None):
        super(Torch, self).__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """Dummy metric for caffe criterions."""

    def __init__(self, name='caffe', output_names=None, label_names=None):
        super(Caffe, self).__init__(name, output_names=output_names, label_names=label_names)


@register
class CustomMetric(EvalMetric):
    """Metric from ``feval(label, pred)`` on numpy arrays; it returns a value or
    ``(sum_metric, num_inst)``."""

    def __init__(self, feval, name=None, allow_extra_outputs=False,
                 output_names=None, label_names=None):
        if name is None:
            name = feval.__name__
            if name.find('<') != -1:
                name = 'custom(%s)' % name
        super(CustomMetric, self).__init__(
            name, feval=feval,
            allow_extra_outputs=allow_extra_outputs,
            output_names=output_names, label_names=label_names,
            has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)

        for pred, label in zip(preds, labels):
            reval = self._feval(_asnumpy(label), _asnumpy(pred))
            if isinstance(reval, tuple):
                (sum_metric, num_inst) = reval
                self._add(sum_metric, num_inst)
            else:
                self._add(reval, 1)

    def get_config(self):
        raise NotImplementedError("CustomMetric cannot be serialized")


# pylint: disable=invalid-name
def np(numpy_feval, name=None, allow_extra_outputs=False):
    """Wrap ``numpy_feval(label, pred)`` (numpy arrays in, float out) as a CustomMetric."""
    def feval(label, pred):
        """Internal eval function."""
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
# pylint: enable=invalid-name
