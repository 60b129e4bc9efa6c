"""On-device random numbers (issue 12): Dropout's masks from Triton's Philox.

``compiler/ir/philox.py`` must compute what ``tl.rand(seed, offset)`` computes, bit for
bit, so that the ``cpu`` target and the Triton kernels (the interpreter here, a GPU
elsewhere) draw the same masks from the seed ``mx.random.seed`` reproduces.
"""
import math

import pytest
import torch
import triton
import triton.language as tl

import module_api as mx
from compiler.ir import philox
from compiler.artifacts.compile import compile_symbol
from compiler.ops import get_op
from compiler.ops.registry import Decompose, Pointwise
from compiler.triton.mode import interpreting
from runtime.random import generator_for
from tests.conftest import assert_same_launches_on_cpu_targets
from runtime.ndarray import torch_dtype

# The suite runs Triton kernels in the interpreter (tests/conftest.py sets
# TRITON_INTERPRET=1 before triton's import); with SYMTRITON_TEST_GPU=1 they run
# compiled on the GPU, which needs CUDA tensors.
DEVICE = "cpu" if interpreting() else "cuda"
if DEVICE == "cuda" and not torch.cuda.is_available():
    pytest.skip("Triton kernels need the interpreter or a GPU", allow_module_level=True)


@triton.jit
def _philox_words(seed, off_ptr, w0, w1, w2, w3, u_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    off = tl.load(off_ptr + i)
    a, b, c, d = tl.randint4x(seed, off)
    tl.store(w0 + i, a)
    tl.store(w1 + i, b)
    tl.store(w2 + i, c)
    tl.store(w3 + i, d)
    tl.store(u_ptr + i, tl.rand(seed, off))


def _triton_philox(seed, offsets):
    """``tl.randint4x`` words (as uint32 values in int64) and ``tl.rand``, from Triton."""
    n = offsets.numel()
    off = offsets.to(DEVICE)
    words = [torch.empty(n, dtype=torch.int32, device=DEVICE) for _ in range(4)]
    u = torch.empty(n, dtype=torch.float32, device=DEVICE)
    _philox_words[(1,)](seed, off, *words, u, N=n)
    return [w.cpu().to(torch.int64) & philox.M32 for w in words], u.cpu()


SEEDS = [0, 1, 12345, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 7, 2 ** 40 + 3, 2 ** 63 - 1, 2 ** 63 + 5,
         2 ** 64 - 1, -1, -987654321]


def _offsets(dtype, seed):
    g = torch.Generator().manual_seed(abs(seed) % 1000)
    if dtype == torch.int32:
        head = torch.tensor([0, 1, 2, 3, 2 ** 31 - 1, -1, -2 ** 31])
        rest = torch.randint(-2 ** 31, 2 ** 31, (57,), generator=g)
    else:
        head = torch.tensor([0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 1, 2 ** 32 - 1, 2 ** 32,
                             2 ** 32 + 1, 2 ** 40, 2 ** 63 - 1, -1, -2 ** 63, 3 * 2 ** 33 + 5])
        rest = torch.randint(-2 ** 62, 2 ** 62, (51,), generator=g)
    return torch.cat([head, rest]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("seed", SEEDS)
def test_philox_matches_tl_rand_bit_for_bit(seed, dtype):
    """Every output word of Philox 4x32 and the float of tl.rand, for seeds of every
    Triton integer range (int32, int64, uint64, negative) and offsets past 2**31."""
    off = _offsets(dtype, seed)
    words, u = _triton_philox(seed, off)
    assert torch.equal(philox.randint(seed, off), words[0])
    wide = dtype == torch.int64
    o64 = off.to(torch.int64)
    k0, k1 = (seed & ((1 << 64) - 1)) & philox.M32, (seed & ((1 << 64) - 1)) >> 32
    mine = philox.philox4x32(o64 & philox.M32, (o64 >> 32) & philox.M32 if wide else 0, 0, 0,
                             k0, k1)
    for k in range(4):
        assert torch.equal(mine[k], words[k]), f"word {k}"
    got = philox.rand(seed, off)
    assert torch_dtype(got) == torch.float32
    assert torch.equal(got.view(torch.int32), u.view(torch.int32))
    assert ((got >= 0) & (got < 1)).all()


def test_philox_tensor_seeds_and_chunks(monkeypatch):
    """A seed tensor broadcasts against the offsets; chunking changes nothing."""
    off = torch.arange(1000, dtype=torch.int32).reshape(10, 100)
    seeds = torch.tensor([[7], [2 ** 33 + 1], [-5], [0], [1], [2], [3], [4], [5], [6]])
    want = torch.stack([philox.rand(int(s), off[i]) for i, s in enumerate(seeds[:, 0])])
    monkeypatch.setattr(philox, "CHUNK", 37)
    assert torch.equal(philox.rand(seeds, off), want)
    assert torch.equal(philox.rand(torch.tensor(7), off[0]), want[0])
    with pytest.raises(TypeError, match="integer"):
        philox.rand(torch.tensor(1.5), off)
    with pytest.raises(TypeError, match="int32 or int64"):
        philox.rand(1, off.float())


def test_stream_seed_reads_the_bits_of_the_seed_element():
    bits = torch.tensor([-2], dtype=torch.int32).view(torch.float32)      # 0xFFFFFFFE
    assert philox.stream_seed(bits, 0) == 0xFFFFFFFE
    assert philox.stream_seed(bits, 3) == 0xFFFFFFFE + (3 << 32)
    off = torch.arange(10)
    want = philox.rand(0xFFFFFFFE + (3 << 32), off)
    assert torch.equal(philox.stream_uniform(bits, 3, off), want)


# ---------------------------------------------------------------------------------------
# Dropout in compiled programs

def _bind(monkeypatch, target, make, shape, seed):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    mx.random.seed(seed)
    exe = make(mx.sym.Variable("x")).simple_bind(mx.cpu(), x=shape)
    g = torch.Generator().manual_seed(11)
    exe.arg_dict["x"][:] = torch.rand(shape, generator=g) + 0.5      # no zero: out shows the mask
    for name in exe.arg_dict:
        if name != "x":
            exe.arg_dict[name][:] = torch.randn(tuple(exe.arg_dict[name].shape), generator=g)
    return exe


def _steps(exe, steps=2):
    """Per training step: outputs, the arguments' gradients (``x`` first) and the seed."""
    prog = exe.programs[0]
    res = []
    for _ in range(steps):
        outs = [o.clone() for o in exe.forward(is_train=True)]
        exe.backward([torch.ones_like(o) for o in outs])
        bits = exe._buffers_for(prog)[int(prog.seed_buffer)].reshape(-1)[:1].clone()
        res.append((outs, [g.clone() for g in exe.grad_arrays], bits))
    return res


def _dropout(x):
    return mx.sym.Dropout(x, p=0.4)


# symbol, input shape, and whether the two targets' values agree bit for bit (matmuls,
# sums and exp round differently in BLAS and the interpreter; the masks never differ)
CASES = {
    "dropout": (_dropout, (3, 5, 7), True),
    "axes": (lambda x: mx.sym.Dropout(x * 2, p=0.5, axes=(1,)), (4, 6, 3), True),
    "two": (lambda x: mx.sym.Dropout(x, p=0.5) * mx.sym.Dropout(x, p=0.5), (4, 8), True),
    "after_fc": (lambda x: mx.sym.Dropout(mx.sym.FullyConnected(x, num_hidden=6), p=0.3),
                 (5, 4), False),
    "into_sum": (lambda x: mx.sym.sum(mx.sym.Dropout(mx.sym.exp(x), p=0.6), axis=1), (6, 9),
                 False),
    "rrelu": (lambda x: mx.sym.LeakyReLU(x - 1, act_type="rrelu")[0], (5, 6), False),
}


def _same(a, b, exact, what):
    assert torch.equal(a == 0, b == 0), f"{what}: the masks differ"
    if exact:
        assert torch.equal(a, b), what
    else:
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=what)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_and_interpreter_draw_the_same_bits(monkeypatch, case):
    """Same ``mx.random.seed``: the same seeds, masks, outputs and gradients on both
    targets, step after step, and the same launches."""
    make, shape, exact = CASES[case]
    runs = {}
    for target in ("cpu", "interpret"):
        exe = _bind(monkeypatch, target, make, shape, seed=3)
        runs[target] = _steps(exe)
        assert exe.programs[1].seed_buffer is None          # inference draws nothing
    for (o_c, g_c, s_c), (o_i, g_i, s_i) in zip(runs["cpu"], runs["interpret"]):
        assert torch.equal(s_c.view(torch.int32), s_i.view(torch.int32))
        for a, b in zip(o_c, o_i):
            _same(a, b, exact, "output")
        for k, (a, b) in enumerate(zip(g_c, g_i)):
            _same(a, b, exact, f"gradient of argument {k}")
    assert not torch.equal(runs["cpu"][0][0][0], runs["cpu"][1][0][0])   # a new step
    assert_same_launches_on_cpu_targets(exe)


@pytest.mark.parametrize("target", ["cpu", "interpret"])
def test_mask_is_tl_rand_of_the_seed_at_each_linear_index(monkeypatch, target):
    """The mask at linear index i is ``tl.rand(seed, i) >= p`` scaled, with the seed the
    executor wrote for the step (stream 0: the graph's first random source)."""
    shape, p = (3, 5, 7), 0.4
    exe = _bind(monkeypatch, target, _dropout, shape, seed=5)
    x = exe.arg_dict["x"].clone()
    (outs, grads, bits), = _steps(exe, 1)
    u = philox.rand(philox.stream_seed(bits, 0), torch.arange(x.numel())).reshape(shape)
    mask = (u >= p).float() * (1.0 / (1.0 - p))
    torch.testing.assert_close(outs[0], x * mask, rtol=0, atol=0)
    torch.testing.assert_close(grads[0], mask, rtol=0, atol=0)


@pytest.mark.parametrize("seed", [0x7FC00001, 0xFF800001, 0x7F800000, 0x00000001, 0x80000000])
def test_seed_bits_that_are_not_ordinary_floats(monkeypatch, seed):
    """The seed travels as the bits of a float32: NaN payloads, infinities and
    denormals reach the Philox key unchanged on both targets."""
    import runtime.random
    monkeypatch.setattr(runtime.random, "next_step_seed", lambda ctx: seed)
    shape, p = (4, 9), 0.4                                          # _dropout's p
    u = philox.rand(seed, torch.arange(36)).reshape(shape)
    for target in ("cpu", "interpret"):
        exe = _bind(monkeypatch, target, _dropout, shape, seed=0)
        x = exe.arg_dict["x"].clone()
        (outs, _, bits), = _steps(exe, 1)
        assert int(bits.view(torch.int32)[0]) & philox.M32 == seed
        assert torch.equal(outs[0], x * ((u >= p).float() * (1.0 / (1.0 - p)))), target


def test_seed_reproduces_the_mask_and_each_step_draws_anew(monkeypatch):
    shape = (8, 16)
    first = _steps(_bind(monkeypatch, "cpu", _dropout, shape, seed=7), 2)
    again = _steps(_bind(monkeypatch, "cpu", _dropout, shape, seed=7), 2)
    other = _steps(_bind(monkeypatch, "cpu", _dropout, shape, seed=8), 1)
    masks = lambda run: [outs[0] != 0 for outs, _, _ in run]  # noqa: E731
    assert all(torch.equal(a, b) for a, b in zip(masks(first), masks(again)))
    assert not torch.equal(masks(first)[0], masks(first)[1])           # the next step
    assert not torch.equal(masks(first)[0], masks(other)[0])           # another seed
    # the step's backward used the forward's mask (the seed stayed)
    for outs, grads, _ in first:
        assert torch.equal(grads[0] != 0, outs[0] != 0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_fraction(monkeypatch, p):
    """Kept fraction within 0.015 of 1 - p over n = 2**16 values. For independent
    uniforms Hoeffding gives P(|kept/n - (1-p)| >= t) <= 2 exp(-2 n t**2) = 3e-13 at
    t = 0.015, so a false failure is below 1e-9 whatever the seed (here fixed anyway)."""
    n, t = 2 ** 16, 0.015
    assert 2 * math.exp(-2 * n * t * t) < 1e-9
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cpu")
    mx.random.seed(21)
    exe = mx.sym.Dropout(mx.sym.Variable("x"), p=p).simple_bind(mx.cpu(), x=(256, 256))
    exe.arg_dict["x"][:] = torch.ones(256, 256)
    out = exe.forward(is_train=True)[0]
    kept = torch.ne(out, 0)      # a bool mask (NDArray's `!=` gives mxnet's 0/1)
    assert abs(kept.float().mean().item() - (1 - p)) < t
    assert torch.equal(out[kept], torch.full((int(kept.sum()),), 1.0 / (1.0 - p)))


def test_inference_is_identity_and_draws_nothing(monkeypatch):
    exe = _bind(monkeypatch, "cpu", _dropout, (4, 5), seed=1)
    train, infer = exe.programs
    assert train.seed_buffer is not None and infer.seed_buffer is None
    assert all("_philox_uniform" not in ops for ops in infer.groups)
    before = generator_for(exe._ctx).get_state()        # a seed is drawn only to draw
    assert torch.equal(exe.forward(is_train=False)[0], exe.arg_dict["x"])
    assert torch.equal(generator_for(exe._ctx).get_state(), before)
    # mode='always' draws in inference too
    always = mx.sym.Dropout(mx.sym.Variable("x"), p=0.5, mode="always")
    exe2 = always.simple_bind(mx.cpu(), x=(4, 5), grad_req="null")
    exe2.arg_dict["x"][:] = torch.ones(4, 5)
    assert exe2.programs[1].seed_buffer is not None
    assert (exe2.forward()[0] == 0).any()


def _mlp(dropout):
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="relu")
    if dropout:
        h = mx.sym.Dropout(h, p=0.5)
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=4, name="fc2"), name="sm")


