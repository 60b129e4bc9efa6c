"""Executors bound to sparse arrays as mxnet 1.9.1 binds them: the storage of their
outputs, gradients and auxiliary states (``runtime/executor_sparse.py``,
``compiler/passes/storage_type.py``).

The cases of ``tests/fixtures/storage_fallback.npz`` were run by mxnet
(``make_storage_fallback_fixtures.py``): each output's and gradient's storage,
stored rows and values are compared with it, on both cpu targets. The other tests
check what the fixtures cannot pin: ``grad_req='add'`` into a sparse gradient, sparse
auxiliary states, sparse head gradients, storage decided by the bound arrays, and a
reshaped executor.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import module_api as mx
from compiler.passes.storage_type import infer_storage

FIX = np.load(os.path.join(os.path.dirname(__file__), "..", "fixtures", "storage_fallback.npz"))
CASES = sorted({k.split("/")[0] for k in FIX.files})


def _array(value, stype):
    arr = mx.nd.array(value)
    return arr if stype == "default" else arr.tostype(stype)


def _args_of(case):
    names = sorted({k.split("/")[1][4:] for k in FIX.files
                    if k.startswith(case + "/arg_") and not k.endswith("_stype")})
    return {n: (FIX[f"{case}/arg_{n}"], str(FIX[f"{case}/arg_{n}_stype"])) for n in names}


def _grads_of(case):
    return {k.split("/")[1][5:-6]: str(FIX[k]) for k in FIX.files
            if k.startswith(case + "/grad_") and k.endswith("_stype")}


def _run(case):
    symbol = mx.sym.load_json(str(FIX[case + "/symbol"]))
    args = {n: _array(v, s) for n, (v, s) in _args_of(case).items()}
    grads = {n: mx.nd.zeros(args[n].shape, stype=s) for n, s in _grads_of(case).items()}
    reqs = {n: "write" if n in grads else "null" for n in symbol.list_arguments()}
    exe = symbol.bind(mx.cpu(), args=args, args_grad=grads, grad_req=reqs)
    exe.forward(is_train=True)
    out = exe.outputs[0]
    seen = {"out": (out.stype, out.asnumpy(), getattr(out, "indices", None))}
    if grads:
        exe.backward(mx.nd.ones(out.shape))
        for n, g in grads.items():
            seen[f"grad_{n}"] = (g.stype, g.asnumpy(), getattr(g, "indices", None))
    return seen


def _ruled_gradients(case):
    """The arguments whose row_sparse gradient has a row rule (the rest are cast from
    dense: mxnet's fallback)."""
    symbol = mx.sym.load_json(str(FIX[case + "/symbol"]))
    bound = {n: s for n, (_, s) in _args_of(case).items()}
    return set(infer_storage(symbol, bound)["rows"])


@pytest.mark.parametrize("case", CASES)
def test_storage_matches_mxnet(case, cpu_target):
    """Storage and values as mxnet's; the stored rows too, except for a gradient cast
    from a dense one, which stores its non-zero rows where mxnet's sparse backward
    kernels may store zero rows as well (``-(x * x)``'s gradient stores every row)."""
    ruled = _ruled_gradients(case)
    for key, (stype, dense, indices) in _run(case).items():
        assert stype == str(FIX[f"{case}/{key}_stype"]), f"{case}: {key} storage"
        np.testing.assert_allclose(dense, FIX[f"{case}/{key}"], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{case}: {key}")
        if stype != "row_sparse":
            continue
        rows, want = indices.asnumpy(), FIX[f"{case}/{key}_indices"]
        if key == "out" or key[5:] in ruled:
            np.testing.assert_array_equal(rows, want, err_msg=f"{case}: {key} stored rows")
        else:
            nonzero = np.flatnonzero(np.abs(dense).reshape(len(dense), -1).sum(axis=1))
            np.testing.assert_array_equal(rows, nonzero, err_msg=f"{case}: {key} rows")
            assert set(rows) <= set(want), f"{case}: {key} stores rows mxnet does not"


def test_the_fixtures_cover_outputs_and_gradients_of_each_storage():
    stypes = {str(FIX[k]) for k in FIX.files if k.endswith("/out_stype")}
    grads = {str(FIX[k]) for k in FIX.files if "/grad_" in k and k.endswith("_stype")}
    assert stypes == {"default", "csr", "row_sparse"} and {"csr", "row_sparse"} <= grads


def _rsp(rows, shape=(5, 3), seed=0):
    rng = np.random.RandomState(seed)
    dense = np.zeros(shape, np.float32)
    dense[rows] = rng.uniform(0.5, 1.5, (len(rows),) + shape[1:])
    return dense


def test_add_into_a_sparse_fallback_gradient(cpu_target):
    """grad_req='add': the array's rows plus the new gradient's, stored where either is
    non-zero, as mxnet's fallback casts the dense sum."""
    x = mx.sym.Variable("x")
    y = mx.sym.Variable("y")
    s = mx.sym.elemwise_mul(x, y)           # dense gradients: the fallback casts them
    xv, yv = _rsp([1, 3]), _rsp([0, 1, 2, 3, 4], seed=1)
    grad = mx.nd.array(_rsp([0], seed=2)).tostype("row_sparse")
    start = grad.asnumpy()
    exe = s.bind(mx.cpu(), args={"x": mx.nd.array(xv), "y": mx.nd.array(yv)},
                 args_grad={"x": grad}, grad_req={"x": "add", "y": "null"})
    head = np.zeros((5, 3), np.float32)
    head[[1, 4]] = 1.0
    for step in (1, 2):
        exe.forward(is_train=True)
        exe.backward(mx.nd.array(head))
        want = start + step * head * yv
        np.testing.assert_allclose(grad.asnumpy(), want, rtol=1e-6)
        assert grad.stype == "row_sparse"
        np.testing.assert_array_equal(grad.indices.asnumpy(), [0, 1, 4])


def test_csr_gradient_of_a_dense_consumer_is_cast(cpu_target):
    x = mx.sym.Variable("x")
    s = mx.sym.relu(x) * 3.0
    xv = np.array([[0.0, -1.0, 2.0], [0.5, 0.0, -3.0]], np.float32)
    grad = mx.nd.zeros((2, 3), stype="csr")
    exe = s.bind(mx.cpu(), args={"x": mx.nd.array(xv)}, args_grad={"x": grad})
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((2, 3)))
    assert grad.stype == "csr"
    np.testing.assert_array_equal(grad.asnumpy(), 3.0 * (xv > 0))
    np.testing.assert_array_equal(grad.indptr.asnumpy(), [0, 1, 2])
    np.testing.assert_array_equal(grad.indices.asnumpy(), [2, 0])


def test_storage_follows_the_bound_arrays():
    """A variable declared without storage, bound to a row_sparse array, gives the
    output mxnet gives: its storage comes from the array (mxnet's bind)."""
    x = mx.sym.Variable("x")
    s = mx.sym.sqrt(x)
    assert infer_storage(s)["outputs"] == ["default"]
    assert infer_storage(s, {"x": "row_sparse"})["outputs"] == ["row_sparse"]
    xv = _rsp([2])
    exe = s.bind(mx.cpu(), args={"x": mx.nd.array(xv).tostype("row_sparse")})
    out = exe.forward()[0]
    assert out.stype == "row_sparse"
    np.testing.assert_array_equal(out.indices.asnumpy(), [2])
    np.testing.assert_allclose(out.asnumpy(), np.sqrt(xv), rtol=1e-6)
    dense = s.bind(mx.cpu(), args={"x": mx.nd.array(xv)}).forward()[0]
    assert dense.stype == "default"


@pytest.mark.parametrize("op,lhs,rhs,want", [
    ("elemwise_add", "row_sparse", "row_sparse", "row_sparse"),
    ("elemwise_add", "csr", "csr", "csr"),
    ("elemwise_add", "row_sparse", "default", "default"),
    ("elemwise_sub", "csr", "default", "default"),
    ("elemwise_mul", "row_sparse", "default", "row_sparse"),
    ("elemwise_mul", "default", "csr", "csr"),
    ("elemwise_mul", "csr", "row_sparse", "default"),
    ("elemwise_div", "row_sparse", "row_sparse", "default"),
    ("_maximum", "row_sparse", "row_sparse", "row_sparse"),
    ("_hypot", "csr", "default", "default"),
])
def test_binary_storage_rules(op, lhs, rhs, want):
    """mxnet's PreferDense / PreferSparse / SparseSparseWithDenseResult rules."""
    fn = getattr(mx.sym, op, None) or getattr(mx.sym._internal, op)
    s = fn(mx.sym.Variable("l", stype=lhs), mx.sym.Variable("r", stype=rhs))
    assert infer_storage(s)["outputs"] == [want]


def test_sparse_auxiliary_states_take_the_update(cpu_target):
    """BatchNorm's moving statistics bound row_sparse: a training forward updates them
    as it updates dense ones."""
    data = mx.sym.Variable("data")
    s = mx.sym.BatchNorm(data, fix_gamma=False, momentum=0.5, name="bn")
    xv = np.random.RandomState(3).normal(size=(4, 3)).astype(np.float32)
    aux = {"bn_moving_mean": np.array([0.5, 0.0, 1.0], np.float32),
           "bn_moving_var": np.array([1.0, 2.0, 0.0], np.float32)}
    results = []
    for stype in ("default", "row_sparse"):
        args = {"data": mx.nd.array(xv), "bn_gamma": mx.nd.ones(3), "bn_beta": mx.nd.zeros(3)}
        auxs = {k: mx.nd.array(v).tostype(stype) for k, v in aux.items()}
        exe = s.bind(mx.cpu(), args=args, aux_states=auxs, grad_req="null")
        out = exe.forward(is_train=True)[0].asnumpy()
        results.append((out, {k: a.asnumpy() for k, a in auxs.items()}))
        assert all(a.stype == stype for a in auxs.values())
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    for k in aux:
        np.testing.assert_allclose(results[0][1][k], results[1][1][k], rtol=1e-6)
        assert not np.allclose(results[0][1][k], aux[k])


def test_sparse_head_gradient():
    x = mx.sym.Variable("x")
    s = mx.sym.square(x)
    xv = np.arange(6, dtype=np.float32).reshape(3, 2)
    grad = mx.nd.zeros((3, 2))
    exe = s.bind(mx.cpu(), args={"x": mx.nd.array(xv)}, args_grad={"x": grad})
    exe.forward(is_train=True)
    head = mx.nd.array(_rsp([1], shape=(3, 2))).tostype("row_sparse")
    exe.backward(head)
    np.testing.assert_allclose(grad.asnumpy(), 2 * xv * head.asnumpy())


def test_reshaped_executor_keeps_sparse_outputs():
    x = mx.sym.Variable("x", stype="row_sparse")
    s = mx.sym.negative(x)
    exe = s.simple_bind(mx.cpu(), x=(6, 2), grad_req="null")
    small = exe.reshape(x=(3, 2))
    value = mx.nd.array(_rsp([0, 2], shape=(3, 2))).tostype("row_sparse")
    small.arg_dict["x"][:] = value
    out = small.forward()[0]
    assert out.stype == "row_sparse" and out.shape == (3, 2)
    np.testing.assert_array_equal(out.indices.asnumpy(), [0, 2])
    np.testing.assert_allclose(out.asnumpy(), -value.asnumpy())


def test_fixture_symbols_are_mxnet_json():
    for case in CASES:
        nodes = json.loads(str(FIX[case + "/symbol"]))["nodes"]
        assert any(n["op"] != "null" for n in nodes)
