"""Optimizers with mxnet 1.9.1's names, arguments, state layout and update formulas.

``SGD`` (momentum, wd, rescale_grad, clip_gradient, lr_mult / wd_mult from the
symbol's ``__lr_mult__`` / ``__wd_mult__`` attributes, lr_scheduler), ``NAG``,
``Adam``, ``AdaGrad``, ``RMSProp`` (plain and centered), ``AdaDelta``; ``create``,
``register``, ``get_updater`` and ``Updater`` (``get_states`` / ``set_states``).

Multi-tensor launches
---------------------
Every update rule is a generated Triton kernel (``templates/optimizer.py.j2``),
and one call of :meth:`Optimizer.update_multi` launches it **once per
(dtype, device)** for all the parameters it is given. The kernel is generic
in the number and sizes of tensors:

* ``ptrs`` is an int64 table with one row per tensor holding the data
  pointers of its roles (weight, gradient, states..., fp32 master copy) and
  its element count; the kernel casts them back with
  ``.to(tl.pointer_type(...))`` (works compiled and in Triton's interpreter);
* ``meta`` maps each program id to (tensor row, first element), so one grid
  covers every block of every tensor;
* ``hyp`` holds each tensor's learning rate and weight decay (lr_mult,
  wd_mult, schedules, Adam's bias correction all folded in on the host), and
  the optimizer-wide constants (rescale_grad, clip_gradient, momentum, betas,
  ...) are runtime scalar arguments.

So a source depends only on the rule, the dtypes and a few flags (momentum
or not, clipping or not, centered, multi-precision): changing lr or the set
of parameters never recompiles. The alternative that was considered,
specialising the source to N tensors with N pointer parameters per role and
a chain of ``if pid == k`` blocks, compiles once per parameter set and grows
with N; the pointer table costs one tiny int64 tensor per step instead
(cached per pointer set on the GPU). Block size: 1024 elements a program on
the GPU; in the interpreter, where each program is costly, the power of two
that minimises ``programs * (block + 16384)``, at most 65536 (measured:
~2 ms fixed cost a program, and larger tiles slow down again).

On CPU tensors (the ``cpu`` target, the default for ``cpu()`` contexts) the
same body lines are lowered to one generated function of ``torch._foreach_*``
calls instead (``runtime/optimizer_cpu.py``): one call per step for all the
parameters of a dtype. ``SYMTRITON_CPU_TARGET=interpret`` runs the Triton
kernel in the interpreter there.

Numbers follow mxnet's fused operators (``sgd_mom_update``,
``nag_mom_update``, ``adam_update``, ``rmsprop_update``,
``rmspropalex_update``) and the Python bodies of AdaGrad / AdaDelta, computed
in fp32 (fp64 for fp64 weights); SGD's momentum state holds mxnet's sign
(``mom = momentum*mom - lr*wd*w - lr*g; w += mom``), so states move both
ways. Unlike mxnet's AdaDelta, ``grad`` is not rescaled in place.

State files
-----------
:meth:`Updater.get_states` writes a safe format: a magic line, a JSON header
(state structure, dtypes, shapes, offsets, the optimizer's plain attributes
when ``dump_optimizer=True``) and the raw little-endian array bytes. Loading
it never executes code. mxnet's pickled ``.states`` are read only with
``set_states(data, allow_pickle=True)``, through a restricted unpickler that
maps ``mxnet.ndarray.ndarray.NDArray`` to a decoder of its raw bytes and the
registered optimizer / lr_scheduler classes to ours, and refuses every other
global.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import pickle
import struct
import warnings

import numpy as np
import torch

from compiler.errors import MXNetError
from . import lr_scheduler as _lrs
from . import optimizer_cpu
from .ndarray import NDArray

log = logging.getLogger("symtriton")

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdaGrad", "RMSProp", "AdaDelta", "register",
           "create", "get_updater", "Updater"]


# --------------------------------------------------------------------------- kernels
_TL_TYPES = {torch.float16: "tl.float16", torch.float32: "tl.float32",
             torch.float64: "tl.float64", torch.bfloat16: "tl.bfloat16"}

# rule -> (state role names, body lines). Variables: w (weight, compute type), g (grad),
# the state names, lr, wd (per tensor), rescale, clip, c0..c3 (scalars).
_CLIP = "g = tl.minimum(tl.maximum(g, -clip), clip)"
_RULES = {
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


class _Spec:
    """One kernel variant: rule, dtypes and flags."""

    def __init__(self, rule, w_dtype, s_dtype, clip, clipw=False, mp=False):
        self.rule, self.w_dtype, self.s_dtype = rule, w_dtype, s_dtype
        self.clip, self.clipw, self.mp = bool(clip), bool(clipw), bool(mp)
        self.state_names = _RULES[rule][0]
        self.key = (rule, str(w_dtype), str(s_dtype), self.clip, self.clipw, self.mp)

    @property
    def compute_dtype(self):
        return torch.float64 if torch.float64 in (self.w_dtype, self.s_dtype) else torch.float32

    def body(self):
        out = []
        for line in _RULES[self.rule][1]:
            if line == "{clip}":
                if self.clip:
                    out.append(_CLIP)
            elif line == "{clipw}":
                if self.clipw:
                    out.append("w = tl.minimum(tl.maximum(w, -c3), c3)")
            else:
                out.append(line)
        return out

    def roles(self):
        """(name, torch dtype) in pointer-table order."""
        r = [("w", self.w_dtype), ("g", self.w_dtype)]
        r += [(s, self.s_dtype) for s in self.state_names]
        if self.mp:
            r.append(("master", torch.float32))
        return r

    def written(self):
        """Indices of the roles the kernel stores."""
        n = len(self.roles())
        return [0] + list(range(2, n))

    def render(self) -> str:
        from compiler.codegen import _env
        ct = _TL_TYPES[self.compute_dtype]
        roles = [{"name": n, "elem": _TL_TYPES[d]} for n, d in self.roles()]
        loads = [{"var": "w", "name": "master" if self.mp else "w"}, {"var": "g", "name": "g"}]
        loads += [{"var": s, "name": s} for s in self.state_names]
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
             "body": self.body(), "stores": stores}
        return _env.get_template("optimizer.py.j2").render(k=k)


_KERNELS: dict = {}
_META: dict = {}
_PTRS: dict = {}


def _kernel_for(spec: _Spec):
    fn = _KERNELS.get(spec.key)
    if fn is None:
        from compiler import cache
        from .launcher import load_kernel
        source = spec.render()
        h = hashlib.sha256(source.encode()).hexdigest()[:24]
        cache.write_kernel(h, source)
        fn = load_kernel(h)
        _KERNELS[spec.key] = fn
    return fn


def precompile(optimizer, dtypes=(torch.float32,), targets=("interpret",)) -> list:
    """Render and cache the update kernels ``optimizer`` launches for weights of ``dtypes``.

    Used by ``symtriton compile --optimizer`` so that a later (offline) run finds every
    kernel source in the cache: the Triton kernel for ``interpret`` / ``cuda:<arch>``
    targets, the foreach function for ``cpu``. Returns the sources' hashes.
    """
    from compiler import cache
    clip = optimizer.clip_gradient
    has_clip = clip is not None and bool(clip) and float(clip) >= 0
    hashes = []
    for dtype in dtypes:
        w = _zeros_like(torch.zeros(1, dtype=dtype).as_subclass(NDArray))
        mp = optimizer._mp(w)
        state = optimizer.create_state_multi_precision(0, w)
        inner = optimizer._split_mp(state)[0] if mp else state
        st = optimizer._state_tensors(inner)
        spec = _Spec(optimizer._rule(inner), w.dtype, st[0].dtype if st else w.dtype,
                     has_clip, optimizer._clip_weights(), mp)
        sources = ([optimizer_cpu.render(spec)] if "cpu" in targets else []) + \
            ([spec.render()] if any(t != "cpu" for t in targets) else [])
        for source in sources:
            h = hashlib.sha256(source.encode()).hexdigest()[:24]
            cache.write_kernel(h, source)
            if h not in hashes:
                hashes.append(h)
    return hashes


def aot_kernels(name, params, targets) -> list:
    """``symtriton compile --optimizer NAME``: the hashes of the update kernels
    ``create(name, **params)`` launches (the ``symtriton.aot_kernels`` entry point)."""
    return precompile(create(name, **params), targets=targets)


def _interpreting():
    from compiler.triton_mode import interpreting
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


def _launch(spec: _Spec, groups, lrs, wds, scalars, device):
    """One launch of ``spec``'s kernel over ``groups`` (per tensor: role tensors in order)."""
    from .context import cpu_target
    from .launcher import LAUNCH_LOCK, LaunchCounter
    if not groups:
        return
    if device.type == "cpu" and cpu_target() == "cpu":
        optimizer_cpu.launch(spec, groups, lrs, wds, scalars)
        LaunchCounter.total += 1
        return
    interp = _interpreting()
    if device.type == "cpu" and not interp:
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
    hyp = torch.tensor([v for pair in zip(lrs, wds) for v in pair], dtype=torch.float32,
                       device=run_dev)
    fn = _kernel_for(spec)
    grid = (meta.numel() // 2,)
    with LAUNCH_LOCK:
        fn[grid](ptrs, meta, hyp, *[float(s) for s in scalars], BLOCK=block)
    LaunchCounter.total += 1
    with torch.no_grad():
        for orig, c in staged:
            orig.copy_(c)


# --------------------------------------------------------------------------- helpers
def _zeros_like(weight, dtype=None):
    z = torch.zeros(tuple(weight.shape), dtype=dtype or weight.dtype,
                    device=weight.device).as_subclass(NDArray)
    ctx = getattr(weight, "_mx_ctx", None)
    if ctx is not None:
        z._mx_ctx = ctx
    return z


def _device_id(t):
    ctx = getattr(t, "context", None)
    if ctx is not None and hasattr(ctx, "device_id"):
        return ctx.device_id
    return t.device.index or 0


# --------------------------------------------------------------------------- Optimizer
class Optimizer:
    """The base class of all optimizers (mxnet's constructor arguments and semantics)."""

    opt_registry: dict = {}
    _rule_states = 1

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0., clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if self.lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        self.lr = learning_rate
        if self.lr_scheduler is not None and learning_rate is not None:
            if self.lr_scheduler.base_lr != learning_rate:
                print(UserWarning("learning rate from ``lr_scheduler`` has been "
                                  "overwritten by ``learning_rate`` in optimizer."))
                self.lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult = {}
        self.wd_mult = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self._current_device = 0
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise MXNetError("param_idx2name should be a dict of param indexes to names.")
        self.idx2name = param_idx2name.copy()
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.allow_np_array = False
        self.set_lr_mult({})
        self.set_wd_mult({})

    # -- registry ------------------------------------------------------------------
    @staticmethod
    def register(klass):
        """Register an optimizer class under its lower-cased name."""
        if not isinstance(klass, type):
            raise MXNetError("register takes a class")
        name = klass.__name__.lower()
        if name in Optimizer.opt_registry:
            warnings.warn(f"WARNING: New optimizer {klass.__module__}.{klass.__name__} is "
                          f"overriding existing optimizer "
                          f"{Optimizer.opt_registry[name].__module__}."
                          f"{Optimizer.opt_registry[name].__name__}")
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """Instantiate a registered optimizer by (case-insensitive) name."""
        if name.lower() in Optimizer.opt_registry:
            return Optimizer.opt_registry[name.lower()](**kwargs)
        raise ValueError(f"Cannot find optimizer {name}")

    # -- learning rate and multipliers --------------------------------------------
    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                              "set_learning_rate can mutate the value of the learning rate of "
                              "the optimizer only when the LRScheduler of the optimizer is "
                              "undefined.")
        self.lr = lr

    def set_lr_scale(self, args_lrscale):
        raise DeprecationWarning

    def set_lr_mult(self, args_lr_mult):
        """Per-parameter lr multipliers: symbol ``__lr_mult__`` attributes, then the dict."""
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        """Per-parameter wd multipliers: 0 for names not ending in ``_weight`` / ``_gamma``
        (among ``idx2name``), symbol ``__wd_mult__`` attributes, then the dict."""
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not (n.endswith("_weight") or n.endswith("_gamma")):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _set_current_context(self, device_id):
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]
        self._current_device = device_id

    def _update_count(self, index):
        if not isinstance(index, (list, tuple)):
            index = [index]
        for idx in index:
            if idx not in self._index_update_count:
                self._index_update_count[idx] = self.begin_num_update
            self._index_update_count[idx] += 1
            self.num_update = max(self._index_update_count[idx], self.num_update)

    def _get_lrs(self, indices):
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        lrs = [lr for _ in indices]
        for i, index in enumerate(indices):
            if index in self.param_dict:
                lrs[i] *= self.param_dict[index].lr_mult
            elif index in self.lr_mult:
                lrs[i] *= self.lr_mult[index]
            elif index in self.idx2name:
                lrs[i] *= self.lr_mult.get(self.idx2name[index], 1.0)
        return lrs

    def _get_lr(self, index):
        return self._get_lrs([index])[0]

    def _get_wds(self, indices):
        wds = [self.wd for _ in indices]
        for i, index in enumerate(indices):
            if index in self.param_dict:
                wds[i] *= self.param_dict[index].wd_mult
            elif index in self.wd_mult:
                wds[i] *= self.wd_mult[index]
            elif index in self.idx2name:
                wds[i] *= self.wd_mult.get(self.idx2name[index], 1.0)
        return wds

    def _get_wd(self, index):
        return self._get_wds([index])[0]

    # -- states --------------------------------------------------------------------
    def create_state(self, index, weight):
        """Auxiliary state for ``weight`` (``None`` when the rule keeps none)."""
        return None

    def _mp(self, weight):
        return bool(self.multi_precision) and weight.dtype == torch.float16

    def create_state_multi_precision(self, index, weight):
        """``(fp32 master copy, state)`` for fp16 weights with multi_precision, else the state."""
        if self._mp(weight):
            master = _zeros_like(weight, torch.float32)
            with torch.no_grad():
                master.copy_(weight)
            return (master, self.create_state(index, master))
        if weight.dtype == torch.float16 and not self.multi_precision:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or "
                          "slow convergence. Consider using multi_precision=True option of the "
                          "optimizer")
        return self.create_state(index, weight)

    # -- the kernel-side description a subclass gives -------------------------------
    def _rule(self, state):
        """Rule name for the fused kernel given this weight's (inner) state."""
        raise NotImplementedError(f"{type(self).__name__} has no fused update rule")

    def _state_tensors(self, state):
        """State tensors in the rule's role order."""
        if state is None:
            return []
        return list(state) if isinstance(state, (tuple, list)) else [state]

    def _split_mp(self, state):
        """(inner state, master) for a multi-precision state."""
        return state[1], state[0]

    def _scalars(self):
        return (0.0, 0.0, 0.0, 0.0)

    def _clip_weights(self):
        return False

    def _state_dtype(self, weight):
        return weight.dtype

    def _hyper(self, indices):
        return self._get_lrs(indices), self._get_wds(indices)

    # -- updates --------------------------------------------------------------------
    def update(self, index, weight, grad, state):
        """Update one parameter (one launch)."""
        self.update_multi([index], [weight], [grad], [state], multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state):
        """Update with the fp32 master copy when the weight is fp16 and multi_precision."""
        if type(self).update is not Optimizer.update:     # a user's Python update rule
            items = zip(index, weight, grad, state) if isinstance(index, (list, tuple)) else \
                [(index, weight, grad, state)]
            for i, w, g, s in items:
                if self._mp(w):
                    master, inner = s[0], s[1]
                    self.update(i, master, g.to(torch.float32), inner)
                    with torch.no_grad():
                        w.copy_(master)
                else:
                    self.update(i, w, g, s)
            return
        if isinstance(index, (list, tuple)):
            self.update_multi(index, weight, grad, state, multi_precision=None)
        else:
            self.update_multi([index], [weight], [grad], [state], multi_precision=None)

    def update_multi(self, indices, weights, grads, states, multi_precision=None):
        """Update every parameter given: one kernel launch per (dtype, device).

        ``multi_precision=None`` uses the master copy where the optimizer's
        ``multi_precision`` applies to the weight (``update_multi_precision``),
        ``False`` treats every state as the plain state (``update``).
        """
        indices, weights, grads, states = list(indices), list(weights), list(grads), list(states)
        if not indices:
            return
        self._update_count(indices)
        lrs, wds = self._hyper(indices)
        clip = self.clip_gradient
        has_clip = clip is not None and bool(clip) and float(clip) >= 0
        scalars = (float(self.rescale_grad), float(clip) if has_clip else 0.0) + \
            tuple(float(s) for s in self._scalars())
        plan: dict = {}
        for i, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds):
            mp = self._mp(w) if multi_precision is None else False
            if mp:
                inner, master = self._split_mp(s)
            else:
                inner, master = s, None
            rule = self._rule(inner)
            st = self._state_tensors(inner)
            s_dtype = st[0].dtype if st else w.dtype
            spec = _Spec(rule, w.dtype, s_dtype, has_clip, self._clip_weights(), mp)
            w_t, g_t = torch.Tensor.as_subclass(w, torch.Tensor), \
                torch.Tensor.as_subclass(g, torch.Tensor)   # attribute reads skip NDArray
            if g_t.dtype != w_t.dtype or g_t.device != w_t.device:
                g = g.to(device=w_t.device, dtype=w_t.dtype)
            tensors = [w, g] + st + ([master] if mp else [])
            entry = plan.setdefault((spec.key, str(w_t.device)), (spec, w_t.device, [], [], []))
            entry[2].append(tensors)
            entry[3].append(lr)
            entry[4].append(wd)
        for spec, device, groups, glrs, gwds in plan.values():
            _launch(spec, groups, glrs, gwds, scalars, device)

    # -- pickling (mxnet compatibility; our own files never pickle) ---------------
    def __getstate__(self):
        ret = self.__dict__.copy()
        ret.pop("param_dict", None)
        return ret

    def __setstate__(self, state):
        self.__dict__ = dict(state)
        self.param_dict = {}
        self.__dict__.setdefault("_current_device", 0)
        if "_all_index_update_counts" not in self.__dict__:
            self._all_index_update_counts = {0: {}}
        if "_index_update_count" not in self.__dict__:
            self._index_update_count = self._all_index_update_counts.setdefault(
                self._current_device, {})


