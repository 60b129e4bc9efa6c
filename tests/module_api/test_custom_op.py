"""``mx.operator`` (CustomOp / CustomOpProp / register), ``mx.sym.Custom`` and
``mx.nd.Custom``: the prop's signature, shapes and dtypes as mxnet 1.9.1 reads them,
``assign`` with every req, and a bound graph cut at Custom nodes, whose gradients
through the Python op between two compiled segments match finite differences."""
import numpy as np
import pytest
import torch

import module_api as mx
from compiler.artifacts.compile import compile_symbol
from compiler.errors import MXNetError


class _MulAdd(mx.operator.CustomOp):
    """(a, b) -> (a * b * scale, a + b ** 2), with its gradient."""

    def __init__(self, scale):
        self.scale = scale

    def forward(self, is_train, req, in_data, out_data, aux):
        a, b = in_data
        self.assign(out_data[0], req[0], a * b * self.scale)
        self.assign(out_data[1], req[1], a + b * b)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        a, b = in_data
        g0, g1 = out_grad
        self.assign(in_grad[0], req[0], g0 * b * self.scale + g1)
        self.assign(in_grad[1], req[1], g0 * a * self.scale + 2 * b * g1)


@mx.operator.register("test_muladd")
class _MulAddProp(mx.operator.CustomOpProp):
    seen_kwargs = []

    def __init__(self, scale="1"):
        super().__init__(need_top_grad=True)
        _MulAddProp.seen_kwargs.append(scale)
        self.scale = float(scale)

    def list_arguments(self):
        return ["a", "b"]

    def list_outputs(self):
        return ["prod", "mix"]

    def create_operator(self, ctx, shapes, dtypes):
        return _MulAdd(self.scale)


class _Counter(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        if is_train:
            aux[0][:] += 1
        # float32 + float64 arrays: mxnet refuses the mix, so the op converts
        self.assign(out_data[0], req[0], in_data[0] + aux[0].astype(in_data[0].dtype))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0])


@mx.operator.register("test_counter")
class _CounterProp(mx.operator.CustomOpProp):
    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [in_shape[0]]

    def infer_type(self, in_type):
        return in_type, [in_type[0]], [np.float64]

    def create_operator(self, ctx, shapes, dtypes):
        assert shapes == [[2, 3], [2, 3]] and dtypes[0] == 0   # mxnet's float32 code
        return _Counter()


@pytest.mark.parametrize("req,want", [("null", [5.0, 5.0]), ("write", [2.0, 3.0]),
                                      ("inplace", [2.0, 3.0]), ("add", [7.0, 8.0])])
def test_assign_honours_every_req(req, want):
    dst = mx.nd.array([5.0, 5.0])
    mx.operator.CustomOp().assign(dst, req, mx.nd.array([2.0, 3.0]))
    assert dst.asnumpy().tolist() == want


def test_signature_shapes_and_types_come_from_the_prop():
    a = mx.sym.Variable("a")
    op = mx.sym.Custom(a, scale=2, op_type="test_muladd", name="ma")
    assert op.list_arguments() == ["a", "ma_b"]
    assert op.list_outputs() == ["ma_prod", "ma_mix"]
    assert "2" in _MulAddProp.seen_kwargs          # attributes reach the prop as strings
    args, outs, aux = op.infer_shape(a=(3, 4), ma_b=(3, 4))
    assert args == [(3, 4), (3, 4)] and outs == [(3, 4), (3, 4)] and aux == []
    _, out_types, _ = op.infer_type(a=np.float64, ma_b=np.float64)
    assert out_types == [np.float64, np.float64]
    c = mx.sym.Custom(a, op_type="test_counter", name="cnt")
    assert c.list_arguments() == ["a"] and c.list_auxiliary_states() == ["cnt_count"]
    _, _, aux_types = c.infer_type(a=np.float32)
    assert aux_types == [np.float64]


def test_unregistered_op_type_and_compiling_a_custom_node_are_clear_errors():
    with pytest.raises(MXNetError, match="op_type 'no_such_op' is not registered"):
        mx.sym.Custom(mx.sym.Variable("x"), op_type="no_such_op")
    op = mx.sym.Custom(mx.sym.Variable("a"), op_type="test_muladd", name="m")
    with pytest.raises(MXNetError, match="Custom 'm' runs in Python"):
        compile_symbol(op[0], {"a": (2, 2), "m_b": (2, 2)})


