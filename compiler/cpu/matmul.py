"""The matmul part of the cpu lowering (``lower.py``): dots as ``mm`` / ``bmm`` on
views, bias and sum-of-matmul epilogues as BLAS accumulation, and long sums of thin
matmuls (an RNN's weight gradient over every time step) as one matmul over operands
joined along K."""
from __future__ import annotations

from .values import Val
from ..ir.expr import sum_terms
from ..ops.registry import prod

# A sum of at least STACK_MIN matmuls, each over at most STACK_MAX_K, runs as one matmul
# over operands joined along K (copying them costs less than the thin GEMMs lose).
STACK_MIN, STACK_MAX_K = 4, 128


def mergeable(sizes, strides):
    """``(size, stride)`` of dims laid out as one, or None if they are not."""
    dims = [(s, st) for s, st in zip(sizes, strides) if s != 1]
    if not dims:
        return 1, 1
    for (s0, st0), (s1, st1) in zip(dims, dims[1:]):
        if st0 != st1 * s1:
            return None
    return prod(s for s, _ in dims), dims[-1][1]


class MatmulLowering:
    """Methods of the lowering that make matmul calls (mixed into ``lower.Lowering``)."""

    def dot(self, ins):
        ta_i, tb_i = ins.args
        ta, tb = ins.extra["ta"], ins.extra["tb"]
        a_shape, b_shape = ins.extra["a_shape"], ins.extra["b_shape"]
        sa, sb = self.strides[ta_i][0], self.strides[tb_i][0]
        reads = [Val("", (), kind="view", slot=self.slots[ta_i][0]),
                 Val("", (), kind="view", slot=self.slots[tb_i][0])]
        if self.p.grid_pos:   # batch_dot: the leading axes are the batch
            a = self.widen(ta_i, self.nd_operand(ta_i, a_shape, sa, ta))
            b = self.widen(tb_i, self.nd_operand(tb_i, b_shape, sb, tb))
            fn = "torch.bmm" if len(a_shape) == 3 else "torch.matmul"
            return self.emit("mm", f"{fn}({a}, {b}, out={{out}})", [], self.D, reads=reads)
        # float16 / bfloat16 operands are widened: their products are exact in float32,
        # so this is the tensor cores' float16 x float16 -> float32 accumulate
        a = self.widen(ta_i, self.matrix(ta_i, a_shape, sa, "a", ta))
        b = self.widen(tb_i, self.matrix(tb_i, b_shape, sb, "b", tb))
        m = prod(self.D[p] for p in self.p.row_pos)
        n = prod(self.D[p] for p in self.p.col_pos)
        mm2d = () if len(self.D) == 2 else (m, n)
        v = self.emit("mm", f"torch.mm({a}, {b}, out={{out}})", [], self.D, reads=reads,
                      mm2d=mm2d)
        v.op.stack = (self.stack_form(ta_i, a_shape, sa, "a", ta),
                      self.stack_form(tb_i, b_shape, sb, "b", tb), ins.extra["K"])
        return v

    def stack_form(self, t, shape, strides, role, transposed):
        """``((tensor, shape, strides), cat dim, transpose)``: the operand as a 2-D view in its
        own layout, the dim its K runs along, and whether the ``mm`` operand is that view
        transposed (the view is made only if the operands are stacked)."""
        if len(shape) != 2:
            return None
        k_dim = (0 if transposed else 1) if role == "a" else (1 if transposed else 0)
        return (t, tuple(shape), tuple(strides)), k_dim, transposed

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
            if transposed:     # contracts the first axis: (M, K) is the rest by it
                free, k, ks = shape[1:], shape[0], strides[0]
                merged = mergeable(free, strides[1:])
                if merged is None:
                    v = self.view(t, 0, shape, strides, "n")
                    return f"{v}.reshape({k}, {prod(free)}).t()"
                return self.view(t, 0, (merged[0], k), (merged[1], ks), "m")
            free, k, ks = shape[:-1], shape[-1], strides[-1]
            merged = mergeable(free, strides[:-1])
            if merged is None:
                v = self.view(t, 0, shape, strides, "n")
                return f"{v}.reshape({prod(free)}, {k})"
            return self.view(t, 0, (merged[0], k), (merged[1], ks), "m")
        if transposed:
            free, k, ks = shape[:-1], shape[-1], strides[-1]
            merged = mergeable(free, strides[:-1])
            if merged is None:
                v = self.view(t, 0, shape, strides, "n")
                return f"{v}.reshape({prod(free)}, {k}).t()"
            return self.view(t, 0, (k, merged[0]), (ks, merged[1]), "m")
        free, k, ks = shape[1:], shape[0], strides[0]
        merged = mergeable(free, strides[1:])
        if merged is None:
            v = self.view(t, 0, shape, strides, "n")
            return f"{v}.reshape({k}, {prod(free)})"
        return self.view(t, 0, (k, merged[0]), (ks, merged[1]), "m")

    def add_dot(self, x, y):
        """``x + y`` with ``y`` a matmul used only here: accumulate with BLAS instead."""
        if y.kind != "temp" or y.op is None or y.op.kind != "mm" or \
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
            out.op.stack = y.op.stack
            root = x.chain or ([x.op] if x.op is not None
                                                 and x.op.kind == "mm" else [])
            out.chain = root + [out.op] if root else []
            return out
        if x.kind == "view" and len(self.D) == 2 and y.op.fmt.startswith("torch.mm"):
            self.ops.remove(y.op)
            call = y.op.fmt.split("(", 1)[1].rsplit(", out=", 1)[0]
            return self.emit("mm", f"torch.addmm({{a0}}, {call}, out={{out}})", [x], self.D,
                             reads=y.op.reads)
        return None

    def stack_chains(self):
        """A sum of many thin matmuls into one output (the LSTM's weight gradient over
        every time step: K = batch for each) as one matmul over operands joined along K:
        one well-shaped BLAS call instead of a chain of ``addmm_``."""
        for v in [op.out for op in reversed(self.ops)]:    # a whole chain before its prefixes
            chain = v.chain
            if not chain or len(chain) < STACK_MIN or any(op not in self.ops for op in chain) \
                    or not chain[0].fmt.startswith("torch.mm("):
                continue
            forms = [op.stack for op in chain]
            if any(f is None or f[0] is None or f[1] is None or f[2] > STACK_MAX_K
                   for f in forms):
                continue
            sides = []
            for side in (0, 1):
                kinds = {(f[side][1], f[side][2]) for f in forms}
                if len(kinds) != 1:
                    break
                dim, transposed = kinds.pop()
                views = ", ".join(self.view(f[side][0][0], 0, f[side][0][1], f[side][0][2], "m")
                                  for f in forms)
                sides.append(self.widen(forms[0][side][0][0], f"torch.cat(({views},), {dim})")
                             + (".t()" if transposed else ""))
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
        terms = sum_terms(ins.expr)
        if terms is None or len(terms) != 2:
            return None
        x, y = (self.values[t] for t in terms)
        return self.add_dot(x, y) or self.add_dot(y, x)
