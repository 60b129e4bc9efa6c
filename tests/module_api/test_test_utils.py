"""``mx.test_utils``: mxnet 1.9.1's semantics, and checks that fail when they must."""
import os

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError
from module_api import test_utils as tu


# -- comparisons -----------------------------------------------------------------------

def test_assert_almost_equal_default_tolerances_follow_dtype():
    a = np.ones((4,), np.float32)
    tu.assert_almost_equal(a, a + 5e-4)                       # float32: atol 1e-3
    with pytest.raises(AssertionError, match="exceeds tolerance"):
        tu.assert_almost_equal(a, a + 3e-3)
    with pytest.raises(AssertionError):                        # float64: atol 1e-20
        tu.assert_almost_equal(a.astype(np.float64), a.astype(np.float64) + 5e-4)
    tu.assert_almost_equal(a, a + 0.05, rtol=0, atol={np.dtype(np.float32): 0.1})
    tu.assert_almost_equal(mx.nd.array(a), a + 5e-4)          # NDArray against numpy


def test_assert_almost_equal_report_names_location_and_mismatch_share():
    a = np.zeros(10, np.float32)
    b = a.copy()
    b[[2, 5, 7]] = [1.0, 3.0, 2.0]
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(a, b, names=("got", "want"))
    msg = str(e.value)
    assert "mismatch 30.000000%" in msg
    assert "Location of maximum error: (5,)" in msg
    assert "got=0.00000000, want=3.00000000" in msg
    with pytest.raises(AssertionError) as e:                  # count at most 2 mismatches
        tu.assert_almost_equal(a, b, mismatches=(1, 2))
    assert "mismatch at least 30.000000%" in str(e.value)


