"""``PythonModule`` and ``PythonLossModule``: modules computed in plain Python,
as mxnet 1.9.1's ``mx.mod.PythonModule`` / ``mx.mod.PythonLossModule``.

A ``PythonModule`` has no symbol and no parameters. ``bind`` records the input
shapes and asks the subclass for its output shapes; the parameter, optimizer and
update calls do nothing. A ``PythonLossModule`` is the usual last link of a
``SequentialModule``: it hands its input (the scores) on as its output, and its
input gradient is ``grad_func(scores, labels)``.
"""
from __future__ import annotations

import logging

from runtime.ndarray import NDArray

from .. import ndarray as nd
from ..initializer import Uniform
from .base_module import BaseModule

_LOG = logging.getLogger(__name__)


def _name_list(names):
    """A tuple of names as a list (mxnet compares the bound names to a list);
    anything else as it is."""
    return list(names) if isinstance(names, tuple) else names


def _check_bound_names(owner, kind, shapes, names):
    """Assert that ``shapes`` (``(name, shape)`` pairs) name ``names``, in order.

    Parameters
    ----------
    owner : str
        The module's class name, for the message.
    kind : str
        ``data`` or ``label``.
    shapes : list of (str, tuple) or DataDesc
    names : list of str
        The module's ``<kind>_names``.
    """
    given = [shape[0] for shape in shapes]
    if given != names:
        raise AssertionError(f"{owner}.bind: {kind}_shapes name {given}, but the module "
                             f"was created with {kind}_names={names} (same names, same "
                             "order)")


