"""This process's place in a multi-process job: the ``torch.distributed`` group
that the distributed kvstores reduce over, and how a lost worker is named.

A job is started by ``torchrun`` (or anything that sets ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` the way it does). The
first distributed kvstore joins the default process group, with gloo for CPU
tensors and NCCL for CUDA tensors, unless the script has already called
``torch.distributed.init_process_group`` itself.

Failure model
-------------
Every worker bumps a heartbeat counter in the rendezvous store twice a second
from a daemon thread, and marks itself finished when it closes. When a
collective fails (gloo reports a closed connection within milliseconds of a
peer's death), the survivors look at the counters: a rank whose counter stopped
is *lost*, a rank that marked itself finished *left early* (usually unequal
batch counts), and the error says which. A peer that hangs without dying
(stopped, deadlocked) trips the watchdog instead: when this worker has waited
in a collective for ``SYMTRITON_DIST_LOST_AFTER`` seconds (default 30) and a
peer's heartbeat has not moved for as long, the watchdog prints the same error
and ends the process, as NCCL's watchdog does; a slow peer (compiling a new
bucket, say) keeps its heartbeat and is waited for. ``SYMTRITON_DIST_TIMEOUT``
(default 1800 s) bounds any collective as a last resort.

Starting
--------
Before the process group is made, every worker marks itself joined in the
rendezvous store and waits for the others for ``SYMTRITON_DIST_START_TIMEOUT``
seconds (default 60): a rank that never started is then named
(:class:`WorkerLostError`), instead of every other rank waiting silently for
the collective timeout. A worker that cannot reach rank 0's store in that time
names rank 0.

Ending
------
At exit (``atexit``, also after an uncaught error) :meth:`WorkerGroup.close`
runs what was registered with :meth:`WorkerGroup.on_close` (waiting for
gradient reductions no push collected), stops the heartbeat thread and *joins* it, marks this worker finished (or
failed, after an uncaught exception), and destroys the process group it made.
A thread still inside a C++ call of the store when the interpreter finalizes is
ended by ``pthread_exit``, whose unwinding through torch's C++ frames aborts the
process ("terminate called without an active exception", SIGABRT): that is why
no thread of ours outlives :meth:`close`.

Messages
--------
A failure is one :class:`WorkerLostError` line naming the ranks; the gloo or
store error behind it is chained, and torch's C++ warnings with their stack
frames shown, only under ``SYMTRITON_LOG=dist``. ``import module_api`` sets
``TORCH_CPP_LOG_LEVEL=FATAL`` and ``TORCH_SHOW_CPP_STACKTRACES=0`` for a
distributed worker (``RANK`` and ``WORLD_SIZE`` set) unless they are set already
or ``SYMTRITON_LOG`` has ``dist``: torch reads them when it is imported.
"""
from __future__ import annotations

import atexit
import contextlib
import datetime
import logging
import os
import sys
import threading
import time

from compiler.errors import MXNetError

_LOG = logging.getLogger("symtriton.dist")
_REQUIRED_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_HEARTBEAT_S = 0.5
_STORE_OP_TIMEOUT_S = 10.0   # one heartbeat store call at most; close() joins within it
_GROUP = None
_GROUP_LOCK = threading.Lock()


class WorkerLostError(MXNetError):
    """A peer of this distributed job died, hung, never started or left before the others."""


def cpp_detail() -> bool:
    """``SYMTRITON_LOG=dist``: chain the underlying gloo / store errors (and let torch's
    C++ warnings through, see :func:`module_api._worker_env`)."""
    return "dist" in os.environ.get("SYMTRITON_LOG", "")


def with_cause(error, cause):
    """``error`` to raise for ``cause``: chained under ``SYMTRITON_LOG=dist`` only, so a
    failure prints one line of ours, not gloo's message and C++ frames after it."""
    error.__cause__ = cause if cpp_detail() else None
    error.__suppress_context__ = True
    return error


def _first_line(error) -> str:
    return (str(error).splitlines() or [repr(error)])[0].strip("'\" ")


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise MXNetError(f"{name}={os.environ[name]!r} is not a number of seconds") from None


