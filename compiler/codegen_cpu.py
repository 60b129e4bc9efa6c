"""Render tile programs for the ``cpu`` target: Python functions of ATen calls.

The TileProgram that ``codegen.py`` renders into a Triton kernel is rendered
here, through ``templates/cpu_kernel.py.j2``, into a module with one function,
``bind(*flat_arguments) -> run``. ``bind`` makes, once per executor, the
strided views of the planned flat buffers that the program reads and writes;
``run()`` is a closure doing the program's work on whole views:

* a load is a view ``as_strided`` over its flat buffer, shaped over the
  group's domain (size 1 where the tensor is broadcast): no gather, no copy;
* the registry's pointwise expressions (``tl`` text, parsed with ``ast``)
  become torch calls; the call that produces a stored value writes straight
  into the destination view (``out=``), and a temporary that dies at a call
  is reused in place, so a chain allocates at most one temporary;
* reductions reduce the tile's column positions (``keepdim``);
* matmuls call ``mm`` / ``bmm`` / ``addmm`` with ``out=``, and sums of
  matmuls accumulate with ``addmm_``;
* Embedding's gather is ``index_select`` and its gradient's scatter-add
  ``index_add_``; SoftmaxOutput's gradient scatters its one-hot.

Values are tracked with their shape over the domain, their dtype and, for
views, the array they read, which is what decides whether a store may go
early (``out=``) or must wait for the end of the kernel as a Triton store does.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

from .codegen import Rendered, _env
from .kernel_ir import TileProgram
from .ops.registry import lit, prod


@dataclass(eq=False)
class _Val:
    """One value of the kernel: a view of memory, a temporary, a scalar or a constant."""
    name: str
    shape: tuple
    dtype: str = "f"            # f (float32) | b (bool) | i (integer)
    kind: str = "temp"          # view | temp | scalar | const
    slot: object = None         # views: the array they read
    scalar: object = None       # scalars: the Python number
    mat2d: str = ""             # temps made by a matmul: the name of their 2-D form
    stored: bool = False


@dataclass(eq=False)
class _Op:
    """One torch call producing ``out``; ``fmt`` has ``{a0}``.. for arguments and ``{out}``."""
    kind: str                   # ew | reduce | mm | addmm | cat | gather | cast | custom
    fmt: str
    args: list
    out: _Val
    reads: list = field(default_factory=list)   # views read besides ``args``
    inplace: object = None      # the argument whose buffer ``out`` reuses
    dest: object = None         # (view name, slot) when ``out`` goes straight to a store
    mm2d: tuple = ()            # mm/addmm: (M, N) when the domain is not already 2-D


# A sum of at least STACK_MIN matmuls, each over at most STACK_MAX_K, runs as one matmul
# over operands joined along K (copying them costs less than the thin GEMMs lose).
STACK_MIN, STACK_MAX_K = 4, 128

_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
           ast.BitAnd: "logical_and", ast.BitOr: "logical_or"}
_COMPARE = {ast.Gt: "gt", ast.GtE: "ge", ast.Lt: "lt", ast.LtE: "le", ast.Eq: "eq",
            ast.NotEq: "ne"}
_FLIP = {"gt": "lt", "ge": "le", "lt": "gt", "le": "ge", "eq": "eq", "ne": "ne"}
_UNARY = {"exp": "exp", "log": "log", "abs": "abs", "sqrt": "sqrt", "sigmoid": "sigmoid"}
# ATen kernels a registry entry may name for the cpu target (Pointwise.cpu), with the
# keyword of their out= variant.
_ATEN = {
    "sigmoid_backward": "torch.ops.aten.sigmoid_backward.grad_input({0}, {1}, grad_input={{out}})",
    "tanh_backward": "torch.ops.aten.tanh_backward.grad_input({0}, {1}, grad_input={{out}})",
    "threshold_backward": "torch.ops.aten.threshold_backward.grad_input({0}, {1}, {2}, "
                          "grad_input={{out}})",
}
_PY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
       "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}


def _mergeable(sizes, strides):
    """``(size, stride)`` of dims laid out as one, or None if they are not."""
    dims = [(s, st) for s, st in zip(sizes, strides) if s != 1]
    if not dims:
        return 1, 1
    for (s0, st0), (s1, st1) in zip(dims, dims[1:]):
        if st0 != st1 * s1:
            return None
    return prod(s for s, _ in dims), dims[-1][1]


class _Kernel:
    def __init__(self, prog: TileProgram, strides, shapes, slots):
        self.p = prog
        self.D = tuple(int(x) for x in prog.domain)
        self.strides, self.shapes, self.slots = strides, shapes, slots
        self.bind_lines = []       # views and constants, made once in bind()
        self.ops = []
        self.values = {}           # IR name -> _Val
        self.count = 0
        self.uses = _ir_uses(prog)
        self.consts = {}
        self.views, self.names = {}, set()

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

    def const(self, value, dtype="torch.float32"):
        """A 0-d tensor made once in bind (scalar operands torch takes only as tensors)."""
        key = (lit(value), dtype)
        if key not in self.consts:
            name = f"k{len(self.consts)}"
            self.consts[key] = name
            self.bind_lines.append(f"{name} = torch.tensor({lit(value)}, dtype={dtype})")
        return _Val(self.consts[key], (), kind="const")

    def coord(self, pos):
        name = f"c{pos}"
        if not any(line.startswith(f"{name} = ") for line in self.bind_lines):
            shape = [1] * len(self.D)
            shape[pos] = self.D[pos]
            self.bind_lines.append(f"{name} = torch.arange({self.D[pos]}).view({tuple(shape)})")
        shape = tuple(self.D[p] if p == pos else 1 for p in range(len(self.D)))
        return _Val(name, shape, "i", "const")

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
        return _Val(name, tuple(sizes), kind="view", slot=self.slots[t][0])

    def store_view(self, st, d):
        """``(name, flips, shape)`` of the view a store writes."""
        sizes, strides = [1] * len(self.D), [0] * len(self.D)
        for pos, j in st.terms:
            sizes[pos] = self.D[pos]
            strides[pos] += self.strides[st.tensor][d][j]
        name, flips = self.view(st.tensor, d, sizes, strides, prefix="o", store=True)
        return name, flips, tuple(sizes)

    # -- ops ---------------------------------------------------------------------------------
    def emit(self, kind, fmt, args, shape, dtype="f", **kw):
        out = _Val(self.fresh(), tuple(shape), dtype)
        op = _Op(kind, fmt, list(args), out, **kw)
        out.op = op
        self.ops.append(op)
        return out

    def ew(self, fn, *args):
        """An elementwise torch call; scalars stay Python numbers where torch takes them."""
        tens = [a for a in args if a.kind != "scalar"]
        if not tens:
            return _Val("", (), kind="scalar", scalar=_fold(fn, *[a.scalar for a in args]))
        shape = _broadcast([a.shape for a in tens], len(self.D))
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
                         dtype)

    def add_product(self, fn, x, y):
        """``x + p*q`` / ``x - p*q`` as one ``addcmul`` (``x ± s*p``: ``add(alpha=)``) when
        the product is used only here: one ATen call instead of two."""
        for k, (base, prod_) in enumerate(((x, y), (y, x))):
            if fn == "sub" and k == 1:
                break
            op = getattr(prod_, "op", None)
            if prod_.kind != "temp" or op is None or op not in self.ops or \
                    not op.fmt.startswith("torch.mul(") or self.val_uses(prod_, 1) != 1 or \
                    base.dtype != "f" or prod_.dtype != "f":
                continue
            p, q = op.args
            sign = -1.0 if fn == "sub" else 1.0
            self.ops.remove(op)
            shape = _broadcast([base.shape, prod_.shape], len(self.D))
            if q.kind == "scalar":
                return self.emit("ew", f"torch.add({{a0}}, {{a1}}, alpha={lit(sign * q.scalar)}, "
                                       f"out={{out}})", [base, p], shape)
            return self.emit("ew", f"torch.addcmul({{a0}}, {{a1}}, {{a2}}, value={lit(sign)}, "
                                   f"out={{out}})", [base, p, q], shape)
        return None

    def unary(self, fn, x):
        if x.kind == "scalar":
            return _Val("", (), kind="scalar", scalar=_fold(fn, x.scalar))
        return self.emit("ew", f"torch.{fn}({{a0}}, out={{out}})", [x], x.shape, "f")

    def where(self, c, x, y):
        if c.kind == "scalar":
            return x if c.scalar else y
        x = self.const(x.scalar) if x.kind == "scalar" else x
        y = self.const(y.scalar) if y.kind == "scalar" else y
        shape = _broadcast([v.shape for v in (c, x, y)], len(self.D))
        return self.emit("ew", "torch.where({a0}, {a1}, {a2}, out={out})", [c, x, y], shape,
                         _arith_dtype([x, y]))

    # -- expressions --------------------------------------------------------------------------
    def expr(self, text):
        text = re.sub(r"\{coord:(\d+)\}", lambda m: f"_coord{m.group(1)}", text)
        return self.node(ast.parse(text, mode="eval").body)

    def node(self, n):
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float, bool)):
            return _Val("", (), kind="scalar", scalar=n.value)
        if isinstance(n, ast.Name):
            if n.id.startswith("_coord"):
                return self.coord(int(n.id[6:]))
            return self.values[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _BINARY:
            return self.ew(_BINARY[type(n.op)], self.node(n.left), self.node(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            x = self.node(n.operand)
            if x.kind == "scalar":
                return _Val("", (), kind="scalar", scalar=-x.scalar)
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
            return _Val("", (), kind="scalar", scalar=float(n.args[0].value))
        if isinstance(f, ast.Name) and f.id == "_tanh":
            return self.unary("tanh", self.node(n.args[0]))
        if isinstance(f, ast.Attribute) and f.attr == "to":
            x = self.node(f.value)
            if x.kind == "scalar":
                return _Val("", (), kind="scalar", scalar=int(x.scalar))
            return self.emit("cast", "{a0}.to(torch.int32)", [x], x.shape, "i")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id == "aten" and f.attr in _ATEN:
            args = [self.node(a) for a in n.args]
            tens = [a for a in args if a.kind != "scalar"]
            shape = _broadcast([a.shape for a in tens], len(self.D))
            fmt = _ATEN[f.attr].format(*[f"{{a{k}}}" if a.kind != "scalar" else lit(a.scalar)
                                          for k, a in enumerate(args)])
            return self.emit("ew", fmt, args, shape)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "tl":
            args = [self.node(a) for a in n.args]
            if f.attr in _UNARY:
                return self.unary(_UNARY[f.attr], args[0])
            if f.attr in ("maximum", "minimum"):
                return self.ew(f.attr, *args)
            if f.attr == "where":
                return self.where(*args)
        raise NotImplementedError(f"cpu target: unsupported call {ast.dump(n)[:120]}")

    # -- instruction kinds ------------------------------------------------------------------------
    def reduce(self, ins):
        x = self.values[ins.args[0]]
        cols = [p for p in self.p.col_pos if self.D[p] > 1]
        dims = [p for p in cols if x.shape[p] > 1]
        factor = prod(self.D[p] for p in cols if x.shape[p] == 1)
        scale = float(ins.extra.get("scale", 1.0)) * (factor if ins.text == "sum" else 1)
        if x.kind == "scalar":
            return _Val("", (), kind="scalar", scalar=x.scalar * scale)
        if dims:
            fn = {"sum": "torch.sum", "max": "torch.amax", "min": "torch.amin"}[ins.text]
            shape = tuple(1 if p in dims else s for p, s in enumerate(x.shape))
            x = self.emit("reduce", f"{fn}({{a0}}, {tuple(dims)}, keepdim=True, out={{out}})",
                          [x], shape)
        if scale != 1.0:
            x = self.ew("mul", x, _Val("", (), kind="scalar", scalar=scale))
        return x

    def dot(self, ins):
        ta_i, tb_i = ins.args
        ta, tb = ins.extra["ta"], ins.extra["tb"]
        a_shape, b_shape = ins.extra["a_shape"], ins.extra["b_shape"]
        sa, sb = self.strides[ta_i][0], self.strides[tb_i][0]
        reads = [_Val("", (), kind="view", slot=self.slots[ta_i][0]),
                 _Val("", (), kind="view", slot=self.slots[tb_i][0])]
        if self.p.grid_pos:   # batch_dot: the leading axes are the batch
            a = self.nd_operand(ta_i, a_shape, sa, ta)
            b = self.nd_operand(tb_i, b_shape, sb, tb)
            fn = "torch.bmm" if len(a_shape) == 3 else "torch.matmul"
            return self.emit("mm", f"{fn}({a}, {b}, out={{out}})", [], self.D, reads=reads)
        a = self.matrix(ta_i, a_shape, sa, "a", ta)
        b = self.matrix(tb_i, b_shape, sb, "b", tb)
        m = prod(self.D[p] for p in self.p.row_pos)
        n = prod(self.D[p] for p in self.p.col_pos)
        mm2d = () if len(self.D) == 2 else (m, n)
        v = self.emit("mm", f"torch.mm({a}, {b}, out={{out}})", [], self.D, reads=reads,
                      mm2d=mm2d)
        v.op.stack = (self.stack_form(ta_i, a_shape, sa, "a", ta),
                      self.stack_form(tb_i, b_shape, sb, "b", tb), ins.extra["K"])
        return v

    def stack_form(self, t, shape, strides, role, transposed):
        """``(view, cat dim, transpose)``: the operand as a 2-D view in its own layout, the
        dim its K runs along, and whether the ``mm`` operand is that view transposed."""
        if len(shape) != 2:
            return None
        natural = self.view(t, 0, shape, strides, prefix="m")
        k_dim = (0 if transposed else 1) if role == "a" else (1 if transposed else 0)
        return natural, k_dim, transposed

    def nd_operand(self, t, shape, strides, transposed):
        sizes, st = list(shape), list(strides)
        if transposed:
            sizes[-1], sizes[-2] = sizes[-2], sizes[-1]
            st[-1], st[-2] = st[-2], st[-1]
        return self.view(t, 0, sizes, st, prefix="m")

    def matrix(self, t, shape, strides, role, transposed):
        """The 2-D operand of ``mm`` (a: (M, K), b: (K, N)) as one view when it can be."""
        if len(shape) == 1:
            sizes, st = ((1, shape[0]), (0, strides[0])) if role == "a" else \
                ((shape[0], 1), (strides[0], 0))
            return self.view(t, 0, sizes, st, prefix="m")
        if role == "a":
            if transposed:
                return self.view(t, 0, (shape[1], shape[0]), (strides[1], strides[0]), "m")
            free, k, ks = shape[:-1], shape[-1], strides[-1]
            merged = _mergeable(free, strides[:-1])
            if merged is None:
                v = self.view(t, 0, shape, strides, "n")
                return f"{v}.reshape({prod(free)}, {k})"
            return self.view(t, 0, (merged[0], k), (merged[1], ks), "m")
        if transposed:
            free, k, ks = shape[:-1], shape[-1], strides[-1]
            merged = _mergeable(free, strides[:-1])
            if merged is None:
                v = self.view(t, 0, shape, strides, "n")
                return f"{v}.reshape({prod(free)}, {k}).t()"
            return self.view(t, 0, (k, merged[0]), (ks, merged[1]), "m")
        free, k, ks = shape[1:], shape[0], strides[0]
        merged = _mergeable(free, strides[1:])
        if merged is None:
            v = self.view(t, 0, shape, strides, "n")
            return f"{v}.reshape({k}, {prod(free)})"
        return self.view(t, 0, (k, merged[0]), (ks, merged[1]), "m")

    def add_dot(self, x, y):
        """``x + y`` with ``y`` a matmul used only here: accumulate with BLAS instead."""
        if y.kind != "temp" or getattr(y, "op", None) is None or y.op.kind != "mm" or \
                y.op not in self.ops or self.val_uses(y) != 1:
            return None
        if y.op.fmt.startswith("torch.addmm(") and x.kind == "temp" and x.shape == self.D \
                and x.dtype == "f" and self.val_uses(x) == 1:
            # x + addmm(bias, A, B): add the bias into x, then accumulate the product
            self.ops.remove(y.op)
            bias = y.op.args[0]
            call = y.op.fmt.split(", ", 1)[1].rsplit(", out=", 1)[0]
            return self.emit("addmm", f"{{a0}}.add_({{a1}}).addmm_({call})", [x, bias],
                             x.shape, reads=y.op.reads)
        if not y.op.fmt.startswith(("torch.mm(", "torch.bmm(")):
            return None
        if x.kind == "temp" and x.shape == self.D and x.dtype == "f" and \
                self.val_uses(x) == 1:
            self.ops.remove(y.op)
            call = y.op.fmt.split("(", 1)[1].rsplit(", out=", 1)[0]
            target = "{a0}" if not y.op.mm2d else "{a0}.view(%d, %d)" % y.op.mm2d
            fn = "addmm_" if y.op.fmt.startswith("torch.mm") else "baddbmm_"
            out = self.emit("addmm", f"{target}.{fn}({call})", [x], x.shape,
                            reads=y.op.reads, mm2d=y.op.mm2d)
            out.op.stack = getattr(y.op, "stack", None)
            root = getattr(x, "chain", None) or ([x.op] if getattr(x, "op", None) is not None
                                                 and x.op.kind == "mm" else [])
            out.chain = root + [out.op] if root else []
            return out
        if x.kind == "view" and len(self.D) == 2 and y.op.fmt.startswith("torch.mm"):
            self.ops.remove(y.op)
            call = y.op.fmt.split("(", 1)[1].rsplit(", out=", 1)[0]
            return self.emit("mm", f"torch.addmm({{a0}}, {call}, out={{out}})", [x], self.D,
                             reads=y.op.reads)
        return None

    def gather(self, ins):
        idx, w = self.values[ins.args[0]], ins.args[1]
        rows, cols = self.shapes[w]
        s0, s1 = self.strides[w][0]
        wname = self.view(w, 0, (rows, cols), (s0, s1), prefix="w")
        shape = idx.shape[:-1] + (self.D[ins.extra["last"]],)
        ix = f"{{a0}}.reshape(-1).to(torch.int64).clamp_(0, {rows - 1})"
        return self.emit("gather", f"torch.index_select({wname}, 0, {ix}).view({shape})", [idx],
                         shape, reads=[_Val("", (), kind="view", slot=self.slots[w][0])])

    def concat(self, ins):
        pos, names = ins.extra["concat"]
        parts = [self.values[n] for n in names]
        shape = list(_broadcast([p.shape for p in parts], len(self.D)))
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
        gs = float(ce["grad_scale"])
        lines = ["{out}.copy_({a0})" if gs == 1.0 else
                 f"torch.mul({{a0}}, {lit(gs)}, out={{out}})",
                 f"lab = {{a1}}.to(torch.int64)"]
        if ce["use_ignore"]:
            lines.append(f"keep = lab != {int(ce['ignore_label'])}")
            lines.append(f"{{out}}.mul_(keep)")
            value = f"keep.to(torch.float32) * {lit(-gs)}"
        else:
            value = f"torch.full_like(lab, {lit(-gs)}, dtype=torch.float32)"
        # one-hot entries of labels outside [0, classes) hit nothing, as the where-form
        lines.append(f"ok = (lab >= 0) & (lab < {ce['classes']})")
        lines.append(f"{{out}}.scatter_add_({pos}, lab.clamp(0, {ce['classes'] - 1}), "
                     f"{value} * ok)")
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
                name, flips, shape = self.store_view(st, d)
                stores.append((v, name, self.slots[st.tensor][d], shape, flips))
        return stores

    def stack_chains(self):
        """A sum of many thin matmuls into one output (the LSTM's weight gradient over
        every time step: K = batch for each) as one matmul over operands joined along K:
        one well-shaped BLAS call instead of a chain of ``addmm_``."""
        for v in [op.out for op in reversed(self.ops)]:    # a whole chain before its prefixes
            chain = getattr(v, "chain", None)
            if not chain or len(chain) < STACK_MIN or any(op not in self.ops for op in chain) \
                    or not chain[0].fmt.startswith("torch.mm("):
                continue
            forms = [getattr(op, "stack", None) for op in chain]
            if any(f is None or f[0] is None or f[1] is None or f[2] > STACK_MAX_K
                   for f in forms):
                continue
            sides = []
            for side in (0, 1):
                kinds = {(f[side][1], f[side][2]) for f in forms}
                if len(kinds) != 1:
                    break
                dim, transposed = kinds.pop()
                views = ", ".join(f[side][0] for f in forms)
                sides.append(f"torch.cat(({views},), {dim})" + (".t()" if transposed else ""))
            if len(sides) != 2:
                continue
            last = chain[-1]
            for op in chain[:-1]:
                self.ops.remove(op)
            last.kind, last.args, last.inplace = "mm", [], None
            last.fmt = f"torch.mm({sides[0]}, {sides[1]}, out={{out}})"
            last.reads = [r for op in chain for r in op.reads]
            last.mm2d = chain[0].mm2d

    def sum_of_dots(self, ins):
        """``(va + vb)`` where ``vb`` is a matmul: accumulate it into ``va`` with BLAS."""
        m = re.fullmatch(r"\((v\d+) \+ (v\d+)\)", ins.text)
        if not m:
            return None
        x, y = self.values[m.group(1)], self.values[m.group(2)]
        return self.add_dot(x, y) or self.add_dot(y, x)


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


def _broadcast(shapes, nd):
    out = [1] * nd
    for s in shapes:
        for p, x in enumerate(s):
            out[p] = max(out[p], x)
    return tuple(out)


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
         "sqrt": math.sqrt, "tanh": math.tanh, "sigmoid": lambda x: 1 / (1 + math.exp(-x)),
         "logical_and": lambda a, b: bool(a and b), "logical_or": lambda a, b: bool(a or b)}
    return f[fn](*xs)


# ------------------------------------------------------------------------------ planning

def _plan(ops, stores):
    """Decide where each op writes: in place into a dying temporary, straight into a
    store's view, or a new tensor. Returns the stores left for the end of the kernel."""
    last = {}
    for i, op in enumerate(ops):
        for a in op.args:
            last[id(a)] = i
    end = len(ops)
    for v, *_ in stores:
        last[id(v)] = end
    owner = {}                               # id(val) -> the op whose buffer it lives in
    for i, op in enumerate(ops):
        if op.kind == "addmm":
            op.inplace = op.args[0]
        elif op.kind == "ew":
            for a in op.args:
                if a.kind == "temp" and last.get(id(a)) == i and a.shape == op.out.shape and \
                        a.dtype == op.out.dtype and not a.stored and id(a) in owner:
                    op.inplace = a
                    break
        owner[id(op.out)] = owner[id(op.inplace)] if op.inplace is not None else op
    index = {id(op): i for i, op in enumerate(ops)}
    left = []
    done = set()
    for v, name, slot, shape, flips in stores:
        root = owner.get(id(v))
        if id(v) in done or flips:
            left.append((v, name, flips))
            continue
        if root is None or v.dtype != "f" or v.shape != shape or root.dest is not None or \
                root.kind in ("cast", "gather") or \
                _reads_slot(ops[index[id(root)]:], slot) or (root.mm2d and root.kind == "mm"):
            left.append((v, name, flips))
            continue
        root.dest = name
        done.add(id(v))
        v.name = name
    return left