def _two_segment_net():
    """FC -> tanh -> Custom(., w) -> FC -> sum: a Python op between two compiled segments."""
    x, w = mx.sym.Variable("x"), mx.sym.Variable("w")
    h = mx.sym.tanh(mx.sym.FullyConnected(x, num_hidden=4, name="fc1"), name="act")
    prod, mix = mx.sym.Custom(h, w, scale=1.5, op_type="test_muladd", name="ma")
    y = mx.sym.broadcast_mul(mx.sym.FullyConnected(prod, num_hidden=3, name="fc2"),
                             mx.sym.sum(mix, axis=1, keepdims=True))
    return mx.sym.MakeLoss(mx.sym.sum(y))


def _bind(net, grad_req="write"):
    shapes = {"x": (2, 5), "w": (2, 4)}
    exe = net.simple_bind(mx.cpu(), grad_req=grad_req,
                          type_dict={n: np.float64 for n in net.list_arguments()}, **shapes)
    rng = np.random.RandomState(3)
    for name, arr in exe.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    return exe


def test_gradient_through_custom_between_compiled_segments_matches_finite_differences(
        cpu_target):
    net = _two_segment_net()
    exe = _bind(net)
    exe.forward(is_train=True)
    exe.backward()
    kinds = [type(e).__name__ for e in exe.segment_executors]
    assert kinds == ["Executor", "CustomExecutor", "Executor"]
    eps = 1e-6
    for name in ("x", "w", "fc1_weight", "fc2_bias"):
        arr = exe.arg_dict[name]
        flat = arr.reshape(-1)
        numeric = np.zeros(flat.numel())
        for k in range(flat.numel()):
            old = float(flat[k])
            values = []
            for delta in (eps, -eps):
                flat[k] = old + delta
                values.append(float(exe.forward(is_train=False)[0].asnumpy().sum()))
            flat[k] = old
            numeric[k] = (values[0] - values[1]) / (2 * eps)
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy().ravel(), numeric,
                                   rtol=1e-5, atol=1e-7, err_msg=name)


def test_grad_req_add_accumulates_through_the_python_op():
    exe = _bind(_two_segment_net(), grad_req="add")
    for arr in exe.grad_dict.values():
        arr[:] = 0
    exe.forward(is_train=True)
    exe.backward()
    once = {n: g.asnumpy().copy() for n, g in exe.grad_dict.items()}
    exe.forward(is_train=True)
    exe.backward()
    for name, g in exe.grad_dict.items():
        np.testing.assert_allclose(g.asnumpy(), 2 * once[name], rtol=1e-12, err_msg=name)
    assert np.abs(once["w"]).sum() > 0


def test_auxiliary_states_are_the_ops_to_update():
    x = mx.sym.Variable("x")
    net = mx.sym.Custom(mx.sym.relu(x), op_type="test_counter", name="cnt")
    exe = net.simple_bind(mx.cpu(), x=(2, 3))
    exe.arg_dict["x"][:] = 1.0
    assert exe.aux_dict["cnt_count"].dtype == np.float64
    exe.forward(is_train=True)
    exe.forward(is_train=True)
    exe.forward(is_train=False)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), np.full((2, 3), 3.0))
    np.testing.assert_allclose(exe.aux_dict["cnt_count"].asnumpy(), np.full((2, 3), 2.0))


def test_nd_custom_runs_the_op_imperatively():
    a, b = mx.nd.array([[1.0, 2.0]]), mx.nd.array([[3.0, -1.0]])
    prod, mix = mx.nd.Custom(a, b, scale="2", op_type="test_muladd")
    assert prod.asnumpy().tolist() == [[6.0, -4.0]] and mix.asnumpy().tolist() == [[10.0, 3.0]]
    out = mx.nd.Custom(a=a, b=b, op_type="test_muladd")
    assert out[0].asnumpy().tolist() == [[3.0, -2.0]]


def test_debug_str_shows_the_python_op_and_the_segments():
    net = _two_segment_net()
    text = net.debug_str()
    assert "Op:Custom, Name=ma" in text and "Runs in Python: mx.operator 'test_muladd'" in text
    exe = _bind(net)
    listing = exe.debug_str()
    assert "Segment 1 on cpu(0) (level 1, Python operator)" in listing
    assert "_MulAdd.forward / backward" in listing


