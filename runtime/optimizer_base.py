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

import warnings

import torch

from compiler.errors import MXNetError

from .optimizer_kernels import _Spec, _launch, _zeros_like
from .ndarray import plain, torch_dtype

# weights that multi_precision gives float32 master copies (update_multi_precision)
_LOW_PRECISION = (torch.float16, torch.bfloat16)

# mxnet's own texts, printed or raised where its users see them
_LR_OVERRIDE_NOTE = ("learning rate from ``lr_scheduler`` has been overwritten by "
                     "``learning_rate`` in optimizer.")
_SCHEDULED_LR_NOTE = ("LRScheduler of the optimizer has already been defined. Note that "
                      "set_learning_rate can mutate the value of the learning rate of the "
                      "optimizer only when the LRScheduler of the optimizer is undefined.")
_FP16_ADVICE = ("Accumulating with float16 in optimizer can lead to poor accuracy or slow "
                "convergence. Consider using multi_precision=True option of the {}")

__all__ = ["Optimizer", "register", "create", "master_copy"]


# --------------------------------------------------------------------------- helpers


def master_copy(weight):
    """The float32 master copy of a float16 / bfloat16 weight.

    Of a csr / row_sparse weight it copies the dense values (mxnet keeps a sparse
    copy holding the same values).
    """
    master = _zeros_like(weight, torch.float32)
    sparse = getattr(weight, "stype", "default") != "default"
    with torch.no_grad():
        master.copy_(weight._dense() if sparse else weight)
    return master


def _qualified(klass) -> str:
    """``module.Class``, as the registry's override warning names classes."""
    return f"{klass.__module__}.{klass.__name__}"


def _as_lists(index, weight, grad, state):
    """One update's arguments as four lists (a single index makes one-item lists)."""
    if isinstance(index, (list, tuple)):
        return list(index), list(weight), list(grad), list(state)
    return [index], [weight], [grad], [state]


