"""Operator edges where this project gave another answer than mxnet 1.9.1, on both cpu
targets (mxnet's values: ``tests/fixtures/make_operator_edge_fixtures.py``):

* ``mod`` by zero is 0 (NDArray ``%`` gave NaN for floats and raised for integers);
  mxnet's integer ``mod`` has zero gradients (mshadow's ``mod_grad`` / ``mod_rgrad``
  are 0 but for floating-point types), where ours gave NaN and -inf;
* a head gradient reaching an integer output is that dtype's (truncated), as mxnet's;
* ``pow`` follows C's special cases (``(-2) ** inf`` was -inf, ``(-1) ** inf`` -1 or
  NaN, ``1 ** nan`` NaN on the Triton targets) and, on the ``cpu`` target, C's
  accuracy (one ATen ``pow``: ``exp(b log a)`` was off by up to 5 ulp, enough to fail
  mxnet's finite-difference check of ``2 ** x``);
* SoftmaxOutput with ``multi_output`` takes mxnet's three label shapes;
* ``sample_normal`` with one-element parameters ran its draws 0-d and failed;
* ``norm`` refused more than two axes; mxnet reduces over all of them;
* ``BatchNorm_v1`` (mxnet's legacy operator) did not exist, nor ``softmax``'s
  ``length`` input (``use_length=True``).
"""
import json
import os

import numpy as np
import pytest

import module_api as mx

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "mxnet_operator_edges.json")
with open(FIXTURE) as _f:
    MX = json.load(_f)


def _values(listed):
    return np.array([float(v) for v in listed])


def test_ndarray_mod_by_zero_and_signs_are_mxnets():
    for dt, want in MX["nd_mod"].items():
        a, b = mx.nd.array(MX["A"], dtype=dt), mx.nd.array(MX["B"], dtype=dt)
        c = a.copy()
        c %= b
        got = {"a%b": a % b, "a%0": a % 0, "5%b": 5 % b, "a%3": a % 3, "-5%b": -5 % b,
               "a%=b": c}
        for form, value in got.items():
            assert value.dtype == np.dtype(dt), (dt, form)
            np.testing.assert_allclose(value.asnumpy(), _values(want[form]), rtol=1e-6,
                                       err_msg=f"{dt} {form}")


def _run(sym, args, head):
    grads = {k: mx.nd.zeros(np.shape(v)) for k, v in args.items()}
    exe = sym.bind(mx.cpu(), args={k: mx.nd.array(v) for k, v in args.items()},
                   args_grad=grads)
    out = exe.forward(is_train=True)[0]
    exe.backward([mx.nd.array(head)])
    return out, grads


def _sym_cases():
    va, vb = mx.sym.Variable("a"), mx.sym.Variable("b")
    ia, ib = mx.sym.cast(va, dtype="int32"), mx.sym.cast(vb, dtype="int32")
    return {"int_mod": ia % ib, "int_mul3": ia * 3, "int_plus": ia + ib,
            "int_mul_cast_back": mx.sym.cast(ia * ib, dtype="float32"),
            "int_mod_scalar": ia % 3, "int_rmod_scalar": 9 % ib, "float_mod": va % vb}


@pytest.mark.parametrize("case", sorted(MX["sym"]))
def test_integer_mod_and_integer_head_gradients_are_mxnets(cpu_target, case):
    """Each a graph head, the casts fused with the arithmetic."""
    sym = _sym_cases()[case]
    want = MX["sym"][case]
    if case == "float_mod":
        args = {"a": np.array(MX["A"], np.float32), "b": np.array(MX["B"], np.float32)}
        head = np.ones(len(MX["A"]), np.float32)
    else:
        args = {"a": np.array(MX["A"][:6], np.float32),
                "b": np.array([4, 2, 3, 0.4, 2, -2], np.float32)}
        args = {k: v for k, v in args.items() if k in sym.list_arguments()}
        head = np.array([0.5, 1.7, 2.2, 1.0, -1.3, 3.9], np.float32)
    out, grads = _run(sym, args, head)
    assert out.dtype == np.dtype(want["out_dtype"])
    np.testing.assert_allclose(out.asnumpy(), _values(want["out"]), rtol=1e-6)
    for name, g in want["grads"].items():
        np.testing.assert_allclose(grads[name].asnumpy(), _values(g), rtol=1e-6,
                                   err_msg=f"{case}: gradient of {name}")


@pytest.mark.parametrize("s", sorted(MX["pow"]["cases"]))
def test_pow_special_cases_are_cs(cpu_target, s):
    x = np.array(_values(MX["pow"]["x"]), np.float32)
    want = MX["pow"]["cases"][s]
    v = mx.sym.Variable("v")
    base = float(s)
    got = {"s**x": (base ** v).eval(mx.cpu(), v=mx.nd.array(x))[0],
           "x**s": (v ** base).eval(mx.cpu(), v=mx.nd.array(x))[0],
           "power": mx.nd.power(mx.nd.array(x), mx.nd.full(x.shape, base))}
    for form, value in got.items():
        np.testing.assert_allclose(value.asnumpy(), _values(want[form]), rtol=2e-6,
                                   err_msg=f"{s}: {form}")


