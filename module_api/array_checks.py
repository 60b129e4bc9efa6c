"""Array comparison for ``mx.test_utils``: tolerances, defaults and ``assert_almost_equal``.

The names, signatures, per-dtype default tolerances and mismatch report are the
ones mxnet 1.9.1's tests call and read. Arrays may be NDArrays, torch tensors,
numpy arrays or numbers. ``test_utils.py`` (the public ``mx.test_utils``) exports
every public name here; ``_symbolic_checks.py`` compares with them.
"""
from __future__ import annotations

import json
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


# Integer and boolean arrays compare exactly.
_EXACT_DTYPES = (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64)


def _float_table(half, single, double, exact=None):
    """``{dtype: value}`` for float16/32/64, then ``exact`` for every exact dtype if given."""
    table = {np.dtype(np.float16): half, np.dtype(np.float32): single,
             np.dtype(np.float64): double}
    if exact is not None:
        table.update((np.dtype(kind), exact) for kind in _EXACT_DTYPES)
    return table


def default_rtols():
    """Default relative tolerance per dtype (mxnet's: float16 1e-2, float32 1e-4,
    float64 1e-5, integers and bool 0)."""
    return _float_table(1e-2, 1e-4, 1e-5, exact=0)


def default_atols():
    """Default absolute tolerance per dtype (mxnet's: float16 1e-1, float32 1e-3,
    float64 1e-20, integers and bool 0)."""
    return _float_table(1e-1, 1e-3, 1e-20, exact=0)


def default_numeric_eps():
    """Default finite-difference step per float dtype: 2**-6, 2**-9 and 2**-14, powers
    of two so that ``x +/- eps/2`` is exact."""
    return _float_table(2.0 ** -6, 2.0 ** -9, 2.0 ** -14)


def as_numpy(x):
    """``x`` as numpy: an NDArray / tensor copied out (bfloat16 as float32), a csr /
    row_sparse array densified; anything else is returned unchanged."""
    if getattr(x, "stype", "default") in ("csr", "row_sparse"):
        return x.asnumpy()
    if not isinstance(x, torch.Tensor):
        return x
    host = x.detach().cpu()
    if torch_dtype(host) == torch.bfloat16:
        host = host.float()      # numpy has no bfloat16
    return torch.Tensor.numpy(host.as_subclass(torch.Tensor)).copy()


def effective_dtype(dat):
    """The dtype whose tolerances apply to ``dat``: its own (no TF32 math here)."""
    return np.asarray(as_numpy(dat)).dtype


# -- tolerances -------------------------------------------------------------------------

def get_tolerance(dat, tol, default_tol):
    """The tolerance for ``dat``.

    A number ``tol`` applies as given; otherwise ``tol`` (a ``{dtype: value}``
    dict, or ``None``) is looked up by ``dat``'s dtype, then ``default_tol``,
    then 0.
    """
    if isinstance(tol, numbers.Number):
        return tol
    kind = effective_dtype(dat)
    overrides = tol if tol is not None else {}
    return overrides.get(kind, default_tol.get(kind, 0))


def get_tols(x, y, rtol, atol):
    """``(rtol, atol)`` for comparing ``x`` with ``y``: the looser of their two dtypes'."""
    def looser(tol, defaults):
        return max(get_tolerance(x, tol, defaults), get_tolerance(y, tol, defaults))
    return looser(rtol, default_rtols()), looser(atol, default_atols())


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    """``rtol``, or ``dtype``'s default relative tolerance when it is ``None``."""
    if rtol is not None:
        return rtol
    return default_rtols()[dtype]


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    """``atol``, or ``dtype``'s default absolute tolerance when it is ``None``."""
    if atol is not None:
        return atol
    return default_atols()[dtype]


def get_etol(etol=None):
    """The share of elements allowed to mismatch: ``etol``, 0 when ``None``."""
    return etol if etol is not None else 0


