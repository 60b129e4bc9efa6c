"""The Symbol API: build, compose, inspect and (de)serialise graphs as mxnet 1.x does.

A :class:`Symbol` is a list of output entries ``(node, index)`` over
immutable :class:`compiler.symbol_node.Node` objects (mxnet's JSON form:
``compiler/symbol_json.py``). It knows nothing about kernels: analysis happens on
:class:`compiler.frontend.graph.Graph`, built by :meth:`Symbol.to_graph`.
Every registered operator is available here as a function
(``FullyConnected(data=..., num_hidden=10, name='fc1')``), with mxnet's
auto-created argument variables (``fc1_weight``) and auto names
(``fullyconnected0``).
"""
from __future__ import annotations

import builtins
import collections
import json
import sys
from typing import Optional

import numpy as np

from .frontend import attribute as _attribute
from .frontend import name as _name
from .errors import MXNetError, NotImplementedForSymbol
from .frontend.graph import Graph, _raw
from .frontend.json_indent import dumps_indented
from .ops import REGISTRY, get_op
from .ops.registry import namespace_members
from .symbol_random import make_namespace as _random_namespace
from .symbol_random import make_rand_zipfian as _make_rand_zipfian
from . import symbol_control_flow as _control_flow
from . import symbol_inference as _inference
# imported under private names: this module is the public ``mx.sym`` namespace
from .symbol_json import entries_from_file as _entries_from_file
from .symbol_json import entries_from_json as _entries_from_json
from .symbol_json import json_doc as _json_doc
from .symbol_node import ATTR_EDITS as _ATTR_EDITS
from .symbol_node import Node as _Node
from .symbol_node import listed_attrs as _listed_attrs
from .symbol_node import topo as _topo


_FILLING = ("filling",)      # Symbol._inference_graph: a kind of inference under way


# The runtime registers its Executor here when it is imported: imports flow
# compiler -> runtime, never back, and module_api imports the runtime.
_RUNTIME = {}


def register_runtime(bind, simple_bind, current_context):
    """Called by ``runtime.binding``: what ``bind`` / ``simple_bind`` / ``eval`` call.

    Parameters
    ----------
    bind : callable
        ``bind(symbol, ctx, args, args_grad, grad_req, aux_states, shared_exec,
        group2ctx)`` -> an executor.
    simple_bind : callable
        ``simple_bind(symbol, ctx, grad_req, type_dict, shared_exec, shared_buffer,
        shapes, group2ctx)`` -> an executor over new zeroed arrays.
    current_context : callable
        The default context.
    """
    _RUNTIME.update(bind=bind, simple_bind=simple_bind, current_context=current_context)


def _runtime(what) -> dict:
    if not _RUNTIME:
        raise MXNetError(f"Symbol.{what} runs on symtriton's runtime: import module_api "
                         f"(or runtime) before binding")
    return _RUNTIME


def is_mode_dependent(symbol) -> bool:
    """Whether some operator of ``symbol`` behaves differently in training
    (Dropout, BatchNorm): then inference needs a Program of its own."""
    for node in symbol._nodes():
        if node.op == "null":
            continue
        dep = node.opdef().mode_dependent
        if dep(node.parsed()) if callable(dep) else dep:
            return True
    return False


