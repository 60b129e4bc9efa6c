"""The cpu target's third form: a bound launch list as TorchScript, run without the GIL.

A cpu kernel (``templates/cpu_kernel.py.j2``) is ``bind(...) -> run``: ``run()`` reads
everything it touches from its default arguments (views, numbers, ATen ops) and makes
its torch calls from Python. Each call releases and retakes the interpreter lock; on a
busy machine the thread holding it is often descheduled, and the other thread waits.
Two row-split halves (``runtime/executor_rowsplit.py``) lose part of their share of
the cores to those handoffs and to the Python join around them
(``benchmarks/lock_share.py`` measures the first).

:func:`phase_source` writes the runs of one bound launch list as one TorchScript
function ``part(T: List[Tensor])``: each run's body in order, its default arguments
replaced by what they hold (a tensor by ``T[j]``, a number, string, dtype or list by
its literal, an op by its ``torch.ops`` name; TorchScript picks the overload by the
arguments, as the Python call did) and its locals renamed per launch. An extern
launch (a Python closure over its operator's ``run``) is written from its registry
entry's TorchScript form (``Extern.script``; oneDNN's LSTM layer and its gradient have
one), where it has one. A body that reads a global other than ``torch`` and a few
builtins, a default of another kind, or an extern without that form is refused with
the reason: the list then runs from Python as before.

:func:`parts_function` compiles the parts' sources once per process and runs one list
per part, all but the first on torch's inter-op threads (``torch.jit.fork``), the first
on the caller's, then waits for them: a whole row-split phase in three calls (fork,
the caller's part, the wait), no interpreter lock held while the parts run.
:func:`checked_parts` runs a phase both ways once (the Python runs on the arrays, the
script on a replica of them) and keeps the script only where it gives the Python runs'
numbers.

torch's inter-op threads keep the intra-op thread count they started with (there is
no call to set it from TorchScript). A row-split run makes the first fork of the
process with one thread set, so they start with one, as the halves want; in a program
that used those threads earlier at more, a forked half runs a team of that size, and
the check still compares every number.
"""
from __future__ import annotations

import ast
import copy
import math
import threading

import torch

__all__ = ["NotScriptable", "ScriptDiffers", "checked_parts", "parts_function", "phase_source"]

_BUILTINS = {"torch", "float", "int", "bool", "len", "range", "min", "max", "abs"}
_RUN_DEFS = {}           # kernel module name -> its parsed run() definition
_COMPILED = {}           # source -> its compiled parts function
_LOCK = threading.Lock()


class NotScriptable(Exception):
    """A launch list that cannot run as TorchScript; the message says which launch and why.
    ``ran``: whether the phase has run all the same (:class:`ScriptDiffers`)."""

    ran = False


class ScriptDiffers(NotScriptable):
    """A script whose numbers differ from its lists' Python runs; the phase has run (the
    arrays hold the Python runs' results)."""

    ran = True


def _run_def(run):
    """The ``ast.FunctionDef`` of a cpu kernel's ``run()``, parsed from its module's source."""
    g = getattr(run, "__globals__", None) or {}
    loader = g.get("__loader__")
    if getattr(run, "__name__", None) != "run" or "bind" not in g or \
            not hasattr(loader, "get_data") or not getattr(loader, "path", None):
        return None
    name = g.get("__name__")
    fdef = _RUN_DEFS.get(name)
    if fdef is None:
        tree = ast.parse(loader.get_data(loader.path).decode())
        bind = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and
                     n.name == "bind"), None)
        fdef = next((n for n in getattr(bind, "body", ()) if isinstance(n, ast.FunctionDef)
                     and n.name == "run"), None)
        if fdef is None:
            return None
        _RUN_DEFS[name] = fdef
    return fdef


