"""add_n / ElementWiseSum, nansum, norm and moments through the full compile path
(both cpu targets), as rows of the operator table of ``test_ops_compiled``."""
from __future__ import annotations

import math

import pytest
import torch

from compiler import symbol as sym
from runtime.context import cpu
from tests.compiler.test_ops_compiled import RED, SAME2, U3, Op, check
from tests.conftest import assert_same_launches_on_cpu_targets
from runtime.ndarray import torch_dtype

SAME3 = [[s[0]] * 3 for s in SAME2]


def _dims(x, axis):
    if axis is None:
        return list(range(x.dim()))
    axis = (axis,) if isinstance(axis, int) else axis
    return sorted(a % x.dim() for a in axis)


def _reduce(fn, axis=None, keepdims=False, exclude=False):
    def torch_fn(x):
        dims = _dims(x, axis)
        if exclude and axis is not None:
            dims = [d for d in range(x.dim()) if d not in dims]
        y = fn(x, dims)
        if not keepdims:
            y = y.reshape([s for i, s in enumerate(x.shape) if i not in dims] or [1])
        return y
    return torch_fn




def _sum(x, d):
    return x.sum(dim=d, keepdim=True)


def _prod(x, d):
    for a in d:
        x = x.prod(dim=a, keepdim=True)
    return x


def _moments(axes, keepdims=False):
    def f(x):
        dims = _dims(x, axes)
        m = x.mean(dim=dims, keepdim=True)
        v = ((x - m) ** 2).mean(dim=dims, keepdim=True)
        if not keepdims:
            out = [s for i, s in enumerate(x.shape) if i not in dims] or [1]
            m, v = m.reshape(out), v.reshape(out)
        return [m, v]
    return f


def _l1(x, d):
    return x.abs().sum(dim=d, keepdim=True)


def _l2(x, d):
    return (x * x).sum(dim=d, keepdim=True).sqrt()