class Symbol:
    """A symbolic multi-output graph, as ``mxnet.symbol.Symbol``."""

    _effects = ()      # a symbol pickled before output-less nodes existed has none

    def __init__(self, outputs, effects=()):
        self._outputs = [(n, int(i)) for n, i in outputs]
        # operators without outputs that write their inputs (mxnet's ``reset_arrays``):
        # a symbol keeps them for their writes, as it keeps its outputs for their values
        self._effects = list(effects)

    # -- what is derived from the graph, once ------------------------------------------
    def _derived(self) -> dict:
        """Facts derived from this symbol's graph (node order, variables, inferred
        shapes and dtypes), kept while its outputs and every node's attributes stay
        as they were: a bind asks for them several times (the executor, the cache
        key, the compile), and each walk of a 40,000-node graph costs tenths of a
        second. Nodes never change their inputs once made."""
        memo = self.__dict__.get("_memo")
        outs = self._outputs
        if memo is None or memo["edits"] != _ATTR_EDITS[0] or \
                len(memo["outputs"]) != len(outs) or \
                any(a is not b or i != j for (a, i), (b, j) in zip(memo["outputs"], outs)):
            memo = {"outputs": list(outs), "edits": _ATTR_EDITS[0]}
            self.__dict__["_memo"] = memo
        return memo

    def _remember(self, key, compute):
        """``compute()``, remembered under ``key`` in :meth:`_derived` (a few keys kept)."""
        memo = self._derived()
        if key not in memo:
            values = [k for k in memo if isinstance(k, tuple)]
            if len(values) >= 16:            # shapes of many buckets or reshapes
                del memo[values[0]]
            memo[key] = compute()
        return memo[key]

    def _inference_graph(self, kind: str):
        """The graph that shape or dtype inference (``kind``: ``shapes`` or ``dtypes``)
        fills next: the one kept from the other kind's last inference if it has not
        been filled with this kind yet (the two fill disjoint parts of the node data),
        else a new one. A bind infers dtypes and shapes once each; the compile then
        takes the graph (:meth:`_take_inferred_graph`) instead of building and
        inferring a third."""
        slot = self._derived().get("inferred_graph")
        if slot is None or slot[kind] is not None:
            slot = {"graph": self.to_graph(), "shapes": None, "dtypes": None}
        # being filled: another inference of this kind (another thread's) takes a new
        # graph, and :meth:`_take_inferred_graph` does not take this one yet
        self._derived()["inferred_graph"] = dict(slot, **{kind: _FILLING})
        return slot["graph"]

    def _inferred(self, kind: str, graph, key):
        """Record that ``graph`` (from :meth:`_inference_graph`) holds the complete
        result of ``kind`` inference for ``key``; ``key`` None: it holds a partial or
        failed one, and is dropped."""
        memo = self._derived()
        slot = memo.get("inferred_graph")
        if slot is None or slot["graph"] is not graph:
            return
        if key is None:
            memo.pop("inferred_graph", None)
        else:
            slot[kind] = key

    def _take_inferred_graph(self, shapes_key, dtypes_key):
        """The kept graph if both its shapes and its dtypes are those of the keys
        (it is no longer kept: the caller owns it), else None."""
        memo = self._derived()
        slot = memo.get("inferred_graph")
        if slot is None or slot["shapes"] != shapes_key or slot["dtypes"] != dtypes_key:
            return None
        if memo.pop("inferred_graph", None) is not slot:
            return None                 # another thread took it first
        return slot["graph"]

    def _nodes(self) -> list:
        """Every node, in mxnet's order (:func:`compiler.symbol_node.topo`); do not modify
        the list."""
        memo = self._derived()
        if "nodes" not in memo:
            memo["nodes"] = _topo(self._outputs + [(n, 0) for n in self._effects])
        return memo["nodes"]

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_memo"}

    # -- naming and attributes ---------------------------------------------------
    @property
    def name(self) -> Optional[str]:
        """The name of a single-output symbol (None for a group)."""
        if len(self._outputs) != 1:
            return None
        return self._outputs[0][0].name

    def attr(self, key):
        """The string value of attribute ``key`` of this (single-output) symbol."""
        node = self._single("attr")
        if key in node.attrs:
            return node.attrs[key]
        # a hidden key given as ``lr_mult`` is stored as ``__lr_mult__`` (_hide_key)
        return node.attrs.get(f"__{key}__") if key in _HIDDEN_KEYS else None

    def list_attr(self, recursive=False):
        if recursive:
            raise MXNetError("list_attr(recursive=True) is deprecated in mxnet; use attr_dict()")
        node = self._single("list_attr")
        return _with_plain_hidden_keys(_listed_attrs(node))

    def attr_dict(self):
        """Every attribute of every node, as ``{node name: {key: value}}``.

        As mxnet 1.9.1's ``MXSymbolListAttr``: nodes without attributes are left
        out, and the hidden keys ``__lr_mult__``, ``__wd_mult__``, ``__ctx_group__``,
        ``__force_mirroring__`` and ``__mirror_stage__`` are listed a second time
        without their underscores (``lr_mult``). Variables an operator created for
        its missing inputs carry a copy of the operator's attributes, so an
        ``attr={'__lr_mult__': '0.1'}`` given to ``FullyConnected`` reaches
        ``fc_weight`` and ``fc_bias`` here, where optimizers read it.

        Returns
        -------
        dict of str to dict of str to str
        """
        out = {}
        for node in self._nodes():
            if _listed_attrs(node):
                out[node.name] = _with_plain_hidden_keys(_listed_attrs(node))
        return out

    def _gen_atomic_symbol(self):
        """A new, uncomposed symbol of this symbol's operator with its attributes.

        As mxnet 1.9.1 (``MXGenAtomicSymbolFromSymbol``): the operator and its
        own attributes (hidden ones included) without inputs or name; calling it
        with inputs composes a new node (``atomic(*inputs)`` or
        ``atomic(data=x, name='fc2')``), creating variables for inputs not given.
        Every output must come from one operator node.

        Returns
        -------
        Symbol
        """
        if not self._outputs:
            raise MXNetError("_gen_atomic_symbol: the symbol has no outputs")
        node = self._outputs[0][0]
        if any(n is not node for n, _ in self._outputs):
            raise MXNetError("_gen_atomic_symbol works on the outputs of one operator, not on "
                             f"a group of several nodes ({self.list_outputs()})")
        if node.op == "null":
            raise MXNetError(f"_gen_atomic_symbol: '{node.name}' is a variable, not an operator")
        atomic = _Node(node.op, "", node.attrs)
        count = node.opdef().visible_outputs(node.parsed())
        return Symbol([(atomic, i) for i in range(count)])

    def _is_atomic(self):
        """An uncomposed operator from :meth:`_gen_atomic_symbol`: no inputs yet."""
        node = self._outputs[0][0] if self._outputs else None
        return node is not None and node.op != "null" and not node.inputs and \
            node.num_arguments() + len(node.opdef().list_aux(node.parsed())) > 0 and \
            all(n is node for n, _ in self._outputs)

    def _set_attr(self, **kwargs):
        node = self._single("_set_attr")
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise MXNetError(f"attribute '{k}' must be a string")
        hidden = {_hide_key(k, v, node.op, node.name): v for k, v in kwargs.items()}
        node.attrs.update(hidden)
        _ATTR_EDITS[0] += 1

    def _single(self, what):
        if len(self._outputs) != 1:
            raise MXNetError(f"{what} needs a single-output symbol, this one has "
                             f"{len(self._outputs)} outputs")
        return self._outputs[0][0]

    # -- listing -------------------------------------------------------------------
    def _variables(self):
        memo = self._derived()
        if "variables" not in memo:
            memo["variables"] = self._find_variables()
        args, aux = memo["variables"]
        return list(args), list(aux)

    def _find_variables(self):
        nodes = self._nodes()
        aux_ids = set()
        for node in nodes:
            if node.op != "null":
                nargs = node.num_arguments()
                for slot, (src, _) in enumerate(node.inputs):
                    if slot >= nargs and src.op == "null":
                        aux_ids.add(id(src))
        args = [n for n in nodes if n.op == "null" and id(n) not in aux_ids]
        aux = [n for n in nodes if n.op == "null" and id(n) in aux_ids]
        return args, aux

    def list_arguments(self):
        """Names of the arguments (inputs and parameters), in mxnet's order."""
        return [n.name for n in self._variables()[0]]

    def _aux_names(self):
        memo = self._derived()
        if "aux_names" not in memo:
            memo["aux_names"] = frozenset(self.list_auxiliary_states())
        return memo["aux_names"]

    def list_auxiliary_states(self):
        """Names of the auxiliary states (BatchNorm's moving statistics)."""
        return [n.name for n in self._variables()[1]]

    def list_inputs(self):
        """Arguments and auxiliary states, in graph order."""
        return [n.name for n in self._nodes() if n.op == "null"]

    def list_outputs(self):
        """Output names: ``{node}_output`` (``{node}_output0`` ...), a variable's own name."""
        return [node.output_names()[i] for node, i in self._outputs]

    def debug_str(self):
        """mxnet's text listing of the graph (``Symbol.debug_str``): outputs, variables
        and every operator with its inputs and attributes; a ``Custom`` node says it
        runs in Python."""
        from .frontend.listing import debug_lines
        return "\n".join(debug_lines(self, _topo)) + "\n"

    def get_internals(self):
        """A group of every output of every node, in topological order."""
        entries = []
        for node in self._nodes():
            count = 1 if node.op == "null" else node.opdef().visible_outputs(node.parsed())
            entries.extend((node, i) for i in range(count))
        return Symbol(entries)

    def get_children(self):
        """The inputs of this symbol's nodes, grouped (None for variables).

        As mxnet: for a group, each distinct output node's inputs in turn
        (``Group([a + b, a * 2])`` gives ``a, b, a``); all outputs of one
        multi-output node count once.
        """
        seen, inputs = set(), []
        for node, _ in self._outputs:
            if id(node) not in seen:
                seen.add(id(node))
                inputs.extend(node.inputs)
        return Symbol(inputs) if inputs else None

    def __bool__(self):
        raise NotImplementedForSymbol(self.__bool__, "bool")

    def __len__(self):
        return len(self._outputs)

    def __iter__(self):
        return (Symbol([e]) for e in self._outputs)

    def __getitem__(self, index):
        if isinstance(index, str):
            names = self.list_outputs()
            matches = [i for i, n in enumerate(names) if n == index]
            if not matches:
                raise MXNetError(f"no output named '{index}'; outputs are {names}")
            index = matches[0]
        if isinstance(index, builtins.slice):   # the module's `slice` is mxnet's operator
            return Symbol(self._outputs[index])
        if not -len(self._outputs) <= index < len(self._outputs):
            raise IndexError(f"output index {index} out of range for {len(self._outputs)} outputs")
        return Symbol([self._outputs[index]])

    # -- composition -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """Compose: replace this symbol's free variables by the given symbols."""
        s = self.__copy__()
        s._compose(*args, **kwargs)
        return s

    def _compose(self, *args, **kwargs):
        name = kwargs.pop("name", None)
        if self._is_atomic():
            node = self._outputs[0][0]
            if args and kwargs:
                raise MXNetError("compose takes positional or keyword symbols, not both")
            made = _create(node.op, list(args), {**node.attrs, **kwargs}, name or None)
            self._outputs = made._outputs
            return
        arg_vars = self._variables()[0]
        subst = {}
        if args:
            if kwargs:
                raise MXNetError("compose takes positional or keyword symbols, not both")
            for var, sym in zip(arg_vars, args):
                subst[id(var)] = sym._single_entry("compose")
        for key, sym in kwargs.items():
            hits = [v for v in arg_vars if v.name == key]
            if not hits:
                raise MXNetError(f"compose: this symbol has no argument '{key}'; arguments are "
                                 f"{[v.name for v in arg_vars]}")
            subst[id(hits[0])] = sym._single_entry("compose")
        mapping = {}
        for node in self._nodes():
            if id(node) in subst:
                continue
            new = _Node(node.op, node.name, node.attrs,
                        [subst[id(s)] if id(s) in subst else (mapping[id(s)], i)
                         for s, i in node.inputs])
            mapping[id(node)] = new
        self._outputs = [subst[id(n)] if id(n) in subst else (mapping[id(n)], i)
                         for n, i in self._outputs]
        self._effects = [mapping[id(n)] for n in self._effects]
        if name and len(self._outputs) == 1 and self._outputs[0][0].op != "null":
            self._outputs[0][0].name = name

    def _single_entry(self, what):
        if len(self._outputs) != 1:
            raise MXNetError(f"{what}: expected a single-output symbol, got one with outputs "
                             f"{self.list_outputs()}")
        return self._outputs[0]

    def __copy__(self):
        mapping = {}
        for node in self._nodes():
            mapping[id(node)] = _Node(node.op, node.name, node.attrs,
                                      [(mapping[id(s)], i) for s, i in node.inputs])
        return Symbol([(mapping[id(n)], i) for n, i in self._outputs],
                      [mapping[id(n)] for n in self._effects])

    def __deepcopy__(self, memo):
        return self.__copy__()

    def copy(self):
        return self.__copy__()

    def __repr__(self):
        name = self.name
        if name is None:
            return f"<Symbol group [{', '.join(self.list_outputs())}]>"
        return f"<Symbol {name}>"

    # -- arithmetic ----------------------------------------------------------------------
    def _binary(self, other, op, scalar_op, reverse=False):
        if isinstance(other, Symbol):
            lhs, rhs = (other, self) if reverse else (self, other)
            return _create(op, [lhs, rhs], {}, None, hint=_HINTS.get(op, op))
        if isinstance(other, (int, float, np.number)):
            # mxnet writes the number as given (``x * 2``: scalar "2") and names the node
            # after its function (``_lesser_scalar0``)
            scalar = other if type(other) is int else float(other)
            return _create(scalar_op, [self], {"scalar": scalar}, None,
                           hint=_HINTS.get(scalar_op, scalar_op))
        return NotImplemented

    def __add__(self, o): return self._binary(o, "elemwise_add", "_plus_scalar")
    def __radd__(self, o): return self._binary(o, "elemwise_add", "_plus_scalar", True)
    def __sub__(self, o): return self._binary(o, "elemwise_sub", "_minus_scalar")
    def __rsub__(self, o): return self._binary(o, "elemwise_sub", "_rminus_scalar", True)
    def __mul__(self, o): return self._binary(o, "elemwise_mul", "_mul_scalar")
    def __rmul__(self, o): return self._binary(o, "elemwise_mul", "_mul_scalar", True)
    def __truediv__(self, o): return self._binary(o, "elemwise_div", "_div_scalar")
    def __rtruediv__(self, o): return self._binary(o, "elemwise_div", "_rdiv_scalar", True)
    def __pow__(self, o): return self._binary(o, "_power", "_power_scalar")
    def __rpow__(self, o): return self._binary(o, "_power", "_rpower_scalar", True)
    def __mod__(self, o): return self._binary(o, "_mod", "_mod_scalar")
    def __rmod__(self, o): return self._binary(o, "_mod", "_rmod_scalar", True)
    def __neg__(self): return self._binary(-1.0, None, "_mul_scalar")

    def __abs__(self):
        """``abs(x)``: the ``abs`` operator, as ``x.abs()`` and ``mx.sym.abs(x)``."""
        return _create("abs", [self], {}, None)
    def __gt__(self, o): return self._binary(o, "broadcast_greater", "_greater_scalar")
    def __ge__(self, o): return self._binary(o, "broadcast_greater_equal", "_greater_equal_scalar")
    def __lt__(self, o): return self._binary(o, "broadcast_lesser", "_lesser_scalar")
    def __le__(self, o): return self._binary(o, "broadcast_lesser_equal", "_lesser_equal_scalar")

    def __eq__(self, o):
        if isinstance(o, (Symbol, int, float)):
            return self._binary(o, "broadcast_equal", "_equal_scalar")
        return NotImplemented

    def __ne__(self, o):
        if isinstance(o, (Symbol, int, float)):
            return self._binary(o, "broadcast_not_equal", "_not_equal_scalar")
        return NotImplemented

    __hash__ = object.__hash__

    # -- graph and shapes --------------------------------------------------------------
    def to_graph(self, distinct_names: bool = True) -> Graph:
        """The analysis graph of this symbol (variables, operators, heads).

        ``distinct_names=False`` lets two variables share a name (``mx.viz`` draws
        such a graph, as mxnet's does; binding one is refused)."""
        graph = Graph()
        ids = {}
        args, aux = self._variables()
        aux_ids = {id(n) for n in aux}
        for node in self._nodes():
            if node.op == "null":
                role = "aux" if id(node) in aux_ids else "arg"
                ids[id(node)] = graph.add_node("null", node.name, raw=node.attrs, role=role)
            else:
                parsed = node.parsed()
                opdef = node.opdef()
                expected = len(opdef.list_arguments(parsed)) + len(opdef.list_aux(parsed))
                if len(node.inputs) != expected:
                    names = node.opdef().list_arguments(parsed) + node.opdef().list_aux(parsed)
                    raise MXNetError(
                        f"operator {node.op} '{node.name}' takes {expected} inputs "
                        f"({', '.join(names)}), got {len(node.inputs)}")
                ids[id(node)] = graph.add_node(node.op, node.name,
                                               [(ids[id(s)], i) for s, i in node.inputs],
                                               parsed, node.attrs)
        graph.heads = [(ids[id(n)], i) for n, i in self._outputs]
        graph.meta["arg_names"] = [n.name for n in args]
        graph.meta["aux_names"] = [n.name for n in aux]
        graph.meta["output_names"] = self.list_outputs()
        counts = collections.Counter(n.name for n in args + aux)
        dup = sorted(x for x, c in counts.items() if c > 1)
        if dup and distinct_names:
            raise MXNetError(f"duplicate argument names {dup}: each variable in a symbol needs "
                             f"a distinct name")
        return graph

    def infer_shape(self, *args, **kwargs):
        """Infer argument, output and auxiliary shapes from some known ones.

        Returns ``(arg_shapes, out_shapes, aux_shapes)`` in list order, or
        ``(None, None, None)`` when the given shapes do not determine them all.
        """
        return _inference.infer_shape(self, args, kwargs, partial=False)

    def infer_shape_partial(self, *args, **kwargs):
        """As :meth:`infer_shape`, with ``()`` for shapes still unknown."""
        return _inference.infer_shape(self, args, kwargs, partial=True)

    def infer_type(self, *args, **kwargs):
        """Infer dtypes with mxnet's rules from the dtypes of some arguments.

        Parameters
        ----------
        *args, **kwargs : numpy, torch or str dtypes
            Positionally in ``list_arguments()`` order (``None`` for unknown), or by name.

        Returns
        -------
        arg_types, out_types, aux_types : lists of numpy scalar types
            In ``list_arguments()``, ``list_outputs()`` and
            ``list_auxiliary_states()`` order (bfloat16 as mxnet's
            ``np.dtype([('bfloat16', np.uint16)])``), or ``(None, None, None)``
            when the given dtypes do not decide them all.

        Raises
        ------
        MXNetError
            Where an operator's inputs must share a dtype and do not.
        """
        return _inference.infer_type(self, args, kwargs, partial=False)

    def infer_type_partial(self, *args, **kwargs):
        """As :meth:`infer_type`, with ``None`` for each dtype still unknown instead of
        ``(None, None, None)``."""
        return _inference.infer_type(self, args, kwargs, partial=True)

    @classmethod
    def from_graph(cls, graph: Graph) -> "Symbol":
        """The symbol of an analysis graph (after passes such as ``simplify``).

        A head that repeats an earlier head's value reads it through a ``_copy``, as
        mxnet's executor keeps every output a value of its own.
        """
        nodes = {}
        for n in graph.topo():
            d = graph.node(n)
            ins = [(nodes[src], i) for src, i in graph.inputs(n)]
            nodes[n] = _Node(d["op"], d["name"], d["raw"], ins)
        outputs, seen = [], set()
        for k, (n, i) in enumerate(graph.heads):
            entry = (nodes[n], i)
            if (n, i) in seen:
                entry = (_Node("_copy", f"{nodes[n].name}_copy{k}", {}, [entry]), 0)
            seen.add((n, i))
            outputs.append(entry)
        return cls(outputs)

    # -- serialisation ------------------------------------------------------------------
    def tojson(self, remove_amp_cast=True, indent=2):
        """mxnet's symbol JSON (nodes, arg_nodes, node_row_ptr, heads, attrs).

        ``remove_amp_cast`` (mxnet's default): an input read through ``amp_cast`` /
        ``amp_multicast`` reads the value before the cast, so a converted model saves as
        its float32 graph (the heads stay as they are, as in mxnet). ``indent``: as
        mxnet writes it (2); None writes one line, several times faster (the kernel
        cache's copy of a compiled symbol)."""
        doc = _json_doc(self._outputs, self._effects, remove_amp_cast,
                       None if remove_amp_cast else self._nodes())
        return json.dumps(doc) if indent is None else dumps_indented(doc, indent=indent)

    def save(self, fname, remove_amp_cast=True):
        """Write :meth:`tojson` to ``fname`` atomically."""
        from .artifacts.atomic import atomic_write_text
        atomic_write_text(fname, self.tojson(remove_amp_cast))

    # -- execution ------------------------------------------------------------------------
    def simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None,
                    group2ctx=None, shared_arg_names=None, shared_exec=None,
                    shared_buffer=None, **kwargs):
        """Allocate arrays for the given input shapes and bind an :class:`Executor`.

        A keyword whose value is not a shape (a tuple or list) is ignored, as mxnet
        ignores it (its own tests pass an operator's ``axis=1`` along)."""
        simple_bind = _runtime("simple_bind")["simple_bind"]
        shapes = {k: v for k, v in kwargs.items() if isinstance(v, (tuple, list))}
        return simple_bind(self, ctx, grad_req=grad_req, type_dict=type_dict,
                           shared_exec=shared_exec, shared_buffer=shared_buffer,
                           shapes=shapes, group2ctx=group2ctx)

    def bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None,
             group2ctx=None, shared_exec=None):
        """Bind given arrays (list in ``list_arguments`` order or dict by name)."""
        bind = _runtime("bind")["bind"]
        return bind(self, ctx, args, args_grad=args_grad, grad_req=grad_req,
                    aux_states=aux_states, shared_exec=shared_exec, group2ctx=group2ctx)

    def eval(self, ctx=None, **kwargs):
        """Bind the given inputs, run forward and return the outputs."""
        exe = self.bind(ctx or _runtime("eval")["current_context"](), kwargs, grad_req="null")
        return exe.forward()

    # mxnet symbols also expose operators as methods (x.reshape(...)).
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        # mxnet's fluent methods call the function of their own name (``x.flip()`` is
        # ``op.flip``: auto-named ``flip0``, not ``reverse0``)
        fn = name if name in _METHOD_OPS and name in globals() else _METHOD_OPS.get(name)
        if fn is None or fn not in globals():
            raise AttributeError(f"'Symbol' object has no attribute '{name}'")
        return lambda *args, **kwargs: globals()[fn](self, *args, **kwargs)


