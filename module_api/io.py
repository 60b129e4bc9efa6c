"""``mx.io``: data descriptions, batches and the Python data iterators of mxnet 1.9.1.

Arrays handed out are ``NDArray`` (``torch.Tensor`` subclasses). Inputs may
be numpy arrays, torch tensors / NDArrays, nested lists, or lists and dicts
of these.
"""
import numbers
import sys
import threading
from collections import OrderedDict

import numpy as np
import torch

from runtime.data_desc import DataDesc, _mx_real_t
from runtime.ndarray import as_ndarray
from runtime.ndarray_sparse import BaseSparseNDArray, CSRNDArray

from .data_iter import DataBatch, DataIter
from .mnist_iter import MNISTIter
from .csv_iter import CSVIter
from .libsvm_iter import LibSVMIter
from .image_record_iter import ImageRecordIter, ImageRecordUInt8Iter, ImageRecordInt8Iter

__all__ = ['DataDesc', 'DataBatch', 'DataIter', 'MNISTIter', 'CSVIter', 'LibSVMIter', 'ImageRecordIter',
           'ImageRecordUInt8Iter', 'ImageRecordInt8Iter',
           'NDArrayIter',
           'PrefetchingIter', 'ResizeIter']



def _numpy_type(dtype):
    """numpy scalar type (``np.float32`` ...) for a torch dtype; others pass through."""
    if isinstance(dtype, torch.dtype):
        try:
            return torch.empty(0, dtype=dtype).numpy().dtype.type
        except (TypeError, RuntimeError):  # e.g. bfloat16 has no numpy twin
            return dtype
    return dtype


class _BatchHolder(DataIter):
    """An iterator that hands out the parts of ``self.current_batch``."""

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


class ResizeIter(_BatchHolder):
    """Resize ``data_iter`` to ``size`` batches per epoch, restarting it when
    it runs out; ``reset_internal`` also resets it on ``reset``."""

    def __init__(self, data_iter, size, reset_internal=True):
        super(ResizeIter, self).__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, 'default_bucket_key'):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


class PrefetchingIter(_BatchHolder):
    """Prefetch batches of one or more iterators on background threads.

    ``rename_data`` / ``rename_label``: one ``{old_name: new_name}`` dict per
    iterator. Batches of the iterators are joined (data and labels in
    iterator order).
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super(PrefetchingIter, self).__init__()
        if not isinstance(iters, list):
            iters = [iters]
        self.n_iter = len(iters)
        assert self.n_iter > 0
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.data_ready = [threading.Event() for _ in range(self.n_iter)]
        self.data_taken = [threading.Event() for _ in range(self.n_iter)]
        for event in self.data_taken:
            event.set()
        self.started = True
        self.current_batch = None
        self.next_batch = [None for _ in range(self.n_iter)]
        self._errors = [None for _ in range(self.n_iter)]
        self.prefetch_threads = [
            threading.Thread(target=PrefetchingIter._prefetch, args=(self, i), daemon=True)
            for i in range(self.n_iter)]
        for thread in self.prefetch_threads:
            thread.start()

    def _prefetch(self, i):
        """Thread body: fetch one batch of iterator ``i`` each time the last was taken."""
        while True:
            self.data_taken[i].wait()
            if not self.started:
                break
            try:
                self.next_batch[i] = self.iters[i].next()
            except StopIteration:
                self.next_batch[i] = None
            except Exception as err:  # pylint: disable=broad-except
                self.next_batch[i] = None
                self._errors[i] = err
            self.data_taken[i].clear()
            self.data_ready[i].set()

    def close(self):
        """Stop the prefetch threads."""
        if not getattr(self, 'started', False):
            return
        self.started = False
        for event in self.data_taken:
            event.set()
        for thread in self.prefetch_threads:
            thread.join()

    def __del__(self):
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except
            pass

    @staticmethod
    def _renamed(descs_per_iter, renames):
        if renames is None:
            return sum(descs_per_iter, [])
        return sum([[
            DataDesc(r[x.name], x.shape, x.dtype) if isinstance(x, DataDesc)
            else DataDesc(*x)
            for x in descs] for r, descs in zip(renames, descs_per_iter)], [])

    @property
    def provide_data(self):
        return self._renamed([list(i.provide_data) for i in self.iters], self.rename_data)

    @property
    def provide_label(self):
        return self._renamed([list(i.provide_label or []) for i in self.iters],
                             self.rename_label)

    def _raise_pending(self):
        for i, err in enumerate(self._errors):
            if err is not None:
                self._errors[i] = None
                raise err

    def reset(self):
        for event in self.data_ready:
            event.wait()
        for it in self.iters:
            it.reset()
        for event in self.data_ready:
            event.clear()
        for event in self.data_taken:
            event.set()

    def iter_next(self):
        for event in self.data_ready:
            event.wait()
        self._raise_pending()
        if self.next_batch[0] is None:
            for batch in self.next_batch:
                assert batch is None, "Number of entry mismatches between iterators"
            return False
        for batch in self.next_batch:
            assert batch.pad == self.next_batch[0].pad, \
                "Number of entry mismatches between iterators"
        self.current_batch = DataBatch(
            sum([list(batch.data) for batch in self.next_batch], []),
            sum([list(batch.label or []) for batch in self.next_batch], []),
            self.next_batch[0].pad,
            self.next_batch[0].index,
            provide_data=self.provide_data,
            provide_label=self.provide_label)
        for event in self.data_ready:
            event.clear()
        for event in self.data_taken:
            event.set()
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration


# --------------------------------------------------------------------------
# NDArrayIter
# --------------------------------------------------------------------------

def _is_h5py_dataset(value) -> bool:
    """An ``h5py.Dataset`` (checked without importing h5py: a program passing one has)."""
    h5py = sys.modules.get("h5py")
    return h5py is not None and isinstance(value, h5py.Dataset)


def _read_h5py_rows(dataset, rows):
    """``dataset[rows]`` for any row order and repeats (h5py reads increasing, unique
    indices only), as an NDArray of the dataset's dtype."""
    if len(rows) == 0:
        values = np.empty((0,) + tuple(dataset.shape[1:]), dtype=dataset.dtype)
    else:
        uniq, back = np.unique(rows, return_inverse=True)
        values = np.asarray(dataset[uniq])[back]
    return as_ndarray(torch.from_numpy(np.ascontiguousarray(values)))


