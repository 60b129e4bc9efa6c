"""Compile a Symbol for given input shapes into a cached :class:`Program`."""
from __future__ import annotations

import dataclasses
import logging
import os
import time

from . import cache, cache_entries, cache_keys, kernel_files
from ..ir.dtypes import fp32_matmul_precision
from ..errors import MXNetError
from ..frontend.collector import gc_paused
from ..ops import lstm_layer
from ..ops.custom import refuse_compile
from ..shape_semantics import is_np_shape
from ..passes.pipeline import run_passes
from ..symbol_inference import shapes_key
from ..symbol_json import json_doc
from .program import Program, build_program

log = logging.getLogger("symtriton.compile")

TARGETS = ("cpu", "interpret")


def check_target(target: str) -> str:
    if target in TARGETS:
        return target
    if target.startswith("cuda:"):
        arch = target.split(":")[1]
        if arch.isdigit() and int(arch) >= 70:
            return target
    raise MXNetError(f"unsupported target {target!r}: use 'cpu', 'interpret' or "
                     f"'cuda:<arch>' such as cuda:80 or cuda:90")


def program_parts(symbol, shapes: dict, for_training: bool, grad_req: dict,
                  is_train: bool, target: str, dtypes: dict = None,
                  loss_scale: bool = False, merge_common: bool = None) -> dict:
    """The named parts of a Program's cache key (``dtypes``: every argument's and
    auxiliary state's dtype, as :func:`all_dtypes` gives them; ``loss_scale`` and
    ``merge_common`` (None: :func:`eliminate_common_expr`) and the NumPy shape
    semantics are parts only when they differ from the default, so other keys stay as
    they were)."""
    parts = {
        "name": symbol.name or ",".join(symbol.list_outputs()),
        "graph": canonical_graph_json(symbol),
        "shapes": {k: [int(x) for x in v] for k, v in sorted(shapes.items())},
        "dtypes": dict(sorted((dtypes if dtypes is not None else
                               all_dtypes(symbol, {})).items())),
        "fp32_matmul": fp32_matmul_precision(target),
        "for_training": bool(for_training),
        "is_train": bool(is_train),
        "grad_req": dict(sorted(grad_req.items())) if for_training else {},
        "target": target,
    }
    if loss_scale and for_training:
        parts["loss_scale"] = True
    if lstm_layers_for(target):
        parts["lstm_layers"] = True
    if not (eliminate_common_expr() if merge_common is None else merge_common):
        parts["eliminate_common_expr"] = False
    if is_np_shape():           # a constant's 0 dim is a size there, not an unknown
        parts["np_shape"] = True
    return parts


def eliminate_common_expr() -> bool:
    """Whether ``simplify`` merges common subexpressions: mxnet's switch,
    ``MXNET_ELIMINATE_COMMON_EXPR`` (unset or not ``0``: merge, its default). The values
    are the same either way; ``0`` keeps every node the symbol has (mxnet's
    ``test_eliminate_common_expr`` compares ``get_optimized_symbol`` under both)."""
    return os.environ.get("MXNET_ELIMINATE_COMMON_EXPR", "1").strip() != "0"


def lstm_layers_for(target: str) -> bool:
    """Whether chains of LSTMCell steps compile to oneDNN LSTM layers for ``target``
    (``passes/fuse_lstm_layers.py``): the ``cpu`` target, a torch with oneDNN, and
    ``SYMTRITON_LSTM_LAYERS`` unset or not ``0`` (``0`` keeps the steps' own kernels)."""
    return target == "cpu" and os.environ.get("SYMTRITON_LSTM_LAYERS", "1").strip() != "0" \
        and lstm_layer.available()


