"""``mx.init`` / ``mx.initializer``: the parameter initializers of mxnet 1.9.1.

Calling ``initializer(InitDesc(name, attrs), arr)`` fills ``arr`` in place.
Which fill a parameter gets:

1. its ``__init__`` attribute, when it has one (``mx.sym.Variable(init=...)``
   stores a registered name such as ``"zeros"`` or ``dumps()`` JSON there);
2. else the end of its name: ``weight`` -> the initializer's own rule
   (``_init_weight``), ``bias`` / ``beta`` -> 0, ``gamma`` -> 1, and for
   auxiliary states ``moving_mean`` / ``moving_inv_var`` / ``moving_avg`` /
   ``min`` -> 0, ``moving_var`` / ``max`` -> 1 (mxnet's backend tags BatchNorm's
   states with ``__init__``; the name rule covers symbols that do not);
3. else ``ValueError``.

Random fills draw float32 samples on the CPU from the project generator that
``mx.random.seed`` seeds, one draw per array, so seeded programs repeat.
``dumps()`` text is mxnet's: it is stored in symbol attributes.
"""
from __future__ import annotations

import json
import logging
import re
import warnings

import numpy as np
import torch

from runtime import random as _rt_random
from runtime.ndarray import NDArray
from runtime.ndarray import torch_dtype

from . import registry as _registry

_LOG = logging.getLogger(__name__)

__all__ = ["InitDesc", "Initializer", "register", "alias", "create", "Load", "Mixed",
           "Zero", "One", "Constant", "Uniform", "Normal", "Orthogonal", "Xavier",
           "MSRAPrelu", "Bilinear", "LSTMBias"]


class InitDesc(str):
    """A parameter's name, as a ``str``, with what initializing it needs.

    Parameters
    ----------
    name : str
        The parameter's name.
    attrs : dict, optional
        Its symbol attributes (``__init__`` among them).
    global_init : Initializer, optional
        The initializer the whole model was given; recorded on the first call.
    """

    def __new__(cls, name, attrs=None, global_init=None):
        desc = str.__new__(cls, name)
        desc.attrs = attrs or {}
        desc.global_init = global_init
        return desc


# ------------------------------------------------------------- array writes
def _context_of(arr):
    """The mx context whose generator fills ``arr``."""
    if isinstance(arr, NDArray):
        return arr.context
    from runtime.context import Context, cpu
    if arr.device.type == "cuda":
        return Context("gpu", arr.device.index or 0)
    return cpu(0)


def _write(arr, value):
    """``arr[:] = value`` for a scalar, numpy array or tensor ``value``.

    A csr / row_sparse ``arr`` is written through a dense array of its shape
    (it then stores the entries / rows that are not zero).
    """
    if getattr(arr, "stype", "default") != "default":
        dense = torch.zeros(arr.shape, dtype=torch_dtype(arr), device=arr.device)
        _write(dense, value)
        arr[:] = dense
        return
    with torch.no_grad():
        if isinstance(value, torch.Tensor):
            value = value.to(arr.device)
            arr.copy_(value.reshape(arr.shape) if value.numel() == arr.numel() else value)
        elif np.isscalar(value):
            arr.fill_(value)
        else:
            arr.copy_(torch.as_tensor(np.asarray(value)).reshape(arr.shape))


def _sample(shape, law, first, second, ctx):
    """float32 CPU samples of ``shape``: ``law`` is ``"uniform"`` on
    ``[first, second)`` or ``"normal"`` with mean ``first`` and std ``second``."""
    out = torch.empty(tuple(shape), dtype=torch.float32)
    generator = _rt_random.generator_for(ctx)
    if law == "uniform":
        return out.uniform_(float(first), float(second), generator=generator)
    return out.normal_(float(first), float(second), generator=generator)


def _fill_sampled(arr, law, first, second):
    """Fill ``arr`` with one draw of :func:`_sample`, cast to its dtype."""
    drawn = _sample(arr.shape, law, first, second, _context_of(arr))
    _write(arr, drawn.to(torch_dtype(arr)))


