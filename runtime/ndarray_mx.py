"""mxnet's legacy NDArray semantics where they differ from torch's (a mixin of NDArray).

An NDArray is a ``torch.Tensor`` subclass, so two kinds of caller see it:

* user code (and this project's code), which gets mxnet's behaviour: ``dtype`` is
  numpy's type object (``a.dtype == np.float32``), integer division truncates,
  arrays of two dtypes are refused in arithmetic, ``reshape`` takes mxnet's special
  codes, the reductions take ``axis`` / ``keepdims`` / ``exclude`` as mxnet does,
  indexing takes NDArray indices and negative steps, and ``slice``,
  ``slice_axis``, ``take``, ``broadcast_to``, ``broadcast_axes``, ``tile`` ... are
  the registry's operators;
* torch itself (its Python functions, and anything running under a
  ``__torch_function__`` handler), which gets a plain tensor's behaviour: a
  ``torch.dtype``, torch's ``reshape`` and methods, so an NDArray can be handed to
  any torch function.

:func:`mxnet_caller` tells them apart: torch's handlers run with subclass
dispatch disabled, and torch's (and Triton's) own Python code lives in modules
named ``torch.*`` (``triton.*``). Project code that needs the torch dtype of an array (to allocate
with it, to compare it with ``torch.float16``) asks :func:`torch_dtype`.
"""
from __future__ import annotations

import numbers
import sys
import time

import numpy as np
import torch

from . import launcher as _launcher
from . import threads as _threads

_TORCH_DTYPE = torch._C.TensorBase.dtype
_DISABLED = torch._C.DisableTorchFunctionSubclass
_enabled = torch._C._is_torch_function_enabled

# mxnet's Python type per torch dtype (bfloat16: mxnet's own numpy record type)
_MX_TYPES = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16,
             torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
             torch.int32: np.int32, torch.int64: np.int64, torch.bool: np.bool_,
             torch.bfloat16: np.dtype([("bfloat16", np.uint16)])}


# libraries whose Python code reads tensors (Triton's launcher reads ``arg.dtype``)
_TENSOR_LIBRARIES = ("torch.", "triton.", "torch", "triton")


def torch_dtype(t) -> torch.dtype:
    """The ``torch.dtype`` of a tensor, an NDArray or a sparse array (whose ``dtype``
    are numpy's, as mxnet's)."""
    if not isinstance(t, torch.Tensor):
        values = getattr(t, "_data_t", None)     # a sparse array: its values' dtype
        if values is not None:
            return values.dtype
        if isinstance(getattr(t, "dtype", None), torch.dtype):
            return t.dtype
    with _DISABLED():
        return _TORCH_DTYPE.__get__(t)


def mx_dtype(dt: torch.dtype):
    """mxnet's Python dtype (numpy's type object) of a torch dtype."""
    return _MX_TYPES.get(dt, dt)


def mxnet_caller(depth: int = 2) -> bool:
    """Whether the code ``depth`` frames up is user code (mxnet semantics), not torch's."""
    if not _enabled():
        return False
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return not name.startswith(_TENSOR_LIBRARIES)


# this project's packages: code of theirs was written against torch's meaning of the
# methods below, which a program's code gets in mxnet's
_OWN_PACKAGES = ("runtime", "compiler", "module_api")


def program_caller(depth: int = 2) -> bool:
    """Whether the code ``depth`` frames up is a program's (user code, tests, mxnet's
    scripts through the alias): neither torch's nor this project's own packages."""
    if not mxnet_caller(depth + 1):
        return False
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return not any(name == p or name.startswith(p + ".") for p in _OWN_PACKAGES)


# ``runtime.imperative.invoke``, which registers itself when imported (it imports this
# module's NDArray, so this module cannot import it)
_ENGINE: list = []


def register_engine(invoke) -> None:
    """Make ``invoke(op_name, args, kwargs)`` run NDArray's operator methods."""
    _ENGINE[:] = [invoke]


