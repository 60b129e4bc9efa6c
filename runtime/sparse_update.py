"""Optimizer updates with a row_sparse gradient (a kvstore push of row_sparse values).

mxnet 1.9.1 gives five of its update operators a sparse path; each touches only the
rows ``r`` present in the gradient, states included (``runtime/sparse_rules.py``):

* ``sgd_update`` / ``sgd_mom_update`` (``SGD``, ``lazy_update=True``);
* ``adam_update`` (``Adam``, ``lazy_update=True``; the bias correction is folded into
  lr as in the dense update);
* ``_sparse_adagrad_update`` (``AdaGrad``; always lazy; mxnet has no sparse path with
  weight decay and refuses the update when ``wd != 0``);
* ``ftrl_update`` (``Ftrl``), only when the weight is row_sparse too (its states then
  are): with a dense weight mxnet falls back to the dense operator;
* ``_contrib_group_adagrad_update`` (``contrib.GroupAdaGrad``; always lazy, no weight
  decay).

Every other case is mxnet's *storage fallback*: the gradient becomes dense (zero rows
included) and the optimizer's ordinary fused update runs on every row. That is SGD and
Adam with ``lazy_update=False``, Ftrl on a dense weight, every other optimizer
(Signum, RMSProp, NAG, FTML, ...), and SGD under ``multi_precision`` (mxnet's
``mp_sgd_*`` operators have no sparse path). Adam, AdaGrad, Ftrl and GroupAdaGrad
under ``multi_precision`` run their lazy update on the float32 master copy (mxnet's
base ``update_multi_precision``) and write the touched rows back to the float16
weight.

A lazy update is one vectorised torch expression over the gathered rows of the key (no
loop over rows). The weight is dense, or row_sparse with every row stored (mxnet
refuses other row_sparse weights); its values are updated in place. An optimizer whose
``update`` is the user's own Python gets the row_sparse gradient as it is.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import sparse_kernels as K
from . import sparse_rules as R
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
                         f"mxnet's sparse updates are only implemented for such weights")
    return weight._data_t


def _user_rule(opt) -> bool:
    """True when the optimizer's update is the user's own Python code."""
    from .optimizer_base import Optimizer
    cls = type(opt)
    return (cls.update is not Optimizer.update
            or cls.update_multi_precision is not Optimizer.update_multi_precision)


def sparse_update(updater, key, grad, weight):
    """Apply ``updater``'s optimizer to ``weight`` with the row_sparse ``grad``.

    Parameters
    ----------
    updater : Updater
        Holds the optimizer and the states (created here on first use).
    key : int or str
        The parameter's index (or kvstore key).
    grad : RowSparseNDArray
        The gradient; only its stored rows are read.
    weight : NDArray or RowSparseNDArray
        Updated in place.
    """
    opt = updater.optimizer
    w = _full_rows(key, weight)
    w_nd = w.as_subclass(NDArray)
    if key not in updater.states:
        updater.states[key] = opt.create_state_multi_precision(key, w_nd)
        updater.states_synced[key] = True
    state = updater.states[key]
    opt._set_current_context(_device_id(weight))
    if _user_rule(opt):
        opt.update_multi_precision(key, w_nd, grad, state)
        return
    rule = R.lazy_rule(opt, key, w, getattr(weight, "stype", "default"))
    if rule is None:
        dense = K.rsp_to_dense(grad._data_t, grad._aux_t[0], grad.shape).to(torch_dtype(w))
        opt.update_multi_precision(key, w_nd, dense.as_subclass(NDArray), state)
        return
    _lazy(opt, key, w, grad, state, rule)


def _lazy(opt, key, w, grad, state, rule):
    """Count the update, gather the gradient's rows and run ``rule`` on them."""
    opt._update_count(key)
    lrs, wds = opt._hyper([key])
    rows = grad._aux_t[0].to(w.device).long()
    if rows.numel() == 0:
        return
    target, inner = w, state
    if opt._mp(w):                      # the lazy update runs on the float32 master copy
        inner, master = opt._split_mp(state)
        target = master.as_subclass(torch.Tensor)
    with torch.no_grad():
        g = grad._data_t.to(target.device, torch_dtype(target))
        states = [s.as_subclass(torch.Tensor) for s in opt._state_tensors(inner)]
        rule(opt, target, rows, g, states, R.f32(lrs[0]), R.f32(wds[0]))
        if target is not w:
            w[rows] = target[rows].to(w.dtype)
