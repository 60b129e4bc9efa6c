"""The compiled artifact: a Program is data.

It lists the kernel launches of the forward and backward phases (kernel
source hash, the arrays each pointer argument reads or writes, tile sizes
and grid per target), the internal buffer sizes and the bindings of inputs,
outputs, gradients and auxiliary states by name. It serialises to JSON and
loads without re-running any pass.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import marshal
import operator
from dataclasses import dataclass, field

from ..cpu.render import render_cpu, render_cpu_fill
from ..triton.codegen import render_fill, tile_config
from ..triton.render import render
from ..ir.dtypes import ITEMSIZE, fp32_matmul_precision
from ..ir.tile_program import Instr, Store, TileProgram
from ..ops.registry import prod


@dataclass
class Launch:
    """One launch: a generated kernel (``kind`` ``kernel``), or an ATen call (``kind``
    ``extern``: ``kernel`` is ``extern:<operator>``, no source file exists, and
    ``config`` holds what :func:`runtime.launcher.bind_launches` needs to call the
    registry entry's ``Extern.run``: ``op``, ``attrs`` (mxnet's strings),
    ``inputs`` (how many of ``args`` are inputs), ``outputs`` (the output index each
    further arg receives) and ``views`` (``[shape, strides]`` of each arg over its flat
    slice))."""
    kernel: str                  # sha256 of the source (first 24 hex digits)
    phase: str                   # fwd | bwd
    args: list                   # [[slot kind, slot name/index, element offset, numel], ...]
    config: dict                 # BM, BN, BK, num_warps, grid
    summary: str = ""
    bytes_read: int = 0
    bytes_written: int = 0
    kind: str = "kernel"         # kernel | extern

    @property
    def is_extern(self) -> bool:
        return self.kind == "extern"


@dataclass
class Program:
    """A compiled symbol for one set of shapes, mode and target."""
    target: str
    launches: list
    buffers: list                # element counts of internal buffers
    seed_buffer: object          # the buffer whose bits the runtime sets to a new random
                                 # seed before each forward (compiler/ops/nn.py), or None
    arg_names: list
    aux_names: list
    grad_names: list
    output_names: list
    output_shapes: list
    head_grads: dict             # head index (str) -> head_grad variable name
    arg_shapes: dict
    aux_shapes: dict
    groups: list = field(default_factory=list)   # op names per launch, for inspect
    stats: dict = field(default_factory=dict)
    buffer_dtypes: list = field(default_factory=list)   # per internal buffer
    arg_dtypes: dict = field(default_factory=dict)      # argument name -> dtype name
    aux_dtypes: dict = field(default_factory=dict)
    output_dtypes: list = field(default_factory=list)
    held: list = field(default_factory=list)    # [element count, dtype] per value an
                                                # extern keeps by reference (slot "held")

    def launches_in(self, phase):
        return [ln for ln in self.launches if ln.phase == phase]

    def kernel_launches(self):
        """The launches that run a generated kernel (every one but the extern launches)."""
        return [ln for ln in self.launches if not ln.is_extern]

    def to_json(self) -> str:
        # the fields as they are (json writes lists, tuples and dicts alike): asdict's
        # deep copy of every launch's argument lists cost more than the writing
        doc = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        doc["launches"] = [{f.name: getattr(ln, f.name) for f in dataclasses.fields(ln)}
                           for ln in self.launches]
        return json.dumps(doc, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "Program":
        doc = json.loads(text)
        doc["launches"] = [Launch(**ln) for ln in doc["launches"]]
        return Program(**doc)


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def build_program(graph, groups, plan, target: str, sources: dict) -> Program:
    """Render every group and assemble the Program; fills ``sources`` (hash -> text)."""
    launches, group_ops = [], []
    layouts = plan["layouts"]
    cpu = target == "cpu"
    fp32_dot = fp32_matmul_precision(target)
    for grp in groups:
        prog = grp["program"]
        strides = [[lay[3] for lay in layouts[e]] for e in prog.tensors]
        shapes = [layouts[e][0][2] for e in prog.tensors]
        slots = [[tuple(lay[0]) for lay in layouts[e]] for e in prog.tensors]
        if prog.kind == "extern":
            launches.append(_extern_launch(prog, layouts, grp["phase"]))
            group_ops.append([graph.node(n)["op"] for n in grp["nodes"]])
            continue
        if all(prod(shapes[t]) == 0 for t, role in enumerate(prog.tensor_roles)
               if role != "in"):
            # it writes no element (a zero-size value, NumPy shape semantics): no launch,
            # so no kernel meets a zero-size domain's index math
            continue
        rendered = _render_once(prog, strides, shapes, slots, target, fp32_dot)
        if prog.kind == "scatter":
            out = layouts[prog.tensors[2]][0]
            dtype = prog.dtypes[2]
            fill = render_cpu_fill(prod(out[2])) if cpu else \
                render_fill(prod(out[2]), dtype=dtype)
            launches.append(_launch(fill, [[out[0][0], out[0][1], out[1], prod(out[2])]],
                                    grp["phase"], target, sources, 0,
                                    ITEMSIZE[dtype] * prod(out[2]), False))
            group_ops.append(["_fill"])
        args = []
        read = written = 0
        for t, d in rendered.params:
            slot, offset, shape, st = layouts[prog.tensors[t]][d]
            extent = _extent(shape, st)
            args.append([slot[0], slot[1], int(offset), int(extent)])
            nbytes = ITEMSIZE[prog.dtypes[t]] * prod(shape)
            if prog.tensor_roles[t] == "in":
                read += nbytes
            else:
                written += nbytes
                if prog.tensor_roles[t] == "inout":
                    read += nbytes
        launch = _launch(rendered, args, grp["phase"], target, sources, read, written,
                         prog.reduce_cols)
        launches.append(launch)
        group_ops.append(sorted(graph.node(n)["op"] for n in grp["nodes"]))
    return launches, group_ops


# Rendered kernels by what decides their source (see _render_key): an unrolled RNN's
# steps, and every bucket of it, render the same few kernels hundreds of times.
_RENDERED: dict = {}
_RENDERED_MAX = 4096
_RENDER_KEY_MAX_INSTRS = 2048
# What the key reads of a program, an instruction and a store (one C call each); a
# field added to one of them is in the key unless it is named here as left out.
_PROGRAM_FIELDS = tuple(f.name for f in dataclasses.fields(TileProgram)
                        if f.name not in ("tensors", "nodes", "instrs", "stores"))
_program_fields = operator.attrgetter(*_PROGRAM_FIELDS)
_INSTR_FIELDS = tuple(f.name for f in dataclasses.fields(Instr) if f.name != "origin")
_instr_fields = operator.attrgetter(*_INSTR_FIELDS)
_EXPR_AT = _INSTR_FIELDS.index("expr")
_store_fields = operator.attrgetter(*(f.name for f in dataclasses.fields(Store)))


def _render_once(prog, strides, shapes, slots, target, fp32_dot):
    """``render`` / ``render_cpu`` of a group, or the source an identical group got.

    Groups of thousands of instructions render directly: such a kernel seldom has a
    twin, and its key would cost a tenth of its rendering."""
    if len(prog.instrs) > _RENDER_KEY_MAX_INSTRS:
        return _render(prog, strides, shapes, slots, target, fp32_dot)
    key = _render_key(prog, strides, shapes, slots, target, fp32_dot)
    rendered = _RENDERED.get(key)
    if rendered is None:
        rendered = _render(prog, strides, shapes, slots, target, fp32_dot)
        if len(_RENDERED) >= _RENDERED_MAX:
            _RENDERED.pop(next(iter(_RENDERED)))
        _RENDERED[key] = rendered
    return rendered


def _render(prog, strides, shapes, slots, target, fp32_dot):
    if target == "cpu":
        return render_cpu(prog, strides, shapes, slots)
    return render(prog, strides, shapes, fp32_dot)


def _render_key(prog, strides, shapes, slots, target, fp32_dot):
    """Everything a renderer reads: every field of the tile program but which graph
    entries its tensors are (``tensors``, ``nodes``: renderers use their count only)
    and which nodes its instructions compute (``origin``: named in errors only), the
    layouts, and which destinations share an array (slots by kind and first
    appearance: views of one array may overlap, the cpu plan must know)."""
    # an instruction's origin names its node for errors only: a twin group of another
    # node (Inception-BN's 69 BatchNorms) renders the same source
    instrs = []
    for ins in prog.instrs:
        fields = _instr_fields(ins)
        expr = fields[_EXPR_AT]
        if expr is not None:        # an expression tree: its text
            fields = fields[:_EXPR_AT] + (repr(expr),) + fields[_EXPR_AT + 1:]
        instrs.append(fields)
    first = {}
    same = [[(slot[0], first.setdefault(slot, len(first))) for slot in per] for per in slots]
    key = (target, fp32_dot, _program_fields(prog), [_store_fields(st) for st in prog.stores],
           instrs, len(prog.tensors), strides, shapes, same)
    try:
        # marshal writes numbers, strings and containers exactly, in C (half repr's
        # time), so different keys never give the same bytes; version 2 writes each
        # object whole, not as a reference to one seen before, so the bytes do not
        # depend on how the key's objects are shared (a string interned in one twin
        # and not in the other still differs: a second render, at worst)
        return marshal.dumps(key, 2)
    except ValueError:              # a value marshal cannot write (a numpy scalar ...)
        return repr(key)


def _launch(rendered, args, phase, target, sources, read, written, reduce_cols):
    key = source_hash(rendered.source)
    sources[key] = rendered.source
    cfg = tile_config(rendered, target, reduce_cols)
    if rendered.consts:          # cpu target: bind()'s first argument
        cfg = dict(cfg, consts=list(rendered.consts))
    return Launch(key, phase, args, cfg, rendered.summary or _summary_line(rendered.source),
                  read, written)


def _extern_launch(prog, layouts, phase) -> Launch:
    """The launch of an extern group (``compiler/ir/extern.py``): every layout of each
    stored output is written (a head stored to two arrays gets both)."""
    extra = prog.instrs[0].extra
    n_in = len(prog.instrs[0].args)
    args, views, outputs = [], [], []
    read = written = 0
    for t, entry in enumerate(prog.tensors):
        for slot, offset, shape, st in layouts[entry][:1 if t < n_in else None]:
            args.append([slot[0], slot[1], int(offset), int(_extent(shape, st))])
            views.append([[int(x) for x in shape], [int(x) for x in st]])
            nbytes = ITEMSIZE[prog.dtypes[t]] * prod(shape)
            if t < n_in:
                read += nbytes
            else:
                outputs.append(int(extra["stored"][t - n_in]))
                written += nbytes
    config = {"op": extra["op"], "attrs": dict(extra["attrs"]), "inputs": n_in,
              "outputs": outputs, "views": views}
    shapes = ", ".join(str(tuple(v[0])) for v in views[:n_in])
    return Launch(f"extern:{extra['op']}", phase, args, config,
                  f"extern {extra['op']} (ATen) of {shapes}", read, written, kind="extern")


def _summary_line(source: str) -> str:
    """The comment line right under ``def kernel(`` / ``def bind(`` (what it computes)."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("def kernel(", "def bind(")) and i + 1 < len(lines):
            return lines[i + 1].strip().lstrip("# ")
    return ""


def _extent(shape, strides):
    """Elements from the view's first element to its last (+1), for slicing the base."""
    if 0 in shape:
        return 0
    span = 1          # one pass: the steps forwards and backwards, each (d - 1) * |s|
    for d, s in zip(shape, strides):
        span += (d - 1) * (s if s > 0 else -s)
    return span
