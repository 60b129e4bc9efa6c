"""mxnet 1.9.1's small contrib operators: ``_contrib_arange_like``,
``_contrib_index_copy``, ``_contrib_quadratic``, ``_contrib_div_sqrt_dim`` (one of its
transformer operators), ``_contrib_gradientmultiplier`` and the straight-through
estimators ``_contrib_round_ste`` / ``_contrib_sign_ste``, ``_contrib_index_array`` and
``_contrib_allclose``.

* ``arange_like``: ``start + (i // repeat) * step`` over data's shape (or along one axis),
  in data's dtype (start and step truncated first for an integer dtype); zero gradient.
* ``index_copy(old, index, new)``: row ``index[i]`` of the output is row ``i`` of ``new``,
  the other rows are ``old``'s. Where an index repeats, the last row given wins. Its
  gradient is mxnet's ``_contrib_backward_index_copy``: ``old`` gets the output gradient
  with the copied rows zeroed, ``new`` gets the output gradient's row ``index[i]`` for
  every ``i`` (repeats included), ``index`` gets zeros.
* ``quadratic``: ``x * (a * x + b) + c`` as mxnet's kernel writes it.
* ``div_sqrt_dim``: ``x / sqrt(x.shape[-1])``, the square root rounded to the dtype;
  its gradient is itself applied to the output gradient.
* ``gradientmultiplier``: the identity, whose gradient is scaled by ``scalar``.
* ``round_ste`` / ``sign_ste``: ``round`` / ``sign`` forward, gradient passed through.
* ``index_array``: each element's int64 coordinates (all axes, or ``axes``); zero gradient.
* ``allclose``: a uint8 of shape ``()``, 1 where every element has ``a == b`` or
  ``|a - b| <= atol + rtol * |b|`` (both NaN counts under ``equal_nan``); no gradient, as
  in mxnet.
"""
from __future__ import annotations

import math

import torch

from ..ir.dtypes import is_float
from .contrib_common import cast_to, parse_float32, require_rank, zero_gradients
from .elemwise import _identity_view, same_shape
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, normalize_axis,
                       parse_bool, parse_float, parse_optional_int, parse_positive_int,
                       parse_shape, parse_str, prod, register)

# -- arange_like ---------------------------------------------------------------------------


def _arange_like_out(attrs, shape):
    if attrs["axis"] is None:
        return tuple(shape)
    return (shape[normalize_axis(attrs["axis"], len(shape), "arange_like")],)


def _arange_like_shape(attrs, in_shapes):
    x = in_shapes[0]
    return in_shapes, [None if x is None else _arange_like_out(attrs, x)]


def _start_step(attrs, dtype):
    start, step = attrs["start"], attrs["step"]
    if dtype is not None and not is_float(dtype):   # mxnet casts them to the integer type
        start, step = float(math.trunc(start)), float(math.trunc(step))
    return start, step


def _arange_like_ref(attrs, ins, is_train):
    x = ins[0]
    shape = _arange_like_out(attrs, tuple(x.shape))
    start, step = _start_step(attrs, str(x.dtype).replace("torch.", ""))
    i = torch.div(torch.arange(prod(shape)), attrs["repeat"], rounding_mode="floor")
    return [(start + i.to(x.dtype) * step).to(x.dtype).reshape(shape)]


