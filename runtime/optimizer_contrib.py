"""mxnet 1.9.1's contrib optimizers (``mx.optimizer.contrib``): ``GroupAdaGrad``.

``GroupAdaGrad`` is AdaGrad with one history value per row of a 2-D weight (the mean
of the row's squared gradient), registered as ``groupadagrad``. Its dense update is
mxnet's Python body; a row_sparse gradient takes mxnet's
``_contrib_group_adagrad_update`` (lazy: only the gradient's rows and their history
change; ``runtime/sparse_rules.py``). Each key's update is one vectorised torch
expression: the row mean is no element-wise rule for the fused kernels.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from .ndarray import NDArray, torch_dtype
from .optimizer_base import Optimizer, register
from .optimizer_more import copy_masters, on_masters

__all__ = ["GroupAdaGrad"]


def check_no_wd(opt, index, wd):
    """mxnet asserts ``wd == 0`` for GroupAdaGrad; say which parameter has one."""
    if wd != 0.0:
        raise MXNetError(f"GroupAdaGrad: parameter {opt.idx2name.get(index, index)!r} has "
                         f"weight decay {wd}; weight decay is not supported for "
                         f"GroupAdaGrad (set wd=0, or its wd_mult to 0)")


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad with row-wise learning rates (mxnet's ``contrib.GroupAdaGrad``).

    ``g = clip(rescale_grad * grad)``; ``history += mean(g*g, axis=1, keepdims=True)``;
    ``weight -= lr * g / sqrt(history + eps)``. Weight decay is not supported.

    Parameters
    ----------
    eps : float, default 1e-5
        Added to the history under the square root.
    """

    def __init__(self, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        if len(weight.shape) != 2:
            raise MXNetError(f"GroupAdaGrad: parameter {self.idx2name.get(index, index)!r} "
                             f"has shape {tuple(weight.shape)}; its weights must be 2-D")
        state = torch.zeros((weight.shape[0], 1), dtype=torch.float32,
                            device=weight.device).as_subclass(NDArray)
        ctx = getattr(weight, "_mx_ctx", None)
        if ctx is not None:
            state._mx_ctx = ctx
        return state

    def update_multi(self, indices, weights, grads, states, multi_precision=None):
        """The dense update of every parameter given (master copies under
        ``multi_precision``)."""
        indices, weights, grads, states = list(indices), list(weights), list(grads), list(states)
        if not indices:
            return
        if multi_precision is not False:
            weights, grads, states, pairs = on_masters(self, weights, grads, states)
        else:
            pairs = []
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        with torch.no_grad():
            for i, w, g, h, lr, wd in zip(indices, weights, grads, states, lrs, wds):
                check_no_wd(self, i, wd)
                self._dense(w, g, h, lr)
        copy_masters(pairs)

    def _dense(self, w, g, hist, lr):
        w = torch.Tensor.as_subclass(w, torch.Tensor)
        hist = torch.Tensor.as_subclass(hist, torch.Tensor)
        g = torch.Tensor.as_subclass(g, torch.Tensor).to(w.device, torch_dtype(w))
        g = g * self.rescale_grad
        if self.clip_gradient is not None:
            g = g.clamp(-self.clip_gradient, self.clip_gradient)
        hist += (g * g).mean(dim=1, keepdim=True).to(hist.dtype)
        w -= lr * g / (hist.to(w.dtype) + self.float_stable_eps).sqrt()
