"""Classification metrics of ``mx.metric``: Accuracy, TopKAccuracy, F1, MCC,
Perplexity and PCC (multiclass Matthews correlation).

Predictions are class scores (or, for Accuracy and PCC, class indices shaped
like the labels); labels are class indices. Counts are exact integers; the
scores follow mxnet 1.9.1's arithmetic step for step, so values compare equal.
"""
import math

import numpy

from .metric_base import EvalMetric, alias, batch_pairs, check_label_shapes, host_array, register

_COUNT_KINDS = ('true_positives', 'false_positives', 'false_negatives', 'true_negatives')


@register
@alias('acc')
class Accuracy(EvalMetric):
    """Share of samples whose predicted class equals the label.

    Parameters
    ----------
    axis : int
        Class axis of score predictions (argmax taken along it); predictions
        shaped like the labels are taken as class indices.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, axis=1, name='accuracy',
                 output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, axis=axis, has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        for label, pred in batch_pairs(labels, preds):
            truth = host_array(label)
            guess = host_array(pred)
            if guess.shape != truth.shape:
                guess = numpy.argmax(guess, axis=self.axis)
            guess = guess.astype('int32').ravel()
            truth = truth.astype('int32').ravel()
            check_label_shapes(truth, guess)
            self._add(int(numpy.count_nonzero(guess == truth)), len(guess))


@register
@alias('top_k_accuracy', 'top_k_acc')
class TopKAccuracy(EvalMetric):
    """Share of samples whose label is among the ``top_k`` highest scores.

    Parameters
    ----------
    top_k : int
        How many of the best classes count as a hit; more than 1 (use
        ``Accuracy`` for 1). The name gets ``_<top_k>`` appended.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, top_k=1, name='top_k_accuracy',
                 output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, top_k=top_k, has_global_stats=True)
        self.top_k = top_k
        assert self.top_k > 1, \
            'Please use Accuracy if top_k is no more than 1 (got top_k=%r)' % (top_k,)
        self.name += '_%d' % self.top_k

    def update(self, labels, preds):
        for label, pred in batch_pairs(labels, preds):
            assert len(pred.shape) <= 2, \
                'Predictions should be no more than 2 dims (got shape %s)' % (tuple(pred.shape),)
            # classes in ascending score order at the tail: the last top_k are the best
            ranked = numpy.argpartition(host_array(pred).astype('float32'), -self.top_k)
            truth = host_array(label).astype('int32')
            check_label_shapes(truth, ranked)
            truth = truth.ravel()
            if ranked.ndim == 1:
                # as in mxnet 1.9.1, 1-d predictions reach the local sum only
                self.sum_metric += int(numpy.count_nonzero(ranked.ravel() == truth))
            elif ranked.ndim == 2:
                hits = self._hits_in_best_columns(ranked, truth)
                self.sum_metric += hits
                self.global_sum_metric += hits
            self.num_inst += ranked.shape[0]
            self.global_num_inst += ranked.shape[0]

    def _hits_in_best_columns(self, ranked, truth):
        """Rows of ``ranked`` (samples x classes) whose best ``top_k`` columns hold
        the row's label."""
        num_classes = ranked.shape[1]
        best = ranked[:, num_classes - min(num_classes, self.top_k):]
        return int(numpy.count_nonzero(best == truth[:, None]))


def _share(part, rest):
    """``part / (part + rest)``, 0 when both are 0."""
    whole = part + rest
    return float(part) / whole if whole > 0 else 0.


def _harmonic_mean(precision, recall):
    """F1 from precision and recall, 0 when both are 0."""
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.


