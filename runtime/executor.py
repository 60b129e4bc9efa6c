"""``Executor``: mxnet's executor API over compiled Programs.

An executor owns its argument, gradient, auxiliary, output and internal
buffers on one context, and runs a Program's forward launches in
``forward`` and its backward launches in ``backward``. A training executor
compiles a second, forward-only Program for ``forward(is_train=False)``
only when the symbol behaves differently in inference (Dropout,
BatchNorm).
"""
from __future__ import annotations

import bisect

import numpy as np
import torch

from compiler.artifacts.compile import (all_dtypes, compile_symbol, eliminate_common_expr,
                                       free_aux_shapes, gc_paused)
from compiler.ir.dtypes import ITEMSIZE, check_dtype, dtype_name
from compiler.errors import MXNetError
from compiler.passes.storage_type import infer_storage
from compiler.symbol import is_mode_dependent
from compiler.triton.mode import ensure_mode

from . import threads
from .context import Context, current_context, device_guard
from .executor_rows import plan_row_reads
from .executor_rowsplit import RowSplitter
from .executor_sparse import SparseShadows, is_sparse, new_array
from .launcher import BoundLaunches, bind_launches, run_bound
from .ndarray import NDArray, as_ndarray, empty
from .ndarray import torch_dtype


def _normalize_grad_req(grad_req, arg_names):
    if isinstance(grad_req, str):
        return {n: grad_req for n in arg_names}
    if isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise MXNetError(f"grad_req list has {len(grad_req)} entries for {len(arg_names)} "
                             f"arguments {arg_names}")
        return dict(zip(arg_names, grad_req))
    if isinstance(grad_req, dict):
        # names that are not arguments are ignored and unnamed arguments get 'null', as
        # in mxnet's bind (its RNN tests pass {'data': 'add', 'parameters': 'null'} to
        # graphs of several kinds)
        return {n: grad_req.get(n, "null") for n in arg_names}
    raise MXNetError("grad_req must be a str, list or dict")


def _with_free_aux(symbol, shapes, aux_dict) -> dict:
    """``shapes`` (the arguments') plus the shapes of the bound auxiliary states that
    the arguments do not decide: a Program is compiled for them too."""
    if not aux_dict:
        return shapes
    free = free_aux_shapes(symbol, shapes, {n: tuple(a.shape) for n, a in aux_dict.items()})
    return {**shapes, **free} if free else shapes


def _to_tensor(value, ctx: Context, what: str):
    if isinstance(value, torch.Tensor):
        t = value.detach() if value.requires_grad else value
    elif isinstance(value, np.ndarray) or isinstance(value, (list, tuple, float, int)):
        t = torch.as_tensor(np.asarray(value, dtype=np.float32))
    else:
        raise MXNetError(f"{what}: expected an NDArray, torch tensor or numpy array, got "
                         f"{type(value).__name__}")
    return t.to(ctx.torch_device)


