"""Scalar attributes at the edges of float32: ``"inf"``, ``"nan"``, ``"1e39"`` (issue 27).

mxnet converts a scalar to the operator's element type (``DType(scalar)``), so 1e39 is
float32's infinity and nothing is refused; ``pow`` follows C (``pow(1, nan) == 1``,
``pow(s, 0) == 1``, a negative base only to integer powers). The numbers are mxnet
1.9.1's (``tests/fixtures/make_scalar_extremes_fixtures.py``), forward and gradient,
replayed on both cpu targets.
"""
import json
import os

import numpy as np
import pytest
import torch

import runtime  # noqa: F401  (binds symbols)
from compiler import symbol as sym
from compiler.ir.dtypes import saturate_to_dtype

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "fixtures", "scalar_extremes.json")
with open(FIXTURE) as _f:
    RECORD = json.load(_f)


def _run(op, scalar):
    x = sym.Variable("x")
    ex = getattr(sym, op)(x, scalar=scalar).simple_bind(runtime.context.cpu(), x=(len(RECORD["x"]),))
    ex.arg_dict["x"][:] = torch.tensor(RECORD["x"])
    ex.forward(is_train=True)
    ex.backward(torch.ones(len(RECORD["x"])))
    return ex.outputs[0].numpy().astype(np.float64), ex.grad_dict["x"].numpy()


@pytest.mark.parametrize("op", sorted(RECORD["cases"]))
def test_scalar_operator_at_extreme_scalars_matches_mxnet(op, cpu_target):
    for scalar, want in RECORD["cases"][op].items():
        out, grad = _run(op, scalar)
        for what, got, ref in (("forward", out, want["forward"]), ("gradient", grad,
                                                                  want["grad"])):
            # 1 ulp apart where mxnet's pow and ours round differently (powf vs exp(log))
            np.testing.assert_allclose(got, np.array(ref), rtol=2e-6, atol=0,
                                       err_msg=f"{op}(x, scalar={scalar}) {what} "
                                               f"on {cpu_target}")


def test_saturation_follows_the_dtype():
    assert saturate_to_dtype(1e39, "float32") == float("inf")
    assert saturate_to_dtype(-1e39, "float32") == float("-inf")
    assert saturate_to_dtype(1e39, "float64") == 1e39
    assert saturate_to_dtype(7e4, "float16") == float("inf")
    assert saturate_to_dtype(6e4, "float16") == 6e4
    assert np.isnan(saturate_to_dtype(float("nan"), "float32"))
    assert saturate_to_dtype(3, "int32") == 3