_METHOD_OPS = {"reshape": "Reshape", "flatten": "Flatten", "transpose": "transpose",
               "expand_dims": "expand_dims", "sum": "sum", "mean": "mean", "max": "max",
               "min": "min", "exp": "exp", "log": "log", "sqrt": "sqrt", "square": "square",
               "abs": "abs", "sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu",
               "swapaxes": "SwapAxis", "split": "SliceChannel", "slice_axis": "slice_axis",
               "clip": "clip", "softmax": "softmax", "log_softmax": "log_softmax",
               "zeros_like": "zeros_like", "ones_like": "ones_like", "dot": "dot",
               # shape operators (compiler/ops/shape_more.py, shape_like.py)
               "slice": "slice", "squeeze": "squeeze", "tile": "tile", "repeat": "repeat",
               "flip": "reverse", "reshape_like": "reshape_like", "slice_like": "slice_like",
               "broadcast_like": "broadcast_like", "depth_to_space": "depth_to_space",
               "space_to_depth": "space_to_depth", "split_v2": "split_v2", "cast": "Cast",
               "astype": "Cast"}
# the rest of mxnet 1.9.1's fluent methods (those of its ``Symbol``): the
# operator of the same name
_METHOD_OPS.update((name, name) for name in """
    broadcast_axes pad take one_hot pick sort topk argsort argmax argmax_channel argmin
    sign shape_array size_array broadcast_to diag nansum prod nanprod norm round rint fix
    floor ceil trunc sin cos tan arcsin arccos arctan degrees radians sinh cosh arcsinh
    arccosh arctanh expm1 log10 log2 log1p rsqrt cbrt rcbrt reciprocal softmin
    """.split() if name not in _METHOD_OPS)

