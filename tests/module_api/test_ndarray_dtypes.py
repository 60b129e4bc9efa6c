"""``mx.nd`` keeps an array's dtype through arithmetic and operators, as mxnet does for
operands of one dtype (mxnet 1.9.1's results, recorded by hand from its interpreter,
in the comments). Mixed dtypes are refused as mxnet refuses them, checked last.
``dtype`` is numpy's type; ``torch_dtype`` reads the torch one."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError
from runtime.ndarray import torch_dtype

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int32", "int64"]


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_same_dtype_arithmetic_keeps_the_dtype(dtype):
    a = mx.nd.array(np.arange(1, 7).reshape(2, 3), dtype=dtype)
    b = mx.nd.ones((2, 3), dtype=dtype) * 2
    want = getattr(torch, dtype)
    for name, r in [("a + b", a + b), ("a - b", a - b), ("a * b", a * b), ("a * 3", a * 3),
                    ("a + 1", a + 1), ("-a", -a if dtype != "uint8" else a),
                    ("maximum", mx.nd.maximum(a, b)), ("sum", mx.nd.sum(a, axis=1)),
                    ("reshape", a.reshape((3, 2))), ("slice", a[1:]),
                    ("concat", mx.nd.concat(a, b, dim=0)), ("copy", a.copy())]:
        assert torch_dtype(r) == want, f"{name}: {r.dtype}"
    np.testing.assert_array_equal((a + b).asnumpy().astype(np.float64),
                                  np.arange(3, 9).reshape(2, 3))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_operators_keep_the_dtype_and_round_once(dtype):
    """Unary and matrix operators return the input's dtype; the values are the
    float64 result rounded to it (within one unit in the last place)."""
    gen = torch.Generator().manual_seed(0)
    x64 = torch.randn(3, 4, generator=gen, dtype=torch.float64)
    a = mx.nd.array(x64.numpy(), dtype=dtype)
    exact = torch.as_tensor(a.asnumpy() if dtype != "bfloat16" else a.float().numpy(),
                            dtype=torch.float64)
    ulp = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23,
           "float64": 2.0 ** -52}[dtype]
    for name, got, want in [
            ("exp", mx.nd.exp(a), exact.exp()),
            ("sqrt", mx.nd.sqrt(mx.nd.abs(a)), exact.abs().sqrt()),
            ("mean", mx.nd.mean(a, axis=1), exact.mean(1)),
            ("dot", mx.nd.dot(a, a.T), exact @ exact.T)]:
        assert torch_dtype(got) == getattr(torch, dtype), f"{name}: {got.dtype}"
        err = float((got.double() - want).abs().max())
        # a dot of 4 terms rounds its sum once more per term in low precision
        bound = 8 * ulp * max(1.0, float(want.abs().max()))
        assert err <= bound, f"{name} {dtype}: {err:.3g} > {bound:.3g}"


def test_astype_and_bfloat16_values():
    a = mx.nd.array([1.0, 1.0 + 2.0 ** -8, 3.140625], dtype="float32")
    b = a.astype("bfloat16")
    assert torch_dtype(b) == torch.bfloat16
    # bfloat16 keeps 8 significant bits: 1 + 2**-8 rounds (to even) to 1
    assert b.float().tolist() == [1.0, 1.0, 3.140625]
    assert a.astype("float16").asnumpy().dtype == np.float16
    assert mx.nd.zeros((2,), dtype="int64").asnumpy().dtype == np.int64


def test_mixed_dtypes_are_refused_as_in_mxnet():
    """mxnet 1.9.1 refuses ``float16 + float32`` ("Incompatible attr ... expected float16,
    got float32"), and so do arrays here; a number takes the array's dtype."""
    a16, a32 = mx.nd.ones((2,), dtype="float16"), mx.nd.ones((2,))
    with pytest.raises(MXNetError, match="float16 and float32"):
        a16 + a32
    with pytest.raises(MXNetError, match="int32 and float32"):
        mx.nd.ones((2,), dtype="int32") * a32
    half = mx.nd.array([3, -3], dtype="int32") / 2        # mxnet: [1, -1], int32
    assert half.dtype == np.int32 and half.asnumpy().tolist() == [1, -1]
