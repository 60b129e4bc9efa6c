"""Storage-type inference: which arrays of a bound symbol are csr or row_sparse.

mxnet 1.9.1 gives every operator an ``FInferStorageType``; this pass follows those
rules for the operators that take or make sparse storage and gives ``default`` for
the rest (their dense fallback). It answers three things an executor needs:

* the storage of each argument: a variable's ``stype`` (``__storage_type__``);
* the storage of each node output (forward inference);
* the storage of each argument's gradient, and for a row_sparse gradient the
  *row rules*: which rows it stores. A gradient is row_sparse when every consumer
  of the argument gives a row_sparse gradient (mxnet's ``ElementWiseSum`` of
  row_sparse terms stays row_sparse; one dense term makes it dense):

  ============================================  ===========================  =====================
  consumer                                      gradient of                  rows stored
  ============================================  ===========================  =====================
  ``Embedding(sparse_grad=True)``,              ``weight``                   the indices in data
  ``_contrib_SparseEmbedding``
  ``dot(csr, X)`` (no transpose)                ``X``                        the csr's columns
  ``_square_sum(X)``, X row_sparse              ``X``                        the rows X stores
  ============================================  ===========================  =====================

Rules are ``(kind, input name)`` pairs: ``("indices", "data")``, ``("columns",
"x")``, ``("stored", "v")``; the executor evaluates them on the bound arrays.
"""
from __future__ import annotations

from ..frontend.collector import gc_paused

STYPE_OF_ID = {"-1": "default", "0": "default", "1": "row_sparse", "2": "csr"}

# unary operators whose output keeps a csr / row_sparse input's storage (mxnet's
# ElemwiseStorageType with zero-preserving math)
_KEEP_SPARSE = {"square", "sqrt", "abs", "negative", "sign", "relu", "_copy",
                "_mul_scalar", "_div_scalar", "sin", "tanh"}


def _var_stype(node) -> str:
    return STYPE_OF_ID.get(str(node.get("attrs", {}).get("__storage_type__", "0")), "default")


def _attr_true(attrs, key):
    return str(attrs.get(key, "False")).lower() in ("true", "1")


def _dot_out(attrs, lhs, rhs):
    ta, tb = _attr_true(attrs, "transpose_a"), _attr_true(attrs, "transpose_b")
    if lhs == "csr" and rhs in ("default", "row_sparse") and not tb:
        return "row_sparse" if ta and rhs == "default" else "default"
    if lhs == "default" and rhs == "csr" and not ta:
        return "csr"
    return "default"


def _forward_stype(node, ins):
    op, attrs = node["op"], node.get("attrs", {})
    if op == "cast_storage" or op == "_sparse_cast_storage":
        return attrs["stype"].strip("'\"")
    if op == "dot" and len(ins) == 2:
        return _dot_out(attrs, ins[0], ins[1])
    if op in _KEEP_SPARSE and ins and ins[0] in ("csr", "row_sparse"):
        return ins[0]
    if op == "_square_sum" and ins and ins[0] == "row_sparse":
        axis = str(attrs.get("axis", "None")).strip("()[], ")
        if axis == "1" and _attr_true(attrs, "keepdims"):
            return "row_sparse"
    return "default"


def _csr_source(nodes, idx, out):
    """The csr variable whose stored pattern node ``idx`` has (through unary ops that
    keep a csr pattern), or None."""
    while nodes[idx]["op"] != "null":
        if nodes[idx]["op"] not in _KEEP_SPARSE or out[idx] != "csr":
            return None
        idx = nodes[idx]["inputs"][0][0]
    return nodes[idx]["name"] if out[idx] == "csr" else None


def _is_plain_dot(node):
    attrs = node.get("attrs", {})
    return node["op"] == "dot" and not _attr_true(attrs, "transpose_a") and \
        not _attr_true(attrs, "transpose_b")


