"""Softmax family and loss heads: softmax, log_softmax, SoftmaxOutput,
the regression outputs and MakeLoss, plus ``_softmax_ce_grad``.

Loss heads (``is_loss``) ignore the incoming head gradient: their
``gradient`` rules write mxnet's loss gradient (e.g. ``softmax - one_hot``),
not the derivative of the forward output.
"""
from __future__ import annotations

import torch

from ..ir.dtypes import is_float
from ..ir.expr import ops
from .registry import (Attr, Decompose, OpDef, ShapeError, Special, choice, merge_shape,
                       normalize_axis, parse_bool, parse_float, parse_int,
                       parse_dtype, parse_optional_float, prod, register)


def _reshape(b, ref, shape):
    shape = tuple(shape)
    return ref if tuple(ref.shape) == shape else b.op("Reshape", ref, shape=shape)


def _same_shape(attrs, in_shapes):
    return in_shapes, [in_shapes[0]]


# -- softmax / log_softmax ------------------------------------------------------------

def _temperature(attrs):
    t = attrs["temperature"]
    return 1.0 if t is None else t


def _softmax_shape(attrs, in_shapes):
    """With ``use_length`` (softmax only) the lengths have the data's shape without
    ``axis``."""
    x = in_shapes[0]
    if x is None:
        return in_shapes, [None]
    ax = normalize_axis(attrs["axis"], len(x), "softmax")
    if not attrs["use_length"]:
        return in_shapes, [x]
    lengths = tuple(x[:ax]) + tuple(x[ax + 1:])
    return [x, merge_shape(in_shapes[1], lengths, "softmax length")], [x]


def _log_softmax_shape(attrs, in_shapes):
    if attrs["use_length"]:
        raise ShapeError("log_softmax takes no length (mxnet 1.9.1's has no length input); "
                         "use softmax(data, length, use_length=True)")
    return _softmax_shape(attrs, in_shapes)


def _softmax_type(attrs, in_types):
    if not attrs["use_length"]:
        return in_types, [attrs["dtype"] or in_types[0]]
    lengths = in_types[1] or "int32"
    if is_float(lengths):
        raise ShapeError(f"softmax: the lengths must be an integer array, got {lengths} "
                         f"(mxnet: 'This operation only support integer types')")
    return [in_types[0], lengths], [attrs["dtype"] or in_types[0]]


def _length_mask(b, x, lengths, ax, shape):
    """1 where a position along ``ax`` is below its row's length, else 0 (data's shape)."""
    bshape = tuple(shape[i] if i == ax else 1 for i in range(len(shape)))
    positions = _reshape(b, b.op("_contrib_arange_like", x, axis=ax), bshape)
    lengths = b.op("expand_dims", b.op("Cast", lengths, dtype="float32"), axis=ax)
    return b.op("broadcast_lesser", positions, lengths)


def _softmax_with_length(b, x, lengths, ax, shape):
    """softmax over the first ``length`` positions of each row, 0 past them (a row of
    length 0 is all 0, as mxnet's)."""
    mask = _length_mask(b, x, lengths, ax, shape)
    low = b.op("_mul_scalar", b.op("ones_like", x), scalar=float("-inf"))
    top = b.op("max", b.op("where", mask, x, low), axis=ax, keepdims=True)
    zeros = b.op("zeros_like", x)
    e = b.op("where", mask, b.op("exp", b.op("where", mask, b.op("broadcast_sub", x, top),
                                                    zeros)), zeros)
    total = b.op("_maximum_scalar", b.op("sum", e, axis=ax, keepdims=True), scalar=1.0)
    return b.op("broadcast_div", e, total)      # a nonempty row's total is 1 or more


