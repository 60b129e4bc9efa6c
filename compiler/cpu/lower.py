"""The tile program of one fused group as a list of torch calls (the ``cpu`` target).

``lower(prog, strides, shapes, slots)`` walks a :class:`~compiler.ir.tile_program.TileProgram`
and returns the views ``bind()`` makes, the calls ``run()`` makes (:class:`Op`, each
producing a :class:`Val`) and the stores. Every value is a whole tensor shaped over the
group's domain (size 1 where it does not vary), so torch broadcasting does what the
Triton tile masks do:

* a load is a view ``as_strided`` over its flat buffer (no gather, no copy);
* the registry's pointwise math (``compiler/ir/expr.py``'s vocabulary) becomes torch
  calls through the cpu handler, ``expr.py``;
* reductions reduce the tile's column positions (``keepdim``);
* matmuls call ``mm`` / ``bmm`` / ``addmm``; a sum of matmuls accumulates with
  ``addmm_``, and a long sum of thin ones joins its operands along K;
* Embedding's gather is ``index_select``; SoftmaxOutput's gradient scatters its
  one-hot; Concat is ``torch.cat``; the random source's ``tl.rand`` is
  ``compiler/ir/philox.py``, the same bits.

Where each call writes (in place, straight into a store, or a new tensor) is
decided afterwards, by ``codegen.plan``.
"""
from __future__ import annotations

from .expr import CpuOps, ExprLowering, scalar
from .matmul import MatmulLowering, mergeable
from .values import Op, Val, broadcast
from ..ir.dtypes import TORCH
from ..ir.expr import evaluate, value_reads
from ..ir.tile_program import TileProgram
from ..ops.registry import lit, prod


