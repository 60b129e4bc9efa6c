"""Signum, FTML, Adamax, Nadam, Ftrl, LAMB, LARS, DCASGD, SGLD, LBSGD against mxnet 1.9.1.

The trajectories were made by mxnet (tests/fixtures/make_optimizer_fixtures.py:
``updater([0, 1, 2], grads, weights)`` for four steps, the aggregated call a Module
makes); every case is replayed on both targets of cpu() contexts (``cpu``: the
foreach lowering; ``interpret``: the Triton kernels) and compared step by step.
"""
import json
import math
import os
import subprocess

import numpy as np
import pytest
import torch

from compiler.errors import MXNetError
from runtime import lr_scheduler as lrs
from runtime import optimizer as opt
from runtime import random as rnd
from runtime.launcher import LaunchCounter
from runtime.ndarray import torch_dtype

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures")
with open(os.path.join(FIX, "optimizer_cases.json")) as _f:
    META = json.load(_f)
DATA = np.load(os.path.join(FIX, "optimizer_trajectories.npz"))
IDX2NAME = {int(k): v for k, v in META["idx2name"].items()}
CASES = META["cases"]
NEW = ["signum", "ftml", "adamax", "nadam", "ftrl", "lamb", "lars", "dcasgd", "sgld", "lbsgd"]


def _make(case, **extra):
    kw = dict(case["kwargs"], **extra)
    if case["scheduler"]:
        kw["lr_scheduler"] = lrs.FactorScheduler(base_lr=kw["learning_rate"],
                                                 **case["scheduler"])
    o = opt.create(case["name"], param_idx2name=dict(IDX2NAME), **kw)
    if case["lr_mult"]:
        o.set_lr_mult(case["lr_mult"])
    if case["wd_mult"]:
        o.set_wd_mult(case["wd_mult"])
    return o


def _weights():
    return [torch.tensor(DATA[f"w{j}"]) for j in range(len(IDX2NAME))]


def _grads(s):
    return [torch.tensor(DATA[f"g{s}_{j}"]) for j in range(len(IDX2NAME))]


def _flat(state):
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [a for s in state for a in _flat(s)]
    return [state]


def _ids():
    return [f"{i}-{c['name']}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("ci", range(len(CASES)), ids=_ids())
def test_trajectory_matches_mxnet(ci, cpu_target):
    case = CASES[ci]
    upd = opt.get_updater(_make(case))
    weights = _weights()
    for s in range(META["steps"]):
        upd(list(range(len(weights))), _grads(s), weights)
        for j, w in enumerate(weights):
            np.testing.assert_allclose(w.numpy(), DATA[f"c{ci}/w{s}_{j}"], rtol=1e-5,
                                       atol=1e-6, err_msg=f"step {s}, weight {j}")
    for j in range(len(weights)):
        got = _flat(upd.states[j])
        want = [DATA[k] for k in sorted(DATA.files) if k.startswith(f"c{ci}/state{j}_")]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.numpy(), b, rtol=1e-5, atol=1e-6)


def test_the_new_optimizers_are_registered_with_mxnets_names():
    for name in NEW + ["ccsgd"]:
        assert name in opt.Optimizer.opt_registry
    assert isinstance(opt.create("ccsgd", momentum=0.9), opt.SGD)
    assert opt.Ftrl().lr == 0.1 and opt.Adamax().lr == 0.002 and opt.LAMB().epsilon == 1e-6
    assert opt.Signum().momentum == 0.9 and opt.FTML().beta1 == 0.6 and opt.LARS().eta == 0.001
    assert opt.LBSGD().warmup_strategy == "linear" and opt.DCASGD().lamda == 0.04
    for name in NEW:      # multi_precision accepted; float32 weights keep no master copy
        o = opt.create(name, multi_precision=True)
        state = o.create_state_multi_precision(0, torch.zeros(3))
        assert all(torch_dtype(t) == torch.float32 for t in _flat(state))


@pytest.mark.parametrize("name,launches", [("signum", 1), ("ftml", 1), ("adamax", 1),
                                           ("nadam", 1), ("ftrl", 1), ("lamb", 2),
                                           ("lars", 1), ("dcasgd", 1), ("sgld", 1),
                                           ("lbsgd", 1)])
