"""Comparisons, ``**`` and scalar arithmetic on csr and row_sparse arrays, and sparse
arithmetic whose shapes broadcast: values and result storage as mxnet 1.9.1 gives them
(recorded by ``tests/fixtures/make_sparse_compare_fixtures.py``; rule in
``runtime/sparse_arith.py``). Comparing a sparse array compared it as an object before
(``x == y`` was False, ``x > 0`` a TypeError)."""
import json
import os

import numpy as np
import pytest

import module_api as mx
from runtime.ndarray import torch_dtype

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mxnet_sparse_compare.json")
with open(FIXTURE) as _f:
    DOC = json.load(_f)


def _value(v):
    return np.nan if v is None else float(v)


@pytest.mark.parametrize("case", DOC["cases"], ids=lambda c: f"{c['stype']}:{c['case']}")
def test_sparse_operation_as_mxnet(case):
    x = mx.nd.array(DOC["A"]).tostype(case["stype"])
    y = mx.nd.array(DOC["B"]).tostype(case["stype"])
    r = mx.nd.array(DOC["ROW"]).tostype(case["stype"])
    names = {"x": x, "y": y, "r": r}
    with np.errstate(all="ignore"):
        got = eval(case["case"], {}, names)
    assert got.stype == case["out_stype"]
    assert np.dtype(got.dtype).name == case["dtype"]
    want = np.array([[_value(v) for v in row] for row in case["values"]])
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=0, equal_nan=True)


def test_shapes_that_do_not_broadcast_are_refused():
    x = mx.nd.array(DOC["A"]).tostype("csr")
    with pytest.raises(mx.MXNetError, match="do not broadcast"):
        x + mx.nd.zeros((2, 3)).tostype("csr")


def test_sparse_dtype_is_numpys():
    for stype in ("csr", "row_sparse"):
        z = mx.nd.zeros((2, 3), stype=stype, dtype="float64")
        assert z.dtype == np.float64 and torch_dtype(z).is_floating_point
        assert z.astype("int32").dtype == np.int32
    assert mx.nd.sparse.csr_matrix((2, 2)).dtype == np.float32


def test_context_default_ctx_reads_the_current_context():
    with pytest.warns(DeprecationWarning):
        assert mx.Context.default_ctx == mx.cpu(0)
    with mx.cpu(1):
        with pytest.warns(DeprecationWarning):
            assert mx.Context.default_ctx == mx.cpu(1)


@pytest.mark.parametrize("case", DOC["unary"], ids=lambda c: f"{c['stype']}:{c['op']}")
def test_one_input_operators_keep_the_storage_where_mxnet_does(case):
    """Those mapping 0 to 0 run on the stored values and keep the pattern (``zeros_like``
    stores nothing); the rest compute on a dense copy (mxnet's storage fallback). They
    were refused before (``runtime/imperative.py: _storage_fallback``)."""
    x = mx.nd.array(DOC["A"]).tostype(case["stype"])
    with np.errstate(all="ignore"):
        got = getattr(mx.nd, case["op"])(x)
    assert got.stype == case["out_stype"]
    if case["stored"] is not None:
        assert got.data.shape[0] == case["stored"]
    want = np.array([[_value(v) for v in row] for row in case["values"]])
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6, atol=0, equal_nan=True)


def test_a_sparse_out_receives_a_dense_result():
    out = mx.nd.zeros((2, 3), stype="csr")
    got = mx.nd.broadcast_add(mx.nd.ones((2, 3)), mx.nd.ones((2, 3)) * 2, out=out)
    assert got is out and out.stype == "csr"
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 3.0))
    rsp = mx.nd.zeros((3, 2), stype="row_sparse")
    rsp[:] = 2
    assert rsp.indices.asnumpy().tolist() == [0, 1, 2] and (rsp.asnumpy() == 2).all()