def _arange_like_build(b, n, is_train):
    shape = n.out_shapes[0]
    size, repeat = prod(shape), n.attrs["repeat"]
    start, step = _start_step(n.attrs, n.inputs[0].dtype)
    distinct = -(-size // repeat)
    idx = b.op("_arange", start=0.0, stop=float(distinct), step=1.0, repeat=repeat)
    if distinct * repeat != size:
        idx = b.op("slice_axis", idx, axis=0, begin=0, end=size)
    idx = cast_to(b, idx, n.inputs[0].dtype)
    val = b.op("_plus_scalar", b.op("_mul_scalar", idx, scalar=step), scalar=start)
    return [val if tuple(shape) == (size,) else b.op("Reshape", val, shape=tuple(shape))]


register(OpDef(
    name="_contrib_arange_like", aliases=("_npx_arange_like",), pattern="composite",
    lowering=Decompose(_arange_like_build),
    attrs=[Attr("start", parse_float, 0.0), Attr("step", parse_float, 1.0),
           Attr("repeat", parse_positive_int, 1), Attr("ctx", parse_str, ""),
           Attr("axis", parse_optional_int, None)],
    infer_shape=_arange_like_shape, reference=_arange_like_ref, gradient=zero_gradients,
    doc="start + (i // repeat) * step over data's shape, or along data's `axis` (1-D)."))


# -- index_copy ----------------------------------------------------------------------------

def _index_copy_shape(attrs, in_shapes):
    old, idx, new = in_shapes
    if old is None or idx is None or new is None:
        return in_shapes, [old]
    require_rank("index_copy", "index_vector", idx, 1)
    if len(old) != len(new) or len(old) < 1:
        raise ShapeError(f"index_copy: old_tensor {tuple(old)} and new_tensor {tuple(new)} "
                         f"must have the same number of dims")
    if new[0] > old[0] or tuple(new[1:]) != tuple(old[1:]):
        raise ShapeError(f"index_copy: new_tensor {tuple(new)} must match old_tensor "
                         f"{tuple(old)} beyond the first dim, with no more rows")
    if idx[0] != new[0]:
        raise ShapeError(f"index_copy: index_vector of length {idx[0]} must have one entry "
                         f"per row of new_tensor {tuple(new)}")
    return in_shapes, [tuple(old)]


def _index_copy_ref(attrs, ins, is_train):
    old, idx, new = ins
    out = old.clone()
    for i, j in enumerate(idx.detach().to(torch.int64).tolist()):
        out[j] = new[i]
    return [out]


def _rows_like(b, v, shape):
    """A per-row value ``(M,)`` broadcast over ``shape`` (rows first)."""
    lead = b.op("Reshape", v, shape=(shape[0],) + (1,) * (len(shape) - 1))
    return lead if len(shape) == 1 else b.op("broadcast_to", lead, shape=tuple(shape))


def _last_source(b, idx, rows):
    """``(hit, src)`` per output row ``j``: whether some ``index[i] == j``, and the last
    such ``i`` (0 where none)."""
    k = idx.shape[0]
    want = b.op("Reshape", b.op("trunc", idx), shape=(1, k))
    row = b.op("_axis_index", shape=(rows, k), axis=0)
    match = b.op("broadcast_equal", row, want)                        # (M, K)
    order = b.op("_plus_scalar", b.op("_axis_index", shape=(rows, k), axis=1), scalar=1.0)
    last = b.op("max", b.op("elemwise_mul", match, order), axis=1)    # i + 1, or 0
    return b.op("_greater_scalar", last, scalar=0.0), b.op("_minus_scalar", last, scalar=1.0)


def _index_copy_build(b, n, is_train):
    old, idx, new = n.inputs
    shape = tuple(n.in_shapes[0])
    hit, src = _last_source(b, cast_to(b, idx, "float32"), shape[0])
    got = b.op("take", new, src, axis=0)
    return [b.op("where", _rows_like(b, hit, shape), got, old)]


def _index_copy_gradient(b, n):
    old, idx, new = n.inputs
    shape = tuple(n.in_shapes[0])
    dy = n.ograds[0]
    hit, _ = _last_source(b, cast_to(b, idx, "float32"), shape[0])
    d_old = b.op("where", _rows_like(b, hit, shape), b.zeros_like(dy), dy)
    d_new = b.op("take", dy, b.op("trunc", idx), axis=0)
    return [d_old, b.zeros_like(idx), d_new]


register(OpDef(
    name="_contrib_index_copy", pattern="composite", lowering=Decompose(_index_copy_build),
    arguments=("old_tensor", "index_vector", "new_tensor"),
    infer_shape=_index_copy_shape, reference=_index_copy_ref, gradient=_index_copy_gradient,
    infer_type=lambda attrs, in_types: ([in_types[0], in_types[1], in_types[0]],
                                        [in_types[0]]),
    doc="old_tensor with row index[i] replaced by new_tensor's row i."))


# -- quadratic, div_sqrt_dim ---------------------------------------------------------------

def _quadratic_gradient(b, n):
    a, bb = n.attrs["a"], n.attrs["b"]
    slope = b.op("_contrib_quadratic", n.inputs[0], a=0.0, b=2.0 * a, c=bb)
    return [b.op("elemwise_mul", n.ograds[0], slope)]


register(OpDef(
    name="_contrib_quadratic", pattern="elemwise",
    lowering=Pointwise(lambda attrs, x: x * (attrs["a"] * x + attrs["b"]) + attrs["c"]),
    attrs=[Attr("a", parse_float32, 0.0), Attr("b", parse_float32, 0.0),
           Attr("c", parse_float32, 0.0)],
    infer_shape=same_shape, gradient=_quadratic_gradient,
    reference=lambda attrs, ins, is_train: [
        ins[0] * (attrs["a"] * ins[0] + attrs["b"]) + attrs["c"]],
    doc="a * x**2 + b * x + c, elementwise."))


def _sqrt_dim(shape, dtype):
    """mxnet's ``DType(sqrt(double(d)))``: the root rounded to the data's dtype."""
    require_rank("div_sqrt_dim", "data", shape, 1, at_least=True)
    root = math.sqrt(float(shape[-1]))
    return float(torch.tensor(root, dtype=getattr(torch, dtype or "float32")))


def _div_sqrt_dim_build(b, n, is_train):
    x = n.inputs[0]
    return [b.op("_div_scalar", x, scalar=_sqrt_dim(n.in_shapes[0], x.dtype))]


register(OpDef(
    name="_contrib_div_sqrt_dim", pattern="composite", lowering=Decompose(_div_sqrt_dim_build),
    infer_shape=same_shape,
    reference=lambda attrs, ins, is_train: [
        ins[0] / _sqrt_dim(tuple(ins[0].shape), "float32")],   # the tests' float32 data
    gradient=lambda b, n: [b.op("_contrib_div_sqrt_dim", n.ograds[0])],
    doc="data / sqrt(data.shape[-1])."))


# -- gradientmultiplier, round_ste, sign_ste ----------------------------------------------

register(OpDef(
    name="_contrib_gradientmultiplier", pattern="injective", lowering=_identity_view,
    attrs=[Attr("scalar", parse_float, 1.0), Attr("is_int", parse_bool, True)],
    infer_shape=same_shape, reference=lambda attrs, ins, is_train: [ins[0]],
    gradient=lambda b, n: [b.op("_mul_scalar", n.ograds[0], scalar=n.attrs["scalar"])],
    doc="The identity forward; the gradient multiplied by `scalar`."))


def _ste(name, forward):
    register(OpDef(
        name=name, pattern="composite", infer_shape=same_shape,
        lowering=Decompose(lambda b, n, is_train: [b.op(forward, n.inputs[0])]),
        reference=lambda attrs, ins, is_train: [_REFS[forward](ins[0])],
        gradient=lambda b, n: [n.ograds[0]],
        doc=f"{forward}(x) forward; the gradient passed straight through."))


_REFS = {"round": lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5), "sign": torch.sign}
_ste("_contrib_round_ste", "round")
_ste("_contrib_sign_ste", "sign")


