"""``Symbol.debug_str``: mxnet's (nnvm's ``Symbol::Print``) listing of a graph.

One block per operator in topological order: its inputs as ``node(index)``, its
attributes, and, for a ``Custom`` node, a line saying that it runs in Python and
that the executor cuts the graph there (``runtime/executor_partitioned.py``).
"""
from __future__ import annotations


def debug_lines(symbol, topo) -> list:
    """The lines of ``symbol.debug_str()``; ``topo`` orders nodes
    (``compiler.symbol_node.topo``)."""
    lines = ["Symbol Outputs:"]
    for k, (node, i) in enumerate(symbol._outputs):
        lines.append(f"\toutput[{k}]={node.name}({i})")
    for node in topo(symbol._outputs):
        if node.op == "null":
            lines.append(f"Variable:{node.name}")
            continue
        lines += ["--------------------", f"Op:{node.op}, Name={node.name}", "Inputs:"]
        for k, (src, j) in enumerate(node.inputs):
            lines.append(f"\targ[{k}]={src.name}({j}) version=0")
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
        if attrs:
            lines.append("Attrs:")
            lines += [f"\t{k}={v}" for k, v in sorted(attrs.items())]
        if node.op == "Custom":
            lines.append(f"Runs in Python: mx.operator '{node.attrs.get('op_type')}' "
                         f"(CustomOp.forward / backward); bound graphs are cut here into "
                         f"compiled segments, and no kernel fuses across it")
    return lines
