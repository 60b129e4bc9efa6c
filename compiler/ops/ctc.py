"""mxnet's CTC loss (its ``CTCLoss`` operator) as an extern
launch: ATen's ``ctc_loss`` on the log-softmax of the activations, on the context's
device (``registry.Extern``).

``CTCLoss`` with mxnet's aliases ``ctc_loss``, ``_contrib_CTCLoss`` and
``_contrib_ctc_loss`` (so ``mx.sym.contrib.CTCLoss`` and ``mx.sym.contrib.ctc_loss``).
Inputs ``data`` (T, N, C) of unnormalised activations, ``label`` (N, L), then
``data_lengths`` (N,) where ``use_data_lengths`` and ``label_lengths`` (N,) where
``use_label_lengths``. As in mxnet 1.9.1 (whose CPU kernel is Baidu's warp-ctc):

* ``blank_label='first'``: channel 0 is the blank, labels are ``1 .. C-1`` and a label
  row ends at its first ``0`` (the padding value); ``'last'``: channel ``C-1`` is the
  blank, labels are ``0 .. C-2`` and a row ends at its first ``-1``. With
  ``use_label_lengths`` the first ``label_lengths[n]`` entries are the labels, whatever
  follows them. Labels and lengths are read as C's ``int`` cast (truncation).
* the output is the per-sequence loss ``-log p(label | data)``, shape (N,); a sequence
  no alignment fits (``L + repeats > T``) costs 0, and gets no gradient (warp-ctc leaves
  its gradient unwritten: whatever the buffer held);
* a hidden second output holds the gradient of the loss with respect to ``data`` (the
  activations: softmax is applied inside), computed in the forward step, zero at time
  steps past ``data_lengths``; the backward multiplies it by the head gradient of each
  sequence (``_backward_ctc_loss``: a broadcast product, fused as any pointwise op);
* ``data`` must be float32 (mxnet's ``real_t``), as ``data_lengths``; the label may
  have any dtype. ``label`` and the lengths get no gradient (zeros);
* where mxnet reads past its buffers (a length beyond the array, a label value that is
  no class or is the blank) the launch stops with an error naming the values.

The ATen call runs in float64 whatever the input, so the result is warp-ctc's up to
float32 rounding.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import MXNetError
from .registry import Attr, Extern, OpDef, ShapeError, choice, parse_bool, register

__all__ = ["ctc_forward"]


def _arguments(attrs):
    """``data, label`` then ``data_lengths`` and ``label_lengths`` where they are used."""
    args = ["data", "label"]
    if attrs["use_data_lengths"]:
        args.append("data_lengths")
    if attrs["use_label_lengths"]:
        args.append("label_lengths")
    return args


def _infer_shape(attrs, in_shapes):
    """CTCLossOpShape: data (T, N, C), label (N, L) with L <= T, lengths (N,)."""
    data, label = in_shapes[0], in_shapes[1]
    if data is None:
        return in_shapes, [None, None]
    if len(data) != 3:
        raise ShapeError(f"CTCLoss: data of shape {tuple(data)}: the number of dimensions "
                         f"of data array must be 3 (sequence_length, batch_size, "
                         f"alphabet_size)")
    if label is not None:
        if len(label) != 2:
            raise ShapeError(f"CTCLoss: label of shape {tuple(label)}: the number of "
                             f"dimensions of labels array must be 2 (batch_size, "
                             f"label_sequence_length)")
        if label[0] != data[1]:
            raise ShapeError(f"CTCLoss: data {tuple(data)} and label {tuple(label)}: the "
                             f"batch size for the labels and data arrays must be the same")
        if data[0] < label[1]:
            raise ShapeError(f"CTCLoss: data {tuple(data)} and label {tuple(label)}: the max "
                             f"number of labels cannot exceed the maximum sequence length "
                             f"of the data")
    names = _arguments(attrs)
    for k in range(2, len(names)):
        shp = in_shapes[k]
        if shp is not None and (len(shp) != 1 or shp[0] != data[1]):
            raise ShapeError(f"CTCLoss: {names[k]} of shape {tuple(shp)} must be a vector of "
                             f"the batch size {data[1]} (data {tuple(data)})")
    return in_shapes, [(data[1],), tuple(data)]


def _infer_type(attrs, in_types):
    """CTCLossOpType: the outputs take data's dtype, which the kernel reads as float32."""
    t = in_types[0]
    if t is not None and t != "float32":
        raise MXNetError(f"CTCLoss: data of dtype {t}: mxnet's CTC loss reads its data as "
                         f"float32 only")
    if attrs["use_data_lengths"] and in_types[2] not in (None, "float32"):
        raise MXNetError(f"CTCLoss: data_lengths of dtype {in_types[2]}: mxnet reads the "
                         f"data lengths as float32 only")
    return in_types, [t, t]


# ---------------------------------------------------------------------------
# The extern launch

