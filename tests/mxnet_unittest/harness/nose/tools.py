"""``make_decorator`` and ``assert_raises``, as nose 1.3.7 defines them."""
import unittest

__all__ = ["make_decorator", "assert_raises"]

assert_raises = unittest.TestCase("__init__").assertRaises


def make_decorator(func):
    """A decorator that makes its wrapper look like ``func`` (name, doc, module,
    attributes), as nose's does."""
    def decorate(newfunc):
        name = func.__name__
        newfunc.__dict__ = dict(func.__dict__)
        newfunc.__doc__ = func.__doc__
        newfunc.__module__ = func.__module__
        if not hasattr(newfunc, "compat_co_firstlineno"):
            newfunc.compat_co_firstlineno = func.__code__.co_firstlineno
        try:
            newfunc.__name__ = name
        except TypeError:   # pragma: no cover - very old Pythons
            newfunc.compat_func_name = name
        return newfunc
    return decorate
