"""``dist_sync`` and ``dist_device_sync``: data-parallel training across processes.

Every worker keeps a full replica of the store (and, with ``set_optimizer``, of
the optimizer state). A push sums each key over this worker's devices, then
all-reduces the sums across workers in flat buckets of parameters (at most
``SYMTRITON_DIST_BUCKET_MB`` MiB each, default 25, the size PyTorch's DDP uses),
and every worker applies the same update to the same summed gradient, so the
replicas stay bit-identical without a parameter server. ``init`` takes rank 0's
values, as mxnet's servers do, so workers start from the same parameters even
when their initialisers drew different random numbers.

``dist_sync`` keeps the replica on the CPU and reduces with gloo;
``dist_device_sync`` keeps it on the device of the first value (NCCL for CUDA
tensors, gloo on the CPU).

Every worker holds the same full optimizer state, so the file any rank's
``save_optimizer_states`` writes is complete; write it from rank 0 only, so that
workers do not race on one file.

Each push checks that every worker pushes the same keys: a summary of what it
pushes (key count, total elements, a hash of the key names) travels in the same
all-reduce as the gradients, as small integers split into 11-bit pieces (their sums
over up to 8,192 workers are exact in float32), and each worker compares the sum
with its own summary times the worker count, which holds on every worker only when
all summaries are equal. A worker whose summary differs gets an error naming the
difference instead of a reduction of mismatched buffers (its peers then fail at the
next collective, naming it as lost). Float16 and bfloat16 pushes (and jobs of more
than 8,192 workers) exchange the summary in an all-gather of its own first.

A Module's gradients are reduced while its backward still runs: the first push of
a set of keys lets the workers agree on buckets in the order the backward finishes
the gradients, each all-reduced asynchronously from the backward launch that
finishes it, and the push waits on those reductions (:mod:`runtime.kvstore_overlap`,
which lists where the plain path above is kept instead; ``SYMTRITON_DIST_OVERLAP=0``
on every worker keeps it always).

row_sparse values (:mod:`runtime.kvstore_sparse`): ``init`` broadcasts rank 0's rows;
a push all-gathers each worker's row count, then its rows and row ids (padded to the
largest count), and every worker sums them in rank order; ``row_sparse_pull`` reads
the local replica, so nothing crosses the network for it.
"""
from __future__ import annotations

import os
import zlib

import torch

from compiler.errors import MXNetError
from . import kvstore_sparse as kvs
from .dist_group import join
from .kvstore_local import KVStore, key_value_pairs
from .kvstore_overlap import OverlapPlan, eligible_owner
from .ndarray import torch_dtype

__all__ = ["DistSyncKVStore", "bucket_tensors"]


def _sized(value):
    """What the key checks count of a value: a row_sparse one by its full shape."""
    return torch.empty(value.shape, device="meta") if kvs.is_sparse(value) else value


def _bucket_bytes():
    try:
        mib = float(os.environ.get("SYMTRITON_DIST_BUCKET_MB", 25))
    except ValueError:
        raise MXNetError("SYMTRITON_DIST_BUCKET_MB must be a number of MiB") from None
    return max(1, int(mib * 2 ** 20))


def bucket_tensors(tensors, limit_bytes):
    """Group tensors into buckets of one dtype and device, each at most ``limit_bytes``
    (a single larger tensor gets a bucket of its own). Order is kept within a group."""
    open_buckets, buckets = {}, []
    for t in tensors:
        kind = (torch_dtype(t), t.device)
        size = t.numel() * t.element_size()
        cur = open_buckets.get(kind)
        if cur is None or (cur[1] + size > limit_bytes and cur[0]):
            cur = ([], 0)
            buckets.append(cur[0])
        cur[0].append(t)
        open_buckets[kind] = (cur[0], cur[1] + size)
    return buckets