class _BinaryClassificationMetrics(object):
    """Confusion counts of a binary classifier, local and global.

    The attributes are the four counts ``true_positives``, ``false_positives``,
    ``false_negatives``, ``true_negatives`` and the same with a ``global_``
    prefix; ``local_reset_stats`` clears the first four, ``reset_stats`` all.
    """

    def __init__(self):
        self.reset_stats()

    def update_binary_stats(self, label, pred):
        """Count one batch: ``pred`` are two-class scores (samples x 2), ``label``
        holds at most two distinct values, of which 1 is the positive class."""
        scores = host_array(pred)
        truth = host_array(label).astype('int32')
        predicted_pos = numpy.argmax(scores, axis=1) == 1
        check_label_shapes(truth, scores)
        if len(numpy.unique(truth)) > 2:
            raise ValueError("%s currently only supports binary classification. "
                             "The labels hold the classes %s."
                             % (self.__class__.__name__, numpy.unique(truth).tolist()))
        actual_pos = truth == 1
        batch = {
            'true_positives': predicted_pos & actual_pos,
            'false_positives': predicted_pos & ~actual_pos,
            'false_negatives': ~predicted_pos & actual_pos,
            'true_negatives': ~predicted_pos & ~actual_pos,
        }
        for kind in _COUNT_KINDS:
            seen = int(numpy.count_nonzero(batch[kind]))
            setattr(self, kind, getattr(self, kind) + seen)
            setattr(self, 'global_' + kind, getattr(self, 'global_' + kind) + seen)

    @property
    def precision(self):
        return _share(self.true_positives, self.false_positives)

    @property
    def global_precision(self):
        return _share(self.global_true_positives, self.global_false_positives)

    @property
    def recall(self):
        return _share(self.true_positives, self.false_negatives)

    @property
    def global_recall(self):
        return _share(self.global_true_positives, self.global_false_negatives)

    @property
    def fscore(self):
        return _harmonic_mean(self.precision, self.recall)

    @property
    def global_fscore(self):
        return _harmonic_mean(self.global_precision, self.global_recall)

    def matthewscc(self, use_global=False):
        """Matthews correlation of the local (or global) counts; 0 with no
        samples. Empty margins count as 1 in the denominator."""
        prefix = 'global_' if use_global else ''
        if not getattr(self, prefix + 'total_examples'):
            return 0.
        tp, fp, fn, tn = (float(getattr(self, prefix + kind)) for kind in _COUNT_KINDS)
        denominator = 1.
        for margin in (tp + fp, tp + fn, tn + fp, tn + fn):
            if margin != 0.:
                denominator *= margin
        return ((tp * tn) - (fp * fn)) / math.sqrt(denominator)

    @property
    def total_examples(self):
        return sum(getattr(self, kind) for kind in _COUNT_KINDS)

    @property
    def global_total_examples(self):
        return sum(getattr(self, 'global_' + kind) for kind in _COUNT_KINDS)

    def local_reset_stats(self):
        for kind in _COUNT_KINDS:
            setattr(self, kind, 0)

    def reset_stats(self):
        self.local_reset_stats()
        for kind in _COUNT_KINDS:
            setattr(self, 'global_' + kind, 0)


class _BinaryScoreMetric(EvalMetric):
    """F1 and MCC: a score of binary confusion counts, averaged per batch
    ('macro') or taken over all counts since the last reset ('micro')."""

    # mxnet keeps F1's counts as ints and MCC's as floats after a reset
    _zero_count = 0

    def _counts(self):
        """The ``_BinaryClassificationMetrics`` this metric fills."""
        raise NotImplementedError(f"{type(self).__name__} must define _counts()")

    def _averaging(self):
        raise NotImplementedError()

    def _score(self, use_global):
        raise NotImplementedError()

    def update(self, labels, preds):
        counts = self._counts()
        for label, pred in batch_pairs(labels, preds):
            counts.update_binary_stats(label, pred)
        if self._averaging() == "macro":
            self.sum_metric += self._score(use_global=False)
            self.global_sum_metric += self._score(use_global=True)
            self.num_inst += 1
            self.global_num_inst += 1
            counts.reset_stats()
        else:
            # micro: sums rebuilt from the pooled counts, weighted by their size
            self.sum_metric = self._score(use_global=False) * counts.total_examples
            self.global_sum_metric = \
                self._score(use_global=True) * counts.global_total_examples
            self.num_inst = counts.total_examples
            self.global_num_inst = counts.global_total_examples

    def reset(self):
        self.sum_metric = 0.
        self.num_inst = self._zero_count
        self.global_sum_metric = 0.
        self.global_num_inst = self._zero_count
        self._counts().reset_stats()

    def reset_local(self):
        self.sum_metric = 0.
        self.num_inst = self._zero_count
        self._counts().local_reset_stats()


@register
class F1(_BinaryScoreMetric):
    """F1 score of a binary classifier (class 1 positive).

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    average : str
        'macro': the mean of per-batch scores; 'micro': the score of the counts
        pooled since the last reset.
    """

    def __init__(self, name='f1',
                 output_names=None, label_names=None, average="macro"):
        self.average = average
        self.metrics = _BinaryClassificationMetrics()
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def _counts(self):
        return self.metrics

    def _averaging(self):
        return self.average

    def _score(self, use_global):
        return self.metrics.global_fscore if use_global else self.metrics.fscore


@register
class MCC(_BinaryScoreMetric):
    """Matthews correlation coefficient of a binary classifier (class 1 positive).

    Parameters
    ----------
    name, output_names, label_names
        As for ``EvalMetric``.
    average : str
        'macro': the mean of per-batch coefficients; 'micro': the coefficient
        of the counts pooled since the last reset.
    """

    _zero_count = 0.

    def __init__(self, name='mcc',
                 output_names=None, label_names=None, average="macro"):
        self._average = average
        self._metrics = _BinaryClassificationMetrics()
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def _counts(self):
        return self._metrics

    def _averaging(self):
        return self._average

    def _score(self, use_global):
        return self._metrics.matthewscc(use_global=use_global)


