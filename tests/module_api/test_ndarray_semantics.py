"""mxnet 1.9.1's legacy NDArray behaviours, after its NDArray unit tests.

Written afresh for this project; every expected value was printed by mxnet 1.9.1
running the same statement (``.mxnet-venv/bin/python``), so these pin mxnet's
answers where torch would give another: numpy dtypes, truncating integer
arithmetic, refused mixed dtypes, reshape's special codes, NDArray indices and
negative steps (read and written), mxnet's methods and reductions, and the small
API (``asscalar``, ``astype(copy=)``, ``copyto``, ``as_in_context``, ``grad`` ...).
An NDArray still goes into torch functions, which see a ``torch.dtype``.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import module_api as mx
from compiler.errors import MXNetError
from runtime.ndarray import torch_dtype


def grid():
    return mx.nd.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])


def vals(a):
    return a.asnumpy().tolist()


# -- dtype ---------------------------------------------------------------------------
def test_dtype_is_numpys_type_object():
    a = mx.nd.array([1, 2])
    assert a.dtype == np.float32 and a.dtype is np.float32
    assert mx.nd.zeros((2,), dtype="int32").dtype is np.int32
    assert a.astype("float16").dtype == np.float16
    assert mx.nd.ones((2,), dtype=np.float64).dtype == np.float64
    assert np.dtype(a.dtype) == np.dtype("float32")


def test_an_ndarray_still_works_inside_torch():
    a = mx.nd.array([[1.0, 2.0, 3.0]])
    assert torch_dtype(a) == torch.float32
    assert torch.zeros_like(a).shape == (1, 3)
    np.testing.assert_allclose(F.softmax(a, dim=1).asnumpy().sum(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(F.layer_norm(a, (3,)).asnumpy(), [[-1.2247, 0, 1.2247]],
                               atol=1e-4)
    torch.testing.assert_close(a, a.copy())
    assert float(torch.mm(a, a.T)) == 14.0


# -- arithmetic ------------------------------------------------------------------------
def test_integer_arithmetic_truncates_and_casts_scalars():
    a = mx.nd.array([5, -7, 9], dtype="int32")
    b = mx.nd.array([2, 2, 4], dtype="int32")
    assert vals(a / b) == [2, -3, 2]
    assert vals(a / 2) == [2, -3, 4]
    assert vals(a / 2.5) == [2, -3, 4]          # mxnet casts the scalar to int32: / 2
    assert vals(a + 2.7) == [7, -5, 11]
    assert vals(a * 1.5) == [5, -7, 9]
    assert vals(2 / a) == [0, 0, 0]
    assert (a / b).dtype == np.int32 and (a + 2.7).dtype == np.int32
    assert vals(mx.nd.array([-7, 7], dtype="int32") % 3) == [2, 1]
    assert vals(mx.nd.array([-7.5, 7.5]) % 2) == [0.5, 1.5]
    assert vals(mx.nd.array([2, 3], dtype="int32") ** 2) == [4, 9]
    assert vals(2 ** mx.nd.array([2, 3], dtype="int32")) == [4, 8]
    assert vals(mx.nd.array([250], dtype="uint8") + 10) == [4]


def test_in_place_integer_arithmetic():
    i = mx.nd.array([7, -7], dtype="int32")
    i /= 2
    assert vals(i) == [3, -3] and i.dtype == np.int32
    j = mx.nd.array([7, -7], dtype="int32")
    j += 2.9
    assert vals(j) == [9, -5]


def test_mixed_dtypes_are_refused():
    with pytest.raises(MXNetError, match="float16 and float32"):
        mx.nd.array([1, 2], dtype="float16") * mx.nd.array([1, 2])
    with pytest.raises(MXNetError, match="int32"):
        mx.nd.broadcast_add(mx.nd.array([1], dtype="int32"), mx.nd.array([1]))


# -- reshape ---------------------------------------------------------------------------
@pytest.mark.parametrize("codes,want", [
    ((4, 0, 2), (4, 3, 2)), ((2, -1), (2, 12)), ((-2, 1), (2, 3, 4, 1)),
    ((-3, 4), (6, 4)), ((2, -4, 3, 1, 4), (2, 3, 1, 4)), ((-4, 1, 2, -2), (1, 2, 3, 4)),
    ((0, -3), (2, 12)), ((-1, 0), (8, 3))])
def test_reshape_special_codes(codes, want):
    assert mx.nd.zeros((2, 3, 4)).reshape(codes).shape == want


def test_reshape_reverse_keywords_and_views():
    x = mx.nd.zeros((2, 3, 4))
    assert x.reshape((-1, 0), reverse=True).shape == (6, 4)
    assert x.reshape((0, -1), reverse=True).shape == (3, 8)
    assert x.reshape(shape=(6, 4)).shape == (6, 4) and x.reshape(6, 4).shape == (6, 4)
    v = x.reshape((6, 4))
    v[0] = 5
    assert x[0, 0, 0].asscalar() == 5.0            # a view, as in mxnet


# -- indexing --------------------------------------------------------------------------
def test_negative_steps_and_ndarray_indices():
    a = grid()
    assert vals(a[::-1]) == [[8, 9, 10, 11], [4, 5, 6, 7], [0, 1, 2, 3]]
    assert vals(a[:, ::-2]) == [[3, 1], [7, 5], [11, 9]]
    assert vals(a[2:0:-1, 1]) == [9, 5]
    assert vals(a[mx.nd.array([2, 0])]) == [[8, 9, 10, 11], [0, 1, 2, 3]]
    assert vals(a[mx.nd.array([1, 1, 0]), mx.nd.array([0, 1, 0])]) == [4, 5, 0]
    assert a[1, 2].shape == (1,) and a[-1, -2].asscalar() == 10.0


def test_assignment_through_every_kind_of_index():
    b = grid()
    b[::-1, 0] = mx.nd.array([10, 20, 30])
    assert vals(b) == [[30, 1, 2, 3], [20, 5, 6, 7], [10, 9, 10, 11]]
    b = grid()
    b[mx.nd.array([0, 2])] = 7
    assert vals(b) == [[7, 7, 7, 7], [4, 5, 6, 7], [7, 7, 7, 7]]
    b = grid()
    b[:, 1:4:2] = mx.nd.array([[1, 2]])
    assert vals(b) == [[0, 1, 2, 2], [4, 1, 6, 2], [8, 1, 10, 2]]
    b = grid()
    b[1] = np.array([1, 2, 3, 4])
    assert vals(b[1]) == [1, 2, 3, 4]


@pytest.mark.parametrize("index, written", [
    # a contiguous result is a view: writing into it writes the array (mxnet 1.9.1)
    ((slice(1, 2),), [0, 1, 2, 3, 0, 0, 0, 0, 8, 9, 10, 11]),
    ((1,), [0, 1, 2, 3, 0, 0, 0, 0, 8, 9, 10, 11]),
    ((slice(2, 1, -1),), [0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0]),     # one row, reversed
    # a strided result is a copy there: the array stays as it was
    ((slice(None), slice(None, None, 2)), list(range(12))),
    ((slice(None, None, 2),), list(range(12))),
    ((slice(None), slice(1, 3)), list(range(12))),
    ((slice(None), 1), list(range(12))),
    ((slice(None, None, -1),), list(range(12))),
])
def test_writing_into_a_slice_reaches_the_array_only_where_mxnet_views(index, written):
    a = grid()
    part = a[index]
    part[:] = 0
    assert vals(a.reshape((-1,))) == written
    contiguous = mx.nd.NDArray._basic_indexing_slice_is_contiguous
    full = tuple(index) + (slice(None),) * (2 - len(index))
    if all(isinstance(k, slice) for k in full):
        assert contiguous(full, (3, 4)) == (written != list(range(12)))


# -- mxnet's methods -------------------------------------------------------------------
def test_slice_slice_axis_and_take():
    a = grid()
    assert vals(a.slice(begin=(None, 1), end=(None, 3))) == [[1, 2], [5, 6], [9, 10]]
    assert vals(a.slice(begin=(2, None), end=(0, None), step=(-1, 2))) == [[8, 10], [4, 6]]
    assert vals(a.slice_axis(axis=1, begin=-3, end=-1)) == [[1, 2], [5, 6], [9, 10]]
    assert vals(a.take(mx.nd.array([2, 0, 5]))) == \
        [[8, 9, 10, 11], [0, 1, 2, 3], [8, 9, 10, 11]]          # mode 'clip'
    assert vals(a.take(mx.nd.array([[1], [-1]]), axis=1)) == \
        [[[1], [0]], [[5], [4]], [[9], [8]]]


def test_broadcast_and_tile_methods():
    c = mx.nd.array([[1, 2, 3]])
    assert vals(c.broadcast_to(shape=(2, 3))) == [[1, 2, 3], [1, 2, 3]]
    assert vals(mx.nd.array([[1], [2]]).broadcast_axes(axis=1, size=3)) == \
        [[1, 1, 1], [2, 2, 2]]
    assert vals(c.tile(reps=(2, 2))) == [[1, 2, 3, 1, 2, 3], [1, 2, 3, 1, 2, 3]]
    assert c.tile((2,)).shape == (1, 6)


def test_reductions_take_keepdims_as_an_int():
    a = grid()
    assert vals(mx.nd.sum(a, axis=1, keepdims=1)) == [[6], [22], [38]]
    assert a.sum(axis=0, keepdims=1).shape == (1, 4)
    assert a.max().shape == (1,) and vals(a.sum()) == [66]
    assert vals(a.mean(axis=(0, 1))) == [5.5]
    assert vals(a.sum(axis=1, exclude=1)) == [12, 15, 18, 21]


# -- the small API ---------------------------------------------------------------------
def test_asscalar_astype_copyto_and_contexts():
    assert type(mx.nd.array([3.5]).asscalar()) is np.float32
    assert mx.nd.array([3], dtype="int32").asscalar() == 3
    y = mx.nd.array([1, 2])
    assert y.astype("float32", copy=False) is y and y.astype("float32") is not y
    assert y.astype(np.int32).dtype == np.int32
    z = mx.nd.zeros((2,))
    assert y.copyto(z) is z and vals(z) == [1, 2]
    assert y.copyto(mx.cpu(0)) is not y
    assert y.as_in_context(mx.cpu(0)) is y
    assert y.as_in_context(mx.cpu(1)).context == mx.cpu(1)
    assert y.context == mx.cpu(0) and y.stype == "default" and y.grad is None
    y.wait_to_read()


def test_attach_grad_gives_a_zero_gradient():
    y = mx.nd.array([1, 2])
    y.attach_grad()
    assert vals(y.grad) == [0, 0] and y.grad.dtype == np.float32


def test_mxnets_helpers_cast_the_number_as_the_operators_do():
    a = mx.nd.array([5, -7, 9], dtype="int32")
    assert vals(mx.nd.add(a, 2.7)) == [7, -5, 11]
    assert vals(mx.nd.divide(a, 2.5)) == [2, -3, 4]
    assert vals(mx.nd.multiply(1.5, a)) == [5, -7, 9]
    assert vals(mx.nd.subtract(10, mx.nd.array([1.5]))) == [8.5]


def test_an_operator_reads_an_array_with_a_gradient_attached():
    x = mx.nd.array([-1.0, 2.0])
    x.attach_grad()
    assert vals(mx.nd.relu(x)) == [0.0, 2.0]
    assert vals(x * 2) == [-2.0, 4.0]


def test_an_operator_never_writes_into_its_inputs():
    """The engine binds its own arrays: a later call of the same signature must not
    write into the arrays of the first."""
    a, b = mx.nd.array([1.0, 2.0, 3.0]), mx.nd.array([5.0, 6.0, 7.0])
    assert vals(mx.nd.relu(a)) == [1.0, 2.0, 3.0]
    assert vals(mx.nd.relu(b)) == [5.0, 6.0, 7.0]
    assert vals(a) == [1.0, 2.0, 3.0] and vals(b) == [5.0, 6.0, 7.0]
    assert vals(a.sum()) == [6.0] and vals(b.sum()) == [18.0] and vals(a) == [1.0, 2.0, 3.0]
