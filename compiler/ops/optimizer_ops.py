"""mxnet's optimizer update operators (``sgd_update``, ``sgd_mom_update``, ``adam_update``
...): one step of an optimizer as a graph operator.

Their formulas are the optimizers' rules (``optimizer_rules.py``, shared with the
runtime's fused multi-tensor kernels), evaluated over expression nodes. mxnet writes
some inputs in place (``FMutateInputs``: ``sgd_mom_update``'s ``mom``), and lists them
as the symbol's auxiliary states; so does this project. Each operator is a
``Decompose`` into hidden Pointwise nodes ``_<op>_value``, one per value it produces:
the output (the new weight, or LAMB phase 1's step direction) and the new value of
every mutated input, which the executor writes back into that auxiliary array on
every forward, inference too (``OpDef.mutates_inputs``; ``passes/decompose.py``).
The nodes read the same inputs and fuse into one kernel. No gradients, as in mxnet.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..ir.expr import evaluate, ops
from . import optimizer_rules
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, merge_shape,
                       parse_bool, parse_float, parse_int, register)


@dataclass(frozen=True)
class _Update:
    """One operator: its rule, inputs and what it writes."""
    rule: str
    inputs: tuple              # mxnet's input names, in order
    mutates: tuple             # the inputs written in place (mxnet's FMutateInputs)
    attrs: tuple
    scalars: Callable          # (attrs, env) -> the rule's scalars
    roles: dict = field(default_factory=dict)     # rule name -> input name, where they differ
    result: str = "w"          # the rule value returned as the output
    clip_attr: str = "clip_gradient"
    mp: int = 0                # mp_: the first ``mp`` inputs share the output's dtype,
    #                            the others (weight32: the master copy) are float32
    out_like: int = 0          # the input (in ``order``) whose dtype the output has
    keeps: tuple = ()          # mutated inputs mxnet's kernel never writes (kept as they are)
    # adamw: nothing changes unless the rescale_grad input is finite and nonzero
    needs_scale: bool = False
    lazy_rows: Any = None      # OpDef.lazy_rows: mxnet's row_sparse path (see registry.py)
    refuses_wd: bool = False   # mxnet's kernel checks wd == 0 (the sparse AdaGrad)

    @property
    def order(self) -> tuple:
        """The inputs as a node holds them: the arguments, then the auxiliary states
        (mxnet's order except for mp_lamb_update_phase1, whose weight32 is read only)."""
        return tuple(i for i in self.inputs if i not in self.mutates) + tuple(self.mutates)

    def role_inputs(self) -> dict:
        """Rule name -> input name for every input the rule reads."""
        out = {n: n for n in self.inputs}
        out.update({"w": "weight", "g": "grad"} if "grad" in self.inputs else {"w": "weight"})
        out.update(self.roles)
        return out

    def written(self, name: str) -> str:
        """The rule value written into mutated input ``name``."""
        if name in self.keeps:
            return name
        inv = {v: k for k, v in self.role_inputs().items()}
        return inv.get(name, name)


def _a(name, default=None, parse=parse_float):
    return Attr(name, parse) if default is None else Attr(name, parse, default)


_LR, _WD, _RESCALE = _a("lr"), _a("wd", 0.0), _a("rescale_grad", 1.0)
_CLIP, _LAZY = _a("clip_gradient", -1.0), _a("lazy_update", True, parse_bool)
_SGD = (_LR, _WD, _RESCALE, _CLIP, _LAZY)
_SGD_MOM = (_LR, _a("momentum", 0.0), _WD, _RESCALE, _CLIP, _LAZY)
_NAG_MOM = (_LR, _a("momentum", 0.0), _WD, _RESCALE, _CLIP)
_LAMB1 = (_a("beta1", 0.9), _a("beta2", 0.999), _a("epsilon", 1e-6), _a("t", None, parse_int),
          _a("bias_correction", True, parse_bool), _a("wd"), _RESCALE, _CLIP)
_LAMB2 = (_LR, _a("lower_bound", -1.0), _a("upper_bound", -1.0))
_ADAMW = (_LR, _a("beta1", 0.9), _a("beta2", 0.999), _a("epsilon", 1e-8), _WD, _a("eta"), _CLIP)


def _base(at, env):
    return {"lr": at.get("lr", 0.0), "wd": at.get("wd", 0.0),
            "rescale": at.get("rescale_grad", 1.0), "clip": at.get("clip_gradient", -1.0)}


def _with(**names):
    """Scalars: the base ones plus ``c0=attr`` ... renamed from attributes."""
    return lambda at, env: dict(_base(at, env), **{k: at[v] for k, v in names.items()})


def _ftml(at, env):
    return dict(_base(at, env), clip=at["clip_grad"], c0=at["beta1"], c1=at["beta2"],
                c2=at["epsilon"], h0=1.0 - at["beta1"] ** at["t"],
                h1=1.0 - at["beta2"] ** at["t"])


def _lamb1(at, env):
    corr = at["bias_correction"]
    return dict(_base(at, env), c0=at["beta1"], c1=at["beta2"], c2=at["epsilon"],
                h0=1.0 - at["beta1"] ** at["t"] if corr else 1.0,
                h1=1.0 - at["beta2"] ** at["t"] if corr else 1.0)


def _lamb2(at, env):
    # LambUpdatePhaseTwoKernel: lr scaled by the trust ratio r1 / r2 (r1 clamped to the
    # bounds given), kept where either norm is 0
    r1, r2 = env["r1"], env["r2"]
    if at["lower_bound"] >= 0:
        r1 = ops.maximum(r1, at["lower_bound"])
    if at["upper_bound"] >= 0:
        r1 = ops.minimum(r1, at["upper_bound"])
    lr = at["lr"]
    return {"lr": ops.where(ops.or_(ops.eq(r1, 0.0), ops.eq(r2, 0.0)), lr, lr * r1 / r2)}


_WG = ("weight", "grad")
_MP = {"w": "weight32"}
UPDATES = {
    "sgd_update": _Update("sgd", _WG, (), _SGD, _with(), lazy_rows="lazy_update"),
    "sgd_mom_update": _Update("sgd_mom", _WG + ("mom",), ("mom",), _SGD_MOM, _with(c0="momentum"),
                              lazy_rows="lazy_update"),
    "mp_sgd_update": _Update("sgd", _WG + ("weight32",), ("weight32",), _SGD, _with(),
                             roles=_MP, mp=2),
    "mp_sgd_mom_update": _Update("sgd_mom", _WG + ("mom", "weight32"), ("mom", "weight32"),
                                 _SGD_MOM, _with(c0="momentum"), roles=_MP, mp=2),
    "nag_mom_update": _Update("nag_mom_out", _WG + ("mom",), ("mom",), _NAG_MOM,
                              _with(c0="momentum")),
    # MP_NAGMomKernel's second momentum line reads the new weight, as "nag_mom"
    "mp_nag_mom_update": _Update("nag_mom", _WG + ("mom", "weight32"), ("mom", "weight32"),
                                 _NAG_MOM, _with(c0="momentum"), roles=_MP, mp=2),
    "adam_update": _Update("adam", _WG + ("mean", "var"), ("mean", "var"),
                           (_LR, _a("beta1", 0.9), _a("beta2", 0.999), _a("epsilon", 1e-8),
                            _WD, _RESCALE, _CLIP, _LAZY),
                           _with(c0="beta1", c1="beta2", c2="epsilon"), lazy_rows="lazy_update"),
    "ftml_update": _Update("ftml", _WG + ("d", "v", "z"), ("d", "v", "z"),
                           (_LR, _a("beta1", 0.6), _a("beta2", 0.999), _a("epsilon", 1e-8),
                            _a("t", None, parse_int), _WD, _RESCALE, _a("clip_grad", -1.0)),
                           _ftml, clip_attr="clip_grad"),
    # mxnet's sparse AdaGrad (mx.nd.sparse.adagrad_update); a row_sparse gradient
    # updates its rows only (runtime/imperative_lazy.py), and weight decay is refused
    "_sparse_adagrad_update": _Update("adagrad", _WG + ("history",), ("history",),
                                      (_LR, _a("epsilon", 1e-7), _WD, _RESCALE, _CLIP),
                                      _with(c0="epsilon"), roles={"hist": "history"},
                                      lazy_rows=True, refuses_wd=True),
    "ftrl_update": _Update("ftrl", _WG + ("z", "n"), ("z", "n"),
                           (_LR, _a("lamda1", 0.01), _a("beta", 1.0), _WD, _RESCALE, _CLIP),
                           _with(c0="beta", c1="lamda1")),
    "rmsprop_update": _Update("rmsprop", _WG + ("n",), ("n",),
                              (_LR, _a("gamma1", 0.95), _a("epsilon", 1e-8), _WD, _RESCALE,
                               _CLIP, _a("clip_weights", -1.0)),
                              _with(c0="gamma1", c1="epsilon", c3="clip_weights")),
    "rmspropalex_update": _Update("rmspropalex", _WG + ("n", "g", "delta"), ("n", "g", "delta"),
                                  (_LR, _a("gamma1", 0.95), _a("gamma2", 0.9),
                                   _a("epsilon", 1e-8), _WD, _RESCALE, _CLIP,
                                   _a("clip_weights", -1.0)),
                                  _with(c0="gamma1", c1="epsilon", c2="gamma2",
                                        c3="clip_weights"),
                                  roles={"g": "grad", "gs": "g"}),
    "signsgd_update": _Update("signsgd", _WG, (), (_LR, _WD, _RESCALE, _CLIP), _with()),
    "signum_update": _Update("signum", _WG + ("mom",), ("mom",),
                             (_LR, _a("momentum", 0.0), _WD, _RESCALE, _CLIP, _a("wd_lh", 0.0)),
                             _with(c0="momentum", c1="wd_lh")),
    "lamb_update_phase1": _Update("lamb1", _WG + ("mean", "var"), ("mean", "var"), _LAMB1,
                                  _lamb1, result="gt"),
    "mp_lamb_update_phase1": _Update("lamb1", _WG + ("mean", "var", "weight32"),
                                     ("mean", "var"), _LAMB1, _lamb1, roles=_MP, result="gt",
                                     mp=2, out_like=2),
    "_adamw_update": _Update("adamw", _WG + ("mean", "var", "rescale_grad"), ("mean", "var"),
                             _ADAMW, _with(c0="beta1", c1="beta2", c2="epsilon", c3="eta"),
                             roles={"rescale": "rescale_grad"}, mp=4, needs_scale=True),
    "_mp_adamw_update": _Update("adamw", _WG + ("mean", "var", "weight32", "rescale_grad"),
                                ("mean", "var", "weight32"), _ADAMW,
                                _with(c0="beta1", c1="beta2", c2="epsilon", c3="eta"),
                                roles={"rescale": "rescale_grad", "w": "weight32"}, mp=2,
                                needs_scale=True),
    "lamb_update_phase2": _Update("lamb2", ("weight", "g", "r1", "r2"), (), _LAMB2, _lamb2),
    "mp_lamb_update_phase2": _Update("lamb2", ("weight", "g", "r1", "r2", "weight32"),
                                     ("weight32",), _LAMB2, _lamb2, roles=_MP, mp=1,
                                     keeps=("weight32",)),   # declared, never written
}


# ---------------------------------------------------------------------------- the math

def _values(name: str, attrs: dict, operands: list) -> dict:
    """Every value of operator ``name``'s rule, over ``operands`` (its inputs in order)."""
    spec = UPDATES[name]
    by_input = dict(zip(spec.order, operands))
    env = {role: by_input[inp] for role, inp in spec.role_inputs().items()}
    for k, v in {**_base(attrs, env), **spec.scalars(attrs, env)}.items():
        env.setdefault(k, v)       # an input named lr / wd (preloaded_*) is the value
    clip = attrs.get(spec.clip_attr, -1.0) >= 0.0
    clipw = attrs.get("clip_weights", -1.0) >= 0.0
    out = optimizer_rules.evaluate(spec.rule, env, clip, clipw)
    if spec.needs_scale:       # PrepareInputBlobs: a step only with a usable scale
        r = env["rescale"]
        ok = ops.and_(ops.eq(r - r, 0.0), ops.ne(r, 0.0))
        out.update({k: ops.where(ok, out[k], env[k]) for k in _produced(name)})
    return out


def _produced(name: str) -> list:
    """The rule values the operator produces: its output, then each mutated input's."""
    spec = UPDATES[name]
    return [spec.result] + [spec.written(m) for m in spec.mutates]


class _TorchValues:
    """An expression handler computing torch tensors: the operators' reference."""

    def __init__(self, inputs):
        self.inputs = inputs

    def value(self, name):
        return self.inputs[int(name)]

    def const(self, x):
        return x

    def where(self, c, a, b):
        return torch.where(c, torch.as_tensor(a, dtype=torch.float64),
                           torch.as_tensor(b, dtype=torch.float64))

    def maximum(self, a, b):
        return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))

    def minimum(self, a, b):
        return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))


