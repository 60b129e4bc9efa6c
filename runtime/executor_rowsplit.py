"""Row-split runs: a training executor's phases as two half-batch Programs on two threads.

Where ``compiler/row_split.py`` proves a bound graph separable along the batch
axis, the thread policy (``runtime/threads.py``) may run a phase of the executor's
training Program as two half executors, one on a worker thread and one on the
caller's, each with ONE intra-op thread (ATen releases the GIL), joined once per
phase. Neither thread waits for the other inside the phase, so on a busy machine
the two get the scheduler's share of two threads without the barriers of an
intra-op team, and on an idle one they skip those barriers.

Each half takes its internal buffers from a pool of its own, kept on the
executor's pool, so the halves of executors that share memory share theirs too.
The halves share the executor's memory where that is exact: their batch inputs and
outputs are views of the first and second half of the executor's arrays (dim 0),
their input gradients likewise (each half honours the argument's ``grad_req`` on
its own rows); parameters are the same arrays. A parameter gradient is the sum of
the halves': the first half writes (``write``) or adds (``add``) its own to the
executor's array, the second writes a private one, added once both are done;
``null`` stays untouched. Nothing is built until the policy asks for a
row-split run (:meth:`RowSplitter.prepare`), so binding costs nothing more.

A backward phase runs the way its forward ran (the halves hold the forward's
values): each phase's bound launch list carries a :class:`PhaseSplit` as
``row_split``, whose ``forced`` says so.

A phase's first split run goes through the half executors' ``forward`` and
``backward`` on two Python threads, which binds their launch lists. The next run,
where both halves' lists are generated cpu kernels that TorchScript takes
(``compiler/cpu/script.py``), builds their script and runs the phase both ways (the
script on a replica of the arrays), keeping the script only where every array comes
out the same; a thread-count trial's runs build none. From
then on the phase is TorchScript: the first half forked to torch's inter-op threads,
the second on the caller's, then the wait; no interpreter lock is held while the
halves run, so on a busy machine a descheduled thread no longer holds the other at
each ATen call (``benchmarks/README.md``, "The halves without the interpreter
lock"). A list that does not script (an extern operator without a TorchScript form) or
whose script differs keeps the threads, its reason in ``script_reasons``.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from compiler.cpu.script import NotScriptable, checked_parts
from compiler.errors import MXNetError

from . import launcher

_WORKER = []            # one worker thread for the process, started on first use
_WORKER_LOCK = threading.Lock()


def _worker():
    if not _WORKER:
        with _WORKER_LOCK:
            if not _WORKER:
                _WORKER.append(ThreadPoolExecutor(1, thread_name_prefix="symtriton-rows"))
    return _WORKER[0]


def _on_one_thread(fn, *args):
    """``fn(*args)`` in the worker with one intra-op thread. MKL keeps its count per
    thread (``mkl_set_num_threads_local``): unset there, a worker's GEMM would open a
    team of its own beside the caller's (LeNet's FC layers 3-12x slower)."""
    torch.set_num_threads(1)
    return fn(*args)


class _PoolOwner:
    """What a half executor takes its buffers from (as ``shared_exec``): the k-th half
    pool of the executor's own pool, so the halves of executors that share memory
    (buckets, reshapes: never run at the same time) share theirs too."""

    _loss_scaling, _loss_scale = False, None

    def __init__(self, exe, k):
        pool_class = type(exe._pool)     # runtime.executor's, not imported: no circle
        pools = getattr(exe._pool, "row_halves", None)
        if pools is None:
            pools = exe._pool.row_halves = (pool_class(), pool_class())
        self._pool = pools[k]


class PhaseSplit:
    """What ``threads.run`` sees on a bound launch list that may run split.

    ``forced``: None (the policy chooses), True (must: the forward ran split) or
    False (must not: it ran whole). ``untimed``: the last run also built and checked
    the phase's script (the phase run twice, its arrays copied), so the policy takes
    no sample from it.
    """

    def __init__(self, splitter, phase):
        self.splitter, self.phase, self.forced = splitter, phase, None
        self.untimed = False

    def usable(self) -> bool:
        # while mx.profiler records, the graph's own launches run, once a phase: the
        # trace and its counts are the program's, as a user profiling it expects
        return not launcher.PROFILING and self.splitter.usable()

    def prepare(self) -> bool:
        return self.splitter.prepare()

    def run(self, build=True) -> None:
        self.splitter.run(self.phase, build)


class RowSplitter:
    """The half executors of one :class:`~runtime.executor.Executor` (module doc)."""

    # the class of the halves: runtime.executor sets it to its Executor (that module
    # imports this one, so this one cannot import it)
    executor_class = None

    def __init__(self, exe):
        self.exe = exe
        self.plan = None        # the analysis: RowSplit, or False when refused
        self.reason = None
        self.halves = None
        self.is_train = True
        self.ran_split = False
        self.phases = {"fwd": PhaseSplit(self, "fwd"), "bwd": PhaseSplit(self, "bwd")}
        self.scripts = {}       # phase -> (the halves' bound lists, parts function, tensors)
        self.script_reasons = {}    # phase -> why it runs from Python threads

    @classmethod
    def for_executor(cls, exe):
        """A splitter for a training executor on the cpu target, or None."""
        ctx = exe._ctx
        if not exe._for_training or ctx.device_type == "gpu" or ctx.target != "cpu":
            return None
        return cls(exe)

    def attach(self, bound, prog, phase) -> None:
        """Mark the training Program's bound ``phase`` as one that may run split."""
        if prog is self.exe._train_prog and phase in self.phases:
            bound.row_split = self.phases[phase]

    def before_forward(self, is_train) -> None:
        self.is_train = bool(is_train)
        self.ran_split = False
        self.phases["fwd"].forced = None

    def before_backward(self) -> None:
        self.phases["bwd"].forced = self.ran_split

    def usable(self) -> bool:
        """Whether the executor may run split (analysed on the first call)."""
        if self.plan is None:
            self.plan, self.reason = self._analyse()
        return bool(self.plan)

    def _analyse(self):
        exe = self.exe
        if exe._rows or exe._shadows or exe._loss_scaling or exe.aux_dict:
            return False, "sparse arrays, a loss scale or auxiliary states"
        if exe._train_prog.seed_buffer is not None:
            return False, "random operators"
        from compiler.row_split import analyse
        plan, reason = analyse(exe._symbol, exe._input_shapes)
        return (plan or False), reason

    def prepare(self) -> bool:
        """Bind the two half executors (compiling the half Program) once; whether they
        are ready. A half that does not bind (a Program that does not compile at
        half the batch) leaves the executor unsplit for good, the reason kept."""
        if self.halves is None and self.usable():
            try:
                self.halves = [self._half(0), self._half(1)]
            except MXNetError as exc:
                self.plan, self.reason = False, f"the half executors: {exc}"
        return self.halves is not None

    def _half(self, k):
        from .ndarray import as_ndarray
        exe, plan = self.exe, self.plan
        rows = set(plan.rows)

        def part(arr):
            h = arr.shape[0] // 2
            return as_ndarray(arr[k * h:(k + 1) * h], exe._ctx)
        args = {n: part(a) if n in rows else a for n, a in exe.arg_dict.items()}
        grads, req = {}, {}
        for n, r in exe._grad_req.items():
            if r == "null" or n in rows:
                req[n] = r
                if n in exe.grad_dict and r != "null":
                    grads[n] = part(exe.grad_dict[n])
            elif k == 0:                # the first half writes (adds) the executor's
                req[n], grads[n] = r, exe.grad_dict[n]
            else:                       # the second's, private, is added after the join
                req[n] = "write"
                grads[n] = as_ndarray(torch.zeros_like(exe.grad_dict[n].as_subclass(
                    torch.Tensor)), exe._ctx)
        half = RowSplitter.executor_class(exe._symbol, exe._ctx, args, grads or None, req, {},
                        shared_exec=_PoolOwner(exe, k))
        half.outputs = [part(o) for o in exe.outputs]
        return half

    def run(self, phase, build=True) -> None:
        """Run ``phase`` on the two halves: as TorchScript where its script is built,
        else the worker thread taking the first; ``build``: whether this run may build
        and check the script (the thread policy says no during a trial)."""
        from . import threads
        from .launcher import LaunchCounter
        a, b = self.halves
        script = self._script(phase, build)
        self.phases[phase].untimed = script == (None, None)
        if script is not None:
            parts, tensors = script
            if phase == "fwd":
                for half in self.halves:    # what the halves' forward would have recorded
                    half._last_prog, half._last_train = self._prog(half, phase), self.is_train
            if parts is not None:           # else the check that built it ran the phase
                parts(tensors)              # (in the launches' grad mode: script.py)
        else:
            fn = self._forward if phase == "fwd" else self._backward
            count = LaunchCounter.total     # the phase counts as its Program's launches, once
            job = _worker().submit(_on_one_thread, threads.pinned, fn, a)
            try:
                threads.pinned(fn, b)
            finally:
                job.result()
                LaunchCounter.total = count
        if phase == "fwd":
            self.ran_split = True
        else:
            self._sum_grads()

    def _prog(self, half, phase):
        """The Program a half's ``forward`` or ``backward`` runs (``Executor.forward``)."""
        return half._train_prog if self.is_train or phase == "bwd" else half._infer_prog

    def _script(self, phase, build=True):
        """``(parts, tensors)`` running ``phase`` of both halves as TorchScript, or None:
        before the halves' launch lists are bound (their first run), where a backward
        copies head gradients per half, or where a list does not script or its script
        gives other numbers. The script is built, and checked against the lists' Python
        runs, by the run that first asks (``compiler/cpu/script.py: checked_parts``):
        that run has then run the phase, and ``(None, None)`` says so. Not built while
        ``build`` is false (a thread-count trial: one that loses would pay for it)."""
        bounds = [h._bound.get((id(self._prog(h, phase)), phase)) for h in self.halves]
        if None in bounds or (phase == "bwd" and self.exe._train_prog.head_grads) or \
                any(h._bwd_marks is not None for h in self.halves):
            return None
        got = self.scripts.get(phase)
        if got is None or any(x is not y for x, y in zip(got[0], bounds)):
            if not build:
                return None
            try:
                # the second half on the caller's thread, as on the threads below
                got, ran = (bounds, *checked_parts(bounds[::-1])), True
                self.script_reasons.pop(phase, None)
            except NotScriptable as exc:
                got, ran = (bounds, None, None), exc.ran
                self.script_reasons[phase] = str(exc)
            self.scripts[phase] = got
            return (None, None) if ran else None
        return None if got[1] is None else got[1:]

    def _forward(self, half):
        half.forward(is_train=self.is_train)

    def _backward(self, half):
        exe = self.exe
        prog = exe._train_prog
        heads = exe._head_grads.get(id(prog), {})
        grads = None
        if prog.head_grads:
            k = 0 if half is self.halves[0] else 1
            grads = [None] * len(prog.output_shapes)
            for i, name in prog.head_grads.items():
                g = heads[name]
                h = g.shape[0] // 2
                grads[int(i)] = g[k * h:(k + 1) * h]
        half.backward(out_grads=grads)

    def _sum_grads(self):
        """The second half's parameter gradients added to the executor's, which the
        first half wrote (``write``) or added to (``add``)."""
        second = self.halves[1].grad_dict
        rows = set(self.plan.rows)
        for n, r in self.exe._grad_req.items():
            if r != "null" and n not in rows:
                self.exe.grad_dict[n].add_(second[n])
