"""The ``cpu`` target's rejection samplers: each try computed only where needed.

``_gamma_draw`` and ``_poisson_draw`` compute all of their fixed tries for every
element, which a GPU kernel does at little cost and the ``cpu`` target does as a few
hundred whole-array ATen calls a try (a million negative binomial draws took over 15 s
on one core). On the ``cpu`` target this pass gives their nodes the extern forms of
``compiler/ops/random_lazy.py``, which compute the same values, bit for bit, trying
again only where the tries before were rejected. The Triton targets keep the kernels.
This is the third place where the targets' graphs differ (after the ``cpu`` target's
oneDNN LSTM layers and the Triton targets' split concats).
"""
from __future__ import annotations

from ..frontend.graph import Graph
from ..ops import get_op
from ..ops.random_lazy import LAZY_FORMS


def lazy_rejection_samplers(graph: Graph) -> int:
    """Give every ``_gamma_draw`` / ``_poisson_draw`` node of ``graph`` its lazy extern
    form, in place (same inputs, attributes and outputs); return how many changed."""
    count = 0
    for n in graph.ops():
        d = graph.node(n)
        lazy = LAZY_FORMS.get(d["op"])
        if lazy is not None:
            d["op"], d["opdef"] = lazy, get_op(lazy)
            count += 1
    return count
