"""``Updater``: an optimizer applied to (index, gradient, weight), with its states.

``get_states`` / ``set_states`` write and read the safe state file
(``optimizer_states.py``), mxnet's pickles only when asked (``safe_unpickle.py``), or
mxnet's own format under ``SYMTRITON_STATES_FORMAT=mxnet`` (``mxnet_states.py``).
Exported by ``runtime.optimizer`` (``mx.optimizer``).
"""
from __future__ import annotations

import torch

from compiler.errors import MXNetError

from . import mxnet_states
from . import optimizer_states as _state_file
from . import safe_unpickle as _safe_unpickle
from .ndarray import NDArray
from .optimizer_base import Optimizer

__all__ = ["Updater", "get_updater"]


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
        """Load :meth:`get_states` bytes; mxnet's pickles only with ``allow_pickle=True``."""
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
        self.states = loaded
        if opt is not None:
            self.optimizer = opt
            self.aggregate_updates = opt.aggregate_num > 0
        self.states_synced = dict.fromkeys(self.states.keys(), False)


def get_updater(optimizer):
    """An :class:`Updater` for ``optimizer``."""
    return Updater(optimizer)