def _bucket_sym(key):
    data = mx.sym.Variable("data")                                  # (2, key, 3)
    fc = mx.sym.FullyConnected(data, num_hidden=4, flatten=False, name="fc")
    prod, mix = mx.sym.Custom(fc, mx.sym.ones_like(fc), op_type="test_muladd", name="ma")
    out = mx.sym.LinearRegressionOutput(mx.sym.mean(prod + mix, axis=1), name="lro")
    return out, ("data",), ("lro_label",)


def test_module_and_bucketing_module_train_through_a_custom_node():
    mod = mx.mod.BucketingModule(_bucket_sym, default_bucket_key=6, context=mx.cpu())
    mod.bind(data_shapes=[("data", (2, 6, 3))], label_shapes=[("lro_label", (2, 4))])
    mod.init_params(mx.init.Uniform(0.1))
    mod.init_optimizer(optimizer_params={"learning_rate": 0.05})
    rng = np.random.RandomState(0)
    losses = []
    for step in range(12):
        key = 6 if step % 2 == 0 else 3
        data = mx.nd.array(rng.uniform(-1, 1, (2, key, 3)))
        label = mx.nd.array(np.full((2, 4), 0.5))
        batch = mx.io.DataBatch([data], [label], bucket_key=key,
                                provide_data=[mx.io.DataDesc("data", (2, key, 3))],
                                provide_label=[mx.io.DataDesc("lro_label", (2, 4))])
        mod.forward(batch, is_train=True)
        out = mod.get_outputs()[0].asnumpy()
        losses.append(float(((out - 0.5) ** 2).mean()))
        mod.backward()
        mod.update()
    assert sorted(mod._buckets) == [3, 6]
    assert losses[-1] < losses[0] * 0.9, losses


def test_inspect_lists_the_segments_and_no_group_crosses_the_python_op(tmp_path):
    from compiler.cli import format_text, inspect_model
    path = tmp_path / "net-symbol.json"
    _two_segment_net().save(str(path))
    info = inspect_model(str(path), [("x", (2, 5)), ("w", (2, 4))], train=True,
                         target="cpu")
    assert info["custom_nodes"] == [{"segment": 1, "name": "ma", "op_type": "test_muladd",
                                     "inputs": ["act_output_copy", "w"],
                                     "outputs": ["ma_prod", "ma_mix"]}]
    segments = {g["segment"] for g in info["groups"]}
    assert segments == {0, 2}
    assert all("Custom" not in g["ops"] for g in info["groups"])
    text = format_text(info)
    assert "[py] Custom 'ma' (op_type test_muladd)" in text


def test_partition_isolates_each_custom_node_in_a_segment_of_its_own():
    from compiler.frontend.context_placement import partition_by_context
    from compiler.symbol_node import topo
    x = mx.sym.Variable("x")
    a = mx.sym.relu(x, name="a")
    side = mx.sym.sigmoid(x, name="side")               # independent of the Python op
    c = mx.sym.Custom(a, op_type="test_counter", name="c")
    out = mx.sym.elemwise_add(mx.sym.tanh(c, name="t"), side, name="out")
    nodes = topo(out._outputs)
    where = {id(n): "cpu" for n in nodes}
    isolate = {id(n) for n in nodes if n.op == "Custom"}
    segments, outputs = partition_by_context(out, where, isolate)
    listed = [(s.level, s.isolated, [n.name for n, _ in s.entries]) for s in segments]
    assert listed == [(0, None, ["a"]), (1, "c", ["c"]), (2, None, ["out"])]
    assert segments[1].received == {"a_output_copy": (0, 0)}
    assert segments[2].received == {"c_output_copy": (1, 0)}
    assert [n.op for n in topo(segments[2].symbol._outputs) if n.op != "null"] == \
        ["tanh", "sigmoid", "elemwise_add"]                # the side branch joins its consumer
    assert outputs == [(2, 0)]


class _Sqr(mx.operator.CustomOp):
    """mxnet's test_custom_op ``sqr``: an auxiliary state set in forward, read in backward."""

    def forward(self, is_train, req, in_data, out_data, aux):
        aux[0][:] = 1
        self.assign(out_data[0], req[0], in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        assert (aux[0].asnumpy() == 1).all()
        self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])


@mx.operator.register("test_sqr")
class _SqrProp(mx.operator.CustomOpProp):
    def list_auxiliary_states(self):
        return ["aux"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [in_shape[0]]

    def create_operator(self, ctx, shapes, dtypes):
        return _Sqr()


class _Ones(mx.operator.CustomOp):
    def __init__(self, length, depth):
        self.output = np.ones((length, depth), dtype=np.float32)

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], self.output)


