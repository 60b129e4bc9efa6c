"""Dtype inference over the whole graph, with mxnet's rules (its ``InferType`` pass).

Variables start from the dtypes given (``type_dict``, ``DataDesc.dtype``, bound
arrays) or their ``__dtype__`` attribute (``Variable(dtype=...)``). Each
operator's ``infer_type`` rule (``compiler/ops/``) says which dtype it expects of
every input and which dtypes its outputs have; an unknown variable takes the
dtype its consumer expects (a FullyConnected weight follows its float16 data),
and a known input of another dtype is refused with mxnet's message. The rules
run to a fixed point; variables still unknown then are float32, mxnet's default.
"""
from __future__ import annotations

from ..ir.dtypes import MXNET_TYPE_FLAG, check_dtype, dtype_name
from ..errors import MXNetError
from ..frontend.graph import Graph

DEFAULT = "float32"


def infer_types(graph: Graph, dtypes: dict = None, partial: bool = False) -> Graph:
    """Fill ``dtypes`` of every node of ``graph`` (in place; returned).

    Parameters
    ----------
    graph : Graph
    dtypes : dict of str -> dtype, optional
        Known dtypes of variables, by name (numpy, torch or string dtypes).
    partial : bool
        Leave unknown variables unknown (``None``) instead of float32.

    Raises
    ------
    MXNetError
        ``Incompatible attr in node NAME at I-th input: expected T, got U`` when an
        operator's inputs disagree where mxnet requires one dtype.
    """
    known = {}
    for n in graph.variables():
        d = graph.node(n)
        given = (dtypes or {}).get(d["name"])
        if given is None:
            given = d["raw"].get("__dtype__")
            if given is not None and given.isdigit():   # mxnet's JSON may hold the type flag
                given = _FLAG_NAMES.get(int(given), given)
        if given is not None:
            known[(n, 0)] = check_dtype(d["name"], given, "dtype")
    ops = graph.ops()
    _propagate(graph, ops, known)
    if not partial:
        # arguments first, then what is still unknown (mxnet's simple_bind gives float32
        # to arguments only, so an auxiliary state can still follow its operator's rule)
        for aux_too in (False, True):
            missing = [n for n in graph.variables() if (n, 0) not in known and
                       (aux_too or graph.node(n).get("role") != "aux")]
            if missing:
                for n in missing:
                    known[(n, 0)] = DEFAULT
                after = graph.descendants(missing)
                _propagate(graph, ops, known, [n for n in ops if n in after])
    for n in list(graph.variables()) + ops:
        d = graph.node(n)
        count = len(d["shapes"]) if d["shapes"] is not None else \
            (1 if d["op"] == "null" else len(d["opdef"].list_outputs(d["attrs"])))
        d["dtypes"] = [known.get((n, i), None if partial else DEFAULT) for i in range(count)]
    return graph


def _propagate(graph, ops, known, sweep=None):
    """Run the rules to a fixed point. As in ``infer_shapes``, a sweep in topological
    order carries dtypes forward within itself; only variables typed by a consumer
    send the next sweep back, over what depends on them (``sweep``: the first
    sweep's nodes, all of ``ops`` if None)."""
    sweep = ops if sweep is None else sweep
    variables = graph.variables()
    for _ in range(len(ops) + 2):
        untyped = [v for v in variables if (v, 0) not in known]
        changed = False
        for n in sweep:
            changed |= _infer_node(graph, n, known)
        learned = [v for v in untyped if (v, 0) in known]
        if not changed or not learned:
            return
        after = graph.descendants(learned)
        sweep = [n for n in ops if n in after]


def _infer_node(graph, n, known) -> bool:
    d = graph.node(n)
    ins = graph.inputs(n)
    in_types = [known.get(tuple(e)) for e in ins]
    expected, outs = d["opdef"].infer_type(d["attrs"], list(in_types))
    changed = False
    for i, (entry, want) in enumerate(zip(ins, expected)):
        entry = tuple(entry)
        if want is None:
            continue
        want = dtype_name(want)
        got = known.get(entry)
        if got is None:
            if graph.node(entry[0])["op"] == "null":
                known[entry] = want
                changed = True
        elif got != want:
            names = d["opdef"].list_arguments(d["attrs"]) + d["opdef"].list_aux(d["attrs"])
            label = names[i] if i < len(names) else f"input {i}"
            raise MXNetError(
                f"Incompatible attr in node {d['name']} at {i}-th input: expected {want}, "
                f"got {got} ({d['op']} '{d['name']}' needs its {label} "
                f"('{graph.node(entry[0])['name']}') in {want}; give it that dtype, or "
                f"insert Cast(dtype='{want}') before it)")
    outs = list(outs)
    count = len(d["opdef"].list_outputs(d["attrs"]))
    outs += [outs[-1] if outs else None] * (count - len(outs))   # rules may give one for all
    for i, t in enumerate(outs):
        if t is not None and known.get((n, i)) is None:
            known[(n, i)] = dtype_name(t)
            changed = True
    return changed


_FLAG_NAMES = {flag: name for name, flag in MXNET_TYPE_FLAG.items()}