def _label_lengths(attrs, label, given):
    """Per sequence, how many label entries count: ``given`` (label_lengths), else up to
    the first padding value (0 with blank 'first', -1 with 'last')."""
    n, width = label.shape
    if given is not None:
        lengths = given.to(torch.int64)
        bad = (lengths < 0) | (lengths > width)
        if bool(bad.any()):
            raise MXNetError(f"CTCLoss: label_lengths {lengths.tolist()} must lie in "
                             f"[0, {width}] (the label's width)")
        return lengths
    pad = 0 if attrs["blank_label"] == "first" else -1
    hit = torch.cat([label == pad, torch.ones(n, 1, dtype=torch.bool, device=label.device)], 1)
    return hit.to(torch.int8).argmax(dim=1).to(torch.int64)   # the first padding entry


def _data_lengths(data, given):
    t, n = data.shape[0], data.shape[1]
    if given is None:
        return torch.full((n,), t, dtype=torch.int64, device=data.device)
    lengths = given.to(torch.int64)
    bad = (lengths < 0) | (lengths > t)
    if bool(bad.any()):
        raise MXNetError(f"CTCLoss: data_lengths {lengths.tolist()} must lie in [0, {t}] "
                         f"(the data's sequence length)")
    return lengths


def _targets(label, lengths, blank, classes):
    """The label entries that count, checked to be classes other than the blank; the
    rest of each row replaced by the blank (ATen never reads it)."""
    lab = label
    inside = torch.arange(lab.shape[1], device=lab.device)[None, :] < lengths[:, None]
    bad = inside & ((lab < 0) | (lab >= classes) | (lab == blank))
    if bool(bad.any()):
        raise MXNetError(f"CTCLoss: label values {lab[bad].tolist()} are not labels: with "
                         f"alphabet size {classes} and blank channel {blank} a label lies in "
                         f"[0, {classes}) and is not the blank")
    return torch.where(inside, lab, torch.full_like(lab, blank))


def ctc_forward(attrs, ins):
    """``[loss (N,), gradient of sum(loss) with respect to data (T, N, C)]``."""
    data, label = ins[0], ins[1]
    k = 2
    dl = ins[k] if attrs["use_data_lengths"] else None
    k += attrs["use_data_lengths"]
    ll = ins[k] if attrs["use_label_lengths"] else None
    classes = data.shape[2]
    blank = 0 if attrs["blank_label"] == "first" else classes - 1
    label = label.to(torch.int64)                    # C's int cast: truncation
    in_len = _data_lengths(data, dl)
    tgt_len = _label_lengths(attrs, label, ll)
    targets = _targets(label, tgt_len, blank, classes)
    loss, grad = _loss_and_grad(data, targets, in_len, tgt_len, blank)
    return [loss.to(data.dtype), grad.to(data.dtype)]


def _loss_and_grad(data, targets, in_len, tgt_len, blank):
    """ATen's CTC loss of ``log_softmax(data)`` in float64 and its gradient with respect
    to ``data`` (autograd, also where the launches run under ``torch.inference_mode``:
    the tensors autograd saves are fresh copies made outside it)."""
    with torch.inference_mode(False), torch.enable_grad():
        x = data.detach().to(torch.float64, copy=True).requires_grad_(True)
        targets, in_len, tgt_len = targets.clone(), in_len.clone(), tgt_len.clone()
        # steps past a sequence's data length are never read, as in mxnet: whatever they
        # hold (NaN padding among it) gives no loss and a zero gradient
        steps = torch.arange(x.shape[0], device=x.device)[:, None, None]
        read = torch.where(steps < in_len[None, :, None], x, torch.zeros_like(x))
        loss = F.ctc_loss(F.log_softmax(read, dim=2), targets, in_len, tgt_len, blank=blank,
                          reduction="none", zero_infinity=True)
        grad, = torch.autograd.grad(loss.sum(), x)
    return loss.detach(), grad


# ---------------------------------------------------------------------------
# Gradient and registration

def _gradient(b, n):
    """mxnet's ``_backward_ctc_loss``: the forward's gradient times each sequence's head
    gradient (broadcast along time and channels); none for the labels and lengths."""
    batch = n.in_shapes[0][1]
    scale = b.op("Reshape", n.ograds[0], shape=(1, batch, 1))
    grads = [b.op("broadcast_mul", n.outputs[1], scale)]
    return grads + [b.zeros_like(r) for r in n.inputs[1:]]


register(OpDef(
    name="CTCLoss", pattern="opaque", lowering=Extern(ctc_forward),
    aliases=("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"),
    arguments=_arguments, outputs=("output0", "output1"), num_visible=lambda a: 1,
    attrs=[Attr("use_data_lengths", parse_bool, False),
           Attr("use_label_lengths", parse_bool, False),
           Attr("blank_label", choice("first", "last"), "first")],
    infer_shape=_infer_shape, infer_type=_infer_type,
    reference=lambda attrs, ins, is_train: ctc_forward(attrs, ins), gradient=_gradient,
    doc="Connectionist Temporal Classification loss of unnormalised activations (T, N, "
        "C) against padded labels (N, L), per sequence (hidden output: its gradient with "
        "respect to the activations)."))
