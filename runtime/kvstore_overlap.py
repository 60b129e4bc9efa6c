"""Gradient buckets all-reduced while the backward still runs (``dist_sync``).

PyTorch's DDP idea, on the Module API's launch lists. A training executor group
(runtime/executor_group.py) marks the gradient arrays it owns as *eligible*
(one device, ``grad_req='write'``, dense). The first push of a set of keys whose
values are all eligible gradients (no compression, no row_sparse value, each
value of the stored dtype and on the stored value's device) lets every worker
agree, in one small all-gather, on an :class:`OverlapPlan`:

* the keys in the order the backward finishes their gradients (the position of
  the last backward launch that touches each gradient), cut into buckets of one
  dtype and device: the first at most 1 MiB, the others at most
  ``SYMTRITON_DIST_BUCKET_MB`` MiB (25), as DDP cuts its buckets;
* for each bucket a flat buffer, whose views are the sums the push hands on.

The group then marks the backward launch after which a bucket's gradients are
final (:meth:`runtime.executor.Executor.set_backward_marks`); there the bucket is
copied into its buffer and an asynchronous all-reduce of it starts
(``torch.distributed.all_reduce(async_op=True)``), while the remaining backward
launches run. The push waits on those handles instead of reducing: the optimizer
(or the store, without one) sees the sum over workers, as mxnet's ``dist_sync``
gives it, and the gradient arrays themselves keep this worker's values.

Every worker issues the buckets' all-reduces in the same order: a bucket whose
mark did not run since the last push (another executor of a BucketingModule
shares the arrays; a reshaped executor; a backward run as row-split halves;
``update`` without a new backward) is reduced by the push, and firing a bucket first fires the earlier ones. A
gradient written again after its bucket was sent (a second ``backward``, the
user's own edit of a gradient array: its version counter moved) is sent again
by the push, so the sum is always of the values the push was given.

Where the plan does not apply the push takes the plain path of
:mod:`runtime.kvstore_dist` (reduce at push time): several devices per worker,
``grad_req='add'``, gradient compression, row_sparse values, a kvstore used
without a Module, workers that disagree on the plan, or
``SYMTRITON_DIST_OVERLAP=0`` (set it on every worker).
"""
from __future__ import annotations

import datetime
import time
import weakref
import zlib

import torch

from .ndarray import NDArray, plain, torch_dtype

__all__ = ["OverlapPlan", "mark_eligible", "eligible_owner", "FIRST_BUCKET_BYTES",
           "STATS"]

FIRST_BUCKET_BYTES = 1 << 20       # DDP's first bucket: something starts early
STATS = {"wait_s": 0.0, "fired_in_backward": 0, "fired_at_push": 0}


def mark_eligible(grad, owner):
    """Tag ``grad`` (an NDArray the executor group ``owner`` writes) as eligible."""
    grad._overlap_owner = weakref.ref(owner)


def eligible_owner(value):
    """The executor group that owns ``value`` when it is an eligible gradient, else None."""
    ref = getattr(value, "_overlap_owner", None)
    return ref() if ref is not None else None


class _Bucket:
    """Consecutive keys reduced in one flat buffer."""

    def __init__(self, positions, grads):
        self.positions = positions               # indices into the plan's keys
        self.grads = grads                       # the gradient NDArrays (marks find them)
        self.plain = [plain(g) for g in grads]  # same storage and version counter
        self.pieces = [p.reshape(-1) for p in self.plain]
        first = self.plain[0]
        self.flat = torch.empty(sum(p.numel() for p in self.plain), dtype=first.dtype,
                                device=first.device)
        self.views, offset = [], 0
        for p in self.plain:
            self.views.append(self.flat[offset:offset + p.numel()].view(p.shape)
                              .as_subclass(NDArray))
            offset += p.numel()
        self.handle = None
        self.versions = None

    def nbytes(self):
        return self.flat.numel() * self.flat.element_size()

    def current(self):
        """Whether the buffer holds (or is reducing) the gradients as they are now."""
        return self.versions is not None and \
            self.versions == tuple(p._version for p in self.plain)