def test_assert_almost_equal_nan_broadcast_and_bool():
    a = np.array([1.0, np.nan], np.float32)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(a, a)
    tu.assert_almost_equal(a, a, equal_nan=True)
    tu.assert_almost_equal(np.ones((2, 3)), np.ones(3))       # broadcasts by default
    with pytest.raises(AssertionError, match="are not equal"):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones(3), use_broadcast=False)
    tu.assert_almost_equal(np.array([True, False]), np.array([True, False]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([True, False]), np.array([True, True]))


def test_almost_equal_same_and_exceptions():
    assert tu.almost_equal(np.ones(3), np.ones(3) + 1e-9)
    assert not tu.almost_equal(np.ones(3), np.ones(3) + 1e-3)
    assert tu.same(mx.nd.ones((2,)), np.ones(2))
    assert not tu.same(np.ones(2), np.ones(3))
    tu.assert_exception(int, ValueError, "x")
    with pytest.raises(AssertionError, match="did not raise"):
        tu.assert_exception(int, ValueError, "3")
    tu.assert_almost_equal_ignore_nan(np.array([1.0, np.nan]), np.array([1.0, 5.0]))
    tu.assert_almost_equal_with_err(np.arange(10.0), np.arange(10.0) + (np.arange(10) == 3),
                                    etol=0.15)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal_with_err(np.arange(10.0), np.arange(10.0) + 1, etol=0.15)


# -- random data and contexts ------------------------------------------------------------

def test_rand_ndarray_dense_and_sparse():
    arr = tu.rand_ndarray((3, 4))
    assert isinstance(arr, mx.nd.NDArray)
    assert tuple(arr.shape) == (3, 4) and arr.context == mx.cpu(0)
    assert np.dtype(arr.asnumpy().dtype) == np.float32
    arr64 = tu.rand_ndarray((2,), dtype=np.float64, ctx=mx.cpu(1))
    assert arr64.asnumpy().dtype == np.float64 and arr64.context == mx.cpu(1)
    for stype in ("csr", "row_sparse"):        # sparse arrays of that storage type
        sp = tu.rand_ndarray((30, 4), stype, density=0.5)
        assert sp.stype == stype and tuple(sp.shape) == (30, 4)
        dense = sp.asnumpy()
        assert 0 < (dense != 0).mean() < 1


def test_rand_sparse_ndarray_as_mxnets():
    """mxnet's documented distributions: a uniform csr stores int(rows * cols *
    density) entries; a powerlaw csr doubles each row's entries from the left; a
    row_sparse array stores the rows given; the parts come back as mxnet returns them."""
    np.random.seed(1)
    csr, (indptr, indices, data) = tu.rand_sparse_ndarray((20, 10), "csr", density=0.3)
    assert csr.stype == "csr" and data.shape == (60,)
    np.testing.assert_array_equal(indptr.asnumpy(), csr.indptr.asnumpy())
    assert (csr.asnumpy() != 0).sum() == 60 and ((data.asnumpy() >= 0) &
                                                 (data.asnumpy() < 1)).all()
    power, (indptr, _, _) = tu.rand_sparse_ndarray((5, 16), "csr", density=0.5,
                                                   distribution="powerlaw")
    counts = np.diff(indptr.asnumpy())
    assert counts.tolist() == [2, 4, 8, 16, 10] and counts.sum() == 40
    with pytest.raises(ValueError, match="num_rows \\* num_cols \\* density >= 2"):
        tu.rand_sparse_ndarray((5, 4), "csr", density=0.1, distribution="powerlaw")
    rsp, (values, rows) = tu.rand_sparse_ndarray((6, 3), "row_sparse", rsp_indices=[1, 4],
                                                 data_init=2.0)
    assert rows.tolist() == [1, 4] and (values == 2.0).all()
    np.testing.assert_array_equal(rsp.asnumpy()[[1, 4]], 2.0)
    doubled = tu.create_sparse_array((6, 3), "row_sparse", rsp_indices=[4, 1],
                                     modifier_func=lambda v: 2 * v + 1)
    assert doubled.indices.asnumpy().tolist() == [1, 4]
    assert (doubled.data.asnumpy() >= 1).all()
    empty = tu.create_sparse_array_zd((6, 3), "row_sparse", density=0.9)
    assert empty.indices.shape == (0,)
    shuffled, _ = tu.rand_sparse_ndarray((4, 8), "csr", density=0.5, shuffle_csr_indices=True)
    assert (shuffled.asnumpy() != 0).sum() == 16
    assert tu.Context is mx.Context and tu.current_context() == mx.cpu(0)


def test_rand_shapes():
    np.random.seed(0)
    for _ in range(20):
        s2, s3, sn = tu.rand_shape_2d(3, 4), tu.rand_shape_3d(2, 2, 2), tu.rand_shape_nd(5, 3)
        assert len(s2) == 2 and 1 <= s2[0] <= 3 and 1 <= s2[1] <= 4
        assert len(s3) == 3 and all(1 <= d <= 2 for d in s3)
        assert len(sn) == 5 and all(1 <= d <= 3 for d in sn)
    zero = [tu.rand_shape_nd(4, 1, allow_zero_size=True) for _ in range(30)]
    assert any(0 in s for s in zero)


def test_default_context_and_set_default_context():
    assert tu.default_context() == mx.cpu(0)
    tu.set_default_context(mx.cpu(1))
    try:
        assert tu.default_context() == mx.cpu(1) == mx.current_context()
        assert tu.rand_ndarray((2,)).context == mx.cpu(1)
    finally:
        tu.set_default_context(mx.cpu(0))
    assert tu.default_context() == mx.cpu(0)


def test_environment_sets_and_restores():
    a, b = "SYMTRITON_TU_A", "SYMTRITON_TU_B"
    os.environ[b] = "old"
    try:
        with tu.environment(a, "1"):
            assert os.environ[a] == "1" and tu.getenv(a) == "1"
        assert a not in os.environ
        with pytest.raises(RuntimeError):
            with tu.environment({a: "x", b: None}):
                assert os.environ[a] == "x" and b not in os.environ
                raise RuntimeError("body fails")
        assert a not in os.environ and os.environ[b] == "old"
    finally:
        os.environ.pop(b, None)


def test_discard_stderr(capfd):
    with tu.discard_stderr():
        os.write(2, b"hidden-by-discard\n")
    os.write(2, b"shown-after\n")
    err = capfd.readouterr().err
    assert "hidden-by-discard" not in err and "shown-after" in err


def test_retry_reruns_until_pass():
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) >= 2
    flaky()
    assert len(calls) == 2

    @tu.retry(2)
    def always():
        assert False, "never"
    with pytest.raises(AssertionError, match="never"):
        always()


# -- symbolic checks ----------------------------------------------------------------------

def _ab():
    return mx.sym.Variable("a"), mx.sym.Variable("b")


def test_simple_forward():
    a, b = _ab()
    x, y = np.random.rand(2, 3), np.random.rand(2, 3)
    np.testing.assert_allclose(tu.simple_forward(a * b + 1, a=x, b=y), x * y + 1, rtol=1e-5)


def test_check_symbolic_forward_passes_and_fails():
    a, b = _ab()
    m1, m2 = np.array([[1, 2], [3, 4.0]]), np.array([[5, 6], [7, 8.0]])
    outs = tu.check_symbolic_forward(mx.sym.dot(a, b), [m1, m2], [np.array([[19, 22], [43, 50.0]])])
    assert outs[0].shape == (2, 2)
    dot = mx.sym.dot(a, b)
    tu.check_symbolic_forward(dot, {"a": m1, "b": m2}, {dot.list_outputs()[0]: m1 @ m2})
    with pytest.raises(AssertionError, match="EXPECTED_"):
        tu.check_symbolic_forward(mx.sym.dot(a, b), [m1, m2], [m1 @ m2 + 1])
    with pytest.raises(ValueError, match="do not match"):
        tu.check_symbolic_forward(mx.sym.dot(a, b), {"a": m1}, [m1])


