"""``mx.sym.random``: mxnet's python samplers over the registry's operators.

As mxnet's ``mx.sym.random``, each function dispatches on its
distribution parameters: numbers give the ``_random_*`` operator (parameters as
attributes), Symbols the ``_sample_*`` operator (one distribution per element).
``compiler/symbol.py`` builds the namespace with :func:`make_namespace`, handing over
its ``Symbol`` class and operator functions, so this module imports nothing of it.
"""
from __future__ import annotations

import numbers
import types


def make_namespace(symbol_cls, op_function) -> types.SimpleNamespace:
    """The ``random`` namespace of ``mx.sym``.

    Parameters
    ----------
    symbol_cls : type
        ``compiler.symbol.Symbol``: parameters of this type select the ``_sample_*``
        operators.
    op_function : callable(str) -> callable
        The symbol function of a registry operator by name.

    Returns
    -------
    types.SimpleNamespace
        ``uniform``, ``normal``, ``randn``, ``exponential``, ``gamma``, ``poisson``,
        ``negative_binomial``, ``generalized_negative_binomial``, ``randint``,
        ``multinomial``, ``shuffle`` and the
        ``*_like`` operators (mxnet exposes ``_random_X_like`` as ``random.X_like``).
    """
    def helper(random, sampler, params, shape, dtype, kwargs):
        if shape is not None:
            kwargs["shape"] = shape
        if dtype is not None:
            kwargs["dtype"] = dtype
        first = params[0]
        if isinstance(first, symbol_cls) and sampler is not None:
            for p in params[1:]:
                if not isinstance(p, symbol_cls):
                    raise AssertionError(f"Distribution parameters must all have the same "
                                         f"type, but got both {type(first)} and {type(p)}.")
            return op_function(sampler)(*params, **kwargs)
        if isinstance(first, numbers.Number) and not isinstance(first, bool):
            for p in params[1:]:
                if not isinstance(p, numbers.Number):
                    raise AssertionError(f"Distribution parameters must all have the same "
                                         f"type, but got both {type(first)} and {type(p)}.")
            names = {"_random_uniform": ("low", "high"), "_random_normal": ("loc", "scale"),
                     "_random_exponential": ("lam",), "_random_gamma": ("alpha", "beta"),
                     "_random_poisson": ("lam",), "_random_negative_binomial": ("k", "p"),
                     "_random_generalized_negative_binomial": ("mu", "alpha"),
                     "_random_randint": ("low", "high")}[random]
            return op_function(random)(**dict(zip(names, params)), **kwargs)
        raise ValueError(f"Distribution parameters must be either Symbol or numbers, but "
                         f"got {type(first)}.")

    def uniform(low=0, high=1, shape=None, dtype=None, **kwargs):
        """Samples of U[low, high): numbers give `shape` samples; Symbols `shape`
        samples per element (output shape = their shape + `shape`)."""
        return helper("_random_uniform", "_sample_uniform", [low, high], shape, dtype, kwargs)

    def normal(loc=0, scale=1, shape=None, dtype=None, **kwargs):
        """Samples of N(loc, scale**2), dispatched as :func:`uniform`."""
        return helper("_random_normal", "_sample_normal", [loc, scale], shape, dtype, kwargs)

    def randn(*shape, **kwargs):
        """``normal(loc, scale, shape)`` with the shape given as positional ints."""
        loc, scale = kwargs.pop("loc", 0), kwargs.pop("scale", 1)
        return helper("_random_normal", "_sample_normal", [loc, scale], shape or None,
                      kwargs.pop("dtype", None), kwargs)

    def exponential(scale=1, shape=None, dtype=None, **kwargs):
        """Samples of the exponential distribution of mean `scale` (rate 1 / scale)."""
        return helper("_random_exponential", "_sample_exponential", [1.0 / scale], shape,
                      dtype, kwargs)

    def gamma(alpha=1, beta=1, shape=None, dtype=None, **kwargs):
        """Samples of Gamma(alpha, beta) (shape alpha, scale beta), dispatched as
        :func:`uniform`."""
        return helper("_random_gamma", "_sample_gamma", [alpha, beta], shape, dtype, kwargs)

    def poisson(lam=1, shape=None, dtype=None, **kwargs):
        """Samples of Poisson(lam), dispatched as :func:`uniform`."""
        return helper("_random_poisson", "_sample_poisson", [lam], shape, dtype, kwargs)

    def negative_binomial(k=1, p=1, shape=None, dtype=None, **kwargs):
        """Samples of NB(k, p), dispatched as :func:`uniform`."""
        return helper("_random_negative_binomial", "_sample_negative_binomial", [k, p],
                      shape, dtype, kwargs)

    def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, **kwargs):
        """Samples of GNB(mu, alpha) (mean mu, variance mu + alpha mu**2), dispatched as
        :func:`uniform`."""
        return helper("_random_generalized_negative_binomial",
                      "_sample_generalized_negative_binomial", [mu, alpha], shape, dtype,
                      kwargs)

    def randint(low, high, shape=None, dtype=None, **kwargs):
        """Integers uniform on [low, high) (numbers only: mxnet has no per-element
        form)."""
        return helper("_random_randint", None, [low, high], shape, dtype, kwargs)

    def multinomial(data, shape=None, get_prob=True, dtype="int32", **kwargs):
        """Outcomes drawn from the categorical distributions in data's last axis; with
        `get_prob` (the default here, as mxnet's wrapper) also their log probabilities."""
        if shape is not None:
            kwargs["shape"] = shape
        return op_function("_sample_multinomial")(data, get_prob=get_prob, dtype=dtype,
                                                  **kwargs)

    def shuffle(data, **kwargs):
        """data with its rows (first axis) in a random order."""
        return op_function("_shuffle")(data, **kwargs)

    likes = {f"{d}_like": op_function(f"_random_{d}_like")
             for d in ("uniform", "normal", "gamma", "exponential", "poisson",
                       "negative_binomial", "generalized_negative_binomial")}
    return types.SimpleNamespace(uniform=uniform, normal=normal, randn=randn,
                                 exponential=exponential, gamma=gamma, poisson=poisson,
                                 negative_binomial=negative_binomial,
                                 generalized_negative_binomial=generalized_negative_binomial,
                                 randint=randint, multinomial=multinomial, shuffle=shuffle,
                                 **likes, __doc__=__doc__)



