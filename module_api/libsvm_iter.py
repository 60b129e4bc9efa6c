"""``mx.io.LibSVMIter``: mxnet 1.9.1's C++ LibSVM iterator, with its sparse batch
loader, in Python.

Data batches are ``CSRNDArray`` of shape ``(batch_size,) + data_shape``. Without
``label_libsvm`` the label of a row is the number it starts with and a batch's
labels are a dense ``(batch_size,)`` array; with it, the features of the label
file's rows are the labels, csr of shape ``(batch_size,) + label_shape``.

Batches follow mxnet's sparse batch loader: only ``round_batch=True`` exists; a
last, partial batch is completed from the start of the data, ``pad`` counts the
rows so wrapped, and the next epoch starts after them. As mxnet's ``MXDataIter``,
the first batch is read when the iterator is made (so a data set smaller than a
batch fails there), ``provide_data`` / ``provide_label`` describe it and
``getindex`` gives each row's number (uint64) in its part.

Differences from mxnet, written down: the files are read whole when the iterator
is made (mxnet streams them); a feature index outside ``data_shape`` (or
``label_shape``), a feature without a value and a ``dtype`` other than float32
raise :class:`MXNetError` where mxnet 1.9.1 gives a malformed array, crashes or
aborts; float32 values are the correctly rounded reading of the text.
"""
import logging

import numpy as np
import torch

from compiler.errors import MXNetError
from runtime.data_desc import DataDesc
from runtime.ndarray import as_ndarray
from runtime.ndarray_sparse import CSRNDArray

from .batch_loader import BatchLoader
from .data_iter import DataBatch, DataIter
from .libsvm_parse import list_files, parse, read_part

_LOG = logging.getLogger(__name__)
# BatchParam and PrefetcherParam fields mxnet accepts beside LibSVMIterParam's
_KNOWN = frozenset("round_batch prefetch_buffer ctx dtype".split())


class _Rows(object):
    """Rows of a csr matrix held as numpy arrays, cut into csr batches."""

    def __init__(self, indptr, indices, values, width, what, where):
        if len(indices) and (indices.min() < 0 or indices.max() >= width):
            bad = int(np.flatnonzero((indices < 0) | (indices >= width))[0])
            row = int(np.searchsorted(indptr, bad, side="right") - 1)
            raise MXNetError(f"LibSVMIter: row {row} of {where} has the feature index "
                             f"{int(indices[bad])}, outside {what}=({width},)")
        self.indptr, self.indices, self.values, self.width = indptr, indices, values, width

    def __len__(self):
        return len(self.indptr) - 1

    def take(self, rows):
        """The rows ``rows`` (in that order) as a CSRNDArray."""
        rows = np.asarray(rows, np.int64)
        begin = self.indptr[rows]
        counts = self.indptr[rows + 1] - begin
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        pos = np.repeat(begin - indptr[:-1], counts) + np.arange(indptr[-1], dtype=np.int64)
        return CSRNDArray(torch.from_numpy(self.values[pos]),
                          [torch.from_numpy(indptr), torch.from_numpy(self.indices[pos])],
                          (len(rows), self.width))


def _check_args(data_shape, label_libsvm, label_shape, dtype, round_batch, kwargs):
    unknown = sorted(set(kwargs) - _KNOWN)
    if unknown:
        _LOG.warning("LibSVMIter: ignoring argument(s) %s, which it does not take (mxnet "
                     "ignores unknown iterator arguments too)", unknown)
    if len(data_shape) != 1:
        raise MXNetError(f"LibSVMIter: dimension of data_shape is expected to be 1, got "
                         f"data_shape={data_shape}")
    size = int(np.prod(label_shape))
    if label_libsvm not in (None, "NULL"):
        if size <= 1:
            raise MXNetError(f"LibSVMIter: label_shape is not expected to be (1,) when "
                             f"label_libsvm is set, got label_shape={label_shape}")
        if len(label_shape) != 1:
            raise MXNetError(f"LibSVMIter: csr labels need a 1-D label_shape, got "
                             f"{label_shape}")
    elif size != 1:
        raise MXNetError(f"LibSVMIter: label_shape is expected to be (1,) when label_libsvm "
                         f"is NULL, got label_shape={label_shape}")
    if dtype not in (None, "float32", np.float32):
        raise MXNetError(f"LibSVMIter: dtype must be float32 (mxnet 1.9.1 aborts on "
                         f"others), got {dtype!r}")
    if not round_batch:
        raise MXNetError("LibSVMIter: sparse batch loader doesn't support "
                         "round_batch == false yet")