# -- index_array ---------------------------------------------------------------------------

_EXACT = 1 << 24      # coordinates are made as float32 (``_axis_index``): exact below 2**24


def _index_axes(attrs, shape):
    if attrs["axes"] is None:
        return tuple(range(len(shape)))
    return tuple(normalize_axis(a, len(shape), "index_array") for a in attrs["axes"])


def _index_array_shape(attrs, in_shapes):
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    axes = _index_axes(attrs, x)
    if any(x[a] > _EXACT for a in axes):
        raise ShapeError(f"index_array: data of shape {tuple(x)}: coordinates past 2**24 "
                         f"are not supported")
    return in_shapes, [tuple(x) + (len(axes),)]


def _index_array_ref(attrs, ins, is_train):
    x = ins[0]
    grids = torch.meshgrid(*[torch.arange(s) for s in x.shape], indexing="ij")
    return [torch.stack([grids[a] for a in _index_axes(attrs, tuple(x.shape))], -1)]


def _index_array_build(b, n, is_train):
    shape = tuple(n.in_shapes[0]) + (1,)
    parts = [b.op("_axis_index", shape=shape, axis=a) for a in _index_axes(n.attrs, shape[:-1])]
    out = parts[0] if len(parts) == 1 else b.op("Concat", *parts, num_args=len(parts),
                                                 dim=len(shape) - 1)
    return [b.op("Cast", out, dtype="int64")]