# ``runtime.autograd_tape``, which registers itself: while it records, arithmetic,
# ``reshape`` and indexing run registry operators, so the tape sees them
_TAPE: list = [None]


def register_recorder(tape) -> None:
    """Make ``tape`` (with ``STATE.recording`` and ``binary``/``reshape``/``getitem``)
    record NDArray's arithmetic and views while it records."""
    _TAPE[0] = tape


def recording() -> bool:
    """Whether ``mx.autograd`` is recording (NDArray methods then run operators)."""
    tape = _TAPE[0]
    return tape is not None and tape.STATE.recording


def mark_variable(arr, grad, grad_req="write"):
    """Make ``arr`` an ``mx.autograd`` variable whose gradient goes into ``grad`` per
    ``grad_req`` (``write``, ``add`` or ``null``)."""
    if grad_req not in ("write", "add", "null"):
        from compiler.errors import MXNetError
        raise MXNetError(f"grad_req must be 'write', 'add' or 'null', got {grad_req!r}")
    arr._ag_req = grad_req
    arr.__dict__.pop("_ag_node", None)      # a variable is a leaf of later recordings
    arr.__dict__.pop("_ag_sparse_grad", None)   # (runtime/autograd_sparse.py sets it)
    arr.grad = grad
    arr._fresh_grad = False     # mxnet's grad state: set when a backward writes grad


def backward(heads, head_grads, retain_graph, train_mode):
    """``mx.autograd.backward`` through the registered tape."""
    if _TAPE[0] is None:
        from compiler.errors import MXNetError
        raise MXNetError("backward: nothing was recorded (mx.autograd.record())")
    _TAPE[0].backward(heads, head_grads, retain_graph, train_mode)


def records(*arrays) -> bool:
    """Whether an NDArray method on ``arrays`` is recorded: ``mx.autograd`` records and
    one of them is on the tape (a marked variable or a recorded result). Views of the
    others stay torch's views (the executor's own ``reshape(-1)`` of bound arrays)."""
    tape = _TAPE[0]
    return tape is not None and tape.STATE.recording and any(map(tape.tracked, arrays))


def _invoke(op_name, args, kwargs):
    return _ENGINE[0](op_name, args, kwargs)


def _is_scalar(x) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, torch.Tensor)


def _check_same_dtype(a, b, what):
    da, db = torch_dtype(a), torch_dtype(b)
    if da != db:
        from compiler.errors import MXNetError
        raise MXNetError(
            f"{what}: incompatible dtypes {str(da).replace('torch.', '')} and "
            f"{str(db).replace('torch.', '')} (mxnet refuses arrays of two dtypes in one "
            f"operator; convert one with astype())")


def _operand(self, other, what):
    """``other`` as mxnet's operator sees it: an array of the same dtype, or a number
    converted to an integer array's dtype (mxnet casts the scalar: ``int32 + 2.7``
    adds 2)."""
    if isinstance(other, torch.Tensor):
        _check_same_dtype(self, other, what)
        return other
    if _is_scalar(other):
        dt = torch_dtype(self)
        if not dt.is_floating_point and dt != torch.bool and not isinstance(other, bool):
            return int(other)
    return other


def _sparse_operand(x) -> bool:
    """Whether ``x`` is a csr / row_sparse array (not a tensor): its own method runs."""
    return getattr(x, "stype", None) in ("csr", "row_sparse") and \
        not isinstance(x, torch.Tensor)


# NDArray arithmetic as mxnet's operators: method -> (the operator for an array operand,
# for a number operand, whether the operands are reversed). The tape records these
# (autograd_methods.py) and mx.profiler files calls under them.
ARITHMETIC_OPS = {
    "__add__": ("broadcast_add", "_plus_scalar", False),
    "__radd__": ("broadcast_add", "_plus_scalar", True),
    "__sub__": ("broadcast_sub", "_minus_scalar", False),
    "__rsub__": ("broadcast_sub", "_rminus_scalar", True),
    "__mul__": ("broadcast_mul", "_mul_scalar", False),
    "__rmul__": ("broadcast_mul", "_mul_scalar", True),
    "__truediv__": ("broadcast_div", "_div_scalar", False),
    "__rtruediv__": ("broadcast_div", "_rdiv_scalar", True),
    "__mod__": ("broadcast_mod", "_mod_scalar", False),
    "__rmod__": ("broadcast_mod", "_rmod_scalar", True),
    "__pow__": ("broadcast_power", "_power_scalar", False),
    "__rpow__": ("broadcast_power", "_rpower_scalar", True),
}