def _pick_clipped(scores, classes, axis):
    """``scores[..., classes[i], ...]`` along ``axis`` for every position i (in
    C order), class indices clipped into range like mxnet's ``pick``."""
    rows = numpy.moveaxis(scores, axis, -1)
    num_classes = rows.shape[-1]
    rows = rows.reshape(-1, num_classes)
    index = numpy.clip(classes.astype('int32'), 0, num_classes - 1).astype(numpy.int64)
    return rows[numpy.arange(rows.shape[0]), index]


@register
class Perplexity(EvalMetric):
    """``exp`` of the mean negative log-probability of the labels.

    Parameters
    ----------
    ignore_label : int or None
        Label value whose positions are left out (padding); None keeps all.
    axis : int
        Class axis of the predictions.
    name, output_names, label_names
        As for ``EvalMetric``.
    """

    def __init__(self, ignore_label, axis=-1, name='perplexity',
                 output_names=None, label_names=None):
        super().__init__(name, output_names, label_names, ignore_label=ignore_label,
                         has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        assert len(labels) == len(preds), \
            "%d label arrays but %d prediction arrays" % (len(labels), len(preds))
        neg_log_sum = 0.
        count = 0
        for label, pred in zip(labels, preds):
            probs = host_array(pred)
            targets = host_array(label)
            assert targets.size == probs.size / probs.shape[-1], \
                "shape mismatch: %s vs. %s" % (targets.shape, probs.shape)
            targets = targets.reshape((targets.size,))
            picked = _pick_clipped(probs, targets, self.axis)
            if self.ignore_label is not None:
                # ignored positions get probability 1 (log 0) and leave the count
                skip = (targets == self.ignore_label).astype(picked.dtype)
                count -= float(skip.sum())
                picked = picked * (1 - skip) + skip
            floor = numpy.asarray(1e-10, dtype=picked.dtype)
            neg_log_sum -= float(numpy.log(numpy.maximum(floor, picked)).sum())
            count += picked.size
        self._add(neg_log_sum, count)

    def get(self):
        return (self.name, math.exp(self._mean(self.sum_metric, self.num_inst)))

    def get_global(self):
        return (self.name, math.exp(self._mean(self.global_sum_metric, self.global_num_inst)))


@register
class PCC(EvalMetric):
    """Multiclass Matthews correlation (Pearson correlation of one-hot labels and
    predictions) from a confusion matrix that grows with the classes seen.

    ``lcm`` / ``gcm`` are the local / global confusion matrices (predicted class x
    label), ``k`` their size. ``num_inst`` counts ``update`` calls.
    """

    def __init__(self, name='pcc',
                 output_names=None, label_names=None,
                 has_global_stats=True):
        self.k = 2
        super().__init__(name, output_names, label_names, has_global_stats=has_global_stats)

    def _widen(self, extra):
        """Add ``extra`` zero rows and columns to both confusion matrices."""
        padding = ((0, extra), (0, extra))
        self.lcm = numpy.pad(self.lcm, padding, 'constant', constant_values=(0))
        self.gcm = numpy.pad(self.gcm, padding, 'constant', constant_values=(0))
        self.k += extra

    @staticmethod
    def _mcc_of(confusion):
        """Matthews correlation of a confusion matrix; nan when all samples fall
        in one predicted class or one label class."""
        total = confusion.sum()
        per_pred = confusion.sum(axis=1)
        per_label = confusion.sum(axis=0)
        spread_pred = numpy.sum(per_pred * (total - per_pred))
        spread_label = numpy.sum(per_label * (total - per_label))
        if spread_pred == 0 or spread_label == 0:
            return float('nan')
        agreement = numpy.sum(confusion.diagonal() * total - per_pred * per_label)
        return agreement / (spread_pred * spread_label) ** 0.5

    def update(self, labels, preds):
        for label, pred in batch_pairs(labels, preds):
            truth = host_array(label).astype('int32')
            guess = host_array(pred)
            if guess.shape != truth.shape:
                guess = guess.argmax(axis=1)
            else:
                guess = guess.astype('int32')
            largest = max(guess.max(), truth.max())
            if largest >= self.k:
                self._widen(largest + 1 - self.k)
            batch = numpy.zeros((self.k, self.k))
            for predicted, actual in zip(guess, truth):
                batch[predicted, actual] += 1
            self.lcm += batch
            self.gcm += batch
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self):
        return self._mcc_of(self.lcm) * self.num_inst

    @property
    def global_sum_metric(self):
        return self._mcc_of(self.gcm) * self.global_num_inst

    def reset(self):
        self.global_num_inst = 0.
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0.
        self.lcm = numpy.zeros((self.k, self.k))