register = Optimizer.register
create = Optimizer.create_optimizer


class _MomentumState:
    """State layout shared by SGD and NAG: ``mom`` or None; ``(mom, fp32 master)`` with
    multi_precision (mxnet's order for these two)."""

    def create_state_multi_precision(self, index, weight):
        if self._mp(weight):
            master = _zeros_like(weight, torch.float32)
            with torch.no_grad():
                master.copy_(weight)
            return (self.create_state(index, master), master)
        return Optimizer.create_state_multi_precision(self, index, weight)

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            return _zeros_like(weight)
        return None

    def _split_mp(self, state):
        return state[0], state[1]

    def _state_tensors(self, state):
        return [state] if (state is not None and self.momentum > 0) else []

    def _scalars(self):
        return (float(self.momentum), 0.0, 0.0, 0.0)


@register
class SGD(_MomentumState, Optimizer):
    """SGD with momentum and weight decay (mxnet's ``sgd_update`` / ``sgd_mom_update``).

    ``state = momentum * state - lr * (rescale_grad * clip(grad) + wd * weight)``;
    ``weight += state``. ``lazy_update`` is accepted (all arrays are dense).
    """

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = 4

    def _rule(self, state):
        return "sgd_mom" if (state is not None and self.momentum > 0) else "sgd"


