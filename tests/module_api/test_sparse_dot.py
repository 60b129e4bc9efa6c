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
        mx.nd.sparse.dot(csr, mx.nd.array(FIX["dot/b"]), forward_stype="csr")
