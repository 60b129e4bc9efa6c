"""mxnet's multi-tensor optimizer operators: ``multi_sgd_update``,
``multi_sgd_mom_update``, ``multi_mp_sgd_update``, ``multi_mp_sgd_mom_update``, their
``preloaded_multi_*`` forms (learning rates and weight decays as input arrays), and the
helpers ``multi_sum_sq``, ``all_finite``, ``multi_all_finite``, ``multi_lars``.

A multi-tensor update is ``Decompose``-d into one single-tensor update per weight
(``optimizer_ops.py``: ``sgd_mom_update`` ..., whose hidden value nodes then fuse), so
the formulas stay in ``optimizer_rules.py``. Its inputs interleave as mxnet lists them
(``weight_0, grad_0, mom_0, weight_1 ...``: ``OpDef.input_order``); the mutated ones
(``mom_i``, ``weight32_i``) are the auxiliary states.
"""
from __future__ import annotations

import torch

from ..ir.expr import ops
from .optimizer_ops import UPDATES, _Update, _register
from .registry import (Attr, Decompose, OpDef, Pointwise, ShapeError, merge_shape, parse_bool,
                       parse_count, parse_float, register)
from . import optimizer_ops as _single


def _floats(v):
    return tuple(float(x) for x in (v if isinstance(v, (tuple, list)) else
                                    _literal_floats(str(v))))


def _literal_floats(text):
    text = text.strip().strip("()[]")
    return [float(x) for x in text.split(",") if x.strip()]


# per weight: mxnet's input names; which are mutated; the single-tensor operator
_MULTI = {
    "multi_sgd_update": (("weight", "grad"), (), "sgd_update"),
    "multi_sgd_mom_update": (("weight", "grad", "mom"), ("mom",), "sgd_mom_update"),
    "multi_mp_sgd_update": (("weight", "grad", "weight32"), ("weight32",), "mp_sgd_update"),
    "multi_mp_sgd_mom_update": (("weight", "grad", "mom", "weight32"), ("mom", "weight32"),
                                "mp_sgd_mom_update"),
}
_COMMON = (Attr("rescale_grad", parse_float, 1.0), Attr("clip_gradient", parse_float, -1.0),
           Attr("num_weights", parse_count, 1))
_MOMENTUM = (Attr("momentum", parse_float, 0.0),)
_LISTS = (Attr("lrs", _floats), Attr("wds", _floats))


# The preloaded forms' single-tensor steps: lr and wd are (1,) inputs.
for _name in ("sgd_update", "sgd_mom_update", "mp_sgd_update", "mp_sgd_mom_update"):
    _s = UPDATES[_name]
    _plain = _s.mp or len(_s.inputs)
    UPDATES[f"_preloaded_{_name}"] = _Update(
        _s.rule, _s.inputs + ("lr", "wd"), _s.mutates,
        tuple(a for a in _s.attrs if a.name not in ("lr", "wd")), _s.scalars, roles=_s.roles,
        mp=_plain)
    _register(f"_preloaded_{_name}", UPDATES[f"_preloaded_{_name}"])


def _names(per, n, preloaded):
    out = [f"{p}_{i}" for i in range(n) for p in per]
    return out + (["lrs", "wds"] if preloaded else [])


def _multi_build(name, preloaded):
    per, mutated, single = _MULTI[name]
    keys = {x.name for x in UPDATES[single].attrs}

    def build(b, n, is_train):
        at, k = n.attrs, n.attrs["num_weights"]
        by_name = dict(zip(_order(per, mutated, k, preloaded), n.inputs))
        extra = {a: at[a] for a in ("rescale_grad", "clip_gradient", "momentum")
                 if a in at and a in keys}
        outs = []
        for i in range(k):
            mine = {p: by_name[f"{p}_{i}"] for p in per}
            ins = [mine[p] for p in UPDATES[single].order]
            if preloaded:
                for v in ("lr", "wd"):
                    mine[v] = b.op("slice_axis", by_name[v + "s"], axis=0, begin=i, end=i + 1)
                ins = [mine[p] for p in UPDATES[f"_preloaded_{single}"].order]
                outs.append(b.op(f"_preloaded_{single}", *ins, **extra))
            else:
                outs.append(b.op(single, *ins, lr=at["lrs"][i], wd=at["wds"][i], **extra))
        return outs
    return build


