"""``dist_async``: every worker updates a shared copy without waiting for the others.

Each key has an owning rank (keys are dealt out at ``init`` to balance elements
per rank; every worker deals the same way because every worker inits the same
keys in the same order). The owner keeps the one authoritative copy of the key
and its optimizer state, and a server thread in each worker answers the others
over ``torch.distributed`` point-to-point messages on a group of its own:

* ``push``: the gradient (summed over this worker's devices) goes to the owner,
  which applies the optimizer to its copy as soon as it arrives;
* ``pull``: the owner replies with its copy as it is at that moment.

Guarantees, weaker than ``dist_sync`` on purpose (they are mxnet's): updates
from different workers interleave in arrival order; a pull may return a value
that already includes other workers' newer updates, or not yet this worker's
last push to another owner (pushes to one owner are applied in the order sent).
A ``barrier`` first waits until each owner this worker pushed to has applied
those pushes, so once every worker has passed it, every push made before it is
visible to every pull (mxnet's server acknowledges a push only once applied).
Workers may run different numbers of steps. Nothing is averaged across
workers: each worker's gradient is applied on its own (``rescale_grad`` is
``1/batch_size``, not ``1/(batch_size*num_workers)``). Without ``set_optimizer``
a push replaces the stored value. Module training needs ``update_on_kvstore``.

``save_optimizer_states`` gathers every owner's states, so the file any rank
writes is complete; ``load_optimizer_states`` gives every rank the whole file
(each owner uses its keys' entries). At exit a worker tells every server it is
done, and waits until every other worker has said the same, so a server is
never gone while a peer still needs it.

Each worker serves each peer in a thread of its own, receiving from that peer
only: a receive from a named peer fails as soon as that peer's connection
closes (a receive from any source would wait forever), so when a peer dies its
server thread ends, and :meth:`DistAsyncKVStore.close` joins every server thread
before the interpreter exits (a thread returning from gloo while the interpreter
finalizes aborts the process). After a failure, close waits a few seconds for
the peers that are still alive; if one of them still holds a server thread, the
worker ends at once (``os._exit(1)``), with one line saying why.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time

import torch

from compiler.artifacts.atomic import atomic_write_bytes
from compiler.errors import MXNetError
from . import kvstore_async_sparse as rsp
from . import kvstore_sparse as kvs
from . import optimizer as opt
from .dist_group import WorkerLostError, join
from .kvstore_local import KVStore, _slots, key_value_pairs
from .kvstore_dist import _flat_collective, _bucket_bytes
from .launcher import LAUNCH_LOCK
from .ndarray import NDArray
from .ndarray import torch_dtype

__all__ = ["DistAsyncKVStore"]

_PUSH, _PULL, _STATES, _DONE, _FLUSH, _PUSH_ROWS, _PULL_ROWS = 1, 2, 3, 4, 5, 6, 7
_TAG_REQUEST, _TAG_PAYLOAD, _TAG_REPLY = 11, 12, 13
_FAILING_JOIN_S = 5.0       # after a failure, how long close() waits for live peers


def _refuse_csr(key, values, what):
    if any(getattr(v, "stype", "default") == "csr" for v in values):
        raise MXNetError(f"dist_async {what} of key {key!r}: csr values are not supported "
                         f"(a kvstore holds default and row_sparse values)")


class DistAsyncKVStore(KVStore):
    """Asynchronous updates on owner ranks (see the module docstring; row_sparse
    values: runtime/kvstore_async_sparse.py)."""

    TAG_REQUEST = _TAG_REQUEST

    def __init__(self, kv_type="dist_async"):
        import torch.distributed as dist
        super().__init__(kv_type)
        self._dist = dist
        self._group = join(kv_type)
        with self._group.collective("creating the dist_async message group"):
            self._p2p = dist.new_group(backend="gloo")
        self._keys, self._index, self._owner, self._meta = [], {}, {}, {}
        self._load = [0] * self._group.size
        self._lock = threading.RLock()
        self._server_error = None
        self._closed = False
        self._unflushed = set()     # owners sent a push since the last barrier
        self._sparse_keys = set()   # keys initialised with row_sparse values
        self._servers = {r: threading.Thread(target=self._serve, args=(r,), daemon=True,
                                             name=f"symtriton-kv-server-{r}")
                         for r in range(self._group.size) if r != self._group.rank}
        for t in self._servers.values():
            t.start()
        atexit.register(self.close)

    @property
    def rank(self):
        return self._group.rank

    @property
    def num_workers(self):
        return self._group.size

    def _home(self, value):
        return torch.device("cpu")

    # -- init: rank 0's values, owners dealt by size ---------------------------------
    def init(self, key, value):
        """Initialise keys with rank 0's values and deal each key to an owning rank."""
        fresh = []
        for k, vals in key_value_pairs(key, value, "init"):
            self._kind(k)
            _refuse_csr(k, vals, "init")
            if k in self._index:
                raise MXNetError(f"dist_async: key {k!r} is already initialised")
            v = vals[0]
            if kvs.is_sparse(v):
                fresh.append((k, kvs.stored_copy(k, v, torch.device("cpu"))))
                continue
            fresh.append((k, v.detach().to("cpu", copy=True).contiguous().as_subclass(NDArray)))
        with self._lock:
            for k, v in fresh:
                owner = min(range(self.num_workers), key=lambda r: (self._load[r], r))
                self._load[owner] += int(torch.Size(v.shape).numel())
                self._index[k] = len(self._keys)
                self._keys.append(k)
                self._owner[k] = owner
                self._meta[k] = (tuple(v.shape),
                                 torch_dtype(v))
                if kvs.is_sparse(v):
                    self._sparse_keys.add(k)
                if owner == self.rank:
                    self._store[k] = v
        if self.num_workers > 1 and fresh:
            # the keys are registered before any peer can pass the broadcast, and the
            # barrier keeps every request out until every owner holds rank 0's value
            with self._group.collective(f"broadcast of {len(fresh)} initial values"):
                _flat_collective([v for _, v in fresh if not kvs.is_sparse(v)],
                                 lambda f: self._dist.broadcast(f, src=0), _bucket_bytes())
            kvs.dist_broadcast(self._group, fresh)
        with self._lock:    # the owner keeps every row, as mxnet's server does
            for k, v in fresh:
                if kvs.is_sparse(v) and self._owner[k] == self.rank:
                    self._store[k] = rsp.all_rows(v)
        if self.num_workers > 1 and fresh:
            with self._group.collective("the barrier after init"):
                self._dist.barrier()

    def _stored(self, k):
        if k not in self._owner:
            raise MXNetError(f"key {k!r} has not been initialised in the kvstore; call init first")
        return self._store.get(k)

    def _reduce(self, k, values):
        self._stored(k)         # an unknown key is an error naming it
        shape, dtype = self._meta[k]
        for v in values:
            if tuple(v.shape) != shape:
                raise MXNetError(f"kvstore key {k!r}: pushed shape {tuple(v.shape)} does not "
                                 f"match the stored shape {shape}")
        acc_dtype = dtype if dtype == torch.float64 or not dtype.is_floating_point \
            else torch.float32
        acc = values[0].detach().to("cpu", dtype=acc_dtype, copy=True)
        for v in values[1:]:
            acc += v.detach().to("cpu", dtype=acc_dtype)
        return acc.to(dtype).contiguous()

    # -- the owner's side ----------------------------------------------------------
    def _apply(self, k, grad):
        """Apply one worker's pushed value to the owned copy of ``k``."""
        with LAUNCH_LOCK, self._lock:
            stored = self._store[k]
            if kvs.is_sparse(grad) or kvs.is_sparse(stored):
                if self._updater is None:   # the pushed value replaces the stored one
                    self._store[k] = grad
                else:
                    self._update_sparse([(k, grad)])
                return
            if self._updater is not None:
                self._updater.update_all([k], [grad.as_subclass(NDArray)], [stored])
            else:
                stored.copy_(grad)

    def _serve(self, src):
        """Answer peer ``src``'s requests until it says it is done (or is gone)."""
        dist, g = self._dist, self._p2p
        header = torch.zeros(2, dtype=torch.int64)
        try:
            while True:
                dist.recv(header, src=src, group=g, tag=_TAG_REQUEST)
                op, idx = (int(x) for x in header)
                if op == _DONE:
                    return
                if op == _STATES:
                    self._send_bytes(self._owned_states(), src)
                    continue
                if op == _FLUSH:    # this thread applied src's earlier pushes in order
                    dist.send(torch.zeros(1, dtype=torch.int64), dst=src, group=g,
                              tag=_TAG_REPLY)
                    continue
                k = self._keys[idx]
                if op == _PUSH_ROWS:
                    rsp.serve_push(self, k, src, _TAG_PAYLOAD)
                elif op == _PULL_ROWS:
                    rsp.serve_pull(self, k, src, _TAG_PAYLOAD, _TAG_REPLY)
                elif op == _PUSH:
                    shape, dtype = self._meta[k]
                    buf = torch.empty(shape, dtype=dtype)
                    dist.recv(buf, src=src, group=g, tag=_TAG_PAYLOAD)
                    self._apply(k, buf)
                elif op == _PULL:
                    with self._lock:
                        value = rsp.dense_value(self._store[k])
                    dist.send(value, dst=src, group=g, tag=_TAG_REPLY)
        except Exception as e:   # noqa: BLE001 - reported by the next request of this worker
            with self._lock:
                if self._server_error is None:
                    self._server_error = e

    def _send_bytes(self, data, dst):
        n = torch.tensor([len(data)], dtype=torch.int64)
        self._dist.send(n, dst=dst, group=self._p2p, tag=_TAG_REPLY)
        if data:
            payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            self._dist.send(payload, dst=dst, group=self._p2p, tag=_TAG_REPLY)

    def _recv_bytes(self, src):
        n = torch.zeros(1, dtype=torch.int64)
        self._dist.recv(n, src=src, group=self._p2p, tag=_TAG_REPLY)
        payload = torch.empty(int(n), dtype=torch.uint8)
        if int(n):
            self._dist.recv(payload, src=src, group=self._p2p, tag=_TAG_REPLY)
        return payload.numpy().tobytes()

    # -- the worker's side -----------------------------------------------------------
    def _request(self, what):
        if self._server_error is not None:
            raise self._group.explain(self._server_error, f"{what} (this worker's server)")
        return self._group.collective(what)

    def push(self, key, value, priority=0):
        """Send each key's gradient to its owner, which updates at once."""
        for k, vals in key_value_pairs(key, value, "push"):
            _refuse_csr(k, vals, "push")
        merged = self._pushed_sums(key, value)
        works, alive = [], []
        with self._request(f"push of {len(merged)} keys"):
            for k, m in merged:
                owner = self._owner[k]
                if owner == self.rank:
                    self._apply(k, m)
                    continue
                self._unflushed.add(owner)
                if kvs.is_sparse(m):
                    head = torch.tensor([_PUSH_ROWS, self._index[k]], dtype=torch.int64)
                    alive += rsp.push_rows(self, k, m, owner, head, _TAG_PAYLOAD, works)
                    continue
                head = torch.tensor([_PUSH, self._index[k]], dtype=torch.int64)
                works.append(self._dist.isend(head, dst=owner, group=self._p2p,
                                              tag=_TAG_REQUEST))
                works.append(self._dist.isend(m, dst=owner, group=self._p2p,
                                              tag=_TAG_PAYLOAD))
            for w in works:
                w.wait()

    def _sparse_sums(self, pairs):
        """Each key's sum over this worker's devices, row-wise where a value is
        row_sparse (the stored value may live on another rank: its shape and dtype
        stand in for it)."""
        out = []
        for k, vals in pairs:
            self._stored(k)
            if any(kvs.is_sparse(v) for v in vals):
                out.append((k, kvs.reduce_rows(k, vals, rsp.stand_in(*self._meta[k]))))
            else:
                out.append((k, self._reduce(k, vals).as_subclass(NDArray)))
        return out

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """mxnet's ``row_sparse_pull``: only the rows ``row_ids`` of each key move, from
        its owner (runtime/kvstore_async_sparse.py)."""
        kvs.row_sparse_pull(self, key, out, row_ids, key_value_pairs)

    def _pull_rows(self, k, out, row_ids):
        """One key's rows into ``out``: from this rank's copy, or asked of the owner."""
        if self._owner[k] == self.rank:
            with self._lock:
                kvs.pull_rows_local(k, self._store[k], out, row_ids)
            return
        kvs.check_row_pull(k, out, row_ids,
                           "row_sparse" if k in self._sparse_keys else "default",
                           self._meta[k][0])
        head = torch.tensor([_PULL_ROWS, self._index[k]], dtype=torch.int64)
        with self._request(f"row_sparse_pull of key {k!r}"):
            rsp.pull_rows(self, k, out, row_ids, self._owner[k], head, _TAG_PAYLOAD,
                          _TAG_REPLY)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy each key's value, as its owner has it now, into every array of ``out``."""
        if out is None:
            raise MXNetError("pull needs out=")
        pairs = key_value_pairs(key, out, "pull")
        for k, _ in pairs:
            self._stored(k)
        replies, sends = {}, []
        with self._request(f"pull of {len(pairs)} keys"):
            for k, _ in pairs:      # every request and receive is posted before any wait
                owner = self._owner[k]
                if owner == self.rank or k in replies:
                    continue
                shape, dtype = self._meta[k]
                head = torch.tensor([_PULL, self._index[k]], dtype=torch.int64)
                sends.append(self._dist.isend(head, dst=owner, group=self._p2p,
                                              tag=_TAG_REQUEST))
                buf = torch.empty(shape, dtype=dtype)
                replies[k] = (buf, self._dist.irecv(buf, src=owner, group=self._p2p,
                                                    tag=_TAG_REPLY))
            for w in sends:
                w.wait()
            for buf, w in replies.values():
                w.wait()
        with torch.no_grad():
            for k, outs in pairs:
                if k in replies:
                    value = replies[k][0].as_subclass(NDArray)
                else:
                    with self._lock:
                        value = rsp.dense_value(self._store[k]).as_subclass(NDArray)
                for o in outs:
                    if kvs.is_sparse(o):
                        kvs.pull_into(k, value, o, ignore_sparse, self._pull_warned)
                    else:
                        o.copy_(value)

    # -- optimizer states --------------------------------------------------------------
    def _owned_states(self):
        with self._lock:
            if self._updater is None:
                return b""
            return self._updater.get_states(False)

    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Gather every owner's optimizer states and write them as one complete file."""
        if self._updater is None:
            raise MXNetError("Cannot save states: no optimizer is set on this kvstore")
        gathered = opt.Updater(self._updater.optimizer)
        with self._lock:
            gathered.states.update(self._updater.states)
        with self._request("gathering optimizer states"):
            for r in range(self.num_workers):
                if r == self.rank:
                    continue
                head = torch.tensor([_STATES, 0], dtype=torch.int64)
                self._dist.send(head, dst=r, group=self._p2p, tag=_TAG_REQUEST)
                data = self._recv_bytes(r)
                if data:
                    part = opt.Updater(self._updater.optimizer)
                    part.set_states(data)
                    gathered.states.update({k: v for k, v in part.states.items()
                                            if self._owner.get(k) == r})
        atomic_write_bytes(fname, gathered.get_states(dump_optimizer))

    def _state_slots(self):
        """Every key, owned here or not (the file holds every owner's states): shape and
        dtype from the key's description, on the meta device."""
        with self._lock:
            meta = {k: (shape, torch.empty(shape, dtype=dtype, device="meta"))
                    for k, (shape, dtype) in self._meta.items()}
        return _slots(self._updater.optimizer, meta)

    # -- shutdown ------------------------------------------------------------------------
    def close(self):
        """Tell every peer this worker is done; wait until every server thread has ended
        (each peer said the same, or is gone). Runs at exit; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        failing = self._group.failed or self._server_error is not None or \
            getattr(sys, "last_value", None) is not None
        head = torch.tensor([_DONE, 0], dtype=torch.int64)
        for r in self._servers:
            try:
                self._dist.send(head, dst=r, group=self._p2p, tag=_TAG_REQUEST)
            except Exception as e:   # noqa: BLE001
                if not failing:
                    raise self._group.explain(e, "dist_async shutdown")
        if not failing:
            with self._group.collective("dist_async shutdown (waiting for the other "
                                        "workers)"):
                for t in self._servers.values():
                    while t.is_alive():
                        t.join(0.5)
            if self._server_error is not None and not isinstance(self._server_error,
                                                                 WorkerLostError):
                raise self._group.explain(self._server_error, "dist_async shutdown")
            return
        deadline = time.monotonic() + _FAILING_JOIN_S
        for t in self._servers.values():
            t.join(max(0.0, deadline - time.monotonic()))
        stuck = sorted(r for r, t in self._servers.items() if t.is_alive())
        if stuck:
            # a thread blocked in gloo for a live peer would return while the interpreter
            # finalizes (when that peer exits) and abort the process: end it now
            print(f"symtriton: rank {self.rank}: ending after the failure above without "
                  f"waiting for rank {', '.join(map(str, stuck))} (still running)",
                  file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(1)

    def barrier(self):
        """Wait until every worker reaches this point, with every push made before it
        applied by its owner."""
        self._flush_pushes()
        self._group.barrier("kvstore barrier")

    def _flush_pushes(self):
        """Wait until every owner sent a push since the last flush has applied it: the
        owner's thread serving this worker answers a flush after the pushes before it."""
        owners, self._unflushed = sorted(self._unflushed), set()
        if not owners:
            return
        replies = []
        with self._request(f"waiting for ranks {owners} to apply this worker's pushes"):
            for r in owners:
                ack = torch.zeros(1, dtype=torch.int64)
                replies.append(self._dist.irecv(ack, src=r, group=self._p2p, tag=_TAG_REPLY))
                head = torch.tensor([_FLUSH, 0], dtype=torch.int64)
                self._dist.send(head, dst=r, group=self._p2p, tag=_TAG_REQUEST)
            for w in replies:
                w.wait()

    _barrier = barrier
