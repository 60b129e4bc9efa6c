"""One LSTM layer over a whole sequence as one oneDNN call (``_lstm_layer``), and its
gradient (``_backward_lstm_layer``): what ``passes/fuse_lstm_layers.py`` makes of a
chain of ``mx.rnn.LSTMCell`` steps on the ``cpu`` target.

The unrolled cells cost a dozen ATen calls per step (the recurrent matmul and the gate
arithmetic, forward and backward); oneDNN's LSTM primitive runs the whole time loop of
a layer with its gate arithmetic inside the matmuls' loops, as PyTorch's ``nn.LSTM``
runs on a CPU. Gates are stacked ``i, f, c, o`` in both (mxnet's LSTMCell and oneDNN
through ATen), with one bias per projection.

* ``_lstm_layer(data (T, N, I), i2h_weight (4H, I), h2h_weight (4H, H), i2h_bias (4H,),
  h2h_bias (4H,), begin_h (N, H), begin_c (N, H))`` gives every step's hidden state
  ``(T, N, H)`` and the last step's ``h`` and ``c``; with ``workspace`` > 0 also
  oneDNN's training workspace (``workspace`` bytes, uint8), which the gradient reads.
  Its size is asked of oneDNN when the pass builds the node (:func:`workspace_bytes`)
  and checked on every call: a Program compiled against another oneDNN is refused with
  what to do, never run with a short buffer. The workspace is kept by reference
  (``Extern.held``): the tensor oneDNN returned is the one the gradient reads, never
  copied into planned memory (a 12 MB copy per layer and step at the LSTM benchmark's
  sizes).
* ``_backward_lstm_layer`` takes the forward's inputs, outputs and workspace and the
  gradients of its three outputs, and gives the gradients of its seven inputs.

Both are float32 only (the pass leaves other dtypes to the cells).
"""
from __future__ import annotations

import functools

import torch

from ..errors import MXNetError
from .registry import Attr, Extern, OpDef, ShapeError, parse_int, register

_LSTM = 2                   # ideep's rnn_kind::LSTM, ATen's ``mode`` for an LSTM
_ARGS = ("data", "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias", "begin_h", "begin_c")
_SEQ_OUTS = ("output", "state_h", "state_c")


def available() -> bool:
    """Whether this torch has oneDNN's RNN kernels (``torch.backends.mkldnn``)."""
    return bool(torch.backends.mkldnn.is_available()) and \
        hasattr(torch.ops.aten, "mkldnn_rnn_layer")


def _call_forward(x, wi, wh, bi, bh, h0, c0, hidden, train):
    # ATen returns the workspace only while grad mode is on (it is what its own autograd
    # saves); nothing here requires grad, so no graph is recorded
    with torch.inference_mode(False), torch.enable_grad():
        return torch.ops.aten.mkldnn_rnn_layer(
            x, wi, wh, bi, bh, h0, c0, False, [], _LSTM, hidden, 1, True, False, False, train)


@functools.lru_cache(maxsize=256)
def workspace_bytes(steps: int, batch: int, inputs: int, hidden: int) -> int:
    """The bytes of oneDNN's LSTM training workspace for one layer of these sizes (one
    forward on zeros, remembered per size)."""
    z = torch.zeros
    _, _, _, ws = _call_forward(z(steps, batch, inputs), z(4 * hidden, inputs),
                                z(4 * hidden, hidden), z(4 * hidden), z(4 * hidden),
                                z(batch, hidden), z(batch, hidden), hidden, True)
    return int(ws.numel())


def _dims(in_shapes):
    """``(T, N, I, H)`` from the shapes of the seven inputs, checked against each other."""
    x, wi, wh, bi, bh, h0, c0 = in_shapes
    if x is None or wh is None:
        return None
    if len(x) != 3 or len(wh) != 2 or wh[0] != 4 * wh[1]:
        raise ShapeError(f"_lstm_layer: data {tuple(x)} must be (T, N, I) and h2h_weight "
                         f"{tuple(wh)} (4H, H)")
    t, n, i = x
    h = wh[1]
    want = {"i2h_weight": (4 * h, i), "i2h_bias": (4 * h,), "h2h_bias": (4 * h,),
            "begin_h": (n, h), "begin_c": (n, h)}
    for name, got in zip(("i2h_weight", "i2h_bias", "h2h_bias", "begin_h", "begin_c"),
                         (wi, bi, bh, h0, c0)):
        if got is not None and tuple(got) != want[name]:
            raise ShapeError(f"_lstm_layer: {name} of shape {tuple(got)}, expected "
                             f"{want[name]} for data {tuple(x)} and h2h_weight {tuple(wh)}")
    return t, n, i, h


