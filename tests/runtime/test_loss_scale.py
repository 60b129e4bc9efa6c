"""``Executor.set_loss_scale`` (AMP's dynamic loss scaling, ``compiler/passes/autodiff.py``):
every head's starting gradient, a loss operator's and an ``out_grads`` one alike, is
multiplied by the scale, in the same number of launches, and a new scale recompiles
nothing."""
import pytest
import torch

import module_api as mx
from runtime.ndarray import torch_dtype
from compiler.errors import MXNetError
from runtime.context import cpu


def _exe(dtype="float32"):
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    net = mx.sym.Group([mx.sym.SoftmaxOutput(fc, name="sm"), mx.sym.exp(fc, name="e")])
    exe = net.simple_bind(cpu(), data=(4, 5), type_dict={"data": dtype})
    gen = torch.Generator().manual_seed(0)
    for n, a in exe.arg_dict.items():
        a[:] = torch.tensor([0, 1, 2, 1]).to(torch_dtype(a)) if n == "sm_label" else \
            torch.rand(tuple(a.shape), generator=gen).to(torch_dtype(a))
    return exe, torch.rand(4, 3, generator=gen)


def _grads(exe, og):
    exe.forward(is_train=True)
    exe.backward([None, og.to(torch_dtype(exe.outputs[1]))])
    return {k: v.double().clone() for k, v in exe.grad_dict.items() if k != "sm_label"}


def test_gradients_scale_and_nothing_recompiles():
    exe, og = _exe()
    plain = _grads(exe, og)
    launches = len(exe.programs[0].launches)
    exe.set_loss_scale(1024.0)
    prog = exe.programs[0]
    assert any(a[0] == "loss_scale" for ln in prog.launches for a in ln.args)
    assert len(prog.launches) == launches          # the multiply fused into a kernel
    for k, g in _grads(exe, og).items():
        torch.testing.assert_close(g, plain[k] * 1024, rtol=1e-6, atol=0)
    exe.set_loss_scale(0.5)
    assert exe.programs[0] is prog                 # a new value only
    for k, g in _grads(exe, og).items():
        torch.testing.assert_close(g, plain[k] * 0.5, rtol=1e-6, atol=0)


def test_float16_gradients_overflow_under_a_large_scale():
    exe, og = _exe("float16")
    exe.set_loss_scale(2.0 ** 16)
    grads = _grads(exe, og)
    assert not all(torch.isfinite(g).all() for g in grads.values())


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_bad_scale_is_refused(bad):
    exe, _ = _exe()
    with pytest.raises(MXNetError, match="positive finite"):
        exe.set_loss_scale(bad)
    assert not exe._loss_scaling                   # nothing changed
