"""Extern launches (``compiler/ops/registry.py: Extern``): an operator whose launch calls
ATen instead of a generated kernel, inside the Program.

A test-only extern operator (registered for this module, removed after) with two
outputs and an extern ``_backward_`` entry checks the mechanism on both cpu targets:
never fused, planned buffers (views as inputs, an output also stored as a head),
float16 widening, gradients, serialised Programs (offline from disk), ``inspect`` and
a cuda:90 Program with no kernel file for it.
"""
from __future__ import annotations

import json

import pytest
import torch

from compiler import symbol as sym
from compiler.artifacts import cache
from compiler.artifacts.compile import compile_symbol
from compiler.artifacts.program import Program
from compiler.ops.registry import REGISTRY, Extern, OpDef, how_it_runs, register
from runtime.context import cpu
from runtime.ndarray import torch_dtype

CALLS = []


def _fwd(attrs, ins):
    CALLS.append("fwd")
    x = ins[0]
    return [x * attrs["k"], x * x]


def _bwd(attrs, ins):
    CALLS.append("bwd")
    dy0, dy1, x = ins
    return [dy0 * attrs["k"] + 2 * dy1 * x]


def _grad(b, n):
    return [b.op("_backward_extern_test", n.ograds[0], n.ograds[1], n.inputs[0],
                 k=n.attrs["k"])]


def _same(attrs, in_shapes):
    return in_shapes[:1], [in_shapes[0], in_shapes[0]]


@pytest.fixture(scope="module", autouse=True)
def extern_test_op():
    from compiler.ops.registry import Attr, parse_float
    fwd = OpDef(name="_extern_test", pattern="opaque", lowering=Extern(_fwd),
                infer_shape=_same, reference=lambda a, x, t: _fwd(a, x),
                outputs=("scaled", "square"), attrs=[Attr("k", parse_float, 2.0)],
                gradient=_grad)
    bwd = OpDef(name="_backward_extern_test", pattern="opaque", lowering=Extern(_bwd),
                arguments=("dy0", "dy1", "x"), attrs=[Attr("k", parse_float, 2.0)],
                infer_shape=lambda a, s: (s, [s[2]]), reference=lambda a, x, t: _bwd(a, x))
    register(fwd)
    register(bwd)
    yield fwd
    del REGISTRY["_extern_test"], REGISTRY["_backward_extern_test"]


def _build():
    """``exp(e[0]) + 1`` and ``e[1]`` of ``e = _extern_test(transpose(x), k=3)``."""
    x = sym.Variable("x")
    e = sym._create("_extern_test", [sym.transpose(x)], {"k": 3.0}, None)
    return sym.Group([sym.exp(e[0]) + 1.0, e[1]]), e


def test_extern_forward_backward_on_both_cpu_targets(cpu_target):
    s, _ = _build()
    exe = s.simple_bind(cpu(), x=(3, 4))
    x = torch.randn(3, 4)
    exe.arg_dict["x"][:] = x
    CALLS.clear()
    outs = exe.forward(is_train=True)
    t = x.t()
    torch.testing.assert_close(outs[0], torch.exp(3 * t) + 1)
    torch.testing.assert_close(outs[1], t * t)
    g0, g1 = torch.randn(4, 3), torch.randn(4, 3)
    exe.backward([g0, g1])
    want = (g0 * torch.exp(3 * t) * 3 + g1 * 2 * t).t()
    torch.testing.assert_close(exe.grad_dict["x"], want)
    assert CALLS == ["fwd", "bwd"]
    train, _ = exe.programs
    ext = [ln for ln in train.launches if ln.is_extern]
    assert [ln.config["op"] for ln in ext] == ["_extern_test", "_backward_extern_test"]
    for pos, ln in enumerate(train.launches):       # never fused with anything
        if ln.is_extern:
            assert train.groups[pos] == [ln.config["op"]]
    fwd = ext[0]
    assert fwd.config["views"][0] == [[4, 3], [1, 4]]     # the transpose, read strided
    assert fwd.config["outputs"] == [0, 1]
    assert fwd.config["attrs"] == {"k": "3.0"}


