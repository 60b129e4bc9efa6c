"""AMP's graph conversion: insert ``amp_cast`` / ``amp_multicast`` as mxnet 1.9.1's
``ReducePrecision`` pass (``MXReducePrecisionSymbol``) does.

Nodes are visited in mxnet's DFS post-order and copied; each copy's inputs are
rewired by the list its operator is on (``compiler/passes/amp_lists.py``, or the lists
given):

* ``fp32`` (or an excluded name): inputs that are operator outputs get
  ``amp_cast(float32)``; variables are taken as float32 already.
* ``lp16`` (``target_dtype_ops``): every input gets ``amp_cast(target)``, except
  auxiliary (mutable) inputs, inputs the operator's type rule wants in another
  type (BatchNorm's gamma), and, with ``cast_optional_params``, parameters
  (variables that are not data): those are converted offline by ``convert_model``.
* ``widest_type_cast``: if the types of all inputs are known (each input is a
  known float32 or target value), ``amp_cast`` to the widest of them; otherwise one
  ``amp_multicast`` over all inputs.
* ``conditional_fp32`` whose attribute has one of the listed values: every input
  not already float32 (variables included) gets ``amp_cast(float32)``.
* any other operator is copied; if its first input's type is known, its type rule
  says its outputs' types.

A value is cast at most once per target type (the cast node is shared), every
graph output that is not a known float32 value gets ``amp_cast(float32)``, and cast
nodes are named ``<producer>[_<output>]_amp_cast_<dtype>`` and
``<first producer>[_<output>]_amp_multicast`` (an output is named by mxnet's output
name for operators that have them, ``compiler.passes.amp_lists.NAMED_OUTPUT_OPS``, by its
index otherwise). Then, as mxnet's C API does, every model parameter (an input not
in ``data_names``) gets a ``__dtype__`` attribute: its type inferred with the data
as float32, which ``convert_model`` casts the parameter arrays to.
"""
from __future__ import annotations

from . import amp_lists
from .. import symbol as _symbol_module
from ..ir.dtypes import MXNET_TYPE_FLAG
from ..errors import MXNetError
from ..symbol import Symbol
from ..symbol_node import Node, topo



def reduce_precision(sym, target_dtype="float16", target_dtype_ops=None, fp32_ops=None,
                     conditional_fp32_ops=None, excluded_sym_names=None, data_names=None,
                     cast_optional_params=False) -> Symbol:
    """The mixed-precision version of the float32 symbol ``sym`` (mxnet's ``convert_symbol``).

    Parameters
    ----------
    sym : Symbol
    target_dtype : {'float16', 'bfloat16'}
    target_dtype_ops, fp32_ops : list of str, optional
        Operators run in ``target_dtype`` / in float32; default: the lists of
        ``compiler.passes.amp_lists`` for ``target_dtype``.
    conditional_fp32_ops : list of (str, str, list of str), optional
        ``(operator, attribute, values)``: float32 where the attribute has one of the values.
    excluded_sym_names : list of str, optional
        Nodes (by name) left in float32.
    data_names : list of str, optional
        The data inputs; default: every input without a ``__dtype__`` attribute.
    cast_optional_params : bool
        Leave parameters feeding low-precision operators uncast (they are to be
        stored in ``target_dtype``).

    Returns
    -------
    Symbol
        A new symbol; ``sym`` is not changed.

    Raises
    ------
    MXNetError
        For a target dtype other than float16 / bfloat16, an operator on two lists,
        or an operator on none of the default lists of ``target_dtype``.
    """
    if not isinstance(sym, Symbol):
        raise MXNetError(f"convert_symbol: the first argument must be a Symbol, got "
                         f"{type(sym).__name__}")
    lists = amp_lists.op_lists(_target_name(target_dtype))
    rules = _rules(lists, target_dtype_ops, fp32_ops, conditional_fp32_ops, excluded_sym_names)
    rules["target"] = _target_name(target_dtype)
    inputs = sym.list_inputs()
    if data_names is None:
        attrs = sym.attr_dict()
        data_names = [n for n in inputs if "__dtype__" not in attrs.get(n, {})]
    rules["data"] = set(data_names)
    rules["cast_optional"] = bool(cast_optional_params)
    out = _Rewrite(rules).run(sym)
    return _mark_param_dtypes(out, [n for n in inputs if n not in rules["data"]], data_names)


def _target_name(target_dtype) -> str:
    name = str(getattr(target_dtype, "__name__", target_dtype))
    if name not in amp_lists.TARGET_DTYPES:
        raise MXNetError(f"AMP target_dtype must be 'float16' or 'bfloat16', got {target_dtype!r}")
    return name


def _check_list(value, what):
    if not isinstance(value, (list, tuple)):
        raise MXNetError(f"convert_symbol: {what} must be a list, got {type(value).__name__}")
    return list(value)


