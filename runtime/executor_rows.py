"""Embedding tables an executor reads through the rows of its batch (issue 25).

A row_sparse embedding table, or any table whose gradient is row_sparse
(``Embedding(sparse_grad=True)``, ``contrib.SparseEmbedding``), is never handed to
the compiled Program whole. The executor binds, in place of the table, a Program
compiled from a rewritten symbol: each ``Embedding(data, table)`` node becomes
``Reshape(rows_k, shape=data.shape + (dim,))``, where ``rows_k`` is a new argument of
static shape ``(data.size, dim)``, one row per index entry. Around the Program:

* before a forward, ``rows_k`` is gathered from the table at the clipped indices
  (``gather_rows``: a row_sparse table that lacks a row gives zeros, as mxnet's
  ``TakeRspKernel`` does);
* the Program's backward writes ``rows_k``'s gradient, the Embedding's output
  gradient as ``(data.size, dim)``;
* after a backward, the table's row_sparse gradient becomes ``sum_rows`` of the
  indices and those rows: one row per unique index, the sum of its entries' rows.
  ``grad_req='add'`` is refused at backward, as mxnet's backward refuses it.

So a step touches ``O(batch ids x dim)`` values of the table whatever its size; the
number of unique rows is dynamic, so the unique / sum runs as a runtime step after
the Program, which keeps static shapes. A table qualifies when every consumer reads
it as the weight of an Embedding whose data is an argument, and its gradient (if
one is asked for) is a bound row_sparse array; other sparse arguments keep the dense
shadows of ``executor_sparse.py``.

A weight read by ``dot(csr, W)`` goes the same way (``executor_csrdot.py``): the dot
becomes a row argument of the output's shape, computed before the forward from W's
rows at the csr's columns; W's gradient is ``csr^T . d(out)``, one row per column.
A weight may be read by both kinds of node; its gradient sums all of its reads.
"""
from __future__ import annotations

import json

import torch

from compiler.errors import MXNetError
from compiler.symbol import load_json

from . import executor_csrdot as D
from . import sparse_kernels as K
from .executor_sparse import is_sparse
from .ndarray import as_ndarray, torch_dtype

EMBEDDINGS = ("Embedding", "_contrib_SparseEmbedding")


class RowReads:
    """The rewritten symbol, and the row tensors bound in place of the tables.

    Attributes
    ----------
    symbol : Symbol
        The symbol to compile (tables replaced by row arguments).
    shapes, grad_req, dtypes : dict
        Its arguments' shapes, grad_req and dtypes.
    tables : dict of str to list of (str, str)
        Per table: its reads, ``(row argument, data argument)``; the data of a
        ``dot`` read (its row argument in ``dots``) is its csr operand.
    dots : set of str
        The row arguments that stand for ``dot(csr, table)`` nodes.
    """

    def __init__(self, symbol, reads, shapes, grad_req, dtypes, arg_dict, ctx, dots=()):
        self.symbol = symbol
        self.dots = set(dots)
        self.nodes = {w: [node for _, _, node in r] for w, r in reads.items()}
        reads = {w: [(rname, data) for rname, data, _ in r] for w, r in reads.items()}
        self.tables = reads
        self.table_req = {w: grad_req.get(w, "null") for w in reads}
        names = symbol.list_arguments()
        self.shapes = {n: tuple(shapes[n]) for n in names}
        self.dtypes = {n: dtypes[n] for n in names if n in dtypes}
        self.rows, self.grads, self._ids = {}, {}, {}
        for w, table_reads in reads.items():
            like = arg_dict[w]
            for rname, _ in table_reads:
                self.rows[rname] = _zeros(self.shapes[rname], like, ctx)
                if self.table_req[w] != "null":
                    self.grads[rname] = _zeros(self.shapes[rname], like, ctx)
        # an Embedding's data that nothing else reads leaves the Program: its gradient
        # is zero (mxnet's Embedding gives its data none)
        self.dropped = [n for n, r in grad_req.items()
                        if r == "write" and n not in names and n not in reads]
        self.grad_req = _compiled_grad_req(grad_req, reads, self.table_req, self.shapes)

    def resolve(self, kind, name):
        """The row tensor bound in place of ``(kind, name)``, or None."""
        if kind == "arg":
            return self.rows.get(name)
        if kind == "grad":
            return self.grads.get(name)
        return None

    def before_forward(self, arg_dict):
        """Gather each read's rows from its table at the batch's clipped indices."""
        with torch.no_grad():
            for w, table_reads in self.tables.items():
                table = arg_dict[w]
                nrows = table.shape[0]
                for rname, data in table_reads:
                    if rname in self.dots:
                        self._ids[rname] = D.csr_parts(arg_dict[data])
                        D.csr_dot_rows(self._ids[rname], table, self.rows[rname],
                                       gather_rows)
                        continue
                    ids = _indices(arg_dict[data], nrows).to(self.rows[rname].device)
                    self._ids[rname] = ids
                    gather_rows(table, ids, self.rows[rname])

    def after_backward(self, grad_dict):
        """Each table's row_sparse gradient: its read rows' gradients summed per index."""
        with torch.no_grad():
            for name in self.dropped:
                if grad_dict.get(name) is not None:
                    grad_dict[name][:] = 0
            for w, table_reads in self.tables.items():
                if self.table_req[w] == "null" or w not in grad_dict:
                    continue
                ids, vals = zip(*[self._read_grad(r) for r, _ in table_reads])
                ids, vals = torch.cat(ids), torch.cat(vals)
                grad = grad_dict[w]
                data, rows = sum_rows(ids, vals)
                grad._set_parts(data.to(torch_dtype(grad)), [rows])

    def _read_grad(self, rname):
        """``(ids, rows)`` one read adds to its table's gradient (``sum_rows`` of all)."""
        if rname in self.dots:
            return D.csr_t_rows(self._ids[rname], self.grads[rname])
        grad = self.grads[rname].as_subclass(torch.Tensor)
        return self._ids[rname].to(grad.device), grad

    def check_backward(self):
        """mxnet's refusal of ``grad_req='add'`` for a row_sparse Embedding gradient
        (raised by its backward; here before any backward launch)."""
        for w, req in self.table_req.items():
            if req == "add":      # never a dot's table (is_csr_dot_read)
                raise MXNetError(
                    f"backward: the row_sparse gradient of '{w}' (the weight of "
                    f"{', '.join(repr(n) for n in self.nodes[w])}) has grad_req 'add'; "
                    f"SparseEmbedding layer doesn't support weight gradient calculation "
                    f"with req != write")


