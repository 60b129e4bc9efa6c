"""``mx.nd.CachedOp``: a Symbol called on NDArrays as one operator (mxnet 1.9.1).

A CachedOp binds its Symbol once per signature (input shapes, dtypes, context and
training mode) and reuses the compiled Program: the call copies its arrays in, runs
the forward, and returns new arrays. Inside ``autograd.record()`` the call is one
entry of the tape (``runtime/autograd_tape.py``); its gradient binds the Symbol with
gradients, runs the forward again on the recorded inputs (random kernels get the
seed the call drew, so Dropout's mask is the one the caller saw) and then the
backward. A training-mode call writes the updated auxiliary states (BatchNorm's
moving statistics) back into the caller's arrays, as mxnet's does.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import autograd_tape, ndarray_mx
from .context import current_context


class CachedOp:
    """A Symbol run as one imperative operator.

    Parameters
    ----------
    sym : Symbol
        The graph; a call takes one array per ``sym.list_inputs()``, in that order.
    flags : sequence of (str, str), optional
        mxnet's CachedOp flags (``static_alloc``, ``static_shape`` ...): memory
        planning is always static here, so they are accepted and change nothing.
    thread_safe : bool, optional
        Accepted, as mxnet's.
    """

    def __init__(self, sym, flags=(), thread_safe=False):
        self._symbol = sym
        self._flags = tuple(flags)
        self._inputs = sym.list_inputs()
        self._aux = set(sym.list_auxiliary_states())
        self._forward_execs = {}
        self._grad_execs = {}

    def __call__(self, *args, out=None, default_ctx=None):
        """Run the graph on ``args`` (one NDArray per input, in ``list_inputs()``
        order); ``out`` receives the outputs in place. Returns one NDArray, or a list
        when the graph has several outputs."""
        if len(args) != len(self._inputs):
            raise MXNetError(f"CachedOp: the graph takes {len(self._inputs)} inputs "
                             f"{self._inputs}, got {len(args)}")
        for name, a in zip(self._inputs, args):
            if not isinstance(a, torch.Tensor):
                raise MXNetError(f"CachedOp: input '{name}' must be an NDArray, got "
                                 f"{type(a).__name__}")
        ctx = args[0].context if args else (default_ctx or current_context())
        is_train = autograd_tape.is_training()
        exe = self._executor(self._forward_execs, args, ctx, is_train, "null")
        outs, seed = self._run(exe, args, is_train)
        if is_train:
            with torch.no_grad():
                for name, a in zip(self._inputs, args):
                    if name in self._aux:
                        a.as_subclass(torch.Tensor).copy_(exe.aux_dict[name])
        res = [ndarray_mx._like(o.as_subclass(torch.Tensor).clone(), o) for o in outs]
        if autograd_tape.is_recording() and any(autograd_tape.tracked(a) for a in args):
            entry = autograd_tape.record_call("CachedOp", [], args, (), {}, ctx, is_train,
                                              seed, res)
            entry.custom = self._grads
        if out is not None:
            outs_to = [out] if isinstance(out, torch.Tensor) else list(out)
            with torch.no_grad():
                for dst, src in zip(outs_to, res):
                    dst.as_subclass(torch.Tensor).copy_(src)
            return out
        return res[0] if len(res) == 1 else res

    def _executor(self, cache, args, ctx, is_train, req):
        from .executor import Executor
        key = (tuple((tuple(a.shape), ndarray_mx.torch_dtype(a)) for a in args),
               ctx.device_type, ctx.device_id, ctx.target, is_train)
        exe = cache.get(key)
        if exe is None:
            given = {n: a.detach().as_subclass(torch.Tensor).clone(
                memory_format=torch.contiguous_format) for n, a in zip(self._inputs, args)}
            arg_names = self._symbol.list_arguments()
            grad_req = {n: req for n in arg_names}
            exe = cache[key] = Executor(self._symbol, ctx, {n: given[n] for n in arg_names},
                                        grad_req=grad_req,
                                        aux_states={n: given[n] for n in self._aux})
            if req != "null" and not is_train:
                # a call recorded in predict mode: the gradient of the inference graph
                exe._train_prog = exe._compile_prog(True, False)
        return exe

    def _run(self, exe, args, is_train, seed=None):
        """Copy ``args`` in and run the forward; returns (outputs, the seed drawn)."""
        with torch.no_grad():
            for name, a in zip(self._inputs, args):
                dst = exe.aux_dict[name] if name in self._aux else exe.arg_dict[name]
                dst.as_subclass(torch.Tensor).copy_(a.as_subclass(torch.Tensor))
        if seed is not None:
            exe._set_seed = lambda prog: _pin_seed(exe, prog, seed)
        try:
            outs = exe.forward(is_train=is_train)
        finally:
            exe.__dict__.pop("_set_seed", None)
        prog = exe._last_prog
        drawn = None
        if prog is not None and prog.seed_buffer is not None:
            buf = exe._buffers_for(prog)[int(prog.seed_buffer)]
            drawn = int(buf.reshape(-1)[:1].view(torch.int32)[0])
        return outs, drawn

    def _grads(self, entry, ograds):
        """The tape's gradient of one recorded call: one tensor (or None) per input."""
        exe = self._executor(self._grad_execs, entry.inputs, entry.ctx, entry.is_train,
                             "write")
        outs, _ = self._run(exe, entry.inputs, True, entry.seed)
        full = [g if g is not None else torch.zeros_like(o.as_subclass(torch.Tensor))
                for g, o in zip(list(ograds) + [None] * (len(outs) - len(ograds)), outs)]
        exe.backward(full)
        return [None if n in self._aux else exe.grad_dict[n].as_subclass(torch.Tensor).clone()
                for n in self._inputs]


def _pin_seed(exe, prog, seed):
    if prog.seed_buffer is not None:
        buf = exe._buffers_for(prog)[int(prog.seed_buffer)]
        buf.reshape(-1)[:1].view(torch.int32).fill_(seed)
