"""Convolution kernels for the ``cpu`` target: one ATen call, then the epilogue.

The program is ``compiler/ir/conv.py``'s. ATen's convolution (``aten.convolution.out``,
transposed for the data gradient, ``aten.convolution_backward`` for the weight gradient)
runs on strided views of the planned buffers, widened to the compute dtype; the
epilogue's calls are lowered as ``lower.py`` lowers any tile program. A pointwise
convolution (a 1 x 1 kernel, stride 1, no padding, one group) is a matrix product
per sample instead (:func:`as_matmul`).
"""
from __future__ import annotations

from dataclasses import replace

import torch

from .codegen import call_lines, plan
from .lower import Lowering
from .values import Val
from ..ir.dtypes import TORCH
from ..ir.tile_program import TileProgram
from ..ops.registry import prod

__all__ = ["conv_kernel_lines"]


class _ConvLowering(Lowering):
    """lower.py's lowering with the ``conv`` instruction as one ATen call writing a
    domain-shaped value (the convolution's output), the epilogue as torch calls on it."""

    def build(self):
        conv = self.p.instrs[0]
        self.fused = None
        self.values[conv.out] = self.conv_value(conv)
        whole = self.p
        self.p = replace(whole, instrs=whole.instrs[1:])
        try:
            stores = super().build()
        finally:
            self.p = whole
        self.fuse_activation()
        return stores

    def fuse_activation(self):
        """A forward convolution whose one epilogue call is an activation oneDNN has as a
        post-op (:data:`FUSED_ACTS`), the pre-activation not stored: one
        ``mkldnn._convolution_pointwise`` call instead of two. ATen's ``tanh`` goes to
        MKL's VML, which runs its generic code on AMD CPUs (LeNet's first activation:
        1.9 ms on one thread, the convolution 1.3 ms; fused, 2.0 ms for both), and a
        separate activation is one more pass over the output."""
        if self.fused is None or len(self.ops) != 2:
            return
        conv, act = self.ops
        if act.kind != "ew" or act.fn not in FUSED_ACTS or len(act.args) != 1 or \
                act.args[0] is not conv.out or conv.out.stored:
            return
        pre, x, w, bias, p = self.fused
        self.bind_lines.remove("convolution_out = torch.ops.aten.convolution.out")
        self.bind_once("conv_pointwise = torch.ops.mkldnn._convolution_pointwise")
        call = (f"conv_pointwise({x}, {w}, {bias}, {list(p['pad'])}, {list(p['stride'])}, "
                f"{list(p['dilate'])}, {p['groups']}, {FUSED_ACTS[act.fn]!r}, [], '')")
        fused = replace(conv, fmt="\n".join(pre + [f"{{out}}.copy_({call})"]), out=act.out)
        act.out.op = fused
        self.ops = [fused]

    def conv_value(self, ins):
        p = ins.extra
        views = {}
        for i, role in enumerate(p["roles"][:-1]):
            t = ins.args[i]
            # float16 / bfloat16 operands: ATen's convolution in the compute dtype, as the
            # Triton kernel accumulates in float32
            views[role] = self.widen(t, self.view(t, 0, self.shapes[t], self.strides[t][0]))
        reads = [Val("", (), kind="view", slot=self.slots[t][0]) for t in ins.args]
        if as_matmul(p):
            return self.emit("custom", _matmul_fmt(p, views), [], self.D, reads=reads)
        nd = len(p["kernel"])
        geo = f"{list(p['stride'])}, {list(p['pad'])}, {list(p['dilate'])}"
        bias = views.get("bias", "None")
        pre = []
        if channels_last(p):
            # copies of the operands in channels-last order, made in bind, filled per run
            cl = "memory_format=torch.channels_last"
            roles = {"conv_wgrad": ("x", "y"), "conv_fwd": ("x", "w"), "conv_dgrad": ("y", "w")}
            for role in roles[p["mode"]]:
                t = ins.args[p["roles"].index(role)]
                name = self.fresh(f"{role}cl")
                self.bind_lines.append(f"{name} = torch.empty({tuple(p[role])}, "
                                       f"dtype={self.cdt}, {cl})")
                pre.append(f"{name}.copy_({views[role]})")
                views[role] = name
        if p["mode"] == "conv_wgrad":
            self.bind_once("convolution_backward = torch.ops.aten.convolution_backward")
            # the destination is passed as the weight: read for its shape only
            fmt = (f"{{out}}.copy_(convolution_backward({views['y']}, {views['x']}, {{out}}, "
                   f"None, {geo}, False, {[0] * nd}, {p['groups']}, [False, True, False])[1])")
        else:
            self.bind_once("convolution_out = torch.ops.aten.convolution.out")
            if p["mode"] == "conv_fwd":
                fmt = (f"convolution_out({views['x']}, {views['w']}, {bias}, {geo}, False, "
                       f"{[0] * nd}, {p['groups']}, out={{out}})")
                if nd == 2 and self.cdt == "torch.float32" and pointwise_available():
                    self.fused = (pre, views["x"], views["w"], bias, p)
            else:   # the transposed convolution; output_padding: x positions past the
                #     last window (fewer than the stride)
                opad = [p["x"][2 + i] + 2 * p["pad"][i] - 1 - (p["kernel"][i] - 1) *
                        p["dilate"][i] - (p["y"][2 + i] - 1) * p["stride"][i] for i in range(nd)]
                fmt = (f"convolution_out({views['y']}, {views['w']}, {bias}, {geo}, True, "
                       f"{opad}, {p['groups']}, out={{out}})")
        if pre:   # run() lines: the copies, then the convolution
            fmt = "\n".join(pre + [fmt])
        return self.emit("custom", fmt, [], self.D, reads=reads)

    def bind_once(self, line):
        if line not in self.bind_lines:
            self.bind_lines.append(line)


