"""Load generated kernels from the cache directory, bind them to buffers, launch them.

Trust: a cache directory is code. Importing a kernel file runs it, so whoever
can write the cache directory can run code in this process, and the checksum
(the file must hash to its own name) only catches accidents: anyone who can
write the directory can write a file that hashes to its name. Triton's own
cache has the same model. So before a kernel file is imported, the file and
every directory up to the cache root must be owned by this user (or root) and
not group- or world-writable (``compiler.artifacts.cache_trust``, checked once per
directory per process); anything else is refused with an error naming the
path and the fix. The import executes exactly the bytes that were checked:
no ``__pycache__`` bytecode is read or written beside the kernel, so a planted
``.pyc`` cannot run in the source's place. To accept a directory from another
machine, check it first with ``symtriton cache verify --rebuild DIR``.

Two kinds of kernel:

* Triton kernels (targets ``interpret`` and ``cuda:<arch>``): ``kernel`` is a
  ``@triton.jit`` function; on CUDA tensors Triton compiles it for the GPU,
  without a GPU it runs in Triton's interpreter with whole-tensor tiles.
* cpu kernels (target ``cpu``): ``bind(*flat_buffers)`` makes the strided
  views of one launch once and returns ``run()``, a closure of torch calls.

And extern launches (every target, ``Launch.kind == "extern"``): no kernel file; the
operator's registry entry (``compiler.ops.registry.Extern``) is found by name and its
``run`` called on views of the launch's buffers, on whatever device they live on.

:func:`bind_launches` resolves every launch's buffers once (per executor and
Program); :func:`run_bound` then costs one Python call per launch.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import os
import importlib.util
import threading
import time

import torch

from compiler.artifacts import cache, kernel_files
from compiler.triton.cubin import launch_kwargs, use_triton_cache
from compiler.errors import MXNetError

from . import threads

_MODULES: dict = {}
# Triton's interpreter keeps the running grid in module-level state, so two threads
# must not launch at once (dist_async applies updates from a server thread).
LAUNCH_LOCK = threading.RLock()
# Set by ``mx.profiler`` while it records: run_bound then times every launch and appends
# ``(launch id, start ns, end ns, thread id)`` to RECORD (perf_counter_ns); the profiler
# builds its trace from RECORD when it dumps. Checked once per run_bound, so off costs one test.
PROFILING = False
LAUNCH_NAMES: dict = {}         # (category, range name) -> launch id
LAUNCH_IDS: list = []           # launch id -> range name
LAUNCH_CATEGORIES: list = []    # launch id -> the profiler's category ("operator" ...)
RECORD: list = []               # one tuple per launch run while PROFILING
# while a Python CustomOp's forward or backward runs on this thread: its op_type, under
# which mx.profiler files the mx.nd calls it makes ("Custom Operator", "<op_type>::<op>")
PROFILE_SCOPE = threading.local()


def launch_id(name: str, category: str = "operator") -> int:
    """The id of the range ``name`` of profiler category ``category`` (new on first sight)."""
    with LAUNCH_LOCK:
        ident = LAUNCH_NAMES.get((category, name))
        if ident is None:
            ident = LAUNCH_NAMES[(category, name)] = len(LAUNCH_IDS)
            LAUNCH_IDS.append(name)
            LAUNCH_CATEGORIES.append(category)
    return ident


def record_range(name: str, start: int, category: str = "operator"):
    """Append a range from ``start`` (``perf_counter_ns``) to now to RECORD (profiling)."""
    RECORD.append((launch_id(name, category), start, time.perf_counter_ns(),
                   threading.get_ident()))


def record_operator(op_name: str, start: int):
    """Record an ``mx.nd`` call of ``op_name`` from ``start`` to now (profiling): as the
    operator, or within a CustomOp's code as ``Custom Operator`` /
    ``<op_type>::<op_name>``, where mxnet files it."""
    custom = getattr(PROFILE_SCOPE, "custom", None)
    if custom is None:
        record_range(op_name, start)
    else:
        record_range(f"{custom}::{op_name}", start, "Custom Operator")


def load_module(source_hash: str):
    """The imported module of a cached kernel source (verified against its hash)."""
    module = _MODULES.get(source_hash)
    if module is not None:
        return module
    fresh = kernel_files.fresh_kernel(source_hash)   # written by this process: its own bytes
    path, data = fresh if fresh is not None else _checked_kernel(source_hash)
    if b"import triton" in data:
        from compiler.triton.mode import ensure_mode
        if not ensure_mode():    # before triton's first import: the interpreter, or not
            _point_triton_at_cache_dir()
    name = f"symtriton_k_{source_hash}"
    loader = _CheckedSource(name, path, data)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _MODULES[source_hash] = module
    cache.bump("kernels_compiled" if kernel_files.generated_here(source_hash)
               else "kernels_loaded")
    return module


def _checked_kernel(source_hash: str):
    """``(path, bytes)`` of a cached kernel file, its directories trusted and its bytes
    matching their hash."""
    try:
        path = kernel_files.trusted_kernel_path(source_hash)   # UntrustedCacheError propagates
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        path = cache.kernel_path(source_hash)
        raise MXNetError(f"kernel {source_hash} is missing from the cache ({path}); delete the "
                         f"program entry or recompile") from None
    if hashlib.sha256(data).hexdigest()[:24] != source_hash:
        raise MXNetError(f"kernel file {path} does not match its checksum; refusing to load it")
    return path, data


_TRITON_CACHE_SET = []


def _point_triton_at_cache_dir():
    """Once per GPU process: Triton keeps its compiled kernels in ``<cache dir>/triton``
    (``compiler.artifacts.kernel_files.triton_dir``), where ``symtriton compile
    --target cuda:<arch>`` put them under the keys these launches compute, so an
    ahead-of-time directory runs with no Triton compile. A ``TRITON_CACHE_DIR`` the user set wins."""
    if _TRITON_CACHE_SET:
        return
    _TRITON_CACHE_SET.append(True)
    if os.environ.get("TRITON_CACHE_DIR"):
        return
    path = kernel_files.triton_dir()        # UntrustedCacheError propagates
    if path is not None:
        use_triton_cache(path)


class _CheckedSource(importlib.machinery.SourceFileLoader):
    """Imports the bytes that were checked, and nothing else.

    A plain ``SourceFileLoader`` runs ``__pycache__/<name>.pyc`` instead of the
    source when the pyc's header matches the source's size and mtime, and writes
    such files into the cache directory. This loader reads no bytecode (its
    ``path_stats`` fails, so the pyc is never looked up) and writes none.
    ``@triton.jit`` still finds the source through ``inspect`` (the file's path).
    """

    def __init__(self, fullname, path, data: bytes):
        super().__init__(fullname, path)
        self._data = data

    def path_stats(self, path):
        raise OSError("kernel files are imported from their checked source only")

    def get_data(self, path):
        if path != self.path:
            raise OSError(f"{path}: only the checked kernel source {self.path} is read")
        return self._data

    def set_data(self, path, data, *, _mode=0o666):
        pass


def load_kernel(source_hash: str):
    """The ``@triton.jit`` function of a cached Triton kernel source (verified)."""
    return load_module(source_hash).kernel


class LaunchCounter:
    """Counts launches; tests and benchmarks read it."""
    total = 0

    @classmethod
    def reset(cls):
        cls.total = 0


class BoundLaunches(list):
    """The callables of bound launches, with ``names``: one profiler range name per launch
    (``ids``: their :func:`launch_id`),
    and ``host_threads``: whether they are cpu kernels (ATen calls on this host's
    thread pool, whose thread count ``runtime.threads`` chooses per run)."""
    names: list = []
    ids: list = []
    host_threads: bool = False


def launch_name(ln) -> str:
    """A launch's range name: phase, what it computes and its kernel hash."""
    what = ln.summary or "kernel"
    return f"{ln.phase} {what} #{ln.kernel[:8]}"


def bind_launches(launches, resolve) -> list:
    """One callable per launch, its buffers resolved now.

    ``resolve(kind, name, offset, numel)`` gives the flat tensor of one
    argument; arrays must stay the same objects while the result is used.
    The result is a list with ``names`` (see :func:`launch_name`).
    """
    bound = BoundLaunches()
    bound.names = [launch_name(ln) for ln in launches]
    bound.ids = [launch_id(name) for name in bound.names]
    for ln in launches:
        if getattr(ln, "kind", "kernel") == "extern":
            flat = [_plain(resolve(*arg)) for arg in ln.args]
            bound.append(_extern_launch(ln, flat))
            bound.host_threads |= bool(flat) and flat[0].device.type == "cpu"
            continue
        module = load_module(ln.kernel)
        flat = [_plain(resolve(*arg)) for arg in ln.args]
        if hasattr(module, "bind"):
            # plain tensors: NDArray's __torch_function__ would wrap every call of run()
            bound.append(module.bind(tuple(ln.config.get("consts", ())), *flat))
            bound.host_threads = True
        else:
            # plain tensors: Triton reads each argument's dtype, a numpy type on an NDArray
            bound.append(_triton_launch(module.kernel, flat, ln.config))
    return bound


_WIDEN = (torch.float16, torch.bfloat16)


def _plain(t):
    """``t`` as a plain ``torch.Tensor`` (an executor's resolver gives plain ones already)."""
    return t if type(t) is torch.Tensor else t.as_subclass(torch.Tensor)


def _extern_launch(ln, flat):
    """``run()`` of an extern launch: the registry entry's ``Extern.run`` over views of
    the input buffers, each stored output copied into its planned array(s). A value
    kept by reference (slot kind ``held``) is the executor's tensor itself: an output
    one is pointed at the operator's result (``set_``), an input one is read as it is."""
    from compiler.ops.registry import Extern, get_op
    cfg = ln.config
    opdef = get_op(cfg["op"])
    if not isinstance(opdef.lowering, Extern):
        raise MXNetError(f"launch {launch_name(ln)}: operator {cfg['op']} is not an extern "
                         f"operator in this version; recompile the program")
    attrs = opdef.parse_attrs(cfg["attrs"], f"extern launch of {cfg['op']}")
    views = [(t, []) if arg[0] == "held" else _strided(t, shape, strides)
             for t, arg, (shape, strides) in zip(flat, ln.args, cfg["views"])]
    n_in = int(cfg["inputs"])
    ins, outs = views[:n_in], list(zip(cfg["outputs"], views[n_in:]))
    held = {k for (k, _), arg in zip(outs, ln.args[n_in:]) if arg[0] == "held"}
    fn = opdef.lowering.run

    def run():
        # a flip copies: made at each call, from what the buffer holds now
        xs = [v.flip(f) if f else v for v, f in ins]
        try:
            values = fn(attrs, [x.float() if x.dtype in _WIDEN else x for x in xs])
        except RuntimeError as exc:    # torch.linalg.LinAlgError among them
            shapes = ", ".join(str(tuple(x.shape)) for x in xs)
            raise MXNetError(f"operator {cfg['op']} ({ln.phase} launch, attributes "
                             f"{cfg['attrs']}), inputs of shapes {shapes}: {exc}") from None
        for i, (out, f) in outs:
            if i in held:
                out.set_(values[i])
            else:
                out.copy_(values[i].flip(f) if f else values[i])
    # what compiler/cpu/script.py writes this launch from, in a scripted phase
    run.extern = (cfg["op"], opdef.lowering, attrs, ins, outs, held)
    return run


def _strided(flat, shape, strides):
    """``(view, flips)``: the view ``(shape, strides)`` over a flat slice whose first
    element is the view's first (coordinate 0), read with its negative strides
    (``reverse``) made positive, and the axes to flip for the view's own order. torch's
    ``flip`` copies, so the caller flips at each run: a flip made once at bind would
    read the buffer as it was then."""
    low = sum((n - 1) * st for n, st in zip(shape, strides) if st < 0)
    flips = [i for i, (n, st) in enumerate(zip(shape, strides)) if st < 0 and n > 1]
    view = flat.as_strided(shape, [abs(st) for st in strides], flat.storage_offset() + low)
    return view, flips


def _triton_launch(kernel, ptrs, cfg):
    grid = (int(cfg["grid"][0]), int(cfg["grid"][1]))
    consts = launch_kwargs(cfg)     # what `symtriton compile` specialised the kernel with

    def run():
        with LAUNCH_LOCK:
            kernel[grid](*ptrs, **consts)
    return run


def run_bound(bound):
    """Run bound launches in order.

    Under ``torch.inference_mode``: the launches never need autograd, and the
    mode skips its dispatch work on each ATen call (about 15% of a tiny
    step's time on the cpu target). Every tensor a launch writes was made
    outside the mode (planned buffers and their views, bound once), so none
    of the mode's inference-only tensors escapes a launch.

    cpu kernels run with the thread count ``runtime.threads`` chooses for this
    launch list (fewer threads than torch's when that measured faster, on a
    busy machine); it times the run under the list itself.
    """
    fn = _run_profiled if PROFILING else _run_all
    if getattr(bound, "host_threads", False):
        threads.run(bound, fn, bound)
    else:
        fn(bound)
    LaunchCounter.total += len(bound)


def _run_all(bound, check=None):
    with torch.inference_mode():
        if check is None:
            for run in bound:
                run()
        else:                 # a thread-count trial (runtime.threads): may stop it early
            for run in bound:
                run()
                check()


def _run_profiled(bound, check=None):
    """``run_bound`` recording each launch's id, start and end (``perf_counter_ns``) in RECORD."""
    ids = getattr(bound, "ids", None) or [launch_id(f"kernel {i}") for i in range(len(bound))]
    clock, record, tid = time.perf_counter_ns, RECORD.append, threading.get_ident()
    with torch.inference_mode():
        for ident, run in zip(ids, bound):
            start = clock()
            run()
            record((ident, start, clock(), tid))
            if check is not None:
                check()


def run_launches(launches, resolve):
    """Bind and run ``launches`` once (callers that run a Program once)."""
    run_bound(bind_launches(launches, resolve))
