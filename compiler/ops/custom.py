"""``Custom``: an operator written in Python (mxnet's ``mx.operator.CustomOp``).

The operator's rules belong to a user class, a ``CustomOpProp`` registered under
an ``op_type`` by ``mx.operator.register`` (``module_api/operator.py``). The
compiler never imports that layer: ``module_api`` puts each registered class in
:data:`PROPS`, and the registry entry here asks it, through the duck-typed
methods mxnet documents, for

- the inputs (``list_arguments``, ``list_auxiliary_states``) and outputs
  (``list_outputs``) of a node, which depend on its ``op_type``;
- shapes and dtypes (``infer_shape``, ``infer_type``);
- a reference value (:data:`RUNNER`, which module_api sets: it calls the op's
  ``forward`` with NDArrays).

Attributes other than ``op_type`` are kept as the strings mxnet would pass to
the prop's constructor. A Custom node has no kernel: the executor cuts the graph
at it (``compiler/frontend/context_placement.py: partition_by_context`` with
``isolate``), runs the compiled segments around it and calls the op in between,
so fusion never crosses it. Compiling a graph that still holds one is an error
(:func:`refuse_compile`).
"""
from __future__ import annotations

import numpy as np

from ..errors import MXNetError
from .registry import OpDef, ShapeError, Special, register

# op_type -> the CustomOpProp subclass registered under it (module_api fills this)
PROPS: dict = {}
# callable(attrs, inputs, is_train) -> list of torch tensors, set by module_api:
# the op's forward on NDArrays (the reference the Monitor and tests evaluate)
RUNNER = [None]
_INSTANCES: dict = {}


def register_prop(op_type: str, prop_cls) -> None:
    """Make ``prop_cls`` the rules of ``Custom(op_type=op_type)``; a later one replaces it,
    as in mxnet."""
    PROPS[str(op_type)] = prop_cls
    for key in [k for k in _INSTANCES if k[0] == str(op_type)]:
        del _INSTANCES[key]


def prop_kwargs(attrs: dict) -> dict:
    """The keyword arguments of the prop's constructor: every attribute but ``op_type``."""
    return {k: v for k, v in attrs.items() if k != "op_type"}


def prop_of(attrs: dict, node_name: str = "?"):
    """The prop instance of a node's attributes (one per distinct attribute set)."""
    op_type = attrs.get("op_type")
    key = (op_type, tuple(sorted(prop_kwargs(attrs).items())))
    prop = _INSTANCES.get(key)
    if prop is None:
        cls = PROPS.get(op_type)
        if cls is None:
            raise MXNetError(
                f"Custom '{node_name}': op_type '{op_type}' is not registered; decorate its "
                f"CustomOpProp with @mx.operator.register('{op_type}') first, or import the "
                f"module that does (symtriton inspect --import MODULE); registered: "
                f"{sorted(PROPS) or 'none'}")
        prop = _INSTANCES[key] = cls(**prop_kwargs(attrs))
    return prop


class CustomOpDef(OpDef):
    """The ``Custom`` entry: open attributes (strings for the prop), and inputs, outputs
    and auxiliary states listed by the prop of each node."""

    def parse_attrs(self, raw: dict, node_name: str = "?") -> dict:
        parsed = {k: str(v) for k, v in raw.items()
                  if not (k.startswith("__") and k.endswith("__"))}
        if "op_type" not in parsed:
            raise MXNetError(f"operator Custom (node '{node_name}'): required attribute "
                             f"'op_type' is missing.")
        prop_of(parsed, node_name)
        return parsed


def _arguments(attrs):
    return list(prop_of(attrs).list_arguments())


def _aux(attrs):
    return list(prop_of(attrs).list_auxiliary_states())


def _outputs(attrs):
    return list(prop_of(attrs).list_outputs())


def _split_result(result, what, op_type, counts):
    """A prop's ``(in, out[, aux])`` answer, checked against the expected counts."""
    result = list(result)
    if len(result) == 2:
        result.append([])
    if len(result) != 3:
        raise ShapeError(f"Custom op_type '{op_type}': {what} must return 2 or 3 lists, "
                         f"got {len(result)}")
    for got, want, part in zip(result, counts, ("arguments", "outputs", "auxiliary states")):
        if len(got) != want:
            raise ShapeError(f"Custom op_type '{op_type}': {what} returned {len(got)} "
                             f"{part}, the prop lists {want}")
    return result


def _shape(s):
    """mxnet's legacy convention: a shape of no dims is an unknown one."""
    return None if s is None or len(s) == 0 else tuple(int(d) for d in s)