def _literal(value):
    """An expression for a non-tensor default argument, or None where it has none."""
    if value is None or isinstance(value, (bool, int, str)):
        return ast.Constant(value)
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return ast.Call(ast.Name("float", ast.Load()), [ast.Constant(repr(value))], [])
        return ast.Constant(value)
    if isinstance(value, (tuple, list)):
        items = [_literal(v) for v in value]
        return None if any(i is None for i in items) else ast.List(items, ast.Load())
    if isinstance(value, (torch.dtype, torch.memory_format)):
        return ast.parse(str(value), mode="eval").body
    if isinstance(value, torch._ops.OpOverload):
        value = value.overloadpacket
    if isinstance(value, torch._ops.OpOverloadPacket):
        ns, name = value._qualified_op_name.split("::")
        return ast.parse(f"torch.ops.{ns}.{name}", mode="eval").body
    return None


def phase_source(runs):
    """``(source, tensors, opaque)``: the runs of a bound cpu launch list as the
    TorchScript function ``part(T: List[Tensor])``, the tensors to call it with, and
    the indices of those an extern fills only in part (its workspace: see
    :func:`checked_parts`).

    Parameters
    ----------
    runs : list of callable
        The ``run()`` functions of cpu kernels (``runtime.launcher.bind_launches``).

    Raises
    ------
    NotScriptable
        Where a launch is not a cpu kernel's ``run()``, or its body or arguments have no
        TorchScript form; the message names the launch.
    """
    tensors, index, lines, helpers = [], {}, [], []

    def name_of(value):
        j = index.setdefault(id(value), len(tensors))
        if j == len(tensors):
            tensors.append(value)
        return f"t{j}"
    grad_mode, opaque = False, set()
    for i, run in enumerate(runs):
        if getattr(run, "extern", None) is not None:
            helper, grad, partial = _extern_lines(i, run.extern, name_of, lines)
            helpers.append(helper)
            grad_mode |= grad
            opaque |= partial
            continue
        fdef = _run_def(run)
        if fdef is None:
            raise NotScriptable(f"launch {i} ({getattr(run, '__qualname__', run)}) is not a "
                                f"generated cpu kernel")
        names = [a.arg for a in fdef.args.args]
        values = run.__defaults__ or ()
        if len(values) != len(names) or fdef.args.vararg or fdef.args.kwarg:
            raise NotScriptable(f"launch {i}: run() takes arguments bind() did not give")
        subst = {}
        for name, value in zip(names, values):
            if isinstance(value, torch.Tensor):
                subst[name] = ast.Name(name_of(value), ast.Load())
            else:
                expr = _literal(value)
                if expr is None:
                    raise NotScriptable(f"launch {i}: argument {name} is a "
                                        f"{type(value).__name__}")
                subst[name] = expr
        local = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)
                 and isinstance(n.ctx, ast.Store)}
        lines.append(f"    # launch {i}")
        for stmt in fdef.body:
            stmt = _Rename(i, subst, local).visit(copy.deepcopy(stmt))
            lines.extend("    " + ln for ln in ast.unparse(ast.fix_missing_locations(stmt))
                         .splitlines())
    head = [_GRAD_MODE] if grad_mode else []
    head += helpers + ["def part(T: List[Tensor]):"]
    head += [f"    t{j} = T[{j}]" for j in range(len(tensors))]
    return "\n".join(head + lines + ["    return None", ""]), tensors, frozenset(opaque)


_GRAD_MODE = "# runs with grad mode on"     # a source's first line, where an extern needs it
_WIDE = (torch.float16, torch.bfloat16)


