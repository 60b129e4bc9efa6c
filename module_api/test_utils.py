"""``mx.test_utils``: the helpers mxnet 1.9.1's tests and ported test suites use.

Comparison (``almost_equal``, ``assert_almost_equal`` with mxnet's full
signature and mismatch report, ``same``, ``same_array``), random data
(``rand_ndarray``, ``rand_shape_2d/3d/nd``, ``random_arrays``), symbolic
checks run on this project's own executors (``simple_forward``,
``check_symbolic_forward``, ``check_symbolic_backward``,
``check_numeric_gradient``, ``check_consistency``), ``compare_optimizer``,
and the context helpers (``default_context``, ``set_default_context``,
``environment``, ``discard_stderr``, ``retry``), the statistical checks of random
generators (``verify_generator``, ``chi_square_check``, ``mean_check``, ``var_check``,
``gen_buckets_probs_with_ppf``: ``module_api/distribution_checks.py``) and the data set helpers
(``get_mnist``, ``get_mnist_ubyte``, ``get_mnist_iterator``, ``get_cifar10``:
local files only, see ``module_api/datasets.py``). Signatures, default
tolerances (per dtype) and error messages follow mxnet 1.9.1. Arrays may be
NDArrays, torch tensors, numpy arrays or numbers.

The symbolic checks take mxnet's ``dtype`` (float16, float32, float64 or
``"asnumpy"``) and ``check_consistency`` its ``type_dict`` entries: executors
compute in the dtypes they are bound with. Sparse arrays (``stype='csr'`` /
``'row_sparse'``) come from ``module_api/test_utils_sparse.py``; the symbolic
checks take only ``'default'`` gradient storage, and say so.
"""
from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import numpy.random as rnd
import torch

from compiler.errors import MXNetError

from .array_checks import (  # noqa: F401  (mx.test_utils exports them)
    almost_equal, as_numpy, assert_allclose, assert_almost_equal,
    assert_almost_equal_ignore_nan, assert_almost_equal_with_err, assert_exception, check_stype,
    checkShapes, collapse_sum_like, default_atols, default_context, default_dtype,
    default_numeric_eps, default_rtols, effective_dtype, get_atol, get_etol, get_rtol,
    get_tolerance, get_tols, locationError, retry, same, same_array, same_symbol_structure,
    set_default_context)
from ._symbolic_checks import (  # noqa: F401  (mx.test_utils exports them)
    _parse_aux_states, _parse_location, check_consistency, check_numeric_gradient, check_speed,
    check_symbolic_backward, check_symbolic_forward, numeric_grad, simple_forward)
from .distribution_checks import (  # noqa: F401  (mx.test_utils exports them)
    chi_square_check, gen_buckets_probs_with_ppf, mean_check, var_check, verify_generator)
from . import io as _io
from .datasets import (  # noqa: F401  (mx.test_utils exports them)
    get_cifar10, get_mnist, get_mnist_iterator, get_mnist_ubyte)
from . import ndarray as _nd
from .ndarray import array  # noqa: F401  (mxnet's test_utils exports it; its tests use it)
from .util import getenv, setenv, use_np  # noqa: F401  (mxnet re-exports them here)
from .test_utils_sparse import (  # noqa: F401  (mx.test_utils exports them)
    assign_each, assign_each2, create_sparse_array, create_sparse_array_zd,
    rand_sparse_ndarray)
from runtime.context import Context, cpu, current_context, gpu  # noqa: F401  (as mxnet's)


# -- random data -----------------------------------------------------------------------

