"""The one dtype kernels are generated for, and the error for any other.

Every buffer, kernel and cache key is float32. A request for another dtype
(``type_dict``, ``DataDesc(dtype=...)``, ``Variable(dtype=...)``, a bound array
of another dtype) is refused with an error that names it, never computed
silently in float32.
"""
from __future__ import annotations

import numpy as np

from .errors import MXNetError

SUPPORTED_DTYPE = "float32"


def dtype_name(dtype) -> str:
    """Canonical name (``'float16'``) of a numpy, torch or string dtype."""
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    try:
        return np.dtype(dtype).name
    except TypeError:
        return text


def require_float32(name: str, dtype, where: str) -> None:
    """Raise unless ``dtype`` is float32 (``None`` means the default, float32).

    Parameters
    ----------
    name : str
        The argument, input or array the dtype was asked for.
    dtype : numpy, torch or str dtype, or None
    where : str
        Where it was asked (``"simple_bind type_dict"``, ``"DataDesc"`` ...).
    """
    if dtype is None:
        return
    got = dtype_name(dtype)
    if got != SUPPORTED_DTYPE:
        raise MXNetError(
            f"{where}: '{name}' is {got}, but symtriton computes in float32 only for now; "
            f"give '{name}' as float32 (mxnet's default: leave the dtype unset, or cast the "
            f"data with .astype('float32'))")