# epilogue calls a fused forward convolution applies as oneDNN's post-op: the torch
# function -> ``_convolution_pointwise``'s attr (oneDNN's tanh: within 1e-7 relative of
# float64's, as ATen's)
FUSED_ACTS = {"tanh": "tanh"}


def pointwise_available() -> bool:
    """Whether this torch has oneDNN's fused convolution + activation
    (``torch.ops.mkldnn._convolution_pointwise``, what Inductor's cpu fusion calls)."""
    try:
        return torch.backends.mkldnn.is_available() and \
            hasattr(torch.ops.mkldnn, "_convolution_pointwise")
    except (AttributeError, RuntimeError):
        return False


def as_matmul(p: dict) -> bool:
    """cpu target: whether a convolution runs as matrix products (:func:`_matmul_fmt`).

    A pointwise convolution (every kernel size 1, stride 1, no padding, one group) is
    ``y[n] = w @ x[n]`` over the flattened positions, its data gradient ``w.T @ dy[n]``
    and its weight gradient the sum over samples of ``dy[n] @ x[n].T``. As BLAS products
    they cost no oneDNN primitive to create at a first call (Inception-BN's 1 x 1
    convolutions: 0.043 -> 0.016 s over nine shapes, forward and both gradients) and
    run faster at two threads (16.5 -> 10.3 ms for the same; equal within 5% at one
    thread; the forward of 1,024 -> 352 channels at 7 x 7 is 15% slower, every other
    shape measured as fast or faster, up to 2-4x for the data gradient). The weight
    gradient's per-sample products are summed from one batched product, so only where
    they are no larger than the output gradient (channels in at most the positions);
    beyond, oneDNN's weight gradient is as fast (batch 32, 256 -> 1,024 channels at
    14 x 14: 18.0 ms against 18.2 summing per sample, 29.7 from one batched product).
    """
    k = p["kernel"]
    if p["groups"] != 1 or any(v != 1 for v in k) or any(v != 1 for v in p["stride"]) or \
            any(v != 0 for v in p["pad"]) or tuple(p["x"][2:]) != tuple(p["y"][2:]):
        return False
    if p["mode"] == "conv_wgrad":
        return p["x"][1] <= prod(p["x"][2:])
    return True