def _ulps(got, exact):
    got = np.asarray(got, np.float64)
    return np.max(np.abs(got - exact) / np.spacing(np.abs(exact).astype(np.float32)))


def test_pow_accuracy(cpu_target):
    """Within an ulp of the correctly rounded power on the cpu target (ATen's pow: 1.5
    ulp of the exact value); the Triton targets' exp(b log a) within a few."""
    v, w = mx.sym.Variable("v"), mx.sym.Variable("w")
    near = np.array(_values(MX["pow"]["near"]), np.float32)
    got = (2.0 ** v).eval(mx.cpu(), v=mx.nd.array(near))[0].asnumpy()
    bound = 1.0 if cpu_target == "cpu" else 8.0         # mxnet's float32 values
    assert _ulps(got, _values(MX["pow"]["2**near"])) <= bound
    rs = np.random.RandomState(0)
    x = rs.uniform(-10, 10, 2000).astype(np.float32)
    e = rs.uniform(-3, 3, 2000).astype(np.float32)
    pos = np.abs(x) + np.float32(0.1)
    cases = [((2.0 ** v), {"v": x}, 2.0 ** x.astype(np.float64)),
             ((v ** 3.7), {"v": pos}, pos.astype(np.float64) ** np.float64(np.float32(3.7))),
             (mx.sym.power(v, w), {"v": pos, "w": e}, pos.astype(np.float64) ** e)]
    bound = 1.5 if cpu_target == "cpu" else 32.0        # the exact values
    for sym, args, exact in cases:
        got = sym.eval(mx.cpu(), **{k: mx.nd.array(a) for k, a in args.items()})[0]
        assert _ulps(got.asnumpy(), exact) <= bound, sym.list_outputs()


@pytest.mark.parametrize("shape", [(2, 4), (2, 2, 2), (2, 1, 2, 2)])
def test_softmax_output_multi_output_takes_mxnets_label_shapes(cpu_target, shape):
    so = MX["softmax_output"]
    data = np.array(so["data"], np.float32).reshape(2, 3, 2, 2)
    labels = np.array(so["labels"], np.float32).reshape(shape)
    d, l = mx.sym.Variable("data"), mx.sym.Variable("label")
    sym = mx.sym.SoftmaxOutput(d, l, multi_output=True, normalization="valid",
                               use_ignore=True, ignore_label=1)
    g = mx.nd.zeros(data.shape)
    exe = sym.bind(mx.cpu(), args={"data": mx.nd.array(data), "label": mx.nd.array(labels)},
                   args_grad={"data": g}, grad_req={"data": "write", "label": "null"})
    exe.forward(is_train=True)
    exe.backward()
    want = so["cases"][str(shape)]
    np.testing.assert_allclose(exe.outputs[0].asnumpy().ravel(), want["out"], rtol=1e-5)
    np.testing.assert_allclose(g.asnumpy().ravel(), want["grad"], rtol=1e-5, atol=1e-7)
    with pytest.raises(mx.MXNetError, match=r"label shape \(2, 3\)"):
        sym.infer_shape(data=(2, 3, 2, 2), label=(2, 3))


def test_sample_normal_with_one_element_parameters(cpu_target):
    mu, sigma = mx.nd.array([10.0]), mx.nd.array([0.5])
    forms = {"none": {}, "()": {"shape": ()}, "1": {"shape": 1}, "(1,)": {"shape": (1,)},
             "(1, 1)": {"shape": (1, 1)}, "(2,)": {"shape": (2,)}}
    mx.random.seed(11)
    for name, kw in forms.items():
        s = mx.nd.sample_normal(mu=mu, sigma=sigma, **kw)
        assert list(s.shape) == MX["sample_normal_shapes"][name], name
        assert np.all(np.abs(s.asnumpy() - 10.0) < 5.0), (name, s.asnumpy())
    # one element, drawn alone: a graph whose only tensor is the draw's seed
    a = mx.nd.random.normal(3, 1, shape=(1,))
    b = mx.nd.random.uniform(0, 1, shape=(1, 1))
    assert a.shape == (1,) and b.shape == (1, 1) and 0 <= float(b.asscalar()) < 1


def test_norm_over_three_axes(cpu_target):
    want = MX["norm"]
    x = mx.nd.array(np.arange(60).reshape(3, 4, 5) / 10.0 - 2.0)
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.norm(x, axis=(0, 1, 2))
    y.backward()
    np.testing.assert_allclose(y.asnumpy(), want["l2_all3"], rtol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy().ravel(), want["l2_all3_grad"], rtol=1e-5)
    np.testing.assert_allclose(mx.nd.norm(x, ord=1, axis=(0, 1, 2)).asnumpy(), want["l1_all3"],
                               rtol=1e-6)
    got = mx.nd.norm(x, axis=(0, 2), keepdims=True)
    assert got.shape == (1, 4, 1)
    np.testing.assert_allclose(got.asnumpy().ravel(), want["l2_02_keep"], rtol=1e-6)