def _compiled_grad_req(grad_req, reads, table_req, shapes):
    """grad_req of the compiled symbol's arguments: a row argument's gradient is
    written whenever its table's is asked for (``add`` is refused at backward)."""
    out = {n: r for n, r in grad_req.items() if n in shapes and n not in reads}
    for w, table_reads in reads.items():
        for rname, _ in table_reads:
            out[rname] = "null" if table_req[w] == "null" else "write"
    return out


def _zeros(shape, like, ctx):
    dtype = like._data_t.dtype if is_sparse(like) else like.as_subclass(torch.Tensor).dtype
    return as_ndarray(torch.zeros(shape, dtype=dtype, device=ctx.torch_device), ctx)


def _indices(data, nrows):
    """An Embedding's row per index entry: ``clip(int(data), 0, nrows - 1)``, flat."""
    values = data._dense() if is_sparse(data) else data.as_subclass(torch.Tensor)
    return values.reshape(-1).long().clamp(0, nrows - 1)


def gather_rows(table, ids, out):
    """``out[i] = table[ids[i]]``; a row_sparse ``table`` gives zeros for rows it lacks.

    Parameters
    ----------
    table : NDArray or RowSparseNDArray
        ``(nrows, dim)``; a row_sparse one's indices sorted (mxnet's invariant).
    ids : torch.Tensor
        int64 row ids in ``[0, nrows)``.
    out : torch.Tensor
        ``(ids.numel(), dim)``, written in place.
    """
    dst = out.as_subclass(torch.Tensor)
    home = table._data_t.device if is_sparse(table) else table.device
    if home != dst.device:          # a table placed on another device: gather there
        rows = torch.empty(dst.shape, dtype=dst.dtype, device=home)
        gather_rows(table, ids.to(home), rows)
        dst.copy_(rows)
        return
    if not is_sparse(table):
        torch.index_select(table.as_subclass(torch.Tensor), 0, ids, out=dst)
        return
    data, stored = table._data_t, table._aux_t[0]
    if stored.numel() == table.shape[0]:        # every row stored: row r is data[r]
        torch.index_select(data.to(dst.device, dst.dtype), 0, ids, out=dst)
        return
    if stored.numel() == 0:
        dst.zero_()
        return
    pos = torch.searchsorted(stored, ids).clamp_(max=stored.numel() - 1)
    torch.index_select(data.to(dst.device, dst.dtype), 0, pos, out=dst)
    dst.masked_fill_((stored[pos] != ids).unsqueeze(1), 0)


def sum_rows(ids, values):
    """``(data, rows)``: the sorted unique ``ids`` and, per id, the sum of its rows of
    ``values`` (``(ids.numel(), dim)``)."""
    rows, inverse = torch.unique(ids, return_inverse=True)
    data = torch.zeros((rows.numel(),) + tuple(values.shape[1:]), dtype=values.dtype,
                       device=values.device)
    K.add_rows_(data, inverse, values)
    return data, rows.to(K.IDX)


