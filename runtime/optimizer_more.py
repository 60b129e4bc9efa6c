"""mxnet 1.9.1's other element-wise optimizers: Signum, FTML, Adamax, Nadam, Ftrl,
DCASGD, SGLD (re-exported by ``runtime.optimizer``, i.e. ``mx.optimizer``; the
ones with per-layer trust ratios, LAMB, LARS and LBSGD, are in
``optimizer_layerwise.py``).

Each keeps mxnet's class name, registry name, constructor arguments and
defaults, state layout and update formula, and updates through the same fused
multi-tensor kernels as the first six (``optimizer_kernels.py``: Triton for the
``interpret`` / ``cuda`` targets, ``optimizer_cpu.py``'s ``torch._foreach_*``
lowering for ``cpu``): the rules below are body lines over the weight ``w``, its
gradient ``g`` and the states; what depends on a tensor's own update count
(bias corrections, Nadam's momentum schedule) is folded on the host into the
per-tensor hyper-parameters ``h0...``.

``multi_precision`` keeps a float32 master copy of float16 / bfloat16 weights, as
mxnet's base ``update_multi_precision``: the fused rules update it in the same launch
(``mp`` kernels); SGLD, LAMB (``optimizer_layerwise.py``) run on the masters and cast
them back (:func:`on_masters`).
"""
from __future__ import annotations

import math

import torch

from compiler.errors import MXNetError

from .optimizer_base import Optimizer, register
from .optimizer_common import SGD
from .optimizer_kernels import _zeros_like
from .ndarray import torch_dtype

__all__ = ["Signum", "FTML", "Adamax", "Nadam", "Ftrl", "DCASGD", "SGLD", "ccSGD"]



def _no_master(opt, weights):
    for w in weights:
        if opt._mp(w):
            raise MXNetError(f"{type(opt).__name__}: multi_precision master copies for "
                             f"{str(torch_dtype(w)).replace('torch.', '')} weights are not built for "
                             f"this optimizer yet (only LARS and LBSGD lack them); use "
                             f"another optimizer, float32 weights, or multi_precision=False")


def on_masters(opt, weights, grads, states):
    """mxnet's master-copy update for rules without a fused one (its base
    ``update_multi_precision``): where ``opt`` keeps a float32 master copy of a weight
    (state ``(master, inner)``), the rule runs on the master with the gradient in
    float32, and :func:`copy_masters` then casts the master back into the weight.

    Returns ``(weights, grads, states, pairs)``: the tensors the rule updates, and the
    ``(weight, master)`` pairs to copy back.
    """
    ws, gs, ss, pairs = [], [], [], []
    for w, g, s in zip(weights, grads, states):
        if opt._mp(w):
            master, inner = s[0], s[1]
            ws.append(master)
            gs.append(g.to(torch.float32))
            ss.append(inner)
            pairs.append((w, master))
        else:
            ws.append(w)
            gs.append(g)
            ss.append(s)
    return ws, gs, ss, pairs


def copy_masters(pairs):
    """Cast each updated master copy into its float16 / bfloat16 weight (one
    ``torch._foreach_copy_`` for all of them)."""
    if pairs:
        with torch.no_grad():
            torch._foreach_copy_([torch.Tensor.as_subclass(w, torch.Tensor) for w, _ in pairs],
                                 [torch.Tensor.as_subclass(m, torch.Tensor) for _, m in pairs])


def _counts(opt, indices):
    return [opt._index_update_count[i] for i in indices]


@register
class Signum(Optimizer):
    """signSGD / Signum (Bernstein et al. 2018; mxnet's ``signsgd_update`` /
    ``signum_update``).

    ``state = momentum * state - (1-momentum) * (wd * w + rescale_grad * clip(grad))``;
    ``w = (1 - lr * wd_lh) * w + lr * sign(state)``. Without momentum:
    ``w = (1 - lr * wd) * w - lr * sign(grad)``.

    Parameters
    ----------
    learning_rate : float, default 0.01
    momentum : float, default 0.9
    wd_lh : float, default 0.0
        Decoupled weight decay (Loshchilov & Hutter), applied to the weight only.
    """

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def _rule(self, state):
        return "signum" if state is not None and self.momentum > 0 else "signsgd"

    def _state_tensors(self, state):
        return [state] if self._rule(state) == "signum" else []

    def _scalars(self):
        return (float(self.momentum), float(self.wd_lh), 0.0, 0.0)


@register
class FTML(Optimizer):
    """FTML, Follow the Moving Leader (Zheng & Kwok 2017; mxnet's ``ftml_update``).

    States ``(d, v, z)``; ``g = clip(rescale_grad * grad + wd * w)``,
    ``v = beta2 * v + (1-beta2) * g**2``,
    ``d_t = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)``,
    ``z = beta1 * z + (1-beta1) * g - (d_t - beta1 * d) * w``, ``w = -z / d_t``.

    Parameters
    ----------
    beta1 : float, default 0.6
    beta2 : float, default 0.999
    epsilon : float, default 1e-8
    """

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))

    def _rule(self, state):
        return "ftml"

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), float(self.epsilon), 0.0)

    def _hyper(self, indices):
        ts = _counts(self, indices)
        return (self._get_lrs(indices), self._get_wds(indices),
                [1. - self.beta1 ** t for t in ts], [1. - self.beta2 ** t for t in ts])


