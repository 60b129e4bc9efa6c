"""Optimizer updates with a row_sparse gradient (a kvstore push of row_sparse values).

mxnet 1.9.1's ``SGD`` (``sgd_update`` / ``sgd_mom_update``) with ``lazy_update=True``
touches only the rows present in the gradient::

    no momentum:  w[r] = (1 - lr*wd) * w[r] - lr * clip(rescale_grad * g[r])
    momentum:     m[r] = momentum*m[r] - lr*wd*w[r] - lr*clip(rescale_grad * g[r])
                  w[r] += m[r]

so weight decay and momentum leave the other rows alone. With ``lazy_update=False``
the gradient counts as dense (zero rows included) and the optimizer's ordinary
update runs on every row. The weight is dense, or row_sparse with every row
stored (mxnet refuses other row_sparse weights); its values are updated in place.
Other optimizers' sparse updates are not implemented and say so.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import sparse_kernels as K
from .ndarray import NDArray, torch_dtype


def _device_id(weight):
    """The device whose update counts the optimizer uses (as the Updater picks it)."""
    ctx = getattr(weight, "context", None)
    return ctx.device_id if ctx is not None else (weight.device.index or 0)


def _full_rows(key, weight) -> torch.Tensor:
    """The dense values of a weight: a dense tensor, or a row_sparse one holding all rows."""
    if getattr(weight, "stype", "default") == "default":
        return weight.as_subclass(torch.Tensor)
    if weight._aux_t[0].numel() != weight.shape[0]:
        raise MXNetError(f"update of key {key!r}: a row_sparse weight must store every row "
                         f"(it stores {weight._aux_t[0].numel()} of {weight.shape[0]}); "
                         f"mxnet's sgd updates are only implemented for such weights")
    return weight._data_t


def sparse_update(updater, key, grad, weight):
    """Apply ``updater``'s optimizer to ``weight`` with the row_sparse ``grad``."""
    opt = updater.optimizer
    if type(opt).__name__ != "SGD":
        raise MXNetError(f"update of key {key!r} with a row_sparse gradient: only SGD's "
                         f"lazy update is implemented for sparse gradients, not "
                         f"{type(opt).__name__}")
    if opt._mp(weight):
        raise MXNetError(f"update of key {key!r}: multi_precision with a row_sparse "
                         f"gradient is not implemented")
    w = _full_rows(key, weight)
    w_nd = w.as_subclass(NDArray)
    if key not in updater.states:
        updater.states[key] = opt.create_state_multi_precision(key, w_nd)
        updater.states_synced[key] = True
    state = updater.states[key]
    if not opt.lazy_update:
        dense = K.rsp_to_dense(grad._data_t, grad._aux_t[0], grad.shape).to(torch_dtype(w))
        opt._set_current_context(_device_id(weight))
        opt.update_multi_precision(key, w_nd, dense.as_subclass(NDArray), state)
        return
    opt._set_current_context(_device_id(weight))
    _lazy_sgd(opt, key, w, grad, state)


def _lazy_sgd(opt, key, w, grad, state):
    opt._update_count(key)
    lr, wd = opt._get_lr(key), opt._get_wd(key)
    rows = grad._aux_t[0].to(w.device)
    if rows.numel() == 0:
        return
    with torch.no_grad():
        g = grad._data_t.to(w.device, torch_dtype(w)) * opt.rescale_grad
        if opt.clip_gradient is not None and opt.clip_gradient >= 0:
            g = g.clamp(-opt.clip_gradient, opt.clip_gradient)
        w_rows = w[rows]
        if state is not None and opt.momentum > 0:
            mom = state.as_subclass(torch.Tensor)
            m = opt.momentum * mom[rows] - lr * wd * w_rows - lr * g
            mom[rows] = m
            w[rows] = w_rows + m
        else:
            w[rows] = (1 - lr * wd) * w_rows - lr * g