def _matmul_fmt(p: dict, views: dict) -> str:
    """The run() lines of a convolution that :func:`as_matmul` accepts, writing ``{out}``
    (through a flat view when it is contiguous, else by a copy)."""
    n, c, o = p["x"][0], p["x"][1], p["y"][1]
    positions = prod(p["x"][2:])
    if p["mode"] == "conv_wgrad":
        product = (f"torch.bmm({views['y']}.reshape({n}, {o}, {positions}), "
                   f"{views['x']}.reshape({n}, {c}, {positions}).transpose(1, 2))")
        return (f"torch.sum({product}, 0, out={{out}}.view({o}, {c})) if "
                f"{{out}}.is_contiguous() else {{out}}.copy_(torch.sum({product}, 0)"
                f".view({{out}}.shape))")
    w2 = f"{views['w']}.reshape({o}, {c})"
    if p["mode"] == "conv_fwd":
        a, b, rows = w2, f"{views['x']}.reshape({n}, {c}, {positions})", o
    else:                   # the data gradient, or Deconvolution's forward
        a, b, rows = f"{w2}.t()", f"{views['y']}.reshape({n}, {o}, {positions})", c
    line = (f"torch.matmul({a}, {b}, out={{out}}.view({n}, {rows}, {positions})) if "
            f"{{out}}.is_contiguous() else "
            f"{{out}}.copy_(torch.matmul({a}, {b}).view({{out}}.shape))")
    if "bias" in views:     # on the output's channels
        ones = ", 1" * (len(p["x"]) - 2)
        line += f"\n{{out}}.add_({views['bias']}.view({rows}{ones}))"
    return line


def _padded16(c: int) -> int:
    return -(-c // 16) * 16


def channels_last(p: dict) -> bool:
    """cpu target: whether a convolution runs on channels-last copies of its operands.

    oneDNN (ATen's CPU convolution) computes an NCHW convolution in blocked layouts
    whose channel blocks are 16 wide, so 20 and 50 channels cost as 32 and 64; its
    channels-last kernels do not pad. With the copies in and out counted, the
    forward and the weight gradient of a 2-D, ungrouped convolution are then 1.4-2x
    faster on one thread or two (LeNet's second convolution, 20 -> 50 channels:
    forward 4.3 -> 3.2 ms, weight gradient 4.6 -> 3.0 ms on one thread) when both
    channel counts are 16 or more and the blocks pad their product by half or more;
    below 16 channels, or with little padding, channels-last is slower (0.5-0.95x
    measured). The data gradient (a transposed convolution) gains 1.01-1.5x under
    the same rule (seven shapes on one thread: LeNet's 50 -> 20 channels 4.4 ->
    4.0 ms in a step; 0.86-0.91x at 40 / 100 channels, whose blocks pad by a third,
    which the rule leaves out). The results are the same convolution summed in
    another order (rounding).
    """
    if p["mode"] not in ("conv_fwd", "conv_wgrad", "conv_dgrad") or len(p["kernel"]) != 2 or \
            p["groups"] != 1:
        return False
    ci, co = p["x"][1], p["y"][1]
    return min(ci, co) >= 16 and _padded16(ci) * _padded16(co) >= 1.5 * ci * co


def conv_kernel_lines(prog: TileProgram, strides: list, shapes: list, slots: list):
    """``(bind lines, run lines)`` of a convolution group for the cpu target: one ATen
    convolution call, writing its destination where ``codegen.plan`` allows, then
    the epilogue's calls."""
    k = _ConvLowering(prog, strides, shapes, slots)
    stores = k.build()
    k.release()
    return k.bind_lines, call_lines(k.ops, plan(k.ops, stores), TORCH[prog.compute_dtype])
