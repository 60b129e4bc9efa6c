"""The creation operators (``compiler/ops/creation.py``: arange, linspace, eye; and
``full``'s Python-level function) through the full compile path on both cpu targets,
against mxnet 1.9.1's values (the tables below were printed by mxnet)."""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from runtime.context import cpu
from tests.conftest import assert_same_launches_on_cpu_targets


def _run(s, cpu_target):
    exe = s.simple_bind(cpu(), grad_req="null")
    out = exe.forward(is_train=False)[0].as_subclass(torch.Tensor)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
    return out


CASES = [
    ("arange_stop", lambda: sym.arange(5), torch.tensor([0.0, 1, 2, 3, 4])),
    ("arange_step_repeat", lambda: sym.arange(1, 2, 0.3, repeat=2),
     torch.tensor([1.0, 1.0, 1.3, 1.3, 1.6, 1.6, 1.9000001, 1.9000001])),
    ("arange_down", lambda: sym.arange(10, 1, -3), torch.tensor([10.0, 7, 4])),
    ("arange_int", lambda: sym.arange(0, 5, 1.5, dtype="int32"),
     torch.tensor([0, 1, 2, 3], dtype=torch.int32)),
    ("arange_f64_one", lambda: sym.arange(2.5, 3, dtype="float64"),
     torch.tensor([2.5], dtype=torch.float64)),
    ("linspace", lambda: sym.linspace(0, 1, 5), torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])),
    ("linspace_open", lambda: sym.linspace(0, 1, 5, endpoint=False),
     torch.tensor([0.0, 0.2, 0.4, 0.6, 0.8])),
    ("linspace_one", lambda: sym.linspace(3, 7, 1), torch.tensor([3.0])),
    ("linspace_down7", lambda: sym.linspace(2, -1, 7, dtype="float64"),
     torch.linspace(2, -1, 7, dtype=torch.float64)),
    ("eye", lambda: sym.eye(3), torch.eye(3)),
    ("eye_k1", lambda: sym.eye(3, 4, k=1),
     torch.tensor([[0.0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])),
    ("eye_km1", lambda: sym.eye(5, 3, k=-1),
     torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]])),
    ("eye_1", lambda: sym.eye(1, dtype="int32"), torch.ones(1, 1, dtype=torch.int32)),
    ("full", lambda: sym.full((2, 3), 7), torch.full((2, 3), 7.0)),
    ("full_f64", lambda: sym.full((1, 5), -0.5, dtype="float64"),
     torch.full((1, 5), -0.5, dtype=torch.float64)),
]


@pytest.mark.parametrize("name,build,want", CASES, ids=[c[0] for c in CASES])
def test_creation(name, build, want, cpu_target):
    got = _run(build(), cpu_target)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert torch.allclose(got.double(), want.double(), rtol=1e-6, atol=1e-7), (got, want)


def test_creation_feeds_other_ops(cpu_target):
    """A created array in a graph: x + arange along the last axis, x's gradient the head's."""
    x = sym.Variable("x")
    s = sym.broadcast_mul(sym.broadcast_add(x, sym.reshape(sym.arange(7), shape=(1, 7))),
                          sym.eye(3, 7).sum())
    exe = s.simple_bind(cpu(), x=(3, 7))
    xs = torch.randn(3, 7)
    exe.arg_dict["x"][:] = xs
    out = torch.as_tensor(exe.forward(is_train=True)[0])
    assert torch.allclose(out, (xs + torch.arange(7.0)) * 3.0, rtol=1e-5, atol=1e-6)
    exe.backward([torch.ones(3, 7)])
    assert torch.allclose(torch.as_tensor(exe.grad_dict["x"]), torch.full((3, 7), 3.0))


@pytest.mark.parametrize("build,match", [
    (lambda: sym.arange(0, 5, 0), "step=0"),
    (lambda: sym.arange(5, 1), r"invalid range \(start, stop, step\) = \(5.0, 1.0, 1.0\)"),
    (lambda: sym.arange(0, 5, repeat=0), "repeat > 0"),
    (lambda: sym.arange(3, infer_range=True), "infer_range=True"),
])
def test_arange_errors(build, match):
    with pytest.raises(Exception, match=match):
        build().infer_shape()


def test_json_attributes_are_mxnets():
    """The attributes mxnet 1.9.1 writes for these symbols (its tojson)."""
    node = sym.arange(5).tojson()
    for key in ('"start": "5"', '"stop": "None"', '"step": "1.0"', '"repeat": "1"',
                '"infer_range": "False"', '"dtype": "float32"'):
        assert key in node, (key, node)
    assert '"op": "_linspace"' in sym.linspace(0, 1, 3).tojson()
    assert '"op": "_eye"' in sym.eye(3, k=-1).tojson()
    assert '"value": "7.0"' in sym.full((2, 3), 7).tojson()
