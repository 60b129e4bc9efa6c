"""Values mxnet 1.9.1 gives that a float32 kernel would not, on both cpu targets
(values recorded by mxnet: ``tests/fixtures/make_integer_nan_fixtures.py``):

* int32 / int64 values above 2**24 through sums, extremes, gathers, copies and
  ``arange``: a kernel writing an int32 / int64 tensor, or touching only integers,
  computes in float64 (``compiler/ir/dtypes.py: compute_dtype``); in float32
  ``max([100000001])`` was 100000000;
* an output's dtype is its entry's ``infer_type`` even where the decomposition computed
  in another (``compiler/passes/decompose.py``): ``one_hot(dtype='int32')`` and
  ``take`` of int32 data were float32;
* rows holding NaN: ``max`` / ``min`` are NaN (the Triton reductions propagate it) and
  ``argmax`` / ``argmin`` its first position (it was the axis length, out of range);
* ``one_hot``'s zeros are +0.0 (they were -0.0: ``1 / x`` gave -inf).
"""
import json
import math
import os

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mxnet_integer_nan.json")
with open(FIXTURE) as _f:
    MX = json.load(_f)

BIG = [33554433, 100000001, -16777219]


def _big(dtype="int32"):
    return mx.nd.array(BIG, dtype=dtype)


def test_integer_reductions_are_exact_above_2_to_24(cpu_target):
    a = _big()
    assert int(mx.nd.sum(a).asscalar()) == MX["sum"] == sum(BIG)
    assert int(mx.nd.max(a).asscalar()) == MX["max"]
    assert int(mx.nd.min(a).asscalar()) == MX["min"]
    assert float(mx.nd.argmax(a, axis=0).asscalar()) == MX["argmax"]
    assert int(mx.nd.sum(mx.nd.array([2 ** 40 + 1, 1], dtype="int64")).asscalar()) == \
        MX["int64_sum"]


def test_integer_copies_gathers_and_arithmetic_are_exact(cpu_target):
    a = _big()
    got = mx.nd.take(a, mx.nd.array([2, 0]))
    assert got.dtype == np.int32 and MX["take_dtype"] == "int32"
    assert got.asnumpy().tolist() == MX["take"]
    assert mx.nd.elemwise_add(a, a).asnumpy().tolist() == MX["elemwise_add"]
    assert mx.nd.transpose(a.reshape((1, 3))).asnumpy().ravel().tolist() == MX["transpose"]
    assert mx.nd.concat(a, a, dim=0).asnumpy().tolist() == MX["concat"]


def test_integer_arange_counts_in_its_dtype(cpu_target):
    got = mx.nd.arange(0, 10000 ** 2, 10001, dtype="int32")
    assert got[-3:].asnumpy().tolist() == MX["arange"]
    got = mx.nd.arange(16777217, 16777230, 3, repeat=2, dtype="int32")
    assert got.asnumpy().tolist() == MX["arange_repeat"]


def test_one_hot_is_in_its_dtype_with_exact_values(cpu_target):
    got = mx.nd.one_hot(mx.nd.array([1, 0]), 2, on_value=100000001, dtype="int32")
    assert got.dtype == np.int32 and MX["one_hot_dtype"] == "int32"
    assert got.asnumpy().tolist() == MX["one_hot"]


def test_one_hot_zeros_are_positive(cpu_target):
    for on, off in ((1.0, 0.0), (2.0, 0.0)):
        got = mx.nd.one_hot(mx.nd.array([0, 2, 5]), depth=3, on_value=on,
                            off_value=off).asnumpy()
        assert not np.signbit(got).any() and MX["one_hot_signbit"] is False
        assert np.isposinf(1.0 / got[2]).all()


def _float(text):
    return float(text)


@pytest.mark.parametrize("case", range(len(MX["nan_rows"])))
def test_rows_with_nan_reduce_as_mxnet(cpu_target, case):
    want = MX["nan_rows"][case]
    row = [_float(v) for v in want["row"]]
    for dtype in ("float32", "float64", "float16"):
        x = mx.nd.array([row], dtype=dtype)
        assert float(mx.nd.argmax(x, axis=1).asscalar()) == want["argmax"], dtype
        assert float(mx.nd.argmin(x, axis=1).asscalar()) == want["argmin"], dtype
        for fn in ("max", "min"):
            got = float(getattr(mx.nd, fn)(x, axis=1).asscalar())
            expect = _float(want[fn])
            assert (math.isnan(got) and math.isnan(expect)) or got == expect, (fn, dtype)


def test_argmax_of_a_nan_row_fused_in_a_graph(cpu_target):
    """In context: after a multiply, as a graph head, with keepdims (a float64 kernel
    whose coordinates are computed in float64 on the cpu target)."""
    x = mx.sym.Variable("x")
    sym = mx.sym.Group([mx.sym.argmax(x * 2.0, axis=1, keepdims=True),
                        mx.sym.max(x * 2.0, axis=1)])
    data = np.array([[0.5, np.nan, 3.0], [1.0, 4.0, 2.0]])
    for dtype in ("float32", "float64"):
        exe = sym.simple_bind(mx.cpu(), x=data.shape, type_dict={"x": dtype})
        arg, mx_max = exe.forward(x=mx.nd.array(data, dtype=dtype))
        assert arg.dtype == np.dtype(dtype)
        assert arg.asnumpy().ravel().tolist() == [1.0, 1.0]
        assert math.isnan(mx_max.asnumpy()[0]) and mx_max.asnumpy()[1] == 8.0
