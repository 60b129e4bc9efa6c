"""Moving a batch into the executors' per-device input arrays, and outputs back.

The executor group (``executor_group.py``) cuts every batch along each input's
batch axis, one part per device, and concatenates the devices' outputs along
each output's batch axis. The copies are plain tensor operations: an NDArray's
``__torch_function__`` costs more than the copy of a small batch.

A *target* is what the group holds for one input name: a list of
``(batch_slice, device_array)`` pairs, one per device. A batch can also come
already cut (a list of DataBatch, one per device); then each device's array
takes its own batch's array whole.
"""
from __future__ import annotations

import numpy as np
import torch

from compiler.errors import MXNetError

from .executor_sparse import is_sparse
from .ndarray import as_ndarray, torch_dtype
from .ndarray_sparse import BaseSparseNDArray


def as_plain_tensor(value):
    """``value`` as a tensor outside autograd: csr batches are made dense (executors
    bind dense inputs), numpy data becomes float32 as mxnet's ``nd.array`` does."""
    if isinstance(value, BaseSparseNDArray):
        return value.tostype("default")
    if isinstance(value, torch.Tensor):
        return value.detach() if value.requires_grad else value
    return torch.as_tensor(np.asarray(value, dtype=np.float32))


def copy_into(src, dst):
    """Copy ``src`` into the bound array ``dst``; a different shape is accepted when
    the element counts agree (mxnet's ``copyto`` rule), else an ``MXNetError``."""
    if is_sparse(dst):
        _copy_into_sparse(src, dst)
        return
    src = as_plain_tensor(src)
    with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
        if tuple(src.shape) != tuple(dst.shape):
            if src.numel() != dst.numel():
                raise MXNetError(f"cannot copy an array of shape {tuple(src.shape)} into "
                                 f"one of shape {tuple(dst.shape)}")
            src = src.reshape(dst.shape)
        dst.copy_(src.to(device=dst.device, dtype=torch_dtype(dst)))


def _copy_into_sparse(src, dst):
    """``copy_into`` for a csr / row_sparse array bound in an executor."""
    if is_sparse(src) and src.stype == dst.stype:
        if src is not dst:
            src.copyto(dst)
        return
    dst[:] = as_plain_tensor(src).to(device=dst.device,
                                    dtype=torch_dtype(dst)).reshape(dst.shape)


def _part_of(batch_array, axis, part):
    """The rows ``part`` (a slice) of ``batch_array`` along ``axis``; a csr batch cut on
    its first axis stays csr (densifying a LibSVM batch of a million features would cost
    a (batch, 1e6) array)."""
    if is_sparse(batch_array) and batch_array.stype == "csr" and axis == 0:
        return batch_array.slice(part.start, part.stop)
    return as_plain_tensor(batch_array).narrow(axis, part.start, part.stop - part.start)


def _covers_all(axis, part, batch_array):
    """Whether the device's slice is the whole batch (or the input has no batch axis)."""
    return axis < 0 or (part.start == 0 and part.stop == batch_array.shape[axis])


def scatter_whole_batch(batch_arrays, targets, batch_axes):
    """Copy each batch array's per-device parts into its target's device arrays.

    Parameters
    ----------
    batch_arrays : list of array
        One array per input name, the whole batch.
    targets : list of list of (slice, array)
        Per input name, the device arrays and the batch rows each one takes.
    batch_axes : list of int
        Per input name, its batch axis (-1: every device takes the whole array).
    """
    for whole, per_device, axis in zip(batch_arrays, targets, batch_axes):
        csr = is_sparse(whole) and whole.stype == "csr"
        source = whole if csr else as_plain_tensor(whole)
        for part, device_array in per_device:
            if _covers_all(axis, part, source):
                copy_into(source, device_array)
            else:
                copy_into(_part_of(source, axis, part), device_array)


def copy_per_device(arrays, device_arrays):
    """Copy ``arrays[name][device]`` into ``device_arrays[name][device]``, each whole."""
    for per_device_src, per_device_dst in zip(arrays, device_arrays):
        for src, dst in zip(per_device_src, per_device_dst):
            copy_into(src, dst)


def load_batch_field(batch, field, targets, batch_axes):
    """Copy ``batch.<field>`` (``'data'`` or ``'label'``) into the devices' arrays.

    ``batch`` is one DataBatch, cut here by the targets' slices, or a list of
    DataBatch already cut, one per device in the order of the contexts.
    """
    if not isinstance(batch, list):
        scatter_whole_batch(getattr(batch, field), targets, batch_axes)
        return
    per_name = [[getattr(device_batch, field)[k] for device_batch in batch]
                for k in range(len(targets))]
    copy_per_device(per_name, [[array for _, array in target] for target in targets])


def merge_per_device(outputs, batch_axes):
    """One array per output: the devices' arrays concatenated along the output's batch
    axis, or the first device's array where it has none or there is one device.

    Parameters
    ----------
    outputs : list of list of NDArray
        Per output, one array per device.
    batch_axes : list of int
    """
    merged = []
    for per_device, axis in zip(outputs, batch_axes):
        first = per_device[0]
        if axis < 0 or len(per_device) == 1:
            merged.append(first)
            continue
        joined = torch.cat([array.to(first.device) for array in per_device], dim=axis)
        merged.append(as_ndarray(joined, getattr(first, "context", None)))
    return merged