def random_arrays(*shapes):
    """Standard-normal float32 numpy arrays of the given shapes (one array if one shape)."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, **kwargs):
    """Uniform numpy arrays, one per shape.

    Parameters
    ----------
    *shapes : tuple of int
    low, high : float, keyword only
        The interval, ``[0, 1)`` when not given.
    dtype : numpy dtype, keyword only
        :func:`default_dtype` when not given.
    """
    options = {"low": 0.0, "high": 1.0, "dtype": default_dtype()}
    unknown = {name: value for name, value in kwargs.items() if name not in options}
    if unknown:
        raise TypeError("Got unexpected argument/s : " + str(unknown.keys())
                        + "; random_uniform_arrays takes low, high and dtype")
    options.update(kwargs)
    low, high, dtype = options["low"], options["high"], options["dtype"]
    return [np.random.uniform(low, high, size=shape).astype(dtype) for shape in shapes]


def random_sample(population, k):
    """``k`` elements of ``population`` in random order (one ``np.random.shuffle`` draw)."""
    assert 0 <= k <= len(population), \
        "random_sample: k=%d must be between 0 and len(population)=%d" % (k, len(population))
    pool = population[:]
    np.random.shuffle(pool)
    return pool[:k]


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random array of ``shape``: dense (standard normal), or a csr / row_sparse one
    from :func:`rand_sparse_ndarray` (its distributions and options).

    Parameters
    ----------
    shape : tuple of int
    stype : str
        ``'default'``, ``'csr'`` or ``'row_sparse'``.
    density, dtype, modifier_func, shuffle_csr_indices, distribution
        As :func:`rand_sparse_ndarray` (dtype: float32 when not given).
    ctx : Context, optional
        :func:`default_context` when not given.
    """
    ctx = ctx or default_context()
    if stype in (None, "default"):
        return _nd.array(random_arrays(shape), ctx=ctx, dtype=dtype)
    if stype not in ("csr", "row_sparse"):
        check_stype(stype, "rand_ndarray")
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, dtype=dtype,
                                 modifier_func=modifier_func,
                                 shuffle_csr_indices=shuffle_csr_indices,
                                 distribution=distribution, ctx=ctx)
    return arr


def _random_dims(highs, allow_zero_size):
    """One uniform draw per dimension, in order: an int in ``[low, high]`` (``low`` is 0
    or 1)."""
    smallest = 0 if allow_zero_size else 1
    return tuple(rnd.randint(smallest, high + 1) for high in highs)


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    """A random 2-D shape, each size at most ``dim0`` / ``dim1`` (at least 1 unless
    ``allow_zero_size``)."""
    return _random_dims((dim0, dim1), allow_zero_size)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    """A random 3-D shape; see :func:`rand_shape_2d`."""
    return _random_dims((dim0, dim1, dim2), allow_zero_size)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random ``num_dim``-D shape, every size at most ``dim`` (one vectorised draw)."""
    smallest = 0 if allow_zero_size else 1
    return tuple(rnd.randint(smallest, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    """A random point: ``x`` in ``[x_low, x_high)``, then ``y`` in ``[y_low, y_high)``."""
    return tuple(np.random.randint(low, high, dtype=np.int64)
                 for low, high in ((x_low, x_high), (y_low, y_high)))


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """Reduce ``dat`` with a numpy reduction that takes one int axis at a time.

    Parameters
    ----------
    dat : numpy.ndarray
    axis : int, sequence of int or None
        The axes to reduce; None means all of them.
    keepdims : bool
        Keep the reduced axes with size 1.
    numpy_reduce_func : callable
        ``numpy_reduce_func(array, axis=int)``, e.g. ``np.sum`` or ``np.max``.
    """
    if isinstance(axis, int):
        axes = [axis]
    elif axis is None:
        axes = list(range(len(dat.shape)))
    else:
        axes = list(axis)
    out = dat
    for ax in sorted(axes, reverse=True):   # the highest first: lower axes keep their index
        out = numpy_reduce_func(out, axis=ax)
    if not keepdims:
        return out
    kept_shape = list(dat.shape)
    for ax in axes:
        kept_shape[ax] = 1
    return out.reshape(tuple(kept_shape))


# -- optimizers ---------------------------------------------------------------------------

def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """Compare two arrays, or two (nested) tuples of arrays element by element.

    ``None`` on either side passes: an optimizer without a state has None.
    """
    if t1 is None or t2 is None:
        return
    if not isinstance(t1, tuple):
        assert_almost_equal(t1, t2, rtol, atol)
        return
    for left, right in zip(t1, t2):
        compare_ndarray_tuple(left, right, rtol, atol)


def _optimizer_input(shape, dtype, stype, density, ctx):
    """``(dense copy, array)``: the array ``opt2`` is given and the dense one for ``opt1``."""
    if stype in (None, "default"):
        given = _nd.random.uniform(shape=shape, ctx=ctx, dtype=dtype)
        return given.copyto(ctx), given
    given = rand_ndarray(shape, stype, density=density, dtype=dtype)
    return given.copyto(ctx).tostype("default"), given


def _compare_one_weight(opt1, opt2, shape, dtype, stypes, tols, compare_states):
    ctx = default_context()
    w_stype, g_stype = stypes
    dense_w, weight = _optimizer_input(shape, dtype, w_stype, 1, ctx)   # every row stored
    dense_g, grad = _optimizer_input(shape, dtype, g_stype, None, ctx)
    dense_state = opt1.create_state_multi_precision(0, dense_w)
    state = opt2.create_state_multi_precision(0, weight)
    if compare_states:
        compare_ndarray_tuple(dense_state, state)
    opt1.update_multi_precision(0, dense_w, dense_g, dense_state)
    opt2.update_multi_precision(0, weight, grad, state)
    if compare_states:
        compare_ndarray_tuple(dense_state, state, *tols)
    assert_almost_equal(dense_w, weight, *tols)


def _compare_several_weights(opt1, opt2, shapes, dtype, tols, compare_states, ntensors):
    """``opt1`` updates the weights one at a time, ``opt2`` all of them in one call."""
    ctx = default_context()
    weights = tuple(_nd.random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shapes)
    grads = tuple(_nd.random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shapes)
    weights2 = tuple(w.copyto(ctx) for w in weights)
    grads2 = tuple(g.copyto(ctx) for g in grads)
    # mxnet creates every state of opt2 under index 0
    states2 = [opt2.create_state_multi_precision(0, weights2[k]) for k in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), weights2, grads2, states2)
    for k in range(ntensors):
        state = opt1.create_state_multi_precision(k, weights[k])
        opt1.update_multi_precision(k, weights[k], grads[k], state)
        if compare_states:
            compare_ndarray_tuple(state, states2[k], *tols)
        compare_ndarray_tuple(weights[k], weights2[k], *tols)


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
        ``'default'``, ``'row_sparse'`` or ``'csr'`` (one weight only): ``opt2`` gets the
        sparse arrays (a sparse weight stores every row, the gradient a random
        density), ``opt1`` their dense copies, as mxnet's.
    rtol, atol : float
        Tolerances of the comparisons after the update.
    compare_states : bool
        Also compare the optimizer states before and after.
    ntensors : int
        Number of weights when ``shape`` is a list (1 otherwise).
    """
    tols = (rtol, atol)
    if not isinstance(shape, list):
        assert ntensors == 1, "compare_optimizer: one shape means one weight, got " \
            "ntensors=%d; pass a list of shapes" % ntensors
        _compare_one_weight(opt1, opt2, shape, dtype, (w_stype, g_stype), tols, compare_states)
        return
    check_stype(w_stype, "compare_optimizer w_stype (several weights)")
    check_stype(g_stype, "compare_optimizer g_stype (several weights)")
    _compare_several_weights(opt1, opt2, shape, dtype, tols, compare_states, ntensors)