def check_stype(stype, what):
    """Refuse storage types other than ``'default'`` where only dense arrays are supported."""
    if stype not in (None, "default"):
        raise MXNetError(f"{what}: storage type {stype!r} is not supported here; only "
                         f"stype='default' (mx.nd.sparse makes csr / row_sparse arrays)")


# -- comparisons ------------------------------------------------------------------------

def _find_max_violation(a, b, rtol, atol):
    """``(index, ratio)`` of the element furthest outside tolerance.

    ``ratio`` is ``|a - b| / (atol + rtol * |b|)``; equal elements (inf included)
    count as 0 and a NaN ratio wins.
    """
    allowed = atol + rtol * np.abs(b)
    with np.errstate(invalid="ignore"):      # NaN and inf - inf are expected here
        gap = np.where(np.equal(a, b), 0, np.abs(a - b))
        ratio = gap / (allowed + 1e-20)
    worst = np.unravel_index(np.argmax(ratio), ratio.shape)
    return tuple(int(i) for i in worst), np.max(ratio)


def same(a, b):
    """Whether two arrays are exactly equal (shape and values)."""
    return np.array_equal(as_numpy(a), as_numpy(b))


def checkShapes(a, b):  # noqa: N802  (mxnet's name)
    """Raise ``AssertionError`` (mxnet's message) unless ``a`` and ``b`` have one shape."""
    shape_a, shape_b = np.shape(a), np.shape(b)
    if shape_a == shape_b:
        return
    text = "a.shape = {} and b.shape = {} are not equal".format(str(shape_a), str(shape_b))
    raise AssertionError(npt.build_err_msg([a, b], err_msg=text))


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """Whether ``a`` and ``b`` agree within ``rtol`` / ``atol`` (``np.allclose``).

    ``None`` tolerances are float64's defaults, as in mxnet; ``use_broadcast=False``
    raises ``AssertionError`` on different shapes.
    """
    left, right = as_numpy(a), as_numpy(b)
    if not use_broadcast:
        checkShapes(left, right)
    return np.allclose(left, right, rtol=get_rtol(rtol), atol=get_atol(atol),
                       equal_nan=equal_nan)


def locationError(a, b, index, names, maxError=False):  # noqa: N802,N803  (mxnet's names)
    """The ``Location of error: (i, j), a=..., b=...`` line of a mismatch report."""
    which = "maximum " if maxError else ""
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        which, str(index), names[0], a[index], names[1], b[index])


def _count_mismatches(a, b, rtol, atol, names, equal_nan, mismatches):
    """Count the elements outside tolerance, worst first, printing the first few.

    Each step zeroes the worst element of working copies until the rest agree.
    Returns ``(count, capped)``: ``capped`` when counting stopped after
    ``mismatches[1]`` elements (``count`` is then one more); ``mismatches[1] <= 0``
    counts them all. Lines are printed for the first ``mismatches[0]``.
    """
    to_print, to_count = mismatches
    rest_a, rest_b = a.copy(), b.copy()
    index, ratio = _find_max_violation(a, b, rtol, atol)
    count = 0
    while count < a.size:
        count += 1
        if count <= to_print:
            print("%3d: Error %f  %s" % (count, ratio, locationError(a, b, index, names)))
        rest_a[index] = rest_b[index] = 0
        if almost_equal(rest_a, rest_b, rtol, atol, equal_nan=equal_nan):
            return count, False
        if 0 < to_count <= count:
            return count + 1, True
        index, ratio = _find_max_violation(rest_a, rest_b, rtol, atol)
    return count + 1, False


