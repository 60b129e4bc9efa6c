"""Device contexts: ``cpu(i)`` and ``gpu(i)`` as mxnet names them, mapped to torch devices.

Several ``cpu(i)`` contexts are distinct executors on the same host memory,
so data-parallel code can be tested without a GPU.
"""
from __future__ import annotations

import contextlib
import threading

import torch

from compiler.errors import MXNetError

_local = threading.local()
_GPUS_SEEN = set()          # ids already checked to exist (the check runs once per id)


def _check_gpu(device_id: int) -> None:
    """Raise an MXNetError naming ``gpu(device_id)`` unless torch can use that GPU."""
    if device_id in _GPUS_SEEN:
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not 0 <= device_id < count:
        have = ("this machine has no GPU that torch can use (torch.cuda.is_available() is "
                "False)" if count == 0 else
                f"this machine has {count} GPU(s): gpu(0) to gpu({count - 1})")
        raise MXNetError(f"gpu({device_id}) is not available: {have}. Use mx.cpu(), or "
                         f"mx.gpu(i) with i < mx.context.num_gpus().")
    _GPUS_SEEN.add(device_id)


class _CurrentContext:
    """``Context.default_ctx``, read on the class: the thread's current context, with
    mxnet's deprecation warning (mxnet 1.x's tests still read it)."""

    def __get__(self, obj, owner):
        import warnings
        warnings.warn("Context.default_ctx has been deprecated. Please use "
                      "Context.current_context() instead.", DeprecationWarning)
        return current_context()


class Context:
    """A device: ``Context('cpu', 0)`` or ``Context('gpu', 1)``."""
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {v: k for k, v in devtype2str.items()}

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in self.devstr2type:
            raise ValueError(f"unknown device type {device_type!r}; use 'cpu' or 'gpu'")
        self.device_type = device_type
        self.device_id = int(device_id)
        self._old = None

    @property
    def device_typeid(self):
        return self.devstr2type[self.device_type]

    @property
    def torch_device(self) -> torch.device:
        """The torch device arrays of this context live on.

        Raises
        ------
        MXNetError
            For ``gpu(i)`` when this machine has no GPU ``i`` (mxnet raises an
            MXNetError as well, from the operator that wanted the GPU).
        """
        if self.device_type == "gpu":
            _check_gpu(self.device_id)
            return torch.device("cuda", self.device_id)
        return torch.device("cpu")

    @property
    def target(self) -> str:
        """The compile target for kernels launched on this context.

        ``gpu(i)``: ``cuda:<major><minor>`` of that device. ``cpu(i)``: ``cpu``
        (torch calls generated from the same tile programs), or ``interpret``
        (Triton's interpreter running the GPU kernels) when the environment
        sets ``SYMTRITON_CPU_TARGET=interpret``.
        """
        if self.device_type == "gpu":
            _check_gpu(self.device_id)
            major, minor = torch.cuda.get_device_capability(self.device_id)
            return f"cuda:{major}{minor}"
        return cpu_target()

    def __eq__(self, other):
        return isinstance(other, Context) and (self.device_type, self.device_id) == \
            (other.device_type, other.device_id)

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __repr__(self):
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self):
        self._old = current_context()
        _local.ctx = self
        return self

    def __exit__(self, *exc):
        _local.ctx = self._old

    def empty_cache(self):
        if self.device_type == "gpu":
            torch.cuda.empty_cache()

    default_ctx = _CurrentContext()


CPU_TARGETS = ("cpu", "interpret")


def cpu_target() -> str:
    """What ``cpu()`` contexts compile for: ``SYMTRITON_CPU_TARGET``, ``cpu`` by default."""
    import os
    name = os.environ.get("SYMTRITON_CPU_TARGET", "") or "cpu"
    if name not in CPU_TARGETS:
        raise ValueError(f"SYMTRITON_CPU_TARGET={name!r} is not a CPU target: use 'cpu' (torch "
                         f"calls, the default) or 'interpret' (Triton's interpreter)")
    return name


def cpu(device_id=0) -> Context:
    return Context("cpu", device_id)


def gpu(device_id=0) -> Context:
    return Context("gpu", device_id)


def cpu_pinned(device_id=0) -> Context:
    return Context("cpu_pinned", device_id)


def num_gpus() -> int:
    return torch.cuda.device_count()


def current_context() -> Context:
    ctx = getattr(_local, "ctx", None)
    return ctx if ctx is not None else Context("cpu", 0)


_NO_GUARD = contextlib.nullcontext()


def device_guard(where):
    """Make ``where``'s CUDA device current while a launch runs.

    Triton launches on the current CUDA device, so a ``gpu(2)`` kernel
    started while device 0 is current would run on device 0 with device-2
    pointers. ``where`` is a :class:`Context` or a ``torch.device``; for
    CPU ones this is a no-op context (shared: nothing to enter).
    """
    if isinstance(where, Context):
        if where.device_type != "gpu":
            return _NO_GUARD
        return torch.cuda.device(where.device_id)
    if where.type != "cuda":
        return _NO_GUARD
    return torch.cuda.device(where.index if where.index is not None else 0)
