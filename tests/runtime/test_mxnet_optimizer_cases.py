"""The cases of mxnet 1.9.1's optimizer unit tests that need
sparse gradients or float16 master copies, against mxnet's own numbers
(tests/fixtures/make_test_optimizer_fixtures.py).

mxnet's tests compare each optimizer with a Python reference over grids of options;
here each option set is a case that mxnet ran: two ``update_multi_precision`` calls on a
(3, 4, 5) weight, dense or row_sparse (every row stored), with dense or row_sparse
gradients, then the weight and every state are compared. The cases: ``test_sparse_sgd``
and ``test_std_sparse_sgd`` (lazy and standard SGD), ``test_adam`` (dense, lazy and
standard with row_sparse gradients; float64; float16 with ``multi_precision``),
``test_rms`` (row_sparse gradients: mxnet's dense fallback), ``test_ftrl`` and
``test_adagrad`` (their sparse updates), ``test_lamb`` (float16 with
``multi_precision``), ``test_multilamb`` (aggregated, float16) and ``test_sgld``
(float16 with ``multi_precision``; the noise is ours, so its statistics are compared);
and ``test_contrib_optimizer.py``'s ``test_group_adagrad`` (``contrib.GroupAdaGrad``).
"""
import json
import math
import os

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from runtime import optimizer as opt
from runtime import random as rnd
from runtime.updater import _leaves

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                           "test_optimizer_cases.npz"))
CASES = json.loads(str(FIX["cases"]))
# float64: mxnet's operator parameters (lr, betas, epsilon) are C++ floats; the lazy
# rules round them so too, the fused dense kernels keep them in float64 (~3e-6 apart)
TOL = {"float16": (1e-3, 1e-3), "float32": (1e-4, 2e-5), "float64": (1e-5, 1e-7)}


def _ids():
    out = []
    for n, c in enumerate(CASES):
        kw = ",".join(f"{k}={v}" for k, v in sorted(c["kwargs"].items()))
        out.append(f"{n}-{c['name']}-{c['dtype']}-{c['w_stype'][:3]}-{c['g_stype'][:3]}-{kw}")
    return out


def _array(key, dtype, stype):
    a = mx.nd.array(FIX[key], dtype=dtype)
    return a.tostype(stype) if stype != "default" else a


def _state_arrays(state):
    out = []
    for _, v in _leaves(state):
        if torch.is_tensor(v):
            out.append(v.detach().cpu().numpy() if not hasattr(v, "asnumpy") else v.asnumpy())
    return out


@pytest.mark.parametrize("n", range(len(CASES)), ids=_ids())
def test_case_matches_mxnet(n, cpu_target):
    case = CASES[n]
    dt, tag = case["dtype"], case.get("tag", "")
    o = opt.create(case["name"], **case["kwargs"])
    w = _array(f"w{tag}/{dt}", dt, case["w_stype"])
    upd = opt.get_updater(o)
    for i in range(2):
        upd(0, _array(f"g{i}{tag}/{case['g_stype']}/{dt}", dt, case["g_stype"]), w)
    rtol, atol = TOL[dt]
    np.testing.assert_allclose(w.asnumpy().astype(np.float64),
                               FIX[f"c{n}/w"].astype(np.float64), rtol=rtol, atol=atol)
    got = _state_arrays(upd.states[0])
    want = [FIX[f"c{n}/s{j}"] for j in range(len(got)) if f"c{n}/s{j}" in FIX.files]
    assert len(got) == len(want) == sum(1 for k in FIX.files if k.startswith(f"c{n}/s"))
    for j, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype, f"state {j}: {a.dtype} vs mxnet's {b.dtype}"
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                                   rtol=max(rtol, 1e-4), atol=max(atol, 2e-5),
                                   err_msg=f"state {j}")


def test_multilamb_float16_aggregated_matches_mxnet(cpu_target):
    o = opt.create("lamb", multi_precision=True, wd=0.03, clip_gradient=0.5,
                   learning_rate=0.01, upper_bound=10)
    upd = opt.get_updater(o)
    ws = [mx.nd.array(FIX[f"agg/w0_{j}"], dtype="float16") for j in range(3)]
    for step in (1, 2):
        upd([0, 1, 2], [mx.nd.array(FIX[f"agg/g_{j}"], dtype="float16") for j in range(3)],
            ws)
        for j, w in enumerate(ws):
            assert w.dtype == np.float16
            np.testing.assert_allclose(upd.states[j][0].asnumpy(),
                                       FIX[f"agg/master{step}_{j}"], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(w.asnumpy().astype(np.float32),
                                       FIX[f"agg/w{step}_{j}"].astype(np.float32),
                                       rtol=1e-3, atol=1e-3)
            np.testing.assert_array_equal(w.asnumpy(),
                                          upd.states[j][0].asnumpy().astype(np.float16))


def _sgld_mp(seed):
    o = opt.create("sgld", multi_precision=True, learning_rate=0.01, wd=0.05,
                   clip_gradient=0.4)
    w = mx.nd.array(FIX["sgld/w"], dtype="float16")
    state = o.create_state_multi_precision(0, w)
    rnd.seed(seed)
    o.update_multi_precision(0, w, mx.nd.array(FIX["sgld/g"], dtype="float16"), state)
    return w, state


def test_sgld_float16_multi_precision_updates_the_master_as_mxnet(cpu_target):
    """The deterministic part of the step exactly, the noise N(0, sqrt(lr)) by its
    statistics (mxnet's generator is not ours), both on the float32 master copy."""
    w0 = FIX["sgld/w"].astype(np.float64)
    g = FIX["sgld/g"].astype(np.float32).astype(np.float64)
    lr, wd = 0.01, 0.05
    det = w0 - lr / 2 * (np.clip(g, -0.4, 0.4) + wd * w0)
    w, state = _sgld_mp(3)
    master = state[0].asnumpy()
    assert master.dtype == np.float32 and state[1] is None
    np.testing.assert_array_equal(w.asnumpy(), master.astype(np.float16))
    for res in (master - det, FIX["sgld/master"] - det):
        assert abs(res.mean()) < 4 * math.sqrt(lr / res.size)
        assert abs(res.std() / math.sqrt(lr) - 1) < 0.05
    np.testing.assert_array_equal(FIX["sgld/after"], FIX["sgld/master"].astype(np.float16))
    np.testing.assert_array_equal(_sgld_mp(3)[0].asnumpy(), w.asnumpy())


def test_group_adagrad_is_mxnets_contrib_optimizer():
    assert mx.optimizer.contrib.GroupAdaGrad is opt.contrib.GroupAdaGrad
    assert isinstance(opt.create("groupadagrad"), opt.contrib.GroupAdaGrad)
    assert opt.contrib.GroupAdaGrad().float_stable_eps == 1e-5
    o = opt.contrib.GroupAdaGrad(param_idx2name={0: "fc_weight"})
    with pytest.raises(MXNetError, match=r"'fc_weight' has shape \(3, 4, 5\).*2-D"):
        o.create_state(0, mx.nd.zeros((3, 4, 5)))
    for grad in (mx.nd.ones((3, 4)), mx.nd.ones((3, 4)).tostype("row_sparse")):
        upd = opt.get_updater(opt.contrib.GroupAdaGrad(wd=0.01,
                                                       param_idx2name={0: "fc_weight"}))
        w = mx.nd.ones((3, 4))
        with pytest.raises(MXNetError, match=r"'fc_weight': GroupAdaGrad .*wd=0.01"):
            upd(0, grad, w)
        np.testing.assert_array_equal(w.asnumpy(), np.ones((3, 4)))
