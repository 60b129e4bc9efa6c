"""mxnet 1.9.1's numbers for ``gather_nd``, ``scatter_nd``, ``diag``,
``argmax_channel``, ``shape_array`` and ``size_array``, replayed on both cpu targets
exactly as test_mxnet_fixtures.py replays its cases (its ``test_mxnet_case``, run over
this family's own index, ``indexing_more_cases_index.json``, written by
``tests/fixtures/make_indexing_more_fixtures.py``).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "indexing_more_cases_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}

# recorded without a backward: mxnet 1.9.1 registers no gradient for argmax_channel,
# its gather_nd backward writes negative indices out of bounds, and shape_array /
# size_array and histogram give int64 outputs; ravel_multi_index / unravel_index take only indices
FORWARD_ONLY = {"indexing_more_argmax_channel", "indexing_more_gather_nd_negative",
                "indexing_more_ravel_multi_index", "indexing_more_unravel_index",
                "indexing_more_shape_size_array", "indexing_more_histogram_bin_cnt",
                "indexing_more_histogram_bins"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_indexing_more_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_indexing_more_case_has_arrays_and_a_backward():
    assert len(CASES) >= 10
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]
        if case["name"] not in FORWARD_ONLY:
            assert "train" in case["modes"] and any(k.startswith("grad_") for k in keys)
