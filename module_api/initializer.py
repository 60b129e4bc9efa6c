"""``mx.init`` / ``mx.initializer``: parameter initializers as in mxnet 1.9.1.

An :class:`Initializer` is called as ``init(InitDesc(name, attrs), arr)`` and
fills ``arr`` in place.  A variable's ``__init__`` attribute (set by
``mx.sym.Variable(init=...)``, a registered name such as ``"zeros"`` or a
``dumps()`` JSON string) overrides the global initializer; otherwise the
name's suffix decides: ``weight`` -> ``_init_weight``, ``bias``/``beta`` -> 0,
``gamma`` -> 1, ``moving_mean``/``moving_inv_var``/``moving_avg``/``min`` -> 0,
``moving_var``/``max`` -> 1.  (mxnet's backend tags BatchNorm's auxiliary
states with ``__init__`` attributes; the suffix rule covers symbols that do not.)

Random draws come from the project generator seeded by ``mx.random.seed``.
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

_LOG = logging.getLogger(__name__)

__all__ = ["InitDesc", "Initializer", "register", "alias", "create", "Load", "Mixed",
           "Zero", "One", "Constant", "Uniform", "Normal", "Orthogonal", "Xavier",
           "MSRAPrelu", "Bilinear", "LSTMBias"]


class InitDesc(str):
    """A parameter name (``str``) carrying its symbol attributes and the global initializer."""

    def __new__(cls, name, attrs=None, global_init=None):
        ret = super().__new__(cls, name)
        ret.attrs = attrs or {}
        ret.global_init = global_init
        return ret


# --------------------------------------------------------------- array fill
def _ctx_of(arr):
    if isinstance(arr, NDArray):
        return arr.context
    from runtime.context import Context, cpu
    return Context("gpu", arr.device.index or 0) if arr.device.type == "cuda" else cpu(0)


def _assign(arr, value):
    """``arr[:] = value`` for any tensor and numpy / scalar / tensor value (a csr /
    row_sparse ``arr`` keeps the entries / rows of the value that are not zero)."""
    if getattr(arr, "stype", "default") != "default":
        dense = torch.zeros(arr.shape, dtype=arr.dtype, device=arr.device)
        _assign(dense, value)
        arr[:] = dense
        return
    with torch.no_grad():
        if isinstance(value, torch.Tensor):
            arr.copy_(value.to(arr.device).reshape(arr.shape) if value.numel() == arr.numel()
                      else value.to(arr.device))
        elif np.isscalar(value):
            arr.fill_(value)
        else:
            arr.copy_(torch.as_tensor(np.asarray(value)).reshape(arr.shape))


def _draw(shape, kind, a, b, ctx):
    """float32 samples: ``uniform(a, b)`` or ``normal(mean=a, std=b)``, on CPU."""
    t = torch.empty(tuple(shape), dtype=torch.float32)
    gen = _rt_random.generator_for(ctx)
    if kind == "uniform":
        return t.uniform_(float(a), float(b), generator=gen)
    return t.normal_(float(a), float(b), generator=gen)


def _fill_random(arr, kind, a, b):
    _assign(arr, _draw(arr.shape, kind, a, b, _ctx_of(arr)).to(torch_dtype(arr)))


# ----------------------------------------------------------------- registry
_REGISTRY: dict = {}


def register(klass, name=None):
    """Register an Initializer subclass under its lower-cased class name (or ``name``)."""
    if not (isinstance(klass, type) and issubclass(klass, Initializer)):
        raise TypeError("Can only register subclass of Initializer")
    name = (name or klass.__name__).lower()
    if name in _REGISTRY and _REGISTRY[name] is not klass:
        warnings.warn(f"New initializer {klass.__module__}.{klass.__name__} registered with "
                      f"name {name} is overriding existing initializer", UserWarning,
                      stacklevel=2)
    _REGISTRY[name] = klass
    return klass


def alias(*aliases):
    """Decorator: register a class under extra names (``@alias("zeros")``)."""
    def reg(klass):
        for name in aliases:
            register(klass, name)
        return klass
    return reg


def create(*args, **kwargs):
    """An initializer from an instance, a registered name, a dict, or ``dumps()`` JSON."""
    if args:
        name, args = args[0], args[1:]
    else:
        name = kwargs.pop("initializer")
    if isinstance(name, Initializer):
        assert not args and not kwargs, \
            "initializer is already an instance. Additional arguments are invalid"
        return name
    if isinstance(name, dict):
        return create(**name)
    if not isinstance(name, str):
        raise TypeError("initializer must be of string type")
    if name.startswith("["):
        assert not args and not kwargs
        name, kwargs = json.loads(name)
        return create(name, **kwargs)
    if name.startswith("{"):
        assert not args and not kwargs
        return create(**json.loads(name))
    name = name.lower()
    if name not in _REGISTRY:
        raise ValueError(f"{name} is not registered. Please register with "
                         "initializer.register first")
    return _REGISTRY[name](*args, **kwargs)


# --------------------------------------------------------------- base class
_SUFFIX_RULES = (  # (suffix, method) in mxnet's order, then the auxiliary-state rules
    ("weight", "_init_weight"), ("bias", "_init_bias"), ("gamma", "_init_gamma"),
    ("beta", "_init_beta"), ("moving_mean", "_init_zero"), ("moving_var", "_init_one"),
    ("moving_inv_var", "_init_zero"), ("moving_avg", "_init_zero"),
    ("min", "_init_zero"), ("max", "_init_one"),
)


class Initializer:
    """The base class of an initializer."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        """Log each initialized array's |x|/size(x) (or ``print_func(arr)``)."""
        self._verbose = verbose
        if print_func is None:
            def print_func(x):
                return str(float(torch.linalg.vector_norm(x.float())) / np.sqrt(x.numel()))
        self._print_func = print_func
        return self

    def _verbose_print(self, desc, init, arr):
        if self._verbose and self._print_func:
            _LOG.info('Initialized %s as %s: %s', desc, init, self._print_func(arr))

    def dumps(self):
        """JSON ``[lower-cased class name, kwargs]``, e.g. ``'["normal", {"sigma": 0.5}]'``."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, desc, arr):
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get("__init__", "")
        if init:
            create(init)._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        for suffix, method in _SUFFIX_RULES:
            if desc.endswith(suffix):
                getattr(self, method)(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        self._init_default(desc, arr)

    def _legacy_init(self, name, arr):
        warnings.warn("Calling initializer with init(str, NDArray) has been deprecated."
                      "please use init(mx.init.InitDesc(...), NDArray) instead.",
                      DeprecationWarning, stacklevel=3)
        if not isinstance(name, str):
            raise TypeError('name must be string')
        if not isinstance(arr, torch.Tensor):
            raise TypeError('arr must be NDArray')
        if name.startswith('upsampling'):
            self._init_bilinear(name, arr)
        elif name.startswith('stn_loc') and name.endswith('weight'):
            self._init_zero(name, arr)
        elif name.startswith('stn_loc') and name.endswith('bias'):
            self._init_loc_bias(name, arr)
        else:
            legacy = (("bias", "_init_bias"), ("gamma", "_init_gamma"),
                      ("beta", "_init_beta"), ("weight", "_init_weight")) + _SUFFIX_RULES[4:]
            for suffix, method in legacy:
                if name.endswith(suffix):
                    getattr(self, method)(name, arr)
                    return
            self._init_default(name, arr)

    def _init_bilinear(self, _, arr):
        _assign(arr, _bilinear(tuple(arr.shape)))

    def _init_loc_bias(self, _, arr):
        assert arr.shape[0] == 6
        _assign(arr, np.array([1.0, 0, 0, 0, 1.0, 0]))

    def _init_zero(self, _, arr):
        _assign(arr, 0.0)

    def _init_one(self, _, arr):
        _assign(arr, 1.0)

    def _init_bias(self, _, arr):
        _assign(arr, 0.0)

    def _init_gamma(self, _, arr):
        _assign(arr, 1.0)

    def _init_beta(self, _, arr):
        _assign(arr, 0.0)

    def _init_weight(self, name, arr):
        """Abstract method to initialize weight."""
        raise NotImplementedError("Must override it")

    def _init_default(self, name, _):
        raise ValueError(
            'Unknown initialization pattern for %s. '
            'Default initialization is now limited to '
            '"weight", "bias", "gamma" (1.0), and "beta" (0.0).'
            'Please use mx.sym.Variable(init=mx.init.*) to set initialization pattern' % name)

    def __eq__(self, other):
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = object.__hash__

    def __repr__(self):
        return f"{type(self).__name__}({self._kwargs})"


def _bilinear(shape):
    weight = np.zeros(int(np.prod(shape)), dtype="float32")
    f = np.ceil(shape[3] / 2.)
    c = (2 * f - 1 - f % 2) / (2. * f)
    for i in range(int(np.prod(shape))):
        x = i % shape[3]
        y = (i // shape[3]) % shape[2]
        weight[i] = (1 - abs(x / f - c)) * (1 - abs(y / f - c))
    return weight.reshape(shape)


# ------------------------------------------------------ non-registered ones
class Load:
    """Initialize from a dict (or ``.params`` file) of arrays, falling back to ``default_init``.

    ``arg:`` / ``aux:`` prefixes are stripped from the keys.
    """

    def __init__(self, param, default_init=None, verbose=False):
        if isinstance(param, str):
            from runtime.ndarray_io import load
            param = load(param)
        assert isinstance(param, dict)
        self.param = {}
        for name, arr in param.items():
            if name.startswith('arg:') or name.startswith('aux:'):
                self.param[name[4:]] = arr
            else:
                self.param[name] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        if name in self.param:
            assert tuple(arr.shape) == tuple(self.param[name].shape), \
                'Parameter %s cannot be initialized from loading. ' % name + \
                'Shape mismatch, target %s vs loaded %s' % (str(arr.shape),
                                                            self.param[name].shape)
            _assign(arr, torch.as_tensor(np.asarray(self.param[name])) if not isinstance(
                self.param[name], torch.Tensor) else self.param[name])
            if self.verbose:
                _LOG.info('Initialized %s by loading', name)
        else:
            assert self.default_init is not None, \
                "Cannot Initialize %s. Not found in loaded param " % name + \
                "and no default Initializer is provided."
            self.default_init(name, arr)
            if self.verbose:
                _LOG.info('Initialized %s by default', name)


class Mixed:
    """Pick the initializer of the first regex pattern that matches the name."""

    def __init__(self, patterns, initializers):
        assert len(patterns) == len(initializers)
        self.map = list(zip([re.compile(p) for p in patterns], initializers))

    def __call__(self, name, arr):
        for prog, init in self.map:
            if prog.match(name):
                init(name, arr)
                return
        raise ValueError('Parameter name %s did not match any pattern. Consider '
                         'add a ".*" pattern at the and with default Initializer.' % name)


# ------------------------------------------------------------- registered
@register
@alias("zeros")
class Zero(Initializer):
    """Fill with 0."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _assign(arr, 0)


