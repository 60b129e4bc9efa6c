"""Convolution kernels: the tile program of a convolution group and its two lowerings.

A convolution (``Convolution``, ``Deconvolution`` and the gradient ops of
``compiler/ops/conv.py``) anchors a kernel group of its own, as a dot anchors a matmul's:
one convolution per group, its operands read from memory, and an epilogue of pointwise
and broadcast ops on its output (bias, activation, inference BatchNorm's scale and
shift, a residual add), rendered on the accumulator tile by ``codegen.py``'s own
instruction and store writers. Whatever the operator, the kernel is one of three
implicit GEMMs over a convolution's x ``(N, C, *X)``,
w ``(O, C/G, *K)`` and y ``(N, O, *Y)``, one GEMM per group ``g`` (grid axis 0 holds
tiles x groups, as a batched matmul's batch):

============  ===================  ================  ====================
mode          rows (M)             columns (N)       reduction (K)
============  ===================  ================  ====================
conv_fwd      n, y positions       o in the group    c in the group, k
conv_dgrad    n, x positions       c in the group    o in the group, k
conv_wgrad    o in the group       c in the group, k n, y positions
============  ===================  ================  ====================

No im2col buffer exists: each ``[BM, BK]`` / ``[BK, BN]`` operand tile is loaded
straight from x, w or y with addresses computed from the flat row / column / K
indices (``x = y * stride + k * dilate - pad``; for the data gradient
``y = (x + pad - k * dilate) / stride`` where that divides), masked where the
position falls in the padding. ``templates/conv.py.j2`` holds the kernel; this file
computes its index expressions. The ``cpu`` target calls ATen's convolution
(``aten.convolution.out``, transposed for the data gradient,
``aten.convolution_backward`` for the weight gradient) on strided views of the planned
buffers, then the epilogue as ``cpu_lower.py`` lowers any tile program.

On a GPU the tiles are a matmul's (``compiler/tiles.py``); a weight gradient's K
(batch x output positions) is one long loop per output tile, without split-K.
"""
from __future__ import annotations

from dataclasses import replace

from .codegen import Rendered, _Ctx, _dot_kind, _dot_operands, _env, _instr_lines, _store_lines
from .codegen_cpu import _lines, plan
from .cpu_lower import _Lowering
from .cpu_values import Val
from .dtypes import TORCH
from .kernel_ir import Instr, NotFusable, TileProgram, _base_node, _Builder, _special
from .ops.conv import CONV_KINDS, conv_problem
from .ops.registry import prod

__all__ = ["CONV_KINDS", "conv_program", "index_sum", "render_conv", "render_conv_cpu",
           "split_index"]


class _ConvBuilder(_Builder):
    """kernel_ir's builder with a convolution as the group's anchor, as a dot anchors a
    matmul: the domain is the convolution's output, rows the positions of the GEMM's
    rows, and the other nodes (pointwise, broadcasts: an activation, inference
    BatchNorm's scale and shift) its epilogue on the accumulator tile."""

    def choose_domain(self):
        g = self.graph
        convs = [n for n in self.order if _special(g, n) in CONV_KINDS]
        if len(convs) != 1:
            raise NotFusable("one convolution per kernel")
        n = self.conv = convs[0]
        d = g.node(n)
        ins = g.inputs(n)
        self.problem = conv_problem(d["op"], d["attrs"], [g.shape(e) for e in ins],
                                    d["shapes"][0])
        if len(self.nodes) > 1 and self.problem["mode"] == "conv_wgrad":
            raise NotFusable("a weight gradient takes no epilogue")
        if any(_base_node(g, e[0]) in self.nodes for e in ins):
            raise NotFusable("a convolution reads its operands from memory")
        self.domain, self.grid_pos = tuple(d["shapes"][0]), ()
        nd = len(self.domain)
        if self.problem["mode"] == "conv_wgrad":     # rows o, columns (c, k)
            self.row_pos, self.col_pos = (0,), tuple(range(1, nd))
        else:                                        # rows (n, spatial), columns channels
            self.row_pos, self.col_pos = (0,) + tuple(range(2, nd)), (1,)
        return n

    def propagate(self, n, out_dm):
        if n != self.conv:
            return super().propagate(n, out_dm)
        if list(out_dm) != list(range(len(self.domain))):
            raise NotFusable("a convolution must span its whole output")

    def emit(self):
        n = self.conv
        args = tuple(self.tensor(e, "in") for e in self.graph.inputs(n))
        name = self.fresh()
        varies = frozenset(p for p in range(len(self.domain)) if self.domain[p] > 1)
        self.instrs.append(Instr("conv", name, args, varies=varies, extra=self.problem))
        self.value[(n, 0)] = name
        self.varies[name] = varies
        self.order = [m for m in self.order if m != n]
        super().emit()


def conv_program(graph, nodes, outside_uses) -> TileProgram:
    """The tile program of a group holding one convolution node: a ``conv`` instruction
    (its ``args`` the tensors of the node's inputs, ``extra`` the
    :func:`~compiler.ops.conv.conv_problem`), then the epilogue's instructions.

    Raises
    ------
    NotFusable
        For two convolutions, a weight gradient with an epilogue, an operand computed
        in the group, or an epilogue that is not pointwise over the output.
    """
    b = _ConvBuilder(graph, nodes, list(outside_uses))
    anchor = b.choose_domain()
    b.kind = "conv"          # reductions and matmuls refuse to join (kernel_ir.propagate)
    b.assign_dimmaps("matmul", anchor, None)
    b.emit()
    if not b.stores:
        raise NotFusable("group stores nothing")
    return TileProgram("conv", b.domain, (), b.row_pos, b.col_pos, b.instrs, b.stores,
                       b.tensors, b.roles, False, frozenset(nodes))