def test_check_symbolic_backward_write_add_null():
    a, b = _ab()
    x, y = np.random.rand(3, 4), np.random.rand(3, 4)
    og = np.random.rand(3, 4)
    grads = tu.check_symbolic_backward(a * b, [x, y], [og], [og * y, og * x])
    np.testing.assert_allclose(grads["a"].asnumpy(), og * y, rtol=1e-5)
    tu.check_symbolic_backward(a * b, [x, y], [og], [og * y, og * x], grad_req="add")
    tu.check_symbolic_backward(a * b, [x, y], [og], {"a": og * y, "b": 0 * x},
                               grad_req={"a": "write", "b": "null"})
    with pytest.raises(AssertionError, match="BACKWARD_b"):
        tu.check_symbolic_backward(a * b, [x, y], [og], [og * y, og * y])


def test_check_numeric_gradient_correct_gradients_pass():
    np.random.seed(1)
    a, b = _ab()
    x, y = np.random.rand(3, 4), np.random.rand(3, 4)
    tu.check_numeric_gradient(mx.sym.tanh(a) * b, [x, y])
    fc = mx.sym.FullyConnected(a, num_hidden=3, name="fc")
    tu.check_numeric_gradient(fc, {"a": np.random.rand(2, 5), "fc_weight": np.random.rand(3, 5),
                                   "fc_bias": np.random.rand(3)})
    tu.check_numeric_gradient(a * b, [x, y], grad_nodes={"a": "add", "b": "null"})


def test_check_numeric_gradient_wrong_gradient_fails():
    # BlockGrad's backward is zero while the forward depends on ``a``: the
    # symbolic gradient of ``a`` is wrong as a derivative, and the check must say so.
    np.random.seed(2)
    a, b = _ab()
    x, y = np.random.rand(3, 4) + 0.5, np.random.rand(3, 4) + 0.5
    wrong = mx.sym.BlockGrad(a) * b
    with pytest.raises(AssertionError, match="NUMERICAL_a"):
        tu.check_numeric_gradient(wrong, [x, y])
    tu.check_numeric_gradient(wrong, [x, y], grad_nodes=["b"])   # b's gradient is right


def test_symbolic_checks_compute_in_the_dtype_asked_for():
    """mxnet's ``dtype``: numpy values are given in it and the executor computes in it."""
    np.random.seed(5)
    a, b = _ab()
    x, y = np.random.rand(2, 3) + 0.5, np.random.rand(2, 3) + 0.5
    out = tu.check_symbolic_forward(a * b, [x, y], [x * y], dtype=np.float64)[0]
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.asnumpy(), x * y)          # float64 products, exact
    out = tu.check_symbolic_forward(a * b, [x, y], [x * y], dtype=np.float16)[0]
    assert out.dtype == np.float16
    with pytest.raises(AssertionError):                          # beyond float16's tolerance
        tu.check_symbolic_forward(a * b, [x, y], [x * y + 0.2], dtype=np.float16)
    grads = tu.check_symbolic_backward(a * b, [x, y], [np.ones((2, 3))], [y, x],
                                       dtype=np.float64)
    assert grads["a"].dtype == np.float64
    np.testing.assert_array_equal(grads["a"].asnumpy(), y)
    # "asnumpy": each numpy array's own dtype
    out = tu.check_symbolic_forward(a * b, [x, y.astype(np.float64)], [x * y], dtype="asnumpy")
    assert out[0].dtype == np.float64
    # an NDArray keeps its dtype whatever ``dtype`` says, from any context
    nd = [mx.nd.array(v, dtype=np.float64, ctx=mx.cpu(1)) for v in (x, y)]
    assert tu.check_symbolic_forward(a * b, nd, [x * y])[0].dtype == np.float64


def test_numeric_gradient_in_float64_holds_float64_tolerances():
    np.random.seed(6)
    a, b = _ab()
    x, y = np.random.rand(3, 4) + 0.5, np.random.rand(3, 4) + 0.5
    f = mx.sym.sin(a) * b
    # (the arguments are restored exactly between them: b's differences are taken at a)
    tu.check_numeric_gradient(f, [x, y], rtol=1e-8, atol=1e-10, dtype=np.float64)
    with pytest.raises(AssertionError):       # float32 finite differences are not that close
        tu.check_numeric_gradient(f, [x, y], rtol=1e-8, atol=1e-10)
    with pytest.raises(AssertionError, match="NUMERICAL_a"):
        tu.check_numeric_gradient(mx.sym.BlockGrad(a) * b, [x, y], dtype=np.float64)
    tu.check_numeric_gradient(f, [x, y], dtype=np.float16, rtol=0.1, atol=0.1)