@register
class NAG(_MomentumState, Optimizer):
    """Nesterov accelerated gradient (mxnet's ``nag_mom_update``; ``sgd_update`` without
    momentum)."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def _rule(self, state):
        return "nag_mom" if (state is not None and self.momentum > 0) else "sgd"


@register
class Adam(Optimizer):
    """Adam (mxnet's ``adam_update`` with the bias correction folded into lr)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _rule(self, state):
        return "adam"

    def _scalars(self):
        return (float(self.beta1), float(self.beta2), float(self.epsilon), 0.0)

    def _hyper(self, indices):
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        out = []
        for index, lr in zip(indices, lrs):
            t = self._index_update_count[index]
            coef1 = 1. - self.beta1 ** t
            coef2 = 1. - self.beta2 ** t
            out.append(lr * math.sqrt(coef2) / coef1)
        return out, wds


@register
class AdaGrad(Optimizer):
    """AdaGrad: ``history += g*g; w += (g / sqrt(history + eps) + w*wd) * -lr``."""

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return _zeros_like(weight, torch.float32)

    def _rule(self, state):
        return "adagrad"

    def _scalars(self):
        return (float(self.float_stable_eps), 0.0, 0.0, 0.0)


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton) or, with ``centered=True``, Graves' variant."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return (_zeros_like(weight, torch.float32), _zeros_like(weight, torch.float32),
                    _zeros_like(weight, torch.float32))
        return (_zeros_like(weight, torch.float32),)

    def _rule(self, state):
        return "rmspropalex" if self.centered else "rmsprop"

    def _clip_weights(self):
        return bool(self.clip_weights) and float(self.clip_weights) >= 0

    def _scalars(self):
        return (float(self.gamma1), float(self.epsilon), float(self.gamma2),
                float(self.clip_weights) if self._clip_weights() else 0.0)


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler): no learning rate; ``w -= delta + wd * w``."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (_zeros_like(weight, torch.float32), _zeros_like(weight, torch.float32))

    def _rule(self, state):
        return "adadelta"

    def _scalars(self):
        return (float(self.rho), float(self.epsilon), 0.0, 0.0)


