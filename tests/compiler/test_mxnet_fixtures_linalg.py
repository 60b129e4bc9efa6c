"""mxnet 1.9.1's numbers for the non-factorization linalg operators
(``compiler/ops/linalg.py``), replayed through the full compile path on both cpu targets.

``tests/fixtures/make_linalg_fixtures.py`` recorded the cases (``case_linalg_*``, indexed
by ``cases_linalg_index.json``) in ``make_fixtures.py``'s format; each is replayed by
``test_mxnet_fixtures.test_mxnet_case``, the replay of every other mxnet case.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "cases_linalg_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_linalg_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_linalg_case_has_arrays():
    assert len(CASES) >= 5
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