def test_check_consistency_takes_the_widest_dtype_as_reference():
    np.random.seed(7)
    a = mx.sym.Variable("a")
    fc = mx.sym.FullyConnected(a, num_hidden=3, name="fc")
    ctx = [{"ctx": mx.cpu(0), "a": (2, 5), "type_dict": {"a": kind}}
           for kind in (np.float16, np.float64, np.float32)]
    gt = tu.check_consistency(fc, ctx)
    assert gt["fc_output"].dtype == np.float64 and gt["fc_weight"].dtype == np.float64
    relu = mx.sym.Activation(a, act_type="relu", name="act")
    tanh = mx.sym.Activation(a, act_type="tanh", name="act")
    with pytest.raises(AssertionError):
        tu.check_consistency([relu, tanh], ctx[:2])


def test_check_consistency_across_cpu_contexts():
    np.random.seed(3)
    a = mx.sym.Variable("a")
    fc = mx.sym.FullyConnected(a, num_hidden=3, name="fc")
    gt = tu.check_consistency(fc, [{"ctx": mx.cpu(0), "a": (2, 5)},
                                   {"ctx": mx.cpu(1), "a": (2, 5)}])
    assert set(gt) == {"fc_output", "a", "fc_weight", "fc_bias"}
    params = {"a": np.random.rand(2, 5), "fc_weight": np.random.rand(3, 5),
              "fc_bias": np.random.rand(3)}
    gt = tu.check_consistency(fc, [mx.cpu(0), mx.cpu(1)], arg_params=params, grad_req="null")
    np.testing.assert_allclose(gt["fc_output"].asnumpy(),
                               params["a"] @ params["fc_weight"].T + params["fc_bias"],
                               rtol=1e-5)


def test_check_consistency_detects_a_difference():
    a = mx.sym.Variable("a")
    relu = mx.sym.Activation(a, act_type="relu", name="act")
    tanh = mx.sym.Activation(a, act_type="tanh", name="act")
    ctx = [{"ctx": mx.cpu(0), "a": (4, 3)}, {"ctx": mx.cpu(1), "a": (4, 3)}]
    with pytest.raises(AssertionError):
        tu.check_consistency([relu, tanh], ctx)


def test_compare_optimizer():
    tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                         mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), (3, 4), np.float32)
    tu.compare_optimizer(mx.optimizer.Adam(), mx.optimizer.Adam(), [(3, 4), (5,)], np.float32,
                         ntensors=2)
    with pytest.raises(AssertionError):
        tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1),
                             mx.optimizer.SGD(learning_rate=0.2), (3, 4), np.float32)
    # sparse: opt2 gets the sparse arrays, opt1 their dense copies (mxnet's lazy SGD
    # equals the dense one without weight decay; csr takes the dense fallback)
    for ws, gs in (("row_sparse", "row_sparse"), ("default", "row_sparse"), ("csr", "csr")):
        tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                             mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), (3, 4),
                             np.float32, w_stype=ws, g_stype=gs)
    with pytest.raises(MXNetError, match="row_sparse"):
        tu.compare_optimizer(mx.optimizer.SGD(), mx.optimizer.SGD(), [(3, 4)], np.float32,
                             w_stype="row_sparse")


def test_dummy_iter_repeats_the_first_batch():
    it = mx.io.NDArrayIter(np.arange(12.0).reshape(6, 2), np.arange(6.0), batch_size=2)
    dummy = tu.DummyIter(it)
    first = next(dummy)
    for _ in range(5):
        assert next(dummy) is first
    assert dummy.batch_size == 2


def test_random_helpers_draw_like_mxnet():
    # mxnet 1.9.1, np.random.seed(4), the calls in this order
    np.random.seed(4)
    assert [tu.rand_shape_2d(5, 7) for _ in range(3)] == [(3, 7), (2, 1), (1, 3)]
    assert [tu.rand_shape_3d(3, 4, 5, allow_zero_size=True) for _ in range(2)] == \
        [(1, 2, 4), (3, 1, 0)]
    assert tu.rand_shape_nd(4, 6) == (5, 3, 5, 3)
    assert tu.rand_coord_2d(0, 10, 100, 200) == (4, 103)
    assert tu.rand_coord_2d(-5, 5, 0, 3) == (-5, 1)
    assert tu.random_sample(list(range(10)), 4) == [3, 7, 1, 4]
    arrays = tu.random_uniform_arrays((2, 3), (4,), low=-1.0, high=2.0, dtype=np.float64)
    assert [x.dtype for x in arrays] == [np.float64, np.float64]
    np.testing.assert_allclose(arrays[1], [0.802228, -0.496083, 1.200141, 0.225332], atol=1e-6)
    with pytest.raises(TypeError, match=r"Got unexpected argument/s : dict_keys\(\['foo'\]\)"):
        tu.random_uniform_arrays((2,), foo=1)


