"""Imperative calls of registry operators: what ``mx.nd.X`` runs.

``invoke('FullyConnected', args, kwargs)`` runs the operator's registry entry
through the same compile path as a bound symbol: a one-operator Symbol is
compiled for the inputs' shapes, dtypes and context target (``cpu``'s ATen
code, ``interpret``'s Triton kernels, ``cuda:<arch>``), bound once by an
:class:`~runtime.executor.Executor`, and kept in a cache of ``CACHE_SIZE``
signatures (the oldest leaves first). A call that hits the cache copies its
inputs into the bound arrays (the executor's own, never the caller's), runs the
bound launches and returns fresh copies of the outputs: 15-50 us of Python above
the kernels themselves, with the machine's load (``benchmarks/nd_call_cost.py``).

The signature is mxnet's generated one: positional NDArray inputs (arguments,
then auxiliary states), the attributes by keyword or, after the inputs, in
their declared order; ``out=`` receives the result; ``name`` is ignored;
``ctx`` places an operator without inputs (``_zeros``, the samplers).
"""
from __future__ import annotations

import collections
import threading
import time

import torch

from compiler.errors import MXNetError
from compiler.ops import REGISTRY
from compiler.passes.storage_type import forward_stype
from compiler.shape_semantics import is_np_shape

from . import autograd_sparse, autograd_tape, imperative_lazy, launcher, ndarray_mx
from .context import Context, current_context, device_guard
from .ndarray import NDArray

CACHE_SIZE = 512            # one-operator executors kept (each holds its arrays)
_CACHE: "collections.OrderedDict" = collections.OrderedDict()
_LOCK = threading.Lock()
_NODE = "nd"                # every cached symbol's node name: one Program per signature
# torch's own getters (an NDArray's ``shape`` and ``dtype`` are mxnet's Python properties)
_SHAPE = torch._C.TensorBase.shape.__get__
_DTYPE = torch._C.TensorBase.dtype.__get__


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, (str, int, float, bool, type(None))):
        return v
    return repr(v)


class _Call:
    """One bound one-operator executor, reused while the signature repeats."""
    __slots__ = ("exe", "prog", "launches", "dst", "outs", "ctx", "seeded", "fast", "aux_back",
                 "op_name")

    def __init__(self, op_name, input_names, tensors, attr_args, attrs, ctx, is_train=False):
        from compiler.artifacts.compile import compile_symbol
        from .executor import Executor
        self.op_name = op_name
        sym = one_op_symbol(op_name, input_names, attr_args, attrs)
        arg_names = sym.list_arguments()
        aux_names = sym.list_auxiliary_states()
        # arrays of the executor's own: it binds contiguous NDArrays as they are, and
        # later calls copy their inputs into the bound arrays
        with torch.no_grad():
            given = {n: t.detach().clone(memory_format=torch.contiguous_format)
                     for n, t in zip(input_names, tensors)}
        needed = arg_names + (aux_names if REGISTRY[op_name].mutates_inputs else [])
        missing = [n for n in needed if n not in given]
        if missing:
            raise MXNetError(f"{op_name}: missing input(s) {missing}; the operator takes "
                             f"{arg_names + aux_names}")
        self.exe = Executor(sym, ctx, {n: given[n] for n in arg_names}, grad_req="null",
                            aux_states={n: given[n] for n in aux_names if n in given})
        self.prog = self.exe._infer_prog
        if is_train:
            # training mode (mx.autograd.train_mode): Dropout draws its mask
            self.prog = compile_symbol(sym, self.exe._input_shapes, False, {}, True,
                                       ctx.target, self.exe._dtypes)
        self.launches = self.exe._launches(self.prog, "fwd")
        bound = {**self.exe.arg_dict, **self.exe.aux_dict}
        self.dst = [bound[n].as_subclass(torch.Tensor) for n in input_names]
        self.outs = [o.as_subclass(torch.Tensor) for o in self.exe.outputs]
        # training mode updates auxiliary states (BatchNorm's moving statistics), and an
        # operator that mutates its inputs (sgd_mom_update's mom, reset_arrays) writes
        # them always: they go back into the caller's arrays, as mxnet updates them
        writes = is_train or REGISTRY[op_name].mutates_inputs
        self.aux_back = [(i, bound[n].as_subclass(torch.Tensor))
                         for i, n in enumerate(input_names) if n in self.exe.aux_dict] \
            if writes else []
        self.ctx = ctx
        self.seeded = self.prog.seed_buffer is not None
        self.fast = ctx.device_type == "cpu" and ctx.target == "cpu"

    def run(self, tensors):
        """Copy ``tensors`` in, launch, and return new NDArrays of the outputs."""
        if self.seeded:
            self.exe._set_seed(self.prog)
        # inference mode (torch's guard object, without the context manager's Python):
        # an input with a gradient attached is only read
        guard = torch._C._InferenceMode(True)
        try:
            for dst, src in zip(self.dst, tensors):
                dst.copy_(src)
            if self.fast and not launcher.PROFILING:
                # one small call: the thread policy's timing would cost more than the kernel
                for launch in self.launches:
                    launch()
                launcher.LaunchCounter.total += len(self.launches)
            elif launcher.PROFILING:
                # mx.profiler files an mx.nd call as its operator, as mxnet's does
                start = time.perf_counter_ns()
                with device_guard(self.ctx):
                    for launch in self.launches:
                        launch()
                launcher.LaunchCounter.total += len(self.launches)
                launcher.record_operator(self.op_name, start)
            else:
                with device_guard(self.ctx):
                    launcher.run_bound(self.launches)
        finally:
            del guard
        if self.aux_back:
            with torch.no_grad():
                for i, src in self.aux_back:
                    torch.Tensor.copy_(tensors[i], src)
        ctx = self.ctx
        return [_new(o.clone(), ctx) for o in self.outs]


    def seed(self):
        """The int32 bits of the seed the last run's random kernels read (None if none)."""
        if not self.seeded:
            return None
        buf = self.exe._buffers_for(self.prog)[int(self.prog.seed_buffer)]
        return int(buf.reshape(-1)[:1].view(torch.int32)[0])


