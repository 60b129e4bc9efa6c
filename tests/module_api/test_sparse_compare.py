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


def test_fluent_methods_run_the_operator():
    a = np.array(DOC["A"])
    for stype in ("csr", "row_sparse"):
        x = mx.nd.array(a).tostype(stype)
        assert x.abs().stype == stype and (x.abs().asnumpy() == np.abs(a)).all()
        assert x.zeros_like().stype == stype and x.zeros_like().data.shape[0] == 0
        np.testing.assert_allclose(x.sum(axis=0).asnumpy(), a.sum(axis=0))
        np.testing.assert_allclose(x.norm().asnumpy(), [np.linalg.norm(a)], rtol=1e-6)
        np.testing.assert_array_equal(x.T.asnumpy(), a.T)
        with pytest.raises(AttributeError, match="no attribute 'no_such_method'"):
            x.no_such_method()


def test_slicing_a_csr_array_on_both_axes_keeps_csr():
    a = np.array(DOC["A"])
    x = mx.nd.array(a).tostype("csr")
    for got in (x.slice(begin=(1, 1), end=(4, 3)), mx.nd.slice(x, begin=(1, 1), end=(4, 3))):
        assert got.stype == "csr"
        np.testing.assert_array_equal(got.asnumpy(), a[1:4, 1:3])
    rows = mx.nd.crop(x, begin=(2, None), end=(4, None))
    assert rows.stype == "csr" and (rows.asnumpy() == a[2:4]).all()


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_of_csr_rows_is_csr(mode):
    a = np.array(DOC["A"])
    idx = np.array([-3.0, 0.0, 7.0, 2.7, 3.0])
    got = mx.nd.take(mx.nd.array(a).tostype("csr"), mx.nd.array(idx), mode=mode)
    assert got.stype == "csr" and got.indptr[0].asscalar() == 0
    np.testing.assert_array_equal(got.asnumpy(), np.take(a, idx.astype(int), axis=0,
                                                         mode=mode))