@pytest.mark.parametrize("axis, keepdims, shape, head", [
    # mxnet 1.9.1, np.sum over np.arange(24.).reshape(2, 3, 4)
    (1, False, (2, 4), [12.0, 15.0, 18.0, 21.0, 48.0, 51.0]),
    ((0, 2), True, (1, 3, 1), [60.0, 92.0, 124.0]),
    (None, False, (), [276.0]),
    ((0, -1), True, (1, 3, 1), [60.0, 92.0, 124.0]),
    (None, True, (1, 1, 1), [276.0]),
])
def test_np_reduce_like_mxnet(axis, keepdims, shape, head):
    out = tu.np_reduce(np.arange(24.0).reshape(2, 3, 4), axis, keepdims, np.sum)
    assert np.shape(out) == shape
    assert np.asarray(out).ravel().tolist()[:6] == head
    assert tu.np_reduce(np.arange(24.0).reshape(2, 3, 4), [2, 0], False, np.max).tolist() == \
        [15.0, 19.0, 23.0]


# -- tolerances, reports and helpers as mxnet 1.9.1 gives them ------------------------------

def test_default_tolerance_tables_and_get_tols():
    # mxnet 1.9.1's tables, in its key order
    names = ["float16", "float32", "float64", "bool", "int8", "uint8", "int32", "uint32",
             "int64", "uint64"]
    assert [str(k) for k in tu.default_rtols()] == names
    assert list(tu.default_rtols().values()) == [1e-2, 1e-4, 1e-5] + [0] * 7
    assert list(tu.default_atols().values()) == [1e-1, 1e-3, 1e-20] + [0] * 7
    assert {str(k): v for k, v in tu.default_numeric_eps().items()} == \
        {"float16": 0.015625, "float32": 0.001953125, "float64": 6.103515625e-05}
    f16, f32, f64 = (np.ones(3, d) for d in (np.float16, np.float32, np.float64))
    assert tu.get_tols(f16, f32, None, None) == (0.01, 0.1)       # the looser dtype wins
    assert tu.get_tols(f32, f64, None, None) == (0.0001, 0.001)
    assert tu.get_tols(np.ones(2, np.int32), np.ones(2, np.int64), None, None) == (0, 0)
    assert tu.get_tols(f16, f64, 0.5, 0.25) == (0.5, 0.25)
    assert tu.get_tols(f32, f32, {np.dtype(np.float32): 0.3},
                       {np.dtype(np.float64): 0.3}) == (0.3, 0.001)
    assert tu.get_tolerance(f16, None, tu.default_atols()) == 0.1
    assert (tu.get_rtol(), tu.get_rtol(0.5), tu.get_rtol(None, np.dtype(np.float16))) == \
        (1e-05, 0.5, 0.01)
    assert (tu.get_atol(), tu.get_atol(None, np.dtype(np.float32))) == (1e-20, 0.001)
    assert (tu.get_etol(), tu.get_etol(0.1)) == (0, 0.1)
    f64 = np.ones(3)                                             # almost_equal: float64's
    assert [tu.almost_equal(f64, f64 + 1e-6), tu.almost_equal(f64, f64 + 1e-4),
            tu.almost_equal(f64, f64 + 1e-4, rtol=1e-3)] == [True, False, True]


def _report_case():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = a.copy()
    b[0, 1] += 1
    b[2, 3] -= 3
    b[1, 2] += 0.5
    b[2, 0] += 2
    return a, b


# mxnet 1.9.1's printed lines for _report_case(), worst first
_REPORT_LINES = [
    "  1: Error 1666.666748  Location of error: (2, 3), p=11.00000000, q=8.00000000",
    "  2: Error 1000.000061  Location of error: (2, 0), p=8.00000000, q=10.00000000",
    "  3: Error 833.333313  Location of error: (0, 1), p=1.00000000, q=2.00000000",
    "  4: Error 303.030304  Location of error: (1, 2), p=6.00000000, q=6.50000000",
]


