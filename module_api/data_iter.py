"""``mx.io``'s base classes: ``DataBatch`` and the ``DataIter`` protocol.

Every iterator of ``io.py``, ``mnist_iter.py`` and ``rnn/io.py`` builds on these;
``mx.io`` exports them.
"""


class DataBatch(object):
    """One batch: lists of data and label arrays plus ``pad``, ``index``,
    ``bucket_key``, ``provide_data`` and ``provide_label``."""

    def __init__(self, data, label=None, pad=None, index=None,
                 bucket_key=None, provide_data=None, provide_label=None):
        if data is not None:
            assert isinstance(data, (list, tuple)), "Data must be list of NDArrays"
        if label is not None:
            assert isinstance(label, (list, tuple)), "Label must be list of NDArrays"
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [l.shape for l in self.label] if self.label else None
        return "{}: data shapes: {} label shapes: {}".format(
            self.__class__.__name__, data_shapes, label_shapes)


class DataIter(object):
    """Base class of data iterators: ``next`` returns a DataBatch or raises
    StopIteration; ``reset`` rewinds."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        """Reset the iterator to the beginning of the data."""

    def next(self):
        """The next DataBatch; raises StopIteration at the end of the data."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(),
                             pad=self.getpad(), index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        """Move to the next batch; whether that succeeded."""

    def getdata(self):
        """Data arrays of the current batch."""

    def getlabel(self):
        """Label arrays of the current batch."""

    def getindex(self):
        """Example indices of the current batch (or None)."""
        return None

    def getpad(self):
        """Number of padding examples in the current batch."""