def test_one_step_is_one_launch_for_every_parameter(name, launches, cpu_target):
    """Fused multi-tensor updates: a step of three parameters is one launch (LAMB:
    phase 1, the norms, phase 2)."""
    upd = opt.get_updater(opt.create(name, param_idx2name=dict(IDX2NAME)))
    weights = _weights()
    upd([0, 1, 2], _grads(0), weights)
    before = LaunchCounter.total
    upd([0, 1, 2], _grads(1), weights)
    assert LaunchCounter.total - before == launches


def test_dcasgd_with_momentum_follows_its_formula(cpu_target):
    """mxnet 1.9.1 raises for DCASGD with momentum (``if mom:`` on an NDArray), so the
    momentum path is checked against the formula in float64."""
    kw = dict(learning_rate=0.1, momentum=0.9, lamda=0.04, wd=0.01, rescale_grad=0.5,
              clip_gradient=0.3)
    upd = opt.get_updater(opt.create("dcasgd", param_idx2name=dict(IDX2NAME), **kw))
    weights = _weights()
    ref = [w.double().numpy() for w in weights]
    mom = [np.zeros_like(w) for w in ref]
    prev = [w.copy() for w in ref]
    wds = [0.01, 0.0, 0.01]     # wd_mult 0 for names not ending in _weight / _gamma
    for s in range(META["steps"]):
        upd([0, 1, 2], _grads(s), weights)
        for j in range(3):
            g = np.clip(0.5 * DATA[f"g{s}_{j}"].astype(np.float64), -0.3, 0.3)
            w = ref[j]
            mom[j] = 0.9 * mom[j] - 0.1 * (g + wds[j] * w + 0.04 * g * g * (w - prev[j]))
            prev[j] = w.copy()
            ref[j] = w + mom[j]
            np.testing.assert_allclose(weights[j].numpy(), ref[j], rtol=1e-5, atol=1e-6)


def _sgld_step(seed):
    rnd.seed(seed)
    o = opt.create("sgld", learning_rate=0.01, wd=0.1, clip_gradient=1.0, rescale_grad=0.5,
                   param_idx2name={0: "fc_weight"})
    w = torch.tensor(DATA["sgld/w"])
    opt.get_updater(o)([0], [torch.tensor(DATA["sgld/g"])], [w])
    return w.numpy()


def test_sgld_deterministic_part_and_noise_match_mxnet(cpu_target):
    """The noise comes from our generator, not mxnet's: compare the deterministic part
    of the step exactly (mean of the residual) and the noise's statistics with those
    of mxnet's step, and check ``mx.random.seed`` reproduces the step."""
    w0, g = DATA["sgld/w"].astype(np.float64), DATA["sgld/g"].astype(np.float64)
    lr, wd = 0.01, 0.1
    det = w0 - lr / 2 * (np.clip(0.5 * g, -1.0, 1.0) + wd * w0)
    ours, theirs = _sgld_step(11) - det, DATA["sgld/after"] - det
    n = ours.size
    for res in (ours, theirs):       # N(0, sqrt(lr)): mean within 4 standard errors
        assert abs(res.mean()) < 4 * math.sqrt(lr / n)
        assert abs(res.std() / math.sqrt(lr) - 1) < 0.03
    assert abs(ours.std() - theirs.std()) < 0.03 * math.sqrt(lr)
    np.testing.assert_array_equal(_sgld_step(11), _sgld_step(11))
    assert not np.array_equal(_sgld_step(11), _sgld_step(12))


def test_sgld_same_noise_on_both_targets(monkeypatch):
    got = {}
    for target in ("cpu", "interpret"):
        monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
        got[target] = _sgld_step(5)
    np.testing.assert_allclose(got["cpu"], got["interpret"], rtol=1e-6, atol=1e-7)


def test_lamb_trust_ratio_is_one_for_a_zero_weight(cpu_target):
    """r1 = 0 (a zero weight): the ratio is 1, as mxnet's multi_lamb kernel."""
    o = opt.create("lamb", learning_rate=0.1)
    w = torch.zeros(5)
    g = torch.arange(5, dtype=torch.float32) - 2
    opt.get_updater(o)([0], [g], [w])
    # first step: mean_hat = g, var_hat = g*g, so the direction is sign(g) (eps aside)
    np.testing.assert_allclose(w.numpy(), -0.1 * np.sign(g.numpy()), rtol=1e-5)


def test_float16_multi_precision_is_refused_where_a_norm_is_needed():
    for name in ("lars", "lbsgd"):      # LAMB and SGLD: tests/runtime/test_mxnet_optimizer_cases.py
        o = opt.create(name, multi_precision=True)
        w = torch.zeros(3, dtype=torch.float16)
        with pytest.raises(MXNetError, match="multi_precision"):
            o.update_multi([0], [w], [torch.zeros(3, dtype=torch.float16)],
                           [o.create_state_multi_precision(0, w)])