def one_op_symbol(op_name, input_names, attr_args, attrs):
    """The one-operator Symbol of a call: inputs as Variables named as ``input_names``
    (``_in<i>`` positional), attributes by keyword (``attr_args`` in declared order)."""
    from compiler.symbol import Variable, _make_op_function
    opdef = REGISTRY[op_name]
    positional = [Variable(n) for n in input_names if n.startswith("_in")]
    by_name = {n: Variable(n) for n in input_names if not n.startswith("_in")}
    if attr_args:       # attributes after the inputs, in their declared order
        slots = [a.name for a in opdef.attrs]
        twice = [k for k in slots[:len(attr_args)] if k in attrs]
        if twice or len(attr_args) > len(slots):
            raise MXNetError(f"{op_name}: positional attributes {attr_args} do not fit "
                             f"its attributes {slots} (given twice: {twice})")
        attrs = {**dict(zip(slots, attr_args)), **attrs}
    return _make_op_function(op_name)(*positional, name=_NODE, **by_name, **attrs)


def _new(t, ctx):
    out = t.as_subclass(NDArray)
    out._mx_ctx = ctx
    return out


def _split(opdef, args, kwargs):
    """(input names, tensors, positional attributes, attributes) of one call."""
    declared = _declared_inputs(opdef)
    if not kwargs and declared is not None and len(args) <= len(declared) and \
            all(isinstance(a, torch.Tensor) for a in args):
        return declared[:len(args)], args, (), {}       # inputs only, the common call
    n = 0
    while n < len(args) and _is_input(args[n]):
        n += 1
    if any(_is_input(a) for a in args[n:]):
        raise MXNetError(f"{opdef.name}: positional arrays must come before the attributes")
    tensors = list(args[:n])
    names = [f"_in{i}" for i in range(n)]
    attrs = {}
    for k, v in kwargs.items():
        if _is_input(v):
            names.append(k)
            tensors.append(v)
        elif v is not None or k in opdef._attr_index:
            attrs[k] = v
    if n and declared is not None:
        if n > len(declared):
            raise MXNetError(f"{opdef.name} takes {len(declared)} inputs ({', '.join(declared)}),"
                             f" got {n} positional arrays")
        names[:n] = declared[:n]
    return names, tensors, tuple(args[n:]), attrs


_DECLARED: dict = {}


