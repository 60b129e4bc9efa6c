"""``mx.autograd`` through indexing and on integer arrays, as mxnet 1.9.1's
``test_ndarray.py`` pins them (values recorded by mxnet in
``tests/fixtures/mxnet_integer_nan.json``; indexing checked against numpy)."""
import json
import os

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mxnet_integer_nan.json")
with open(FIXTURE) as _f:
    GRADS = json.load(_f)["int_grads"]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_arrays_get_integer_gradients(dtype):
    """They were all zeros: integer inputs were given grad_req 'null'."""
    x = mx.nd.array(np.arange(12).reshape(3, 4), dtype=dtype)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.sum(x * x)
    y.backward()
    assert x.grad.asnumpy().ravel().tolist() == GRADS[dtype]
    x = mx.nd.array(np.arange(12).reshape(3, 4), dtype=dtype)
    x.attach_grad()
    with mx.autograd.record():
        y = x[1]
    y.backward()
    assert x.grad.asnumpy().ravel().tolist() == GRADS[dtype + "_row"]
    assert x.grad.dtype.__name__ == GRADS[dtype + "_dtype"] == dtype


def _grad_of_index(np_array, index):
    x = mx.nd.array(np_array)
    x.attach_grad()
    with mx.autograd.record():
        y = x[index]
    head = np.arange(1, y.size + 1, dtype=np.float32).reshape(y.shape)
    y.backward(mx.nd.array(head))
    return y.asnumpy(), x.grad.asnumpy()


def _numpy_index(index):
    parts = index if isinstance(index, tuple) else (index,)
    parts = tuple(p.asnumpy().astype(np.int64) if isinstance(p, mx.nd.NDArray) else p
                  for p in parts)
    return parts if isinstance(index, tuple) else parts[0]


@pytest.mark.parametrize("index", [
    np.int32(-1), np.int64(2), -1,                              # integers, numpy's too
    [3, -1], np.array([[0, -2], [1, 1]]),                       # index arrays, repeats
    (1, [2, 3]), ([1, 2], slice(1, 3), [0, 4]),                 # advanced, mixed
    (slice(None), [4, 0], None), ([[1]], [[2]]),
    (slice(None, None, -1), 2), (Ellipsis, [1, 1, 3]),
])
def test_indexing_under_record_selects_and_differentiates_as_numpy(index):
    """Values are numpy's indexing; the gradient adds each head element at the
    position it came from (repeated positions add up). ``x[np.int32(-1)]`` was row 0
    (a numpy integer was read as an index array and clipped)."""
    a = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    got, grad = _grad_of_index(a, index)
    want = a[_numpy_index(index)]
    np.testing.assert_array_equal(got, want.reshape(got.shape))
    expect = np.zeros_like(a)
    head = np.arange(1, want.size + 1, dtype=np.float32).reshape(want.shape)
    np.add.at(expect, _numpy_index(index), head)
    np.testing.assert_array_equal(grad, expect)


def test_assignment_into_part_of_an_array_is_refused_while_recording():
    """As mxnet: the tape cannot see it, so a gradient through it would be wrong."""
    x = mx.nd.zeros((3, 4))
    y = mx.nd.ones((4,))
    y.attach_grad()
    with mx.autograd.record():
        with pytest.raises(mx.MXNetError, match="Inplace operations"):
            x[1] = y
        x[None] = y.reshape((1, 4)).broadcast_to((3, 4))    # the whole array: a copy
        x[...] = 2.0
    assert (x.asnumpy() == 2.0).all()
    x[1] = y                                 # outside record: written
    assert (x.asnumpy()[1] == 1.0).all()