def _extern_lines(i, extern, name_of, lines):
    """An extern launch's call in ``part()`` (appended to ``lines``) and its helper's
    definition, from its operator's ``Extern.script``; ``(helper, grad_mode, opaque)``
    (``opaque``: the tensor indices of the outputs it fills in part)."""
    op, lowering, attrs, ins, outs, held = extern
    form = getattr(lowering, "script", None)
    if form is None:
        raise NotScriptable(f"launch {i}: the extern operator {op} has no TorchScript form")
    views = [v for v, _ in ins] + [v for _, (v, _) in outs]
    if any(f for _, f in ins) or any(f for _, (_, f) in outs) or \
            any(v.dtype in _WIDE for v in views):
        raise NotScriptable(f"launch {i}: the extern operator {op} reads reversed or "
                            f"half-precision views")
    source, grad, partial = form(attrs, [tuple(v.shape) for v, _ in ins])
    helper = source.replace("def extern(", f"def extern{i}{_PART}(", 1)
    args = ", ".join(name_of(v) for v, _ in ins)
    lines.append(f"    # launch {i}: extern {op}")
    lines.append(f"    r_l{i} = extern{i}{_PART}([{args}])")
    # a value kept by reference takes the result's storage (runtime/launcher.py)
    lines.extend(f"    {name_of(v)}.{'set_' if k in held else 'copy_'}(r_l{i}[{k}])"
                 for k, (v, _) in outs)
    return helper, grad, {int(name_of(v)[1:]) for k, (v, _) in outs if k in partial}


_PART = "__p"       # in a helper's name, replaced per part by parts_function


class _Rename(ast.NodeTransformer):
    """One run's body as part of ``part()``: defaults substituted, locals suffixed."""

    def __init__(self, i, subst, local):
        self.i, self.subst, self.local = i, subst, local

    def visit_Name(self, node):
        if node.id in self.subst:
            if not isinstance(node.ctx, ast.Load):
                raise NotScriptable(f"launch {self.i}: run() assigns its argument {node.id}")
            return ast.copy_location(copy.deepcopy(self.subst[node.id]), node)
        if node.id in self.local:
            return ast.copy_location(ast.Name(f"{node.id}_l{self.i}", node.ctx), node)
        if node.id not in _BUILTINS:
            raise NotScriptable(f"launch {self.i}: run() reads the global {node.id}")
        return node

    def _refuse(self, node):
        raise NotScriptable(f"launch {self.i}: run() has a {type(node).__name__} statement")

    visit_Return = visit_Lambda = visit_FunctionDef = visit_Global = visit_Nonlocal = _refuse


def parts_function(sources):
    """A callable ``run(Ts)`` for the :func:`phase_source` of each part: part k's
    function on ``Ts[k]``, every part but the first forked to torch's inter-op threads
    (one TorchScript call that only forks), the first run on the caller's thread, and
    every fork waited for, also when a part raises (the first error then propagates,
    nothing left running). The interpreter lock is released inside each call and wait.
    Compiled once per process and tuple of sources (the parts' sources differ where
    their gradient requests do: one half adds into an array, the other writes its own).

    Raises
    ------
    NotScriptable
        Where TorchScript refuses a source (its first line of complaint).
    """
    sources = tuple(sources)
    with _LOCK:
        fn = _COMPILED.get(sources)
        if fn is None:
            distinct = list(dict.fromkeys(sources))
            defs = [src.replace(_PART + "(", f"_p{k}(").replace("def part(", f"def part{k}(", 1)
                    for k, src in enumerate(distinct)]
            which = [distinct.index(src) for src in sources]
            forks = "".join(f"    futures.append(torch.jit.fork(part{w}, Ts[{k}]))\n"
                            for k, w in enumerate(which) if k)
            text = "\n".join(defs) + (
                "\ndef start(Ts: List[List[Tensor]]) -> List[Future[None]]:\n"
                "    futures: List[Future[None]] = []\n" + forks + "    return futures\n")
            try:
                unit = torch.jit.CompilationUnit(text)
            except RuntimeError as exc:
                first = next((ln for ln in str(exc).splitlines() if ln.strip()), str(exc))
                raise NotScriptable(f"TorchScript refused the phase: {first}") from None
            fn = _COMPILED[sources] = _Parts(unit.start, getattr(unit, f"part{which[0]}"),
                                             any(src.startswith(_GRAD_MODE) for src in sources))
    return fn


