"""The last of mxnet 1.9.1's catalogue (``compiler/ops/catalogue_rest.py`` ...) against
mxnet's numbers (``tests/fixtures/make_catalogue_rest_fixtures.py``), on both cpu
targets, symbolically and through ``mx.nd``."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import module_api as mx
from tests.conftest import assert_same_launches_on_cpu_targets

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures")
with open(os.path.join(FIXTURES, "catalogue_rest.json")) as _f:
    CASES = {c["name"]: c for c in json.load(_f)["cases"]}
ARRAYS = np.load(os.path.join(FIXTURES, "catalogue_rest.npz"))


def _of(op):
    return sorted(k for k, c in CASES.items() if c["op"] == op)


def _close(got, want, what, tol=1e-5):
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, mxnet {want.dtype}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=tol, atol=tol, err_msg=what)


# ------------------------------------------------------------------ reset_arrays

def _reset_inputs(case):
    return [ARRAYS[f"{case['name']}:in{i}"] for i in range(case["num"])]


@pytest.mark.parametrize("name", _of("reset_arrays"))
def test_reset_arrays_nd(name, cpu_target):
    case = CASES[name]
    arrs = [mx.nd.array(x, dtype=x.dtype) for x in _reset_inputs(case)]
    ret = mx.nd.reset_arrays(*arrs, num_arrays=case["num"])
    assert isinstance(ret, list) and len(ret) == case["returned"] == 0
    for i, a in enumerate(arrs):
        _close(a.asnumpy(), ARRAYS[f"{name}:after{i}"], f"{name} array {i}")


@pytest.mark.parametrize("name", _of("reset_arrays"))
def test_reset_arrays_symbol(name, cpu_target):
    # mxnet 1.9.1 crashes composing it; here it is a symbol without outputs whose
    # inputs are auxiliary states, zeroed on every forward
    case = CASES[name]
    xs = _reset_inputs(case)
    vs = [mx.sym.var(f"a{i}") for i in range(case["num"])]
    s = mx.sym.reset_arrays(*vs, num_arrays=case["num"], name="r")
    assert s.list_outputs() == [] and s.list_arguments() == []
    assert s.list_auxiliary_states() == [f"a{i}" for i in range(case["num"])]
    aux = {f"a{i}": mx.nd.array(x, dtype=x.dtype) for i, x in enumerate(xs)}
    exe = s.bind(mx.cpu(), {}, aux_states=aux, grad_req="null")
    assert exe.forward() == []
    for i in range(case["num"]):
        _close(exe.aux_dict[f"a{i}"].asnumpy(), ARRAYS[f"{name}:after{i}"], f"{name} a{i}")
    assert_same_launches_on_cpu_targets(exe)


def test_reset_arrays_in_a_group_beside_outputs(cpu_target):
    x, a = mx.sym.var("x"), mx.sym.var("a")
    g = mx.sym.Group([x * 2, mx.sym.reset_arrays(a, num_arrays=1)])
    assert g.list_arguments() == ["x"] and g.list_auxiliary_states() == ["a"]
    exe = g.simple_bind(mx.cpu(), x=(3,), a=(2, 2), grad_req="null")
    exe.arg_dict["x"][:] = 1.5
    exe.aux_dict["a"][:] = 4.0
    out = exe.forward()
    assert len(out) == 1 and out[0].asnumpy().tolist() == [3.0] * 3
    assert exe.aux_dict["a"].asnumpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_reset_arrays_errors():
    with pytest.raises(mx.MXNetError, match="floating point"):
        mx.nd.reset_arrays(mx.nd.array([1, 2], dtype="int32"), num_arrays=1)
    with pytest.raises(mx.MXNetError, match="array_2"):
        mx.nd.reset_arrays(mx.nd.ones(2), mx.nd.ones(2), num_arrays=3)


# ------------------------------------------------------------ group_adagrad_update

@pytest.mark.parametrize("name", _of("group_adagrad_update"))
def test_group_adagrad_symbol(name, cpu_target):
    case, k = CASES[name], name
    s = mx.sym.contrib.group_adagrad_update(mx.sym.var("w"), mx.sym.var("g"),
                                            mx.sym.var("h"), name="u", **case["attrs"])
    assert s.list_arguments() == ["w", "g"] and s.list_auxiliary_states() == ["h"]
    exe = s.bind(mx.cpu(), {"w": mx.nd.array(ARRAYS[f"{k}:weight"]),
                            "g": mx.nd.array(ARRAYS[f"{k}:grad1"])},
                 aux_states={"h": mx.nd.array(ARRAYS[f"{k}:history"])}, grad_req="null")
    for step in (1, 2):
        exe.arg_dict["g"][:] = ARRAYS[f"{k}:grad{step}"]
        out = exe.forward()[0].asnumpy()
        _close(out, ARRAYS[f"{k}:weight{step}"], f"{k} weight after step {step}")
        _close(exe.aux_dict["h"].asnumpy(), ARRAYS[f"{k}:history{step}"],
               f"{k} history after step {step}")
        exe.arg_dict["w"][:] = out
    assert_same_launches_on_cpu_targets(exe)


@pytest.mark.parametrize("name", _of("group_adagrad_update"))
def test_group_adagrad_nd(name, cpu_target):
    case, k = CASES[name], name
    w, h = mx.nd.array(ARRAYS[f"{k}:weight"]), mx.nd.array(ARRAYS[f"{k}:history"])
    for step in (1, 2):
        g = mx.nd.array(ARRAYS[f"{k}:grad{step}"])
        mx.nd.contrib.group_adagrad_update(w, g, h, out=w, **case["attrs"])
        _close(w.asnumpy(), ARRAYS[f"{k}:weight{step}"], f"{k} weight after step {step}")
        _close(h.asnumpy(), ARRAYS[f"{k}:history{step}"], f"{k} history after step {step}")


def test_group_adagrad_shapes():
    s = mx.sym.contrib.group_adagrad_update(mx.sym.var("w"), mx.sym.var("g"),
                                            mx.sym.var("h"), lr=0.1, name="u")
    assert s.infer_shape(w=(4, 3), h=(4,)) == ([(4, 3), (4, 3)], [(4, 3)], [(4,)])
    with pytest.raises(mx.MXNetError, match=r"history.*\(3, 1\)"):
        s.infer_shape(w=(4, 3), h=(3, 1))
    with pytest.raises(mx.MXNetError, match="'lr'"):
        mx.sym.contrib.group_adagrad_update(mx.sym.var("w"), mx.sym.var("g"),
                                            mx.sym.var("h"))


# ------------------------------------------------------------ quantized_batch_norm

def _qbn_arrays(name):
    case = CASES[name]
    return [mx.nd.array(ARRAYS[f"{name}:{n}"], dtype=ARRAYS[f"{name}:{n}"].dtype)
            for n in case["inputs"]]


def _qbn_check(outs, name):
    assert [o.dtype for o in outs] == [np.int8, np.float32, np.float32]
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o.asnumpy(), ARRAYS[f"{name}:out{i}"],
                                      err_msg=f"{name} output {i}")


@pytest.mark.parametrize("name", _of("quantized_batch_norm"))
def test_quantized_batch_norm_nd(name, cpu_target):
    _qbn_check(mx.nd.contrib.quantized_batch_norm(*_qbn_arrays(name), **CASES[name]["attrs"]),
               name)


@pytest.mark.parametrize("name", _of("quantized_batch_norm"))
def test_quantized_batch_norm_symbol(name, cpu_target):
    case = CASES[name]
    s = mx.sym.contrib.quantized_batch_norm(mx.sym.var("d"), name="q", **case["attrs"])
    names = ["d"] + [f"q_{n}" for n in case["inputs"][1:]]
    assert s.list_inputs() == names
    assert s.list_auxiliary_states() == ["q_moving_mean", "q_moving_var"]
    assert s.list_outputs() == ["q_output", "q_min_output", "q_max_output"]
    given = dict(zip(names, _qbn_arrays(name)))
    aux = {n: given.pop(n) for n in s.list_auxiliary_states()}
    exe = s.bind(mx.cpu(), given, aux_states=aux, grad_req="null")
    _qbn_check(exe.forward(), name)
    assert_same_launches_on_cpu_targets(exe)


def test_quantized_batch_norm_refusals():
    args = [mx.nd.array(np.ones((2, 3, 4)), dtype="int8")] + [mx.nd.ones(3)] * 4 + \
        [mx.nd.array([-1.0]), mx.nd.array([1.0])]
    with pytest.raises(mx.MXNetError, match="calib"):
        mx.nd.contrib.quantized_batch_norm(*args)
    with pytest.raises(mx.MXNetError, match="axis"):
        mx.nd.contrib.quantized_batch_norm(*args, axis=2, min_calib_range=-1.0,
                                           max_calib_range=1.0)
    s = mx.sym.contrib.quantized_batch_norm(mx.sym.var("d"), name="q")
    with pytest.raises(mx.MXNetError, match="int8"):
        s.infer_type(d="float32")
    assert s.infer_shape(d=(4, 5))[0] == [(4, 5), (5,), (5,), (1,), (1,)]


# ------------------------------------------------------------------- boolean_mask

@pytest.mark.parametrize("name", _of("boolean_mask"))
def test_boolean_mask_nd_and_gradient(name, cpu_target):
    x, m = ARRAYS[f"{name}:data"], ARRAYS[f"{name}:index"]
    xn = mx.nd.array(x, dtype=x.dtype)
    xn.attach_grad()
    with mx.autograd.record():
        y = mx.nd.contrib.boolean_mask(xn, mx.nd.array(m, dtype=m.dtype))
    want = ARRAYS[f"{name}:out"]
    assert y.shape == want.shape
    _close(y.asnumpy(), want, f"{name} output", tol=0)
    head = ARRAYS[f"{name}:head"]
    y.backward(mx.nd.array(head, dtype=head.dtype))
    _close(xn.grad.asnumpy(), ARRAYS[f"{name}:grad"], f"{name} gradient", tol=0)


def test_boolean_mask_symbol_does_not_bind():
    s = mx.sym.contrib.boolean_mask(mx.sym.var("data"), mx.sym.var("index"), name="bm")
    assert s.list_arguments() == ["data", "index"] and s.list_outputs() == ["bm_output"]
    # mxnet 1.9.1: no complete answer, and () for the output in the partial one
    assert s.infer_shape(data=(4, 3), index=(4,)) == (None, None, None)
    assert s.infer_shape_partial(data=(4, 3), index=(4,)) == ([(4, 3), (4,)], [()], [])
    for bind in (lambda: s.simple_bind(mx.cpu(), data=(4, 3), index=(4,)),
                 lambda: s.bind(mx.cpu(), {"data": mx.nd.ones((4, 3)),
                                           "index": mx.nd.ones(4)})):
        with pytest.raises(mx.MXNetError, match="_contrib_boolean_mask 'bm'.*values"):
            bind()


def test_boolean_mask_refusals():
    x = mx.nd.ones((4, 3))
    with pytest.raises(mx.MXNetError, match="axis=1"):
        mx.nd.contrib.boolean_mask(x, mx.nd.ones(4), axis=1)
    with pytest.raises(mx.MXNetError, match=r"\(3,\).*\(4, 3\)"):
        mx.nd.contrib.boolean_mask(x, mx.nd.ones(3))
    with pytest.raises(mx.MXNetError, match="1-D"):
        mx.nd.contrib.boolean_mask(x, mx.nd.ones((4, 1)))


def test_boolean_mask_calls_share_a_program_per_count(cpu_target):
    from runtime import imperative
    x = mx.nd.array(np.arange(12.0).reshape(4, 3))
    a = mx.nd.contrib.boolean_mask(x, mx.nd.array([1, 0, 1, 0]))
    before = len(imperative._CACHE)
    b = mx.nd.contrib.boolean_mask(x, mx.nd.array([0, 1, 0, 1]))
    assert len(imperative._CACHE) == before          # the same count: the same Program
    assert a.asnumpy()[:, 0].tolist() == [0.0, 6.0] and b.asnumpy()[:, 0].tolist() == [3.0, 9.0]


# --------------------------------------------------------------- getnnz, edge_id

def _csr(name):
    case = CASES[name]
    parts = tuple(ARRAYS[f"{name}:{p}"] for p in ("data", "indices", "indptr"))
    return mx.nd.sparse.csr_matrix(parts, shape=tuple(case["shape"]), dtype=case["dtype"])


@pytest.mark.parametrize("name", _of("csr"))
def test_getnnz_counts_stored_entries(name, cpu_target):
    c = _csr(name)
    for attrs, key in (({}, "nnz"), ({"axis": 1}, "nnz_rows")):
        got = mx.nd.contrib.getnnz(c, **attrs)
        want = ARRAYS[f"{name}:{key}"]
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got.asnumpy(), want, err_msg=f"{name} {key}")


@pytest.mark.parametrize("name", _of("csr"))
def test_edge_id_every_pair(name, cpu_target):
    u, v = ARRAYS[f"{name}:u"], ARRAYS[f"{name}:v"]
    got = mx.nd.contrib.edge_id(_csr(name), mx.nd.array(u), mx.nd.array(v))
    want = ARRAYS[f"{name}:edge_id"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.asnumpy(), want, err_msg=name)


def test_csr_operators_refusals():
    c = _csr("csr_small")
    with pytest.raises(mx.MXNetError, match="axis = 0"):
        mx.nd.contrib.getnnz(c, axis=0)
    with pytest.raises(mx.MXNetError, match="csr"):
        mx.nd.contrib.getnnz(mx.nd.ones((2, 2)))
    with pytest.raises(mx.MXNetError, match="differ"):
        mx.nd.contrib.edge_id(c, mx.nd.array([0, 1]), mx.nd.array([1]))
    # an operator with no sparse form: sqrt maps 0 to 0, so it keeps the csr pattern, as
    # mxnet's sparse sqrt (it was refused before the storage fallback)
    root = mx.nd.sqrt(c)
    assert root.stype == "csr"
    np.testing.assert_array_equal(root.asnumpy(), np.sqrt(c.asnumpy()))
    s = mx.sym.contrib.getnnz(mx.sym.var("data", stype="csr"), axis=1, name="nz")
    assert s.infer_shape(data=(4, 3))[1] == [(4,)]
    assert s.infer_type(data="float32")[1] == [np.int64]
    with pytest.raises(mx.MXNetError, match="_contrib_getnnz 'nz'.*imperatively"):
        s.bind(mx.cpu(), {"data": c}, grad_req="null").forward()


def test_reset_arrays_survives_copy_and_compose(cpu_target):
    import copy
    x, a = mx.sym.var("x"), mx.sym.var("a")
    g = mx.sym.Group([x * 2, mx.sym.reset_arrays(a, num_arrays=1)])
    for s in (copy.copy(g), copy.deepcopy(g), g(x=mx.sym.var("y") + 1)):
        assert s.list_auxiliary_states() == ["a"]
        inputs = {n: (3,) for n in s.list_arguments()}
        exe = s.simple_bind(mx.cpu(), a=(2,), grad_req="null", **inputs)
        exe.aux_dict["a"][:] = 4.0
        exe.forward()
        assert exe.aux_dict["a"].asnumpy().tolist() == [0.0, 0.0]


def test_reset_arrays_json_round_trip():
    x, a, b = mx.sym.var("x"), mx.sym.var("a"), mx.sym.var("b")
    for s in (mx.sym.reset_arrays(a, b, num_arrays=2, name="r"),
              mx.sym.Group([x * 2, mx.sym.reset_arrays(a, num_arrays=1, name="r")])):
        back = mx.sym.load_json(s.tojson())
        assert back.list_outputs() == s.list_outputs()
        assert back.list_auxiliary_states() == s.list_auxiliary_states()
        assert back.tojson() == s.tojson()
