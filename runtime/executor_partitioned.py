"""An executor whose graph spans several contexts (mxnet's model parallelism).

``bind(..., group2ctx=...)`` on a symbol whose ``ctx_group`` attributes put
nodes on more than one context gives a :class:`PartitionedExecutor`. The
compiler places every node and cuts the graph where an edge crosses
contexts (``compiler/frontend/context_placement.py``); each segment is an ordinary
:class:`Executor` on its context, with its own Program and memory. This
class runs the segments in order and moves values across the cuts:

- forward: a cut value is copied from the producing segment's output into
  the receiving segment's variable on the receiver's context (mxnet's
  ``_CrossDeviceCopy``); a parameter read on a context other than its
  own is copied there too;
- backward, segments in reverse: the gradient a segment computes for a
  received variable is copied back and summed into the producer's head
  gradient; gradients of a parameter computed on several contexts are
  summed into its gradient array, honouring its ``grad_req``.

Arrays (``arg_dict``, ``grad_dict``, ``aux_dict``) live on their variable's
context, outputs on the context of the node that computes them, as in mxnet.

A graph with ``Custom`` nodes (Python operators, ``mx.operator``) is cut the
same way, with each Custom node a segment of its own: a
``runtime/custom_op.py: CustomExecutor`` that calls the op's ``forward`` and
``backward`` on the arrays of the cut, between the compiled segments. No
Program ever holds a Custom node, so no fused kernel crosses one.
"""
from __future__ import annotations

from compiler.artifacts.compile import all_dtypes
from compiler.frontend.context_placement import assign_contexts, partition_by_context
from compiler.ir.dtypes import dtype_name
from compiler.errors import MXNetError

from .context import Context, current_context
from .custom_op import CustomExecutor
from .executor import (Executor, _assign_inputs, _graph_lines, _normalize_grad_req, _to_tensor,
                       placement)
from .ndarray import NDArray, empty


def variable_contexts(symbol, ctx, args, aux_states, group2ctx) -> dict:
    """Where each variable lives: its array's context, else its group's, else ``ctx``."""
    place = placement(symbol, ctx, group2ctx)
    out = {}
    for names, arrays in ((symbol.list_arguments(), args),
                          (symbol.list_auxiliary_states(), aux_states or {})):
        if isinstance(arrays, (list, tuple)):
            arrays = dict(zip(names, arrays))
        for name in names:
            value = arrays.get(name)
            out[name] = value.context if isinstance(value, NDArray) else place.get(name, ctx)
    return out


def custom_nodes(symbol) -> set:
    """``id(node)`` of the ``Custom`` nodes of ``symbol`` (each runs as a segment of its own)."""
    return {id(n) for n in symbol._nodes() if n.op == "Custom"}


def spans_contexts(symbol, ctx, args, aux_states, group2ctx) -> bool:
    """Whether ``group2ctx`` places the nodes of ``symbol`` on more than one context."""
    if not group2ctx:
        return False
    for group, target in group2ctx.items():
        if not isinstance(target, Context):
            raise MXNetError(f"group2ctx['{group}'] must be a Context, got {target!r}")
    where = assign_contexts(symbol, variable_contexts(symbol, ctx, args, aux_states, group2ctx),
                            group2ctx, ctx)
    return len(set(where.values())) > 1


