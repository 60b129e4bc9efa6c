"""mxnet's linalg factorizations and solves (its ``_linalg_*`` operators), as
extern launches: each calls ATen's LAPACK / cuSOLVER routine on the context's device
(``registry.Extern``), and its gradient is a ``_backward_linalg_*`` entry that is extern
too, with mxnet's formulas.

``potrf``, ``potri``, ``trsm``, ``trmm``, ``gelqf``, ``syevd``, ``inverse``, ``det`` and
``slogdet``, registered as ``_linalg_X`` (``mx.sym.linalg.X``) with mxnet's top-level
alias ``linalg_X`` where it has one (``syevd`` has none). Each works on the trailing two
dimensions and batches over the leading ones. As in mxnet:

* only float32 and float64 (mxnet stops at other dtypes; here type inference does);
* ``potrf`` reads the lower triangle of A (``lower=False``: the upper one), ``potri``,
  ``trsm`` and ``trmm`` the triangle ``lower`` names of their triangular operand, and
  ``syevd`` the lower triangle;
* ``gelqf``'s signs are LAPACK's Householder ones (``geqrf`` of A^T: L's diagonal may be
  negative), ``syevd`` turns each eigenvector (a row of U, ``A = U^T diag(L) U``) so that
  its entry of largest magnitude (the first of equals) is positive, eigenvalues ascend;
* ``det`` and ``slogdet`` come from an LU factorization with partial pivoting, whose LU
  and pivots are hidden outputs the gradient reads; a 2-D input gives shape ``(1,)``;
  no gradient flows where the determinant is 0.
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .registry import Attr, Extern, OpDef, ShapeError, parse_bool, parse_float, register

_FLOATS = ("float32", "float64")
_SYEVD_EPS = {torch.float32: 1e-30, torch.float64: 1e-100}


# ---------------------------------------------------------------------------
# Shapes and dtypes

def _square(shape, op, what="A"):
    if len(shape) < 2:
        raise ShapeError(f"{op}: input {what} of shape {tuple(shape)} must have at least 2 "
                         f"dimensions")
    if shape[-1] != shape[-2]:
        raise ShapeError(f"{op}: input {what} of shape {tuple(shape)} must hold square "
                         f"matrices (its last two dimensions equal)")


def _same_square(op):
    def infer(attrs, in_shapes):
        a = in_shapes[0]
        if a is None:
            return in_shapes, [None]
        _square(a, op)
        return [tuple(a)], [tuple(a)]
    return infer


def _tri_mult_shape(op):
    """LaTriangMatrixMultOpShape: A square, B of A's rank, equal leading dims."""
    def infer(attrs, in_shapes):
        a, b = in_shapes
        if a is None or b is None:
            return in_shapes, [None]
        _square(a, op)
        if len(b) != len(a) or tuple(a[:-2]) != tuple(b[:-2]):
            raise ShapeError(f"{op}: shapes of A {tuple(a)} and B {tuple(b)} must be the same "
                             f"except on the last two dimensions")
        n = a[-1]
        if attrs["rightside"]:
            if b[-1] != n:
                raise ShapeError(f"{op}: B {tuple(b)} times A {tuple(a)} (rightside): "
                                 f"incompatible matrix dimensions")
        elif b[-2] != n:
            raise ShapeError(f"{op}: A {tuple(a)} times B {tuple(b)}: incompatible matrix "
                             f"dimensions")
        return [tuple(a), tuple(b)], [tuple(b)]
    return infer


def _float_type(n_out=1, int_outputs=()):
    """mxnet's la_op dtypes: the first known input's, float32 or float64 only; outputs in
    ``int_outputs`` (det's pivots) are int32."""
    def infer(attrs, in_types):
        known = [t for t in in_types if t is not None]
        t = known[0] if known else None
        if t is not None and t not in _FLOATS:
            raise MXNetError(f"linalg operator: input dtype {t}: this operation only supports "
                             f"32-bit and 64-bit floating point")
        outs = ["int32" if i in int_outputs else t for i in range(n_out)]
        return [t] * len(in_types), outs
    return infer


