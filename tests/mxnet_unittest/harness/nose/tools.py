"""``make_decorator``, ``raises``, ``ok_``, ``eq_`` and ``assert_raises``, as nose 1.3.7
defines them."""
import unittest

__all__ = ["make_decorator", "raises", "ok_", "eq_", "assert_raises"]

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


def raises(*exceptions):
    """A test decorator: the test passes only if it raises one of ``exceptions``."""
    valid = " or ".join(e.__name__ for e in exceptions)

    def decorate(func):
        def newfunc(*args, **kw):
            try:
                func(*args, **kw)
            except exceptions:
                return
            raise AssertionError(f"{func.__name__}() did not raise {valid}")
        return make_decorator(func)(newfunc)
    return decorate


def ok_(expr, msg=None):
    """Assert that ``expr`` is true."""
    if not expr:
        raise AssertionError(msg)


def eq_(a, b, msg=None):
    """Assert that ``a == b``."""
    if not a == b:
        raise AssertionError(msg or f"{a!r} != {b!r}")
