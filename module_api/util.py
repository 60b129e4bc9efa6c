"""``mx.util``: mxnet 1.9.1's shape/array-semantics switches and environment helpers.

NumPy semantics
---------------
mxnet 1.x has two shape conventions. The legacy one (the default) has no
0-d arrays: ``()`` and a ``0`` dimension mean *unknown* in shape inference.
mxnet's NumPy-shape semantics (``set_np_shape(True)``, ``np_shape()``,
``use_np_shape``, ``set_np``, ``use_np``) makes ``()`` a scalar shape, ``0``
a zero-size dimension and ``-1`` the unknown size, and NumPy-array
semantics makes Gluon create ``mx.np.ndarray``.

This project implements the Module API on the legacy convention only
(symbols, shape inference, compiled Programs and ``mx.nd`` all use it), and
has no ``mx.np`` module. So:

* ``is_np_shape()`` and ``is_np_array()`` are always ``False``;
* turning either semantics *off* (``set_np_shape(False)``,
  ``np_shape(active=False)``, ``reset_np()``, ``set_np(False, False)``) works
  and does nothing;
* turning either *on* raises :class:`MXNetError` at that moment (the
  ``set_*`` call, entering the ``with`` scope, or calling a function
  decorated with ``use_np_shape`` / ``use_np_array`` / ``use_np``), naming
  what is not supported. Decorating itself succeeds, so a module that
  decorates classes at import time still imports.

``getenv`` / ``setenv`` read and write ``os.environ`` (there is no separate
C runtime environment to reach).
"""
from __future__ import annotations

import functools
import inspect
import os
import threading

from compiler.errors import MXNetError

_NP_SHAPE_MSG = (
    "NumPy shape semantics (scalar shape (), zero-size dimensions, -1 as the unknown size) "
    "is not supported: symtriton runs the mxnet 1.x Module API with legacy shapes only, "
    "where () and 0 mean 'unknown'. Remove the set_np_shape(True) / np_shape() / "
    "use_np_shape / set_np / use_np call and give legacy shapes")
_NP_ARRAY_MSG = (
    "NumPy array semantics (mx.np.ndarray, Gluon's numpy mode) is not supported: symtriton "
    "has mx.nd.NDArray only. Remove the np_array() / use_np_array / set_np / use_np call")


def get_gpu_count():
    """The number of GPUs torch can see."""
    import torch
    return torch.cuda.device_count()


def get_gpu_memory(gpu_dev_id):
    """``(free, total)`` bytes of GPU ``gpu_dev_id``."""
    import torch
    free, total = torch.cuda.mem_get_info(gpu_dev_id)
    return free, total


def get_cuda_compute_capability(ctx):
    """The compute capability of a GPU context as an int (``sm_80`` -> 80).

    Raises
    ------
    ValueError
        If ``ctx`` is not a GPU context (as in mxnet).
    """
    if ctx.device_type != "gpu":
        raise ValueError(f"Expecting a gpu context to get cuda compute capability, while "
                         f"received ctx {ctx}")
    import torch
    major, minor = torch.cuda.get_device_capability(ctx.device_id)
    return major * 10 + minor


# -- NumPy shape semantics ----------------------------------------------------------

def set_np_shape(active):
    """Turn NumPy shape semantics on or off; return the previous state.

    Parameters
    ----------
    active : bool
        ``False`` is accepted (it is the only state this project has);
        ``True`` raises.

    Returns
    -------
    bool
        The previous state: always ``False``.

    Raises
    ------
    MXNetError
        If ``active`` is true: NumPy shape semantics is not supported.
    """
    if active:
        raise MXNetError(_NP_SHAPE_MSG)
    return False


def is_np_shape():
    """Whether NumPy shape semantics is on: always ``False`` here (legacy shapes)."""
    return False


class _NumpyShapeScope:
    """``with`` scope of :func:`np_shape`; entering with ``True`` raises."""

    def __init__(self, is_np_shape):  # noqa: A002  (mxnet's name)
        self._enter_is_np_shape = is_np_shape
        self._prev_is_np_shape = None

    def __enter__(self):
        if self._enter_is_np_shape is not None:
            self._prev_is_np_shape = set_np_shape(self._enter_is_np_shape)
        return self

    def __exit__(self, ptype, value, trace):
        if self._enter_is_np_shape is not None and \
                self._prev_is_np_shape != self._enter_is_np_shape:
            set_np_shape(self._prev_is_np_shape)


