"""Convolution kernels for Triton: the implicit GEMM of a convolution's tile program.

No im2col buffer exists: each ``[BM, BK]`` / ``[BK, BN]`` operand tile is loaded
straight from x, w or y with addresses computed from the flat row / column / K
indices (``x = y * stride + k * dilate - pad``; for the data gradient
``y = (x + pad - k * dilate) / stride`` where that divides), masked where the
position falls in the padding. ``templates/conv.py.j2`` holds the kernel; this file
computes its index expressions. The epilogue (bias, activation, ...) is rendered on the
accumulator tile by ``codegen.py``'s own instruction and store writers. The tile
program and the GEMM's shape are ``compiler/ir/conv.py``'s.

On a GPU the tiles are a matmul's (``compiler/ir/tiles.py``); a weight gradient's K
(batch x output positions) is one long loop per output tile, without split-K.
"""
from __future__ import annotations

from dataclasses import replace

from .codegen import KernelContext, dot_kind, dot_operands, instr_lines, store_lines
from ..ir.conv import gemm_dims, summary
from ..ir.index_math import index_sum, split_index
from ..ir.rendering import Rendered, environment
from ..ir.tile_program import TileProgram

__all__ = ["render_conv"]


class _Operand:
    """One GEMM operand's addresses: ``outer`` terms vary along its row or column index
    (computed once, before the K loop), ``inner`` terms along K, and ``windows`` are
    positions ``outer + inner`` of a spatial dim that may fall outside the tensor
    (masked), or for the data gradient a multiple of the stride to divide by.

    ``windows``: ``(outer expr, inner expr, size, element stride, divide by, masked)``.
    """

    def __init__(self, name, ptr, outer, inner, windows):
        self.name, self.ptr = name, ptr
        self.outer, self.inner, self.windows = outer, inner, windows

    def before_loop(self):
        lines, terms = [], list(self.outer)
        for i, (out_e, _, _, stride, div, _) in enumerate(self.windows):
            lines.append(f"{self.name}_w{i} = {out_e}")
            if div == 1:
                terms.append((f"{self.name}_w{i}", stride))
        return lines + [f"{self.name}_o = {index_sum(terms)}"]

    def in_loop(self, k_mask):
        """Lines of the loop body, and the load's ``(pointer, mask)``."""
        lines, terms, masks = [], list(self.inner), [k_mask]
        full = []                       # [BM, BK] / [BK, BN] terms of the address
        for i, (_, in_e, size, stride, div, masked) in enumerate(self.windows):
            pos = f"{self.name}_p{i}"
            if div == 1:
                terms.append((in_e, stride))
                if masked:
                    lines.append(f"{pos} = {self.name}_w{i}" +
                                 (f" + {in_e}" if in_e != "0" else ""))
                    masks.append(f"({pos} >= 0) & ({pos} < {size})")
                continue
            lines.append(f"{pos} = {self.name}_w{i}" + (f" + {in_e}" if in_e != "0" else ""))
            q = f"{self.name}_q{i}"
            lines.append(f"{q} = tl.where({pos} >= 0, {pos}, 0) // {div}")
            full.append((q, stride))
            masks.append(f"({pos} >= 0) & ({pos} % {div} == 0) & ({q} < {size})")
        lines.append(f"{self.name}_k = {index_sum(terms)}")
        address = " + ".join([f"{self.name}_o", f"{self.name}_k"] +
                             [index_sum([t]) for t in full if index_sum([t]) != "0"])
        return lines, f"{self.ptr} + {address}", " & ".join(masks)


