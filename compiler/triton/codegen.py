"""Render pointwise, reduce and matmul tile programs into Triton source.

``render.py`` picks the writer of each kernel family: this file's :func:`render_tile`,
``conv.py`` or ``pool.py``; the last two reuse :class:`KernelContext` and the
instruction and store writers here for their epilogues.

Nothing from the user reaches the source: identifiers are generated
(``p0_0``, ``v3``, ``r1``), numbers are formatted from ints and floats, and
operator expressions come from the registry. Tile sizes are constexpr
parameters, so one source serves the interpreter's whole-tensor tiles and a
GPU's small ones.
"""
from __future__ import annotations

from .expr import triton_source
from ..ir.dtypes import LOW_PRECISION, TL
from ..ir.expr import sum_terms, value_name, value_reads
from ..ir.rendering import Rendered, environment
from ..ir.tile_program import TileProgram
from ..ops.registry import lit, prod

_FAMILY_TEMPLATE = {"pointwise": "tile.py.j2", "reduce": "reduce.py.j2",
                    "matmul": "matmul.py.j2", "scatter": "scatter.py.j2"}


class KernelContext:
    """What writing one Triton kernel of ``prog`` knows: strides, shapes, dtypes, lines."""

    def __init__(self, prog: TileProgram, strides, shapes, fp32_dot="ieee"):
        self.p = prog
        self.strides = strides      # per tensor: list of stride tuples (one per destination)
        self.shapes = shapes
        self.lines = []
        self.dtypes = prog.dtypes or ["float32"] * len(prog.tensors)
        self.cdt = TL[prog.compute_dtype]     # what values are computed in
        self.fp32_dot = fp32_dot

    def widen(self, t, text):
        """A loaded value of tensor ``t`` in the compute dtype."""
        return text if TL[self.dtypes[t]] == self.cdt else f"{text}.to({self.cdt})"

    def narrow(self, t, text):
        """A compute-dtype value as tensor ``t`` stores it."""
        return text if TL[self.dtypes[t]] == self.cdt else f"({text}).to({TL[self.dtypes[t]]})"

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
                if size != 1:       # 0: a zero-size domain, whose grid runs no program
                    expr = f"{var} // {inner}" if inner > 1 else var
                    lines.append(f"{self.coord(pos)} = ({expr}) % {size}"
                                 if inner * size < self.total(positions) else
                                 f"{self.coord(pos)} = {expr}")
                inner *= size
        inner = 1     # the batch axes, folded into grid axis 0 (the last varies fastest)
        for pos in reversed(self.p.grid_pos):
            size = self.p.domain[pos]
            expr = f"gb // {inner}" if inner > 1 else "gb"
            if size != 1:
                lines.append(f"g{pos} = ({expr}) % {size}" if pos != self.p.grid_pos[0] else
                             f"g{pos} = {expr}")
            inner *= size
        return lines

    def col_coord_lines(self):
        """The column coordinates alone (recomputed in each column loop)."""
        return [ln for ln in self.coord_lines() if ln.startswith("c")]

    def row_coord_lines(self):
        return [ln for ln in self.coord_lines() if not ln.startswith("c")]

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
        rows = any(p in self.p.row_pos and self.p.domain[p] != 1 for p in positions)
        cols = any(p in self.p.col_pos and self.p.domain[p] != 1 for p in positions)
        if rows and cols:
            return "mfull"
        return "mrow" if rows else "mcol" if cols else None