def _rules(lists, lp16, fp32, conditional, excluded) -> dict:
    lp16 = list(lists["lp16"]) if lp16 is None else _check_list(lp16, "target_dtype_ops")
    fp32 = list(lists["fp32"]) if fp32 is None else _check_list(fp32, "fp32_ops")
    conditional = list(lists["conditional_fp32"]) if conditional is None else \
        _check_list(conditional, "conditional_fp32_ops")
    cond = {}
    for entry in conditional:
        if len(entry) != 3 or not isinstance(entry[0], str) or not isinstance(entry[1], str) \
                or not isinstance(entry[2], (list, tuple)):
            raise MXNetError(f"conditional_fp32_ops: {entry!r} is not (op name, attribute "
                             f"name, list of values)")
        cond.setdefault(entry[0], {}).setdefault(entry[1], []).extend(entry[2])
    for (a, an), (b, bn) in ((("target_dtype_ops", lp16), ("fp32_ops", fp32)),
                             (("target_dtype_ops", lp16), ("conditional_fp32_ops", cond)),
                             (("conditional_fp32_ops", cond), ("fp32_ops", fp32))):
        common = set(an) & set(bn)
        if common:
            raise MXNetError(f"Ops cannot be in two or more lists: {sorted(common)} are in "
                             f"both {a} and {b}")
    known = set(lists["lp16"]) | set(lists["fp32"]) | set(lists["lp16_fp32"]) | \
        {c[0] for c in lists["conditional_fp32"]}
    illegal = (set(lp16) | set(fp32) | set(cond)) - known
    if illegal:
        raise MXNetError(f"ops {sorted(illegal)} are on none of AMP's lists (list_lp16_ops, "
                         f"list_fp32_ops, list_lp16_fp32_ops, list_conditional_fp32_ops): "
                         f"choose ops from them")
    excluded = [] if excluded is None else _check_list(excluded, "excluded_sym_names")
    return {"lp16": set(lp16), "fp32": set(fp32), "cond": cond,
            "widest": set(lists["widest_type_cast"]), "excluded": set(excluded)}


def _suffix(node, index) -> str:
    """How a cast names output ``index`` of ``node``: mxnet's ``GetSuffix``."""
    if node.op == "null":
        return ""
    opname = node.op
    if opname in amp_lists.OUTPUT_NAMES:
        return "_" + amp_lists.OUTPUT_NAMES[opname][index]
    if opname in amp_lists.NAMED_OUTPUT_OPS or node.opdef().name in amp_lists.NAMED_OUTPUT_OPS:
        return "_" + node.opdef().list_outputs(node.parsed())[index]
    return f"_{index}"


