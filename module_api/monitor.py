"""``mx.mon.Monitor``: statistics of outputs, weights and gradients (mxnet 1.9.1).

Names follow mxnet's executor: every operator output ``{node}_output``
(``{node}_output{i}`` for several), every backward node output
``{node}_backward_output`` (one input) or ``{node}_backward_output{i}``
(the gradient of the node's i-th argument), and, at ``toc``, every argument
and auxiliary state by its own name. ``monitor_all=True`` adds each
operator's inputs as ``{node}_{input_name}``.

A compiled Program fuses operators, so their intermediate values do not
exist in memory; while a monitor is collecting (between ``tic`` and
``toc``) the installed executor's forward and backward are followed by an
op-by-op evaluation of the same graph with the operators' torch references
(from the executor's current arrays) to produce the per-operator values.
Only collected steps pay for it. Gradients of inputs that receive none
(data without ``inputs_need_grad``, labels) are reported as zeros, where
mxnet reports whatever its buffer held.
"""
from __future__ import annotations

import logging
import re
from math import sqrt

import torch

from runtime.ndarray import as_ndarray

_LOG = logging.getLogger(__name__)

_log = logging.getLogger(__name__)


def _default_stat(x):
    """``norm(x) / sqrt(x.size)``."""
    t = x.detach().float()
    return as_ndarray((torch.linalg.vector_norm(t) / sqrt(max(t.numel(), 1))).reshape(1))


