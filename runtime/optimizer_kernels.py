"""The optimizers' multi-tensor update kernels: rules, Triton source, launches.

Each rule (``compiler/ops/optimizer_rules.py``) is a few body lines over the weight,
its gradient and its state tensors; ``_Spec`` renders them through ``templates/optimizer.py.j2``
for the ``interpret`` / ``cuda`` targets (the ``cpu`` target's lowering of the
same lines is ``optimizer_cpu.py``). See ``optimizer.py`` for the design of
the launch (pointer table, per-tensor hyper-parameters).
"""
from __future__ import annotations

import hashlib
import logging

import torch

from compiler.errors import MXNetError
# the rules (formulas) live with the registry's optimizer operators, which share them
from compiler.ops.optimizer_rules import RULE_HYP as _RULE_HYP
from compiler.ops.optimizer_rules import RULE_INPUTS as _RULE_INPUTS
from compiler.ops.optimizer_rules import RULES as _RULES
from compiler.ops.optimizer_rules import body as _rule_body

from . import optimizer_cpu, threads
from .ndarray import NDArray
from .ndarray import torch_dtype

log = logging.getLogger("symtriton")

_TL_TYPES = {torch.float16: "tl.float16", torch.float32: "tl.float32",
             torch.float64: "tl.float64", torch.bfloat16: "tl.bfloat16"}



class _Spec:
    """One kernel variant: rule, dtypes and flags."""

    def __init__(self, rule, w_dtype, s_dtype, clip, clipw=False, mp=False):
        self.rule, self.w_dtype, self.s_dtype = rule, w_dtype, s_dtype
        self.clip, self.clipw, self.mp = bool(clip), bool(clipw), bool(mp)
        self.state_names = _RULES[rule][0]
        self.input_names = tuple(_RULE_INPUTS.get(rule, ()))
        self.hyp_names = ("lr", "wd") + tuple(_RULE_HYP.get(rule, ()))
        self.key = (rule, str(w_dtype), str(s_dtype), self.clip, self.clipw, self.mp)

    @property
    def compute_dtype(self):
        return torch.float64 if torch.float64 in (self.w_dtype, self.s_dtype) else torch.float32

    def body(self):
        return _rule_body(self.rule, self.clip, self.clipw)

    def roles(self):
        """(name, torch dtype) in pointer-table order."""
        r = [("w", self.w_dtype), ("g", self.w_dtype)]
        r += [(s, self.s_dtype) for s in self.state_names]
        r += [(s, self.w_dtype) for s in self.input_names]
        if self.mp:
            r.append(("master", torch.float32))
        return r

    def written(self):
        """Indices of the roles the kernel stores."""
        n_states = len(self.state_names)
        mp = [len(self.roles()) - 1] if self.mp else []
        return [0] + list(range(2, 2 + n_states)) + mp

    def render(self) -> str:
        from compiler.ir.rendering import environment
        ct = _TL_TYPES[self.compute_dtype]
        roles = [{"name": n, "elem": _TL_TYPES[d]} for n, d in self.roles()]
        loads = [{"var": "w", "name": "master" if self.mp else "w"}, {"var": "g", "name": "g"}]
        loads += [{"var": s, "name": s} for s in self.state_names + self.input_names]
        stores = [{"name": s, "value": s, "elem": _TL_TYPES[self.s_dtype]}
                  for s in self.state_names]
        if self.mp:
            stores.append({"name": "master", "value": "w", "elem": "tl.float32"})
        stores.append({"name": "w", "value": "w", "elem": _TL_TYPES[self.w_dtype]})
        k = {"rule": self.rule, "summary": ", ".join(f"{n}:{e['elem']}" for n, e in
                                                     zip([r[0] for r in self.roles()], roles))
             + (" clip" if self.clip else "") + (" mp" if self.mp else ""),
             "exact": "fp32" if self.compute_dtype == torch.float32 else "fp64",
             "row": len(roles) + 1, "roles": roles, "ct": ct, "loads": loads,
             "hyp": list(self.hyp_names),
             "body": self.body(), "stores": stores}
        return environment.get_template("optimizer.py.j2").render(k=k)


_KERNELS: dict = {}
_META: dict = {}
_PTRS: dict = {}


def _kernel_for(spec: _Spec):
    fn = _KERNELS.get(spec.key)
    if fn is None:
        from compiler.artifacts import kernel_files
        from .launcher import load_kernel
        source = spec.render()
        h = hashlib.sha256(source.encode()).hexdigest()[:24]
        kernel_files.write_kernel(h, source)
        fn = load_kernel(h)
        _KERNELS[spec.key] = fn
    return fn


