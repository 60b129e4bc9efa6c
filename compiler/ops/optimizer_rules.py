"""The optimizers' update rules: one place for every formula.

Each rule is a few body lines over the weight ``w``, its gradient ``g`` and its
state tensors, in a small Python subset (names, numbers, ``+ - * /``, unary minus,
``_div``, ``_sqrt``, ``_sign``, ``_abs``, ``tl.minimum``, ``tl.maximum``). Three
readers share them: the runtime's multi-tensor kernels
(``runtime/optimizer_kernels.py`` renders them into Triton,
``runtime/optimizer_cpu.py`` into ``torch._foreach_*`` statements) and the
registry's optimizer operators (``compiler/ops/optimizer_ops.py``: ``sgd_update``
...), which evaluate them over expression nodes with :func:`evaluate`, so the
operators and the ``mx.optimizer`` classes compute the same formulas.
"""
from __future__ import annotations

import ast

from ..ir.expr import ops

# rule -> (state role names, body lines). Variables: w (weight, compute type), g (grad),
# the state names, lr, wd (per tensor), rescale, clip, c0..c3 (scalars). A rule may also
# read further tensors it never writes (RULE_INPUTS: e.g. SGLD's noise) and take more
# per-tensor hyper-parameters than lr and wd (RULE_HYP: e.g. bias corrections that
# depend on each tensor's update count).
CLIP = "g = tl.minimum(tl.maximum(g, -clip), clip)"
CLIPW = "w = tl.minimum(tl.maximum(w, -c3), c3)"    # rmsprop's clip_weights
RULES = {
    "sgd": ((), ["g = g * rescale", "{clip}",
                 "w = (1.0 - lr * wd) * w - lr * g"]),
    "sgd_mom": (("mom",), ["g = g * rescale", "{clip}",
                           "mom = c0 * mom - lr * wd * w - lr * g",
                           "w = w + mom"]),
    # mxnet's NAGMomKernel with out=weight: the second momentum line reads the weight
    # it has just written, so wd acts on the new weight there (kept for equal numbers).
    "nag_mom": (("mom",), ["g = g * rescale", "{clip}",
                           "mom = c0 * mom",
                           "wn = w - mom + (c0 + 1.0) * (mom - lr * (g + wd * w))",
                           "mom = mom - lr * (g + wd * wn)",
                           "w = wn"]),
    "adam": (("mean", "var"), ["g = g * rescale + wd * w", "{clip}",
                               "mean = c0 * mean + (1.0 - c0) * g",
                               "var = c1 * var + (1.0 - c1) * g * g",
                               "w = w - lr * _div(mean, _sqrt(var) + c2)"]),
    "adagrad": (("hist",), ["g = g * rescale", "{clip}",
                            "hist = hist + g * g",
                            "w = w + (_div(g, _sqrt(hist + c0)) + w * wd) * -lr"]),
    "rmsprop": (("n",), ["g = g * rescale + wd * w", "{clip}",
                         "n = (1.0 - c0) * g * g + c0 * n",
                         "w = w - lr * _div(g, _sqrt(n + c1))", "{clipw}"]),
    "rmspropalex": (("n", "gs", "delta"), [
        "g = g * rescale + wd * w", "{clip}",
        "n = (1.0 - c0) * g * g + c0 * n",
        "gs = (1.0 - c0) * g + c0 * gs",
        "delta = c2 * delta - lr * _div(g, _sqrt(n - gs * gs + c1))",
        "w = w + delta", "{clipw}"]),
    "adadelta": (("acc_g", "acc_d"), [
        "g = g * rescale", "{clip}",
        "acc_g = c0 * acc_g + (1.0 - c0) * g * g",
        "cur = _div(_sqrt(acc_d + c1), _sqrt(acc_g + c1)) * g",
        "acc_d = c0 * acc_d + (1.0 - c0) * cur * cur",
        "w = w - (cur + wd * w)"]),
}