def _read(uri, what, num_parts, part_index):
    files = list_files(uri, what)
    return parse(read_part(files, num_parts, part_index), f"{what} {uri!r}")


def _shape(value):
    return tuple(int(s) for s in np.atleast_1d(value).tolist())


class LibSVMIter(DataIter):
    """Batches of csr rows read from LibSVM files.

    Parameters
    ----------
    data_libsvm : str
        The zero-based LibSVM data file, a folder of them (read in name order) or
        ``;``-separated paths.
    data_shape : tuple of int
        The shape of one example: ``(num_features,)``.
    batch_size : int
    label_libsvm : str, optional
        A LibSVM file whose rows' features are the labels (csr); ``'NULL'`` (default):
        labels are the first number of each data row (dense).
    label_shape : tuple of int
        ``(1,)`` without ``label_libsvm``; ``(num_label_features,)`` with it.
    num_parts, part_index : int
        Read only part ``part_index`` of ``num_parts`` byte spans of the data (and of
        the labels), each starting at a line: one part per worker.
    round_batch : bool
        Must be True (mxnet's sparse batch loader has nothing else).
    data_name, label_name : str
        Names in ``provide_data`` / ``provide_label``.
    prefetch_buffer, ctx, dtype
        Accepted as mxnet accepts them; ``dtype`` may only be float32.
    """

    def __init__(self, data_libsvm, data_shape, batch_size, label_libsvm="NULL",
                 label_shape=(1,), num_parts=1, part_index=0, round_batch=True,
                 data_name="data", label_name="softmax_label", **kwargs):
        super(LibSVMIter, self).__init__(int(batch_size))
        data_shape, label_shape = _shape(data_shape), _shape(label_shape)
        _check_args(data_shape, label_libsvm, label_shape, kwargs.get("dtype"),
                    round_batch, kwargs)
        if int(num_parts) <= 0 or int(part_index) < 0:
            raise MXNetError(f"LibSVMIter: num_parts must be positive and part_index "
                             f"non-negative, got {num_parts}, {part_index}")
        labels, indptr, indices, values = _read(data_libsvm, "data_libsvm",
                                                int(num_parts), int(part_index))
        self._data = _Rows(indptr, indices, values, data_shape[0], "data_shape",
                           repr(data_libsvm))
        self._labels, self._label_rows = labels, None
        if label_libsvm not in (None, "NULL"):
            _, lptr, lidx, lval = _read(label_libsvm, "label_libsvm",
                                        int(num_parts), int(part_index))
            self._label_rows = _Rows(lptr, lidx, lval, label_shape[0], "label_shape",
                                     repr(label_libsvm))
            if len(self._label_rows) < len(self._data):
                raise MXNetError(f"LibSVMIter: label_libsvm {label_libsvm!r} has "
                                 f"{len(self._label_rows)} rows, fewer than the "
                                 f"{len(self._data)} of data_libsvm {data_libsvm!r}")
        if len(self._data) == 0:
            raise MXNetError(f"LibSVMIter: data_libsvm {data_libsvm!r} (part {part_index} "
                             f"of {num_parts}) holds no rows")
        self._loader = BatchLoader(len(self._data), self.batch_size, True, [], [],
                                   "LibSVMIter")
        self._rows, self._pad, self._first = None, None, None
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + data_shape,
                                      np.float32)]
        lshape = (self.batch_size,) + (label_shape if self._label_rows else ())
        self.provide_label = [DataDesc(label_name, lshape, np.float32)]
        self._first = self.next()

    def reset(self):
        self._first = None
        self._loader.reset()

    def _fetch(self, rows):
        self._rows = np.asarray(rows, np.int64)
        return []

    def iter_next(self):
        if self._first is not None:
            return True
        self._pad = self._loader.next_batch(self._fetch)
        return self._pad is not None

    def next(self):
        if self._first is not None:
            batch, self._first = self._first, None
            return batch
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self._pad,
                         index=self.getindex())

    # as mxnet's C++ iterators (MXDataIter): one array each, not a list
    def getdata(self):
        return self._data.take(self._rows)

    def getlabel(self):
        if self._label_rows is not None:
            return self._label_rows.take(self._rows)
        return as_ndarray(torch.from_numpy(self._labels[self._rows]))

    def getindex(self):
        return self._rows.astype(np.uint64)

    def getpad(self):
        return self._pad