def precompile(optimizer, dtypes=(torch.float32,), targets=("interpret",)) -> list:
    """Render and cache the update kernels ``optimizer`` launches for weights of ``dtypes``.

    Used by ``symtriton compile --optimizer`` so that a later (offline) run finds every
    kernel source in the cache: the Triton kernel for ``interpret`` / ``cuda:<arch>``
    targets, the foreach function for ``cpu``. Returns the sources' hashes.
    """
    from compiler.artifacts import kernel_files
    clip = optimizer.clip_gradient
    has_clip = clip is not None and bool(clip) and float(clip) >= 0
    hashes = []
    for dtype in dtypes:
        w = _zeros_like(torch.zeros(1, dtype=dtype).as_subclass(NDArray))
        mp = optimizer._mp(w)
        state = optimizer.create_state_multi_precision(0, w)
        inner = optimizer._split_mp(state)[0] if mp else state
        st = optimizer._state_tensors(inner)
        sources = []
        for rule in optimizer._kernel_rules(inner):
            spec = _Spec(rule, torch_dtype(w), torch_dtype(st[0]) if st else torch_dtype(w),
                         has_clip, optimizer._clip_weights(), mp)
            sources += ([optimizer_cpu.render(spec)] if "cpu" in targets else []) + \
                ([spec.render()] if any(t != "cpu" for t in targets) else [])
        for source in sources:
            h = hashlib.sha256(source.encode()).hexdigest()[:24]
            kernel_files.write_kernel(h, source)
            if h not in hashes:
                hashes.append(h)
    return hashes


def _interpreting():
    from compiler.triton.mode import interpreting
    return interpreting()


def _block_for(numels, gpu):
    if gpu:
        return 1024
    best = None
    for p in range(6, 17):   # interpreter: blocks past 65536 elements get slower again
        b = 1 << p
        cost = sum(-(-n // b) for n in numels) * (b + 16384)
        if best is None or cost < best[0]:
            best = (cost, b)
    return best[1]


def _meta_table(numels, block, device):
    key = (tuple(numels), block, str(device))
    t = _META.get(key)
    if t is None:
        rows = []
        for i, n in enumerate(numels):
            for s in range(0, max(n, 1), block):
                rows += [i, s]
        t = torch.tensor(rows, dtype=torch.int64, device=device)
        if len(_META) > 256:
            _META.clear()
        _META[key] = t
    return t


def _ptr_table(rows, device):
    flat = tuple(v for r in rows for v in r)
    if device.type == "cpu":
        return torch.tensor(flat, dtype=torch.int64)
    key = (flat, str(device))
    t = _PTRS.get(key)
    if t is None:
        t = torch.tensor(flat, dtype=torch.int64, device=device)
        if len(_PTRS) > 64:
            _PTRS.clear()
        _PTRS[key] = t
    return t


def _launch(spec: _Spec, groups, lrs, wds, scalars, device, extra=None):
    """One launch of ``spec``'s kernel over ``groups`` (per tensor: role tensors in order).

    ``lrs`` / ``wds``: per tensor; ``extra``: per tensor, the values of the rule's
    further per-tensor hyper-parameters (``spec.hyp_names[2:]``), or None.
    """
    from .context import cpu_target, device_guard
    from .launcher import LAUNCH_LOCK, LaunchCounter
    if not groups:
        return
    if device.type == "cpu" and cpu_target() == "cpu":
        # with the executors' thread count (runtime.threads); not timed: the
        # update's cost follows the parameter count, not the launch lists'
        threads.run(None, optimizer_cpu.launch, spec, groups, lrs, wds, scalars, extra)
        LaunchCounter.total += 1
        return
    interp = _interpreting()
    if device.type == "cpu" and not interp and cpu_target() == "interpret":
        raise MXNetError("SYMTRITON_CPU_TARGET=interpret, but Triton was imported for the "
                         "GPU in this process: set TRITON_INTERPRET=1 before the first import, "
                         "or leave SYMTRITON_CPU_TARGET unset")
    written = set(spec.written())
    staged = []     # (original, working copy) to copy back after the launch
    work = []
    for tensors in groups:
        row = []
        for i, t in enumerate(tensors):
            if (interp and t.device.type != "cpu") or not t.is_contiguous():
                c = t.detach().to("cpu" if interp else t.device).contiguous()
                if i in written:
                    staged.append((t, c))
                row.append(c)
            else:
                row.append(t)
        work.append(row)
    run_dev = torch.device("cpu") if interp else device
    numels = [r[0].numel() for r in work]
    block = _block_for(numels, gpu=not interp)
    meta = _meta_table(numels, block, run_dev)
    ptrs = _ptr_table([[t.data_ptr() for t in r] + [r[0].numel()] for r in work], run_dev)
    rows = zip(lrs, wds, *zip(*extra)) if extra else zip(lrs, wds)
    hyp = torch.tensor([float(v) for row in rows for v in row], dtype=torch.float32,
                       device=run_dev)
    fn = _kernel_for(spec)
    grid = (meta.numel() // 2,)
    with LAUNCH_LOCK, device_guard(run_dev):   # the weights' device, not the current one
        fn[grid](ptrs, meta, hyp, *[float(s) for s in scalars], BLOCK=block)
    LaunchCounter.total += 1
    with torch.no_grad():
        for orig, c in staged:
            orig.copy_(c)


def _zeros_like(weight, dtype=None):
    z = torch.zeros(tuple(weight.shape), dtype=dtype or torch_dtype(weight),
                    device=weight.device).as_subclass(NDArray)
    ctx = getattr(weight, "_mx_ctx", None)
    if ctx is not None:
        z._mx_ctx = ctx
    return z
