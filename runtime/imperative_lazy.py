"""mxnet's lazy updates through ``mx.nd``: an update operator given a row_sparse
gradient changes only the rows the gradient holds.

Which operators do so, and which attribute turns it off, is their registry entry's
``OpDef.lazy_rows`` (mxnet 1.9.1's sparse kernels: ``sgd_update``, ``sgd_mom_update``
and ``adam_update`` with ``lazy_update``, their default; ``contrib.group_adagrad_update``
and ``sparse.adagrad_update`` always): the weight's rows the gradient stores are
updated, and their states' rows, and nothing else, so weight decay and momentum leave
the other rows alone. The storage fallback (a dense copy of the gradient) would update
every row. Each of these updates is row by row, so here the operator runs as it is on
the gathered rows (the weight's, the states', the gradient's stored values), and the
results are scattered back. mxnet updates the weight in place only (``out`` must be
the weight); so does this.

The optimizer classes take the same path their own way (``runtime/sparse_update.py``);
this is the one for scripts that call the operators.
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

def rows_update(opdef, op_name, names, tensors, attrs, out, invoke):
    """Run ``op_name`` (an operator with ``OpDef.lazy_rows``) on the rows a row_sparse
    ``grad`` holds; None when the call is not a lazy one (then mxnet's storage fallback
    applies).

    Parameters
    ----------
    opdef : OpDef
    op_name : str
    names, tensors : list
        The call's inputs by argument name (``imperative._split``).
    attrs : dict
        Its attributes by name.
    out : NDArray or None
    invoke : callable
        ``imperative.invoke``.
    """
    flag = opdef.lazy_rows
    if flag is not True and not _truthy(attrs.get(flag, True)):
        return None
    by_name = dict(zip(names, tensors))
    grad, weight = by_name.get("grad"), by_name.get("weight")
    if grad is None or weight is None or getattr(grad, "stype", "") != "row_sparse" or \
            getattr(weight, "stype", "default") != "default":
        return None
    if any(getattr(t, "stype", "default") != "default" for n, t in by_name.items()
           if n != "grad"):
        return None
    if out is not weight:
        raise MXNetError(f"{op_name} with a row_sparse gradient updates the weight in place "
                         f"(lazy_update): pass out=weight, as mxnet requires")
    rows = grad._aux_t[0].to(torch.int64)
    if rows.numel() == 0:
        return weight
    plain = {n: t.as_subclass(torch.Tensor) for n, t in by_name.items() if n != "grad"}
    # the weight's rows and every state of the weight's rows, gathered (copies)
    picked = {n: _rows(t, rows, weight) for n, t in by_name.items() if n != "grad"}
    picked["grad"] = grad.data
    got = invoke(op_name, (), dict(picked, **attrs))
    with torch.no_grad():
        for n, t in plain.items():
            if n != "weight" and _per_row(t, weight):
                t[rows] = picked[n].as_subclass(torch.Tensor)      # states written back
        plain["weight"][rows] = got.as_subclass(torch.Tensor).to(plain["weight"].dtype)
    return weight


def _per_row(t, weight) -> bool:
    return t.dim() >= 1 and t.shape[0] == weight.shape[0] and t.dim() == weight.dim()


def _rows(t, rows, weight):
    if not _per_row(t, weight):
        return t
    from .ndarray_mx import _like
    return _like(t.as_subclass(torch.Tensor)[rows].clone(), t)


def _truthy(v) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("true", "1")