def _fwd(p, ptr, st):
    """y[n, o, y] = sum over (c, k) of x[n, c, y * s + k * d - pad] w[o, c, k]."""
    x, w, y, g = p["x"], p["w"], p["y"], p["groups"]
    nd = len(p["kernel"])
    cg, og = x[1] // g, w[0] // g
    rows, (n, *ys) = split_index("rm", ["n"] + [f"y{i}" for i in range(nd)], [x[0], *y[2:]])
    ka, (ca, *kas) = split_index("ka", ["ca"] + [f"ka{i}" for i in range(nd)], [cg, *p["kernel"]])
    kb, (cb, *kbs) = split_index("kb", ["cb"] + [f"kb{i}" for i in range(nd)], [cg, *p["kernel"]])
    wins = [(_affine(ys[i], p["stride"][i], -p["pad"][i]), _affine(kas[i], p["dilate"][i], 0),
             x[2 + i], st["x"][2 + i], 1, p["pad"][i] > 0) for i in range(nd)]
    a = _Operand("a", ptr["x"], [(n, st["x"][0]), (f"(gb * {cg})", st["x"][1])],
                 [(ca, st["x"][1])], wins)
    b = _Operand("b", ptr["w"], [(f"(gb * {og} + rn)", st["w"][0])],
                 [(cb, st["w"][1])] + list(zip(kbs, st["w"][2:])), [])
    return rows, ka + kb, a, b, [n, f"gb * {og} + rn", *ys], f"gb * {og} + rn"


def _dgrad(p, ptr, st):
    """x[n, c, x] = sum over (o, k) of y[n, o, (x + pad - k * d) / s] w[o, c, k], where the
    division is exact and lands inside y."""
    x, w, y, g = p["x"], p["w"], p["y"], p["groups"]
    nd = len(p["kernel"])
    cg, og = x[1] // g, w[0] // g
    rows, (n, *xs) = split_index("rm", ["n"] + [f"x{i}" for i in range(nd)], [x[0], *x[2:]])
    ka, (oa, *kas) = split_index("ka", ["oa"] + [f"ka{i}" for i in range(nd)], [og, *p["kernel"]])
    kb, (ob, *kbs) = split_index("kb", ["ob"] + [f"kb{i}" for i in range(nd)], [og, *p["kernel"]])
    wins = [(_affine(xs[i], 1, p["pad"][i]) + " + rm * 0", _affine(kas[i], -p["dilate"][i], 0),
             y[2 + i], st["y"][2 + i], p["stride"][i], True) for i in range(nd)]
    a = _Operand("a", ptr["y"], [(n, st["y"][0]), (f"(gb * {og})", st["y"][1])],
                 [(oa, st["y"][1])], wins)
    b = _Operand("b", ptr["w"], [("rn", st["w"][1]), (f"(gb * {og})", st["w"][0])],
                 [(ob, st["w"][0])] + list(zip(kbs, st["w"][2:])), [])
    return rows, ka + kb, a, b, [n, f"gb * {cg} + rn", *xs], f"gb * {cg} + rn"


def _wgrad(p, ptr, st):
    """w[o, c, k] = sum over (n, y) of y[n, o, y] x[n, c, y * s + k * d - pad]."""
    x, w, y, g = p["x"], p["w"], p["y"], p["groups"]
    nd = len(p["kernel"])
    cg, og = x[1] // g, w[0] // g
    cols, (c, *ks) = split_index("rn", ["c"] + [f"kw{i}" for i in range(nd)], [cg, *p["kernel"]])
    ka, (na, *yas) = split_index("ka", ["na"] + [f"ya{i}" for i in range(nd)], [x[0], *y[2:]])
    kb, (nb, *ybs) = split_index("kb", ["nb"] + [f"yb{i}" for i in range(nd)], [x[0], *y[2:]])
    a = _Operand("a", ptr["y"], [(f"(gb * {og} + rm)", st["y"][1])],
                 [(na, st["y"][0])] + list(zip(yas, st["y"][2:])), [])
    wins = [(_affine(ks[i], p["dilate"][i], -p["pad"][i]), _affine(ybs[i], p["stride"][i], 0),
             x[2 + i], st["x"][2 + i], 1, p["pad"][i] > 0) for i in range(nd)]
    b = _Operand("b", ptr["x"], [(f"(gb * {cg} + {c})", st["x"][1])], [(nb, st["x"][0])], wins)
    return cols, ka + kb, a, b, [f"gb * {og} + rm", c, *ks], None


