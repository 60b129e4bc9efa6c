"""mxnet 1.9.1's optimizers with per-layer trust ratios: LAMB, LARS, LBSGD
(re-exported by ``runtime.optimizer``, i.e. ``mx.optimizer``).

They follow mxnet's multi-tensor path: the norms of every layer come from one
``torch._foreach_norm`` per list (mxnet's ``multi_sum_sq``), the ratios are
folded into each tensor's learning rate on the host (one device sync on a GPU),
and one launch of a fused multi-tensor rule applies them. LAMB is two launches
around the norms, as mxnet's ``multi_lamb_update``: phase 1 updates mean and
variance and writes the step direction to a scratch tensor, phase 2 applies
``w -= lr * trust_ratio * direction``. LARS and LBSGD reuse SGD's rules.

``multi_precision`` is accepted and behaves as mxnet's does for float32 weights (no
master copy). With float16 / bfloat16 weights, LAMB keeps mxnet's float32 master
copies (``mp_lamb_update_phase1/2``: the norms are the masters'); LARS and LBSGD
refuse them: their master-copy update is not built yet.
"""
from __future__ import annotations

import logging
import math

import torch

from .optimizer_base import Optimizer, register
from .optimizer_common import MomentumState
from .optimizer_kernels import _zeros_like
from .optimizer_more import _counts, _no_master, copy_masters, on_masters

_LOG = logging.getLogger(__name__)

__all__ = ["LAMB", "LARS", "LBSGD"]



def _plain(tensors):
    return [torch.Tensor.as_subclass(t, torch.Tensor).detach() for t in tensors]


def _norms(tensors) -> list:
    """L2 norm of every tensor (one ``torch._foreach_norm``; mxnet's ``multi_sum_sq``)."""
    if not tensors:
        return []
    return [float(x) for x in torch.stack(torch._foreach_norm(_plain(tensors))).tolist()]


@register
class LAMB(Optimizer):
    """LAMB (You et al. 2019), mxnet's ``multi_lamb_update`` (its aggregated path).

    ``g = clip(rescale_grad * grad)``; ``mean``, ``var`` as Adam's; the direction
    ``u = mean_hat / (sqrt(var_hat) + epsilon) + wd * w`` (bias-corrected by each
    tensor's own step count when ``bias_correction``); ``r1 = ||w||`` bounded by
    ``lower_bound`` / ``upper_bound``, ``r2 = ||u||``; ``w -= lr * r1 / r2 * u`` (ratio
    1 when either norm is 0). Two launches around one pair of ``_foreach_norm``.

    Parameters
    ----------
    learning_rate : float, default 0.001
    beta1 : float, default 0.9
    beta2 : float, default 0.999
    epsilon : float, default 1e-6
    lower_bound, upper_bound : float or None
    bias_correction : bool, default True
    """

    _updater_skips_update = True     # as mxnet 1.9.1 (Optimizer._updater_skips_update)

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction
        self.aggregate_num = 45

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, state):
        return "lamb1"

    def _kernel_rules(self, state):
        return ["lamb1", "lamb2"]

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), float(self.epsilon), 0.0)

    def _trust_ratio(self, r1, r2):
        if self.lower_bound:
            r1 = max(r1, self.lower_bound)
        if self.upper_bound:
            r1 = min(r1, self.upper_bound)
        return 1.0 if r1 == 0.0 or r2 == 0.0 else r1 / r2

    def update_multi(self, indices, weights, grads, states, multi_precision=None):
        indices, weights, grads, states = list(indices), list(weights), list(grads), list(states)
        if not indices:
            return
        weights, grads, states, pairs = on_masters(self, weights, grads, states)
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        ts = _counts(self, indices)
        bc = bool(self.bias_correction)
        h0 = [1. - self.beta1 ** t if bc else 1.0 for t in ts]
        h1 = [1. - self.beta2 ** t if bc else 1.0 for t in ts]
        gts = [torch.empty(tuple(w.shape), dtype=torch.float32, device=w.device)
               for w in weights]       # scratch: phase 1 writes every element
        phase1 = [tuple(s) + (gt,) for s, gt in zip(states, gts)]
        self._fused_update(indices, weights, grads, phase1, (lrs, wds, h0, h1), False)
        r1, r2 = _norms(weights), _norms(gts)
        lr_adj = [lr * self._trust_ratio(a, b) for lr, a, b in zip(lrs, r1, r2)]
        self._fused_update(indices, weights, gts, [None] * len(indices),
                           (lr_adj, [0.0] * len(indices)), False, rule="lamb2")
        copy_masters(pairs)


