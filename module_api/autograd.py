"""``mx.autograd``: record ``mx.nd`` operators and take their gradients, as mxnet 1.9.1.

Inside ``record()`` every ``mx.nd`` operator call (and NDArray arithmetic,
``reshape``, ``T`` and basic indexing, which then run registry operators) is kept
on a tape (``runtime/autograd_tape.py``). ``backward`` / ``grad`` go back through
it; each operator's gradient is its registry entry's ``gradient`` rule, compiled
for the recorded call. ``train_mode`` / ``predict_mode`` decide how Dropout (and
other mode-dependent operators) run.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError
from runtime import autograd_sparse as _autograd_sparse
from runtime import autograd_tape as _tape
from runtime.autograd_tape import (backward, grad, is_recording,  # noqa: F401
                                   is_training, set_recording, set_training)

from runtime.ndarray import NDArray  # noqa: E402  (mxnet's autograd exports it: below)
from compiler.symbol import Symbol  # noqa: E402

# mxnet's autograd has no __all__, so ``from mxnet.autograd import *`` (mxnet's own
# test_autograd.py does it) gives NDArray and Symbol too
__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training",
           "set_recording", "set_training", "mark_variables", "backward", "grad",
           "Function", "get_symbol", "NDArray", "Symbol"]


class _Scope:
    """Sets recording and / or training on entry and restores both on exit."""

    def __init__(self, is_record, train_mode):
        self._enter_record, self._enter_train = is_record, train_mode
        self._prev_record = self._prev_train = None

    def __enter__(self):
        if self._enter_record is not None:
            self._prev_record = set_recording(self._enter_record)
        if self._enter_train is not None:
            self._prev_train = set_training(self._enter_train)
        return self

    def __exit__(self, *exc):
        if self._enter_record is not None:
            set_recording(self._prev_record)
        if self._enter_train is not None:
            set_training(self._prev_train)


def record(train_mode=True):
    """Record operators for ``backward`` (training mode by default)."""
    return _Scope(True, train_mode)


def pause(train_mode=False):
    """Stop recording inside a ``record()`` block (predict mode by default)."""
    return _Scope(False, train_mode)


def train_mode():
    """Run operators in training mode (Dropout active), recording unchanged."""
    return _Scope(None, True)


def predict_mode():
    """Run operators in predict mode (Dropout the identity), recording unchanged."""
    return _Scope(None, False)


def mark_variables(variables, gradients, grad_reqs="write"):
    """Make ``variables`` leaves whose gradients go into ``gradients``.

    Parameters
    ----------
    variables : NDArray or list of NDArray
        Dense or sparse (csr / row_sparse) arrays.
    gradients : NDArray or list of NDArray
        One buffer per variable, of its shape, dense or sparse (the dense gradient is
        cast into it).
    grad_reqs : str or list of str
        ``'write'``, ``'add'`` or ``'null'`` (one for all, or one per variable).
    """
    if isinstance(variables, torch.Tensor) or \
            getattr(variables, "stype", "default") != "default":
        variables, gradients = [variables], [gradients]
    variables, gradients = list(variables), list(gradients)
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    if not len(variables) == len(gradients) == len(reqs):
        raise MXNetError(f"mark_variables: {len(variables)} variables, {len(gradients)} "
                         f"gradients and {len(reqs)} grad_reqs must be as many")
    for i, (v, g, r) in enumerate(zip(variables, gradients, reqs)):
        if tuple(v.shape) != tuple(g.shape):
            raise MXNetError(f"mark_variables: variable {i} has shape {tuple(v.shape)}, its "
                             f"gradient {tuple(g.shape)}")
        # a sparse variable or gradient array: through a dense stand-in
        _autograd_sparse.mark_variable(v, g, r)


def get_symbol(x):
    """The recorded computation of ``x`` as a Symbol (inputs become Variables)."""
    return _tape.get_symbol(x)


class Function:
    """A Python operator with its own gradient, as mxnet's ``autograd.Function``.

    Subclass it and define ``forward(self, *inputs)`` and
    ``backward(self, *output_grads)`` (NDArrays in, NDArrays out; one gradient per
    input). ``save_for_backward`` keeps arrays for ``backward`` in
    ``saved_tensors``. Call an instance on NDArrays; inside ``record()`` the call is
    one entry of the tape whose gradient is ``backward``.
    """

    def __init__(self):
        self._used = False
        self.saved_tensors = ()

    def save_for_backward(self, *args):
        self.saved_tensors = args

    def forward(self, *inputs):
        raise NotImplementedError

    def backward(self, *output_grads):
        raise NotImplementedError

    def __call__(self, *inputs):
        if self._used:
            raise MXNetError(f"{type(self).__name__}: each Function instance can be called "
                             f"once (make a new one per call, as in mxnet)")
        self._used = True
        with pause(train_mode=is_training()):
            outputs = self.forward(*inputs)
        single = isinstance(outputs, torch.Tensor)
        outs = [outputs] if single else list(outputs)
        if is_recording():
            entry = _tape.record_call(f"Function:{type(self).__name__}", [], inputs, (), {},
                                      None, is_training(), None, outs)
            entry.custom = self._grads
        return outputs

    def _grads(self, entry, ograds):
        from runtime.ndarray import as_ndarray
        full = [as_ndarray(g if g is not None else torch.zeros_like(o.as_subclass(
            torch.Tensor))) for g, o in zip(ograds, entry.outputs)]
        with pause():
            res = self.backward(*full)
        res = [res] if isinstance(res, torch.Tensor) else list(res)
        if len(res) != len(entry.inputs):
            raise MXNetError(f"{type(self).__name__}.backward returned {len(res)} gradients "
                             f"for {len(entry.inputs)} inputs")
        for i, (g, x) in enumerate(zip(res, entry.inputs)):
            if tuple(g.shape) != tuple(x.shape):
                raise MXNetError(f"{type(self).__name__}.backward: gradient {i} has shape "
                                 f"{tuple(g.shape)}, input {i} {tuple(x.shape)}")
        return [g.as_subclass(torch.Tensor) for g in res]
