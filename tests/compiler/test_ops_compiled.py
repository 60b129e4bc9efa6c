"""Every first-tier operator of the public contract (mxnet's first tier) through the FULL compile path.

One table (``OPS``) and one helper (``check``), as tinygrad's test_ops: each
row builds a symbol from named variables, gives an independent torch version
of the operator and, for loss heads, mxnet's documented gradient formula and
the objective it is the gradient of. ``check`` binds the symbol with
``simple_bind`` (passes -> fusion -> codegen -> Triton interpreter), then

  (a) compares the forward outputs with the torch version (float64 oracle,
      rtol 1e-4 / atol 1e-5), in training mode and, where asked, inference;
  (b) runs ``backward`` (random ``out_grads`` for non-loss heads, none for
      loss heads) and compares every input gradient with torch autograd of
      ``sum(out * out_grad)`` -- or, for loss heads, with mxnet's formula;
  (c) compares a few entries of every gradient with central finite
      differences of the same float64 objective.

Each row runs on three or more shapes including non-power-of-two and size-1
dims. Statistics of Dropout(p>0), BatchNorm's moving statistics and
inference mode, and grad_req add/null have their own tests at the end.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from compiler import symbol as sym
from compiler.errors import MXNetError
from runtime.context import cpu
from tests.conftest import assert_same_launches_on_cpu_targets

RTOL, ATOL = 1e-4, 1e-5
FD_EPS = 1e-6
FD_ENTRIES = 3


@dataclass
class Op:
    """One row of the table.

    build(*vars) -> Symbol, vars named by ``inputs``; torch(*xs) -> tensor or
    list (inputs then aux states, float64). ``gen`` gives per-input value
    kinds (see ``_make``); ``nograd`` names inputs bound with grad_req null.
    Loss heads give ``mx_grad(*xs) -> {name: grad}`` (mxnet's formula) and
    ``objective(*xs) -> scalar`` whose gradient that formula is.
    """
    name: str
    build: Callable
    torch: Callable
    shapes: list
    inputs: tuple = ("x",)
    gen: dict = field(default_factory=dict)
    nograd: tuple = ()
    aux: dict = field(default_factory=dict)          # aux name -> gen kind
    mx_grad: Optional[Callable] = None
    objective: Optional[Callable] = None
    infer: bool = True          # also compare forward(is_train=False)
    infer_torch: Optional[Callable] = None
    grad: bool = True
    fd: bool = True
    needs_shapes: bool = False  # build(*vars, shapes=...)
    slow: bool = False
    # the loss is an inner node: backward takes gradients for the heads, which the
    # loss ignores (mxnet's loss operators start their own gradient)
    loss_inside: bool = False


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())


def _make(kind, shape, gen):
    """Input values: randn | pos (0.5..2) | unit (0.05..0.95) | cond (0/1) |
    label:C | index:N (integers stored as float32, as mxnet does)."""
    if kind == "randn":
        return torch.randn(shape, generator=gen)
    if kind == "pos":
        return torch.rand(shape, generator=gen) * 1.5 + 0.5
    if kind == "unit":
        return torch.rand(shape, generator=gen) * 0.9 + 0.05
    if kind == "cond":
        return (torch.rand(shape, generator=gen) > 0.5).float()
    if kind.startswith(("label:", "index:")):
        n = int(kind.split(":")[1])
        return torch.randint(0, n, shape, generator=gen).float()
    raise ValueError(kind)


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _close(got, want, what, rtol=RTOL, atol=ATOL):
    want = want.detach().to(torch.float32)
    got = torch.as_tensor(got).detach()
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if not torch.allclose(got, want, rtol=rtol, atol=atol):
        err = (got - want).abs().max().item()
        raise AssertionError(f"{what}: max abs error {err:.3g}\ngot  {got}\nwant {want}")


def _fill(exe, s, op, values, gen):
    """Copy ``values`` into the executor's arguments and draw its auxiliary states
    (``op.aux``'s generators); returns the auxiliary values by name."""
    for n, v in values.items():
        exe.arg_dict[n][:] = v
    aux_vals = {}
    for n in s.list_auxiliary_states():
        aux_vals[n] = _make(op.aux[n], tuple(exe.aux_dict[n].shape), gen)
        exe.aux_dict[n][:] = aux_vals[n]
    return aux_vals


def check(op: Op, shapes):
    """Bind ``op`` at ``shapes`` and check (a) forward, (b) gradients, (c) FD."""
    gen = torch.Generator().manual_seed(_seed(op.name, shapes))
    vars_ = [sym.Variable(n) for n in op.inputs]
    s = op.build(*vars_, shapes=shapes) if op.needs_shapes else op.build(*vars_)
    values = {n: _make(op.gen.get(n, "randn"), shp, gen) for n, shp in zip(op.inputs, shapes)}
    diff = [n for n in op.inputs if n not in op.nograd] if op.grad else []
    args = s.list_arguments()
    assert sorted(args) == sorted(op.inputs), (args, op.inputs)
    grad_req = {n: "write" if n in diff else "null" for n in args}
    exe = s.simple_bind(cpu(), grad_req=grad_req, **dict(zip(op.inputs, shapes)))
    aux_vals = _fill(exe, s, op, values, gen)

    xs = {n: v.double().requires_grad_(n in diff) for n, v in values.items()}
    xs_list = [xs[n] for n in op.inputs] + [aux_vals[n].double() for n in aux_vals]

    # (a) forward: training mode, then (where it differs) inference mode
    outs = exe.forward(is_train=True)
    want = _as_list(op.torch(*xs_list))
    assert len(outs) == len(want), f"{op.name}: {len(outs)} outputs, expected {len(want)}"
    for i, (o, w) in enumerate(zip(outs, want)):
        _close(o, w, f"{op.name}{shapes} forward output {i}")
    train_outs = [o.clone() for o in outs]
    if not diff:
        _check_infer(op, exe, xs_list, train_outs, shapes)
        return exe

    # (b) gradients
    if op.mx_grad is not None:
        exe.backward([torch.randn(tuple(o.shape), generator=gen) for o in train_outs]
                     if op.loss_inside else None)
        expected = op.mx_grad(*xs_list)
        objective = op.objective(*xs_list) if op.objective is not None else None
    else:
        ograds = [torch.randn(tuple(o.shape), generator=gen) for o in train_outs]
        exe.backward(ograds)
        objective = sum((w * g.double()).sum() for w, g in zip(want, ograds))
        grads = torch.autograd.grad(objective, [xs[n] for n in diff], allow_unused=True)
        expected = {n: torch.zeros_like(xs[n]) if g is None else g for n, g in zip(diff, grads)}
    for n in diff:
        _close(exe.grad_dict[n], expected[n], f"{op.name}{shapes} d/d{n}")
    for n in op.nograd:
        assert exe.grad_dict.get(n) is None

    # (c) central finite differences of the float64 objective on a few entries
    if op.fd and objective is not None:
        fn = op.objective if op.mx_grad is not None else (
            lambda *a: sum((w * g.double()).sum()
                           for w, g in zip(_as_list(op.torch(*a)), ograds)))
        with torch.no_grad():
            for n in diff:
                flat = xs[n].detach().clone().reshape(-1)
                picks = torch.randperm(flat.numel(), generator=gen)[:FD_ENTRIES]
                for j in picks.tolist():
                    vals = []
                    for sign in (1, -1):
                        pert = flat.clone()
                        pert[j] += sign * FD_EPS
                        args_ = [pert.reshape(xs[m].shape) if m == n else xs[m].detach()
                                 for m in op.inputs] + xs_list[len(op.inputs):]
                        vals.append(float(fn(*args_)))
                    fd = (vals[0] - vals[1]) / (2 * FD_EPS)
                    got = float(exe.grad_dict[n].reshape(-1)[j])
                    assert abs(got - fd) <= 1e-4 + 1e-3 * abs(fd), \
                        f"{op.name}{shapes} d/d{n}[{j}]: compiled {got}, finite difference {fd}"
    _check_infer(op, exe, xs_list, train_outs, shapes)
    return exe


def _check_infer(op, exe, xs_list, train_outs, shapes):
    if not op.infer:
        return
    outs = exe.forward(is_train=False)
    if op.infer_torch is not None:   # with the aux states as the training step left them
        aux = [a.double() for a in exe.aux_arrays]
        want = _as_list(op.infer_torch(*[x.detach() for x in xs_list[:len(op.inputs)]], *aux))
    else:
        want = train_outs
    for i, (o, w) in enumerate(zip(outs, want)):
        _close(o, w, f"{op.name}{shapes} inference output {i}")


# ---------------------------------------------------------------------------
# Shapes

U3 = [[(3, 5)], [(1, 7)], [(2, 1, 3)]]                 # unary: 2-D, size-1, 3-D
U4 = U3 + [[(2, 3, 4, 5)]]
SAME2 = [[(3, 5), (3, 5)], [(1, 7), (1, 7)], [(2, 1, 3), (2, 1, 3)]]
BCAST2 = [[(3, 5), (1, 5)], [(2, 1, 4), (2, 3, 1)], [(1, 7), (7,)], [(3, 1), (1, 6)]]
RED = [[(3, 5)], [(2, 1, 4)], [(2, 3, 4)]]


def _onehot(label, c, dim):
    lab = label.long()
    oh = F.one_hot(lab, c).to(torch.float64)
    return oh.movedim(-1, dim)


# -- loss formulas (MXNET_SEMANTICS.md section 4) ---------------------------------

def _so_parts(x, label, multi, preserve):
    """(prob as (rows, C, spatial), one-hot, label per row/position, N, spatial)."""
    n = x.shape[0]
    if multi:
        c = x.shape[1]
        x3 = x.reshape(n, c, -1)
        lab = label.reshape(n, -1)
    elif preserve:
        c = x.shape[-1]
        x3 = x.reshape(-1, c, 1)
        lab = label.reshape(-1, 1)
    else:
        x3 = x.reshape(n, -1, 1)
        c = x3.shape[1]
        lab = label.reshape(-1)[:n].reshape(n, 1)     # mxnet reads the first N labels
    return x3, lab, c


def so_grad(gs=1.0, norm="null", use_ignore=False, ignore=-1.0, multi=False, preserve=False):
    """SoftmaxOutput: (p - onehot(label)) * grad_scale / divisor; ignored rows 0."""
    def divisor(lab, n, spatial):
        valid = max(int((lab.long() != int(ignore)).sum()), 1)
        if multi:
            return {"null": spatial, "batch": n * spatial, "valid": valid}[norm]
        return {"null": 1, "batch": n, "valid": valid}[norm]

    def grad(x, label):
        x3, lab, c = _so_parts(x.detach(), label, multi, preserve)
        p = torch.softmax(x3, dim=1)
        g = p - _onehot(lab, c, 1)
        if use_ignore:
            g = g * (lab.long() != int(ignore)).unsqueeze(1)
        g = g * gs / divisor(lab, x.shape[0], x3.shape[2])
        return {"x": g.reshape(x.shape)}

    def objective(x, label):
        x3, lab, c = _so_parts(x, label, multi, preserve)
        nll = -(torch.log_softmax(x3, dim=1) * _onehot(lab, c, 1)).sum(1)
        if use_ignore:
            nll = nll * (lab.long() != int(ignore))
        return nll.sum() * gs / divisor(lab, x.shape[0], x3.shape[2])
    return grad, objective


def so_forward(multi=False, preserve=False):
    def fwd(x, label):
        if multi:
            return torch.softmax(x, 1)
        if preserve:
            return torch.softmax(x, -1)
        return torch.softmax(x.reshape(x.shape[0], -1), 1).reshape(x.shape)
    return fwd


def reg_loss(kind, gs=1.0):
    """*RegressionOutput: grad_scale / (label.size / N) * f(out, label)."""
    def per(x):
        return gs / (x.numel() / x.shape[0])

    def grad(x, label):
        label = label.reshape(x.shape)
        d = {"linear": x - label, "logistic": torch.sigmoid(x) - label,
             "mae": torch.sign(x - label)}[kind]
        return {"x": d.detach() * per(x)}

    def objective(x, label):
        label = label.reshape(x.shape)
        if kind == "linear":
            v = 0.5 * (x - label) ** 2
        elif kind == "logistic":
            v = F.binary_cross_entropy_with_logits(x, label, reduction="none")
        else:
            v = (x - label).abs()
        return v.sum() * per(x)
    return grad, objective


def makeloss_square(gs=1.0, norm="null", thresh=0.0):
    """MakeLoss(square(x)): d/dx = 2x * grad_scale / (1 | N | #(x^2 > thresh))."""
    def divisor(x):
        if norm == "batch":
            return x.shape[0]
        if norm == "valid":
            return max(int((x * x > thresh).sum()), 1)
        return 1

    def grad(x):
        return {"x": 2 * x.detach() * gs / divisor(x.detach())}

    def objective(x):
        return (x * x).sum() * gs / divisor(x.detach())
    return grad, objective


def _bn_torch(fix_gamma, eps=1e-3, axis=1):
    def f(x, gamma, beta, mm, mv):
        g = torch.ones_like(gamma) if fix_gamma else gamma
        xm = x.movedim(axis, 1)
        y = F.batch_norm(xm, None, None, g, beta, training=True, eps=eps)
        return y.movedim(1, axis)
    return f


def _bn_infer_torch(fix_gamma, eps=1e-3, axis=1):
    def f(x, gamma, beta, mm, mv):
        g = torch.ones_like(gamma) if fix_gamma else gamma
        xm = x.movedim(axis, 1)
        y = F.batch_norm(xm, mm, mv, g, beta, training=False, eps=eps)
        return y.movedim(1, axis)
    return f


def _prelu_torch(x, g):
    """mxnet's prelu: gamma's dims lie along data axes 0 and 1 (from its last dim)."""
    lay = [1] * x.dim()
    lay[2 - g.dim():2] = list(g.shape)
    return torch.where(x > 0, x, x * g.reshape(lay))


def _batch_take_torch(a, i):
    j = i.detach().reshape(-1).long().clamp(0, a.shape[1] - 1)
    return a[torch.arange(a.shape[0]), j].reshape(i.shape)


def _unary(name, sfn, tfn, gen="randn", shapes=U3, **kw):
    return Op(name, sfn, tfn, shapes, gen={"x": gen}, **kw)


def _red(op, tfn, **attrs):
    def build(x):
        return getattr(sym, op)(x, **attrs)

    def torch_fn(x):
        axis, keep, excl = attrs.get("axis"), attrs.get("keepdims", False), attrs.get("exclude", False)
        if axis is None:
            dims = list(range(x.dim()))
        else:
            dims = [a % x.dim() for a in ((axis,) if isinstance(axis, int) else axis)]
            if excl:
                dims = [d for d in range(x.dim()) if d not in dims]
        y = x
        for d in sorted(dims, reverse=True):
            y = tfn(y, d)
        if keep:
            for d in sorted(dims):
                y = y.unsqueeze(d)
        return y.reshape(1) if y.dim() == 0 else y
    return build, torch_fn


_tmax = lambda x, d: x.max(dim=d).values  # noqa: E731
_tmin = lambda x, d: x.min(dim=d).values  # noqa: E731


def _red_ops():
    rows = []
    fns = {"sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d), "max": _tmax, "min": _tmin}
    variants = [("all", {}), ("ax1", {"axis": 1}), ("ax1k", {"axis": 1, "keepdims": True}),
                ("ax0x", {"axis": 0, "exclude": True}), ("axm1", {"axis": -1}),
                ("ax01k", {"axis": (0, 1), "keepdims": True}),
                ("ax0kx", {"axis": 0, "keepdims": True, "exclude": True})]
    for op, fn in fns.items():
        for tag, attrs in variants:
            build, tfn = _red(op, fn, **attrs)
            rows.append(Op(f"{op}_{tag}", build, tfn, RED))
    return rows


def _reshape_row(name, shape, tfn, shapes, reverse=False):
    return Op(name, lambda x: sym.Reshape(x, shape=shape, reverse=reverse), tfn, shapes)


def _dropout_p0(x):
    return x


OPS = [
    # -- variables and groups
    Op("Variable", lambda x: x, lambda x: x, U3),
    Op("Group", lambda x, y: sym.Group([sym.exp(x), x * y, sym.sum(y), x]),
       lambda x, y: [torch.exp(x), x * y, y.sum().reshape(1), x], SAME2, inputs=("x", "y")),
    # -- unary math
    _unary("negative", sym.negative, torch.neg),
    _unary("neg_operator", lambda x: -x, torch.neg),
    _unary("square", sym.square, torch.square, shapes=U4),
    _unary("sqrt", sym.sqrt, torch.sqrt, gen="pos"),
    _unary("exp", sym.exp, torch.exp, shapes=U4),
    _unary("log", sym.log, torch.log, gen="pos"),
    _unary("abs", sym.abs, torch.abs),
    _unary("sigmoid", sym.sigmoid, torch.sigmoid),
    _unary("tanh", sym.tanh, torch.tanh),
    _unary("relu", sym.relu, torch.relu, shapes=U4),
    _unary("cbrt", sym.cbrt, lambda x: torch.sign(x) * x.abs() ** (1.0 / 3.0)),
    _unary("rcbrt", sym.rcbrt, lambda x: torch.sign(x) / x.abs() ** (1.0 / 3.0)),
    _unary("clip", lambda x: sym.clip(x, a_min=-0.5, a_max=0.7), lambda x: x.clamp(-0.5, 0.7)),
    _unary("clip_wide", lambda x: sym.clip(x, a_min=-10, a_max=10), lambda x: x.clamp(-10, 10)),
    # -- Activation / LeakyReLU
    *[_unary(f"Activation_{a}", lambda x, a=a: sym.Activation(x, act_type=a), f)
      for a, f in (("relu", torch.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                   ("softrelu", F.softplus), ("softsign", F.softsign))],
    _unary("LeakyReLU_leaky", lambda x: sym.LeakyReLU(x, act_type="leaky", slope=0.1),
           lambda x: F.leaky_relu(x, 0.1)),
    _unary("LeakyReLU_default", lambda x: sym.LeakyReLU(x), lambda x: F.leaky_relu(x, 0.25)),
    _unary("LeakyReLU_elu", lambda x: sym.LeakyReLU(x, act_type="elu", slope=0.3),
           lambda x: F.elu(x, 0.3)),
    _unary("LeakyReLU_selu", lambda x: sym.LeakyReLU(x, act_type="selu"), F.selu, shapes=U4),
    _unary("LeakyReLU_gelu", lambda x: sym.LeakyReLU(x, act_type="gelu"), F.gelu, shapes=U4),
    Op("LeakyReLU_prelu", lambda x, g: sym.LeakyReLU(x, g, act_type="prelu"), _prelu_torch,
       [[(3, 5), (5,)], [(2, 3, 4), (3,)], [(2, 1, 3), (1,)], [(2, 3, 4), (2, 3)],
        [(2, 3, 4, 5), (1,)]], inputs=("x", "g")),
    # -- Cast (float32 only: an identity) and abs(symbol)
    _unary("Cast", lambda x: sym.Cast(x * 2.0, dtype="float32"), lambda x: x * 2),
    _unary("cast_alias", lambda x: sym.cast(x, dtype=np.float32) + 1.0, lambda x: x + 1),
    _unary("abs_operator", lambda x: abs(x), torch.abs),
    # -- scalar arithmetic: operators and the op names they create
    _unary("plus_scalar", lambda x: x + 1.5, lambda x: x + 1.5),
    _unary("rplus_scalar", lambda x: 2 + x, lambda x: 2 + x),
    _unary("minus_scalar", lambda x: x - 1.5, lambda x: x - 1.5),
    _unary("rminus_scalar", lambda x: 1 - x, lambda x: 1 - x),
    _unary("mul_scalar", lambda x: x * 3, lambda x: x * 3),
    _unary("rmul_scalar", lambda x: 0.5 * x, lambda x: 0.5 * x),
    _unary("div_scalar", lambda x: x / 4, lambda x: x / 4),
    _unary("rdiv_scalar", lambda x: 2 / x, lambda x: 2 / x, gen="pos"),
    _unary("power_scalar2", lambda x: x ** 2, lambda x: x ** 2),
    _unary("power_scalar3", lambda x: x ** 3, lambda x: x ** 3),
    _unary("power_scalar_frac", lambda x: x ** 1.5, lambda x: x ** 1.5, gen="pos"),
    _unary("rpower_scalar", lambda x: 2 ** x, lambda x: 2 ** x),
    _unary("_plus_scalar", lambda x: sym._plus_scalar(x, scalar=-0.25), lambda x: x - 0.25),
    _unary("_rminus_scalar", lambda x: sym._rminus_scalar(x, scalar=3), lambda x: 3 - x),
    _unary("_rdiv_scalar", lambda x: sym._rdiv_scalar(x, scalar=-1.5), lambda x: -1.5 / x,
           gen="pos"),
    _unary("_maximum_scalar", lambda x: sym.maximum(x, 0.1), lambda x: x.clamp(min=0.1)),
    _unary("_rmaximum_scalar", lambda x: sym.maximum(0.1, x), lambda x: x.clamp(min=0.1)),
    _unary("_minimum_scalar", lambda x: sym.minimum(x, 0.5), lambda x: x.clamp(max=0.5)),
    # -- binary arithmetic between symbols
    *[Op(f"operator_{nm}", lambda x, y, f=f: f(x, y), f, SAME2, inputs=("x", "y"),
         gen={"x": "pos", "y": "pos"} if nm in ("div", "pow") else {})
      for nm, f in (("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                    ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
                    ("pow", lambda a, b: a ** b))],
    *[Op(f"elemwise_{nm}", lambda x, y, nm=nm: getattr(sym, f"elemwise_{nm}")(x, y), f, SAME2,
         inputs=("x", "y"), gen={"y": "pos"} if nm == "div" else {})
      for nm, f in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul),
                    ("div", torch.div))],
    Op("maximum", lambda x, y: sym.maximum(x, y), torch.maximum, SAME2, inputs=("x", "y")),
    Op("minimum", lambda x, y: sym.minimum(x, y), torch.minimum, SAME2, inputs=("x", "y")),
    *[Op(f"broadcast_{nm}", lambda x, y, nm=nm: getattr(sym, f"broadcast_{nm}")(x, y), f,
         BCAST2, inputs=("x", "y"),
         gen={"x": "pos", "y": "pos"} if nm in ("div", "power") else {})
      for nm, f in (("add", torch.add), ("sub", torch.sub), ("mul", torch.mul),
                    ("div", torch.div), ("power", torch.pow), ("maximum", torch.maximum),
                    ("minimum", torch.minimum))],
    Op("where", lambda c, x, y: sym.where(c, x, y), lambda c, x, y: torch.where(c != 0, x, y),
       [[(3, 5)] * 3, [(1, 7)] * 3, [(2, 1, 3)] * 3], inputs=("c", "x", "y"),
       gen={"c": "cond"}, nograd=("c",)),
    Op("where_1d_cond", lambda c, x, y: sym.where(c, x, y),
       lambda c, x, y: torch.where(c.reshape((-1,) + (1,) * (x.dim() - 1)) != 0, x, y),
       [[(3,), (3, 5), (3, 5)], [(1,), (1, 7), (1, 7)], [(4,), (4, 1, 3), (4, 1, 3)]],
       inputs=("c", "x", "y"), gen={"c": "cond"}, nograd=("c",)),
    # -- constants
    Op("zeros_like", lambda x: sym.zeros_like(x) + x * 2, lambda x: x * 2, U3),
    Op("ones_like", lambda x: sym.ones_like(x) * x, lambda x: x, U3),
    Op("zeros", lambda x, shapes: x + sym.zeros(shape=shapes[0]), lambda x: x, U3,
       needs_shapes=True),
    Op("ones", lambda x, shapes: sym.Group([x * sym.ones(shape=shapes[0]), sym.ones(shape=shapes[0])]),
       lambda x: [x, torch.ones_like(x)], U3, needs_shapes=True),
    # (BlockGrad's gradient is not the derivative of its forward: no finite differences)
    Op("BlockGrad", lambda x: sym.BlockGrad(x * 2) + x, lambda x: (x * 2).detach() + x, U3,
       fd=False),
    Op("stop_gradient", lambda x: sym.Group([sym.stop_gradient(sym.exp(x)), x * 3]),
       lambda x: [torch.exp(x).detach(), x * 3], U3, fd=False),
    # -- reductions (axis / keepdims / exclude)
    *_red_ops(),
    # -- softmax family
    *[Op(f"{nm}_axis{ax}", lambda x, nm=nm, ax=ax: getattr(sym, nm)(x, axis=ax),
         lambda x, f=f, ax=ax: f(x, dim=ax), [[(3, 5)], [(1, 7)], [(2, 3, 4)], [(4, 1)]])
      for nm, f in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax))
      for ax in (-1, 0)],
    Op("softmax_axis1_temp", lambda x: sym.softmax(x, axis=1, temperature=2.0),
       lambda x: torch.softmax(x / 2, dim=1), [[(3, 5)], [(2, 3, 4)], [(2, 1, 3)]]),
    # -- matrix products
    Op("dot", lambda a, b: sym.dot(a, b), lambda a, b: a @ b,
       [[(3, 4), (4, 5)], [(1, 4), (4, 1)], [(5, 1), (1, 3)], [(7, 6), (6, 9)]], inputs=("a", "b")),
    Op("dot_ta", lambda a, b: sym.dot(a, b, transpose_a=True), lambda a, b: a.t() @ b,
       [[(4, 3), (4, 5)], [(1, 3), (1, 1)], [(6, 7), (6, 2)]], inputs=("a", "b")),
    Op("dot_tb", lambda a, b: sym.dot(a, b, transpose_b=True), lambda a, b: a @ b.t(),
       [[(3, 4), (5, 4)], [(1, 4), (1, 4)], [(5, 1), (3, 1)]], inputs=("a", "b")),
    Op("dot_tt", lambda a, b: sym.dot(a, b, transpose_a=True, transpose_b=True),
       lambda a, b: a.t() @ b.t(), [[(4, 3), (5, 4)], [(1, 3), (2, 1)], [(6, 5), (7, 6)]],
       inputs=("a", "b")),
    Op("dot_nd", lambda a, b: sym.dot(a, b), lambda a, b: torch.tensordot(a, b, dims=1),
       [[(2, 3, 4), (4, 5)], [(4,), (4, 3)], [(3, 4), (4,)], [(2, 1, 3), (3, 2, 1)]],
       inputs=("a", "b")),
    Op("batch_dot", lambda a, b: sym.batch_dot(a, b), torch.bmm,
       [[(2, 3, 4), (2, 4, 5)], [(1, 1, 3), (1, 3, 1)], [(3, 5, 1), (3, 1, 2)]], inputs=("a", "b")),
    Op("batch_dot_ta", lambda a, b: sym.batch_dot(a, b, transpose_a=True),
       lambda a, b: torch.bmm(a.transpose(1, 2), b),
       [[(2, 4, 3), (2, 4, 5)], [(1, 1, 3), (1, 1, 1)], [(3, 2, 5), (3, 2, 2)]], inputs=("a", "b")),
    Op("batch_dot_tb", lambda a, b: sym.batch_dot(a, b, transpose_b=True),
       lambda a, b: torch.bmm(a, b.transpose(1, 2)),
       [[(2, 3, 4), (2, 5, 4)], [(1, 1, 3), (1, 1, 3)], [(3, 5, 1), (3, 2, 1)]], inputs=("a", "b")),
    Op("batch_dot_tt", lambda a, b: sym.batch_dot(a, b, transpose_a=True, transpose_b=True),
       lambda a, b: torch.bmm(a.transpose(1, 2), b.transpose(1, 2)),
       [[(2, 4, 3), (2, 5, 4)], [(1, 3, 1), (1, 1, 3)], [(3, 2, 5), (3, 6, 2)]], inputs=("a", "b")),
    # every leading axis is a batch axis of both operands
    Op("batch_dot_nd", lambda a, b: sym.batch_dot(a, b, transpose_a=True),
       lambda a, b: torch.matmul(a.transpose(-1, -2), b),
       [[(2, 2, 4, 3), (2, 2, 4, 5)], [(3, 2, 1, 3, 1), (3, 2, 1, 3, 2)],
        [(1, 3, 2, 1), (1, 3, 2, 4)]], inputs=("a", "b")),
    # -- FullyConnected
    Op("FullyConnected", lambda x, w, b: sym.FullyConnected(x, w, b, num_hidden=3),
       lambda x, w, b: F.linear(x.reshape(x.shape[0], -1), w, b),
       [[(4, 6), (3, 6), (3,)], [(1, 5), (3, 5), (3,)], [(2, 3, 4), (3, 12), (3,)],
        [(5, 1, 1, 2), (3, 2), (3,)]], inputs=("x", "w", "b")),
    Op("FullyConnected_h1", lambda x, w, b: sym.FullyConnected(x, w, b, num_hidden=1),
       lambda x, w, b: F.linear(x, w, b), [[(4, 6), (1, 6), (1,)], [(3, 1), (1, 1), (1,)],
                                           [(1, 7), (1, 7), (1,)]], inputs=("x", "w", "b")),
    Op("FullyConnected_no_bias", lambda x, w: sym.FullyConnected(x, w, num_hidden=5, no_bias=True),
       lambda x, w: F.linear(x.reshape(x.shape[0], -1), w),
       [[(4, 6), (5, 6)], [(1, 3), (5, 3)], [(2, 3, 2), (5, 6)]], inputs=("x", "w")),
    Op("FullyConnected_no_flatten",
       lambda x, w, b: sym.FullyConnected(x, w, b, num_hidden=3, flatten=False),
       lambda x, w, b: F.linear(x, w, b),
       [[(2, 3, 4), (3, 4), (3,)], [(1, 5), (3, 5), (3,)], [(2, 1, 3, 2), (3, 2), (3,)]],
       inputs=("x", "w", "b")),
    # -- Embedding (weight gradient accumulates over repeated indices)
    Op("Embedding", lambda d, w: sym.Embedding(d, w, input_dim=7, output_dim=4),
       lambda d, w: w[d.long()], [[(5,), (7, 4)], [(2, 3), (7, 4)], [(1, 1), (7, 4)],
                                  [(3, 6), (7, 4)]],
       inputs=("d", "w"), gen={"d": "index:7"}, nograd=("d",)),
    Op("Embedding_dim1", lambda d, w: sym.Embedding(d, w, input_dim=3, output_dim=1),
       lambda d, w: w[d.long()], [[(6,), (3, 1)], [(2, 5), (3, 1)], [(1,), (3, 1)]],
       inputs=("d", "w"), gen={"d": "index:3"}, nograd=("d",)),
    # -- batch_take: indices up to 7 over 5 or fewer columns are clipped to the last
    Op("batch_take", lambda a, i: sym.batch_take(a, i), _batch_take_torch,
       [[(3, 5), (3,)], [(1, 7), (1,)], [(4, 1), (4,)], [(6, 3), (2, 3)]],
       inputs=("a", "i"), gen={"i": "index:8"}, nograd=("i",)),
    # -- shape ops
    _reshape_row("Reshape_0_m1", (0, -1), lambda x: x.reshape(x.shape[0], -1),
                 [[(3, 5)], [(2, 1, 3)], [(2, 3, 4, 1)]]),
    _reshape_row("Reshape_m1", (-1,), lambda x: x.reshape(-1), [[(3, 5)], [(1, 7)], [(2, 3, 4)]]),
    _reshape_row("Reshape_m2", (-2,), lambda x: x, [[(3, 5)], [(1, 7)], [(2, 3, 4)]]),
    _reshape_row("Reshape_m3_m2", (-3, -2), lambda x: x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]),
                 [[(3, 5)], [(2, 1, 3)], [(2, 3, 4, 5)]]),
    _reshape_row("Reshape_m4", (-4, 2, -1, -2), lambda x: x.reshape(2, x.shape[0] // 2, *x.shape[1:]),
                 [[(4, 3)], [(2, 1, 5)], [(6,)]]),
    _reshape_row("Reshape_0_0_m3", (0, 0, -3), lambda x: x.reshape(x.shape[0], x.shape[1], -1),
                 [[(2, 3, 4, 5)], [(1, 1, 3, 1)], [(3, 2, 1, 7)]]),
    _reshape_row("Reshape_explicit", (5, 3), lambda x: x.reshape(5, 3),
                 [[(3, 5)], [(15,)], [(1, 15, 1)]]),
    _reshape_row("Reshape_reverse", (-1, 0), lambda x: x.reshape(-1, x.shape[-1]),
                 [[(3, 5)], [(2, 1, 3)], [(10, 5, 4)]], reverse=True),
    Op("Reshape_method", lambda x: x.reshape((0, 1, -1)), lambda x: x.reshape(x.shape[0], 1, -1),
       [[(3, 5)], [(1, 7)], [(2, 3, 4)]]),
    *[Op(f"Flatten{i}", lambda x, f=f: f(x), lambda x: x.reshape(x.shape[0], -1),
         [[(3, 5)], [(2, 1, 3)], [(2, 3, 4, 5)], [(4,)]])
      for i, f in enumerate((sym.Flatten, sym.flatten))],
    *[Op(f"expand_dims_{ax}", lambda x, ax=ax: sym.expand_dims(x, axis=ax),
         lambda x, ax=ax: x.unsqueeze(ax), U3) for ax in (0, 1, -1)],
    Op("transpose_default", lambda x: sym.transpose(x), lambda x: x.permute(*reversed(range(x.dim()))),
       [[(3, 5)], [(2, 1, 3)], [(2, 3, 4, 5)]]),
    Op("transpose_axes", lambda x: sym.transpose(x, axes=(1, 2, 0)), lambda x: x.permute(1, 2, 0),
       [[(2, 3, 4)], [(1, 5, 1)], [(3, 1, 2)]]),
    Op("transpose_then_exp", lambda x: sym.exp(sym.transpose(x, axes=(1, 0, 2))) * 2,
       lambda x: torch.exp(x.permute(1, 0, 2)) * 2, [[(2, 3, 4)], [(1, 5, 1)], [(3, 1, 2)]]),
    Op("SwapAxis", lambda x: sym.SwapAxis(x, dim1=0, dim2=2), lambda x: x.transpose(0, 2),
       [[(2, 3, 4)], [(1, 5, 1)], [(3, 1, 2, 2)]]),
    Op("swapaxes", lambda x: sym.swapaxes(x, dim1=1, dim2=-1), lambda x: x.transpose(1, -1),
       [[(2, 3)], [(2, 3, 4)], [(1, 4, 1)]]),
    Op("Concat_dim1", lambda x, y: sym.Concat(x, y, dim=1), lambda x, y: torch.cat([x, y], 1),
       [[(3, 2), (3, 5)], [(1, 1), (1, 7)], [(2, 3, 4), (2, 1, 4)]], inputs=("x", "y")),
    Op("Concat_dim0_3", lambda x, y, z: sym.concat(x, y, z, dim=0),
       lambda x, y, z: torch.cat([x, y, z], 0),
       [[(3, 5), (1, 5), (2, 5)], [(1, 7), (1, 7), (1, 7)], [(2, 1, 3), (1, 1, 3), (3, 1, 3)]],
       inputs=("x", "y", "z")),
    Op("Concat_last", lambda x, y: sym.Concat(x, x * y, dim=-1),
       lambda x, y: torch.cat([x, x * y], -1), SAME2, inputs=("x", "y")),
    Op("SliceChannel", lambda x: sym.SliceChannel(x, num_outputs=3),
       lambda x: list(torch.chunk(x, 3, dim=1)), [[(2, 6)], [(1, 3)], [(2, 3, 4)]]),
    Op("SliceChannel_axis0_squeeze", lambda x: sym.split(x, num_outputs=2, axis=0, squeeze_axis=True),
       lambda x: [x[0], x[1]], [[(2, 5)], [(2, 1, 3)], [(2, 3, 4)]]),
    Op("SliceChannel_used", lambda x: (lambda s: sym.Group([s[0] * s[2], s[1]]))(
        sym.SliceChannel(x, num_outputs=3, axis=-1)),
       lambda x: (lambda p: [p[0] * p[2], p[1]])(torch.chunk(x, 3, dim=-1)),
       [[(2, 6)], [(1, 3)], [(2, 1, 9)]]),
    Op("slice_axis", lambda x: sym.slice_axis(x, axis=1, begin=1, end=3), lambda x: x[:, 1:3],
       [[(3, 5)], [(1, 3)], [(2, 4, 3)]]),
    Op("slice_axis_neg", lambda x: sym.slice_axis(x, axis=-1, begin=-2, end=None),
       lambda x: x[..., -2:], [[(3, 5)], [(1, 2)], [(2, 1, 4)]]),
    Op("slice_axis_then_mul", lambda x: sym.slice_axis(x, axis=0, begin=0, end=1) * 3,
       lambda x: x[:1] * 3, [[(3, 5)], [(1, 2)], [(2, 1, 4)]]),
    Op("reverse_axis0", lambda x: sym.reverse(x, axis=0), lambda x: x.flip(0), U3),
    Op("reverse_axis1", lambda x: sym.reverse(x, axis=1) + x, lambda x: x.flip(1) + x, U3),
    # -- Dropout: p = 0 (identity in both modes) and p > 0 in inference (identity)
    Op("Dropout_p0", lambda x: sym.Dropout(x, p=0.0), _dropout_p0, U3),
    Op("Dropout_p0_axes", lambda x: sym.Dropout(x * 2, p=0.0, axes=(0,)), lambda x: x * 2, U3),
    # -- BatchNorm, training forward and gradients (inference: infer_torch)
    *[Op(f"BatchNorm_fix_gamma_{fg}",
         lambda x, g, b, fg=fg: sym.BatchNorm(x, g, b, fix_gamma=fg, name="bn"),
         _bn_torch(fg), [[(4, 3, 2, 2), (3,), (3,)], [(5, 2), (2,), (2,)],
                         [(2, 3, 1, 5), (3,), (3,)], [(3, 1, 7), (1,), (1,)]],
         inputs=("x", "g", "b"), aux={"bn_moving_mean": "randn", "bn_moving_var": "pos"},
         infer_torch=_bn_infer_torch(fg)) for fg in (True, False)],
    Op("BatchNorm_axis_last", lambda x, g, b: sym.BatchNorm(x, g, b, fix_gamma=False, axis=-1,
                                                           eps=1e-5, name="bn"),
       _bn_torch(False, 1e-5, -1), [[(4, 3), (3,), (3,)], [(2, 5, 2), (2,), (2,)]],
       inputs=("x", "g", "b"), aux={"bn_moving_mean": "randn", "bn_moving_var": "pos"},
       infer_torch=_bn_infer_torch(False, 1e-5, -1)),
    # -- loss heads: forward, mxnet's documented gradient, FD of the implied loss
    *[Op(f"SoftmaxOutput_{tag}", lambda x, l, kw=kw: sym.SoftmaxOutput(x, l, **kw),
         so_forward(kw.get("multi_output", False), kw.get("preserve_shape", False)), shapes,
         inputs=("x", "l"), gen={"l": f"label:{ncls}"}, nograd=("l",),
         mx_grad=so_grad(kw.get("grad_scale", 1.0), kw.get("normalization", "null"),
                         kw.get("use_ignore", False), kw.get("ignore_label", -1.0),
                         kw.get("multi_output", False), kw.get("preserve_shape", False))[0],
         objective=so_grad(kw.get("grad_scale", 1.0), kw.get("normalization", "null"),
                           kw.get("use_ignore", False), kw.get("ignore_label", -1.0),
                           kw.get("multi_output", False), kw.get("preserve_shape", False))[1])
      for tag, kw, shapes, ncls in (
          ("default", {}, [[(4, 5), (4,)], [(1, 3), (1,)], [(6, 1), (6,)], [(3, 7), (3,)]], 1),
          ("classes", {}, [[(4, 5), (4,)], [(1, 3), (1,)], [(7, 3), (7,)]], 3),
          ("batch", {"normalization": "batch"}, [[(4, 5), (4,)], [(1, 3), (1,)], [(7, 3), (7,)]], 3),
          ("valid_ignore", {"normalization": "valid", "use_ignore": True, "ignore_label": 1},
           [[(4, 5), (4,)], [(1, 3), (1,)], [(7, 3), (7,)]], 3),
          ("null_ignore_gs", {"use_ignore": True, "ignore_label": 0, "grad_scale": 2.5},
           [[(4, 5), (4,)], [(1, 3), (1,)], [(7, 3), (7,)]], 3),
          ("batch_ignore", {"normalization": "batch", "use_ignore": True, "ignore_label": 2},
           [[(4, 5), (4,)], [(7, 3), (7,)], [(1, 3), (1,)]], 3),
          ("multi", {"multi_output": True}, [[(2, 3, 4), (2, 4)], [(1, 3, 1), (1, 1)],
                                             [(2, 4, 5), (2, 5)], [(2, 3, 2, 2), (2, 4)]], 3),
          ("multi_valid_ignore", {"multi_output": True, "normalization": "valid",
                                  "use_ignore": True, "ignore_label": 1},
           [[(2, 3, 4), (2, 4)], [(1, 3, 1), (1, 1)], [(3, 2, 5), (3, 5)]], 2),
          ("multi_batch_gs", {"multi_output": True, "normalization": "batch", "grad_scale": 0.5},
           [[(2, 3, 4), (2, 4)], [(1, 3, 1), (1, 1)], [(3, 2, 5), (3, 5)]], 2),
          ("flat3d", {}, [[(2, 3, 4), (2, 3)], [(3, 2, 1), (3, 2)], [(1, 5, 2), (1, 5)]], 2),
          ("preserve_shape", {"preserve_shape": True},
           [[(2, 3, 4), (2, 3)], [(3, 5), (3,)], [(1, 2, 3), (1, 2)]], 3),
      )],
    *[Op(f"{name}_gs{gs:g}", lambda x, l, name=name, gs=gs: getattr(sym, name)(x, l, grad_scale=gs),
         (lambda x, l: torch.sigmoid(x)) if kind == "logistic" else (lambda x, l: x),
         [[(4, 3), (4, 3)], [(4, 1), (4,)], [(1, 5), (1, 5)], [(2, 3, 2), (2, 3, 2)]],
         inputs=("x", "l"), gen={"l": "unit"}, nograd=("l",),
         mx_grad=reg_loss(kind, gs)[0], objective=reg_loss(kind, gs)[1])
      for name, kind in (("LinearRegressionOutput", "linear"),
                         ("LogisticRegressionOutput", "logistic"),
                         ("MAERegressionOutput", "mae"))
      for gs in (1.0, 3.0)],
    *[Op(f"MakeLoss_{norm}_gs{gs:g}",
         lambda x, norm=norm, gs=gs: sym.MakeLoss(sym.square(x), grad_scale=gs,
                                                  normalization=norm, valid_thresh=0.5),
         torch.square, U3, mx_grad=makeloss_square(gs, norm, 0.5)[0],
         objective=makeloss_square(gs, norm, 0.5)[1])
      for norm, gs in (("null", 1.0), ("null", 2.0), ("batch", 2.0), ("valid", 2.0))],
    Op("make_loss_alias", lambda x: sym.make_loss(sym.square(x)), torch.square, U3,
       mx_grad=makeloss_square()[0], objective=makeloss_square()[1]),
]

