"""``mx.nd.X`` for every registry operator, and mxnet's Python-level helpers over them.

mxnet generates ``mx.nd.X`` and ``mx.sym.X`` from one operator registry; so does
this module: each function calls :func:`runtime.imperative.invoke` with the
operator's registry name, which runs the same entry ``mx.sym.X`` builds, compiled
for the inputs' context. Names follow mxnet 1.9.1's ``_init_op_module``: a
registry name starting with ``_`` lives in ``_internal``; ``_contrib_X`` is
``contrib.X`` and ``_linalg_X`` is ``linalg.X`` (``namespace_members``).

The helpers (``add``, ``equal``, ``eye``, ``split_v2`` ...) are mxnet's own Python
functions of ``mx.nd``: they pick the operator from the
argument types (two arrays: ``broadcast_*``; an array and a number: ``_*_scalar``).
"""
from __future__ import annotations

import numbers
import operator
import types

import numpy as np
import torch

from compiler.ops import REGISTRY
from compiler.ops.registry import namespace_members
from runtime.imperative import invoke
from runtime.ndarray import torch_dtype


def make_function(op_name: str):
    """The ``mx.nd`` function of registry operator ``op_name``.

    Parameters
    ----------
    op_name : str
        A registry name or alias.

    Returns
    -------
    callable
        ``fn(*inputs, out=None, name=None, **attributes)``: an NDArray, or a list of
        them for an operator with several visible outputs.
    """
    def fn(*args, **kwargs):
        return invoke(op_name, args, kwargs)
    fn.__name__ = op_name
    fn.__qualname__ = op_name
    fn.__doc__ = REGISTRY[op_name].doc or f"The mxnet operator ``{op_name}`` (imperative)."
    return fn


def public_functions() -> dict:
    """``{name: function}`` of the registry names without a leading underscore."""
    return {n: make_function(n) for n in sorted(REGISTRY) if not n.startswith("_")}


def internal_namespace() -> types.SimpleNamespace:
    """``mx.nd._internal``: every registry name that starts with an underscore."""
    return types.SimpleNamespace(**{n: make_function(n) for n in sorted(REGISTRY)
                                    if n.startswith("_")})


def operator_namespace(namespace: str) -> types.SimpleNamespace:
    """``mx.nd.contrib`` / ``mx.nd.linalg`` / ``mx.nd.image`` from the registry's prefixes."""
    ns = types.SimpleNamespace(**{public: make_function(op_name) for public, op_name in
                                  namespace_members(namespace).items()})
    ns.__doc__ = f"``mx.nd.{namespace}``: the registry's ``_{namespace}_*`` operators."
    return ns


# ------------------------------------------------------- mxnet's ufunc helpers
def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, bool) or \
        isinstance(x, (bool, np.bool_))


def _ufunc(lhs, rhs, array_op, scalar_op, pyfn, rscalar_op=None):
    """mxnet's ``_ufunc_helper``: the operator is chosen from the operand types."""
    if _is_number(lhs):
        if _is_number(rhs):
            return pyfn(lhs, rhs)
        return invoke(rscalar_op or scalar_op, (rhs,), {"scalar": _scalar_for(rhs, lhs)})
    if _is_number(rhs):
        return invoke(scalar_op, (lhs,), {"scalar": _scalar_for(lhs, rhs)})
    if isinstance(lhs, torch.Tensor) and isinstance(rhs, torch.Tensor):
        return invoke(array_op, (lhs, rhs), {})
    raise TypeError(f"type {type(rhs if isinstance(lhs, torch.Tensor) else lhs)} "
                    f"not supported")


def _scalar_for(array, number) -> float:
    """The number as mxnet's scalar operators use it: cast to an integer array's dtype
    (``int32 + 2.7`` adds 2)."""
    if isinstance(array, torch.Tensor) and not torch_dtype(array).is_floating_point and \
            torch_dtype(array) != torch.bool:
        return float(int(number))
    return float(number)


