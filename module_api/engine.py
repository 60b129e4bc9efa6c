"""``mx.engine``: mxnet's engine controls that scripts call.

mxnet's engine runs operators asynchronously and can bulk several into one engine
task (``set_bulk_size`` / ``bulk``). Here an operator runs when it is called and a
compiled Program already launches its fused kernels together, so the bulk size
changes nothing; it is kept and returned as mxnet's is, so code that saves and
restores it works unchanged.
"""
from __future__ import annotations

import threading

__all__ = ["set_bulk_size", "bulk"]


class _Bulk(threading.local):
    size = 15       # mxnet's default (MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN)


_BULK = _Bulk()


def set_bulk_size(size):
    """Set the number of operators bulked into one engine task (no effect here).

    Parameters
    ----------
    size : int

    Returns
    -------
    int
        The previous size.
    """
    prev, _BULK.size = _BULK.size, int(size)
    return prev


class _BulkScope:
    """Sets the bulk size on entry and restores the previous one on exit."""

    def __init__(self, size):
        self._size, self._prev = size, None

    def __enter__(self):
        self._prev = set_bulk_size(self._size)
        return self

    def __exit__(self, *exc):
        set_bulk_size(self._prev)


def bulk(size):
    """A scope with bulk size ``size`` (``with mx.engine.bulk(10): ...``)."""
    return _BulkScope(size)