# --------------------------------------------------------------------------- Updater
MAGIC = b"SYMTRITON-OPTIMIZER-STATES\n"
_FORMAT_VERSION = 1
_DTYPES = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
           "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
           "int32": torch.int32, "int64": torch.int64}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}


def _fused(optimizer) -> bool:
    """True when the optimizer's updates are the built-in kernels (not a user override)."""
    cls = type(optimizer)
    return (cls.update is Optimizer.update
            and cls.update_multi_precision is Optimizer.update_multi_precision
            and cls._rule is not Optimizer._rule)


class Updater:
    """Apply an optimizer to (index, grad, weight); keeps one state per index."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}
        self.aggregate_updates = optimizer.aggregate_num > 0

    def __call__(self, index, grad, weight):
        if isinstance(index, (list, tuple)):
            self.update_all(index, grad, weight)
        else:
            self.update_all([index], [grad], [weight])

    def _ensure_states(self, indices, weights):
        for idx, w in zip(indices, weights):
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, w)
                self.states_synced[idx] = True
            elif not self.states_synced.get(idx, False):
                self.states[idx] = self.sync_state_context(self.states[idx], w)
                self.states_synced[idx] = True

    def update_all(self, indices, grads, weights):
        """Update all given parameters: one launch per (dtype, device) for built-in rules."""
        indices = [i.decode() if isinstance(i, bytes) else i for i in indices]
        grads, weights = list(grads), list(weights)
        if len(indices) != len(grads) or len(indices) != len(weights):
            raise MXNetError("update_all needs as many grads and weights as indices")
        self._ensure_states(indices, weights)
        by_dev: dict = {}
        for i, g, w in zip(indices, grads, weights):
            by_dev.setdefault(_device_id(w), []).append((i, g, w))
        opt = self.optimizer
        for dev_id, items in by_dev.items():
            opt._set_current_context(dev_id)
            if _fused(opt):
                idx, gs, ws = zip(*items)
                opt.update_multi(list(idx), list(ws), list(gs), [self.states[i] for i in idx],
                                 multi_precision=None)
            else:
                for i, g, w in items:
                    opt.update_multi_precision(i, w, g, self.states[i])

    def sync_state_context(self, state, weight):
        """Move a state (tensor or nested tuple) onto ``weight``'s device."""
        if state is None:
            return None
        if isinstance(state, (tuple, list)):
            return type(state)(self.sync_state_context(s, weight) for s in state)
        if torch.is_tensor(state):
            out = state.detach().to(weight.device).as_subclass(NDArray)
            ctx = getattr(weight, "_mx_ctx", None)
            if ctx is not None:
                out._mx_ctx = ctx
            return out
        return state

    # -- serialisation ------------------------------------------------------------
    def get_states(self, dump_optimizer=False) -> bytes:
        """States (and the optimizer's settings when ``dump_optimizer``) as safe bytes.

        With ``SYMTRITON_STATES_FORMAT=mxnet``, mxnet 1.9.1's pickle of the states
        instead (``runtime/mxnet_states.py``), which mxnet loads.
        """
        from . import mxnet_states
        if mxnet_states.states_format() == "mxnet":
            if dump_optimizer:
                raise MXNetError("SYMTRITON_STATES_FORMAT=mxnet writes the states only: "
                                 "dump_optimizer=True would need a pickled mxnet Optimizer")
            return mxnet_states.dumps(self.states)
        arrays, blobs = [], []
        offset = 0

        def tree(x):
            nonlocal offset
            if x is None:
                return None
            if isinstance(x, (tuple, list)):
                return {"tuple" if isinstance(x, tuple) else "list": [tree(v) for v in x]}
            if torch.is_tensor(x):
                t = x.detach().to("cpu").contiguous()
                if t.dtype not in _DTYPE_NAMES:
                    raise MXNetError(f"cannot save optimizer state of dtype {t.dtype}")
                data = t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
                arrays.append({"dtype": _DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                               "offset": offset, "nbytes": len(data)})
                blobs.append(data)
                offset += len(data)
                return {"array": len(arrays) - 1}
            if isinstance(x, (int, float, bool, str)):
                return {"value": x}
            raise MXNetError(f"cannot save optimizer state of type {type(x).__name__}")

        states = [[_enc_key(k), tree(v)] for k, v in self.states.items()]
        header = {"format": _FORMAT_VERSION, "byteorder": "little", "states": states,
                  "arrays": arrays,
                  "optimizer": _encode_optimizer(self.optimizer) if dump_optimizer else None}
        hjson = json.dumps(header, sort_keys=True).encode()
        return MAGIC + struct.pack("<IQ", _FORMAT_VERSION, len(hjson)) + hjson + b"".join(blobs)

    def set_states(self, states, allow_pickle=False):
        """Load :meth:`get_states` bytes; mxnet's pickles only with ``allow_pickle=True``."""
        if isinstance(states, str):
            states = states.encode("latin-1")
        data = bytes(states)
        if data.startswith(MAGIC):
            loaded, opt = _decode_states(data)
        elif data[:1] == b"\x80" or data[:1] in (b"(", b"}", b"]"):
            if not allow_pickle:
                raise MXNetError(
                    "these optimizer states are a Python pickle (mxnet's .states format); "
                    "symtriton does not unpickle by default because a pickle can run code. If "
                    "you trust the file, load it with set_states(data, allow_pickle=True) "
                    "(Module.load_optimizer_states(fname, allow_pickle=True)); the loader then "
                    "accepts only NDArrays, optimizers and lr schedulers")
            loaded = _restricted_loads(data)
            opt = None
            if isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[1], Optimizer):
                loaded, opt = loaded
        else:
            raise MXNetError("not an optimizer state file (unknown header)")
        if not isinstance(loaded, dict):
            raise MXNetError("optimizer states must hold a dict of index -> state")
        self.states = loaded
        if opt is not None:
            self.optimizer = opt
            self.aggregate_updates = opt.aggregate_num > 0
        self.states_synced = dict.fromkeys(self.states.keys(), False)