@mx.operator.register("test_no_input")
class _OnesProp(mx.operator.CustomOpProp):
    def __init__(self, length, depth):
        super().__init__()
        self.length, self.depth = int(length), int(depth)

    def list_arguments(self):
        return []

    def infer_shape(self, in_shape):
        return [], [(self.length, self.depth)], []

    def infer_type(self, in_type):
        return [], [np.float32], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Ones(self.length, self.depth)


def test_aux_given_by_keyword_and_an_op_without_inputs_as_mxnets_test_custom_op():
    data = mx.sym.Variable("data")
    op = mx.sym.Custom(data=data, aux=mx.sym.Variable("aux"), name="sqr", op_type="test_sqr")
    assert op.list_arguments() == ["data"] and op.list_auxiliary_states() == ["aux"]
    x = np.random.RandomState(1).uniform(-1, 1, (4, 10))
    exe = op.bind(mx.cpu(), {"data": mx.nd.array(x)},
                  args_grad={"data": mx.nd.zeros((4, 10))},
                  aux_states={"aux": mx.nd.zeros((4, 10))})
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((4, 10)) * 3)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), x * x, rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), 6 * x, rtol=1e-6)
    ones = mx.nd.Custom(length=3, depth=2, op_type="test_no_input")
    assert ones.shape == (3, 2) and (ones.asnumpy() == 1).all()
    sym = mx.sym.Custom(length=3, depth=2, op_type="test_no_input", name="c") * 2
    exe = sym.simple_bind(mx.cpu())
    assert (exe.forward()[0].asnumpy() == 2).all()


class _Broken(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        assert False, "the user's bug"


@mx.operator.register("test_broken")
class _BrokenProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return _Broken()


def test_an_error_in_the_python_code_is_an_mxnet_error_naming_the_node():
    with pytest.raises(MXNetError, match="Error in CustomOp.forward of Custom 'bad'.*"
                                         "AssertionError: the user's bug"):
        mx.nd.Custom(mx.nd.zeros((2, 2)), op_type="test_broken", name="bad")
    exe = mx.sym.Custom(mx.sym.Variable("x"), op_type="test_broken", name="b2").simple_bind(
        mx.cpu(), x=(2, 2))
    with pytest.raises(MXNetError, match="Custom 'b2'"):
        exe.forward()


def test_check_numeric_gradient_of_mxnets_sqr_case():
    from module_api.test_utils import check_numeric_gradient
    op = mx.sym.Custom(data=mx.sym.Variable("data"), aux=mx.sym.Variable("aux"), name="sqr",
                       op_type="test_sqr")
    x = mx.nd.array(np.random.RandomState(5).uniform(-1, 1, size=(4, 10)))
    check_numeric_gradient(op, [x], [mx.nd.zeros_like(x)])
    check_numeric_gradient(mx.sym.cast(op, dtype="float32"), [x], [mx.nd.zeros_like(x)])


def test_monitor_reports_the_python_ops_output_and_its_gradients():
    """The Monitor evaluates the graph op by op: Custom by its forward, its gradient
    (``_backward_Custom``) by its backward."""
    exe = _bind(_two_segment_net())
    mon = mx.mon.Monitor(1, pattern="ma_.*|ma_backward.*")
    mon.install(exe)
    mon.tic()
    exe.forward(is_train=True)
    exe.backward()
    stats = {name: value for _, name, value in mon.toc()}
    assert {"ma_prod", "ma_mix", "ma_backward_output0", "ma_backward_output1"} <= set(stats)
    grad_w = exe.grad_dict["w"].asnumpy()          # w reaches the loss only through the op
    assert float(stats["ma_backward_output1"]) == pytest.approx(
        np.linalg.norm(grad_w) / np.sqrt(grad_w.size), rel=1e-6)


def test_get_all_registered_operators_lists_every_entry_and_alias():
    from module_api.operator import get_all_registered_operators
    ops = get_all_registered_operators()
    assert isinstance(ops, list) and ops == sorted(set(ops))
    # an operator, an alias of one, and a Python operator registered above
    assert {"Activation", "Softmax", "BatchNorm_v1", "Custom"} <= set(ops)
    assert "test_muladd" not in ops      # Python operators are mx.sym.Custom's op_type
