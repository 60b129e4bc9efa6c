"""Shape and dtype inference of a :class:`compiler.symbol.Symbol`, with mxnet's answers.

``infer_shape`` fills a graph of the symbol (``Symbol._inference_graph``) with the
shape rules of ``passes/infer_shapes.py`` and answers in mxnet's form: every argument,
output and auxiliary shape in list order, ``(None, None, None)`` when the given shapes
do not decide them all, or (partial) what is known with 0 for unknown dimensions. The
answer is remembered per question while the symbol's graph stays as it is, and a
complete inference's graph is kept for the compile to take (``shapes_key``).
``infer_type`` does the same for dtypes, in mxnet's Python types (``mxnet_type``).
"""
from __future__ import annotations

import os

import numpy as np

from .errors import MXNetError
from .frontend.collector import gc_paused
from .shape_semantics import is_np_shape, reading_unknowns, to_legacy, to_numpy


def shapes_key(shapes: dict) -> tuple:
    """What decides a graph's inferred shapes: the variables' shapes by name, the
    element limit and the shape semantics (kept graphs, ``Symbol._take_inferred_graph``)."""
    return (os.environ.get("SYMTRITON_MAX_ELEMENTS"), is_np_shape(),
            tuple(sorted((str(k), tuple(int(x) for x in v)) for k, v in shapes.items())))


def mxnet_type(name):
    """mxnet's Python type for a dtype name (``np.float16``; bfloat16 has none in numpy)."""
    if name == "bfloat16":
        return np.dtype([("bfloat16", np.uint16)])
    return np.dtype(name).type


def _shape_args(symbol, args, kwargs, what):
    """The given shapes by input name: positional ones in ``list_arguments()`` order."""
    names = symbol.list_arguments()
    shapes = {}
    if args:
        if len(args) > len(names):
            raise MXNetError(f"{what}: {len(args)} positional shapes for {len(names)} arguments")
        for n, s in zip(names, args):
            if s is not None:
                shapes[n] = s
    inputs = set(names) | set(symbol.list_auxiliary_states())
    for k, v in kwargs.items():
        if k not in inputs:
            raise MXNetError(f"{what}: '{k}' is not an argument of this symbol; arguments are "
                             f"{names}")
        shapes[k] = v
    return shapes


def infer_shape(symbol, args, kwargs, partial):
    """:meth:`Symbol.infer_shape` (``partial``: ``infer_shape_partial``): remembered per
    question while the symbol's graph stays as it is."""
    try:
        key = ("infer_shape", partial, (os.environ.get("SYMTRITON_MAX_ELEMENTS"),
                                        is_np_shape()),
               tuple(None if a is None else tuple(a) for a in args),
               tuple(sorted((k, None if v is None else tuple(v)) for k, v in kwargs.items())))
        hash(key)
    except TypeError:             # not shapes: let inference say what is wrong
        return _infer_graph(symbol, args, kwargs, partial)
    result = symbol._remember(key, lambda: _infer_graph(symbol, args, kwargs, partial))
    if result[0] is not None and all(result[0]) and not partial and \
            not set(kwargs) & set(symbol._aux_names()):
        # Given every argument's shape it found, inference finds the same again (they
        # met every rule): the executor and the compiler ask in exactly that form.
        # (Not where auxiliary shapes were given: the arguments may not decide them.)
        names = symbol.list_arguments()
        symbol._remember(key[:3] + ((), tuple(sorted(zip(names, result[0])))),
                         lambda: result)
    return tuple(None if r is None else list(r) for r in result)


@gc_paused()        # a graph of the symbol built and walked: see gc_paused
def _infer_graph(symbol, args, kwargs, partial):
    from .passes.infer_shapes import infer_shapes
    shapes = _shape_args(symbol, args, kwargs, "infer_shape")
    graph = symbol._inference_graph("shapes")
    try:
        infer_shapes(graph, shapes, partial=True, types=False)
    except BaseException:
        symbol._inferred("shapes", graph, None)
        raise
    by_name = {}
    for n in graph.variables():
        d = graph.node(n)
        by_name[d["name"]] = d["shapes"][0] if d["shapes"] else None
    arg_shapes = [by_name.get(n) for n in symbol.list_arguments()]
    aux_shapes = [by_name.get(n) for n in symbol.list_auxiliary_states()]
    out_shapes = [graph.shape(h) for h in graph.heads]
    complete = all(s is not None for s in arg_shapes + aux_shapes + out_shapes)
    keep = complete and not graph.meta["unknown_dims"] and \
        not set(shapes) & set(symbol._aux_names())
    symbol._inferred("shapes", graph,
                     shapes_key(dict(zip(symbol.list_arguments(), arg_shapes))) if keep else None)
    if not complete and not partial:
        return None, None, None
    numpy_unknown = is_np_shape() and graph.meta["unknown_dims"]
    if not complete:
        # mxnet's partial answers: what is known of each shape, 0 (legacy) or -1
        # (NumPy semantics) for unknown dims
        from .passes.infer_unknown_dims import partial_shapes
        fresh = symbol.to_graph()         # infer_shapes filled ``graph`` in place
        if numpy_unknown:
            shapes = {k: to_legacy(v) for k, v in shapes.items()}
        with reading_unknowns():
            known = partial_shapes(fresh, shapes)
        part = {fresh.node(e[0])["name"]: dims for e, dims in known.items()
                if fresh.node(e[0])["op"] == "null"}
        arg_shapes = [s if s is not None else part.get(n)
                      for n, s in zip(symbol.list_arguments(), arg_shapes)]
        aux_shapes = [s if s is not None else part.get(n)
                      for n, s in zip(symbol.list_auxiliary_states(), aux_shapes)]
        out_shapes = [s if s is not None else known.get(h)
                      for s, h in zip(out_shapes, fresh.heads)]
    if is_np_shape():       # unknown: None, and -1 for a dim where 0 may be a size
        fix = (lambda s: to_numpy(s) if numpy_unknown else None if s is None else tuple(s))
    else:
        fix = (lambda s: () if s is None else tuple(s))
    return [fix(s) for s in arg_shapes], [fix(s) for s in out_shapes], \
        [fix(s) for s in aux_shapes]


def infer_type(symbol, args, kwargs, partial):
    """:meth:`Symbol.infer_type` (``partial``: ``infer_type_partial``)."""
    from .passes.infer_types import infer_types
    names = symbol.list_arguments()
    given = {n: t for n, t in zip(names, args) if t is not None}
    given.update({k: v for k, v in kwargs.items() if v is not None})
    unknown = set(given) - set(names) - set(symbol.list_auxiliary_states())
    if unknown:
        raise MXNetError(f"infer_type: {sorted(unknown)} are not arguments of this symbol; "
                         f"its arguments are {names}")
    graph = infer_types(symbol.to_graph(), given, partial=True)
    types = {graph.node(n)["name"]: graph.node(n)["dtypes"][0] for n in graph.variables()}
    outs = [graph.dtype(h) for h in graph.heads]
    aux_names = symbol.list_auxiliary_states()
    if not partial and (any(types[n] is None for n in names + aux_names) or
                        any(t is None for t in outs)):
        return None, None, None
    np_type = (lambda t: None if t is None else mxnet_type(t))
    return ([np_type(types[n]) for n in names], [np_type(t) for t in outs],
            [np_type(types[n]) for n in aux_names])
