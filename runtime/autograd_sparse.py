"""Sparse arrays under ``mx.autograd``: through dense stand-ins on the tape.

The tape (``runtime/autograd_tape.py``) records operators on NDArrays (torch
tensors); a csr / row_sparse array is not one. So, while recording, each sparse
array that takes part has a dense *stand-in* the tape sees:

* a sparse array given ``attach_grad`` has a dense leaf variable (its values, marked
  with the same ``grad_req``), made once and refreshed with the array's values each
  time a recorded call reads it;
* a sparse array made by a recorded call holds the dense result of the same call on
  the operands' stand-ins (``record``): the arithmetic and operators of sparse arrays
  compute their sparse result as they always do (mxnet's result storage), and, only
  while recording with a tracked operand, once more densely, recorded.

A backward reaches the stand-ins; each leaf's gradient goes into a dense buffer and
from there into the gradient array the user sees, in the storage asked for
(``attach_grad(stype=)``, by default the array's own): mxnet's cast of the dense
gradient (the non-zero rows, or entries). A dense array may ask for a sparse gradient
too (``attach_grad(stype='row_sparse')``, or ``mark_variables`` with a sparse gradient
array). mxnet's sparse backward kernels may store zero rows as well; the values agree.
"""
from __future__ import annotations

import torch

from . import ndarray_mx, sparse_kernels as K

SPARSE = ("csr", "row_sparse")


def is_sparse(x) -> bool:
    return getattr(x, "stype", "default") in SPARSE and hasattr(x, "_aux_t")


# what this module makes arrays with, given by ``runtime/ndarray_sparse.py`` when it is
# imported (the sparse arrays' module imports this one: no import back)
MAKERS: dict = {}


def register(zeros, as_ndarray):
    """``zeros(stype, shape, ctx=, dtype=)`` of sparse arrays and ``as_ndarray(tensor,
    ctx)``: the constructors this module calls."""
    MAKERS.update(zeros=zeros, as_ndarray=as_ndarray)


def _zeros(stype, like):
    return MAKERS["zeros"](stype, tuple(like.shape), ctx=like.context, dtype=like.dtype)


def _dense_array(tensor, ctx):
    return MAKERS["as_ndarray"](tensor, ctx)


def attach_grad(arr, grad_req="write", stype=None):
    """``attach_grad`` of a sparse array: a dense leaf stand-in whose gradient goes into
    a new array of storage ``stype`` (the array's own when None)."""
    stype = stype or arr.stype
    if stype in SPARSE:
        grad = _zeros(stype, arr)
    else:
        grad = _dense_array(torch.zeros(tuple(arr.shape), dtype=arr._data_t.dtype,
                                        device=arr._data_t.device), arr.context)
    mark_variable(arr, grad, grad_req)


def mark_variable(var, grad, grad_req="write"):
    """Make ``var`` (dense or sparse) a variable whose gradient goes into ``grad`` (dense
    or sparse): a sparse ``var`` through its dense leaf stand-in."""
    if is_sparse(var):
        leaf = _dense_array(var._dense().clone(), var.context)
        var._ag_leaf = leaf
        var.__dict__.pop("_ag_dense", None)
        var = leaf
    if not is_sparse(grad):
        ndarray_mx.mark_variable(var, grad, grad_req)
        return
    with torch.no_grad():
        buffer = ndarray_mx._like(torch.zeros_like(var.as_subclass(torch.Tensor)), var)
    ndarray_mx.mark_variable(var, buffer, grad_req)
    var._ag_sparse_grad = grad          # what NDArray.grad shows; the buffer stays torch's


def grad_of(arr):
    """A sparse array's ``grad``: None until ``attach_grad``."""
    leaf = getattr(arr, "_ag_leaf", None)
    return None if leaf is None else leaf.grad


def write_target(arr):
    """The dense tensor a backward writes ``arr``'s gradient into (for a sparse
    gradient array the dense buffer, made current first for ``grad_req='add'``: the
    sparse array may have been changed since)."""
    sparse = arr.__dict__.get("_ag_sparse_grad")
    if sparse is None:
        return arr.grad
    buffer = torch.Tensor.grad.__get__(arr)
    if arr._ag_req == "add":
        with torch.no_grad():
            buffer.as_subclass(torch.Tensor).copy_(sparse._dense())
    return buffer


def write_back(arr):
    """Cast the dense buffer into the sparse gradient array the user sees."""
    sparse = arr.__dict__.get("_ag_sparse_grad")
    if sparse is None:
        return
    dense = torch.Tensor.grad.__get__(arr).as_subclass(torch.Tensor)
    sparse._set_parts(*K.dense_to_parts(dense, sparse.stype))


def tracked(x) -> bool:
    """Whether a sparse array takes part in the recording: ``attach_grad`` given, or
    made by a recorded call."""
    return is_sparse(x) and (getattr(x, "_ag_leaf", None) is not None or
                             getattr(x, "_ag_dense", None) is not None)


def stand_in(x):
    """What the tape sees of ``x``: a sparse array's stand-in (a leaf refreshed with its
    values, a recorded result, or a dense copy), anything else as it is."""
    if not is_sparse(x):
        return x
    made = getattr(x, "_ag_dense", None)
    if made is not None:
        return made
    leaf = getattr(x, "_ag_leaf", None)
    if leaf is not None:
        with torch.no_grad():
            leaf.as_subclass(torch.Tensor).copy_(x._dense())
        return leaf
    return _dense_array(x._dense(), x.context)


def recording_with(*operands) -> bool:
    """Whether a call on ``operands`` (some sparse) must be recorded through stand-ins:
    recording, and one operand is on the tape."""
    tape = ndarray_mx._TAPE[0]
    if tape is None or not tape.STATE.recording or not any(map(is_sparse, operands)):
        return False
    return any(tracked(x) if is_sparse(x) else
               (isinstance(x, torch.Tensor) and tape.tracked(x)) for x in operands)


def backward_heads(heads, head_grads):
    """Heads and head gradients as the tape takes them: stand-ins for sparse heads,
    dense values for sparse head gradients."""
    heads = [stand_in(h) for h in heads]
    if head_grads is not None:
        head_grads = [g._dense() if is_sparse(g) else g for g in head_grads]
    return heads, head_grads


def record(result, dense_call, operands):
    """``result`` of a call with sparse operands, tied to the tape: ``dense_call`` runs
    on the operands' stand-ins (recorded); a sparse result keeps that as its stand-in,
    a dense one is replaced by it (the same values)."""
    dense = dense_call(*[stand_in(x) for x in operands])
    if is_sparse(result):
        result._ag_dense = dense
        return result
    return dense
