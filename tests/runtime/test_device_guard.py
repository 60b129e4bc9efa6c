"""Launches run under their context's CUDA device (Triton launches on the current
device): the guard chosen per context, and that executors and the optimizer's
Triton update enter it. The CUDA side itself needs a GPU; here the guard objects
and the wiring are checked."""
import contextlib

import torch

import module_api as mx
import runtime.context as context_mod
import runtime.executor as executor_mod
from runtime.context import device_guard


def test_guard_per_context():
    assert isinstance(device_guard(mx.cpu(3)), contextlib.nullcontext)
    assert isinstance(device_guard(torch.device("cpu")), contextlib.nullcontext)
    g = device_guard(mx.gpu(2))
    assert isinstance(g, torch.cuda.device) and g.idx == 2
    assert device_guard(torch.device("cuda", 3)).idx == 3
    assert device_guard(torch.device("cuda")).idx == 0


def _recording(monkeypatch, module):
    seen = []
    real = module.device_guard

    def record(where):
        seen.append(where)
        return real(where)
    monkeypatch.setattr(module, "device_guard", record)
    return seen


def test_executor_launches_under_its_context(monkeypatch):
    seen = _recording(monkeypatch, executor_mod)
    x = mx.sym.Variable("x")
    exe = mx.sym.MakeLoss(mx.sym.sum(x * x)).simple_bind(mx.cpu(5), x=(2, 3))
    exe.forward(is_train=True)
    exe.backward()
    assert seen == [mx.cpu(5), mx.cpu(5)]


def test_optimizer_triton_update_launches_under_the_weights_device(monkeypatch):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", "interpret")
    seen = _recording(monkeypatch, context_mod)
    opt = mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9)
    upd = mx.optimizer.get_updater(opt)
    w, g = mx.nd.ones((4,)), mx.nd.ones((4,))
    upd(0, g, w)
    assert [d.type for d in seen] == ["cpu"]
    assert w.asnumpy().tolist() == [float(torch.tensor(0.9))] * 4   # 1 - 0.1 * 1, in fp32