def compile_record(sym_file, shapes, for_training, grad_req, is_train, target,
                   dtypes=None, loss_scale=False) -> dict:
    """A program's compile inputs as a manifest records them: the arguments of its
    :func:`compile_symbol` call, the symbol given by its file (``symbols/...``).

    ``symtriton cache verify --rebuild`` compiles them again and compares. ``dtypes``
    only when some were given; ``loss_scale`` and ``np_shape`` (NumPy shape semantics,
    which a rebuild does not take) only when set.
    """
    rec = {"symbol": sym_file, "shapes": {k: list(v) for k, v in sorted(shapes.items())},
           "for_training": bool(for_training), "grad_req": dict(sorted(grad_req.items())),
           "is_train": bool(is_train), "target": target}
    if dtypes:
        rec["dtypes"] = dict(sorted(dtypes.items()))
    if loss_scale:
        rec["loss_scale"] = True
    if is_np_shape():
        rec["np_shape"] = True
    return rec


def canonical_graph_json(symbol) -> str:
    """The symbol's JSON with operator node names replaced by their position.

    Auto names (``_plus3``, ``split0``) depend on how many symbols a process
    built before, so they must not decide the cache key; variable names do
    (arrays bind by them) and stay.
    """
    return symbol._remember(("canonical_graph_json",), lambda: _canonical_json(symbol))


def _canonical_json(symbol) -> str:
    import json
    # tojson's document; AMP's casts are compiled, so kept
    doc = json_doc(symbol._outputs, symbol._effects, remove_amp_cast=False,
                   nodes=symbol._nodes())
    for i, node in enumerate(doc["nodes"]):
        if node["op"] != "null":
            node["name"] = f"n{i}"
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def compile_symbol(symbol, shapes: dict, for_training: bool = False, grad_req=None,
                   is_train: bool = None, target: str = "cpu", dtypes: dict = None,
                   loss_scale: bool = False, merge_common: bool = None) -> Program:
    """Return the Program of ``symbol`` for ``shapes`` (cached).

    Parameters
    ----------
    symbol : Symbol
    shapes : dict of str -> tuple
        Shapes of the inputs (data, labels, and any argument given).
    for_training : bool
        Also build the backward phase.
    grad_req : dict of str -> str
        Per argument ``write`` / ``add`` / ``null`` (training only).
    is_train : bool
        Forward in training mode (Dropout, BatchNorm); defaults to ``for_training``.
    target : str
        ``cpu`` (torch calls), ``interpret`` (Triton's interpreter) or ``cuda:<arch>``.
    dtypes : dict of str -> dtype, optional
        Known dtypes of inputs (``type_dict``); the rest are inferred with mxnet's
        rules (``passes/infer_types.py``), float32 where nothing decides.
    loss_scale : bool
        Training only: every head's starting gradient is multiplied by a one-element
        float32 ``loss_scale`` input (slot kind ``loss_scale``), which the executor
        sets before each backward: AMP's dynamic loss scaling without a recompile
        per scale.
    merge_common : bool, optional
        ``simplify`` merges common subexpressions; None reads mxnet's switch
        (:func:`eliminate_common_expr`). An executor passes what its bind saw, so a
        Program it compiles later (its inference or backward program) agrees.
    """
    with gc_paused():
        return _compile_symbol(symbol, shapes, for_training, grad_req, is_train, target,
                               dtypes, loss_scale, merge_common)


def _compile_symbol(symbol, shapes, for_training, grad_req, is_train, target, dtypes,
                    loss_scale, merge_common=None):
    refuse_compile((n.op, n.name) for n in symbol._nodes())
    target = check_target(target)
    is_train = for_training if is_train is None else is_train
    grad_req = dict(grad_req or {})
    given, shapes = shapes, all_argument_shapes(symbol, shapes)
    dtypes = all_dtypes(symbol, dtypes or {})
    loss_scale = bool(loss_scale and for_training)
    merge_common = eliminate_common_expr() if merge_common is None else bool(merge_common)
    parts = program_parts(symbol, shapes, for_training, grad_req, is_train, target, dtypes,
                          loss_scale, merge_common)
    key = cache_keys.make_key(parts)

    def build():
        if "compiles" in os.environ.get("SYMTRITON_LOG", ""):
            log.warning("symtriton: compiling %s (key %s)", cache_keys.describe_key(parts), key)
        return _build(symbol, shapes, for_training, grad_req, is_train, target, dtypes,
                      loss_scale, given, merge_common)

    def record():
        text = symbol.tojson(remove_amp_cast=False, indent=None)     # one line: faster
        return text, compile_record(cache_entries.symbol_file(text), shapes, for_training, grad_req,
                                    is_train, target, dtypes, loss_scale)

    prog = cache.lookup(key, parts, build, record)
    names = symbol.list_outputs()
    if prog.output_names != names:
        # an equal graph built under other auto names hit the cache: same
        # kernels, this symbol's output names
        prog = dataclasses.replace(prog, output_names=names)
    return prog