class Executor:
    """Runs a bound symbol: ``forward``, ``backward`` and the mxnet array dicts.

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
    args : list or dict of arrays
        In ``list_arguments`` order, or by name.
    args_grad : list or dict of arrays, optional
    grad_req : str, list or dict
        ``write``, ``add`` or ``null`` per argument.
    aux_states : list or dict of arrays, optional
    group2ctx : dict of str to Context, optional
        Where the arguments of each ``ctx_group`` live (see :func:`placement`).
    """

    def __init__(self, symbol, ctx, args, args_grad=None, grad_req="write", aux_states=None,
                 shared_exec=None, group2ctx=None):
        self._symbol = symbol
        self._ctx = ctx if isinstance(ctx, Context) else current_context()
        self._group2ctx = group2ctx
        self._placement = placement(symbol, self._ctx, group2ctx)
        # Internal buffers come from a pool shared with ``shared_exec`` (as
        # mxnet's buckets share the default bucket's memory): executors that
        # never run at the same time reuse the same tensors.
        self._pool = shared_exec._pool if shared_exec is not None else _BufferPool()
        if self._ctx.device_type != "gpu" and self._ctx.target == "interpret" and \
                not ensure_mode():
            raise MXNetError(
                f"{self._ctx} cannot run Triton's interpreter in this process "
                f"(SYMTRITON_CPU_TARGET=interpret): Triton was imported for the GPU. Set "
                f"TRITON_INTERPRET=1 before the first import, or leave SYMTRITON_CPU_TARGET "
                f"unset to run CPU contexts on the cpu target")
        arg_names = symbol.list_arguments()
        aux_names = symbol.list_auxiliary_states()
        self.arg_dict = self._collect(args, arg_names, "args")
        self.aux_dict = self._collect(aux_states or {}, aux_names, "aux_states", allow_missing=True)
        self._grad_req = _normalize_grad_req(grad_req, arg_names)
        # the bound arrays' dtypes decide, as in mxnet's bind; inference (mxnet's rules)
        # refuses arrays that disagree and gives the rest
        given = {n: dtype_name(a.dtype) for n, a in {**self.arg_dict, **self.aux_dict}.items()}
        self._dtypes = all_dtypes(symbol, given)
        shapes = {n: tuple(a.shape) for n, a in self.arg_dict.items()}
        for n in aux_names:
            if n not in self.aux_dict:
                _, _, aux_shapes = symbol.infer_shape(**shapes)
                for name, s in zip(aux_names, aux_shapes):
                    self.aux_dict.setdefault(name, empty(s, self._ctx, self._dtypes[name]))
        self._input_shapes = _with_free_aux(symbol, shapes, self.aux_dict)
        # mxnet's MXNET_ELIMINATE_COMMON_EXPR as the bind saw it: every Program this
        # executor compiles, now or later, and get_optimized_symbol follow it
        self._merge_common = eliminate_common_expr()
        self._stypes = infer_storage(symbol, {n: getattr(a, "stype", "default")
                                              for n, a in self.arg_dict.items()})
        if args_grad is None:
            self.grad_dict = {
                n: new_array(self._stypes["grads"].get(n, "default"), self.arg_dict[n].shape,
                             self._placement.get(n, self._ctx), self.arg_dict[n].dtype)
                for n in arg_names if self._grad_req[n] != "null"}
        else:
            self.grad_dict = self._collect(args_grad, arg_names, "args_grad", allow_missing=True)
            for n in arg_names:
                if n not in self.grad_dict:
                    # as mxnet's bind: an argument given no gradient array gets none
                    # (grad_req 'null'), whatever grad_req says
                    self._grad_req[n] = "null"
        self._for_training = any(r != "null" for r in self._grad_req.values())
        # embedding tables are read through their batch's rows (executor_rows.py); the
        # other sparse arrays are computed on through dense shadows (executor_sparse.py)
        self._rows = plan_row_reads(symbol, self.arg_dict, self.grad_dict, self._stypes,
                                    self._grad_req, shapes, self._dtypes, self._ctx)
        # arguments the rewritten symbol no longer reads (a table, a csr operand of a
        # dot read through rows) get no shadow
        kept = set(self._rows.symbol.list_arguments()) if self._rows else set(arg_names)
        tables = self._rows.tables if self._rows else {}
        self._shadows = SparseShadows(
            {n: a for n, a in self.arg_dict.items() if n in kept},
            {n: g for n, g in self.grad_dict.items() if n not in tables},
            self._stypes["rows"], self._grad_req, self.aux_dict)
        self._train_prog = None
        self._infer_prog = None
        self._eval_grad_prog = None     # inference computation with its backward
        self._buffers = {}
        self._bound = {}            # (id(program), phase) -> launches bound to our arrays
        self._bwd_marks = None      # set_backward_marks: (marks, bound list, marked list)
        self._head_grads = {}
        self._last_train = False
        self.outputs = []
        self._monitor = None
        # AMP's loss scale (set_loss_scale): executors that share memory share it too,
        # so a bucket bound later starts with the scale and the value of its default
        self._loss_scaling = bool(getattr(shared_exec, "_loss_scaling", False))
        shared_scale = getattr(shared_exec, "_loss_scale", None)
        self._loss_scale = shared_scale if shared_scale is not None and \
            shared_scale.device == self._ctx.torch_device else \
            torch.ones(1, dtype=torch.float32, device=self._ctx.torch_device)
        self._compile()
        # the thread policy may run the training phases as two half batches
        self._row_split = RowSplitter.for_executor(self)

    # -- construction -------------------------------------------------------------
    def _collect(self, arrays, names, what, allow_missing=False, where=None):
        """Arrays by name as contiguous NDArrays: on this executor's
        device, or on ``where[name]`` (a context per variable) when given."""
        if isinstance(arrays, (list, tuple)):
            if len(arrays) != len(names):
                raise MXNetError(f"{what}: {len(arrays)} arrays for {len(names)} names {names}")
            arrays = dict(zip(names, arrays))
        out = {}
        known = set(names)         # a name per array: a list searched per array is quadratic
        for k, v in arrays.items():
            if k not in known or v is None:
                continue        # as mxnet's bind: names the symbol lacks are ignored
            if is_sparse(v):        # kept as it is: the Program reads a dense shadow
                out[k] = v
                continue
            home = where[k] if where is not None else self._placement.get(k, self._ctx)
            t = _to_tensor(v, home if where is not None else self._ctx, f"{what}['{k}']")
            check_dtype(k, torch_dtype(t), f"bind {what}")
            if not t.is_contiguous():
                t = t.contiguous()
            if not isinstance(t, NDArray):
                t = as_ndarray(t, home)
            out[k] = t
        missing = [n for n in names if n not in out]
        if missing and not allow_missing:
            raise MXNetError(f"{what}: no array for {missing}")
        return out

    def _compile_prog(self, for_training, is_train, with_dtypes=True, loss_scale=False):
        """``compile_symbol`` of what this executor runs: its symbol, or the one whose
        embedding tables are read through row arguments (``executor_rows.py``)."""
        rows = self._rows
        sym, shapes = (rows.symbol, rows.shapes) if rows else (self._symbol, self._input_shapes)
        req = (rows.grad_req if rows else self._grad_req) if for_training else {}
        dtypes = (rows.dtypes if rows else self._dtypes) if with_dtypes else None
        return compile_symbol(sym, shapes, for_training, req, is_train, self._ctx.target,
                              dtypes, loss_scale=loss_scale, merge_common=self._merge_common)

    def _compile(self):
        if self._for_training:
            self._train_prog = self._compile_prog(True, True, loss_scale=self._loss_scaling)
        if not self._for_training:
            self._infer_prog = self._compile_prog(False, False)
        elif is_mode_dependent(self._symbol):
            # compiled when first asked for (a forward with is_train=False): a training
            # run's first step needs only the training program
            self._infer_pending = True
        else:
            self._infer_prog = self._train_prog
        prog = self._train_prog or self._infer_prog
        self.outputs = [empty(s, self._ctx, t)
                        for s, t in zip(prog.output_shapes, _output_dtypes(prog))]
        # outputs inference gives sparse storage: the Program writes a dense shadow
        self.outputs = self._shadows.sparse_outputs(self.outputs, self._stypes["outputs"],
                                                    self._stypes["out_rules"])

    @property
    def _infer_prog(self):
        """The inference Program (compiled on first use when training, see _compile)."""
        if self._infer_pending:
            self._infer_pending = False
            self._infer_prog_now = self._compile_prog(False, False)
        return self._infer_prog_now

    @_infer_prog.setter
    def _infer_prog(self, prog):
        self._infer_pending = False
        self._infer_prog_now = prog

    # -- mxnet's array views --------------------------------------------------------
    @property
    def arg_arrays(self):
        return [self.arg_dict[n] for n in self._symbol.list_arguments()]

    @property
    def grad_arrays(self):
        return [self.grad_dict.get(n) for n in self._symbol.list_arguments()]

    @property
    def aux_arrays(self):
        return [self.aux_dict[n] for n in self._symbol.list_auxiliary_states()]

    @property
    def output_dict(self):
        return dict(zip(self._symbol.list_outputs(), self.outputs))

    # -- running ----------------------------------------------------------------------
    def _buffers_for(self, prog):
        bufs = self._buffers.get(id(prog))
        if bufs is None:
            dev = self._ctx.torch_device
            with threads.chosen_count():    # zeroing the pool: a busy machine's count
                bufs = self._pool.take([max(int(n), 1) for n in prog.buffers], dev,
                                       prog.buffer_dtypes or ["float32"] * len(prog.buffers))
                out_dtypes = _output_dtypes(prog)
                heads = {name: torch.zeros(prog.output_shapes[int(i)],
                                           dtype=getattr(torch, out_dtypes[int(i)]), device=dev)
                         for i, name in prog.head_grads.items()}
            self._buffers[id(prog)] = bufs
            self._head_grads[id(prog)] = heads
        return bufs

    @property
    def _total_exec_bytes(self):
        """Bytes of internal memory this executor's pool holds (shared ones included)."""
        return self._pool.nbytes()

    def _launches(self, prog, phase):
        """The launches of ``phase`` bound to this executor's arrays (bound once)."""
        key = (id(prog), phase)
        bound = self._bound.get(key)
        if bound is None:
            with gc_paused():      # thousands of views and closures: see gc_paused
                bound = bind_launches(prog.launches_in(phase), self._resolver(prog))
            if self._row_split is not None:
                self._row_split.attach(bound, prog, phase)
            self._bound[key] = bound
        return bound

    def _resolver(self, prog):
        bufs = self._buffers_for(prog)
        heads = self._head_grads[id(prog)]

        def resolve(kind, name, offset, numel):
            shadow = self._shadows.resolve(kind, name) if self._shadows else None
            if shadow is None and self._rows:
                shadow = self._rows.resolve(kind, name)
            if shadow is not None:
                base = shadow
            elif kind == "arg":
                base = self.arg_dict[name]
            elif kind == "aux":
                base = self.aux_dict[name]
            elif kind == "grad":
                base = self.grad_dict[name]
            elif kind == "out":
                base = self.outputs[int(name)]
            elif kind == "head_grad":
                base = heads[name]
            elif kind == "loss_scale":
                base = self._loss_scale
            elif kind == "held":
                # the tensor itself, never a view of it: the launch that writes it
                # replaces its storage (compiler/ops/registry.py, Extern.held)
                dtype = prog.held[int(name)][1]
                return self._pool.held(int(name), getattr(torch, dtype),
                                       self._ctx.torch_device)
            else:
                base = bufs[int(name)]
            # a plain tensor: NDArray's __torch_function__ would wrap the reshape and the
            # slice (bind_launches hands launches plain tensors in any case)
            flat = base.as_subclass(torch.Tensor).reshape(-1)
            return flat[offset:offset + max(numel, 1)] if offset or numel < flat.numel() else flat
        return resolve

    def forward(self, is_train=False, **kwargs):
        """Run the forward launches; return ``outputs``.

        Parameters
        ----------
        is_train : bool
            Training mode (Dropout active, BatchNorm batch statistics and
            moving-statistics update); needed before ``backward``.
        **kwargs
            New values for arguments, copied into ``arg_dict``.
        """
        _assign_inputs(self.arg_dict, kwargs)
        if is_train and not self._for_training:
            prog = self._infer_prog if self._train_prog is None else self._train_prog
            if self._train_prog is None and is_mode_dependent(self._symbol):
                self._train_prog = self._compile_prog(False, True, with_dtypes=False)
                prog = self._train_prog
        else:
            prog = self._train_prog if is_train else self._infer_prog
        self._run_forward(prog, is_train)
        if self._monitor is not None:
            for name, arr in zip(self._symbol.list_outputs(), self.outputs):
                self._monitor(name, arr)
        return self.outputs

    def _run_forward(self, prog, is_train):
        self._set_seed(prog)
        if self._shadows:
            self._shadows.before_forward()
        if self._rows:      # at the thread policy's count, as the Program's launches
            threads.run(None, self._rows.before_forward, self.arg_dict)
        if self._row_split is not None:
            self._row_split.before_forward(is_train)
        with device_guard(self._ctx):
            run_bound(self._launches(prog, "fwd"))
        if self._shadows:
            self._shadows.after_forward(self.arg_dict)
        self._last_prog = prog
        self._last_train = bool(is_train)

    def _backward_program(self):
        """The Program whose backward runs, and whether its forward must run first.

        After a training forward, the training Program. Otherwise mxnet still
        differentiates what the last forward computed: for a graph whose modes
        compute the same (no Dropout, BatchNorm, ...) the training Program, its
        forward run first when none has run; after ``forward(is_train=False)`` of
        one whose modes differ, a Program of the inference computation with its
        backward (compiled on first use), whose forward reruns in inference mode
        (no random draws, no moving-statistics update) to give its backward what it
        reads.
        """
        last = getattr(self, "_last_prog", None)
        if last is self._train_prog or (last is not None and last is self._eval_grad_prog):
            return last, False
        if not is_mode_dependent(self._symbol):
            return self._train_prog, last is None
        if last is None:
            raise MXNetError("backward() needs a forward first: this graph computes "
                             "differently in training and inference (Dropout, "
                             "BatchNorm, ...), so call forward(is_train=True) or "
                             "forward(is_train=False) before backward()")
        if self._eval_grad_prog is None:
            self._eval_grad_prog = self._compile_prog(True, False,
                                                      loss_scale=self._loss_scaling)
        return self._eval_grad_prog, True

    def _set_seed(self, prog):
        """A new seed for the random kernels of ``prog`` (Dropout's masks are drawn
        on the device from it), from this context's ``mx.random`` generator. It
        stays until the next forward, so the step's backward sees the same seed."""
        if prog.seed_buffer is None:
            return
        from .random import set_step_seed
        set_step_seed(self._buffers_for(prog)[int(prog.seed_buffer)], self._ctx)

    def backward(self, out_grads=None, is_train=True):
        """Run the backward launches, writing (or adding to) ``grad_dict``.

        Parameters
        ----------
        out_grads : NDArray or list of NDArray, optional
            Gradients of the outputs that are not loss operators.
        is_train : bool
            mxnet's flag; accepted. The gradient is that of the last forward's
            computation: after ``forward(is_train=False)`` of a graph with Dropout
            or BatchNorm, the inference computation's (see
            :meth:`_backward_program`).
        """
        if not self._for_training:
            return
        prog, rerun = self._backward_program()
        if rerun:
            self._run_forward(prog, False)
        self._buffers_for(prog)
        if out_grads is not None and not isinstance(out_grads, (list, tuple)):
            out_grads = [out_grads]
        if prog.head_grads:     # a loss head needs none: no call on most steps
            # the copies are ATen calls too: the launches' thread count (runtime.threads)
            threads.run(None, self._set_head_grads, prog, out_grads)
        if self._rows:
            self._rows.check_backward()
        if self._row_split is not None:
            self._row_split.before_backward()
        if self._shadows:
            self._shadows.before_backward()
        with device_guard(self._ctx):
            run_bound(self._marked(self._launches(prog, "bwd")))
        if self._shadows:
            self._shadows.after_backward(self.arg_dict)
        if self._rows:
            threads.run(None, self._rows.after_backward, self.grad_dict)

    def _set_head_grads(self, prog, out_grads):
        """Copy ``out_grads`` into the gradient arrays of the outputs that are not
        losses, checking each is given with its output's shape."""
        heads = self._head_grads[id(prog)]
        for i, name in prog.head_grads.items():
            i = int(i)
            if out_grads is None or i >= len(out_grads) or out_grads[i] is None:
                raise MXNetError(
                    f"output {i} ('{prog.output_names[i]}') is not a loss function, so "
                    f"backward needs its gradient: pass out_grads (head_gradient is required "
                    f"when the last operator is not a loss function)")
            given = out_grads[i]
            if is_sparse(given):        # a sparse head gradient: its dense values
                given = given._dense()
            g = _to_tensor(given, self._ctx, f"out_grads[{i}]")
            if tuple(g.shape) != tuple(heads[name].shape):
                raise MXNetError(f"out_grads[{i}] has shape {tuple(g.shape)}, output "
                                 f"'{prog.output_names[i]}' has {tuple(heads[name].shape)}")
            heads[name].copy_(g)

    def set_backward_marks(self, marks):
        """Call ``marks[i]()`` right after backward launch ``i`` of the training
        Program (positions in ``launches_in("bwd")``); ``None`` or ``{}``: no calls.

        A mark sees the arrays that launch and the ones before it wrote (a
        distributed kvstore starts reducing a gradient there, see
        runtime/kvstore_overlap.py); it runs inside the launch list, under
        ``torch.inference_mode``.
        """
        self._bwd_marks = (dict(marks), None, None) if marks else None

    def _marked(self, bound):
        """``bound`` with the marks of :meth:`set_backward_marks` run after their launches."""
        if self._bwd_marks is None:
            return bound
        marks, source, marked = self._bwd_marks
        if source is not bound:
            marked = BoundLaunches(bound)
            marked.names, marked.ids = bound.names, bound.ids
            marked.host_threads = bound.host_threads
            # what else the list carries (how the thread policy may run it) stays
            marked.__dict__.update(bound.__dict__)
            for i, mark in marks.items():
                if 0 <= i < len(bound):
                    marked[i] = _then(bound[i], mark)
            self._bwd_marks = (marks, bound, marked)
        return marked

    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """A new executor for new input shapes, sharing memory as mxnet's does.

        An array whose shape stays is the same array; one that shrinks (or keeps
        its size) is a view of the first elements of the original; one that
        grows is new and needs ``allow_up_sizing=True``. The outputs and the
        internal buffers are shared the same way (``shared_exec``), so the two
        executors must not run at the same time. The new shapes compile (or
        fetch from the cache) their own Program.

        Parameters
        ----------
        partial_shaping : bool
            Allow the shapes of arguments not named in ``kwargs`` to change.
        allow_up_sizing : bool
            Allow arrays to grow (new memory for them).
        **kwargs
            New input shapes by name.
        """
        names = self._symbol.list_arguments()
        inferred, _, _ = self._symbol.infer_shape_partial(**kwargs)
        shapes = {}
        for name, s in zip(names, inferred):
            # a partial answer (a 0 dim) is not known yet: the array's own shape
            shapes[name] = tuple(s) if s and 0 not in s else tuple(self.arg_dict[name].shape)
        arg_shapes, out_shapes, aux_shapes = self._symbol.infer_shape(**shapes)
        if arg_shapes is None:
            raise MXNetError(f"reshape: cannot infer every shape from {kwargs}")

        def fit(name, old, shape, what):
            shape = tuple(int(x) for x in shape)
            if tuple(old.shape) == shape:
                return old
            if name is not None and name not in kwargs and not partial_shaping:
                raise MXNetError(f"reshape: the shape of {what} '{name}' changes from "
                                 f"{tuple(old.shape)} to {shape}; name it in the call, or "
                                 f"pass partial_shaping=True to allow it")
            if is_sparse(old):      # a sparse array shares no memory: a new empty one
                return new_array(old.stype, shape, old.context, old.dtype)
            if _numel(shape) > old.numel():
                if not allow_up_sizing:
                    raise MXNetError(
                        f"reshape: {what} '{name}' grows from {tuple(old.shape)} to {shape}; "
                        f"making the big executor first and reshaping down shares memory, "
                        f"or pass allow_up_sizing=True to allocate new arrays")
                return empty(shape, getattr(old, "context", self._ctx), old.dtype)
            # the first elements of the original, as mxnet's NDArray.reshape shares them
            view = old.reshape(-1)[:_numel(shape)].view(shape)
            return as_ndarray(view, getattr(old, "context", self._ctx))

        args, grads = {}, {}
        for name, s in zip(names, arg_shapes):
            args[name] = fit(name, self.arg_dict[name], s, "argument")
            if name in self.grad_dict:
                grads[name] = fit(name, self.grad_dict[name], s, "gradient of")
        aux = {n: fit(n, self.aux_dict[n], s, "auxiliary state")
               for n, s in zip(self._symbol.list_auxiliary_states(), aux_shapes)}
        new = type(self)(self._symbol, self._ctx, args, grads or None, self._grad_req, aux,
                         shared_exec=self, group2ctx=self._group2ctx)
        if not self.outputs:
            return new
        outputs = []
        for mine, old, s in zip(new.outputs, self.outputs, out_shapes):
            if is_sparse(mine):         # its own, over its own dense shadow
                outputs.append(mine)
                continue
            outputs.append(fit(None, old, s, "output") if _numel(s) <= old.numel()
                           else empty(tuple(s), self._ctx, old.dtype))
        new.outputs = outputs      # bound on first use: the new launches write these
        return new

    def set_loss_scale(self, value):
        """Multiply the gradient every head starts the backward pass with (a loss
        operator's, or ``out_grads``) by ``value``: dynamic loss scaling for
        ``mx.contrib.amp`` (not an mxnet method).

        The first call recompiles the training Program with the scale as an input
        (``compile_symbol(loss_scale=True)``), so it must come before a forward; later
        calls only set the value, which executors sharing memory with this one
        (buckets, reshapes) read too.

        Parameters
        ----------
        value : float
        """
        if not self._for_training:
            raise MXNetError("set_loss_scale: this executor was bound without gradients "
                             "(grad_req 'null' everywhere); a loss scale needs a backward")
        value = float(value)
        if not (value > 0 and value != float("inf")):
            raise MXNetError(f"set_loss_scale: the scale must be a positive finite number, "
                             f"got {value}")
        if not self._loss_scaling:
            old = self._train_prog
            self._loss_scaling = True
            self._row_split = None          # the halves would lack the scale
            self._train_prog = self._compile_prog(True, True, loss_scale=True)
            if self._infer_prog_now is old:       # (a pending one stays pending)
                self._infer_prog = self._train_prog
            self._buffers.pop(id(old), None)
            self._head_grads.pop(id(old), None)
            for key in [k for k in self._bound if k[0] == id(old)]:
                del self._bound[key]
            self._last_prog = None          # the next backward needs a new forward
            self._eval_grad_prog = None     # recompiled with the scale when asked for
        self._loss_scale.fill_(value)

    def set_monitor_callback(self, callback, monitor_all=False):
        self._monitor = callback

    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        for name, value in arg_params.items():
            if name in self.arg_dict and is_sparse(self.arg_dict[name]):
                self.arg_dict[name][:] = value if is_sparse(value) else \
                    _to_tensor(value, self._ctx, name)
            elif name in self.arg_dict:
                self.arg_dict[name].copy_(_to_tensor(value, self._ctx, name))
            elif not allow_extra_params:
                raise MXNetError(f"copy_params_from: '{name}' is not an argument")
        for name, value in (aux_params or {}).items():
            if name in self.aux_dict:
                self.aux_dict[name].copy_(_to_tensor(value, self._ctx, name))
            elif not allow_extra_params:
                raise MXNetError(f"copy_params_from: '{name}' is not an auxiliary state")

    def get_optimized_symbol(self):
        """The symbol this executor's forward computes after the compiler's graph
        simplification: common subexpressions merged (unless ``MXNET_ELIMINATE_COMMON_EXPR``
        was ``0`` when it was bound; the values are the same either way), ``x + 0``
        folded, dead nodes removed.

        Returns
        -------
        Symbol
        """
        from compiler.artifacts.compile import optimized_symbol
        return optimized_symbol(self._symbol, self._input_shapes, self._merge_common)

    @property
    def programs(self):
        """The compiled Programs (training, inference) this executor runs."""
        return self._train_prog, self._infer_prog

    def debug_str(self):
        """The graph and the memory plan of this executor, as text (mxnet's ``debug_str``).

        First mxnet's layout of the symbol: ``Symbol Outputs``, then every
        node in topological order (``Variable:name`` with its shape, or
        ``Op:type, Name=name`` with its inputs, attributes and output
        shapes). Then, per compiled Program (training and, when it differs,
        inference), the launches in order (fused operators, what the kernel
        computes, its hash) and the memory plan: each internal buffer with
        its size, the graph values that share it over the step (names from
        the compiler's plan, which is recomputed here: the passes are pure)
        and the launches that use it, and the planned total. Buffers are
        allocated here if no forward has run yet; the last line gives the
        bytes of the pool this executor uses (``_total_exec_bytes``).
        """
        lines = _graph_lines(self._symbol, self._input_shapes)
        progs = []
        if self._train_prog is not None:
            progs.append(("training", self._train_prog, self._grad_req, True))
        if self._infer_prog is not None and self._infer_prog is not self._train_prog:
            progs.append(("inference", self._infer_prog, {}, False))
        for title, prog, grad_req, is_train in progs:
            self._buffers_for(prog)
            rows = self._rows         # the plan is the compiled symbol's (executor_rows.py)
            values = _buffer_values(rows.symbol if rows else self._symbol,
                                    rows.shapes if rows else self._input_shapes,
                                    rows.grad_req if rows and grad_req else grad_req,
                                    is_train, prog)
            lines += _plan_lines(title, prog, values)
        total = self._pool.nbytes()
        # mxnet's own last line (scripts and its tests parse it), then the detail
        lines.append(f"Total {total >> 20} MB allocated")
        kept = f" and {len(self._pool.kept)} values kept by reference" if self._pool.kept \
            else ""
        lines.append(f"({total} bytes in {len(self._pool.tensors)} pool buffers{kept})")
        return "\n".join(lines) + "\n"


