"""Shape and dtype inference over the whole graph, to a fixed point."""
from __future__ import annotations

from ..errors import MXNetError
from ..frontend.graph import Graph, check_shape, infer_node, max_elements
from ..ops.registry import parse_shape
from ..shape_semantics import is_np_shape, reading_unknowns, to_legacy
from .infer_unknown_dims import has_unknown_dims, infer_unknown_dims, unknown_source_shape


def infer_shapes(graph: Graph, shapes: dict, partial: bool = False,
                 dtypes: dict = None, types: bool = True) -> Graph:
    """Fill ``shapes``/``dtypes`` of every node from the given input shapes.

    Parameters
    ----------
    graph : Graph
        Modified in place (and returned).
    shapes : dict of str -> tuple
        Known shapes of variables, by name. ``__shape__`` hints on variables
        are used where no shape is given and all their dims are known.
    partial : bool
        If False, raise when some shape stays unknown, naming the variables.
    dtypes : dict of str -> str, optional
    types : bool
        Also fill ``dtypes`` (each operator's rule given its inputs' dtypes); False
        leaves them as they are, for :func:`~compiler.passes.infer_types.infer_types`
        to fill (the pipeline and ``Symbol.infer_shape`` do).

    ``graph.meta['unknown_dims']`` says whether a given shape, hint or constant
    held an unknown dim: 0, or -1 under NumPy shape semantics, where a 0 is a
    zero size (``compiler/shape_semantics.py``).
    """
    unknown_dims = graph.meta["unknown_dims"] = has_unknown_dims(graph, shapes)
    if unknown_dims:            # the rules read 0 dims as unknown ones throughout
        with reading_unknowns():
            return _infer(graph, shapes, partial, dtypes or {}, types, True)
    return _infer(graph, shapes, partial, dtypes or {}, types, False)


def _infer(graph, shapes, partial, dtypes, types, unknown_dims):
    zero_sizes = is_np_shape() and not unknown_dims
    if unknown_dims:
        if is_np_shape():
            shapes = {k: to_legacy(v) for k, v in shapes.items()}
        shapes = infer_unknown_dims(graph, shapes)
    for n in graph.variables():
        d = graph.node(n)
        shape = shapes.get(d["name"])
        if shape is None and "__shape__" in d["raw"]:
            try:
                hint = parse_shape(d["raw"]["__shape__"])
            except ValueError as exc:
                raise MXNetError(f"variable '{d['name']}': __shape__="
                                 f"{d['raw']['__shape__'][:80]!r} is invalid: {exc}") from None
            if (hint and all(x > 0 for x in hint)) or \
                    (zero_sizes and all(x >= 0 for x in hint)):
                shape = hint
        if shape is not None:
            d["shapes"] = [check_shape(_as_shape(shape, d["name"]), f"variable '{d['name']}'")]
        if types:
            d["dtypes"] = [str(dtypes.get(d["name"], d["raw"].get("__dtype__", "float32")))]
    ops = graph.ops()
    sweep = ops
    limit = max_elements()
    for _ in range(len(ops) + 2):
        # A sweep in topological order carries every shape forward within itself;
        # only a variable's shape learned from a consumer (a weight's from the data
        # it multiplies) reaches nodes that ran before it. So the next sweep visits
        # what depends on such variables, not the whole graph again.
        unknown = [v for v in graph.variables() if graph.node(v)["shapes"] is None]
        changed = False
        for n in sweep:
            if not unknown_source_shape(graph, n):   # nothing decided it: it stays unknown
                changed |= infer_node(graph, n, limit, types)
        learned = [v for v in unknown if graph.node(v)["shapes"] is not None]
        if not changed or not learned:
            break
        after = graph.descendants(learned)
        sweep = [n for n in ops if n in after]
    if not partial:
        check_inferred(graph)
    return graph


def check_inferred(graph: Graph):
    """Raise unless :func:`infer_shapes` left ``graph`` complete: every variable's
    shape known, no operator whose output shape needs its inputs' values, every
    unknown (0) dim decided, every output shape known."""
    ops = graph.ops()
    unknown_dims = graph.meta.get("unknown_dims", True)
    missing = [graph.node(n)["name"] for n in graph.variables()
               if graph.node(n)["shapes"] is None]
    if missing:
        raise MXNetError(
            f"cannot infer the shapes of {missing}: give their shapes (for example "
            f"{missing[0]}=(...)) or the shapes of the inputs they depend on")
    _refuse_value_shaped(graph)
    if unknown_dims:
        # mxnet reads 0 as "unknown": one nothing filled is an error, not a 0-size array
        undecided = [f"{graph.describe(n)} {tuple(graph.node(n)['shapes'][0])}"
                     for n in graph.topo()
                     if (graph.node(n)["op"] == "null" or not graph.inputs(n))
                     and graph.node(n)["shapes"] and graph.node(n)["shapes"][0] is not None
                     and 0 in graph.node(n)["shapes"][0]]
        if undecided:
            raise MXNetError(
                f"cannot decide the unknown (0) dims of {undecided}: a 0 in a shape "
                f"means unknown, as in mxnet; give these shapes in full, or the shapes "
                f"of the inputs they meet")
    # (an operator of no outputs, reset_arrays, has shapes [])
    unknown = [n for n in ops if graph.node(n)["shapes"] is None
               or any(s is None for s in graph.node(n)["shapes"])]
    if unknown:
        sources = [graph.describe(n) for n in unknown if not graph.inputs(n)]
        hint = (f": {sources[0]} has no inputs, so its own `shape` decides it (mxnet reads "
                f"shape=() as unknown outside NumPy shape semantics), or an operand it meets"
                if sources else "")
        raise MXNetError(f"cannot infer the output shapes of "
                         f"{[graph.describe(n) for n in unknown[:5]]}{hint}")


def _as_shape(shape, name) -> tuple:
    try:
        return tuple(int(x) for x in shape)
    except (TypeError, ValueError, OverflowError):
        raise MXNetError(f"variable '{name}': shape {shape!r} is not a tuple of ints") from None


def _refuse_value_shaped(graph: Graph):
    """Raise for an operator whose output shape depends on its inputs' values
    (``OpDef.value_shaped``: boolean_mask), naming it: a symbol holding one cannot be
    bound, as in mxnet."""
    for n in graph.ops():
        d = graph.node(n)
        if d["opdef"].value_shaped is not None and any(s is None for s in d["shapes"] or [None]):
            raise MXNetError(
                f"{graph.describe(n)}: its output shape depends on the values of its inputs, "
                f"which shape inference cannot know; mxnet 1.9.1 cannot bind it either. Run "
                f"it imperatively (mx.nd), where the values are known")