def np_shape(active=True):
    """A ``with`` scope turning NumPy shape semantics on (``active=True``) or off.

    ``np_shape(False)`` works; entering ``np_shape(True)`` raises
    :class:`MXNetError` (see the module docstring).
    """
    return _NumpyShapeScope(active)


def _decorate(func, scope, name):
    if inspect.isclass(func):
        for attr, method in inspect.getmembers(
                func, predicate=lambda f: inspect.isfunction(f) or inspect.ismethod(f)
                or isinstance(f, property)):
            if isinstance(method, property):
                setattr(func, attr, property(_decorate(method.__get__, scope, name),
                                             method.__set__, method.__delattr__, method.__doc__))
            else:
                setattr(func, attr, _decorate(method, scope, name))
        return func
    if callable(func):
        @functools.wraps(func)
        def _scoped(*args, **kwargs):
            with scope(True):
                return func(*args, **kwargs)
        return _scoped
    raise TypeError(f"{name} can only decorate classes and callable objects, while received a "
                    f"{type(func)}")


def use_np_shape(func):
    """Decorate a function or class to run under NumPy shape semantics.

    Decorating succeeds; calling the result raises :class:`MXNetError`,
    since NumPy shape semantics is not supported (module docstring).
    """
    return _decorate(func, np_shape, "use_np_shape")


# -- NumPy array semantics -----------------------------------------------------------

class _NumpyArrayScope:
    """``with`` scope of :func:`np_array`; entering with ``True`` raises."""

    _current = threading.local()

    def __init__(self, is_np_array):  # noqa: A002
        self._old_scope = None
        self._is_np_array = is_np_array

    def __enter__(self):
        if self._is_np_array:
            raise MXNetError(_NP_ARRAY_MSG)
        self._old_scope = getattr(_NumpyArrayScope._current, "value", None)
        _NumpyArrayScope._current.value = self
        return self

    def __exit__(self, ptype, value, trace):
        _NumpyArrayScope._current.value = self._old_scope


def np_array(active=True):
    """A ``with`` scope turning NumPy array semantics on or off (``True`` raises)."""
    return _NumpyArrayScope(active)


def is_np_array():
    """Whether NumPy array semantics is on: always ``False`` here."""
    return False


def use_np_array(func):
    """Decorate a function or class to run under NumPy array semantics (calling raises)."""
    return _decorate(func, np_array, "use_np_array")


def use_np(func):
    """``use_np_shape(use_np_array(func))``: calling the result raises :class:`MXNetError`."""
    return use_np_shape(use_np_array(func))


def set_np(shape=True, array=True):
    """Set NumPy shape and array semantics together; only ``set_np(False, False)`` works.

    Raises
    ------
    ValueError
        ``shape=False`` with ``array=True`` (as mxnet).
    MXNetError
        Turning either semantics on.
    """
    if not shape and array:
        raise ValueError("NumPy Shape semantics is required in using NumPy array semantics.")
    if array:
        raise MXNetError(_NP_ARRAY_MSG)
    set_np_shape(shape)


def reset_np():
    """Turn NumPy shape and array semantics off (they are never on here)."""
    set_np(shape=False, array=False)


# -- misc ------------------------------------------------------------------------------

def set_module(module):
    """Decorator that sets ``__module__`` of a function or class to ``module``."""
    def decorator(func):
        if module is not None:
            func.__module__ = module
        return func
    return decorator


def _sanity_check_params(func_name, unsupported_params, param_dict):
    for param_name in unsupported_params:
        if param_name in param_dict:
            raise NotImplementedError(f"function {func_name} does not support parameter "
                                      f"{param_name}")


def getenv(name):
    """The value of environment variable ``name``, or ``None`` if it is not set."""
    return os.environ.get(name)


def setenv(name, value):
    """Set environment variable ``name`` to ``value``; ``None`` unsets it."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)
