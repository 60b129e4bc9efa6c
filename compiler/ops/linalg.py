"""mxnet 1.9.1's linalg operators that are no factorization:
``gemm``, ``gemm2``, ``syrk``, ``sumlogdiag``, ``extractdiag``, ``makediag``,
``extracttrian`` and ``maketrian``, registered as ``_linalg_X`` (``mx.sym.linalg.X``) with
mxnet's alias ``linalg_X``. The factorizations live in ``compiler/ops/linalg_factor.py``.

Every operator works on the trailing two dims (matrices; for ``gemm``/``gemm2`` the rows
lie along ``axis`` and the columns along the last dim); the other dims are a batch.

* ``gemm(A, B, C)`` = ``alpha op(A) op(B) + beta C`` and ``gemm2(A, B)`` = ``alpha op(A)
  op(B)`` are ``dot`` (2-D) or ``batch_dot`` with the scaling and the addition of C as
  its pointwise epilogue, which fusion puts into the matmul kernel. A row ``axis`` other
  than ``-2`` swaps it with the next-to-last dim (views) around the product. ``beta = 0``
  reads no C (BLAS's rule). The gradients are ``gemm2``s again, as mxnet's backward.
* ``syrk(A)`` = ``alpha A A^T`` (``transpose``: ``alpha A^T A``): one product of A with
  itself; its gradient ``alpha (dB + dB^T) A`` is one ``gemm`` over another's result.
* ``extractdiag(A, offset)``: the diagonal as a strided view of A (no copy). ``makediag``
  places a vector on diagonal ``offset`` of zeros. Each is the other's gradient.
* ``sumlogdiag(A)``: ``sum(log(extractdiag(A)))``; gradient ``makediag(dy / diag(A))``.
* ``extracttrian(A, offset, lower)`` / ``maketrian``: mxnet packs a lower triangle row by
  row and an upper one column by column. Both are a ``take`` whose indices are computed
  from the element coordinates (``_axis_index``) in the kernel: position ``j`` of the
  packed vector lies in packed row ``r = floor((sqrt(8 j + 1) - 1) / 2)`` (corrected by
  one either way, so an inexact square root cannot pick the wrong row) at column
  ``j - r (r + 1) / 2``. The indices are float32 numbers, exact below 2**24, so a matrix
  of 2**24 elements or more is refused. Each is the other's gradient.
"""
from __future__ import annotations

import torch

from ..ir.dtypes import dtype_name
from .registry import (Attr, Decompose, OpDef, ShapeError, View, parse_bool, parse_float,
                       parse_int, register)

_EXACT = 1 << 24          # float32 holds every integer below this exactly


def _float_type(attrs, in_types):
    """mxnet's ``ElemwiseType`` over float32 and float64 only (its kernels refuse other
    dtypes): an input of another dtype is asked for float32, which ``infer_types``
    reports as an incompatible input naming the node (cast it first)."""
    known = [dtype_name(t) for t in in_types if t is not None]
    t = known[0] if known else None
    if t is not None and t not in ("float32", "float64"):
        t = "float32"
    return [t] * len(in_types), [t]


# -- gemm / gemm2 ------------------------------------------------------------------------

def _row_axis(name, attrs, ndim):
    axis = attrs["axis"]
    row = axis + ndim if axis < 0 else axis
    if not 0 <= row < ndim - 1:
        raise ShapeError(f"{name}: invalid row axis ({axis}) for {ndim}-d inputs (the row "
                         f"axis must lie before the last, column, axis)")
    return row