def _softmax_build(log):
    def build(b, n, is_train):
        x, ax, t = n.inputs[0], n.attrs["axis"], _temperature(n.attrs)
        if t != 1.0:
            x = b.op("_div_scalar", x, scalar=t)
        if n.attrs["use_length"]:
            shape = n.in_shapes[0]
            return [_softmax_with_length(b, x, n.inputs[1],
                                         normalize_axis(ax, len(shape), "softmax"), shape)]
        xs = x - b.op("max", x, axis=ax, keepdims=True)
        if log:
            e = b.op("exp", xs)
            return [xs - b.op("log", b.op("sum", e, axis=ax, keepdims=True))]
        e = b.op("exp", xs)
        return [e / b.op("sum", e, axis=ax, keepdims=True)]
    return build


def _softmax_ref(log):
    def ref(attrs, ins, is_train):
        x = ins[0] / _temperature(attrs)
        f = torch.log_softmax if log else torch.softmax
        if not attrs["use_length"]:
            return [f(x, dim=attrs["axis"])]
        ax = attrs["axis"] % x.dim()
        pos = torch.arange(x.shape[ax]).reshape([-1 if i == ax else 1 for i in range(x.dim())])
        mask = pos < ins[1].unsqueeze(ax)
        y = torch.softmax(x.masked_fill(~mask, float("-inf")), dim=ax)
        return [torch.where(mask, y, torch.zeros((), dtype=y.dtype))]
    return ref


def _softmax_gradient(b, n):
    """dx = y * (dy - sum(dy * y, axis)) / T."""
    y, dy, ax = n.outputs[0], n.ograds[0], n.attrs["axis"]
    g = y * (dy - b.op("sum", dy * y, axis=ax, keepdims=True))     # 0 past a row's length
    t = _temperature(n.attrs)
    g = g if t == 1.0 else b.op("_div_scalar", g, scalar=t)
    return [g, b.zeros_like(n.inputs[1])] if n.attrs["use_length"] else [g]


def _log_softmax_gradient(b, n):
    """dx = (dy - exp(y) * sum(dy, axis)) / T."""
    y, dy, ax = n.outputs[0], n.ograds[0], n.attrs["axis"]
    g = dy - b.op("exp", y) * b.op("sum", dy, axis=ax, keepdims=True)
    t = _temperature(n.attrs)
    return [g if t == 1.0 else b.op("_div_scalar", g, scalar=t)]


_SOFTMAX_ATTRS = [Attr("axis", parse_int, -1), Attr("temperature", parse_optional_float, None),
                  Attr("dtype", lambda v: None if str(v) == "None" else parse_dtype(v), None),
                  Attr("use_length", parse_bool, False)]

register(OpDef(
    name="softmax", pattern="composite", lowering=Decompose(_softmax_build(False)),
    arguments=lambda attrs: ("data", "length") if attrs["use_length"] else ("data",),
    attrs=_SOFTMAX_ATTRS, infer_shape=_softmax_shape, infer_type=_softmax_type,
    reference=_softmax_ref(False), gradient=_softmax_gradient))
register(OpDef(
    name="log_softmax", pattern="composite", lowering=Decompose(_softmax_build(True)),
    attrs=_SOFTMAX_ATTRS, infer_shape=_log_softmax_shape, infer_type=_softmax_type,
    reference=_softmax_ref(True), gradient=_log_softmax_gradient))


# -- _softmax_ce_grad: softmax minus (smoothed) one-hot of the label ----------------------

def _ce_grad_shape(attrs, in_shapes):
    pshape, lshape = in_shapes
    if pshape is None:
        return in_shapes, [None]
    ax = normalize_axis(attrs["axis"], len(pshape), "_softmax_ce_grad")
    want = tuple(pshape[:ax]) + tuple(pshape[ax + 1:])
    return [pshape, merge_shape(lshape, want, "_softmax_ce_grad label")], [pshape]


