"""Launch counts after fusion: the bounds the compiler promises for the LSTM cell
and the MLP, checked on the compiled Program and on a real run."""

from compiler.artifacts.compile import compile_symbol
from runtime.context import cpu
from runtime.launcher import LaunchCounter
from tests.models import lstm_cell, mlp


def _train_req(symbol, no_grad=()):
    return {n: ("null" if n in no_grad else "write") for n in symbol.list_arguments()}


def test_lstm_cell_step_launches(monkeypatch):
    # the step's own kernels: what GPUs run, and the cpu target with SYMTRITON_LSTM_LAYERS=0
    # (tests/compiler/test_fuse_lstm_layers.py: the oneDNN layer the cpu target runs)
    monkeypatch.setenv("SYMTRITON_LSTM_LAYERS", "0")
    s = lstm_cell(num_hidden=8)
    shapes = {"data": (4, 6), "prev_h": (4, 8), "prev_c": (4, 8)}
    prog = compile_symbol(s, shapes, True, _train_req(s), True)
    assert prog.stats["forward_launches"] <= 2
    assert prog.stats["backward_launches"] <= 7
    # the gate math (3 sigmoid, 2 tanh, c and h updates) is one kernel
    gate_groups = [g for g in prog.groups if g.count("Activation") == 5]
    assert len(gate_groups) == 1
    assert prog.stats["unfused_forward_ops"] > 2 * prog.stats["forward_launches"]


def test_mlp_launches_and_real_run_count():
    s = mlp()
    prog = compile_symbol(s, {"data": (32, 784), "softmax_label": (32,)}, True,
                          _train_req(s, ("data", "softmax_label")), True)
    assert prog.stats["forward_launches"] <= 3
    assert prog.stats["backward_launches"] <= 8
    assert prog.stats["bytes_per_step"] < prog.stats["unfused_bytes_per_step"]

    small = mlp(hidden=(16, 16))
    exe = small.simple_bind(cpu(), grad_req=_train_req(small, ("data", "softmax_label")),
                            data=(4, 12))
    LaunchCounter.reset()
    exe.forward(is_train=True)
    fwd = LaunchCounter.total
    exe.backward()
    assert fwd <= 3 and LaunchCounter.total - fwd <= 8