def _mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches):
    """The text of ``assert_almost_equal``'s error (mxnet's wording)."""
    worst, ratio = _find_max_violation(a, b, rtol, atol)
    if worst == ():
        return "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (ratio, rtol, atol)
    print("\n*** Maximum errors for vector of size {}:  rtol={}, atol={}\n".format(
        a.size, rtol, atol))
    count, capped = _count_mismatches(a, b, rtol, atol, names, equal_nan, mismatches)
    share = "%s%f" % ("at least " if capped else "", 100 * count / a.size)
    return "Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%%).\n%s" % (
        ratio, rtol, atol, share, locationError(a, b, worst, names, maxError=True))


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
    left, right = np.asarray(as_numpy(a)), np.asarray(as_numpy(b))
    if left.dtype == np.bool_ and right.dtype == np.bool_:
        np.testing.assert_equal(left, right)
        return
    if not almost_equal(left, right, rtol, atol, equal_nan=equal_nan):
        _raise_mismatch(left, right, rtol, atol, names, equal_nan, mismatches)


def _raise_mismatch(left, right, rtol, atol, names, equal_nan, mismatches):
    """Print the worst mismatches and raise ``AssertionError`` with mxnet's report."""
    left, right = (np.array(side) for side in np.broadcast_arrays(left, right))
    text = _mismatch_report(left, right, rtol, atol, names, equal_nan, mismatches)
    with np.printoptions(threshold=4, suppress=True):      # mxnet sets these globally
        raise AssertionError(npt.build_err_msg([left, right], err_msg=text))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    """:func:`assert_almost_equal` with numpy's ``assert_allclose`` defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=("a", "b"),
                                 equal_nan=False, mismatches=(10, 10)):
    """Like :func:`assert_almost_equal`, allowing a share ``etol`` of elements to differ.

    Past ``etol`` the error is :func:`assert_almost_equal`'s report, as in mxnet.
    """
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol, atol, names, equal_nan, mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    left, right = np.asarray(as_numpy(a)), np.asarray(as_numpy(b))
    close = np.isclose(left, right, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if 1 - np.count_nonzero(close) / close.size > etol:
        _raise_mismatch(left, right, rtol, atol, names, equal_nan, mismatches)


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    """Like :func:`assert_almost_equal`, skipping the positions where either side is NaN."""
    left, right = np.copy(as_numpy(a)), np.copy(as_numpy(b))
    either_nan = np.isnan(left) | np.isnan(right)
    left[either_nan] = 0
    right[either_nan] = 0
    assert_almost_equal(left, right, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """Assert that ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {exception_type.__name__}")


def same_array(array1, array2):
    """Whether two NDArrays share memory: a write through ``array1`` shows in ``array2``."""
    array1[:] += 1
    try:
        moved_together = same(array1, array2)
    finally:
        array1[:] -= 1
    return moved_together and same(array1, array2)


def same_symbol_structure(sym1, sym2):
    """Whether two symbols have the same operator at every node position (as far as
    the shorter graph goes)."""
    ops1 = [node["op"] for node in json.loads(sym1.tojson())["nodes"]]
    ops2 = [node["op"] for node in json.loads(sym2.tojson())["nodes"]]
    return all(op1 == op2 for op1, op2 in zip(ops1, ops2))


def collapse_sum_like(a, shape):
    """Sum the numpy array ``a`` down to ``shape``, the inverse of broadcasting to
    ``a.shape``: over the leading extra axes and where ``shape`` has 1."""
    extra = a.ndim - len(shape)
    assert extra >= 0, f"collapse_sum_like: shape {shape} has more axes than {a.shape}"
    if a.size == 0 or np.prod(shape) == 0:
        return np.zeros(shape, dtype=a.dtype)
    summed = list(range(extra))
    for axis, (want, have) in enumerate(zip(shape, a.shape[extra:]), start=extra):
        assert want in (1, have), \
            f"collapse_sum_like: {a.shape} does not broadcast from {shape}"
        if want != have:
            summed.append(axis)
    return np.sum(a, axis=tuple(summed)).reshape(shape)


def retry(n):
    """Decorator: run a stochastic test up to ``n`` times until it passes."""
    assert n > 0, "retry(n) needs n >= 1"

    def decorate(test):
        def attempts(*args, **kwargs):
            for attempt in range(1, n + 1):
                try:
                    test(*args, **kwargs)
                    return
                except AssertionError:
                    if attempt == n:
                        raise
        return attempts
    return decorate