class _BufferPool:
    """Flat tensors handed to Programs; one Program never gets one tensor twice.

    A request takes, for each buffer in turn, the smallest free pool tensor
    of its dtype that is large enough, and allocates (growing the pool) only
    when none is.
    """

    def __init__(self):
        self.tensors = []
        self.kept = {}

    def held(self, k, dtype, device):
        """The tensor that holds a Program's k-th value kept by reference
        (``Program.held``): empty until the launch that writes it points it at the
        operator's own result. One per pool, so executors that share memory (buckets,
        reshapes: never run at the same time) share it as they share buffers."""
        t = self.kept.get((k, dtype, device))
        if t is None:
            # outside inference mode: a launch replaces its storage with grad mode on
            with torch.inference_mode(False):
                t = self.kept[(k, dtype, device)] = torch.empty(0, dtype=dtype,
                                                               device=device)
        return t

    def take(self, sizes, device, dtypes):
        # Free tensors of each (device, dtype) sorted by (size, position): a request
        # bisects for the smallest that fits (the first such in the pool on a tie),
        # instead of scanning the whole pool for each of a Program's buffers.
        free = {}
        for i, t in enumerate(self.tensors):
            free.setdefault((t.device, torch_dtype(t)), []).append((t.numel(), i))
        for entries in free.values():
            entries.sort()
        out = []
        for size, name in zip(sizes, dtypes):
            dtype = getattr(torch, name)
            entries = free.get((torch.device(device), dtype), [])
            k = bisect.bisect_left(entries, (size, -1))
            if k < len(entries):
                best = entries.pop(k)[1]
            else:
                self.tensors.append(torch.zeros(size, dtype=dtype, device=device))
                best = len(self.tensors) - 1
            out.append(self.tensors[best][:size])
        return out

    def nbytes(self):
        return sum(t.element_size() * t.numel()
                   for t in self.tensors + list(self.kept.values()))