class _Parts:
    """``run(Ts)``: :func:`parts_function`'s callable; under ``torch.inference_mode``
    as ``runtime.launcher`` runs launches, or with grad mode on where an extern needs
    it (nothing requires grad: no graph is recorded)."""

    def __init__(self, start, first, grad_mode):
        self.start, self.first, self.grad_mode = start, first, grad_mode

    def __call__(self, tensors):
        if self.grad_mode:
            with torch.inference_mode(False), torch.enable_grad():
                self._run(tensors)
        else:
            with torch.inference_mode():
                self._run(tensors)

    def _run(self, tensors):
        futures = self.start(tensors)
        try:
            self.first(tensors[0])
        finally:
            errors = []
            for f in futures:
                try:
                    f.wait()
                except RuntimeError as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]


def checked_parts(lists):
    """``(run, tensors)`` for the parts' bound launch lists, the script checked once
    against the lists' own Python runs. The script runs on a replica of the arrays (the
    bytes the phase's tensors view, copied, each tensor remade over the copy with its
    offset and strides, so views alias as they do), the Python runs on the arrays
    themselves: the phase runs once, as one run of it would, and every array must come
    out the same in both, else :class:`ScriptDiffers`. An extern's partly filled output
    (oneDNN's LSTM workspace, whose unwritten bytes are whatever the allocator held) is
    not compared: the backward that reads it is.

    Raises
    ------
    NotScriptable
        Where a list does not script (:func:`phase_source`, :func:`parts_function`), or
        the script's numbers differ from the Python runs' (:class:`ScriptDiffers`, whose
        ``ran`` says the phase has run).
    """
    sources, tensors, opaque = zip(*(phase_source(runs) for runs in lists))
    skip = {id(ts[j]) for ts, js in zip(tensors, opaque) for j in js}
    run = parts_function(sources)
    every = [t for ts in tensors for t in ts]
    twin = _replica(every)
    with torch.inference_mode():
        for runs in lists:
            for launch in runs:
                launch()
    run([[twin[id(t)] for t in ts] for ts in tensors])
    wrong = next((i for i, t in enumerate(every)
                  if id(t) not in skip and not _same(twin[id(t)], t)), None)
    if wrong is not None:
        raise ScriptDiffers(f"the script's array {wrong} of shape "
                            f"{tuple(every[wrong].shape)} differs from its Python runs'")
    return run, list(tensors)


def _replica(tensors):
    """``{id(t): copy}``: each tensor remade over a copy of the bytes the tensors view
    (per storage, overlapping ranges merged, 8-byte aligned), with its own offset and
    strides, so the copies alias one another as the tensors do."""
    spans = {}
    for t in tensors:
        st, size = t.untyped_storage(), t.element_size()
        lo = t.storage_offset() * size
        hi = lo + (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * size \
            if t.numel() else lo
        spans.setdefault(st.data_ptr(), (st, []))[1].append((lo - lo % 8, hi, t))
    twin = {}
    for st, ranges in spans.values():
        whole = torch.empty(0, dtype=torch.uint8).set_(st)
        ranges.sort(key=lambda r: r[0])
        group, start, stop = [], None, None
        for lo, hi, t in ranges + [(None, None, None)]:
            if t is not None and start is not None and lo <= stop:
                stop = max(stop, hi)
                group.append(t)
                continue
            if group:
                dup = whole[start:stop].clone()
                for g in group:
                    offset = (g.storage_offset() * g.element_size() - start) // g.element_size()
                    twin[id(g)] = torch.empty(0, dtype=g.dtype).set_(
                        dup.untyped_storage(), offset, g.shape, g.stride())
            group, start, stop = [t], lo, hi
    return twin


def _same(got, want):
    """Whether the script's ``got`` is the Python runs' ``want``: equal, NaN where it
    is NaN, or close for floats."""
    if torch.equal(got, want):
        return True
    return got.is_floating_point() and torch.allclose(got, want, rtol=1e-6, atol=1e-7,
                                                      equal_nan=True)
