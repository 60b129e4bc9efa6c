"""Running a Python operator (``Custom``, mxnet's ``CustomOp``) on NDArrays.

A bound graph with Custom nodes is cut at each of them
(``runtime/executor_partitioned.py``): the compiled segments around a node are
ordinary executors, and the node itself is a :class:`CustomExecutor`, which has
an executor's face (``arg_dict``, ``grad_dict``, ``outputs``, ``forward``,
``backward``) and calls the user's op: ``forward(is_train, req, in_data,
out_data, aux)`` and ``backward(req, out_grad, in_data, out_data, in_grad, aux)``.
The op is created once per bind with ``prop.create_operator(ctx, shapes,
dtypes)``, as mxnet does. :func:`custom_nd` is ``mx.nd.Custom``, and
:func:`reference` the registry entry's torch oracle (``compiler/ops/custom.py``).
"""
from __future__ import annotations

import contextlib
import time

import torch

from compiler.errors import MXNetError
from compiler.ops import custom as _custom
from compiler.ops.registry import get_op
from compiler.symbol import _normalize_attr

from . import autograd_tape, launcher
from .context import current_context
from .ndarray import NDArray, as_ndarray, empty, torch_dtype

# mxnet's dtype codes, which create_operator receives (mshadow's type flags)
DTYPE_CODES = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5,
               "int64": 6, "bool": 7, "int16": 8, "uint16": 9, "uint32": 10, "uint64": 11,
               "bfloat16": 12}


def _dtype_name(t) -> str:
    return str(t).replace("torch.", "")


class BoundCustomOp:
    """One Custom node's op with its output arrays.

    Parameters
    ----------
    attrs : dict
        The node's parsed attributes (strings; ``op_type`` among them).
    name : str
        The node's name, for errors.
    ctx : Context
    inputs : list of NDArray
        Arguments then auxiliary states, in the prop's order.
    """

    def __init__(self, attrs, name, ctx, inputs):
        opdef = get_op("Custom")
        self.name, self.attrs, self.ctx = name, attrs, ctx
        self.prop = _custom.prop_of(attrs, name)
        self.nargs = len(opdef.list_arguments(attrs))
        shapes = [tuple(a.shape) for a in inputs]
        dtypes = [_dtype_name(torch_dtype(a)) for a in inputs]
        _, out_shapes = opdef.infer_shape(attrs, list(shapes))
        _, out_types = opdef.infer_type(attrs, list(dtypes))
        for i, s in enumerate(out_shapes):
            if s is None:
                raise MXNetError(f"Custom '{name}' (op_type '{attrs['op_type']}'): "
                                 f"infer_shape gives no shape for output {i} from inputs "
                                 f"{shapes}")
        self.outputs = [empty(s, ctx, t or dtypes[0]) for s, t in zip(out_shapes, out_types)]
        self.op = self.prop.create_operator(ctx, [list(s) for s in shapes],
                                            [DTYPE_CODES.get(d, -1) for d in dtypes])

    def forward(self, is_train, inputs):
        """Call the op's ``forward``; the outputs are ``self.outputs``."""
        in_data, aux = list(inputs[:self.nargs]), list(inputs[self.nargs:])
        with torch.no_grad(), self._errors("forward"), self._profiled(""):
            self.op.forward(bool(is_train), ["write"] * len(self.outputs), in_data,
                            self.outputs, aux)
        return self.outputs

    def backward(self, out_grad, inputs, in_grad, req):
        """Call the op's ``backward``; it writes ``in_grad`` as ``req`` says."""
        in_data, aux = list(inputs[:self.nargs]), list(inputs[self.nargs:])
        with torch.no_grad(), self._errors("backward"), self._profiled("_backward_"):
            self.op.backward(list(req), list(out_grad), in_data, self.outputs,
                             list(in_grad), aux)

    @contextlib.contextmanager
    def _profiled(self, prefix):
        """While ``mx.profiler`` records: the user's code as mxnet's ``Custom Operator``
        range ``<prefix><op_type>::pure_python``, the mx.nd calls it makes filed under
        ``<op_type>::<operator>`` (``launcher.operator_range``)."""
        if not launcher.PROFILING:
            yield
            return
        op_type = self.attrs["op_type"]
        scope = launcher.PROFILE_SCOPE
        outer, scope.custom = getattr(scope, "custom", None), op_type
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            scope.custom = outer
            launcher.record_range(f"{prefix}{op_type}::pure_python", start, "Custom Operator")

    @contextlib.contextmanager
    def _errors(self, method):
        """An exception in the user's code is an ``MXNetError`` naming the node, as
        mxnet's ``Error in CustomOp.forward`` is (the original is its cause). The user's
        code runs with ``mx.autograd`` not recording, as mxnet runs it: its ``assign``
        writes into the outputs, which the tape records as the Custom call's."""
        was = autograd_tape.set_recording(False)
        try:
            yield
        except MXNetError:
            raise
        except Exception as exc:
            raise MXNetError(f"Error in CustomOp.{method} of Custom '{self.name}' (op_type "
                             f"'{self.attrs['op_type']}', {type(self.op).__qualname__}): "
                             f"{type(exc).__name__}: {exc}") from exc
        finally:
            autograd_tape.set_recording(was)

    @property
    def need_top_grad(self) -> bool:
        return bool(getattr(self.prop, "need_top_grad_", True))


