"""``_foreach``, ``_while_loop`` and ``_cond`` (``compiler/ops/control_flow.py``) as rows of
the operator table of ``test_ops_compiled``: forward against the loop written in torch
(float64), gradients against autograd and finite differences, on both cpu targets (and,
through ``ROWS``, after every view in ``test_ops_after_views``)."""
from __future__ import annotations

import pytest
import torch

from compiler import symbol as sym
from tests.compiler.test_ops_compiled import Op, check
from tests.conftest import assert_same_launches_on_cpu_targets

S = sym


def _rnn_build(data, h, w, u):
    outs, states = S.contrib.foreach(
        lambda x, st: (lambda hn: (hn * 2.0, [hn]))(S.tanh(S.dot(x, w) + S.dot(st[0], u))),
        data, [h])
    return S.Group([outs, states[0]])


def _rnn_torch(data, h, w, u):
    outs = []
    for t in range(data.shape[0]):
        h = torch.tanh(data[t] @ w + h @ u)
        outs.append(h * 2)
    return [torch.stack(outs), h]


def _two_build(a, b, s):
    outs, states = S.contrib.foreach(
        lambda xs, st: ([xs[0] * st[0], S.sigmoid(xs[1])], [st[0] + xs[0] * xs[1]]),
        [a, b], [s])
    return S.Group(outs + states)


def _two_torch(a, b, s):
    o1, o2 = [], []
    for t in range(a.shape[0]):
        o1.append(a[t] * s)
        o2.append(torch.sigmoid(b[t]))
        s = s + a[t] * b[t]
    return [torch.stack(o1), torch.stack(o2), s]


MAX_ITER = 6


def _while_build(x, s):
    outs, final = S.contrib.while_loop(
        lambda v: S.sum(v) < 6.0, lambda v: (v * v, [v + x]), [s], max_iterations=MAX_ITER)
    return S.Group([outs, final[0]])


def _while_torch(x, s):
    rows = []
    while len(rows) < MAX_ITER and float(s.detach().sum()) < 6.0:
        rows.append(s * s)
        s = s + x
    rows += [torch.zeros_like(s)] * (MAX_ITER - len(rows))
    return [torch.stack(rows), s]


def _cond_build(a, b):
    return S.contrib.cond(S.sum(a) > 0.0, lambda: a * b, lambda: S.exp(a) + b)


def _cond_torch(a, b):
    return a * b if float(a.detach().sum()) > 0 else torch.exp(a) + b


def _scan_build(x):
    outs, states = S.contrib.foreach(lambda xt, st: (xt * st[0], [st[0] + xt]), x,
                                     [S.ones_like(S.sum(x, axis=0))])
    return S.Group([outs, states[0]])


def _scan_torch(x):
    s, outs = torch.ones_like(x[0]), []
    for t in range(x.shape[0]):
        outs.append(x[t] * s)
        s = s + x[t]
    return [torch.stack(outs), s]


def _while_self_build(x):
    return _while_build(x, x)


def _while_self_torch(x):
    return _while_torch(x, x)


def _cond_self_build(x):
    return S.contrib.cond(S.sum(x) > 0.0, lambda: x * x, lambda: S.exp(x))


def _cond_self_torch(x):
    return x * x if float(x.detach().sum()) > 0 else torch.exp(x)


# Rows of one input ``x``, which test_ops_after_views also reads through every view.
ROWS = [
    Op("_foreach_scan", _scan_build, _scan_torch, [[(3, 4)], [(2, 2, 3)]]),
    Op("_while_loop_self", _while_self_build, _while_self_torch, [[(2, 2)], [(3,)]],
       gen={"x": "pos"}),
    Op("_cond_self", _cond_self_build, _cond_self_torch, [[(2, 3)], [(5,)]]),
    Op("_foreach", _rnn_build, _rnn_torch, [[(3, 2, 4), (2, 5), (4, 5), (5, 5)]],
       inputs=("data", "h", "w", "u")),
    Op("_foreach_two_data", _two_build, _two_torch, [[(4, 3), (4, 3), (3,)],
                                                     [(2, 2, 3), (2, 2, 3), (2, 3)]],
       inputs=("a", "b", "s")),
    # x > 0.5 and s in (0.5, 2): the sum passes 6 after one to four steps, never all six
    Op("_while_loop", _while_build, _while_torch, [[(2, 2), (2, 2)], [(3,), (3,)]],
       inputs=("x", "s"), gen={"x": "pos", "s": "pos"}),
    Op("_cond", _cond_build, _cond_torch, [[(2, 3), (2, 3)], [(4,), (4,)], [(3, 1), (3, 1)]],
       inputs=("a", "b")),
]


@pytest.mark.parametrize("op,shapes", [pytest.param(op, s, id=f"{op.name}-{i}")
                                       for op in ROWS for i, s in enumerate(op.shapes)])
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)