class Lowering(MatmulLowering, ExprLowering):
    """Lowers one TileProgram to torch calls (:func:`lower` runs it; ``conv.py`` extends it)."""

    def __init__(self, prog: TileProgram, strides, shapes, slots):
        self.p = prog
        self.D = tuple(int(x) for x in prog.domain)
        self.strides, self.shapes, self.slots = strides, shapes, slots
        self.bind_lines = []       # views and constants, made once in bind()
        self.bound_once = set()    # lines of bind_lines added once (a set: a list test per op is quadratic)
        self.ops = []
        self.values = {}           # IR name -> Val
        self.count = 0
        self.uses = _ir_uses(prog)
        self.consts = {}
        self.views, self.names = {}, set()
        self.dtypes = prog.dtypes or ["float32"] * len(prog.tensors)
        self.cdt = TORCH[prog.compute_dtype]     # what ``f`` values are held in
        self.handler = CpuOps(self)

    def release(self):
        """Drop the references back (handler to lowering, value to the op making it, a
        matmul sum's chain) once the ops are final: each is a reference cycle, which
        only the cyclic collector would free, one walk over every object of the compile
        (``artifacts/compile.gc_paused``). Code generation reads none of them."""
        self.handler = None
        for v in list(self.values.values()) + [op.out for op in self.ops]:
            v.op = None
            v.chain = []

    def widen(self, t, text):
        """Operand text of tensor ``t`` in the compute dtype."""
        return text if TORCH[self.dtypes[t]] == self.cdt else f"{text}.to({self.cdt})"

    # -- names -----------------------------------------------------------------------
    def fresh(self, prefix="t"):
        self.count += 1
        return f"{prefix}{self.count}"

    def view(self, t, d, sizes, strides, prefix="a", store=False):
        """A view of argument ``(t, d)``, made once in bind: its name, or for reads
        through negative strides (``reverse``) an expression flipping a view
        (torch views cannot step backwards, so such a read copies)."""
        name, flips = self.view_flips(t, d, sizes, strides, prefix)
        if flips and not store:
            return f"{name}.flip({flips})"
        return (name, flips) if store else name

    def view_flips(self, t, d, sizes, strides, prefix):
        sizes = tuple(map(int, sizes))
        if not strides or min(strides) >= 0:          # most views: no step backwards
            flips, low, strides = (), 0, tuple(map(int, strides))
        else:
            flips = tuple(i for i, (n, st) in enumerate(zip(sizes, strides))
                          if st < 0 and n > 1)
            low = sum((n - 1) * int(st) for n, st in zip(sizes, strides) if st < 0)
            strides = tuple(abs(int(st)) for st in strides)
        spec = (t, d, sizes, strides, low)
        name = self.views.get(spec)
        if name is None:
            name = f"{prefix}{t}_{d}" + ("" if f"{prefix}{t}_{d}" not in self.names
                                         else f"_{len(self.views)}")
            self.names.add(name)
            self.views[spec] = name
            where = "" if not low else f", p{t}_{d}.storage_offset() - {-low}"
            self.bind_lines.append(f"{name} = p{t}_{d}.as_strided({sizes}, {strides}{where})")
        return name, flips

    def val_uses(self, v, unnamed=0):
        """Reads of ``v`` through every IR name it goes by; ``unnamed`` for a value inside
        one expression (it has no IR name, and its one reader is the enclosing operation)."""
        names = [n for n, w in self.values.items() if w is v]
        return sum(self.uses.get(n, 0) for n in names) if names else unnamed

    def const(self, value, dtype=None):
        """A 0-d tensor made once in bind (scalar operands torch takes only as tensors)."""
        dtype = dtype or self.cdt
        key = (lit(value), dtype)
        if key not in self.consts:
            name = f"k{len(self.consts)}"
            self.consts[key] = name
            self.bind_lines.append(f"{name} = torch.tensor({lit(value)}, dtype={dtype})")
        return Val(self.consts[key], (), kind="const")

    def coord(self, pos):
        name = f"c{pos}"
        if not any(line.startswith(f"{name} = ") for line in self.bind_lines):
            shape = [1] * len(self.D)
            shape[pos] = self.D[pos]
            self.bind_lines.append(f"{name} = torch.arange({self.D[pos]}).view({tuple(shape)})")
        shape = tuple(self.D[p] if p == pos else 1 for p in range(len(self.D)))
        return Val(name, shape, "i", "const")

    # -- loads ----------------------------------------------------------------------------
    def load(self, ins):
        t = ins.args[0]
        sizes, strides = [1] * len(self.D), [0] * len(self.D)
        for j, pos in enumerate(ins.extra["dims"]):
            if pos is None or self.shapes[t][j] == 1:
                continue
            sizes[pos] = self.shapes[t][j]    # the domain's size, or a Concat part's
            strides[pos] += self.strides[t][0][j]
        name = self.view(t, 0, sizes, strides)
        view = Val(name, tuple(sizes), kind="view", slot=self.slots[t][0])
        if ins.extra.get("raw") or TORCH[self.dtypes[t]] == self.cdt:
            return view
        # float16 / bfloat16 / integer storage: computed in the compute dtype, as the
        # Triton kernel widens what it loads
        return self.emit("cast", f"{{a0}}.to({self.cdt})", [view], tuple(sizes))

    def store_view(self, st, d):
        """``(name, flips, shape, matrix)`` of the view a store writes; ``matrix``: a
        2-D ``(rows, cols)`` view of it for a matmul on a domain of more dims, or None."""
        sizes, strides = [1] * len(self.D), [0] * len(self.D)
        for pos, j in st.terms:
            sizes[pos] = self.D[pos]
            strides[pos] += self.strides[st.tensor][d][j]
        name, flips = self.view(st.tensor, d, sizes, strides, prefix="o", store=True)
        matrix = None
        if self.p.kind == "matmul" and len(self.D) > 2 and not self.p.grid_pos and not flips:
            rows = mergeable([sizes[p] for p in self.p.row_pos],
                             [strides[p] for p in self.p.row_pos])
            cols = mergeable([sizes[p] for p in self.p.col_pos],
                             [strides[p] for p in self.p.col_pos])
            if rows and cols:
                matrix = self.view(st.tensor, d, (rows[0], cols[0]), (rows[1], cols[1]), "o")
        return name, flips, tuple(sizes), matrix

    # -- ops ---------------------------------------------------------------------------------
    def emit(self, kind, fmt, args, shape, dtype="f", **kw):
        out = Val(self.fresh(), tuple(shape), dtype)
        op = Op(kind, fmt, list(args), out, **kw)
        out.op = op
        self.ops.append(op)
        return out

    # -- instruction kinds ------------------------------------------------------------------------
    def reduce(self, ins):
        x = self.values[ins.args[0]]
        # a dim of size 1 needs no reduction; one of size 0 does (a zero-size domain
        # under NumPy shape semantics: sum 0)
        cols = [p for p in self.p.col_pos if self.D[p] != 1]
        dims = [p for p in cols if x.shape[p] != 1]
        factor = prod(self.D[p] for p in cols if x.shape[p] == 1)
        combine = ins.extra["combine"]
        scale = float(ins.extra.get("scale", 1.0)) * (factor if combine == "sum" else 1)
        if combine == "prod":
            return self._prod(x, dims, factor)
        if x.kind == "scalar":
            return scalar(x.scalar * scale)
        if dims:
            fn = {"sum": "torch.sum", "max": "torch.amax", "min": "torch.amin"}[combine]
            shape = tuple(1 if p in dims else s for p, s in enumerate(x.shape))
            x = self.emit("reduce", f"{fn}({{a0}}, {tuple(dims)}, keepdim=True, out={{out}})",
                          [x], shape, fn=fn[6:], dims=tuple(dims))
        if scale != 1.0:
            x = self.ew("mul", x, scalar(scale))
        return x

    def _prod(self, x, dims, factor):
        """The product over ``dims``; a value constant along reduced dims of total size
        ``factor`` is raised to that power by repeated squaring (exact, any sign).
        ``torch.prod`` takes one dim: one call per dim."""
        power, base, out = int(factor), x, None
        while power:
            if power & 1:
                out = base if out is None else self.ew("mul", out, base)
            power >>= 1
            if power:
                base = self.ew("mul", base, base)
        x = out
        if x.kind == "scalar":
            return x
        shape = x.shape
        for d in dims:
            shape = tuple(1 if p == d else s for p, s in enumerate(shape))
            x = self.emit("reduce", f"torch.prod({{a0}}, {d}, keepdim=True, out={{out}})",
                          [x], shape, fn="prod", dims=(d,))
        return x

    def gather(self, ins):
        idx, w = self.values[ins.args[0]], ins.args[1]
        rows, cols = self.shapes[w]
        s0, s1 = self.strides[w][0]
        wname = self.view(w, 0, (rows, cols), (s0, s1), prefix="w")
        if idx.kind == "scalar":    # indices folded to one number: a 0-d tensor, one row
            idx = self.const(idx.scalar)
        lead = idx.shape[:-1] if idx.shape else (1,) * (len(self.D) - 1)
        shape = lead + (self.D[ins.extra["last"]],)
        ix = f"{{a0}}.reshape(-1).to(torch.int64).clamp_(0, {rows - 1})"
        rows_of = self.widen(w, f"torch.index_select({wname}, 0, {ix})")
        return self.emit("gather", f"{rows_of}.view({shape})", [idx],
                         shape, reads=[Val("", (), kind="view", slot=self.slots[w][0])])

    def concat(self, ins):
        pos, names = ins.extra["concat"]
        parts = [self.values[n] for n in names]
        shape = list(broadcast([p.shape for p in parts], len(self.D)))
        shape[pos] = sum(p.shape[pos] for p in parts)
        pieces = []
        for k, part in enumerate(parts):
            want = tuple(part.shape[pos] if q == pos else shape[q] for q in range(len(shape)))
            pieces.append(f"{{a{k}}}" if part.shape == want else f"{{a{k}}}.expand({want})")
        return self.emit("cat", f"torch.cat(({', '.join(pieces)},), {pos}, out={{out}})", parts,
                         tuple(shape))

    def ce_grad(self, ins):
        """``(p - one_hot(label)) * grad_scale`` (ignored labels: 0) as a scatter of the one-hot."""
        ce = ins.extra["ce_grad"]
        p, label = (self.values[a] for a in ins.args)
        pos = ce["pos"]
        if pos is None or ce["smooth_alpha"] or p.shape != self.D or \
                any(label.shape[q] != self.D[q] for q in range(len(self.D)) if q != pos):
            return None
        gs, last = float(ce["grad_scale"]), ce["classes"] - 1
        lines = ["{out}.copy_({a0})" if gs == 1.0 else
                 f"torch.mul({{a0}}, {lit(gs)}, out={{out}})",
                 "lab = {a1}.to(torch.int64)",
                 f"idx = lab.clamp(0, {last})",
                 # labels outside [0, classes) hit no class, as in the where-form
                 "hit = torch.eq(idx, lab)"]
        if ce["use_ignore"]:
            lines += [f"keep = torch.ne(lab, {int(ce['ignore_label'])})",
                      "{out}.mul_(keep)", "hit.logical_and_(keep)"]
        lines.append(f"{{out}}.scatter_add_({pos}, idx, torch.mul(hit, {lit(-gs)}).to({self.cdt}))")
        return self.emit("custom", "\n".join(lines), [p, label], self.D)

    # -- the whole program --------------------------------------------------------------------
    def build(self):
        for ins in self.p.instrs:
            if ins.kind == "load":
                v = self.load(ins)
            elif ins.kind == "const":
                v = evaluate(ins.expr, self.handler, ins.origin)
            elif ins.kind == "reduce":
                v = self.reduce(ins)
            elif ins.kind == "dot":
                v = self.dot(ins)
            elif ins.kind == "gather":
                v = self.gather(ins)
            elif ins.kind == "expr" and "concat" in ins.extra:
                v = self.concat(ins)
            elif ins.kind == "expr":
                v = (self.ce_grad(ins) if "ce_grad" in ins.extra else None) or \
                    self.sum_of_dots(ins) or evaluate(ins.expr, self.handler, ins.origin)
            else:
                raise NotImplementedError(f"cpu target: instruction kind {ins.kind}")
            self.values[ins.out] = v
        self.stack_chains()
        stores = []
        for st in self.p.stores:
            v = self.values[st.value]
            v.stored = True
            for d in range(len(self.strides[st.tensor])):
                name, flips, shape, matrix = self.store_view(st, d)
                narrow = TORCH[self.dtypes[st.tensor]] != self.cdt   # copy_ converts at the end
                stores.append((v, name, self.slots[st.tensor][d], shape, flips, matrix, narrow))
        self.softmax_calls()
        return stores

    def softmax_calls(self):
        """``exp(x - max(x)) / sum(...)`` as ATen's softmax, and ``xs - log(sum(exp(xs)))``
        (``xs = x - max(x)``) as its log_softmax: one kernel and two passes over the data
        where the spelled-out form (``decompose``'s) makes five calls and five passes."""
        if not any(op.fn in ("div", "sub") for op in self.ops):
            return          # no pattern can end here: no table of readers to build
        readers = {}
        for op in self.ops:
            for a in op.args:
                readers.setdefault(id(a), []).append(op)

        def only(v, *ops):          # ``v`` is a temporary read by exactly ``ops``, not stored
            return v.kind == "temp" and not v.stored and \
                sorted(map(id, readers.get(id(v), []))) == sorted(map(id, ops))

        def made(v, fn):
            return v.op if v.op is not None and v.op.fn == fn and v.op in self.ops else None

        for last in list(self.ops):
            # the list search last: it is linear, and most calls are neither div nor sub
            if last.fn not in ("div", "sub") or len(last.args) != 2 or last not in self.ops:
                continue
            top, den = last.args
            s_op = made(den, "log" if last.fn == "sub" else "sum")
            if last.fn == "sub":          # log_softmax: xs - log(sum(exp(xs)))
                logged, s_op = s_op, (made(s_op.args[0], "sum") if s_op else None)
                e_op = made(s_op.args[0], "exp") if s_op else None
                xs = top
                if e_op is None or e_op.args[0] is not xs:
                    continue
                inner = [logged, s_op, e_op]
            else:                         # softmax: e / sum(e), e = exp(xs)
                e_op = made(top, "exp")
                if s_op is None or e_op is None or s_op.args[0] is not top:
                    continue
                xs = e_op.args[0]
                inner = [s_op, e_op]
            sub = made(xs, "sub")
            m_op = made(sub.args[1], "amax") if sub else None
            if m_op is None or m_op.args[0] is not sub.args[0] or m_op.dims != s_op.dims or \
                    len(m_op.dims) != 1 or sub.args[0].shape != last.out.shape:
                continue
            x, dim = sub.args[0], m_op.dims[0]
            if last.fn == "div":
                ok = only(top, s_op, last) and only(den, last) and only(xs, e_op)
            else:
                ok = only(xs, e_op, last) and only(e_op.out, s_op) and \
                    only(s_op.out, logged) and only(den, last)
            if not (ok and only(m_op.out, sub)):
                continue
            for op in inner + [sub, m_op]:
                self.ops.remove(op)
            fn = "softmax" if last.fn == "div" else "log_softmax"
            last.kind, last.fn, last.args, last.dims = "softmax", fn, [x], (dim,)
            last.fmt = f"torch.{fn}({{a0}}, {dim}, out={{out}})"

def _ir_uses(prog):
    """How many times each IR value is read (by instructions and stores)."""
    uses = {}
    for ins in prog.instrs:
        names = [a for a in ins.args if isinstance(a, str)]
        if ins.kind == "expr":
            names = value_reads(ins.expr)      # each read: ``v1 * v1`` reads v1 twice
        for n in names:
            uses[n] = uses.get(n, 0) + 1
    for st in prog.stores:
        uses[st.value] = uses.get(st.value, 0) + 1
    return uses


def lower(prog: TileProgram, strides: list, shapes: list, slots: list):
    """``(bind lines, ops, stores)`` of ``prog``: the views and constants bind() makes,
    the calls run() makes in order, and ``(value, view name, slot, shape, flips, 2-D
    view, narrow)`` per store destination (``narrow``: it holds another dtype than the
    compute dtype)."""
    k = Lowering(prog, strides, shapes, slots)
    stores = k.build()
    k.release()
    return k.bind_lines, k.ops, stores