# -- planning ------------------------------------------------------------------------
def plan_row_reads(symbol, arg_dict, grad_dict, stypes, grad_req, shapes, dtypes, ctx):
    """A ``RowReads`` for the tables of ``symbol`` that qualify (module docstring), or
    None when none does."""
    if not any(is_sparse(a) for a in arg_dict.values()) and \
            "row_sparse" not in stypes["grads"].values():
        return None                  # the common case: nothing sparse, nothing to read
    doc = json.loads(symbol.tojson(remove_amp_cast=False))
    nodes = doc["nodes"]
    users = {}
    for i, node in enumerate(nodes):
        for slot, (src, *_) in enumerate(node["inputs"]):
            users.setdefault(src, []).append((i, slot))
    for src, *_ in doc["heads"]:         # a table that is also an output stays whole
        users.setdefault(src, []).append((None, None))
    tables = [i for i, node in enumerate(nodes) if node["op"] == "null" and
              _qualifies(node["name"], users.get(i, []), nodes, arg_dict, grad_dict,
                         stypes, grad_req, shapes)]
    if not tables:
        return None
    doc, reads, row_shapes, dots = _rewrite(doc, tables, users, shapes)
    new = load_json(json.dumps(doc))
    all_shapes = {**shapes, **row_shapes}
    all_dtypes = dict(dtypes)
    for w, table_reads in reads.items():
        all_dtypes.update({r: dtypes[w] for r, _, _ in table_reads if w in dtypes})
    return RowReads(new, reads, all_shapes, dict(grad_req), all_dtypes, arg_dict, ctx, dots)


def _qualifies(name, uses, nodes, arg_dict, grad_dict, stypes, grad_req, shapes):
    """Whether the argument ``name`` is a table read only through Embedding rows and
    ``dot(csr, name)`` (``executor_csrdot.is_csr_dot_read``)."""
    if not uses or name not in arg_dict:
        return False
    dot = False
    for user, slot in uses:
        if user is None:
            return False
        node = nodes[user]
        if slot == 1 and D.is_csr_dot_read(node, nodes, arg_dict, grad_req, shapes):
            dot = True
            continue
        if slot != 1 or node["op"] not in EMBEDDINGS or \
                nodes[node["inputs"][0][0]]["op"] != "null":
            return False
    req = grad_req.get(name, "null")
    sparse_grad = is_sparse(grad_dict.get(name)) and stypes["grads"].get(name) == "row_sparse"
    if req != "null" and not sparse_grad:
        return False
    # a dot read qualifies whatever W's storage: it spares the csr's dense copy
    return is_sparse(arg_dict[name]) or sparse_grad or dot


def _rewrite(doc, tables, users, shapes):
    """``doc`` with every Embedding / dot of ``tables`` replaced by a Reshape of a new
    row argument; returns (doc, {table: [(row arg, data arg, node)]}, {row arg: shape},
    {row args of dots})."""
    nodes = doc["nodes"]
    taken = {n["name"] for n in nodes}
    readers = {u: i for i in tables for u, _ in users[i]}
    out, remap, reads, row_shapes, dots = [], {}, {}, {}, set()
    for i, node in enumerate(nodes):
        node = dict(node, inputs=[[remap[s], k, *rest] for s, k, *rest in node["inputs"]])
        if i in readers:
            table = nodes[readers[i]]["name"]
            data = nodes[nodes[i]["inputs"][0][0]]["name"]
            rname = _fresh(f"{table}_rows{len(reads.get(table, []))}", taken)
            dim = int(shapes[table][1])
            if node["op"] == D.DOT:           # the dot's output, (M, N)
                row_shapes[rname] = shape = D.dot_shape(shapes, data, table)
                dots.add(rname)
            else:                             # one row per index entry
                row_shapes[rname] = (_numel(shapes[data]), dim)
                shape = tuple(shapes[data]) + (dim,)
            reads.setdefault(table, []).append((rname, data, node["name"]))
            out.append({"op": "null", "name": rname, "inputs": []})
            node = {"op": "Reshape", "name": node["name"], "inputs": [[len(out) - 1, 0, 0]],
                    "attrs": {"shape": str(shape)}}
        out.append(node)
        remap[i] = len(out) - 1
    heads = [[remap[s], k, *rest] for s, k, *rest in doc["heads"]]
    doc = {"nodes": out, "heads": heads, "attrs": doc.get("attrs", {})}
    return doc, reads, row_shapes, dots


def _fresh(name, taken):
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n