class PartitionedExecutor(Executor):
    """:class:`Executor`'s API over one sub-executor per context segment.

    Built by ``runtime/binding.py: bind`` when :func:`spans_contexts` holds; the
    parameters are :class:`Executor`'s.
    """

    def __init__(self, symbol, ctx, args, args_grad=None, grad_req="write", aux_states=None,
                 shared_exec=None, group2ctx=None):
        self._symbol = symbol
        self._ctx = ctx = ctx if isinstance(ctx, Context) else current_context()
        self._group2ctx = group2ctx
        self._monitor = None
        arg_names = symbol.list_arguments()
        aux_names = symbol.list_auxiliary_states()
        where = variable_contexts(symbol, ctx, args, aux_states, group2ctx)
        self.arg_dict = self._collect(args, arg_names, "args", where=where)
        aux = self._collect(aux_states or {}, aux_names, "aux_states", True, where)
        shapes = {n: tuple(a.shape) for n, a in self.arg_dict.items()}
        _, _, aux_shapes = symbol.infer_shape(**shapes)
        given = {n: dtype_name(a.dtype) for n, a in {**self.arg_dict, **aux}.items()}
        dtypes = all_dtypes(symbol, given)
        for name, shape in zip(aux_names, aux_shapes or []):
            aux.setdefault(name, empty(shape, where[name], dtypes[name]))
        self.aux_dict = aux
        self._input_shapes = shapes
        self._grad_req = _normalize_grad_req(grad_req, arg_names)
        grads = self._collect(args_grad or {}, arg_names, "args_grad", True, where)
        for n in arg_names:
            if self._grad_req[n] != "null" and n not in grads:
                if args_grad is not None:
                    raise MXNetError(f"args_grad has no array for '{n}' whose grad_req is "
                                     f"'{self._grad_req[n]}'")
                grads[n] = empty(shapes[n], where[n], self.arg_dict[n].dtype)
        self.grad_dict = grads
        self._for_training = any(r != "null" for r in self._grad_req.values())

        node_ctx = assign_contexts(symbol, where, group2ctx or {}, ctx)
        self._segments, self._output_at = partition_by_context(symbol, node_ctx,
                                                               custom_nodes(symbol))
        entry_shapes = _entry_shapes(symbol, shapes)
        entry_dtypes = _entry_dtypes(symbol, given)
        shared = _segments_by_key(shared_exec)
        self.segment_executors = []
        # per segment: [(variable, source array or (segment, pos))]; a source on
        # the segment's own context is bound as it is, and not copied
        self._copies_in = []
        self._param_grads = {}   # argument -> [(segment, variable)] computed off its own array
        self._direct = set()     # arguments bound as they are in some segment
        self._aux_back = []      # per segment: [(local aux, original aux)]
        self.copies = []         # (value, from context, to context): mxnet's copy nodes
        trains = []
        for s, seg in enumerate(self._segments):
            sub_args, sub_grads, sub_req, sub_aux = {}, {}, {}, {}
            copies, aux_back = [], []
            for name in seg.symbol.list_arguments():
                if name in seg.received:
                    src_seg, pos = seg.received[name]
                    node, idx = self._segments[src_seg].entries[pos]
                    sub_req[name] = "write" if trains[src_seg] else "null"
                    copies.append((name, (src_seg, pos)))
                    if self._segments[src_seg].context == seg.context:
                        # a cut inside one context (A -> B -> A): read the array itself
                        sub_args[name] = self.segment_executors[src_seg].outputs[pos]
                    else:
                        sub_args[name] = empty(entry_shapes[(id(node), idx)], seg.context,
                                               entry_dtypes[(id(node), idx)])
                        self.copies.append((node.output_names()[idx],
                                            self._segments[src_seg].context, seg.context))
                elif self.arg_dict[name].context == seg.context and name not in self._direct:
                    self._direct.add(name)
                    sub_args[name] = self.arg_dict[name]
                    sub_req[name] = self._grad_req[name]
                    if name in self.grad_dict:
                        sub_grads[name] = self.grad_dict[name]
                else:
                    sub_args[name] = empty(shapes[name], seg.context, self.arg_dict[name].dtype)
                    copies.append((name, self.arg_dict[name]))
                    self.copies.append((name, self.arg_dict[name].context, seg.context))
                    sub_req[name] = "null" if self._grad_req[name] == "null" else "write"
                    if sub_req[name] != "null":
                        self._param_grads.setdefault(name, []).append((s, name))
                if sub_req[name] != "null" and name not in sub_grads:
                    sub_grads[name] = empty(sub_args[name].shape, seg.context,
                                            sub_args[name].dtype)
            for name in seg.symbol.list_auxiliary_states():
                original = self.aux_dict[name]
                if original.context == seg.context:
                    sub_aux[name] = original
                else:
                    sub_aux[name] = empty(tuple(original.shape), seg.context, original.dtype)
                    aux_back.append((sub_aux[name], original))
                    self.copies.append((name, original.context, seg.context))
            trains.append(any(r != "null" for r in sub_req.values()))
            if seg.isolated is not None:
                exe = CustomExecutor(seg.symbol, seg.context, sub_args, sub_grads, sub_req,
                                     sub_aux)
            else:
                exe = Executor(seg.symbol, seg.context, sub_args, sub_grads or None, sub_req,
                               sub_aux, shared_exec=shared.get(_key(seg)))
            self.segment_executors.append(exe)
            self._copies_in.append(copies)
            self._aux_back.append(aux_back)
        self._trains = trains
        self._last_train = False
        self.outputs = self._gather_outputs()

    # -- running ----------------------------------------------------------------------
    def _gather_outputs(self):
        outs = []
        for s, pos in self._output_at:
            outs.append(self.arg_dict[pos] if s is None else self.segment_executors[s].outputs[pos])
        return outs

    def forward(self, is_train=False, **kwargs):
        """Run every segment in order, copying values across the cuts; return ``outputs``."""
        _assign_inputs(self.arg_dict, kwargs)
        for exe, copies, aux_back in zip(self.segment_executors, self._copies_in,
                                         self._aux_back):
            for name, source in copies:
                if isinstance(source, tuple):
                    source = self.segment_executors[source[0]].outputs[source[1]]
                if exe.arg_dict[name] is not source:
                    exe.arg_dict[name].copy_(source)
            for local, original in aux_back:
                local.copy_(original)
            exe.forward(is_train=is_train)
            for local, original in aux_back:
                original.copy_(local)
        self._last_train = bool(is_train)
        self.outputs = self._gather_outputs()
        if self._monitor is not None:
            for name, arr in zip(self._symbol.list_outputs(), self.outputs):
                self._monitor(name, arr)
        return self.outputs

    def backward(self, out_grads=None, is_train=True):
        """Run the segments' backward in reverse order, carrying gradients across the cuts.

        Parameters
        ----------
        out_grads : NDArray or list of NDArray, optional
            Gradients of the outputs that are not loss operators.
        """
        if not self._for_training:
            return
        if not self._last_train:
            raise MXNetError("backward() needs a forward(is_train=True) first")
        if out_grads is not None and not isinstance(out_grads, (list, tuple)):
            out_grads = [out_grads]
        heads = [dict() for _ in self._segments]      # segment -> {position: gradient}
        for i, (s, pos) in enumerate(self._output_at):
            if s is None or not self._trains[s]:
                continue
            if not _takes_head_grad(self.segment_executors[s], pos):
                continue                             # a loss output: no head gradient
            if out_grads is None or i >= len(out_grads) or out_grads[i] is None:
                raise MXNetError(
                    f"output {i} ('{self._symbol.list_outputs()[i]}') is not a loss function, "
                    f"so backward needs its gradient: pass out_grads")
            heads[s][pos] = _to_tensor(out_grads[i], self._segments[s].context,
                                       f"out_grads[{i}]")
        for s in reversed(range(len(self._segments))):
            exe = self.segment_executors[s]
            if self._trains[s]:
                n_out = len(self._segments[s].entries)
                exe.backward([heads[s].get(p) for p in range(n_out)])
            for name, source in self._copies_in[s]:
                if not isinstance(source, tuple) or name not in exe.grad_dict:
                    continue
                src, pos = source
                g = exe.grad_dict[name].to(self._segments[src].context.torch_device)
                heads[src][pos] = g.clone() if pos not in heads[src] else heads[src][pos] + g
        for name, parts in self._param_grads.items():
            total = None
            for s, var in parts:
                g = self.segment_executors[s].grad_dict[var].to(self.grad_dict[name].device)
                total = g.clone() if total is None else total.add_(g)
            if name in self._direct or self._grad_req[name] == "add":
                self.grad_dict[name].add_(total)
            else:
                self.grad_dict[name].copy_(total)

    def set_monitor_callback(self, callback, monitor_all=False):
        self._monitor = callback

    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """:meth:`Executor.reshape`; each segment shares memory with its counterpart here."""
        new = super().reshape(partial_shaping, allow_up_sizing, **kwargs)
        new.outputs = new._gather_outputs()    # the segments' own outputs, not fitted ones
        return new

    # -- inspection -------------------------------------------------------------------
    @property
    def programs(self):
        """The (training, inference) Programs of each segment, in run order."""
        return [exe.programs for exe in self.segment_executors]

    @property
    def _total_exec_bytes(self):
        return sum(exe._total_exec_bytes for exe in self.segment_executors)

    def debug_str(self):
        """mxnet's graph listing, the cross-context copies, then each segment's plan."""
        lines = _graph_lines(self._symbol, self._input_shapes)
        for value, src, dst in self.copies:
            lines += ["--------------------", f"Op:_CrossDeviceCopy, Name={value}_copy",
                      f"\tfrom {src} to {dst}"]
        for s, (seg, exe) in enumerate(zip(self._segments, self.segment_executors)):
            lines.append("====================")
            kind = ", Python operator" if seg.isolated is not None else ""
            lines.append(f"Segment {s} on {seg.context} (level {seg.level}{kind}): outputs "
                         f"{seg.symbol.list_outputs()}")
            sub = exe.debug_str().rstrip("\n").split("\n")
            lines += [ln for ln in sub if not ln.startswith("Total ") or "buffers" in ln]
        total = self._total_exec_bytes
        lines.append(f"Total {total >> 20} MB allocated")
        lines.append(f"({total} bytes over {len(self._segments)} segments)")
        return "\n".join(lines) + "\n"