# ATen splits an elementwise call over the thread team only past this many elements
PARALLEL_GRAIN = 32768


def _at_policy_count(numel, fn, *args):
    """``fn(*args)``, at the thread policy's count when the call is large enough for ATen
    to open a parallel region: on a busy machine a region at the user's count waits for
    descheduled team threads (``runtime/threads.py``), as a launch list's would."""
    if numel < PARALLEL_GRAIN:
        return fn(*args)
    return _threads.run(None, fn, *args)


def _binary(name, mx_fn, reverse=False):
    """An arithmetic operator: ``mx_fn`` with mxnet's dtype rules for user code,
    torch's operator of the same name for torch's own callers. While ``mx.profiler``
    records, the call is a range named as mxnet's operator (``_plus_scalar`` ...)."""
    torch_op = getattr(torch.Tensor, name)
    array_op, scalar_op, _ = ARITHMETIC_OPS[name]

    def method(self, other):
        if not mxnet_caller():
            return torch_op(self, other)
        if _sparse_operand(other):
            return NotImplemented      # a sparse array's reflected method computes it
        other = _operand(self, other, f"NDArray.{name}")
        if records(self, other):
            return _TAPE[0].binary(name, self, other)
        start = _launcher.PROFILING and time.perf_counter_ns()
        with _DISABLED():
            res = _at_policy_count(self.numel(), mx_fn, *((other, self) if reverse else
                                                          (self, other)))
        if start:
            _launcher.record_operator(
                array_op if isinstance(other, torch.Tensor) else scalar_op, start)
        return _like(res, self)
    method.__name__ = name
    return method


def _comparison(name, broadcast_op, scalar_op):
    """A comparison as mxnet's NDArray runs it: the registry's ``broadcast_*`` operator
    against an array, its ``_*_scalar`` operator against a number; the result has the
    input's dtype (1 and 0), not bool. Torch's and this project's own code (written for
    bool masks) get torch's operator."""
    torch_op = getattr(torch.Tensor, name)

    def method(self, other):
        if not program_caller():
            return torch_op(self, other)
        if _sparse_operand(other):
            return NotImplemented
        if isinstance(other, torch.Tensor):
            _check_same_dtype(self, other, f"NDArray.{name}")
            return _invoke(broadcast_op, (self, other), {})
        if _is_scalar(other):
            return _invoke(scalar_op, (self,), {"scalar": other})
        raise TypeError(f"NDArray.{name}: type {type(other).__name__} not supported "
                        f"(mxnet compares an NDArray with an NDArray or a number)")
    method.__name__ = name
    return method


def _truediv(a, b):
    """mxnet's division: integer arrays divide and truncate toward zero."""
    dt = a.dtype if isinstance(a, torch.Tensor) else b.dtype
    if not dt.is_floating_point:
        return torch.div(torch.as_tensor(a), torch.as_tensor(b), rounding_mode="trunc").to(dt)
    return torch.true_divide(a, b)


def _mod(a, b):
    """mxnet's mod: the divisor's sign (torch's remainder), and 0 where the divisor is 0
    (torch gives NaN for floats and raises for integers)."""
    if not isinstance(b, torch.Tensor):
        return torch.zeros_like(a) if b == 0 else torch.remainder(a, b)
    zero = b == 0
    r = torch.remainder(a, torch.where(zero, torch.ones_like(b), b))
    return torch.where(zero, torch.zeros((), dtype=r.dtype), r)