def _backward_type(first_float=0, int_inputs=()):
    def infer(attrs, in_types):
        t = in_types[first_float]
        return [("int32" if i in int_inputs else t) for i in range(len(in_types))], [t]
    return infer


# ---------------------------------------------------------------------------
# Helpers over batches of matrices

def _tri(a, lower):
    return torch.tril(a) if lower else torch.triu(a)


def _sym_from(a, lower):
    """The symmetric matrix the triangle ``lower`` names (with the diagonal) stands for."""
    return torch.tril(a) + torch.tril(a, -1).mT if lower else torch.triu(a) + torch.triu(a, 1).mT


def _copy_ltu(m):
    """mxnet's copyLTU: the lower triangle mirrored onto the upper one."""
    return torch.tril(m) + torch.tril(m, -1).mT


def _solve_tri(t, b, upper, left=True):
    return torch.linalg.solve_triangular(t, b, upper=upper, left=left)


# ---------------------------------------------------------------------------
# potrf, potri

def _potrf(attrs, ins):
    lower = attrs["lower"]
    return [torch.linalg.cholesky(_sym_from(ins[0], lower), upper=not lower)]


def _potrf_bwd(attrs, ins):
    """dA = 0.5 L^-T copyLTU(L^T dL) L^-1 (the upper case by transposition)."""
    dl, l = ins
    if not attrs["lower"]:
        dl, l = dl.mT, l.mT
    m = _copy_ltu(l.mT @ dl)
    x = _solve_tri(l.mT, m, upper=True)              # L^-T M
    return [0.5 * _solve_tri(l, x, upper=False, left=False)]   # ... L^-1


def _potri(attrs, ins):
    lower = attrs["lower"]
    return [torch.cholesky_inverse(_tri(ins[0], lower), upper=not lower)]


def _potri_bwd(attrs, ins):
    """dB = -tri(A (dA + dA^T) B^-T) (lower), -tri(B^-T (dA + dA^T) A) (upper)."""
    da, b, a = ins
    s = da + da.mT
    lower = attrs["lower"]
    t = _tri(b, lower)
    if lower:
        g = -_solve_tri(t.mT, a @ s, upper=True, left=False)
    else:
        g = -_solve_tri(t.mT, s @ a, upper=False)
    return [_tri(g, lower)]


# ---------------------------------------------------------------------------
# trmm, trsm: op(A) is tri(A) or its transpose; C = alpha op(A) B, or alpha B op(A)

def _op_a(attrs, a):
    t = _tri(a, attrs["lower"])
    return t.mT if attrs["transpose"] else t


def _grad_a(attrs, dt):
    """The gradient of tri(A) from that of op(A): transposed back, the triangle kept."""
    return _tri(dt.mT if attrs["transpose"] else dt, attrs["lower"])


def _trmm(attrs, ins):
    a, b = ins
    t = _op_a(attrs, a)
    return [attrs["alpha"] * (b @ t if attrs["rightside"] else t @ b)]


def _trmm_bwd(attrs, ins):
    dc, a, b = ins
    t, alpha = _op_a(attrs, a), attrs["alpha"]
    if attrs["rightside"]:
        dt, db = alpha * (b.mT @ dc), alpha * (dc @ t.mT)
    else:
        dt, db = alpha * (dc @ b.mT), alpha * (t.mT @ dc)
    return [_grad_a(attrs, dt), db]


def _upper_op(attrs):
    """Whether op(A) is upper triangular."""
    return attrs["lower"] == attrs["transpose"]


def _trsm(attrs, ins):
    a, b = ins
    t = _op_a(attrs, a)
    x = _solve_tri(t, b, upper=_upper_op(attrs), left=not attrs["rightside"])
    return [attrs["alpha"] * x]


def _trsm_bwd(attrs, ins):
    """C = alpha op(A)^-1 B: dB = alpha op(A)^-T dC, d op(A) = -op(A)^-T dC C^T (and the
    mirror image for rightside)."""
    dc, a, b, c = ins
    t, up = _op_a(attrs, a), _upper_op(attrs)
    left = not attrs["rightside"]
    g = _solve_tri(t.mT, dc, upper=not up, left=left)      # op(A)^-T dC  or  dC op(A)^-T
    dt = -(g @ c.mT) if left else -(c.mT @ g)
    return [_grad_a(attrs, dt), attrs["alpha"] * g]