def test_extern_reads_a_reversed_view_of_a_kernel_output_as_it_is_at_each_run(cpu_target):
    """A reversed view (negative strides) is flipped when the launch runs: a flip made
    once when the launch was bound read the buffer before any kernel wrote it."""
    x = sym.Variable("x")
    e = sym._create("_extern_test", [sym.reverse(sym.tanh(x), axis=0)], {"k": 3.0}, None)
    exe = sym.Group([e[0], e[1]]).simple_bind(cpu(), x=(3, 4))
    for seed in (0, 1):                  # a second run reads the new values too
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
        exe.arg_dict["x"][:] = x
        outs = exe.forward(is_train=True)
        want = torch.tanh(x).flip(0)
        torch.testing.assert_close(outs[0], 3 * want)
        torch.testing.assert_close(outs[1], want * want)


def test_extern_program_is_json_and_runs_offline(cpu_target, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    s, _ = _build()
    prog = compile_symbol(s, {"x": (2, 5)}, True, {"x": "write"}, True, cpu_target)
    again = Program.from_json(prog.to_json())
    assert [ln.kind for ln in again.launches] == [ln.kind for ln in prog.launches]
    kinds = [ln["kind"] for ln in json.loads(prog.to_json())["launches"]]
    assert kinds.count("extern") == 2
    # a fresh process finds it on disk: no kernel file for the extern launches
    cache.clear_memory_cache()
    monkeypatch.setenv("SYMTRITON_OFFLINE", "1")
    exe = s.simple_bind(cpu(), x=(2, 5))
    x = torch.randn(2, 5)
    exe.arg_dict["x"][:] = x
    outs = exe.forward(is_train=True)
    torch.testing.assert_close(outs[1], (x * x).t())


def test_extern_float16_is_widened(cpu_target):
    s, _ = _build()
    exe = s.simple_bind(cpu(), x=(2, 3), type_dict={"x": "float16"}, grad_req="null")
    x = torch.randn(2, 3).half()
    exe.arg_dict["x"][:] = x
    outs = exe.forward()
    assert torch_dtype(outs[1]) == torch.float16
    torch.testing.assert_close(outs[1], (x.float() * x.float()).t().half())


def test_extern_cuda_program_has_no_kernel_for_it():
    s, _ = _build()
    prog = compile_symbol(s, {"x": (2, 5)}, True, {"x": "write"}, True, "cuda:90")
    ext = [ln for ln in prog.launches if ln.is_extern]
    assert len(ext) == 2 and all(ln.kernel.startswith("extern:") for ln in ext)
    assert all(not ln.is_extern for ln in prog.kernel_launches())
    from compiler.triton.cubin import program_gpu_launches
    hashes = [h for h, _ in program_gpu_launches(prog, "cuda:90")]
    assert not any(h.startswith("extern:") for h in hashes)


def test_extern_inspect_and_ops(tmp_path, capsys, extern_test_op):
    from compiler import cli
    s, _ = _build()
    path = tmp_path / "s.json"
    s.save(str(path))
    info = cli.inspect_model(str(path), [("x", (2, 3))], train=True, inputs_need_grad=True,
                             target="cpu", kernel=0)
    kinds = [g["kind"] for g in info["groups"]]
    assert kinds.count("extern") == 2
    assert info["extern_launches"] == 2
    assert info["forward_launches"] + info["backward_launches"] == len(info["groups"])
    first = next(g for g in info["groups"] if g["kind"] == "extern")
    assert "extern _extern_test (ATen)" in first["summary"]
    text = cli.format_text(info)
    assert "extern launches:" in text and "ATen call of _extern_test" in text
    ext_index = first["index"]
    info = cli.inspect_model(str(path), [("x", (2, 3))], train=True, inputs_need_grad=True,
                             target="cpu", kernel=ext_index)
    assert info["kernel"]["source"] is None and "extern" in info["kernel"]["note"]
    assert how_it_runs(extern_test_op) == ("extern (ATen)", "extern (ATen)")
