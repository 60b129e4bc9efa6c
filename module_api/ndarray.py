"""``mx.nd`` / ``mx.ndarray``: imperative arrays and operators.

The arrays are :class:`runtime.ndarray.NDArray` (a ``torch.Tensor`` subclass with
mxnet's legacy NDArray semantics). Every registry operator is ``mx.nd.X``
(``nd_ops``): it runs the same entry as ``mx.sym.X``, compiled for the inputs'
context (``runtime/imperative.py``). Functions follow mxnet 1.9.1's names, argument names and defaults
(``concat`` joins along ``dim=1``; ``array`` of a numpy array or list is
float32 unless ``dtype`` says otherwise).  Every ``dtype`` argument accepts
numpy dtypes, torch dtypes and strings; ``stype`` accepts only ``'default'``.
"""
from __future__ import annotations

import numbers
import warnings

import numpy as np
import torch

from runtime import ndarray_io as _io
from runtime import random as _rt_random
from runtime.context import Context, current_context, cpu  # noqa: F401
from runtime.ndarray import (NDArray, as_ndarray, check_stype, to_numpy_dtype,  # noqa: F401
                             to_torch_dtype)
from runtime.ndarray import torch_dtype

from . import ndarray_sparse as sparse  # noqa: E402  (mx.nd.sparse)
from .ndarray_sparse import cast_storage  # noqa: F401

__all__ = ["NDArray", "array", "zeros", "ones", "empty", "full", "arange", "concatenate",
           "waitall", "save", "load", "load_frombuffer", "random", "from_numpy",
           "from_dlpack", "to_dlpack_for_read", "to_dlpack_for_write", "onehot_encode", "sparse", "cast_storage"]


# ------------------------------------------------------------------ helpers
def _ctx(ctx) -> Context:
    if ctx is None:
        return current_context()
    return ctx if isinstance(ctx, Context) else Context(ctx)


def _shape(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _out(result: NDArray, out):
    if out is None:
        return result
    out[:] = result
    return out


# ----------------------------------------------------------------- creation
def empty(shape, ctx=None, dtype=None, stype=None):
    """An array of the given shape (contents zero here; mxnet leaves them undefined)."""
    return zeros(shape, ctx, dtype, stype)


def zeros(shape, ctx=None, dtype=None, stype=None, **kwargs):
    if stype in ("csr", "row_sparse"):
        return sparse.zeros(stype, shape, ctx=ctx, dtype=dtype)
    check_stype(stype)
    c = _ctx(ctx)
    return as_ndarray(torch.zeros(_shape(shape), dtype=to_torch_dtype(dtype),
                                  device=c.torch_device), c)


def ones(shape, ctx=None, dtype=None, **kwargs):
    check_stype(kwargs.pop("stype", None))
    c = _ctx(ctx)
    return as_ndarray(torch.ones(_shape(shape), dtype=to_torch_dtype(dtype),
                                 device=c.torch_device), c)


def full(shape, val, ctx=None, dtype=np.float32, out=None):
    c = _ctx(ctx)
    res = as_ndarray(torch.full(_shape(shape), val, dtype=to_torch_dtype(dtype),
                                device=c.torch_device), c)
    return _out(res, out)


def array(source_array, ctx=None, dtype=None):
    """An NDArray copied from an array-like (float32 unless ``dtype`` is given,
    except that an NDArray / tensor source keeps its dtype, as in mxnet)."""
    if isinstance(source_array, sparse.BaseSparseNDArray) or sparse._is_scipy_csr(source_array):
        return sparse.array(source_array, ctx=ctx, dtype=dtype)
    c = _ctx(ctx)
    if isinstance(source_array, torch.Tensor):
        dt = torch_dtype(source_array) if dtype is None else to_torch_dtype(dtype)
        t = source_array.detach().to(device=c.torch_device, dtype=dt).clone()
        return as_ndarray(t, c)
    # numpy has no bfloat16: such arrays are made from float32 values, then rounded
    want = to_torch_dtype(dtype) if dtype is not None else torch.float32
    np_dt = np.dtype(np.float32) if want == torch.bfloat16 else to_numpy_dtype(want)
    try:
        src = np.asarray(source_array, dtype=np_dt)
    except (TypeError, ValueError):
        raise TypeError("source_array must be array like object") from None
    t = torch.from_numpy(np.array(src, order="C", copy=True))
    return as_ndarray(t.to(device=c.torch_device, dtype=want), c)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None,
           dtype=np.float32):
    """``start, start + step, ...`` below ``stop`` (``arange(n)``: from 0), each value
    ``repeat`` times: operator ``_arange``, which computes in ``dtype`` as mxnet does
    (start and step cast to it first: ``arange(1.3, 10, 1.3, dtype='int32')`` counts by
    1 from 1; float32 sums round as float32's)."""
    from runtime.imperative import invoke
    if infer_range is not None:         # as mxnet: warned about, then ignored
        warnings.warn("`infer_range` argument has been deprecated", DeprecationWarning)
    return invoke("_arange", (), dict(start=start, stop=stop, step=step, repeat=repeat,
                                      ctx=ctx, dtype=dtype if dtype is not None else
                                      "float32"))


