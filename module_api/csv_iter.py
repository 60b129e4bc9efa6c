"""``mx.io.CSVIter``: mxnet 1.9.1's C++ CSV iterator, in Python.

Each row of ``data_csv`` is one example of ``data_shape`` (the row's length
must be its size); each row of ``label_csv`` one label of ``label_shape``
(without ``label_csv`` every label is 0). Batches follow mxnet's batch loader
(:mod:`module_api.batch_loader`: ``round_batch`` wraps the last batch and the
next epoch starts after the wrap). ``dtype`` ``'float32'`` (default),
``'int32'`` or ``'int64'``: integer types truncate the written values toward
zero, as mxnet's integer CSV parser reads ``-2.7`` as ``-2``. A path may be a
directory: its files are read in name order, as one CSV.

Differences, written down: float32 values are the correctly rounded reading
of the text (Python's), where mxnet's own parser may be 1 ulp off; the files
are read whole when the iterator is made (mxnet streams them); prefetching
arguments are accepted and have nothing to do.
"""
import math
import os

import numpy as np
import torch

from compiler.errors import MXNetError
from runtime.data_desc import DataDesc
from runtime.ndarray import as_ndarray

from .batch_loader import BatchLoader, batch_shape
from .data_iter import DataBatch, DataIter
from .mnist_iter import _CPP_ITER_PARAMS

_DTYPES = {"float32": np.float32, "int32": np.int32, "int64": np.int64}
_IGNORED = _CPP_ITER_PARAMS | {"prefetch_buffer", "ctx", "part_index", "num_parts"}


def _read_csv(path, shape, what, dtype):
    """All rows of a CSV file (or a folder of them) as ``dtype``, checked against ``shape``."""
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path))]
    elif os.path.exists(path):
        files = [path]
    else:
        raise MXNetError(f"CSVIter: {what} {path!r} does not exist")
    rows = []
    for name in files:
        with open(name) as f:
            for n, line in enumerate(f):
                if line.strip():
                    rows.append(_parse_row(line, name, n, dtype))
    size = int(np.prod(shape))
    for n, row in enumerate(rows):
        if len(row) != size:
            raise MXNetError(f"CSVIter: the data size in CSV do not match size of shape: "
                             f"specified shape={tuple(shape)}, the csv row-length={len(row)} "
                             f"({what} {path!r}, row {n})")
    return np.asarray(rows, dtype).reshape((len(rows),) + tuple(shape))


def _integer(text):
    """An integer token exactly (beyond 2**53 too); others truncated toward zero."""
    text = text.strip()
    return int(text) if text.lstrip("+-").isdigit() else math.trunc(float(text))


def _parse_row(line, name, n, dtype):
    parse = float if dtype is np.float32 else _integer
    try:
        return [parse(v) for v in line.strip().split(",")]
    except ValueError:
        raise MXNetError(f"CSVIter: {name!r} line {n + 1} is not a row of numbers: "
                         f"{line.strip()[:80]!r}") from None


class CSVIter(DataIter):
    """Batches of rows of CSV files.

    Parameters
    ----------
    data_csv : str
        The data CSV file (or a folder of CSV files).
    data_shape : tuple of int
        The shape of one example (one row).
    label_csv : str, optional
        The label CSV file; ``'NULL'`` or omitted: labels are 0.
    label_shape : tuple of int
        The shape of one label (default ``(1,)``).
    batch_size : int
    round_batch : bool
        Complete the last batch from the start of the data (default True).
    dtype : str
        ``'float32'``, ``'int32'`` or ``'int64'``.
    data_name, label_name : str
        Names of the data and label (``data``, ``softmax_label``).
    """

    def __init__(self, data_csv, data_shape, batch_size, label_csv="NULL", label_shape=(1,),
                 round_batch=True, dtype="float32", data_name="data",
                 label_name="softmax_label", **kwargs):
        super(CSVIter, self).__init__(batch_size)
        unknown = sorted(set(kwargs) - _IGNORED)
        if unknown:
            raise MXNetError(f"CSVIter: unknown argument(s) {unknown}")
        if str(dtype) not in _DTYPES:
            raise MXNetError(f"CSVIter: dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
        self.dtype = _DTYPES[str(dtype)]
        data_shape, label_shape = (tuple(np.atleast_1d(data_shape).tolist()),
                                   tuple(np.atleast_1d(label_shape).tolist()))
        self._data = _read_csv(data_csv, data_shape, "data_csv", self.dtype)
        if label_csv in (None, "NULL"):
            label_shape = (1,)
            self._label = np.zeros((len(self._data),) + label_shape, self.dtype)
        else:
            self._label = _read_csv(label_csv, label_shape, "label_csv", self.dtype)
            if len(self._label) < len(self._data):
                raise MXNetError(f"CSVIter: Data CSV's row is smaller than the number of rows "
                                 f"in label_csv ({len(self._data)} data rows, "
                                 f"{len(self._label)} label rows)")
        dshape, lshape = batch_shape(batch_size, data_shape), batch_shape(batch_size, label_shape)
        self._loader = BatchLoader(len(self._data), batch_size, bool(round_batch),
                                   [dshape[1:], lshape[1:]], [self.dtype, self.dtype],
                                   "CSVIter")
        self.provide_data = [DataDesc(data_name, dshape, self.dtype, "NCHW")]
        self.provide_label = [DataDesc(label_name, lshape, self.dtype, "NCHW")]
        self._pad = None

    def _fetch(self, rows):
        data = self._data[rows].reshape((len(rows),) + self._loader.buffers[0].shape[1:])
        label = self._label[rows].reshape((len(rows),) + self._loader.buffers[1].shape[1:])
        return data, label

    def reset(self):
        self._loader.reset()

    def iter_next(self):
        self._pad = self._loader.next_batch(self._fetch)
        return self._pad is not None

    def next(self):
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self._pad,
                         index=self.getindex(), provide_data=self.provide_data,
                         provide_label=self.provide_label)

    # as mxnet's C++ iterators (MXDataIter): one array each, not a list
    def getdata(self):
        return as_ndarray(torch.from_numpy(self._loader.buffers[0].copy()))

    def getlabel(self):
        return as_ndarray(torch.from_numpy(self._loader.buffers[1].copy()))

    def getindex(self):
        return self._loader.index.copy()

    def getpad(self):
        return self._pad