def _reads_slot(ops, slot):
    for op in ops:
        for a in list(op.args) + list(op.reads):
            if a.kind == "view" and a.slot == slot:
                return True
    return False


def _lines(ops, left):
    """The body of ``run()``."""
    names = {}
    out = []
    for op in ops:
        args = {f"a{k}": names.get(id(a), a.name) for k, a in enumerate(op.args)}
        if op.inplace is not None:
            target = names.get(id(op.inplace), op.inplace.name)
        elif op.dest is not None:
            target = op.dest
        else:
            target = None
        if op.kind in ("gather", "cast"):
            text = op.fmt.format(**args)
            out.append(f"{op.out.name} = {text}" if target is None else f"{target}.copy_({text})")
        elif op.kind == "custom":
            if target is None:
                out.append(f"{op.out.name} = torch.empty({op.out.shape})")
                target = op.out.name
            out.extend(line.format(out=target, **args) for line in op.fmt.split("\n"))
        elif op.kind == "addmm":
            out.append(op.fmt.format(**args))
        elif target is None and ", out={out}" not in op.fmt:   # an out= overload only
            dtype = {"f": "torch.float32", "b": "torch.bool", "i": "torch.int32"}[op.out.dtype]
            out.append(f"{op.out.name} = torch.empty({op.out.shape}, dtype={dtype})")
            out.append(op.fmt.format(out=op.out.name, **args))
        elif target is None:
            call = op.fmt.replace(", out={out}", "").format(**args)
            out.append(f"{op.out.name} = {call}")
            if op.mm2d:
                out.append(f"{op.out.name} = {op.out.name}.view({op.out.shape})")
        else:
            out.append(op.fmt.format(out=target, **args))
        names[id(op.out)] = target or op.out.name
    for v, name, flips in left:
        src = names.get(id(v), v.name)
        if v.kind == "scalar":
            out.append(f"{name}.fill_({lit(v.scalar)})")
        elif flips:      # a reversed destination: write the flipped value
            out.append(f"{name}.copy_(torch.broadcast_to({src}, {v.shape}).flip({flips}))"
                       if v.shape else f"{name}.copy_({src})")
        else:
            out.append(f"{name}.copy_({src})")
    return out


