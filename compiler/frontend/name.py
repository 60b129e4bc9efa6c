"""Automatic names for symbols, as mxnet's ``NameManager`` / ``Prefix`` give them."""
from __future__ import annotations

import threading

_local = threading.local()


class NameManager:
    """Gives ``hint`` + a per-hint counter (``fullyconnected0``) to unnamed symbols.

    Used as a context manager; the innermost manager is current.
    """

    def __init__(self):
        self._counter = {}
        self._old = None

    def get(self, name, hint):
        """Return ``name`` if given, else a fresh name from ``hint``."""
        if name:
            return name
        hint = hint.lower()
        count = self._counter.get(hint, 0)
        self._counter[hint] = count + 1
        return f"{hint}{count}"

    def __enter__(self):
        self._old = current()
        _local.current = self
        return self

    def __exit__(self, *exc):
        _local.current = self._old


class Prefix(NameManager):
    """A name manager that prepends ``prefix`` to every name, given or generated."""

    def __init__(self, prefix):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)


def current() -> NameManager:
    mgr = getattr(_local, "current", None)
    if mgr is None:
        mgr = _local.current = NameManager()
    return mgr
