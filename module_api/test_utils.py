"""``mx.test_utils``: the helpers mxnet 1.9.1's tests and ported test suites use.

Comparison (``almost_equal``, ``assert_almost_equal`` with mxnet's full
signature and mismatch report, ``same``, ``same_array``), random data
(``rand_ndarray``, ``rand_shape_2d/3d/nd``, ``random_arrays``), symbolic
checks run on this project's own executors (``simple_forward``,
``check_symbolic_forward``, ``check_symbolic_backward``,
``check_numeric_gradient``, ``check_consistency``), ``compare_optimizer``,
and the context helpers (``default_context``, ``set_default_context``,
``environment``, ``discard_stderr``, ``retry``). Signatures, default
tolerances (per dtype) and error messages follow mxnet 1.9.1. Arrays may be
NDArrays, torch tensors, numpy arrays or numbers.

Differences from mxnet, each an error that says so:

* Storage types other than ``'default'`` (``csr``, ``row_sparse``) do not
  exist here: ``rand_ndarray(..., stype='csr')`` raises.
* Executors compute in float32. The symbolic checks take ``dtype=np.float32``
  (the default) or ``"asnumpy"`` (float inputs are then given in float32);
  float16 / float64 raise, as does a ``type_dict`` entry other than float32
  in ``check_consistency``.
"""
from __future__ import annotations

import numbers
import os
import sys
from contextlib import contextmanager

import numpy as np
import numpy.random as rnd
import numpy.testing as npt
import torch

from compiler.errors import MXNetError
from runtime import context as _context
from runtime.context import current_context

from . import io as _io
from . import ndarray as _nd
from .util import getenv, setenv, use_np  # noqa: F401  (mxnet re-exports them here)


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


def _np(x):
    """A numpy view of an NDArray / tensor (other values unchanged)."""
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return torch.Tensor.numpy(t.as_subclass(torch.Tensor)).copy()
    return x


def effective_dtype(dat):
    """The dtype whose tolerances apply to ``dat`` (its own dtype: no TF32 here)."""
    return np.asarray(_np(dat)).dtype


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


# -- random data -----------------------------------------------------------------------

def random_arrays(*shapes):
    """Standard-normal float32 numpy arrays of the given shapes (one array if one shape)."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, **kwargs):
    """Uniform numpy arrays (``low``, ``high``, ``dtype`` keywords)."""
    low = kwargs.pop("low", 0.0)
    high = kwargs.pop("high", 1.0)
    dtype = kwargs.pop("dtype", default_dtype())
    if kwargs:
        raise TypeError("Got unexpected argument/s : " + str(kwargs.keys()))
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population, k):
    """``k`` elements of ``population`` in random order."""
    assert 0 <= k <= len(population)
    population_copy = population[:]
    np.random.shuffle(population_copy)
    return population_copy[0:k]


def _check_stype(stype, what):
    if stype not in (None, "default"):
        raise MXNetError(f"{what}: storage type {stype!r} is not supported; symtriton has dense "
                         f"arrays only (stype='default')")


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random dense NDArray of ``shape`` (standard normal, cast to ``dtype``).

    Parameters
    ----------
    shape : tuple of int
    stype : str
        ``'default'`` only; ``'csr'`` / ``'row_sparse'`` raise :class:`MXNetError`.
    dtype : numpy dtype, optional
        float32 when not given.
    ctx : Context, optional
        :func:`default_context` when not given.
    density, modifier_func, shuffle_csr_indices, distribution
        Sparse-only options of mxnet; ignored for dense arrays.
    """
    _check_stype(stype, "rand_ndarray")
    ctx = ctx if ctx else default_context()
    return _nd.array(random_arrays(shape), ctx=ctx, dtype=dtype)


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return rnd.randint(low, dim0 + 1), rnd.randint(low, dim1 + 1)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return rnd.randint(low, dim0 + 1), rnd.randint(low, dim1 + 1), rnd.randint(low, dim2 + 1)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return tuple(rnd.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    x = np.random.randint(x_low, x_high, dtype=np.int64)
    y = np.random.randint(y_low, y_high, dtype=np.int64)
    return x, y


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """Reduce ``dat`` over ``axis`` (int, tuple or None) with a numpy reduction."""
    if isinstance(axis, int):
        axis = [axis]
    else:
        axis = list(axis) if axis is not None else range(len(dat.shape))
    ret = dat
    for i in reversed(sorted(axis)):
        ret = numpy_reduce_func(ret, axis=i)
    if keepdims:
        keepdims_shape = list(dat.shape)
        for i in axis:
            keepdims_shape[i] = 1
        ret = ret.reshape(tuple(keepdims_shape))
    return ret


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
    return np.array_equal(_np(a), _np(b))


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
    a, b = _np(a), _np(b)
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
        checkShapes(_np(a), _np(b))
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_np(a)), np.asarray(_np(b))
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
    a, b = (np.asarray(_np(x), dtype=np.float64) for x in (a, b))
    equals = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    err = 1 - np.count_nonzero(equals) / equals.size
    if err > etol:
        index, rel = _find_max_violation(a, b, rtol, atol)
        msg = "Error %f exceeds tolerance rtol=%e, atol=%e, etol=%e. %s" % (
            rel, rtol, atol, etol, locationError(a, b, index, names, maxError=True))
        raise AssertionError(npt.build_err_msg([a, b], err_msg=msg, names=names))


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    """Like :func:`assert_almost_equal`, ignoring positions where either is NaN."""
    a, b = np.copy(_np(a)), np.copy(_np(b))
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