@pytest.mark.parametrize("name", [n for n in NEW])
def test_states_round_trip_through_the_safe_format(name, cpu_target):
    o = opt.create(name, param_idx2name=dict(IDX2NAME))
    upd = opt.get_updater(o)
    weights = _weights()
    upd([0, 1, 2], _grads(0), weights)
    data = upd.get_states(dump_optimizer=True)
    upd2 = opt.get_updater(opt.create("sgd"))
    upd2.set_states(data)
    assert type(upd2.optimizer) is type(o)
    assert upd2.optimizer._index_update_count == o._index_update_count
    for j in range(3):
        a, b = _flat(upd.states[j]), _flat(upd2.states[j])
        assert len(a) == len(b)
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y)


@pytest.mark.parametrize("name", ["signum", "ftml", "adamax", "nadam", "ftrl", "lamb", "lars"])
def test_mxnets_states_files_load_and_training_continues(name, cpu_target):
    """``.states`` written by mxnet 1.9.1 (its pickle) load through the restricted
    unpickler; the next steps from them equal mxnet's trajectory."""
    ci = int(DATA[f"states/{name}"][0])
    case = CASES[ci]
    with open(os.path.join(FIX, f"mxopt_{name}.states"), "rb") as f:
        raw = f.read()
    upd = opt.get_updater(_make(case))
    upd.set_states(raw, allow_pickle=True)
    for j in range(3):
        got = _flat(upd.states[j])
        want = [DATA[k] for k in sorted(DATA.files) if k.startswith(f"c{ci}/state{j}_")]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b)


# the Makefile's mxnet 1.9.1 venv (`make mxnet-venv`); the test skips without it
MXNET_PYTHON = os.environ.get("MXNET_PYTHON", os.path.join(
    os.path.dirname(__file__), "..", "..", ".mxnet-venv", "bin", "python"))
_FIRST = {c["name"]: i for i, c in reversed(list(enumerate(CASES)))}


def _written_in_mxnet_format(monkeypatch, name):
    """Two steps of ``name``'s first case here, its states written as mxnet's pickle."""
    monkeypatch.setenv("SYMTRITON_STATES_FORMAT", "mxnet")
    upd = opt.get_updater(_make(CASES[_FIRST[name]]))
    weights = _weights()
    for s in range(2):
        upd([0, 1, 2], _grads(s), weights)
    return upd, weights, upd.get_states()


@pytest.mark.parametrize("name", [n for n in NEW if n != "sgld"])
def test_mxnet_format_states_have_mxnets_structure(name, monkeypatch):
    import pickletools
    upd, _, data = _written_in_mxnet_format(monkeypatch, name)
    globals_ = {arg for op, arg, _ in pickletools.genops(data) if op.name == "GLOBAL"}
    assert globals_ <= {"mxnet.ndarray.ndarray NDArray", "__builtin__ bytearray",
                        "_codecs encode"}
    back = opt.get_updater(_make(CASES[_FIRST[name]]))
    back.set_states(data, allow_pickle=True)
    for j in range(3):
        a, b = upd.states[j], back.states[j]
        assert type(a) is type(b) or (a is None and b is None)
        for x, y in zip(_flat(a), _flat(b)):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


