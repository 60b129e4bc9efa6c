"""cpu target: a kernel's numbers are constants of its launch (compiler/cpu/source.py), so
groups that differ only in sizes and scalars share one kernel file and module."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from compiler.artifacts.program import Program
from compiler.cpu.source import lift_numbers


def test_numbers_become_names_and_nothing_else_changes():
    bind = ["a0_0 = p0_0.as_strided((2, 3), (3, 1))",
            "w = torch.empty((2, 3), dtype=torch.float32).fill_(float('-inf'))"]
    body = ["torch.clamp_min(a0_0, 0.0, out=o1_0)", "o1_0.mul_(1e-05)",
            "_v0 = x[..., 1:15].pow(2) - 2.5e-07", "attr = 'tanh3'", "y = _r0[1]",
            'z = torch.tensor([1.0, 1, 0.0], dtype=torch.int64)']
    summary, lb, lbody, consts = lift_numbers("reduce over domain (2, 3)", bind, body)
    assert summary == "reduce over domain (N, N)"
    # bind(): a name per number; run(): one per value and type (1 and 1.0 differ)
    assert lb[0] == ", ".join(f"_c{i}" for i in range(len(consts))) + " = _consts"
    assert lb[1:] == ["a0_0 = p0_0.as_strided((_c0, _c1), (_c2, _c3))",
                      "w = torch.empty((_c4, _c5), dtype=torch.float32).fill_(float('-inf'))"]
    assert lbody == ["torch.clamp_min(a0_0, _c6, out=o1_0)", "o1_0.mul_(_c7)",
                     "_v0 = x[..., _c8:_c9].pow(_c10) - _c11", "attr = 'tanh3'",
                     "y = _r0[_c8]", 'z = torch.tensor([_c12, _c8, _c6], dtype=torch.int64)']
    assert consts == (2, 3, 3, 1, 2, 3, 0.0, 1e-05, 1, 15, 2, 2.5e-07, 1.0)
    assert [type(c) for c in consts] == [int] * 6 + [float, float, int, int, int, float,
                                                    float]


def test_one_number_is_read_by_index_and_none_adds_no_line():
    assert lift_numbers("", ["a = p0_0.view(4)"], [])[1] == ["_c0 = _consts[0]",
                                                              "a = p0_0.view(_c0)"]
    assert lift_numbers("fill", ["a = p0_0"], ["a.zero_()"]) == \
        ("fill", ["a = p0_0"], ["a.zero_()"], ())


def _kernels(prog):
    return [ln for ln in prog.launches if not ln.is_extern]


def test_groups_of_other_sizes_share_one_kernel_and_compute_their_own(tmp_path, monkeypatch):
    """Two heads, the same computation at two sizes and two scalars: one kernel file,
    two launches with their own constants, each output torch's."""
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    a, b = sym.Variable("a"), sym.Variable("b")
    net = sym.Group([sym.relu(a * 0.1 + 1.5), sym.relu(b * 0.3 + 2.5)])
    shapes = {"a": (3, 4), "b": (5, 7)}     # one rank: a source has a tuple per view
    prog = compile_symbol(net, shapes, False, {}, False, "cpu")
    launches = _kernels(prog)
    assert len(launches) == 2 and launches[0].kernel == launches[1].kernel
    assert launches[0].config["consts"] != launches[1].config["consts"]
    # the launch's summary keeps its numbers (the file's comment has the names)
    assert "_c" not in launches[0].summary and "_c" not in launches[1].summary
    rng = np.random.RandomState(0)
    va, vb = rng.randn(*shapes["a"]).astype(np.float32), rng.randn(*shapes["b"]).astype(np.float32)
    exe = net.simple_bind(mx.cpu(), **shapes)
    outs = exe.forward(a=mx.nd.array(va), b=mx.nd.array(vb))
    ta, tb = torch.from_numpy(va), torch.from_numpy(vb)
    np.testing.assert_array_equal(outs[0].asnumpy(), torch.relu(ta * 0.1 + 1.5).numpy())
    np.testing.assert_array_equal(outs[1].asnumpy(), torch.relu(tb * 0.3 + 2.5).numpy())


def test_constants_survive_the_programs_json_exactly():
    net = sym.Variable("x") * 0.1 + 1e-07
    prog = compile_symbol(net, {"x": (2, 3)}, False, {}, False, "cpu")
    back = Program.from_json(prog.to_json())
    for ln, again in zip(_kernels(prog), _kernels(back)):
        assert ln.config["consts"] == again.config["consts"]
        assert [type(c) for c in ln.config["consts"]] == \
            [type(c) for c in again.config["consts"]]
    assert 0.1 in _kernels(back)[0].config["consts"]


@pytest.mark.parametrize("channels", [8, 16])
def test_poolings_of_other_sizes_share_their_kernels(channels, tmp_path, monkeypatch):
    """Inception-BN's case: the same 3x3 average pooling at two sizes, forward and
    backward, is two kernel files, and the gradients are torch's."""
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    x, y = sym.Variable("x"), sym.Variable("y")
    pool = dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg")
    net = sym.Group([sym.MakeLoss(sym.sum(sym.Pooling(x, **pool))),
                     sym.MakeLoss(sym.sum(sym.Pooling(y, **pool)))])
    shapes = {"x": (2, channels, 6, 5), "y": (1, channels, 9, 4)}
    prog = compile_symbol(net, shapes, True, {"x": "write", "y": "write"}, True, "cpu")
    pools = [ln for ln in _kernels(prog) if "pooling" in ln.summary]
    assert len(pools) == 4 and len({ln.kernel for ln in pools}) == 2
    exe = net.simple_bind(mx.cpu(), **shapes)
    rng = np.random.RandomState(1)
    vals = {n: rng.randn(*s).astype(np.float32) for n, s in shapes.items()}
    exe.forward(is_train=True, **{n: mx.nd.array(v) for n, v in vals.items()})
    exe.backward()
    for n, v in vals.items():
        t = torch.from_numpy(v).requires_grad_()
        torch.nn.functional.avg_pool2d(t, 3, 1, 1).sum().backward()
        np.testing.assert_allclose(exe.grad_dict[n].asnumpy(), t.grad.numpy(), rtol=1e-6,
                                   atol=1e-6)
