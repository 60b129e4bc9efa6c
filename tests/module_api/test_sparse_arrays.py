"""``mx.nd.sparse`` arrays against mxnet 1.9.1 (tests/fixtures/make_sparse_fixtures.py)."""
import os
import warnings

import numpy as np
import pytest
import torch

import module_api as mx
from compiler.errors import MXNetError

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "sparse_cases.npz"))


def assert_parts(arr, prefix):
    """``arr`` has exactly the parts mxnet gave the array stored under ``prefix``."""
    np.testing.assert_array_equal(arr.asnumpy(), FIX[prefix + "/dense"])
    np.testing.assert_array_equal(arr.data.asnumpy(), FIX[prefix + "/data"])
    np.testing.assert_array_equal(arr.indices.asnumpy(), FIX[prefix + "/indices"])
    assert arr.indices.asnumpy().dtype == np.int64
    if arr.stype == "csr":
        np.testing.assert_array_equal(arr.indptr.asnumpy(), FIX[prefix + "/indptr"])
    arr.check_format()


def test_cast_storage_both_ways():
    src = mx.nd.array(FIX["cast/src"])
    csr = src.tostype("csr")
    assert isinstance(csr, mx.nd.sparse.CSRNDArray) and csr.stype == "csr"
    assert_parts(csr, "cast/csr")
    assert_parts(mx.nd.cast_storage(src, "row_sparse"), "cast/rsp")
    back = mx.nd.sparse.cast_storage(csr, "default")
    assert back.stype == "default"
    np.testing.assert_array_equal(back.asnumpy(), FIX["cast/src"])
    np.testing.assert_array_equal(src.tostype("row_sparse").tostype("default").asnumpy(),
                                  FIX["cast/src"])
    with pytest.raises(ValueError, match="csr to row_sparse"):
        csr.tostype("row_sparse")
    with pytest.raises(ValueError, match="row_sparse to csr"):
        src.tostype("row_sparse").tostype("csr")


def test_csr_row_slicing():
    csr = mx.nd.array(FIX["cast/src"]).tostype("csr")
    assert_parts(csr[1:4], "slice/1_4")
    assert_parts(csr[2], "slice/int2")
    assert_parts(csr[-1], "slice/neg1")
    assert_parts(mx.nd.sparse.slice(csr, begin=2, end=5), "slice/op")
    assert csr[:] is csr
    with pytest.raises(ValueError, match="continuous"):
        csr[0:4:2]
    with pytest.raises(ValueError, match="Multi-dimension"):
        csr[1, 2]


def test_retain():
    src = mx.nd.sparse.row_sparse_array((FIX["retain/src/data"], FIX["retain/src/indices"]),
                                        shape=FIX["retain/src/dense"].shape)
    assert_parts(src, "retain/src")
    ids = mx.nd.array(FIX["retain/ids"])
    assert_parts(mx.nd.sparse.retain(src, ids), "retain/out")
    assert_parts(src.retain(ids), "retain/out")
    assert_parts(mx.nd.sparse.retain(mx.nd.sparse.zeros("row_sparse", (8, 3)), ids),
                 "retain/zeros")
    # mxnet's generated signature: by keyword, into out, and a stray keyword refused with
    # an MXNetError (its test_sparse_nd_exception)
    out = mx.nd.sparse.zeros("row_sparse", src.shape)
    assert mx.nd.sparse.retain(data=src, indices=ids, out=out) is out
    assert_parts(out, "retain/out")
    with pytest.raises(MXNetError, match=r"unknown argument\(s\) \['invalid_arg'\]"):
        mx.nd.sparse.retain(mx.nd.ones((2, 2)), invalid_arg="garbage_value")
    with pytest.raises(MXNetError, match="indices are required"):
        mx.nd.sparse.retain(src)


def test_constructors_from_parts():
    a = mx.nd.sparse.csr_matrix(([1, 2, 3], [1, 0, 2], [0, 1, 2, 2, 3]), shape=(4, 3))
    np.testing.assert_array_equal(a.asnumpy(), [[0, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 3]])
    assert a.dtype == np.float32 and a.shape == (4, 3)
    b = mx.nd.sparse.csr_matrix((np.array([1, 2], dtype=np.float64), [1, 0], [0, 1, 2]))
    assert b.shape == (2, 2) and b.dtype == np.float64      # numpy source keeps its dtype
    r = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [1, 4]), shape=(6, 2))
    np.testing.assert_array_equal(r.asnumpy()[[1, 4]], [[1, 2], [3, 4]])
    assert mx.nd.sparse.row_sparse_array(([[1, 2]], [3])).shape == (4, 2)
    assert mx.nd.sparse.row_sparse_array((3, 4)).stype == "row_sparse"
    assert mx.nd.sparse.csr_matrix((3, 4)).indptr.asnumpy().tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="invalid shape"):
        mx.nd.sparse.csr_matrix(([], [], [0]))
    with pytest.raises(ValueError, match="Shape mismatch"):
        mx.nd.sparse.csr_matrix(np.ones((2, 2)), shape=(3, 2))
    with pytest.raises(ValueError, match="RowSparseNDArray"):
        mx.nd.sparse.csr_matrix(r)


