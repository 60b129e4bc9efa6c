"""``mx.autograd``'s machinery: the recording state, the tape, and backward.

While recording, every ``mx.nd`` operator call (``runtime/imperative.py``) appends
one :class:`Entry` to the tape: the registry operator, its attributes, the input
arrays, the output arrays, the training flag and, for an operator that draws
random numbers (Dropout), the seed its kernels read. Each output array points back
at its entry (``_ag_node``), so the tape is a graph through the arrays.

Backward walks the entries reachable from the heads in reverse call order. Each
entry's input gradients come from a one-operator Executor bound with gradients
(``Entry`` signature -> cached executor): it recomputes the operator on the recorded
inputs (with the recorded seed, so Dropout draws the same mask) and runs the
backward launches the compiler made from the registry entry's ``gradient`` rule,
the one place an operator's gradient is written. Gradients of an array used
several times add up; a marked variable's ``grad`` is then written or added to per
its ``grad_req``.
"""
from __future__ import annotations

import collections
import itertools
import sys
import threading

import torch

from compiler.errors import MXNetError

from . import autograd_sparse, ndarray_mx
from .autograd_methods import binary, getitem, refuse_inplace  # noqa: F401  (the recorder's)


class _State(threading.local):
    """Recording and training flags, per thread as in mxnet."""
    recording = False
    training = False


STATE = _State()
_ORDER = itertools.count()
GRAD_CACHE_SIZE = 256
_GRAD_CACHE: "collections.OrderedDict" = collections.OrderedDict()


# ``runtime.imperative`` (which imports this module) registers how a call becomes a
# one-operator Symbol, and its attribute key
_ENGINE: dict = {}


def register_engine(one_op_symbol, hashable) -> None:
    """Give the tape ``imperative``'s ``one_op_symbol`` and ``_hashable``."""
    _ENGINE.update(symbol=one_op_symbol, hashable=hashable)


def set_recording(flag: bool) -> bool:
    """Set whether operators are recorded; return the previous value."""
    prev, STATE.recording = STATE.recording, bool(flag)
    return prev


def set_training(flag: bool) -> bool:
    """Set training mode (Dropout active); return the previous value."""
    prev, STATE.training = STATE.training, bool(flag)
    return prev


def is_recording() -> bool:
    return STATE.recording


def is_training() -> bool:
    return STATE.training


class Entry:
    """One recorded operator call."""
    __slots__ = ("op_name", "names", "attr_args", "attrs", "inputs", "outputs", "ctx",
                 "is_train", "seed", "order", "freed", "custom")

    def __init__(self, op_name, names, tensors, attr_args, attrs, ctx, is_train, seed,
                 outputs):
        self.op_name, self.names, self.attr_args, self.attrs = op_name, names, attr_args, attrs
        self.inputs, self.outputs, self.ctx = list(tensors), list(outputs), ctx
        self.is_train, self.seed = is_train, seed
        self.order = next(_ORDER)
        self.freed = 0          # when a backward freed it (an _ORDER stamp), else 0
        self.custom = None      # an autograd.Function's backward, for its entries


def record_call(op_name, names, tensors, attr_args, attrs, ctx, is_train, seed, outputs):
    """Append one operator call to the tape (called by ``invoke`` while recording).

    Parameters
    ----------
    op_name : str
        The registry name the call used.
    names, tensors, attr_args, attrs
        The call as ``invoke`` split it (input names and arrays, attributes).
    ctx : Context
    is_train : bool
        Whether the operator ran in training mode.
    seed : int or None
        The seed of its random kernels (int32 bits), if it draws.
    outputs : list of NDArray
        Its visible outputs; each gets a pointer back to the entry.
    """
    entry = Entry(op_name, names, tensors, attr_args, attrs, ctx, is_train, seed, outputs)
    for i, out in enumerate(outputs):
        out._ag_node = (entry, i)
    return entry


mark_variable = ndarray_mx.mark_variable


def _node(arr):
    return getattr(arr, "_ag_node", None) if isinstance(arr, torch.Tensor) else None


def _is_var(arr):
    return isinstance(arr, torch.Tensor) and getattr(arr, "_ag_req", "null") != "null"


def tracked(arr) -> bool:
    """Whether ``arr`` is on the tape: a marked variable or a recorded result."""
    return _node(arr) is not None or _is_var(arr)