def _order(per, mutated, k, preloaded):
    """The node's inputs: the arguments, then the auxiliary states."""
    names = _names(per, k, preloaded)
    aux = [x for x in names if x.split("_")[0] in mutated and x not in ("lrs", "wds")]
    return [x for x in names if x not in aux] + aux


def _multi_shape(name, preloaded):
    per, mutated, _ = _MULTI[name]

    def infer(attrs, in_shapes):
        k = attrs["num_weights"]
        for v in () if preloaded else ("lrs", "wds"):
            if len(attrs[v]) != k:
                raise ShapeError(f"{name}: {len(attrs[v])} {v} for num_weights={k}")
        order = _order(per, mutated, k, preloaded)
        by = dict(zip(order, in_shapes))
        outs = []
        for i in range(k):
            s = None
            for p in per:
                s = merge_shape(s, by[f"{p}_{i}"], f"{name}: input '{p}_{i}'")
            for p in per:
                by[f"{p}_{i}"] = s
            outs.append(s)
        if preloaded:
            for v in ("lrs", "wds"):
                by[v] = merge_shape(by[v], (k,), f"{name}: input '{v}'")
        return [by[x] for x in order], outs
    return infer


def _multi_types(name, preloaded):
    per, mutated, _ = _MULTI[name]
    mp = "weight32" in per

    def infer(attrs, in_types):
        order = _order(per, mutated, attrs["num_weights"], preloaded)
        wide = [x.rsplit("_", 1)[0] in ("mom", "weight32") and mp or x in ("lrs", "wds")
                for x in order]
        known = [t for t, w in zip(in_types, wide) if not w and t is not None]
        t = known[0] if known else None
        return ["float32" if w else t for w in wide], [t] * attrs["num_weights"]
    return infer


def _multi_reference(name, preloaded):
    per, mutated, single = _MULTI[name]

    def ref(attrs, ins, is_train):
        k = attrs["num_weights"]
        by = dict(zip(_order(per, mutated, k, preloaded), ins))
        outs, aux = [], []
        for i in range(k):
            mine = {p: by[f"{p}_{i}"] for p in per}
            xs = [mine[p] for p in UPDATES[single].order]
            at = dict(attrs)
            if preloaded:
                mine.update(lr=by["lrs"][i:i + 1], wd=by["wds"][i:i + 1])
                xs = [mine[p] for p in UPDATES[f"_preloaded_{single}"].order]
                r = _single._reference(f"_preloaded_{single}")(at, xs, is_train)
            else:
                at.update(lr=attrs["lrs"][i], wd=attrs["wds"][i])
                r = _single._reference(single)(at, xs, is_train)
            outs.append(r[0])
            aux += r[1:]
        return outs + aux
    return ref


def _register_multi(name, preloaded):
    base = name[len("preloaded_"):] if preloaded else name
    per, mutated, _ = _MULTI[base]
    attrs = _COMMON + (_MOMENTUM if "mom" in per else ()) + (() if preloaded else _LISTS)
    names = lambda at: _names(per, at["num_weights"], preloaded)  # noqa: E731
    order = lambda at: _order(per, mutated, at["num_weights"], preloaded)  # noqa: E731
    register(OpDef(
        name=name, pattern="composite", lowering=Decompose(_multi_build(base, preloaded)),
        infer_shape=_multi_shape(base, preloaded), infer_type=_multi_types(base, preloaded),
        reference=_multi_reference(base, preloaded),
        arguments=lambda at: [x for x in order(at) if x.rsplit("_", 1)[0] not in mutated],
        aux=lambda at: [x for x in order(at) if x.rsplit("_", 1)[0] in mutated],
        outputs=lambda at: [f"output{i}" for i in range(at["num_weights"])],
        input_order=names, attrs=attrs, mutates_inputs=True,
        doc=f"mxnet's {name}: one step for each of num_weights weights."))


for _name in _MULTI:
    _register_multi(_name, False)
    _register_multi(f"preloaded_{_name}", True)


# ------------------------------------------------------------------ norms and checks