class Monitor:
    """Monitor inputs, outputs, weights and gradients for debugging.

    Parameters
    ----------
    interval : int
        Number of batches between collections.
    stat_func : function, optional
        NDArray -> NDArray statistic; defaults to ``norm(x)/sqrt(x.size)``.
    pattern : str
        Regular expression on the names to monitor.
    sort : bool
        Sort the results by name.
    monitor_all : bool
        Also monitor each operator's inputs.
    """

    def __init__(self, interval, stat_func=None, pattern='.*', sort=False, monitor_all=False):
        self.stat_func = stat_func if stat_func is not None else _default_stat
        self.interval = interval
        self.activated = False
        self.queue = []
        self.step = 0
        self.exes = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all
        self._quiet = 0

        def stat_helper(name, array):
            """Executor callback."""
            if self._quiet or not self.activated or not self.re_prog.match(str(name)):
                return
            self.queue.append((self.step, str(name), self.stat_func(array)))
        self.stat_helper = stat_helper

    def install(self, exe):
        """Install the callback on an executor (several executors may share a monitor)."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)
        if hasattr(exe, "_symbol") and hasattr(exe, "arg_dict") and \
                not getattr(exe, "_symtriton_monitored", False):
            self._wrap(exe)

    def _wrap(self, exe):
        orig_forward, orig_backward = exe.forward, exe.backward
        tracer = _Tracer(exe)
        mon = self

        def forward(is_train=False, **kwargs):
            mon._quiet += 1
            try:
                out = orig_forward(is_train=is_train, **kwargs)
            finally:
                mon._quiet -= 1
            if mon.activated:
                mon._record(tracer.forward_values(is_train, mon.monitor_all))
            return out

        def backward(out_grads=None, *args, **kwargs):
            out = orig_backward(out_grads, *args, **kwargs)
            if mon.activated:
                mon._record(tracer.backward_values())
            return out

        exe.forward = forward
        exe.backward = backward
        exe._symtriton_monitored = True

    def _record(self, named_values):
        for name, value in named_values:
            if self.re_prog.match(name):
                self.queue.append((self.step, name, self.stat_func(value)))

    def tic(self):
        """Start collecting stats for the current batch (call before forward)."""
        if self.step % self.interval == 0:
            for exe in self.exes:
                for array in exe.arg_arrays:
                    array.wait_to_read()
                for array in exe.aux_arrays:
                    array.wait_to_read()
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self):
        """End collecting for the current batch and return ``[(step, name, stat_string)]``."""
        if not self.activated:
            return []
        for exe in self.exes:
            for name, array in zip(exe._symbol.list_arguments(), exe.arg_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
            for name, array in zip(exe._symbol.list_auxiliary_states(), exe.aux_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        res = []
        if self.sort:
            self.queue.sort(key=lambda x: x[1])
        for n, k, v_list in self.queue:
            if isinstance(v_list, torch.Tensor):
                v_list = [v_list]
            assert isinstance(v_list, list)
            s = ''
            for v in v_list:
                assert isinstance(v, torch.Tensor)
                if tuple(v.shape) in ((1,), ()):
                    s += str(v.detach().cpu().reshape(()).numpy()) + '\t'
                else:
                    s += str(v.detach().cpu().numpy()) + '\t'
            res.append((n, k, s))
        self.queue = []
        return res

    def toc_print(self):
        """End collecting and log the results."""
        res = self.toc()
        for n, k, v in res:
            _LOG.info('Batch: {:7d} {:30s} {:s}'.format(n, k, v))


class _Tracer:
    """Per-operator values of one executor's graph, from the torch references."""

    def __init__(self, exe):
        self.exe = exe
        self._fwd = None
        self._bwd = None
        self._failed = False

    def _shapes(self):
        return {n: tuple(a.shape) for n, a in self.exe.arg_dict.items()}

    def _feeds(self):
        feeds = {n: a.detach() for n, a in self.exe.arg_dict.items()}
        feeds.update({n: a.detach() for n, a in self.exe.aux_dict.items()})
        return feeds

    def _forward_graph(self):
        from compiler.passes.infer_shapes import infer_shapes
        if self._fwd is None:
            self._fwd = infer_shapes(self.exe._symbol.to_graph(), self._shapes())
        return self._fwd

    def forward_values(self, is_train, monitor_all):
        """``[(name, tensor)]`` of every operator output (and inputs with ``monitor_all``)."""
        if self._failed:
            return []
        try:
            from compiler.frontend.reference import evaluate
            g = self._forward_graph()
            entries = [(n, i) for n in g.ops() for i in range(len(g.node(n)["shapes"]))]
            vals = evaluate(g, self._feeds(), bool(is_train), entries)
            out = []
            for n in g.ops():
                d = g.node(n)
                if monitor_all:
                    names = list(d["opdef"].list_arguments(d["attrs"])) + d["opdef"].list_aux(d["attrs"])
                    for e, in_name in zip(g.inputs(n), names):
                        src = g.node(e[0])
                        value = self._feeds()[src["name"]] if src["op"] == "null" else vals[e]
                        out.append((f"{d['name']}_{in_name}", value))
                outs = d["opdef"].list_outputs(d["attrs"])
                for i, o in enumerate(outs):
                    out.append((f"{d['name']}_{o}", vals[(n, i)]))
            return out
        except Exception as exc:  # a monitor must never break training
            self._give_up(exc)
            return []

    def _backward_graph(self):
        """The forward graph with each operator's input gradients built after it."""
        if self._bwd is not None:
            return self._bwd
        from compiler.frontend.graph import Builder
        from compiler.ops.chain_rule import differentiate_node
        g = self._forward_graph().copy()
        b = Builder(g, "bwd", "mon")
        contributions, head_vars = {}, {}
        for i, head in enumerate(list(g.heads)):
            node = g.node(head[0])
            if node["op"] != "null" and node["opdef"].is_loss:
                continue
            v = g.add_node("null", f"mon_head_grad{i}", role="head_grad", phase="bwd")
            g.node(v)["shapes"] = [g.shape(head)]
            g.node(v)["dtypes"] = [g.dtype(head)]
            head_vars[f"mon_head_grad{i}"] = i
            contributions.setdefault(tuple(head), []).append(b.ref((v, 0)))
        per_node = []
        for n in reversed(g.ops()):
            d = g.node(n)
            ins = g.inputs(n)
            nargs = len(d["opdef"].list_arguments(d["attrs"]))
            before = {tuple(e): len(contributions.get(tuple(e), [])) for e in ins[:nargs]}
            differentiate_node(g, b, n, contributions)
            taken = {}
            grads = []
            for e in ins[:nargs]:
                e = tuple(e)
                k = before[e] + taken.get(e, 0)
                new = contributions.get(e, [])
                if k < len(new):
                    grads.append(new[k].entry)
                    taken[e] = taken.get(e, 0) + 1
                else:
                    grads.append(None)
            per_node.append((d["name"], grads, [g.shape(tuple(e)) for e in ins[:nargs]]))
        self._bwd = (g, per_node, head_vars)
        return self._bwd

    def backward_values(self):
        """``[(name, tensor)]`` of every backward node output (input gradients)."""
        if self._failed:
            return []
        try:
            from compiler.frontend.reference import evaluate
            g, per_node, head_vars = self._backward_graph()
            feeds = self._feeds()
            feeds.update(self._head_grads(head_vars, g))
            entries = [e for _, grads, _ in per_node for e in grads if e is not None]
            vals = evaluate(g, feeds, True, entries) if entries else {}
            out = []
            for name, grads, shapes in per_node:
                for i, (e, shape) in enumerate(zip(grads, shapes)):
                    value = vals[tuple(e)] if e is not None else torch.zeros(tuple(shape))
                    suffix = "output" if len(grads) == 1 else f"output{i}"
                    out.append((f"{name}_backward_{suffix}", value))
            return out
        except Exception as exc:  # a monitor must never break training
            self._give_up(exc)
            return []

    def _head_grads(self, head_vars, g):
        exe = self.exe
        prog = getattr(exe, "_train_prog", None)
        stored = getattr(exe, "_head_grads", {}).get(id(prog), {}) if prog is not None else {}
        by_index = {int(i): stored.get(name) for i, name in
                    (prog.head_grads.items() if prog is not None else [])}
        feeds = {}
        for var, i in head_vars.items():
            t = by_index.get(i)
            feeds[var] = t.detach() if t is not None else torch.zeros(tuple(g.shape(g.heads[i])))
        return feeds

    def _give_up(self, exc):
        self._failed = True
        _log.warning("Monitor: per-operator statistics are unavailable for this executor "
                     "(%s: %s); arguments are still reported", type(exc).__name__, exc)
