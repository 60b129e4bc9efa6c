"""The tile program of one kernel group: what a generated kernel computes.

A group's values live on a *domain* ``D`` (a shape). Every program instance
covers a tile of it: ``grid`` positions are scalars taken from
``program_id(1)``, ``rows`` positions run along the tile's first axis and
``cols`` positions along its second. Tensors are read and written through
``Access`` terms ``(position, element stride)``, so broadcasting (no term),
transposes and slices (strides, offsets) cost nothing. Values are SSA
names; each records the positions it varies along, which decides whether a
store is legal and whether a value is a whole tile or one per row.

``build.py: build_tile_program`` either returns a :class:`TileProgram` or raises
:class:`NotFusable`; the fusion pass uses it as its legality check. This file builds
pointwise, reduce, matmul and scatter groups; ``conv.py`` and ``pool.py`` extend
:class:`ProgramBuilder` for their families.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .dtypes import compute_dtype, saturate_to_dtype
from .expr import LEAVES, Expr, coord_reads, ops, shared_nodes, substitute, value_reads
from ..ops.matmul import dot_dims
from ..ops.registry import MatMul, Pointwise, Reduction, Special, View, prod


class NotFusable(Exception):
    """The nodes cannot form one kernel (the message says why)."""


@dataclass
class Instr:
    """One SSA value of the kernel.

    ``expr`` (kinds ``expr`` and ``const``) is its math in the vocabulary of
    ``compiler/ir/expr.py`` over the values in ``args``; each target emits its own code
    from it. ``extra`` holds structured facts: a reduction's ``combine`` (``sum`` /
    ``max`` / ``min`` / ``prod``) and ``scale``, a load's ``dims``, a dot's operands, and for
    ``concat`` / ``ce_grad`` expressions what a target with a kernel for the whole
    (``torch.cat``, a one-hot scatter) needs. ``origin`` names the operator and node
    it computes, for errors.
    """
    kind: str            # load | expr | reduce | dot | gather | const | conv | pool
    out: str
    args: tuple = ()
    expr: Optional[Expr] = None
    varies: frozenset = frozenset()
    extra: dict = field(default_factory=dict)
    origin: str = ""


@dataclass
class Store:
    value: str
    tensor: int          # index into TileProgram.tensors
    terms: tuple         # ((position, stride), ...)
    atomic: bool = False


@dataclass
class TileProgram:
    """Everything codegen needs for one kernel (and nothing about the graph)."""
    kind: str                    # pointwise | reduce | matmul | scatter
    domain: tuple
    grid_pos: tuple
    row_pos: tuple
    col_pos: tuple
    instrs: list
    stores: list
    tensors: list                # entries (node, index) read or written, in argument order
    tensor_roles: list           # 'in' | 'out' | 'inout'
    reduce_cols: bool = False    # row reductions present: the tile must span all columns
    nodes: frozenset = frozenset()
    dtypes: list = None          # storage dtype per tensor (set by build_tile_program)

    @property
    def compute_dtype(self) -> str:
        """What the kernel computes in (``compiler/ir/dtypes.py``)."""
        dtypes = self.dtypes or ()
        return compute_dtype(dtypes, [d for d, role in zip(dtypes, self.tensor_roles)
                                      if role != "in"])


# --------------------------------------------------------------------------------------

def _right_aligned(in_shape, out_shape):
    off = len(out_shape) - len(in_shape)
    return [off + j for j in range(len(in_shape))]


class ProgramBuilder:
    """Builds one group's TileProgram: chooses its domain, places every value in it
    (dimmaps), then emits instructions and stores."""

    def __init__(self, graph, nodes, outside_uses):
        self.graph = graph
        self.nodes = set(nodes)
        self.outside = outside_uses      # entries of group nodes needed outside
        self.outside_set = set(outside_uses)   # membership per node: a list would be quadratic
        pos = graph.meta.get("topo_pos")
        if pos is None:
            self.order = [n for n in graph.topo() if n in self.nodes]
        else:  # fuse precomputes the order: a whole-graph sort per attempt is quadratic
            self.order = sorted(self.nodes, key=pos.__getitem__)
        self.dimmap = {}                 # entry -> list of D positions (None = size-1)
        self.instrs, self.stores = [], []
        self.tensors, self.roles = [], []
        self.tensor_index = {}           # entry -> position in ``tensors``
        self.value = {}                  # entry -> ssa name
        self.varies = {}
        self.count = 0

    # -- domain ----------------------------------------------------------------
    def choose_domain(self):
        g = self.graph
        dots = [n for n in self.order if isinstance(g.node(n)["opdef"].lowering, MatMul)]
        reds = [n for n in self.order if isinstance(g.node(n)["opdef"].lowering, Reduction)]
        scat = [n for n in self.order if special_kind(g, n) == "scatter_add"]
        if scat:
            if len(self.nodes) != 1:
                raise NotFusable("scatter_add stands alone")
            return "scatter", None, None
        if dots:
            n = dots[0]
            shape = g.node(n)["shapes"][0]
            self.domain = tuple(shape)
            nd = len(shape)
            low = g.node(n)["opdef"].lowering
            # batch_dot: every leading axis is a batch axis (each selects other matrices
            # of both operands), folded together into the grid
            self.grid_pos = tuple(range(nd - 2)) if low.batched else ()
            self.row_pos = tuple(range(len(self.grid_pos), nd - 1))
            self.col_pos = (nd - 1,)
            if not low.batched:
                # dot: rows are the lhs free axes, columns the rhs free axes
                # (mxnet's N-D rule; either side may have none).
                attrs = g.node(n)["attrs"]
                lfree, _, _, rfree = dot_dims(*[g.shape(e) for e in g.inputs(n)],
                                              low.transpose_a(attrs), low.transpose_b(attrs))
                if lfree or rfree:
                    self.row_pos = tuple(range(len(lfree)))
                    self.col_pos = tuple(range(len(lfree), nd))
                else:                    # vector . vector -> (1,)
                    self.row_pos, self.col_pos = (0,), ()
            return "matmul", n, None
        if reds:
            n = reds[0]
            in_shape = self.graph.shape(self.graph.inputs(n)[0])
            axes = g.node(n)["opdef"].lowering.axes(g.node(n)["attrs"], in_shape)
            self.domain = tuple(in_shape)
            self.grid_pos = ()
            self.col_pos = tuple(sorted(a % len(in_shape) for a in axes)) if in_shape else ()
            self.row_pos = tuple(p for p in range(len(in_shape)) if p not in self.col_pos)
            return "reduce", n, None
        sinks = [(n, i) for n in self.order for i in range(len(g.node(n)["shapes"]))
                 if (n, i) in self.outside_set]
        if not sinks:
            raise NotFusable("group has no outputs")
        best = max(sinks, key=lambda e: (prod(g.shape(e)), len(g.shape(e))))
        self.domain = tuple(g.shape(best))
        self.grid_pos, self.col_pos = (), ()
        self.row_pos = tuple(range(len(self.domain)))
        return "pointwise", None, best

    # -- dimmaps: from the anchor and the outputs back to the inputs -------------
    def set_dimmap(self, entry, dm):
        dm = list(dm)
        old = self.dimmap.get(entry)
        if old is None:
            self.dimmap[entry] = dm
        elif old != dm:
            raise NotFusable(f"value {entry} is used with two layouts {old} / {dm}")

    def assign_dimmaps(self, kind, anchor, sink):
        g = self.graph
        if kind == "matmul" or kind == "reduce":
            n = anchor
            if kind == "reduce":
                self.set_dimmap(g.inputs(n)[0], range(len(self.domain)))
                # The anchor's output keeps the row positions (size-1 at the
                # reduced ones with keepdims); right-aligning it to the domain
                # would misplace e.g. sum(axis=1) of (3, 5) -> (3,).
                kept = [p for p in range(len(self.domain)) if p not in self.col_pos]
                if len(g.node(n)["shapes"][0]) == len(self.domain):
                    self.set_dimmap((n, 0), [p if p in kept else None
                                             for p in range(len(self.domain))])
                else:
                    self.set_dimmap((n, 0), kept or [None])
            else:
                self.set_dimmap((n, 0), range(len(self.domain)))
        else:
            self.set_dimmap(sink, range(len(self.domain)))
        for entry in self.outside:
            if entry not in self.dimmap and len(g.shape(entry)) <= len(self.domain):
                shape = g.shape(entry)
                dm = _right_aligned(shape, self.domain)
                if all(shape[j] == self.domain[p] or shape[j] == 1 for j, p in enumerate(dm)):
                    self.set_dimmap(entry, [p if shape[j] == self.domain[p] else None
                                            for j, p in enumerate(dm)])
        dimmap, nodes = self.dimmap, g.g._node
        for n in reversed(self.order):
            dm = dimmap.get((n, 0))          # the first output placed (most often the only)
            if dm is None:
                dm = next((dimmap[(n, i)] for i in range(1, len(nodes[n]["shapes"]))
                           if (n, i) in dimmap), None)
            if dm is None:
                raise NotFusable(f"cannot place {g.describe(n)} in the domain {self.domain}")
            self.propagate(n, dm)

    def propagate(self, n, out_dm):
        g = self.graph
        d = g.node(n)
        low = d["opdef"].lowering
        ins = g.inputs(n)
        out_shape = d["shapes"][0]
        special = low.kind if isinstance(low, Special) else None
        if special == "softmax_ce_grad":
            ax = d["attrs"]["axis"] % len(out_shape)
            self.set_dimmap(ins[0], out_dm)
            self.set_dimmap(ins[1], [p for j, p in enumerate(out_dm) if j != ax])
            self.ce_axis_pos = getattr(self, "ce_axis_pos", {})
            self.ce_axis_pos[n] = out_dm[ax]
        elif isinstance(low, Pointwise) or special == "constant":
            dims = low.input_dims(d["attrs"], [g.shape(e) for e in ins], out_shape) \
                if isinstance(low, Pointwise) and low.input_dims else None
            for k, e in enumerate(ins):
                shape = g.shape(e)
                if not dims and shape == out_shape and len(out_dm) == len(shape):
                    # the same shape: the same places
                    self.set_dimmap(e, out_dm)
                    continue
                pos = dims[k] if dims else _right_aligned(shape, out_shape)
                self.set_dimmap(e, [out_dm[p] if shape[j] == out_shape[p] else None
                                    for j, p in enumerate(pos)])
        elif isinstance(low, Reduction):
            in_shape = g.shape(ins[0])
            axes = sorted(a % len(in_shape) for a in low.axes(d["attrs"], in_shape))
            keep = len(out_shape) == len(in_shape)
            kept = [j for j in range(len(in_shape)) if j not in axes]
            dm = [None] * len(in_shape)
            for k, j in enumerate(kept):
                dm[j] = out_dm[j] if keep else out_dm[k]
            if len(axes) != len(self.col_pos) or (self.kind != "reduce" and self.kind != "matmul"):
                raise NotFusable("reduction axes differ from the group's")
            for j, p in zip(axes, self.col_pos):
                if in_shape[j] != self.domain[p]:
                    raise NotFusable("reduction sizes differ from the group's")
                dm[j] = p
            self.set_dimmap(ins[0], dm)
        elif isinstance(low, View):
            vmap = low.dimmap(d["attrs"], g.shape(ins[0]), out_shape) if low.dimmap else None
            if vmap is None:
                raise NotFusable(f"{g.describe(n)} is not a relabelling of dims")
            in_dm = [None] * len(g.shape(ins[0]))
            for k, j in enumerate(vmap):
                if j is not None and g.shape(ins[0])[j] == out_shape[k]:
                    in_dm[j] = out_dm[k]
            self.set_dimmap(ins[0], in_dm)
        elif isinstance(low, MatMul):
            if list(out_dm) != list(range(len(self.domain))) or self.kind != "matmul":
                raise NotFusable("a matmul must span the whole matmul domain")
        elif special == "gather":
            idx = ins[0]
            self.set_dimmap(idx, out_dm[:-1])
        elif special == "concat":
            for e in ins:
                if e[0] in self.nodes:
                    raise NotFusable("Concat reads its inputs from memory")
                self.concat_dm = getattr(self, "concat_dm", {})
                self.concat_dm[(n, e)] = list(out_dm)
        else:
            raise NotFusable(f"{g.describe(n)} cannot join a fused kernel")

    # -- instructions -------------------------------------------------------------
    def fresh(self):
        self.count += 1
        return f"v{self.count}"

    def tensor(self, entry, role):
        i = self.tensor_index.get(entry)
        if i is not None:
            if self.roles[i] != role:
                self.roles[i] = "inout"
            return i
        self.tensors.append(entry)
        self.roles.append(role)
        self.tensor_index[entry] = len(self.tensors) - 1
        return len(self.tensors) - 1

    def terms(self, entry, dm):
        return tuple((p, j) for j, p in enumerate(dm) if p is not None)

    def load(self, entry):
        if entry in self.value:
            return self.value[entry]
        dm = self.dimmap.get(entry)
        if dm is None:
            raise NotFusable(f"input {entry} has no layout in the domain")
        t = self.tensor(entry, "in")
        name = self.fresh()
        varies = frozenset(p for p in dm if p is not None and self.domain[p] != 1)
        extra = {"dims": tuple(dm)}
        if self.graph.node(entry[0]).get("role") == "random":
            extra["raw"] = True          # the seed's bits: never converted to the compute dtype
        self.instrs.append(Instr("load", name, (t,), extra=extra, varies=varies))
        self.value[entry] = name
        self.varies[name] = varies
        return name

    def emit(self):
        g = self.graph
        for n in self.order:
            d = g.node(n)
            low = d["opdef"].lowering
            ins = g.inputs(n)
            special = low.kind if isinstance(low, Special) else None
            if isinstance(low, MatMul):
                self.emit_dot(n, ins)
                continue
            if isinstance(low, View):
                src = self.load(ins[0])
                self.value[(n, 0)] = src
                continue
            if special == "gather":
                idx = self.load(ins[0])
                w = self.tensor(ins[1], "in")
                name = self.fresh()
                varies = self.varies[idx] | {len(self.domain) - 1}
                self.instrs.append(Instr("gather", name, (idx, w), varies=frozenset(varies),
                                         extra={"last": len(self.domain) - 1}))
                self.value[(n, 0)] = name
                self.varies[name] = frozenset(varies)
                continue
            if special == "concat":
                self.emit_concat(n, ins)
                continue
            args = [self.load(e) for e in ins]
            name = self.fresh()
            if isinstance(low, Reduction):
                varies = self.varies[args[0]] - set(self.col_pos)
                scale = low.scale(d["attrs"], g.shape(ins[0]))
                self.instrs.append(Instr("reduce", name, tuple(args), varies=frozenset(varies),
                                         extra={"combine": low.kind, "scale": scale}))
            elif special == "constant":
                varies = frozenset()
                self.instrs.append(Instr("const", name, (), expr=ops.const(_constant(d)),
                                         origin=_origin(d)))
            elif special == "softmax_ce_grad":
                varies = self.emit_ce_grad(n, name, args, ins)
            else:
                varies = self.emit_pointwise(n, name, args)
            self.value[(n, 0)] = name
            self.varies[name] = frozenset(varies)
        self.emit_stores()

    def emit_pointwise(self, n, name, args):
        """A registry ``Pointwise``: its math over the operands' SSA values (and, for an
        op that depends on its position, its dims' coordinates). Returns what it varies
        along."""
        d = self.graph.node(n)
        varies = frozenset().union(*[self.varies[a] for a in args]) if args else frozenset()
        kw = {}
        if d["opdef"].needs_random or d["opdef"].needs_coords:
            # a random source draws at its own linear index; an index source is one
            kw["coords"], own = _own_coords(self.dimmap[(n, 0)], self.domain)
            varies = varies | own
        attrs = d["attrs"]
        if d["opdef"].dtype_scalars:
            dtype = self.graph.dtype((n, 0))
            attrs = dict(attrs, **{k: saturate_to_dtype(attrs[k], dtype)
                                   for k in d["opdef"].dtype_scalars if k in attrs})
        expr = d["opdef"].lowering.expr(attrs, *[ops.value(a) for a in args], **kw)
        origin = _origin(d)
        if not isinstance(expr, Expr):
            raise TypeError(f"{origin}: its Pointwise math returned "
                            f"{type(expr).__name__}, not an expression of compiler/ir/expr.py")
        if not all(a.op in LEAVES for a in expr.args):   # one operation shares no node
            expr = self.emit_shared(expr, origin)
        self.instrs.append(Instr("expr", name, tuple(args), expr=expr, varies=frozenset(varies),
                                 origin=origin))
        return varies

    def emit_shared(self, expr, origin):
        """Each node ``expr`` uses more than once (``compiler/ir/expr.py: shared_nodes``)
        as an SSA value of its own, computed once; returns ``expr`` reading them."""
        names = {}
        for node in shared_nodes(expr):
            sub = substitute(node, names)
            reads = tuple(dict.fromkeys(value_reads(sub)))
            varies = frozenset().union(*[self.varies[r] for r in reads],
                                       {p for p in coord_reads(sub) if self.domain[p] != 1})
            names[id(node)] = name = self.fresh()
            self.instrs.append(Instr("expr", name, reads, expr=sub, varies=varies,
                                     origin=origin))
            self.varies[name] = varies
        return substitute(expr, names) if names else expr

    def emit_ce_grad(self, n, name, args, ins):
        """SoftmaxOutput's gradient: its math in the vocabulary, and the facts a target
        that scatters the one-hot (cpu) needs. Returns what it varies along."""
        g = self.graph
        d = g.node(n)
        pos = self.ce_axis_pos[n]
        varies = self.varies[args[0]] | self.varies[args[1]] | ({pos} if pos is not None else set())
        a, shape = d["attrs"], g.shape(ins[0])
        classes = shape[a["axis"] % len(shape)]
        ce = {"pos": pos, "classes": classes, "grad_scale": a["grad_scale"],
              "smooth_alpha": a["smooth_alpha"], "use_ignore": a["use_ignore"],
              "ignore_label": a["ignore_label"]}
        coord = ops.coord(pos) if pos is not None else ops.const(0)
        expr = d["opdef"].lowering.expr(a, *[ops.value(x) for x in args], coord=coord,
                                        classes=classes)
        self.instrs.append(Instr("expr", name, tuple(args), expr=expr,
                                 varies=frozenset(varies), extra={"ce_grad": ce},
                                 origin=_origin(d)))
        return varies

    def emit_concat(self, n, ins):
        """Concat: each input read at the axis coordinate shifted by its start."""
        g = self.graph
        axis = g.node(n)["attrs"]["dim"] % len(g.node(n)["shapes"][0])
        out_dm = self.concat_dm[(n, ins[0])]
        pos = out_dm[axis]
        parts, start = [], 0
        for e in ins:
            size = g.shape(e)[axis]
            t = self.tensor(e, "in")
            name = self.fresh()
            varies = frozenset(p for p in out_dm if p is not None and self.domain[p] != 1)
            self.instrs.append(Instr("load", name, (t,), varies=varies,
                                     extra={"dims": tuple(out_dm), "shift": (pos, start, size)}))
            parts.append((name, start + size))
            start += size
        # each position reads the part whose range holds it, found by halving the parts
        # (a select tree of depth log2(parts): an RNN's 300 steps joined along time made a
        # chain 300 deep, past Python's recursion limit); ``concat`` says the same for
        # targets that join whole arrays (cpu: torch.cat)
        def select(lo, hi):
            if hi - lo == 1:
                return ops.value(parts[lo][0])
            mid = (lo + hi) // 2
            return ops.where(ops.coord(pos) < parts[mid - 1][1], select(lo, mid),
                             select(mid, hi))
        expr = select(0, len(parts))
        out = self.fresh()
        self.instrs.append(Instr("expr", out, tuple(p for p, _ in parts), expr=expr,
                                 varies=frozenset(p for p in out_dm if p is not None and self.domain[p] != 1),
                                 extra={"concat": (pos, tuple(p for p, _ in parts))},
                                 origin=_origin(g.node(n))))
        self.value[(n, 0)] = out
        self.varies[out] = self.instrs[-1].varies

    def drop_dead(self):
        """Remove instructions nothing stores or reads (a backward op's unused
        operand, say), then the tensors only they read: no wasted loads."""
        import re
        used = {st.value for st in self.stores}
        for st in self.stores:
            for term in st.terms:
                if term[0] == "index":
                    used.add(term[1])
        keep = []
        for ins in reversed(self.instrs):
            if ins.out not in used:
                continue
            keep.append(ins)
            used.update(a for a in ins.args if isinstance(a, str))
            used.update(value_reads(ins.expr))
        self.instrs = list(reversed(keep))
        live = set()
        for ins in self.instrs:
            if ins.kind in ("load", "dot", "gather"):
                live.update(a for a in ins.args if isinstance(a, int))
        live.update(st.tensor for st in self.stores)
        remap, tensors, roles = {}, [], []
        for i, (t, r) in enumerate(zip(self.tensors, self.roles)):
            if i in live:
                remap[i] = len(tensors)
                tensors.append(t)
                roles.append(r)
        for ins in self.instrs:
            if ins.kind in ("load", "dot", "gather"):
                ins.args = tuple(remap[a] if isinstance(a, int) else a for a in ins.args)
        for st in self.stores:
            st.tensor = remap[st.tensor]
        self.tensors, self.roles = tensors, roles

    def emit_dot(self, n, ins):
        g = self.graph
        d = g.node(n)
        low = d["opdef"].lowering
        a, b = ins
        for operand in (a, b):
            if base_node(g, operand[0]) in self.nodes:
                raise NotFusable("matmul operands are read from memory")
        ta, tb = low.transpose_a(d["attrs"]), low.transpose_b(d["attrs"])
        name = self.fresh()
        ta_i = self.tensor(a, "in")
        tb_i = self.tensor(b, "in")
        a_shape, b_shape = g.shape(a), g.shape(b)
        if low.batched:
            k = a_shape[-2] if ta else a_shape[-1]
        else:
            k = dot_dims(a_shape, b_shape, ta, tb)[1]
        self.instrs.append(Instr("dot", name, (ta_i, tb_i), varies=frozenset(
            p for p in range(len(self.domain)) if self.domain[p] != 1),
            extra={"ta": ta, "tb": tb, "K": k, "a_shape": tuple(a_shape),
                   "b_shape": tuple(b_shape)}))
        self.value[(n, 0)] = name
        self.varies[name] = self.instrs[-1].varies

    def emit_stores(self):
        for entry in self.outside:
            value = self.value.get(entry)
            if value is None:
                continue
            dm = self.dimmap.get(entry)
            if dm is None:
                raise NotFusable(f"output {entry} has no layout")
            covered = {p for p in dm if p is not None}
            if not self.varies[value] <= covered:
                raise NotFusable(f"output {entry} would need a reduction to store")
            if self.kind == "matmul" and not set(self.grid_pos) <= covered:
                raise NotFusable("a matmul output must keep the batch axis")
            t = self.tensor(entry, "out")
            self.stores.append(Store(value, t, self.terms(entry, dm)))


def _own_coords(dm, domain):
    """For a random or index source placed by dimmap ``dm``: per dim of its shape the
    coordinate (``ops.coord``) of the domain position it runs along (None where it
    does not vary), and the positions it varies along."""
    pos = [p if p is not None and domain[p] != 1 else None for p in dm]
    return ([None if p is None else ops.coord(p) for p in pos],
            frozenset(p for p in pos if p is not None))


def _origin(d):
    """The operator and node an instruction computes, as errors name them."""
    return f"operator '{d['op']}' (node '{d.get('name', '?')}')"


def base_node(graph, n):
    """The node whose memory a (possibly view) value lives in."""
    while graph.node(n)["op"] != "null" and isinstance(graph.node(n)["opdef"].lowering, View):
        n = graph.inputs(n)[0][0]
    return n


def special_kind(graph, n):
    """The ``Special`` lowering kind of node ``n`` (``None`` for other lowerings)."""
    low = graph.node(n)["opdef"].lowering
    return low.kind if isinstance(low, Special) else None


def _constant(d) -> float:
    value = d["attrs"].get("value")
    if value is None:
        value = 1.0 if d["op"] in ("ones", "_ones") else 0.0
    return float(value)


def build_fused_program(graph, nodes, outside_uses) -> TileProgram:
    """The tile program of a pointwise, reduce, matmul or scatter group
    (``build.py: build_tile_program`` picks the builder of each kernel family).

    Raises
    ------
    NotFusable
        When the nodes cannot share one domain, or a store would be a race.
    """
    b = ProgramBuilder(graph, nodes, [e for e in outside_uses])
    kind, anchor, sink = b.choose_domain()
    b.kind = kind
    if kind == "scatter":
        return _scatter_program(graph, next(iter(nodes)))
    b.assign_dimmaps(kind, anchor, sink)
    b.emit()
    b.drop_dead()
    reduce_cols = any(i.kind == "reduce" for i in b.instrs)
    if kind == "matmul" and reduce_cols:
        n_cols = prod(b.domain[p] for p in b.col_pos)
        if n_cols > 1024:
            raise NotFusable("row reduction over more than 1024 matmul columns")
    if not b.stores:
        raise NotFusable("group stores nothing")
    return TileProgram(kind, b.domain, b.grid_pos, b.row_pos, b.col_pos, b.instrs, b.stores,
                       b.tensors, b.roles, reduce_cols, frozenset(nodes))


def _scatter_program(graph, n) -> TileProgram:
    """Embedding's weight gradient: ``out[idx[i], :] += dy[i, :]`` with atomics."""
    dy, idx = graph.inputs(n)[:2]
    dy_shape = graph.shape(dy)
    domain = tuple(dy_shape)
    nd = len(domain)
    instrs = [Instr("load", "v1", (1,), extra={"dims": tuple(range(nd - 1))},
                    varies=frozenset(range(nd - 1))),
              Instr("load", "v2", (0,), extra={"dims": tuple(range(nd))},
                    varies=frozenset(range(nd)))]
    stores = [Store("v2", 2, (("index", "v1"), (nd - 1, 1)), atomic=True)]
    return TileProgram("scatter", domain, (), tuple(range(nd - 1)), (nd - 1,), instrs, stores,
                       [dy, idx, (n, 0)], ["in", "in", "out"], False, frozenset([n]))
