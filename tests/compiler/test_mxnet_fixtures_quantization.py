"""mxnet 1.9.1's numbers for the quantization operators (``compiler/ops/quantization*.py``),
replayed through the full compile path on both cpu targets.

``tests/fixtures/make_quantization_fixtures.py`` recorded the cases (``case_quant_*``,
indexed by ``cases_quantization_index.json``) in ``make_fixtures.py``'s format; each is
replayed by ``test_mxnet_fixtures.test_mxnet_case``.

Which of mxnet's kernels made each case, and what is compared:

* reference kernels only (replayed): ``quantized_flatten``, ``quantized_elemwise_mul``,
  ``quantized_embedding``, ``calibrate_entropy``;
* MKLDNN only, which the project follows for these (replayed): ``quantized_act``,
  ``quantized_pooling`` (an average rounded to nearest, divided by the whole kernel's
  area), ``quantized_concat``, ``quantized_elemwise_add``;
* MKLDNN, where the project follows the reference kernels instead: mxnet's pip build sends
  ``quantize``, ``quantize_v2``, ``dequantize`` and ``requantize`` to MKLDNN on every CPU
  (their storage-type rule picks ``FComputeEx`` whatever ``MXNET_MKLDNN_ENABLED`` says),
  and MKLDNN quantizes with other constants: int8 is ``127.5 / R`` rounded to nearest (so
  -128 occurs) against ``127 / R`` rounded half away from zero, uint8 is ``x * 255.5 /
  max(|min|, |max|)`` with no zero point against ``(x - min) * 255 / (max - min)``,
  dequantize divides by 127.5 / 255.5. ``quantize`` to int8 and ``requantize`` agree on
  these data and are replayed; the cases in ``MKLDNN_DIFFERS`` are not compared with their
  recorded outputs (``test_mkldnn_dequantize_differs_by_its_range_constant`` checks what
  one shows), and the reference arithmetic is checked against values worked out by hand
  in ``test_ops_contrib_more.py``. ``quantized_fully_connected`` and ``quantized_conv``
  run only on MKLDNN in this build (the reference FullyConnected needs MKL BLAS; conv's is
  cuDNN's): their int32 products and ranges agree and are replayed without a bias; MKLDNN
  rescales an int8 bias with other constants (off by a few units), so the bias cases are
  not compared.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from compiler import symbol as sym
from runtime.context import cpu
from tests.compiler import test_mxnet_fixtures as replay

with open(os.path.join(replay.FIXTURES, "cases_quantization_index.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}

MKLDNN_DIFFERS = {"quant_quantize_uint8", "quant_v2_minmax", "quant_v2_calib_uint8",
                  "quant_v2_calib_int8", "quant_v2_uint8_pass", "quant_dequantize_int8",
                  "quant_dequantize_uint8", "quant_round_trip", "quant_fc_bias",
                  "quant_conv_bias"}


@pytest.mark.parametrize("name", sorted(set(CASES) - MKLDNN_DIFFERS))
def test_mxnet_quantization_case(name, cpu_target, monkeypatch):
    monkeypatch.setitem(replay.CASES, name, CASES[name])
    replay.test_mxnet_case(name, cpu_target)


def test_every_quantization_case_has_arrays():
    assert MKLDNN_DIFFERS <= set(CASES)
    for case in CASES.values():
        keys = set(np.load(os.path.join(replay.FIXTURES, case["arrays"])).files)
        assert keys == set(case["array_keys"]), case["name"]


def test_mkldnn_dequantize_differs_by_its_range_constant():
    """MKLDNN's int8 dequantize is ``q * R / 127.5``; the reference's ``q * R / 127``."""
    case = CASES["quant_dequantize_int8"]
    arrays = dict(np.load(os.path.join(replay.FIXTURES, case["arrays"])))
    d, a, b = (sym.Variable(n) for n in ("d", "a", "b"))
    exe = sym.contrib.dequantize(d, a, b).simple_bind(
        cpu(), grad_req="null", type_dict={"d": "int8"}, d=arrays["in_d"].shape, a=(1,), b=(1,))
    for n in ("d", "a", "b"):
        exe.arg_dict[n][:] = torch.from_numpy(arrays["in_" + n])
    ours = exe.forward()[0].numpy()
    np.testing.assert_allclose(ours * (127.0 / 127.5), arrays["out0_infer"], rtol=1e-6)
