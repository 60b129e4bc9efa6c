"""Which executor a bind gets: ``Symbol.bind`` and ``Symbol.simple_bind`` end here.

A graph that ``group2ctx`` spreads over several contexts, or that holds ``Custom``
nodes (Python operators), runs as one sub-executor per segment
(:class:`~runtime.executor_partitioned.PartitionedExecutor`); every other graph as one
:class:`~runtime.executor.Executor`. Importing this module registers
:func:`bind` and :func:`simple_bind` with ``compiler.symbol`` (``import runtime`` does
it): imports flow compiler -> runtime, never back.
"""
from __future__ import annotations

from compiler.symbol import register_runtime

from .context import Context, current_context
from .executor import Executor, allocate_arrays
from .executor_partitioned import PartitionedExecutor, custom_nodes, spans_contexts
from .threads import chosen_count


def bind(symbol, ctx, args, args_grad=None, grad_req="write", aux_states=None,
         shared_exec=None, group2ctx=None):
    """Bind ``symbol`` to the given arrays.

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
        The default context (None: the current one).
    args : list or dict of NDArray
        In ``list_arguments`` order, or by name.
    args_grad : list or dict of NDArray, optional
        Where the gradients go. As in mxnet, an argument given no gradient array
        gets no gradient, so without ``args_grad`` nothing is differentiated.
    grad_req : str, list or dict
        ``write``, ``add`` or ``null`` per argument.
    aux_states : list or dict of NDArray, optional
    shared_exec : executor, optional
        An executor whose memory this one may share (never run at the same time).
    group2ctx : dict of str to Context, optional
        Where the nodes of each ``ctx_group`` run.

    Returns
    -------
    Executor
        A :class:`PartitionedExecutor` when ``group2ctx`` places the nodes on more than
        one context.
    """
    if args_grad is None:
        grad_req = "null"
    return _bind(symbol, ctx, args, args_grad, grad_req, aux_states, shared_exec, group2ctx)


def _bind(symbol, ctx, args, args_grad, grad_req, aux_states, shared_exec, group2ctx):
    """:func:`bind`, with ``args_grad=None`` meaning arrays allocated for every
    gradient ``grad_req`` asks for (``simple_bind``'s)."""
    ctx = ctx if isinstance(ctx, Context) else current_context()
    spans = bool(group2ctx) and spans_contexts(symbol, ctx, args, aux_states, group2ctx)
    cls = PartitionedExecutor if spans or custom_nodes(symbol) else Executor
    with chosen_count():        # the executor zeroes its buffers: a busy machine's count
        return cls(symbol, ctx, args, args_grad, grad_req, aux_states, shared_exec, group2ctx)


def simple_bind(symbol, ctx, grad_req="write", type_dict=None, shared_exec=None,
                shared_buffer=None, shapes=None, group2ctx=None):
    """Allocate zeroed arrays of the inferred shapes and :func:`bind` them.

    Parameters
    ----------
    symbol : Symbol
    ctx : Context
    grad_req : str, list or dict
    type_dict : dict of str to dtype, optional
    shared_exec : executor, optional
    shared_buffer : dict, optional
        Accepted for mxnet's signature; memory is shared through ``shared_exec``.
    shapes : dict of str to tuple
        The input shapes.
    group2ctx : dict of str to Context, optional

    Returns
    -------
    Executor
    """
    ctx = ctx if isinstance(ctx, Context) else current_context()
    with chosen_count():
        args, aux = allocate_arrays(symbol, ctx, type_dict, shapes, group2ctx)
        return _bind(symbol, ctx, args, None, grad_req, aux, shared_exec, group2ctx)


register_runtime(bind, simple_bind, current_context)