def _ce_grad_ref(attrs, ins, is_train):
    prob, label = ins
    ax = normalize_axis(attrs["axis"], prob.dim(), "_softmax_ce_grad")
    c = prob.shape[ax]
    lab = label.detach().to(torch.int64).unsqueeze(ax)          # truncation, as C's int cast
    cls = torch.arange(c, device=prob.device).reshape([c if i == ax else 1
                                                       for i in range(prob.dim())])
    hit = (lab == cls).to(prob.dtype)
    alpha = attrs["smooth_alpha"]
    if alpha:
        other = alpha / (c - 1) if c > 1 else 0.0
        target = hit * (1.0 - alpha) + (1.0 - hit) * other
    else:
        target = hit
    g = (prob - target) * attrs["grad_scale"]
    if attrs["use_ignore"]:
        g = torch.where(lab == int(attrs["ignore_label"]), torch.zeros_like(g), g)
    return [g]


def _ce_grad_math(attrs, prob, label, *, coord, classes):
    """The kernel's math: ``coord`` is the class coordinate along ``axis`` (an
    expression) and ``classes`` the number of classes."""
    hit = ops.where(ops.eq(coord, ops.to_int32(label)), 1.0, 0.0)
    alpha = attrs["smooth_alpha"]
    if alpha:
        other = alpha / (classes - 1) if classes > 1 else 0.0
        target = hit * (1.0 - alpha) + (1.0 - hit) * other
    else:
        target = hit
    g = (prob - target) * attrs["grad_scale"]
    if attrs["use_ignore"]:
        g = ops.where(ops.eq(ops.to_int32(label), int(attrs["ignore_label"])), 0.0, g)
    return g


register(OpDef(
    name="_softmax_ce_grad", pattern="broadcast",
    lowering=Special("softmax_ce_grad", expr=_ce_grad_math),
    arguments=("prob", "label"),
    attrs=[Attr("axis", parse_int, 1), Attr("grad_scale", parse_float, 1.0),
           Attr("ignore_label", parse_float, -1.0), Attr("use_ignore", parse_bool, False),
           Attr("smooth_alpha", parse_float, 0.0)],
    infer_shape=_ce_grad_shape, reference=_ce_grad_ref,
    doc="""Cross-entropy gradient of a softmax, elementwise over ``prob``.

    ``label`` has ``prob``'s shape without ``axis``; for the output element at
    coordinate ``c`` along ``axis`` and ``l = int(label[other coords])`` (C cast,
    truncating toward zero)::

        target = (1 - smooth_alpha) if c == l else smooth_alpha / (C - 1)
                 (with smooth_alpha == 0: 1.0 if c == l else 0.0)
        out    = (prob - target) * grad_scale
        out    = 0 if use_ignore and l == int(ignore_label)

    A label outside ``[0, C)`` matches no class (out = prob * grad_scale).
    """))


# -- SoftmaxOutput ---------------------------------------------------------------------------

def _so_label_shape(attrs, dshape):
    if attrs["multi_output"]:
        if len(dshape) < 2:
            raise ShapeError(f"SoftmaxOutput: multi_output needs data with at least 2 "
                             f"dimensions, got {tuple(dshape)}")
        return (dshape[0], prod(dshape[2:]))
    return tuple(dshape[:-1])


def _so_label_shapes(attrs, dshape):
    """The label shapes mxnet accepts: with multi_output ``(N, d2 * d3 ...)`` (the one
    inferred), ``(N, d2, d3, ...)`` and ``(N, 1, d2, d3, ...)``; and the data's shape."""
    want = _so_label_shape(attrs, dshape)
    shapes = [want, tuple(dshape)]
    if attrs["multi_output"]:
        shapes += [(dshape[0],) + tuple(dshape[2:]), (dshape[0], 1) + tuple(dshape[2:])]
    return want, shapes


def _so_shape(attrs, in_shapes):
    dshape, lshape = in_shapes
    if dshape is None:
        return in_shapes, [None]
    want, accepted = _so_label_shapes(attrs, dshape)
    if lshape is not None and tuple(lshape) not in accepted:
        raise ShapeError(f"SoftmaxOutput: label shape {tuple(lshape)} does not match the "
                         f"data shape {tuple(dshape)}; expected {want}")
    return [dshape, lshape if lshape is not None else want], [dshape]