class Optimizer:
    """The base class of all optimizers, with mxnet 1.9.1's constructor arguments.

    Parameters
    ----------
    rescale_grad : float
        Every gradient is multiplied by it before clipping.
    param_idx2name : dict, optional
        Parameter index -> name; names select ``lr_mult`` / ``wd_mult`` entries, and
        names ending in neither ``_weight`` nor ``_gamma`` get no weight decay.
    wd : float
        Weight decay.
    clip_gradient : float, optional
        Clip the rescaled gradient to ``[-clip_gradient, clip_gradient]``.
    learning_rate : float, optional
        0.01 when neither it nor ``lr_scheduler`` is given; given with a scheduler,
        it replaces the scheduler's ``base_lr``.
    lr_scheduler : LRScheduler, optional
        Gives the learning rate of each ``num_update``.
    sym : Symbol, optional
        Its arguments' ``__lr_mult__`` / ``__wd_mult__`` attributes are read.
    begin_num_update : int
        The update count every parameter starts from.
    multi_precision : bool
        Keep float32 master copies of float16 / bfloat16 weights.
    param_dict : dict, optional
        Parameter index -> object with ``lr_mult`` / ``wd_mult`` (a gluon
        Parameter); it takes precedence over every other multiplier.
    """

    opt_registry: dict = {}
    # the optimizer named in the float16-without-master-copy warning (mxnet's text)
    _mp_hint_name = "optimizer"
    # True where mxnet 1.9.1's update_multi_precision of the class (SGD, NAG, LARS, LAMB)
    # runs the class's own rule, never self.update: the updater then ignores a
    # subclass's override of update alone (mxnet's DSD example's SparseSGD prunes nothing)
    _updater_skips_update = False

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0.,
                 clip_gradient=None, learning_rate=None, lr_scheduler=None, sym=None,
                 begin_num_update=0, multi_precision=False, param_dict=None):
        # the attributes are set in mxnet's order: a dumped optimizer lists them so
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        self.lr = self._starting_lr(learning_rate, lr_scheduler)
        self.wd = wd
        self.lr_mult, self.wd_mult = {}, {}
        self.begin_num_update = self.num_update = begin_num_update
        # update counts per device id; _index_update_count is the current device's
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self._current_device = 0
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0      # >0: the Updater hands over that many parameters a call
        self.idx2name = self._checked_idx2name(param_idx2name)
        self.sym_info = () if sym is None else (sym.attr_dict(), sym.list_arguments())
        self.param_dict = param_dict or {}
        self.allow_np_array = False
        self.set_lr_mult({})
        self.set_wd_mult({})

    @staticmethod
    def _starting_lr(learning_rate, lr_scheduler):
        """The ``lr`` attribute; a scheduler given with another ``learning_rate`` is
        moved to start from it (and mxnet's note is printed)."""
        if lr_scheduler is None:
            return 0.01 if learning_rate is None else learning_rate
        if learning_rate is not None and lr_scheduler.base_lr != learning_rate:
            print(_LR_OVERRIDE_NOTE)
            lr_scheduler.base_lr = learning_rate
        return learning_rate

    @staticmethod
    def _checked_idx2name(param_idx2name):
        if param_idx2name is None:
            return {}
        if not isinstance(param_idx2name, dict):
            raise MXNetError("param_idx2name should be a dict of param indexes to names. "
                             f"Got a {type(param_idx2name).__name__}; pass e.g. "
                             "{0: 'fc1_weight', 1: 'fc1_bias'}.")
        return dict(param_idx2name)

    # -- registry ------------------------------------------------------------------
    @staticmethod
    def register(klass):
        """Make ``klass`` creatable by its lower-cased class name (a decorator).

        A class registered under a name already taken replaces the earlier one,
        with mxnet's warning.
        """
        if not isinstance(klass, type):
            raise MXNetError(f"register takes a class, not a {type(klass).__name__} "
                             f"({klass!r})")
        key = klass.__name__.lower()
        earlier = Optimizer.opt_registry.get(key)
        if earlier is not None:
            warnings.warn(f"WARNING: New optimizer {_qualified(klass)} is overriding "
                          f"existing optimizer {_qualified(earlier)}")
        Optimizer.opt_registry[key] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """An instance of the optimizer registered as ``name`` (any letter case),
        constructed with ``kwargs``."""
        klass = Optimizer.opt_registry.get(name.lower())
        if klass is None:
            known = ", ".join(sorted(Optimizer.opt_registry))
            raise ValueError(f"Cannot find optimizer {name} (registered: {known})")
        return klass(**kwargs)

    # -- learning rate and multipliers --------------------------------------------
    @property
    def learning_rate(self):
        """The learning rate now: the scheduler's at ``num_update``, or ``lr``."""
        if self.lr_scheduler is None:
            return self.lr
        return self.lr_scheduler(self.num_update)

    def set_learning_rate(self, lr):
        """Set ``lr``; refused (mxnet's UserWarning) while a scheduler decides it."""
        if self.lr_scheduler is not None:
            raise UserWarning(_SCHEDULED_LR_NOTE)
        self.lr = lr

    def set_lr_scale(self, args_lrscale):
        raise DeprecationWarning("set_lr_scale is gone (as in mxnet); use set_lr_mult")

    def _symbol_mults(self, attr_key):
        """``{argument name: float}`` for the symbol's arguments carrying ``attr_key``."""
        if not self.sym_info:
            return {}
        attrs, arguments = self.sym_info
        return {arg: float(attrs[arg][attr_key]) for arg in arguments
                if attr_key in attrs.get(arg, {})}

    def set_lr_mult(self, args_lr_mult):
        """Replace the lr multipliers: the symbol's ``__lr_mult__`` attributes, then
        ``args_lr_mult`` (keys: parameter indices or names) over them."""
        mults = self._symbol_mults("__lr_mult__")
        mults.update(args_lr_mult)
        self.lr_mult = mults

    def set_wd_mult(self, args_wd_mult):
        """Replace the wd multipliers: 0 for the ``idx2name`` names ending in neither
        ``_weight`` nor ``_gamma`` (biases, BatchNorm's beta), the symbol's
        ``__wd_mult__`` attributes over those, then ``args_wd_mult`` over all."""
        mults = {name: 0.0 for name in self.idx2name.values()
                 if not name.endswith(("_weight", "_gamma"))}
        mults.update(self._symbol_mults("__wd_mult__"))
        mults.update(args_wd_mult)
        self.wd_mult = mults

    def _multiplier(self, index, table, param_attr):
        """Parameter ``index``'s entry: its ``param_dict`` object's ``param_attr``,
        else ``table`` by index, else by its name (1.0 when the name has none);
        None for an index nothing knows (its value stays as it is, unmultiplied)."""
        if index in self.param_dict:
            return getattr(self.param_dict[index], param_attr)
        if index in table:
            return table[index]
        if index in self.idx2name:
            return table.get(self.idx2name[index], 1.0)
        return None

    def _scaled(self, base, indices, table, param_attr):
        """``base`` times each parameter's multiplier (``base * mult``, mxnet's order)."""
        values = []
        for index in indices:
            mult = self._multiplier(index, table, param_attr)
            values.append(base if mult is None else base * mult)
        return values

    def _get_lrs(self, indices):
        return self._scaled(self.learning_rate, indices, self.lr_mult, "lr_mult")

    def _get_lr(self, index):
        return self._get_lrs([index])[0]

    def _get_wds(self, indices):
        return self._scaled(self.wd, indices, self.wd_mult, "wd_mult")

    def _get_wd(self, index):
        return self._get_wds([index])[0]

    # -- update counts, kept per device as mxnet does ------------------------------
    def _set_current_context(self, device_id):
        """Count the following updates under ``device_id`` (its own table)."""
        self._index_update_count = self._all_index_update_counts.setdefault(device_id, {})
        self._current_device = device_id

    def _update_count(self, index):
        """One more update of each index given (starting from ``begin_num_update``);
        ``num_update`` follows the largest count."""
        counts = self._index_update_count
        for key in (index if isinstance(index, (list, tuple)) else [index]):
            counts[key] = counts.get(key, self.begin_num_update) + 1
            self.num_update = max(counts[key], self.num_update)

    # -- states --------------------------------------------------------------------
    def create_state(self, index, weight):
        """Auxiliary state for ``weight`` (``None`` when the rule keeps none)."""
        return None

    def _mp(self, weight):
        # mxnet 1.9.1 keeps master copies for float16 only; bfloat16's 8 significant bits
        # lose an update smaller than 2**-8 of the weight, so it gets them too
        return bool(self.multi_precision) and torch_dtype(weight) in _LOW_PRECISION

    def _warn_low_precision(self, weight):
        """mxnet's warning for a float16 (here also bfloat16) weight updated in place."""
        if torch_dtype(weight) in _LOW_PRECISION and not self.multi_precision:
            warnings.warn(_FP16_ADVICE.format(self._mp_hint_name))

    def create_state_multi_precision(self, index, weight):
        """``(fp32 master copy, its state)`` for a float16 / bfloat16 weight under
        multi_precision; otherwise the weight's own state."""
        if not self._mp(weight):
            self._warn_low_precision(weight)
            return self.create_state(index, weight)
        master = master_copy(weight)
        return (master, self.create_state(index, master))

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

    def _hyper(self, indices):
        return self._get_lrs(indices), self._get_wds(indices)

    # -- updates --------------------------------------------------------------------
    def update(self, index, weight, grad, state):
        """Update one parameter (one launch)."""
        dense = self._sparse_first([index], [weight], [grad], [state], False)
        if dense[0]:
            self.update_multi(*dense, multi_precision=False)

    @classmethod
    def _python_update(cls) -> bool:
        """True when the class's update is its own Python code (a user's optimizer)."""
        return ((cls.update is not Optimizer.update and not cls._updater_skips_update)
                or cls.update_multi_precision is not Optimizer.update_multi_precision)

    def _sparse_first(self, indices, weights, grads, states, multi_precision):
        """Update the items whose weight or gradient is sparse (``sparse_update.py``:
        mxnet's lazy rules, or its dense fallback); return the other items' lists."""
        from .sparse_update import is_sparse, sparse_step
        dense = ([], [], [], [])
        for item in zip(indices, weights, grads, states):
            key, w, g, s = item
            if is_sparse(w) or is_sparse(g):
                sparse_step(self, key, g, w, s, multi_precision=multi_precision)
                continue
            for column, value in zip(dense, item):
                column.append(value)
        return dense

    def _python_step_multi_precision(self, index, weight, grad, state):
        """A user's ``update`` run on the float32 master copy, then cast back."""
        master, inner = state[0], state[1]
        self.update(index, master, grad.to(torch.float32), inner)
        with torch.no_grad():
            weight.copy_(master)

    def update_multi_precision(self, index, weight, grad, state):
        """Update with the fp32 master copy when the weight is fp16 and multi_precision."""
        columns = _as_lists(index, weight, grad, state)
        if type(self).update is not Optimizer.update and not self._updater_skips_update:
            # a user's Python update rule
            for key, w, g, s in zip(*columns):
                if self._mp(w):
                    self._python_step_multi_precision(key, w, g, s)
                else:
                    self.update(key, w, g, s)
            return
        dense = self._sparse_first(*columns, True)
        if dense[0]:
            self.update_multi(*dense, multi_precision=None)

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
        """The attributes, less ``param_dict`` (mxnet leaves it out; a trainer sets it
        again) and the launch plans (they hold arrays)."""
        return {key: value for key, value in self.__dict__.items()
                if key not in ("param_dict", "_launch_plans")}

    def __setstate__(self, state):
        self.__dict__ = dict(state)
        self.param_dict = {}
        # mxnet's pickles carry no _current_device; older ones no per-device counts
        device = self.__dict__.setdefault("_current_device", 0)
        counts = self.__dict__.setdefault("_all_index_update_counts", {0: {}})
        if "_index_update_count" not in self.__dict__:
            self._index_update_count = counts.setdefault(device, {})


register = Optimizer.register
create = Optimizer.create_optimizer