@register
@alias("ones")
class One(Initializer):
    """Fill with 1."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _assign(arr, 1)


@register
class Constant(Initializer):
    """Fill with ``value`` (a scalar or an array broadcast to the shape)."""

    def __init__(self, value):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _, arr):
        v = self.value
        if isinstance(v, (list, tuple, np.ndarray)) or isinstance(v, torch.Tensor):
            v = torch.as_tensor(np.asarray(v) if not isinstance(v, torch.Tensor) else v)
            with torch.no_grad():
                arr.copy_(v.to(arr.device, torch_dtype(arr)).expand_as(arr))
        else:
            _assign(arr, v)

    def dumps(self):
        val = self._kwargs['value']
        if not np.isscalar(val):
            if isinstance(val, torch.Tensor):
                val = val.detach().cpu().double().tolist()
            elif isinstance(val, np.ndarray):
                val = val.tolist()
            self._kwargs['value'] = val
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])


@register
class Uniform(Initializer):
    """Uniform samples in ``[-scale, scale]``."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _fill_random(arr, "uniform", -self.scale, self.scale)


@register
class Normal(Initializer):
    """Normal samples with mean 0 and standard deviation ``sigma``."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _fill_random(arr, "normal", 0, self.sigma)


@register
class Orthogonal(Initializer):
    """A scaled orthogonal matrix (rows or columns, as the shape allows) from an SVD."""

    def __init__(self, scale=1.414, rand_type="uniform"):
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        nout = arr.shape[0]
        nin = int(np.prod(arr.shape[1:]))
        if self.rand_type == "uniform":
            tmp = _draw((nout, nin), "uniform", -1.0, 1.0, _ctx_of(arr)).numpy()
        elif self.rand_type == "normal":
            tmp = _draw((nout, nin), "normal", 0.0, 1.0, _ctx_of(arr)).numpy()
        else:
            raise ValueError(f"Unknown random type {self.rand_type!r}")
        u, _s, v = np.linalg.svd(tmp, full_matrices=False)
        res = u if u.shape == tmp.shape else v
        _assign(arr, (self.scale * res.reshape(tuple(arr.shape))).astype(np.float32))


@register
class Xavier(Initializer):
    """Glorot / Xavier: scale ``sqrt(magnitude / factor)`` where factor is the
    average, input or output fan (``factor_type`` 'avg' / 'in' / 'out');
    ``rnd_type`` 'uniform' draws from ``[-scale, scale]``, 'gaussian' from N(0, scale)."""

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _scale(self, name, shape):
        if len(shape) < 2:
            raise ValueError('Xavier initializer cannot be applied to vector {0}. It requires at'
                             ' least 2D.'.format(name))
        hw_scale = float(np.prod(shape[2:])) if len(shape) > 2 else 1.
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factors = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}
        if self.factor_type not in factors:
            raise ValueError("Incorrect factor type")
        return np.sqrt(self.magnitude / factors[self.factor_type])

    def _init_weight(self, name, arr):
        scale = self._scale(name, tuple(arr.shape))
        if self.rnd_type == "uniform":
            _fill_random(arr, "uniform", -scale, scale)
        elif self.rnd_type == "gaussian":
            _fill_random(arr, "normal", 0, scale)
        else:
            raise ValueError("Unknown random type")


@register
class MSRAPrelu(Xavier):
    """He / MSRA initialization for PReLU nets: Xavier 'gaussian' with magnitude 2/(1+slope^2)."""

    def __init__(self, factor_type="avg", slope=0.25):
        magnitude = 2. / (1 + slope ** 2)
        super().__init__("gaussian", factor_type, magnitude)
        self._kwargs = {'factor_type': factor_type, 'slope': slope}


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernels."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _assign(arr, _bilinear(tuple(arr.shape)))


@register
class LSTMBias(Initializer):
    """Zero biases except the forget gate's (the second quarter), set to ``forget_bias``."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        _assign(arr, 0.0)
        num_hidden = int(arr.shape[0] / 4)
        with torch.no_grad():
            arr[num_hidden:2 * num_hidden] = self.forget_bias