# ---------------------------------------------------------------------------
# gelqf, syevd

def _gelqf(attrs, ins):
    """A = L Q from the QR factorization of A^T (LAPACK's geqrf signs, as mxnet's)."""
    q, r = torch.linalg.qr(ins[0].mT, mode="reduced")
    return [q.mT.contiguous(), r.mT.contiguous()]


def _gelqf_bwd(attrs, ins):
    """dA = L^-T (dQ + copyLTU(M) Q), M = L^T dL - dQ Q^T."""
    dq, dl, q, l = ins
    m = l.mT @ dl - dq @ q.mT
    return [_solve_tri(l.mT, dq + _copy_ltu(m) @ q, upper=True)]


def _syevd(attrs, ins):
    w, v = torch.linalg.eigh(_sym_from(ins[0], True))
    u = v.mT
    big = u.abs().argmax(dim=-1, keepdim=True)            # first of equals, as mxnet
    flip = torch.where(u.gather(-1, big) < 0, -1.0, 1.0).to(u.dtype)
    return [(u * flip).contiguous(), w]


def _syevd_bwd(attrs, ins):
    """dA = U^T Y U, Y symmetric: Y_ij = (X_ij - X_ji) / (2 max(L_i - L_j, eps)) below the
    diagonal (X = dU U^T), Y_ii = dL_i."""
    du, dw, u, w = ins
    x = du @ u.mT
    gap = (w.unsqueeze(-1) - w.unsqueeze(-2)).clamp(min=_SYEVD_EPS[u.dtype])
    low = torch.tril((x - x.mT) / (2 * gap), -1)
    y = low + low.mT + torch.diag_embed(dw)
    return [u.mT @ y @ u]


# ---------------------------------------------------------------------------
# inverse, det, slogdet

def _inverse(attrs, ins):
    return [torch.linalg.inv(ins[0])]


def _inverse_bwd(attrs, ins):
    da, a = ins                     # a: the inverse the forward computed
    return [-(a.mT @ da @ a.mT)]


def _det_shape(n_first):
    def infer(attrs, in_shapes):
        a = in_shapes[0]
        if a is None:
            return in_shapes, [None] * (n_first + 2)
        _square(a, "det" if n_first == 1 else "slogdet")
        out = (1,) if len(a) == 2 else tuple(a[:-2])
        return [tuple(a)], [out] * n_first + [tuple(a), tuple(a[:-1])]
    return infer


def _lu_parts(a):
    """``(sign, log|det|, LU, pivots)`` of a batch of matrices (partial pivoting)."""
    lu, piv = torch.linalg.lu_factor(a)
    n = a.shape[-1]
    swaps = (piv != torch.arange(1, n + 1, device=piv.device, dtype=piv.dtype)).sum(-1)
    diag = lu.diagonal(dim1=-2, dim2=-1)
    sign = torch.where(swaps % 2 == 1, -1.0, 1.0).to(a.dtype) * torch.sign(diag).prod(-1)
    return sign, diag.abs().log().sum(-1), lu, piv.to(torch.int32)


def _out(x, a):
    """A per-matrix value in mxnet's shape: ``(1,)`` for a single matrix."""
    return x.reshape(1) if a.dim() == 2 else x


def _det(attrs, ins):
    sign, logabs, lu, piv = _lu_parts(ins[0])
    return [_out(sign * logabs.exp(), ins[0]), lu, piv]


def _slogdet(attrs, ins):
    sign, logabs, lu, piv = _lu_parts(ins[0])
    return [_out(sign, ins[0]), _out(logabs, ins[0]), lu, piv]


def _inv_t(lu, piv):
    """A^-T from A's LU factors."""
    eye = torch.eye(lu.shape[-1], dtype=lu.dtype, device=lu.device).expand_as(lu)
    return torch.linalg.lu_solve(lu, piv.to(torch.int32), eye).mT


