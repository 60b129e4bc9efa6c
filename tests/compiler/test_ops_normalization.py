"""LayerNorm, InstanceNorm, L2Normalization, smooth_l1, one_hot and pick through the
whole compile path on both cpu targets: forward against torch (float64), every
gradient against autograd and central finite differences (the operator table's
``check``), plus mxnet's shapes of the hidden outputs, attribute defaults and
errors. Cases recorded with mxnet 1.9.1 replay in tests/compiler/test_mxnet_fixtures.py."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from runtime.context import cpu
from tests.compiler.test_ops_compiled import Op, check


def _ln(axis, eps=1e-5):
    def f(x, g, b):
        ax = axis % x.dim()
        shape = [x.shape[ax] if i == ax else 1 for i in range(x.dim())]
        mean = x.mean(dim=ax, keepdim=True)
        var = x.var(dim=ax, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps) * g.reshape(shape) + b.reshape(shape)
    return f


def _instance(x, g, b):
    return F.instance_norm(x, weight=g, bias=b, eps=1e-3)


def _l2(mode, eps=1e-10):
    def f(x):
        red = {"instance": tuple(range(1, x.dim())), "channel": (1,),
               "spatial": tuple(range(2, x.dim()))}[mode]
        return x / torch.sqrt((x * x).sum(dim=red, keepdim=True) + eps)
    return f


OPS = [
    Op("LayerNorm_last", lambda x, g, b: sym.LayerNorm(x, g, b), _ln(-1),
       [[(4, 7), (7,), (7,)], [(2, 3, 5), (5,), (5,)], [(1, 1, 6), (6,), (6,)]],
       inputs=("x", "g", "b")),
    Op("LayerNorm_axis1", lambda x, g, b: sym.LayerNorm(x, g, b, axis=1, eps=1e-3),
       _ln(1, 1e-3), [[(3, 5, 2), (5,), (5,)], [(2, 3), (3,), (3,)], [(1, 7, 1), (7,), (7,)]],
       inputs=("x", "g", "b")),
    Op("InstanceNorm", lambda x, g, b: sym.InstanceNorm(x, g, b), _instance,
       [[(2, 3, 5), (3,), (3,)], [(3, 2, 3, 3), (2,), (2,)], [(1, 1, 7), (1,), (1,)]],
       inputs=("x", "g", "b")),
    *[Op(f"L2Normalization_{mode}", lambda x, mode=mode: sym.L2Normalization(x, mode=mode),
         _l2(mode), [[(3, 4, 5)], [(2, 3, 1, 3)], [(1, 5, 2)]]) for mode in
      ("instance", "channel", "spatial")],
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in OPS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    check(op, shapes)


def test_hidden_outputs_and_defaults_follow_mxnet():
    x, g, b = sym.Variable("x"), sym.Variable("g"), sym.Variable("b")
    ln = sym.LayerNorm(x, g, b, name="ln")
    assert ln.list_outputs() == ["ln_output"]
    full = sym.LayerNorm(x, g, b, output_mean_var=True, name="ln2")
    assert full.list_outputs() == ["ln2_output", "ln2_mean", "ln2_std"]
    _, outs, _ = full.infer_shape(x=(2, 3, 4))
    assert outs == [(2, 3, 4), (2, 3, 1), (2, 3, 1)]
    arg_shapes, _, _ = sym.InstanceNorm(x, g, b).infer_shape(x=(2, 3, 4, 4))
    assert arg_shapes == [(2, 3, 4, 4), (3,), (3,)]
    l2 = sym.L2Normalization(x, name="l2")
    assert l2.list_outputs() == ["l2_output"]
    with pytest.raises(Exception, match="spatial"):
        sym.L2Normalization(x, mode="spatial").infer_shape(x=(2, 3))


def _smooth_l1(sigma):
    def f(x):
        s2 = sigma * sigma
        return torch.where(x.abs() > 1 / s2, x.abs() - 0.5 / s2, 0.5 * s2 * x * x)
    return f


SMOOTH_L1 = [Op(f"smooth_l1_{sigma:g}", lambda x, sigma=sigma: sym.smooth_l1(x, scalar=sigma),
                _smooth_l1(sigma), [[(3, 7)], [(2, 1, 5)], [(1, 9)]]) for sigma in (1.0, 2.0, 0.7)]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in SMOOTH_L1 for i, s in enumerate(op.shapes)])
def test_smooth_l1(op, shapes, cpu_target):
    check(op, shapes)


def _one_hot(depth, on=1.0, off=0.0):
    def f(i):
        hit = (i.long().unsqueeze(-1) == torch.arange(depth)).double()
        return off + (on - off) * hit
    return f


def _pick(axis, keepdims=False, wrap=False):
    def f(x, i):
        ax = axis % x.dim()
        j = i.long().remainder(x.shape[ax]) if wrap else i.long().clamp(0, x.shape[ax] - 1)
        if j.dim() < x.dim():
            j = j.unsqueeze(ax)
        out = torch.gather(x, ax, j)
        return out if keepdims else out.squeeze(ax)
    return f


SELECTION = [
    # indices include out-of-range values (-1, depth): a row of off_value, as mxnet
    Op("one_hot", lambda i: sym.one_hot(i, depth=5), _one_hot(5),
       [[(4,)], [(2, 3)], [(1, 1)]], inputs=("i",), gen={"i": "index:7"}, grad=False),
    Op("one_hot_values", lambda i: sym.one_hot(i, depth=3, on_value=2.5, off_value=-1.0),
       _one_hot(3, 2.5, -1.0), [[(5,)], [(2, 2)], [(1, 3)]], inputs=("i",),
       gen={"i": "index:4"}, grad=False),
    # indices 0..M+1: the last ones clip to M - 1
    Op("pick_last", lambda x, i: sym.pick(x, i), _pick(-1), [[(4, 5), (4,)], [(2, 3, 3), (2, 3)],
       [(1, 1), (1,)]], inputs=("x", "i"), gen={"i": "index:6"}, nograd=("i",)),
    Op("pick_axis0_keepdims", lambda x, i: sym.pick(x, i, axis=0, keepdims=True),
       _pick(0, True), [[(3, 4), (4,)], [(5, 2, 3), (2, 3)], [(1, 7), (7,)]],
       inputs=("x", "i"), gen={"i": "index:5"}, nograd=("i",)),
    # indices past the axis wrap; fused with the multiply after it
    Op("pick_wrap", lambda x, i: sym.pick(x, i, axis=1, mode="wrap") * 2,
       lambda x, i: _pick(1, wrap=True)(x, i) * 2, [[(4, 5), (4,)], [(2, 3, 3), (2, 3)]],
       inputs=("x", "i"), gen={"i": "index:13"}, nograd=("i",)),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in SELECTION for i, s in enumerate(op.shapes)])
def test_selection(op, shapes, cpu_target):
    check(op, shapes)


def test_pick_refuses_wrong_index_shapes():
    x, i = sym.Variable("x"), sym.Variable("i")
    with pytest.raises(Exception, match=r"index of shape \(3,\)"):
        sym.pick(x, i).infer_shape(x=(2, 3), i=(3,))


@pytest.mark.parametrize("axis,idx,out,grad", [
    # mxnet 1.9.1: pick(arange(12).reshape(3, 4), idx, mode='wrap'): each index truncated
    # then taken modulo the axis; the gradient of a sum of the output
    (1, [-1.5, 5.9, -6], [3, 5, 10], [0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0]),
    (0, [4, -1, 2.7, -3.2], [4, 9, 10, 3], [0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0])])
def test_pick_wrap_gives_mxnets_values(cpu_target, axis, idx, out, grad):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = sym.pick(sym.Variable("x"), sym.Variable("i"), axis=axis, mode="wrap") \
        .simple_bind(cpu(), x=x.shape, i=(len(idx),), grad_req={"x": "write", "i": "null"})
    got = exe.forward(is_train=True, x=x, i=np.array(idx, np.float32))[0]
    exe.backward(torch.ones(got.shape))
    np.testing.assert_array_equal(got.asnumpy(), out)
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy().ravel(), grad)


def _lrn(nsize, alpha=1e-4, beta=0.75, knorm=2.0):
    def f(x):
        h = nsize // 2
        sq = F.pad(x * x, (0, 0) * (x.dim() - 2) + (h, h))
        window = sum(sq[:, k:k + x.shape[1]] for k in range(2 * h + 1))
        return x * (knorm + alpha / nsize * window) ** -beta
    return f


LRN = [Op("LRN_5", lambda x: sym.LRN(x, nsize=5), _lrn(5),
          [[(2, 7, 3, 2)], [(1, 3, 4)], [(3, 1, 2, 2)]]),
       Op("LRN_3_strong", lambda x: sym.LRN(x, nsize=3, alpha=0.5, beta=0.6, knorm=1.0),
          _lrn(3, 0.5, 0.6, 1.0), [[(2, 4, 3)], [(1, 6, 1, 2)], [(2, 1, 5)]])]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in LRN for i, s in enumerate(op.shapes)])
def test_lrn(op, shapes, cpu_target):
    check(op, shapes)


def _take(axis, wrap=False):
    def f(a, i):
        ax = axis % a.dim()
        j = i.long().remainder(a.shape[ax]) if wrap else i.long().clamp(0, a.shape[ax] - 1)
        out = torch.index_select(a, ax, j.reshape(-1))
        return out.reshape(tuple(a.shape[:ax]) + tuple(i.shape) + tuple(a.shape[ax + 1:]))
    return f


TAKE = [
    # indices past the axis wrap; fused with the multiply after it
    Op("take_wrap", lambda a, i: sym.take(a, i, axis=1, mode="wrap") * 2,
       lambda a, i: _take(1, wrap=True)(a, i) * 2, [[(2, 5, 3), (4,)], [(3, 4), (2, 2)]],
       inputs=("a", "i"), gen={"i": "index:11"}, nograd=("i",)),
    Op("take_axis0", lambda a, i: sym.take(a, i), _take(0),
       [[(5, 3), (4,)], [(6, 2, 3), (2, 3)], [(3, 1), (1,)]], inputs=("a", "i"),
       gen={"i": "index:7"}, nograd=("i",)),
    Op("take_axis1", lambda a, i: sym.take(a, i, axis=1), _take(1),
       [[(2, 5, 3), (4,)], [(3, 4), (2, 2)], [(1, 3, 1), (2,)]], inputs=("a", "i"),
       gen={"i": "index:6"}, nograd=("i",)),
    Op("take_last", lambda a, i: sym.take(a, i, axis=-1) * 2, lambda a, i: _take(-1)(a, i) * 2,
       [[(3, 4), (5,)], [(2, 2, 5), (3, 1)], [(1, 3), (1,)]], inputs=("a", "i"),
       gen={"i": "index:5"}, nograd=("i",)),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in TAKE for i, s in enumerate(op.shapes)])
def test_take(op, shapes, cpu_target):
    check(op, shapes)


@pytest.mark.parametrize("axis,out,grad", [
    # mxnet 1.9.1: take(arange(12).reshape(3, 4), [[-5.7, 4.2], [7, -1]], mode='wrap'),
    # the indices truncated then taken modulo the axis; gradient of a sum of the output
    (0, [4, 5, 6, 7] * 3, [0] * 4 + [3] * 4 + [1] * 4),
    (1, [3, 0, 3, 3, 7, 4, 7, 7, 11, 8, 11, 11], [1, 0, 0, 3] * 3)])
def test_take_wrap_gives_mxnets_values(cpu_target, axis, out, grad):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[-5.7, 4.2], [7, -1]], dtype=np.float32)
    exe = sym.take(sym.Variable("a"), sym.Variable("i"), axis=axis, mode="wrap") \
        .simple_bind(cpu(), a=a.shape, i=idx.shape, grad_req={"a": "write", "i": "null"})
    got = exe.forward(is_train=True, a=a, i=idx)[0]
    exe.backward(torch.ones(got.shape))
    np.testing.assert_array_equal(got.asnumpy().ravel()[:12], out)
    np.testing.assert_array_equal(exe.grad_dict["a"].asnumpy().ravel(), grad)


def _arg(find, axis, keepdims=False):
    def f(x):
        if axis is None:
            out = find(x.reshape(-1), 0).double()
            return out.reshape((1,) * x.dim() if keepdims else (1,))
        return find(x, axis, keepdim=keepdims).double()
    return f


ARG = [
    Op("argmax_last", lambda x: sym.argmax(x, axis=-1), _arg(torch.argmax, -1),
       [[(3, 7)], [(2, 3, 5)], [(1, 1)]], grad=False),
    # 0/1 values: many ties, the first position wins (mxnet, torch)
    Op("argmax_ties_axis0", lambda x: sym.argmax(x, axis=0, keepdims=True),
       _arg(torch.argmax, 0, True), [[(5, 4)], [(3, 2, 3)], [(1, 6)]], gen={"x": "cond"},
       grad=False),
    Op("argmin_ties_axis1", lambda x: sym.argmin(x, axis=1), _arg(torch.argmin, 1),
       [[(4, 6)], [(2, 5, 3)], [(3, 1)]], gen={"x": "cond"}, grad=False),
    Op("argmax_global", lambda x: sym.argmax(x), _arg(torch.argmax, None),
       [[(3, 5)], [(2, 3, 2)], [(1, 1)]], grad=False),
    Op("argmax_then_math", lambda x: sym.argmax(x * 2 - 1, axis=1) + 1,
       lambda x: torch.argmax(x * 2 - 1, 1).double() + 1, [[(4, 9)], [(2, 3)], [(1, 2)]],
       grad=False),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ARG for i, s in enumerate(op.shapes)])
def test_argmax_argmin(op, shapes, cpu_target):
    check(op, shapes)


def _sorted(axis, descending=False, indices=False, k=None, ret="value"):
    def f(x):
        xx = x.reshape(-1) if axis is None else x
        ax = -1 if axis is None else axis
        o = torch.sort(xx, dim=ax, descending=descending, stable=True)
        if k is None:
            return o.indices.double() if indices else o.values
        vals, idx = o.values.narrow(ax, 0, k), o.indices.narrow(ax, 0, k)
        if ret == "mask":
            return torch.zeros_like(xx).scatter_(ax, idx, 1.0).reshape(x.shape)
        if ret == "both":
            return [vals, idx.double()]
        return idx.double() if ret == "indices" else vals
    return f


SORTS = [
    Op("sort_last", lambda x: sym.sort(x), _sorted(-1), [[(3, 6)], [(2, 3, 5)], [(1, 1)]]),
    Op("sort_axis0_desc", lambda x: sym.sort(x, axis=0, is_ascend=False),
       _sorted(0, descending=True), [[(5, 3)], [(4, 2, 2)], [(1, 3)]]),
    Op("sort_flat", lambda x: sym.sort(x, axis=None), _sorted(None), [[(3, 4)], [(2, 1, 3)],
                                                                      [(1, 1)]]),
    # 0/1 data: ties keep their order (stable), as mxnet's std::stable_sort
    Op("argsort_ties", lambda x: sym.argsort(x, axis=1), _sorted(1, indices=True),
       [[(3, 7)], [(2, 5, 2)], [(1, 1)]], gen={"x": "cond"}, grad=False),
    Op("argsort_desc", lambda x: sym.argsort(x, is_ascend=False),
       _sorted(-1, descending=True, indices=True), [[(4, 5)], [(2, 3)], [(1, 6)]], grad=False),
    Op("topk_value", lambda x: sym.topk(x, k=3, ret_typ="value"),
       _sorted(-1, descending=True, k=3), [[(4, 7)], [(2, 3, 5)], [(1, 3)]]),
    Op("topk_indices_axis0", lambda x: sym.topk(x, axis=0, k=2),
       _sorted(0, descending=True, k=2, ret="indices"), [[(5, 3)], [(3, 2, 2)], [(2, 1)]],
       grad=False),
    Op("topk_both_ascend", lambda x: sym.topk(x, k=2, ret_typ="both", is_ascend=True),
       lambda x: _sorted(-1, k=2, ret="both")(x), [[(3, 5)], [(2, 2, 4)], [(1, 2)]]),
    Op("topk_mask", lambda x: sym.topk(x, k=2, ret_typ="mask"),
       _sorted(-1, descending=True, k=2, ret="mask"), [[(3, 5)], [(2, 4)], [(1, 3)]],
       grad=False),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in SORTS for i, s in enumerate(op.shapes)])
def test_sort_argsort_topk(op, shapes, cpu_target):
    check(op, shapes)


def test_explicit_none_is_kept_as_mxnet_keeps_it():
    """sort(x, axis=None) means 'flatten' (the default axis is -1): the attribute is
    kept as the string "None", as mxnet writes it; None for an attribute whose
    default is None is simply the default."""
    x = sym.Variable("x")
    s = sym.sort(x, axis=None, name="s")
    assert s.attr_dict()["s"]["axis"] == "None"
    assert s.infer_shape(x=(3, 4))[1] == [(12,)]
    assert "axis" not in sym.argmax(x, axis=None, name="a").attr_dict().get("a", {})
    assert sym.topk(x, k=2, ret_typ="value", name="t").list_outputs() == ["t_output0"]
    assert sym.topk(x, k=2, ret_typ="both", name="u").list_outputs() == ["u_output0",
                                                                          "u_output1"]