@register
class LARS(MomentumState, Optimizer):
    """LARS (You et al. 2017), mxnet's aggregated path (``multi_lars`` + multi SGD).

    For each parameter whose name does not end in ``gamma`` / ``beta`` / ``bias``:
    ``lr_layer = lr * eta * ||w|| / (||grad|| * rescale_grad + wd * ||w|| + eps)``
    when both norms are positive; then SGD (with momentum) with ``lr_layer``. With
    an lr scheduler and ``momentum_correction``, momentum is scaled by
    ``lr / previous lr``. Only names ending in ``_weight`` get weight decay.

    Parameters
    ----------
    momentum : float, default 0.0
    lazy_update : bool, default True
        Accepted (every array is dense).
    eta : float, default 0.001
    eps : float, default 0
    momentum_correction : bool, default True
    """

    _updater_skips_update = True     # as mxnet 1.9.1 (Optimizer._updater_skips_update)

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.momentum_correction = momentum_correction
        self.lazy_update = lazy_update
        self.aggregate_num = 4
        self.eta = eta
        self.eps = eps
        self.skip = 0
        self.last_lr = None
        self.cur_lr = None
        self._mom_now = momentum

    def _get_lrs(self, indices):
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr
        return Optimizer._get_lrs(self, indices)

    def set_wd_mult(self, args_wd_mult):
        """Per-parameter wd multipliers: 0 for names not ending in ``_weight``, symbol
        ``__wd_mult__`` attributes, then the dict (mxnet's LARS rule)."""
        Optimizer.set_wd_mult(self, args_wd_mult)
        for n in self.idx2name.values():
            if n.endswith("_gamma") and n not in args_wd_mult and not (
                    self.sym_info and "__wd_mult__" in self.sym_info[0].get(n, {})):
                self.wd_mult[n] = 0.0

    def _rule(self, state):
        return "sgd_mom" if (state is not None and self.momentum > 0) else "sgd"

    def _scalars(self):
        return (float(self._mom_now), 0.0, 0.0, 0.0)

    def _is_lars(self, index):
        name = self.idx2name[index] if index in self.idx2name else str(index)
        return not (name.endswith("gamma") or name.endswith("beta") or name.endswith("bias"))

    def update_multi(self, indices, weights, grads, states, multi_precision=None):
        indices, weights, grads, states = list(indices), list(weights), list(grads), list(states)
        if not indices:
            return
        _no_master(self, weights)
        lrs, moms = [], []
        for chunk in self._chunks(indices):
            self._update_count(chunk)
            lrs += self._get_lrs(chunk)
            mom = self.momentum
            if self.momentum > 0 and self.momentum_correction and self.last_lr != 0:
                mom = self.momentum * (self.cur_lr / self.last_lr)
            moms += [mom] * len(chunk)
        wds = self._get_wds(indices)
        sel = [k for k, i in enumerate(indices) if self._is_lars(i)]
        w_norm = _norms([weights[k] for k in sel])
        g_norm = _norms([grads[k] for k in sel])
        rescale = float(self.rescale_grad)
        for k, wn, gn in zip(sel, w_norm, g_norm):
            if wn > 0.0 and gn > 0.0:
                lrs[k] = lrs[k] * self.eta * wn / (gn * rescale + wds[k] * wn + self.eps)
        for mom in dict.fromkeys(moms):      # one launch per momentum value, usually one
            ks = [k for k, m in enumerate(moms) if m == mom]
            self._mom_now = mom
            self._fused_update([indices[k] for k in ks], [weights[k] for k in ks],
                               [grads[k] for k in ks], [states[k] for k in ks],
                               ([lrs[k] for k in ks], [wds[k] for k in ks]), False)

    def _chunks(self, indices):
        """mxnet's Updater hands LARS ``aggregate_num`` parameters a call, and each call
        moves ``last_lr`` on: with a changing lr only the first chunk's momentum is
        corrected. The chunks are kept for those numbers (not for the launches)."""
        n = max(1, int(self.aggregate_num or len(indices)))
        return [indices[i:i + n] for i in range(0, len(indices), n)]


