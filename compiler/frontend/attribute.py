"""``AttrScope``: attributes applied to every symbol created inside a ``with`` block."""
from __future__ import annotations

import threading

_local = threading.local()


class AttrScope:
    """Attach attributes such as ``ctx_group`` to the symbols created in scope.

    Keys are kept as given, as mxnet keeps them (``AttrScope(group='4')`` gives
    ``attr('group') == '4'``); a symbol made in scope stores mxnet's hidden keys
    (``ctx_group``, ``lr_mult``, ``wd_mult``, ``force_mirroring``, ``mirror_stage``)
    as ``__key__``, where ``group2ctxs`` in the Module API reads ``__ctx_group__``.
    """

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError(f"AttrScope: attribute '{k}' must be a string, got {type(v).__name__}")
        self._attr = dict(kwargs)
        self._old = None

    def get(self, attr):
        """Merge the scope's attributes under the user's ``attr`` dict."""
        merged = dict(self._attr)
        if attr:
            merged.update(attr)
        return merged

    def __enter__(self):
        self._old = current()
        outer = dict(self._old._attr)
        outer.update(self._attr)
        self._attr = outer
        _local.current = self
        return self

    def __exit__(self, *exc):
        _local.current = self._old


def current() -> AttrScope:
    scope = getattr(_local, "current", None)
    if scope is None:
        scope = _local.current = AttrScope()
    return scope