def gemm_dims(p: dict) -> tuple:
    """``(M, N, K, groups)`` of the implicit GEMM of problem ``p``."""
    x, w, y, g = p["x"], p["w"], p["y"], p["groups"]
    cg, og, kk = x[1] // g, w[0] // g, prod(w[2:])
    if p["mode"] == "conv_fwd":
        return x[0] * prod(y[2:]), og, cg * kk, g
    if p["mode"] == "conv_dgrad":
        return x[0] * prod(x[2:]), cg, og * kk, g
    return og, cg * kk, x[0] * prod(y[2:]), g


def summary(p: dict) -> str:
    """The kernel's comment line, the same on every target: an implicit GEMM is a
    matmul over (M, N), which is also how ``compiler/cubin.py`` reads its tiles."""
    m, n, k, g = gemm_dims(p)
    what = {"conv_fwd": "forward", "conv_dgrad": "data gradient / transposed",
            "conv_wgrad": "weight gradient"}[p["mode"]]
    return (f"matmul over domain ({m}, {n}) K {k} x {g} groups: implicit-GEMM "
            f"{len(p['kernel'])}-D convolution {what}, x {p['x']} w {p['w']} y {p['y']} "
            f"stride {p['stride']} pad {p['pad']} dilate {p['dilate']}")


# ------------------------------------------------------------------------------ Triton

def split_index(var, names, sizes):
    """Lines giving ``names`` (row-major coordinates of ``sizes``) from flat ``var``;
    a size-1 dim's coordinate is the literal ``0``. Returns ``(lines, coords)``."""
    lines, coords = [], []
    inner = prod(sizes)
    for name, size in zip(names, sizes):
        inner //= size
        if size == 1:
            coords.append("0")
            continue
        expr = f"{var} // {inner}" if inner > 1 else var
        if inner * size < prod(sizes):
            expr = f"({expr}) % {size}"
        lines.append(f"{name} = {expr}")
        coords.append(name)
    return lines, coords


def index_sum(terms):
    """``c0 * s0 + c1 * s1 ...`` over ``(coordinate, stride)`` terms (zero terms dropped)."""
    out = [c if s == 1 else f"{c} * {s}" for c, s in terms if c != "0" and s != 0]
    return " + ".join(out) or "0"


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
    The operand tiles go to ``tl.dot`` as a matmul's do (``codegen._dot_operands``:
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
    ctx = _Ctx(replace(prog, kind="matmul"), strides, shapes, fp32_dot)
    ta, tb = (tensor[r] for r in _OPERANDS[p["mode"]])
    dot_lines = _dot_operands(ctx, ta, tb, f"tl.load({a_ptr}, mask={a_mask}, other=0.0)",
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
        epilogue.extend(_instr_lines(ctx, ins))
    for store in prog.stores:
        for dst, dst_strides in enumerate(strides[store.tensor]):
            epilogue.extend(_store_lines(ctx, store, dst, dst_strides, shapes[store.tensor]))
    params = [(t, dst) for t in range(len(prog.tensors)) for dst in range(len(strides[t]))]
    kv = {"params": ", ".join(f"p{t}_{dst}" for t, dst in params), "summary": summary(p),
          "M": m, "N": n, "K": k, "outer_lines": outer + a.before_loop() + b.before_loop(),
          "loop_lines": k_split + a_lines + b_lines + dot_lines, "cdt": ctx.cdt,
          "pointers": " ".join(ctx.dtypes[t] for t, _ in params),
          "epilogue_lines": coords + epilogue}
    source = _env.get_template("conv.py.j2").render(k=kv)
    return Rendered(source, params, m, n, k, "conv", g, _dot_kind(ctx, ta, tb))


# ------------------------------------------------------------------------------ cpu

class _ConvLowering(_Lowering):
    """cpu_lower's lowering with the ``conv`` instruction as one ATen call writing a
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
        pre = []
        if channels_last(p):
            # copies of the operands in channels-last order, made in bind, filled per run
            cl = "memory_format=torch.channels_last"
            for role in ("x", "y") if p["mode"] == "conv_wgrad" else ("x", "w"):
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
    measured), and the data gradient gains too unevenly (0.85-1.5x) to choose it.
    The results are the same convolution summed in another order (rounding).
    """
    if p["mode"] not in ("conv_fwd", "conv_wgrad") or len(p["kernel"]) != 2 or \
            p["groups"] != 1:
        return False
    ci, co = p["x"][1], p["y"][1]
    return min(ci, co) >= 16 and _padded16(ci) * _padded16(co) >= 1.5 * ci * co


def render_conv_cpu(prog: TileProgram, strides: list, shapes: list, slots: list):
    """``(bind lines, run lines)`` of a convolution group for the cpu target: one ATen
    convolution call, writing its destination where ``codegen_cpu.plan`` allows, then
    the epilogue's calls."""
    k = _ConvLowering(prog, strides, shapes, slots)
    stores = k.build()
    return k.bind_lines, _lines(k.ops, plan(k.ops, stores), TORCH[prog.compute_dtype])