@pytest.mark.parametrize("case", [0, 1])
def test_batchnorm_v1_is_mxnets(cpu_target, case):
    want = MX["batchnorm_v1"]["cases"][case]
    x = np.array(MX["batchnorm_v1"]["x"], np.float32).reshape(2, 3, 2, 2)
    e = mx.sym.BatchNorm_v1(mx.sym.Variable("data"), name="bn", **want["attrs"]).simple_bind(
        mx.cpu(), data=x.shape)
    e.arg_dict["data"][:] = x
    e.arg_dict["bn_gamma"][:] = 2
    e.arg_dict["bn_beta"][:] = 0.5
    e.aux_dict["bn_moving_var"][:] = 2
    e.aux_dict["bn_moving_mean"][:] = 0.3
    e.forward(is_train=True)
    e.backward(mx.nd.array(np.arange(24).reshape(x.shape)))
    np.testing.assert_allclose(e.outputs[0].asnumpy().ravel(), want["out"], rtol=1e-5)
    for name, g in want["grads"].items():
        np.testing.assert_allclose(e.grad_dict[name].asnumpy().ravel(), g, rtol=1e-4, atol=1e-4,
                                   err_msg=name)
    np.testing.assert_allclose(e.aux_dict["bn_moving_var"].asnumpy(), want["moving_var"],
                               rtol=1e-6)


@pytest.mark.parametrize("case", [0, 1])
def test_softmax_with_length(cpu_target, case):
    """Rows softmaxed over their first ``length`` positions, 0 past them (a row of length
    0 is all 0, its gradient too), fused with the product after it; as a symbol with the
    lengths as an int32 argument, and through mx.nd under autograd."""
    sm = MX["softmax_length"]
    want = sm["cases"][case]
    x = np.array(sm["x"], np.float32).reshape(2, 3, 2)
    lengths = np.array(sm["length"], np.int32)
    head = np.arange(12).reshape(2, 3, 2) / 7.0 + 1
    d, l = mx.sym.Variable("d"), mx.sym.Variable("l")
    sym = mx.sym.softmax(d, l, axis=1, use_length=True, temperature=want["temperature"]) * 3
    assert sym.list_arguments() == ["d", "l"]
    assert sym.infer_shape(d=(2, 3, 2))[0] == [(2, 3, 2), (2, 2)]
    grads = {"d": mx.nd.zeros((2, 3, 2)), "l": mx.nd.zeros((2, 2), dtype="int32")}
    exe = sym.bind(mx.cpu(), args={"d": mx.nd.array(x), "l": mx.nd.array(lengths, dtype="int32")},
                   args_grad=grads)
    exe.forward(is_train=True)
    exe.backward(mx.nd.array(head))
    np.testing.assert_allclose(exe.outputs[0].asnumpy().ravel(), want["out"], rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(grads["d"].asnumpy().ravel(), want["grad"], rtol=1e-4, atol=1e-6)
    assert not grads["l"].asnumpy().any()
    xa = mx.nd.array(x)
    xa.attach_grad()
    with mx.autograd.record():
        y = mx.nd.softmax(xa, mx.nd.array(lengths, dtype="int32"), axis=1, use_length=True,
                          temperature=want["temperature"]) * 3
    y.backward(mx.nd.array(head))
    np.testing.assert_allclose(xa.grad.asnumpy().ravel(), want["grad"], rtol=1e-4, atol=1e-6)
    with pytest.raises(mx.MXNetError, match="integer"):
        mx.sym.softmax(d, l, axis=1, use_length=True).infer_type(d=np.float32, l=np.float32)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_softmax_with_length_after_a_view_in_other_dtypes(cpu_target, dtype):
    """The rows read through a transpose, in float16 and float64 data."""
    sm = MX["softmax_length"]
    x = np.array(sm["x"], np.float32).reshape(2, 3, 2)
    d, l = mx.sym.Variable("d"), mx.sym.Variable("l")
    sym = mx.sym.softmax(mx.sym.transpose(d, axes=(0, 2, 1)), l, axis=1, use_length=True)
    out = sym.eval(mx.cpu(), d=mx.nd.array(x.transpose(0, 2, 1), dtype=dtype),
                   l=mx.nd.array(sm["length"], dtype="int32"))[0]
    assert out.dtype == np.dtype(dtype)
    want = np.array(sm["cases"][0]["out"]) / 3.0       # the fixture's case multiplies by 3
    np.testing.assert_allclose(out.asnumpy().ravel(), want,
                               rtol=2e-3 if dtype == "float16" else 1e-6, atol=1e-7)
