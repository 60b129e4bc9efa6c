"""mx.nd follows mxnet 1.x where ported scripts see the difference from torch:
no 0-d arrays, tuple shapes, mxnet's repr (values recorded from mxnet 1.9.1)."""
import numpy as np
import pytest

import module_api as mx


def test_indexing_and_iterating_never_give_0d_arrays():
    a = mx.nd.array([1, 2, 3])
    assert a[0].shape == (1,)
    assert [x.shape for x in a] == [(1,), (1,), (1,)]
    b = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    assert b[0].shape == (3,) and b[1, 2].shape == (1,) and b[1][2].shape == (1,)
    assert [x.shape for x in b] == [(3,), (3,)]
    assert b[0:1].shape == (1, 3) and b[:, 1].shape == (2,)
    assert a[2].asscalar() == 3.0


def test_an_element_is_a_view_as_in_mxnet():
    a = mx.nd.array([1, 2, 3])
    a[1][:] = 7
    np.testing.assert_array_equal(a.asnumpy(), [1, 7, 3])


def test_an_element_keeps_its_context():
    a = mx.nd.array([1, 2], ctx=mx.cpu(1))
    assert a[0].context == mx.cpu(1)


def test_shapes_are_tuples_and_print_like_mxnet():
    b = mx.nd.zeros((2, 3))
    assert type(b.shape) is tuple and str(b.shape) == "(2, 3)"
    batch = mx.io.DataBatch([b], [mx.nd.zeros((3,))])
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: [(3,)]"
    assert str(mx.io.DataDesc("data", (2, 3))) == \
        "DataDesc[data,(2, 3),<class 'numpy.float32'>,NCHW]"


def test_repr_is_mxnets():
    b = mx.nd.array([[1, 2, 3], [4, 5, 6]])
    assert repr(b) == "\n[[1. 2. 3.]\n [4. 5. 6.]]\n<NDArray 2x3 @cpu(0)>"


def test_mx_random_samplers_follow_the_seed():
    mx.random.seed(3)
    a = mx.random.uniform(0, 1, shape=(2, 3))
    mx.random.seed(3)
    b = mx.nd.random.uniform(0, 1, shape=(2, 3))
    assert a.shape == (2, 3) and np.array_equal(a.asnumpy(), b.asnumpy())
    n = mx.random.normal(0, 1, shape=(4,))
    assert n.shape == (4,) and 0 <= float(mx.random.randint(0, 5, shape=(1,)).asnumpy()[0]) < 5


@pytest.mark.parametrize("dtype,head,tail", [
    # mxnet 1.9.1: nd.arange(1.3, 456.6, 1.3, dtype=...): start and step cast to the
    # dtype first, the sums in it (uint8 wraps), 351 values from the float range
    ("float32", [1.3, 2.6, 3.8999999, 5.2, 6.5],
     [451.09998, 452.39996, 453.69998, 454.99997, 456.29996]),
    ("int32", [1, 2, 3, 4, 5], [347, 348, 349, 350, 351]),
    ("uint8", [1, 2, 3, 4, 5], [91, 92, 93, 94, 95])])
def test_nd_arange_computes_in_its_dtype_as_mxnet(dtype, head, tail):
    out = mx.nd.arange(1.3, 456.6, 1.3, dtype=dtype)
    assert out.dtype == np.dtype(dtype) and out.shape == (351,)
    got = out.asnumpy()
    np.testing.assert_array_equal(got[:5], np.array(head, dtype=dtype))
    np.testing.assert_array_equal(got[-5:], np.array(tail, dtype=dtype))
    np.testing.assert_array_equal(mx.nd.arange(2, 5, repeat=2, ctx=mx.cpu(1)).asnumpy(),
                                  [2, 2, 3, 3, 4, 4])
    with pytest.warns(DeprecationWarning, match="infer_range"):
        assert mx.nd.arange(3, infer_range=True).shape == (3,)