def render_tile(prog: TileProgram, strides: list, shapes: list, fp32_dot: str = "ieee") -> Rendered:
    """Triton source of a pointwise, reduce or matmul ``prog`` given its element strides.

    ``strides[t]`` is a list with one stride tuple per destination of tensor
    ``t`` (inputs have one; an output stored to several arrays has several).
    ``fp32_dot`` is the ``input_precision`` of float32 matmuls (``ieee``/``tf32``,
    ``compiler/ir/dtypes.py: fp32_matmul_precision``).
    """
    ctx = KernelContext(prog, strides, shapes, fp32_dot)
    params = [(t, d) for t in range(len(prog.tensors)) for d in range(len(strides[t]))]
    max_k = max([ins.extra["K"] for ins in prog.instrs if ins.kind == "dot"], default=0)
    M = ctx.total(prog.row_pos)
    N = ctx.total(prog.col_pos)
    if prog.kind == "reduce":
        head, body = ctx.row_coord_lines(), _looped_reduce_lines(ctx, N)
    else:
        accumulate = _dot_sums(prog) if prog.kind == "matmul" else {}
        body = []
        for ins in prog.instrs:
            body.extend(instr_lines(ctx, ins, accumulate))
        for st in prog.stores:
            for d, st_strides in enumerate(strides[st.tensor]):
                body.extend(store_lines(ctx, st, d, st_strides, shapes[st.tensor]))
        head = ctx.coord_lines()
    batch = prod(int(prog.domain[pos]) for pos in prog.grid_pos)
    k = {"params": ", ".join(f"p{t}_{d}" for t, d in params), "M": M, "N": N,
         "batched": bool(prog.grid_pos), "coord_lines": head, "body_lines": body,
         "summary": _summary(prog), "pointers": " ".join(ctx.dtypes[t] for t, _ in params)}
    source = environment.get_template(_FAMILY_TEMPLATE[prog.kind]).render(k=k)
    dots = [ins for ins in prog.instrs if ins.kind == "dot"]
    dot = dot_kind(ctx, *dots[0].args) if dots else "float32"
    return Rendered(source, params, M, N, max_k, prog.kind, batch, dot)


def instr_lines(ctx: KernelContext, ins, accumulate=None) -> list:
    """The Triton lines computing one instruction (a reduction over a whole-row tile)."""
    strides, shapes = ctx.strides, ctx.shapes
    if ins.kind == "load":
        t = ins.args[0]
        off = ctx.offset(ins.extra["dims"], strides[t][0], shift=ins.extra.get("shift"))
        m = ctx.mask(ins.varies)
        if "shift" in ins.extra:  # a Concat part: only its own range of the axis
            pos, start, size = ins.extra["shift"]
            c = ctx.coord(pos) or "0"
            m = f"({m}) & ({c} >= {start}) & ({c} < {start + size})" if m else \
                f"({c} >= {start}) & ({c} < {start + size})"
        load = f"tl.load(p{t}_0 + {off}" + (f", mask={m}, other=0.0)" if m and off != "0" else ")")
        return [f"{ins.out} = " + (load if ins.extra.get("raw") else ctx.widen(t, load))]
    if ins.kind == "expr":
        if accumulate and ins.out in accumulate.get("silent", ()):
            return []          # a sum of dots: they already added into one accumulator
        return [f"{ins.out} = {triton_source(ins.expr, ctx.coord, ctx.cdt, ins.origin)}"]
    if ins.kind == "const":
        return [f"{ins.out} = {triton_source(ins.expr, ctx.coord, ctx.cdt, ins.origin)}"]
    if ins.kind == "reduce":
        scale = ins.extra.get("scale", 1.0)
        tail = f" * {lit(scale)}" if scale != 1.0 else ""
        return [f"{ins.out} = {_reduce_call(ins.extra['combine'], ins.args[0])}{tail}"]
    if ins.kind == "gather":
        idx, w = ins.args
        rows, cols = shapes[w]
        s0, s1 = strides[w][0]
        last = ctx.coord(ins.extra["last"]) or "0"
        m = ctx.mask(ins.varies)
        return [f"{ins.out}_i = tl.minimum(tl.maximum({idx}.to(tl.int32), 0), {rows - 1})",
                f"{ins.out} = " + ctx.widen(w, f"tl.load(p{w}_0 + {ins.out}_i * {s0} + {last} * {s1}"
                + (f", mask={m}, other=0.0)" if m else ")"))]
    if ins.kind == "dot":
        acc = (accumulate or {}).get("into", {}).get(ins.out)
        return _dot_lines(ctx, ins, acc, fresh=acc is None or
                          accumulate["first"].get(acc) == ins.out)
    raise ValueError(f"unknown instruction kind {ins.kind!r}")