def _params():
    out = []
    for op in OPS:
        for i, shapes in enumerate(op.shapes):
            marks = [pytest.mark.slow] if op.slow else []   # no row takes over 1 s today
            out.append(pytest.param(op, shapes, id=f"{op.name}-{i}", marks=marks))
    return out


def test_table_is_complete():
    """Every row has at least three shapes, with a size-1 dim and a non-power-of-two dim."""
    names = [op.name for op in OPS]
    assert len(names) == len(set(names)), "duplicate row names"
    for op in OPS:
        assert len(op.shapes) >= 2, op.name
        dims = [d for shapes in op.shapes for s in shapes for d in s]
        assert any(d & (d - 1) for d in dims), f"{op.name}: no non-power-of-two dim"
        if len(op.shapes) >= 3:
            assert 1 in dims, f"{op.name}: no size-1 dim"


@pytest.mark.parametrize("op,shapes", _params())
def test_op(op, shapes, cpu_target):
    exe = check(op, shapes)
    if cpu_target == "interpret":
        assert_same_launches_on_cpu_targets(exe)


# ---------------------------------------------------------------------------
# Dropout with p > 0: statistics, scaling, mask reused by backward

@pytest.mark.parametrize("p,shape", [(0.5, (40, 50)), (0.2, (3, 7, 90)), (0.8, (1, 1999))])
def test_dropout_statistics(p, shape):
    x = sym.Variable("x")
    exe = sym.Dropout(x, p=p).simple_bind(cpu(), x=shape)
    data = torch.rand(shape) + 0.5
    exe.arg_dict["x"][:] = data
    out = exe.forward(is_train=True)[0].clone()
    kept = torch.ne(out, 0).as_subclass(torch.Tensor)   # a torch bool mask for the oracle
    n = data.numel()
    frac = kept.float().mean().item()
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(frac - (1 - p)) < 5 * sigma, f"kept fraction {frac}, expected {1 - p}"
    torch.testing.assert_close(out[kept], data[kept] / (1 - p), rtol=1e-5, atol=1e-6)
    og = torch.randn(shape)
    exe.backward([og])
    torch.testing.assert_close(exe.grad_dict["x"], og * kept / (1 - p), rtol=1e-5, atol=1e-6)
    # a new step draws a new mask
    out2 = exe.forward(is_train=True)[0]
    assert not torch.equal(out2 != 0, kept)
    # inference: identity
    torch.testing.assert_close(exe.forward(is_train=False)[0], data)


