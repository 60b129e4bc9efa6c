"""The cpu lowering of the optimizers' fused update rules.

The same body lines that ``templates/optimizer.py.j2`` turns into one Triton
kernel over a pointer table are translated here into one Python function,
``update(roles..., lr, wd, rescale, clip, c0, c1, c2, c3)``, whose statements
are ``torch._foreach_*`` calls over the lists of all tensors of one dtype:
one call of the function per step updates every parameter, and each statement
is one ATen call over all of them. ``lr`` and ``wd`` are per-tensor lists
(lr_mult, wd_mult and schedules folded in); the other scalars are shared.

A list that dies at a statement is overwritten in place (``_foreach_mul_``),
including a written role's own tensors once their old values have been read,
so SGD and momentum SGD run without temporaries beyond the scaled gradient;
gradients are never written. Values follow the Triton kernel: fp32 arithmetic
(fp64 for fp64 weights) on the per-tensor scalars rounded to fp32.
"""
from __future__ import annotations

import ast
import hashlib

_BIN = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div"}
_PYOP = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_SHARED = ("rescale", "clip", "c0", "c1", "c2", "c3")


class _Scalar:
    """A scalar expression: ``code`` in Python; per tensor when it uses lr or wd."""

    def __init__(self, code, per_tensor=False):
        self.code, self.per_tensor = code, per_tensor

    def value(self):
        """The argument a foreach call takes: a number, or a list of numbers."""
        if not self.per_tensor:
            return self.code
        return f"[{self.code} for lr_, wd_ in zip(lr, wd)]"


class _List:
    """A list of tensors held by the variable ``name``."""

    def __init__(self, name, writable):
        self.name, self.writable = name, writable


class _Translator:
    def __init__(self, spec):
        self.spec = spec
        self.ops = []            # [fn, args (list of _List | str), out _List, commutative]
        self.env = {}
        self.count = 0
        ct = "torch.float64" if spec.compute_dtype_name == "float64" else "torch.float32"
        self.ct = ct
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

    def scalar(self, n):
        if isinstance(n, ast.Constant):
            return _Scalar(repr(float(n.value)))
        if isinstance(n, ast.Name) and n.id in ("lr", "wd"):
            return _Scalar(f"{n.id}_", True)
        if isinstance(n, ast.Name) and n.id in _SHARED:
            return _Scalar(n.id)
        return None

    def node(self, n):
        s = self.scalar(n)
        if s is not None:
            return s
        if isinstance(n, ast.Name):
            return self.env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            x = self.node(n.operand)
            if isinstance(x, _Scalar):
                return _Scalar(f"(-{x.code})", x.per_tensor)
            return self.op("neg", [x])
        if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
            return self.binary(_BIN[type(n.op)], self.node(n.left), self.node(n.right))
        if isinstance(n, ast.Call):
            f = n.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id
            args = [self.node(a) for a in n.args]
            if fname == "_sqrt":
                return self.op("sqrt", args)
            if fname == "_div":
                return self.binary("div", *args)
            if fname in ("minimum", "maximum") and isinstance(args[1], _Scalar):
                return self.op("clamp_max" if fname == "minimum" else "clamp_min",
                               [args[0], args[1]])
        raise NotImplementedError(f"cpu optimizer: unsupported expression {ast.dump(n)[:100]}")

    def binary(self, fn, a, b):
        if isinstance(a, _Scalar) and isinstance(b, _Scalar):
            return _Scalar(f"({a.code} {_PYOP[fn]} {b.code})", a.per_tensor or b.per_tensor)
        if isinstance(a, _Scalar):
            if fn in ("add", "mul"):
                return self.op(fn, [b, a])
            if fn == "sub":                  # s - T = (-T) + s
                return self.op("add", [self.op("neg", [b]), a])
            return self.op("mul", [self.op("reciprocal", [b]), a])
        return self.op(fn, [a, b])

    def op(self, fn, args):
        out = _List(self.fresh(), True)
        self.ops.append([fn, args, out])
        return out

    def translate(self, lines):
        for line in lines:
            stmt = ast.parse(line).body[0]
            target = stmt.targets[0].id
            self.env[target] = self.node(stmt.value)
        return self.emit() or self.emit(roles_in_place=False)

    def emit(self, roles_in_place=True):
        """Statements, reusing in place every list that dies at a statement, then the
        stores. Returns None when a role's value ended up in another role's tensors
        (the caller renders again without writing into role tensors early)."""
        stores = [(name, self.env["w" if name == "master" else name])
                  for name in self.spec.stored_names]
        last = {}
        for i, (_, args, _) in enumerate(self.ops):
            for a in args:
                if isinstance(a, _List):
                    last[a.name] = i
        for _, v in stores:
            last[v.name] = len(self.ops)
        own = {lst.name: name for name, lst in self.originals.items() if lst.writable}
        alias = {}
        lines = list(self.loads)
        for i, (fn, args, out) in enumerate(self.ops):
            names = [alias.get(a.name, a.name) if isinstance(a, _List) else a.value()
                     for a in args]
            lists = [k for k, a in enumerate(args) if isinstance(a, _List)]
            order = lists if fn in ("add", "mul") else lists[:1]
            dying = next((k for k in order if args[k].writable and last.get(args[k].name) == i
                          and (roles_in_place or names[k] not in own)), None)
            if dying is not None:
                names[0], names[dying] = names[dying], names[0]
                lines.append(f"torch._foreach_{fn}_({', '.join(names)})")
                alias[out.name] = names[0]
            else:
                lines.append(f"{out.name} = torch._foreach_{fn}({', '.join(names)})")
        for name, v in stores:
            src = alias.get(v.name, v.name)
            if src in own and own[src] != ("w" if name == "master" and self.spec.mp else name):
                return None
            if src != name:
                lines.append(f"torch._foreach_copy_({name}, {src})")
        return lines