def _gemm_out_shape(name, attrs, a, b):
    """The output shape of ``op(A) op(B)`` with rows along ``axis`` (mxnet's
    ``LaMatrixMultMacOpShape``)."""
    if len(a) < 2 or len(a) != len(b):
        raise ShapeError(f"{name}: A and B must have the same number (at least 2) of "
                         f"dimensions, got A {tuple(a)} and B {tuple(b)}")
    nd = len(a)
    row = _row_axis(name, attrs, nd)
    for i in range(nd - 1):
        if i != row and a[i] != b[i]:
            raise ShapeError(f"{name}: shapes of inputs 0, 1 must be the same, except on "
                             f"row/col axis: A {tuple(a)}, B {tuple(b)} (axis={attrs['axis']})")
    ta, tb = attrs["transpose_a"], attrs["transpose_b"]
    k_a, k_b = (a[row] if ta else a[-1]), (b[-1] if tb else b[row])
    if k_a != k_b:
        raise ShapeError(f"{name}: incompatible matrix dimensions for multiplication: A "
                         f"{tuple(a)}, B {tuple(b)} with transpose_a={ta}, transpose_b={tb}, "
                         f"axis={attrs['axis']} ({k_a} vs. {k_b})")
    out = list(a)
    out[row] = a[-1] if ta else a[row]
    out[-1] = b[row] if tb else b[-1]
    return tuple(out)


def _gemm2_shape(attrs, in_shapes):
    a, b = in_shapes
    if a is None or b is None:
        return in_shapes, [None]
    return in_shapes, [_gemm_out_shape("linalg_gemm2", attrs, a, b)]


def _gemm_shape(attrs, in_shapes):
    a, b, c = in_shapes
    if a is None or b is None:
        return in_shapes, [None]
    out = _gemm_out_shape("linalg_gemm", attrs, a, b)
    if c is not None and tuple(c) != out:
        raise ShapeError(f"linalg_gemm: C has shape {tuple(c)}, but op(A) op(B) of A "
                         f"{tuple(a)} and B {tuple(b)} has shape {out}: it must be {out}")
    return [a, b, out], [out]


def _move_rows(x, attrs):
    """A tensor with its row axis moved to the next-to-last place (torch)."""
    row = attrs["axis"] % x.dim()
    return x if row == x.dim() - 2 else x.transpose(row, x.dim() - 2)


def _product_ref(attrs, a, b):
    a, b = _move_rows(a, attrs), _move_rows(b, attrs)
    a = a.transpose(-1, -2) if attrs["transpose_a"] else a
    b = b.transpose(-1, -2) if attrs["transpose_b"] else b
    return attrs["alpha"] * torch.matmul(a, b)


def _gemm2_ref(attrs, ins, is_train):
    return [_move_rows(_product_ref(attrs, *ins), attrs).contiguous()]


def _gemm_ref(attrs, ins, is_train):
    a, b, c = ins
    out = _product_ref(attrs, a, b)
    if attrs["beta"] != 0:
        out = out + attrs["beta"] * _move_rows(c, attrs)
    return [_move_rows(out, attrs).contiguous()]


def _swap(b, x, row):
    nd = len(x.shape)
    return x if row == nd - 2 else b.op("SwapAxis", x, dim1=row, dim2=nd - 2)


def _scaled_product(b, attrs, a, m, row):
    """``alpha op(A) op(B)`` with rows moved to the next-to-last dim."""
    a, m = _swap(b, a, row), _swap(b, m, row)
    kind = "dot" if len(a.shape) == 2 else "batch_dot"
    p = b.op(kind, a, m, transpose_a=attrs["transpose_a"], transpose_b=attrs["transpose_b"])
    return p if attrs["alpha"] == 1.0 else b.op("_mul_scalar", p, scalar=attrs["alpha"])


def _gemm2_build(b, n, is_train):
    row = _row_axis("linalg_gemm2", n.attrs, len(n.in_shapes[0]))
    return [_swap(b, _scaled_product(b, n.attrs, *n.inputs, row), row)]


def _gemm_build(b, n, is_train):
    row = _row_axis("linalg_gemm", n.attrs, len(n.in_shapes[0]))
    out = _scaled_product(b, n.attrs, n.inputs[0], n.inputs[1], row)
    beta = n.attrs["beta"]
    if beta != 0:      # BLAS reads no C when beta is 0 (a NaN in C stays out)
        c = _swap(b, n.inputs[2], row)
        c = c if beta == 1.0 else b.op("_mul_scalar", c, scalar=beta)
        out = b.op("elemwise_add", out, c)
    return [_swap(b, out, row)]