for _fn, _torch in {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
                    "neg": torch.neg, "sqrt": torch.sqrt, "abs": torch.abs, "gt": torch.gt,
                    "lt": torch.lt, "eq": torch.eq, "ne": torch.ne, "or_": torch.logical_or,
                    "and_": torch.logical_and}.items():
    setattr(_TorchValues, _fn, staticmethod(lambda *a, _f=_torch: _f(*(
        x if isinstance(x, torch.Tensor) else torch.tensor(x, dtype=torch.float64)
        for x in a))))


def _reference(name):
    def ref(attrs, ins, is_train):
        wide = [x.double() for x in ins]
        leaves = [ops.value(str(i)) for i in range(len(ins))]
        vals = _values(name, attrs, leaves)
        handler = _TorchValues(wide)
        out = []
        spec = UPDATES[name]
        likes = [spec.out_like] + [spec.order.index(m) for m in spec.mutates]
        for value, like in zip(_produced(name), likes):
            v = torch.as_tensor(evaluate(vals[value], handler, name))
            out.append(v.expand(ins[0].shape).to(ins[like].dtype).clone())
        return out
    return ref


# ------------------------------------------------------------------------- shape, type

# inputs of shape (1,), broadcast over the weight
_SCALARS = ("r1", "r2", "lr", "wd", "rescale_grad")