def _affine(coord, scale, shift):
    """``coord * scale + shift`` as source text (``0`` coordinates folded)."""
    terms = [] if coord == "0" else [coord if scale == 1 else f"{coord} * {scale}"]
    if shift or not terms:
        terms.append(str(shift))
    return " + ".join(terms).replace("+ -", "- ")


_MODES = {"conv_fwd": _fwd, "conv_dgrad": _dgrad, "conv_wgrad": _wgrad}
_OPERANDS = {"conv_fwd": ("x", "w"), "conv_dgrad": ("y", "w"), "conv_wgrad": ("y", "x")}


def render_conv(prog: TileProgram, strides: list, shapes: list, fp32_dot: str = "ieee") -> Rendered:
    """Triton source of a convolution's tile program (``templates/conv.py.j2``): the
    implicit GEMM, then the epilogue and the stores as ``codegen.py`` writes a matmul's.
    The operand tiles go to ``tl.dot`` as a matmul's do (``codegen.dot_operands``:
    float16 / bfloat16 as they are, with a float32 accumulator)."""
    conv = prog.instrs[0]
    p = conv.extra
    roles = p["roles"][:-1]
    tensor = {role: conv.args[i] for i, role in enumerate(roles)}
    ptr = {role: f"p{t}_0" for role, t in tensor.items()}
    st = {role: strides[t][0] for role, t in tensor.items()}
    outer, k_split, a, b, out_coords, bias_channel = _MODES[p["mode"]](p, ptr, st)
    m, n, k, g = gemm_dims(p)
    a_lines, a_ptr, a_mask = a.in_loop(f"mrow & (ka < {k})")
    b_lines, b_ptr, b_mask = b.in_loop(f"(kb < {k}) & mcol")
    # [BM, BN] tiles, as a dot's
    ctx = KernelContext(replace(prog, kind="matmul"), strides, shapes, fp32_dot)
    ta, tb = (tensor[r] for r in _OPERANDS[p["mode"]])
    dot_lines = dot_operands(ctx, ta, tb, f"tl.load({a_ptr}, mask={a_mask}, other=0.0)",
                              f"tl.load({b_ptr}, mask={b_mask}, other=0.0)", "acc")
    coords = [f"{ctx.coord(pos)} = {c}" for pos, c in enumerate(out_coords)
              if ctx.coord(pos) is not None]
    epilogue = []
    if "bias" in roles:
        bias = (f"tl.load({ptr['bias']} + {index_sum([(f'({bias_channel})', st['bias'][0])])}, "
                f"mask=mcol, other=0.0)")
        epilogue.append(f"acc += {ctx.widen(tensor['bias'], bias)}")
    epilogue.append(f"{conv.out} = acc")
    for ins in prog.instrs[1:]:
        epilogue.extend(instr_lines(ctx, ins))
    for store in prog.stores:
        for dst, dst_strides in enumerate(strides[store.tensor]):
            epilogue.extend(store_lines(ctx, store, dst, dst_strides, shapes[store.tensor]))
    params = [(t, dst) for t in range(len(prog.tensors)) for dst in range(len(strides[t]))]
    kv = {"params": ", ".join(f"p{t}_{dst}" for t, dst in params), "summary": summary(p),
          "M": m, "N": n, "K": k, "outer_lines": outer + a.before_loop() + b.before_loop(),
          "loop_lines": k_split + a_lines + b_lines + dot_lines, "cdt": ctx.cdt,
          "pointers": " ".join(ctx.dtypes[t] for t, _ in params),
          "epilogue_lines": coords + epilogue}
    source = environment.get_template("conv.py.j2").render(k=kv)
    return Rendered(source, params, m, n, k, "conv", g, dot_kind(ctx, ta, tb))
