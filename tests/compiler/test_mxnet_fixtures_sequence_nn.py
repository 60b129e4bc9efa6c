"""Sequence and nn / loss operator cases recorded with mxnet 1.9.1
(``tests/fixtures/make_sequence_nn_fixtures.py``, index ``sequence_nn_cases.json``),
replayed through the full compile path on both cpu targets exactly as
tests/compiler/test_mxnet_fixtures.py replays its cases: a fresh executor per mode,
``forward(is_train=False)`` for ``infer``; for ``train`` a forward, the recorded
backward, then every gradient and auxiliary state compared with mxnet's.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from tests.compiler.test_mxnet_fixtures import FIXTURES, _bind, _close
from tests.conftest import assert_same_launches_on_cpu_targets

with open(os.path.join(FIXTURES, "sequence_nn_cases.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


def _replay_infer(name, case, s, arrays):
    exe = _bind(case, s, arrays)
    outs = exe.forward(is_train=False)
    for i in range(len(case["outputs"])):
        _close(outs[i], arrays[f"out{i}_infer"], f"{name}: output {i} (inference)")
    for aux in case["aux_states"]:
        _close(exe.aux_dict[aux], arrays[f"aux_{aux}_after_infer"],
               f"{name}: {aux} after an inference forward")


def _replay_train(name, case, s, arrays):
    exe = _bind(case, s, arrays)
    n_out = len(case["outputs"])
    outs = exe.forward(is_train=True)
    for i in range(n_out):
        _close(outs[i], arrays[f"out{i}_train"], f"{name}: output {i} (training)")
    ograds = ([torch.from_numpy(arrays[f"ograd{i}"]) for i in range(n_out)]
              if "ograd0" in arrays else None)
    for _ in range(case["n_backward"]):
        if case["n_backward"] > 1:
            exe.forward(is_train=True)
        exe.backward(ograds)
    req = case["grad_req"]
    for arg in case["arguments"]:
        if (req if isinstance(req, str) else req.get(arg, "null")) == "null":
            assert exe.grad_dict.get(arg) is None, f"{name}: {arg} has grad_req null"
            continue
        _close(exe.grad_dict[arg], arrays["grad_" + arg], f"{name}: gradient of {arg}")
    for aux in case["aux_states"]:
        _close(exe.aux_dict[aux], arrays[f"aux_{aux}_after"],
               f"{name}: {aux} after a training step")
    return exe


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_case(name, cpu_target):
    case = CASES[name]
    s = sym.load(os.path.join(FIXTURES, case["symbol"]))
    assert s.list_arguments() == case["arguments"]
    assert s.list_auxiliary_states() == case["aux_states"]
    assert s.list_outputs() == case["outputs"]
    arrays = dict(np.load(os.path.join(FIXTURES, case["arrays"])))
    if "infer" in case["modes"]:
        _replay_infer(name, case, s, arrays)
    if "train" in case["modes"]:
        exe = _replay_train(name, case, s, arrays)
        if cpu_target == "interpret":
            assert_same_launches_on_cpu_targets(exe)


def test_every_case_has_arrays():
    assert len(CASES) >= 20
    for case in CASES.values():
        assert case["name"].startswith("sequence_nn_")
        keys = set(np.load(os.path.join(FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
