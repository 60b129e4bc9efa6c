"""``mx.test_utils``: the comparison helpers mxnet 1.9.1 tests use.

``almost_equal``, ``assert_almost_equal`` and ``same_array`` keep mxnet's
signatures, default tolerances (per dtype) and error message layout.
Arrays may be NDArrays, torch tensors, numpy arrays or numbers.
"""
from __future__ import annotations

import numbers

import numpy as np
import numpy.testing as npt
import torch


def default_rtols():
    """Default relative tolerance per dtype."""
    return {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4,
            np.dtype(np.float64): 1e-5, np.dtype(np.bool_): 0, np.dtype(np.int8): 0,
            np.dtype(np.uint8): 0, np.dtype(np.int32): 0, np.dtype(np.uint32): 0,
            np.dtype(np.int64): 0, np.dtype(np.uint64): 0}


def default_atols():
    """Default absolute tolerance per dtype."""
    return {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3,
            np.dtype(np.float64): 1e-20, np.dtype(np.bool_): 0, np.dtype(np.int8): 0,
            np.dtype(np.uint8): 0, np.dtype(np.int32): 0, np.dtype(np.uint32): 0,
            np.dtype(np.int64): 0, np.dtype(np.uint64): 0}


def _np(x):
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return torch.Tensor.numpy(t.as_subclass(torch.Tensor)).copy()
    return x


def _dtype(x):
    x = _np(x)
    return np.asarray(x).dtype


def get_tolerance(dat, tol, default_tol):
    if isinstance(tol, numbers.Number):
        return tol
    dtype = _dtype(dat)
    tol = {} if tol is None else tol
    return tol.get(dtype, default_tol.get(dtype, 0))


def get_tols(x, y, rtol, atol):
    rtol = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    atol = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return rtol, atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    return default_rtols()[dtype] if rtol is None else rtol


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    return default_atols()[dtype] if atol is None else atol


def _check_shapes(a, b):
    if np.shape(a) != np.shape(b):
        raise AssertionError(npt.build_err_msg(
            [a, b], err_msg="a.shape = {} and b.shape = {} are not equal".format(
                str(np.shape(a)), str(np.shape(b)))))


def same(a, b):
    """Whether two numpy arrays are exactly equal."""
    return np.array_equal(_np(a), _np(b))


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """Whether two arrays are equal within ``rtol`` / ``atol`` (np.allclose)."""
    a, b = _np(a), _np(b)
    if not use_broadcast:
        _check_shapes(a, b)
    return np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan)


def _find_max_violation(a, b, rtol, atol):
    absdiff = np.where(np.equal(a, b), 0, np.abs(a - b))
    tol = atol + rtol * np.abs(b)
    violation = absdiff / (tol + 1e-20)
    loc = np.argmax(violation)
    return np.unravel_index(loc, violation.shape), np.max(violation)


def _location_error(a, b, index, names, max_error=False):
    maximum = "maximum " if max_error else ""
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        maximum, str(index), names[0], a[index], names[1], b[index])


def assert_almost_equal(a, b, rtol=None, atol=None, names=('a', 'b'), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Raise ``AssertionError`` (with mxnet's message) unless ``a`` and ``b`` are close.

    ``rtol`` / ``atol`` are numbers or dicts dtype -> number; ``None`` picks
    mxnet's per-dtype defaults (float32: rtol 1e-4, atol 1e-3).
    """
    if not use_broadcast:
        _check_shapes(_np(a), _np(b))
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_np(a)), np.asarray(_np(b))
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        np.testing.assert_equal(a, b)
        return
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return
    a, b = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    index, rel = _find_max_violation(a, b, rtol, atol)
    err = "Error %f exceeds tolerance rtol=%e, atol=%e.\n%s" % (
        rel, rtol, atol, _location_error(a, b, index, names, max_error=True))
    raise AssertionError(npt.build_err_msg([a, b], err_msg=err, names=names))


def same_array(array1, array2):
    """Whether two NDArrays share memory (checked by writing through one)."""
    array1[:] += 1
    if not same(array1, array2):
        array1[:] -= 1
        return False
    array1[:] -= 1
    return same(array1, array2)


def assert_exception(f, exception_type, *args, **kwargs):
    """Assert that ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{f} did not raise {exception_type.__name__}")
