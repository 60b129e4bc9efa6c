"""``mx.nd.dot`` / ``mx.nd.sparse.dot`` with csr and row_sparse operands against mxnet
1.9.1 (tests/fixtures/make_sparse_fixtures.py, dot_cases): the result's storage type,
its stored rows / columns, and its values."""
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "sparse_cases.npz"))


def _rsp(prefix):
    return mx.nd.sparse.row_sparse_array((FIX[prefix + "/data"], FIX[prefix + "/indices"]),
                                         shape=FIX[prefix + "/dense"].shape)


def _operands():
    csr = mx.nd.array(FIX["dot/csr"]).tostype("csr")
    nd = {k: mx.nd.array(FIX["dot/" + k]) for k in "bcefgh"}
    return {
        "csr_b": (csr, nd["b"], False, False), "csrT_c": (csr, nd["c"], True, False),
        "csr_rspb": (csr, _rsp("dot/rsp_b"), False, False),
        "csrT_rspc": (csr, _rsp("dot/rsp_c"), True, False),
        "e_csr": (nd["e"], csr, False, False), "f_csrT": (nd["f"], csr, False, True),
        "csr_gT": (csr, nd["g"], False, True), "rspb_h": (_rsp("dot/rsp_b"), nd["h"], False,
                                                          False),
        "fT_csr": (mx.nd.array(FIX["dot/e"].T), csr, True, False),
    }


@pytest.mark.parametrize("name", sorted(_operands()))
def test_dot_matches_mxnet(name):
    lhs, rhs, ta, tb = _operands()[name]
    res = mx.nd.dot(lhs, rhs, transpose_a=ta, transpose_b=tb)
    pre = "dot/out_" + name
    assert res.stype == str(FIX["dot/stype_" + name])
    np.testing.assert_allclose(res.asnumpy(), FIX[pre + "/dense"], rtol=1e-5, atol=1e-6)
    if res.stype != "default":
        np.testing.assert_array_equal(res.indices.asnumpy(), FIX[pre + "/indices"])
        np.testing.assert_allclose(res.data.asnumpy(), FIX[pre + "/data"], rtol=1e-5,
                                   atol=1e-6)
    if res.stype == "csr":
        np.testing.assert_array_equal(res.indptr.asnumpy(), FIX[pre + "/indptr"])
    same = mx.nd.sparse.dot(lhs, rhs, transpose_a=ta, transpose_b=tb)
    np.testing.assert_array_equal(same.asnumpy(), res.asnumpy())


def test_dot_refusals():
    csr = mx.nd.array(FIX["dot/csr"]).tostype("csr")
    with pytest.raises(MXNetError, match="csr . csr"):
        mx.nd.dot(csr, csr)
    with pytest.raises(ValueError, match="forward_stype"):
        mx.nd.sparse.dot(csr, mx.nd.array(FIX["dot/b"]), forward_stype="dense")
    with pytest.raises(MXNetError, match="'mm'.*forward_stype.*'dense'"):
        mx.sym.dot(mx.sym.var("a"), mx.sym.var("b"), forward_stype="dense", name="mm")


@pytest.mark.parametrize("lhs,rhs", [("default", "default"), ("csr", "default"),
                                     ("default", "csr"), ("csr", "csr"),
                                     ("row_sparse", "default"), ("csr", "row_sparse")])
@pytest.mark.parametrize("hint", ["default", "csr", "row_sparse"])
def test_forward_stype_gives_the_result_that_storage(lhs, rhs, hint):
    """mxnet's ``forward_stype``: the result takes the storage asked for, computed by its
    fallback where no kernel takes the operands (csr . csr too), imperatively and in a
    bound symbol (mxnet's test_sparse_dot test_infer_forward_stype)."""
    rng = np.random.RandomState(5)
    a = rng.uniform(-1, 1, (4, 6)).astype(np.float32) * (rng.uniform(size=(4, 6)) < 0.5)
    b = rng.uniform(-1, 1, (6, 3)).astype(np.float32) * (rng.uniform(size=(6, 3)) < 0.5)
    want = a @ b
    la, rb = mx.nd.array(a).tostype(lhs), mx.nd.array(b).tostype(rhs)
    res = mx.nd.dot(la, rb, forward_stype=hint)
    assert res.stype == hint
    np.testing.assert_allclose(res.asnumpy(), want, rtol=1e-5, atol=1e-6)
    s = mx.sym.sparse.dot(mx.sym.Variable("l", stype=lhs), mx.sym.Variable("r", stype=rhs),
                          forward_stype=hint)
    out = s.bind(mx.cpu(), args={"l": la, "r": rb}).forward()[0]
    assert out.stype == hint
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_csr_dot_a_row_sparse_array_storing_nothing():
    csr = mx.nd.array(FIX["dot/csr"]).tostype("csr")
    empty = mx.nd.zeros((csr.shape[1], 3), stype="row_sparse")
    res = mx.nd.dot(csr, empty)
    assert res.shape == (csr.shape[0], 3) and not res.asnumpy().any()
    empty_t = mx.nd.zeros((csr.shape[0], 2), stype="row_sparse")
    assert not mx.nd.dot(csr, empty_t, transpose_a=True).asnumpy().any()
