"""``mx.io``: data descriptions, batches and the Python data iterators of mxnet 1.9.1.

Arrays handed out are ``NDArray`` (``torch.Tensor`` subclasses). Inputs may
be numpy arrays, torch tensors / NDArrays, nested lists, or lists and dicts
of these.
"""
import numbers
import sys
import threading

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

# the message mxnet gives when joined iterators disagree on their batches
_MISMATCH = "Number of entry mismatches between iterators"


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
    """Serve exactly ``size`` batches of ``data_iter`` per epoch.

    Parameters
    ----------
    data_iter : DataIter
        The iterator to resize; it is restarted whenever it runs out before
        ``size`` batches were served.
    size : int
        Batches per epoch.
    reset_internal : bool, default True
        Also reset ``data_iter`` on :meth:`reset`; with False the next epoch
        goes on where the wrapped iterator stopped.
    """

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        # a resized iterator looks like the one it wraps
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        try:
            self.default_bucket_key = data_iter.default_bucket_key
        except AttributeError:
            pass                            # not a bucketing iterator

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def _pull(self):
        """The wrapped iterator's next batch, starting it over when it is exhausted."""
        try:
            return self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
        return self.data_iter.next()

    def iter_next(self):
        if self.cur == self.size:
            return False
        self.current_batch = self._pull()
        self.cur += 1
        return True


def _set_all(events):
    for event in events:
        event.set()


def _clear_all(events):
    for event in events:
        event.clear()


def _wait_all(events):
    for event in events:
        event.wait()


def _renamed_descs(descs_per_iter, renames):
    """One flat list of the iterators' descriptions, each renamed by its iterator's
    ``{old: new}`` dict (a plain ``(name, shape)`` tuple keeps its name, as mxnet)."""
    if renames is None:
        return [desc for descs in descs_per_iter for desc in descs]
    joined = []
    for mapping, descs in zip(renames, descs_per_iter):
        for desc in descs:
            if not isinstance(desc, DataDesc):
                joined.append(DataDesc(*desc))
                continue
            joined.append(DataDesc(mapping[desc.name], desc.shape, desc.dtype))
    return joined


class PrefetchingIter(_BatchHolder):
    """Fetch the batches of one or more iterators ahead, on background threads.

    Parameters
    ----------
    iters : DataIter or list of DataIter
        Their batches are joined into one: data arrays, then label arrays, in
        iterator order. They must yield the same number of batches with the
        same ``pad``.
    rename_data, rename_label : list of dict, optional
        One ``{old_name: new_name}`` dict per iterator for ``provide_data`` /
        ``provide_label``.

    Notes
    -----
    Each iterator has a worker thread and two events: ``data_taken`` tells the
    worker to fetch, ``data_ready`` tells the consumer the fetched batch is in
    ``next_batch``. Call :meth:`close` to stop the workers.
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        self.iters = iters if isinstance(iters, list) else [iters]
        self.n_iter = len(self.iters)
        assert self.n_iter > 0, "PrefetchingIter needs at least one iterator"
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch = None
        self.next_batch = [None] * self.n_iter
        self._errors = [None] * self.n_iter
        self.data_ready = [threading.Event() for _ in self.iters]
        self.data_taken = [threading.Event() for _ in self.iters]
        _set_all(self.data_taken)           # every slot is free: fetch at once
        self.started = True
        self.prefetch_threads = []
        for slot in range(self.n_iter):
            worker = threading.Thread(target=PrefetchingIter._prefetch, args=(self, slot),
                                      daemon=True)
            self.prefetch_threads.append(worker)
            worker.start()

    def _prefetch(self, i):
        """Worker body: fetch one batch of iterator ``i`` each time the last was taken."""
        source = self.iters[i]
        while True:
            self.data_taken[i].wait()
            if not self.started:
                return
            fetched, failure = None, None
            try:
                fetched = source.next()
            except StopIteration:
                pass                        # None marks the end of the epoch
            except Exception as err:  # pylint: disable=broad-except
                failure = err               # raised in the consumer's thread
            self.next_batch[i], self._errors[i] = fetched, failure
            self.data_taken[i].clear()
            self.data_ready[i].set()

    def close(self):
        """Stop the worker threads (a no-op once stopped)."""
        if not getattr(self, 'started', False):
            return
        self.started = False
        _set_all(self.data_taken)           # wake the workers so they see ``started``
        for worker in self.prefetch_threads:
            worker.join()

    def __del__(self):
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except
            pass

    @property
    def provide_data(self):
        return _renamed_descs([list(it.provide_data) for it in self.iters], self.rename_data)

    @property
    def provide_label(self):
        return _renamed_descs([list(it.provide_label or []) for it in self.iters],
                              self.rename_label)

    def _raise_pending(self):
        """Re-raise, here, the first error a worker met."""
        for slot, err in enumerate(self._errors):
            if err is not None:
                self._errors[slot] = None
                raise err

    def reset(self):
        _wait_all(self.data_ready)          # no worker may be mid-fetch
        for it in self.iters:
            it.reset()
        _clear_all(self.data_ready)
        _set_all(self.data_taken)

    def _join(self, batches):
        """One DataBatch of every iterator's arrays (pad and index of the first)."""
        data, label = [], []
        for batch in batches:
            data.extend(batch.data)
            label.extend(batch.label or [])
        lead = batches[0]
        return DataBatch(data, label, lead.pad, lead.index,
                         provide_data=self.provide_data, provide_label=self.provide_label)

    def iter_next(self):
        _wait_all(self.data_ready)
        self._raise_pending()
        batches = self.next_batch
        if batches[0] is None:
            assert all(b is None for b in batches), _MISMATCH
            return False
        pad = batches[0].pad
        assert all(b is not None and b.pad == pad for b in batches), _MISMATCH
        self.current_batch = self._join(batches)
        _clear_all(self.data_ready)
        _set_all(self.data_taken)           # let the workers fetch the next ones
        return True

    def next(self):
        if not self.iter_next():
            raise StopIteration
        return self.current_batch