def _bilinear_kernel(shape):
    """float32 weights of a bilinear upsampling kernel of ``shape`` (.., .., h, w)."""
    if len(shape) < 4:
        raise ValueError(f"Bilinear initialization needs a 4-d weight (num_filter, channels, "
                         f"height, width); got shape {tuple(shape)}")
    width, height = shape[3], shape[2]
    half = np.ceil(width / 2.)
    centre = (2 * half - 1 - half % 2) / (2. * half)
    flat = np.arange(int(np.prod(shape)))
    cols = flat % width
    rows = (flat // width) % height
    # float64 products, rounded once to float32
    values = (1 - np.abs(cols / half - centre)) * (1 - np.abs(rows / half - centre))
    return values.astype(np.float32).reshape(shape)


# ---------------------------------------------------------------- base class
# name ending -> the method that fills it; no ending is the end of another,
# so the order of the table does not matter
_BY_NAME_END = (
    ("weight", "_init_weight"), ("bias", "_init_bias"), ("gamma", "_init_gamma"),
    ("beta", "_init_beta"), ("moving_mean", "_init_zero"), ("moving_var", "_init_one"),
    ("moving_inv_var", "_init_zero"), ("moving_avg", "_init_zero"),
    ("min", "_init_zero"), ("max", "_init_one"),
)


def _rule_for(name):
    """``(ending, method name)`` of the rule that applies to ``name``, or ``None``."""
    for ending, method in _BY_NAME_END:
        if name.endswith(ending):
            return ending, method
    return None


def _rms(arr):
    """The default verbose statistic: ``|arr|_2 / sqrt(size)``, as text."""
    norm = float(torch.linalg.vector_norm(arr.float()))
    return str(norm / np.sqrt(arr.numel()))


class Initializer:
    """Base class of the initializers.

    Subclasses define ``_init_weight(name, arr)``; biases, gammas, betas and
    auxiliary states get the fixed values the module docstring lists.

    Parameters
    ----------
    **kwargs
        The constructor's arguments, written by :meth:`dumps`.
    """

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        """Log a line per initialized array.

        Parameters
        ----------
        verbose : bool
            Whether to log ``Initialized <name> as <rule>: <statistic>``.
        print_func : callable, optional
            The statistic, from the array to a string; by default
            ``norm(arr) / sqrt(arr.size)``.

        Returns
        -------
        Initializer
            ``self``, for chaining.
        """
        self._verbose = verbose
        self._print_func = _rms if print_func is None else print_func
        return self

    def _verbose_print(self, desc, init, arr):
        """Log the line :meth:`set_verbosity` asked for (``init``: the rule used)."""
        if not (self._verbose and self._print_func):
            return
        _LOG.info('Initialized %s as %s: %s', desc, init, self._print_func(arr))

    def dumps(self):
        """JSON text ``[lower-cased class name, constructor arguments]``.

        ``Normal(0.5).dumps()`` is ``'["normal", {"sigma": 0.5}]'``; :func:`create`
        reads it back.
        """
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, desc, arr):
        """Fill ``arr`` for the parameter ``desc`` (an :class:`InitDesc`)."""
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        from_attr = desc.attrs.get("__init__", "")
        if from_attr:
            create(from_attr)._init_weight(desc, arr)
            self._verbose_print(desc, from_attr, arr)
            return
        rule = _rule_for(desc)
        if rule is None:
            self._init_default(desc, arr)
            return
        ending, method = rule
        getattr(self, method)(desc, arr)
        self._verbose_print(desc, ending, arr)

    def _legacy_init(self, name, arr):
        """The deprecated ``init(name, arr)`` call: the name alone decides."""
        warnings.warn("Calling initializer with init(str, NDArray) has been deprecated."
                      "please use init(mx.init.InitDesc(...), NDArray) instead.",
                      DeprecationWarning, stacklevel=3)
        if not isinstance(name, str):
            raise TypeError('name must be string, got %s' % type(name).__name__)
        if not isinstance(arr, torch.Tensor):
            raise TypeError('arr must be NDArray, got %s' % type(arr).__name__)
        # mxnet's old special names: upsampling kernels and spatial-transformer heads
        if name.startswith("upsampling"):
            self._init_bilinear(name, arr)
            return
        if name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
            return
        if name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
            return
        rule = _rule_for(name)
        if rule is None:
            self._init_default(name, arr)
        else:
            getattr(self, rule[1])(name, arr)

    def _init_bilinear(self, _, arr):
        _write(arr, _bilinear_kernel(tuple(arr.shape)))

    def _init_loc_bias(self, name, arr):
        """The identity affine transform ``[1, 0, 0, 0, 1, 0]``."""
        assert arr.shape[0] == 6, \
            "%s: a localisation bias has 6 entries (a 2x3 affine transform), got shape %s" % (
                name, tuple(arr.shape))
        _write(arr, np.array([1.0, 0, 0, 0, 1.0, 0]))

    def _init_zero(self, _, arr):
        _write(arr, 0.0)

    def _init_one(self, _, arr):
        _write(arr, 1.0)

    def _init_bias(self, _, arr):
        _write(arr, 0.0)

    def _init_gamma(self, _, arr):
        _write(arr, 1.0)

    def _init_beta(self, _, arr):
        _write(arr, 0.0)

    def _init_weight(self, name, arr):
        """Fill a weight; each initializer defines it."""
        raise NotImplementedError("Must override it")

    def _init_default(self, name, _):
        raise ValueError(
            'Unknown initialization pattern for %s. '
            'Default initialization is now limited to '
            '"weight", "bias", "gamma" (1.0), and "beta" (0.0).'
            'Please use mx.sym.Variable(init=mx.init.*) to set initialization pattern' % name)

    def __eq__(self, other):
        if isinstance(other, Initializer):
            return type(other) is type(self) and other._kwargs == self._kwargs
        return NotImplemented

    __hash__ = object.__hash__

    def __repr__(self):
        return f"{type(self).__name__}({self._kwargs})"