def _grad_rule(g, idx, slot):
    """The row rule node ``idx`` gives the gradient of its input ``slot`` (None: dense)."""
    nodes, out, users = g
    node = nodes[idx]
    op, attrs = node["op"], node.get("attrs", {})
    srcs = [src for src, *_ in node["inputs"]]
    if slot == 1 and (op == "_contrib_SparseEmbedding" or
                      (op == "Embedding" and _attr_true(attrs, "sparse_grad"))):
        return ("indices", nodes[srcs[0]]["name"]) if nodes[srcs[0]]["op"] == "null" else None
    if slot == 1 and _is_plain_dot(node) and out[srcs[0]] == "csr":
        source = _csr_source(nodes, srcs[0], out)
        return None if source is None else ("columns", source)
    if op == "_square_sum" and slot == 0 and out[srcs[0]] == "row_sparse":
        # a row_sparse head gradient (from dot(csr, .)) gives its rows, a dense one
        # the rows the input stores
        rules = [_grad_rule(g, user, s) for user, s in users.get(idx, [])]
        if rules and all(r is not None for r in rules):
            return rules[0] if len(set(rules)) == 1 else None
        return ("stored", nodes[srcs[0]]["name"])
    return None


def infer_storage(symbol):
    """Storage types of a symbol's arguments, outputs and argument gradients.

    Parameters
    ----------
    symbol : Symbol

    Returns
    -------
    dict
        ``args``: {argument: stype}; ``outputs``: [stype per output];
        ``grads``: {argument: stype}; ``rows``: {argument: [row rule]} for the
        arguments with a row_sparse gradient (see the module docstring). A new
        dict each call; the answer is found once while the symbol stays as it is
        (a bind asks twice).
    """
    memo = symbol._derived()
    found = memo.get("storage")
    if found is None:
        found = memo["storage"] = _infer_storage(symbol)
    return {"args": dict(found["args"]), "outputs": list(found["outputs"]),
            "grads": dict(found["grads"]),
            "rows": {k: list(v) for k, v in found["rows"].items()}}


# operators whose rules give something other than ``default`` storage with dense inputs
_SPARSE_MAKERS = {"cast_storage", "_sparse_cast_storage", "Embedding",
                  "_contrib_SparseEmbedding"}


def _all_dense(symbol) -> bool:
    """Whether no variable is sparse and no operator can make sparse storage out of
    dense: then every answer is ``default`` (most symbols; one look per node)."""
    for node in symbol._nodes():
        if node.op == "null":
            if node.attrs and _var_stype({"attrs": node.attrs}) != "default":
                return False
        elif node.op in _SPARSE_MAKERS:
            return False
    return True


@gc_paused()            # a graph of the symbol built and walked: see gc_paused
def _infer_storage(symbol):
    if _all_dense(symbol):
        args = symbol.list_arguments()
        return {"args": dict.fromkeys(args, "default"),
                "outputs": ["default"] * len(symbol._outputs),
                "grads": dict.fromkeys(args, "default"), "rows": {}}
    graph = _graph_of(symbol)
    nodes = graph["nodes"]
    out = []                       # per node: the storage of its outputs
    args, users = {}, {}
    for i, node in enumerate(nodes):
        if node["op"] == "null":
            out.append(_var_stype(node))
            args[node["name"]] = out[i]
            continue
        ins = [out[src] for src, *_ in node["inputs"]]
        out.append(_forward_stype(node, ins))
        for slot, (src, *_) in enumerate(node["inputs"]):
            users.setdefault(src, []).append((i, slot))
    grads, rows = {}, {}
    g = (nodes, out, users)
    for i, node in enumerate(nodes):
        if node["op"] != "null" or not users.get(i):
            continue
        rules = [_grad_rule(g, user, slot) for user, slot in users[i]]
        sparse = all(r is not None for r in rules)
        grads[node["name"]] = "row_sparse" if sparse else "default"
        if sparse:
            rows[node["name"]] = sorted(set(rules))
    for name in args:
        grads.setdefault(name, "default")
    heads = [out[h[0]] for h in graph["heads"]]
    arg_order = symbol.list_arguments()
    return {"args": {n: args[n] for n in arg_order if n in args}, "outputs": heads,
            "grads": {n: grads[n] for n in arg_order if n in grads}, "rows": rows}



def _graph_of(symbol) -> dict:
    """The symbol's nodes (in topological order) and heads, shaped as its JSON's
    (``op``, ``name``, ``attrs``, ``inputs`` as ``[node index, output]``)."""
    order = symbol._nodes()
    index = {id(n): i for i, n in enumerate(order)}
    nodes = [{"op": n.op, "name": n.name, "attrs": n.attrs or {},
              "inputs": [[index[id(src)], int(k)] for src, k in n.inputs]} for n in order]
    return {"nodes": nodes, "heads": [[index[id(n)], int(k)] for n, k in symbol._outputs]}
