"""cpu target: long runs of like lines are written as loops (compiler/cpu/loops.py), and
the folded source computes exactly what the line-per-call source did."""
import numpy as np
import torch

import module_api as mx
from compiler import symbol as sym
from compiler.artifacts.cache import kernel_path
from compiler.artifacts.compile import compile_symbol
from compiler.cpu.loops import LONG, MIN_RUN, fold_runs
from compiler.cpu.source import _run_params


def _module(params, bind, body, signature=None):
    """The source the cpu kernel template makes of these lines."""
    run = _run_params(params, bind, body)
    signature = ", ".join(params) if signature is None else signature
    lines = [f"def bind({signature}):"] + ["    " + b for b in bind]
    lines += [f"    def run({run}):"] + ["        " + b for b in body or ["pass"]]
    return "\n".join(lines + ["    return run", ""])


def _run(source, arrays):
    scope = {"torch": torch}
    exec(compile(source, "kernel", "exec"), scope)
    scope["bind"](*arrays)()


def _chain(n):
    params = [f"p{i}_0" for i in range(n + 1)]
    bind = ["a0_0 = p0_0.as_strided((4, 3), (3, 1))"] + \
        [f"o{i}_0 = p{i}_0.as_strided((4, 3), (3, 1))" for i in range(1, n + 1)]
    body = [f"torch.add({'a0_0' if i == 0 else f'o{i}_0'}, 0.5, out=o{i + 1}_0)"
            for i in range(n)]
    return params, bind, body


def test_a_chain_folds_into_one_loop_with_the_same_results():
    n = MIN_RUN * 3
    params, bind, body = _chain(n)
    signature, fbind, fbody = fold_runs(params, bind, body)
    assert signature == ", ".join(params)
    assert fbody == ["for _v0, _v1 in _r0:", "    torch.add(_v0, 0.5, out=_v1)"]
    assert len(fbind) == 2 and fbind[1].startswith("_r0 = tuple(zip((a0_0, o1_0, o2_0, ")
    want = [torch.randn(12) for _ in range(n + 1)]
    got = [t.clone() for t in want]
    _run(_module(params, bind, body), want)
    _run(_module(params, fbind, fbody), got)
    for a, b in zip(want, got):
        assert torch.equal(a, b)
    assert torch.allclose(got[-1], got[0] + 0.5 * n)   # the loop did run every call


def test_short_runs_and_other_lines_stay_as_they_are():
    params, bind, body = _chain(MIN_RUN - 2)          # MIN_RUN - 1 views
    assert fold_runs(params, bind, body) == (", ".join(params), bind, body)
    params, bind, body = _chain(2 * MIN_RUN)
    # a name run() assigns is not read through a table, and breaks the run
    body[MIN_RUN] = "o5_0 = o5_0.view(12)"
    _, fbind, fbody = fold_runs(params, bind, body)
    assert "o5_0 = o5_0.view(12)" in fbody
    assert not any("o5_0" in line for line in fbind if line.startswith("_r"))
    assert all("o5_0" in line for line in fbody if line.startswith("torch.add(o5_0"))


def test_a_bind_line_reading_a_name_its_run_assigned_cuts_the_run():
    n = 3 * MIN_RUN
    params = [f"p{i}_0" for i in range(n)]
    bind = [f"o{i}_0 = p{i}_0.view(12)" for i in range(n)]
    bind[2 * MIN_RUN] = f"o{2 * MIN_RUN}_0 = o{MIN_RUN}_0.view(12)"   # reads the run's own
    body = [f"o{i}_0.add_(1.0)" for i in range(n)]
    _, fbind, fbody = fold_runs(params, bind, body)
    arrays = [torch.zeros(12) for _ in range(n)]
    want = [t.clone() for t in arrays]
    _run(_module(params, bind, body), want)
    _run(_module(params, fbind, fbody), arrays)
    for a, b in zip(want, arrays):
        assert torch.equal(a, b)
    assert torch.equal(arrays[MIN_RUN], torch.full((12,), 2.0))


def _same_results(params, bind, body, n_arrays, folded):
    """The folded source computes what the line-per-call one did (arrays of 12)."""
    want = [torch.randn(12) for _ in range(n_arrays)]
    got = [t.clone() for t in want]
    _run(_module(params, bind, body), want)
    _run(_module(params, folded[1], folded[2], folded[0]), got)
    for a, b in zip(want, got):
        assert torch.equal(a, b)
    return got