@pytest.mark.parametrize("mismatches, printed, share", [
    ((10, 10), 4, "mismatch 33.333333%"),
    ((2, 10), 2, "mismatch 33.333333%"),
    ((0, 2), 0, "mismatch at least 25.000000%"),
    ((3, 1), 1, "mismatch at least 16.666667%"),
    ((2, 0), 2, "mismatch 33.333333%"),
    ((5, -1), 4, "mismatch 33.333333%"),
])
def test_mismatch_report_prints_and_counts_like_mxnet(capsys, mismatches, printed, share):
    a, b = _report_case()
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(a, b, names=("p", "q"), mismatches=mismatches)
    assert "Error 1666.666748 exceeds tolerance rtol=1.000000e-04, atol=1.000000e-03 " \
           "(%s).\nLocation of maximum error: (2, 3), p=11.00000000, q=8.00000000" % share \
        in str(e.value)
    out = capsys.readouterr().out
    assert out.startswith("\n*** Maximum errors for vector of size 12:  rtol=0.0001, "
                          "atol=0.001\n\n")
    assert [line for line in out.splitlines() if "Location" in line] == \
        _REPORT_LINES[:printed]


def test_report_of_scalars_broadcasts_nan_and_inf(capsys):
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(np.array(1.0, np.float32), np.array(1.5, np.float32))
    assert "exceeds tolerance rtol=1.000000e-04, atol=1.000000e-03.\n" in str(e.value)
    assert "mismatch" not in str(e.value) and capsys.readouterr().out == ""
    with pytest.raises(AssertionError) as e:   # inf == inf is no violation
        tu.assert_almost_equal(np.array([np.inf, 1, 2], np.float32),
                               np.array([np.inf, 1, 5], np.float32))
    assert "Error 2000.000000 exceeds" in str(e.value) and "mismatch 33.333333%" in str(e.value)
    with pytest.raises(AssertionError) as e:   # a NaN is the worst violation
        tu.assert_almost_equal(np.array([1, np.nan, 2], np.float32),
                               np.array([1, np.nan, 5], np.float32), equal_nan=True)
    assert "Error nan exceeds" in str(e.value) and "(1,), a=nan, b=nan" in str(e.value)
    assert "mismatch 66.666667%" in str(e.value)
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(np.array([1, 2], np.int32), np.array([1, 3], np.int32))
    assert "rtol=0.000000e+00, atol=0.000000e+00 (mismatch 50.000000%)" in str(e.value)
    with pytest.raises(AssertionError) as e:
        tu.assert_allclose(np.ones(3), np.ones(3) + 1e-6)
    assert "Error 9.999990 exceeds tolerance rtol=1.000000e-07, atol=0.000000e+00" \
        in str(e.value)
    tu.assert_allclose(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))


def test_assert_almost_equal_with_err_reports_like_mxnet(capsys):
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal_with_err(np.arange(10.0), np.arange(10.0) + 1, etol=0.15,
                                        names=("u", "v"))
    assert "Error 100000.000000 exceeds tolerance rtol=1.000000e-05, atol=1.000000e-20 " \
           "(mismatch 100.000000%).\nLocation of maximum error: (0,), u=0.00000000, " \
           "v=1.00000000" in str(e.value)
    lines = [line for line in capsys.readouterr().out.splitlines() if "Location" in line]
    assert len(lines) == 10 and lines[-1] == \
        " 10: Error 10000.000000  Location of error: (9,), u=9.00000000, v=10.00000000"
    tu.assert_almost_equal_with_err(np.arange(20.0), np.arange(20.0) + (np.arange(20) < 5),
                                    etol=0.25)           # a share of exactly etol passes
    with pytest.raises(AssertionError, match="mismatch 50.000000%"):
        tu.assert_almost_equal_with_err(np.arange(10.0), np.arange(10.0) + (np.arange(10) < 5),
                                        etol=0.2)


def test_shape_checks_and_ignore_nan():
    with pytest.raises(AssertionError,
                       match=r"a.shape = \(2, 3\) and b.shape = \(3, 2\) are not equal"):
        tu.checkShapes(np.ones((2, 3)), np.ones((3, 2)))
    with pytest.raises(AssertionError, match="are not equal"):
        tu.almost_equal(np.ones((2, 3)), np.ones(3), use_broadcast=False)
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal_ignore_nan(np.array([1.0, np.nan, 3]), np.array([1.0, 5.0, 4]))
    assert "Location of maximum error: (2,), a=3.00000000, b=4.00000000" in str(e.value)