class CustomExecutor:
    """An executor's face over one Custom node whose inputs are variables (a segment
    ``partition_by_context`` isolated). Built by ``PartitionedExecutor``."""

    def __init__(self, symbol, ctx, args, args_grad=None, grad_req=None, aux_states=None):
        node = symbol._outputs[0][0]
        if node.op != "Custom" or any(n is not node for n, _ in symbol._outputs):
            raise MXNetError("CustomExecutor needs a symbol of one Custom node")
        self._symbol, self._ctx, self._node = symbol, ctx, node
        self.arg_dict = dict(args)
        self.aux_dict = dict(aux_states or {})
        self.grad_dict = dict(args_grad or {})
        self._grad_req = dict(grad_req or {})
        self._names = [src.name for src, _ in node.inputs]
        self.bound = BoundCustomOp(node.parsed(), node.name, ctx, self._inputs())
        self._positions = [i for _, i in symbol._outputs]
        self.outputs = [self.bound.outputs[i] for i in self._positions]

    def _inputs(self):
        return [self.arg_dict[n] if n in self.arg_dict else self.aux_dict[n]
                for n in self._names]

    def forward(self, is_train=False, **kwargs):
        self.bound.forward(is_train, self._inputs())
        return self.outputs

    def takes_head_grad(self, pos) -> bool:
        """Whether output ``pos`` needs a head gradient (the prop's ``need_top_grad``)."""
        return self.bound.need_top_grad

    def backward(self, out_grads=None, is_train=True):
        out_grad = [torch.zeros_like(o) for o in self.bound.outputs]
        for pos, g in zip(self._positions, out_grads or []):
            if g is not None:
                out_grad[pos] = g
        out_grad = [as_ndarray(g, self._ctx) for g in out_grad]
        nargs = self.bound.nargs
        in_grad, req = [], []
        for name, value in zip(self._names[:nargs], self._inputs()[:nargs]):
            r = self._grad_req.get(name, "null")
            grad = self.grad_dict.get(name) if r != "null" else None
            in_grad.append(grad if grad is not None else empty(value.shape, self._ctx,
                                                               value.dtype))
            req.append(r if grad is not None else "null")
        self.bound.backward(out_grad, self._inputs(), in_grad, req)

    @property
    def programs(self):
        """(training, inference) Programs, as an ``Executor`` has: none, it runs Python."""
        return (None, None)

    @property
    def _total_exec_bytes(self):
        return sum(o.numel() * o.element_size() for o in self.bound.outputs)

    def debug_str(self):
        """The node and the Python class that runs it."""
        node = self._node
        attrs = ", ".join(f"{k}={v}" for k, v in node.parsed().items())
        return (f"Op:Custom, Name={node.name} ({attrs})\n"
                f"\truns in Python: {type(self.bound.op).__module__}."
                f"{type(self.bound.op).__qualname__}.forward / backward\n"
                f"\tinputs {self._names}, outputs {node.output_names()}\n")


def _by_names(arg_names, inputs, kwargs, what):
    given = dict(zip(arg_names, inputs))
    for k, v in kwargs.items():
        if k not in arg_names:
            raise MXNetError(f"{what}: unknown input '{k}' (inputs are {arg_names})")
        given[k] = v
    missing = [n for n in arg_names if n not in given]
    if missing:
        raise MXNetError(f"{what}: inputs {missing} are missing (inputs are {arg_names})")
    return [given[n] for n in arg_names]