# ------------------------------------------------------------------ registry
# The family's table in mx.registry: names for create() and __init__ attributes.
register = _registry.get_register_func(Initializer, "initializer")
alias = _registry.get_alias_func(Initializer, "initializer")
create = _registry.get_create_func(Initializer, "initializer")


# ------------------------------------------------------------ not registered
class Load:
    """Fill parameters from saved arrays; the others with ``default_init``.

    Parameters
    ----------
    param : str or dict
        A ``.params`` file name, or a dict from names to arrays. ``arg:`` /
        ``aux:`` prefixes are dropped from the names.
    default_init : Initializer, optional
        For parameters ``param`` lacks.
    verbose : bool
        Log how each parameter was filled.
    """

    def __init__(self, param, default_init=None, verbose=False):
        if isinstance(param, str):
            from runtime.ndarray_io import load
            param = load(param)
        assert isinstance(param, dict), \
            "Load: param must be a dict of arrays or a .params file name, got %s" % (
                type(param).__name__)
        self.param = {_strip_kind(key): value for key, value in param.items()}
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        if name not in self.param:
            assert self.default_init is not None, \
                "Cannot Initialize %s. Not found in loaded param " % name + \
                "and no default Initializer is provided."
            self.default_init(name, arr)
            how = "default"
        else:
            saved = self.param[name]
            want, have = tuple(arr.shape), tuple(saved.shape)
            assert want == have, ("Parameter %s cannot be initialized from loading. "
                                  "Shape mismatch, target %s vs loaded %s" % (name, want, have))
            if not isinstance(saved, torch.Tensor):
                saved = torch.as_tensor(np.asarray(saved))
            _write(arr, saved)
            how = "loading"
        if self.verbose:
            _LOG.info('Initialized %s by %s', name, how)


def _strip_kind(key):
    """A saved name without its ``arg:`` / ``aux:`` prefix."""
    return key[4:] if key.startswith(("arg:", "aux:")) else key


class Mixed:
    """Use, for each parameter, the initializer of the first pattern its name matches.

    Parameters
    ----------
    patterns : list of str
        Regular expressions, tried in order with ``re.match``.
    initializers : list of Initializer
        One per pattern.
    """

    def __init__(self, patterns, initializers):
        assert len(patterns) == len(initializers), \
            "Mixed: %d patterns but %d initializers; give one initializer per pattern" % (
                len(patterns), len(initializers))
        self.map = [(re.compile(pattern), chosen)
                    for pattern, chosen in zip(patterns, initializers)]

    def __call__(self, name, arr):
        for regex, chosen in self.map:
            if regex.match(name):
                chosen(name, arr)
                return
        raise ValueError('Parameter name %s did not match any pattern. Consider '
                         'add a ".*" pattern at the and with default Initializer.' % name)


# ---------------------------------------------------------------- registered
@register
@alias("zeros")
class Zero(Initializer):
    """Fill with 0."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _write(arr, 0)


@register
@alias("ones")
class One(Initializer):
    """Fill with 1."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _write(arr, 1)