_REDUCE_FILL = {"sum": "0.0", "max": "float('-inf')", "min": "float('inf')", "prod": "1.0"}


def _reduce_call(combine: str, x: str) -> str:
    """The row reduction of the masked tile ``x`` (masked lanes hold the identity), as a
    ``[BM, 1]`` column: ``tl.sum``, or ``tl.reduce`` with the header's ``_prod_combine``
    (Triton has no product reduction) or NaN-propagating ``_max_combine`` /
    ``_min_combine`` (``tl.max`` drops a NaN; ATen and mxnet return it)."""
    masked = f"tl.where(mfull, {x}, {_REDUCE_FILL[combine]})"
    if combine == "sum":
        return f"tl.sum({masked}, axis=1)[:, None]"
    return f"tl.reduce({masked}, 1, _{combine}_combine)[:, None]"


def _dot_sums(prog) -> dict:
    """Sums of matmuls that add into one accumulator instead of one each.

    A dot used only by ``(a + b [+ ...])`` chains of such values (autodiff's
    sum of a weight's per-step gradients, dW = sum_t dG_t^T X_t) accumulates
    straight into the chain's final value. Returns ``into`` (dot -> the
    accumulator's name), ``first`` (accumulator -> its first dot, which
    zeroes it) and ``silent`` (the adds that no longer compute anything).
    """
    uses = {}
    for ins in prog.instrs:
        for name in set(value_reads(ins.expr)) | {a for a in ins.args if isinstance(a, str)}:
            uses[name] = uses.get(name, 0) + 1
    for st in prog.stores:
        uses[st.value] = uses.get(st.value, 0) + 1
    member = {ins.out: ins.out for ins in prog.instrs if ins.kind == "dot"}
    adds = []
    for ins in prog.instrs:
        if ins.kind != "expr" or ins.extra:
            continue
        terms = sum_terms(ins.expr)
        if terms is None:
            continue
        if len(set(terms)) == len(terms) and all(t in member and uses.get(t) == 1 for t in terms):
            for t in terms:
                member[t] = ins.out
            member[ins.out] = ins.out
            adds.append(ins.out)

    def root(name):
        while member[name] != name:
            name = member[name]
        return name
    into, first = {}, {}
    for ins in prog.instrs:
        if ins.kind == "dot" and member[ins.out] != ins.out:
            acc = root(ins.out)
            into[ins.out] = acc
            first.setdefault(acc, ins.out)
    return {"into": into, "first": first, "silent": set(adds)}