def _product_grads(b, attrs, a, m, dy):
    """``dA, dB`` of ``alpha op(A) op(B)`` as ``gemm2``s (mxnet's ``gemm2_backward``)."""
    ta, tb, alpha, axis = attrs["transpose_a"], attrs["transpose_b"], attrs["alpha"], \
        attrs["axis"]
    g = lambda x, y, t1, t2: b.op("_linalg_gemm2", x, y, transpose_a=t1, transpose_b=t2,
                                  alpha=alpha, axis=axis)
    da = g(m, dy, tb, True) if ta else g(dy, m, False, not tb)
    dm = g(dy, a, True, ta) if tb else g(a, dy, not ta, False)
    return [da, dm]


def _gemm_gradient(b, n):
    dy = n.ograds[0]
    return _product_grads(b, n.attrs, n.inputs[0], n.inputs[1], dy) + \
        [b.op("_mul_scalar", dy, scalar=n.attrs["beta"])]


_FLAGS = [Attr("transpose_a", parse_bool, False), Attr("transpose_b", parse_bool, False),
          Attr("alpha", parse_float, 1.0)]

register(OpDef(
    name="_linalg_gemm", aliases=("linalg_gemm",), pattern="composite",
    lowering=Decompose(_gemm_build), arguments=("A", "B", "C"),
    attrs=_FLAGS + [Attr("beta", parse_float, 1.0), Attr("axis", parse_int, -2)],
    infer_shape=_gemm_shape, infer_type=_float_type,
    reference=_gemm_ref, gradient=_gemm_gradient,
    doc="alpha op(A) op(B) + beta C over the trailing matrices (rows along axis): a "
        "matmul with its epilogue."))

register(OpDef(
    name="_linalg_gemm2", aliases=("linalg_gemm2",), pattern="composite",
    lowering=Decompose(_gemm2_build), arguments=("A", "B"),
    attrs=_FLAGS + [Attr("axis", parse_int, -2)],
    infer_shape=_gemm2_shape, infer_type=_float_type,
    reference=_gemm2_ref,
    gradient=lambda b, n: _product_grads(b, n.attrs, *n.inputs, n.ograds[0]),
    doc="alpha op(A) op(B) over the trailing matrices (rows along axis): a matmul."))


# -- syrk ----------------------------------------------------------------------------------

def _syrk_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None]
    if len(a) < 2:
        raise ShapeError(f"linalg_syrk: A must have at least 2 dimensions, got {tuple(a)}")
    n = a[-1] if attrs["transpose"] else a[-2]
    return in_shapes, [tuple(a[:-2]) + (n, n)]


def _syrk_ref(attrs, ins, is_train):
    a = ins[0]
    at = a.transpose(-1, -2)
    return [attrs["alpha"] * (torch.matmul(at, a) if attrs["transpose"] else
                              torch.matmul(a, at))]


def _syrk_build(b, n, is_train):
    a, t = n.inputs[0], n.attrs["transpose"]
    return [_scaled_product(b, {"transpose_a": t, "transpose_b": not t,
                                "alpha": n.attrs["alpha"]}, a, a, len(n.in_shapes[0]) - 2)]


def _syrk_gradient(b, n):
    """``alpha (dB + dB^T) A`` (``A (dB + dB^T)`` under transpose) as one gemm whose C is
    the other half."""
    a, dy, alpha = n.inputs[0], n.ograds[0], n.attrs["alpha"]
    if n.attrs["transpose"]:
        half = b.op("_linalg_gemm2", a, dy, transpose_b=True, alpha=alpha)
        return [b.op("_linalg_gemm", a, dy, half, alpha=alpha)]
    half = b.op("_linalg_gemm2", dy, a, transpose_a=True, alpha=alpha)
    return [b.op("_linalg_gemm", dy, a, half, alpha=alpha)]


register(OpDef(
    name="_linalg_syrk", aliases=("linalg_syrk",), pattern="composite",
    lowering=Decompose(_syrk_build), arguments=("A",),
    attrs=[Attr("transpose", parse_bool, False), Attr("alpha", parse_float, 1.0)],
    infer_shape=_syrk_shape, infer_type=_float_type,
    reference=_syrk_ref, gradient=_syrk_gradient,
    doc="alpha A A^T (transpose: alpha A^T A) over the trailing matrices: one matmul."))