ROWS = [
    Op("add_n_2", lambda x, y: sym.add_n(x, y), lambda x, y: x + y, SAME2, inputs=("x", "y")),
    Op("add_n_3", lambda x, y, z: sym.add_n(x, y * z, z), lambda x, y, z: x + y * z + z,
       SAME3, inputs=("x", "y", "z")),
    Op("ElementWiseSum_1", lambda x: sym.ElementWiseSum(x), lambda x: x, U3),
    Op("ElementWiseSum_3", lambda x, y, z: sym.ElementWiseSum(x, y, z, num_args=3),
       lambda x, y, z: x + y + z, SAME3, inputs=("x", "y", "z")),
    Op("nansum_all", lambda x: sym.nansum(x), _reduce(_sum), RED),
    Op("nansum_ax1k", lambda x: sym.nansum(x, axis=1, keepdims=True),
       _reduce(_sum, 1, True), RED),
    Op("nansum_axm1x", lambda x: sym.nansum(x, axis=-1, exclude=True),
       _reduce(_sum, -1, exclude=True), RED),
    Op("prod_all", lambda x: sym.prod(x), _reduce(_prod), RED),
    Op("prod_ax1k", lambda x: sym.prod(x, axis=1, keepdims=True), _reduce(_prod, 1, True), RED),
    Op("prod_axm1x", lambda x: sym.prod(x, axis=-1, exclude=True),
       _reduce(_prod, -1, exclude=True), RED),
    Op("prod_ax02", lambda x: sym.prod(x, axis=(0, 2)), _reduce(_prod, (0, 2)),
       [[(2, 3, 5)], [(3, 1, 7)], [(1, 4, 3)]]),
    # a broadcast input: the product of a value repeated along the reduced axis
    Op("prod_of_bcast", lambda x: sym.prod(sym.broadcast_to(x, shape=(3, 5)), axis=1),
       lambda x: x.expand(3, 5).prod(dim=1), [[(3, 1)], [(1, 1)], [(3, 5)]]),
    Op("nanprod_ax1", lambda x: sym.nanprod(x, axis=1), _reduce(_prod, 1), RED),
    Op("norm_all", lambda x: sym.norm(x), _reduce(_l2), RED),
    Op("norm_l1_ax1", lambda x: sym.norm(x, ord=1, axis=1), _reduce(_l1, 1), RED),
    Op("norm_l2_axm1k", lambda x: sym.norm(x, axis=-1, keepdims=True),
       _reduce(_l2, -1, True), RED),
    Op("norm_l2_ax01", lambda x: sym.norm(x, axis=(0, 1)), _reduce(_l2, (0, 1)), RED),
    Op("cumsum_flat", lambda x: sym.cumsum(x), lambda x: torch.cumsum(x.reshape(-1), 0), RED),
    Op("cumsum_ax1", lambda x: sym.cumsum(x, axis=1), lambda x: torch.cumsum(x, 1), RED),
    Op("cumsum_axlast", lambda x: sym.cumsum(x, axis=1), lambda x: torch.cumsum(x, 1), U3),
    Op("cumsum_ax0", lambda x: sym._np_cumsum(x, axis=0), lambda x: torch.cumsum(x, 0), U3),
    Op("moments_ax1", lambda x: sym.moments(x, axes=(1,)), _moments((1,)), RED),
    Op("moments_axm1k", lambda x: sym.moments(x, axes=(-1,), keepdims=True),
       _moments((-1,), True), RED),
    Op("moments_all", lambda x: sym.moments(x, axes=(0, 1)), _moments((0, 1)), RED),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


def test_nansum_skips_nans_and_zeroes_their_gradient(cpu_target):
    x = sym.Variable("x")
    exe = sym.nansum(x, axis=1).simple_bind(cpu(), x=(2, 3))
    exe.arg_dict["x"][:] = torch.tensor([[1.0, math.nan, 2.0], [math.nan, 3.0, 0.0]])
    out = exe.forward(is_train=True)[0]
    assert torch.equal(torch.as_tensor(out), torch.tensor([3.0, 3.0]))
    exe.backward([torch.tensor([1.0, 2.0])])
    assert torch.equal(torch.as_tensor(exe.grad_dict["x"]),
                       torch.tensor([[1.0, 0.0, 1.0], [0.0, 2.0, 2.0]]))


def test_nanprod_and_prod_at_nan_and_zero_match_mxnet(cpu_target):
    """mxnet 1.9.1: nanprod counts NaN as 1 with a 0 gradient there; the gradient of
    prod is y / x, NaN (0 / 0) at a zero."""
    x = sym.Variable("x")
    data = torch.tensor([[1.0, math.nan, 2.0], [math.nan, 3.0, 0.0]])
    exe = sym.nanprod(x, axis=1).simple_bind(cpu(), x=(2, 3))
    exe.arg_dict["x"][:] = data
    assert torch.equal(torch.as_tensor(exe.forward(is_train=True)[0]), torch.tensor([2.0, 0.0]))
    exe.backward([torch.tensor([1.0, 2.0])])
    assert torch.allclose(torch.as_tensor(exe.grad_dict["x"]),
                          torch.tensor([[2.0, 0.0, 1.0], [0.0, 0.0, math.nan]]), equal_nan=True)
    exe = sym.prod(x, axis=1).simple_bind(cpu(), x=(2, 3))
    exe.arg_dict["x"][:] = torch.tensor([[1.0, 0.0, 2.0], [4.0, 3.0, -2.0]])
    assert torch.equal(torch.as_tensor(exe.forward(is_train=True)[0]), torch.tensor([0.0, -24.0]))
    exe.backward([torch.tensor([1.0, 2.0])])
    assert torch.allclose(torch.as_tensor(exe.grad_dict["x"]),
                          torch.tensor([[0.0, math.nan, 0.0], [-12.0, -16.0, 24.0]]),
                          equal_nan=True)


def test_norm_gradient_at_zero_matches_mxnet(cpu_target):
    """mxnet 1.9.1: the L2 gradient is NaN where the norm is 0, the L1 gradient is 0."""
    x = sym.Variable("x")
    for ord_, want in ((2, [[math.nan, math.nan], [0.6, 0.8]]), (1, [[0.0, 0.0], [1.0, 1.0]])):
        exe = sym.norm(x, ord=ord_, axis=1).simple_bind(cpu(), x=(2, 2))
        exe.arg_dict["x"][:] = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
        exe.forward(is_train=True)
        exe.backward([torch.ones(2)])
        got = torch.as_tensor(exe.grad_dict["x"])
        assert torch.allclose(got, torch.tensor(want), equal_nan=True), (ord_, got)


def test_errors():
    x = sym.Variable("x")
    with pytest.raises(Exception, match="moments: empty axes"):
        sym.moments(x).infer_shape(x=(2, 3))
    with pytest.raises(Exception, match="ord=1 and ord=2"):
        sym.norm(x, ord=3).infer_shape(x=(2, 3))
    with pytest.raises(Exception, match="add_n: input arg1 has shape"):
        sym.add_n(x, sym.Variable("y")).infer_shape(x=(2, 3), y=(3, 2))


@pytest.mark.parametrize("dtype,in_dtype", [("float64", "float32"), (None, "int32"),
                                            ("int64", "float32")])
def test_cumsum_dtype(dtype, in_dtype, cpu_target):
    """mxnet 1.9.1: the result has ``dtype`` (None: the input's, int32 kept)."""
    x = sym.Variable("x")
    s = sym.cumsum(x, axis=1) if dtype is None else sym.cumsum(x, axis=1, dtype=dtype)
    exe = s.simple_bind(cpu(), grad_req="null", type_dict={"x": in_dtype}, x=(2, 3))
    exe.arg_dict["x"][:] = torch.tensor([[1, 2, 4], [3, 5, 9]])
    out = torch.as_tensor(exe.forward()[0])
    assert torch_dtype(out) == getattr(torch, dtype or in_dtype)
    assert torch.equal(out.double(), torch.tensor([[1.0, 3, 7], [3, 8, 17]], dtype=torch.float64))


def test_cumsum_refuses_overlong_and_negative_axes():
    """mxnet 1.9.1 fails on a negative axis too (at run time)."""
    x = sym.Variable("x")
    with pytest.raises(Exception, match="cumsum: scanning 8193 elements"):
        sym.cumsum(x).infer_shape(x=(3, 2731))
    with pytest.raises(Exception, match=r"cumsum: axis=-1 is out of range"):
        sym.cumsum(x, axis=-1).infer_shape(x=(3, 4))