@pytest.mark.skipif(not os.path.exists(MXNET_PYTHON), reason="no mxnet 1.9.1 interpreter")
def test_mxnet_continues_from_our_states_as_we_do(tmp_path, monkeypatch):
    """States of every new optimizer written here load in mxnet 1.9.1; a fresh optimizer
    given them takes the same next step in mxnet as here."""
    names = [n for n in NEW if n != "sgld"]
    expected = {}
    for name in names:
        _, weights, data = _written_in_mxnet_format(monkeypatch, name)
        (tmp_path / f"{name}.states").write_bytes(data)
        fresh = opt.get_updater(_make(CASES[_FIRST[name]]))
        fresh.set_states(data, allow_pickle=True)
        for j, w in enumerate(weights):
            expected[f"{name}/w{j}"] = w.numpy().copy()
        fresh([0, 1, 2], _grads(2), weights)
        for j, w in enumerate(weights):
            expected[f"{name}/after{j}"] = w.numpy()
    np.savez(str(tmp_path / "expected.npz"), **expected)
    script = f"""
import json, sys
sys.path.insert(0, {FIX!r})
import mxnet as mx, numpy as np
import make_optimizer_fixtures as mk
exp = np.load({str(tmp_path / 'expected.npz')!r})
data = np.load({os.path.join(FIX, 'optimizer_trajectories.npz')!r})
first = {json.dumps(_FIRST)}
for name in {names!r}:
    upd = mx.optimizer.get_updater(mk.make(*mk.CASES[first[name]]))
    upd.set_states(open({str(tmp_path)!r} + '/' + name + '.states', 'rb').read())
    ws = [mx.nd.array(exp[name + '/w%d' % j]) for j in range(3)]
    upd([0, 1, 2], [mx.nd.array(data['g2_%d' % j]) for j in range(3)], ws)
    for j in range(3):
        np.testing.assert_allclose(ws[j].asnumpy(), exp[name + '/after%d' % j],
                                   rtol=1e-5, atol=1e-6, err_msg=name)
print('OK', len({names!r}))
"""
    proc = subprocess.run([MXNET_PYTHON, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and f"OK {len(names)}" in proc.stdout, proc.stderr[-3000:]


@pytest.mark.parametrize("name", sorted(META["module_runs"]))
def test_module_fit_matches_mxnet(name, cpu_target):
    """An MLP Module trained by ``fit`` (2 epochs, kvstore=None) with each optimizer
    ends with mxnet's parameters: the Module's aggregated updater calls, index order
    (Nadam's schedule, LBSGD's accumulation) and rescale_grad = 1/batch included."""
    import module_api as mx
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=6, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="act1")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc2")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"), context=mx.cpu())
    init = {k.split("/")[-1]: mx.nd.array(DATA[k]) for k in DATA.files
            if k.startswith("module/init/")}
    it = mx.io.NDArrayIter(DATA["module/x"], DATA["module/y"], batch_size=8)
    mod.fit(it, num_epoch=2, optimizer=name, optimizer_params=dict(META["module_runs"][name]),
            arg_params=init, kvstore=None)
    for k, v in mod.get_params()[0].items():
        np.testing.assert_allclose(v.asnumpy(), DATA[f"module/{name}/{k}"], rtol=1e-4,
                                   atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name", ["nadam", "lamb", "lars", "lbsgd"])
def test_mxnets_states_with_the_optimizer_continue_as_mxnet(name, cpu_target):
    """``get_states(dump_optimizer=True)`` from mxnet: the pickled optimizer (update
    counts, Nadam's schedule, LARS's previous lr, LBSGD's gradient sums) comes back as
    ours and the next step equals mxnet's."""
    with open(os.path.join(FIX, f"mxopt_{name}_dump.states"), "rb") as f:
        raw = f.read()
    upd = opt.get_updater(opt.create("sgd"))
    upd.set_states(raw, allow_pickle=True)
    assert type(upd.optimizer) is opt.Optimizer.opt_registry[name]
    weights = [torch.tensor(DATA[f"dump/{name}/before{j}"]) for j in range(3)]
    upd([0, 1, 2], _grads(0), weights)
    for j, w in enumerate(weights):
        np.testing.assert_allclose(w.numpy(), DATA[f"dump/{name}/after{j}"], rtol=1e-5,
                                   atol=1e-6)


def test_lars_corrects_momentum_per_updater_chunk_as_mxnet(cpu_target):
    """Six parameters, lr halving every step: mxnet's Updater gives LARS chunks of
    four, and only the first chunk's momentum gets the lr-ratio correction."""
    names = {k: f"p{k}_weight" for k in range(6)}
    sched = lrs.FactorScheduler(step=1, factor=0.5, base_lr=0.1)
    o = opt.create("lars", learning_rate=0.1, momentum=0.9, eta=0.1, wd=0.01,
                   lr_scheduler=sched, param_idx2name=names)
    upd = opt.get_updater(o)
    weights = [torch.tensor(DATA[f"larsmany/w{j}"]) for j in range(6)]
    for s in range(3):
        before = LaunchCounter.total
        upd(list(names), [torch.tensor(DATA[f"larsmany/g{s}_{j}"]) for j in range(6)],
            weights)
        assert LaunchCounter.total - before <= 2
        for j, w in enumerate(weights):
            np.testing.assert_allclose(w.numpy(), DATA[f"larsmany/w{s}_{j}"], rtol=1e-5,
                                       atol=1e-6, err_msg=f"step {s}, weight {j}")
