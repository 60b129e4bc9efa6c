"""How close a model's training step runs to the machine: its matrix FLOPs per step
and this machine's measured peak GEMM rate at the same thread count.

A step's FLOPs are those of its matrix products (FullyConnected, Convolution,
Deconvolution, dot, batch_dot), read from the symbol's inferred shapes: the forward
product, then the data gradient and the weight gradient, each as costly as the
forward one: three times the forward count (the first layer's data gradient, which
a Module does not compute, is counted too: at most a few percent for these
models). Pointwise work is left out: it moves bytes, not FLOPs.
"""
from __future__ import annotations

import json
import math
import time

MATRIX_OPS = ("FullyConnected", "Convolution", "Deconvolution", "dot", "batch_dot")


def forward_matrix_flops(symbol, **shapes) -> float:
    """Multiply-adds times two of the symbol's matrix products in one forward pass."""
    internals = symbol.get_internals()
    arg_shapes, out_shapes, _ = internals.infer_shape(**shapes)
    shape_of = dict(zip(internals.list_outputs(), out_shapes))
    shape_of.update(zip(internals.list_arguments(), arg_shapes))
    nodes = json.loads(symbol.tojson())["nodes"]

    def entry_shape(entry):
        node = nodes[entry[0]]
        if node["op"] == "null":
            return shape_of[node["name"]]
        outs = [k for k in shape_of if k.startswith(node["name"] + "_")]
        name = f"{node['name']}_output" if f"{node['name']}_output" in shape_of else \
            sorted(outs)[entry[1]]
        return shape_of[name]

    total = 0.0
    for node in nodes:
        if node["op"] not in MATRIX_OPS:
            continue
        out = shape_of[f"{node['name']}_output"]
        a, b = entry_shape(node["inputs"][0]), entry_shape(node["inputs"][1])
        transpose_a = node.get("attrs", {}).get("transpose_a", "False") in ("True", "true", "1")
        if node["op"] == "Deconvolution":     # each input element meets Cout/g x kernel weights
            total += 2.0 * math.prod(a) * math.prod(b[1:])
            continue
        if node["op"] in ("FullyConnected", "Convolution"):
            per_out = math.prod(b[1:])        # inputs (x kernel) per output element
        elif node["op"] == "dot":
            per_out = a[0] if transpose_a else a[-1]
        else:
            per_out = a[-2] if transpose_a else a[-1]
        total += 2.0 * math.prod(out) * per_out
    return total


def train_step_gflop(symbol, **shapes) -> float:
    """GFLOP of one training step (forward, data and weight gradients)."""
    return 3.0 * forward_matrix_flops(symbol, **shapes) / 1e9


def peak_gemm_gflops(size: int = 1024, repeats: int = 5) -> float:
    """This machine's float32 GEMM rate (GFLOP/s) at torch's current thread count: the
    best of ``repeats`` ``size``-cubed products."""
    import torch
    a, b = torch.randn(size, size), torch.randn(size, size)
    c = torch.empty(size, size)
    torch.mm(a, b, out=c)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size ** 3 / best / 1e9


def print_machine_distance(label_width, cols, rates, gflop_per_unit, threads):
    """Print achieved GFLOP/s per side (``rates`` in units/s, ``gflop_per_unit`` of
    matrix products each) and the machine's peak GEMM rate; returns
    ``(symtriton GFLOP/s, peak GFLOP/s)`` (symtriton is the first column)."""
    peak = peak_gemm_gflops()
    achieved = [r * gflop_per_unit for r in rates]
    print(f"{'GFLOP/s (matrix products)':{label_width}}" +
          "".join(f"{v:14.2f}" for v in achieved))
    print(f"{'peak GEMM GFLOP/s':{label_width}}{peak:14.2f}   (1024^3 float32 mm, {threads} "
          f"thread(s); symtriton at {100 * achieved[0] / peak:.0f}%)")
    return achieved[0], peak