def _flat_collective(tensors, op, limit_bytes):
    """Apply ``op(flat)`` to each bucket of ``tensors`` flattened, and copy back."""
    for bucket in bucket_tensors(tensors, limit_bytes):
        if len(bucket) == 1 and bucket[0].is_contiguous():
            op(bucket[0].view(-1))      # reduced in place
            continue
        flat = torch.cat([t.reshape(-1) for t in bucket])
        op(flat)
        offset = 0
        with torch.no_grad():
            for t in bucket:
                t.copy_(flat[offset:offset + t.numel()].view(t.shape))
                offset += t.numel()


_PIECE_BITS = 11                  # a piece < 2048; 8,192 workers' sum < 2**24 (exact)


def _summary_carrier(values, workers):
    """The tensor kind a summary rides with in the gradient all-reduce (dtype and
    device of the first value), or None where its sums would not be exact."""
    dtype = values[0].dtype
    if dtype not in (torch.float32, torch.float64) or workers > 8192 or \
            any(v.dtype != dtype or v.device != values[0].device for v in values):
        return None
    return dtype, values[0].device


def _summary_pieces(keys, values, carrier):
    """Key count, total elements and a hash of the key names, as 11-bit pieces."""
    names = "\0".join(map(str, keys)).encode()
    numbers = (len(keys), sum(v.numel() for v in values), zlib.crc32(names))
    pieces = []
    for x in numbers:
        for _ in range(6):         # 66 bits: every count a process can hold
            pieces.append(x & ((1 << _PIECE_BITS) - 1))
            x >>= _PIECE_BITS
    return torch.tensor(pieces, dtype=carrier[0], device=carrier[1])