_UFUNCS = {   # name: (array op, scalar op, python fn, reversed scalar op)
    "add": ("broadcast_add", "_plus_scalar", operator.add, None),
    "subtract": ("broadcast_sub", "_minus_scalar", operator.sub, "_rminus_scalar"),
    "multiply": ("broadcast_mul", "_mul_scalar", operator.mul, None),
    "divide": ("broadcast_div", "_div_scalar", operator.truediv, "_rdiv_scalar"),
    "true_divide": ("broadcast_div", "_div_scalar", operator.truediv, "_rdiv_scalar"),
    "modulo": ("broadcast_mod", "_mod_scalar", operator.mod, "_rmod_scalar"),
    "power": ("broadcast_power", "_power_scalar", operator.pow, "_rpower_scalar"),
    "maximum": ("broadcast_maximum", "_maximum_scalar", max, None),
    "minimum": ("broadcast_minimum", "_minimum_scalar", min, None),
    "equal": ("broadcast_equal", "_equal_scalar", lambda a, b: a == b, None),
    "not_equal": ("broadcast_not_equal", "_not_equal_scalar", lambda a, b: a != b, None),
    "greater": ("broadcast_greater", "_greater_scalar", lambda a, b: a > b,
                "_lesser_scalar"),
    "greater_equal": ("broadcast_greater_equal", "_greater_equal_scalar",
                      lambda a, b: a >= b, "_lesser_equal_scalar"),
    "lesser": ("broadcast_lesser", "_lesser_scalar", lambda a, b: a < b, "_greater_scalar"),
    "lesser_equal": ("broadcast_lesser_equal", "_lesser_equal_scalar", lambda a, b: a <= b,
                     "_greater_equal_scalar"),
    "logical_and": ("broadcast_logical_and", "_logical_and_scalar",
                    lambda a, b: float(bool(a) and bool(b)), None),
    "logical_or": ("broadcast_logical_or", "_logical_or_scalar",
                   lambda a, b: float(bool(a) or bool(b)), None),
    "logical_xor": ("broadcast_logical_xor", "_logical_xor_scalar",
                    lambda a, b: float(bool(a) != bool(b)), None),
}


def _make_ufunc(name, array_op, scalar_op, pyfn, rscalar_op):
    def fn(lhs, rhs, out=None):
        res = _ufunc(lhs, rhs, array_op, scalar_op, pyfn, rscalar_op)
        if out is not None:
            out[:] = res
            return out
        return res
    fn.__name__ = name
    fn.__doc__ = (f"``{name}(lhs, rhs)`` as mxnet's: two arrays broadcast (``{array_op}``), "
                  f"an array and a number use ``{scalar_op}``, two numbers Python's operator.")
    return fn


def ufuncs() -> dict:
    """``{name: function}`` of mxnet's binary helpers (``add`` ... ``logical_xor``)."""
    return {name: _make_ufunc(name, *spec) for name, spec in _UFUNCS.items()}


# ------------------------------------------------------ other Python helpers
def eye(N, M=0, k=0, ctx=None, dtype=None, **kwargs):
    """A 2-D array with ones on the ``k``-th diagonal (operator ``_eye``)."""
    return invoke("_eye", (), dict(kwargs, N=N, M=M, k=k, ctx=ctx,
                                   dtype=dtype if dtype is not None else "float32"))


def linspace(start, stop, num, endpoint=True, ctx=None, dtype=None):
    """``num`` evenly spaced values over ``[start, stop]`` (operator ``_linspace``)."""
    return invoke("_linspace", (), dict(start=start, stop=stop, num=num, endpoint=endpoint,
                                        ctx=ctx, dtype=dtype if dtype is not None else
                                        "float32"))


def split_v2(ary, indices_or_sections, axis=0, squeeze_axis=False):
    """Split ``ary`` into equal sections (an int) or at the given indices (a tuple):
    the array method :meth:`NDArray.split_v2`, which says how."""
    return ary.split_v2(indices_or_sections, axis=axis, squeeze_axis=squeeze_axis)


def _axes(axes, ndim, what):
    axes = [axes] if isinstance(axes, int) else [int(a) for a in axes]
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{what} axis {a} is out of bounds for an array of dimension "
                             f"{ndim}")
    axes = [a % ndim for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in `{what}` argument: {axes}")
    return axes


def moveaxis(tensor, source, destination):
    """Move axes ``source`` (an int or a list) to positions ``destination`` (as many),
    the others keeping their order: a ``transpose``, as numpy's ``moveaxis``."""
    ndim = tensor.ndim
    src, dst = _axes(source, ndim, "source"), _axes(destination, ndim, "destination")
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number "
                         "of elements")
    order = [a for a in range(ndim) if a not in src]
    for d, s_ in sorted(zip(dst, src)):
        order.insert(d, s_)
    return invoke("transpose", (tensor,), {"axes": tuple(order)})


def histogram(a, bins=10, range=None):  # noqa: A002  (mxnet's argument name)
    """Counts of ``a`` in ``bins`` (an int with ``range``, or an array of edges):
    ``(counts, edges)`` as mxnet's ``_histogram``."""
    if isinstance(bins, torch.Tensor):
        return invoke("_histogram", (a, bins), {})
    if isinstance(bins, int):
        if range is None:
            raise ValueError("null range is not supported in symbol mode")
        return invoke("_histogram", (a,), dict(bin_cnt=bins, range=str(tuple(range))))
    raise ValueError("bins argument should be either an integer or an NDArray")


def helpers() -> dict:
    """mxnet's Python-level ``mx.nd`` helpers defined over registry operators."""
    return {"eye": eye, "linspace": linspace, "split_v2": split_v2, "moveaxis": moveaxis,
            "histogram": histogram, **ufuncs()}
