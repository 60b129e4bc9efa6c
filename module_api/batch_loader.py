"""mxnet's C++ batch loader, in Python, shared by CSVIter and ImageRecordIter.

How mxnet 1.9.1 cuts a stream of examples into batches:

* full batches while examples last;
* a last, partial batch: with ``round_batch`` (the default) it is completed
  from the start of the data and ``pad`` counts those wrapped examples; the
  next epoch then starts *after* them (mxnet does not rewind a wrapped
  stream on ``reset``). Without ``round_batch`` the missing rows keep what
  the previous batch left in them and ``pad`` counts them;
* a batch of shape ``(1,)`` per example is handed out as ``(batch_size,)``.
"""
import numpy as np

from compiler.errors import MXNetError


def batch_shape(batch_size, shape):
    """mxnet's batch shape of examples of ``shape``: ``(1,)`` examples give ``(batch_size,)``."""
    shape = tuple(int(s) for s in shape)
    return (batch_size,) if shape == (1,) else (batch_size,) + shape


class BatchLoader(object):
    """Batches of examples ``fetch(i)`` for ``i`` in ``order``, as mxnet's batch loader.

    Parameters
    ----------
    num_examples : int
    batch_size : int
    round_batch : bool
    shapes : list of tuple
        The shape of each array of one example.
    dtypes : list of numpy dtype
    what : str
        The iterator's name, for errors.
    """

    def __init__(self, num_examples, batch_size, round_batch, shapes, dtypes, what):
        if batch_size <= 0:
            raise MXNetError(f"{what}: batch_size must be positive, got {batch_size}")
        self.num, self.batch_size, self.round_batch = num_examples, batch_size, round_batch
        self.what = what
        self.buffers = [np.zeros((batch_size,) + tuple(s), d) for s, d in zip(shapes, dtypes)]
        self.index = np.zeros(batch_size, np.int64)
        self.pos, self.overflow = 0, False
        self.order = np.arange(num_examples)

    def reset(self, order=None):
        """Start an epoch (after a wrapped last batch, where the wrap stopped)."""
        if not self.round_batch or not self.overflow:
            self.pos = 0
        self.overflow = False
        if order is not None:
            self.order = np.asarray(order)

    def next_batch(self, fetch):
        """Fill the buffers with the next batch; its ``pad``, or ``None`` at the end.

        Parameters
        ----------
        fetch : callable
            ``fetch(examples)`` gives, for a list of example ids, one list of
            arrays per array of an example (each ``(len(examples),) + shape``).
        """
        if self.overflow:
            return None
        take = self.order[self.pos:self.pos + self.batch_size]
        self.pos += len(take)
        if len(take) == 0:
            return None
        pad = self.batch_size - len(take)
        if pad and self.round_batch:
            if pad > self.num:
                raise MXNetError(f"{self.what}: number of input must be bigger than batch size "
                                 f"({self.num} examples, batch_size {self.batch_size})")
            take = np.concatenate([take, self.order[:pad]])
            self.pos, self.overflow = pad, True
        self._fill(fetch, take)
        return pad

    def _fill(self, fetch, take):
        arrays = fetch([int(i) for i in take])
        for buf, arr in zip(self.buffers, arrays):
            buf[:len(take)] = arr
        self.index[:len(take)] = take
