"""A bound launch list of cpu kernels as TorchScript (``compiler/cpu/script.py``).

* every run() body of a real Program's phase is written in, its numbers and ops as
  literals, its locals renamed per launch, and the scripted phase computes what the
  Python runs compute, on fresh arrays as well;
* a run() that TorchScript cannot take is refused with the launch and the reason;
* the check that keeps a script runs the phase once (the script on a replica of its
  arrays that aliases as they do), and refuses a script whose numbers differ, leaving
  the Python runs' results;
* the parts run all, also when one raises: the error propagates once every fork is
  done, nothing left writing.
"""
import re

import numpy as np
import pytest
import torch

import module_api as mx
import compiler.cpu.script as script
from compiler.cpu.script import NotScriptable, ScriptDiffers, checked_parts, parts_function, \
    phase_source
from runtime import threads


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as a split run has: the Python runs and the scripts then
    compute alike to the bit, and torch's inter-op threads, started by a fork here, keep
    the count they start with (``compiler/cpu/script.py``)."""
    cap = torch.get_num_threads()
    threads.reset(threads.FixedCount(1))
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(cap)
    threads.reset()


def _bound_training_step():
    """A small conv net's executor after one step (gradients added: a phase run twice
    would show): its forward and backward lists."""
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), num_filter=3, name="c")
    net = mx.sym.Pooling(mx.sym.Activation(net, act_type="tanh"), kernel=(2, 2),
                         stride=(2, 2), pool_type="max")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=4, name="fc")
    sym = mx.sym.SoftmaxOutput(net, name="softmax")
    exe = sym.simple_bind(mx.cpu(), grad_req="add", data=(2, 1, 6, 6), softmax_label=(2,))
    rng = np.random.RandomState(0)
    for n, a in exe.arg_dict.items():
        a[:] = rng.randint(0, 4, a.shape) if n == "softmax_label" else rng.randn(*a.shape)
    exe.forward(is_train=True)
    exe.backward()
    prog = exe._train_prog
    return exe, [exe._bound[(id(prog), phase)] for phase in ("fwd", "bwd")]


def test_a_phase_scripted_computes_what_its_python_runs_compute():
    """New data after a step: each phase from the arrays as they were (the last step's
    results in its outputs) gives, scripted, what its Python runs give."""
    exe, lists = _bound_training_step()
    exe.arg_dict["data"][:] = np.random.RandomState(1).randn(2, 1, 6, 6)
    for bound in lists:
        source, tensors, opaque = phase_source(bound)
        assert opaque == frozenset()
        assert not re.search(r"\b_c\d+\b", source)        # every number written in
        assert source.count("# launch") == len(bound)
        before = [t.clone() for t in tensors]
        for run in bound:
            run()
        want = [t.clone() for t in tensors]
        assert any(not torch.equal(b, w) for b, w in zip(before, want))
        for t, b in zip(tensors, before):
            t.copy_(b)
        parts_function([source])([tensors])
        for t, w in zip(tensors, want):     # scratch buffers' unwritten bytes may be NaN
            torch.testing.assert_close(t, w, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_locals_are_renamed_per_launch():
    _, (fwd, _) = _bound_training_step()
    source, _, _ = phase_source(fwd)
    assigned = re.findall(r"^    (\w+) = ", source, re.M)
    named = [a for a in assigned if not re.fullmatch(r"t\d+", a)]
    assert all(re.search(r"_l\d+$", a) for a in named), named


def test_what_torchscript_cannot_take_is_refused_naming_the_launch():
    _, (fwd, _) = _bound_training_step()

    def run():
        pass
    with pytest.raises(NotScriptable, match=r"launch 2 \(.*run\) is not a generated cpu kernel"):
        phase_source([fwd[0], fwd[1], run])
    bad = "def part(T: List[Tensor]):\n    t0 = T[0]\n    t0.no_such_method_()\n"
    with pytest.raises(NotScriptable, match="TorchScript refused the phase"):
        parts_function([bad])


@pytest.mark.parametrize("broken", [False, True])
def test_the_check_runs_the_phase_once_and_refuses_a_script_that_differs(broken, monkeypatch):
    """From the same arrays: the checked phase (kept or refused) leaves what one Python
    run of its lists leaves."""
    exe, (fwd, bwd) = _bound_training_step()
    _, tensors, _ = phase_source(bwd)
    before = [t.clone() for t in tensors]
    with torch.inference_mode():
        for run in bwd:
            run()
    want = [t.clone() for t in tensors]
    for t, b in zip(tensors, before):
        t.copy_(b)
    if broken:      # a script that writes zeros where the kernels write numbers
        monkeypatch.setattr(script, "parts_function", lambda sources: (
            lambda ts: [t.zero_() for part in ts for t in part]))
        with pytest.raises(ScriptDiffers, match="differs from its Python runs") as err:
            checked_parts([bwd])
        assert err.value.ran
    else:
        run, parts = checked_parts([bwd])
        assert [p is t for p, t in zip(parts[0], tensors)] == [True] * len(tensors)
    for t, w in zip(tensors, want):
        torch.testing.assert_close(t, w, rtol=0, atol=0, equal_nan=True)


def test_the_replica_aliases_as_the_arrays_do():
    """The check's copy of a phase's arrays: views of one buffer (overlapping, and one
    repeating an element, stride 0) stay views of one copy; the arrays are untouched."""
    base = torch.arange(16, dtype=torch.float32)
    a, b = base[2:10], base.as_strided((2, 3), (4, 1), 6)
    rep = base.as_strided((4,), (0,), 12)
    other = torch.arange(5, dtype=torch.int64)
    twin = script._replica([a, b, rep, other])
    assert all(torch.equal(twin[id(t)], t) for t in (a, b, rep, other))
    twin[id(a)][4] = -1.0            # base[6]: b[0, 0] in the copy, not in the arrays
    assert twin[id(b)][0, 0] == -1.0 and base[6] == 6.0
    twin[id(rep)].fill_(7.0)         # base[12]: b[1, 2]
    assert twin[id(b)][1, 2] == 7.0 and base[12] == 12.0
    assert twin[id(other)].data_ptr() != other.data_ptr()


PART = """def part(T: List[Tensor]):
    t0 = T[0]
    t1 = T[1]
    for i in range(40):
        torch.mm(t0, t0, out=t1)
    t1.add_(1.0)
"""
RAISES = """def part(T: List[Tensor]):
    t0 = T[0]
    t1 = T[1]
    torch.mm(t0, t1, out=t1)
"""


@pytest.mark.parametrize("raising", [0, 1])
def test_every_part_is_done_before_an_error_propagates(raising):
    """Part ``raising`` fails (a product of mismatched shapes); the other part's last
    write is in its array when the error reaches the caller."""
    a = torch.randn(64, 64) * 0.01
    ok, bad = [a, torch.empty(64, 64)], [torch.randn(3, 4), torch.empty(5, 6)]
    sources = [RAISES, PART] if raising == 0 else [PART, RAISES]
    tensors = [bad, ok] if raising == 0 else [ok, bad]
    with pytest.raises(RuntimeError):
        parts_function(sources)(tensors)
    torch.testing.assert_close(ok[1], a @ a + 1.0)