def _to_ndarray(value):
    """torch tensors and csr arrays keep their dtype, an ``h5py.Dataset`` stays on disk
    (read a batch at a time); anything else becomes float32 like ``mx.nd.array``."""
    if isinstance(value, CSRNDArray) or _is_h5py_dataset(value):
        return value
    if isinstance(value, BaseSparseNDArray):
        raise TypeError("NDArrayIter takes dense or csr arrays, not %s" % value.stype)
    if isinstance(value, torch.Tensor):
        return as_ndarray(value)
    if hasattr(value, 'asnumpy'):
        value = value.asnumpy()
    return as_ndarray(torch.from_numpy(np.array(value, dtype=_mx_real_t)))


def _init_data(data, allow_empty, default_name):
    """Canonical form: a list of ``(name, NDArray)`` sorted by name (as mxnet)."""
    assert (data is not None) or allow_empty
    if data is None:
        data = []
    if isinstance(data, (np.ndarray, torch.Tensor, BaseSparseNDArray)) or \
            _is_h5py_dataset(data):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not allow_empty:
            assert len(data) > 0
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict([('_%d_%s' % (i, default_name), d) for i, d in enumerate(data)])
    if not isinstance(data, dict):
        raise TypeError("Input must be NDArray, numpy.ndarray, h5py.Dataset, "
                        "a list of them or dict with them as values")
    out = {}
    for k, v in data.items():
        try:
            out[k] = _to_ndarray(v)
        except Exception as err:
            raise TypeError(("Invalid type '%s' for %s, " % (type(v), k)) +
                            "should be NDArray, numpy.ndarray or h5py.Dataset") from err
    return list(sorted(out.items()))


def _check_parts(num_parts, part_index, num_rows, what):
    """Validate data-sharding arguments (``num_parts`` parts of ``num_rows`` ``what``)."""
    def _is_int(value):
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not _is_int(num_parts) or num_parts < 1:
        raise ValueError("num_parts must be an int >= 1, got %r; pass the number of "
                         "workers (e.g. kv.num_workers), or 1 for no sharding" % (num_parts,))
    if not _is_int(part_index) or not 0 <= part_index < num_parts:
        raise ValueError("part_index must be an int with 0 <= part_index < num_parts=%d, "
                         "got %r; pass this worker's rank (e.g. kv.rank)"
                         % (num_parts, part_index))
    if num_parts > 1 and num_rows < num_parts:
        raise ValueError("num_parts=%d is larger than the number of %s (%d); every part "
                         "needs at least one: use fewer parts or more data"
                         % (num_parts, what, num_rows))


