"""Render tile programs for the ``cpu`` target: Python functions of ATen calls.

The TileProgram that ``codegen.py`` renders into a Triton kernel is lowered by
``cpu_lower.py`` into a list of torch calls, and rendered here, through
``templates/cpu_kernel.py.j2``, into a module with one function,
``bind(*flat_arguments) -> run``: ``bind`` makes, once per executor, the strided
views of the planned flat buffers that the program reads and writes; ``run()`` is
a closure making the calls.

Before rendering, :func:`plan` decides where each call writes. A Triton kernel
loads early and stores at the end; here the call that produces a stored value
writes straight into the destination view (``out=``) unless a later call still
reads a view of the same array, and a temporary that dies at a call is reused in
place, so a chain of pointwise calls allocates at most one temporary.
"""
from __future__ import annotations

import re

from .codegen import Rendered, _env
from .cpu_lower import lower, mergeable
from .dtypes import TORCH
from .kernel_ir import TileProgram
from .ops.registry import lit, prod


def plan(ops, stores):
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
    # the last call reading a view of each slot: one sweep, not a scan of the calls
    # after each store's producer (quadratic in a long chain's stores)
    last_view_read = {}
    for i, op in enumerate(ops):
        for a in list(op.args) + list(op.reads):
            if a.kind == "view":
                last_view_read[a.slot] = i
    left = []
    done = set()
    for v, name, slot, shape, flips, matrix, narrow in stores:
        root = owner.get(id(v))
        if id(v) in done or flips or narrow:
            left.append((v, name, flips))
            continue
        if root is None or v.dtype != "f" or v.shape != shape or root.dest is not None or \
                root.kind in ("cast", "gather") or \
                last_view_read.get(slot, -1) >= index[id(root)] or \
                (root.mm2d and root.kind == "mm" and matrix is None):
            left.append((v, name, flips))
            continue
        # a matmul on more than two dims writes the destination's 2-D view
        root.dest = matrix if root.mm2d and root.kind == "mm" else name
        root.dest_value = name
        done.add(id(v))
        v.name = name
    return left


def _lines(ops, left, cdt="torch.float32"):
    """The body of ``run()`` (``cdt``: the torch dtype ``f`` values are held in)."""
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
                out.append(f"{op.out.name} = torch.empty({op.out.shape}, dtype={cdt})")
                target = op.out.name
            out.extend(line.format(out=target, **args) for line in op.fmt.split("\n"))
        elif op.kind == "addmm":
            out.append(op.fmt.format(**args))
        elif target is None and ", out={out}" not in op.fmt:   # an out= overload only
            dtype = {"f": cdt, "b": "torch.bool", "i": "torch.int32"}[op.out.dtype]
            out.append(f"{op.out.name} = torch.empty({op.out.shape}, dtype={dtype})")
            out.append(op.fmt.format(out=op.out.name, **args))
        elif target is None:
            call = op.fmt.replace(", out={out}", "").format(**args)
            out.append(f"{op.out.name} = {call}")
            if op.mm2d:
                out.append(f"{op.out.name} = {op.out.name}.view({op.out.shape})")
        else:
            out.append(_method_form(op, args, target) or op.fmt.format(out=target, **args))
        if op.dest is not None:
            target = op.dest_value           # later calls read the domain-shaped view
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


# Elementwise calls with an in-place tensor method (``x.mul_(y)`` costs less host time
# than ``torch.mul(x, y, out=x)``, which matters at small shapes); the commutative ones
# may take the operand written in place from either side.
_METHODS = {"add", "sub", "mul", "div", "clamp_min", "clamp_max",
            "exp", "log", "abs", "sqrt", "sigmoid", "tanh", "neg"}
_COMMUTATIVE = {"add", "mul"}


