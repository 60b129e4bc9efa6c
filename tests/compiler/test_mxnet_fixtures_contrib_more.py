"""mxnet 1.9.1's numbers for SyncBatchNorm and BatchNormWithReLU
(``compiler/ops/contrib_more.py``), replayed through the full compile path on both cpu targets.

``tests/fixtures/make_contrib_more_fixtures.py`` recorded the cases (``case_contrib_more_*``,
indexed by ``cases_contrib_more_index.json``) in ``make_fixtures.py``'s format; each is replayed by
``test_mxnet_fixtures.test_mxnet_case``, the replay of every other mxnet case.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "cases_contrib_more_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_contrib_more_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_contrib_more_case_has_arrays():
    assert len(CASES) >= 5
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
