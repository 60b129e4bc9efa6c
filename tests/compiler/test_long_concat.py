"""A concat of hundreds of inputs (an unrolled RNN's steps joined along time) compiles
and gives the joined values on both cpu targets: the kernel picks each position's part
by halving the parts (``compiler/ir/tile_program.py: emit_concat``), where a chain of
one select per part was as deep as the parts and passed Python's recursion limit at an
RNN of 300 steps."""
import numpy as np
import pytest

import module_api as mx


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 300])
def test_a_concat_of_many_parts_joins_them_and_splits_the_gradient(cpu_target, parts):
    rng = np.random.RandomState(parts)
    sizes = [1 + (k % 3) for k in range(parts)]
    xs = [rng.standard_normal((2, s)).astype(np.float32) for s in sizes]
    names = [f"x{k}" for k in range(parts)]
    joined = mx.sym.Concat(*[mx.sym.Variable(n) for n in names], dim=1, num_args=parts)
    sym = joined * 2.0          # fused after the concat, as a consumer would be
    exe = sym.simple_bind(mx.cpu(), **{n: x.shape for n, x in zip(names, xs)})
    out = exe.forward(is_train=True, **dict(zip(names, xs)))[0].asnumpy()
    np.testing.assert_array_equal(out, 2.0 * np.concatenate(xs, axis=1))
    dy = rng.standard_normal(out.shape).astype(np.float32)
    exe.backward(mx.nd.array(dy))
    ends = np.cumsum(sizes)
    for n, x, end in zip(names, xs, ends):
        np.testing.assert_array_equal(exe.grad_dict[n].asnumpy(),
                                      2.0 * dy[:, end - x.shape[1]:end])


def test_an_rnn_operator_of_300_steps_compiles_and_runs_the_recurrence():
    """mxnet's ``sym.RNN`` (tanh, one layer) over 300 steps: its decomposition's outputs
    joined along time, against the recurrence in numpy (mxnet's packed parameters:
    i2h weight, h2h weight, i2h bias, h2h bias)."""
    steps, batch, inputs, hidden = 300, 2, 3, 4
    rng = np.random.RandomState(0)
    x = rng.standard_normal((steps, batch, inputs)).astype(np.float32) * 0.5
    wi = rng.standard_normal((hidden, inputs)).astype(np.float32) * 0.3
    wh = rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.3
    bi, bh = (rng.standard_normal(hidden).astype(np.float32) * 0.1 for _ in range(2))
    h0 = rng.standard_normal((1, batch, hidden)).astype(np.float32)
    params = np.concatenate([wi.ravel(), wh.ravel(), bi, bh])
    rnn = mx.sym.RNN(data=mx.sym.Variable("x"), parameters=mx.sym.Variable("params"),
                     state=mx.sym.Variable("state"), state_size=hidden, num_layers=1,
                     mode="rnn_tanh", name="rnn")
    exe = rnn.simple_bind(mx.cpu(), x=x.shape, params=params.shape, state=h0.shape)
    out = exe.forward(is_train=False, x=x, params=params, state=h0)[0].asnumpy()
    h, want = h0[0].astype(np.float64), []
    for t in range(steps):
        h = np.tanh(x[t] @ wi.T + bi + h @ wh.T + bh)
        want.append(h)
    np.testing.assert_allclose(out, np.stack(want), rtol=1e-4, atol=1e-5)


def test_triton_targets_join_at_most_32_parts_a_kernel_and_the_cpu_target_one_cat():
    """``passes/split_long_concats.py``: on the Triton targets a concat of 300 parts is
    ten concats of at most 32 parts and one joining them (a kernel reading 300 parts
    spills registers on a GPU: the session's cubin sweep compiles these); the ``cpu``
    target keeps one ``torch.cat``."""
    from compiler.artifacts.compile import compile_symbol
    from compiler.passes.split_long_concats import MAX_PARTS
    parts = 300
    sym = mx.sym.Concat(*[mx.sym.Variable(f"x{k}") for k in range(parts)], dim=1,
                        num_args=parts)
    shapes = {f"x{k}": (2, 1) for k in range(parts)}
    concats = {t: sum(g.count("Concat") for g in compile_symbol(
        sym, shapes, False, {}, False, t).groups) for t in ("cpu", "interpret", "cuda:90")}
    assert MAX_PARTS == 32
    assert concats == {"cpu": 1, "interpret": 10 + 1, "cuda:90": 10 + 1}
