"""``mx.nd``: NDArray methods and the creation / arithmetic functions, against
values mxnet 1.9.1 gives (noted beside each check)."""
import numpy as np
import pytest
import torch

import module_api.ndarray as nd
from compiler.errors import MXNetError
from module_api import test_utils
from runtime.context import cpu
from runtime.ndarray import NDArray, to_numpy_dtype, to_torch_dtype, torch_dtype

DTYPE_SPELLINGS = [np.float16, np.dtype("float64"), "int32", torch.int64, "uint8", np.int8,
                   torch.float32, "float32", None]


@pytest.mark.parametrize("dtype", DTYPE_SPELLINGS)
def test_every_creator_accepts_every_dtype_spelling(dtype):
    want = to_torch_dtype(dtype)
    made = [nd.zeros((2, 3), cpu(), dtype), nd.ones((2, 3), dtype=dtype),
            nd.empty((2, 3), dtype=dtype), nd.array([[1, 2, 3]], dtype=dtype),
            nd.full((2,), 3, dtype=dtype if dtype is not None else np.float32),
            nd.arange(3, dtype=dtype if dtype is not None else np.float32),
            nd.random.uniform(0, 1, shape=(2,), dtype=dtype)]
    for arr in made:
        assert isinstance(arr, NDArray) and isinstance(arr, torch.Tensor)
        assert torch_dtype(arr) == want


def test_dtype_round_trips_through_functions():
    a = nd.array([1, 2], dtype="int32")
    b = nd.zeros(a.shape, dtype=a.dtype)
    c = nd.array(b.asnumpy(), dtype=b.asnumpy().dtype)
    assert a.dtype == b.dtype == c.dtype == np.int32
    assert a.np_dtype == np.dtype("int32") and to_numpy_dtype(a.dtype) == np.int32
    assert a.astype(np.float16).dtype == np.float16


def test_array_defaults_like_mxnet():
    assert nd.array(np.array([1, 2])).dtype == np.float32     # numpy int -> float32
    assert nd.array([1, 2]).dtype == np.float32
    assert nd.array(nd.array([1, 2], dtype="int64")).dtype == np.int64  # NDArray keeps
    assert nd.array(np.float32(3.0)).shape == ()


def test_stype_default_and_sparse():
    assert nd.zeros((2,), stype="default").stype == "default"
    assert nd.zeros((2,), stype="row_sparse").stype == "row_sparse"   # tests/module_api/test_sparse_*
    assert nd.ones((2, 2)).tostype("csr").stype == "csr"
    with pytest.raises(MXNetError, match="bogus"):
        nd.zeros((2,), stype="bogus")


def test_ndarray_methods():
    a = nd.array(np.arange(6).reshape(2, 3))
    assert a.shape == (2, 3) and isinstance(a.shape, tuple)
    assert a.size == 6 and a.size() == torch.Size([2, 3]) and a.size(1) == 3   # both APIs
    assert a.T.shape == (3, 2)
    assert isinstance(a.asnumpy(), np.ndarray)
    assert nd.array([4.5]).asscalar() == 4.5
    with pytest.raises(ValueError):
        a.asscalar()
    a.wait_to_read()
    assert a.context == cpu(0) and a.ctx == cpu(0)


def test_setitem_accepts_numpy_lists_scalars_and_arrays():
    a = nd.zeros((2, 3))
    a[:] = np.ones((2, 3))
    assert a.sum().item() == 6
    a[:] = 2
    assert a.sum().item() == 12
    a[0] = [1, 1, 1]
    a[1:] = nd.zeros((1, 3))
    assert a.tolist() == [[1, 1, 1], [0, 0, 0]]


def test_copyto_and_as_in_context():
    a = nd.array([1, 2, 3])
    b = a.copyto(cpu(1))
    assert b.context == cpu(1) and b.tolist() == [1, 2, 3]
    assert a.as_in_context(cpu(0)) is a
    assert a.as_in_context(cpu(1)).context == cpu(1)
    dst = nd.zeros((3,))
    assert a.copyto(dst) is dst and dst.tolist() == [1, 2, 3]
    with pytest.raises(MXNetError):
        a.copyto(nd.zeros((4,)))