# Launches (forward, backward) and buffer element counts of the training Program
# before on-device random numbers (measured at commit 6102dd3, the host-filled
# ``_random_uniform`` buffer): Dropout must cost no more launches than it did.
BEFORE = {
    "mlp": ((2, 7), [128, 128, 128, 128, 128, 32, 128]),
    "relu_dropout": ((1, 1), [24, 24, 24]),
    "two": ((1, 1), [24, 24, 24, 24, 24, 24]),
}


def test_dropout_fuses_into_its_neighbours():
    x = mx.sym.Variable("data")
    nets = {"mlp": (_mlp(True), (8, 10)),
            "relu_dropout": (mx.sym.Dropout(mx.sym.Activation(x, act_type="relu"), p=0.3),
                             (4, 6)),
            "two": (mx.sym.Dropout(x, p=0.2) * mx.sym.Dropout(x, p=0.2), (4, 6))}
    for name, (s, shape) in nets.items():
        req = {n: "write" for n in s.list_arguments()}
        prog = compile_symbol(s, {"data": shape}, True, req, True, "cpu")
        launches = (prog.stats["forward_launches"], prog.stats["backward_launches"])
        (was, was_buffers) = BEFORE[name]
        assert launches[0] <= was[0] and launches[1] <= was[1], (name, launches, was)
        # the random values no longer live in memory: one seed element instead
        assert sum(prog.buffers) < sum(was_buffers) and prog.buffers[prog.seed_buffer] == 1
    # and the MLP's Dropout adds no launch at all to the network without it
    progs = [compile_symbol(_mlp(d), {"data": (8, 10)}, True,
                            {n: "write" for n in _mlp(d).list_arguments()}, True, "cpu")
             for d in (True, False)]
    assert [len(p.launches) for p in progs] == [len(progs[1].launches)] * 2
    assert progs[1].seed_buffer is None


def test_registry_entries():
    assert isinstance(get_op("_random_uniform").lowering, Decompose)
    assert isinstance(get_op("_philox_uniform").lowering, Pointwise)
    assert get_op("_philox_uniform").needs_random
    with pytest.raises(Exception, match="stream"):
        get_op("_philox_uniform").parse_attrs({"shape": "(2,)", "stream": str(2 ** 32)})


def test_dropout_p_one_gives_nan_as_mxnet():
    """mxnet 1.9.1 scales the kept elements by 1 / (1 - p): at p = 1 every element is
    0 * inf = NaN in training (its test_operator.py's check_dropout_ratio), in both the
    output and the gradient; inference is the identity."""
    x = mx.sym.Variable("data")
    exe = mx.sym.Dropout(x, p=1.0).simple_bind(mx.cpu(), data=(3, 4))
    exe.arg_dict["data"][:] = 1
    out = exe.forward(is_train=True)[0]
    assert torch.isnan(out).all()
    exe.backward(mx.nd.ones((3, 4)))
    assert torch.isnan(exe.grad_dict["data"]).all()
    assert (exe.forward(is_train=False)[0] == 1).all()
