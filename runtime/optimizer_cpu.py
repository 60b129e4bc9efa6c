"""The cpu lowering of the optimizers' fused update rules.

The same body lines that ``templates/optimizer.py.j2`` turns into one Triton
kernel over a pointer table are translated here into one Python function,
``update(roles..., hyp, rescale, clip, c0, c1, c2, c3)``, called once per step
for all the tensors of one dtype. Each role argument is the list of that role's
tensors; ``hyp`` holds each tensor's per-tensor hyper-parameters, ``(lr, wd)`` and
any further ones the rule names (lr_mult, wd_mult, schedules and bias corrections
folded in). The function updates the tensors that share those values together
(usually one or two groups: weights, and biases with ``wd_mult`` 0), and every
statement is one ``torch._foreach_*`` call over a group.

Two rewrites keep the statements few and in place:

* a list that dies at a statement is overwritten (``_foreach_mul_``), a written
  role's own tensors included once their old values have been read; gradients
  are never written;
* ``x ± s * y`` becomes ``_foreach_add_(x, y, alpha=±s)`` and ``(y * s1) * s2``
  becomes ``y * (s1 * s2)`` when the product is used only there.

So momentum SGD is four in-place statements and no temporary. A statement adding a
term scaled by the weight decay ``wd`` runs only where ``wd`` is not 0 (mxnet's
default, and biases' ``wd_mult`` 0): momentum SGD without decay makes three passes
over the parameters, as PyTorch's does. (Skipping ``x + 0 * w`` differs from
computing it only where ``w`` holds an infinity or NaN.) Values follow the
Triton kernel to fp32 rounding: the hyper-parameters are rounded to fp32 and a
product of scalars is rounded once.
"""
from __future__ import annotations

import ast
import hashlib
from collections import Counter

_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}
_PYOP = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_SCALARS = {"rescale": "rescale", "clip": "clip", "c0": "c0", "c1": "c1", "c2": "c2",
            "c3": "c3"}     # and each per-tensor hyper-parameter ``name`` as ``name_``
_UNARY = {"_sqrt": "sqrt", "_sign": "sign", "_abs": "abs"}


class _Scalar:
    """A scalar expression, as Python code over the update's scalar arguments."""

    def __init__(self, code):
        self.code = code


class _List:
    """A list of tensors held by the variable ``name``."""

    def __init__(self, name, writable):
        self.name, self.writable = name, writable


class _Op:
    """``out = torch._foreach_<fn>(args...)`` (``alpha`` for add: ``args[0] + alpha*args[1]``)."""

    def __init__(self, fn, args, out, alpha=None):
        self.fn, self.args, self.out, self.alpha = fn, list(args), out, alpha


