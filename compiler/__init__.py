"""symtriton's compiler: MXNet Symbol graphs to fused Triton kernels.

``cache_stats()`` / ``reset_cache_stats()`` expose the compile cache counters.
"""
from .triton_mode import ensure_mode as _ensure_mode

_ensure_mode()

from .cache import cache_stats, reset_cache_stats  # noqa: E402,F401
from .errors import MXNetError  # noqa: E402,F401