def _det_bwd(attrs, ins):
    """Jacobi: dA = ddet det A^-T, and no gradient where det is 0."""
    ddet, det, lu, piv = ins
    batch = lu.shape[:-2]
    scale = (ddet * det).reshape(batch)[..., None, None]
    zero = (det == 0).reshape(batch)[..., None, None]
    return [torch.where(zero, torch.zeros_like(lu), scale * _inv_t(lu, piv))]


def _slogdet_bwd(attrs, ins):
    """dA = dlogabsdet A^-T (the sign has no gradient), none where det is 0."""
    dlog, sign, logabs, lu, piv = ins
    batch = lu.shape[:-2]
    scale = dlog.reshape(batch)[..., None, None]
    zero = (logabs == float("-inf")).reshape(batch)[..., None, None]
    return [torch.where(zero, torch.zeros_like(lu), scale * _inv_t(lu, piv))]


# ---------------------------------------------------------------------------
# Gradients (graph ops) and registration

def _tri_attrs(n):
    return {k: n.attrs[k] for k in ("transpose", "rightside", "lower", "alpha")}


def _grad_potrf(b, n):
    return [b.op("_backward_linalg_potrf", n.ograds[0], n.outputs[0], lower=n.attrs["lower"])]


def _grad_potri(b, n):
    return [b.op("_backward_linalg_potri", n.ograds[0], n.inputs[0], n.outputs[0],
                 lower=n.attrs["lower"])]


def _grad_trmm(b, n):
    return b.op("_backward_linalg_trmm", n.ograds[0], *n.inputs[:2], **_tri_attrs(n))


def _grad_trsm(b, n):
    return b.op("_backward_linalg_trsm", n.ograds[0], *n.inputs[:2], n.outputs[0],
                **_tri_attrs(n))


def _grad_with_outputs(name):
    """mxnet's ElemwiseGradUseOut: the output gradients, then the outputs."""
    def grad(b, n):
        return [b.op(name, *n.ograds, *n.outputs)]
    return grad


def _grad_det(name, n_first):
    """mxnet's ReduceDetGrad: the last visible output's gradient, then every output."""
    def grad(b, n):
        return [b.op(name, n.ograds[n_first - 1], *n.outputs)]
    return grad


_LOWER = [Attr("lower", parse_bool, True)]
_TRI = [Attr("transpose", parse_bool, False), Attr("rightside", parse_bool, False),
        Attr("lower", parse_bool, True), Attr("alpha", parse_float, 1.0)]


def _pair(name, fwd, bwd, *, arguments=("A",), outputs=("output",), num_visible=None,
          attrs=(), infer_shape, infer_type=None, gradient, bwd_arguments, bwd_like,
          bwd_type=None, aliases=None, doc=""):
    """Register ``_linalg_<name>`` (extern ``fwd``) and ``_backward_linalg_<name>``
    (extern ``bwd`` over ``bwd_arguments``; its output ``k`` has the shape of its input
    ``bwd_like[k]``)."""
    register(OpDef(
        name=f"_linalg_{name}", pattern="opaque", lowering=Extern(fwd), arguments=arguments,
        outputs=outputs, num_visible=num_visible, attrs=list(attrs),
        infer_shape=infer_shape, infer_type=infer_type or _float_type(len(outputs)),
        reference=lambda a, ins, is_train: fwd(a, ins), gradient=gradient,
        aliases=(f"linalg_{name}",) if aliases is None else aliases, doc=doc))
    register(OpDef(
        name=f"_backward_linalg_{name}", pattern="opaque", lowering=Extern(bwd),
        arguments=bwd_arguments,
        outputs=[f"output{k}" for k in range(len(bwd_like))] if len(bwd_like) > 1
        else ["output"],
        attrs=list(attrs), infer_type=bwd_type or _backward_type(),
        infer_shape=lambda a, s: (s, [None if s[k] is None else tuple(s[k]) for k in bwd_like]),
        reference=lambda a, ins, is_train: bwd(a, ins)))


def _gelqf_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None, None]
    if len(a) < 2 or a[-2] > a[-1]:
        raise ShapeError(f"gelqf: input A of shape {tuple(a)} must hold matrices of at most "
                         f"as many rows as columns (last dimension >= second to last)")
    return [tuple(a)], [tuple(a), tuple(a[:-1]) + (a[-2],)]