def _looped_reduce_lines(ctx: KernelContext, N: int) -> list:
    """A row reduction kernel's body: loops over the reduced columns in ``BN`` chunks.

    Values that vary along the columns are computed inside the loops, values
    per row (a reduction's result and what follows from it) between them.
    A value's *stage* counts the reductions it depends on through; loop ``j``
    accumulates the reductions of stage ``j + 1`` and stores the column values
    of stage ``j``, recomputing (reloading) whatever column values it needs.
    A ``sum(exp(x - max(x)))`` (softmax, log_softmax) accumulates online with
    its max (rescaled as the max grows), so a softmax reads its row twice, not
    three times. With ``BN >= N`` (the interpreter's tiles) each loop runs once.
    """
    p = ctx.p
    cols = set(q for q in p.col_pos if p.domain[q] != 1)
    by_name = {ins.out: ins for ins in p.instrs}
    varies_cols = {ins.out: bool(ins.varies & cols) for ins in p.instrs}
    online = _online_softmax_sums(p.instrs, by_name)
    stage = {}
    for ins in p.instrs:
        deps = [a for a in _operands(ins) if a in stage]
        s = max((stage[a] for a in deps), default=0)
        if ins.kind == "reduce":
            s = stage[online[ins.out][0]] if ins.out in online else s + 1
        stage[ins.out] = s
    per_row = [ins for ins in p.instrs if ins.kind != "reduce" and not varies_cols[ins.out]]
    reductions = [ins for ins in p.instrs if ins.kind == "reduce"]
    # a store goes in a column loop when its value varies along the columns or its
    # address does (a per-row value or a constant broadcast to a full-shape output)
    col_stores = [st for st in p.stores if varies_cols.get(st.value, False) or
                  any(pos in cols and stride for pos, stride in st.terms)]
    row_stores = [st for st in p.stores if st not in col_stores]
    last = max([stage[r.out] - 1 for r in reductions] +
               [stage[st.value] for st in col_stores], default=0)
    lines = []
    for j in range(last + 2):
        for r in reductions:
            if stage[r.out] == j and j > 0:
                scale = r.extra.get("scale", 1.0)
                if scale != 1.0:
                    lines.append(f"{r.out} = {r.out} * {lit(scale)}")
        for ins in per_row:
            if stage[ins.out] == j:
                lines.extend(instr_lines(ctx, ins))
        if j > last:
            break
        accs = [r for r in reductions if stage[r.out] == j + 1]
        stores = [st for st in col_stores if stage[st.value] == j]
        if not accs and not stores:
            continue
        for r in accs:
            lines.append(f"{r.out} = tl.full([BM, 1], {_REDUCE_FILL[r.extra['combine']]}, "
                         f"{ctx.cdt})")
        # the column values this loop needs, in program order
        need = set()
        for r in accs:
            need.update(_operands(r) if r.out not in online else [online[r.out][1]])
        need.update(st.value for st in stores)
        need = _closure(need, by_name, varies_cols)
        # ``n0``: coordinates are r<pos>, c<pos>, g<pos>, so no name clashes
        body = ["rn = n0 + tl.arange(0, BN)[None, :]", f"mcol = rn < {N}",
                "mfull = mrow & mcol"] + ctx.col_coord_lines()
        for ins in p.instrs:
            if ins.out in need and varies_cols[ins.out] and ins.kind != "reduce":
                body.extend(instr_lines(ctx, ins))
        partners = {online[r.out][0] for r in accs if r.out in online}
        for r in accs:
            if r.out in partners:
                continue                  # updated with its online sum below
            x = r.args[0]
            combine = r.extra["combine"]
            part = _reduce_call(combine, x)
            if r.out in online:
                m, x = online[r.out]
                body += [f"{m}_tile = tl.max(tl.where(mfull, {x}, float('-inf')), axis=1)[:, None]",
                         f"{m}_new = tl.maximum({m}, {m}_tile)",
                         # a row with nothing yet (padding rows): no -inf - -inf
                         f"{m}_ref = tl.where({m}_new == float('-inf'), 0.0, {m}_new)",
                         f"{r.out} = {r.out} * tl.exp({m} - {m}_ref) + tl.sum(tl.where("
                         f"mfull, tl.exp({x} - {m}_ref), 0.0), axis=1)[:, None]",
                         f"{m} = {m}_new"]
            elif combine == "sum":
                body.append(f"{r.out} += {part}")
            elif combine == "prod":
                body.append(f"{r.out} = {r.out} * {part}")
            else:
                op = "tl.maximum" if combine == "max" else "tl.minimum"
                body.append(f"{r.out} = {op}({r.out}, {part}, "
                            f"propagate_nan=tl.PropagateNan.ALL)")
        for st in stores:
            for d, st_strides in enumerate(ctx.strides[st.tensor]):
                body.extend(store_lines(ctx, st, d, st_strides, ctx.shapes[st.tensor]))
        lines.append(f"for n0 in range(0, {N}, BN):")
        lines.extend("    " + ln for ln in body)
    for st in row_stores:
        for d, st_strides in enumerate(ctx.strides[st.tensor]):
            lines.extend(store_lines(ctx, st, d, st_strides, ctx.shapes[st.tensor]))
    return lines


