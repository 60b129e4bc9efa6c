"""Single-process key-value store with mxnet 1.9.1's ``KVStore`` interface.

``kvstore.create('local')`` and ``kvstore.create('device')`` give the same numbers; they differ
only in where values are reduced and where the stored copy (and, with
``set_optimizer``, the update) lives:

* ``'local'``: the store keeps each value on the CPU; pushed values are copied
  to the CPU and summed there.
* ``'device'``: the store keeps each value on the device of the value it was
  initialised with (the first device of a data-parallel group); pushed values
  are copied there and summed there.

Pushed lists are always summed in the order given (device 0 first, then 1,
...) into an fp32-or-wider accumulator of the stored dtype, so both types
produce bit-identical sums. With an optimizer set, a push runs the updater on
the stored value (mxnet's ``update_on_kvstore``); a push of several keys
updates them all with one launch per dtype and device through
:meth:`runtime.optimizer.Updater.update_all`. The distributed types
``dist_sync`` / ``dist_device_sync`` (:mod:`runtime.kvstore_dist`) and
``dist_async`` (:mod:`runtime.kvstore_async`) build on this class.
"""
from __future__ import annotations

import contextlib

import torch

from compiler.artifacts.atomic import atomic_write_bytes
from compiler.errors import MXNetError

from . import kvstore_sparse as kvs
from . import threads
from . import optimizer as opt
from .gradient_compression import TwoBitCompression
from .kvstore_base import KVStoreBase
from .ndarray import NDArray
from .updater import load_states_file
from .ndarray import torch_dtype

__all__ = ["KVStoreBase", "KVStore", "key_value_pairs"]

def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _check_key(k):
    if isinstance(k, bool) or not isinstance(k, (int, str)):
        raise MXNetError(f"kvstore keys must be int or str, not {type(k).__name__}")
    return k


def _builtin(updater) -> bool:
    """Whether ``updater`` runs only this project's code (the Updater of a built-in
    optimizer), so that it may run with the thread policy's count: the user's own
    torch code never sees a changed count (runtime/threads.py)."""
    opt_ = getattr(updater, "optimizer", None)
    return opt_ is not None and type(updater).__module__.startswith("runtime.") and \
        type(opt_).__module__.startswith("runtime.")


def key_value_pairs(key, value, what):
    """Normalise mxnet's (key, value) forms into ``[(key, [arrays])]``.

    Parameters
    ----------
    key : int, str or list of them
    value : NDArray, list of NDArray, or (with a key list) a list of those
    what : str
        The operation, for error messages (``push``, ``pull`` ...).

    Returns
    -------
    list of tuple
    """
    if isinstance(key, (list, tuple)):
        keys = [_check_key(k) for k in key]
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(keys) != len(values):
            # one key per device list: key list [k], value [a0, a1] -> grouped
            if len(keys) == 1:
                return [(keys[0], values)]
            raise MXNetError(f"{what}: {len(keys)} keys but {len(values)} values")
        return [(k, _as_list(v)) for k, v in zip(keys, values)]
    return [(_check_key(key), _as_list(value))]


class _PerKeyUpdater:
    """A plain ``f(key, merged, stored)`` updater, called once per pushed key."""

    def __init__(self, func):
        self.func = func

    def update_all(self, keys, merged, stored):
        with torch.no_grad():
            for k, m, w in zip(keys, merged, stored):
                self.func(k, m, w)

    def __call__(self, key, merged, stored):
        self.func(key, merged, stored)


def _slots(optimizer, stored):
    """``key -> (name, tensor)`` for the keys of ``stored`` (key -> (shape, tensor)) and,
    for str keys, the indices ``optimizer.idx2name`` gives those names."""
    names = getattr(optimizer, "idx2name", None) or {}
    slots = {k: (k if isinstance(k, str) else names.get(k, str(k)), t)
             for k, (_, t) in stored.items()}
    for i, name in names.items():
        if isinstance(name, str) and name in stored and i not in slots:
            slots[i] = (name, stored[name][1])
    return slots


