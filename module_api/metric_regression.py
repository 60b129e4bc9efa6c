"""Regression and likelihood metrics of ``mx.metric``: MAE, MSE, RMSE,
CrossEntropy, NegativeLogLikelihood, PearsonCorrelation, and Loss (with its
Torch / Caffe names) that averages a network's loss outputs.

MAE, MSE and RMSE average per batch (each batch counts once, whatever its size),
as in mxnet 1.9.1; the likelihood metrics average per sample.
"""
import numpy

from .metric_base import (EvalMetric, alias, batch_pairs, check_label_shapes, host_array,
                          is_single_array, register)


def _column(values):
    """A 1-d array as one column (n x 1); other arrays as they are."""
    if len(values.shape) == 1:
        return values.reshape(values.shape[0], 1)
    return values


def _batch_differences(label, pred):
    """``label - pred`` on the host, 1-d inputs taken as columns."""
    return _column(host_array(label)) - _column(host_array(pred))


class _PerBatchError(EvalMetric):
    """Adds one number per (label, prediction) pair: ``_batch_error`` of their
    difference."""

    @staticmethod
    def _batch_error(difference):
        raise NotImplementedError("a per-batch error metric must define _batch_error()")

    def update(self, labels, preds):
        for label, pred in batch_pairs(labels, preds):
            error = self._batch_error(_batch_differences(label, pred))
            self._add(float(error), 1)


@register
class MAE(_PerBatchError):
    """Mean absolute error, averaged over batches.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name='mae', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, has_global_stats=True)

    @staticmethod
    def _batch_error(difference):
        return numpy.abs(difference).mean()


@register
class MSE(_PerBatchError):
    """Mean squared error, averaged over batches.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name='mse', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, has_global_stats=True)

    @staticmethod
    def _batch_error(difference):
        return (difference ** 2.0).mean()


@register
class RMSE(_PerBatchError):
    """Root mean squared error of each batch, averaged over batches.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name='rmse', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, has_global_stats=True)

    @staticmethod
    def _batch_error(difference):
        return numpy.sqrt((difference ** 2.0).mean())


class _LikelihoodMetric(EvalMetric):
    """Sum of ``-log(p[label] + eps)`` over samples; ``pred`` is samples x classes."""

    def __init__(self, eps, name, output_names, label_names):
        super().__init__(name, output_names, label_names, eps=eps, has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        for label, pred in batch_pairs(labels, preds):
            classes = host_array(label).ravel()
            probs = host_array(pred)
            assert classes.shape[0] == probs.shape[0], \
                "%d labels but %d rows of predictions" % (classes.shape[0], probs.shape[0])
            rows = numpy.arange(classes.shape[0], dtype=numpy.int64)
            chosen = probs[rows, classes.astype(numpy.int64)]
            # float32 predictions stay float32 up to the sum, as in mxnet
            self._add(float((-numpy.log(chosen + self.eps)).sum()), classes.shape[0])


@register
@alias('ce')
class CrossEntropy(_LikelihoodMetric):
    """Cross entropy of class probabilities against class-index labels.

    Parameters
    ----------
    eps : float
        Added to each probability before the log.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, eps=1e-12, name='cross-entropy',
                 output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


@register
@alias('nll_loss')
class NegativeLogLikelihood(_LikelihoodMetric):
    """Negative log-likelihood of the labels under the predicted probabilities.

    Parameters
    ----------
    eps : float
        Added to each probability before the log.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, eps=1e-12, name='nll-loss',
                 output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


@register
@alias('pearsonr')
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels (both flattened).

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    average : str
        'macro': the mean of per-batch correlations; 'micro': one correlation
        over everything since the last ``reset``, from running means, squared
        deviations (``_mean_l``, ``_sse_l``, ``_mean_p``, ``_sse_p``) and
        co-deviation ``_conv``. ``reset_local`` leaves the running sums alone.
    """

    def __init__(self, name='pearsonr',
                 output_names=None, label_names=None, average='macro'):
        self.average = average
        super().__init__(name, output_names, label_names, has_global_stats=True)
        if self.average == 'micro':
            self.reset_micro()

    def reset_micro(self):
        """Clear the running sums of 'micro' averaging."""
        self._label_nums, self._mean_l, self._sse_l = 0, 0, 0
        self._pred_nums, self._mean_p, self._sse_p = 0, 0, 0
        self._conv = 0

    def reset(self):
        super().reset()
        if self.average == 'micro':
            self.reset_micro()

    def update_variance(self, new_values, *aggregate):
        """Welford's step: ``(count, mean, sum of squared deviations)`` after
        ``new_values``, from the ``aggregate`` triple before them."""
        count, mean, squared_dev = aggregate
        count += len(new_values)
        from_old_mean = new_values - mean
        mean += numpy.sum(from_old_mean / count)
        squared_dev += numpy.sum(from_old_mean * (new_values - mean))
        return count, mean, squared_dev

    def update_cov(self, label, pred):
        """Add the batch's co-deviation from the running means to ``_conv``."""
        self._conv = self._conv + numpy.sum((label - self._mean_l) * (pred - self._mean_p))

    def update(self, labels, preds):
        for label, pred in batch_pairs(labels, preds):
            check_label_shapes(label, pred, False, True)
            label = host_array(label).ravel().astype(numpy.float64)
            pred = host_array(pred).ravel().astype(numpy.float64)
            if self.average == 'macro':
                self._add(float(numpy.corrcoef(pred, label)[0, 1]), 1)
            else:
                self._add_to_running_sums(label, pred)

    def _add_to_running_sums(self, label, pred):
        """'micro' step. The label mean moves before the co-deviation is taken
        and the prediction mean after, as in mxnet 1.9.1."""
        self.num_inst += 1
        self.global_num_inst += 1
        self._label_nums, self._mean_l, self._sse_l = self.update_variance(
            label, self._label_nums, self._mean_l, self._sse_l)
        self.update_cov(label, pred)
        self._pred_nums, self._mean_p, self._sse_p = self.update_variance(
            pred, self._pred_nums, self._mean_p, self._sse_p)

    def get(self):
        if self.average == 'macro' or self.num_inst == 0:
            return super().get()
        dof = self._label_nums - 1
        spread = dof * numpy.sqrt(self._sse_p / dof) * numpy.sqrt(self._sse_l / dof)
        return (self.name, float(self._conv / spread))


@register
class Loss(EvalMetric):
    """Mean of the predictions themselves (a network's loss outputs); labels
    are not read.

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, name='loss', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def update(self, _, preds):
        for pred in ([preds] if is_single_array(preds) else preds):
            values = host_array(pred)
            self._add(float(values.sum()), values.size)


@register
class Torch(Loss):
    """``Loss`` under the name 'torch'."""

    def __init__(self, name='torch', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


@register
class Caffe(Loss):
    """``Loss`` under the name 'caffe'."""

    def __init__(self, name='caffe', output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)