def _shape(name):
    spec = UPDATES[name]

    def infer(attrs, in_shapes):
        if spec.refuses_wd and attrs.get("wd", 0.0) != 0.0:
            raise ShapeError(f"{name} does not support weight decay (wd={attrs['wd']}), as "
                             f"in mxnet; use wd=0")
        known = None
        for inp, s in zip(spec.order, in_shapes):
            if inp not in _SCALARS:
                known = merge_shape(known, s, f"{name}: input '{inp}'")
        shapes = []
        for inp, s in zip(spec.order, in_shapes):
            if inp in _SCALARS:
                if s is not None and (len(s) < 1 or s[0] != 1):
                    raise ShapeError(f"{name}: {inp} must have shape (1,), got {tuple(s)}")
                shapes.append(s if s is not None else (1,))
            else:
                shapes.append(known)
        return shapes, [known]
    return infer


def _types(name):
    spec = UPDATES[name]

    def infer(attrs, in_types):
        # mxnet's ElemwiseType; the mp_ variants (MP_InferType, MPLambPhaseOneType): the
        # first inputs share a dtype, the rest are float32
        plain = spec.inputs[:spec.mp or len(spec.inputs)]
        known = [t for n, t in zip(spec.order, in_types) if n in plain and t is not None]
        t = known[0] if known else None
        out = [t if n in plain else "float32" for n in spec.order]
        return out, [out[spec.out_like]]
    return infer