def _entry_shapes(symbol, shapes) -> dict:
    """``(id(node), index) -> shape`` of every value in ``symbol``."""
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape(**shapes)
    if out_shapes is None:
        raise MXNetError(f"cannot infer the shapes of every value from {shapes}")
    return {(id(n), i): tuple(s) for (n, i), s in zip(internals._outputs, out_shapes)}


def _entry_dtypes(symbol, given) -> dict:
    """``(id(node), index) -> dtype`` of every value in ``symbol`` (mxnet's rules)."""
    internals = symbol.get_internals()
    _, out_types, _ = internals.infer_type(**given)
    if out_types is None:
        raise MXNetError(f"cannot infer the dtypes of every value from {given}")
    return {(id(n), i): dtype_name(t) for (n, i), t in zip(internals._outputs, out_types)}


def _key(seg):
    return seg.level, seg.context, seg.isolated


def _takes_head_grad(exe, pos) -> bool:
    """Whether output ``pos`` of a segment's executor needs a head gradient (a loss
    output, or a Custom op that declares no need of one, does not)."""
    if isinstance(exe, CustomExecutor):
        return exe.takes_head_grad(pos)
    return str(pos) in {str(k) for k in exe.programs[0].head_grads}


def _segments_by_key(shared_exec) -> dict:
    """The sub-executors of ``shared_exec`` by (level, context, isolated node), to share
    memory pools with."""
    if not isinstance(shared_exec, PartitionedExecutor):
        return {}
    return {_key(seg): exe
            for seg, exe in zip(shared_exec._segments, shared_exec.segment_executors)}