class PythonModule(BaseModule):
    """A module written in Python, without parameters of its own.

    Parameters
    ----------
    data_names : list of str
        The names of its data inputs.
    label_names : list of str or None
        The names of its labels; ``None`` for a module without labels.
    output_names : list of str
        The names of its outputs.
    logger : Logger
        Where ``bind``'s warnings go.

    Notes
    -----
    A subclass implements ``_compute_output_shapes`` (called by ``bind`` once
    ``data_shapes`` / ``label_shapes`` are set), ``forward``, ``backward``,
    ``get_outputs`` and ``get_input_grads``; one with parameters overrides
    ``get_params``, ``init_params``, ``init_optimizer`` and ``update`` too.
    """

    def __init__(self, data_names, label_names, output_names, logger=_LOG):
        super().__init__(logger=logger)
        self._data_names = _name_list(data_names)
        self._label_names = _name_list(label_names)
        self._output_names = output_names
        # set by bind
        self._data_shapes = None
        self._label_shapes = None
        self._output_shapes = None

    @property
    def data_names(self):
        """list of str: the names of the data inputs."""
        return self._data_names

    @property
    def output_names(self):
        """list of str: the names of the outputs."""
        return self._output_names

    @property
    def data_shapes(self):
        """list of (str, tuple): the data inputs as given to ``bind``."""
        return self._data_shapes

    @property
    def label_shapes(self):
        """list of (str, tuple) or None: the labels as given to ``bind``."""
        return self._label_shapes

    @property
    def output_shapes(self):
        """list of (str, tuple): the outputs, from ``_compute_output_shapes``."""
        return self._output_shapes

    def get_params(self):
        """No parameters: ``({}, {})`` (``arg_params``, ``aux_params``)."""
        return {}, {}

    def init_params(self, initializer=Uniform(0.01), arg_params=None,
                    aux_params=None, allow_missing=False, force_init=False,
                    allow_extra=False):
        """Nothing to initialise; the arguments (those of ``Module.init_params``) are
        ignored."""

    def update(self):
        """Nothing to update."""

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Add this module's outputs against ``labels`` to ``eval_metric``.

        Parameters
        ----------
        eval_metric : EvalMetric
        labels : list of NDArray
            The batch's labels.
        pre_sliced : bool
            Labels already cut per device: not supported, a Python module runs on
            one context.

        Notes
        -----
        A module bound without labels leaves the metric as it is.
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
            One per name of ``label_names``, in that order.
        for_training, inputs_need_grad : bool
            Kept as ``for_training`` / ``inputs_need_grad``.
        force_rebind : bool
            Bind again when already bound (otherwise a warning, and nothing changes).
        shared_module : BaseModule, optional
            Ignored: there is nothing to share.
        grad_req : str
            Only ``'write'``.

        Notes
        -----
        As in mxnet, ``binded`` is left as it was: the ``SequentialModule`` holding
        this module keeps the bound state of the chain. The shapes are checked before
        anything is recorded, so a refused bind leaves the module as it was.
        """
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        assert grad_req == 'write', "Python module only support write gradient"
        owner = type(self).__name__
        _check_bound_names(owner, "data", data_shapes, self._data_names)
        if label_shapes is not None:
            if self._label_names is None:
                raise AssertionError(f"{owner}.bind: the module takes no labels "
                                     f"(label_names=None), got label_shapes={label_shapes}")
            _check_bound_names(owner, "label", label_shapes, self._label_names)
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._data_shapes = data_shapes
        self._label_shapes = label_shapes
        self._output_shapes = self._compute_output_shapes()

    def _compute_output_shapes(self):
        """The outputs' ``(name, shape)`` list, from ``data_shapes`` and
        ``label_shapes``; a subclass implements it."""
        raise NotImplementedError(f"{type(self).__name__} does not define "
                                  f"_compute_output_shapes(); a PythonModule subclass must")

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """No optimizer needed; the arguments (those of ``Module.init_optimizer``)
        are ignored."""


class PythonLossModule(PythonModule):
    """A loss in Python: its output is its input (the scores); ``backward`` sets the
    scores' gradient to ``grad_func(scores, labels)``.

    Parameters
    ----------
    name : str
        The output is named ``name + '_output'``.
    data_names : sequence of str
        Exactly one name (default ``('data',)``).
    label_names : sequence of str
        Exactly one name (default ``('softmax_label',)``).
    logger : Logger
        Where ``bind``'s warnings go.
    grad_func : callable, optional
        ``grad_func(scores, labels)`` returns the gradient of the loss with respect
        to the scores: an NDArray, or anything ``mx.nd.array`` takes (a numpy array).
        Without it, a subclass overrides ``_backward_impl``.

    Attributes
    ----------
    _scores, _labels, _scores_grad : NDArray
        The last forward's scores and labels, the last backward's gradient (read by
        subclasses, as in mxnet's examples).
    """

    def __init__(self, name='pyloss', data_names=('data',),
                 label_names=('softmax_label',), logger=_LOG, grad_func=None):
        assert len(data_names) == 1, \
            f"PythonLossModule takes one input (the scores), got data_names={data_names}"
        assert len(label_names) == 1, \
            f"PythonLossModule takes one label, got label_names={label_names}"
        assert grad_func is None or callable(grad_func), \
            f"grad_func must be callable, got {type(grad_func).__name__}"
        super().__init__(data_names, label_names, [name + '_output'], logger=logger)
        self._name = name
        self._grad_func = grad_func
        self._scores = None
        self._labels = None
        self._scores_grad = None

    def _compute_output_shapes(self):
        """One output, of the scores' shape."""
        scores_shape = self._data_shapes[0][1]
        return [(self._name + '_output', scores_shape)]

    def forward(self, data_batch, is_train=None):
        """Keep the batch's scores and, when training, its labels.

        Parameters
        ----------
        data_batch : DataBatch
            ``data[0]`` holds the scores, ``label[0]`` the labels.
        is_train : bool, optional
            Defaults to ``for_training``.
        """
        self._scores = data_batch.data[0]
        training = self.for_training if is_train is None else is_train
        if training:
            self._labels = data_batch.label[0]

    def get_outputs(self, merge_multi_context=True):
        """``[scores]`` of the last forward (``merge_multi_context`` must be True:
        one context)."""
        assert merge_multi_context is True, "a Python loss runs on one context"
        return [self._scores]

    def backward(self, out_grads=None):
        """Compute the gradient with respect to the scores.

        Parameters
        ----------
        out_grads : None
            A loss is the end of the chain: no output gradient comes in.
        """
        assert out_grads is None, 'For a loss module, out_grads should be None'
        assert self.for_training, "backward needs a module bound with for_training=True"
        self._backward_impl()

    def _backward_impl(self):
        """Set ``_scores_grad`` to ``grad_func(_scores, _labels)`` as an NDArray; a
        subclass without ``grad_func`` overrides this."""
        if self._grad_func is None:
            raise NotImplementedError(
                "PythonLossModule without grad_func: pass grad_func=, or override "
                "_backward_impl to set self._scores_grad")
        grad = self._grad_func(self._scores, self._labels)
        self._scores_grad = grad if isinstance(grad, NDArray) else nd.array(grad)

    def get_input_grads(self, merge_multi_context=True):
        """``[gradient of the scores]`` from the last backward (``merge_multi_context``
        must be True: one context)."""
        assert merge_multi_context is True, "a Python loss runs on one context"
        return [self._scores_grad]

    def install_monitor(self, mon):
        """Not available: a Python loss has no executor to watch."""
        raise NotImplementedError(f"{type(self).__name__}: a PythonModule runs no executor a "
                                  f"monitor could watch")