def _operands(ins) -> list:
    return list(dict.fromkeys([a for a in ins.args if isinstance(a, str)] +
                              value_reads(ins.expr)))


def _closure(names, by_name, varies_cols) -> set:
    """``names`` and the column values they are computed from."""
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in out or n not in by_name:
            continue
        out.add(n)
        ins = by_name[n]
        if ins.kind != "reduce":
            todo.extend(a for a in _operands(ins) if varies_cols.get(a))
    return out


def _online_softmax_sums(instrs, by_name) -> dict:
    """``{sum: (max, x)}`` for every ``sum(exp(x - m))`` where ``m = max(x)``."""
    out = {}
    for ins in instrs:
        if ins.kind != "reduce" or ins.extra["combine"] != "sum" or \
                ins.extra.get("scale", 1.0) != 1.0:
            continue
        e = by_name.get(ins.args[0])
        exp = e.expr if e is not None and e.kind == "expr" else None
        xs = by_name.get(value_name(exp.args[0])) if exp is not None and exp.op == "exp" \
            else None
        diff = xs.expr if xs is not None and xs.kind == "expr" else None
        if diff is None or diff.op != "sub" or None in map(value_name, diff.args):
            continue
        x, m = map(value_name, diff.args)
        mx = by_name.get(m)
        if mx is not None and mx.kind == "reduce" and mx.extra["combine"] == "max" and \
                mx.args[0] == x and mx.extra.get("scale", 1.0) == 1.0 and \
                m not in {v[0] for v in out.values()}:
            out[ins.out] = (m, x)
    return out


def _summary(prog):
    return f"{prog.kind} over domain {tuple(int(x) for x in prog.domain)}"


def _dot_lines(ctx: KernelContext, ins, acc=None, fresh=True):
    """One dot's K loop into its own accumulator, or adding into ``acc``
    (zeroed first when ``fresh``)."""
    p = ctx.p
    ta_i, tb_i = ins.args
    ta, tb, K = ins.extra["ta"], ins.extra["tb"], ins.extra["K"]
    sa, sb = ctx.strides[ta_i][0], ctx.strides[tb_i][0]
    batched = bool(p.grid_pos)
    # A: [batch axes] x M x K (or K x M when transposed)
    a_nd = len(ins.extra["a_shape"])
    lead = len(p.grid_pos)
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
    for pos in p.grid_pos:
        if ctx.coord(pos) and sa[pos]:
            a_terms.append(f"g{pos} * {sa[pos]}")
        if ctx.coord(pos) and sb[pos]:
            b_terms.append(f"g{pos} * {sb[pos]}")
    a_off = " + ".join(a_terms) or "0"
    b_off = " + ".join(b_terms) or "0"
    v = acc or ins.out
    a_load = f"tl.load(p{ta_i}_0 + ({a_off}) + kk[None, :] * {sak}, mask=mrow & (kk[None, :] < {K}), other=0.0)"
    b_load = f"tl.load(p{tb_i}_0 + kk[:, None] * {sbk} + ({b_off}), mask=(kk[:, None] < {K}) & mcol, other=0.0)"
    return ([f"{v} = tl.zeros((BM, BN), dtype={ctx.cdt})"] if fresh else []) + [
        f"for k0 in range(0, {K}, BK):",
        "    kk = k0 + tl.arange(0, BK)",
    ] + ["    " + line for line in dot_operands(ctx, ta_i, tb_i, a_load, b_load, v)]


def dot_kind(ctx: KernelContext, ta_i, tb_i) -> str:
    """What a dot's operands are: ``float16`` / ``bfloat16`` (both operands of that dtype:
    tensor cores, float32 accumulator), ``float64``, ``tf32`` or ``float32``."""
    da, db = ctx.dtypes[ta_i], ctx.dtypes[tb_i]
    if da == db and da in LOW_PRECISION and ctx.cdt == "tl.float32":
        return da
    if ctx.cdt == "tl.float64":
        return "float64"
    return "tf32" if ctx.fp32_dot == "tf32" else "float32"