def _then(run, mark):
    """A launch's ``run`` followed by ``mark()``."""
    def run_then_mark():
        run()
        mark()
    return run_then_mark


def _output_dtypes(prog):
    return prog.output_dtypes or ["float32"] * len(prog.output_shapes)


def _assign_inputs(arg_dict, values):
    """Copy ``forward(**values)`` into the bound arrays (same shapes only)."""
    for name, value in values.items():
        if name not in arg_dict:
            raise MXNetError(f"forward: '{name}' is not an argument; arguments are "
                             f"{list(arg_dict)}")
        if is_sparse(arg_dict[name]):       # x[:] = value: same storage, or dense
            arg_dict[name][:] = value
            continue
        t = _to_tensor(value, arg_dict[name].context, f"forward({name}=...)")
        if tuple(t.shape) != tuple(arg_dict[name].shape):
            raise MXNetError(f"forward: '{name}' has shape {tuple(t.shape)}, the executor "
                             f"was bound with {tuple(arg_dict[name].shape)}; use "
                             f"reshape() for new shapes")
        arg_dict[name].copy_(t)


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def allocate_arrays(symbol, ctx, type_dict=None, shapes=None, group2ctx=None):
    """Zeroed arrays of the inferred shapes for every argument and auxiliary state
    (what ``simple_bind`` binds).

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
        Where arrays live unless ``group2ctx`` places them (:func:`placement`).
    type_dict : dict of str to dtype, optional
        Dtypes given by name; the others are inferred (mxnet's rules).
    shapes : dict of str to tuple
        The input shapes to infer the others from.
    group2ctx : dict of str to Context, optional

    Returns
    -------
    tuple
        ``(args, aux)``: dicts of name -> NDArray.
    """
    shapes = dict(shapes or {})
    dtypes = all_dtypes(symbol, {n: check_dtype(n, t, "simple_bind type_dict")
                                 for n, t in (type_dict or {}).items()})
    arg_shapes, _, aux_shapes = symbol.infer_shape(**shapes)
    if arg_shapes is None:
        arg_shapes, _, aux_shapes = symbol.infer_shape_partial(**shapes)
        missing = [n for n, s in zip(symbol.list_arguments(), arg_shapes) if not s or 0 in s]
        if not missing:     # every argument known: an output is not (boolean_mask's)
            from compiler.passes.infer_shapes import infer_shapes
            infer_shapes(symbol.to_graph(), shapes)        # raises, naming the node
        raise MXNetError(f"simple_bind: cannot infer the shapes of {missing}; give them "
                         f"as keyword arguments (name=shape)")
    ctx = ctx if isinstance(ctx, Context) else current_context()
    place = placement(symbol, ctx, group2ctx)
    stypes = infer_storage(symbol)["args"]     # csr / row_sparse variables stay sparse
    args = {n: new_array(stypes.get(n, "default"), s, place.get(n, ctx), dtypes[n])
            for n, s in zip(symbol.list_arguments(), arg_shapes)}
    aux = {n: empty(s, place.get(n, ctx), dtypes[n])
           for n, s in zip(symbol.list_auxiliary_states(), aux_shapes)}
    return args, aux


