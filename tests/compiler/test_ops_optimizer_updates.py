"""mxnet's optimizer update operators (``compiler/ops/optimizer_ops.py``) against
mxnet 1.9.1's numbers, on both cpu targets.

``tests/fixtures/make_optimizer_op_fixtures.py`` bound each operator in mxnet and ran
two forwards, the output fed back as the weight in between; here the same symbol,
built through ``mx.sym``, does the same, and the outputs and the mutated inputs (the
auxiliary states, written in place on every forward) must match after each call.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import module_api as mx
from compiler.ops import optimizer_rules
from compiler.ops.optimizer_ops import UPDATES
from tests.conftest import assert_same_launches_on_cpu_targets

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
with open(os.path.join(FIXTURES, "optimizer_ops.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}
ARRAYS = np.load(os.path.join(FIXTURES, "optimizer_ops.npz"))


def _symbol(case):
    inputs = [mx.sym.var(n) for n in case["inputs"]]
    return getattr(mx.sym, case["op"])(*inputs, name="u", **case["attrs"])


def _close(got, want, what):
    got = np.asarray(got)
    tol = 2e-3 if want.dtype == np.float16 else 2e-5
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, mxnet {want.dtype}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol, equal_nan=False, err_msg=what)


def _bind(case):
    s = _symbol(case)
    assert s.list_arguments() == case["arguments"]
    assert s.list_auxiliary_states() == case["aux"]
    k = case["num_outputs"]
    assert s.list_outputs() == (["u_output"] if k == 1 else [f"u_output{j}" for j in range(k)])
    vals = {n: ARRAYS[f"{case['name']}:in:{n}"] for n in case["inputs"]}
    arr = {n: mx.nd.array(v, dtype=v.dtype) for n, v in vals.items()}
    return s.bind(mx.cpu(), {n: arr[n] for n in case["arguments"]},
                  aux_states={n: arr[n] for n in case["aux"]}, grad_req="null")


@pytest.mark.parametrize("name", sorted(CASES))
def test_update_matches_mxnet(name, cpu_target):
    case = CASES[name]
    exe = _bind(case)
    for step, is_train in ((1, False), (2, True)):
        outs = [o.asnumpy() for o in exe.forward(is_train=is_train)]
        for j, out in enumerate(outs):
            if name.startswith("adamw_skip"):
                # mxnet skips the step (inf or 0 rescale_grad) and leaves its output
                # unwritten; here the output is the weight, unchanged
                _close(out, exe.arg_dict["weight"].asnumpy(), f"{name} skipped step")
                continue
            _close(out, ARRAYS[f"{name}:out{step}_{j}"], f"{name} output {j} after call {step}")
        for n in case["aux"]:
            _close(exe.aux_dict[n].asnumpy(), ARRAYS[f"{name}:aux{step}:{n}"],
                   f"{name} {n} after call {step}")
        for w, out in zip(case["feedback"], outs):
            exe.arg_dict[w][:] = out
    assert_same_launches_on_cpu_targets(exe)


def test_every_operator_has_a_case():
    public = {n for n in UPDATES if not n.startswith("_")} | {
        f"{p}multi_{m}sgd_{s}update" for p in ("", "preloaded_") for m in ("", "mp_")
        for s in ("", "mom_")} | {"multi_sum_sq", "all_finite", "multi_all_finite", "multi_lars",
                                  "_adamw_update", "_mp_adamw_update"}
    assert {c["op"] for c in CASES.values()} == public


def test_states_are_auxiliary_and_default_names():
    s = mx.sym.adam_update(mx.sym.var("w"), mx.sym.var("g"), lr=0.1, name="adam")
    assert s.list_arguments() == ["w", "g"]
    assert s.list_auxiliary_states() == ["adam_mean", "adam_var"]


def test_no_gradient():
    s = mx.sym.sgd_update(mx.sym.var("w"), mx.sym.var("g"), lr=0.1)
    with pytest.raises(mx.MXNetError, match="no gradient"):
        s.simple_bind(mx.cpu(), w=(2, 3), g=(2, 3)).forward(is_train=True)


def test_missing_lr_names_the_attribute():
    with pytest.raises(mx.MXNetError, match="'lr'"):
        mx.sym.sgd_update(mx.sym.var("w"), mx.sym.var("g"))


def test_shape_mismatch_names_the_input():
    s = mx.sym.sgd_mom_update(mx.sym.var("w"), mx.sym.var("g"), mx.sym.var("m"), lr=0.1,
                              name="u")
    with pytest.raises(mx.MXNetError, match="sgd_mom_update"):
        s.infer_shape(w=(2, 3), g=(3, 2))


def test_the_runtime_shares_the_rules():
    from runtime import optimizer_kernels
    assert optimizer_kernels._RULES is optimizer_rules.RULES
    assert {u.rule for u in UPDATES.values()} <= set(optimizer_rules.RULES)


@pytest.mark.parametrize("op", ["adam_update", "rmspropalex_update", "mp_sgd_mom_update"])
def test_one_fused_launch_writes_output_and_states(op, cpu_target):
    spec = UPDATES[op]
    s = getattr(mx.sym, op)(name="u", **{n: mx.sym.var(n) for n in spec.inputs}, lr=0.1)
    exe = s.simple_bind(mx.cpu(), grad_req="null",
                        **{n: (4, 3) for n in s.list_arguments()})
    exe.forward(is_train=False)
    assert len(exe.programs[1].launches) == 1


@pytest.mark.parametrize("name", ["mp_lamb1", "rmspropalex", "mp_sgd_mom"])
def test_json_lists_inputs_in_mxnet_order(name):
    case = CASES[name]
    nodes = [{"op": "null", "name": n, "inputs": []} for n in case["inputs"]]
    nodes.append({"op": case["op"], "name": "u",
                  "attrs": {k: str(v) for k, v in case["attrs"].items()},
                  "inputs": [[i, 0, 0] for i in range(len(case["inputs"]))]})
    doc = {"nodes": nodes, "arg_nodes": list(range(len(case["inputs"]))),
           "node_row_ptr": list(range(len(nodes) + 1)),
           "heads": [[len(case["inputs"]), 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}
    s = mx.sym.load_json(json.dumps(doc))
    assert s.list_arguments() == case["arguments"]
    assert s.list_auxiliary_states() == case["aux"]
    out = json.loads(s.tojson())
    op_node = next(n for n in out["nodes"] if n["op"] == case["op"])
    assert [out["nodes"][i]["name"] for i, _, _ in op_node["inputs"]] == case["inputs"]
    assert _symbol(case).list_auxiliary_states() == case["aux"]


def test_contrib_adamw_takes_a_number_as_rescale_grad(cpu_target):
    w, g = np.full((2, 3), 0.5, np.float32), np.full((2, 3), 0.25, np.float32)
    s = mx.sym.contrib.adamw_update(mx.sym.var("w"), mx.sym.var("g"), mx.sym.var("m"),
                                    mx.sym.var("v"), 2.0, lr=0.1, eta=1.0, name="u")
    assert s.list_arguments() == ["w", "g"] and s.list_auxiliary_states() == ["m", "v"]
    exe = s.bind(mx.cpu(), {"w": mx.nd.array(w), "g": mx.nd.array(g)}, grad_req="null",
                 aux_states={"m": mx.nd.zeros((2, 3)), "v": mx.nd.zeros((2, 3))})
    out = exe.forward()[0].asnumpy()
    m, v = 0.1 * 0.5, 0.001 * 0.25      # g * rescale = 0.5
    np.testing.assert_allclose(out, 0.5 - 0.1 * m / (np.sqrt(v) + 1e-8), rtol=1e-5)
    np.testing.assert_allclose(exe.aux_dict["m"].asnumpy(), m, rtol=1e-6)


def test_multi_update_checks_its_lists():
    v = mx.sym.var
    s = mx.sym.multi_sgd_update(v("w0"), v("g0"), v("w1"), v("g1"), lrs=(0.1,), wds=(0.0, 0.0),
                                num_weights=2, name="u")
    with pytest.raises(mx.MXNetError, match="1 lrs for num_weights=2"):
        s.infer_shape(w0=(2,), g0=(2,), w1=(3,), g1=(3,))