# -- environment and process helpers -------------------------------------------------------

def is_aarch64_run():
    """Whether the tests run on an aarch64 machine (mxnet's tests skip a few cases
    there)."""
    import platform
    return platform.machine() == "aarch64"


def list_gpus():
    """``range(number of GPUs)``."""
    return range(torch.cuda.device_count())


def _env_settings(args):
    """``environment``'s arguments as a dict ``{name: value}``."""
    if len(args) == 2:
        return {args[0]: args[1]}
    assert len(args) == 1 and isinstance(args[0], dict), \
        "Expecting one dict arg or two args: env var name and value"
    return dict(args[0])


@contextlib.contextmanager
def environment(*args):
    """Set environment variables for the ``with`` body, restoring them afterwards.

    Parameters
    ----------
    *args
        ``name, value`` for one variable, or one dict ``{name: value}``;
        a ``None`` value unsets the variable.
    """
    wanted = _env_settings(args)
    before = {name: os.environ.get(name) for name in wanted}
    for name, value in wanted.items():
        setenv(name, value)
    try:
        yield
    finally:
        _nd.waitall()                   # pending work may read the variables
        for name, value in before.items():
            setenv(name, value)


@contextlib.contextmanager
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
        super().__init__(real_iter.batch_size)
        self.real_iter = real_iter
        self.provide_data, self.provide_label = real_iter.provide_data, real_iter.provide_label
        self.the_batch = next(real_iter)   # fetched once, served forever

    def __iter__(self):
        return self

    def next(self):
        """The first batch of the real iterator; never raises ``StopIteration``."""
        return self.the_batch
