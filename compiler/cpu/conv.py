"""Convolution kernels for the ``cpu`` target: one ATen call, then the epilogue.

The program is ``compiler/ir/conv.py``'s. ATen's convolution (``aten.convolution.out``,
transposed for the data gradient, ``aten.convolution_backward`` for the weight gradient)
runs on strided views of the planned buffers, widened to the compute dtype; the
epilogue's calls are lowered as ``lower.py`` lowers any tile program.
"""
from __future__ import annotations

from dataclasses import replace

from .codegen import call_lines, plan
from .lower import Lowering
from .values import Val
from ..ir.dtypes import TORCH
from ..ir.tile_program import TileProgram

__all__ = ["conv_kernel_lines"]


class _ConvLowering(Lowering):
    """lower.py's lowering with the ``conv`` instruction as one ATen call writing a
    domain-shaped value (the convolution's output), the epilogue as torch calls on it."""

    def build(self):
        conv = self.p.instrs[0]
        self.values[conv.out] = self.conv_value(conv)
        whole = self.p
        self.p = replace(whole, instrs=whole.instrs[1:])
        try:
            return super().build()
        finally:
            self.p = whole

    def conv_value(self, ins):
        p = ins.extra
        views = {}
        for i, role in enumerate(p["roles"][:-1]):
            t = ins.args[i]
            # float16 / bfloat16 operands: ATen's convolution in the compute dtype, as the
            # Triton kernel accumulates in float32
            views[role] = self.widen(t, self.view(t, 0, self.shapes[t], self.strides[t][0]))
        reads = [Val("", (), kind="view", slot=self.slots[t][0]) for t in ins.args]
        nd = len(p["kernel"])
        geo = f"{list(p['stride'])}, {list(p['pad'])}, {list(p['dilate'])}"
        bias = views.get("bias", "None")
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
            else:   # the transposed convolution; output_padding: x positions past the
                #     last window (fewer than the stride)
                opad = [p["x"][2 + i] + 2 * p["pad"][i] - 1 - (p["kernel"][i] - 1) *
                        p["dilate"][i] - (p["y"][2 + i] - 1) * p["stride"][i] for i in range(nd)]
                fmt = (f"convolution_out({views['y']}, {views['w']}, {bias}, {geo}, True, "
                       f"{opad}, {p['groups']}, out={{out}})")
        return self.emit("custom", fmt, [], self.D, reads=reads)

    def bind_once(self, line):
        if line not in self.bind_lines:
            self.bind_lines.append(line)


def conv_kernel_lines(prog: TileProgram, strides: list, shapes: list, slots: list):
    """``(bind lines, run lines)`` of a convolution group for the cpu target: one ATen
    convolution call, writing its destination where ``codegen.plan`` allows, then
    the epilogue's calls."""
    k = _ConvLowering(prog, strides, shapes, slots)
    stores = k.build()
    return k.bind_lines, call_lines(k.ops, plan(k.ops, stores), TORCH[prog.compute_dtype])