class _Translator:
    def __init__(self, spec):
        self.spec = spec
        self.ops = []
        self.env = {}
        self.scalars = dict(_SCALARS, **{h: f"{h}_" for h in spec.hyp_names})
        self.count = 0
        ct = "torch.float64" if spec.compute_dtype_name == "float64" else "torch.float32"
        self.loads = []
        written = {spec.role_names[i] for i in spec.written}
        for name, dtype in zip(spec.role_names, spec.role_dtypes):
            if name == "w" and spec.mp:
                continue             # the fp32 master copy stands for w in the arithmetic
            if dtype != spec.compute_dtype_name:
                self.loads.append(f"{name}_c = [x.to({ct}) for x in {name}]")
                lst = _List(f"{name}_c", True)
            else:
                lst = _List(name, name in written)
            self.env["w" if name == "master" else name] = lst
        self.originals = dict(self.env)

    def fresh(self):
        self.count += 1
        return f"t{self.count}"

    # -- the expression tree -> ops ----------------------------------------------------
    def node(self, n):
        if isinstance(n, ast.Constant):
            return _Scalar(repr(float(n.value)))
        if isinstance(n, ast.Name) and n.id in self.scalars:
            return _Scalar(self.scalars[n.id])
        if isinstance(n, ast.Name):
            return self.env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            x = self.node(n.operand)
            return _Scalar(f"(-{x.code})") if isinstance(x, _Scalar) else self.op("neg", [x])
        if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
            return self.binary(_BIN[type(n.op)], self.node(n.left), self.node(n.right))
        if isinstance(n, ast.Call):
            f = n.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id
            args = [self.node(a) for a in n.args]
            if fname in _UNARY and isinstance(args[0], _List):
                return self.op(_UNARY[fname], args)
            if fname == "_div":
                return self.binary("div", *args)
            if fname in ("minimum", "maximum") and isinstance(args[0], _List):
                if isinstance(args[1], _Scalar):
                    return self.op("clamp_max" if fname == "minimum" else "clamp_min", args)
                return self.op(fname, args)
        raise NotImplementedError(f"cpu optimizer: unsupported expression {ast.dump(n)[:100]}")

    def binary(self, fn, a, b):
        if isinstance(a, _Scalar) and isinstance(b, _Scalar):
            return _Scalar(f"({a.code} {_PYOP[fn]} {b.code})")
        if isinstance(a, _Scalar):
            if fn in ("add", "mul"):
                return self.op(fn, [b, a])
            if fn == "sub":                  # s - T = (-T) + s
                return self.op("add", [self.op("neg", [b]), a])
            return self.op("mul", [self.op("reciprocal", [b]), a])
        return self.op(fn, [a, b])

    def op(self, fn, args):
        out = _List(self.fresh(), True)
        self.ops.append(_Op(fn, args, out))
        return out

    def translate(self, lines):
        for line in lines:
            stmt = ast.parse(line).body[0]
            self.env[stmt.targets[0].id] = self.node(stmt.value)
        self.fold_scalars()
        return self.emit() or self.emit(roles_in_place=False)

    # -- rewrites -------------------------------------------------------------------------
    def fold_scalars(self):
        """``(y*s1)*s2`` -> ``y*(s1*s2)``; ``x ± y*s`` -> ``add(x, y, alpha=±s)`` (the
        product used only there)."""
        stored = {self.env["w" if n == "master" else n].name for n in self.spec.stored_names}
        uses = Counter(a.name for op in self.ops for a in op.args if isinstance(a, _List))
        producer = {op.out.name: op for op in self.ops}

        def scaled(lst):    # the mul-by-scalar op making ``lst``, if it is used only once
            op = producer.get(lst.name) if isinstance(lst, _List) else None
            if op is not None and op.fn == "mul" and isinstance(op.args[1], _Scalar) \
                    and uses[lst.name] == 1 and lst.name not in stored and op in self.ops:
                return op
            return None

        for op in list(self.ops):
            if op not in self.ops:
                continue
            if op.fn == "mul" and isinstance(op.args[1], _Scalar):
                inner = scaled(op.args[0])
                if inner is not None:
                    self.ops.remove(inner)
                    op.args = [inner.args[0],
                               _Scalar(f"({inner.args[1].code} * {op.args[1].code})")]
            elif op.fn in ("add", "sub") and all(isinstance(a, _List) for a in op.args):
                for k in ((1, 0) if op.fn == "add" else (1,)):
                    inner = scaled(op.args[k])
                    if inner is None:
                        continue
                    self.ops.remove(inner)
                    s = inner.args[1].code
                    op.alpha = _Scalar(f"(-{s})" if op.fn == "sub" else s)
                    op.args = [op.args[1 - k], inner.args[0]]
                    op.fn = "add"
                    break

    def emit(self, roles_in_place=True):
        """Statements, reusing in place every list that dies at a statement, then the
        stores. Returns None when a role's value ended up in another role's tensors
        (the caller renders again without writing into role tensors early)."""
        stores = [(name, self.env["w" if name == "master" else name])
                  for name in self.spec.stored_names]
        last = {}
        for i, op in enumerate(self.ops):
            for a in op.args:
                if isinstance(a, _List):
                    last[a.name] = i
        for _, v in stores:
            last[v.name] = len(self.ops)
        own = {lst.name: name for name, lst in self.originals.items() if lst.writable}
        alias = {}
        lines = list(self.loads)
        for i, op in enumerate(self.ops):
            names = [alias.get(a.name, a.name) if isinstance(a, _List) else a.code
                     for a in op.args]
            lists = [k for k, a in enumerate(op.args) if isinstance(a, _List)]
            order = lists if op.fn == "mul" or (op.fn == "add" and op.alpha is None) \
                else lists[:1]
            dying = next((k for k in order if op.args[k].writable
                          and last.get(op.args[k].name) == i
                          and (roles_in_place or names[k] not in own)), None)
            if op.alpha is not None:
                names.append(f"alpha={op.alpha.code}")
            if dying is not None:
                names[0], names[dying] = names[dying], names[0]
                line = f"torch._foreach_{op.fn}_({', '.join(names)})"
                if op.alpha is not None and _scaled_by(op.alpha.code, "wd_"):
                    line = f"if wd_: {line}"     # no pass over the weights without decay
                lines.append(line)
                alias[op.out.name] = names[0]
            else:
                lines.append(f"{op.out.name} = torch._foreach_{op.fn}({', '.join(names)})")
        for name, v in stores:
            src = alias.get(v.name, v.name)
            if src in own and own[src] != ("w" if name == "master" and self.spec.mp else name):
                return None
            if src != name:
                lines.append(f"torch._foreach_copy_({name}, {src})")
        return lines