def _like(res, like):
    """``res`` as an NDArray (the class of ``like``) on ``like``'s context."""
    if isinstance(res, torch.Tensor):
        res = res.as_subclass(type(like))
        ctx = getattr(like, "_mx_ctx", None)
        if ctx is not None:
            res._mx_ctx = ctx
    return res


def _inplace(name, mx_fn):
    """An in-place operator (``a /= 2``): the result of ``mx_fn`` written back."""
    torch_op = getattr(torch.Tensor, name)

    def method(self, other):
        if not mxnet_caller():
            return torch_op(self, other)
        if _sparse_operand(other):
            return _inplace_sparse(name, self, other)
        other = _operand(self, other, f"NDArray.{name}")
        if records(self, other):
            _TAPE[0].refuse_inplace(name, self)
        with _DISABLED():
            _at_policy_count(self.numel(), lambda: self.copy_(mx_fn(self, other)))
        return self
    method.__name__ = name
    return method


# the sparse array's reflected method that computes ``dense (op) sparse``
_SPARSE_INPLACE = {"__iadd__": "__radd__", "__isub__": "__rsub__", "__imul__": "__rmul__",
                   "__itruediv__": "__rtruediv__"}


def _inplace_sparse(name, self, other):
    """``dense += row_sparse`` (and ``-=``, ``*=``, ``/=``): the result written into
    ``self``, as mxnet writes its operator's output into the dense array. Returning
    NotImplemented would make Python rebind the name to a new array and leave ``self``
    as it was (a kvstore updater's ``local += recv`` then updates nothing)."""
    if name not in _SPARSE_INPLACE:
        return NotImplemented       # the sparse array's reflected method, or its error
    if records(self):
        _TAPE[0].refuse_inplace(name, self)
    res = getattr(other, _SPARSE_INPLACE[name])(self)
    dense = res.tostype("default") if _sparse_operand(res) else res
    with _DISABLED():
        self.copy_(dense.as_subclass(torch.Tensor))
    return self


def plain_shape(args) -> bool:
    """A shape torch and mxnet read alike: positive dims and at most one -1."""
    dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    return all(isinstance(d, int) and (d > 0 or d == -1) for d in dims) and \
        sum(1 for d in dims if d == -1) <= 1


def reshape_fits(numel, args) -> bool:
    """Whether a plain shape (:func:`plain_shape`) holds ``numel`` elements."""
    dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    known = 1
    for d in dims:
        known *= d if d != -1 else 1
    if -1 in dims:
        return known > 0 and numel % known == 0
    return known == numel


def _reshape_shape(in_shape, args, kwargs):
    """The output shape of mxnet's ``reshape`` (special codes 0, -1, -2, -3, -4 and
    ``reverse``), from the registry's ``Reshape`` rule."""
    from compiler.ops import REGISTRY
    shape = kwargs.pop("shape", None)
    reverse = bool(kwargs.pop("reverse", False))
    if kwargs:
        raise TypeError(f"reshape: unexpected arguments {sorted(kwargs)}")
    if shape is None:
        shape = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    opdef = REGISTRY["Reshape"]
    attrs = opdef.parse_attrs({"shape": str(tuple(int(d) for d in shape)),
                               "reverse": str(reverse)}, "reshape")
    _, outs = opdef.infer_shape(attrs, [tuple(in_shape)])
    return tuple(outs[0])


# the reductions mxnet's NDArray methods call, and the keywords they take
_REDUCTIONS = {"sum": "sum", "mean": "mean", "max": "max", "min": "min", "prod": "prod",
               "nansum": "nansum", "nanprod": "nanprod", "argmax": "argmax",
               "argmin": "argmin", "norm": "norm"}
_MX_REDUCE_KEYS = {"axis", "keepdims", "exclude", "ord", "out_dtype", "out", "name"}


def _mx_reduce_call(args, kwargs) -> bool:
    """An mxnet-style reduction call: no torch-only keyword (``dim``, ``keepdim``,
    ``dtype``), at most one positional axis (an int or a tuple)."""
    return set(kwargs) <= _MX_REDUCE_KEYS and len(args) <= 1 and \
        all(isinstance(a, (int, tuple, list)) for a in args)