class DistSyncKVStore(KVStore):
    """Synchronous data parallelism across workers (see the module docstring)."""

    def __init__(self, kv_type="dist_sync"):
        super().__init__(kv_type)
        self._group = join(kv_type)
        self._limit = _bucket_bytes()
        self._plans = {}          # tuple of pushed keys -> OverlapPlan, or None: plain path
        self._collected = None    # the sums a plan gave this push (_combine has no work)

    @property
    def rank(self):
        return self._group.rank

    @property
    def num_workers(self):
        return self._group.size

    def _home(self, value):
        return value.device if self._type == "dist_device_sync" else torch.device("cpu")

    def _agree_initial(self, pairs):
        import torch.distributed as dist
        if self.num_workers == 1 or not pairs:
            return
        self._check_same_keys([k for k, _ in pairs], [_sized(v) for _, v in pairs], "init")
        kvs.dist_broadcast(self._group, pairs)
        dense = [v for _, v in pairs if not kvs.is_sparse(v)]
        with self._group.collective(f"broadcast of {len(dense)} initial values from rank 0"):
            _flat_collective(dense, lambda f: dist.broadcast(f, src=0), self._limit)

    # -- gradients reduced while the backward runs (runtime/kvstore_overlap.py) -----
    def _pushed_sums(self, key, value):
        if self.num_workers > 1:
            pairs = key_value_pairs(key, value, "push")
            keys = tuple(k for k, _ in pairs)
            if keys not in self._plans:
                self._plans[keys] = self._agree_plan(pairs)
            plan = self._plans[keys]
            if plan is not None and plan.matches(pairs):
                self._collected = plan.collect()
                return self._collected
        return super()._pushed_sums(key, value)

    def _plan_here(self, pairs):
        """The plan this worker would use for a push of ``pairs``, or None."""
        if self._compression is not None or not pairs or \
                os.environ.get("SYMTRITON_DIST_OVERLAP", "1") == "0":
            return None
        owner = eligible_owner(pairs[0][1][0])
        if owner is None:
            return None
        for k, vals in pairs:
            stored = self._store.get(k)
            if stored is None or len(vals) != 1 or eligible_owner(vals[0]) is not owner or \
                    kvs.is_sparse(stored) or kvs.is_sparse(vals[0]) or \
                    torch_dtype(vals[0]) != torch_dtype(stored) or \
                    vals[0].device != stored.device or \
                    tuple(vals[0].shape) != tuple(stored.shape):
                return None
        grads = [vals[0] for _, vals in pairs]
        finish = owner.gradient_finish(grads)
        if finish is None:
            return None
        return OverlapPlan(self._group, [k for k, _ in pairs], grads, finish, self._limit)

    def _agree_plan(self, pairs):
        """Decide, with every worker, whether pushes of these keys use a plan: one
        all-gather of (eligible, bucket layout, key summary) per set of keys."""
        import torch.distributed as dist
        plan = self._plan_here(pairs)
        keys = [k for k, _ in pairs]
        names = "\0".join(map(str, keys)).encode()
        numel = sum(_sized(v[0]).numel() for _, v in pairs)
        mine = torch.tensor([plan is not None, plan.layout() if plan else 0, len(keys),
                             numel, zlib.crc32(names)], dtype=torch.int64)
        everyone = [torch.empty_like(mine) for _ in range(self.num_workers)]
        with self._group.collective(f"agreement on the buckets of {len(keys)} keys"):
            dist.all_gather(everyone, mine)
        if plan is None or any(not torch.equal(e, mine) for e in everyone):
            return None     # the plain path (whose key check names a mismatch)
        for g in plan.buckets:
            for grad in g.grads:
                grad._overlap_plan = plan
        return plan

    def _combine(self, merged):
        import torch.distributed as dist
        if merged is self._collected:      # reduced by a plan already
            self._collected = None
            return
        if self.num_workers == 1 or not merged:
            return
        if any(kvs.is_sparse(m) for _, m in merged):
            self._check_same_keys([k for k, _ in merged], [_sized(m) for _, m in merged],
                                  "push")
            kvs.dist_combine(self._group, merged)
            dense = [(k, m) for k, m in merged if not kvs.is_sparse(m)]
            if dense:
                self._combine(dense)
            return
        keys, values = [k for k, _ in merged], [m for _, m in merged]
        carrier = _summary_carrier(values, self.num_workers)
        if carrier is None:
            self._check_same_keys(keys, values, "push")
            summary = None
        else:
            summary = _summary_pieces(keys, values, carrier)
            values = values + [summary]
        with self._group.collective(f"all-reduce of {len(merged)} pushed values"):
            _flat_collective(values, dist.all_reduce, self._limit)
        if summary is not None:
            mine = _summary_pieces(keys, values[:-1], carrier)
            if not torch.equal(summary, mine * self.num_workers):
                raise MXNetError(
                    f"kvstore {self._type!r}: rank {self.rank} pushed {len(keys)} keys of "
                    f"{sum(v.numel() for v in values[:-1])} values in this step, and the "
                    f"other workers pushed different keys (or the same counts under other "
                    f"names). Every worker must bind the same parameters and step together.")

    def _check_same_keys(self, keys, values, what):
        """Fail clearly when workers disagree on what they push in this step."""
        import torch.distributed as dist
        names = "\0".join(map(str, keys)).encode()
        mine = torch.tensor([len(keys), sum(v.numel() for v in values), zlib.crc32(names)],
                            dtype=torch.int64)
        everyone = [torch.empty_like(mine) for _ in range(self.num_workers)]
        with self._group.collective(f"{what} of {len(keys)} keys (summary exchange)"):
            dist.all_gather(everyone, mine)
        if any(not torch.equal(e, mine) for e in everyone):
            desc = "; ".join(f"rank {r}: {int(e[0])} keys, {int(e[1])} values"
                             for r, e in enumerate(everyone))
            raise MXNetError(
                f"kvstore {self._type!r}: workers {what} different keys in the same step "
                f"({desc}, or the same counts under different names). Every worker must "
                f"bind the same parameters and step together.")

    def barrier(self):
        """Wait until every worker reaches this point."""
        self._group.barrier("kvstore barrier")

    _barrier = barrier