@register
class LBSGD(MomentumState, Optimizer):
    """Large-batch SGD with warm-up (mxnet's ``LBSGD``).

    Gradients are summed over ``batch_scale`` calls; every ``batch_scale``-th call
    applies SGD (with momentum) to their mean with ``lr`` times the warm-up factor
    (``warmup_strategy`` ``'linear'``, ``'power2'``, ``'sqrt'`` over ``warmup_epochs *
    updates_per_epoch`` updates, or ``'lars'``: ``sqrt(|w|^2 / (|g|^2 + wd |w|^2))``
    clipped to [0.01, 100]); the calls in between leave the weight as it is. As in
    mxnet, each parameter's lr is read before its update count advances. One
    difference: mxnet's first accumulation keeps a reference to the gradient array
    (``cum_grad = grad``), so where the caller reuses its gradient buffer (a Module)
    mxnet sums the newest gradient twice; here the gradients are summed as intended.

    Parameters
    ----------
    momentum : float, default 0.0
    multi_precision : bool, default False
    warmup_strategy : {'linear', 'power2', 'sqrt', 'lars'}, default 'linear'
    warmup_epochs : int, default 5
    batch_scale : int, default 1
    updates_per_epoch : int, default 32
    begin_epoch : int, default 0
    num_epochs : int, default 60
    """

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy='linear',
                 warmup_epochs=5, batch_scale=1, updates_per_epoch=32, begin_epoch=0,
                 num_epochs=60, **kwargs):
        super().__init__(**kwargs)
        _LOG.info('Running Large-Batch SGD Algorithm')
        _LOG.info('(Batch_scale=%f, warmup_epochs=%d, warmup_strategy=%s, '
                     'updates_per_epoch=%d)', batch_scale, warmup_epochs, warmup_strategy,
                     updates_per_epoch)
        self.momentum = momentum
        self.multi_precision = multi_precision
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.lbmult = 1
        self.cumgrads = {}
        self.adaptive = False
        self.admult = 1

    def _rule(self, state):
        return "sgd_mom" if (state is not None and self.momentum > 0) else "sgd"

    def _get_lbmult(self, nup):
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == 'linear':
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == 'power2':
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == 'sqrt':
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    def _get_lars(self, weight2, grad2, wd):
        lars = math.sqrt(weight2 / (grad2 + wd * weight2 + 1e-18))
        return min(max(lars, 0.01), 100)

    def _cumulate(self, index, grad):
        """Sum ``grad`` into the index's running sum; returns (sum, number of calls).

        A sum kept for a later call is a copy (the caller may reuse its buffer)."""
        g = torch.Tensor.as_subclass(grad, torch.Tensor).detach()
        c = self.cumgrads.get(index)
        if c and c["num_cums"] > 0:
            prev, num = c["cum_grad"], c["num_cums"] + 1
        else:
            prev, num = 0, self.init_updates + 1
        if isinstance(prev, torch.Tensor):
            total = prev + g
        else:
            total = g if num % self.batch_scale == 0 else g.clone()
        self.cumgrads[index] = {"cum_grad": total, "num_cums": num}
        return total, num

    def update_multi(self, indices, weights, grads, states, multi_precision=None):
        indices, weights, grads, states = list(indices), list(weights), list(grads), list(states)
        _no_master(self, weights)
        chosen, lrs, wds, gs = [], [], [], []
        for k, index in enumerate(indices):
            lr, wd = self._get_lr(index), self._get_wd(index)
            self._update_count(index)
            total, num = self._cumulate(index, grads[k])
            if num % self.batch_scale != 0:
                continue           # mxnet runs sgd_update with lr 0: the weight stays
            g = total / self.batch_scale if self.batch_scale != 1 else total
            if self.warmup_strategy == 'lars':
                w = torch.Tensor.as_subclass(weights[k], torch.Tensor).detach()
                mult = self._get_lars(float((w * w).sum()), float((g * g).sum()), wd)
            else:
                mult = self._get_lbmult(num)
            self.cumgrads[index]["cum_grad"] = 0
            chosen.append(k)
            lrs.append(lr * mult)
            wds.append(wd)
            gs.append(g)
        if chosen:
            self._fused_update([indices[k] for k in chosen], [weights[k] for k in chosen], gs,
                               [states[k] for k in chosen], (lrs, wds), False)