_HINTS = {"elemwise_add": "_plus", "elemwise_sub": "_minus", "elemwise_mul": "_mul",
          "elemwise_div": "_div", "_power": "_power", "_plus_scalar": "_plusscalar",
          "_minus_scalar": "_minusscalar", "_rminus_scalar": "_rminusscalar",
          "_mul_scalar": "_mulscalar", "_div_scalar": "_divscalar",
          "_rdiv_scalar": "_rdivscalar", "_power_scalar": "_powerscalar",
          "_rpower_scalar": "_rpowerscalar", "_mod": "_mod", "_mod_scalar": "_modscalar",
          "_rmod_scalar": "_rmodscalar"}


def _normalize_attr(key, value):
    if key == "dtype" and value is not None and not isinstance(value, str):
        try:
            import torch
            if isinstance(value, torch.dtype):
                return str(value).replace("torch.", "")
        except ImportError:  # pragma: no cover
            pass
        return np.dtype(value).name
    return _raw(value)


# mxnet's hidden keys: given as ``lr_mult`` they are stored as ``__lr_mult__``, and
# ``attr_dict`` lists the stored ``__lr_mult__`` again as ``lr_mult`` (its C API does so).
_HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")
_REPLACED_HIDDEN_KEYS = frozenset(f"__{k}__" for k in _HIDDEN_KEYS)