def test_collapse_sum_like_same_array_and_symbol_structure():
    # values from mxnet 1.9.1
    x = np.arange(24.0).reshape(2, 3, 4)
    assert tu.collapse_sum_like(x, (3, 1)).tolist() == [[60.0], [92.0], [124.0]]
    assert tu.collapse_sum_like(x, (1, 3, 4)).tolist() == \
        [[[12.0, 14.0, 16.0, 18.0], [20.0, 22.0, 24.0, 26.0], [28.0, 30.0, 32.0, 34.0]]]
    assert tu.collapse_sum_like(x, ()).tolist() == 276.0
    assert tu.collapse_sum_like(np.zeros((2, 0, 4)), (0, 4)).shape == (0, 4)
    assert tu.collapse_sum_like(np.arange(6.0).reshape(2, 3), (0, 3)).shape == (0, 3)
    assert tu.collapse_sum_like(np.arange(6.0).reshape(2, 3), (2, 3)).tolist() == \
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    for bad in ((2, 2), (1, 2, 3)):
        with pytest.raises(AssertionError):
            tu.collapse_sum_like(np.arange(6.0).reshape(2, 3), bad)
    arr = mx.nd.ones((2, 2))
    assert tu.same_array(arr, arr) and not tu.same_array(arr, arr.copy())
    assert arr.asnumpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]     # left as it was
    v = mx.sym.Variable("v")
    assert tu.same_symbol_structure(mx.sym.relu(v) + 1, mx.sym.relu(v) + 2)
    assert not tu.same_symbol_structure(mx.sym.relu(v), mx.sym.sigmoid(v))


# -- the symbolic checks draw and report as mxnet 1.9.1 -------------------------------------

_X = np.arange(6.0).reshape(2, 3) / 10 + 0.1
_Y = np.arange(6.0).reshape(2, 3) / 5 - 0.3


def test_symbolic_checks_draw_random_arrays_in_mxnets_order():
    a, b = _ab()
    np.random.seed(11)                 # mxnet 1.9.1: the next draw after the check
    tu.check_numeric_gradient(a * b, [_X, _Y])
    assert np.random.rand() == pytest.approx(0.7178491793398788, abs=1e-12)
    np.random.seed(11)
    tu.check_numeric_gradient(a * b, [_X, _Y], grad_nodes=["b"])
    assert np.random.rand() == pytest.approx(0.11166123199466038, abs=1e-12)
    np.random.seed(12)                 # 'add': the random start (by sorted name) + gradient
    grads = tu.check_symbolic_backward(a * b, {"a": _X, "b": _Y}, [np.ones((2, 3))],
                                       {"b": _X, "a": _Y}, grad_req="add")
    np.testing.assert_allclose(grads["a"].asnumpy(), [[0.17299, -0.78143, 0.34244],
                                                      [-1.40074, 1.25314, -0.83472]], atol=1e-4)
    np.testing.assert_allclose(grads["b"].asnumpy(), [[0.10513, 0.07977, -0.50698],
                                                      [3.27182, -0.09782, 1.07246]], atol=1e-4)
    assert np.random.rand() == pytest.approx(0.7645604503388788, abs=1e-12)
    np.random.seed(12)                 # 'null' (from a list of reqs) leaves the start
    grads = tu.check_symbolic_backward(a * b, [_X, _Y], [np.ones((2, 3))],
                                       [_Y, np.zeros((2, 3))], grad_req=["write", "null"])
    np.testing.assert_allclose(grads["b"].asnumpy(), [[0.00513, -0.12023, -0.80698],
                                                      [2.87182, -0.59782, 0.47246]], atol=1e-4)


def test_check_consistency_draws_missing_params_like_mxnet():
    a = mx.sym.Variable("a")
    fc = mx.sym.FullyConnected(a, num_hidden=2, name="fc")
    ctx_list = [{"ctx": mx.cpu(0), "a": (2, 3)}, {"ctx": mx.cpu(1), "a": (2, 3)}]
    np.random.seed(13)
    params = {}
    tu.check_consistency(fc, ctx_list, arg_params=params, scale=0.5)
    assert sorted(params) == ["a", "fc_bias", "fc_weight"]
    assert all(v.dtype == np.float64 for v in params.values())
    np.testing.assert_allclose(params["a"], [[-0.3562, 0.37688, -0.02225],
                                             [0.22591, 0.67255, 0.26617]], atol=1e-5)
    np.testing.assert_allclose(params["fc_bias"], [0.67509, 0.43061], atol=1e-5)
    np.testing.assert_allclose(params["fc_weight"], [[0.73934, -0.52269, -0.39449],
                                                     [-0.6308, 0.28142, -0.12166]], atol=1e-5)
    assert np.random.rand() == pytest.approx(0.03190366643989473, abs=1e-12)
    np.random.seed(13)
    params = {}
    tu.check_consistency(fc, ctx_list, arg_params=params, use_uniform=True,
                         rand_type=np.float32)
    assert all(v.dtype == np.float32 for v in params.values())
    np.testing.assert_allclose(params["fc_bias"], [0.20064, 0.50697], atol=1e-5)


