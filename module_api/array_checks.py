"""Array comparison for ``mx.test_utils``: tolerances, defaults and ``assert_almost_equal``.

mxnet 1.9.1's comparison helpers with its signatures, default tolerances (per dtype)
and mismatch report; arrays may be NDArrays, torch tensors, numpy arrays or numbers.
``test_utils.py`` (the public ``mx.test_utils``) exports every name here, and the
symbolic checks (``_symbolic_checks.py``) compare with them.
"""
from __future__ import annotations

import numbers

import numpy as np
import numpy.testing as npt
import torch

from compiler.errors import MXNetError
from runtime import context as _context
from runtime.context import current_context
from runtime.ndarray import torch_dtype


# -- contexts and defaults --------------------------------------------------------------

def default_context():
    """The context tests run on: the current context (``cpu(0)`` unless changed)."""
    return current_context()


def set_default_context(ctx):
    """Make ``ctx`` the current (default) context of this thread."""
    _context._local.ctx = ctx


def default_dtype():
    """The default data type of the tests: float32."""
    return np.float32


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


def default_numeric_eps():
    """Default finite-difference step per dtype (powers of two, exact as input deltas)."""
    return {np.dtype(np.float16): 1.0 / 2**6, np.dtype(np.float32): 1.0 / 2**9,
            np.dtype(np.float64): 1.0 / 2**14}


def as_numpy(x):
    """A numpy view of an NDArray / tensor, the dense values of a csr / row_sparse
    array (other values unchanged)."""
    if getattr(x, "stype", "default") in ("csr", "row_sparse"):
        return x.asnumpy()
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if torch_dtype(t) == torch.bfloat16:
            t = t.float()
        return torch.Tensor.numpy(t.as_subclass(torch.Tensor)).copy()
    return x


def effective_dtype(dat):
    """The dtype whose tolerances apply to ``dat`` (its own dtype: no TF32 here)."""
    return np.asarray(as_numpy(dat)).dtype


_dtype = effective_dtype