def _hide_key(key, value, op_name, name):
    """``lr_mult`` -> ``__lr_mult__``; ``weight_lr_mult`` is refused as in mxnet 1.9.1."""
    for hidden in _HIDDEN_KEYS:
        pos = key.rfind(hidden)
        if pos == 0:
            return f"__{key}__"
        if pos > 0 and pos + len(hidden) == len(key):
            raise MXNetError(
                f"operator {op_name} '{name}': setting variable attributes with {key} is "
                f"deprecated. please instead use\nw = Variable({hidden}={value})\n"
                f"sym = YourSymbolName({key[:pos - 1]}=w)")
    return key


def _with_plain_hidden_keys(attrs) -> dict:
    """``attrs`` with each stored hidden key listed again without its underscores
    (``__lr_mult__`` and ``lr_mult``), as mxnet's ``list_attr`` and ``attr_dict`` list
    them."""
    out = {}
    for key, value in attrs.items():
        out[key] = value
        if key in _REPLACED_HIDDEN_KEYS:
            out[key[2:-2]] = value
    return out


def _explicit_nones(opdef, kwargs) -> dict:
    """``{key: "None"}`` for attributes given as None whose default is not None.

    mxnet passes an explicit None on as the string "None" (``sort(x, axis=None)``
    sorts the flattened data, where the default axis is -1); dropping it would
    silently mean the default. Attributes that cannot be None are left out, as before.
    """
    from .ops.registry import REQUIRED
    out = {}
    for k, v in kwargs.items():
        spec = opdef._attr_index.get(k)
        if v is not None or spec is None or spec.default is None or spec.default is REQUIRED:
            continue
        try:
            if spec.parse("None") is None:
                out[k] = "None"
        except (ValueError, TypeError):
            pass
    return out