# -- optimizers ---------------------------------------------------------------------------

def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """Compare two (possibly nested tuples of) arrays; ``None`` on either side passes."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def compare_optimizer(opt1, opt2, shape, dtype, w_stype="default", g_stype="default",
                      rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """Run one update of ``opt1`` and ``opt2`` on equal weights and gradients; compare.

    Parameters
    ----------
    opt1, opt2 : Optimizer
    shape : tuple, or list of tuples
        One weight's shape; a list means ``ntensors`` weights, ``opt1``
        updating them one at a time and ``opt2`` all in one call.
    dtype : numpy dtype
    w_stype, g_stype : str
        ``'default'`` only.
    compare_states : bool
        Also compare the optimizer states before and after.
    """
    _check_stype(w_stype, "compare_optimizer w_stype")
    _check_stype(g_stype, "compare_optimizer g_stype")
    ctx = default_context()

    def uniform(s):
        return _nd.random.uniform(shape=s, ctx=ctx, dtype=dtype)
    if not isinstance(shape, list):
        assert ntensors == 1
        w2, g2 = uniform(shape), uniform(shape)
        w1, g1 = w2.copyto(ctx), g2.copyto(ctx)
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        opt1.update_multi_precision(0, w1, g1, state1)
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    w1 = tuple(uniform(s) for s in shape)
    g1 = tuple(uniform(s) for s in shape)
    w2 = tuple(w.copyto(ctx) for w in w1)
    g2 = tuple(g.copyto(ctx) for g in g1)
    state2 = [opt2.create_state_multi_precision(0, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, state2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, state2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)


# -- environment and process helpers -------------------------------------------------------

def list_gpus():
    """``range(number of GPUs)``."""
    return range(torch.cuda.device_count())


@contextmanager
def environment(*args):
    """Set environment variables for the ``with`` body, restoring them afterwards.

    Parameters
    ----------
    *args
        ``name, value`` for one variable, or one dict ``{name: value}``;
        a ``None`` value unsets the variable.
    """
    if len(args) == 1 and isinstance(args[0], dict):
        env_vars = args[0]
    else:
        assert len(args) == 2, "Expecting one dict arg or two args: env var name and value"
        env_vars = {args[0]: args[1]}
    snapshot = {name: os.environ.get(name) for name in env_vars}
    for name, value in env_vars.items():
        setenv(name, value)
    try:
        yield
    finally:
        _nd.waitall()
        for name, value in snapshot.items():
            setenv(name, value)


@contextmanager
def discard_stderr():
    """Send stderr to ``/dev/null`` in the body: file descriptor 2 (what C code writes)
    and, when it is another descriptor, the one behind ``sys.stderr``."""
    fds = {2}
    try:
        fds.add(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        pass                        # sys.stderr has no descriptor (a virtual pipe)
    with open(os.devnull, "w") as bit_bucket:
        sys.stderr.flush()
        saved = {fd: os.dup(fd) for fd in sorted(fds)}
        try:
            for fd in saved:
                os.dup2(bit_bucket.fileno(), fd)
            yield
        finally:
            sys.stderr.flush()
            for fd, old in saved.items():
                os.dup2(old, fd)
                os.close(old)


class DummyIter(_io.DataIter):
    """An iterator returning the first batch of ``real_iter`` forever (speed tests)."""

    def __init__(self, real_iter):
        super().__init__()
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(real_iter)

    def __iter__(self):
        return self

    def next(self):
        """The first batch of the real iterator; never raises ``StopIteration``."""
        return self.the_batch


# the symbolic checks live in their own file; they use the helpers above
from ._symbolic_checks import (  # noqa: E402,F401
    _parse_aux_states, _parse_location, check_consistency, check_numeric_gradient, check_speed,
    check_symbolic_backward, check_symbolic_forward, numeric_grad, simple_forward)