def _missing_env(kv_type):
    missing = [k for k in _REQUIRED_ENV if k not in os.environ]
    return MXNetError(
        f"kvstore {kv_type!r} trains across processes, but this process was not started as a "
        f"worker of a distributed job ({', '.join(missing)} not set). Start the script with "
        f"`torchrun --nproc_per_node N script.py ...` (add --nnodes/--rdzv-endpoint to span "
        f"machines), or use kvstore='local' or 'device' in one process.")


class WorkerGroup:
    """Membership of the job: rank, size, heartbeats and error translation."""

    def __init__(self, kv_type):
        import torch
        import torch.distributed as dist
        self._dist = dist
        self.timeout_s = _env_float("SYMTRITON_DIST_TIMEOUT", 1800)
        self.lost_after_s = _env_float("SYMTRITON_DIST_LOST_AFTER", 30)
        self.start_timeout_s = _env_float("SYMTRITON_DIST_START_TIMEOUT", 60)
        self.store_addr = (os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT"))
        restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self._prefix = f"symtriton/{restart}/"
        self._owns_group = not dist.is_initialized()
        self._rendezvous_store = None
        if self._owns_group:
            if any(k not in os.environ for k in _REQUIRED_ENV):
                raise _missing_env(kv_type)
            self._rendezvous_store = self._rendezvous()
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
            try:
                dist.init_process_group(backend, store=self._rendezvous_store,
                                        rank=int(os.environ["RANK"]),
                                        world_size=int(os.environ["WORLD_SIZE"]),
                                        timeout=datetime.timedelta(seconds=self.timeout_s))
            except (RuntimeError, dist.DistError) as e:
                raise with_cause(WorkerLostError(
                    f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']}: every rank "
                    f"joined, but connecting them failed ({_first_line(e)})"), e) from None
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()
        self._stop = threading.Event()
        self._closed = False
        self._waiting_since = None    # set while this worker waits in a collective
        self._failed = False
        self._seen = {}               # rank -> (counter, time it last moved)
        self._heartbeat_store = self._new_store()
        self._probe_store = self._new_store()
        self._thread = None
        self._on_close = []           # on_close: run first in close()
        if self._heartbeat_store is not None:
            self._heartbeat_store.add(self._key("hb", self.rank), 1)
            self._thread = threading.Thread(target=self._heartbeat, name="symtriton-heartbeat",
                                            daemon=True)
            self._thread.start()
        atexit.register(self.close)

    # -- starting --------------------------------------------------------------------
    def _rendezvous(self):
        """The job's store, once every rank has joined it (within ``start_timeout_s``).

        Rank 0 hosts the store at ``MASTER_ADDR:MASTER_PORT`` (unless torchrun's agent
        does); every rank marks itself joined and waits for the others. Raises
        :class:`WorkerLostError` naming the ranks that never joined, or rank 0 when
        its store cannot be reached.
        """
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        addr, port = self.store_addr
        hosted_by_agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        master = rank == 0 and not hosted_by_agent
        deadline = time.monotonic() + self.start_timeout_s
        store = None
        while store is None:
            # a client's connect can take twice its timeout (torch retries once): short
            # attempts keep the whole wait within the deadline
            left = deadline - time.monotonic()
            wait = datetime.timedelta(seconds=self.start_timeout_s if master else
                                      max(1.0, min(5.0, left / 2)))
            try:
                store = dist.TCPStore(addr, int(port), world if master else None,
                                      is_master=master, timeout=wait, wait_for_workers=False)
            except (RuntimeError, ValueError, dist.DistError) as e:
                if master:
                    raise with_cause(MXNetError(
                        f"rank 0 cannot host the job's rendezvous store at {addr}:{port} "
                        f"({_first_line(e)}); choose a free MASTER_PORT"), e) from None
                if time.monotonic() + 1.0 < deadline:
                    continue
                raise with_cause(WorkerLostError(
                    f"rank {rank} of {world}: rank 0 never started, or its rendezvous store "
                    f"at {addr}:{port} cannot be reached: no connection within "
                    f"{self.start_timeout_s:.0f} s (SYMTRITON_DIST_START_TIMEOUT). Start "
                    f"every rank of the job, with the same MASTER_ADDR and MASTER_PORT"),
                    e) from None
        if master:     # the store's host gives up last, so every rank sees the others
            deadline += 2.0
        missing = [r for r in range(world) if r != rank]
        try:
            store.add(self._key("joined", rank), 1)
            while True:
                missing = [r for r in range(world)
                           if not store.check([self._key("joined", r)])]
                if not missing or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        except (RuntimeError, dist.DistError):     # rank 0 gave up (or died) first
            pass
        if missing:
            many = len(missing) > 1
            raise WorkerLostError(
                f"rank {rank} of {world}: rank{'s' if many else ''} "
                f"{', '.join(map(str, missing))} never joined the job within "
                f"{self.start_timeout_s:.0f} s (SYMTRITON_DIST_START_TIMEOUT): check "
                f"that {'they were' if many else 'it was'} started, with "
                f"WORLD_SIZE={world} and the store at {addr}:{port}")
        store.set_timeout(datetime.timedelta(seconds=self.timeout_s))
        return store

    # -- the rendezvous store --------------------------------------------------------
    def _new_store(self):
        """A client of the job's rendezvous store, or None when it cannot be reached
        (a group the user built on another store: errors then cannot name ranks)."""
        addr, port = self.store_addr
        if not addr or not port:
            return None
        try:
            return self._dist.TCPStore(addr, int(port), is_master=False,
                                       timeout=datetime.timedelta(seconds=_STORE_OP_TIMEOUT_S))
        except Exception as e:   # noqa: BLE001 - liveness is best effort
            _LOG.warning("cannot reach the rendezvous store at %s:%s (%s); errors will not "
                         "name lost workers", addr, port, e)
            return None

    def _key(self, what, rank):
        return f"{self._prefix}{what}/{rank}"

    def _counters(self, store):
        """rank -> (heartbeat count, finished mark, failed mark)."""
        return {r: (store.add(self._key("hb", r), 0), store.add(self._key("done", r), 0),
                    store.add(self._key("failed", r), 0))
                for r in range(self.size)}

    def _heartbeat(self):
        store = self._heartbeat_store
        while not self._stop.wait(_HEARTBEAT_S):
            try:
                store.add(self._key("hb", self.rank), 1)
                since = self._waiting_since
                # peers are read only while this worker has been waiting a while, so
                # a large job does not poll the store from every worker all the time
                if since is None or time.monotonic() - since[0] < 2.0:
                    self._seen.clear()
                    continue
                now = time.monotonic()
                for r, (count, done, failed) in self._counters(store).items():
                    last = self._seen.get(r)
                    if last is None or last[0] != count or done or failed:
                        self._seen[r] = (count, now)
                self._watchdog(now, since)
            except Exception:   # noqa: BLE001 - the store's host is gone; errors say so
                if self._stop.is_set():
                    return
                time.sleep(_HEARTBEAT_S)

    def _watchdog(self, now, since):
        """End this worker when it has waited ``lost_after_s`` in a collective for a
        peer whose heartbeat has not moved for as long."""
        if now - since[0] < self.lost_after_s:
            return
        stale = sorted(r for r, (_, t) in self._seen.items()
                       if r != self.rank and now - t >= self.lost_after_s)
        if stale:
            msg = (f"rank {self.rank}: lost rank {', '.join(map(str, stale))}: no heartbeat "
                   f"for {self.lost_after_s:.0f} s while this worker waited in {since[1]}; "
                   f"ending this worker (see that rank's log for why it stopped)")
            print(f"symtriton: {msg}", file=sys.stderr, flush=True)
            _LOG.error(msg)
            os._exit(75)

    # -- errors ----------------------------------------------------------------------
    def explain(self, error, what):
        """A :class:`WorkerLostError` naming the ranks behind a failed collective."""
        self._failed = True
        store = self._probe_store
        if store is None:
            who = "a peer (ranks cannot be named: the rendezvous store is unknown)"
        else:
            try:
                before = self._counters(store)
                time.sleep(4 * _HEARTBEAT_S)
                after = self._counters(store)
            except Exception:   # noqa: BLE001
                addr, port = self.store_addr
                who = (f"rank 0, or the host of the rendezvous store at {addr}:{port} "
                       f"(it lives in rank 0's process unless torchrun hosts it)")
            else:
                failed = [r for r in range(self.size) if after[r][2] and r != self.rank]
                left = [r for r in range(self.size) if after[r][1] and r != self.rank
                        and r not in failed]
                lost = [r for r in range(self.size) if r != self.rank and r not in left
                        and r not in failed and after[r][0] == before[r][0]]
                parts = []
                if failed:
                    parts.append(f"rank {', '.join(map(str, failed))} stopped with an error "
                                 f"(see its log for the first failure)")
                if lost:
                    parts.append(f"lost rank {', '.join(map(str, lost))} (its heartbeat "
                                 f"stopped: the process died or hangs)")
                if left:
                    parts.append(f"rank {', '.join(map(str, left))} finished before this "
                                 f"worker (every worker must run the same number of steps: "
                                 f"shard data with num_parts=kv.num_workers, "
                                 f"part_index=kv.rank)")
                who = "; ".join(parts) or "a peer that is still alive (see its log)"
        return with_cause(WorkerLostError(
            f"distributed training failed on rank {self.rank} of {self.size} during {what}: "
            f"{who}. Cause: {_first_line(error)}"), error)

    @contextlib.contextmanager
    def collective(self, what):
        """Run a collective; a failure raises :class:`WorkerLostError` naming the rank."""
        self._waiting_since = (time.monotonic(), what)
        try:
            yield
        except WorkerLostError:
            raise
        except (RuntimeError, self._dist.DistError) as e:
            raise self.explain(e, what)     # noqa: B904 - with_cause decides the chain
        finally:
            self._waiting_since = None

    def barrier(self, what="barrier"):
        with self.collective(what):
            self._dist.barrier()

    def close(self):
        """End this worker's part: stop and join the heartbeat thread, mark this worker
        finished (or failed, when the interpreter exits on an uncaught exception), so
        peers tell 'left early' from 'lost', and destroy the process group this module
        made. Runs at exit; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        for fn in self._on_close:
            try:
                fn()
            except Exception as e:   # noqa: BLE001 - exiting anyway; say it under dist logs
                _LOG.debug("rank %s: at close: %s", self.rank, e)
        self._on_close = []
        self._stop.set()
        if self._thread is not None:
            # bounded: one store call times out after _STORE_OP_TIMEOUT_S
            self._thread.join(_STORE_OP_TIMEOUT_S + 5)
            if self._thread.is_alive():
                _LOG.error("rank %s: the heartbeat thread did not stop", self.rank)
        if self._probe_store is not None and not self._failed:
            failing = getattr(sys, "last_value", None) is not None
            try:
                self._probe_store.add(self._key("failed" if failing else "done", self.rank), 1)
            except Exception:   # noqa: BLE001 - the store's host is gone: exiting anyway
                pass
        if self._owns_group and self._dist.is_initialized():
            try:
                self._dist.destroy_process_group()
            except Exception as e:   # noqa: BLE001 - exiting anyway; say it under dist logs
                _LOG.debug("rank %s: destroy_process_group: %s", self.rank, e)
        self._heartbeat_store = self._probe_store = self._rendezvous_store = None

    def on_close(self, fn):
        """Call ``fn()`` when this worker closes, before the process group goes
        (a kvstore waits there for reductions nobody collected)."""
        self._on_close.append(fn)

    @property
    def failed(self):
        return self._failed


def join(kv_type):
    """The process-wide :class:`WorkerGroup`, joined on first use."""
    global _GROUP
    with _GROUP_LOCK:
        if _GROUP is None:
            _GROUP = WorkerGroup(kv_type)
        return _GROUP
