"""``mx.contrib.autograd``: mxnet's first autograd interface (deprecated there since
``mx.autograd`` arrived, still imported by older scripts).

Training and recording are one switch here, as they were: ``train_section()``
records in training mode, ``test_section()`` stops both. Everything runs on the
tape of ``mx.autograd`` (``runtime/autograd_tape.py``).
"""
from __future__ import annotations

import functools

import torch

from compiler.errors import MXNetError
from runtime import autograd_tape as _tape

from .. import autograd as _autograd
from .. import ndarray as _nd

__all__ = ["set_is_training", "TrainingStateScope", "train_section", "test_section",
           "mark_variables", "backward", "compute_gradient", "grad_and_loss", "grad"]


def set_is_training(is_train):
    """Turn training mode and recording on or off together.

    Parameters
    ----------
    is_train : bool

    Returns
    -------
    bool
        The training state before the call.
    """
    prev = _tape.set_training(is_train)
    _tape.set_recording(is_train)
    return prev


class TrainingStateScope:
    """Sets training and recording on entry and restores them on exit."""

    def __init__(self, enter_state):
        self._enter_state = enter_state
        self._prev = None

    def __enter__(self):
        self._prev = set_is_training(self._enter_state)

    def __exit__(self, *exc):
        if self._prev != self._enter_state:
            set_is_training(self._prev)


def train_section():
    """A scope that records operators in training mode (``with train_section():``)."""
    return TrainingStateScope(True)


def test_section():
    """A scope that neither records nor trains (inside a ``train_section``)."""
    return TrainingStateScope(False)


def mark_variables(variables, gradients, grad_reqs="write"):
    """Mark arrays as variables whose gradients go into ``gradients``
    (``mx.autograd.mark_variables``)."""
    _autograd.mark_variables(variables, gradients, grad_reqs)


def backward(outputs, out_grads=None, retain_graph=False):
    """Gradients of ``outputs`` (a list or tuple of NDArrays) into the marked
    variables; ``out_grads`` holds one head gradient (or None) per output."""
    if not isinstance(outputs, (list, tuple)):
        raise MXNetError("backward: outputs must be a list or tuple of NDArrays")
    if out_grads is not None and len(out_grads) != len(outputs):
        raise MXNetError(f"backward: {len(out_grads)} out_grads for {len(outputs)} outputs")
    _autograd.backward(list(outputs), None if out_grads is None else list(out_grads),
                       retain_graph=retain_graph)


def compute_gradient(outputs):
    """``backward(outputs)`` (its deprecated name)."""
    backward(outputs)


def grad_and_loss(func, argnum=None):
    """A function returning ``(gradients, loss)`` of ``func`` at its arguments.

    Parameters
    ----------
    func : callable
        NDArrays in, the loss (an NDArray or a list of them) out.
    argnum : int or list of int, optional
        The arguments to differentiate (all by default).

    Returns
    -------
    callable
    """
    @functools.wraps(func)
    def wrapped(*args):
        variables = args
        if argnum is not None:
            picked = argnum if isinstance(argnum, list) else [argnum]
            variables = [args[i] for i in picked]
        for x in variables:
            if not isinstance(x, torch.Tensor) and \
                    getattr(x, "stype", "default") not in ("csr", "row_sparse"):
                raise AssertionError("type of autograd input should NDArray.")
        grads = [_nd.zeros_like(x) for x in variables]
        mark_variables(variables, grads)
        with train_section():
            outputs = func(*args)
        single = isinstance(outputs, torch.Tensor) or \
            getattr(outputs, "stype", "default") != "default"
        compute_gradient([outputs] if single else outputs)
        return grads, outputs
    return wrapped


def grad(func, argnum=None):
    """A function returning the gradients of ``func`` at its arguments
    (``grad_and_loss(func, argnum)`` without the loss)."""
    grad_with_loss = grad_and_loss(func, argnum)

    @functools.wraps(grad_with_loss)
    def wrapped(*args):
        return grad_with_loss(*args)[0]
    return wrapped
