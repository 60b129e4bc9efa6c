"""``_check_index_bounds``: the bounds check mxnet makes before gathering with indices.

mxnet refuses an index out of range where the operator says so: ``take`` with
``mode='raise'`` ("take operator contains indices out of bound") and ``gather_nd``
always (Python's ``IndexError``, "index 3 is out of bounds for axis 1 with size 3";
a negative index counts from the end there). Their decompositions pass the indices
through this operator first: one extern launch that reads them on the host and
raises, or returns them unchanged. So the error comes from the call (or the bound
graph's forward) that reads the bad index, before any value is gathered from a
clipped one; mxnet raises it at the next read of the result.

Attributes: ``sizes``, the size each index row is checked against (``gather_nd``:
row ``k`` of the ``(M, ...)`` index array against ``data.shape[k]``; ``take``: one
size, for every index), ``negative`` whether ``-size .. -1`` are valid too, and
``op``, the operator named in the message. No gradient (indices have none).
"""
from __future__ import annotations

import torch

from ..errors import MXNetError
from .registry import Attr, Extern, OpDef, parse_bool, parse_shape, parse_str, register


def check_bounds(attrs, ins):
    """The indices ``ins[0]`` unchanged (a copy), or the error mxnet raises (above)."""
    idx = ins[0]
    j = torch.trunc(idx.to(torch.float64)) if idx.dtype.is_floating_point else \
        idx.to(torch.int64)
    sizes = attrs["sizes"]
    rows = [j] if len(sizes) == 1 else [j[k] for k in range(len(sizes))]
    for k, (row, size) in enumerate(zip(rows, sizes)):
        low = -size if attrs["negative"] else 0
        bad = (row < low) | (row > size - 1)
        if bool(bad.any()):
            value = int(row[bad].reshape(-1)[0])
            if attrs["op"] == "gather_nd":
                raise IndexError(f"index {value} is out of bounds for axis {k} with size "
                                 f"{size}")
            raise MXNetError(f"{attrs['op']} operator contains indices out of bound: index "
                             f"{value} where the axis has size {size} (mode='raise'; "
                             f"mode='clip' or 'wrap' map every index into range)")
    return [idx.clone()]


register(OpDef(
    name="_check_index_bounds", pattern="opaque", lowering=Extern(check_bounds),
    arguments=("indices",),
    attrs=[Attr("sizes", parse_shape), Attr("negative", parse_bool, False),
           Attr("op", parse_str, "take")],
    infer_shape=lambda attrs, in_shapes: (in_shapes, [in_shapes[0]]),
    reference=lambda attrs, ins, is_train: check_bounds(attrs, ins),
    gradient=lambda b, n: [b.zeros_like(n.inputs[0])],
    doc="indices unchanged, or an error naming the first one outside [0, size) "
        "([-size, size) with negative=True)."))