# -- extractdiag / makediag / sumlogdiag ---------------------------------------------------

def _square(name, a):
    if len(a) < 2:
        raise ShapeError(f"{name}: A must be a tensor of matrices (at least 2 dimensions), "
                         f"got {tuple(a)}")
    if a[-1] != a[-2]:
        raise ShapeError(f"{name}: A must be a tensor of square matrices, got {tuple(a)}")
    return a[-1]


def _extractdiag_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None]
    n, k = _square("linalg_extractdiag", a), attrs["offset"]
    if n - abs(k) <= 0:
        raise ShapeError(f"linalg_extractdiag: illegal offset {k} for the diagonal of "
                         f"matrices {tuple(a)}")
    return in_shapes, [tuple(a[:-2]) + (n - abs(k),)]


def _diag_view(attrs, in_shape, out_shape, strides, offset):
    """Diagonal ``offset`` as a view: one step is a row and a column step."""
    k = attrs["offset"]
    start = k * strides[-1] if k > 0 else -k * strides[-2]
    return tuple(strides[:-2]) + (strides[-2] + strides[-1],), offset + start


def _makediag_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None]
    if len(a) < 1:
        raise ShapeError("linalg_makediag: A must have at least 1 dimension")
    n = a[-1] + abs(attrs["offset"])
    return in_shapes, [tuple(a[:-1]) + (n, n)]


def _makediag_ref(attrs, ins, is_train):
    return [torch.diag_embed(ins[0], attrs["offset"])]


def _coords(b, shape):
    """Rows and columns (``_axis_index``, float32) over the last two dims of ``shape``."""
    shape, nd = tuple(shape), len(shape)
    return (b.op("_axis_index", shape=shape, axis=nd - 2),
            b.op("_axis_index", shape=shape, axis=nd - 1))


def _masked(b, keep, values, dtype):
    """``values`` where ``keep``, zeros elsewhere (a NaN or inf outside stays out)."""
    zeros = b.op("_zeros", shape=tuple(values.shape), dtype=dtype)
    return b.op("where", keep, values, zeros)


def _makediag(b, v, k):
    """(..., n) -> (..., n + |k|, n + |k|) with ``v`` on diagonal ``k``."""
    lead, n = tuple(v.shape[:-1]), v.shape[-1]
    if k:      # row r holds v[r] (k > 0) or v[r - |k|] (k < 0): pad the vector to length N
        pad = b.op("_zeros", shape=lead + (abs(k),), dtype=v.dtype)
        parts = (v, pad) if k > 0 else (pad, v)
        v = b.op("Concat", *parts, num_args=2, dim=len(lead))
    shape = lead + (n + abs(k),) * 2
    rows, cols = _coords(b, shape)
    hit = b.op("_equal_scalar", b.op("elemwise_sub", cols, rows), scalar=float(k))
    col = b.op("broadcast_to", b.op("expand_dims", v, axis=len(lead) + 1), shape=shape)
    return _masked(b, hit, col, v.dtype)


register(OpDef(
    name="_linalg_extractdiag", aliases=("linalg_extractdiag",), pattern="injective",
    lowering=View(_diag_view, None), arguments=("A",), attrs=[Attr("offset", parse_int, 0)],
    infer_shape=_extractdiag_shape, infer_type=_float_type,
    reference=lambda attrs, ins, is_train: [torch.diagonal(ins[0], attrs["offset"], -2, -1)],
    gradient=lambda b, n: [b.op("_linalg_makediag", n.ograds[0], offset=n.attrs["offset"])],
    doc="Diagonal offset of the trailing square matrices (a strided view)."))

register(OpDef(
    name="_linalg_makediag", aliases=("linalg_makediag",), pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [_makediag(b, n.inputs[0], n.attrs["offset"])]),
    arguments=("A",), attrs=[Attr("offset", parse_int, 0)],
    infer_shape=_makediag_shape, infer_type=_float_type,
    reference=_makediag_ref,
    gradient=lambda b, n: [b.op("_linalg_extractdiag", n.ograds[0],
                                offset=n.attrs["offset"])],
    doc="Square matrices of zeros with the trailing vectors on diagonal offset."))


