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

A dense gradient for a row_sparse weight, and a csr gradient or weight, take the
fallback too (a csr weight gets the result's non-zeros back, as mxnet's fallback
writes its output).

A lazy update is one vectorised torch expression over the gathered rows of the key (no
loop over rows). The weight is dense, csr, or row_sparse with every row stored (mxnet
refuses other row_sparse weights); its values are updated in place. An optimizer whose
``update`` is the user's own Python gets a row_sparse gradient as it is (a csr one
dense).
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import sparse_kernels as K
from . import sparse_rules as R
from . import threads
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


def _stype(a) -> str:
    return getattr(a, "stype", "default")


def is_sparse(a) -> bool:
    """True for a row_sparse or csr array."""
    return _stype(a) != "default"


def sparse_update(updater, key, grad, weight):
    """Apply ``updater``'s optimizer to ``weight`` where it or ``grad`` is sparse.

    Parameters
    ----------
    updater : Updater
        Holds the optimizer and the states (created here on first use).
    key : int or str
        The parameter's index (or kvstore key).
    grad : NDArray, RowSparseNDArray or CSRNDArray
        The gradient; only the stored rows of a row_sparse one are read.
    weight : NDArray, RowSparseNDArray or CSRNDArray
        Updated in place.
    """
    w = _dense_values(key, weight)
    if key not in updater.states:
        updater.states[key] = updater.optimizer.create_state_multi_precision(
            key, w.as_subclass(NDArray))
        updater.states_synced[key] = True
    updater.optimizer._set_current_context(_device_id(weight))
    # a few gathers and scatters of rows: at the thread policy's count, as the launch
    # lists (beside other load, a parallel region waits for a descheduled thread)
    threads.run(None, sparse_step, updater.optimizer, key, grad, weight, updater.states[key],
                w)


def sparse_step(opt, key, grad, weight, state, w=None, multi_precision=True):
    """One update of ``weight`` with ``state`` where it or ``grad`` is sparse: mxnet's
    lazy rule or its dense fallback (the module docstring says which).

    ``w``: the weight's dense values (:func:`_dense_values`) when already at hand.
    ``multi_precision=False``: the state is the plain one (``Optimizer.update``).
    """
    w = _dense_values(key, weight) if w is None else w
    if opt._python_update():
        g = grad._dense().as_subclass(NDArray) if _stype(grad) == "csr" else grad
        opt.update_multi_precision(key, w.as_subclass(NDArray), g, state)
    else:
        rule = None
        if _stype(grad) == "row_sparse" and _stype(weight) != "csr":
            rule = R.lazy_rule(opt, key, w, _stype(weight), multi_precision)
        if rule is None:
            _dense_update(opt, key, w, grad, state, multi_precision)
        else:
            _lazy(opt, key, w, grad, state, rule, multi_precision)
    if _stype(weight) == "csr":         # mxnet's fallback writes the output's non-zeros
        data, indptr, indices = K.dense_to_csr(w)
        weight._set_parts(data, [indptr, indices])


def _dense_values(key, weight) -> torch.Tensor:
    """The values the update writes: a dense weight's tensor, a row_sparse one's rows
    (all of them), a dense copy of a csr one."""
    if _stype(weight) == "csr":
        return weight._dense()
    return _full_rows(key, weight)


def _dense_update(opt, key, w, grad, state, multi_precision):
    """mxnet's storage fallback: the ordinary update on the dense gradient."""
    g = grad._dense() if is_sparse(grad) else torch.Tensor.as_subclass(grad, torch.Tensor)
    g = g.to(w.device, torch_dtype(w)).as_subclass(NDArray)
    if multi_precision:
        opt.update_multi_precision(key, w.as_subclass(NDArray), g, state)
    else:
        opt.update(key, w.as_subclass(NDArray), g, state)


def _lazy(opt, key, w, grad, state, rule, multi_precision=True):
    """Count the update, gather the gradient's rows and run ``rule`` on them."""
    opt._update_count(key)
    lrs, wds = opt._hyper([key])
    rows = grad._aux_t[0].to(w.device).long()
    if rows.numel() == 0:
        return
    target, inner = w, state
    if multi_precision and opt._mp(w):  # the lazy update runs on the float32 master copy
        inner, master = opt._split_mp(state)
        target = master.as_subclass(torch.Tensor)
    with torch.no_grad():
        g = grad._data_t.to(target.device, torch_dtype(target))
        states = [s.as_subclass(torch.Tensor) for s in opt._state_tensors(inner)]
        rule(opt, target, rows, g, states, R.f32(lrs[0]), R.f32(wds[0]))
        if target is not w:
            w[rows] = target[rows].to(w.dtype)