class CpuRuleSpec:
    """What the translator needs of an optimizer ``_Spec`` (names, dtypes, written roles)."""

    def __init__(self, spec):
        import torch
        roles = spec.roles()
        self.role_names = [r[0] for r in roles]
        self.role_dtypes = [str(r[1]).replace("torch.", "") for r in roles]
        self.compute_dtype_name = str(spec.compute_dtype).replace("torch.", "")
        self.written = spec.written()
        self.mp = spec.mp
        states = list(spec.state_names)
        self.stored_names = states + (["master"] if spec.mp else []) + ["w"]
        self.body = spec.body()
        self.rule = spec.rule
        self.summary = ", ".join(f"{n}:{d}" for n, d in zip(self.role_names, self.role_dtypes))
        self._torch = torch


def render(spec) -> str:
    """Python source of ``spec``'s update for the cpu target."""
    from compiler.codegen import _env
    cs = CpuRuleSpec(spec)
    tr = _Translator(cs)
    body = tr.translate(cs.body)
    return _env.get_template("cpu_optimizer.py.j2").render(k={
        "rule": cs.rule, "summary": cs.summary + (" clip" if spec.clip else "")
        + (" mp" if spec.mp else ""), "params": ", ".join(cs.role_names), "body": body})


_FUNCTIONS: dict = {}


def update_function(spec):
    """The generated update function of ``spec`` (rendered, cached as a kernel file, loaded)."""
    fn = _FUNCTIONS.get(spec.key)
    if fn is None:
        from compiler import cache
        from .launcher import load_module
        source = render(spec)
        h = hashlib.sha256(source.encode()).hexdigest()[:24]
        cache.write_kernel(h, source)
        fn = load_module(h).update
        _FUNCTIONS[spec.key] = fn
    return fn


def launch(spec, groups, lrs, wds, scalars):
    """Update every tensor of ``groups`` (per tensor: its role tensors) with one call."""
    import numpy as np
    import torch
    # plain tensors: NDArray's __torch_function__ would wrap every foreach call
    columns = [[t.as_subclass(torch.Tensor) for t in col] for col in zip(*groups)]
    f32 = lambda x: float(np.float32(x))  # noqa: E731  (the kernel's fp32 hyper-parameters)
    with torch.no_grad():
        update_function(spec)(*columns, [f32(x) for x in lrs], [f32(x) for x in wds],
                              *[f32(s) for s in scalars])