def test_dropout_axes_mask_shared():
    x = sym.Variable("x")
    exe = sym.Dropout(x, p=0.5, axes=(1,)).simple_bind(cpu(), x=(64, 5))
    exe.arg_dict["x"][:] = torch.ones(64, 5)
    out = exe.forward(is_train=True)[0]
    assert torch.logical_or(out == 0, out == 2).all()
    assert (out == out[:, :1]).all(), "mask must be shared along axis 1"
    assert 0 < (out[:, 0] != 0).sum() < 64


# ---------------------------------------------------------------------------
# BatchNorm: moving statistics (updated by a training step), inference, outputs

@pytest.mark.parametrize("fix_gamma", [True, False])
@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (5, 2), (3, 1, 7)])
def test_batchnorm_moving_stats(fix_gamma, shape):
    c = shape[1]
    x = sym.Variable("x")
    s = sym.BatchNorm(x, fix_gamma=fix_gamma, momentum=0.8, eps=1e-3, name="bn")
    exe = s.simple_bind(cpu(), x=shape)
    gen = torch.Generator().manual_seed(3)
    data = torch.randn(shape, generator=gen) * 2 + 1
    gamma, beta = torch.randn(c, generator=gen), torch.randn(c, generator=gen)
    mm, mv = torch.randn(c, generator=gen), torch.rand(c, generator=gen) + 0.5
    exe.arg_dict["x"][:] = data
    exe.arg_dict["bn_gamma"][:] = gamma
    exe.arg_dict["bn_beta"][:] = beta
    exe.aux_dict["bn_moving_mean"][:] = mm
    exe.aux_dict["bn_moving_var"][:] = mv
    exe.forward(is_train=True)
    exe.backward([torch.randn(shape, generator=gen)])
    red = [i for i in range(len(shape)) if i != 1]
    bmean = data.double().mean(red)
    bvar = data.double().var(red, unbiased=False)   # mxnet: biased variance
    new_mm = mm.double() * 0.8 + bmean * 0.2
    new_mv = mv.double() * 0.8 + bvar * 0.2
    _close(exe.aux_dict["bn_moving_mean"], new_mm, "moving_mean")
    _close(exe.aux_dict["bn_moving_var"], new_mv, "moving_var")
    if fix_gamma:
        assert (exe.grad_dict["bn_gamma"] == 0).all()
    # inference uses (and never changes) the moving statistics
    out = exe.forward(is_train=False)[0]
    g = torch.ones(c) if fix_gamma else gamma
    want = F.batch_norm(data.double(), new_mm, new_mv, g.double(), beta.double(),
                        training=False, eps=1e-3)
    _close(out, want, "inference output")
    _close(exe.aux_dict["bn_moving_mean"], new_mm, "moving_mean after inference")