def test_ctx_argument_tags_arrays():
    assert nd.zeros((1,), ctx=cpu(2)).context == cpu(2)
    assert nd.array([1], ctx=cpu(3)).context == cpu(3)


def test_functions_match_mxnet_values():
    a = nd.ones((2, 3))
    assert nd.concat(nd.ones((2, 1)), nd.zeros((2, 2))).shape == (2, 3)      # dim=1 default
    assert nd.concat(a, a, dim=0).shape == (4, 3)
    assert nd.concatenate([a, a]).shape == (4, 3)
    assert nd.sum(a).shape == (1,)
    assert nd.sum(a, axis=1).shape == (2,)
    assert nd.sum(a, axis=1, keepdims=True).shape == (2, 1)
    assert nd.sum(a, axis=0, exclude=True).tolist() == [3.0, 3.0]
    assert nd.dot(nd.ones((3, 2)), nd.ones((3, 4)), transpose_a=True).shape == (2, 4)
    assert nd.dot(nd.ones((2, 3)), nd.ones((4, 3)), transpose_b=True).shape == (2, 4)
    assert nd.divide(nd.ones((2,)), 4).tolist() == [0.25, 0.25]
    assert nd.abs(nd.array([-1, 2])).tolist() == [1.0, 2.0]
    assert nd.arange(1, 4, repeat=2).tolist() == [1, 1, 2, 2, 3, 3]
    assert nd.arange(5).dtype == np.float32
    assert nd.full((2,), 3).tolist() == [3.0, 3.0]
    out = nd.zeros((2,))
    nd.divide(nd.ones((2,)), 2, out=out)
    assert out.tolist() == [0.5, 0.5]
    nd.waitall()


def test_random_is_seeded_by_mx_random_seed():
    import module_api as mx
    mx.random.seed(7)
    a = nd.random.uniform(-1, 1, shape=(100,))
    mx.random.seed(7)
    b = nd.random.uniform(-1, 1, shape=(100,))
    assert torch.equal(a, b) and float(a.min()) >= -1 and float(a.max()) <= 1
    n = nd.random.normal(2, 0.5, shape=(20000,))
    assert abs(float(n.mean()) - 2) < 0.02 and abs(float(n.std()) - 0.5) < 0.02
    assert nd.random.uniform(0, 1).shape == (1,)   # mxnet: shape (1,) by default
    out = nd.zeros((3, 3))
    nd.random.normal(0, 1, out=out)
    assert float(out.abs().sum()) > 0


def test_ndarray_flows_into_torch():
    a = nd.array([[1.0, 2.0]])
    r = torch.nn.functional.linear(a, torch.ones(3, 2))
    assert r.shape == (1, 3)
    assert isinstance(a + 1, NDArray)


def test_test_utils():
    a = nd.array([1.0, 2.0])
    test_utils.assert_almost_equal(a, np.array([1.0, 2.00001]))
    assert test_utils.almost_equal(a.asnumpy(), np.array([1.0, 2.0]))
    with pytest.raises(AssertionError, match="Error .* exceeds tolerance rtol=1.000000e-04"):
        test_utils.assert_almost_equal(a, np.array([1.0, 2.5]), names=("got", "want"))
    test_utils.assert_almost_equal(a, np.array([1.0, 2.4]), rtol=0.2, atol=0)
    assert test_utils.same_array(a, a[:])
    assert not test_utils.same_array(a, a.copy())


def test_pickle_and_deepcopy_keep_type_and_context():
    import copy
    import pickle
    a = nd.array([1.0, 2.0], ctx=cpu(1))
    for b in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a), copy.deepcopy({"k": a})["k"]):
        assert isinstance(b, NDArray) and b.context == cpu(1) and b.tolist() == [1.0, 2.0]
        assert b.data_ptr() != a.data_ptr()