def make_rand_zipfian(symbol_cls, op_function, uniform):
    """``mx.sym.contrib.rand_zipfian``: mxnet's Python composition
    (in ``mx.sym.contrib``), over this project's operators.

    ``uniform`` is the ``random`` namespace's sampler (Philox, as every sampler here), so
    the classes drawn differ from mxnet's generator's while following its distribution.
    """
    import math

    def rand_zipfian(true_classes, num_sampled, range_max):
        """Draw ``num_sampled`` classes in ``[0, range_max)`` from the approximately
        log-uniform (Zipfian) distribution ``P(c) = log((c + 2) / (c + 1)) /
        log(range_max + 1)``.

        Returns
        -------
        (samples, expected_count_true, expected_count_sample)
            int64 classes ``(num_sampled,)``; the expected counts (float64) of
            ``true_classes`` and of the samples, ``P(c) * num_sampled``.
        """
        if not isinstance(true_classes, symbol_cls):
            raise TypeError(f"rand_zipfian: unexpected type {type(true_classes)}")
        log_range = math.log(range_max + 1)
        rand = uniform(0, log_range, shape=(num_sampled,), dtype="float64")
        shifted = op_function("_minus_scalar")(op_function("exp")(rand), scalar=1.0)
        sampled = op_function("_mod_scalar")(op_function("Cast")(shifted, dtype="int64"),
                                             scalar=range_max)

        def expected(classes):
            c = op_function("Cast")(classes, dtype="float64")
            ratio = op_function("elemwise_div")(op_function("_plus_scalar")(c, scalar=2.0),
                                                op_function("_plus_scalar")(c, scalar=1.0))
            prob = op_function("_div_scalar")(op_function("log")(ratio), scalar=log_range)
            return op_function("_mul_scalar")(prob, scalar=float(num_sampled))
        return sampled, expected(true_classes), expected(sampled)
    return rand_zipfian