def test_batchnorm_use_global_stats_and_output_mean_var():
    x = sym.Variable("x")
    s = sym.BatchNorm(x, fix_gamma=False, output_mean_var=True, name="bn")
    assert s.list_outputs() == ["bn_output", "bn_mean", "bn_var"]
    shape = (3, 2, 5)
    exe = s.simple_bind(cpu(), x=shape)
    data = torch.randn(shape)
    exe.arg_dict["x"][:] = data
    exe.arg_dict["bn_gamma"][:] = torch.tensor([0.5, 2.0])
    exe.aux_dict["bn_moving_var"][:] = 1.0
    out, mean, invstd = exe.forward(is_train=True)
    _close(mean, data.double().mean((0, 2)), "mean output")
    _close(invstd, 1 / torch.sqrt(data.double().var((0, 2), unbiased=False) + 1e-3), "var output")

    g = sym.BatchNorm(x, fix_gamma=False, use_global_stats=True, name="bn")
    exe = g.simple_bind(cpu(), x=shape)
    exe.arg_dict["x"][:] = data
    exe.arg_dict["bn_gamma"][:] = torch.tensor([0.5, 2.0])
    exe.aux_dict["bn_moving_mean"][:] = torch.tensor([0.1, -0.3])
    exe.aux_dict["bn_moving_var"][:] = torch.tensor([1.5, 0.7])
    out = exe.forward(is_train=True)[0]
    want = F.batch_norm(data, torch.tensor([0.1, -0.3]), torch.tensor([1.5, 0.7]),
                        torch.tensor([0.5, 2.0]), torch.zeros(2), training=False, eps=1e-3)
    _close(out, want.double(), "use_global_stats forward")
    og = torch.randn(shape)
    exe.backward([og])
    scale = torch.tensor([0.5, 2.0]) / torch.sqrt(torch.tensor([1.5, 0.7]) + 1e-3)
    _close(exe.grad_dict["x"], (og * scale.reshape(1, 2, 1)).double(), "use_global_stats dx")
    _close(exe.aux_dict["bn_moving_mean"], torch.tensor([0.1, -0.3]).double(), "unchanged mean")