def _declared_inputs(opdef):
    """The operator's input names in mxnet's order (``input_order``, else arguments then
    auxiliary states), or None where they depend on the attributes."""
    names = _DECLARED.get(opdef.name, False)
    if names is False:
        names = None if callable(opdef.arguments) or opdef.variadic or \
            callable(opdef.input_order) else list(opdef.input_order or ()) or \
            list(opdef.arguments) + list(opdef.aux)
        _DECLARED[opdef.name] = names
    return names


def _context_of(opdef, tensors, attrs) -> Context:
    ctx = attrs.pop("ctx", None)      # where an operator without inputs runs
    if tensors:
        first = tensors[0]
        ctx0 = getattr(first, "_mx_ctx", None) or (
            first.context if isinstance(first, NDArray) else _ctx_of_device(first.device))
        for t in tensors[1:]:
            if t.device != first.device:
                raise MXNetError(f"{opdef.name}: inputs on different devices "
                                 f"({first.device} and {t.device})")
        return ctx0
    if ctx is None:
        return current_context()
    return ctx if isinstance(ctx, Context) else Context(ctx)


def _ctx_of_device(dev) -> Context:
    return Context("gpu", dev.index or 0) if dev.type == "cuda" else Context("cpu", 0)


def invoke(op_name, args, kwargs):
    """Run registry operator ``op_name`` on NDArrays, as mxnet's ``mx.nd.<op>``.

    Parameters
    ----------
    op_name : str
        A registry name or alias (``broadcast_add``, ``_contrib_div_sqrt_dim``).
    args : tuple
        The input arrays, then (optionally) attributes in declared order.
    kwargs : dict
        Attributes, inputs by name, ``out``, ``name`` (ignored) and ``ctx``.

    Returns
    -------
    NDArray or list of NDArray
        One array, or a list when the operator has several visible outputs.
    """
    with torch._C.DisableTorchFunctionSubclass():
        return _invoke(REGISTRY[op_name], op_name, args, kwargs)


def _invoke(opdef, op_name, args, kwargs):
    out = None
    if kwargs:
        kwargs = dict(kwargs)
        out = kwargs.pop("out", None)
        kwargs.pop("name", None)
    names, tensors, attr_args, attrs = _split(opdef, args, kwargs)
    if opdef.sparse_form is not None or \
            not all(isinstance(t, torch.Tensor) for t in tensors):
        if opdef.sparse_form is None:       # sparse inputs to an operator without a form
            return _storage_fallback(op_name, args, kwargs or {}, out)
        # getnnz, edge_id: an operator over a csr array's parts
        op_name, names, tensors, attrs = _sparse_form(opdef, names, tensors, attr_args, attrs)
        opdef, attr_args = REGISTRY[op_name], ()
    ctx = _context_of(opdef, tensors, attrs)
    if opdef.value_shaped is not None:     # boolean_mask: its output shape from the values
        op_name, attrs = _value_shaped(opdef, names, tensors, attr_args, attrs)
        opdef, attr_args = REGISTRY[op_name], ()
    # the training flag matters to Dropout, BatchNorm ... only (mx.autograd.train_mode)
    is_train = bool(opdef.mode_dependent) and autograd_tape.STATE.training
    key = (op_name, tuple(names), attr_args and _hashable(attr_args),
           tuple(sorted((k, _hashable(v)) for k, v in attrs.items())),
           tuple((_SHAPE(t), _DTYPE(t)) for t in tensors), ctx.device_type, ctx.device_id,
           ctx.target, is_train, is_np_shape())
    call = _CACHE.get(key)
    if call is None:
        call = _build(key, op_name, names, tensors, attr_args, attrs, ctx, is_train)
    res = call.run(tensors)
    if autograd_tape.STATE.recording:
        if out is not None:     # the tape's outputs are the arrays the caller holds
            out = _write_out(res, out, op_name)
            res = list(out) if isinstance(out, (list, tuple)) else [out]
        autograd_tape.record_call(op_name, names, tensors, attr_args, attrs, ctx, is_train,
                                  call.seed(), res)
        if out is not None:
            return out
    if out is not None:
        return _write_out(res, out, op_name)
    return res[0] if len(res) == 1 else res


def _is_sparse(x) -> bool:
    return getattr(x, "stype", "default") in ("csr", "row_sparse")


_FALLBACK_WARNED: set = set()


def _swap(args, kwargs, old, new):
    return (tuple(new if a is old else a for a in args),
            {k: new if v is old else v for k, v in kwargs.items()})


