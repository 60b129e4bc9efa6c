"""``mx.nd`` / ``mx.ndarray``: imperative arrays and operators, laid out as mxnet's package.

- ``ndarray.py`` (``mxnet.ndarray.ndarray``): the NDArray class and the functions that
  make, save and load arrays;
- ``sparse.py`` (``mxnet.ndarray.sparse``): csr and row_sparse arrays;
- ``operators.py``: every registry operator as ``mx.nd.X``, running the same entry as
  ``mx.sym.X``, compiled for the inputs' context (``runtime/imperative.py``);
- ``contrib_functions.py``: ``mx.nd.contrib``'s Python functions (``foreach``,
  ``while_loop``, ``cond`` ...);
- here: ``mx.nd.random`` and the namespace that gathers them.

Functions follow mxnet 1.9.1's names, argument names and defaults (``concat`` joins
along ``dim=1``).  Every ``dtype`` argument accepts numpy dtypes, torch dtypes and
strings.
"""
from __future__ import annotations

import numpy as np
import torch

from runtime import random as _rt_random
from runtime.context import Context, current_context, cpu  # noqa: F401
from runtime.ndarray import (NDArray, as_ndarray, check_stype, to_numpy_dtype,  # noqa: F401
                             to_torch_dtype)
from runtime.ndarray import torch_dtype

from . import ndarray, sparse  # noqa: F401  (mxnet.ndarray.ndarray, mxnet.ndarray.sparse)
from .ndarray import *  # noqa: F401,F403
from .ndarray import _ctx, _out, _shape
from .sparse import cast_storage  # noqa: F401

__all__ = ndarray.__all__ + ["random", "sparse", "cast_storage"]


# ------------------------------------------------------------------ random
def _rand_shape(shape):
    return (1,) if shape is None or shape == () else _shape(shape)


def _sample(draw, shape, dtype, ctx, out, integers=False):
    c = _ctx(ctx) if out is None else out.context
    shp = tuple(out.shape) if out is not None and shape is None else _rand_shape(shape)
    dt = to_torch_dtype(dtype) if dtype is not None else \
        (torch_dtype(out) if out is not None else torch.float32)
    gen = _rt_random.generator_for(c)
    # integers are drawn as integers: a float32 draw holds 24 bits, so randint(5e7, 5e7 + 1000)
    # would give only multiples of 4; float64 keeps its 53 bits
    drawn = torch.int64 if integers else torch.float64 if dt == torch.float64 else torch.float32
    res = draw(torch.empty(shp, dtype=drawn), gen).to(dtype=dt, device=c.torch_device)
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
                      shape, dtype or np.int32, ctx, out, integers=True)
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
        """Seed numpy, torch and every context's generator (``mx.random.seed`` too).

        ``seed_state`` is any int: mxnet hands it to C as a 32-bit int, so seeds equal
        modulo 2**32 (``-1`` and ``2**32 - 1``) give the same numbers, here as there.
        """
        if not isinstance(seed_state, (int, np.integer)):
            raise ValueError(f"seed_state must be int, got {type(seed_state).__name__}")
        seed_state = int(seed_state) % 2 ** 32
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
    ``_internal`` / ``contrib`` / ``linalg`` / ``image`` namespaces."""
    from . import operators
    module = globals()
    for name, fn in operators.public_functions().items():
        module.setdefault(name, fn)
    module.update(operators.helpers())
    return (operators.internal_namespace(), operators.operator_namespace("contrib"),
            operators.operator_namespace("linalg"), operators.operator_namespace("image"))


_internal, contrib, linalg, image = _export_operators()


def _install_contrib_functions():
    import sys
    from .contrib_functions import install
    install(sys.modules[__name__], contrib)


_install_contrib_functions()

from ..operator import Custom  # noqa: E402,F401  (mx.nd.Custom: a Python operator, mx.operator)
from runtime.cached_op import CachedOp  # noqa: E402,F401  (a Symbol called as one operator)

_registry_dot = dot


def dot(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None, out=None, **kwargs):
    """mxnet's ``dot``: a csr or row_sparse operand goes to :func:`sparse.dot` (mxnet's
    result storage rules); dense operands run the registry's ``dot``. ``forward_stype``
    (``'default'``, ``'csr'`` or ``'row_sparse'``) gives the result that storage,
    whatever the operands' (mxnet computes by its fallback where it has no kernel)."""
    if isinstance(lhs, sparse.BaseSparseNDArray) or isinstance(rhs, sparse.BaseSparseNDArray) \
            or forward_stype in ("csr", "row_sparse"):
        return sparse.dot(lhs, rhs, transpose_a, transpose_b, forward_stype, out)
    check_stype(forward_stype)
    return _registry_dot(lhs, rhs, transpose_a=transpose_a, transpose_b=transpose_b, out=out,
                         **kwargs)


# mxnet's ``mx.nd.sparse`` also holds the operators that have a sparse kernel there
# (``mx.nd.sparse.sgd_update``, ``abs``, ``FullyConnected`` ...). Here every ``mx.nd``
# operator takes csr / row_sparse inputs itself (keeping the storage where mxnet's
# kernel does, with mxnet's storage fallback otherwise, and the lazy updates of
# ``runtime/imperative_lazy.py``), so these names are the same functions.
def _install_sparse_operators():
    from compiler.ops.registry import SPARSE_NAMESPACE
    for public, name in SPARSE_NAMESPACE.items():
        if not hasattr(sparse, public):     # sparse.py's own (dot, slice ...) stay
            setattr(sparse, public, globals().get(public) or getattr(_internal, name))


_install_sparse_operators()