def _part_bounds(num_rows, num_parts, part_index):
    """``[lo, hi)``: the contiguous chunk of part ``part_index``."""
    return (part_index * num_rows // num_parts,
            (part_index + 1) * num_rows // num_parts)


def _part_rows(num_rows, num_parts, part_index):
    """Row indices of one part: its chunk, wrapped around to ``ceil(num_rows / num_parts)``
    rows so that every part has the same length."""
    lo, hi = _part_bounds(num_rows, num_parts, part_index)
    size = -(-num_rows // num_parts)
    return lo + np.arange(size) % (hi - lo)


def _take_rows(data, rows):
    """``(name, NDArray)`` pairs restricted to ``rows`` (axis 0), dtype kept."""
    out = []
    for k, v in data:
        if _is_h5py_dataset(v):     # read through NDArrayIter._order
            out.append((k, v))
        elif isinstance(v, CSRNDArray):
            out.append((k, v.take_rows(np.asarray(rows))))
        else:
            index = torch.as_tensor(rows, dtype=torch.long, device=v.device)
            out.append((k, as_ndarray(v.index_select(0, index))))
    return out


def _getdata_by_idx(data, idx):
    """Reorder every array by ``idx``; like mxnet, the result is float32."""
    out = []
    for k, v in data:
        if _is_h5py_dataset(v):     # read through NDArrayIter._order
            out.append((k, v))
            continue
        if isinstance(v, CSRNDArray):      # mxnet: scipy's row indexing, dtype kept
            out.append((k, v.take_rows(np.asarray(idx))))
            continue
        index = torch.as_tensor(idx, dtype=torch.long, device=v.device)
        out.append((k, as_ndarray(v.index_select(0, index).to(torch.float32))))
    return out


class NDArrayIter(DataIter):
    """Iterate over arrays in batches of ``batch_size``.

    Parameters
    ----------
    data, label : array, list of arrays or dict of name -> array
        Lists are named ``_0_data``, ``_1_data`` ...; dicts are ordered by
        sorted key. A single array is named ``data_name`` / ``label_name``.
        An ``h5py.Dataset`` stays on disk: each batch reads its rows (along
        axis 0, in the batch's order, as mxnet reads them).
    batch_size : int
    shuffle : bool
        Reshuffle (numpy's global RNG) on every ``reset``.
    last_batch_handle : {'pad', 'discard', 'roll_over'}
        'pad' fills the last batch from the start of the data (``pad`` says
        how many); 'discard' drops it; 'roll_over' carries it into the first
        batch of the next epoch.
    data_name, label_name : str
    layout : str
        Data layout; ``N`` marks the batch axis.
    num_parts : int, default 1
        Number of parts the data is split into, one per worker of a
        distributed job (e.g. ``kv.num_workers``). Needs at least
        ``num_parts`` rows.
    part_index : int, default 0
        The part this iterator serves, ``0 <= part_index < num_parts``
        (e.g. ``kv.rank``). With N rows (axis 0, the axis that is counted and
        shuffled), part p holds rows ``[p*N//P, (p+1)*N//P)`` of data and
        labels alike; a part shorter than ``ceil(N/P)`` rows is padded to that
        length by repeating rows from the start of its own chunk, so every
        part yields the same number of batches per epoch. ``provide_data``
        and ``provide_label`` (``batch_size`` per part) and shuffling (within
        the part) are unchanged.
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False,
                 last_batch_handle='pad', data_name='data',
                 label_name='softmax_label', layout='NCHW', num_parts=1, part_index=0):
        super(NDArrayIter, self).__init__(batch_size)
        assert last_batch_handle in ('pad', 'discard', 'roll_over'), \
            "last_batch_handle must be 'pad', 'discard' or 'roll_over'"
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        if any(isinstance(v, CSRNDArray) for _, v in self.data + self.label) and \
                last_batch_handle != 'discard':
            raise NotImplementedError("`NDArrayIter` only supports ``CSRNDArray``"
                                      " with `last_batch_handle` set to `discard`.")
        num_rows = self.data[0][1].shape[0]
        _check_parts(num_parts, part_index, num_rows, 'data rows')
        # the original row behind each row of the (parted, shuffled) in-memory arrays:
        # how an h5py.Dataset, which stays on disk, is read
        self._order = np.arange(num_rows)
        if num_parts > 1:
            rows = _part_rows(num_rows, num_parts, part_index)
            self.data = _take_rows(self.data, rows)
            self.label = _take_rows(self.label, rows)
            self._order = rows
        self.num_parts = num_parts
        self.part_index = part_index
        self.idx = np.arange(len(self._order))
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = batch_size
        self.cursor = -self.batch_size
        self.num_data = self.idx.shape[0]
        self.reset()
        self.data_list = [x[1] for x in self.data] + [x[1] for x in self.label]
        self.num_source = len(self.data_list)
        self._cache_data = None
        self._cache_label = None
        self.layout = layout

    def _descs(self, source):
        batch_axis = self.layout.find('N')
        return [DataDesc(k, tuple(list(v.shape[:batch_axis]) + [self.batch_size]
                                  + list(v.shape[batch_axis + 1:])),
                         _numpy_type(v.dtype), layout=self.layout)
                for k, v in source]

    @property
    def provide_data(self):
        """DataDesc of each data input, batch axis set to ``batch_size``."""
        return self._descs(self.data)

    @property
    def provide_label(self):
        """DataDesc of each label input, batch axis set to ``batch_size``."""
        return self._descs(self.label)

    def hard_reset(self):
        """Ignore roll-over data and go back to the start."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self):
        """Back to the start (keeping a 'roll_over' remainder for the next batch)."""
        if self.shuffle:
            self._shuffle_data()
        if self.last_batch_handle == 'roll_over' and \
                self.num_data - self.batch_size < self.cursor < self.num_data:
            # (self.cursor - self.num_data) examples are left over for the next epoch
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        # an incomplete last batch ends the epoch; keep it for 'roll_over'
        if data[0].shape[self.layout.find('N')] != self.batch_size:
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _getdata(self, data_source, start=None, end=None):
        assert start is not None or end is not None, 'should at least specify start or end'
        start = start if start is not None else 0
        if end is None:
            end = data_source[0][1].shape[0] if data_source else 0
        axis = self.layout.find('N')
        out = []
        for _, arr in data_source:
            if _is_h5py_dataset(arr):   # mxnet reads h5py along axis 0
                size = len(self._order)
                lo, hi = min(max(start, 0), size), min(max(end, 0), size)
                out.append(_read_h5py_rows(arr, self._order[lo:hi]))
                continue
            size = arr.shape[axis]
            lo, hi = min(max(start, 0), size), min(max(end, 0), size)
            if isinstance(arr, CSRNDArray):     # mxnet's slice_axis: a dense result
                out.append(arr.slice(lo, hi).tostype('default'))
                continue
            with torch._C.DisableTorchFunctionSubclass():   # plain ops: a few us each
                rows = arr.narrow(axis, lo, max(hi - lo, 0)).clone()
            out.append(as_ndarray(rows))
        return out

    def _concat(self, first_data, second_data):
        if (not first_data) or (not second_data):
            return first_data if first_data else second_data
        assert len(first_data) == len(second_data), 'data source should contain the same size'
        axis = self.layout.find('N')
        return [as_ndarray(torch.cat([a, b], dim=axis))
                for a, b in zip(first_data, second_data)]

    @staticmethod
    def _tile(data, repeats):
        res = []
        for datum in data:
            reps = [1] * datum.dim()
            reps[0] = repeats
            res.append(as_ndarray(datum.repeat(*reps)))
        return res

    def _batchify(self, data_source):
        assert self.cursor < self.num_data, 'DataIter needs reset.'
        # first batch of the next epoch with 'roll_over'
        if self.last_batch_handle == 'roll_over' and -self.batch_size < self.cursor < 0:
            assert self._cache_data is not None or self._cache_label is not None, \
                'next epoch should have cached data'
            cache_data = self._cache_data if self._cache_data is not None else self._cache_label
            second_data = self._getdata(data_source, end=self.cursor + self.batch_size)
            if self._cache_data is not None:
                self._cache_data = None
            else:
                self._cache_label = None
            return self._concat(cache_data, second_data)
        # last batch with 'pad'
        if self.last_batch_handle == 'pad' and self.cursor + self.batch_size > self.num_data:
            pad = self.batch_size - self.num_data + self.cursor
            first_data = self._getdata(data_source, start=self.cursor)
            if pad > self.num_data:
                repeats = pad // self.num_data
                second_data = self._tile(self._getdata(data_source, end=self.num_data), repeats)
                if pad % self.num_data != 0:
                    second_data = self._concat(
                        second_data, self._getdata(data_source, end=pad % self.num_data))
            else:
                second_data = self._getdata(data_source, end=pad)
            return self._concat(first_data, second_data)
        end_idx = min(self.cursor + self.batch_size, self.num_data)
        return self._getdata(data_source, self.cursor, end_idx)

    def getdata(self):
        return self._batchify(self.data)

    def getlabel(self):
        return self._batchify(self.label)

    def getpad(self):
        if self.last_batch_handle == 'pad' and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == 'roll_over' and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0

    def _shuffle_data(self):
        np.random.shuffle(self.idx)
        self.data = _getdata_by_idx(self.data, self.idx)
        self.label = _getdata_by_idx(self.label, self.idx)
        self._order = self._order[self.idx]