def dot_operands(ctx: KernelContext, ta_i, tb_i, a_load, b_load, acc) -> list:
    """Load a dot's operand tiles and accumulate: two float16 (or bfloat16) operands
    go to the tensor cores as they are, with a float32 accumulator; float32 ones use
    ``ctx.fp32_dot``'s precision; others (mixed, float64) are widened first. The
    ``# dot operands:`` line tells ``cubin.source_shape`` (tile choice) what they are."""
    kind = dot_kind(ctx, ta_i, tb_i)
    head = [f"# dot operands: {kind}"]
    if kind in LOW_PRECISION:
        return head + [f"a = {a_load}", f"b = {b_load}", f"{acc} += tl.dot(a, b)"]
    a, b = ctx.widen(ta_i, a_load), ctx.widen(tb_i, b_load)
    if kind == "float64":
        return head + [f"a = {a}", f"b = {b}",
                       f"{acc} += tl.dot(a, b, input_precision=\"ieee\", out_dtype=tl.float64)"]
    return head + [f"a = {a}", f"b = {b}",
                   f"{acc} += tl.dot(a, b, input_precision=\"{ctx.fp32_dot}\")"]


def store_lines(ctx: KernelContext, st, d, strides, shape):
    """The Triton lines storing ``st`` into destination ``d`` (element ``strides``) of a
    tensor of ``shape``: a masked ``tl.store``, or ``tl.atomic_add`` for a scatter."""
    p = ctx.p
    ptr = f"p{st.tensor}_{d}"
    if st.atomic:
        (_, idx), (last, s1) = st.terms
        rows = shape[0]
        c = ctx.coord(last) or "0"
        value = ctx.narrow(st.tensor, f"{st.value} + tl.zeros([BM, BN], {ctx.cdt})")
        return [f"{st.value}_i = tl.minimum(tl.maximum({idx}.to(tl.int32), 0), {rows - 1})",
                f"tl.atomic_add({ptr} + rm * 0 + rn * 0 + {st.value}_i * {strides[0]} + "
                f"{c} * {strides[1]}, {value}, mask=mfull)"]
    dims = [None] * len(shape)
    positions = []
    for pos, j in st.terms:
        dims[j] = pos
        positions.append(pos)
    off = ctx.offset(dims, strides)
    rows = any(q in p.row_pos and p.domain[q] != 1 for q in positions)
    cols = any(q in p.col_pos and p.domain[q] != 1 for q in positions)
    if cols or p.kind == "matmul":   # a dot's value is a [BM, BN] tile even when N == 1
        shape_t, m = "[BM, BN]", "mfull"
        base = "rm * 0 + rn * 0"
    else:
        shape_t, m = "[BM, 1]", "mrow"
        base = "rm * 0"
    value = ctx.narrow(st.tensor, f"{st.value} + tl.zeros({shape_t}, {ctx.cdt})")
    return [f"tl.store({ptr} + {base} + {off}, {value}, mask={m})"]


def render_fill(numel: int, value: float = 0.0, dtype: str = "float32") -> Rendered:
    """A kernel writing ``value`` into ``numel`` elements of one ``dtype`` tensor."""
    source = environment.get_template("fill.py.j2").render(
        k={"M": int(numel), "value": repr(float(value)), "pointers": dtype})
    return Rendered(source, [(0, 0)], int(numel), 1, 0, "fill")


# a pointwise kernel of more source lines than this is "heavy" (a sampler's unrolled
# rejection tries: thousands of live temporaries): one element a thread on a GPU
HEAVY_LINES = 1000


def tile_config(r: Rendered, target: str, reduce_cols: bool = False) -> dict:
    """Tile sizes, warps, stages and grid for one launch on ``target`` (compiler/ir/tiles.py)."""
    from ..ir.tiles import tile_config as choose
    heavy = r.kind == "pointwise" and r.source.count("\n") > HEAVY_LINES
    return choose(r.kind, r.M, r.N, r.K, target, reduce_cols, r.batch, r.dot, heavy=heavy)