def _storage_fallback(op_name, args, kwargs, out):
    """:func:`_fallback_call`, recorded by ``mx.autograd`` through the sparse operands'
    dense stand-ins (``runtime/autograd_sparse.py``)."""
    res = _fallback_call(op_name, args, kwargs, out)
    inputs = [v for v in list(args) + list(kwargs.values()) if _is_input(v)]
    if out is None and autograd_sparse.recording_with(*inputs):
        def dense_call(*stand_ins):
            a, k = args, kwargs
            for v, d in zip(inputs, stand_ins):
                a, k = _swap(a, k, v, d)
            return invoke(op_name, a, k)
        res = autograd_sparse.record(res, dense_call, inputs)
    return res


def _fallback_call(op_name, args, kwargs, out):
    """An operator with no sparse form called on csr / row_sparse arrays, as mxnet runs it.

    A one-input elementwise operator that maps 0 to 0 (``abs``, ``sqrt``, ``relu``,
    ``_mul_scalar`` ...) runs on the stored values and keeps the array's storage and
    pattern, as mxnet's sparse kernels do (``zeros_like`` gives an array storing
    nothing); any other call computes on dense copies of the sparse inputs: mxnet's
    storage fallback, logged once per operator as mxnet logs it. Its result is dense,
    or sparse where mxnet's storage rules say so (``compiler/passes/storage_type.py``).
    """
    opdef = REGISTRY[op_name]
    if opdef.lazy_rows is not None:
        names, tensors, attr_args, attrs = _split(opdef, args, kwargs)
        attrs = {**dict(zip((a.name for a in opdef.attrs), attr_args)), **attrs}
        res = imperative_lazy.rows_update(opdef, op_name, names, tensors, attrs, out, invoke)
        if res is not None:
            return res
    sparse_in = [v for v in list(args) + list(kwargs.values()) if _is_sparse(v)]
    x = sparse_in[0]
    tensors_in = [v for v in list(args) + list(kwargs.values()) if _is_input(v)]
    if opdef.name == "slice" and x.stype == "csr" and len(tensors_in) == 1 and out is None:
        # mxnet slices a csr array into a csr array (rows, then columns)
        attrs = dict(zip(("begin", "end", "step"), args[1:]), **kwargs)
        return x.slice(attrs["begin"], attrs["end"], attrs.get("step"))
    if opdef.name == "take" and x.stype == "csr" and len(sparse_in) == 1 and out is None:
        taken = _take_csr_rows(x, args, kwargs)      # mxnet's take of csr rows is csr
        if taken is not None:
            return taken
    if len(tensors_in) == 1 and opdef.pattern == "elemwise" and _keeps_zero(op_name, args,
                                                                            kwargs, x):
        if op_name == "zeros_like":
            from .ndarray_sparse import zeros as sparse_zeros
            res = sparse_zeros(x.stype, x.shape, ctx=x.context, dtype=x.dtype)
        else:
            values = invoke(op_name, *_swap(args, kwargs, x, x.data))
            res = x._with(values.as_subclass(torch.Tensor), [a.clone() for a in x._aux_t])
        if out is not None:
            out[:] = res
            return out
        return res
    if op_name not in _FALLBACK_WARNED:
        _FALLBACK_WARNED.add(op_name)
        import logging
        logging.getLogger(__name__).warning(
            "Storage type fallback detected: operator %s has no kernel for %s inputs; "
            "computed on dense copies, as mxnet's fallback",
            op_name, ", ".join(sorted({v.stype for v in sparse_in})))
    stypes = [getattr(v, "stype", "default") for v in tensors_in]
    for v in sparse_in:
        args, kwargs = _swap(args, kwargs, v, v.tostype("default"))
    res = invoke(op_name, args, dict(kwargs, out=out) if out is not None else kwargs)
    _, _, attr_args, attrs = _split(opdef, args, kwargs)
    attrs = {**dict(zip((a.name for a in opdef.attrs), attr_args)), **attrs}
    stype = forward_stype(op_name, attrs, stypes)
    if out is None and stype != "default" and isinstance(res, torch.Tensor):
        # the storage mxnet's rules give the result (``_square_sum(rsp, axis=1,
        # keepdims=True)`` is row_sparse): its non-zeros
        return res.tostype(stype)
    return res