def _so_rows(attrs, dshape):
    """The 2-D ``(rows, classes)`` view of a non-multi_output SoftmaxOutput."""
    if attrs["preserve_shape"]:
        return prod(dshape[:-1]), dshape[-1]
    return dshape[0], prod(dshape[1:])


def _so_ref(attrs, ins, is_train):
    x = ins[0]
    if attrs["multi_output"]:
        return [torch.softmax(x, dim=1)]
    rows, cls = _so_rows(attrs, tuple(x.shape))
    return [torch.softmax(x.reshape(rows, cls), dim=1).reshape(x.shape)]


def _so_build(b, n, is_train):
    x, dshape = n.inputs[0], n.in_shapes[0]
    if n.attrs["multi_output"]:
        return [b.op("softmax", x, axis=1)]
    if n.attrs["preserve_shape"]:
        return [b.op("softmax", x, axis=-1)]
    x2 = _reshape(b, x, _so_rows(n.attrs, dshape))
    return [_reshape(b, b.op("softmax", x2, axis=1), dshape)]


def _valid_count(b, label, ignore_label):
    """max(number of labels != ignore_label, 1), shape (1,)."""
    cnt = b.op("sum", b.op("_not_equal_scalar", label, scalar=ignore_label))
    return b.op("_maximum_scalar", cnt, scalar=1.0)


def _so_gradient(b, n):
    """mxnet's SoftmaxOutput gradient; none for the label."""
    a = n.attrs
    prob, label = n.outputs[0], n.inputs[1]
    dshape, lshape = n.in_shapes
    if not a["multi_output"] and tuple(lshape) == tuple(dshape):
        return [(prob - label) * a["grad_scale"], b.zeros_like(label)]  # soft labels
    ce = dict(grad_scale=a["grad_scale"], ignore_label=a["ignore_label"],
              use_ignore=a["use_ignore"], smooth_alpha=a["smooth_alpha"], axis=1)
    if a["multi_output"]:
        spatial = prod(dshape[2:])
        norm = {"null": spatial, "batch": spatial * dshape[0], "valid": 1}[a["normalization"]]
        ce["grad_scale"] = a["grad_scale"] / norm
        labels = _reshape(b, label, (dshape[0],) + tuple(dshape[2:]))
        g = b.op("_softmax_ce_grad", prob, labels, **ce)
    else:
        rows, cls = _so_rows(a, dshape)
        flat = _reshape(b, label, (prod(lshape),))
        # mxnet reads the first `rows` labels of the flattened label array
        labels = flat if prod(lshape) == rows else b.op("slice_axis", flat, axis=0, begin=0,
                                                        end=rows)
        norm = {"null": 1, "batch": rows, "valid": 1}[a["normalization"]]
        ce["grad_scale"] = a["grad_scale"] / norm
        g = _reshape(b, b.op("_softmax_ce_grad", _reshape(b, prob, (rows, cls)), labels, **ce),
                     dshape)
    if a["normalization"] == "valid":
        g = g / _valid_count(b, label, a["ignore_label"])
    return [g, b.zeros_like(label)]


register(OpDef(
    name="SoftmaxOutput", pattern="composite", lowering=Decompose(_so_build),
    arguments=("data", "label"), is_loss=True, aliases=("Softmax",),
    # 'batch' / 'valid' divide the gradient by counts over the whole batch
    rows_independent=lambda attrs: attrs["normalization"] == "null",
    attrs=[Attr("grad_scale", parse_float, 1.0), Attr("ignore_label", parse_float, -1.0),
           Attr("multi_output", parse_bool, False), Attr("use_ignore", parse_bool, False),
           Attr("preserve_shape", parse_bool, False),
           Attr("normalization", choice("null", "batch", "valid"), "null"),
           Attr("out_grad", parse_bool, False), Attr("smooth_alpha", parse_float, 0.0)],
    infer_shape=_so_shape, reference=_so_ref, gradient=_so_gradient,
    doc="Softmax forward; backward (softmax - one_hot(label)) * grad_scale / norm."))


