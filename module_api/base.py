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
mx_float_p = ctypes.POINTER(ctypes.c_float)
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
        # the same attributes as mxnet's (function name, operator alias, argument types)
        self.function = getattr(function, "__name__", str(function))
        self.alias = alias
        self.args = [str(type(arg)) for arg in args]

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
    return obj if isinstance(obj, (list, tuple)) else [obj]


def _bound_to_class(func):
    """``func`` as a class-level callable: a plain function becomes a classmethod."""
    return func if isinstance(func, (classmethod, staticmethod)) else classmethod(func)


class _ClassProperty:
    """The descriptor :func:`classproperty` makes: reading it (on the class or an
    instance) calls ``fget`` with the class; ``fset`` is set through :meth:`setter`
    and used when the class's metaclass is :class:`_ClassPropertyMeta`."""

    def __init__(self, fget, fset=None):
        self.fget = fget
        self.fset = fset

    def __get__(self, obj, owner=None):
        if owner is None:
            owner = type(obj)
        return self.fget.__get__(obj, owner)()

    def __set__(self, obj, value):
        # set on the class (through _ClassPropertyMeta): the setter gets that class
        owner = obj if isinstance(obj, type) else type(obj)
        if not self.fset:
            raise MXNetError("cannot use the setter: %s to set attribute; the classproperty "
                             "has none, define it with .setter" % owner.__name__)
        return self.fset.__get__(None if obj is owner else obj, owner)(value)

    def setter(self, func):
        self.fset = _bound_to_class(func)
        return self


class _ClassPropertyMeta(type):
    """Metaclass that routes ``Cls.name = value`` to a classproperty's setter."""

    def __setattr__(cls, key, value):
        prop = cls.__dict__.get(key)
        if isinstance(prop, _ClassProperty):
            return prop.__set__(cls, value)
        return super().__setattr__(key, value)


# mxnet's names for the two classes, for code that imports them from mx.base
_MXClassPropertyDescriptor = _ClassProperty
_MXClassPropertyMetaClass = _ClassPropertyMeta


def with_metaclass(meta, *bases):
    """A base class that makes its subclasses with ``meta`` and ``bases``.

    ``class C(with_metaclass(Meta, Base))`` is ``class C(Base, metaclass=Meta)``
    (the Python 2/3 idiom mxnet uses): the temporary class's own metaclass
    replaces itself by ``meta`` when the subclass is created.
    """
    class _Bridge(type):
        def __new__(mcs, name, _temporary_bases, namespace):
            return meta(name, bases, namespace)

        @classmethod
        def __prepare__(mcs, name, _temporary_bases):
            return meta.__prepare__(name, bases)
    return type.__new__(_Bridge, "temporary_class", (), {})


def classproperty(func):
    """A read-only property of the class (also readable on instances).

    Parameters
    ----------
    func : callable
        Called with the class; a plain function is made a classmethod.
    """
    return _ClassProperty(_bound_to_class(func))
