"""Python's cyclic garbage collector, paused while a graph is built and walked."""
from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector for a compile, a bind or an inference
    over a symbol's graph (usable as a decorator too).

    A compile allocates millions of small objects that live until it ends
    (graph copies, tile programs, generated calls). Each allocation burst sets
    off a collection that walks every tracked object, the compile's own
    included, so with the collector on, compile time grows faster than the
    graph: a 40,000-node graph spent half its compile in collections. The
    objects are freed by reference counting when the compile ends (the compiler
    leaves no reference cycles among them: a cycle would make the first
    collection afterwards walk all of them); the collector runs again afterwards.
    A caller that already paused it keeps it paused.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