def concatenate(arrays, axis=0, always_copy=True):
    """Deprecated mxnet helper: join ``arrays`` along ``axis`` (operator ``Concat``)."""
    if not always_copy and len(arrays) == 1:
        return arrays[0]
    return Concat(*arrays, dim=axis)


def from_numpy(ndarray, zero_copy=True, array_cls=None):
    """An NDArray over a C-contiguous numpy array (sharing its memory when
    ``zero_copy``; a copy otherwise)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(ndarray).__name__}")
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("Only c-contiguous arrays are supported for zero-copy")
    t = torch.from_numpy(ndarray if zero_copy else ndarray.copy())
    return as_ndarray(t, cpu(0))


def from_dlpack(dlpack):
    """An NDArray sharing the memory of a DLPack capsule (or of an object that
    has ``__dlpack__``)."""
    return as_ndarray(torch.utils.dlpack.from_dlpack(dlpack))


def to_dlpack_for_read(data):
    """A DLPack capsule of ``data`` (waits for pending writes first)."""
    data.wait_to_read()
    return torch.utils.dlpack.to_dlpack(data.as_subclass(torch.Tensor))


def to_dlpack_for_write(data):
    """A DLPack capsule of ``data`` for writing into it."""
    data.wait_to_read()
    return torch.utils.dlpack.to_dlpack(data.as_subclass(torch.Tensor))


def onehot_encode(indices, out):
    """Deprecated mxnet helper: one-hot rows of ``indices`` written into ``out``
    (its second dim is the depth): operator ``one_hot``."""
    depth = int(out.shape[1])
    return one_hot(indices, depth=depth, dtype=out.dtype, out=out)


def waitall():
    """Wait for all pending work (a CUDA synchronize when a GPU is present)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# ------------------------------------------------------------------- files
def save(fname, data):
    """Save an NDArray, a list of them or a dict ``str -> NDArray`` in mxnet's
    binary format (readable by ``mxnet.nd.load``).  The write is atomic."""
    arrays = (torch.Tensor, np.ndarray, sparse.BaseSparseNDArray)
    if isinstance(data, dict):
        bad = [k for k, v in data.items() if not isinstance(v, arrays)]
    elif isinstance(data, (list, tuple)):
        bad = [i for i, v in enumerate(data) if not isinstance(v, arrays)]
    else:
        bad = []
    if bad:
        raise TypeError('save only accept dict str->NDArray or list of NDArray')
    _io.save(fname, data)


def load(fname, ctx=None):
    """Load a file written by ``save`` (here or in mxnet): a list, or a dict
    when the arrays were saved with names.  Arrays are placed on ``cpu(0)``
    unless ``ctx`` is given."""
    return _io.load(fname, ctx)


def load_frombuffer(buf, ctx=None):
    if not isinstance(buf, (bytes, bytearray, memoryview, str)):
        raise TypeError('buf required to be a string or bytes')
    if isinstance(buf, str):
        buf = buf.encode("latin-1")
    return _io.loads(bytes(buf), ctx)


# ------------------------------------------------------------------ random
def _rand_shape(shape):
    return (1,) if shape is None or shape == () else _shape(shape)


