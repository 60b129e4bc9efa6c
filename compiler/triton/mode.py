"""Decide, once and before triton is imported, whether kernels run in Triton's
interpreter (no CUDA device) or compiled for the GPU.

Triton reads ``TRITON_INTERPRET`` when it is imported and when a kernel is
decorated, so the choice cannot change later in the process.
"""
from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger("symtriton")


def _cuda_available() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - torch missing is an install error elsewhere
        return False


def ensure_mode() -> bool:
    """Set ``TRITON_INTERPRET`` if needed; return True when interpreting."""
    if "triton" not in sys.modules and "TRITON_INTERPRET" not in os.environ:
        if not _cuda_available():
            os.environ["TRITON_INTERPRET"] = "1"
            log.info("symtriton: no CUDA device; generated kernels run in Triton's interpreter")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    return interpreting()


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
