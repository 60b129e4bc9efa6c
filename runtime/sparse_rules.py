"""The lazy update rules of mxnet 1.9.1's sparse optimizer operators, on gathered rows.

Each rule takes ``(opt, w, rows, g, states, lr, wd)``: the dense weight ``w`` (updated
in place), the int64 row ids ``rows`` of the gradient, its stored rows ``g`` (one per
id, ids unique), the optimizer's state tensors in its own order, and the parameter's lr
(Adam's with the bias correction folded in) and wd. Every rule reads the touched rows
once, computes them in one vectorised expression and writes them back once: rows the
gradient lacks, and their states, are left exactly as they were. Used by
``runtime/sparse_update.py``, which says when mxnet runs each.
"""
from __future__ import annotations

import struct

import torch

from compiler.errors import MXNetError

__all__ = ["lazy_rule"]


def f32(x) -> float:
    """``x`` rounded to float32: mxnet's operator parameters (lr, wd, betas, ...) are
    C++ ``float`` fields, whatever the weight's dtype."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _clip(opt):
    """The clip bound mxnet's Python optimizers pass (only when truthy), or None."""
    c = opt.clip_gradient
    return f32(c) if (c is not None and bool(c) and float(c) >= 0) else None


def _clipped(g, bound):
    return g if bound is None else g.clamp(-bound, bound)


def sgd(opt, w, rows, g, states, lr, wd):
    """``sgd_update`` / ``sgd_mom_update`` lazily: ``g = clip(rescale * g)``;
    ``m = momentum*m - lr*wd*w - lr*g; w += m`` (without momentum ``w = (1-lr*wd)*w -
    lr*g``)."""
    g = _clipped(g * f32(opt.rescale_grad), _clip(opt))
    w_rows = w[rows]
    if states and opt.momentum > 0:
        mom = states[0]
        m = f32(opt.momentum) * mom[rows].to(w.dtype) - lr * wd * w_rows - lr * g
        mom[rows] = m.to(mom.dtype)
        w[rows] = w_rows + m
    else:
        w[rows] = (1 - lr * wd) * w_rows - lr * g


def adam(opt, w, rows, g, states, lr, wd):
    """``adam_update`` lazily: ``g = clip(rescale*g + wd*w)``, the moments of the rows,
    ``w -= lr * mean / (sqrt(var) + epsilon)``."""
    mean, var = states
    w_rows = w[rows]
    g = _clipped(g * f32(opt.rescale_grad) + wd * w_rows, _clip(opt))
    b1, b2 = f32(opt.beta1), f32(opt.beta2)
    m = b1 * mean[rows].to(w.dtype) + (1 - b1) * g
    v = b2 * var[rows].to(w.dtype) + (1 - b2) * g * g
    mean[rows] = m.to(mean.dtype)
    var[rows] = v.to(var.dtype)
    w[rows] = w_rows - lr * m / (v.sqrt() + f32(opt.epsilon))


def adagrad(opt, w, rows, g, states, lr, wd):
    """``_sparse_adagrad_update``: ``g = clip(rescale*g)``, ``h += g*g``,
    ``w -= lr * g / sqrt(h + eps)``; no weight decay."""
    (hist,) = states
    g = _clipped(g * f32(opt.rescale_grad), _clip(opt))
    h = hist[rows].to(w.dtype) + g * g
    hist[rows] = h.to(hist.dtype)
    w[rows] = w[rows] - lr * g / (h + f32(opt.float_stable_eps)).sqrt()


def ftrl(opt, w, rows, g, states, lr, wd):
    """``ftrl_update`` on row_sparse weight, gradient and states: FTRL-Proximal's
    ``z`` and ``n`` of the rows, then the rows' closed-form weight."""
    z_all, n_all = states
    g = _clipped(g * f32(opt.rescale_grad), _clip(opt))
    w_rows = w[rows]
    n_old = n_all[rows].to(w.dtype)
    n = n_old + g * g
    z = z_all[rows].to(w.dtype) + g - (n.sqrt() - n_old.sqrt()) * w_rows / lr
    z_all[rows] = z.to(z_all.dtype)
    n_all[rows] = n.to(n_all.dtype)
    l1, beta = f32(opt.lamda1), f32(opt.beta)
    keep = (z.abs() > l1).to(w.dtype)
    w[rows] = (torch.sign(z) * l1 - z) / ((beta + n.sqrt()) / lr + wd) * keep


def group_adagrad(opt, w, rows, g, states, lr, wd):
    """``_contrib_group_adagrad_update``: ``g = clip(rescale*g)``, the row's history
    ``+= mean(g*g)`` over the row, ``w -= lr * g / sqrt(history + eps)``."""
    (hist,) = states
    g = _clipped(g * f32(opt.rescale_grad), _clip(opt))
    h = hist[rows].to(w.dtype) + (g * g).reshape(len(rows), -1).mean(dim=1, keepdim=True)
    hist[rows] = h.to(hist.dtype)
    w[rows] = w[rows] - lr * g / (h + f32(opt.float_stable_eps)).sqrt()


def _adagrad_checked(opt, key, wd):
    if wd != 0.0:
        raise MXNetError(
            f"update of key {key!r}: _sparse_adagrad_update has no sparse implementation "
            f"with weight decay (wd={wd}): mxnet 1.9.1 infers no storage type for "
            f"weight, row_sparse grad and history when wd != 0; set wd=0 (or a wd_mult "
            f"of 0 for this parameter) or use a dense gradient")
    return adagrad


def lazy_rule(opt, key, w, weight_stype, multi_precision=True):
    """The lazy rule mxnet runs for ``opt`` on the dense values ``w`` of a weight of
    storage ``weight_stype`` with a row_sparse gradient, or None where mxnet falls back
    to the dense update (see ``runtime/sparse_update.py``); ``multi_precision``: whether
    the call uses master copies (``update_multi_precision``)."""
    from .optimizer_common import SGD, AdaGrad, Adam
    from .optimizer_contrib import GroupAdaGrad, check_no_wd
    from .optimizer_more import Ftrl
    if isinstance(opt, SGD):    # mxnet's mp_sgd_* operators have no sparse path
        return sgd if (opt.lazy_update and not (multi_precision and opt._mp(w))) else None
    if isinstance(opt, Adam):
        return adam if opt.lazy_update else None
    if isinstance(opt, AdaGrad):
        return _adagrad_checked(opt, key, float(opt._get_wd(key)))
    if isinstance(opt, Ftrl):
        return ftrl if weight_stype == "row_sparse" else None
    if isinstance(opt, GroupAdaGrad):
        check_no_wd(opt, key, float(opt._get_wd(key)))
        return group_adagrad
    return None
