"""The ``Optimizer`` base class: mxnet 1.9.1's arguments, registry and multi-tensor updates.

``runtime/optimizer.py`` (``mx.optimizer``) exports every optimizer: ``SGD``
(momentum, wd, rescale_grad, clip_gradient, lr_mult / wd_mult from the symbol's
``__lr_mult__`` / ``__wd_mult__`` attributes, lr_scheduler), ``NAG``, ``Adam``,
``AdaGrad``, ``RMSProp`` (plain and centered) and ``AdaDelta`` are in
``optimizer_common.py``; mxnet's other optimizers (``Signum``, ``FTML``, ``Adamax``,
``Nadam``, ``Ftrl``, ``LAMB``, ``LARS``, ``DCASGD``, ``SGLD``, ``LBSGD``) in
``optimizer_more.py`` and ``optimizer_layerwise.py`` (those with per-layer trust
ratios); ``create``, ``register`` here; ``get_updater`` and ``Updater``
(``get_states`` / ``set_states``) in ``updater.py``.

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
  the further per-tensor values a rule names (``_RULE_HYP``: bias corrections
  of the tensor's own step count, Nadam's schedule, SGLD's noise scale), and
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
(``optimizer_states.py`` and ``safe_unpickle.py``; the kernels are in
``optimizer_kernels.py``.) :meth:`Updater.get_states` writes a safe format: a
magic line, a JSON header (state structure, dtypes, shapes, offsets, the
optimizer's plain attributes when ``dump_optimizer=True``) and the raw
little-endian array bytes. Loading it never executes code. mxnet's pickled
``.states`` are read only with ``set_states(data, allow_pickle=True)``, through
a restricted unpickler that maps ``mxnet.ndarray.ndarray.NDArray`` to a decoder
of its raw bytes and the registered optimizer / lr_scheduler classes to ours,
and refuses every other global. ``SYMTRITON_STATES_FORMAT=mxnet`` writes mxnet's
pickle instead (``mxnet_states.py``).
"""
from __future__ import annotations

import logging
import warnings

import torch

from compiler.errors import MXNetError

from .optimizer_kernels import _Spec, _launch, _zeros_like
from .ndarray import plain, torch_dtype

# weights that multi_precision gives float32 master copies (update_multi_precision)
_LOW_PRECISION = (torch.float16, torch.bfloat16)

log = logging.getLogger("symtriton")

__all__ = ["Optimizer", "register", "create", "master_copy"]


# --------------------------------------------------------------------------- helpers