def test_check_consistency_without_raising_prints_mxnets_lines(capsys):
    a = mx.sym.Variable("a")
    relu = mx.sym.Activation(a, act_type="relu", name="act")
    tanh = mx.sym.Activation(a, act_type="tanh", name="act")
    tu.check_consistency([relu, tanh], [{"ctx": mx.cpu(0), "a": (2, 2)},
                                        {"ctx": mx.cpu(1), "a": (2, 2)}], raise_on_err=False)
    lines = [line for line in capsys.readouterr().out.splitlines() if "Err:" in line]
    assert lines == ["Predict Err: ctx 1 vs ctx 0 at act_output",
                     "Train Err: float32 cpu(1) ctx 1 vs float32 cpu(0) ctx 0 at act_output",
                     "Train Err: float32 cpu(1) ctx 1 vs float32 cpu(0) ctx 0 at a"]


def test_numeric_grad_and_check_speed():
    a = mx.sym.Variable("a")
    x = np.array([[0.5, -1.0, 2.0]], np.float32)
    exe = (a * a).bind(mx.cpu(0), args={"a": mx.nd.array(x)}, grad_req="null")
    grads = tu.numeric_grad(exe, {"a": x}, eps=2.0 ** -4)
    np.testing.assert_allclose(grads["a"], 2 * x, rtol=1e-5)   # exact for a quadratic
    np.testing.assert_array_equal(exe.arg_dict["a"].asnumpy(), x)   # restored
    b = mx.sym.Variable("b")
    for typ in ("whole", "forward"):
        assert tu.check_speed(a * b, N=2, typ=typ, a=(2, 3), b=(2, 3)) > 0
    with pytest.raises(ValueError, match='typ can only be "whole" or "forward"'):
        tu.check_speed(a * b, typ="bad", a=(2, 3), b=(2, 3))


def test_check_symbolic_forward_takes_aux_states_as_list_or_dict():
    data = mx.sym.Variable("data")
    bn = mx.sym.BatchNorm(data, fix_gamma=False, eps=1e-3, name="bn")
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    gamma, beta = np.array([2.0, 0.5]), np.array([0.1, -0.1])
    mean, var = np.array([1.0, 2.0]), np.array([4.0, 0.25])
    want = (x - mean) / np.sqrt(var + 1e-3) * gamma + beta      # inference: moving stats
    tu.check_symbolic_forward(bn, [x, gamma, beta], [want], aux_states=[mean, var])
    tu.check_symbolic_forward(bn, [x, gamma, beta], [want],
                              aux_states={"bn_moving_var": var, "bn_moving_mean": mean})
    with pytest.raises(ValueError, match="aux_states do not match"):
        tu.check_symbolic_forward(bn, [x, gamma, beta], [want],
                                  aux_states={"bn_moving_mean": mean})


def test_symbolic_checks_bind_sparse_gradient_arrays():
    """grad_stypes / grad_stype_dict bind gradient arrays of that storage, with nothing
    stored (mxnet's checks); the executor casts the dense gradient into them."""
    lhs = mx.sym.Variable("lhs", stype="row_sparse")
    rhs = mx.sym.Variable("rhs", stype="row_sparse")
    value = np.zeros((4, 3), np.float32)
    value[[1, 3]] = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    loc = {"lhs": mx.nd.array(value).tostype("row_sparse"),
           "rhs": mx.nd.array(2 * value).tostype("row_sparse")}
    s = mx.sym.sparse.elemwise_add(lhs, rhs)
    head = np.zeros((4, 3), np.float32)
    head[2] = 1.0
    grads = tu.check_symbolic_backward(s, loc, [head], [head, head],
                                       grad_stypes={"lhs": "row_sparse", "rhs": "csr"})
    assert grads["lhs"].stype == "row_sparse" and grads["rhs"].stype == "csr"
    np.testing.assert_array_equal(grads["lhs"].indices.asnumpy(), [2])
    with pytest.raises(AssertionError):
        tu.check_symbolic_backward(s, loc, [head], [head, 2 * head],
                                   grad_stypes={"lhs": "row_sparse"})
    tu.check_numeric_gradient(mx.sym.square(lhs), {"lhs": loc["lhs"]},
                              grad_stype_dict={"lhs": "row_sparse"})
    with pytest.raises(MXNetError, match="storage type"):
        tu.check_symbolic_backward(s, loc, [head], [head, head], grad_stypes={"lhs": "dense"})
