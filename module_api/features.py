"""``mx.runtime``: which of mxnet's compile-time features this installation has.

mxnet 1.9.1 lists the flags its library was built with (``Features()``, a dict of
name -> :class:`Feature` in mxnet's order; ``is_enabled(name)``). Here the same names
answer for what runs a Program in this process: torch's build (CUDA, OpenMP, MKL's
BLAS and LAPACK, oneDNN as ``MKLDNN``, the vector instructions ATen dispatches to) and
what the project itself provides (the profiler, distributed kvstores). Names of
libraries it never uses (cuDNN, NCCL, TensorRT, OpenCV, jemalloc, Caffe, TVM, mxnet's
runtime-compiled CUDA) are off, as are mxnet's build modes that have no meaning here
(``CXX14``, ``DEBUG``, ``SIGNAL_HANDLER``) and ``INT64_TENSOR_SIZE``, whose mxnet
behaviour (int64 shapes in its C API) is not what this project gives.
"""
from __future__ import annotations

import collections

import torch

__all__ = ["Feature", "Features", "feature_list"]

# mxnet 1.9.1's feature names, in its order
_NAMES = ("CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
          "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE",
          "F16C", "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK",
          "MKLDNN", "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14",
          "INT64_TENSOR_SIZE", "SIGNAL_HANDLER", "DEBUG", "TVM_OP")


class Feature:
    """One feature: ``name`` and ``enabled``; printed as mxnet prints it."""

    __slots__ = ("name", "enabled")

    def __init__(self, name, enabled):
        self.name, self.enabled = name, bool(enabled)

    def __repr__(self):
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def _enabled() -> set:
    """The names this process has."""
    on = {"PROFILER", "DIST_KVSTORE"}
    if torch.version.cuda is not None:
        on.add("CUDA")
    capability = torch.backends.cpu.get_cpu_capability()   # what ATen's kernels use
    if capability in ("AVX2", "AVX512"):
        on.update(("CPU_SSE", "CPU_SSE2", "CPU_SSE3", "CPU_SSE4_1", "CPU_SSE4_2", "CPU_AVX",
                   "CPU_AVX2", "SSE", "F16C"))
    if torch.backends.openmp.is_available():
        on.add("OPENMP")
    if torch.backends.mkl.is_available():
        on.add("BLAS_MKL")
    elif "BLAS_INFO=open" in torch.__config__.show():
        on.add("BLAS_OPEN")
    if torch._C.has_lapack:
        on.add("LAPACK")
    if torch.backends.mkldnn.is_available():
        on.add("MKLDNN")
    return on


def feature_list():
    """Every feature, enabled or not, as a list of :class:`Feature` in mxnet's order.

    Returns
    -------
    list of Feature
    """
    on = _enabled()
    return [Feature(name, name in on) for name in _NAMES]


class Features(collections.OrderedDict):
    """``{name: Feature}`` of :func:`feature_list`; one instance per process, as in
    mxnet."""

    instance = None

    def __new__(cls):
        if cls.instance is None:
            cls.instance = super().__new__(cls)
            super(Features, cls.instance).__init__((f.name, f) for f in feature_list())
        return cls.instance

    def __init__(self):     # filled once, in __new__
        pass

    def __repr__(self):
        return str(list(self.values()))

    def is_enabled(self, feature_name):
        """Whether feature ``feature_name`` (any case) is on.

        Parameters
        ----------
        feature_name : str
            A feature's name, such as ``'MKLDNN'``.

        Returns
        -------
        bool

        Raises
        ------
        RuntimeError
            For a name mxnet does not know, with the names it knows.
        """
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(f"Feature '{name}' is unknown, known features are: "
                               f"{list(self.keys())}")
        return self[name].enabled
