"""``mx.test_utils``: the helpers mxnet 1.9.1's tests and ported test suites use.

Comparison (``almost_equal``, ``assert_almost_equal`` with mxnet's full
signature and mismatch report, ``same``, ``same_array``), random data
(``rand_ndarray``, ``rand_shape_2d/3d/nd``, ``random_arrays``), symbolic
checks run on this project's own executors (``simple_forward``,
``check_symbolic_forward``, ``check_symbolic_backward``,
``check_numeric_gradient``, ``check_consistency``), ``compare_optimizer``,
and the context helpers (``default_context``, ``set_default_context``,
``environment``, ``discard_stderr``, ``retry``) and the data set helpers
(``get_mnist``, ``get_mnist_ubyte``, ``get_mnist_iterator``, ``get_cifar10``:
local files only, see ``module_api/datasets.py``). Signatures, default
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

import os
import sys
from contextlib import contextmanager

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
from . import io as _io
from .datasets import (  # noqa: F401  (mx.test_utils exports them)
    get_cifar10, get_mnist, get_mnist_iterator, get_mnist_ubyte)
from . import ndarray as _nd
from .ndarray import array  # noqa: F401  (mxnet's test_utils exports it; its tests use it)
from .util import getenv, setenv, use_np  # noqa: F401  (mxnet re-exports them here)


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


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random array of ``shape``: dense (standard normal), or csr / row_sparse.

    Parameters
    ----------
    shape : tuple of int
    stype : str
        ``'default'``, ``'csr'`` (2-D; each entry stored with probability
        ``density``, values uniform in [0, 1), as mxnet's ``uniform`` distribution
        without scipy) or ``'row_sparse'`` (each row stored with probability
        ``density``, values uniform in [0, 1)).
    density : float, optional
        Sparse only; a random one in [0, 1) when not given, as mxnet's.
    dtype : numpy dtype, optional
        float32 when not given.
    distribution : str, optional
        ``'uniform'`` (the default) only; mxnet's ``'powerlaw'`` raises.
    ctx : Context, optional
        :func:`default_context` when not given.
    modifier_func, shuffle_csr_indices
        Options of mxnet's sparse generator this one does not have (refused if used).
    """
    ctx = ctx if ctx else default_context()
    if stype in (None, "default"):
        return _nd.array(random_arrays(shape), ctx=ctx, dtype=dtype)
    return _rand_sparse(shape, stype, density, dtype, distribution, ctx,
                        modifier_func is not None or shuffle_csr_indices)


def _rand_sparse(shape, stype, density, dtype, distribution, ctx, extra):
    from . import ndarray_sparse as _sparse
    if stype not in ("csr", "row_sparse"):
        check_stype(stype, "rand_ndarray")
    if distribution not in (None, "uniform") or extra:
        raise MXNetError(f"rand_ndarray: only the uniform distribution of {stype} arrays is "
                         f"implemented (no modifier_func / shuffle_csr_indices)")
    density = rnd.rand() if density is None else density
    dtype = np.float32 if dtype is None else dtype
    if stype == "csr":
        if len(shape) != 2:
            raise MXNetError(f"rand_ndarray: a csr array is 2-D, got shape {shape}")
        dense = rnd.uniform(size=shape)
        dense = (dense * (dense < density)).astype(dtype)
        return _sparse.csr_matrix(dense, ctx=ctx, dtype=dtype)
    rows = np.nonzero(rnd.rand(shape[0]) < density)[0]
    values = rnd.rand(len(rows), *shape[1:]).astype(dtype)
    return _sparse.row_sparse_array((values, rows), shape=shape, ctx=ctx, dtype=dtype)


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
        ``'default'``, ``'row_sparse'`` or ``'csr'`` (one weight only): ``opt2`` gets the
        sparse arrays (a sparse weight stores every row, the gradient a random
        density), ``opt1`` their dense copies, as mxnet's.
    compare_states : bool
        Also compare the optimizer states before and after.
    """
    ctx = default_context()

    def uniform(s):
        return _nd.random.uniform(shape=s, ctx=ctx, dtype=dtype)

    def pair(stype, density):
        if stype in (None, "default"):
            a = uniform(shape)
            return a.copyto(ctx), a
        a = rand_ndarray(shape, stype, density=density, dtype=dtype)
        return a.copyto(ctx).tostype("default"), a
    if not isinstance(shape, list):
        assert ntensors == 1
        w1, w2 = pair(w_stype, 1)
        g1, g2 = pair(g_stype, None)
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
    check_stype(w_stype, "compare_optimizer w_stype (several weights)")
    check_stype(g_stype, "compare_optimizer g_stype (several weights)")
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