def get_updater(optimizer):
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)


# --------------------------------------------------------------------------- safe format
def _enc_key(k):
    if isinstance(k, bool) or not isinstance(k, (int, str)):
        raise MXNetError(f"optimizer state keys must be int or str, not {type(k).__name__}")
    return {"int": k} if isinstance(k, int) else {"str": k}


def _dec_key(k):
    if not isinstance(k, dict) or len(k) != 1:
        raise MXNetError("corrupt optimizer state key")
    if "int" in k and isinstance(k["int"], int):
        return k["int"]
    if "str" in k and isinstance(k["str"], str):
        return k["str"]
    raise MXNetError("corrupt optimizer state key")


def _encode_value(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, tuple):
        return {"__tuple__": [_encode_value(x) for x in v]}
    if isinstance(v, list):
        return [_encode_value(x) for x in v]
    if isinstance(v, dict):
        return {"__dict__": [[_encode_value(k), _encode_value(x)] for k, x in v.items()]}
    if isinstance(v, _lrs.LRScheduler) and type(v).__name__ in _lrs.SCHEDULERS:
        return {"__scheduler__": type(v).__name__,
                "attrs": {k: _encode_value(x) for k, x in vars(v).items()}}
    raise TypeError(type(v).__name__)


def _decode_value(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_decode_value(x) for x in v]
    if isinstance(v, dict):
        if "__tuple__" in v:
            return tuple(_decode_value(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {_hashable(_decode_value(k)): _decode_value(x) for k, x in v["__dict__"]}
        if "__scheduler__" in v:
            cls = _lrs.SCHEDULERS.get(v["__scheduler__"])
            if cls is None:
                raise MXNetError(f"unknown lr scheduler {v['__scheduler__']!r} in state file")
            obj = cls.__new__(cls)
            for k, x in v["attrs"].items():
                setattr(obj, str(k), _decode_value(x))
            return obj
    raise MXNetError("corrupt optimizer description in state file")


def _hashable(k):
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


def _encode_optimizer(opt):
    attrs = {}
    for k, v in vars(opt).items():
        if k in ("param_dict", "_index_update_count"):
            continue
        try:
            attrs[k] = _encode_value(v)
        except TypeError as exc:
            log.warning("symtriton: optimizer attribute %s (%s) is not saved", k, exc)
    name = type(opt).__name__.lower()
    if Optimizer.opt_registry.get(name) is not type(opt):
        raise MXNetError(f"optimizer class {type(opt).__name__} is not registered; register it "
                         f"to save it with dump_optimizer=True")
    return {"class": name, "attrs": attrs}


def _decode_optimizer(spec):
    cls = Optimizer.opt_registry.get(str(spec.get("class", "")).lower())
    if cls is None:
        raise MXNetError(f"optimizer {spec.get('class')!r} in the state file is not registered")
    obj = cls.__new__(cls)
    obj.__setstate__({str(k): _decode_value(v) for k, v in spec.get("attrs", {}).items()})
    return obj


def _decode_states(data: bytes):
    try:
        pos = len(MAGIC)
        version, hlen = struct.unpack_from("<IQ", data, pos)
        pos += 12
        if version != _FORMAT_VERSION:
            raise MXNetError(f"optimizer state format version {version} is not supported")
        header = json.loads(data[pos:pos + hlen].decode("utf-8"))
        body = memoryview(data)[pos + hlen:]
        tensors = []
        for a in header["arrays"]:
            dtype = _DTYPES[a["dtype"]]
            shape = [int(s) for s in a["shape"]]
            off, nbytes = int(a["offset"]), int(a["nbytes"])
            numel = int(np.prod(shape)) if shape else 1
            itemsize = torch.empty((), dtype=dtype).element_size()
            if nbytes != numel * itemsize or off < 0 or off + nbytes > len(body):
                raise MXNetError("optimizer state file is truncated or corrupt")
            raw = bytearray(body[off:off + nbytes])
            t = (torch.frombuffer(raw, dtype=dtype) if nbytes else
                 torch.empty(0, dtype=dtype)).reshape(shape).clone()
            tensors.append(t.as_subclass(NDArray))

        def tree(x):
            if x is None:
                return None
            if "array" in x:
                return tensors[int(x["array"])]
            if "tuple" in x:
                return tuple(tree(v) for v in x["tuple"])
            if "list" in x:
                return [tree(v) for v in x["list"]]
            if "value" in x:
                return x["value"]
            raise MXNetError("corrupt optimizer state tree")

        states = {_dec_key(k): tree(v) for k, v in header["states"]}
        opt = _decode_optimizer(header["optimizer"]) if header.get("optimizer") else None
        return states, opt
    except (KeyError, ValueError, TypeError, struct.error, IndexError) as exc:
        if isinstance(exc, MXNetError):
            raise
        raise MXNetError(f"optimizer state file is corrupt ({exc})") from None


# --------------------------------------------------------------------------- mxnet pickles
def _decode_raw_ndarray(raw: bytes):
    """mxnet's raw NDArray bytes (``MXNDArraySaveRawBytes``) -> NDArray."""
    try:
        from .ndarray_io import decode_single_ndarray  # written alongside; preferred
    except ImportError:
        decode_single_ndarray = _decode_single_ndarray_fallback
    arr = decode_single_ndarray(bytes(raw))
    if isinstance(arr, tuple):
        arr = arr[0]
    if isinstance(arr, np.ndarray):
        arr = torch.from_numpy(arr.copy())
    return arr.as_subclass(NDArray) if torch.is_tensor(arr) else arr


_MX_TYPE_FLAGS = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
                  5: np.int8, 6: np.int64}


def _decode_single_ndarray_fallback(raw: bytes):
    """Dense NDArray in mxnet's V2/V3 layout: magic, stype, shape, context, dtype, data."""
    buf = io.BytesIO(raw)

    def rd(fmt):
        size = struct.calcsize(fmt)
        chunk = buf.read(size)
        if len(chunk) != size:
            raise MXNetError("truncated mxnet NDArray bytes")
        return struct.unpack(fmt, chunk)

    magic, = rd("<I")
    if magic not in (0xF993FAC9, 0xF993FACA):
        raise MXNetError(f"unsupported mxnet NDArray magic {magic:#x}")
    stype, = rd("<i")
    if stype != 0:
        raise MXNetError("only dense (default storage) NDArrays can be loaded")
    ndim, = rd("<I")
    shape = rd(f"<{ndim}q") if ndim else ()
    if ndim == 0 and magic == 0xF993FAC9:
        return torch.empty(0)
    rd("<ii")   # context
    flag, = rd("<i")
    if flag not in _MX_TYPE_FLAGS:
        raise MXNetError(f"unsupported mxnet dtype flag {flag}")
    dt = np.dtype(_MX_TYPE_FLAGS[flag]).newbyteorder("<")
    count = int(np.prod(shape)) if shape else 1
    data = buf.read(count * dt.itemsize)
    if len(data) != count * dt.itemsize:
        raise MXNetError("truncated mxnet NDArray bytes")
    arr = np.frombuffer(data, dtype=dt).astype(dt.newbyteorder("="))
    return torch.from_numpy(arr.reshape(shape))


class _MXNDArrayShim:
    """Stands in for ``mxnet.ndarray.ndarray.NDArray`` while unpickling: ``NDArray(None)``
    then ``__setstate__({'handle': raw bytes})``; :func:`_restricted_loads` swaps it out."""

    def __init__(self, *args):
        self.value = None

    def __setstate__(self, state):
        if not isinstance(state, dict) or not isinstance(state.get("handle"),
                                                         (bytes, bytearray, type(None))):
            raise pickle.UnpicklingError("unexpected NDArray state in pickle")
        h = state.get("handle")
        self.value = None if h is None else _decode_raw_ndarray(h)


def _allowed_global(module, name):
    if module == "mxnet.ndarray.ndarray" and name == "NDArray":
        return _MXNDArrayShim
    # protocol-2 pickles (Python 2 naming, or written with protocol=2) say __builtin__
    if module in ("builtins", "__builtin__") and name in ("bytearray", "bytes"):
        return {"bytearray": bytearray, "bytes": bytes}[name]
    if module == "_codecs" and name == "encode":
        import codecs
        return codecs.encode
    if module in ("mxnet.optimizer.optimizer", "mxnet.optimizer") and \
            name.lower() in Optimizer.opt_registry:
        return Optimizer.opt_registry[name.lower()]
    if module == "mxnet.lr_scheduler" and name in _lrs.SCHEDULERS:
        return _lrs.SCHEDULERS[name]
    return None


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        obj = _allowed_global(module, name)
        if obj is None:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from an "
                                         f"optimizer state pickle")
        return obj


def _swap_shims(x):
    if isinstance(x, _MXNDArrayShim):
        return x.value
    if isinstance(x, tuple):
        return tuple(_swap_shims(v) for v in x)
    if isinstance(x, list):
        return [_swap_shims(v) for v in x]
    if isinstance(x, dict):
        return {k: _swap_shims(v) for k, v in x.items()}
    return x


def _restricted_loads(data: bytes):
    try:
        obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError) as exc:
        if isinstance(exc, MXNetError):
            raise
        raise MXNetError(f"cannot load optimizer state pickle: {exc}") from None
    obj = _swap_shims(obj)
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], Optimizer):
        opt = obj[1]
        opt.__dict__.setdefault("_current_device", 0)
    return obj