# ------------------------------------------------------------------------------ entry points

def render_cpu(prog: TileProgram, strides: list, shapes: list, slots: list) -> Rendered:
    """Python source of ``prog`` for the cpu target.

    ``strides[t]`` / ``slots[t]`` list, per destination of tensor ``t``, its
    element strides and the array it lives in (views of one array may overlap;
    views of two never do).
    """
    params = [(t, d) for t in range(len(prog.tensors)) for d in range(len(strides[t]))]
    if prog.kind == "scatter":
        bind, body = _scatter(prog, strides, shapes)
    else:
        k = _Kernel(prog, strides, shapes, slots)
        stores = k.build()
        left = _plan(k.ops, stores)
        body = _lines(k.ops, left)
        bind = k.bind_lines
    m = prod(prog.domain[p] for p in prog.row_pos) if prog.kind != "scatter" else 0
    n = prod(prog.domain[p] for p in prog.col_pos) if prog.kind != "scatter" else 0
    summary = f"{prog.kind} over domain {tuple(int(x) for x in prog.domain)}"
    source = _env.get_template("cpu_kernel.py.j2").render(k={
        "params": ", ".join(f"p{t}_{d}" for t, d in params), "summary": summary,
        "bind_lines": bind, "body_lines": body or ["pass"]})
    return Rendered(source, params, m, n, 0, prog.kind)