def _reduction(name, op_name):
    torch_method = getattr(torch.Tensor, name, None)

    def method(self, *args, **kwargs):
        if torch_method is not None and (not mxnet_caller() or not _mx_reduce_call(
                args, kwargs) or torch_dtype(self) == torch.bool):
            return torch_method(self, *args, **kwargs)
        if args:
            kwargs["axis"] = args[0]
        return _invoke(op_name, (self,), kwargs)
    method.__name__ = name
    method.__doc__ = f"mxnet's ``{op_name}`` of this array (``axis``, ``keepdims`` ...)."
    return method


def _operator_method(name, op_name, torch_method=None):
    """A method running registry operator ``op_name`` on ``self`` (torch's method, if
    any, for torch's own callers)."""
    def method(self, *args, **kwargs):
        if torch_method is not None and not mxnet_caller():
            return torch_method(self, *args, **kwargs)
        return _invoke(op_name, (self,) + args, kwargs)
    method.__name__ = name
    method.__doc__ = f"The operator ``{op_name}`` with this array as its first input."
    return method


# mxnet NDArray methods that are registry operators of the same name. Those torch also
# has (take, tile, broadcast_to) keep torch's method for torch's own callers; the
# methods torch has with another signature (transpose, flatten, split, sort ...) stay
# torch's for everyone.
OPERATOR_METHODS = (
    "slice", "slice_axis", "take", "broadcast_to", "broadcast_axes", "broadcast_like",
    "tile", "argmax_channel", "cbrt", "degrees", "depth_to_space", "one_hot", "ones_like",
    "zeros_like", "pad", "pick", "radians", "rcbrt", "reshape_like", "rint", "shape_array",
    "size_array", "slice_like", "softmin", "space_to_depth",
)


# NDArray methods torch has too (or NDArray defines as torch's) that run mxnet's
# operator instead while ``mx.autograd`` records an array on the tape, so they are
# recorded: method name -> registry operator
_UNARY_METHODS = (
    "abs", "sign", "round", "fix", "floor", "ceil", "trunc", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "exp",
    "expm1", "log", "log10", "log2", "log1p", "sqrt", "rsqrt", "square", "reciprocal",
    "relu", "sigmoid", "softmax", "log_softmax", "transpose", "clip", "expand_dims",
    "squeeze", "split", "repeat", "swapaxes", "flip")
RECORDED_METHODS = {**{n: n for n in _UNARY_METHODS},
                    "flatten": "Flatten", "astype": "Cast", "copy": "_copy",
                    "sort": "sort", "argsort": "argsort", "topk": "topk"}
# torch's methods of the same name mean something else (``flatten`` to 1-D, ``round``
# half to even, ``topk`` with another signature ...): a program's code gets mxnet's
# operator whether or not it records
SIGNATURE_METHODS = frozenset((
    "transpose", "flatten", "split", "sort", "argsort", "topk", "squeeze", "repeat", "clip",
    "round", "flip", "swapaxes", "softmax", "log_softmax"))


# methods taking mxnet's ``inplace``: True gives a view of the array (a reshape to the
# operator's result shape) where mxnet reshapes in place; False, the operator's new array
INPLACE_VIEW_METHODS = {"flatten": "Flatten", "squeeze": "squeeze", "expand_dims": "expand_dims"}


def _inplace_view(self, op_name, args, kwargs):
    """mxnet's ``x.flatten(inplace=True)`` (``squeeze``, ``expand_dims``): a view of
    ``self`` in the shape registry operator ``op_name`` gives it (its shape rule, the one
    place that says it), sharing ``self``'s memory as mxnet's in-place reshape does."""
    from compiler.ops import REGISTRY
    opdef = REGISTRY[op_name]
    names = [a.name for a in opdef.attrs]
    raw = dict(zip(names, args), **kwargs)
    attrs = opdef.parse_attrs(raw, "nd")
    _, out_shapes = opdef.infer_shape(attrs, [tuple(self.shape)])
    with _DISABLED():
        return torch.Tensor.reshape(self, tuple(out_shapes[0]))