def _entries_of(heads, check_freed=True):
    """The entries the heads depend on, latest first.

    An entry freed by a backward (without ``retain_graph``) before a later entry read
    its output is a constant to that reader, as mxnet detaches the arrays of a freed
    graph: the walk stops there. Reaching a freed entry any other way (a head, or an
    input read before the freeing) is an error."""
    seen = {}
    stack = [(n[0], 0) for n in map(_node, heads) if n is not None]     # a head: no reader
    while stack:
        e, reader = stack.pop()
        if e.freed and check_freed:
            if e.freed < reader:
                continue
            raise MXNetError(
                f"backward: the graph of operator '{e.op_name}' was freed by an earlier "
                f"backward; pass retain_graph=True to the first one to go through it twice")
        if id(e) in seen:
            continue
        seen[id(e)] = e
        stack.extend((n[0], e.order) for n in map(_node, e.inputs) if n is not None)
    return sorted(seen.values(), key=lambda e: -e.order)


def _check_heads(heads):
    for i, h in enumerate(heads):
        if _node(h) is None and not _is_var(h):
            raise MXNetError(
                f"backward: head {i} (shape {tuple(h.shape)}) was not computed by operators "
                f"under autograd.record(), so it has no graph to go back through")


def _accumulate(grads, arr, g):
    key = id(arr)
    if key in grads:
        total = grads[key][1]
        # recorded (create_graph): the sum is an operator of the tape too
        total = ndarray_mx._invoke("elemwise_add", (total, g), {}) if STATE.recording \
            else total + g
        grads[key] = (arr, total)
    else:
        grads[key] = (arr, g)


def run_backward(heads, head_grads, retain_graph, create_graph=False):
    """Gradients of ``heads`` (weighted by ``head_grads``) with respect to every array
    the entries read: ``{id(array): (array, gradient)}`` for the leaves.

    Parameters
    ----------
    heads : list of NDArray
    head_grads : list of NDArray or None
        One per head (None: ones).
    retain_graph : bool
        Keep the entries for another backward.
    create_graph : bool
        Record the backward itself (each entry's gradient as ``mx.nd`` calls,
        ``runtime/autograd_graph.py``), so the gradients can be differentiated again.
    """
    _check_heads(heads)
    prev = set_recording(create_graph)     # as mxnet: backward is recorded iff create_graph
    try:
        return _run_backward(heads, head_grads, retain_graph, create_graph)
    finally:
        set_recording(prev)


def _run_backward(heads, head_grads, retain_graph, create_graph):
    grads = {}
    for h, g in zip(heads, head_grads):
        if g is None:
            g = torch.ones_like(h.as_subclass(torch.Tensor))
            g = ndarray_mx._like(g, h) if create_graph else g
        elif not create_graph:
            g = g.as_subclass(torch.Tensor)
        if tuple(g.shape) != tuple(h.shape):
            raise MXNetError(f"backward: head gradient of shape {tuple(g.shape)} for a head "
                             f"of shape {tuple(h.shape)}")
        _accumulate(grads, h, g)
    entries = _entries_of(heads)
    for e in entries:
        ograds = [grads.pop(id(o), (None, None))[1] for o in e.outputs]
        if all(g is None for g in ograds):
            continue
        if not any(_node(i) is not None or _is_var(i) for i in e.inputs):
            continue        # only constants in: mxnet records no such call
        _check_differentiable(e)
        in_grads = _recorded_entry_grads(e, ograds) if create_graph else \
            _entry_grads(e, ograds)
        for inp, g in zip(e.inputs, in_grads):
            if g is not None and (_node(inp) is not None or _is_var(inp)):
                _accumulate(grads, inp, g)
    if not retain_graph:
        stamp = next(_ORDER)        # entries recorded later read their outputs as constants
        for e in entries:
            e.freed = stamp
    return grads


def _check_differentiable(e):
    from compiler.ops import REGISTRY
    if e.custom is None and REGISTRY[e.op_name].gradient is None:
        raise MXNetError(
            f"backward: operator {e.op_name} has no gradient, and the heads reach the "
            f"variables through it (a gradient operator that grad(create_graph=True) "
            f"recorded without a gradient of its own: higher-order gradients through the "
            f"operator it belongs to are not supported)")