def _scaled_by(code: str, name: str) -> bool:
    """Whether the scalar expression ``code`` is a product with the factor ``name``
    (then it is 0 whenever ``name`` is: ``-(lr_ * wd_)``)."""
    def factors(n):
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            return factors(n.operand)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            left, right = factors(n.left), factors(n.right)
            return None if left is None or right is None else left | right
        if isinstance(n, ast.Name):
            return {n.id}
        return set() if isinstance(n, ast.Constant) else None
    found = factors(ast.parse(code, mode="eval").body)
    return found is not None and name in found


class CpuRuleSpec:
    """What the translator needs of an optimizer ``_Spec`` (names, dtypes, written roles)."""

    def __init__(self, spec):
        roles = spec.roles()
        self.role_names = [r[0] for r in roles]
        self.role_dtypes = [str(r[1]).replace("torch.", "") for r in roles]
        self.compute_dtype_name = str(spec.compute_dtype).replace("torch.", "")
        self.written = spec.written()
        self.mp = spec.mp
        self.stored_names = list(spec.state_names) + (["master"] if spec.mp else []) + ["w"]
        self.body = spec.body()
        self.rule = spec.rule
        self.hyp_names = tuple(getattr(spec, "hyp_names", ("lr", "wd")))
        self.summary = ", ".join(f"{n}:{d}" for n, d in zip(self.role_names, self.role_dtypes))


def render(spec) -> str:
    """Python source of ``spec``'s update for the cpu target."""
    from compiler.ir.rendering import environment
    cs = CpuRuleSpec(spec)
    body = _Translator(cs).translate(cs.body)
    return environment.get_template("cpu_optimizer.py.j2").render(k={
        "rule": cs.rule, "summary": cs.summary + (" clip" if spec.clip else "")
        + (" mp" if spec.mp else ""), "roles": cs.role_names, "hyp": list(cs.hyp_names),
        "body": body})


_FUNCTIONS: dict = {}


def update_function(spec):
    """The generated update function of ``spec`` (rendered, cached as a kernel file, loaded)."""
    fn = _FUNCTIONS.get(spec.key)
    if fn is None:
        from compiler.artifacts import kernel_files
        from .launcher import load_module
        source = render(spec)
        h = hashlib.sha256(source.encode()).hexdigest()[:24]
        kernel_files.write_kernel(h, source)
        fn = load_module(h).update
        _FUNCTIONS[spec.key] = fn
    return fn


def launch(spec, groups, lrs, wds, scalars, extra=None):
    """Update every tensor of ``groups`` (per tensor: its role tensors) with one call.

    ``lrs`` / ``wds`` are per tensor; ``extra`` (optional) holds, per tensor, the
    values of the rule's further per-tensor hyper-parameters (``spec.hyp_names[2:]``).
    """
    import numpy as np
    import torch
    from .ndarray import plain
    # plain tensors: NDArray's __torch_function__ would wrap every foreach call (a
    # launch plan's are plain already)
    columns = [[plain(t) for t in col] for col in zip(*groups)]
    f32 = lambda x: float(np.float32(x))  # noqa: E731  (the kernel's fp32 hyper-parameters)
    with torch.no_grad():
        rows = zip(lrs, wds, *zip(*extra)) if extra else zip(lrs, wds)
        hyp = [tuple(f32(x) for x in row) for row in rows]
        update_function(spec)(*columns, hyp, *[f32(s) for s in scalars])