def _layer_shape(attrs, in_shapes):
    dims = _dims(in_shapes)
    if dims is None:
        return in_shapes, [None] * len(_layer_outputs(attrs))
    t, n, i, h = dims
    outs = [(t, n, h), (n, h), (n, h)]
    if attrs["workspace"]:
        outs.append((attrs["workspace"],))
    return [(t, n, i), (4 * h, i), (4 * h, h), (4 * h,), (4 * h,), (n, h), (n, h)], outs


def _float32_only(what, in_types):
    for name, t in zip(_ARGS, in_types):
        if t is not None and t != "float32":
            raise MXNetError(f"{what}: {name} of dtype {t}; the oneDNN LSTM layer takes "
                             f"float32 only")


def _layer_type(attrs, in_types):
    _float32_only("_lstm_layer", in_types)
    outs = ["float32"] * 3 + (["uint8"] if attrs["workspace"] else [])
    return ["float32"] * len(_ARGS), outs


def _layer_outputs(attrs):
    return _SEQ_OUTS + (("workspace",) if attrs["workspace"] else ())


def _contiguous(ins):
    return [t.contiguous() for t in ins]


def _forward(attrs, ins):
    x, wi, wh, bi, bh, h0, c0 = _contiguous(ins)
    want = attrs["workspace"]
    y, hy, cy, ws = _call_forward(x, wi, wh, bi, bh, h0, c0, int(wh.shape[1]), bool(want))
    if not want:
        return [y, hy, cy]
    if ws is None or ws.numel() != want:
        got = "none" if ws is None else f"{ws.numel()} bytes"
        raise MXNetError(f"_lstm_layer over data {tuple(x.shape)}: oneDNN's workspace is "
                         f"{got} here, the Program was compiled for {want} bytes (another "
                         f"torch or CPU compiled it). Clear the kernel cache "
                         f"(symtriton cache clear) or set SYMTRITON_LSTM_LAYERS=0")
    return [y, hy, cy, ws]


def _no_workspace(attrs, got):
    """The message for a backward whose workspace is not its forward's (``got`` bytes)."""
    return (f"_backward_lstm_layer: the oneDNN workspace holds {got} bytes where the "
            f"forward writes {attrs['workspace']}: run forward(is_train=True) on this "
            f"executor before backward")


def _backward(attrs, ins):
    x, wi, wh, bi, bh, h0, c0, y, hy, cy, ws, dy, dhy, dcy = _contiguous(ins)
    if ws.numel() != attrs["workspace"]:
        # kept by reference (Extern.held): empty until a forward ran, and oneDNN reads
        # it by the sizes it is given, whatever the tensor holds
        raise MXNetError(_no_workspace(attrs, ws.numel()))
    grads = torch.ops.aten.mkldnn_rnn_layer_backward(
        x, wi, wh, bi, bh, h0, c0, y, hy, cy, dy, dhy, dcy, False, _LSTM,
        int(wh.shape[1]), 1, True, True, False, [], False, ws)
    return list(grads)


def _forward_script(attrs, shapes):
    """:func:`_forward` as TorchScript (``Extern.script``): with grad mode on, which
    makes ATen return the workspace, as ``_call_forward`` switches it on; oneDNN
    writes only part of the workspace (the rest is what the allocator held)."""
    want = int(attrs["workspace"])
    hidden = int(shapes[2][1])
    check = (f"    if r[3].numel() != {want}:\n"
             f"        raise RuntimeError('_lstm_layer over data {tuple(shapes[0])}: the oneDNN "
             f"workspace differs from the {want} bytes the Program was compiled for; clear "
             f"the kernel cache (symtriton cache clear) or set SYMTRITON_LSTM_LAYERS=0')\n"
             f"    return [r[0], r[1], r[2], r[3]]\n") if want else \
        "    return [r[0], r[1], r[2]]\n"
    return ("def extern(xs: List[Tensor]) -> List[Tensor]:\n"
            "    c = [x.contiguous() for x in xs]\n"
            "    sizes: List[int] = []\n"
            f"    r = torch.ops.aten.mkldnn_rnn_layer(c[0], c[1], c[2], c[3], c[4], c[5], c[6], "
            f"False, sizes, {_LSTM}, {hidden}, 1, True, False, False, {bool(want)})\n"
            + check), True, ({3} if want else set())