def _sumlogdiag_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None]
    _square("linalg_sumlogdiag", a)
    return in_shapes, [tuple(a[:-2]) or (1,)]


def _sumlogdiag_ref(attrs, ins, is_train):
    s = torch.log(torch.diagonal(ins[0], 0, -2, -1)).sum(-1)
    return [s.reshape(tuple(ins[0].shape[:-2]) or (1,))]


def _sumlogdiag_build(b, n, is_train):
    logs = b.op("log", b.op("_linalg_extractdiag", n.inputs[0]))
    s = b.op("sum", logs, axis=(len(logs.shape) - 1,))
    return [s if tuple(s.shape) == tuple(n.out_shapes[0]) else
            b.op("Reshape", s, shape=tuple(n.out_shapes[0]))]


def _sumlogdiag_gradient(b, n):
    d = b.op("_linalg_extractdiag", n.inputs[0])
    dy = n.ograds[0]
    if len(n.in_shapes[0]) > 2:
        dy = b.op("expand_dims", dy, axis=len(n.in_shapes[0]) - 2)
    return [b.op("_linalg_makediag", b.op("broadcast_div", dy, d))]


register(OpDef(
    name="_linalg_sumlogdiag", aliases=("linalg_sumlogdiag",), pattern="composite",
    lowering=Decompose(_sumlogdiag_build), arguments=("A",),
    infer_shape=_sumlogdiag_shape, infer_type=_float_type,
    reference=_sumlogdiag_ref, gradient=_sumlogdiag_gradient,
    doc="Sum of the logarithms of the diagonal of the trailing square matrices."))


# -- extracttrian / maketrian --------------------------------------------------------------

def _upper(attrs):
    return attrs["offset"] > 0 or (attrs["offset"] == 0 and not attrs["lower"])


def _packed_side(name, m):
    """The side p of a triangle of ``m = p (p + 1) / 2`` entries."""
    p = int(((8 * m + 1) ** 0.5 - 1) / 2 + 0.5)
    if p * (p + 1) // 2 != m:
        raise ShapeError(f"{name}: the last axis of A ({m}) is no triangle's size "
                         f"p (p + 1) / 2")
    return p


def _too_large(name, n):
    if n * n >= _EXACT:
        raise ShapeError(f"{name}: matrices of {n} x {n} are too large (symtriton computes "
                         f"the positions of a triangle exactly below 2**24 elements)")


