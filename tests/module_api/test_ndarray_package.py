"""``mx.nd`` as mxnet 1.9.1's ``mxnet.ndarray`` package and NDArray methods as its
``test_ndarray.py`` pins them (each case checked in mxnet 1.9.1)."""
import sys

import numpy as np
import pytest
import torch

import module_api as mx


def test_the_package_has_mxnets_submodules():
    from module_api.ndarray.ndarray import NDArray, _STORAGE_TYPE_STR_TO_ID, py_slice
    from module_api.ndarray.sparse import CSRNDArray, RowSparseNDArray
    assert py_slice is slice and NDArray is mx.nd.NDArray
    assert _STORAGE_TYPE_STR_TO_ID == {"undefined": -1, "default": 0, "row_sparse": 1,
                                       "csr": 2}
    assert CSRNDArray is mx.nd.sparse.CSRNDArray and RowSparseNDArray is \
        mx.nd.sparse.RowSparseNDArray
    assert mx.nd.ndarray.zeros is mx.nd.zeros


def test_a_submodule_through_the_short_name_is_the_same_module():
    import module_api.nd.sparse
    assert sys.modules["module_api.nd.sparse"] is sys.modules["module_api.ndarray.sparse"]
    assert module_api.nd.sparse is mx.nd.sparse


@pytest.mark.parametrize("method, args, shape", [
    ("flatten", (), (2, 15)),
    ("squeeze", (), (5, 3)),
    ("expand_dims", (0,), (1, 2, 3, 5)),
])
def test_inplace_true_is_a_view_and_false_a_copy(method, args, shape):
    data = (mx.nd.arange(30) + 1).reshape(2, 3, 5)
    if method == "squeeze":
        data = (mx.nd.arange(15) + 1).reshape(1, 5, 1, 3)
    copy = getattr(data, method)(*args)
    view = getattr(data, method)(*args, inplace=True)
    assert copy.shape == view.shape == shape
    before = copy.asnumpy().copy()
    data[:] = -1
    np.testing.assert_array_equal(copy.asnumpy(), before)      # a new array
    assert (view.asnumpy() == -1).all()                         # mxnet's in-place reshape


def test_reshape_to_a_size_that_does_not_fit_is_a_value_error():
    with pytest.raises(ValueError, match="has 6 elements, the input has 30"):
        mx.nd.zeros((2, 3, 5)).reshape((2, 3))


def test_creation_functions_write_into_out():
    out = mx.nd.zeros((2, 2))
    assert mx.nd.ones((2, 2), out=out) is out and (out.asnumpy() == 1).all()
    mx.nd.zeros((2, 2), out=out)
    assert (out.asnumpy() == 0).all()
    mx.nd.full((2, 2), 2, out=out)
    assert (out.asnumpy() == 2).all()


def test_truth_values_are_mxnets():
    assert not bool(mx.nd.array([]))
    assert not bool(mx.nd.zeros((1,)))
    assert bool(mx.nd.ones((1,)))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(mx.nd.ones((2, 3)))


def test_numpy_all_and_any_of_an_array():
    a = mx.nd.array([50000001], dtype="int32")
    assert np.all(a == 50000001) is np.True_
    assert np.any(a.round() == 1) is np.False_
    assert bool(torch.Tensor.all(a))         # torch's own callers keep torch's method


def test_moveaxis_takes_lists_as_numpy():
    x = mx.nd.zeros((4, 1, 2, 3))
    for src, dst in (([0, 1], [2, 3]), ([2, 3], [0, 1]), ([0, 1, 2], [2, 3, 0]),
                     ([3, 0], [1, 0]), (range(4), range(4)), (-1, 0)):
        assert mx.nd.moveaxis(x, src, dst).shape == np.moveaxis(np.zeros((4, 1, 2, 3)),
                                                                list(src) if not
                                                                isinstance(src, int) else
                                                                src, list(dst) if not
                                                                isinstance(dst, int) else
                                                                dst).shape
    for src, dst in ((4, 0), ([0, 0], [0, 1]), ([0, 1], [1, 1]), (0, [0, 1])):
        with pytest.raises(ValueError):
            mx.nd.moveaxis(x, src, dst)


def test_split_v2_is_a_method_too():
    data = mx.nd.array(np.arange(30).reshape(5, 1, 6))
    for sections in (3, (1, 3, 5)):
        got, want = data.split_v2(sections, axis=2), mx.nd.split_v2(data, sections, axis=2)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.asnumpy(), w.asnumpy())
    assert [p.shape[2] for p in data.split_v2((1, 3, 5), axis=2)] == [1, 2, 2, 1]


def test_a_shape_given_as_a_numpy_array():
    got = mx.nd.ones((1, 2)).broadcast_to(shape=np.array([3, 2]))
    assert got.shape == (3, 2)
    sym = mx.sym.broadcast_to(mx.sym.Variable("x"), shape=np.array([4, 2]))
    assert sym.infer_shape(x=(1, 2))[1] == [(4, 2)]


def test_from_numpy_takes_the_memory_over():
    a = np.array([[1, 2], [3, 4]], dtype=np.float32)
    b = mx.nd.from_numpy(a)
    with pytest.raises(ValueError):
        a[0, 0] = 9
    b[0, 1] = 100
    assert a[0, 1] == 100
    c = np.ones(3, dtype=np.float32)
    mx.nd.from_numpy(c, zero_copy=False)
    c[0] = 5                                # a copy leaves numpy's array writable


def test_dlpack_methods():
    a = mx.nd.array([1.0, 2.0])
    np.testing.assert_array_equal(torch.utils.dlpack.from_dlpack(a.to_dlpack_for_read()),
                                  [1.0, 2.0])
    assert mx.nd.from_dlpack(mx.nd.to_dlpack_for_write(a)).shape == (2,)


def test_assignment_casts_to_the_arrays_dtype():
    x = mx.nd.zeros((3, 4), dtype="int32")
    x[[1]] = mx.nd.array([[1.7, 2, 3, 4]])
    assert x.dtype == np.int32 and x.asnumpy()[1].tolist() == [1, 2, 3, 4]


def test_assignment_through_an_advanced_index_with_a_negative_step():
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.int32)
    x = mx.nd.array(a, dtype="int32")
    index = (1, [2], np.array([[3]], dtype=np.int32), slice(None, None, -1))
    value = -np.arange(5).reshape(1, 1, 5)
    a[index] = value
    x[index] = value
    np.testing.assert_array_equal(x.asnumpy(), a)
    # leading ones of the value with a negative-step basic index
    a[::-1, 2, 1:3, 1] = np.array([7, 8]).reshape(1, 1, 2)
    x[::-1, 2, 1:3, 1] = np.array([7, 8]).reshape(1, 1, 2)
    np.testing.assert_array_equal(x.asnumpy(), a)
