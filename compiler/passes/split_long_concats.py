"""Concats of many parts as a tree of concats of at most ``MAX_PARTS`` parts each, for
the Triton targets (``interpret`` and the GPUs).

A Triton concat is one kernel that reads every part at every position it writes and
keeps the one whose range holds it (``compiler/ir/tile_program.py: emit_concat``): each
part is a masked load of the tile, all live at once. An RNN's 300 steps joined along
time need more registers than a thread has and the kernel spills (``ptxas``: 3,568
bytes a thread at 300 parts of (2, 2); 8-104 bytes at 64 parts of (32, 200) or
(8, 3, 5); none at 32 parts of any shape tried). Joining at most ``MAX_PARTS`` parts a
kernel, then joining those, costs one more pass over the output and spills nothing.

The ``cpu`` target joins with one ``torch.cat`` whatever the count, so its graph keeps
its concats: an unrolled RNN of 60 steps (lstm_bucketing's largest bucket) would
otherwise take 4 more launches a phase. This and the ``cpu`` target's oneDNN LSTM
layers are the two places where the targets' graphs differ.
"""
from __future__ import annotations

from ..frontend.graph import Builder, Graph

MAX_PARTS = 32


def split_long_concats(graph: Graph) -> int:
    """Rewrite every ``Concat`` of more than :data:`MAX_PARTS` parts in place; return
    how many were rewritten."""
    count = 0
    for n in list(graph.topo()):
        d = graph.node(n)
        parts = graph.inputs(n)
        if d["op"] != "Concat" or len(parts) <= MAX_PARTS:
            continue
        b = Builder(graph, d["phase"], d["name"])
        dim = d["attrs"]["dim"]
        joined = []
        for start in range(0, len(parts), MAX_PARTS):
            chunk = parts[start:start + MAX_PARTS]
            joined.append(chunk[0] if len(chunk) == 1 else
                          b.op("Concat", *chunk, dim=dim, num_args=len(chunk)).entry)
        top = b.op("Concat", *joined, dim=dim, num_args=len(joined))
        graph.replace_entry((n, 0), top.entry)
        count += 1
    return count
