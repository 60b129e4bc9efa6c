"""``PythonModule`` and ``PythonLossModule``: modules whose computation is plain
Python, as mxnet 1.9.1's ``mx.mod.PythonModule`` / ``mx.mod.PythonLossModule``.

A ``PythonModule`` has no symbol and no parameters: binding records the data
and label shapes and asks the subclass for its output shapes; parameter,
optimizer and update calls do nothing. ``PythonLossModule`` is the usual last
link of a ``SequentialModule``: its output is its input (the scores), and its
input gradient is ``grad_func(scores, labels)``.
"""
from __future__ import annotations

import logging

from runtime.ndarray import NDArray

from .. import ndarray as nd
from ..initializer import Uniform
from .base_module import BaseModule

_LOG = logging.getLogger(__name__)


class PythonModule(BaseModule):
    """A module implemented in Python, with no parameters of its own.

    Parameters
    ----------
    data_names : list of str
        Names of the data the module takes.
    label_names : list of str or None
        Names of the labels it takes; ``None`` when it takes none.
    output_names : list of str
        Names of its outputs.
    logger : Logger
        Where ``bind`` warnings go.

    Notes
    -----
    Subclasses implement ``_compute_output_shapes`` (called by ``bind`` once
    ``data_shapes`` / ``label_shapes`` are set), ``forward``, ``backward``,
    ``get_outputs`` and ``get_input_grads``.
    """

    def __init__(self, data_names, label_names, output_names, logger=_LOG):
        super().__init__(logger=logger)
        self._data_names = list(data_names) if isinstance(data_names, tuple) else data_names
        self._label_names = list(label_names) if isinstance(label_names, tuple) else label_names
        self._output_names = output_names
        self._data_shapes = None
        self._label_shapes = None
        self._output_shapes = None

    @property
    def data_names(self):
        """The names of the data inputs."""
        return self._data_names

    @property
    def output_names(self):
        """The names of the outputs."""
        return self._output_names

    @property
    def data_shapes(self):
        """``(name, shape)`` of each data input, as given to ``bind``."""
        return self._data_shapes

    @property
    def label_shapes(self):
        """``(name, shape)`` of each label, as given to ``bind`` (``None`` without labels)."""
        return self._label_shapes

    @property
    def output_shapes(self):
        """``(name, shape)`` of each output, from ``_compute_output_shapes``."""
        return self._output_shapes

    def get_params(self):
        """A Python module holds no parameters.

        Returns
        -------
        tuple of dict
            ``({}, {})``.
        """
        return ({}, {})

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Do nothing: there are no parameters (a subclass with some overrides this).

        Parameters
        ----------
        initializer, arg_params, aux_params, allow_missing, force_init, allow_extra
            As ``Module.init_params``; ignored.
        """
        return None

    def update(self):
        """Do nothing: there are no parameters to update."""
        return None

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with ``labels`` and this module's outputs.

        Parameters
        ----------
        eval_metric : EvalMetric
            The metric to update.
        labels : list of NDArray
            The batch's labels.
        pre_sliced : bool
            Labels already cut per device; not supported (one context only).

        Notes
        -----
        Does nothing when the module was bound without labels.
        """
        if self._label_shapes is None:
            return
        if pre_sliced:
            raise RuntimeError("PythonModule does not support presliced labels")
        eval_metric.update(labels, self.get_outputs())

    def bind(self, data_shapes, label_shapes=None, for_training=True,
             inputs_need_grad=False, force_rebind=False, shared_module=None,
             grad_req='write'):
        """Record the input shapes and compute the output shapes.

        Parameters
        ----------
        data_shapes : list of (str, tuple) or DataDesc
            One per name of ``data_names``, in that order.
        label_shapes : list of (str, tuple) or DataDesc, optional
            One per name of ``label_names``.
        for_training, inputs_need_grad : bool
            Recorded as ``for_training`` / ``inputs_need_grad``.
        force_rebind : bool
            Bind again even if already bound.
        shared_module : BaseModule, optional
            Ignored.
        grad_req : str
            Must be ``'write'``.
        """
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        assert grad_req == 'write', "Python module only support write gradient"
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        assert len(data_shapes) == len(self._data_names), \
            f"{type(self).__name__}: {len(data_shapes)} data shapes for data names " \
            f"{self._data_names}"
        assert [x[0] for x in data_shapes] == self._data_names, \
            f"{type(self).__name__}: data shapes named {[x[0] for x in data_shapes]}, " \
            f"expected {self._data_names}"
        self._data_shapes = data_shapes
        self._label_shapes = label_shapes
        if label_shapes is not None:
            assert self._label_names is not None, \
                f"{type(self).__name__} takes no labels, got label shapes {label_shapes}"
            assert len(self._label_names) == len(label_shapes)
            assert [x[0] for x in label_shapes] == self._label_names, \
                f"{type(self).__name__}: label shapes named {[x[0] for x in label_shapes]}, " \
                f"expected {self._label_names}"
        self._output_shapes = self._compute_output_shapes()
        # as in mxnet 1.9.1, ``binded`` stays as it was: a container (SequentialModule)
        # keeps the bound state of the chain

    def _compute_output_shapes(self):
        """The ``(name, shape)`` list of the outputs; subclasses implement it."""
        raise NotImplementedError()

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Do nothing: there are no parameters to optimize.

        Parameters
        ----------
        kvstore, optimizer, optimizer_params, force_init
            As ``Module.init_optimizer``; ignored.
        """
        return None


class PythonLossModule(PythonModule):
    """A loss written in Python: passes its scores through and, on ``backward``,
    sets the scores' gradient to ``grad_func(scores, labels)``.

    Parameters
    ----------
    name : str
        The output is named ``name + '_output'``.
    data_names : sequence of str
        One name (default ``('data',)``).
    label_names : sequence of str
        One name (default ``('softmax_label',)``).
    logger : Logger
        Where ``bind`` warnings go.
    grad_func : callable, optional
        ``grad_func(scores, labels)`` returns the gradient with respect to the
        scores, as an NDArray or anything ``mx.nd.array`` takes (a numpy array).
        Without it, a subclass overrides ``_backward_impl``.
    """

    def __init__(self, name='pyloss', data_names=('data',), label_names=('softmax_label',),
                 logger=_LOG, grad_func=None):
        super().__init__(data_names, label_names, [name + '_output'], logger=logger)
        self._name = name
        assert len(data_names) == 1
        assert len(label_names) == 1
        self._scores = None
        self._labels = None
        self._scores_grad = None
        if grad_func is not None:
            assert callable(grad_func)
        self._grad_func = grad_func

    def _compute_output_shapes(self):
        """One output, shaped as the scores."""
        return [(self._name + '_output', self._data_shapes[0][1])]

    def forward(self, data_batch, is_train=None):
        """Keep the batch's scores (and, when training, its labels).

        Parameters
        ----------
        data_batch : DataBatch
            ``data[0]`` holds the scores, ``label[0]`` the labels.
        is_train : bool, optional
            Defaults to ``for_training``.
        """
        self._scores = data_batch.data[0]
        if is_train is None:
            is_train = self.for_training
        if is_train:
            self._labels = data_batch.label[0]

    def get_outputs(self, merge_multi_context=True):
        """The scores of the last forward.

        Parameters
        ----------
        merge_multi_context : bool
            Must be True (one context).

        Returns
        -------
        list of NDArray
        """
        assert merge_multi_context is True
        return [self._scores]

    def backward(self, out_grads=None):
        """Compute the gradient with respect to the scores.

        Parameters
        ----------
        out_grads : None
            A loss takes no output gradient.
        """
        assert out_grads is None, 'For a loss module, out_grads should be None'
        assert self.for_training
        self._backward_impl()

    def _backward_impl(self):
        """Set ``_scores_grad`` from ``_scores`` and ``_labels`` with ``grad_func``;
        a subclass without one overrides this."""
        if self._grad_func is None:
            raise NotImplementedError()
        grad = self._grad_func(self._scores, self._labels)
        if not isinstance(grad, NDArray):
            grad = nd.array(grad)
        self._scores_grad = grad

    def get_input_grads(self, merge_multi_context=True):
        """The gradient with respect to the scores, from the last backward.

        Parameters
        ----------
        merge_multi_context : bool
            Must be True (one context).

        Returns
        -------
        list of NDArray
        """
        assert merge_multi_context is True
        return [self._scores_grad]

    def install_monitor(self, mon):
        """Not available: a Python loss has no executors to watch."""
        raise NotImplementedError()
