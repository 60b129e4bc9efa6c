"""``Updater``: an optimizer applied to (index, gradient, weight), with its states.

``get_states`` / ``set_states`` write and read the safe state file
(``optimizer_states.py``), mxnet's pickles only when asked (``safe_unpickle.py``), or
mxnet's own format under ``SYMTRITON_STATES_FORMAT=mxnet`` (``mxnet_states.py``).
Exported by ``runtime.optimizer`` (``mx.optimizer``).
"""
from __future__ import annotations

import os
import warnings

import torch

from compiler.errors import MXNetError

from . import mxnet_states
from . import optimizer_states as _state_file
from . import safe_unpickle as _safe_unpickle
from .ndarray import NDArray
from .optimizer_base import Optimizer
from .sparse_update import sparse_update
from .ndarray import torch_dtype

__all__ = ["Updater", "get_updater", "check_states", "load_states_file"]


def _device_id(t):
    ctx = getattr(t, "context", None)
    if ctx is not None and hasattr(ctx, "device_id"):
        return ctx.device_id
    return t.device.index or 0


# --------------------------------------------------------------------------- Optimizer


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
        sparse = [n for n, (g, w) in enumerate(zip(grads, weights))
                  if "default" != getattr(g, "stype", "default")
                  or "default" != getattr(w, "stype", "default")]
        for n in sparse:        # mxnet's lazy updates or its dense fallback (sparse_update.py)
            sparse_update(self, indices[n], grads[n], weights[n])
        if sparse:
            keep = [n for n in range(len(indices)) if n not in set(sparse)]
            indices, grads, weights = ([seq[n] for n in keep] for seq in (indices, grads, weights))
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
        if mxnet_states.states_format() == "mxnet":
            if dump_optimizer:
                raise MXNetError("SYMTRITON_STATES_FORMAT=mxnet writes the states only: "
                                 "dump_optimizer=True would need a pickled mxnet Optimizer")
            return mxnet_states.dumps(self.states)
        return _state_file.encode_states(self.states,
                                            self.optimizer if dump_optimizer else None)

    def set_states(self, states, allow_pickle=False):
        """Load :meth:`get_states` bytes; mxnet's pickles only with ``allow_pickle=True``.

        Nothing changes when the bytes are refused (an :class:`MXNetError` says why).
        """
        loaded, opt = _decode_states(states, allow_pickle)
        self._install(loaded, opt)

    def _install(self, loaded, opt):
        self.states = loaded
        if opt is not None:
            self.optimizer = opt
            self.aggregate_updates = opt.aggregate_num > 0
        self.states_synced = dict.fromkeys(self.states.keys(), False)


def _decode_states(states, allow_pickle):
    """``(states dict, optimizer or None)`` from state bytes, or an MXNetError."""
    if isinstance(states, str):
        states = states.encode("latin-1")
    data = bytes(states)
    if data.startswith(_state_file.MAGIC):
        loaded, opt = _state_file.decode_states(data)
    elif data[:1] == b"\x80" or data[:1] in (b"(", b"}", b"]"):
        if not allow_pickle:
            raise MXNetError(
                "these optimizer states are a Python pickle (mxnet's .states format); "
                "symtriton does not unpickle by default because a pickle can run code. If "
                "you trust the file, load it with set_states(data, allow_pickle=True) "
                "(Module.load_optimizer_states(fname, allow_pickle=True)); the loader then "
                "accepts only NDArrays, optimizers and lr schedulers")
        loaded = _safe_unpickle.restricted_loads(data)
        opt = None
        if isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[1], Optimizer):
            loaded, opt = loaded
    else:
        raise MXNetError("not an optimizer state file (unknown header)")
    if not isinstance(loaded, dict):
        raise MXNetError("optimizer states must hold a dict of index -> state")
    return loaded, opt


def _leaves(state, path=()):
    """``[(path, value)]`` of the tensors, Nones and numbers of a (nested) state."""
    if isinstance(state, (tuple, list)):
        out = []
        for i, s in enumerate(state):
            out.extend(_leaves(s, path + (i,)))
        return out
    return [(path, state)]


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _expected_state(optimizer, index, weight):
    """The state ``optimizer`` would create for ``weight``, made on the meta device (no
    memory); None when the optimizer cannot say (a user's ``create_state`` that needs
    real data): then only shapes are checked."""
    meta = torch.empty(tuple(weight.shape), dtype=torch_dtype(weight),
                       device="meta").as_subclass(NDArray)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return True, optimizer.create_state_multi_precision(index, meta)
    except Exception:   # noqa: BLE001 - a custom optimizer's state maker: shapes only
        return False, None