def _sample(draw, shape, dtype, ctx, out):
    c = _ctx(ctx) if out is None else out.context
    shp = tuple(out.shape) if out is not None and shape is None else _rand_shape(shape)
    dt = to_torch_dtype(dtype) if dtype is not None else \
        (torch_dtype(out) if out is not None else torch.float32)
    gen = _rt_random.generator_for(c)
    res = draw(torch.empty(shp, dtype=torch.float32), gen).to(dtype=dt, device=c.torch_device)
    return _out(as_ndarray(res, c), out)


def _registry_sample(op_name, inputs, shape, dtype, out, attrs):
    from runtime.imperative import invoke
    if shape is not None:
        attrs["shape"] = _shape(shape)
    if dtype is not None:
        attrs["dtype"] = dtype
    return invoke(op_name, inputs, dict(attrs, out=out))


def _dispatch_sample(dist, names, params, shape, dtype, ctx, out, kwargs):
    """mxnet's sampler dispatch: NDArray parameters give ``_sample_<dist>`` (one draw set
    per element), numbers ``_random_<dist>`` with the parameters as attributes."""
    if isinstance(params[0], torch.Tensor):
        return _registry_sample(f"_sample_{dist}", params, shape, dtype, out, kwargs)
    return _registry_sample(f"_random_{dist}", (), shape, dtype, out,
                            dict(kwargs, ctx=ctx, **dict(zip(names, params))))


def _like_sampler(dist, names, defaults):
    def like(data, *args, out=None, **kwargs):
        params = dict(zip(names, defaults))
        params.update(zip(names, args))
        params.update({k: kwargs.pop(k) for k in names if k in kwargs})
        return _registry_sample(f"_random_{dist}_like", (data,), None, None, out,
                                dict(kwargs, **params))
    like.__name__ = f"{dist}_like"
    like.__doc__ = f"Samples of ``{dist}`` of ``data``'s shape and dtype (``_random_{dist}_like``)."
    return staticmethod(like)


class random:  # noqa: N801  (mxnet's ``mx.nd.random`` module)
    """``mx.nd.random``: samplers drawing from the generator ``mx.random.seed`` seeds."""

    @staticmethod
    def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        """U[low, high) samples; NDArray ``low``/``high`` give ``_sample_uniform``."""
        if isinstance(low, torch.Tensor):
            return _registry_sample("_sample_uniform", (low, high), shape, dtype, out, kwargs)
        return _sample(lambda t, g: t.uniform_(float(low), float(high), generator=g),
                       shape, dtype, ctx, out)

    @staticmethod
    def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        """N(loc, scale**2) samples; NDArray ``loc``/``scale`` give ``_sample_normal``."""
        if isinstance(loc, torch.Tensor):
            return _registry_sample("_sample_normal", (loc, scale), shape, dtype, out, kwargs)
        return _sample(lambda t, g: t.normal_(float(loc), float(scale), generator=g),
                       shape, dtype, ctx, out)

    @staticmethod
    def randint(low, high, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        res = _sample(lambda t, g: t.random_(int(low), int(high), generator=g),
                      shape, dtype or np.int32, ctx, out)
        return res

    @staticmethod
    def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        """Samples of the exponential distribution of mean ``scale`` (``_random_exponential``;
        an NDArray ``scale`` gives ``_sample_exponential``, one draw set per element)."""
        if isinstance(scale, torch.Tensor):
            return _registry_sample("_sample_exponential", (1.0 / scale,), shape, dtype, out,
                                    kwargs)
        return _registry_sample("_random_exponential", (), shape, dtype, out,
                                dict(kwargs, lam=1.0 / scale, ctx=ctx))

    @staticmethod
    def randn(*shape, **kwargs):
        """``normal(loc, scale, shape)`` with the shape as positional ints."""
        loc, scale = kwargs.pop("loc", 0), kwargs.pop("scale", 1)
        return random.normal(loc, scale, shape or None, **kwargs)

    @staticmethod
    def uniform_like(data, low=0, high=1, out=None, **kwargs):
        return _registry_sample("_random_uniform_like", (data,), None, None, out,
                                dict(kwargs, low=low, high=high))

    @staticmethod
    def normal_like(data, loc=0, scale=1, out=None, **kwargs):
        return _registry_sample("_random_normal_like", (data,), None, None, out,
                                dict(kwargs, loc=loc, scale=scale))

    @staticmethod
    def exponential_like(data, lam=1, out=None, **kwargs):
        return _registry_sample("_random_exponential_like", (data,), None, None, out,
                                dict(kwargs, lam=lam))

    @staticmethod
    def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        """Gamma(alpha, beta) samples (``_random_gamma``; NDArray parameters give
        ``_sample_gamma``, one draw set per element)."""
        return _dispatch_sample("gamma", ("alpha", "beta"), (alpha, beta), shape, dtype,
                                ctx, out, kwargs)

    @staticmethod
    def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        """Poisson(lam) samples, dispatched as :meth:`gamma`."""
        return _dispatch_sample("poisson", ("lam",), (lam,), shape, dtype, ctx, out, kwargs)

    @staticmethod
    def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        """NB(k, p) samples, dispatched as :meth:`gamma`."""
        return _dispatch_sample("negative_binomial", ("k", "p"), (k, p), shape, dtype, ctx,
                                out, kwargs)

    @staticmethod
    def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, ctx=None,
                                      out=None, **kwargs):
        """GNB(mu, alpha) samples, dispatched as :meth:`gamma`."""
        return _dispatch_sample("generalized_negative_binomial", ("mu", "alpha"),
                                (mu, alpha), shape, dtype, ctx, out, kwargs)

    @staticmethod
    def multinomial(data, shape=None, get_prob=False, out=None, dtype="int32", **kwargs):
        """Draws from the categorical distributions in ``data``'s last axis
        (``_sample_multinomial``; with ``get_prob`` also their log-probabilities)."""
        return _registry_sample("_sample_multinomial", (data,), shape, dtype, out,
                                dict(kwargs, get_prob=get_prob))

    @staticmethod
    def shuffle(data, **kwargs):
        """``data`` with its rows (first axis) in a random order (``_shuffle``)."""
        return _registry_sample("_shuffle", (data,), None, None, kwargs.pop("out", None),
                                kwargs)

    current_context = staticmethod(current_context)

    @staticmethod
    def seed(seed_state, ctx="all"):
        """Seed numpy, torch and every context's generator (``mx.random.seed`` too)."""
        np.random.seed(seed_state)
        torch.manual_seed(seed_state)
        _rt_random.seed(seed_state)


