"""mxnet's ``mx.kvstore``: :func:`create` and the store classes.

``local`` and ``device`` stores serve the devices of one process
(:mod:`runtime.kvstore_local`, whose docstring says how they differ); the ``dist_*``
types join the ``torch.distributed`` job that ``torchrun`` started
(:mod:`runtime.kvstore_dist`, :mod:`runtime.kvstore_async`), building on the same class.
"""
from __future__ import annotations

from compiler.errors import MXNetError

from .kvstore_async import DistAsyncKVStore
from .kvstore_dist import DistSyncKVStore
from .kvstore_base import KVStoreBase, TestStore  # noqa: F401  (mxnet's kvstore.base)
from .kvstore_local import KVStore

__all__ = ["KVStoreBase", "KVStore", "create"]

_TYPES = ("local", "device", "local_update_cpu", "local_allreduce_cpu", "local_allreduce_device")
_DIST_TYPES = ("dist_sync", "dist_device_sync", "dist_async")


def create(name="local"):
    """A new key-value store.

    Parameters
    ----------
    name : {'local', 'device', 'dist_sync', 'dist_device_sync', 'dist_async'} or str
        ``local`` and ``device`` serve the devices of one process (see
        :mod:`runtime.kvstore_local`). The ``dist_*`` types join the ``torch.distributed``
        job that ``torchrun`` started (see :mod:`runtime.kvstore_dist` and
        :mod:`runtime.kvstore_async`). Any other name is looked up first among the
        classes registered with ``KVStoreBase.register`` (``teststore``,
        :mod:`runtime.kvstore_base`).

    Returns
    -------
    KVStore
    """
    if not isinstance(name, str):
        raise TypeError("name must be a string")
    registered = KVStoreBase.kv_registry.get(name.lower())
    if registered is not None:      # a store written in Python (KVStoreBase.register)
        return registered()
    if name in ("dist_sync", "dist_device_sync"):
        return DistSyncKVStore(name)
    if name == "dist_async":
        return DistAsyncKVStore(name)
    if name.startswith("dist") or name in ("horovod", "byteps", "nccl") or "dist" in name:
        raise MXNetError(f"kvstore type {name!r} is not supported; distributed training uses "
                         f"{', '.join(repr(t) for t in _DIST_TYPES)} under torchrun")
    if name not in _TYPES:
        raise MXNetError(f"unknown kvstore type {name!r}; use 'local' or 'device' in one "
                         f"process, or {', '.join(repr(t) for t in _DIST_TYPES)} under torchrun")
    return KVStore(name)
