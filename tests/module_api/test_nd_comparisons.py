"""NDArray comparisons as mxnet 1.9.1 runs them: ``broadcast_*`` / ``_*_scalar``
operators whose result is 1 and 0 in the input's dtype (not bool); a number is cast to
an integer array's dtype first; anything else is a TypeError. Expected values are
what mxnet 1.9.1 printed for the same expressions."""
import numpy as np
import pytest

import module_api as mx


def test_array_comparisons_give_the_inputs_dtype():
    a, b = mx.nd.array([1, 2, 3]), mx.nd.array([2, 2, 2])
    expected = {">": [0, 0, 1], ">=": [0, 1, 1], "<": [1, 0, 0], "<=": [1, 1, 0],
                "==": [0, 1, 0], "!=": [1, 0, 1]}
    got = {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b, "==": a == b, "!=": a != b}
    for op, want in expected.items():
        assert got[op].dtype == np.float32, op
        np.testing.assert_array_equal(got[op].asnumpy(), np.array(want, np.float32), err_msg=op)


def test_scalar_comparisons_on_either_side_and_broadcasting():
    a = mx.nd.array([1, 2, 3])
    np.testing.assert_array_equal((a > 1).asnumpy(), [0, 1, 1])
    np.testing.assert_array_equal((2 < a).asnumpy(), [0, 0, 1])
    np.testing.assert_array_equal((1.5 < a).asnumpy(), [0, 1, 1])
    np.testing.assert_array_equal((a == 2).asnumpy(), [0, 1, 0])
    col = mx.nd.array([[1], [3]])
    out = col >= mx.nd.array([1, 2, 3])
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out.asnumpy(), [[1, 0, 0], [1, 1, 1]])


def test_integer_arrays_cast_the_scalar_and_keep_their_dtype():
    i = mx.nd.array([1, 2, 3], dtype="int32")
    out = i > 1.5          # mxnet compares with int32(1.5) = 1
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.asnumpy(), [0, 1, 1])
    h = mx.nd.array([1, 2, 3], dtype="float16") > mx.nd.array([2, 2, 2], dtype="float16")
    assert h.dtype == np.float16


def test_a_mask_from_a_comparison_records_and_passes_no_gradient():
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = (x > 1) * x
    y.backward()
    np.testing.assert_array_equal(y.asnumpy(), [0, 2])
    np.testing.assert_array_equal(x.grad.asnumpy(), [0, 1])


def test_other_operands_are_refused_and_arrays_stay_hashable():
    a = mx.nd.array([1, 2])
    with pytest.raises(TypeError, match="not supported"):
        a == None  # noqa: E711  (mxnet raises the same TypeError)
    with pytest.raises(mx.base.MXNetError, match="incompatible dtypes"):
        a > mx.nd.array([1, 2], dtype="int32")
    assert {a: 1}[a] == 1