def all_argument_shapes(symbol, shapes: dict) -> dict:
    """Every argument's shape, so equal programs get equal keys however they were asked for."""
    arg_shapes, _, _ = symbol.infer_shape(**shapes)
    if arg_shapes is None:
        from ..passes.infer_shapes import infer_shapes
        infer_shapes(symbol.to_graph(), dict(shapes))  # raises, naming what is missing
    out = {n: tuple(int(x) for x in s) for n, s in zip(symbol.list_arguments(), arg_shapes)}
    out.update(free_aux_shapes(symbol, out, shapes))
    return out


def free_aux_shapes(symbol, arg_shapes: dict, given: dict) -> dict:
    """The shapes in ``given`` of the auxiliary states that ``arg_shapes`` do not decide
    (the arrays ``reset_arrays`` zeroes, group_adagrad_update's history): part of the
    Program's inputs, as the arguments' are."""
    aux = [n for n in symbol.list_auxiliary_states() if n in given]
    if not aux or symbol.infer_shape(**arg_shapes)[0] is not None:
        return {}       # the arguments decide every shape (the common case, remembered)
    _, _, aux_shapes = symbol.infer_shape_partial(**arg_shapes)
    decided = {n for n, s in zip(symbol.list_auxiliary_states(), aux_shapes) if s and all(s)}
    return {n: tuple(int(x) for x in given[n]) for n in aux if n not in decided}


def optimized_symbol(symbol, shapes: dict, merge_common: bool = True):
    """The forward graph the compiler runs, as a Symbol (mxnet's
    ``Executor.get_optimized_symbol``): ``simplify``'s merged common expressions (with
    ``merge_common``: ``eliminate_common_expr()`` when the executor was bound), folded
    ``x + 0`` and dead nodes gone; a repeated head reads its value through a ``_copy``, as
    in mxnet.

    Parameters
    ----------
    symbol : compiler.symbol.Symbol
    shapes : dict of str -> tuple
        The bound input shapes.
    """
    from ..passes.infer_shapes import infer_shapes
    from ..passes.simplify import simplify
    graph = infer_shapes(symbol.to_graph(), all_argument_shapes(symbol, shapes))
    return type(symbol).from_graph(simplify(graph, merge_common=merge_common))


def all_dtypes(symbol, dtypes: dict) -> dict:
    """Every argument's and auxiliary state's dtype name, given those in ``dtypes``
    (remembered per symbol and given dtypes: a bind asks three times)."""
    found = symbol._remember(_dtypes_key(dtypes), lambda: _infer_all_dtypes(symbol, dtypes))
    # Given every dtype it found, inference finds them again and refuses nothing (they
    # met every rule): the executor asks with exactly those, its arrays' dtypes.
    symbol._remember(_dtypes_key(found), lambda: found)
    return dict(found)


def _dtypes_key(dtypes: dict) -> tuple:
    return ("all_dtypes", tuple(sorted((str(k), str(v)) for k, v in dtypes.items())))


@gc_paused()            # a graph of the symbol built and walked: see gc_paused
def _infer_all_dtypes(symbol, dtypes: dict) -> dict:
    from ..passes.infer_types import infer_types
    graph = symbol._inference_graph("dtypes")
    try:
        infer_types(graph, dtypes)
    except BaseException:
        symbol._inferred("dtypes", graph, None)
        raise
    found = {graph.node(n)["name"]: graph.node(n)["dtypes"][0] for n in graph.variables()}
    symbol._inferred("dtypes", graph, _dtypes_key(found))
    return found


