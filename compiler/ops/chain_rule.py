"""One step of reverse-mode differentiation: a node's gradient rule applied.

:func:`differentiate_node` sums the gradient contributions that reached a node's
outputs, calls its operator's ``gradient`` rule (graph ops, written through a
``compiler.frontend.graph.Builder``) and adds what the rule returns to the
contributions of the node's inputs. ``passes/autodiff.py`` runs it over a whole graph,
RNN's gradient (``rnn.py``) over the decomposition it rebuilds, and the Monitor over a
graph it evaluates op by op.
"""
from __future__ import annotations

from .registry import NodeView
from ..errors import MXNetError
from ..ir.dtypes import is_float


def scaled(b, g, scale):
    """``g`` times the one-element ``scale`` (None: ``g``), as graph ops built by ``b``."""
    if scale is None:
        return g
    shape = (1,) * len(g.shape)
    return b.op("broadcast_mul", g, scale if shape == (1,) else b.op("Reshape", scale, shape=shape))


def _in_dtype_of(b, grad, out):
    """The gradient of an integer value in that value's dtype, as mxnet keeps it (a
    float head gradient reaching an int32 output is truncated)."""
    want = out.dtype
    if want is None or is_float(want) or grad.dtype == want:
        return grad
    return b.op("Cast", grad, dtype=want)


def differentiate_node(graph, b, n, contributions, scale=None):
    """Apply node ``n``'s gradient rule to the contributions reaching its outputs.

    Parameters
    ----------
    graph : compiler.frontend.graph.Graph
        The graph holding ``n``, which ``b`` adds the gradient ops to.
    b : compiler.frontend.graph.Builder
        Builds the gradient ops.
    n : int
        The node.
    contributions : dict
        Entry ``(node, output)`` -> list of Refs of gradient terms; the terms for ``n``'s
        outputs are summed here, and the input gradients appended (updated in place).
    scale : Ref, optional
        The one-element loss scale multiplying a loss operator's input gradients.

    Raises
    ------
    MXNetError
        When gradient reaches an operator that has no gradient rule.
    """
    d = graph.node(n)
    opdef = d["opdef"]
    num_out = len(d["shapes"])
    outs = [b.ref((n, i)) for i in range(num_out)]
    got = [contributions.get((n, i), []) for i in range(num_out)]
    if not opdef.is_loss and not any(got):
        return
    if opdef.gradient is None:
        raise MXNetError(f"operator {d['op']} '{d['name']}' has no gradient; mark its inputs "
                         f"with grad_req='null' or wrap it in BlockGrad")
    ograds = [_in_dtype_of(b, sum_refs(b, g), o) if g else b.zeros_like(o)
              for g, o in zip(got, outs)]
    ins = graph.inputs(n)
    view = NodeView(d["name"], d["attrs"], [b.ref(e) for e in ins], outs, ograds,
                    [graph.shape(e) for e in ins], list(d["shapes"]))
    grads = opdef.gradient(b, view)
    nargs = len(opdef.list_arguments(d["attrs"]))
    for entry, g in zip(ins[:nargs], grads[:nargs]):
        if g is None:
            continue
        if tuple(g.shape) != tuple(graph.shape(entry)):
            raise MXNetError(f"internal: gradient of {d['op']} '{d['name']}' has shape "
                             f"{g.shape}, input has {graph.shape(entry)}")
        if opdef.is_loss:
            g = scaled(b, g, scale)
        want = graph.dtype(entry)
        if g.dtype != want and is_float(want):
            # a gradient has its input's dtype (mxnet's _backward_cast for Cast; a float32
            # BatchNorm gamma's gradient from float16 data)
            g = b.op("Cast", g, dtype=want)
        contributions.setdefault(tuple(entry), []).append(g)


def sum_refs(b, refs):
    """The sum of ``refs`` as ``elemwise_add`` ops built by ``b`` (None for no refs)."""
    if not refs:
        return None
    total = refs[0]
    for r in refs[1:]:
        total = b.op("elemwise_add", total, r)
    return total