def _backward_script(attrs, shapes):
    """:func:`_backward` as TorchScript (``Extern.script``)."""
    hidden = int(shapes[2][1])
    return ("def extern(xs: List[Tensor]) -> List[Tensor]:\n"
            "    c = [x.contiguous() for x in xs]\n"
            f"    if c[10].numel() != {int(attrs['workspace'])}:\n"
            f"        raise RuntimeError('{_no_workspace(attrs, 'a different number of')}')\n"
            "    sizes: List[int] = []\n"
            "    g = torch.ops.aten.mkldnn_rnn_layer_backward(c[0], c[1], c[2], c[3], c[4], "
            "c[5], c[6], c[7], c[8], c[9], c[11], c[12], c[13], False, "
            f"{_LSTM}, {hidden}, 1, True, True, False, sizes, False, c[10])\n"
            "    return [g[0], g[1], g[2], g[3], g[4], g[5], g[6]]\n"), False, set()


# -- the oracle: the cell's arithmetic step by step (tests, op-by-op evaluation) -----

def reference_layer(x, wi, wh, bi, bh, h, c):
    """Every step's ``h``, the last ``h`` and ``c``: mx.rnn.LSTMCell's arithmetic."""
    ys = []
    for step in x:
        gates = step @ wi.t() + bi + h @ wh.t() + bh
        i, f, g, o = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        ys.append(h)
    return torch.stack(ys), h, c


def _reference_forward(attrs, ins, is_train):
    y, h, c = reference_layer(*[t.float() for t in ins])
    outs = [y, h, c]
    if attrs["workspace"]:
        outs.append(torch.zeros(attrs["workspace"], dtype=torch.uint8, device=y.device))
    return outs


def _reference_backward(attrs, ins, is_train):
    """The gradients by autograd through :func:`reference_layer` (the workspace unread)."""
    inputs = [t.detach().float().requires_grad_() for t in ins[:7]]
    dy, dhy, dcy = ins[11:14]
    with torch.enable_grad():
        y, h, c = reference_layer(*inputs)
        grads = torch.autograd.grad((y, h, c), inputs, (dy, dhy, dcy), allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs)]


def _gradient(b, n):
    if not n.attrs["workspace"]:
        raise MXNetError(f"_lstm_layer '{n.name}' was built without oneDNN's workspace "
                         f"(a Program without gradients) and cannot be differentiated")
    y, hy, cy, ws = n.outputs
    return b.op("_backward_lstm_layer", *n.inputs, y, hy, cy, ws, *n.ograds[:3],
                workspace=n.attrs["workspace"])


def _backward_shape(attrs, in_shapes):
    dims = _dims(in_shapes[:7])
    if dims is None:
        return in_shapes, [None] * 7
    t, n, i, h = dims
    seven = [(t, n, i), (4 * h, i), (4 * h, h), (4 * h,), (4 * h,), (n, h), (n, h)]
    outs = [(t, n, h), (n, h), (n, h), (attrs["workspace"],)]
    return seven + outs + outs[:3], seven


def _backward_type(attrs, in_types):
    _float32_only("_backward_lstm_layer", in_types[:7])
    return ["float32"] * 10 + ["uint8"] + ["float32"] * 3, ["float32"] * 7


_SIZES = [Attr("workspace", parse_int, 0)]

register(OpDef(
    name="_lstm_layer", pattern="opaque",
    lowering=Extern(_forward, _forward_script, held=(3,)),
    arguments=_ARGS, outputs=_layer_outputs, num_visible=lambda a: 3, attrs=_SIZES,
    infer_shape=_layer_shape, infer_type=_layer_type, reference=_reference_forward,
    gradient=_gradient,
    doc="Internal (cpu target): one LSTM layer over a sequence, oneDNN's kernel; made "
        "from a chain of mx.rnn.LSTMCell steps by the fuse_lstm_layers pass."))
register(OpDef(
    name="_backward_lstm_layer", pattern="opaque", lowering=Extern(_backward, _backward_script),
    arguments=_ARGS + ("output", "state_h", "state_c", "workspace", "output_grad",
                       "state_h_grad", "state_c_grad"),
    outputs=tuple(f"{a}_grad" for a in _ARGS), attrs=_SIZES,
    infer_shape=_backward_shape, infer_type=_backward_type,
    reference=_reference_backward,
    doc="Internal (cpu target): the gradient of _lstm_layer, oneDNN's kernel."))