def write_grads(grads):
    """Write (or add) the leaves' gradients into their ``grad`` per ``grad_req`` (a
    sparse ``grad`` through its dense buffer: ``runtime/autograd_sparse.py``)."""
    for arr, g in grads.values():
        if not _is_var(arr):
            continue
        dst = autograd_sparse.write_target(arr)
        arr._fresh_grad = True      # mxnet's grad state, which Trainer-style code resets
        with torch.no_grad():
            if arr._ag_req == "add":
                dst.as_subclass(torch.Tensor).add_(g.to(ndarray_mx.torch_dtype(dst)))
            else:
                dst.as_subclass(torch.Tensor).copy_(g)
        autograd_sparse.write_back(arr)


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Gradients of ``heads`` into the marked variables' ``grad`` (mxnet's
    ``autograd.backward``); ``train_mode`` is accepted as mxnet's: the gradient of each
    operator is taken in the mode it was recorded in."""
    heads, head_grads = _as_lists(heads, head_grads)
    heads, head_grads = autograd_sparse.backward_heads(heads, head_grads)
    write_grads(run_backward(heads, head_grads, retain_graph))


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """Gradients of ``heads`` with respect to ``variables``, returned as new arrays
    (mxnet's ``autograd.grad``); the variables' ``grad`` are left alone.

    With ``create_graph=True`` the backward is recorded: the returned gradients are on
    the tape, and a later ``grad`` or ``backward`` goes back through them
    (higher-order gradients). ``retain_graph`` defaults to ``create_graph``, as in
    mxnet."""
    heads, head_grads = _as_lists(heads, head_grads)
    # a list always, one variable too: mxnet 1.9.1 tests the variables after making
    # them a list, so its ``return ret[0]`` never runs
    variables = [variables] if isinstance(variables, torch.Tensor) else list(variables)
    for i, v in enumerate(variables):
        if getattr(v, "_ag_req", None) is None:
            raise MXNetError(f"autograd.grad: variable {i} (shape {tuple(v.shape)}) is not "
                             f"marked: call attach_grad() or mark_variables() on it first")
    retain = bool(create_graph) if retain_graph is None else bool(retain_graph)
    grads = run_backward(heads, head_grads, retain, bool(create_graph))
    out = []
    for v in variables:
        g = grads.get(id(v), (None, None))[1]
        if g is None:
            g = torch.zeros_like(v.as_subclass(torch.Tensor))
        elif create_graph:
            out.append(g)       # the recorded array itself: later grads go through it
            continue
        out.append(ndarray_mx._like(g.clone(), v))
    return out


def _as_lists(heads, head_grads):
    one = (torch.Tensor,)
    if isinstance(heads, one) or autograd_sparse.is_sparse(heads):
        heads = [heads]
        if head_grads is not None and (isinstance(head_grads, one) or
                                       autograd_sparse.is_sparse(head_grads)):
            head_grads = [head_grads]
    heads = list(heads)
    if head_grads is None:
        head_grads = [None] * len(heads)
    head_grads = list(head_grads)
    if len(head_grads) != len(heads):
        raise MXNetError(f"backward: {len(head_grads)} head gradients for {len(heads)} heads")
    return heads, head_grads


def get_symbol(x):
    """The recorded computation of ``x`` as a Symbol; arrays it read that no recorded
    operator made are Variables ``var0``, ``var1`` ... in the order first read."""
    from compiler.symbol import Variable, _make_op_function
    from compiler.ops import REGISTRY
    if _node(x) is None:
        raise MXNetError("get_symbol: the array was not computed under autograd.record()")
    made, names = {}, {}
    for e in reversed(_entries_of([x], check_freed=False)):
        if e.custom is not None:
            raise MXNetError(f"get_symbol: {e.op_name} is a Python autograd.Function, which "
                             f"has no Symbol")
        ins = []
        for t in e.inputs:
            if id(t) not in made:
                names.setdefault(id(t), Variable(f"var{len(names)}"))
            ins.append(made.get(id(t), names.get(id(t))))
        attrs = dict(e.attrs)
        if e.attr_args:
            slots = [a.name for a in REGISTRY[e.op_name].attrs]
            attrs.update(zip(slots, e.attr_args))
        positional = [s for n, s in zip(e.names, ins) if n.startswith("_in")]
        by_name = {n: s for n, s in zip(e.names, ins) if not n.startswith("_in")}
        sym = _make_op_function(e.op_name)(*positional, **by_name, **attrs)
        outs = [sym] if len(e.outputs) == 1 else [sym[i] for i in range(len(e.outputs))]
        for o, s in zip(e.outputs, outs):
            made[id(o)] = s
    entry, i = _node(x)
    return made[id(entry.outputs[i])]


# ------------------------------------------------------------ one entry's gradients
class _GradCall:
    """A one-operator executor bound with gradients for one entry signature."""

    def __init__(self, e, tensors):
        from compiler.symbol import is_mode_dependent
        from .executor import Executor
        sym = _ENGINE["symbol"](e.op_name, e.names, e.attr_args, e.attrs)
        arg_names = sym.list_arguments()
        aux_names = sym.list_auxiliary_states()
        # copies: the executor binds (shares) what it is given, and later entries of this
        # signature copy their inputs in
        given = {n: t.detach().clone(memory_format=torch.contiguous_format)
                 for n, t in zip(e.names, tensors)}
        # every input gets its gradient, integer ones too: an int32 array marked with
        # ``attach_grad`` gets int32 gradients, as in mxnet (an index input's rule gives 0)
        req = {n: "write" for n in arg_names}
        self.exe = Executor(sym, e.ctx, {n: given[n] for n in arg_names}, grad_req=req,
                            aux_states={n: given[n] for n in aux_names if n in given})
        bound = {**self.exe.arg_dict, **self.exe.aux_dict}
        self.dst = [bound[n].as_subclass(torch.Tensor) for n in e.names]
        self.grad_of = [self.exe.grad_dict.get(n) for n in e.names]
        self.names, self.op_name = list(e.names), e.op_name
        if not e.is_train and is_mode_dependent(sym):
            # predict mode under record (Dropout as the identity): the gradient program
            # of the inference graph
            exe = self.exe
            exe._train_prog = exe._compile_prog(True, False)
        self.seed = None
        self.exe._set_seed = self._pin_seed     # the recorded seed, not a new one

    def _pin_seed(self, prog):
        if prog.seed_buffer is None or self.seed is None:
            return
        buf = self.exe._buffers_for(prog)[int(prog.seed_buffer)]
        buf.reshape(-1)[:1].view(torch.int32).fill_(self.seed)

    def run(self, e, tensors, ograds):
        with torch.no_grad():
            for dst, src in zip(self.dst, tensors):
                dst.copy_(src)
        self.seed = e.seed
        outs = self.exe.forward(is_train=True)
        full = [g if g is not None else torch.zeros_like(o.as_subclass(torch.Tensor))
                for g, o in zip(ograds + [None] * (len(outs) - len(ograds)), outs)]
        self.exe.backward(full)
        for name, g in zip(self.names, self.grad_of):
            if hasattr(g, "_aux_t"):    # attach_grad gives default storage only
                raise MXNetError(
                    f"backward of {self.op_name}: the gradient of '{name}' is row_sparse "
                    f"(sparse_grad); Cannot use sparse_grad = 1, while stype of gradients "
                    f"w.r.t embedding weight is default")
        return [None if g is None else g.as_subclass(torch.Tensor).clone()
                for g in self.grad_of]


def _recorded_entry_grads(e, ograds):
    """The gradients of entry ``e``'s inputs as recorded ``mx.nd`` calls."""
    from .autograd_graph import recorded_grads
    if e.custom is not None:
        raise MXNetError(f"autograd.grad(create_graph=True) through {e.op_name}: the "
                         f"backward of a Python autograd.Function is not recorded; "
                         f"higher-order gradients through it are not supported")
    prev = set_training(e.is_train)         # the gradient ops run in the entry's mode
    try:
        return recorded_grads(e, ograds, _ENGINE)
    finally:
        set_training(prev)


def _entry_grads(e, ograds):
    """The gradients of entry ``e``'s inputs (None where an input has none)."""
    if e.custom is not None:
        return e.custom(e, ograds)
    _hashable = _ENGINE["hashable"]
    tensors = [t.detach() for t in e.inputs]
    key = (e.op_name, tuple(e.names), _hashable(e.attr_args),
           tuple(sorted((k, _hashable(v)) for k, v in e.attrs.items())),
           tuple((tuple(t.shape), ndarray_mx.torch_dtype(t)) for t in tensors),
           e.ctx.device_type, e.ctx.device_id, e.ctx.target, e.is_train)
    call = _GRAD_CACHE.get(key)
    if call is None:
        call = _GRAD_CACHE[key] = _GradCall(e, tensors)
        while len(_GRAD_CACHE) > GRAD_CACHE_SIZE:
            _GRAD_CACHE.popitem(last=False)
    return call.run(e, tensors, ograds)


ndarray_mx.register_recorder(sys.modules[__name__])