def placement(symbol, ctx, group2ctx) -> dict:
    """The context of each argument and auxiliary state in a ``ctx_group`` that
    ``group2ctx`` maps (mxnet's model-parallel placement); others use ``ctx``.

    As in mxnet, a variable whose group the map does not name stays on
    ``ctx``. Where the operators of a graph land on several contexts,
    ``runtime/binding.py: bind`` gives a :class:`PartitionedExecutor` that copies
    values across contexts (``runtime/executor_partitioned.py``).
    """
    if not group2ctx:
        return {}
    attrs = symbol.attr_dict()
    out = {}
    for name in symbol.list_arguments() + symbol.list_auxiliary_states():
        group = attrs.get(name, {}).get("__ctx_group__")
        if group is not None and group in group2ctx:
            target = group2ctx[group]
            if not isinstance(target, Context):
                raise MXNetError(f"group2ctx['{group}'] must be a Context, got {target!r}")
            out[name] = target
    return out


def _nodes(symbol):
    from compiler.symbol_node import topo
    return topo(symbol._outputs)


def _graph_lines(symbol, input_shapes):
    """mxnet's ``Symbol.Print`` layout, with the inferred shape of every output."""
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape(**input_shapes)
    shapes = {}
    for (node, i), shape in zip(internals._outputs, out_shapes or []):
        shapes[(id(node), i)] = tuple(shape)
    lines = ["Symbol Outputs:"]
    for k, (name, (node, i)) in enumerate(zip(symbol.list_outputs(), symbol._outputs)):
        lines.append(f"\toutput[{k}]={name}({i}) shape={shapes.get((id(node), i))}")
    from compiler.symbol_node import topo
    for node in topo(symbol._outputs):
        if node.op == "null":
            lines.append(f"Variable:{node.name} shape={shapes.get((id(node), 0))}")
            continue
        lines += ["--------------------", f"Op:{node.op}, Name={node.name}", "Inputs:"]
        for k, (src, j) in enumerate(node.inputs):
            lines.append(f"\targ[{k}]={src.output_names()[j]}({j})")
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
        if attrs:
            lines.append("Attrs:")
            lines += [f"\t{k}={v}" for k, v in sorted(attrs.items())]
        lines.append("Outputs:")
        for j, name in enumerate(node.output_names()):
            shape = shapes.get((id(node), j))
            lines.append(f"\t{name}" + ("" if shape is None else f" shape={shape}"))
    return lines


