"""The two optimizers an :class:`~.svrg_module.SVRGModule` installs (mxnet's
``mxnet.contrib.svrg_optimization.svrg_optimizer``).

``_SVRGOptimizer`` wraps the optimizer the user asked for: a key whose name holds
``full`` (``fc1_weight_full``, where the module sums its full gradients in a kvstore)
is written by ``_AssignmentOptimizer``, every other key is updated by the user's
optimizer. Both are registered, as mxnet registers them, so
``mx.optimizer.create('_SVRGOptimizer', default_optimizer='sgd', ...)`` works.
"""
from __future__ import annotations

import inspect

from runtime import optimizer as _opt

# the arguments of the base Optimizer: the wrapper takes these, the optimizer it wraps
# takes everything
_BASE_PARAMS = tuple(inspect.signature(_opt.Optimizer.__init__).parameters)[1:]


@_opt.register
class _AssignmentOptimizer(_opt.Optimizer):
    """``weight[:] = grad``: a kvstore key updated by it holds the sum of what was
    pushed, which is how SVRGModule sums full gradients across devices and workers."""

    def update(self, index, weight, grad, state):
        """Write ``grad`` into ``weight`` (``index`` and ``state`` are not used)."""
        weight[:] = grad


@_opt.register
class _SVRGOptimizer(_opt.Optimizer):
    """The user's optimizer for parameters, ``_AssignmentOptimizer`` for full gradients.

    Parameters
    ----------
    default_optimizer : str or Optimizer
        The optimizer ``SVRGModule.init_optimizer`` was given: a name is created with
        every other keyword argument.
    **kwargs
        The base Optimizer's arguments (``learning_rate``, ``rescale_grad``,
        ``param_idx2name`` ...), and the named optimizer's own.
    """

    def __init__(self, default_optimizer, **kwargs):
        super().__init__(**{k: v for k, v in kwargs.items() if k in _BASE_PARAMS})
        if isinstance(default_optimizer, str):
            self.default_opt = _opt.create(default_optimizer, **kwargs)
        else:
            self.default_opt = default_optimizer
        self.aux_opt = _opt.create(_AssignmentOptimizer.__name__)

    def _check_index(self, index):
        """The parameter name of ``index``: a kvstore's str key is its own name (a lookup,
        not a search of every name: this runs once per parameter and step)."""
        if isinstance(index, str):
            return index
        return self.idx2name[index]

    def update(self, index, weight, grad, state):
        """Update ``weight``: assign a full gradient, else the wrapped optimizer's rule."""
        if "full" in self._check_index(index):
            self.aux_opt.update(index, weight, grad, state)
        else:
            self.default_opt.update(index, weight, grad, state)

    def create_state(self, index, weight):
        """The state of the optimizer that updates ``index`` (none for a full gradient)."""
        if "full" in self._check_index(index):
            return self.aux_opt.create_state(index, weight)
        return self.default_opt.create_state(index, weight)
