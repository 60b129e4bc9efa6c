"""mxnet 1.9.1's common optimizers: SGD, NAG, Adam, AdaGrad, RMSProp, AdaDelta.

Each is a few lines over :class:`~runtime.optimizer_base.Optimizer`: its states, its
update rule's name (a generated multi-tensor kernel, ``optimizer_kernels.py``) and the
rule's scalars. Exported by ``runtime.optimizer`` (``mx.optimizer``).
"""
from __future__ import annotations

import math

import torch

from .optimizer_base import Optimizer, master_copy, register
from .optimizer_kernels import _zeros_like

__all__ = ["MomentumState", "SGD", "NAG", "Adam", "AdaGrad", "RMSProp", "AdaDelta"]


def _float32_zeros(weight, count):
    """``count`` float32 zero arrays shaped and placed like ``weight``."""
    return tuple(_zeros_like(weight, torch.float32) for _ in range(count))


class MomentumState:
    """The state of SGD, NAG (and LARS, LBSGD): a momentum array of the weight's
    dtype, or None without momentum. Under multi_precision the pair is
    ``(momentum, fp32 master)``, master last: mxnet's order for these optimizers,
    the reverse of the base class's."""

    _mp_hint_name = "SGD optimizer"     # mxnet's float16 warning names SGD here

    def create_state(self, index, weight):
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def create_state_multi_precision(self, index, weight):
        if not self._mp(weight):
            return Optimizer.create_state_multi_precision(self, index, weight)
        master = master_copy(weight)
        return (self.create_state(index, master), master)

    def _split_mp(self, state):
        return state[0], state[1]

    def _has_momentum(self, state):
        # a negative momentum keeps its array but, as the kernels' rule choice, no role
        return state is not None and self.momentum > 0

    def _state_tensors(self, state):
        return [state] if self._has_momentum(state) else []

    def _scalars(self):
        return (float(self.momentum), 0.0, 0.0, 0.0)


@register
class SGD(MomentumState, Optimizer):
    """SGD with momentum and weight decay (mxnet's ``sgd_update`` / ``sgd_mom_update``).

    ``state = momentum * state - lr * (rescale_grad * clip(grad) + wd * weight)``;
    ``weight += state``. ``lazy_update``: a row_sparse gradient updates only its rows
    (``runtime/sparse_update.py``).
    """

    _updater_skips_update = True     # as mxnet 1.9.1 (Optimizer._updater_skips_update)

    _lazy_rule = "sgd"      # sgd_update / sgd_mom_update's sparse path (sparse_rules.py)

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = 4          # mxnet's default MXNET_OPTIMIZER_AGGREGATION_SIZE

    def _rule(self, state):
        return "sgd_mom" if self._has_momentum(state) else "sgd"


@register
class NAG(MomentumState, Optimizer):
    """Nesterov accelerated gradient (mxnet's ``nag_mom_update``; ``sgd_update`` without
    momentum)."""

    _updater_skips_update = True     # as mxnet 1.9.1 (Optimizer._updater_skips_update)

    _mp_hint_name = "NAG optimizer"

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def _rule(self, state):
        return "nag_mom" if self._has_momentum(state) else "sgd"


@register
class Adam(Optimizer):
    """Adam (mxnet's ``adam_update``): the bias correction of each parameter's own step
    count is folded into its lr on the host. ``lazy_update``: a row_sparse gradient
    updates only its rows and their moments."""

    _lazy_rule = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2 = beta1, beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        mean, variance = _zeros_like(weight), _zeros_like(weight)
        return (mean, variance)

    def _rule(self, state):
        return "adam"

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), float(self.epsilon), 0.0)

    def _bias_corrected(self, lr, step):
        # lr * (sqrt(1 - beta2**t) / (1 - beta1**t)): the factor first, as mxnet does
        # it, so the float64 lr it hands the kernel is the same to the last bit
        factor = math.sqrt(1. - self.beta2 ** step) / (1. - self.beta1 ** step)
        return lr * factor

    def _hyper(self, indices):
        steps = [self._index_update_count[index] for index in indices]
        lrs = [self._bias_corrected(lr, step)
               for lr, step in zip(self._get_lrs(indices), steps)]
        return lrs, self._get_wds(indices)


@register
class AdaGrad(Optimizer):
    """AdaGrad: ``history += g*g; w += (g / sqrt(history + eps) + w*wd) * -lr``."""

    _lazy_rule = "adagrad"  # _sparse_adagrad_update

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return _zeros_like(weight, torch.float32)     # the squared-gradient history

    def _rule(self, state):
        return "adagrad"

    def _scalars(self):
        return (float(self.float_stable_eps), 0.0, 0.0, 0.0)


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton), or Graves' centered variant with ``centered=True``
    (states ``(n,)`` or ``(n, g, delta)``, float32 as in mxnet)."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1, self.gamma2 = gamma1, gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        return _float32_zeros(weight, 3 if self.centered else 1)

    def _rule(self, state):
        return "rmspropalex" if self.centered else "rmsprop"

    def _clip_weights(self):
        return bool(self.clip_weights) and float(self.clip_weights) >= 0

    def _scalars(self):
        bound = float(self.clip_weights) if self._clip_weights() else 0.0
        return (float(self.gamma1), float(self.epsilon), float(self.gamma2), bound)


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler): no learning rate; ``w -= delta + wd * w``. States: the running
    means of the squared gradients and of the squared steps (float32)."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return _float32_zeros(weight, 2)

    def _rule(self, state):
        return "adadelta"

    def _scalars(self):
        return (float(self.rho), float(self.epsilon), 0.0, 0.0)