def _extracttrian_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None]
    n, k = _square("linalg_extracttrian", a), attrs["offset"]
    p = n - abs(k)
    if p <= 0:
        raise ShapeError(f"linalg_extracttrian: illegal offset {k} for the triangle of "
                         f"matrices {tuple(a)}")
    _too_large("linalg_extracttrian", n)
    return in_shapes, [tuple(a[:-2]) + (p * (p + 1) // 2,)]


def _maketrian_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None]
    if len(a) < 1:
        raise ShapeError("linalg_maketrian: A must have at least 1 dimension")
    n = _packed_side("linalg_maketrian", a[-1]) + abs(attrs["offset"])
    _too_large("linalg_maketrian", n)
    return in_shapes, [tuple(a[:-1]) + (n, n)]


def _trian_positions(attrs, n):
    """(rows, cols) of the packed entries of an n x n matrix, in mxnet's order (torch)."""
    k, p = abs(attrs["offset"]), n - abs(attrs["offset"])
    r, c = torch.tril_indices(p, p)          # row by row: (r, c), c <= r
    r = r + k
    return (c, r) if _upper(attrs) else (r, c)


def _extracttrian_ref(attrs, ins, is_train):
    a = ins[0]
    rows, cols = _trian_positions(attrs, a.shape[-1])
    return [a[..., rows, cols]]


def _maketrian_ref(attrs, ins, is_train):
    a = ins[0]
    n = _maketrian_shape(attrs, [tuple(a.shape)])[1][0][-1]
    rows, cols = _trian_positions(attrs, n)
    out = a.new_zeros(tuple(a.shape[:-1]) + (n, n))
    out[..., rows, cols] = a
    return [out]


def _scalar(b, name, x, s):
    return b.op(name, x, scalar=float(s))


def _tri(b, r):
    """r (r + 1) / 2."""
    return _scalar(b, "_mul_scalar", b.op("elemwise_mul", r, _scalar(b, "_plus_scalar", r, 1)),
                   0.5)


def _packed_rows(b, j):
    """The packed row of each position ``j``: floor((sqrt(8 j + 1) - 1) / 2), then moved by
    one where the square root was not exact enough."""
    s = b.op("sqrt", _scalar(b, "_plus_scalar", _scalar(b, "_mul_scalar", j, 8), 1))
    r = b.op("floor", _scalar(b, "_mul_scalar", _scalar(b, "_minus_scalar", s, 1), 0.5))
    r = b.op("elemwise_sub", r, b.op("_greater", _tri(b, r), j))
    up = b.op("_lesser_equal", _tri(b, _scalar(b, "_plus_scalar", r, 1)), j)
    return b.op("elemwise_add", r, up)


def _extracttrian(b, a, attrs):
    """(..., n, n) -> (..., m): a take of the flattened matrices at computed positions."""
    lead, n, k = tuple(a.shape[:-2]), a.shape[-1], abs(attrs["offset"])
    p = n - k
    m = p * (p + 1) // 2
    j = b.op("_axis_index", shape=(m,), axis=0)
    r = _packed_rows(b, j)
    c = b.op("elemwise_sub", j, _tri(b, r))
    r = _scalar(b, "_plus_scalar", r, k)
    row, col = (c, r) if _upper(attrs) else (r, c)
    flat = b.op("elemwise_add", _scalar(b, "_mul_scalar", row, n), col)
    table = b.op("Reshape", a, shape=lead + (n * n,))
    return b.op("take", table, flat, axis=len(lead))


def _maketrian(b, v, attrs):
    """(..., m) -> (..., n, n): a take of the packed vector, zeros outside the triangle."""
    lead, m, k = tuple(v.shape[:-1]), v.shape[-1], abs(attrs["offset"])
    n = _packed_side("linalg_maketrian", m) + k
    r, c = _coords(b, (n, n))
    if _upper(attrs):
        r, c = c, r
    r = _scalar(b, "_minus_scalar", r, k)
    pos = b.op("clip", b.op("elemwise_add", _tri(b, r), c), a_min=0.0, a_max=float(m - 1))
    got = b.op("take", v, pos, axis=len(lead))
    rows, cols = _coords(b, lead + (n, n))
    if _upper(attrs):
        rows, cols = cols, rows
    keep = b.op("_greater_equal", _scalar(b, "_minus_scalar", rows, k), cols)
    return _masked(b, keep, got, v.dtype)


_TRIAN_ATTRS = [Attr("offset", parse_int, 0), Attr("lower", parse_bool, True)]

register(OpDef(
    name="_linalg_extracttrian", aliases=("linalg_extracttrian",), pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [_extracttrian(b, n.inputs[0], n.attrs)]),
    arguments=("A",), attrs=_TRIAN_ATTRS,
    infer_shape=_extracttrian_shape, infer_type=_float_type,
    reference=_extracttrian_ref,
    gradient=lambda b, n: [b.op("_linalg_maketrian", n.ograds[0], offset=n.attrs["offset"],
                                lower=n.attrs["lower"])],
    doc="The triangle of the trailing square matrices, packed as mxnet packs it."))

register(OpDef(
    name="_linalg_maketrian", aliases=("linalg_maketrian",), pattern="composite",
    lowering=Decompose(lambda b, n, is_train: [_maketrian(b, n.inputs[0], n.attrs)]),
    arguments=("A",), attrs=_TRIAN_ATTRS,
    infer_shape=_maketrian_shape, infer_type=_float_type,
    reference=_maketrian_ref,
    gradient=lambda b, n: [b.op("_linalg_extracttrian", n.ograds[0],
                                offset=n.attrs["offset"], lower=n.attrs["lower"])],
    doc="Square matrices of zeros with a packed triangle unpacked into them."))
