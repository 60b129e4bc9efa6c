"""``+ - * /`` on sparse arrays against mxnet 1.9.1 (make_sparse_fixtures.py, arith_cases):
the result's storage type, its stored rows (row_sparse) or entry count (csr), values."""
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "sparse_cases.npz"))


def _cases():
    a, b = FIX["arith/a"], FIX["arith/b"]
    r1, r2 = mx.nd.array(a).tostype("row_sparse"), mx.nd.array(b).tostype("row_sparse")
    c1, c2 = mx.nd.array(a).tostype("csr"), mx.nd.array(b).tostype("csr")
    d = mx.nd.array(b)
    return {"r+r": lambda: r1 + r2, "r-r": lambda: r1 - r2, "r*r": lambda: r1 * r2,
            "c+c": lambda: c1 + c2, "c-c": lambda: c1 - c2, "c*c": lambda: c1 * c2,
            "r+d": lambda: r1 + d, "c-d": lambda: c1 - d, "r*d": lambda: r1 * d,
            "c*d": lambda: c1 * d, "d*c": lambda: d * c1, "r*2.5": lambda: r1 * 2.5,
            "c/4": lambda: c1 / 4, "r+1": lambda: r1 + 1, "neg_c": lambda: -c1,
            "r/r": lambda: r1 / r2}


@pytest.mark.parametrize("name", sorted(_cases()))
def test_arithmetic_matches_mxnet(name):
    res = _cases()[name]()
    pre = f"arith/{name}/"
    assert res.stype == str(FIX[pre + "stype"])
    np.testing.assert_allclose(res.asnumpy(), FIX[pre + "dense"], rtol=1e-6, atol=1e-7)
    if res.stype == "row_sparse":
        np.testing.assert_array_equal(res.indices.asnumpy(), FIX[pre + "indices"])
    if res.stype == "csr":
        assert int(res.indptr.asnumpy()[-1]) == int(FIX[pre + "nnz"])
        res.check_format()


def test_functions_and_refusals():
    r = mx.nd.array(FIX["arith/a"]).tostype("row_sparse")
    np.testing.assert_array_equal(mx.nd.sparse.add(r, r).asnumpy(), 2 * FIX["arith/a"])
    np.testing.assert_array_equal(mx.nd.sparse.subtract(r, r).asnumpy(), 0 * FIX["arith/a"])
    assert mx.nd.sparse.multiply(r, 3).stype == "row_sparse"
    assert mx.nd.sparse.divide(r, 2).stype == "row_sparse"
    with pytest.raises(MXNetError, match="broadcast"):
        r + mx.nd.sparse.zeros("row_sparse", (2, 4))


@pytest.mark.parametrize("op,want", [
    # mxnet 1.9.1's results (its broadcast_* operators with the dense array as output)
    ("+=", [[1, 2], [5, 6], [5, 6]]), ("-=", [[1, 2], [1, 2], [5, 6]]),
    ("*=", [[0, 0], [6, 8], [0, 0]]), ("/=", [[np.inf, np.inf], [1.5, 2], [np.inf, np.inf]])])
def test_a_dense_array_updated_in_place_by_a_row_sparse_one_is_the_same_array(op, want):
    dense = mx.nd.array([[1., 2.], [3., 4.], [5., 6.]])
    alias = dense
    names = {"alias": alias, "rsp": mx.nd.array([[0., 0.], [2., 2.], [0., 0.]])
             .tostype("row_sparse")}
    exec(f"alias {op} rsp", {}, names)
    assert names["alias"] is dense and dense.stype == "default"
    np.testing.assert_array_equal(dense.asnumpy(), np.array(want, dtype=np.float32))


def test_a_kvstore_updater_adding_row_sparse_pushes_in_place_updates_the_store():
    """mxnet's kvstore unit test ``test_updater``: ``local += recv`` on the stored array."""
    kv = mx.kv.create("local")
    kv.init(3, mx.nd.zeros((4, 4)))

    def updater(key, recv, local):
        local += recv
    kv._set_updater(updater)
    for _ in range(2):
        kv.push(3, [mx.nd.ones((4, 4), mx.Context("cpu", i)).tostype("row_sparse")
                    for i in range(4)])
    out = mx.nd.empty((4, 4))
    kv.pull(3, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full((4, 4), 8, np.float32))


# mxnet 1.9.1's result storage of nd.sparse.elemwise_* for (lhs, rhs) storages
_ELEMWISE_STYPES = {
    "add": {("rsp", "rsp"): "row_sparse", ("csr", "csr"): "csr"},
    "sub": {("rsp", "rsp"): "row_sparse", ("csr", "csr"): "csr"},
    "mul": {("rsp", "rsp"): "row_sparse", ("csr", "csr"): "csr", ("dns", "rsp"): "row_sparse",
            ("rsp", "dns"): "row_sparse", ("dns", "csr"): "csr", ("csr", "dns"): "csr"},
    "div": {},
}


@pytest.mark.parametrize("name", sorted(_ELEMWISE_STYPES))
def test_sparse_elemwise_ops_store_and_compute_as_mxnet(name):
    d = np.array([[1., 0, 2], [0, 0, 0], [3, 4, 0]], np.float32)
    e = np.array([[2., 1, 0], [0, 5, 0], [1, 0, 2]], np.float32)
    forms = {"dns": lambda a: a, "rsp": lambda a: a.tostype("row_sparse"),
             "csr": lambda a: a.tostype("csr")}
    fn = getattr(mx.nd.sparse, f"elemwise_{name}")
    want = {"add": d + e, "sub": d - e, "mul": d * e}.get(name)
    for lf, to_l in forms.items():
        for rf, to_r in forms.items():
            out = fn(to_l(mx.nd.array(d)), to_r(mx.nd.array(e)))
            assert out.stype == _ELEMWISE_STYPES[name].get((lf, rf), "default"), (lf, rf)
            if want is not None:
                np.testing.assert_array_equal(out.asnumpy(), want)
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    np.testing.assert_array_equal(out.asnumpy(), d / e)