# ---------------------------------------------------------------------------
# grad_req add / null, backward without out_grads, loss heads ignore out_grads

def test_grad_req_add_accumulates():
    x, y = sym.Variable("x"), sym.Variable("y")
    s = sym.exp(x) * y
    exe = s.simple_bind(cpu(), grad_req="add", x=(2, 3), y=(2, 3))
    xv, yv = torch.randn(2, 3), torch.randn(2, 3)
    exe.arg_dict["x"][:] = xv
    exe.arg_dict["y"][:] = yv
    assert (exe.grad_dict["x"] == 0).all()
    og1, og2 = torch.randn(2, 3), torch.randn(2, 3)
    exe.forward(is_train=True)
    exe.backward([og1])
    exe.forward(is_train=True)
    exe.backward([og2])
    torch.testing.assert_close(exe.grad_dict["x"], torch.exp(xv) * yv * (og1 + og2))
    torch.testing.assert_close(exe.grad_dict["y"], torch.exp(xv) * (og1 + og2))


def test_grad_req_mixed_add_write_null():
    x, w = sym.Variable("x"), sym.Variable("w")
    s = sym.FullyConnected(x, w, num_hidden=3, no_bias=True)
    exe = s.simple_bind(cpu(), grad_req={"x": "null", "w": "add"}, x=(4, 5), w=(3, 5))
    assert exe.grad_dict.get("x") is None
    assert exe.grad_arrays[0] is None
    xv = torch.randn(4, 5)
    exe.arg_dict["x"][:] = xv
    exe.arg_dict["w"][:] = torch.randn(3, 5)
    og = torch.randn(4, 3)
    for _ in range(3):
        exe.forward(is_train=True)
        exe.backward([og])
    torch.testing.assert_close(exe.grad_dict["w"], 3 * og.t() @ xv, rtol=1e-5, atol=1e-5)
    exe2 = s.simple_bind(cpu(), grad_req={"x": "write", "w": "write"}, x=(4, 5), w=(3, 5))
    exe2.arg_dict["x"][:] = xv
    exe2.arg_dict["w"][:] = exe.arg_dict["w"]
    for _ in range(2):
        exe2.forward(is_train=True)
        exe2.backward([og])
    torch.testing.assert_close(exe2.grad_dict["w"], og.t() @ xv, rtol=1e-5, atol=1e-5)