# -- regression outputs -------------------------------------------------------------------------

def _reg_shape(attrs, in_shapes):
    dshape, lshape = in_shapes
    if dshape is None:
        return in_shapes, [None]
    want = (dshape[0],) if len(dshape) == 2 and dshape[1] == 1 else tuple(dshape)
    if lshape is not None and tuple(lshape) not in (want, tuple(dshape)):
        raise ShapeError(f"regression output: label shape {tuple(lshape)} does not match "
                         f"the data shape {tuple(dshape)}")
    return [dshape, lshape if lshape is not None else want], [dshape]


def _minus_sign(b, diff):
    """mxnet's MAE gradient of ``out - label``: 1 where it is positive, -1 elsewhere (at
    0 too, where ``sign`` would give 0: mxnet 1.9.1's ``minus_sign`` is ``a > b ? 1 : -1``)."""
    return b.op("_greater_scalar", diff, scalar=0.0) * 2.0 - 1.0


REGRESSION = {
    # name -> (forward op, torch forward, gradient of (out - label) or None for itself)
    "LinearRegressionOutput": ("_copy", lambda x: x, None),
    "LogisticRegressionOutput": ("sigmoid", torch.sigmoid, None),
    "MAERegressionOutput": ("_copy", lambda x: x, _minus_sign),
}


def _reg_gradient(name):
    def gradient(b, n):
        """(out - label) * grad_scale / (outputs per sample); mxnet's sign of it for MAE."""
        dshape = n.in_shapes[0]
        diff = n.outputs[0] - _reshape(b, n.inputs[1], dshape)
        if REGRESSION[name][2]:
            diff = REGRESSION[name][2](b, diff)
        per_sample = prod(dshape) / dshape[0] if dshape and dshape[0] else 1.0
        return [diff * (n.attrs["grad_scale"] / per_sample), b.zeros_like(n.inputs[1])]
    return gradient


for _name, (_op, _fwd, _) in REGRESSION.items():
    register(OpDef(
        name=_name, pattern="composite", arguments=("data", "label"), is_loss=True,
        rows_independent=True,      # grad_scale over the elements of one row
        lowering=Decompose(lambda b, n, is_train, op=_op: [b.op(op, n.inputs[0])]),
        attrs=[Attr("grad_scale", parse_float, 1.0)], infer_shape=_reg_shape,
        reference=lambda attrs, ins, is_train, f=_fwd: [f(ins[0])],
        gradient=_reg_gradient(_name)))


# -- MakeLoss ------------------------------------------------------------------------------------

def _make_loss_gradient(b, n):
    """grad_scale / norm everywhere: norm = 1, batch size, or max(#(data > valid_thresh), 1)."""
    x, a = n.inputs[0], n.attrs
    norm = n.in_shapes[0][0] if a["normalization"] == "batch" and n.in_shapes[0] else 1
    g = b.op("ones_like", x) * (a["grad_scale"] / norm)
    if a["normalization"] == "valid":
        cnt = b.op("sum", b.op("_greater_scalar", x, scalar=a["valid_thresh"]))
        g = g / b.op("_maximum_scalar", cnt, scalar=1.0)
    return [g]


register(OpDef(
    name="MakeLoss", pattern="composite", is_loss=True, aliases=("make_loss",),
    json_names=(("make_loss", "make_loss"),),      # an operator of its own in mxnet
    rows_independent=lambda attrs: attrs["normalization"] == "null",
    lowering=Decompose(lambda b, n, is_train: [b.op("_copy", n.inputs[0])]),
    attrs=[Attr("grad_scale", parse_float, 1.0), Attr("valid_thresh", parse_float, 0.0),
           Attr("normalization", choice("null", "batch", "valid"), "null")],
    infer_shape=_same_shape, reference=lambda attrs, ins, is_train: [ins[0]],
    gradient=_make_loss_gradient))