def custom_nd(*inputs, op_type=None, out=None, name=None, **kwargs):
    """``mx.nd.Custom``: run a registered Python operator on NDArrays.

    Parameters
    ----------
    *inputs : NDArray
        Arguments then auxiliary states, in the prop's order (or by name in kwargs).
    op_type : str
        The name the prop was registered under.
    out : NDArray, optional
    **kwargs
        Strings for the prop's constructor (other values are turned into strings).

    Returns
    -------
    NDArray or list of NDArray
    """
    if op_type is None:
        raise MXNetError("Custom: required attribute 'op_type' is missing")
    arrays = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    raw = {k: _normalize_attr(k, v) for k, v in kwargs.items() if k not in arrays}
    opdef = get_op("Custom")
    attrs = opdef.parse_attrs({"op_type": str(op_type), **raw}, name or "custom")
    names = opdef.list_arguments(attrs) + opdef.list_aux(attrs)
    values = _by_names(names, inputs, arrays, f"Custom '{op_type}'")
    ctx = (getattr(values[0], "context", None) if values else None) or current_context()
    values = [v if isinstance(v, NDArray) else as_ndarray(v, ctx) for v in values]
    bound = BoundCustomOp(attrs, name or op_type, ctx, values)
    outs = bound.forward(autograd_tape.is_training(), values)
    if autograd_tape.is_recording():
        _record(bound, op_type, values, outs)
    if out is not None:
        for dst, src in zip(out if isinstance(out, (list, tuple)) else [out], outs):
            dst[:] = src
        return out
    return outs[0] if len(outs) == 1 else list(outs)


def _record(bound, op_type, values, outs):
    """Put an ``mx.nd.Custom`` call on ``mx.autograd``'s tape: its gradients come from
    the op's own ``backward`` (``req`` 'write' for every argument)."""
    def grads(entry, ograds):
        out_grad = [g if g is not None else torch.zeros_like(o.as_subclass(torch.Tensor))
                    for g, o in zip(ograds, outs)]
        out_grad = [as_ndarray(g, bound.ctx) for g in out_grad]
        in_grad = [empty(tuple(v.shape), bound.ctx, torch_dtype(v))
                   for v in values[:bound.nargs]]
        bound.backward(out_grad, values, in_grad, ["write"] * bound.nargs)
        return [g.as_subclass(torch.Tensor) for g in in_grad] + \
            [None] * (len(values) - bound.nargs)
    entry = autograd_tape.record_call(f"Custom:{op_type}", [], values, (), {}, bound.ctx,
                                      autograd_tape.is_training(), None, list(outs))
    entry.custom = grads


def reference(attrs, inputs, is_train):
    """The entry's torch oracle: the op's ``forward`` on copies of ``inputs``; in
    training an op with auxiliary states also returns their new values."""
    opdef = get_op("Custom")
    ctx = current_context()
    values = [as_ndarray(t.detach().clone(), ctx) for t in inputs]
    bound = BoundCustomOp(attrs, attrs.get("op_type", "custom"), ctx, values)
    outs = [o.clone() for o in bound.forward(is_train, values)]
    aux = values[len(opdef.list_arguments(attrs)):]
    return outs + (aux if is_train and aux else [])


def reference_backward(attrs, inputs):
    """``_backward_Custom``'s oracle: the input gradients by the op's ``backward`` (after
    its ``forward`` on copies, so an op that keeps state between the two has it).
    ``inputs`` are the output gradients, the arguments and auxiliary states, and the
    outputs, in that order."""
    opdef = get_op("Custom")
    nout = len(opdef.list_outputs(attrs))
    nargs = len(opdef.list_arguments(attrs))
    ctx = current_context()
    copies = [as_ndarray(t.detach().clone(), ctx) for t in inputs]
    ograds, values = copies[:nout], copies[nout:len(copies) - nout]
    bound = BoundCustomOp(attrs, attrs.get("op_type", "custom"), ctx, values)
    bound.forward(True, values)
    grads = [empty(v.shape, ctx, v.dtype) for v in values[:nargs]]
    bound.backward(ograds, values, grads, ["write"] * nargs)
    return grads


_custom.RUNNER[0] = reference
_custom.RUNNER_BACKWARD[0] = reference_backward