def master_copy(weight):
    """The float32 master copy of a float16 / bfloat16 weight (of a csr / row_sparse
    weight: of its dense values, where mxnet keeps a sparse copy of the same values)."""
    master = _zeros_like(weight, torch.float32)
    with torch.no_grad():
        master.copy_(weight._dense() if getattr(weight, "stype", "default") != "default"
                     else weight)
    return master


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
        # mxnet 1.9.1 keeps master copies for float16 only; bfloat16's 8 significant bits
        # lose an update smaller than 2**-8 of the weight, so it gets them too
        return bool(self.multi_precision) and torch_dtype(weight) in _LOW_PRECISION

    def create_state_multi_precision(self, index, weight):
        """``(fp32 master copy, state)`` for float16 / bfloat16 weights with
        multi_precision, else the state."""
        if self._mp(weight):
            master = master_copy(weight)
            return (master, self.create_state(index, master))
        if torch_dtype(weight) in _LOW_PRECISION and not self.multi_precision:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or "
                          "slow convergence. Consider using multi_precision=True option of the "
                          "optimizer")
        return self.create_state(index, weight)

    # -- the kernel-side description a subclass gives -------------------------------
    def _rule(self, state):
        """Rule name for the fused kernel given this weight's (inner) state."""
        raise NotImplementedError(f"{type(self).__name__} has no fused update rule")

    def _kernel_rules(self, state):
        """Every rule one update launches, in order (what ahead-of-time compiles)."""
        return [self._rule(state)]

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
        return torch_dtype(weight)

    def _hyper(self, indices):
        return self._get_lrs(indices), self._get_wds(indices)

    # -- updates --------------------------------------------------------------------
    def update(self, index, weight, grad, state):
        """Update one parameter (one launch)."""
        rest = self._sparse_first([index], [weight], [grad], [state], False)
        if rest[0]:
            self.update_multi(*rest, multi_precision=False)

    @classmethod
    def _python_update(cls) -> bool:
        """True when the class's update is its own Python code (a user's optimizer)."""
        return (cls.update is not Optimizer.update
                or cls.update_multi_precision is not Optimizer.update_multi_precision)

    def _sparse_first(self, indices, weights, grads, states, multi_precision):
        """Update the items whose weight or gradient is sparse (``sparse_update.py``:
        mxnet's lazy rules, or its dense fallback); return the other items' lists."""
        from .sparse_update import is_sparse, sparse_step
        rest = ([], [], [], [])
        for i, w, g, s in zip(indices, weights, grads, states):
            if is_sparse(w) or is_sparse(g):
                sparse_step(self, i, g, w, s, multi_precision=multi_precision)
                continue
            for lst, v in zip(rest, (i, w, g, s)):
                lst.append(v)
        return rest

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
        if not isinstance(index, (list, tuple)):
            index, weight, grad, state = [index], [weight], [grad], [state]
        rest = self._sparse_first(index, weight, grad, state, True)
        if rest[0]:
            self.update_multi(*rest, multi_precision=None)

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
        self._fused_update(indices, weights, grads, states, self._hyper(indices),
                           multi_precision)

    def _fused_update(self, indices, weights, grads, states, columns, multi_precision=None,
                      inputs=None, rule=None):
        """Launch the rule of every given parameter: one launch per (kernel, device).

        ``columns`` is ``(lrs, wds, *more)``: per-tensor hyper-parameters, the rule's
        further ones (``_RULE_HYP``) after lr and wd. ``inputs``: per tensor, the
        read-only tensors the rule takes after its states (``_RULE_INPUTS``), or None.
        ``rule``: this rule for every tensor instead of :meth:`_rule`'s choice.
        """
        clip = self.clip_gradient
        has_clip = clip is not None and bool(clip) and float(clip) >= 0
        scalars = (float(self.rescale_grad), float(clip) if has_clip else 0.0) + \
            tuple(float(s) for s in self._scalars())
        key = self._plan_key(weights, grads, states, has_clip, multi_precision, inputs, rule)
        cached = self._plans.get(key) if key is not None else None
        if cached is not None:
            plan = cached[0]
        else:
            plan, reusable = self._plan(weights, grads, states, has_clip, multi_precision,
                                        inputs, rule)
            if key is not None and reusable:
                # a plan holds its arrays: keep few, so arrays a rebind replaced are
                # not held for long (one plan per set of gradient arrays is the usual)
                if len(self._plans) >= 4:
                    self._plans.clear()
                # the plan keeps the keyed objects alive, so no other object takes an id
                self._plans[key] = (plan, tuple(weights), tuple(grads), tuple(states))
        lrs, wds = columns[0], columns[1]
        extras = list(zip(*columns[2:])) if len(columns) > 2 else None
        for spec, device, groups, pos in plan:
            _launch(spec, groups, [lrs[i] for i in pos], [wds[i] for i in pos], scalars, device,
                    [extras[i] for i in pos] if len(spec.hyp_names) > 2 else None)

    @property
    def _plans(self):
        """Launch plans by :meth:`_plan_key` (built lazily: unpickled optimizers too)."""
        plans = self.__dict__.get("_launch_plans")
        if plans is None:
            plans = self.__dict__["_launch_plans"] = {}
        return plans

    def _plan_key(self, weights, grads, states, has_clip, multi_precision, inputs, rule):
        """What a launch plan depends on, when it can be reused: the very tensors and
        state objects (a plan holds them, so their ids stay theirs), each one's rule
        and the flags. None where a plan is not reused (multi-precision, read-only
        inputs, states kept in lists, which can change in place)."""
        if inputs is not None or (multi_precision is None and self.multi_precision):
            return None
        if any(isinstance(s, list) for s in states):
            return None
        rules = rule or tuple(self._rule(s) for s in states)
        return (tuple(map(id, weights)), tuple(map(id, grads)), tuple(map(id, states)),
                rules, has_clip, self._clip_weights(), multi_precision)

    def _plan(self, weights, grads, states, has_clip, multi_precision, inputs, rule):
        """Group the parameters by kernel: [(spec, device, role tensors per parameter,
        parameter positions)], and whether the plan may be reused (no gradient had to
        be converted to its weight's dtype or device)."""
        inputs = inputs if inputs is not None else [[] for _ in weights]
        plan: dict = {}
        reusable = True
        for pos, (w, g, s, inp) in enumerate(zip(weights, grads, states, inputs)):
            mp = self._mp(w) if multi_precision is None else False
            inner, master = self._split_mp(s) if mp else (s, None)
            st = self._state_tensors(inner)
            s_dtype = torch_dtype(st[0]) if st else torch_dtype(w)
            spec = _Spec(rule or self._rule(inner), torch_dtype(w), s_dtype, has_clip,
                         self._clip_weights(), mp)
            w_t, g_t = torch.Tensor.as_subclass(w, torch.Tensor), \
                torch.Tensor.as_subclass(g, torch.Tensor)   # attribute reads skip NDArray
            if torch_dtype(g_t) != torch_dtype(w_t) or g_t.device != w_t.device:
                g = g.to(device=w_t.device, dtype=torch_dtype(w_t))
                reusable = False
            # plain tensors (aliases: the same storage and version counter), so that a
            # launch passes them to torch without NDArray's __torch_function__ per call
            tensors = [w_t, plain(g)] + [plain(t) for t in st] + \
                [plain(t) for t in inp] + ([plain(master)] if mp else [])
            entry = plan.setdefault((spec.key, str(w_t.device)), (spec, w_t.device, [], []))
            entry[2].append(tensors)
            entry[3].append(pos)
        return list(plan.values()), reusable

    # -- pickling (mxnet compatibility; our own files never pickle) ---------------
    def __getstate__(self):
        ret = self.__dict__.copy()
        ret.pop("param_dict", None)
        ret.pop("_launch_plans", None)
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
