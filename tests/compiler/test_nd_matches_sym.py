"""``mx.nd.X`` equals ``mx.sym.X``, operator table row by row, on both cpu targets.

Each row of the operator tables (``OPS`` of test_ops_compiled.py and of
test_ops_normalization.py, every ``ROWS`` of another ``test_ops_*.py``: the
tables ``test_ops_after_views`` sweeps) builds a symbol. The symbol is bound and
run forward in inference mode; the same graph is then run imperatively, node by
node through ``mx.nd``'s engine (``runtime.imperative.invoke`` with the node's
operator and attributes: what ``mx.nd.<op>(*inputs, **attrs)`` calls), and every
output must be equal. Rows whose operators draw random numbers only compare
shapes and dtypes (the two runs draw different seeds).
"""
from __future__ import annotations

import importlib

import pytest
import torch

import module_api as mx
from runtime.context import cpu
from runtime.imperative import invoke
from tests.compiler.test_ops_after_views import _tables
from tests.compiler.test_ops_compiled import _make, _seed


def _all_rows():
    rows = list(_tables())
    rows += getattr(importlib.import_module("tests.compiler.test_ops_normalization"), "OPS", [])
    seen, out = set(), []
    for op in rows:
        if op.name not in seen and not op.needs_shapes:
            seen.add(op.name)
            out.append(op)
    return out


ROWS = _all_rows()


def run_imperatively(symbol, values):
    """The outputs of ``symbol`` computed one node at a time with ``invoke``.

    Parameters
    ----------
    symbol : Symbol
    values : dict of str -> NDArray
        The variables' (arguments' and auxiliary states') values.

    Returns
    -------
    list of NDArray
        One per output of ``symbol``.
    """
    env = {}
    for node in symbol._nodes():
        if node.op == "null":
            env[(node, 0)] = values[node.name]
            continue
        inputs = [env[(n, i)] for n, i in node.inputs]
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("__")}
        res = invoke(node.op, inputs, attrs)
        for i, r in enumerate(res if isinstance(res, list) else [res]):
            env[(node, i)] = r
    return [env[e] for e in symbol._outputs]


def _random(symbol):
    return any(n.op != "null" and n.opdef().needs_random for n in symbol._nodes())


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in ROWS])
def test_imperative_equals_symbolic(op, cpu_target):
    shapes = op.shapes[0]
    gen = torch.Generator().manual_seed(_seed("nd", op.name, shapes))
    s = op.build(*[mx.sym.Variable(n) for n in op.inputs])
    values = {n: _make(op.gen.get(n, "randn"), shp, gen) for n, shp in zip(op.inputs, shapes)}
    exe = s.simple_bind(cpu(), grad_req="null", **dict(zip(op.inputs, shapes)))
    for n, v in values.items():
        exe.arg_dict[n][:] = v
    for n in s.list_auxiliary_states():
        values[n] = _make(op.aux[n], tuple(exe.aux_dict[n].shape), gen)
        exe.aux_dict[n][:] = values[n]
    want = [o.clone() for o in exe.forward(is_train=False)]
    got = run_imperatively(s, {n: mx.nd.array(v) for n, v in values.items()})
    assert len(got) == len(want)
    exact = not _random(s)
    for i, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, mx.nd.NDArray), type(g)
        assert tuple(g.shape) == tuple(w.shape), f"{op.name} output {i}: shape"
        assert g.dtype == w.dtype, f"{op.name} output {i}: dtype"
        if exact:
            torch.testing.assert_close(g.as_subclass(torch.Tensor), w.as_subclass(torch.Tensor),
                                       rtol=1e-5, atol=1e-6, equal_nan=True,
                                       msg=lambda m: f"{op.name} output {i}: {m}")
