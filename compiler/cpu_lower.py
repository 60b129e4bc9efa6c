"""The tile program of one fused group as a list of torch calls (the ``cpu`` target).

``lower(prog, strides, shapes, slots)`` walks a :class:`~compiler.kernel_ir.TileProgram`
and returns the views ``bind()`` makes, the calls ``run()`` makes (:class:`Op`, each
producing a :class:`Val`) and the stores. Every value is a whole tensor shaped over the
group's domain (size 1 where it does not vary), so torch broadcasting does what the
Triton tile masks do:

* a load is a view ``as_strided`` over its flat buffer (no gather, no copy);
* the registry's pointwise expressions (``tl`` text, parsed with ``ast``; or an
  entry's one-ATen-kernel ``cpu`` form) become torch calls;
* reductions reduce the tile's column positions (``keepdim``);
* matmuls call ``mm`` / ``bmm`` / ``addmm``; a sum of matmuls accumulates with
  ``addmm_``, and a long sum of thin ones joins its operands along K;
* Embedding's gather is ``index_select``; SoftmaxOutput's gradient scatters its
  one-hot; Concat is ``torch.cat``; the random source's ``tl.rand`` is
  ``compiler/philox.py``, the same bits.

Where each call writes (in place, straight into a store, or a new tensor) is
decided afterwards, by ``codegen_cpu.plan``.
"""
from __future__ import annotations

import ast
import math
import re

from .cpu_matmul import MatmulLowering, mergeable
from .cpu_values import Op, Val, broadcast
from .dtypes import TORCH
from .kernel_ir import TileProgram
from .ops.registry import lit, prod


_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
           ast.BitAnd: "logical_and", ast.BitOr: "logical_or"}
_COMPARE = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le", ast.Eq: "eq",
            ast.NotEq: "ne"}
_FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}
_UNARY = {"exp": "exp", "log": "log", "abs": "abs", "sqrt": "sqrt", "sigmoid": "sigmoid",
          "erf": "erf"}
# ATen kernels a registry entry may name for the cpu target (Pointwise.cpu), with the
# keyword of their out= variant.
_ATEN = {
    "sigmoid_backward": "sigmoid_backward({0}, {1}, grad_input={{out}})",
    "tanh_backward": "tanh_backward({0}, {1}, grad_input={{out}})",
    "threshold_backward": "threshold_backward({0}, {1}, {2}, grad_input={{out}})",
}
_PY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}