def _create(op_name, args, kwargs, name, attr=None, hint=None):
    """Create one operator node, auto-creating missing argument variables.

    Missing inputs become variables ``{name}_{input}`` carrying a copy of the
    node's attributes (as mxnet's compose does, so ``attr={'__lr_mult__': ...}``
    reaches the operator's weight and bias).
    """
    opdef = get_op(op_name)
    if "out" in kwargs and (callable(opdef.arguments) or "out" not in opdef.arguments):
        # mxnet's symbol functions take the NDArray functions' ``out=`` and drop it
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    sym_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    attrs = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol) and v is not None}
    attrs.update(_explicit_nones(opdef, kwargs))
    if opdef.variadic and opdef.variadic not in attrs:
        attrs[opdef.variadic] = len(args)
    name = _name.current().get(name, hint or op_name.lower())
    raw = {_hide_key(k, v, op_name, name): _normalize_attr(k, v) for k, v in attrs.items()}
    parsed = opdef.parse_attrs(raw, name)
    arg_names = opdef.list_arguments(parsed)
    # positional symbols fill mxnet's inputs in order, auxiliary states included
    positional = opdef.list_inputs(parsed)
    aux_names = opdef.list_aux(parsed)
    if len(args) > len(positional):
        raise MXNetError(f"operator {op_name} '{name}' takes {len(positional)} inputs "
                         f"({', '.join(positional)}), got {len(args)} positional symbols")
    hidden = {_hide_key(k, v, op_name, name): v
              for k, v in _attribute.current().get(attr).items()}
    node_attrs = {**hidden, **raw}
    given = dict(zip(positional, args))
    if not positional:
        # mxnet's compose drops the symbols given to an operator without inputs
        # (``sym.random.randn(data=x)`` is a sampler of unknown shape, as there)
        sym_kwargs = {}
    for k, v in sym_kwargs.items():
        if k not in arg_names and k not in aux_names:
            raise MXNetError(f"operator {op_name} '{name}' has no input '{k}'; inputs are "
                             f"{arg_names + aux_names}")
        if k in given:
            raise MXNetError(f"operator {op_name} '{name}': input '{k}' given twice")
        given[k] = v
    inputs = []
    var_defaults = opdef.var_attrs(parsed) if opdef.var_attrs else {}
    for arg in list(arg_names) + aux_names:
        sym = given.get(arg)
        if sym is None:
            sym = Symbol([(_Node("null", f"{name}_{arg}", node_attrs), 0)])
        if not isinstance(sym, Symbol):
            raise MXNetError(f"operator {op_name} '{name}': input '{arg}' must be a Symbol, "
                             f"got {type(sym).__name__}")
        entry = sym._single_entry(f"input '{arg}' of {op_name} '{name}'")
        if entry[0].op == "null":
            for key, value in var_defaults.get(arg, {}).items():
                if key not in entry[0].attrs:
                    entry[0].attrs[key] = value
                    _ATTR_EDITS[0] += 1     # a variable other symbols hold changed
        inputs.append(entry)
    node = _Node(op_name, name, node_attrs, inputs)
    count = opdef.visible_outputs(parsed)
    return Symbol([(node, i) for i in range(count)], effects=() if count else [node])


_STORAGE_TYPE_IDS = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}


def Variable(name, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None,
             init=None, stype=None, profiler_scope=None, **kwargs):
    """Create a variable (an argument or auxiliary state) named ``name``.

    Parameters
    ----------
    name : str
    attr : dict of str to str, optional
    shape : tuple, optional
        Hint for shape inference (``__shape__``).
    lr_mult, wd_mult : float, optional
        Learning-rate and weight-decay multipliers read by optimizers.
    dtype : str or numpy dtype, optional
    init : Initializer or str, optional
        Per-variable initializer (``__init__``).
    """
    if not isinstance(name, str):
        raise TypeError("Variable name must be a string")
    # as mxnet's set_attr stores them: ``force_mirroring`` as ``__force_mirroring__``
    attrs = {_hide_key(k, v, "Variable", name): v
             for k, v in _attribute.current().get(attr).items()}
    if shape is not None:
        # mxnet also takes a bare int (``shape=(1)`` is the int 1): one dim
        attrs["__shape__"] = _raw((int(shape),) if isinstance(shape, (int, np.integer))
                                  else tuple(shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = _normalize_attr("dtype", dtype)
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:   # mxnet records the storage type's id: '0', '1' or '2'
        attrs["__storage_type__"] = str(_STORAGE_TYPE_IDS[stype])
    for k, v in kwargs.items():
        if k.startswith("__") and k.endswith("__"):
            attrs[k] = str(v)
        else:
            raise MXNetError(f"Variable '{name}': unknown argument '{k}'; extra attributes must "
                             f"be named __key__")
    return Symbol([(_Node("null", name, attrs), 0)])


var = Variable


def Group(symbols):
    """One symbol whose outputs are the outputs of ``symbols`` in order."""
    entries = []
    for s in symbols:
        if not isinstance(s, Symbol):
            raise MXNetError("Group takes a list of Symbols")
        entries.extend(s._outputs)
    return Symbol(entries, [n for s in symbols for n in s._effects])


def maximum(left, right):
    """Elementwise maximum of two symbols (``_maximum``) or of a symbol and a
    number (``_maximum_scalar``), as ``mxnet.symbol.maximum``."""
    return _max_min(left, right, "_maximum", "_maximum_scalar", max)


def minimum(left, right):
    """Elementwise minimum of two symbols (``_minimum``) or of a symbol and a
    number (``_minimum_scalar``), as ``mxnet.symbol.minimum``."""
    return _max_min(left, right, "_minimum", "_minimum_scalar", min)


def power(base, exp):
    """``base ** exp`` elementwise, for Symbols or numbers on either side, as
    ``mxnet.symbol.power``: two Symbols of one shape (``_power``; ``broadcast_power``
    broadcasts), a Symbol and a number (``_power_scalar`` / ``_rpower_scalar``), or two
    numbers (their power, a number)."""
    return _symbol_or_number(base, exp, "_power", "_power_scalar", "_rpower_scalar",
                             lambda a, b: a ** b)


pow = power  # noqa: A001  (mxnet.symbol.pow is power)


def hypot(left, right):
    """``sqrt(left**2 + right**2)`` elementwise, for Symbols or numbers on either side, as
    ``mxnet.symbol.hypot``: two Symbols of one shape (``_hypot``; ``broadcast_hypot``
    broadcasts), a Symbol and a number (``_hypot_scalar``), or two numbers."""
    return _symbol_or_number(left, right, "_hypot", "_hypot_scalar", "_hypot_scalar",
                             lambda a, b: float(np.hypot(a, b)))


def _max_min(left, right, op, scalar_op, fold):
    return _symbol_or_number(left, right, op, scalar_op, scalar_op, fold)


def _symbol_or_number(left, right, op, scalar_op, rscalar_op, fold):
    """``op`` of two Symbols, ``scalar_op`` of a Symbol and a number, ``rscalar_op`` of a
    number and a Symbol, ``fold`` of two numbers."""
    number = (int, float, np.number)
    if isinstance(left, Symbol) and isinstance(right, Symbol):
        return _create(op, [left, right], {}, None)
    if isinstance(left, Symbol) and isinstance(right, number):
        return _create(scalar_op, [left], {"scalar": float(right)}, None,
                       hint=scalar_op.replace("_scalar", "scalar"))
    if isinstance(left, number) and isinstance(right, Symbol):
        return _create(rscalar_op, [right], {"scalar": float(left)}, None,
                       hint=rscalar_op.replace("_scalar", "scalar"))
    if isinstance(left, number) and isinstance(right, number):
        return fold(left, right)
    raise MXNetError(f"{op.lstrip('_')}: operands must be Symbols or numbers, got "
                     f"{type(left).__name__} and {type(right).__name__}")


def load_json(json_str):
    """Load a symbol from mxnet's JSON text. Unknown operators or attributes raise
    (``compiler/symbol_json.py``)."""
    return Symbol(*_entries_from_json(json_str))


def load(fname):
    """Load a symbol from a ``-symbol.json`` file.

    Parameters
    ----------
    fname : str or os.PathLike
        The file mxnet's ``Symbol.save`` (or this project's) wrote.

    Returns
    -------
    Symbol

    Raises
    ------
    MXNetError
        When the file cannot be read, is not UTF-8 text, or does not hold a valid
        symbol graph; the message names the file, as mxnet's does.
    """
    return Symbol(*_entries_from_file(fname))


def _named_inputs(opdef, kwargs):
    """The operator's input names for these attributes (``[]`` for a variadic one, or
    where the attributes do not parse: the call's own checks then say why)."""
    if not callable(opdef.arguments):
        return list(opdef.arguments)
    if opdef.variadic:
        return []
    raw = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol)}
    try:
        return opdef.list_arguments(opdef.parse_attrs(raw, opdef.name))
    except Exception:   # noqa: BLE001  (any parse error is reported by _create)
        return []