def _infer_shape(attrs, in_shapes):
    prop = prop_of(attrs)
    nargs, naux = len(_arguments(attrs)), len(_aux(attrs))
    nout = len(_outputs(attrs))
    given = [list(s) if s is not None else [] for s in in_shapes[:nargs]]
    try:
        result = prop.infer_shape(given)
    except Exception as exc:          # the user's rule may index an unknown shape
        if any(s is None for s in in_shapes[:nargs]):
            return list(in_shapes), [None] * nout
        raise ShapeError(f"Custom op_type '{attrs['op_type']}': infer_shape{given} raised "
                         f"{type(exc).__name__}: {exc}") from None
    args, outs, aux = _split_result(result, "infer_shape", attrs["op_type"],
                                    (nargs, nout, naux))
    return [_shape(s) for s in list(args) + list(aux)], [_shape(s) for s in outs]


def _np_type(name):
    return None if name is None else np.dtype(name).type


def _infer_type(attrs, in_types):
    from ..ir.dtypes import dtype_name
    prop = prop_of(attrs)
    nargs, naux = len(_arguments(attrs)), len(_aux(attrs))
    nout = len(_outputs(attrs))
    given = [_np_type(t) for t in in_types[:nargs]]
    if given and given[0] is None:
        return list(in_types), [None] * nout
    result = prop.infer_type(given)
    args, outs, aux = _split_result(result, "infer_type", attrs["op_type"], (nargs, nout, naux))
    name = lambda t: None if t is None else dtype_name(np.dtype(t).name)  # noqa: E731
    return [name(t) for t in list(args) + list(aux)], [name(t) for t in outs]


def _reference(attrs, inputs, is_train):
    if RUNNER[0] is None:
        raise MXNetError("Custom: no runner registered; import module_api (mx.operator) "
                         "to run Python operators")
    return RUNNER[0](attrs, inputs, is_train)


# -- the gradient, for graph-level differentiation outside a Program (the Monitor's
# per-operator statistics): ``_backward_Custom`` reads the output gradients, the inputs
# (arguments, then auxiliary states) and the outputs, and gives the arguments' gradients
# by the op's own ``backward`` (RUNNER_BACKWARD, set by module_api's runtime)
RUNNER_BACKWARD = [None]


def _counts(attrs):
    return len(_outputs(attrs)), len(_arguments(attrs)), len(_aux(attrs))


def _gradient(b, n):
    grads = b.op("_backward_Custom", *n.ograds, *n.inputs, *n.outputs, **n.attrs)
    grads = grads if isinstance(grads, list) else [grads]
    return grads + [None] * len(_aux(n.attrs))


def _backward_arguments(attrs):
    outs, args, aux = _outputs(attrs), _arguments(attrs), _aux(attrs)
    return [f"{o}_grad" for o in outs] + args + aux + outs


def _backward_shape(attrs, in_shapes):
    nout, nargs, _ = _counts(attrs)
    return list(in_shapes), list(in_shapes[nout:nout + nargs])


def _backward_type(attrs, in_types):
    nout, nargs, _ = _counts(attrs)
    return list(in_types), list(in_types[nout:nout + nargs])


def _backward_reference(attrs, inputs, is_train):
    if RUNNER_BACKWARD[0] is None:
        raise MXNetError("_backward_Custom: no runner registered; import module_api")
    return RUNNER_BACKWARD[0](attrs, inputs)


def refuse_compile(symbol_nodes) -> None:
    """Raise if a graph about to be compiled into one Program still holds Custom nodes:
    they run in Python between compiled segments (``Symbol.bind`` cuts the graph there).

    Parameters
    ----------
    symbol_nodes : iterable of (op, name)
    """
    for op, name in symbol_nodes:
        if op in ("Custom", "_backward_Custom"):
            raise MXNetError(
                f"Custom '{name}' runs in Python and cannot be compiled into a Program; "
                f"bind the symbol (Symbol.bind / simple_bind / Module), which cuts the graph "
                f"at Custom nodes and compiles the segments around them")


register(CustomOpDef(
    name="Custom", pattern="opaque", lowering=Special("custom"),
    infer_shape=_infer_shape, infer_type=_infer_type, reference=_reference,
    arguments=_arguments, aux=_aux, outputs=_outputs, mode_dependent=True,
    gradient=_gradient,
    doc="A Python operator (mx.operator.CustomOp); runs between compiled segments."))

register(CustomOpDef(
    name="_backward_Custom", pattern="opaque", lowering=Special("custom"),
    infer_shape=_backward_shape, infer_type=_backward_type, reference=_backward_reference,
    arguments=_backward_arguments, outputs=lambda attrs: [f"{a}_grad" for a in
                                                          _arguments(attrs)],
    doc="The gradient of Custom: the op's backward (reference evaluation only)."))
