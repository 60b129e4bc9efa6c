"""``mx.operator``: operators written in Python (mxnet 1.9.1's ``CustomOp``).

A user subclasses :class:`CustomOpProp` (the operator's signature, shapes and
dtypes) and :class:`CustomOp` (its ``forward`` and ``backward`` on NDArrays),
and registers the prop with :func:`register`; ``mx.sym.Custom(..., op_type=)``
and ``mx.nd.Custom`` then use it. In a bound graph the executor cuts the graph
at each Custom node, runs the compiled segments around it, and calls the op in
between (``runtime/custom_op.py``).
"""
from __future__ import annotations

from runtime import custom_op as _runtime_custom

from .operator_base import CustomOp, CustomOpProp, register  # noqa: F401  (mx.operator's)
from .python_op import NDArrayOp, NumpyOp, PythonOp  # noqa: F401  (mxnet's legacy ops)

__all__ = ["CustomOp", "CustomOpProp", "register", "Custom", "get_all_registered_operators",
           "PythonOp", "NumpyOp", "NDArrayOp"]


Custom = _runtime_custom.custom_nd


def get_all_registered_operators():
    """Get all registered operator names: every registry entry and alias (mxnet's
    ``mx.operator.get_all_registered_operators``; internal ``_``-prefixed ones
    included, as mxnet lists them).

    Returns
    -------
    operator_names : list of string
    """
    from compiler.ops import REGISTRY
    return sorted(REGISTRY)

