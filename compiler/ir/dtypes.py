"""The dtypes kernels are generated for: names, storage, compute dtype, matmul precision.

Every value of a graph has a *storage* dtype (what its array or buffer holds),
inferred with mxnet's rules (``passes/infer_types.py``). A kernel loads in the
storage dtype and computes in its *compute* dtype: float32, or float64 when any
tensor it touches is float64 (float16 and bfloat16 values are widened on load
and rounded once, at the store, as mxnet's own fp16 kernels accumulate in
fp32). Matmul operands stay in their storage dtype: two float16 (or bfloat16)
operands make a tensor-core dot with an fp32 accumulator.

Integer arrays (labels, indices) are stored as integers and read as the compute
float. A kernel that writes only integers (one of them int32 or int64), or touches only
integers, computes in float64, so integer sums, copies, gathers and arithmetic are exact
below 2**53 (int32's whole range), as mxnet's integer kernels are; a kernel reading
integers into float32 results (labels, indices) reads them as float32 (exact below
2**24).
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import MXNetError

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int32", "int64")
SUPPORTED = FLOATS + INTS
LOW_PRECISION = ("float16", "bfloat16")

ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
            "uint8": 1, "int8": 1, "int32": 4, "int64": 8}
# mxnet's type flags (mshadow's TypeFlag), as a ``__dtype__`` attribute holds them
MXNET_TYPE_FLAG = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4,
                   "int8": 5, "int64": 6, "bfloat16": 12}
TL = {name: f"tl.{name}" for name in SUPPORTED}
TORCH = {name: f"torch.{name}" for name in SUPPORTED}


def dtype_name(dtype) -> str:
    """Canonical name (``'float16'``) of a numpy, torch or string dtype.

    ``None`` stays ``None`` (not given). mxnet's ``'bfloat16'`` has no numpy
    dtype; its name is kept as is.
    """
    if dtype is None:
        return None
    if type(dtype) is str and dtype in ITEMSIZE:    # already canonical: inference asks a lot
        return dtype
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    if text in ("bfloat16", "bf16"):
        return "bfloat16"
    if isinstance(dtype, type) and dtype.__name__ == "bfloat16":
        return "bfloat16"
    if isinstance(dtype, np.dtype) and dtype.names == ("bfloat16",):
        return "bfloat16"             # mxnet's Python name for its bfloat16
    try:
        return np.dtype(dtype).name
    except TypeError:
        return text


def check_dtype(name: str, dtype, where: str) -> str:
    """The canonical name of ``dtype``, or an error naming ``name`` if kernels lack it.

    Parameters
    ----------
    name : str
        The argument, input or array the dtype was asked for.
    dtype : numpy, torch or str dtype
    where : str
        Where it was asked (``"simple_bind type_dict"``, ``"DataDesc"`` ...).
    """
    got = dtype_name(dtype)
    if got not in SUPPORTED:
        raise MXNetError(f"{where}: '{name}' is {got}; symtriton generates kernels for "
                         f"{', '.join(SUPPORTED)}: cast '{name}' to one of them")
    return got


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


# the largest finite value of each float dtype
FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
             "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def saturate_to_dtype(value, dtype):
    """``value`` as mxnet's ``DType(scalar)`` sees it at its range: a number beyond
    ``dtype``'s largest finite value is that sign's infinity (``1e39`` in float32).

    Parameters
    ----------
    value : float
        A scalar attribute.
    dtype : str or torch.dtype
        The operator's element type; integer types leave ``value`` as it is.

    Returns
    -------
    float
    """
    limit = FLOAT_MAX.get(dtype_name(dtype))
    if limit is None or not isinstance(value, float) or not abs(value) > limit or \
            value != value:
        return value
    return float("inf") if value > 0 else float("-inf")


# integers float32 holds exactly only below 2**24
_WIDE_INTS = ("int32", "int64")


def compute_dtype(dtypes, written=()) -> str:
    """The dtype a kernel touching tensors of ``dtypes`` computes in: float64 when one of
    them is float64, or when it writes only integers, one of them int32 / int64
    (``written``: those dtypes), or touches only integers, one of them int32 / int64 (a
    sum, a copy, a gather of int32 values above 2**24 must not round, as mxnet's integer
    kernels do not; float64 holds integers exactly below 2**53); float32 otherwise (a
    kernel that also writes floats keeps their float32 arithmetic)."""
    if "float64" in dtypes:
        return "float64"
    if written and all(d in INTS for d in written) and any(d in _WIDE_INTS for d in written):
        return "float64"
    if any(d in _WIDE_INTS for d in dtypes) and not any(d in FLOATS for d in dtypes):
        return "float64"
    return "float32"


def fp32_matmul_precision(target: str) -> str:
    """``ieee`` or ``tf32``: how float32 matmuls run on ``target``.

    mxnet's switch decides: ``MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION=1`` lets
    float32 matmuls use tensor cores through a lower-precision conversion
    (mxnet converts to float16; the tensor-core format for float32 on sm_80 and
    later is TF32, 10 mantissa bits as float16 has), unless
    ``MXNET_CUDA_ALLOW_TENSOR_CORE=0`` forbids tensor cores. The default, as in
    mxnet, is full float32 (``ieee``). Only ``cuda:<arch>`` targets with arch 80
    or above have TF32; the cpu and interpreter targets compute float32 matmuls
    in float32 whatever the switch says.
    """
    if not target.startswith("cuda:") or int(target.split(":")[1]) < 80:
        return "ieee"
    allow = os.environ.get("MXNET_CUDA_ALLOW_TENSOR_CORE", "1") != "0"
    convert = os.environ.get("MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION", "0") == "1"
    return "tf32" if allow and convert else "ieee"
