"""Storage-type inference: which arrays of a bound symbol are csr or row_sparse.

mxnet 1.9.1 gives every operator an ``FInferStorageType``; this pass follows those
rules for the operators that take or make sparse storage and gives ``default`` for
the rest (their dense fallback). It answers three things an executor needs:

* the storage of each argument: a variable's ``stype`` (``__storage_type__``);
* the storage of each node output (forward inference), and for a sparse output of
  the symbol a rule for what it stores (``out_rules``): ``("stored", x)``, the
  pattern of the sparse variable ``x`` it keeps through zero-preserving unary
  operators and products with dense arrays (``sqrt(x)``, ``x * w``);
  ``("indices", ids)``, the rows a ``_sparse_retain`` lists;
  None where it has none, and the executor stores the output's non-zeros, as
  ``cast_storage`` does;
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
  ``_sparse_retain(X, ids)``, X row_sparse      ``X``                        the ids listed
  ============================================  ===========================  =====================

Rules are ``(kind, input name)`` pairs: ``("indices", "data")``, ``("columns",
"x")``, ``("stored", "v")``; the executor evaluates them on the bound arrays.
"""
from __future__ import annotations

from ..frontend.collector import gc_paused

STYPE_OF_ID = {"-1": "default", "0": "default", "1": "row_sparse", "2": "csr"}

# unary operators whose output keeps a csr / row_sparse input's storage: mxnet's
# MXNET_OPERATOR_REGISTER_UNARY_WITH_RSP_CSR (zero-preserving math), _copy, BlockGrad,
# make_loss and the scalar ops of BinaryScalarStorageType
_KEEP_SPARSE = {
    "relu", "negative", "abs", "sign", "round", "rint", "ceil", "floor", "trunc", "fix",
    "log1p", "expm1", "square", "sqrt", "cbrt", "sin", "tan", "arcsin", "arctan",
    "degrees", "radians", "sinh", "tanh", "arcsinh", "arctanh",
    "_copy", "BlockGrad", "make_loss", "_mul_scalar", "_div_scalar"}


# operators whose output is sparse when every input has that one sparse storage (mxnet's
# PreferDenseStorageType / ElemwiseStorageType: csr too, except add_n's rule: rsp only)
_SAME_SPARSE = {"elemwise_add", "elemwise_sub", "_maximum", "_minimum", "_hypot"}
_SPARSE = ("csr", "row_sparse")


def _binary_stype(op, ins):
    """mxnet's rule for an elementwise operator of several inputs, or None."""
    one = set(ins)
    if op in _SAME_SPARSE and len(one) == 1 and ins[0] in _SPARSE:
        return ins[0]
    if op == "add_n" and one == {"row_sparse"}:
        return "row_sparse"
    if op == "elemwise_mul" and len(ins) == 2:
        # PreferSparseStorageType: sparse * dense keeps the sparse side's storage
        sparse = one - {"default"}
        if len(sparse) == 1:
            return sparse.pop()
    return None


def _var_stype(node) -> str:
    return STYPE_OF_ID.get(str(node.get("attrs", {}).get("__storage_type__", "0")), "default")


def _attr_true(attrs, key):
    return str(attrs.get(key, "False")).lower() in ("true", "1")


def _dot_out(attrs, lhs, rhs):
    given = str(attrs.get("forward_stype", "None")).strip("'\"")
    if given in ("default", "csr", "row_sparse"):
        return given            # the user's hint: the output takes it, by fallback if need be
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
    if op in _KEEP_SPARSE and ins and ins[0] in _SPARSE:
        return ins[0]
    if op == "_sparse_retain" and ins and ins[0] == "row_sparse":
        return "row_sparse"
    binary = _binary_stype(op, ins)
    if binary is not None:
        return binary
    if op == "_square_sum" and ins and ins[0] == "row_sparse":
        axis = str(attrs.get("axis", "None")).strip("()[], ")
        if axis == "1" and _attr_true(attrs, "keepdims"):
            return "row_sparse"
    return "default"


def forward_stype(op: str, attrs: dict, in_stypes) -> str:
    """The storage mxnet's rules give the output of ``op`` (attributes as strings or
    values) over inputs of storage ``in_stypes``: what an imperative call's result
    takes (``runtime/imperative.py``) as a bound symbol's output does."""
    text = {k: str(v) for k, v in attrs.items()}
    return _forward_stype({"op": op, "attrs": text}, list(in_stypes))


def _pattern_source(nodes, idx, out, stype):
    """The ``stype`` variable whose stored pattern node ``idx`` has (through unary ops
    that keep a sparse pattern), or None."""
    while nodes[idx]["op"] != "null":
        if nodes[idx]["op"] not in _KEEP_SPARSE or out[idx] != stype:
            return None
        idx = nodes[idx]["inputs"][0][0]
    return nodes[idx]["name"] if out[idx] == stype else None


