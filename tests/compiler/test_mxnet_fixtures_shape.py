"""mxnet 1.9.1's numbers for the shape operators (``slice``, ``squeeze``, ``stack``,
``tile``, ``repeat``, ``reshape_like``, ``slice_like``, ``broadcast_like``,
``depth_to_space``, ``space_to_depth``, ``split_v2``), replayed on both cpu targets
exactly as test_mxnet_fixtures.py replays its cases (its ``test_mxnet_case``, run
over this family's own index, ``shape_cases_index.json``, written by
``tests/fixtures/make_shape_fixtures.py``).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "shape_cases_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_shape_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_shape_case_has_arrays_and_a_backward():
    assert len(CASES) >= 15
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
        assert "train" in case["modes"] and any(k.startswith("grad_") for k in keys)