def test_csr_from_coordinates_sums_duplicates():
    # scipy's coo -> csr, which mxnet uses: duplicates summed, columns sorted per row
    a = mx.nd.sparse.csr_matrix(([1.0, 2.0, 3.0, 4.0], ([2, 0, 2, 0], [1, 3, 1, 0])),
                                shape=(3, 4))
    assert a.indptr.asnumpy().tolist() == [0, 2, 2, 3]
    assert a.indices.asnumpy().tolist() == [0, 3, 1]
    assert a.data.asnumpy().tolist() == [4.0, 2.0, 4.0]


def test_zeros_empty_array_and_nd_hooks():
    z = mx.nd.sparse.zeros("row_sparse", (4, 2), dtype="float64")
    assert z.data.shape == (0, 2) and z.dtype == np.float64
    assert mx.nd.zeros((3, 3), stype="csr").stype == "csr"
    assert mx.nd.sparse.empty("csr", (2, 5)).shape == (2, 5)
    assert mx.nd.sparse.zeros("default", (2, 2)).stype == "default"
    csr = mx.nd.array(FIX["cast/src"]).tostype("csr")
    c2 = mx.nd.sparse.array(csr, dtype="float64")
    assert c2.stype == "csr" and c2.dtype == np.float64
    np.testing.assert_array_equal(mx.nd.array(csr).asnumpy(), FIX["cast/src"])
    with pytest.raises(ValueError, match="mx.nd.array"):
        mx.nd.sparse.array(np.ones((2, 2)))
    assert_parts(csr.astype("float64"), "astype")


def test_copyto_between_storage_types():
    src = mx.nd.array(FIX["cast/src"])
    csr = src.tostype("csr")
    dense = mx.nd.zeros(src.shape)
    assert csr.copyto(dense) is dense
    np.testing.assert_array_equal(dense.asnumpy(), FIX["cast/src"])
    target = mx.nd.sparse.zeros("csr", src.shape)
    src.copyto(target)                  # dense -> csr: cast into the target
    assert_parts(target, "cast/csr")
    other = mx.nd.sparse.zeros("csr", src.shape)
    csr.copyto(other)
    assert_parts(other, "cast/csr")
    moved = csr.copyto(mx.cpu(0))
    assert moved.stype == "csr" and moved is not csr
    with pytest.raises(TypeError, match="stype row_sparse"):
        csr.copyto(mx.nd.sparse.zeros("row_sparse", src.shape))
    with pytest.raises(MXNetError, match="shape mismatch"):
        csr.copyto(mx.nd.zeros((2, 2)))
    rsp = mx.nd.sparse.zeros("row_sparse", src.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rsp[:] = FIX["cast/src"]        # numpy assignment (mxnet warns it is slow)
    assert_parts(rsp, "cast/rsp")


def test_scipy_absent_or_present():
    csr = mx.nd.array(FIX["cast/src"]).tostype("csr")
    try:
        import scipy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="scipy"):
            csr.asscipy()
        return
    np.testing.assert_array_equal(csr.asscipy().toarray(), FIX["cast/src"])


def test_repr_and_refusals():
    csr = mx.nd.array(FIX["cast/src"]).tostype("csr")
    assert repr(csr) == "\n<CSRNDArray 6x5 @cpu(0)>"
    with pytest.raises(Exception, match="int key"):
        mx.nd.sparse.zeros("row_sparse", (2, 2))[0]
    with pytest.raises(ValueError, match="numeric"):
        csr[:] = 1.0
    bad = mx.nd.sparse.row_sparse_array(([[1.0], [2.0]], [3, 1]), shape=(4, 1))
    with pytest.raises(MXNetError, match="row_sparse storage"):
        bad.check_format()


def test_sparse_slice_of_rows_and_columns_and_with_a_step():
    """``mx.nd.sparse.slice``: rows, or rows and columns, stay csr; a step is mxnet's
    dense fallback (its test_sparse_nd_slice). A (begin, end) pair of 2-tuples once
    sliced the rows only."""
    dense = np.arange(42, dtype=np.float32).reshape(7, 6) * (np.arange(42).reshape(7, 6) % 3 == 0)
    a = mx.nd.array(dense).tostype("csr")
    both = mx.nd.sparse.slice(a, begin=(1, 2), end=(5, 5))
    assert both.stype == "csr" and both.shape == (4, 3)
    np.testing.assert_array_equal(both.asnumpy(), dense[1:5, 2:5])
    rows = mx.nd.sparse.slice(a, begin=2, end=4)
    assert rows.stype == "csr"
    np.testing.assert_array_equal(rows.asnumpy(), dense[2:4])
    stepped = mx.nd.sparse.slice(a, begin=(1,), end=(6,), step=(2,))
    assert getattr(stepped, "stype", "default") == "default"
    np.testing.assert_array_equal(stepped.asnumpy(), dense[1:6:2])
