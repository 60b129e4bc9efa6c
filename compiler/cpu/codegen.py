"""Where each torch call of a cpu kernel writes, and the calls' Python source.

A TileProgram is lowered by ``lower.py`` into a list of torch calls; ``render.py``
renders the calls this file writes, through ``templates/cpu_kernel.py.j2``, into a
module with one function, ``bind(*flat_arguments) -> run``.

Before rendering, :func:`plan` decides where each call writes. A Triton kernel
loads early and stores at the end; here the call that produces a stored value
writes straight into the destination view (``out=``) unless a later call still
reads a view of the same array, and a temporary that dies at a call is reused in
place, so a chain of pointwise calls allocates at most one temporary.
"""
from __future__ import annotations

from ..ops.registry import lit


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


def call_lines(ops, left, cdt="torch.float32"):
    """The body of ``run()``: one line (or a few) per call.

    Parameters
    ----------
    ops : list
        The lowered calls, after :func:`plan` chose where each writes.
    left : list
        The stores :func:`plan` left for the end of the kernel (copies).
    cdt : str
        The torch dtype values are computed in.

    Returns
    -------
    list of str
    """
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