class _Rewrite:
    """One run of the pass: the copies, and the values of known type (by original entry)."""

    def __init__(self, rules):
        self.r = rules
        self.mirror = {}          # id(original node) -> copy
        self.fp32 = {}            # (id(node), index) -> entry of float32 type
        self.low = {}             # (id(node), index) -> entry of the target type

    def run(self, sym) -> Symbol:
        for node in topo(sym._outputs):
            self.mirror[id(node)] = self._visit(node)
        heads = []
        for node, i in sym._outputs:
            key = (id(node), i)
            if key not in self.fp32:
                self._cast(node, i, "float32", self.fp32)
            heads.append(self.fp32[key])
        return Symbol(heads)

    # -- helpers ----------------------------------------------------------------------
    def _entry(self, node, i):
        return (self.mirror[id(node)], i)

    def _cast(self, node, i, dtype, table):
        """Cast output ``i`` of original ``node`` to ``dtype``; remember it in ``table``."""
        cast = Node("amp_cast", f"{node.name}{_suffix(node, i)}_amp_cast_{dtype}",
                     {"dtype": dtype}, [self._entry(node, i)])
        table[(id(node), i)] = (cast, 0)
        return (cast, 0)

    def _record(self, node, copy, out_types):
        for i, t in enumerate(out_types):
            if t == self.r["target"]:
                self.low[(id(node), i)] = (copy, i)
            elif t == "float32":
                self.fp32[(id(node), i)] = (copy, i)

    def _infer(self, node, first_type):
        """``node``'s input and output types from its rule, its first input being
        ``first_type`` (mxnet calls FInferType so); None where the rule fails."""
        opdef = node.opdef()
        types = [first_type] + [None] * (len(node.inputs) - 1)
        try:
            expected, outs = opdef.infer_type(node.parsed(), list(types))
        except Exception:   # noqa: BLE001 - mxnet ignores a failing rule here too
            return None, None
        outs = list(outs)
        count = node.num_outputs()
        outs += [outs[-1] if outs else None] * (count - len(outs))
        return list(expected), outs

    def _num_args(self, node):
        return node.num_arguments()

    # -- the visit --------------------------------------------------------------------
    def _visit(self, node):
        copy = Node(node.op, node.name, node.attrs)
        r = self.r
        if node.name in r["excluded"] or (node.op != "null" and node.opdef().name in r["fp32"]
                                          or node.op in r["fp32"]):
            self._record(node, copy, ["float32"] * node.num_outputs())
            copy.inputs = [self._to_fp32(src, i, cast_variables=False)
                           for src, i in node.inputs]
        elif node.op == "null":
            pass
        elif self._on(node, r["lp16"]):
            self._visit_low(node, copy)
        elif self._on(node, r["widest"]):
            self._visit_widest(node, copy)
        elif self._conditional(node):
            self._record(node, copy, ["float32"] * node.num_outputs())
            nargs = self._num_args(node)
            copy.inputs = [self._entry(src, i) if slot >= nargs else
                           self._to_fp32(src, i, cast_variables=True)
                           for slot, (src, i) in enumerate(node.inputs)]
        else:
            self._visit_other(node, copy)
        return copy

    @staticmethod
    def _on(node, names):
        return node.op in names or node.opdef().name in names

    def _to_fp32(self, src, i, cast_variables):
        key = (id(src), i)
        if key in self.fp32:
            return self.fp32[key]
        if src.op == "null" and not cast_variables:
            return self._entry(src, i)
        return self._cast(src, i, "float32", self.fp32)

    def _visit_low(self, node, copy):
        target = self.r["target"]
        expected, outs = self._infer(node, target)
        if outs is not None:
            self._record(node, copy, outs)
        expected = expected or [None] * len(node.inputs)
        nargs = self._num_args(node)
        for slot, (src, i) in enumerate(node.inputs):
            key = (id(src), i)
            param = self.r["cast_optional"] and src.op == "null" and src.name not in self.r["data"]
            if key in self.low:
                copy.inputs.append(self.low[key])
            elif param or slot >= nargs or expected[slot] not in (target, None):
                copy.inputs.append(self._entry(src, i))
                if param:
                    self.low[key] = self._entry(src, i)
            else:
                copy.inputs.append(self._cast(src, i, target, self.low))

    def _visit_widest(self, node, copy):
        if not node.inputs:
            raise MXNetError(f"{node.op} '{node.name}' has no inputs: please check the symbol")
        keys = [(id(src), i) for src, i in node.inputs]
        if any(k not in self.low and k not in self.fp32 for k in keys):
            first, idx = node.inputs[0]
            multi = Node("amp_multicast",
                          f"{first.name}{_suffix(first, idx)}_amp_multicast",
                          {"num_outputs": str(len(keys))},
                          [self._entry(src, i) for src, i in node.inputs])
            copy.inputs = [(multi, j) for j in range(len(keys))]
            return
        wide = any(k in self.fp32 for k in keys)
        dtype, table = ("float32", self.fp32) if wide else (self.r["target"], self.low)
        self._record(node, copy, [dtype] * node.num_outputs())
        for (src, i), k in zip(node.inputs, keys):
            copy.inputs.append(table[k] if k in table else self._cast(src, i, dtype, table))

    def _conditional(self, node) -> bool:
        if node.name in self.r["excluded"]:
            return False
        params = self.r["cond"].get(node.op) or self.r["cond"].get(node.opdef().name)
        if not params:
            return False
        return any(node.attrs.get(attr) in values for attr, values in params.items())

    def _visit_other(self, node, copy):
        copy.inputs = [self._entry(src, i) for src, i in node.inputs]
        if not node.inputs:
            return
        key = (id(node.inputs[0][0]), node.inputs[0][1])
        if key in self.low or key in self.fp32:
            _, outs = self._infer(node, self.r["target"] if key in self.low else "float32")
            if outs is not None:
                self._record(node, copy, outs)


def _mark_param_dtypes(sym, param_names, data_names) -> Symbol:
    """Give each model parameter a ``__dtype__`` (its inferred type, data as float32)."""
    if not param_names:
        return sym
    from .infer_types import infer_types
    try:
        graph = infer_types(sym.to_graph(), {n: "float32" for n in data_names})
        types = {graph.node(n)["name"]: graph.node(n)["dtypes"][0] for n in graph.variables()}
    except MXNetError:
        types = {}
    wanted = set(param_names)
    for node in topo(sym._outputs):
        if node.op == "null" and node.name in wanted:
            node.attrs["__dtype__"] = str(MXNET_TYPE_FLAG.get(types.get(node.name), -1))
    _symbol_module._ATTR_EDITS[0] += 1    # what symbols derived from their nodes is stale
    return sym


def param_dtypes(sym) -> dict:
    """``{variable name: dtype name}`` for the variables of ``sym`` whose ``__dtype__``
    the conversion set (unknown ``-1`` left out): what ``convert_model`` casts to."""
    names = {v: k for k, v in MXNET_TYPE_FLAG.items()}
    out = {}
    for node in topo(sym._outputs):
        flag = node.attrs.get("__dtype__") if node.op == "null" else None
        if flag is not None and flag.lstrip("-").isdigit() and int(flag) in names:
            out[node.name] = names[int(flag)]
    return out
