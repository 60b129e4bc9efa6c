"""Shared parts of ``mx.metric``: reading arrays on the host, the labels/predictions
length check, the ``EvalMetric`` base class and the name -> class table behind
``mx.metric.create``.

The metric classes live in ``metric_classification`` and ``metric_regression``;
``module_api.metric`` gathers everything under mxnet's names.
"""

import numpy
import torch

from . import registry as _registry

# What a child of a CompositeEvalMetric may report as one number (not a list).
NUMERIC_TYPES = (float, int, numpy.generic)


def is_single_array(obj):
    """True for one array (numpy array, torch tensor or NDArray), False otherwise
    (in particular for a list of arrays)."""
    return isinstance(obj, (numpy.ndarray, torch.Tensor))


def host_array(obj):
    """A numpy array on the host holding ``obj`` (an NDArray, a torch tensor or
    anything ``numpy.asarray`` takes)."""
    if hasattr(obj, 'asnumpy'):
        return obj.asnumpy()
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().numpy()
    return numpy.asarray(obj)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Raise ``ValueError`` unless labels and predictions agree in size.

    Parameters
    ----------
    labels, preds : list of arrays, or arrays
    wrap : bool
        Put a single array into a one-element list before returning it.
    shape : bool
        Compare the two ``.shape`` tuples instead of the two ``len()``.

    Returns
    -------
    tuple
        ``(labels, preds)``, wrapped when ``wrap`` asks for it.
    """
    if shape:
        sizes = (tuple(labels.shape), tuple(preds.shape))
    else:
        sizes = (len(labels), len(preds))
    if sizes[0] != sizes[1]:
        raise ValueError("Shape of labels {} does not match shape of "
                         "predictions {}".format(*sizes))
    if wrap:
        labels = [labels] if is_single_array(labels) else labels
        preds = [preds] if is_single_array(preds) else preds
    return labels, preds


def batch_pairs(labels, preds):
    """The ``(label, pred)`` pairs of one batch, after ``check_label_shapes``
    (single arrays count as one-element lists)."""
    labels, preds = check_label_shapes(labels, preds, True)
    return zip(labels, preds)


def _select(arrays, names, role):
    """The arrays of a ``name -> array`` mapping, in ``names`` order (all when None)."""
    if names is None:
        return list(arrays.values())
    missing = [key for key in names if key not in arrays]
    if missing:
        raise KeyError("%s %r not found; the batch has %s" % (role, missing[0], list(arrays)))
    return [arrays[key] for key in names]


def _as_pairs(name, value):
    """``(name, value)`` or ``([names], [values])`` as a list of pairs."""
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values))


class EvalMetric(object):
    """Base class of the evaluation metrics.

    A metric keeps two running sums: a local one (``sum_metric`` over
    ``num_inst``), which ``reset_local`` restarts, e.g. after each log line, and
    a global one (``global_sum_metric`` over ``global_num_inst``) that only
    ``reset`` clears. Subclasses implement ``update``.

    Parameters
    ----------
    name : str
        Name shown next to the value.
    output_names : list of str, or None
        Predictions ``update_dict`` passes on, by name (None: all, in order).
    label_names : list of str, or None
        Labels ``update_dict`` passes on, by name (None: all, in order).
    **kwargs
        Constructor arguments that ``get_config`` reports; ``has_global_stats``
        (default False) says whether the global sums are kept apart from the
        local ones.
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
        """The keyword arguments with which ``metric.create(**config)`` builds an
        equal metric."""
        config = dict(self._kwargs)
        config['metric'] = self.__class__.__name__
        config['name'] = self.name
        config['output_names'] = self.output_names
        config['label_names'] = self.label_names
        return config

    def update_dict(self, label, pred):
        """``update`` from ``name -> array`` mappings, keeping the names in
        ``label_names`` / ``output_names``."""
        preds = _select(pred, self.output_names, 'output')
        labels = _select(label, self.label_names, 'label')
        self.update(labels, preds)

    def update(self, labels, preds):
        """Add one batch: ``labels`` and ``preds`` are lists of arrays."""
        raise NotImplementedError(f"{type(self).__name__} defines no update(labels, preds): "
                                  f"a metric subclass must")

    def reset(self):
        """Clear the local and the global sums."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        """Clear the local sums; the global ones keep counting."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def _add(self, value, count):
        """Count ``value`` over ``count`` instances into both sums."""
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count

    @staticmethod
    def _mean(total, count):
        """``total / count``; nan when nothing was counted."""
        return float('nan') if count == 0 else total / count

    def get(self):
        """``(name, value)`` of the local sums; the value is nan before any update."""
        return (self.name, self._mean(self.sum_metric, self.num_inst))

    def get_global(self):
        """``(name, value)`` of the global sums (the local ones for a metric
        without global statistics)."""
        if not self._has_global_stats:
            return self.get()
        return (self.name, self._mean(self.global_sum_metric, self.global_num_inst))

    def get_name_value(self):
        """The local values as a list of ``(name, value)`` pairs."""
        return _as_pairs(*self.get())

    def get_global_name_value(self):
        """The global values as a list of ``(name, value)`` pairs."""
        if not self._has_global_stats:
            return self.get_name_value()
        return _as_pairs(*self.get_global())


# The family's table in mx.registry: class names and nicknames for mx.metric.create.
register = _registry.get_register_func(EvalMetric, "metric")
alias = _registry.get_alias_func(EvalMetric, "metric")
_create = _registry.get_create_func(EvalMetric, "metric")
