"""mxnet 1.9.1's ``kvstore.base``: the interface a key-value store implements, the
registry of stores written in Python, and the small ``teststore`` mxnet ships.

A class decorated with ``KVStoreBase.register`` is created by ``mx.kv.create`` under
its lower-cased class name, before the built-in types are looked up (Horovod's and
BytePS's adapters plug into mxnet this way). ``Module`` and ``model`` drive any
store through ``broadcast`` / ``pushpull`` / ``is_capable`` as they drive the
built-in ones.
"""
from __future__ import annotations

import warnings

import torch

__all__ = ["KVStoreBase", "TestStore"]


class KVStoreBase:
    """A key-value store for data-parallel training: the methods a store defines."""

    OPTIMIZER = "optimizer"
    kv_registry: dict = {}

    def broadcast(self, key, value, out, priority=0):
        """Copy ``value`` (rank 0's) into ``out`` (an NDArray or a list) on every rank."""
        raise NotImplementedError()

    def pushpull(self, key, value, out=None, priority=0):
        """Sum ``value`` (an NDArray or a list) over devices and workers into ``out``
        (into ``value`` when ``out`` is None)."""
        raise NotImplementedError()

    def set_optimizer(self, optimizer):
        """Run ``optimizer``'s updates inside the store."""
        raise NotImplementedError()

    @staticmethod
    def is_capable(capability):
        """Whether the store supports ``capability`` (``KVStoreBase.OPTIMIZER``)."""
        raise NotImplementedError()

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Save the store's optimizer states to ``fname``."""
        raise NotImplementedError()

    def load_optimizer_states(self, fname):
        """Load the store's optimizer states from ``fname``."""
        raise NotImplementedError()

    @property
    def type(self):
        """The store's type name."""
        raise NotImplementedError()

    @property
    def rank(self):
        """This worker's rank, in ``[0, num_workers)``."""
        raise NotImplementedError()

    @property
    def num_workers(self):
        """The number of workers."""
        raise NotImplementedError()

    @staticmethod
    def register(klass):
        """Register a store class; ``mx.kv.create(name)`` then makes one, ``name``
        being the class name in any case (a later class of one name replaces the
        earlier, with a warning, as mxnet's)."""
        if not isinstance(klass, type):
            raise TypeError(f"KVStoreBase.register takes a class, got {klass!r}")
        name = klass.__name__.lower()
        old = KVStoreBase.kv_registry.get(name)
        if old is not None:
            warnings.warn(f"WARNING: New kvstore {klass.__module__}.{klass.__name__} is "
                          f"overriding existing kvstore {old.__module__}.{old.__name__}")
        KVStoreBase.kv_registry[name] = klass
        return klass


def _outs(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


@KVStoreBase.register
class TestStore(KVStoreBase):
    """mxnet's store for testing the interface: one worker, no optimizer, sums in
    Python."""

    def broadcast(self, key, value, out, priority=0):
        for o in _outs(out):
            o[:] = value

    def pushpull(self, key, value, out=None, priority=0):
        if isinstance(value, torch.Tensor):
            total = value
        else:
            ctx = value[0].context
            total = value[0].as_in_context(ctx)
            for v in value[1:]:
                total = total + v.as_in_context(ctx)
        targets = _outs(out) if out is not None else \
            ([] if isinstance(value, torch.Tensor) else list(value))
        for o in targets:
            o[:] = total

    @staticmethod
    def is_capable(capability):
        if str(capability).lower() == KVStoreBase.OPTIMIZER:
            return False
        raise ValueError(f"Unknown capability: {capability}")

    @property
    def type(self):
        return "teststore"

    @property
    def rank(self):
        return 0

    @property
    def num_workers(self):
        return 1