class _Lowering(MatmulLowering):
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
        sizes = tuple(int(s) for s in sizes)
        flips = tuple(i for i, (n, st) in enumerate(zip(sizes, strides)) if st < 0 and n > 1)
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

    def ew(self, fn, *args):
        """An elementwise torch call; scalars stay Python numbers where torch takes them."""
        tens = [a for a in args if a.kind != "scalar"]
        if not tens:
            return Val("", (), kind="scalar", scalar=_fold(fn, *[a.scalar for a in args]))
        shape = broadcast([a.shape for a in tens], len(self.D))
        a = list(args)
        if fn in ("add", "mul", "maximum", "minimum", "logical_and", "logical_or") and \
                a[0].kind == "scalar":
            a = [a[1], a[0]]
        if fn in _FLIP and a[0].kind == "scalar":
            fn, a = _FLIP[fn], [a[1], a[0]]
        if a[0].dtype == "f" and a[1].kind == "scalar" and (
                (fn in ("add", "sub") and a[1].scalar == 0) or
                (fn in ("mul", "div") and a[1].scalar == 1)):
            return a[0]
        if fn in ("sub", "div", "pow") and a[0].kind == "scalar":
            a[0] = self.const(a[0].scalar)
        if fn in ("add", "sub") and all(v.kind != "scalar" for v in a):
            fused = self.add_product(fn, a[0], a[1])
            if fused is not None:
                return fused
        if fn == "maximum" and a[1].kind == "scalar":
            fn = "clamp_min"
        elif fn == "minimum" and a[1].kind == "scalar":
            fn = "clamp_max"
        dtype = "b" if fn in _FLIP or fn.startswith("logical") else _arith_dtype(a)
        return self.emit("ew", f"torch.{fn}({{a0}}, {_arg(a[1], 1)}, out={{out}})", a, shape,
                         dtype, fn=fn)

    def add_product(self, fn, x, y):
        """``x + p*q`` / ``x - p*q`` as one ``addcmul`` (``x ± s*p``: ``add(alpha=)``) when
        the product is used only here: one ATen call instead of two."""
        for k, (base, prod_) in enumerate(((x, y), (y, x))):
            if fn == "sub" and k == 1:
                break
            op = prod_.op
            if prod_.kind != "temp" or op is None or op not in self.ops or \
                    not op.fmt.startswith("torch.mul(") or self.val_uses(prod_, 1) != 1 or \
                    base.dtype != "f" or prod_.dtype != "f":
                continue
            p, q = op.args
            sign = -1.0 if fn == "sub" else 1.0
            self.ops.remove(op)
            shape = broadcast([base.shape, prod_.shape], len(self.D))
            if q.kind == "scalar":
                return self.emit("ew", f"torch.add({{a0}}, {{a1}}, alpha={lit(sign * q.scalar)}, "
                                       f"out={{out}})", [base, p], shape)
            return self.emit("ew", f"torch.addcmul({{a0}}, {{a1}}, {{a2}}, value={lit(sign)}, "
                                   f"out={{out}})", [base, p, q], shape)
        return None

    def unary(self, fn, x):
        if x.kind == "scalar":
            return Val("", (), kind="scalar", scalar=_fold(fn, x.scalar))
        return self.emit("ew", f"torch.{fn}({{a0}}, out={{out}})", [x], x.shape, "f", fn=fn)

    def where(self, c, x, y):
        if c.kind == "scalar":
            return x if c.scalar else y
        x = self.const(x.scalar) if x.kind == "scalar" else x
        y = self.const(y.scalar) if y.kind == "scalar" else y
        shape = broadcast([v.shape for v in (c, x, y)], len(self.D))
        return self.emit("ew", "torch.where({a0}, {a1}, {a2}, out={out})", [c, x, y], shape,
                         _arith_dtype([x, y]))

    # -- expressions --------------------------------------------------------------------------
    def expr(self, text):
        text = text.replace("{cdt}", "tl." + self.cdt[len("torch."):])
        text = re.sub(r"\{coord:(\d+)\}", lambda m: f"_coord{m.group(1)}", text)
        return self.node(ast.parse(text, mode="eval").body)

    def node(self, n):
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, bool)):
            return Val("", (), kind="scalar", scalar=n.value)
        if isinstance(n, ast.Name):
            if n.id.startswith("_coord"):
                return self.coord(int(n.id[6:]))
            return self.values[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _BINARY:
            return self.ew(_BINARY[type(n.op)], self.node(n.left), self.node(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            x = self.node(n.operand)
            if x.kind == "scalar":
                return Val("", (), kind="scalar", scalar=-x.scalar)
            return self.emit("ew", "torch.neg({a0}, out={out})", [x], x.shape, x.dtype)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.UAdd):
            return self.node(n.operand)
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _COMPARE:
            return self.ew(_COMPARE[type(n.ops[0])], self.node(n.left),
                           self.node(n.comparators[0]))
        if isinstance(n, ast.Call):
            return self.call(n)
        raise NotImplementedError(f"cpu target: unsupported expression {ast.dump(n)[:120]}")

    def call(self, n):
        f = n.func
        if isinstance(f, ast.Name) and f.id == "float" and isinstance(n.args[0], ast.Constant):
            return Val("", (), kind="scalar", scalar=float(n.args[0].value))
        if isinstance(f, ast.Name) and f.id == "_tanh":
            return self.unary("tanh", self.node(n.args[0]))
        if isinstance(f, ast.Attribute) and f.attr == "to":
            target = n.args[0].attr if isinstance(n.args[0], ast.Attribute) else "int32"
            inner = f.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
                    inner.func.attr == "to" and target in ("float32", "float64"):
                # ``x.to(tl.D).to(compute)``: a rounding to D (compiler/ops/cast.py)
                via = inner.args[0].attr
                x = self.node(inner.func.value)
                if x.kind == "scalar" or TORCH[via] == self.cdt:
                    return x
                return self.emit("cast", f"{{a0}}.to(torch.{via}).to({self.cdt})", [x], x.shape)
            x = self.node(inner)
            if x.kind == "scalar":
                return Val("", (), kind="scalar", scalar=int(x.scalar))
            return self.emit("cast", "{a0}.to(torch.int32)", [x], x.shape, "i")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id == "aten" and f.attr in _ATEN:
            args = [self.node(a) for a in n.args]
            tens = [a for a in args if a.kind != "scalar"]
            shape = broadcast([a.shape for a in tens], len(self.D))
            bound = f"{f.attr} = torch.ops.aten.{f.attr}.grad_input"   # looked up once, in bind
            if bound not in self.bound_once:
                self.bound_once.add(bound)
                self.bind_lines.append(bound)
            fmt = _ATEN[f.attr].format(*[f"{{a{k}}}" if a.kind != "scalar" else lit(a.scalar)
                                          for k, a in enumerate(args)])
            return self.emit("ew", fmt, args, shape)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id == "philox" and f.attr == "stream_uniform":
            return self.philox_uniform(*[self.node(a) for a in n.args])
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "tl":
            args = [self.node(a) for a in n.args]
            if f.attr in _UNARY:
                return self.unary(_UNARY[f.attr], args[0])
            if f.attr in ("maximum", "minimum"):
                return self.ew(f.attr, *args)
            if f.attr == "where":
                return self.where(*args)
        raise NotImplementedError(f"cpu target: unsupported call {ast.dump(n)[:120]}")

    def philox_uniform(self, bits, stream, *pairs):
        """``_philox_uniform``: Triton's ``tl.rand`` in torch (``compiler/philox.py``), one
        call; its offset, the linear index, sums (coordinate, stride) ``pairs`` in int64."""
        bound = "from compiler.philox import stream_uniform"   # imported once, in bind
        if bound not in self.bound_once:
            self.bound_once.add(bound)
            self.bind_lines.append(bound)
        coords, strides = list(pairs[0::2]), [int(s.scalar) for s in pairs[1::2]]
        offset = " + ".join(f"{{a{k + 1}}}" + (f" * {s}" if s != 1 else "")
                            for k, s in enumerate(strides)) or "0"
        shape = broadcast([a.shape for a in [bits] + coords], len(self.D))
        return self.emit("ew", f"stream_uniform({{a0}}, {int(stream.scalar)}, {offset}, "
                               f"out={{out}})", [bits] + coords, shape, fn="philox")

    # -- instruction kinds ------------------------------------------------------------------------
    def reduce(self, ins):
        x = self.values[ins.args[0]]
        cols = [p for p in self.p.col_pos if self.D[p] > 1]
        dims = [p for p in cols if x.shape[p] > 1]
        factor = prod(self.D[p] for p in cols if x.shape[p] == 1)
        scale = float(ins.extra.get("scale", 1.0)) * (factor if ins.text == "sum" else 1)
        if x.kind == "scalar":
            return Val("", (), kind="scalar", scalar=x.scalar * scale)
        if dims:
            fn = {"sum": "torch.sum", "max": "torch.amax", "min": "torch.amin"}[ins.text]
            shape = tuple(1 if p in dims else s for p, s in enumerate(x.shape))
            x = self.emit("reduce", f"{fn}({{a0}}, {tuple(dims)}, keepdim=True, out={{out}})",
                          [x], shape, fn=fn[6:], dims=tuple(dims))
        if scale != 1.0:
            x = self.ew("mul", x, Val("", (), kind="scalar", scalar=scale))
        return x

    def gather(self, ins):
        idx, w = self.values[ins.args[0]], ins.args[1]
        rows, cols = self.shapes[w]
        s0, s1 = self.strides[w][0]
        wname = self.view(w, 0, (rows, cols), (s0, s1), prefix="w")
        shape = idx.shape[:-1] + (self.D[ins.extra["last"]],)
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
                v = self.node(ast.parse(ins.text, mode="eval").body)
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
                    self.sum_of_dots(ins) or self.expr(ins.extra.get("cpu") or ins.text)
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
            names = re.findall(r"\bv\d+\b", ins.text)
        for n in names:
            uses[n] = uses.get(n, 0) + 1
    for st in prog.stores:
        uses[st.value] = uses.get(st.value, 0) + 1
    return uses


def _arith_dtype(args):
    kinds = {a.dtype for a in args if a.kind != "scalar"}
    if "f" in kinds or any(a.kind == "scalar" and isinstance(a.scalar, float) for a in args):
        return "f"
    return "i" if "i" in kinds else "f"


def _arg(v, k):
    return lit(v.scalar) if v.kind == "scalar" else f"{{a{k}}}"


def _fold(fn, *xs):
    if fn in _PY:
        return _PY[fn](*xs)
    f = {"gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b,
         "le": lambda a, b: a <= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
         "maximum": max, "minimum": min, "exp": math.exp, "log": math.log, "abs": abs,
         "erf": math.erf, "sqrt": math.sqrt, "tanh": math.tanh, "sigmoid": lambda x: 1 / (1 + math.exp(-x)),
         "logical_and": lambda a, b: bool(a and b), "logical_or": lambda a, b: bool(a or b)}
    return f[fn](*xs)


def lower(prog: TileProgram, strides: list, shapes: list, slots: list):
    """``(bind lines, ops, stores)`` of ``prog``: the views and constants bind() makes,
    the calls run() makes in order, and ``(value, view name, slot, shape, flips, 2-D
    view, narrow)`` per store destination (``narrow``: it holds another dtype than the
    compute dtype)."""
    k = _Lowering(prog, strides, shapes, slots)
    stores = k.build()
    return k.bind_lines, k.ops, stores
