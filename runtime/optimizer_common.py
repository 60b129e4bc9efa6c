"""mxnet 1.9.1's common optimizers: SGD, NAG, Adam, AdaGrad, RMSProp, AdaDelta.

Each is a few lines over :class:`~runtime.optimizer_base.Optimizer`: its states, its
update rule's name (a generated multi-tensor kernel, ``optimizer_kernels.py``) and the
rule's scalars. Exported by ``runtime.optimizer`` (``mx.optimizer``).
"""
from __future__ import annotations

import math

import torch

from .optimizer_base import Optimizer, register
from .optimizer_kernels import _zeros_like

__all__ = ["MomentumState", "SGD", "NAG", "Adam", "AdaGrad", "RMSProp", "AdaDelta"]


class MomentumState:
    """State layout shared by SGD and NAG: ``mom`` or None; ``(mom, fp32 master)`` with
    multi_precision (mxnet's order for these two)."""

    def create_state_multi_precision(self, index, weight):
        if self._mp(weight):
            master = _zeros_like(weight, torch.float32)
            with torch.no_grad():
                master.copy_(weight)
            return (self.create_state(index, master), master)
        return Optimizer.create_state_multi_precision(self, index, weight)

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            return _zeros_like(weight)
        return None

    def _split_mp(self, state):
        return state[0], state[1]

    def _state_tensors(self, state):
        return [state] if (state is not None and self.momentum > 0) else []

    def _scalars(self):
        return (float(self.momentum), 0.0, 0.0, 0.0)


@register
class SGD(MomentumState, Optimizer):
    """SGD with momentum and weight decay (mxnet's ``sgd_update`` / ``sgd_mom_update``).

    ``state = momentum * state - lr * (rescale_grad * clip(grad) + wd * weight)``;
    ``weight += state``. ``lazy_update``: a row_sparse gradient updates only its rows
    (``runtime/sparse_update.py``).
    """

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = 4

    def _rule(self, state):
        return "sgd_mom" if (state is not None and self.momentum > 0) else "sgd"


@register
class NAG(MomentumState, Optimizer):
    """Nesterov accelerated gradient (mxnet's ``nag_mom_update``; ``sgd_update`` without
    momentum)."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def _rule(self, state):
        return "nag_mom" if (state is not None and self.momentum > 0) else "sgd"


@register
class Adam(Optimizer):
    """Adam (mxnet's ``adam_update`` with the bias correction folded into lr;
    ``lazy_update``: a row_sparse gradient updates only its rows and their moments)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, state):
        return "adam"

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), float(self.epsilon), 0.0)

    def _hyper(self, indices):
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        out = []
        for index, lr in zip(indices, lrs):
            t = self._index_update_count[index]
            coef1 = 1. - self.beta1 ** t
            coef2 = 1. - self.beta2 ** t
            out.append(lr * math.sqrt(coef2) / coef1)
        return out, wds


@register
class AdaGrad(Optimizer):
    """AdaGrad: ``history += g*g; w += (g / sqrt(history + eps) + w*wd) * -lr``."""

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return _zeros_like(weight, torch.float32)

    def _rule(self, state):
        return "adagrad"

    def _scalars(self):
        return (float(self.float_stable_eps), 0.0, 0.0, 0.0)


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton) or, with ``centered=True``, Graves' variant."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return (_zeros_like(weight, torch.float32), _zeros_like(weight, torch.float32),
                    _zeros_like(weight, torch.float32))
        return (_zeros_like(weight, torch.float32),)

    def _rule(self, state):
        return "rmspropalex" if self.centered else "rmsprop"

    def _clip_weights(self):
        return bool(self.clip_weights) and float(self.clip_weights) >= 0

    def _scalars(self):
        return (float(self.gamma1), float(self.epsilon), float(self.gamma2),
                float(self.clip_weights) if self._clip_weights() else 0.0)


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler): no learning rate; ``w -= delta + wd * w``."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (_zeros_like(weight, torch.float32), _zeros_like(weight, torch.float32))

    def _rule(self, state):
        return "adadelta"

    def _scalars(self):
        return (float(self.rho), float(self.epsilon), 0.0, 0.0)
