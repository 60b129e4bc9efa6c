"""``mx.nd`` / ``mx.ndarray``: imperative arrays, computed eagerly with torch.

The arrays are :class:`runtime.ndarray.NDArray`, a ``torch.Tensor`` subclass.
Functions follow mxnet 1.9.1's names, argument names and defaults
(``concat`` joins along ``dim=1``; ``array`` of a numpy array or list is
float32 unless ``dtype`` says otherwise).  Every ``dtype`` argument accepts
numpy dtypes, torch dtypes and strings; ``stype`` accepts only ``'default'``.
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np
import torch

from runtime import ndarray_io as _io
from runtime import random as _rt_random
from runtime.context import Context, current_context, cpu  # noqa: F401
from runtime.ndarray import (NDArray, as_ndarray, check_stype, to_numpy_dtype,  # noqa: F401
                             to_torch_dtype)

from . import ndarray_sparse as sparse  # noqa: E402  (mx.nd.sparse)
from .ndarray_sparse import cast_storage  # noqa: F401

__all__ = ["NDArray", "array", "zeros", "ones", "empty", "full", "arange", "concat",
           "concatenate", "sum", "abs", "divide", "dot", "waitall", "save", "load",
           "load_frombuffer", "random", "zeros_like", "ones_like", "sparse", "cast_storage"]


# ------------------------------------------------------------------ helpers
def _ctx(ctx) -> Context:
    if ctx is None:
        return current_context()
    return ctx if isinstance(ctx, Context) else Context(ctx)


def _shape(shape):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _wrap(t: torch.Tensor, like=None, ctx=None) -> NDArray:
    if ctx is None and isinstance(like, NDArray):
        ctx = getattr(like, "_mx_ctx", None)
    return as_ndarray(t, ctx)


def _t(x, like=None):
    """A tensor from an NDArray, tensor, numpy array or scalar."""
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(like, torch.Tensor) and isinstance(x, numbers.Number):
        return x
    return torch.as_tensor(np.asarray(x, dtype=np.float32) if not isinstance(x, np.ndarray) else x)


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
        dt = source_array.dtype if dtype is None else to_torch_dtype(dtype)
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
    if stop is None:
        start, stop = 0, start
    vals = np.arange(start, stop, step, dtype=np.float64)
    if repeat > 1:
        vals = np.repeat(vals, int(repeat))
    return array(vals, ctx=ctx, dtype=dtype)


def zeros_like(data, **kwargs):
    return _wrap(torch.zeros_like(data), data)


def ones_like(data, **kwargs):
    return _wrap(torch.ones_like(data), data)


# --------------------------------------------------------------- operators
def _axes(axis, ndim):
    if axis is None or axis == ():
        return tuple(range(ndim))
    return (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)


def _reduce(fn, data, axis, keepdims, exclude):
    axes = tuple(a % builtins.max(data.dim(), 1) for a in _axes(axis, data.dim()))
    if exclude:
        axes = tuple(a for a in range(data.dim()) if a not in axes)
    if data.dim() == 0 or not axes:
        return _wrap(data.clone(), data)
    res = fn(data, dim=axes, keepdim=keepdims)
    if res.dim() == 0:
        res = res.reshape(1)  # mxnet reductions to a scalar give shape (1,)
    # torch sums integers as int64; mxnet keeps the input's dtype
    return _wrap(res.to(data.dtype), data)


def sum(data, axis=(), keepdims=False, exclude=False, out=None, **kwargs):  # noqa: A001
    return _out(_reduce(torch.sum, data, axis, keepdims, exclude), out)


def mean(data, axis=(), keepdims=False, exclude=False, out=None, **kwargs):
    return _out(_reduce(torch.mean, data, axis, keepdims, exclude), out)


def max(data, axis=(), keepdims=False, exclude=False, out=None, **kwargs):  # noqa: A001
    return _out(_reduce(torch.amax, data, axis, keepdims, exclude), out)


def min(data, axis=(), keepdims=False, exclude=False, out=None, **kwargs):  # noqa: A001
    return _out(_reduce(torch.amin, data, axis, keepdims, exclude), out)


def abs(data, out=None, **kwargs):  # noqa: A001
    return _out(_wrap(torch.abs(data), data), out)


def _binary(fn, lhs, rhs, out):
    like = lhs if isinstance(lhs, torch.Tensor) else rhs
    return _out(_wrap(fn(_t(lhs, like), _t(rhs, like)), like), out)


def add(lhs, rhs, out=None):
    return _binary(torch.add, lhs, rhs, out)


def subtract(lhs, rhs, out=None):
    return _binary(torch.sub, lhs, rhs, out)


def multiply(lhs, rhs, out=None):
    return _binary(torch.mul, lhs, rhs, out)


def divide(lhs, rhs, out=None):
    return _binary(torch.true_divide, lhs, rhs, out)


def maximum(lhs, rhs, out=None):
    return _binary(lambda a, b: torch.maximum(torch.as_tensor(a), torch.as_tensor(b)),
                   lhs, rhs, out)


def minimum(lhs, rhs, out=None):
    return _binary(lambda a, b: torch.minimum(torch.as_tensor(a), torch.as_tensor(b)),
                   lhs, rhs, out)


def power(base, exp, out=None):
    return _binary(torch.pow, base, exp, out)


def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None, out=None):
    """mxnet's ``dot``: for N-d inputs, contracts the last axis of ``lhs``
    with the first axis of ``rhs``."""
    if isinstance(lhs, sparse.BaseSparseNDArray) or isinstance(rhs, sparse.BaseSparseNDArray):
        return sparse.dot(lhs, rhs, transpose_a, transpose_b, forward_stype, out)
    check_stype(forward_stype)
    a = lhs.T if transpose_a else lhs
    b = rhs.T if transpose_b else rhs
    if a.dim() == 1 and b.dim() == 1:
        res = torch.dot(a, b).reshape(1)
    else:
        res = torch.tensordot(a, b, dims=1)
    return _out(_wrap(res, lhs), out)


def concat(*data, dim=1, num_args=None, out=None, **kwargs):
    if len(data) == 1 and isinstance(data[0], (list, tuple)):
        data = tuple(data[0])
    return _out(_wrap(torch.cat(list(data), dim=dim), data[0]), out)


Concat = concat


def concatenate(arrays, axis=0, always_copy=True):
    """Deprecated mxnet helper: join ``arrays`` along ``axis``."""
    if not always_copy and len(arrays) == 1:
        return arrays[0]
    return _wrap(torch.cat(list(arrays), dim=axis), arrays[0])


def stack(*data, axis=0, num_args=None, out=None):
    if len(data) == 1 and isinstance(data[0], (list, tuple)):
        data = tuple(data[0])
    return _out(_wrap(torch.stack(list(data), dim=axis), data[0]), out)


def clip(data, a_min, a_max, out=None):
    return _out(_wrap(torch.clamp(data, a_min, a_max), data), out)


def sqrt(data, out=None):
    return _out(_wrap(torch.sqrt(data), data), out)


def square(data, out=None):
    return _out(_wrap(torch.square(data), data), out)


def exp(data, out=None):
    return _out(_wrap(torch.exp(data), data), out)


def log(data, out=None):
    return _out(_wrap(torch.log(data), data), out)


def norm(data, ord=2, axis=None, keepdims=False, out=None):  # noqa: A002
    dims = None if axis is None else _axes(axis, data.dim())
    res = torch.linalg.vector_norm(data.float() if not data.is_floating_point() else data,
                                   ord=ord, dim=dims, keepdim=keepdims)
    return _out(_wrap(res.reshape(1) if res.dim() == 0 else res, data), out)


def argmax(data, axis=None, keepdims=False, out=None):
    res = torch.argmax(data) if axis is None else torch.argmax(data, dim=axis, keepdim=keepdims)
    return _out(_wrap(res.to(data.dtype if data.is_floating_point() else torch.float32), data),
                out)


def reshape(data, shape, reverse=False, out=None, **kwargs):
    return _out(_wrap(data.reshape(_shape(shape)), data), out)


def transpose(data, axes=(), out=None):
    axes = tuple(axes) or tuple(reversed(range(data.dim())))
    return _out(_wrap(data.permute(*axes), data), out)


def one_hot(indices, depth, on_value=1.0, off_value=0.0, dtype=np.float32, out=None):
    idx = indices.long()
    res = torch.full(tuple(idx.shape) + (int(depth),), off_value, dtype=to_torch_dtype(dtype),
                     device=indices.device)
    valid = (idx >= 0) & (idx < depth)
    res[valid] = torch.nn.functional.one_hot(idx[valid], int(depth)).to(res.dtype) * \
        (on_value - off_value) + off_value
    return _out(_wrap(res, indices), out)


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
        (out.dtype if out is not None else torch.float32)
    gen = _rt_random.generator_for(c)
    res = draw(torch.empty(shp, dtype=torch.float32), gen).to(dtype=dt, device=c.torch_device)
    return _out(as_ndarray(res, c), out)


class random:  # noqa: N801  (mxnet's ``mx.nd.random`` module)
    """``mx.nd.random``: samplers drawing from the generator ``mx.random.seed`` seeds."""

    @staticmethod
    def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        return _sample(lambda t, g: t.uniform_(float(low), float(high), generator=g),
                       shape, dtype, ctx, out)

    @staticmethod
    def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        return _sample(lambda t, g: t.normal_(float(loc), float(scale), generator=g),
                       shape, dtype, ctx, out)

    @staticmethod
    def randint(low, high, shape=None, dtype=None, ctx=None, out=None, **kwargs):
        res = _sample(lambda t, g: t.random_(int(low), int(high), generator=g),
                      shape, dtype or np.int32, ctx, out)
        return res

    @staticmethod
    def seed(seed_state, ctx="all"):
        """Seed numpy, torch and every context's generator (``mx.random.seed`` too)."""
        np.random.seed(seed_state)
        torch.manual_seed(seed_state)
        _rt_random.seed(seed_state)


random_uniform = uniform = random.uniform
random_normal = normal = random.normal


from .operator import Custom  # noqa: E402,F401  (mx.nd.Custom: a Python operator, mx.operator)