def _take_csr_rows(x, args, kwargs):
    """``take(csr, indices, axis=0, mode)`` as a csr array of those rows (indices
    truncated, then clipped or wrapped into range, as the dense take), or None when the
    call is not one (another axis, a sparse index)."""
    attrs = dict(zip(("a", "indices", "axis", "mode"), args), **kwargs)
    if attrs.get("a") is not x or int(attrs.get("axis", 0)) != 0 or \
            _is_sparse(attrs.get("indices")):
        return None
    mode = attrs.get("mode", "clip")
    if mode == "raise":
        return None
    rows = x.shape[0]
    idx = torch.as_tensor(attrs["indices"]).reshape(-1).to(torch.float64).trunc().to(
        torch.int64)
    idx = idx.clamp(0, rows - 1) if mode == "clip" else torch.remainder(idx, rows)
    return x.take_rows(idx.to(x.device))


def _keeps_zero(op_name, args, kwargs, x) -> bool:
    """Whether the one-input operator maps 0 to 0 (run on one zero of ``x``'s dtype)."""
    zero = ndarray_mx._like(torch.zeros((1,), dtype=ndarray_mx.torch_dtype(x),
                                        device=x.device), x.data)
    try:
        at_zero = invoke(op_name, *_swap(args, kwargs, x, zero))
    except MXNetError:
        return False
    if not isinstance(at_zero, torch.Tensor) or at_zero.numel() != 1:
        return False
    value = float(at_zero.as_subclass(torch.Tensor).reshape(-1)[0])
    return value == 0.0


def _is_input(x) -> bool:
    return isinstance(x, torch.Tensor) or _is_sparse(x)


def _sparse_form(opdef, names, tensors, attr_args, attrs):
    """(name, input names, inputs, attributes) of the operator an imperative call with
    sparse inputs runs (``OpDef.sparse_form``: the arrays' parts)."""
    if opdef.sparse_form is None:
        kinds = sorted({t.stype for t in tensors if _is_sparse(t)})
        raise MXNetError(f"{opdef.name}: sparse ({', '.join(kinds)}) inputs are not "
                         f"computed imperatively here; convert them with .tostype('default')")
    if attr_args:
        attrs = {**dict(zip([a.name for a in opdef.attrs], attr_args)), **attrs}
    parsed = opdef.parse_attrs(dict(attrs), _NODE)
    declared = _declared_inputs(opdef) or names
    by_name = dict(zip(names, tensors))
    ordered = [by_name.get(n, t) for n, t in zip(declared, tensors)]
    name, new_attrs, parts = opdef.sparse_form(parsed, ordered)
    return name, [f"_in{i}" for i in range(len(parts))], list(parts), new_attrs


def _value_shaped(opdef, names, tensors, attr_args, attrs):
    """(name, attributes) of the fixed-shape operator an imperative call of a
    value-shaped one runs (``OpDef.value_shaped``)."""
    if attr_args:
        attrs = {**dict(zip([a.name for a in opdef.attrs], attr_args)), **attrs}
    parsed = opdef.parse_attrs({k: v for k, v in attrs.items()}, _NODE)
    declared = _declared_inputs(opdef) or names
    by_name = dict(zip(names, tensors))
    ordered = [by_name.get(n, t) for n, t in zip(declared, tensors)]
    return opdef.value_shaped(parsed, ordered)


def _build(key, op_name, names, tensors, attr_args, attrs, ctx, is_train=False):
    call = _Call(op_name, names, tensors, attr_args, attrs, ctx, is_train)
    with _LOCK:
        _CACHE[key] = call
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return call


def _write_out(res, out, op_name):
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(res):
        raise MXNetError(f"{op_name}: out= has {len(outs)} arrays for {len(res)} outputs")
    for o, r in zip(outs, res):
        if tuple(o.shape) != tuple(r.shape):
            raise MXNetError(f"{op_name}: out= has shape {tuple(o.shape)}, the result "
                             f"{tuple(r.shape)}")
        if _is_sparse(o):           # mxnet's output storage fallback: cast into it
            o[:] = r
            continue
        with torch.no_grad():
            torch.Tensor.copy_(o, r)
    return out


def cache_clear():
    """Forget every cached one-operator executor."""
    with _LOCK:
        _CACHE.clear()


ndarray_mx.register_engine(invoke)
autograd_tape.register_engine(one_op_symbol, _hashable)
