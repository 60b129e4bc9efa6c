"""``mx.base``: the error classes and type helpers mxnet 1.9.1 scripts import.

Only the parts of mxnet's ``base.py`` that mean something without
libmxnet are here: the error classes (``MXNetError`` is the project's own
:class:`compiler.errors.MXNetError`, the same class everywhere),
``register_error`` / ``error_types``, the Python type tuples
(``string_types``, ``numeric_types``, ``integer_types``), ``py_str``,
``_as_list``, ``_Null``, ``classproperty`` / ``with_metaclass``,
``data_dir`` and the ctypes scalar aliases (``mx_uint``, ``mx_float``,
``mx_real_t`` ...). The C-API plumbing (``_LIB``, ``check_call``, handles,
``c_str``) has no library behind it here and is left out on purpose: code
that calls it talks to libmxnet itself and cannot run unchanged.

Note: mxnet's ``MXNetError`` derives from ``RuntimeError``; this project's
derives from ``ValueError`` (README.md), so ``except MXNetError`` works
the same while ``except RuntimeError`` does not catch it.
"""
from __future__ import annotations

import ctypes
import os
import platform

import numpy as _np

from compiler.errors import MXNetError, NotImplementedForSymbol

__all__ = ["MXNetError"]

integer_types = (int, _np.int32, _np.int64)
numeric_types = (float, int, _np.generic)
string_types = (str,)
error_types: dict = {}

mx_int = ctypes.c_int
mx_uint = ctypes.c_uint
mx_int64 = ctypes.c_int64
mx_float = ctypes.c_float
mx_float_p = ctypes.POINTER(mx_float)
mx_real_t = _np.float32

__version__ = "1.9.1"


def py_str(x):
    """Decode UTF-8 ``bytes`` to ``str`` (mxnet uses it on C strings)."""
    return x.decode("utf-8")


def data_dir_default():
    """The default data directory: ``%APPDATA%/mxnet`` on Windows, ``~/.mxnet`` elsewhere."""
    if platform.system() == "Windows":
        return os.path.join(os.environ.get("APPDATA", ""), "mxnet")
    return os.path.join(os.path.expanduser("~"), ".mxnet")


def data_dir():
    """The data directory: ``$MXNET_HOME`` if set, else :func:`data_dir_default`."""
    return os.getenv("MXNET_HOME", data_dir_default())


class _NullType:
    """Placeholder for arguments that were not given (mxnet's ``_Null``)."""

    def __repr__(self):
        return "_Null"


_Null = _NullType()


def register_error(func_name=None, cls=None):
    """Register an error class so it can be looked up by name in ``error_types``.

    Parameters
    ----------
    func_name : str or type, optional
        The name to register under; a class given here is registered under
        its own ``__name__`` (mxnet's decorator form ``@register_error``).
    cls : type, optional
        The class to register.

    Returns
    -------
    The class, or a decorator that registers and returns it.
    """
    if callable(func_name) and cls is None:
        cls, func_name = func_name, func_name.__name__

    def register(mycls):
        error_types[func_name or mycls.__name__] = mycls
        return mycls
    return register(cls) if cls is not None else register


register_error("MXNetError", MXNetError)


register_error(NotImplementedForSymbol)


class NotSupportedForSparseNDArray(MXNetError):
    """A function that works on dense NDArrays only was given a sparse one.

    The sparse arrays of ``mx.nd.sparse`` raise their own errors (as mxnet's
    ``__getitem__`` / ``__setitem__`` do); the class exists so that
    ``except NotSupportedForSparseNDArray`` in ported code still resolves.
    """

    def __init__(self, function, alias, *args):
        super().__init__()
        self.function = function.__name__
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self):
        msg = f"Function {self.function}"
        if self.alias:
            msg += f' (namely operator "{self.alias}")'
        if self.args:
            msg += f" with arguments ({', '.join(self.args)})"
        return msg + " is not supported for SparseNDArray and only available in NDArray."


def _as_list(obj):
    """``obj`` itself if it is a list or tuple, else ``[obj]``.

    Parameters
    ----------
    obj : object

    Returns
    -------
    list or tuple
    """
    if isinstance(obj, (list, tuple)):
        return obj
    return [obj]


class _MXClassPropertyDescriptor:
    def __init__(self, fget, fset=None):
        self.fget = fget
        self.fset = fset

    def __get__(self, obj, clas=None):
        if clas is None:
            clas = type(obj)
        return self.fget.__get__(obj, clas)()

    def __set__(self, obj, value):
        if not self.fset:
            raise MXNetError("cannot use the setter of a classproperty that has none; "
                             "define it with .setter")
        type_ = type(obj)
        return self.fset.__get__(obj, type_)(value)

    def setter(self, func):
        if not isinstance(func, (classmethod, staticmethod)):
            func = classmethod(func)
        self.fset = func
        return self


class _MXClassPropertyMetaClass(type):
    def __setattr__(cls, key, value):
        obj = cls.__dict__.get(key)
        if obj and isinstance(obj, _MXClassPropertyDescriptor):
            return obj.__set__(cls, value)
        return super().__setattr__(key, value)


def with_metaclass(meta, *bases):
    """Create a base class with metaclass ``meta`` (mxnet's py2/py3 helper)."""
    class metaclass(type):  # noqa: N801
        def __new__(cls, name, this_bases, d):
            return meta(name, bases, d)

        @classmethod
        def __prepare__(cls, name, this_bases):
            return meta.__prepare__(name, bases)
    return type.__new__(metaclass, "temporary_class", (), {})


def classproperty(func):
    """A property of the class rather than of its instances."""
    if not isinstance(func, (classmethod, staticmethod)):
        func = classmethod(func)
    return _MXClassPropertyDescriptor(func)