@register
class Constant(Initializer):
    """Fill with ``value``: a scalar, or an array broadcast to the parameter's shape."""

    def __init__(self, value):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _, arr):
        value = self.value
        if not isinstance(value, (list, tuple, np.ndarray, torch.Tensor)):
            _write(arr, value)
            return
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value))
        with torch.no_grad():
            arr.copy_(value.to(arr.device, torch_dtype(arr)).expand_as(arr))

    def dumps(self):
        """As :meth:`Initializer.dumps`, an array ``value`` written as a (nested) list."""
        value = self._kwargs["value"]
        if isinstance(value, torch.Tensor):
            self._kwargs["value"] = value.detach().cpu().double().tolist()
        elif isinstance(value, np.ndarray):
            self._kwargs["value"] = value.tolist()
        return super().dumps()


@register
class Uniform(Initializer):
    """Samples uniform in ``[-scale, scale]``."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _fill_sampled(arr, "uniform", -self.scale, self.scale)


@register
class Normal(Initializer):
    """Samples from ``N(0, sigma)`` (``sigma``: the standard deviation)."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _fill_sampled(arr, "normal", 0, self.sigma)


@register
class Orthogonal(Initializer):
    """``scale`` times an orthonormal matrix: the SVD factor of a random
    ``(shape[0], prod(shape[1:]))`` matrix whose shape that is.

    ``rand_type`` is the law of the random matrix: ``"uniform"`` on [-1, 1]
    or ``"normal"`` N(0, 1).
    """

    _LAWS = {"uniform": ("uniform", -1.0, 1.0), "normal": ("normal", 0.0, 1.0)}

    def __init__(self, scale=1.414, rand_type="uniform"):
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, name, arr):
        if self.rand_type not in self._LAWS:
            raise ValueError(f"Unknown random type {self.rand_type!r} for {name}: "
                             "rand_type must be 'uniform' or 'normal'")
        rows, cols = arr.shape[0], int(np.prod(arr.shape[1:]))
        law, first, second = self._LAWS[self.rand_type]
        noise = _sample((rows, cols), law, first, second, _context_of(arr)).numpy()
        left, _sv, right = np.linalg.svd(noise, full_matrices=False)
        basis = left if left.shape == noise.shape else right
        _write(arr, (self.scale * basis.reshape(tuple(arr.shape))).astype(np.float32))


@register
class Xavier(Initializer):
    """Glorot / Xavier initialization.

    The samples have scale ``sqrt(magnitude / fan)``, ``fan`` being the input
    fan, the output fan or their mean (``factor_type`` ``"in"``, ``"out"``,
    ``"avg"``), counting the kernel's spatial size. ``rnd_type="uniform"``
    draws from ``[-scale, scale]``, ``"gaussian"`` from ``N(0, scale)``.
    """

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _scale(self, name, shape):
        """``sqrt(magnitude / fan)`` for a weight of ``shape``."""
        if len(shape) < 2:
            raise ValueError('Xavier initializer cannot be applied to vector {0}. It requires '
                             'at least 2D.'.format(name))
        receptive = float(np.prod(shape[2:])) if len(shape) > 2 else 1.
        fan_in = shape[1] * receptive
        fan_out = shape[0] * receptive
        if self.factor_type == "avg":
            fan = (fan_in + fan_out) / 2.0
        elif self.factor_type in ("in", "out"):
            fan = fan_in if self.factor_type == "in" else fan_out
        else:
            raise ValueError("Incorrect factor type %r: factor_type must be 'avg', 'in' or "
                             "'out'" % (self.factor_type,))
        return np.sqrt(self.magnitude / fan)

    def _init_weight(self, name, arr):
        scale = self._scale(name, tuple(arr.shape))
        if self.rnd_type == "uniform":
            _fill_sampled(arr, "uniform", -scale, scale)
        elif self.rnd_type == "gaussian":
            _fill_sampled(arr, "normal", 0, scale)
        else:
            raise ValueError("Unknown random type %r: rnd_type must be 'uniform' or "
                             "'gaussian'" % (self.rnd_type,))


@register
class MSRAPrelu(Xavier):
    """He / MSRA initialization for PReLU networks: Xavier with Gaussian
    samples and ``magnitude = 2 / (1 + slope**2)``."""

    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2. / (1 + slope ** 2))
        # dumps() writes mxnet's arguments of this class, not Xavier's
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernels (for a ``Deconvolution`` weight)."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _write(arr, _bilinear_kernel(tuple(arr.shape)))


@register
class LSTMBias(Initializer):
    """LSTM biases: 0, but ``forget_bias`` for the forget gate (the second quarter)."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        _write(arr, 0.0)
        gate = int(arr.shape[0] / 4)
        with torch.no_grad():
            arr[gate:2 * gate] = self.forget_bias
