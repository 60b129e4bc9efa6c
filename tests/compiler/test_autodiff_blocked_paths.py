"""Gradients of variables that reach a head through both a blocked and an
unblocked path, against torch autograd with ``detach`` in place of BlockGrad.

The regression: for ``BlockGrad(x) * y + x`` the gradient of ``x`` folds to the
head gradient itself (``hg + 0``); the array was left holding its old value.
Every case fills the gradient arrays with a sentinel first, so a gradient
that is never written cannot pass.
"""
import pytest
import torch

import module_api as mx

SHAPE = (2, 3)


def _cases():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    bg = mx.sym.BlockGrad
    return {
        # name: (symbol, torch function of (x, y) -> list of outputs)
        "blocked_times_y_plus_x": (bg(x) * y + x, lambda a, b: [a.detach() * b + a]),
        "x_plus_blocked_x": (x + bg(x), lambda a, b: [a + a.detach()]),
        "stop_gradient_alias": (mx.sym.stop_gradient(y) * x + y,
                                lambda a, b: [b.detach() * a + b]),
        "two_heads_crossed": (mx.sym.Group([x + bg(y), y + bg(x)]),
                              lambda a, b: [a + b.detach(), b + a.detach()]),
        "only_blocked_for_y": (bg(y) + x, lambda a, b: [b.detach() + a]),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
@pytest.mark.parametrize("req", ["write", "add"])
def test_gradients_through_blocked_and_unblocked_paths(cpu_target, name, req):
    symbol, torch_fn = _cases()[name]
    torch.manual_seed(0)
    xv, yv = torch.randn(SHAPE), torch.randn(SHAPE)
    old = {"x": torch.full(SHAPE, 123.0), "y": torch.full(SHAPE, -7.0)}
    args = symbol.list_arguments()
    exe = symbol.simple_bind(mx.cpu(), grad_req=req, **{n: SHAPE for n in args})
    for n, v in (("x", xv), ("y", yv)):
        if n in args:
            exe.arg_dict[n][:] = v
            exe.grad_dict[n][:] = old[n]
    outs = exe.forward(is_train=True)
    head_grads = [torch.randn(SHAPE) for _ in outs]
    exe.backward([mx.nd.array(h.numpy()) for h in head_grads])

    a, b = xv.clone().requires_grad_(), yv.clone().requires_grad_()
    expected_outs = torch_fn(a, b)
    torch.autograd.backward(expected_outs, head_grads)
    for got, want in zip(outs, expected_outs):
        torch.testing.assert_close(torch.as_tensor(got.asnumpy()), want.detach())
    for n, t in (("x", a), ("y", b)):
        if n not in args:
            continue
        want = t.grad if t.grad is not None else torch.zeros(SHAPE)
        if req == "add":
            want = want + old[n]
        torch.testing.assert_close(torch.as_tensor(exe.grad_dict[n].asnumpy()), want,
                                   msg=f"grad of {n} ({req})")


def test_nothing_behind_a_blocked_head_is_kept_for_backward():
    """mxnet's test_zero_prop: a graph ending in stop_gradient allocates what the
    inference graph does (no forward values kept for a zero backward), and its
    head is written by the kernel that computes it (no extra copy)."""
    data = mx.sym.Variable("data")
    for _ in range(6):
        data = data * data
    shape = {"data": (4, 3, 16, 16)}
    big = data.simple_bind(mx.cpu(), **shape)
    small1 = data.simple_bind(mx.cpu(), grad_req="null", **shape)
    small2 = mx.sym.stop_gradient(data).simple_bind(mx.cpu(), **shape)
    for exe in (big, small1, small2):
        exe.forward(is_train=exe is not small1)
    assert small2._total_exec_bytes == small1._total_exec_bytes == 0
    assert big._total_exec_bytes > 0
    assert len(small2._train_prog.launches_in("fwd")) == len(small1._infer_prog.launches)
