"""``mx.util``: mxnet 1.9.1's shape/array-semantics switches and environment helpers.

NumPy semantics
---------------
mxnet 1.x has two shape conventions. The legacy one (the default) has no
0-d arrays: ``()`` and a ``0`` dimension mean *unknown* in shape inference.
mxnet's NumPy-shape semantics (``set_np_shape(True)``, ``np_shape()``,
``use_np_shape``) makes ``()`` a scalar shape, ``0`` a zero-size dimension,
``-1`` the unknown size and ``None`` an unknown shape, per thread, as mxnet's
flag is (``compiler/shape_semantics.py`` holds it):

* ``mx.nd.zeros`` / ``ones`` make ``()`` and zero-size arrays, which legacy
  semantics refuses, and operators take them;
* ``infer_shape_partial`` spells unknown dims -1 and unknown shapes None;
* ``tojson`` marks the graph ``is_np_shape``, and a symbol file without the
  mark, loaded under NumPy semantics, has its 0 dims read as unknown (-1);
* ``mx.nd.save`` writes mxnet's V3 records, and ``load`` takes V3 files under
  NumPy semantics only and V2 files under legacy semantics only, as mxnet.

NumPy-array semantics (``np_array``, ``use_np_array``, ``set_np``, ``use_np``:
Gluon's ``mx.np.ndarray``) is not implemented: there is no ``mx.np`` module.
``is_np_array()`` is always ``False``; turning it off works and does nothing;
turning it on raises :class:`MXNetError` at that moment (the ``set_*`` call,
entering the ``with`` scope, or calling a decorated function), naming what is
not supported. Decorating itself succeeds, so a module that decorates classes
at import time still imports.

``getenv`` / ``setenv`` read and write ``os.environ`` (there is no separate
C runtime environment to reach).
"""
from __future__ import annotations

import functools
import inspect
import os

from compiler import shape_semantics
from compiler.errors import MXNetError

_NP_ARRAY_MSG = (
    "NumPy array semantics (mx.np.ndarray, Gluon's numpy mode) is not supported: symtriton "
    "has mx.nd.NDArray only. Remove the np_array() / use_np_array / set_np / use_np call")


# -- GPUs (through torch, which owns the CUDA runtime here) ----------------------------

def get_gpu_count():
    """The number of GPUs torch can see."""
    import torch
    return torch.cuda.device_count()


def get_gpu_memory(gpu_dev_id):
    """``(free, total)`` bytes of GPU ``gpu_dev_id``."""
    import torch
    return tuple(torch.cuda.mem_get_info(gpu_dev_id))


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
    return 10 * major + minor


# -- the two NumPy semantics: shapes per thread; arrays off for good ---------------------

class _ShapeScope:
    """The ``with`` scope :func:`np_shape` returns: the thread's shape semantics set
    on entry and restored on exit."""

    def __init__(self, active):
        self._active = active           # None: leave the state alone, as mxnet's scope
        self._previous = None

    def __enter__(self):
        if self._active is not None:
            self._previous = shape_semantics.set_np_shape(self._active)
        return self

    def __exit__(self, *exc_info):
        if self._active is not None:
            shape_semantics.set_np_shape(self._previous)
        return False


class _LegacyOnlyScope:
    """The ``with`` scope :func:`np_array` returns.

    Asking for array semantics to be off is a no-op (it is never on); asking for it
    on raises ``MXNetError(message)`` on entry, so the body never runs under
    semantics this project does not implement.
    """

    def __init__(self, active, message):
        self._active = active
        self._message = message

    def __enter__(self):
        if self._active:
            raise MXNetError(self._message)
        return self

    def __exit__(self, *exc_info):
        return False


def _scoped_callable(func, make_scope):
    """``func`` wrapped to run inside ``make_scope(True)``."""
    @functools.wraps(func)
    def run_in_scope(*args, **kwargs):
        with make_scope(True):
            return func(*args, **kwargs)
    return run_in_scope