for _dist, _names, _defaults in (("gamma", ("alpha", "beta"), (1, 1)), ("poisson", ("lam",), (1,)),
                                 ("negative_binomial", ("k", "p"), (1, 1)),
                                 ("generalized_negative_binomial", ("mu", "alpha"), (1, 1))):
    setattr(random, f"{_dist}_like", _like_sampler(_dist, _names, _defaults))

random_uniform = uniform = random.uniform
random_normal = normal = random.normal


# ------------------------------------------- every registry operator, generated
def _export_operators():
    """``mx.nd.X`` for each registry operator (mxnet's own Python functions above,
    ``array`` ... ``random``, keep their names), the helpers over them and the
    ``_internal`` / ``contrib`` / ``linalg`` namespaces."""
    from . import nd_ops
    module = globals()
    for name, fn in nd_ops.public_functions().items():
        module.setdefault(name, fn)
    module.update(nd_ops.helpers())
    return (nd_ops.internal_namespace(), nd_ops.operator_namespace("contrib"),
            nd_ops.operator_namespace("linalg"))


_internal, contrib, linalg = _export_operators()


def _install_contrib_functions():
    import sys
    from .nd_contrib import install
    install(sys.modules[__name__], contrib)


_install_contrib_functions()

from .operator import Custom  # noqa: E402,F401  (mx.nd.Custom: a Python operator, mx.operator)

_registry_dot = dot


def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None, out=None, **kwargs):
    """mxnet's ``dot``: a csr or row_sparse operand goes to :func:`sparse.dot` (mxnet's
    result storage rules); dense operands run the registry's ``dot``."""
    if isinstance(lhs, sparse.BaseSparseNDArray) or isinstance(rhs, sparse.BaseSparseNDArray):
        return sparse.dot(lhs, rhs, transpose_a, transpose_b, forward_stype, out)
    check_stype(forward_stype)
    return _registry_dot(lhs, rhs, transpose_a=transpose_a, transpose_b=transpose_b, out=out,
                         **kwargs)