def _plain_tensors():
    """Torch calls inside return plain tensors and skip NDArray's ``__torch_function__``
    (and autograd's recording)."""
    stack = contextlib.ExitStack()
    stack.enter_context(torch._C.DisableTorchFunctionSubclass())
    stack.enter_context(torch.no_grad())
    return stack


class KVStore(KVStoreBase):
    """A key-value store for data-parallel training in one process."""

    def __init__(self, kv_type="local"):
        self._type = kv_type
        self._store: dict = {}
        self._key_kind = None
        self._updater = None
        self._updater_func = None
        self._str_updater_func = None
        self._compression = None
        self._sum_buffers: dict = {}     # key -> the one-device sum's buffer (_reduce)
        self._pull_warned: set = set()   # keys whose sparse pull was skipped (said once)

    # -- properties ----------------------------------------------------------------
    @property
    def type(self):
        return self._type

    @property
    def rank(self):
        return 0

    @property
    def num_workers(self):
        return 1

    def is_capable(self, capability):
        if str(capability).lower() == KVStoreBase.OPTIMIZER:
            return True
        raise ValueError(f"Unknown capability: {capability}")

    # -- helpers -------------------------------------------------------------------
    def _home(self, value):
        if self._type == "device" or self._type.endswith("_device"):
            return value.device
        return torch.device("cpu")

    def _kind(self, k):
        kind = "str" if isinstance(k, str) else "int"
        if self._key_kind is None:
            self._key_kind = kind
        elif self._key_kind != kind:
            raise MXNetError("a kvstore uses either int or str keys, not both")

    def _stored(self, k):
        if k not in self._store:
            raise MXNetError(f"key {k!r} has not been initialised in the kvstore; call init first")
        return self._store[k]

    def _reduce(self, k, values):
        """Sum of ``values`` in the given order, on the stored value's device and dtype."""
        stored = self._stored(k)
        for v in values:
            if tuple(v.shape) != tuple(stored.shape):
                raise MXNetError(f"kvstore key {k!r}: pushed shape {tuple(v.shape)} does not "
                                 f"match the stored shape {tuple(stored.shape)}")
        acc_dtype = torch.float64 if torch_dtype(stored) == torch.float64 else (
            torch.float32 if torch_dtype(stored).is_floating_point else torch_dtype(stored))
        if len(values) == 1 and torch_dtype(values[0]) == torch_dtype(stored):
            # one device: the sum is a copy, into a buffer kept per key (no allocation)
            buf = self._sum_buffers.get(k)
            if buf is None or buf.shape != stored.shape or buf.dtype != torch_dtype(stored) or \
                    buf.device != stored.device:
                buf = self._sum_buffers[k] = torch.empty_like(stored.as_subclass(torch.Tensor))
            buf.copy_(values[0].detach())
            return buf.as_subclass(NDArray)
        acc = values[0].detach().to(device=stored.device, dtype=acc_dtype).clone()
        for v in values[1:]:
            acc += v.detach().to(device=stored.device, dtype=acc_dtype)
        return acc.to(torch_dtype(stored)).as_subclass(NDArray)

    # -- API -----------------------------------------------------------------------
    def init(self, key, value):
        """Initialise key(s) with value(s) (the first of a device list)."""
        fresh = []
        for k, vals in key_value_pairs(key, value, "init"):
            self._kind(k)
            v = vals[0]
            home = self._home(v)
            if kvs.is_sparse(v):
                fresh.append((k, kvs.stored_copy(k, v, home)))
                continue
            stored = torch.empty(tuple(v.shape), dtype=torch_dtype(v), device=home).as_subclass(NDArray)
            with torch.no_grad():
                stored.copy_(v.detach())
            if home.type != "cpu" or (self._type == "device" and
                                      getattr(v, "_mx_ctx", None) is not None):
                if getattr(v, "_mx_ctx", None) is not None:   # 'device': with the first value
                    stored._mx_ctx = v._mx_ctx
            fresh.append((k, stored))
        self._agree_initial(fresh)
        self._store.update(fresh)

    def _agree_initial(self, pairs):
        """Hook: make initial values agree across workers (one process: nothing to do)."""

    def _combine(self, merged):
        """Hook: combine this worker's per-key sums with other workers' (in place)."""

    def _pushed_sums(self, key, value):
        """Each key's sum over its devices, compressed where mxnet compresses
        (see runtime/gradient_compression.py)."""
        pairs = key_value_pairs(key, value, "push")
        if any(kvs.is_sparse(self._stored(k)) or any(kvs.is_sparse(v) for v in vals)
               for k, vals in pairs):
            return threads.run(None, self._sparse_sums, pairs)
        comp = self._compression
        if comp is None:
            return [(k, self._reduce(k, vals)) for k, vals in pairs]
        if not self._type.startswith("dist"):
            pairs = [(k, [comp.quantize((k, i), v) for i, v in enumerate(vals)])
                     for k, vals in pairs]
            return [(k, self._reduce(k, vals)) for k, vals in pairs]
        return [(k, comp.quantize((k, "worker"), self._reduce(k, vals))) for k, vals in pairs]

    def _sparse_sums(self, pairs):
        """Pushes where a value or the stored value is row_sparse (kvstore_sparse)."""
        if self._compression is not None:
            raise MXNetError("gradient compression of row_sparse values is not supported")
        out = []
        for k, vals in pairs:
            stored = self._stored(k)
            if any(kvs.is_sparse(v) for v in vals):
                out.append((k, kvs.reduce_rows(k, vals, stored)))
                continue
            acc = sum(v.detach().to(stored.device, torch_dtype(stored)) for v in vals)
            out.append((k, acc.as_subclass(NDArray)))
        return out

    def push(self, key, value, priority=0):
        """Sum the values of each key (in device order); store the sum, or update with it."""
        # NDArray's __torch_function__ re-wraps every result: tens of microseconds a key
        # on a step that is mostly this bookkeeping; the arithmetic here needs none of it
        with _plain_tensors():
            merged = self._pushed_sums(key, value)
            self._combine(merged)
            if self._updater is None:
                for k, m in merged:
                    if kvs.is_sparse(m) or kvs.is_sparse(self._store[k]):
                        # the sum replaces the stored value, whatever its stype
                        self._store[k] = m
                    else:
                        self._store[k].copy_(m)
                return
        # a push of several keys may mix row_sparse and dense ones: each kind its own way
        rsp = [(k, m) for k, m in merged if kvs.is_sparse(m) or kvs.is_sparse(self._store[k])]
        if rsp and _builtin(self._updater):  # row updates: at the thread policy's count
            threads.run(None, self._update_sparse, rsp)
        elif rsp:   # outside the policy: the updater runs the user's Python
            self._update_sparse(rsp)
        dense = [(k, m) for k, m in merged if not (kvs.is_sparse(m) or
                                                    kvs.is_sparse(self._store[k]))]
        if not dense:
            return
        # outside: an updater may run the user's Python (a custom optimizer's update)
        keys = [k for k, _ in dense]
        self._updater.update_all(keys, [m for _, m in dense], [self._store[k] for k in keys])

    def _update_sparse(self, merged):
        """Updates of a push where a gradient or a stored weight is row_sparse
        (sparse_update), dense keys of the same push included: a plain
        ``f(key, grad, weight)`` updater gets the arrays as they are."""
        for k, m in merged:
            stored = self._store[k]
            if isinstance(self._updater, _PerKeyUpdater):
                self._updater(k, m, stored)
            elif kvs.is_sparse(m) or not kvs.is_sparse(stored):
                # a dense key pushed beside row_sparse ones (the bias of example/sparse)
                self._updater.update_all([k], [m], [stored])
            else:
                raise MXNetError(f"kvstore push of key {k!r}: a dense gradient for a "
                                 f"row_sparse weight is not supported with an optimizer")

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the stored value of each key into every array of ``out``."""
        if out is None:
            raise MXNetError("pull needs out=")
        with _plain_tensors():
            for k, outs in key_value_pairs(key, out, "pull"):
                stored = self._stored(k)
                for o in outs:
                    if kvs.is_sparse(stored) or kvs.is_sparse(o):
                        kvs.pull_into(k, stored, o, ignore_sparse, self._pull_warned)
                    else:
                        o.copy_(stored)

    def pushpull(self, key, value, out=None, priority=0):
        """push then pull (into ``value`` itself when ``out`` is None)."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key, value, out, priority=0):
        """init then pull."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Pull the rows ``row_ids`` of a row_sparse value into row_sparse ``out``
        (one id list for every array of ``out``, or one per array); see
        :mod:`runtime.kvstore_sparse`."""
        with _plain_tensors():
            # row bookkeeping: at the thread policy's count, as the Programs' launches
            threads.run(None, kvs.row_sparse_pull, self, key, out, row_ids, key_value_pairs)

    def set_gradient_compression(self, compression_params):
        """2-bit gradient compression with error feedback, as mxnet 1.9.1 does it.

        Parameters
        ----------
        compression_params : dict
            ``{'type': '2bit', 'threshold': 0.5}`` (threshold optional). Only
            ``device`` and ``dist_*`` stores compress; ``local`` refuses, as
            in mxnet.
        """
        if "device" not in self._type and "dist" not in self._type:
            raise MXNetError("Gradient compression is not supported for this type of kvstore "
                             f"('{self._type}'): use 'device' or a 'dist_*' store")
        self._compression = TwoBitCompression.from_params(compression_params)

    def set_optimizer(self, optimizer):
        """Update on the store: later pushes apply ``optimizer`` to the stored values."""
        self._set_updater(opt.get_updater(optimizer))

    def _set_updater(self, updater):
        """mxnet's updater hook: an ``Updater``, or any ``f(key, merged, stored)``
        (called per key, in push order, as mxnet calls it)."""
        if not hasattr(updater, "update_all"):
            updater = _PerKeyUpdater(updater)
        self._updater = updater
        self._updater_func = updater
        self._str_updater_func = updater

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write the updater's states (safe format, atomic write)."""
        if self._updater is None:
            raise MXNetError("Cannot save states: no optimizer is set on this kvstore")
        atomic_write_bytes(fname, self._updater.get_states(dump_optimizer))

    def load_optimizer_states(self, fname, allow_pickle=False):
        """Read states written by :meth:`save_optimizer_states` (mxnet pickles only with
        ``allow_pickle=True``)."""
        if self._updater is None:
            raise MXNetError("Cannot load states: no optimizer is set on this kvstore")
        if not hasattr(self._updater, "_install"):      # a user's f(key, merged, stored)
            raise MXNetError("Cannot load states: this kvstore's updater is a plain "
                             "function, which keeps no states")
        load_states_file(self._updater, fname, allow_pickle=allow_pickle,
                         bound=self._state_slots())

    def _state_slots(self):
        """Key -> ``(parameter name, stored value)``: what loaded states must fit; with
        name keys also the optimizer's indices of those names (states a one-device
        module saved are keyed by index, and mxnet loads them as they are)."""
        return _slots(self._updater.optimizer,
                      {k: (tuple(v.shape), v) for k, v in self._store.items()})

    def barrier(self):
        """Wait for every worker: one process has nothing to wait for."""

    _barrier = barrier

    def _send_command_to_servers(self, head, body):
        raise MXNetError("symtriton's kvstores have no server processes to command")
