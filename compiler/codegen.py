"""Render tile programs into Triton source through the jinja2 templates.

Nothing from the user reaches the source: identifiers are generated
(``p0_0``, ``v3``, ``r1``), numbers are formatted from ints and floats, and
operator expressions come from the registry. Tile sizes are constexpr
parameters, so one source serves the interpreter's whole-tensor tiles and a
GPU's small ones.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import jinja2

from .kernel_ir import TileProgram
from .ops.registry import prod

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "templates")
if not os.path.isdir(TEMPLATE_DIR):  # installed: templates ship as package data of compiler
    TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          autoescape=False)

_FAMILY_TEMPLATE = {"pointwise": "tile.py.j2", "reduce": "tile.py.j2",
                    "matmul": "matmul.py.j2", "scatter": "scatter.py.j2"}


def template_hash() -> str:
    """Hash of every template file: part of every cache key."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(TEMPLATE_DIR)):
        with open(os.path.join(TEMPLATE_DIR, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


@dataclass
class Rendered:
    source: str
    params: list          # (tensor index, destination index) per pointer parameter
    M: int
    N: int
    K: int                # largest reduction length of a dot (0 if none)
    kind: str


class _Ctx:
    def __init__(self, prog: TileProgram, strides, shapes):
        self.p = prog
        self.strides = strides      # per tensor: list of stride tuples (one per destination)
        self.shapes = shapes
        self.lines = []

    def coord(self, pos):
        if self.p.domain[pos] == 1:
            return None
        if pos in self.p.grid_pos:
            return f"g{pos}"
        return f"r{pos}" if pos in self.p.row_pos else f"c{pos}"

    def coord_lines(self):
        lines = []
        for axis, var, positions in (("row", "rm", self.p.row_pos), ("col", "rn", self.p.col_pos)):
            inner = 1
            for pos in reversed(positions):
                size = self.p.domain[pos]
                if size > 1:
                    expr = f"{var} // {inner}" if inner > 1 else var
                    lines.append(f"{self.coord(pos)} = ({expr}) % {size}"
                                 if inner * size < self.total(positions) else
                                 f"{self.coord(pos)} = {expr}")
                inner *= size
        for pos in self.p.grid_pos:
            lines.append(f"g{pos} = tl.program_id(1)")
        return lines

    def total(self, positions):
        return prod(self.p.domain[p] for p in positions)

    def offset(self, dims, strides, base="0", shift=None):
        terms = [base] if base != "0" else []
        for j, pos in enumerate(dims):
            if pos is None:
                continue
            c = self.coord(pos)
            if c is None or strides[j] == 0:
                continue
            if shift is not None and pos == shift[0] and shift[1]:
                c = f"({c} - {shift[1]})"
            terms.append(f"{c} * {strides[j]}" if strides[j] != 1 else c)
        return " + ".join(terms) if terms else "0"

    def mask(self, positions):
        rows = any(p in self.p.row_pos and self.p.domain[p] > 1 for p in positions)
        cols = any(p in self.p.col_pos and self.p.domain[p] > 1 for p in positions)
        if rows and cols:
            return "mfull"
        return "mrow" if rows else "mcol" if cols else None


def render(prog: TileProgram, strides: list, shapes: list) -> Rendered:
    """Triton source for ``prog`` given each tensor's element strides.

    ``strides[t]`` is a list with one stride tuple per destination of tensor
    ``t`` (inputs have one; an output stored to several arrays has several).
    """
    ctx = _Ctx(prog, strides, shapes)
    params = [(t, d) for t in range(len(prog.tensors)) for d in range(len(strides[t]))]
    body = []
    max_k = 0
    for ins in prog.instrs:
        if ins.kind == "load":
            t = ins.args[0]
            off = ctx.offset(ins.extra["dims"], strides[t][0], shift=ins.extra.get("shift"))
            m = ctx.mask(ins.varies)
            if "shift" in ins.extra:  # a Concat part: only its own range of the axis
                pos, start, size = ins.extra["shift"]
                c = ctx.coord(pos) or "0"
                m = f"({m}) & ({c} >= {start}) & ({c} < {start + size})" if m else \
                    f"({c} >= {start}) & ({c} < {start + size})"
            body.append(f"{ins.out} = tl.load(p{t}_0 + {off}"
                        + (f", mask={m}, other=0.0)" if m and off != "0" else ")"))
        elif ins.kind == "expr":
            body.append(f"{ins.out} = {_coords_in(ctx, ins.text)}")
        elif ins.kind == "const":
            body.append(f"{ins.out} = {ins.text}")
        elif ins.kind == "reduce":
            fill = {"sum": "0.0", "max": "float('-inf')", "min": "float('inf')"}[ins.text]
            fn = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}[ins.text]
            scale = ins.extra.get("scale", 1.0)
            tail = f" * {float(scale)!r}" if scale != 1.0 else ""
            body.append(f"{ins.out} = {fn}(tl.where(mfull, {ins.args[0]}, {fill}), axis=1)[:, None]{tail}")
        elif ins.kind == "gather":
            idx, w = ins.args
            rows, cols = shapes[w]
            s0, s1 = strides[w][0]
            last = ctx.coord(ins.extra["last"]) or "0"
            m = ctx.mask(ins.varies)
            body.append(f"{ins.out}_i = tl.minimum(tl.maximum({idx}.to(tl.int32), 0), {rows - 1})")
            body.append(f"{ins.out} = tl.load(p{w}_0 + {ins.out}_i * {s0} + {last} * {s1}"
                        + (f", mask={m}, other=0.0)" if m else ")"))
        elif ins.kind == "dot":
            body.extend(_dot_lines(ctx, ins))
            max_k = max(max_k, ins.extra["K"])
    for st in prog.stores:
        for d, st_strides in enumerate(strides[st.tensor]):
            body.extend(_store_lines(ctx, st, d, st_strides, shapes[st.tensor]))
    M = ctx.total(prog.row_pos)
    N = ctx.total(prog.col_pos)
    summary = _summary(prog)
    k = {"params": ", ".join(f"p{t}_{d}" for t, d in params), "M": M, "N": N,
         "coord_lines": ctx.coord_lines(), "body_lines": body, "summary": summary}
    source = _env.get_template(_FAMILY_TEMPLATE[prog.kind]).render(k=k)
    return Rendered(source, params, M, N, max_k, prog.kind)


def _coords_in(ctx, text):
    """Replace ``{coord:P}`` placeholders (index-dependent ops) by coordinate names."""
    import re
    return re.sub(r"\{coord:(\d+)\}", lambda m: ctx.coord(int(m.group(1))) or "0", text)


def _summary(prog):
    return f"{prog.kind} over domain {tuple(int(x) for x in prog.domain)}"


def _dot_lines(ctx: _Ctx, ins):
    p = ctx.p
    ta_i, tb_i = ins.args
    ta, tb, K = ins.extra["ta"], ins.extra["tb"], ins.extra["K"]
    sa, sb = ctx.strides[ta_i][0], ctx.strides[tb_i][0]
    batched = bool(p.grid_pos)
    # A: [batch] x M dims x K (or K x M when transposed, 2-D/3-D only)
    a_nd = len(ins.extra["a_shape"])
    lead = 1 if batched else 0
    if batched:
        if ta:
            sak = sa[lead]
            m_dims = [(p.row_pos[0], sa[lead + 1])]
        else:
            sak = sa[-1]
            m_dims = list(zip(p.row_pos, sa[lead:a_nd - 1]))
        sbk, sbn = (sb[-1], sb[-2]) if tb else (sb[-2], sb[-1])
        n_dims = [(p.col_pos[0], sbn)]
    else:
        # dot (mxnet's N-D rule): the lhs free axes are the row positions and
        # the rhs free axes the column positions; a 1-D operand has none.
        b_nd = len(ins.extra["b_shape"])
        sak, a_free = (sa[0], sa[1:]) if a_nd == 1 or ta else (sa[-1], sa[:-1])
        sbk, b_free = (sb[0], sb[1:]) if b_nd == 1 or not tb else (sb[-1], sb[:-1])
        m_dims = list(zip(p.row_pos, a_free))
        n_dims = list(zip(p.col_pos, b_free))
    a_terms = [f"{ctx.coord(pos)} * {s}" for pos, s in m_dims if ctx.coord(pos) and s]
    b_terms = [f"{ctx.coord(pos)} * {s}" for pos, s in n_dims if ctx.coord(pos) and s]
    if batched and ctx.coord(0):
        if sa[0]:
            a_terms.append(f"g0 * {sa[0]}")
        if sb[0]:
            b_terms.append(f"g0 * {sb[0]}")
    a_off = " + ".join(a_terms) or "0"
    b_off = " + ".join(b_terms) or "0"
    v = ins.out
    return [
        f"{v} = tl.zeros((BM, BN), dtype=tl.float32)",
        f"for k0 in range(0, {K}, BK):",
        "    kk = k0 + tl.arange(0, BK)",
        f"    a = tl.load(p{ta_i}_0 + ({a_off}) + kk[None, :] * {sak}, mask=mrow & (kk[None, :] < {K}), other=0.0)",
        f"    b = tl.load(p{tb_i}_0 + kk[:, None] * {sbk} + ({b_off}), mask=(kk[:, None] < {K}) & mcol, other=0.0)",
        f"    {v} += tl.dot(a, b, input_precision=\"ieee\")",
    ]


def _store_lines(ctx: _Ctx, st, d, strides, shape):
    p = ctx.p
    ptr = f"p{st.tensor}_{d}"
    if st.atomic:
        (_, idx), (last, s1) = st.terms
        rows = shape[0]
        c = ctx.coord(last) or "0"
        return [f"{st.value}_i = tl.minimum(tl.maximum({idx}.to(tl.int32), 0), {rows - 1})",
                f"tl.atomic_add({ptr} + rm * 0 + rn * 0 + {st.value}_i * {strides[0]} + "
                f"{c} * {strides[1]}, {st.value} + tl.zeros([BM, BN], tl.float32), mask=mfull)"]
    dims = [None] * len(shape)
    positions = []
    for pos, j in st.terms:
        dims[j] = pos
        positions.append(pos)
    off = ctx.offset(dims, strides)
    rows = any(q in p.row_pos and p.domain[q] > 1 for q in positions)
    cols = any(q in p.col_pos and p.domain[q] > 1 for q in positions)
    if cols or p.kind == "matmul":   # a dot's value is a [BM, BN] tile even when N == 1
        shape_t, m = "[BM, BN]", "mfull"
        base = "rm * 0 + rn * 0"
    else:
        shape_t, m = "[BM, 1]", "mrow"
        base = "rm * 0"
    return [f"tl.store({ptr} + {base} + {off}, {st.value} + tl.zeros({shape_t}, tl.float32), mask={m})"]


def render_fill(numel: int, value: float = 0.0) -> Rendered:
    source = _env.get_template("fill.py.j2").render(k={"M": int(numel), "value": repr(float(value))})
    return Rendered(source, [(0, 0)], int(numel), 1, 0, "fill")


def tile_config(r: Rendered, target: str, reduce_cols: bool = False) -> dict:
    """Tile sizes, warps and grid for one launch on ``target``."""
    def np2(x):
        return 1 << max(0, (int(x) - 1).bit_length())
    if target == "cpu":   # torch calls over whole arrays: no tiles, one call per launch
        return {"grid": [1, 1]}
    M, N, K = max(r.M, 1), max(r.N, 1), max(r.K, 1)
    cpu = target == "interpret"
    if r.kind == "fill":
        bm = min(np2(M), 1 << 20) if cpu else 1024
        return {"BM": bm, "BN": 1, "BK": 1, "num_warps": 4, "grid": [-(-M // bm), 1]}
    if r.kind == "matmul":
        if cpu:
            bm, bn, bk = max(16, min(np2(M), 256)), max(16, min(np2(N), 1024)), max(16, min(np2(K), 1024))
        else:  # sized to the problem: 64x64x32 on a 3x5 matmul spilled 3.8 KB a thread
            bm, bn, bk = max(16, min(np2(M), 64)), max(16, min(np2(N), 64)), max(16, min(np2(K), 32))
        if reduce_cols:
            bn = max(16, np2(N))
            if not cpu:
                bm = 32 if bn <= 256 else 16
        grid = [-(-M // bm) * -(-N // bn), 1]
        return {"BM": bm, "BN": bn, "BK": bk, "num_warps": 4, "grid": grid}
    bn = np2(N)
    if cpu:
        bm = max(1, min(np2(M), (1 << 22) // bn))
    else:  # 1024 elements a program: 4096 with 4 warps spilled (ptxas, cuda:90)
        bm = max(1, min(np2(M), max(1, 1024 // bn)))
    return {"BM": bm, "BN": bn, "BK": 1, "num_warps": 4 if bn * bm <= 4096 else 8,
            "grid": [-(-M // bm), 1]}