def test_long_sequences_of_names_are_read_as_slices():
    n = LONG + 40
    params, bind, body = _chain(n)
    folded = fold_runs(params, bind, body)
    signature, fbind, fbody = folded
    assert signature == "*_p"
    # the views: one tuple; the table: two slices of it; no name spelled one by one
    assert fbind == [f"_m0 = tuple([_v0.as_strided((4, 3), (3, 1)) for _v0 in _p[0:{n + 1}]])",
                     f"_r0 = tuple(zip(_m0[0:{n}], _m0[1:{n + 1}]))"]
    assert fbody == ["for _v0, _v1 in _r0:", "    torch.add(_v0, 0.5, out=_v1)"]
    assert sum(len(line) for line in fbind + fbody) < 400
    got = _same_results(params, bind, body, n + 1, folded)
    assert torch.allclose(got[-1], got[0] + 0.5 * n)


def test_slices_keep_names_read_alone_repeated_or_given_again():
    n = LONG + 8
    params = [f"p{i}_0" for i in range(n + 2)]
    bind = [f"o{i}_0 = p{i}_0.view(12)" for i in range(n + 2)]
    # an accumulator read in every row but the first; a name read on its own line; a
    # name run() gives a new value
    body = [f"torch.add(o{n if i else n - 1}_0, o{i}_0, out=o{n}_0)" for i in range(n)]
    body += ["o7_0.mul_(2.0)", f"o{n + 1}_0 = o{n + 1}_0.view(3, 4)", f"o{n + 1}_0.add_(1.0)"]
    folded = fold_runs(params, bind, body)
    assert f"_r0 = tuple(zip((*_m0[{n - 1}:{n + 1}], *((_m0[{n}],) * {n - 2}),), _m0[0:{n}]))" \
        in folded[1]
    assert "o7_0 = _m0[7]" in folded[1] and f"o{n + 1}_0 = _m0[{n + 1}]" in folded[1]
    got = _same_results(params, bind, body, n + 2, folded)
    assert not torch.equal(got[n + 1], torch.zeros(12))


def _chain_symbol(n):
    x = sym.Variable("data")
    for i in range(n):
        x = sym.Activation(x, act_type="relu" if i % 2 else "tanh")
    return x


def _compiled_chain_sources(n):
    """The kernel sources of the training Program of ``_chain_symbol(n)``."""
    prog = compile_symbol(_chain_symbol(n), {"data": (3, 4)}, for_training=True,
                          grad_req={"data": "write"})
    return [open(kernel_path(ln.kernel)).read() for ln in prog.kernel_launches()]


def _assert_chain_like_torch(n, seed):
    """``_chain_symbol(n)``'s forward and data gradient equal torch's."""
    x = np.random.RandomState(seed).uniform(-1, 1, (3, 4)).astype(np.float32)
    exe = _chain_symbol(n).simple_bind(mx.cpu(), data=(3, 4))
    exe.arg_dict["data"][:] = x
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((3, 4))])
    t = torch.tensor(x, requires_grad=True)
    y = t
    for i in range(n):
        y = torch.relu(y) if i % 2 else torch.tanh(y)
    y.sum().backward()
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), y.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), t.grad.numpy(), rtol=1e-5,
                               atol=1e-7)


def test_a_compiled_chain_runs_through_loops_as_the_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    n = 2 * MIN_RUN + 2
    sources = _compiled_chain_sources(n)
    assert sum("for _v0" in s for s in sources) == 2       # forward and backward
    _assert_chain_like_torch(n, seed=0)


def test_a_compiled_chain_longer_than_the_slice_rule_runs_as_the_reference(tmp_path,
                                                                            monkeypatch):
    """Past LONG operators the kernels take ``*_p`` and make their views as one tuple;
    the alternating tanh / relu calls form no run, so each name is also given its
    value from the tuple: forward and backward still equal torch's."""
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    n = LONG + 44
    sources = _compiled_chain_sources(n)
    assert all("def bind(_consts, *_p):" in s and "_m0 = tuple(" in s for s in sources), sources
    _assert_chain_like_torch(n, seed=1)


def test_a_compiled_uniform_chain_spells_no_name_one_by_one(tmp_path, monkeypatch):
    """A chain of one operator past LONG: its kernels are a few lines whatever its
    length (a tuple of views, tables of slices), and compute the chain."""
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    n = LONG + 44
    x = sym.Variable("data")
    for _ in range(n):
        x = sym.Activation(x, act_type="relu")
    prog = compile_symbol(x, {"data": (3, 4)}, for_training=True, grad_req={"data": "write"})
    sources = [open(kernel_path(ln.kernel)).read() for ln in prog.kernel_launches()]
    assert all(len(s) < 1500 for s in sources), [len(s) for s in sources]
    data = np.random.RandomState(2).uniform(-1, 1, (3, 4)).astype(np.float32)
    exe = x.simple_bind(mx.cpu(), data=(3, 4))
    exe.arg_dict["data"][:] = data
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((3, 4))])
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.maximum(data, 0))
    np.testing.assert_array_equal(exe.grad_dict["data"].asnumpy(), (data > 0).astype(np.float32))