def _arrays(at):
    return [f"array_{i}" for i in range(at["num_arrays"])]


def _float32(b, x):
    return x if x.dtype == "float32" else b.op("Cast", x, dtype="float32")


def _sum_sq_build(b, n, is_train):
    parts = [b.op("sum", b.op("square", _float32(b, x))) for x in n.inputs]
    return [parts[0] if len(parts) == 1 else
            b.op("Concat", *parts, dim=0, num_args=len(parts))]


def _finite(b, x):
    # 1 where every element is finite (x - x is 0 exactly then; NaN for inf and NaN)
    return _float32(b, b.op("min", b.op("_equal_scalar", b.op("elemwise_sub", x, x),
                                        scalar=0.0)))


def _all_finite_build(b, n, is_train):
    out = _finite(b, n.inputs[0])
    for x in n.inputs[1:]:
        out = b.op("elemwise_mul", out, _finite(b, x))
    return [out]


def _any_shapes(k, out):
    return lambda attrs, in_shapes: (list(in_shapes), [out(attrs)])


def _f32_out(attrs, in_types):
    return list(in_types), ["float32"]


def _finite_ref(attrs, ins, is_train):
    ok = all(bool(torch.isfinite(x).all()) for x in ins)
    return [torch.tensor([1.0 if ok else 0.0], dtype=torch.float32)]


_INIT = Attr("init_output", parse_bool, True)
register(OpDef(
    name="multi_sum_sq", pattern="composite", lowering=Decompose(_sum_sq_build),
    infer_shape=_any_shapes(None, lambda at: (at["num_arrays"],)), infer_type=_f32_out,
    reference=lambda attrs, ins, is_train: [torch.stack(
        [x.double().square().sum() for x in ins]).float()],
    arguments=_arrays, attrs=(Attr("num_arrays", parse_count),), variadic="num_arrays",
    doc="mxnet's multi_sum_sq: the sum of squares of each array, as a float32 vector."))
register(OpDef(
    name="all_finite", pattern="composite", lowering=Decompose(_all_finite_build),
    infer_shape=_any_shapes(None, lambda at: (1,)), infer_type=_f32_out,
    reference=_finite_ref, arguments=("data",), attrs=(_INIT,),
    doc="mxnet's all_finite: [1.0] if every element is finite, else [0.0]."))
register(OpDef(
    name="multi_all_finite", pattern="composite", lowering=Decompose(_all_finite_build),
    infer_shape=_any_shapes(None, lambda at: (1,)), infer_type=_f32_out,
    reference=_finite_ref, arguments=_arrays, variadic="num_arrays",
    attrs=(Attr("num_arrays", parse_count, 1), _INIT),
    doc="mxnet's multi_all_finite: [1.0] if every element of every array is finite."))


def _lars(attrs, lrs, wss, gss, wds, sqrt=ops.sqrt, where=ops.where):
    # MultiLARSKernel: lr * eta * |w| / (|g| * rescale_grad + wd * |w| + eps) where both
    # norms are positive, else lr
    w = sqrt(wss)
    ratio = lrs * attrs["eta"] * w / (sqrt(gss) * attrs["rescale_grad"] + wds * w
                                      + attrs["eps"])
    return where((w > 0.0) & (gss > 0.0), ratio, lrs)


def _lars_shape(attrs, in_shapes):
    s = None
    for name, x in zip(("lrs", "weights_sum_sq", "grads_sum_sq", "wds"), in_shapes):
        s = merge_shape(s, x, f"multi_lars: input '{name}'")
    return [s] * 4, [s]


register(OpDef(
    name="multi_lars", pattern="elemwise", lowering=Pointwise(_lars),
    infer_shape=_lars_shape,
    reference=lambda attrs, ins, is_train: [_lars(
        attrs, *[x.double() for x in ins], sqrt=torch.sqrt, where=torch.where).to(ins[0].dtype)],
    arguments=("lrs", "weights_sum_sq", "grads_sum_sq", "wds"),
    attrs=(Attr("eta", parse_float), Attr("eps", parse_float),
           Attr("rescale_grad", parse_float, 1.0)),
    doc="mxnet's multi_lars: each layer's learning rate scaled by its LARS trust ratio."))