RULE_INPUTS: dict = {}     # rule -> names of read-only tensor roles after the states
RULE_HYP: dict = {}        # rule -> names of per-tensor hyper-parameters after lr, wd

RULES.update({
    # mxnet's SignumKernel / SignSGDKernel (signsgd reads the raw gradient: its sign
    # ignores rescale_grad and clipping)
    "signum": (("mom",), ["g = g * rescale", "{clip}",
                          "mom = c0 * mom - (1.0 - c0) * wd * w - (1.0 - c0) * g",
                          "w = (1.0 - lr * c1) * w + lr * _sign(mom)"]),
    "signsgd": ((), ["w = (1.0 - lr * wd) * w - lr * _sign(g)"]),
    # FTMLKernel; h0 = 1 - beta1**t, h1 = 1 - beta2**t
    "ftml": (("d", "v", "z"), ["g = g * rescale + wd * w", "{clip}",
                               "v = c1 * v + (1.0 - c1) * (g * g)",
                               "dt = h0 / lr * (_sqrt(_div(v, h1)) + c2)",
                               "z = c0 * z + (1.0 - c0) * g - (dt - c0 * d) * w",
                               "d = dt",
                               "w = -_div(z, dt)"]),
    # Adamax.update; lr already divided by 1 - beta1**t
    "adamax": (("m", "u"), ["g = g * rescale + wd * w", "{clip}",
                            "m = c0 * m + (1.0 - c0) * g",
                            "u = tl.maximum(c1 * u, _abs(g))",
                            "w = w - _div(lr * m, u)"]),
    # Nadam.update; h0 = 1 - m_schedule, h1 = 1 - m_schedule_next, h2 = 1 - momentum_t,
    # h3 = momentum_t_1, h4 = 1 - beta2**t
    "nadam": (("m", "v"), ["g = g * rescale + wd * w", "{clip}",
                           "m = c0 * m + (1.0 - c0) * g",
                           "v = c1 * v + (1.0 - c1) * g * g",
                           "mbar = h2 * _div(g, h0) + h3 * _div(m, h1)",
                           "w = w - _div(lr * mbar, _sqrt(_div(v, h4)) + c2)"]),
    # FtrlUpdateKernel; (sign(z)*lamda1 - z) * (|z| > lamda1) written as
    # -sign(z) * max(|z| - lamda1, 0), the same value
    "ftrl": (("z", "n"), ["g = g * rescale", "{clip}",
                          "z = z + (g - _div((_sqrt(n + g * g) - _sqrt(n)) * w, lr))",
                          "n = n + g * g",
                          "w = _div(-_sign(z) * tl.maximum(_abs(z) - c1, 0.0), "
                          "_div(c0 + _sqrt(n), lr) + wd)"]),
    # DCASGD.update (prev = w * 1.0: the old weight, copied)
    "dcasgd": (("prev",), ["g = g * rescale", "{clip}",
                           "dw = -lr * (g + wd * w + c1 * g * g * (w - prev))",
                           "prev = w * 1.0",
                           "w = w + dw"]),
    "dcasgd_mom": (("mom", "prev"), ["g = g * rescale", "{clip}",
                                     "mom = c0 * mom + -lr * (g + wd * w + c1 * g * g * "
                                     "(w - prev))",
                                     "prev = w * 1.0",
                                     "w = w + mom"]),
    # SGLD.update; noise: standard normal drawn from mx.random's generator, h0 = sqrt(lr)
    "sgld": ((), ["g = g * rescale", "{clip}",
                  "w = w + -lr / 2.0 * (g + wd * w)",
                  "w = w + noise * h0"]),
})
RULE_HYP.update({"ftml": ("h0", "h1"), "nadam": ("h0", "h1", "h2", "h3", "h4"),
                     "sgld": ("h0",)})
RULE_INPUTS.update({"sgld": ("noise",)})