def test_grad_req_null_everywhere():
    x = sym.Variable("x")
    exe = (x * 2).simple_bind(cpu(), grad_req="null", x=(2, 3))
    assert exe.grad_dict.get("x") is None and exe.grad_arrays == [None]
    exe.arg_dict["x"][:] = torch.ones(2, 3)
    torch.testing.assert_close(exe.forward()[0], torch.full((2, 3), 2.0))


def test_backward_needs_head_gradient_for_non_loss():
    x = sym.Variable("x")
    exe = sym.exp(x).simple_bind(cpu(), x=(2, 3))
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="head_gradient is required"):
        exe.backward()


def test_loss_heads_ignore_out_grads_and_blockgrad_head():
    x = sym.Variable("x")
    s = sym.Group([sym.MakeLoss(x * 3), sym.BlockGrad(x * 2)])
    exe = s.simple_bind(cpu(), x=(2, 3))
    exe.arg_dict["x"][:] = torch.randn(2, 3)
    exe.forward(is_train=True)
    exe.backward()
    torch.testing.assert_close(exe.grad_dict["x"], torch.full((2, 3), 3.0))
    exe.forward(is_train=True)
    exe.backward([torch.full((2, 3), 7.0), torch.full((2, 3), 5.0)])
    torch.testing.assert_close(exe.grad_dict["x"], torch.full((2, 3), 3.0))