def check_states(states, bound, optimizer):
    """Refuse optimizer states that do not belong to the bound parameters.

    Parameters
    ----------
    states : dict
        Index (or kvstore key) -> state, as loaded.
    bound : dict
        The same indices -> ``(parameter name, weight)`` of the bound module.
    optimizer : Optimizer
        Decides the dtypes a state holds (float32 master copies under
        ``multi_precision``).

    Raises
    ------
    MXNetError
        Naming the parameter, the shape or dtype in the file and the bound one.
    """
    extra = [k for k in states if k not in bound]
    if extra:
        names = sorted({n for n, _ in bound.values()})
        raise MXNetError(
            f"the file holds optimizer states for index {extra[0]!r}"
            f"{f' (and {len(extra) - 1} more)' if len(extra) > 1 else ''}, which is no "
            f"parameter of this module ({len(names)} parameters, "
            f"{len(bound)} state slots): the states were saved from another model or with "
            f"another number of devices; load the .states saved with this model's "
            f"checkpoint, or leave the optimizer states out")
    for key, state in states.items():
        name, weight = bound[key]
        known, expected = _expected_state(optimizer, key, weight)
        got = [(p, v) for p, v in _leaves(state) if torch.is_tensor(v)]
        want = {p: v for p, v in _leaves(expected) if torch.is_tensor(v)} if known else {}
        same_layout = known and sorted(p for p, _ in got) == sorted(want)
        if known and not same_layout and got and want:
            raise MXNetError(
                f"the optimizer state of parameter '{name}' (index {key!r}) holds "
                f"{len(got)} array(s) in the file where {type(optimizer).__name__} keeps "
                f"{len(want)}: the states were saved with another optimizer; create the "
                f"optimizer the checkpoint was trained with, or leave the optimizer "
                f"states out")
        for path, value in got:
            where = f"state{''.join(f'[{i}]' for i in path)}"
            ref = want[path] if same_layout else None
            shape = tuple(ref.shape) if ref is not None else tuple(weight.shape)
            if tuple(value.shape) != shape:
                raise MXNetError(
                    f"optimizer {where} of parameter '{name}' (index {key!r}) has shape "
                    f"{tuple(value.shape)} in the file, but the bound parameter has shape "
                    f"{tuple(weight.shape)}: the states were saved from another model; "
                    f"load the .states saved with this model's checkpoint, or leave the "
                    f"optimizer states out")
            if ref is not None and torch_dtype(value) != torch_dtype(ref):
                raise MXNetError(
                    f"optimizer {where} of parameter '{name}' (index {key!r}) has dtype "
                    f"{_dtype_name(torch_dtype(value))} in the file, but {type(optimizer).__name__}"
                    f" keeps {_dtype_name(torch_dtype(ref))} for the bound {_dtype_name(torch_dtype(weight))}"
                    f" parameter (multi_precision={bool(optimizer.multi_precision)}): the "
                    f"states were saved with another dtype or optimizer setting")


def read_states_file(fname) -> bytes:
    """The bytes of an optimizer state file; an :class:`MXNetError` naming it if absent."""
    fname = os.fspath(fname)
    try:
        with open(fname, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise MXNetError(f"optimizer state file {fname!r} does not exist") from None
    except OSError as exc:
        raise MXNetError(f"cannot read optimizer state file {fname!r}: "
                         f"{exc.strerror or exc}") from None


def load_states_file(updater, fname, allow_pickle=False, bound=None):
    """Load the state file ``fname`` into ``updater``, checked against ``bound``.

    Parameters
    ----------
    updater : Updater
    fname : str
    allow_pickle : bool
        Also accept mxnet's pickled ``.states`` (restricted loader).
    bound : dict, optional
        Index -> ``(parameter name, weight)``: the states must fit these weights
        (:func:`check_states`).

    Raises
    ------
    MXNetError
        Naming ``fname`` and what is wrong; ``updater`` is left unchanged.
    """
    fname = os.fspath(fname)
    data = read_states_file(fname)
    try:
        loaded, opt = _decode_states(data, allow_pickle)
        if bound is not None:
            check_states(loaded, bound, opt if opt is not None else updater.optimizer)
    except MXNetError as exc:
        raise MXNetError(f"cannot load optimizer states from {fname!r}: {exc}") from None
    updater._install(loaded, opt)


def get_updater(optimizer):
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)