def _syevd_shape(attrs, in_shapes):
    a = in_shapes[0]
    if a is None:
        return in_shapes, [None, None]
    _square(a, "syevd")
    return [tuple(a)], [tuple(a), tuple(a[:-1])]


_pair("potrf", _potrf, _potrf_bwd, attrs=_LOWER, infer_shape=_same_square("potrf"),
      gradient=_grad_potrf, bwd_arguments=("dB", "B"), bwd_like=(1,),
      doc="Cholesky factor B of the symmetric positive-definite A (A = B B^T, or B^T B "
          "with lower=False), from A's lower (upper) triangle.")
_pair("potri", _potri, _potri_bwd, attrs=_LOWER, infer_shape=_same_square("potri"),
      gradient=_grad_potri, bwd_arguments=("dA", "B", "A"), bwd_like=(1,),
      doc="The inverse of B B^T (B^T B with lower=False) from the triangular factor B.")
_pair("trmm", _trmm, _trmm_bwd, arguments=("A", "B"), attrs=_TRI,
      infer_shape=_tri_mult_shape("trmm"), gradient=_grad_trmm,
      bwd_arguments=("dC", "A", "B"), bwd_like=(1, 2),
      doc="alpha op(A) B (or alpha B op(A) with rightside) for a triangular A.")
_pair("trsm", _trsm, _trsm_bwd, arguments=("A", "B"), attrs=_TRI,
      infer_shape=_tri_mult_shape("trsm"), gradient=_grad_trsm,
      bwd_arguments=("dC", "A", "B", "C"), bwd_like=(1, 2),
      doc="Solves op(A) C = alpha B (or C op(A) = alpha B with rightside), A triangular.")
_pair("gelqf", _gelqf, _gelqf_bwd, outputs=("output0", "output1"),
      infer_shape=_gelqf_shape, gradient=_grad_with_outputs("_backward_linalg_gelqf"),
      bwd_arguments=("dQ", "dL", "Q", "L"), bwd_like=(2,),
      doc="LQ factorization A = L Q: Q row-orthonormal, L lower triangular.")
_pair("syevd", _syevd, _syevd_bwd, outputs=("output0", "output1"), aliases=(),
      infer_shape=_syevd_shape, gradient=_grad_with_outputs("_backward_linalg_syevd"),
      bwd_arguments=("dU", "dL", "U", "L"), bwd_like=(2,),
      doc="Symmetric eigendecomposition A = U^T diag(L) U from A's lower triangle, "
          "eigenvalues ascending.")
_pair("inverse", _inverse, _inverse_bwd, infer_shape=_same_square("inverse"),
      gradient=_grad_with_outputs("_backward_linalg_inverse"),
      bwd_arguments=("dA", "A"), bwd_like=(1,), doc="The inverse of each square matrix.")
_pair("det", _det, _det_bwd, outputs=("output0", "output1", "output2"),
      num_visible=lambda a: 1, infer_shape=_det_shape(1),
      infer_type=_float_type(3, int_outputs=(2,)),
      gradient=_grad_det("_backward_linalg_det", 1),
      bwd_arguments=("ddet", "det", "LU", "pivot"), bwd_like=(2,),
      bwd_type=_backward_type(int_inputs=(3,)),
      doc="The determinant of each square matrix (hidden outputs: its LU factors and "
          "pivots, which the gradient reads).")
_pair("slogdet", _slogdet, _slogdet_bwd, outputs=("output0", "output1", "output2", "output3"),
      num_visible=lambda a: 2, infer_shape=_det_shape(2),
      infer_type=_float_type(4, int_outputs=(3,)),
      gradient=_grad_det("_backward_linalg_slogdet", 2),
      bwd_arguments=("dlogabsdet", "sign", "logabsdet", "LU", "pivot"), bwd_like=(3,),
      bwd_type=_backward_type(int_inputs=(4,)),
      doc="sign(det(A)) and log(|det(A)|) of each square matrix (hidden outputs: LU "
          "factors and pivots).")