def test_backward_after_inference_forward():
    """mxnet allows backward() after forward(is_train=False) (MXNET_SEMANTICS.md section 4)."""
    x = sym.Variable("x")
    exe = (x * 2).simple_bind(cpu(), x=(2, 3))
    exe.arg_dict["x"][:] = torch.randn(2, 3)
    exe.forward(is_train=False)
    exe.backward([torch.ones(2, 3)])
    torch.testing.assert_close(exe.grad_dict["x"], torch.full((2, 3), 2.0))


def test_label_gradient_is_zero():
    """Label arguments with grad_req 'write' get a gradient of zeros."""
    x, lab = sym.Variable("x"), sym.Variable("lab")
    for s in (sym.SoftmaxOutput(x, lab), sym.LinearRegressionOutput(x, lab)):
        exe = s.simple_bind(cpu(), x=(3, 4), lab=(3,) if "Softmax" in s.list_outputs()[0] else (3, 4))
        exe.arg_dict["x"][:] = torch.randn(3, 4)
        exe.arg_dict["lab"][:] = torch.ones(exe.arg_dict["lab"].shape)
        exe.grad_dict["lab"][:] = 5.0
        exe.forward(is_train=True)
        exe.backward()
        assert (exe.grad_dict["lab"] == 0).all()