def _scatter(prog, strides, shapes):
    """Embedding's weight gradient: ``out.index_add_(0, idx, dy)`` (rows accumulate)."""
    dy_t, idx_t, out_t = 0, 1, 2
    domain = tuple(int(x) for x in prog.domain)
    rows_dy = prod(domain[:-1])
    merged = _mergeable(domain[:-1], strides[dy_t][0][:-1])
    bind = []
    if merged is None:
        bind.append(f"dy = p0_0.as_strided({domain}, {tuple(strides[dy_t][0])})")
        dy = f"dy.reshape({rows_dy}, {domain[-1]})"
    else:
        bind.append(f"dy = p0_0.as_strided(({rows_dy}, {domain[-1]}), "
                    f"({merged[1]}, {strides[dy_t][0][-1]}))")
        dy = "dy"
    bind.append(f"ix = p1_0.as_strided({tuple(shapes[idx_t])}, {tuple(strides[idx_t][0])})")
    rows, cols = shapes[out_t]
    bind.append(f"o = p2_0.as_strided(({rows}, {cols}), {tuple(strides[out_t][0])})")
    body = [f"o.index_add_(0, ix.reshape(-1).to(torch.int64).clamp_(0, {rows - 1}), {dy})"]
    return bind, body


def render_cpu_fill(numel: int, value: float = 0.0) -> Rendered:
    source = _env.get_template("cpu_kernel.py.j2").render(k={
        "params": "p0_0", "summary": f"fill {int(numel)} elements with {lit(value)}",
        "bind_lines": [], "body_lines": [f"p0_0.fill_({lit(value)})"]})
    return Rendered(source, [(0, 0)], int(numel), 1, 0, "fill")