# --------------------------------------------------------------------------
# NDArrayIter
# --------------------------------------------------------------------------

# the input kinds NDArrayIter accepts, as mxnet's messages name them
_ARRAY_KINDS = "NDArray, numpy.ndarray or h5py.Dataset"
_LAST_BATCH_MODES = ('pad', 'discard', 'roll_over')


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


def _is_single_array(value) -> bool:
    return isinstance(value, (np.ndarray, torch.Tensor, BaseSparseNDArray)) or \
        _is_h5py_dataset(value)


def _named_inputs(inputs, default_name):
    """``inputs`` as a dict name -> array: a lone array (or a one-entry list) is
    ``default_name``, the entries of a longer list ``_<i>_<default_name>``."""
    if inputs is None:
        return {}
    if _is_single_array(inputs):
        return {default_name: inputs}
    if isinstance(inputs, (list, tuple)):
        if len(inputs) == 1:
            return {default_name: inputs[0]}
        return {'_%d_%s' % (pos, default_name): arr for pos, arr in enumerate(inputs)}
    if isinstance(inputs, dict):
        return inputs
    raise TypeError("Input must be NDArray, numpy.ndarray, h5py.Dataset, a list of them "
                    "or dict with them as values; got %s" % type(inputs).__name__)


def _sorted_sources(inputs, allow_empty, default_name):
    """The canonical form of NDArrayIter's data or label: ``(name, array)`` pairs
    sorted by name (the order mxnet feeds them in)."""
    assert inputs is not None or allow_empty, "NDArrayIter needs data, got None"
    if not allow_empty and isinstance(inputs, (list, tuple)):
        assert len(inputs) > 0, "NDArrayIter needs data, got an empty %s" % \
            type(inputs).__name__
    converted = {}
    for name, value in _named_inputs(inputs, default_name).items():
        try:
            converted[name] = _to_ndarray(value)
        except Exception as err:
            raise TypeError("Invalid type '%s' for %s, should be %s"
                            % (type(value), name, _ARRAY_KINDS)) from err
    return sorted(converted.items(), key=lambda pair: pair[0])


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


def _take_rows(sources, rows, to_float32=False):
    """``(name, array)`` pairs with their rows (axis 0) picked by ``rows``.

    Dense arrays keep their dtype unless ``to_float32`` (mxnet's shuffle goes
    through ``mx.nd.array``, which makes float32); csr arrays keep theirs
    (scipy's row indexing); an ``h5py.Dataset`` is passed through, its rows are
    read through ``NDArrayIter._order``.
    """
    picked = []
    for name, arr in sources:
        if _is_h5py_dataset(arr):
            picked.append((name, arr))
        elif isinstance(arr, CSRNDArray):
            picked.append((name, arr.take_rows(np.asarray(rows))))
        else:
            index = torch.as_tensor(rows, dtype=torch.long, device=arr.device)
            chosen = arr.index_select(0, index)
            picked.append((name, as_ndarray(chosen.to(torch.float32) if to_float32
                                            else chosen)))
    return picked