def _positional_inputs(op_name, lead, inputs, kwargs):
    """The Symbols given by position before the first None; those after it move into
    ``kwargs`` under their input's name."""
    if None not in lead:
        return lead
    first = lead.index(None)
    for k in range(first, len(lead)):
        if lead[k] is not None:
            if k >= len(inputs):
                raise MXNetError(f"{op_name}: input {k} is a Symbol, but with these "
                                 f"attributes the operator takes only {inputs}")
            if inputs[k] in kwargs:
                raise MXNetError(f"{op_name}: input '{inputs[k]}' given twice")
            kwargs[inputs[k]] = lead[k]
    return lead[:first]


def _make_op_function(op_name, hint=None):
    opdef = REGISTRY[op_name]

    def fn(*args, **kwargs):
        name = kwargs.pop("name", None)
        attr = kwargs.pop("attr", None)
        inputs = _named_inputs(opdef, kwargs)
        nsym = 0
        # a positional None is an input left out, as in mxnet's generated signatures
        # (``Convolution(x, w, None, no_bias=True)``: an operator whose inputs depend
        # on its attributes takes Nones for the optional ones it then lacks)
        optional = callable(opdef.arguments) and not opdef.variadic
        while nsym < len(args) and (isinstance(args[nsym], Symbol) or (
                args[nsym] is None and (nsym < len(inputs) or optional))):
            nsym += 1
        syms, rest = _positional_inputs(op_name, list(args[:nsym]), inputs, kwargs), args[nsym:]
        if rest:
            # mxnet's generated signatures: the inputs, then the attributes in order
            # (``x.reshape((0, -1))``, ``sum(x, 1)``).
            slots = inputs[nsym:] + [a.name for a in opdef.attrs]
            if opdef.variadic or callable(opdef.arguments) or len(rest) > len(slots) or \
                    any(isinstance(a, Symbol) for a in rest) or \
                    any(k in inputs for k in slots[:len(rest)]):
                raise MXNetError(f"{op_name}: positional arguments must be Symbols; pass "
                                 f"attributes by keyword")
            for k, v in zip(slots, rest):
                if k in kwargs:
                    raise MXNetError(f"{op_name}: attribute '{k}' given twice")
                kwargs[k] = v
        return _create(op_name, syms, kwargs, name, attr, hint=hint)
    fn.__name__ = op_name
    fn.__doc__ = opdef.doc or f"The mxnet operator ``{op_name}``."
    return fn


def split_v2(ary, indices_or_sections, axis=0, squeeze_axis=False):
    """Split ``ary`` along ``axis`` (``mxnet.symbol.split_v2``).

    Parameters
    ----------
    ary : Symbol
    indices_or_sections : int or tuple of int
        An int N: N parts whose sizes differ by at most one, the larger first. A tuple:
        the boundaries, ``(2, 3)`` gives ``ary[:2]``, ``ary[2:3]``, ``ary[3:]``.
    axis : int, optional
        The axis to split (0).
    squeeze_axis : bool, optional
        Drop ``axis`` from every part (each must then have size 1 there).

    Returns
    -------
    Symbol
        One output per part (operator ``_split_v2``).
    """
    indices, sections = [], 0
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
    elif isinstance(indices_or_sections, tuple):
        indices = [0] + list(indices_or_sections)
    else:
        raise ValueError("indices_or_sections must either int or tuple of ints")
    return _create("_split_v2", [ary], {"indices": tuple(indices), "axis": axis,
                                        "squeeze_axis": squeeze_axis, "sections": sections},
                   None)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=False, name=None, dtype=None):
    """Evenly spaced values in ``[start, stop)`` (``mxnet.symbol.arange``, operator
    ``_arange``); ``stop=None`` gives ``[0, start)``. Each value is repeated ``repeat``
    times; ``dtype`` None is float32."""
    # mxnet writes an absent stop as "None" into the symbol's attributes
    return _create("_arange", [], {"start": start, "stop": "None" if stop is None else stop,
                                   "step": step,
                                   "repeat": repeat, "infer_range": infer_range,
                                   "dtype": dtype or "float32"}, name)


