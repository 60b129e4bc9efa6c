"""symtriton's compiler: MXNet Symbol graphs to fused Triton kernels (GPUs, Triton's
interpreter) and to torch calls (the ``cpu`` target).

``cache_stats()`` / ``reset_cache_stats()`` expose the compile cache counters. Importing
the compiler does not import triton: the launcher decides the Triton mode
(``triton/mode.py``) when it first loads a Triton kernel.
"""
from .artifacts.cache import cache_stats, reset_cache_stats  # noqa: F401
from .errors import MXNetError  # noqa: F401
