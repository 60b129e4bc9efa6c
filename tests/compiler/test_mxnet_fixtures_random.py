"""mxnet 1.9.1's numbers for the special functions and densities
(``compiler/ops/special.py``, ``pdf.py``), replayed through the full compile path on both
cpu targets.

``tests/fixtures/make_random_fixtures.py`` recorded the cases (``case_random_*``, indexed
by ``cases_random_index.json``) in ``make_fixtures.py``'s format; each is replayed by
``test_mxnet_fixtures.test_mxnet_case``, the replay of every other mxnet case.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "cases_random_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_random_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_random_case_has_arrays():
    assert len(CASES) >= 3
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