def linspace(start, stop, num, endpoint=True, name=None, dtype=None):
    """``num`` evenly spaced values from ``start`` to ``stop`` (``mxnet.symbol.linspace``,
    operator ``_linspace``); ``endpoint=False`` leaves ``stop`` out."""
    return _create("_linspace", [], {"start": start, "stop": stop, "num": num,
                                     "endpoint": endpoint, "dtype": dtype or "float32"}, name)


def eye(N, M=0, k=0, dtype=None, **kwargs):
    """An ``N x M`` matrix (``M=0``: ``N x N``) with ones on diagonal ``k``
    (``mxnet.symbol.eye``, operator ``_eye``)."""
    name = kwargs.pop("name", None)
    return _create("_eye", [], {"N": N, "M": M, "k": k, "dtype": dtype or "float32",
                                **kwargs}, name)


def full(shape, val, dtype=None, **kwargs):
    """A ``shape`` array of ``val`` (``mxnet.symbol.full``, operator ``_full``)."""
    name = kwargs.pop("name", None)
    return _create("_full", [], {"shape": shape, "value": float(val), "dtype": dtype or "float32",
                                 **kwargs}, name)


def histogram(a, bins=10, range=None, **kwargs):
    """The histogram of the flattened ``a`` (``mxnet.symbol.histogram``).

    Parameters
    ----------
    a : Symbol
    bins : int or Symbol, optional
        An int: that many equal bins over ``range`` (10). A Symbol: the bin edges,
        ascending, the last one included in the last bin.
    range : (float, float)
        The span of the equal bins; required with an int ``bins`` (symbols cannot
        read the data's extremes).

    Returns
    -------
    Symbol
        Two outputs: the counts (int64) and the edges (operator ``_histogram``).
    """
    name = kwargs.pop("name", None)
    if isinstance(bins, Symbol):
        return _create("_histogram", [a, bins], kwargs, name)
    if isinstance(bins, int):
        if range is None:
            raise ValueError("null range is not supported in symbol mode")
        # as mxnet's str(tuple): the shape formatting of tuples would make them ints
        return _create("_histogram", [a], dict(kwargs, bin_cnt=bins, range=str(tuple(range))),
                       name)
    raise ValueError("bins argument should be either an integer or an NDArray")


def _export_ops():
    module = sys.modules[__name__]
    for op_name in REGISTRY:
        if not hasattr(module, op_name):
            setattr(module, op_name, _make_op_function(op_name))


_export_ops()

random = _random_namespace(Symbol, _make_op_function)      # mx.sym.random


def _operator_namespace(namespace):
    import types
    members = namespace_members(namespace)
    # mxnet names a namespace operator's node after its public name (``gemm20``,
    # ``bilinearresize2d0``), not the registry's (``_linalg_gemm20``)
    ns = types.SimpleNamespace(**{public: _make_op_function(op_name, hint=public.lower())
                                  for public, op_name in members.items()})
    ns.__doc__ = f"``mx.sym.{namespace}``: the registry's ``_{namespace}_*`` operators."
    return ns


contrib = _operator_namespace("contrib")      # mx.sym.contrib
contrib.uniform = random.uniform    # mxnet's contrib module imports it from random
_control_flow.install(Symbol=Symbol, Group=Group, Variable=Variable, create=_create)
contrib.foreach, contrib.while_loop, contrib.cond = (
    _control_flow.foreach, _control_flow.while_loop, _control_flow.cond)


def _scaled_update(op_name, scale_slot):
    """mxnet's ``contrib.adamw_update`` / ``contrib.mp_adamw_update``
    (its Python wrappers in ``mx.sym.contrib``): the registry's ``_adamw_update`` ..., with a
    number given as ``rescale_grad`` made a (1,) constant."""
    make = _make_op_function(op_name)

    def update(*args, **kwargs):
        args = list(args)
        if len(args) > scale_slot and not isinstance(args[scale_slot], Symbol):
            args[scale_slot] = full(shape=(1,), val=args[scale_slot])
        scale = kwargs.get("rescale_grad")
        if scale is not None and not isinstance(scale, Symbol):
            kwargs["rescale_grad"] = full(shape=(1,), val=scale)
        return make(*args, **kwargs)
    update.__name__ = op_name.lstrip("_")
    update.__doc__ = make.__doc__
    return update


contrib.adamw_update = _scaled_update("_adamw_update", 4)
contrib.mp_adamw_update = _scaled_update("_mp_adamw_update", 5)
contrib.rand_zipfian = _make_rand_zipfian(Symbol, _make_op_function, random.uniform)
linalg = _operator_namespace("linalg")        # mx.sym.linalg
image = _operator_namespace("image")          # mx.sym.image


def _internal_namespace():
    """``mx.sym._internal``: every registry operator whose name starts with ``_``
    (``_internal._square_sum``, ``_internal._plus_scalar`` ...), as mxnet's."""
    import types
    ns = types.SimpleNamespace(**{op_name: _make_op_function(op_name)
                                  for op_name in REGISTRY if op_name.startswith("_")})
    ns.__doc__ = "``mx.sym._internal``: the registry's ``_``-prefixed operators."
    return ns


_internal = _internal_namespace()

# mxnet 1.9.1's ``mx.sym.sparse``: the operators it registers with a ``_sparse_`` alias
# (``MXNET_ADD_SPARSE_OP_ALIAS`` and the unary / regression macros that use it), as its
# ``dir(mx.sym.sparse)`` lists them; each makes the operator's own node (``dot0``).
# ``retain`` and ``adagrad_update`` (mxnet's ``_sparse_retain`` / ``_sparse_adagrad_update``)
# have no registry entry yet and are left out.
def _sparse_namespace():
    import types
    from .ops.registry import SPARSE_NAMESPACE
    ns = types.SimpleNamespace(**{public: _make_op_function(name) for public, name in
                                  SPARSE_NAMESPACE.items() if name in REGISTRY})
    ns.__doc__ = "``mx.sym.sparse``: the operators mxnet 1.9.1 also names ``_sparse_X``."
    return ns


sparse = _sparse_namespace()                  # mx.sym.sparse