def _optional_axes(v):
    if v is None or str(v).strip() in ("None", ""):
        return None
    return parse_shape(v)


register(OpDef(
    name="_contrib_index_array", pattern="composite", lowering=Decompose(_index_array_build),
    attrs=[Attr("axes", _optional_axes, None)],
    infer_shape=_index_array_shape, reference=_index_array_ref, gradient=zero_gradients,
    infer_type=lambda attrs, in_types: (in_types, ["int64"]),
    doc="int64 coordinates of every element of data, (d1, ..., dn, n), or of the given "
        "axes only, (d1, ..., dn, len(axes))."))


# -- allclose ------------------------------------------------------------------------------

def _allclose_shape(attrs, in_shapes):
    a, b = in_shapes
    if a is not None and b is not None and tuple(a) != tuple(b):
        raise ShapeError(f"allclose: a {tuple(a)} and b {tuple(b)} must have the same shape")
    return in_shapes, [()]


def _close_ref(attrs, a, b):
    """mxnet's ``allclose_forward`` per element (NaNs equal only under ``equal_nan``)."""
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    near = (a == b) | ((a - b).abs() <= attrs["atol"] + attrs["rtol"] * b.abs())
    return torch.where(nan_a | nan_b, (nan_a == nan_b) & attrs["equal_nan"], near)


def _allclose_ref(attrs, ins, is_train):
    return [_close_ref(attrs, *ins).all().to(torch.uint8).reshape(())]


def _allclose_build(b, n, is_train):
    x, y = n.inputs
    a = n.attrs
    nans = b.op("elemwise_add", b.op("_not_equal", x, x), b.op("_not_equal", y, y))  # 0, 1, 2
    bound = b.op("_plus_scalar", b.op("_mul_scalar", b.op("abs", y), scalar=a["rtol"]),
                 scalar=a["atol"])
    near = b.op("_lesser_equal", b.op("abs", b.op("elemwise_sub", x, y)), bound)
    close = b.op("_logical_or", b.op("_equal", x, y), near)
    nan_ok = b.op("_equal_scalar", nans, scalar=2.0) if a["equal_nan"] else b.zeros_like(nans)
    value = b.op("where", b.op("_greater_scalar", nans, scalar=0.0), nan_ok, close)
    return [b.op("Cast", b.op("Reshape", b.op("min", value), shape=()), dtype="uint8")]


register(OpDef(
    name="_contrib_allclose", pattern="composite", lowering=Decompose(_allclose_build),
    arguments=("a", "b"),
    attrs=[Attr("rtol", parse_float32, 1e-05), Attr("atol", parse_float32, 1e-08),
           Attr("equal_nan", parse_bool, True)],
    infer_shape=_allclose_shape, reference=_allclose_ref,
    infer_type=lambda attrs, in_types: (in_types, ["uint8"]),
    doc="1 (uint8, shape ()) if every |a - b| <= atol + rtol * |b| (or a == b; NaNs equal "
        "under equal_nan), else 0."))
