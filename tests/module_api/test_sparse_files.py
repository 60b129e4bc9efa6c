"""Sparse arrays in mxnet's binary ``.params`` format, both ways.

``sparse_arrays.params`` was written by mxnet 1.9.1 (tests/fixtures/make_sparse_fixtures.py):
it loads here with mxnet's parts, and saving the loaded arrays again gives the same bytes.
"""
import os

import numpy as np
import pytest

import module_api as mx

HERE = os.path.join(os.path.dirname(__file__), "..", "fixtures")
FIX = np.load(os.path.join(HERE, "sparse_cases.npz"))
PARAMS = os.path.join(HERE, "sparse_arrays.params")
STYPES = {"csr": "csr", "csr_emptyrows": "csr", "csr_zeros": "csr", "csr_f64": "csr",
          "rsp": "row_sparse", "rsp3d": "row_sparse", "rsp_zeros": "row_sparse",
          "rsp_int32": "row_sparse", "dense": "default"}


def test_mxnet_file_loads_with_mxnet_parts():
    loaded = mx.nd.load(PARAMS)
    assert set(loaded) == set(STYPES)
    for name, arr in loaded.items():
        pre = "file/" + name
        assert arr.stype == STYPES[name], name
        np.testing.assert_array_equal(arr.asnumpy(), FIX[pre + "/dense"])
        assert arr.asnumpy().dtype == FIX[pre + "/dense"].dtype, name
        if arr.stype == "default":
            continue
        np.testing.assert_array_equal(arr.data.asnumpy(), FIX[pre + "/data"])
        np.testing.assert_array_equal(arr.indices.asnumpy(), FIX[pre + "/indices"])
        if arr.stype == "csr":
            np.testing.assert_array_equal(arr.indptr.asnumpy(), FIX[pre + "/indptr"])
        arr.check_format()


def test_saving_reproduces_mxnet_bytes(tmp_path):
    loaded = mx.nd.load(PARAMS)
    out = tmp_path / "again.params"
    mx.nd.save(str(out), loaded)
    with open(PARAMS, "rb") as f:
        want = f.read()
    assert out.read_bytes() == want


def test_arrays_built_here_round_trip(tmp_path):
    src = FIX["cast/src"]
    arrays = [mx.nd.array(src).tostype("csr"), mx.nd.array(src).tostype("row_sparse"),
              mx.nd.sparse.zeros("csr", (2, 3)), mx.nd.array(src)]
    path = str(tmp_path / "mine.params")
    mx.nd.save(path, arrays)
    back = mx.nd.load(path)
    assert [a.stype for a in back] == ["csr", "row_sparse", "csr", "default"]
    for a, b in zip(arrays, back):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    single = mx.nd.load_frombuffer(open(path, "rb").read())
    assert single[1].indices.asnumpy().tolist() == arrays[1].indices.asnumpy().tolist()


def test_numpy_shape_file_refuses_sparse(tmp_path):
    """A file written under NumPy shape semantics (V3 records, the only ones that hold a
    0-d array) holds dense arrays only, as mxnet's."""
    import torch
    with mx.np_shape(), pytest.raises(mx.base.MXNetError, match="default storage"):
        mx.nd.save(str(tmp_path / "x.params"),
                   [torch.zeros(()), mx.nd.sparse.zeros("csr", (2, 2))])
    assert not (tmp_path / "x.params").exists()


def test_damaged_mxnet_file_fails_clearly(tmp_path):
    with open(PARAMS, "rb") as f:
        good = f.read()
    for cut in range(0, len(good) - 1, 7):
        with pytest.raises(mx.base.MXNetError, match="Invalid NDArray file"):
            mx.nd.load_frombuffer(good[:cut])
    # a csr record whose values (storage) shape no longer matches its indices
    import struct
    path = str(tmp_path / "one.params")
    mx.nd.save(path, [mx.nd.array([[1, 0, 2], [0, 3, 0]]).tostype("csr")])
    raw = open(path, "rb").read()
    assert struct.unpack("<iq", raw[0x20:0x2c]) == (1, 3)      # storage shape (3,)
    bad = raw[:0x24] + struct.pack("<q", 2) + raw[0x2c:]
    with pytest.raises(mx.base.MXNetError, match="csr storage"):
        mx.nd.load_frombuffer(bad)