def get_tolerance(dat, tol, default_tol):
    """``tol`` if it is a number, else its (or ``default_tol``'s) entry for ``dat``'s dtype."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = effective_dtype(dat)
    tol = {} if tol is None else tol
    return tol.get(dtype, default_tol.get(dtype, 0))


def get_tols(x, y, rtol, atol):
    """``(rtol, atol)`` for comparing ``x`` and ``y``: the larger default of the two dtypes."""
    rtol = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    atol = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return rtol, atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    return default_rtols()[dtype] if rtol is None else rtol


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    return default_atols()[dtype] if atol is None else atol


def get_etol(etol=None):
    """Allowed fraction of mismatching elements (0 unless given)."""
    return 0 if etol is None else etol


def check_stype(stype, what):
    """Refuse storage types other than ``'default'`` where only dense arrays are supported."""
    if stype not in (None, "default"):
        raise MXNetError(f"{what}: storage type {stype!r} is not supported here; only "
                         f"stype='default' (mx.nd.sparse makes csr / row_sparse arrays)")


# -- comparisons ------------------------------------------------------------------------

def _find_max_violation(a, b, rtol, atol):
    """Location and size of the largest tolerance violation (inf == inf counts as equal)."""
    absdiff = np.where(np.equal(a, b), 0, np.abs(a - b))
    tol = atol + rtol * np.abs(b)
    violation = absdiff / (tol + 1e-20)
    loc = np.argmax(violation)
    index = tuple(int(i) for i in np.unravel_index(loc, violation.shape))
    return index, np.max(violation)


def same(a, b):
    """Whether two arrays are exactly equal (shape and values)."""
    return np.array_equal(as_numpy(a), as_numpy(b))


def checkShapes(a, b):  # noqa: N802  (mxnet's name)
    if np.shape(a) != np.shape(b):
        raise AssertionError(npt.build_err_msg(
            [a, b], err_msg="a.shape = {} and b.shape = {} are not equal".format(
                str(np.shape(a)), str(np.shape(b)))))


_check_shapes = checkShapes


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """Whether ``a`` and ``b`` are equal within ``rtol`` / ``atol`` (``np.allclose``).

    ``None`` tolerances are float64's defaults, as in mxnet.
    """
    a, b = as_numpy(a), as_numpy(b)
    if not use_broadcast:
        checkShapes(a, b)
    return np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan)


def locationError(a, b, index, names, maxError=False):  # noqa: N802,N803
    """The ``Location of error: (i, j), a=..., b=...`` line of a mismatch report."""
    maximum = "maximum " if maxError else ""
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        maximum, str(index), names[0], a[index], names[1], b[index])


def _mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches):
    index, rel = _find_max_violation(a, b, rtol, atol)
    if index == ():
        return "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (rel, rtol, atol)
    index_err, rel_err = index, rel
    print("\n*** Maximum errors for vector of size {}:  rtol={}, atol={}\n".format(
        a.size, rtol, atol))
    a_tmp, b_tmp = a.copy(), b.copy()
    i = 1
    while i <= a.size:
        if i <= mismatches[0]:
            print("%3d: Error %f  %s" % (i, rel, locationError(a, b, index, names)))
        a_tmp[index] = b_tmp[index] = 0
        if almost_equal(a_tmp, b_tmp, rtol, atol, equal_nan=equal_nan):
            break
        i += 1
        if i <= mismatches[1] or mismatches[1] <= 0:
            index, rel = _find_max_violation(a_tmp, b_tmp, rtol, atol)
        else:
            break
    degree = "at least " if mismatches[1] > 0 and i > mismatches[1] else ""
    return "Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%f%%).\n%s" % (
        rel_err, rtol, atol, degree, 100 * i / a.size,
        locationError(a, b, index_err, names, maxError=True))


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Raise ``AssertionError`` unless ``a`` and ``b`` are equal within the tolerances.

    Parameters
    ----------
    a, b : NDArray, torch.Tensor, np.ndarray or number
    rtol, atol : None, float or dict of dtype -> float
        ``None`` picks mxnet's default of the less precise dtype of the two
        (float32: rtol 1e-4, atol 1e-3).
    names : tuple of str
        Names of ``a`` and ``b`` in the message.
    equal_nan : bool
        Whether NaN equals NaN.
    use_broadcast : bool
        ``False`` requires equal shapes.
    mismatches : tuple of int
        How many mismatching elements to print (``mismatches[0]``) and to
        count (``mismatches[1]``, <= 0: all) in the report.
    """
    if not use_broadcast:
        checkShapes(as_numpy(a), as_numpy(b))
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(as_numpy(a)), np.asarray(as_numpy(b))
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        np.testing.assert_equal(a, b)
        return
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return
    a, b = (np.array(x) for x in np.broadcast_arrays(a, b))
    err = _mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches)
    with np.printoptions(threshold=4, suppress=True):      # mxnet sets these globally
        raise AssertionError(npt.build_err_msg([a, b], err_msg=err))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=("a", "b"),
                                 equal_nan=False, mismatches=(10, 10)):
    """Like :func:`assert_almost_equal`, allowing a fraction ``etol`` of elements to differ."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol, atol, names, equal_nan, mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = (np.asarray(as_numpy(x), dtype=np.float64) for x in (a, b))
    equals = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    err = 1 - np.count_nonzero(equals) / equals.size
    if err > etol:
        index, rel = _find_max_violation(a, b, rtol, atol)
        msg = "Error %f exceeds tolerance rtol=%e, atol=%e, etol=%e. %s" % (
            rel, rtol, atol, etol, locationError(a, b, index, names, maxError=True))
        raise AssertionError(npt.build_err_msg([a, b], err_msg=msg, names=names))


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    """Like :func:`assert_almost_equal`, ignoring positions where either is NaN."""
    a, b = np.copy(as_numpy(a)), np.copy(as_numpy(b))
    nan_mask = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan_mask] = 0
    b[nan_mask] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """Assert that ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {exception_type.__name__}")


def same_array(array1, array2):
    """Whether two NDArrays share memory (checked by writing through one)."""
    array1[:] += 1
    if not same(array1, array2):
        array1[:] -= 1
        return False
    array1[:] -= 1
    return same(array1, array2)


def same_symbol_structure(sym1, sym2):
    """Whether two symbols have the same operator at every node position."""
    import json
    nodes1 = json.loads(sym1.tojson())["nodes"]
    nodes2 = json.loads(sym2.tojson())["nodes"]
    return all(n1["op"] == n2["op"] for n1, n2 in zip(nodes1, nodes2))


def collapse_sum_like(a, shape):
    """Sum ``a`` over the axes that ``shape`` broadcasts (numpy)."""
    assert len(a.shape) >= len(shape)
    if np.prod(shape) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    axes = []
    ndim_diff = len(a.shape) - len(shape)
    for i in range(len(a.shape)):
        if i < ndim_diff:
            axes.append(i)
        else:
            assert shape[i - ndim_diff] in (1, a.shape[i])
            if shape[i - ndim_diff] != a.shape[i]:
                axes.append(i)
    return np.sum(a, axis=tuple(axes)).reshape(shape)


def retry(n):
    """Decorator: run a stochastic test up to ``n`` times until it passes."""
    assert n > 0

    def decorate(f):
        def wrapper(*args, **kwargs):
            for i in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if i == n - 1:
                        raise
        return wrapper
    return decorate
