"""Helpers shared by the ``_contrib_*`` families (``contrib_nn.py``, ``contrib_math.py``,
``contrib_attention.py``, ``contrib_box.py``).

:func:`gradient_of_decomposition` is RNN's habit (``rnn.py``) made general: an operator
that is a ``Decompose`` rewrite gets its gradient by rebuilding its decomposition with the
gradient's builder (in the forward phase, so ``simplify`` merges it with the decomposed
forward) and differentiating it with the per-operator rules. Only the nodes that depend on
the operator's inputs are differentiated; constants built from ``_axis_index`` (an
interpolation matrix, a pooling window) carry no gradient.
"""
from __future__ import annotations

from .chain_rule import differentiate_node, sum_refs
from .registry import ShapeError


def gradient_of_decomposition(build):
    """A ``gradient`` rule for an operator lowered as ``Decompose(build)``.

    Parameters
    ----------
    build : callable(b, node, is_train) -> list of Ref
        The operator's decomposition; it must return the Refs of the visible outputs
        first.

    Returns
    -------
    callable(b, node) -> list of Ref
        The gradient of every input (zeros where no output depends on it; ``None`` for
        the second and later occurrences of an input fed twice, whose contributions the
        first occurrence carries).
    """
    def gradient(b, n):
        graph = b.graph
        before = set(graph.g.nodes)
        phase = b.phase
        b.phase = "fwd"
        try:
            outs = build(b, n, True)
        finally:
            b.phase = phase
        built = sorted(set(graph.g.nodes) - before)
        live = {tuple(r.entry)[0] for r in n.inputs}
        for node in built:
            if any(src in live for src, _ in graph.inputs(node)):
                live.add(node)
        contributions = {}
        for ref, og in zip(outs, n.ograds):
            contributions.setdefault(tuple(ref.entry), []).append(og)
        for node in reversed(built):
            if node in live:
                differentiate_node(graph, b, node, contributions)
        grads, seen = [], set()
        for ref in n.inputs:
            e = tuple(ref.entry)
            if e in seen:
                grads.append(None)
                continue
            seen.add(e)
            g = sum_refs(b, contributions.get(e, []))
            grads.append(b.zeros_like(ref) if g is None else g)
        return grads
    return gradient


def zero_gradients(b, n):
    """mxnet's ``MakeZeroGradNodes`` (and backward kernels that write zeros): every input
    gets a zero gradient."""
    return [b.zeros_like(r) for r in n.inputs]


def require_rank(op, what, shape, rank, at_least=False):
    """Raise ``ShapeError`` unless ``shape`` has ``rank`` dims (or more, ``at_least``)."""
    ok = len(shape) >= rank if at_least else len(shape) == rank
    if not ok:
        want = f"at least {rank}" if at_least else f"{rank}"
        raise ShapeError(f"{op}: {what} of shape {tuple(shape)} must have {want} dims")


def cast_to(b, v, dtype):
    """``v`` as ``dtype`` (no node when it already is)."""
    return v if v.dtype == dtype or dtype is None else b.op("Cast", v, dtype=dtype)