def _buffer_values(symbol, input_shapes, grad_req, is_train, prog):
    """``{buffer: [(offset, shape, value name)]}`` from the compiler's memory plan.

    The passes are pure, so running them again gives the plan the Program
    was built from; ``None`` if it does not match (then launches are listed).
    """
    from compiler.artifacts.compile import all_argument_shapes, lstm_layers_for
    from compiler.passes.pipeline import run_passes
    shapes = all_argument_shapes(symbol, input_shapes)
    g, _, plan = run_passes(symbol.to_graph(), shapes, grad_req, is_train, {},
                            lstm_layers=lstm_layers_for(prog.target),
                            split_concats=prog.target != "cpu")
    if [int(n) for n in plan["buffers"]] != [int(n) for n in prog.buffers]:
        return None
    values = {b: [] for b in range(len(prog.buffers))}
    for (node, idx), layouts in sorted(plan["layouts"].items(), key=lambda kv: kv[0]):
        name = g.node(node).get("name") or f"node{node}"
        name = name if idx == 0 else f"{name}[{idx}]"
        for slot, offset, shape, _ in layouts:
            if slot[0] == "buf":
                values[int(slot[1])].append((int(offset), tuple(shape), name))
    return values


def _plan_lines(title, prog, values):
    """The launches of ``prog`` and the values that share each of its internal buffers."""
    counts = {"fwd": 0, "bwd": 0}
    lines = ["====================",
             f"Program ({title}, target {prog.target}): {len(prog.launches)} launches"]
    users = {b: [] for b in range(len(prog.buffers))}
    kept_users = {}
    for pos, ln in enumerate(prog.launches):
        label = f"{ln.phase}[{counts[ln.phase]}]"
        counts[ln.phase] += 1
        ops = ", ".join(prog.groups[pos]) if pos < len(prog.groups) else ""
        lines.append(f"Launch {label} ({ops}): {ln.summary} kernel={ln.kernel}")
        for kind, name, _, _ in ln.args:
            if kind == "buf" and label not in users[int(name)]:
                users[int(name)].append(label)
            elif kind == "held":
                kept_users.setdefault(int(name), []).append(label)
    lines.append("Memory plan:")
    total = 0
    for b, size in enumerate(prog.buffers):
        dtype = prog.buffer_dtypes[b] if prog.buffer_dtypes else "float32"
        nbytes = ITEMSIZE[dtype] * max(int(size), 1)
        total += nbytes
        rand = " (random seed, set before each forward)" if b == prog.seed_buffer else ""
        held = values.get(b, []) if values is not None else []
        lines.append(f"Buffer {b}: {int(size)} {dtype}, {nbytes} bytes{rand}, shared by "
                     f"{len(held)} value(s), used by launches {', '.join(users[b])}")
        for offset, shape, name in held:
            lines.append(f"\t{name} shape={shape} at element {offset}")
    lines.append(f"Total {len(prog.buffers)} buffers, {total} bytes planned")
    for k, (numel, dtype) in enumerate(prog.held):
        lines.append(f"Kept by reference {k}: {int(numel)} {dtype}, "
                     f"{ITEMSIZE[dtype] * int(numel)} bytes (the tensor its operator "
                     f"returns, not planned), used by launches "
                     f"{', '.join(kept_users.get(k, []))}")
    return lines


RowSplitter.executor_class = Executor     # the halves are plain Executors