@register
class Adamax(Optimizer):
    """AdaMax, Adam with the infinity norm (Kingma & Ba, section 7).

    ``g = clip(rescale_grad * grad + wd * w)``, ``m = beta1 * m + (1-beta1) * g``,
    ``u = max(beta2 * u, |g|)``, ``w -= lr / (1 - beta1**t) * m / u``.

    Parameters
    ----------
    learning_rate : float, default 0.002
    beta1 : float, default 0.9
    beta2 : float, default 0.999
    """

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, state):
        return "adamax"

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), 0.0, 0.0)

    def _hyper(self, indices):
        lrs = [lr / (1. - self.beta1 ** t)
               for lr, t in zip(self._get_lrs(indices), _counts(self, indices))]
        return lrs, self._get_wds(indices)


@register
class Nadam(Optimizer):
    """Nesterov Adam (Dozat 2015), mxnet's formula and momentum schedule.

    ``momentum_t = beta1 * (1 - 0.5 * 0.96**(t * schedule_decay))``; as in mxnet the
    running product ``m_schedule`` advances once per parameter updated (in index
    order), not once per step.

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1 : float, default 0.9
    beta2 : float, default 0.999
    epsilon : float, default 1e-8
    schedule_decay : float, default 0.004
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, state):
        return "nadam"

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), float(self.epsilon), 0.0)

    def _hyper(self, indices):
        cols = [[] for _ in range(5)]
        for t in _counts(self, indices):
            mom_t = self.beta1 * (1. - 0.5 * (pow(0.96, t * self.schedule_decay)))
            mom_t1 = self.beta1 * (1. - 0.5 * (pow(0.96, (t + 1) * self.schedule_decay)))
            self.m_schedule = self.m_schedule * mom_t
            for col, v in zip(cols, (1. - self.m_schedule, 1. - self.m_schedule * mom_t1,
                                     1. - mom_t, mom_t1, 1. - pow(self.beta2, t))):
                col.append(v)
        return (self._get_lrs(indices), self._get_wds(indices), *cols)


@register
class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al. 2013; mxnet's ``ftrl_update``).

    States ``(z, n)``; ``g = clip(rescale_grad * grad)``,
    ``z += g - (sqrt(n + g**2) - sqrt(n)) * w / lr``, ``n += g**2``,
    ``w = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) * (|z| > lamda1)``.

    Parameters
    ----------
    lamda1 : float, default 0.01
        L1 regularisation coefficient.
    learning_rate : float, default 0.1
    beta : float, default 1
    """

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(**kwargs)
        self.lamda1 = lamda1
        self.beta = beta
        self.lr = learning_rate

    def create_state(self, index, weight):
        return (_zeros_like(weight, torch.float32), _zeros_like(weight, torch.float32))

    def _rule(self, state):
        return "ftrl"

    def _scalars(self):
        return (float(self.beta), float(self.lamda1), 0.0, 0.0)


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (Zheng et al. 2016; mxnet's ``DCASGD``).

    State ``(mom or None, previous weight)``;
    ``step = -lr * (g + wd * w + lamda * g * g * (w - previous))`` with
    ``g = clip(rescale_grad * grad)``; ``mom = momentum * mom + step`` (with momentum);
    ``previous = w``; ``w += mom`` (or ``step``). mxnet 1.9.1 itself fails with
    momentum > 0 (it tests an NDArray's truth value); this is the intended formula.

    Parameters
    ----------
    momentum : float, default 0.0
    lamda : float, default 0.04
    """

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous = {}
        self.lamda = lamda

    def create_state(self, index, weight):
        prev = _zeros_like(weight)
        with torch.no_grad():
            prev.copy_(weight)
        return (None if self.momentum == 0.0 else _zeros_like(weight), prev)

    def _rule(self, state):
        return "dcasgd" if state[0] is None else "dcasgd_mom"

    def _state_tensors(self, state):
        return [s for s in state if s is not None]

    def _scalars(self):
        return (float(self.momentum), float(self.lamda), 0.0, 0.0)


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics (mxnet's ``SGLD``).

    ``w += -lr / 2 * (clip(rescale_grad * grad) + wd * w) + N(0, sqrt(lr))``; the
    noise comes from ``mx.random``'s generator of the weight's context, so
    ``mx.random.seed`` reproduces it (not mxnet's numbers: a different generator).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def create_state(self, index, weight):
        return None

    def _rule(self, state):
        return "sgld"

    def update_multi(self, indices, weights, grads, states, multi_precision=None):
        from .context import cpu
        from .random import generator_for
        indices, weights, grads, states = list(indices), list(weights), list(grads), list(states)
        if not indices:
            return
        weights, grads, states, pairs = on_masters(self, weights, grads, states)
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        noise = []
        for w in weights:
            ctx = getattr(w, "context", None) or cpu(0)
            z = torch.randn(tuple(w.shape), generator=generator_for(ctx), dtype=torch.float32)
            noise.append([z.to(device=w.device, dtype=torch_dtype(w))])
        self._fused_update(indices, weights, grads, states,
                           (lrs, wds, [math.sqrt(lr) for lr in lrs]), False, inputs=noise)
        copy_masters(pairs)


@register
class ccSGD(SGD):  # noqa: N801  (mxnet's name)
    """[DEPRECATED] Same as :class:`SGD`; mxnet keeps it for backward compatibility."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