RULES.update({
    # MultiLAMBKernelStep1 (gt: the step direction, a scratch role) and Step2 (the
    # trust ratio folded into lr); h0 = 1 - beta1**t, h1 = 1 - beta2**t (1 without
    # bias correction)
    "lamb1": (("mean", "var", "gt"), ["g = g * rescale", "{clip}",
                                      "mean = c0 * mean + (1.0 - c0) * g",
                                      "var = c1 * var + (1.0 - c1) * g * g",
                                      "gt = _div(_div(mean, h0), _sqrt(_div(var, h1)) + c2)"
                                      " + wd * w"]),
    "lamb2": ((), ["w = w - lr * g"]),
})
RULE_HYP.update({"lamb1": ("h0", "h1")})


# mxnet's NAGMomKernel writing a separate output (the ``nag_mom_update`` operator in
# a graph): its second momentum line reads the old weight (the runtime's "nag_mom"
# runs with out=weight, where it reads the new one).
RULES["nag_mom_out"] = (("mom",), ["g = g * rescale", "{clip}",
                                   "mom = c0 * mom",
                                   "wn = w - mom + (c0 + 1.0) * (mom - lr * (g + wd * w))",
                                   "mom = mom - lr * (g + wd * w)",
                                   "w = wn"])


# mxnet's AdamWKernel / MPAdamWKernel (contrib.adamw_update); c3 = eta
RULES["adamw"] = (("mean", "var"), ["g = g * rescale", "{clip}",
                                    "mean = c0 * mean + (1.0 - c0) * g",
                                    "var = c1 * var + (1.0 - c1) * g * g",
                                    "w = w - c3 * (lr * _div(mean, _sqrt(var) + c2) + wd * w)"])


def body(rule: str, clip: bool, clipw: bool = False) -> list:
    """The body lines of ``rule``, with gradient (and weight) clipping where asked."""
    out = []
    for line in RULES[rule][1]:
        if line == "{clip}":
            out += [CLIP] if clip else []
        elif line == "{clipw}":
            out += [CLIPW] if clipw else []
        else:
            out.append(line)
    return out


def _sign(x):
    # mxnet's sign: 1 above 0, -1 below, 0 at 0 (and for NaN)
    return ops.where(x > 0.0, 1.0, ops.where(x < 0.0, -1.0, 0.0))


def _maximum(a, b):
    return max(a, b) if _number(a) and _number(b) else ops.maximum(a, b)


def _minimum(a, b):
    return min(a, b) if _number(a) and _number(b) else ops.minimum(a, b)


def _number(x):
    return isinstance(x, (int, float))


_CALLS = {"_div": lambda a, b: a / b, "_sqrt": ops.sqrt, "_sign": _sign, "_abs": ops.abs,
          "minimum": _minimum, "maximum": _maximum}
_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b}


def _value(node, env):
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left, env), _value(node.right, env))
    if isinstance(node, ast.Call):
        f = node.func
        fn = _CALLS[f.attr if isinstance(f, ast.Attribute) else f.id]
        return fn(*[_value(a, env) for a in node.args])
    raise ValueError(f"optimizer rule: unsupported expression {ast.dump(node)[:80]}")


def evaluate(rule: str, env: dict, clip: bool, clipw: bool = False) -> dict:
    """Run ``rule``'s body lines over ``env`` and return the final values.

    Parameters
    ----------
    rule : str
        A key of ``RULES``.
    env : dict
        Every name the body reads: the tensors (``w``, ``g``, the states) as
        expression nodes, the scalars (``lr``, ``wd``, ``rescale``, ``clip``,
        ``c0``..., ``h0``...) as Python numbers or expression nodes.
    clip, clipw : bool
        Whether the gradient (and, for rmsprop, the weight) is clipped.

    Returns
    -------
    dict
        ``env`` updated by every assignment: ``w`` and the states hold their new values.
    """
    env = dict(env)
    for line in body(rule, clip, clipw):
        stmt = ast.parse(line).body[0]
        env[stmt.targets[0].id] = _value(stmt.value, env)
    return env