def _scoped_class(cls, make_scope):
    """Every Python method and property getter of ``cls`` (inherited ones included)
    wrapped to run inside ``make_scope(True)``; ``cls`` itself is returned."""
    def wanted(member):
        return inspect.isfunction(member) or inspect.ismethod(member) \
            or isinstance(member, property)

    for attr, member in inspect.getmembers(cls, predicate=wanted):
        if isinstance(member, property):
            getter = member.fget and _scoped_callable(member.fget, make_scope)
            setattr(cls, attr, property(getter, member.fset, member.fdel, member.__doc__))
        else:
            setattr(cls, attr, _scoped_callable(member, make_scope))
    return cls


def _decorator_under(make_scope, decorator_name):
    """A decorator (``use_np_shape`` / ``use_np_array``) running a function, or a
    class's methods, inside ``make_scope(True)``."""
    def decorate(func):
        if inspect.isclass(func):
            return _scoped_class(func, make_scope)
        if not callable(func):
            raise TypeError(f"{decorator_name} can only decorate classes and callable "
                            f"objects, while received a {type(func)}")
        return _scoped_callable(func, make_scope)
    decorate.__name__ = decorate.__qualname__ = decorator_name
    return decorate


def set_np_shape(active):
    """Turn NumPy shape semantics on or off for this thread; return the previous state.

    Parameters
    ----------
    active : bool
        True: ``()`` is a scalar's shape, 0 a zero size, -1 an unknown dim.

    Returns
    -------
    bool
        The previous state.
    """
    return shape_semantics.set_np_shape(active)


def is_np_shape():
    """Whether this thread has NumPy shape semantics on."""
    return shape_semantics.is_np_shape()


def np_shape(active=True):
    """A ``with`` scope turning NumPy shape semantics on (``active=True``) or off,
    and restoring the previous state on exit (``active=None``: left as it is)."""
    return _ShapeScope(active)


def np_array(active=True):
    """A ``with`` scope turning NumPy array semantics on or off (``True`` raises)."""
    return _LegacyOnlyScope(active, _NP_ARRAY_MSG)


def is_np_array():
    """Whether NumPy array semantics is on: always ``False`` here."""
    return False


_shape_decorator = _decorator_under(np_shape, "use_np_shape")
_array_decorator = _decorator_under(np_array, "use_np_array")


def use_np_shape(func):
    """Decorate a function, or every method of a class, to run under NumPy shape
    semantics (the thread's previous semantics restored after each call)."""
    return _shape_decorator(func)


def use_np_array(func):
    """Decorate a function or class to run under NumPy array semantics (calling raises)."""
    return _array_decorator(func)


def use_np(func):
    """Both semantics (shape outermost): calling the result raises :class:`MXNetError`."""
    return use_np_shape(use_np_array(func))


def set_np(shape=True, array=True):
    """Set NumPy shape and array semantics together (array semantics only off).

    Raises
    ------
    ValueError
        ``shape=False`` with ``array=True`` (as mxnet).
    MXNetError
        Turning array semantics on.
    """
    if array and not shape:
        raise ValueError("NumPy Shape semantics is required in using NumPy array semantics.")
    if array:
        raise MXNetError(_NP_ARRAY_MSG)
    set_np_shape(shape)


def reset_np():
    """Turn NumPy shape and array semantics off."""
    set_np(shape=False, array=False)


# -- misc ------------------------------------------------------------------------------

def set_module(module):
    """Decorator that sets ``__module__`` of a function or class to ``module``
    (``None`` leaves it as it is)."""
    def relabel(obj):
        if module is not None:
            obj.__module__ = module
        return obj
    return relabel


def _sanity_check_params(func_name, unsupported_params, param_dict):
    """Refuse the first of ``unsupported_params`` present in ``param_dict``."""
    given = [p for p in unsupported_params if p in param_dict]
    if given:
        raise NotImplementedError(f"function {func_name} does not support parameter "
                                  f"{given[0]}")


def getenv(name):
    """The value of environment variable ``name``, or ``None`` if it is not set."""
    return os.environ.get(name)


def setenv(name, value):
    """Set environment variable ``name`` to ``value``; ``None`` unsets it."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)
