"""The Python functions of mxnet 1.9.1's ``mx.nd.contrib``: imperative control flow
(``foreach``, ``while_loop``, ``cond``: Python loops over ``mx.nd`` calls, so
``mx.autograd`` records them step by step), the ``isinf`` / ``isfinite`` / ``isnan``
checks, ``rand_zipfian``, ``adamw_update`` / ``mp_adamw_update`` (a number for
``rescale_grad`` made an array) and ``multi_adamw_update`` / ``multi_mp_adamw_update``
(one ``adamw_update`` per weight, each with its own rates). The symbolic forms live in ``compiler/symbol_control_flow.py`` and
``compiler/symbol_random.py``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from runtime.ndarray import NDArray

__all__ = ["install"]


def _flatten(value, what):
    """``(flat list of NDArrays, format)``: mxnet's nesting record (0 for one array, a
    list of sub-formats for a list)."""
    if isinstance(value, NDArray):
        return [value], 0
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{what} must be an NDArray or a (nested) list of NDArrays, got "
                        f"{type(value).__name__}")
    flat, fmt = [], []
    for v in value:
        f, sub = _flatten(v, what)
        flat.extend(f)
        fmt.append(sub)
    return flat, fmt


def _regroup(flat, fmt):
    """The nesting ``fmt`` of :func:`_flatten` put back over ``flat``: (value, rest)."""
    if fmt == 0:
        return flat[0], flat[1:]
    out = []
    for sub in fmt:
        value, flat = _regroup(flat, sub)
        out.append(value)
    return out, flat


def _scalar(x, kind, what):
    if isinstance(x, torch.Tensor):
        x = x.asscalar() if hasattr(x, "asscalar") else x.item()
    try:
        return kind(x)
    except (TypeError, ValueError):
        raise ValueError(f"Cannot convert {what} to python {kind.__name__}") from None


def make(nd):
    """The functions, over the ``mx.nd`` module ``nd``."""

    def foreach(body, data, init_states):
        """Run ``body(data[i], states) -> (outputs, states)`` over ``data``'s first axis;
        the outputs of the steps are stacked along a new first axis.

        Returns
        -------
        (outputs, states)
        """
        _flatten(data, "foreach input")
        _flatten(init_states, "foreach states")
        single = isinstance(data, NDArray)
        steps = data.shape[0] if single else data[0].shape[0]
        states, per_step, fmt = init_states, [], 0
        for i in range(steps):
            outs, states = body(data[i] if single else [d[i] for d in data], states)
            flat, fmt = _flatten(outs, "foreach output")
            per_step.append(flat)
        stacked = [nd.stack(*column) for column in zip(*per_step)]
        return (_regroup(stacked, fmt)[0] if stacked else []), states

    def while_loop(cond, func, loop_vars, max_iterations=None):
        """Run ``func(*loop_vars) -> (step_output, new_loop_vars)`` while
        ``cond(*loop_vars)`` holds, at most ``max_iterations`` times. Step outputs are
        stacked along a new first axis and padded to ``max_iterations`` rows (the pad's
        contents are unspecified in mxnet; zeros here).

        Returns
        -------
        (outputs, loop_vars)
        """
        if max_iterations is None:
            raise ValueError("max_iterations should be specified")
        max_iterations = _scalar(max_iterations, int, "max_iteration")
        single = isinstance(loop_vars, NDArray)
        loop_vars = [loop_vars] if single else list(loop_vars)
        if not loop_vars:
            raise ValueError("loop_vars should contain at least one element")
        per_step, fmt = [], None
        while len(per_step) < max_iterations and \
                _scalar(cond(*loop_vars), bool, "Return value of cond"):
            out, new_vars = func(*loop_vars)
            new_vars = [] if new_vars is None else (
                [new_vars] if isinstance(new_vars, NDArray) else list(new_vars))
            if len(new_vars) != len(loop_vars):
                raise ValueError("The length of loop_vars should be consistent during the loop")
            flat, fmt = _flatten([] if out is None else out, "while output")
            if per_step and len(flat) != len(per_step[0]):
                raise ValueError("Number of elements in step_output should be the same in "
                                 "each step")
            per_step.append(flat)
            loop_vars = new_vars
        stacked = []
        for column in zip(*per_step):
            rows = [x.expand_dims(0) for x in column]
            if len(per_step) != max_iterations:
                rows.append(nd.zeros((max_iterations - len(per_step),) + tuple(column[0].shape),
                                     ctx=column[0].context, dtype=column[0].dtype))
            stacked.append(nd.concat(*rows, dim=0))
        outputs = _regroup(stacked, fmt)[0] if fmt is not None and stacked else stacked
        return outputs, (loop_vars[0] if single else loop_vars)

    def cond(pred, then_func, else_func):
        """``then_func()`` if ``pred`` (a number or one-element NDArray) is true, else
        ``else_func()``."""
        return then_func() if _scalar(pred, bool, "pred") else else_func()

    def isinf(data):
        """1 where ``data`` is +-inf, else 0 (``data``'s dtype)."""
        return (data.abs() == np.inf).astype(data.dtype)

    def isnan(data):
        """1 where ``data`` is NaN, else 0."""
        return (data != data).astype(data.dtype)

    def isfinite(data):
        """1 where ``data`` is neither infinite nor NaN, else 0."""
        return ((data == data) & (data.abs() != np.inf)).astype(data.dtype)

    def rand_zipfian(true_classes, num_sampled, range_max, ctx=None):
        """Draw ``num_sampled`` classes of ``[0, range_max)`` from the approximately
        log-uniform distribution ``P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)``.

        Returns
        -------
        (samples, expected_count_true, expected_count_sampled)
        """
        ctx = ctx or true_classes.context
        log_range = math.log(range_max + 1)
        rand = nd.random.uniform(0, log_range, shape=(num_sampled,), dtype="float64",
                                 ctx=ctx)
        sampled = ((rand.exp() - 1).astype("int64") % range_max)

        def expected(classes):
            c = classes.astype("float64")
            return ((c + 2.0) / (c + 1.0)).log() / log_range * num_sampled
        return sampled, expected(true_classes), expected(sampled)

    def _rescale(rescale_grad, like):
        if isinstance(rescale_grad, torch.Tensor):
            return rescale_grad
        return nd.full((1,), rescale_grad, ctx=like.context, dtype="float32")

    def adamw_update(weight, grad, mean, var, rescale_grad, lr, eta, beta1=0.9,
                     beta2=0.999, epsilon=1e-8, wd=0, clip_gradient=-1, out=None, name=None,
                     **kwargs):
        """AdamW's update of ``weight`` (``_adamw_update``); ``rescale_grad`` may be a
        number or a one-element array (a NaN or infinite one skips the update)."""
        return nd._internal._adamw_update(
            weight, grad, mean, var, _rescale(rescale_grad, weight), lr=lr, eta=eta,
            beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd, clip_gradient=clip_gradient,
            out=out, **kwargs)

    def mp_adamw_update(weight, grad, mean, var, weight32, rescale_grad, lr, eta, beta1=0.9,
                        beta2=0.999, epsilon=1e-8, wd=0, clip_gradient=-1, out=None,
                        name=None, **kwargs):
        """``adamw_update`` of a float16 ``weight`` through its float32 copy."""
        return nd._internal._mp_adamw_update(
            weight, grad, mean, var, weight32, _rescale(rescale_grad, weight), lr=lr,
            eta=eta, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
            clip_gradient=clip_gradient, out=out, **kwargs)

    def _multi_update(update, groups, rescale_grad, lrs, wds, etas, out,
                      size, kwargs):
        size = size or len(groups[0])
        if not all(len(g) >= size for g in groups) or \
                not len(lrs) >= size <= len(wds) or len(etas) < size:
            raise ValueError(f"{update}: {size} weights need as many of each list "
                             f"(got {[len(g) for g in groups]}, lrs {len(lrs)}, wds "
                             f"{len(wds)}, etas {len(etas)})")
        outs = [None] * size if out is None else \
            ([out] if isinstance(out, NDArray) else list(out))
        fn = adamw_update if update == "adamw_update" else mp_adamw_update
        return [fn(*[g[i] for g in groups], rescale_grad, lr=lrs[i], eta=etas[i],
                   wd=wds[i], out=outs[i], **kwargs) for i in range(size)]

    def multi_adamw_update(weights, grads, mean, var, rescale_grad, lrs, wds, etas,
                           out=None, name=None, size=0, **kwargs):
        """``adamw_update`` of each weight, with its own ``lrs[i]``, ``wds[i]`` and
        ``etas[i]`` (mxnet fuses them into one operator; the values are the same)."""
        return _multi_update("adamw_update", (weights, grads, mean, var), rescale_grad,
                             lrs, wds, etas, out, size, kwargs)

    def multi_mp_adamw_update(weights, grads, mean, var, weights32, rescale_grad, lrs, wds,
                              etas, out=None, name=None, size=0, **kwargs):
        """``mp_adamw_update`` of each weight (float16 weights with float32 copies)."""
        return _multi_update("mp_adamw_update", (weights, grads, mean, var, weights32),
                             rescale_grad, lrs, wds, etas, out, size, kwargs)

    return dict(foreach=foreach, while_loop=while_loop, cond=cond, isinf=isinf,
                isnan=isnan, isfinite=isfinite, rand_zipfian=rand_zipfian,
                adamw_update=adamw_update, mp_adamw_update=mp_adamw_update,
                multi_adamw_update=multi_adamw_update,
                multi_mp_adamw_update=multi_mp_adamw_update)


def install(nd, contrib):
    """Put the functions on ``contrib`` (``mx.nd.contrib``), with mxnet's re-exports
    ``uniform`` and ``current_context``."""
    for name, fn in make(nd).items():
        setattr(contrib, name, fn)
    contrib.uniform = nd.random.uniform
    contrib.current_context = nd.current_context