def _clamp(pos, size):
    return min(max(pos, 0), size)


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

    Notes
    -----
    ``cursor`` is the first row of the current batch. A negative cursor marks
    the first batch of a 'roll_over' epoch: ``-cursor`` rows left over from the
    previous epoch (kept in ``_cache_data`` / ``_cache_label``) come first.
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False,
                 last_batch_handle='pad', data_name='data',
                 label_name='softmax_label', layout='NCHW', num_parts=1, part_index=0):
        super().__init__(batch_size)
        assert last_batch_handle in _LAST_BATCH_MODES, \
            "last_batch_handle must be 'pad', 'discard' or 'roll_over', got %r" \
            % (last_batch_handle,)
        self.data = _sorted_sources(data, allow_empty=False, default_name=data_name)
        self.label = _sorted_sources(label, allow_empty=True, default_name=label_name)
        self._refuse_csr_unless_discard(last_batch_handle)
        self.layout = layout
        self._refuse_uneven_rows()
        # the original row behind each row of the (parted, shuffled) in-memory
        # arrays: how an h5py.Dataset, which stays on disk, is read
        self._order = self._keep_part(num_parts, part_index)
        self.num_parts = num_parts
        self.part_index = part_index
        self.idx = np.arange(len(self._order))
        self.num_data = len(self.idx)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self._cache_data = None
        self._cache_label = None
        self.cursor = -batch_size
        self.reset()            # draws the first shuffle, as mxnet's constructor does
        self.data_list = [arr for _, arr in self.data + self.label]
        self.num_source = len(self.data_list)

    def _refuse_csr_unless_discard(self, last_batch_handle):
        has_csr = any(isinstance(arr, CSRNDArray) for _, arr in self.data + self.label)
        if has_csr and last_batch_handle != 'discard':
            raise NotImplementedError(
                "`NDArrayIter` only supports ``CSRNDArray`` with `last_batch_handle` set to "
                "`discard` (got %r)." % (last_batch_handle,))

    def _refuse_uneven_rows(self):
        """Every array must have one row per sample. mxnet 1.9.1 reads the count off the
        first data array and clamps the others' reads, so a label one row short gives
        batches whose labels belong to other samples, silently; here it is an error.
        (Only for a batch axis of 0: mxnet counts samples along axis 0 whatever the
        layout, and this keeps its behaviour there.)"""
        if self._batch_axis() != 0:
            return
        (first_name, first), = self.data[:1]
        for name, arr in self.data + self.label:
            if arr.shape[0] != first.shape[0]:
                raise ValueError(
                    f"NDArrayIter: '{name}' has {arr.shape[0]} rows but '{first_name}' has "
                    f"{first.shape[0]}; every data and label array needs one row per "
                    f"sample")

    def _keep_part(self, num_parts, part_index):
        """Cut data and label down to part ``part_index``; the original indices of its rows."""
        num_rows = self.data[0][1].shape[0]
        _check_parts(num_parts, part_index, num_rows, 'data rows')
        if num_parts == 1:
            return np.arange(num_rows)
        rows = _part_rows(num_rows, num_parts, part_index)
        self.data = _take_rows(self.data, rows)
        self.label = _take_rows(self.label, rows)
        return rows

    def _batch_axis(self):
        return self.layout.find('N')

    def _descs(self, sources):
        axis = self._batch_axis()
        descs = []
        for name, arr in sources:
            shape = tuple(arr.shape[:axis]) + (self.batch_size,) + tuple(arr.shape[axis + 1:])
            descs.append(DataDesc(name, shape, _numpy_type(arr.dtype), layout=self.layout))
        return descs

    @property
    def provide_data(self):
        """DataDesc of each data input, batch axis set to ``batch_size``."""
        return self._descs(self.data)

    @property
    def provide_label(self):
        """DataDesc of each label input, batch axis set to ``batch_size``."""
        return self._descs(self.label)

    # -- epochs -------------------------------------------------------------------------

    def hard_reset(self):
        """Back to the first row, dropping any 'roll_over' leftover."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self):
        """Back to the start; with 'roll_over' the rows the epoch could not fill a batch
        with open the next one."""
        if self.shuffle:
            self._shuffle_data()
        unserved = self.num_data - self.cursor
        if self.last_batch_handle == 'roll_over' and 0 < unserved < self.batch_size:
            self.cursor = -self.batch_size - unserved
        else:
            self.cursor = -self.batch_size

    def _shuffle_data(self):
        """Draw a new permutation of ``idx`` (numpy's global RNG) and reorder the current
        rows by it: each epoch's shuffle applies on top of the last, as in mxnet."""
        np.random.shuffle(self.idx)
        self.data = _take_rows(self.data, self.idx, to_float32=True)
        self.label = _take_rows(self.label, self.idx, to_float32=True)
        self._order = self._order[self.idx]

    # -- batches ------------------------------------------------------------------------

    def iter_next(self):
        self.cursor += self.batch_size
        return self.num_data > self.cursor

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[self._batch_axis()] != self.batch_size:
            # a short final batch is not served: it ends the epoch ('roll_over'
            # opens the next epoch with it)
            self._cache_data, self._cache_label = data, label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def getdata(self):
        return self._batchify(self.data)

    def getlabel(self):
        return self._batchify(self.label)

    def getpad(self):
        if self._is_padded_batch():
            return self.cursor + self.batch_size - self.num_data
        if self._is_rolled_over_batch():
            return -self.cursor
        return 0

    def _is_padded_batch(self):
        return self.last_batch_handle == 'pad' and \
            self.cursor + self.batch_size > self.num_data

    def _is_rolled_over_batch(self):
        return self.last_batch_handle == 'roll_over' and -self.batch_size < self.cursor < 0

    def _batchify(self, data_source):
        """The current batch's arrays of ``data_source`` (``self.data`` or ``self.label``)."""
        assert self.cursor < self.num_data, 'DataIter needs reset.'
        if self._is_rolled_over_batch():
            leftover = self._pop_leftover()
            head = self._getdata(data_source, 0, self.cursor + self.batch_size)
            return self._concat(leftover, head)
        if self._is_padded_batch():
            return self._padded_batch(data_source)
        stop = min(self.cursor + self.batch_size, self.num_data)
        return self._getdata(data_source, self.cursor, stop)

    def _pop_leftover(self):
        """The previous epoch's leftover rows: data's first, then label's (``next`` asks
        for data before label). Each is used once."""
        if self._cache_data is not None:
            leftover, self._cache_data = self._cache_data, None
        elif self._cache_label is not None:
            leftover, self._cache_label = self._cache_label, None
        else:
            raise AssertionError('next epoch should have cached data')
        return leftover

    def _padded_batch(self, data_source):
        """The last 'pad' batch: the remaining rows, then rows from the start, the whole
        data as many times as needed when it is shorter than the padding."""
        whole_copies, partial = divmod(self.getpad(), self.num_data)
        pieces = [self._getdata(data_source, start=self.cursor)]
        if whole_copies:
            pieces += [self._getdata(data_source, 0, self.num_data)] * whole_copies
        if partial:
            pieces.append(self._getdata(data_source, 0, partial))
        return self._concat(*pieces)

    def _getdata(self, data_source, start=None, end=None):
        """Copies of rows ``[start, end)`` (along the batch axis) of every source.

        ``start`` defaults to 0, ``end`` to the first source's length along axis 0
        (mxnet's rule); both are clamped to each source's length.
        """
        assert start is not None or end is not None, "_getdata needs start or end"
        first = 0 if start is None else start
        if end is None:
            end = data_source[0][1].shape[0] if data_source else 0
        axis = self._batch_axis()
        return [self._read_span(arr, axis, first, end) for _, arr in data_source]

    def _read_span(self, arr, axis, start, end):
        if _is_h5py_dataset(arr):           # mxnet reads h5py along axis 0
            size = len(self._order)
            return _read_h5py_rows(arr, self._order[_clamp(start, size):_clamp(end, size)])
        lo, hi = _clamp(start, arr.shape[axis]), _clamp(end, arr.shape[axis])
        if isinstance(arr, CSRNDArray):     # mxnet's slice_axis: a dense result
            return arr.slice(lo, hi).tostype('default')
        with torch._C.DisableTorchFunctionSubclass():   # plain ops: a few us each
            rows = arr.narrow(axis, lo, max(hi - lo, 0)).clone()
        return as_ndarray(rows)

    def _concat(self, *pieces):
        """Join lists of arrays source by source along the batch axis. Empty lists
        (an iterator without labels) are skipped."""
        pieces = [piece for piece in pieces if piece]
        if len(pieces) <= 1:
            return pieces[0] if pieces else []
        assert all(len(piece) == len(pieces[0]) for piece in pieces), \
            'data source should contain the same size'
        axis = self._batch_axis()
        return [as_ndarray(torch.cat(list(parts), dim=axis)) for parts in zip(*pieces)]