def _inferred_graph(symbol, shapes: dict, dtypes: dict):
    """The symbol's graph with every shape and dtype already inferred for ``shapes``
    and ``dtypes`` (all arguments' shapes, all variables' dtypes), as the pipeline's
    ``infer_shapes`` and ``infer_types`` would fill it: the one a bind's
    ``infer_shape`` and ``all_dtypes`` filled, taken from the symbol; None where
    there is none (then the pipeline infers on a new graph)."""
    graph = symbol._take_inferred_graph(shapes_key(shapes), _dtypes_key(dtypes))
    if graph is None:
        return None
    nodes = graph.g._node.values()
    if any(d["shapes"] is None or d["dtypes"] is None or len(d["shapes"]) != len(d["dtypes"])
           for d in nodes):
        return None
    return graph


def _build(symbol, shapes, for_training, grad_req, is_train, target, dtypes, loss_scale=False,
           given=None, merge_common=True):
    timings = {}
    t0 = time.perf_counter()
    graph = _inferred_graph(symbol, shapes, dtypes)
    inferred = graph is not None
    graph = symbol.to_graph() if graph is None else graph
    g, groups, plan = run_passes(graph, shapes, grad_req if for_training else {},
                                 is_train, timings, dtypes, loss_scale, inferred,
                                 lstm_layers_for(target), split_concats=target != "cpu",
                                 merge_common=merge_common, lazy_samplers=target == "cpu")
    sources = kernel_files.KernelSources()      # kernel files written while the rest renders
    t1 = time.perf_counter()
    try:
        launches, group_ops = build_program(g, groups, plan, target, sources)
    except BaseException:
        sources.close()
        raise
    timings["codegen"] = time.perf_counter() - t1
    num_fwd = g.meta.get("num_forward_heads", len(g.heads))
    # the shapes the key was computed from: the symbol remembers what they gave
    arg_list, _, aux_list = symbol.infer_shape(**(shapes if given is None else given))
    arg_shapes = {n: list(s) for n, s in zip(symbol.list_arguments(), arg_list)}
    aux_shapes = {n: list(s) for n, s in zip(symbol.list_auxiliary_states(), aux_list)}
    unfused = g.meta["unfused"]
    stats = {
        "forward_launches": sum(1 for ln in launches if ln.phase == "fwd"),
        "backward_launches": sum(1 for ln in launches if ln.phase == "bwd"),
        "bytes_per_step": sum(ln.bytes_read + ln.bytes_written for ln in launches),
        "unfused_forward_ops": unfused["fwd"],
        "unfused_backward_ops": unfused["bwd"],
        "unfused_bytes_per_step": unfused["bytes"],
        "pass_seconds": timings,
        "total_seconds": time.perf_counter() - t0,
    }
    if "fuse_work" in g.meta:
        stats["fuse_work"] = dict(g.meta["fuse_work"])
    if "passes" in os.environ.get("SYMTRITON_LOG", ""):
        log.warning("symtriton: compiled %s in %.3f s: %s", symbol.name or "symbol",
                    stats["total_seconds"], ", ".join(f"{k} {v:.3f}" for k, v in timings.items()))
    prog = Program(
        target=target, launches=launches, buffers=plan["buffers"],
        seed_buffer=plan["seed_buffer"],
        arg_names=symbol.list_arguments(), aux_names=symbol.list_auxiliary_states(),
        grad_names=list(g.meta.get("grad_names", [])),
        output_names=symbol.list_outputs(),
        output_shapes=[list(g.shape(h)) for h in g.heads[:num_fwd]],
        head_grads={str(k): v for k, v in g.meta.get("head_grads", {}).items()},
        arg_shapes=arg_shapes, aux_shapes=aux_shapes, groups=group_ops, stats=stats,
        buffer_dtypes=plan["buffer_dtypes"],
        arg_dtypes={n: dtypes[n] for n in arg_shapes},
        aux_dtypes={n: dtypes[n] for n in aux_shapes},
        output_dtypes=[g.dtype(h) for h in g.heads[:num_fwd]], held=plan["held"])
    return prog, sources