def _out_rule(nodes, idx, out):
    """What a sparse output of the symbol stores (module docstring), or None: walked
    back through the operators that keep their sparse operand's pattern (the unary
    ones of ``_KEEP_SPARSE``, ``elemwise_mul`` by a dense operand)."""
    stype = out[idx]
    while stype != "default":
        node = nodes[idx]
        srcs = [src for src, *_ in node["inputs"]]
        if node["op"] == "null":
            return ("stored", node["name"])
        if node["op"] == "_sparse_retain" and stype == "row_sparse":
            ids = nodes[srcs[1]]
            return ("indices", ids["name"]) if ids["op"] == "null" else None
        if node["op"] in _KEEP_SPARSE and out[srcs[0]] == stype:
            idx = srcs[0]
        elif node["op"] == "elemwise_mul" and sorted(out[i] for i in srcs) == \
                sorted([stype, "default"]):
            idx = srcs[0] if out[srcs[0]] == stype else srcs[1]
        else:
            return None
    return None


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
    if op == "_sparse_retain" and slot == 0 and out[srcs[0]] == "row_sparse":
        # the rows indices lists (what mxnet's _backward_sparse_retain stores)
        return ("indices", nodes[srcs[1]]["name"]) if nodes[srcs[1]]["op"] == "null" else None
    if slot == 1 and _is_plain_dot(node) and out[srcs[0]] == "csr":
        source = _pattern_source(nodes, srcs[0], out, "csr")
        return None if source is None else ("columns", source)
    if op == "_square_sum" and slot == 0 and out[srcs[0]] == "row_sparse":
        # a row_sparse head gradient (from dot(csr, .)) gives its rows, a dense one
        # the rows the input stores
        rules = [_grad_rule(g, user, s) for user, s in users.get(idx, [])]
        if rules and all(r is not None for r in rules):
            return rules[0] if len(set(rules)) == 1 else None
        return ("stored", nodes[srcs[0]]["name"])
    return None


def infer_storage(symbol, bound=None):
    """Storage types of a symbol's arguments, outputs and argument gradients.

    Parameters
    ----------
    symbol : Symbol
    bound : dict of str to str, optional
        The storage of the arrays an executor binds, by argument name: as in mxnet's
        bind, an array's own storage decides, whatever its variable declares.

    Returns
    -------
    dict
        ``args``: {argument: stype}; ``outputs``: [stype per output];
        ``grads``: {argument: stype}; ``rows``: {argument: [row rule]} for the
        arguments with a row_sparse gradient (see the module docstring);
        ``out_rules``: [rule or None per output]. A new
        dict each call; the answer is found once while the symbol stays as it is
        (a bind asks twice).
    """
    bound = dict(bound or {})
    found = symbol._remember(("storage",) + tuple(sorted(bound.items())),
                             lambda: _infer_storage(symbol, bound))
    return {"args": dict(found["args"]), "outputs": list(found["outputs"]),
            "out_rules": list(found["out_rules"]), "grads": dict(found["grads"]),
            "rows": {k: list(v) for k, v in found["rows"].items()}}


# operators whose rules give something other than ``default`` storage with dense inputs
_SPARSE_MAKERS = {"cast_storage", "_sparse_cast_storage", "Embedding",
                  "_contrib_SparseEmbedding"}


def _all_dense(symbol, bound) -> bool:
    """Whether no variable is sparse and no operator can make sparse storage out of
    dense: then every answer is ``default`` (most symbols; one look per node)."""
    if any(stype != "default" for stype in bound.values()):
        return False
    for node in symbol._nodes():
        if node.op == "null":
            if node.name not in bound and node.attrs and \
                    _var_stype({"attrs": node.attrs}) != "default":
                return False
        elif node.op in _SPARSE_MAKERS:
            return False
        elif node.op == "dot" and str((node.attrs or {}).get("forward_stype", "None")).strip(
                "'\"") in _SPARSE:
            return False
    return True


@gc_paused()            # a graph of the symbol built and walked: see gc_paused
def _infer_storage(symbol, bound):
    if _all_dense(symbol, bound):
        args = symbol.list_arguments()
        return {"args": dict.fromkeys(args, "default"),
                "outputs": ["default"] * len(symbol._outputs),
                "out_rules": [None] * len(symbol._outputs),
                "grads": dict.fromkeys(args, "default"), "rows": {}}
    graph = _graph_of(symbol)
    nodes = graph["nodes"]
    out = []                       # per node: the storage of its outputs
    args, users = {}, {}
    for i, node in enumerate(nodes):
        if node["op"] == "null":
            out.append(bound.get(node["name"]) or _var_stype(node))
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
    out_rules = [_out_rule(nodes, h[0], out) for h in graph["heads"]]
    arg_order = symbol.list_arguments()
    return {"args": {n: args[n] for n in arg_order if n in args}, "outputs": heads,
            "out_rules": out_rules,
            "grads": {n: grads[n] for n in arg_order if n in grads}, "rows": rows}



def _graph_of(symbol) -> dict:
    """The symbol's nodes (in topological order) and heads, shaped as its JSON's
    (``op``, ``name``, ``attrs``, ``inputs`` as ``[node index, output]``)."""
    order = symbol._nodes()
    index = {id(n): i for i, n in enumerate(order)}
    nodes = [{"op": n.op, "name": n.name, "attrs": n.attrs or {},
              "inputs": [[index[id(src)], int(k)] for src, k in n.inputs]} for n in order]
    return {"nodes": nodes, "heads": [[index[id(n)], int(k)] for n, k in symbol._outputs]}