class OverlapPlan:
    """Buckets of one push's keys, each all-reduced as soon as its gradients are final.

    Parameters
    ----------
    group : runtime.dist_group.WorkerGroup
    keys : list
        The push's keys, in push order.
    grads : list of NDArray
        One gradient array per key.
    finish : list of int
        Per key, the backward launch after which its gradient is final (-1: none
        writes it); buckets follow this order.
    limit_bytes : int
        The cap of every bucket after the first.
    """

    def __init__(self, group, keys, grads, finish, limit_bytes):
        self._group = group
        self.keys = list(keys)
        self._grads = list(grads)
        order = sorted(range(len(keys)), key=lambda i: (finish[i], i))
        self.buckets = [_Bucket(pos, [grads[i] for i in pos])
                        for pos in _cut(order, grads, limit_bytes)]
        self._merged = [None] * len(keys)
        for b in self.buckets:
            for i, view in zip(b.positions, b.views):
                self._merged[i] = (self.keys[i], view)
        group.on_close(self.drain)

    def layout(self):
        """A number every worker must agree on: the keys of each bucket, in order."""
        text = "|".join(",".join(str(self.keys[i]) for i in b.positions)
                        for b in self.buckets)
        return zlib.crc32(text.encode())

    def matches(self, pairs):
        """Whether a push's ``[(key, [values])]`` is this plan's keys and arrays."""
        if len(pairs) != len(self.keys):
            return False
        for (k, vals), key, g in zip(pairs, self.keys, self._grads):
            if k != key or len(vals) != 1 or vals[0] is not g:
                return False
        return True

    # -- sending -----------------------------------------------------------------------
    def ready(self, b):
        """A backward mark: bucket ``b``'s gradients are final; send it (and any
        earlier bucket not sent yet, so every worker sends in the same order)."""
        for bucket in self.buckets[:b + 1]:
            if bucket.versions is None:
                self._send(bucket)
                STATS["fired_in_backward"] += 1

    def _send(self, bucket):
        import torch.distributed as dist
        with torch.no_grad():
            if len(bucket.pieces) == 1:
                bucket.flat.copy_(bucket.pieces[0])
            else:
                torch.cat(bucket.pieces, out=bucket.flat)
        bucket.versions = tuple(p._version for p in bucket.plain)
        with self._group.collective(f"all-reduce of a bucket of {len(bucket.pieces)} "
                                    f"gradients ({bucket.nbytes()} bytes)"):
            bucket.handle = dist.all_reduce(bucket.flat, async_op=True)

    def _wait(self, bucket):
        if bucket.handle is None:
            return
        t0 = time.perf_counter()
        try:
            with self._group.collective(f"all-reduce of a bucket of {len(bucket.pieces)} "
                                        f"gradients ({bucket.nbytes()} bytes)"):
                bucket.handle.wait()
        finally:
            bucket.handle = None
            STATS["wait_s"] += time.perf_counter() - t0

    # -- the push ----------------------------------------------------------------------
    def collect(self):
        """The push's ``[(key, sum over workers)]``, in push order: waits on the
        buckets sent during the backward, sends the others (and those whose
        gradients changed since) now."""
        for bucket in self.buckets:
            if bucket.versions is not None and not bucket.current():
                self._wait(bucket)                 # stale: the gradients moved on
                bucket.versions = None
            if bucket.versions is None:
                self._send(bucket)
                STATS["fired_at_push"] += 1
        try:
            for bucket in self.buckets:
                self._wait(bucket)
        finally:
            for bucket in self.buckets:
                bucket.versions = None
        return list(self._merged)

    def drain(self):
        """Wait (briefly) for reductions no push collected, before the group ends."""
        for bucket in self.buckets:
            handle, bucket.handle = bucket.handle, None
            if handle is not None:
                try:
                    handle.wait(datetime.timedelta(seconds=5))
                except Exception:   # noqa: BLE001 - exiting anyway; a peer is gone
                    pass

    # -- the executor's side -----------------------------------------------------------
    def marks_for(self, grad_dict, last_touch):
        """``{backward launch position: mark}`` for an executor whose ``grad_dict``
        holds this plan's arrays; ``last_touch`` maps a gradient name to the last
        backward launch that touches it. A bucket with an array this executor does
        not hold gets no mark (the push sends it)."""
        names = {id(g): n for n, g in grad_dict.items()}
        at = {}
        for b, bucket in enumerate(self.buckets):
            spots = [last_touch.get(names.get(id(g)), None) for g in bucket.grads]
            if not spots or any(s is None for s in spots):
                continue
            pos = max(spots)
            at[pos] = max(at.get(pos, -1), b)
        return {pos: _mark(self, b) for pos, b in at.items()}


def _mark(plan, b):
    def mark():
        plan.ready(b)
    return mark


def _cut(order, grads, limit_bytes):
    """Positions of ``order`` cut into buckets: one dtype and device each, the first
    at most FIRST_BUCKET_BYTES (or ``limit_bytes`` when smaller), the others at most ``limit_bytes`` (a larger single
    gradient gets a bucket of its own)."""
    buckets, cur, size, kind = [], [], 0, None
    for i in order:
        g = grads[i]
        nbytes = g.numel() * g.element_size()
        this = (torch_dtype(g), g.device)
        cap = min(FIRST_BUCKET_BYTES, limit_bytes) if not buckets else limit_bytes
        if cur and (this != kind or size + nbytes > cap):
            buckets.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += nbytes
        kind = this
    if cur:
        buckets.append(cur)
    return buckets