def _method_form(op, args, target):
    """``target.fn_(other)`` for an in-place elementwise call, or None."""
    if op.inplace is None or op.kind != "ew" or op.fn not in _METHODS or \
            not op.fmt.startswith(f"torch.{op.fn}({{a0}}") or not op.fmt.endswith(", out={out})"):
        return None
    k = next(i for i, a in enumerate(op.args) if a is op.inplace)
    inner = op.fmt[len(f"torch.{op.fn}("):-len(", out={out})")]
    rest = inner.split(", ", 1)[1] if ", " in inner else ""
    if k == 0:
        return f"{target}.{op.fn}_({rest.format(**args)})"
    if k == 1 and op.fn in _COMMUTATIVE and rest == "{a1}":
        return f"{target}.{op.fn}_({args['a0']})"
    return None


# ------------------------------------------------------------------------------ entry points

def render_cpu(prog: TileProgram, strides: list, shapes: list, slots: list) -> Rendered:
    """Python source of ``prog`` for the cpu target.

    ``strides[t]`` / ``slots[t]`` list, per destination of tensor ``t``, its
    element strides and the array it lives in (views of one array may overlap;
    views of two never do).
    """
    if prog.kind == "pool":      # ATen pooling on the explicitly padded data
        from .codegen_pool import render_pool_cpu
        return render_pool_cpu(prog, strides, shapes, slots)
    params = [(t, d) for t in range(len(prog.tensors)) for d in range(len(strides[t]))]
    if prog.kind == "scatter":
        bind, body = _scatter(prog, strides, shapes)
    elif prog.kind == "conv":    # an ATen convolution call, then its epilogue
        from .codegen_conv import render_conv_cpu, summary as conv_summary
        bind, body = render_conv_cpu(prog, strides, shapes, slots)
    else:
        bind, ops, stores = lower(prog, strides, shapes, slots)
        body = _lines(ops, plan(ops, stores), TORCH[prog.compute_dtype])
    m = prod(prog.domain[p] for p in prog.row_pos) if prog.kind != "scatter" else 0
    n = prod(prog.domain[p] for p in prog.col_pos) if prog.kind != "scatter" else 0
    summary = (conv_summary(prog.instrs[0].extra) if prog.kind == "conv" else
               f"{prog.kind} over domain {tuple(int(x) for x in prog.domain)}")
    names = [f"p{t}_{d}" for t, d in params]
    source = _env.get_template("cpu_kernel.py.j2").render(k={
        "params": ", ".join(names), "summary": summary,
        "bind_lines": bind, "body_lines": body or ["pass"],
        "run_params": _run_params(names, bind, body)})
    return Rendered(source, params, m, n, 0, prog.kind)


_ASSIGNED = re.compile(r"(\w+) = ")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _run_params(params, bind, body) -> str:
    """``name=name`` for each name ``run()`` reads from ``bind()`` (its arguments and
    what its lines assign), in the order bind made them: run() takes them as default
    arguments (``templates/cpu_kernel.py.j2`` says why)."""
    made = list(params)
    for line in bind:
        m = _ASSIGNED.match(line)
        if m:
            made.append(m.group(1))
    used = set(_NAME.findall("\n".join(body)))
    seen, out = set(), []
    for name in made:
        if name in used and name not in seen:
            seen.add(name)
            out.append(f"{name}={name}")
    return ", ".join(out)


def _scatter(prog, strides, shapes):
    """Embedding's weight gradient: ``out.index_add_(0, idx, dy)`` (rows accumulate)."""
    dy_t, idx_t, out_t = 0, 1, 2
    domain = tuple(int(x) for x in prog.domain)
    rows_dy = prod(domain[:-1])
    merged = mergeable(domain[:-1], strides[dy_t][0][:-1])
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
    if prog.dtypes and prog.dtypes[dy_t] != prog.dtypes[out_t]:
        dy = f"{dy}.to({TORCH[prog.dtypes[out_t]]})"
    body = [f"o.index_add_(0, ix.reshape(-1).to(torch.int64).clamp_(0, {rows - 1}), {dy})"]
    return bind, body


def render_cpu_fill(numel: int, value: float = 0.0) -> Rendered:
    source = _env.get_template("cpu_kernel.py.j2").render(k={
        "params": "p0_0", "summary": f"fill {int(numel)} elements with {lit(value)}",
        "bind_lines": [], "body_lines": [f"p0_0.fill_({lit(value)})"]})
    return Rendered(source, [(0, 0)], int(numel), 1, 0, "fill")
