"""Every operator row of the op tables, imperatively under ``mx.autograd.record()``:
the gradients equal the symbolic executor's for the same one-operator graph.

A row qualifies when its symbol is one operator reading each variable once (no
auxiliary states, no loss formula of its own, no random draws); the ``cpu`` target
only, at the row's first shapes, to stay fast.
"""
import glob
import importlib
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from tests.compiler.test_ops_compiled import _make

HERE = os.path.join(os.path.dirname(__file__), "..", "compiler")


# rows whose operator makes or reads sparse storage: mx.autograd records dense arrays only
# (README, "mx.autograd")
_SPARSE_ROWS = ("SparseEmbedding", "cast_storage")


def _rows():
    rows = []
    for path in sorted(glob.glob(os.path.join(HERE, "test_ops_*.py"))):
        mod = importlib.import_module(f"tests.compiler.{os.path.basename(path)[:-3]}")
        for row in getattr(mod, "ROWS", []):
            if row.grad and not row.aux and row.mx_grad is None and not row.slow \
                    and not row.needs_shapes and \
                    not any(row.name.startswith(p) for p in _SPARSE_ROWS):
                rows.append(row)
    return rows


ROWS = _rows()


def _single_node(row):
    s = row.build(*[sym.Variable(n) for n in row.inputs])
    nodes = [n for n in s._nodes() if n.op != "null"]
    if len(nodes) != 1 or nodes[0].opdef().needs_random:
        return None, None
    node = nodes[0]
    names = [src.name for src, _ in node.inputs]
    if any(src.op != "null" for src, _ in node.inputs) or len(set(names)) != len(names) or \
            sorted(names) != sorted(row.inputs):
        return None, None
    return s, node


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_operator_gradient_under_record(row, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cpu")
    s, node = _single_node(row)
    if s is None:
        pytest.skip("not a single operator reading each variable once")
    gen = torch.Generator().manual_seed(7)
    shapes = dict(zip(row.inputs, row.shapes[0]))
    values = {n: _make(row.gen.get(n, "randn"), shapes[n], gen).numpy() for n in row.inputs}
    diff = [n for n in row.inputs if n not in row.nograd]
    exe = s.simple_bind(mx.cpu(), grad_req={n: "write" if n in diff else "null"
                                            for n in s.list_arguments()}, **shapes)
    for n, v in values.items():
        exe.arg_dict[n][:] = v
    outs = exe.forward(is_train=True)
    ograds = [torch.randn(tuple(o.shape), generator=gen).numpy() for o in outs]
    exe.backward([mx.nd.array(g) for g in ograds])

    arrays = {n: mx.nd.array(v) for n, v in values.items()}
    for n in diff:
        arrays[n].attach_grad()
    with mx.autograd.record():
        res = mx.nd._internal.__dict__.get(node.op) or getattr(mx.nd, node.op)
        got = res(*[arrays[src.name] for src, _ in node.inputs], **node.attrs)
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(outs)
    mx.autograd.backward(got, [mx.nd.array(g) for g in ograds])
    for n in diff:
        np.testing.assert_allclose(arrays[n].grad.asnumpy(), exe.grad_dict[n].asnumpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=f"{row.name}: {n}")