def _recorded_method(name, op_name, original):
    """``original`` (torch's or NDArray's method), or registry operator ``op_name`` with
    mxnet's signature while an array on the tape is recorded, and always for a
    program's calls of :data:`SIGNATURE_METHODS`; mxnet's ``inplace=True`` of
    :data:`INPLACE_VIEW_METHODS` is a view (:func:`_inplace_view`)."""
    def method(self, *args, **kwargs):
        if name in INPLACE_VIEW_METHODS and mxnet_caller():
            if kwargs.pop("inplace", False) and not records(self):
                return _like(_inplace_view(self, op_name, args, kwargs), self)
            if not records(self) and program_caller():
                return _invoke(op_name, (self,) + args, kwargs)
        if (records(self) and mxnet_caller()) or \
                (name in SIGNATURE_METHODS and program_caller()):
            if name == "transpose" and args and all(isinstance(a, int) for a in args):
                args = (tuple(args),)       # x.transpose(1, 0) as x.transpose((1, 0))
            kwargs.pop("copy" if name == "astype" else "inplace", None)
            return _invoke(op_name, (self,) + args, kwargs)
        return original(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = getattr(original, "__doc__", None)
    return method


def _key_part(k):
    """An index part as torch takes it: NDArray / float indices become int64."""
    if isinstance(k, torch.Tensor) and not (torch_dtype(k) in (torch.bool, torch.int64)):
        with _DISABLED():
            return k.to(torch.int64)
    if isinstance(k, np.ndarray) and k.dtype.kind == "f":
        return k.astype(np.int64)
    return k


_BASIC_PARTS = (int, slice, type(None), type(Ellipsis), np.integer)


def basic_key(key) -> bool:
    """Whether ``key`` is a basic index (integers, slices, ``None``, ``...``)."""
    parts = key if isinstance(key, tuple) else (key,)
    return all(isinstance(p, _BASIC_PARTS) and not isinstance(p, bool) for p in parts)


def positions(key, shape) -> np.ndarray:
    """The row-major positions (int64) of the elements ``key`` selects from an array of
    ``shape``, in the result's shape: numpy's indexing, which mxnet's follows."""
    parts = key if isinstance(key, tuple) else (key,)
    parts = tuple(p.asnumpy() if hasattr(p, "asnumpy") else
                  np.asarray(p) if isinstance(p, list) else p for p in parts)
    parts = tuple(p.astype(np.int64) if isinstance(p, np.ndarray) and p.dtype.kind == "f"
                  else p for p in parts)
    try:
        out = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(tuple(shape))[parts]
    except IndexError as err:
        raise IndexError(f"indexing an array of shape {tuple(shape)} with {key!r}: "
                         f"{err}") from None
    return np.asarray(out)


def normalize_key(key, shape):
    """``(key torch accepts, dims of the result to flip)``: NDArray indices as int64,
    and every negative-step slice as the ascending slice of the same elements, whose
    result dim is flipped afterwards (torch has no negative steps; a slice of at most
    one element needs no flip, and stays a view, as in mxnet)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    out, flips, dim, odim = [], [], 0, 0
    n_real = sum(1 for p in parts if p is not None and p is not Ellipsis)
    for p in parts:
        if p is Ellipsis:
            skip = len(shape) - n_real
            dim, odim = dim + skip, odim + skip
            out.append(p)
            continue
        if p is None:
            out.append(p)
            odim += 1
            continue
        if isinstance(p, slice) and p.step is not None and p.step < 0:
            idx = range(*p.indices(shape[dim]))
            p = slice(idx[-1], idx[0] + 1, -p.step) if len(idx) else slice(0, 0)
            if len(idx) > 1:
                flips.append(odim)
        out.append(_key_part(p))
        if not isinstance(p, (int, np.integer)):
            odim += 1
        dim += 1
    return (tuple(out) if isinstance(key, tuple) else out[0]), flips