# ------------------------------------------------------------------------ registration

def _build(name):
    spec = UPDATES[name]

    def build(b, n, is_train):
        raw = {a.name: n.attrs[a.name] for a in spec.attrs}
        refs = []
        likes = [spec.out_like] + [spec.order.index(m) for m in spec.mutates]
        for value, like in zip(_produced(name), likes):
            refs.append(b.op(f"_{name}_value", *n.inputs, value=value, like=like, **raw))
        return refs
    return build


def _value_types(attrs, in_types):
    t = in_types[attrs["like"]]
    return list(in_types), [t]


def _register(name: str, spec: _Update):
    args = [i for i in spec.inputs if i not in spec.mutates]
    register(OpDef(
        name=name, pattern="composite", lowering=Decompose(_build(name)),
        infer_shape=_shape(name), infer_type=_types(name), reference=_reference(name),
        arguments=args, aux=list(spec.mutates), attrs=spec.attrs, mutates_inputs=True,
        lazy_rows=spec.lazy_rows,
        input_order=None if spec.order == spec.inputs else list(spec.inputs),
        doc=f"One step of mxnet's {name} (rule '{spec.rule}'); writes "
            f"{', '.join(spec.mutates) or 'no input'} in place."))
    shape = _shape(name)
    register(OpDef(
        name=f"_{name}_value", pattern="broadcast",
        lowering=Pointwise(lambda attrs, *xs: _values(name, attrs, list(xs))[attrs["value"]]),
        infer_shape=lambda attrs, s: (s, shape(attrs, s)[1]), infer_type=_value_types,
        reference=lambda attrs, ins, is_train: [_reference(name)(attrs, ins, is_train)[
            _produced(name).index(attrs["value"])]],
        arguments=list(spec.order),
        attrs=tuple(spec.attrs) + (Attr("value", str), Attr("like", parse_int)),
        doc=f"One value of {name}'s step (its output or a new state)."))


for _name, _spec in UPDATES.items():
    _register(_name, _spec)
