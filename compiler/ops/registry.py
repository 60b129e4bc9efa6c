"""The operator registry: one :class:`OpDef` per operator holds all of its rules.

An entry says how to parse the operator's attributes, which inputs, auxiliary
states and outputs it has, how shapes and dtypes flow through it, how to
compute it in torch (the oracle and the op-by-op backend), how to
differentiate it (as graph ops, through a :class:`~compiler.frontend.graph.Builder`)
and how to lower it (see ``Lowering`` kinds below). Adding an operator means
adding one entry to the family file under ``compiler/ops/`` and a row to the
op test table.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

from ..errors import MXNetError

REQUIRED = object()


# ---------------------------------------------------------------------------
# Attribute parsing. mxnet keeps every attribute as a string (str(value) of
# what the user passed); we keep the strings for JSON and parse on use.
# Parsing never evaluates code: literals only.

def _literal(text: str):
    if len(text) > 10000:
        raise ValueError(f"not a literal: {len(text)} characters is too long")
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError(f"not a literal: {text[:80]!r}") from None


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Counts that size Python lists (Concat's num_args, SliceChannel's num_outputs,
# RNN's num_layers): checked when parsed, before any list is built.
MAX_COUNT = 1 << 16


def parse_int(v) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        out = v
    else:
        s = str(v).strip()
        if s.lower() in ("none",):
            raise ValueError("None is not an int")
        f = float(s)
        if not math.isfinite(f) or f != int(f):
            raise ValueError(f"not an integer: {str(v)[:40]!r}")
        out = int(f)
    if not INT64_MIN <= out <= INT64_MAX:
        raise ValueError("integer out of the int64 range")
    return out


def parse_positive_int(v) -> int:
    """An integer of at least 1 (a kernel size, a stride, a group count)."""
    n = parse_int(v)
    if n < 1:
        raise ValueError(f"must be at least 1, got {n}")
    return n


def parse_nonneg_int(v) -> int:
    """An integer of at least 0 (a padding, a workspace size)."""
    n = parse_int(v)
    if n < 0:
        raise ValueError(f"must be at least 0, got {n}")
    return n


def parse_dtype(v) -> str:
    """A ``dtype`` attribute: ``'float16'``, ``np.float16`` (as its repr), a torch dtype ...,
    one of the dtypes kernels are generated for (``compiler/ir/dtypes.py``)."""
    from ..ir.dtypes import SUPPORTED, dtype_name
    text = str(v)
    if text.startswith("<class 'numpy."):
        text = text[len("<class 'numpy."):-2]
    name = dtype_name(text)
    if name not in SUPPORTED:
        raise ValueError(f"dtype {v!r} is not one symtriton generates kernels for "
                         f"({', '.join(SUPPORTED)})")
    return name


def parse_count(v) -> int:
    """A count that sizes lists of inputs/outputs/layers: at most ``MAX_COUNT``."""
    n = parse_int(v)
    if n > MAX_COUNT:
        raise ValueError(f"{n} is too large (at most {MAX_COUNT})")
    return n


def parse_float(v) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    s = str(v).strip()
    return float(s)  # float() accepts 'inf', 'nan', '1e-3'; never code


def parse_bool(v) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


_SPACED_SHAPE = re.compile(r"^[\[(]\s*-?\d+(\s+-?\d+)*\s*[\])]$")


def parse_shape(v) -> tuple:
    """Parse a shape/tuple attribute such as ``(2, 3)``, ``[2,3]`` or ``2``."""
    if isinstance(v, (tuple, list)):
        return tuple(parse_int(x) for x in v)
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    s = str(v).strip()
    if s in ("()", "[]", ""):
        return ()
    if _SPACED_SHAPE.match(s):      # a numpy array's str, ``[7 6 5 9]``: mxnet reads it too
        return tuple(parse_int(x) for x in s[1:-1].split())
    val = _literal(s)
    if isinstance(val, (int, float)) and not isinstance(val, bool):
        return (parse_int(val),)
    if not isinstance(val, (tuple, list)):
        raise ValueError(f"not a shape: {v!r}")
    return tuple(parse_int(x) for x in val)


def parse_optional_shape(v):
    if v is None or str(v).strip() in ("None", ""):
        return None
    return parse_shape(v)


def parse_optional_int(v):
    if v is None or str(v).strip() == "None":
        return None
    return parse_int(v)


def parse_optional_float(v):
    if v is None or str(v).strip() == "None":
        return None
    return parse_float(v)


def parse_str(v) -> str:
    return str(v)


def choice(*options: str) -> Callable[[Any], str]:
    def parse(v):
        s = str(v)
        if s not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {s!r}")
        return s
    parse.__name__ = f"one of {options}"
    return parse


@dataclass(frozen=True)
class Attr:
    """One attribute: its mxnet name, parser and default (``REQUIRED`` if none)."""
    name: str
    parse: Callable[[Any], Any]
    default: Any = REQUIRED


# ---------------------------------------------------------------------------
# Lowering kinds: how an operator reaches a kernel.

@dataclass(frozen=True)
class Pointwise:
    """An elementwise operator's math: ``expr(attrs, *operands) -> Expr``.

    Written once in the vocabulary of ``compiler/ir/expr.py`` (``ops.exp(x)``,
    ``ops.where(x > 0, dy, 0.0)``, Python's arithmetic on the operands), never as
    a target's source text: operands are expression nodes of the same (broadcast)
    tile and attributes enter as Python numbers; each target emits its own code
    from the result. ``input_dims(attrs, in_shapes, out_shape)`` may say, per
    input, which output dim each input dim lies along (default: numpy's
    right-aligned broadcasting).
    """
    expr: Callable[..., Any]
    input_dims: Optional[Callable[..., Optional[list]]] = None


@dataclass(frozen=True)
class Reduction:
    """A reduction over ``axes(attrs, in_shape)`` with combiner ``kind``."""
    kind: str                     # 'sum' | 'max' | 'min' | 'prod'
    axes: Callable[[dict, tuple], tuple]
    scale: Callable[[dict, tuple], float] = lambda attrs, shape: 1.0


@dataclass(frozen=True)
class MatMul:
    """``out = op(A) @ op(B)``; ``operands(attrs, shapes)`` gives the 2-D/3-D roles."""
    transpose_a: Callable[[dict], bool]
    transpose_b: Callable[[dict], bool]
    batched: bool = False


@dataclass(frozen=True)
class View:
    """A zero-copy view: ``view(attrs, in_shape, out_shape, strides, offset)``.

    Returns ``(strides, offset)`` of the output over the input's buffer, or
    ``None`` when the input's layout does not allow a view (then a copy is made).
    """
    view: Callable[..., Optional[tuple]]
    # Reorders the dims of a value in registers without moving data
    # (transpose, size-1 reshapes); ``dimmap(attrs, in_shape, out_shape)``
    # gives, for each output dim, the input dim it is (or None for a new 1).
    dimmap: Optional[Callable[..., Optional[list]]] = None


@dataclass(frozen=True)
class Decompose:
    """Rewritten into other registered ops before fusion.

    ``build(b, node, is_train)`` gets a :class:`~compiler.frontend.graph.Builder` and a
    :class:`NodeView` (``ograds`` empty) and returns the Refs
    of the node's outputs, followed, for an operator with auxiliary states
    run in training, by the Refs of the new auxiliary values (written back
    into the aux arrays after the step, as BatchNorm's moving statistics).
    """
    build: Callable[..., list]


@dataclass(frozen=True)
class Special:
    """A kernel of its own family: ``kind`` names the tile-IR builder used; ``expr``,
    where the builder asks for one, is the operator's math in the vocabulary of
    ``compiler/ir/expr.py`` (``softmax_ce_grad``: ``expr(attrs, prob, label, *, coord,
    classes)``).

    Kinds: ``concat`` (Concat), ``gather`` (Embedding / take forward: rows of
    input 1 picked by the indices in input 0... see codegen), ``scatter_add``
    (Embedding's weight gradient), ``constant`` (zeros /
    ones / full with a ``value``), ``conv_fwd`` / ``conv_dgrad`` / ``conv_wgrad``
    (Convolution, Deconvolution and their gradients: an implicit GEMM anchoring its own
    group, with a pointwise epilogue, ``compiler/ir/conv.py``), ``pool_fwd`` /
    ``pool_bwd`` / ``roi_fwd`` / ``roi_bwd`` (Pooling, ROIPooling and their gradients: a
    kernel of its own each, ``compiler/ir/pool.py``).
    """
    kind: str
    expr: Optional[Callable[..., Any]] = None


@dataclass(frozen=True)
class Extern:
    """An operator no kernel is generated for: its launch calls ATen (torch) on the
    context's device, inside the Program like any other launch.

    ``run(attrs, inputs) -> list of tensors``: the operator's outputs (all of them,
    in ``outputs`` order) from its input tensors (arguments then auxiliary states,
    strided views of the planned buffers on the executor's device: never written)
    and its parsed attributes. Inputs come in their storage dtype, float16 and
    bfloat16 widened to float32; the launch copies each stored output into its
    planned array (narrowing to the array's dtype). The function must give the same
    result on every call (no random state) and may allocate temporaries.

    An extern node is a launch of its own (fusion never joins it); the Program
    records its operator name and mxnet attribute strings, and the runtime finds
    ``run`` again in the registry by that name (``compiler/ir/extern.py``,
    ``runtime/launcher.py``). Its gradient is graph ops as for any entry, often a
    ``_backward_*`` entry that is itself extern.

    ``script(attrs, shapes) -> (source, grad_mode, partial)``, optional: the same
    computation as TorchScript, for the cpu target's row-split phases run without the
    interpreter lock (``compiler/cpu/script.py``): ``source`` defines ``def
    extern(xs: List[Tensor]) -> List[Tensor]`` for float32 inputs of these shapes,
    ``grad_mode`` says whether it must run with grad mode on (TorchScript cannot switch
    it), ``partial`` the outputs written only in part (a workspace). The phase's check
    compares it with ``run`` on the same arrays before it is used.

    ``held``, optional: the indices of outputs kept by reference, not copied. Such an
    output, where only extern launches read it, gets no planned memory
    (``compiler/passes/plan_memory.py``): the runtime keeps the very tensor ``run``
    returned and hands it to the launches that read it (oneDNN's LSTM workspace, 12 MB
    a layer at the LSTM benchmark's sizes, read only by the gradient's oneDNN call).
    """
    run: Callable[..., list]
    script: Optional[Callable[..., tuple]] = None
    held: tuple = ()


# How each lowering kind runs on each target, for ``symtriton ops`` and the README's
# operator table (the targets' own packages hold the code).
_RUNS_ON = {
    Pointwise: ("fused pointwise kernel", "ATen pointwise calls"),
    Reduction: ("fused row reduction (prologue and epilogue fused)", "ATen reduction"),
    MatMul: ("tl.dot tiles with a fused epilogue", "BLAS mm / addmm / bmm"),
    View: ("view of its input (no kernel; strided loads)", "view of its input (no kernel)"),
    Decompose: ("rewritten into other operators, fused as they are",
                "rewritten into other operators"),
    Extern: ("extern (ATen)", "extern (ATen)"),
}
_SPECIAL_RUNS_ON = {
    "concat": ("fused copy kernel", "torch.cat"),
    "gather": ("gather kernel", "ATen index_select"),
    "scatter_add": ("scatter-add kernel", "ATen index_add_"),
    "constant": ("a constant in a fused pointwise kernel", "a constant in ATen pointwise calls"),
    "conv": ("implicit-GEMM kernel with a fused epilogue", "ATen convolution"),
    "pool": ("window-loop kernel", "ATen pooling"),
    "roi": ("window-loop kernel", "torch index math and masked max per bin"),
    "softmax_ce_grad": ("fused with its softmax", "ATen one-hot scatter"),
    "custom": ("Python CustomOp between compiled segments (no kernel)",
               "Python CustomOp between compiled segments (no kernel)"),
}


def how_it_runs(opdef: "OpDef") -> tuple:
    """``(triton, cpu)``: how the operator's kernels run on the Triton targets
    (``interpret``, ``cuda:<arch>``) and on the ``cpu`` target."""
    low = opdef.lowering
    if isinstance(low, Special):
        family = next((k for k in _SPECIAL_RUNS_ON if low.kind.startswith(k)), None)
        return _SPECIAL_RUNS_ON.get(family, (f"{low.kind} kernel", f"{low.kind} calls"))
    return _RUNS_ON.get(type(low), ("-", "-"))


@dataclass
class NodeView:
    """What an operator's ``gradient`` rule (and a ``Decompose`` builder) sees of a
    forward node."""
    name: str
    attrs: dict
    inputs: list          # Refs of the inputs (arguments then aux)
    outputs: list         # Refs of the outputs
    ograds: list          # Refs of the output gradients (zeros where none flows)
    in_shapes: list
    out_shapes: list


# ---------------------------------------------------------------------------

def _same_as_first_type(attrs, in_types):
    """mxnet's ``ElemwiseType``: every input and the output share the first known dtype
    (an input of another dtype is refused by ``passes/infer_types.py``)."""
    known = [t for t in in_types if t is not None]
    t = known[0] if known else None
    return [t] * len(in_types), [t]


_PARSED_MAX = 1024


def _immutable(value) -> bool:
    """Whether ``value`` cannot change in place (safe to share between nodes' attrs)."""
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return True
    return isinstance(value, (tuple, frozenset)) and all(map(_immutable, value))


@dataclass
class OpDef:
    """Everything about one operator, in one place.

    Attributes
    ----------
    name : str
        The mxnet operator name (``FullyConnected``, ``elemwise_add`` ...).
    arguments : list of str or callable(attrs) -> list of str
        Input argument names; missing ones become auto-named variables
        ``{node_name}_{arg}`` when built through the Symbol API.
    aux : list of str or callable(attrs) -> list of str
        Auxiliary state names (BatchNorm's moving statistics, an optimizer update's
        states).
    outputs : list of str or callable(attrs) -> list of str
        Output names, as in ``list_outputs`` (``{node_name}_{out}``).
    num_visible : callable(attrs) -> int or None
        How many outputs the symbol exposes (None: all).
    infer_shape : callable(attrs, in_shapes) -> (in_shapes, out_shapes)
        Completes unknown input shapes where the operator fixes them (weights)
        and gives output shapes; ``None`` marks still unknown. Raises
        ``ShapeError`` with a message for shapes that do not agree.
    reference : callable(attrs, inputs, is_train) -> list of torch.Tensor
        The torch oracle. Auxiliary inputs follow the arguments; an op with
        aux states returns ``outputs + new_aux_values`` when training.
    gradient : callable(b, node) -> list of input gradient refs or None
        Written with graph ops through the builder ``b``.
    pattern : str
        ``elemwise``, ``broadcast``, ``injective``, ``reduce``, ``matmul``,
        ``opaque`` or ``composite`` (TVM's pattern kinds).
    lowering : Pointwise | Reduction | MatMul | View | Decompose | Special | Extern
    dim_links : callable(attrs, in_ranks, out_ranks) -> list of groups, optional
        Dims that must be equal, as groups of ``(side, index, dim)`` with side
        ``"in"`` or ``"out"`` (ranks are None where unknown). mxnet's unknown
        (0) dims are filled through them both ways
        (``passes/infer_unknown_dims.py``); ``pattern == "elemwise"`` links
        every dim of same-rank inputs and the output without this.
    infer_shape_back : callable(attrs, in_dims, out_dims) -> list, optional
        mxnet's inference backwards: the input dims a known output decides
        where no dim links them one to one (Reshape: the one unknown input dim
        from the output's size). Dims are lists with 0 where unknown, None where
        even the rank is; returns a list of input dims (or None for each input
        it leaves alone). Used by ``passes/infer_unknown_dims.py`` only.
    rows_independent : bool or callable(attrs) -> bool, optional
        Row ``i`` of the outputs depends on row ``i`` of the batch-carrying inputs
        alone (see :meth:`separates_rows`; ``compiler/row_split.py``).
    constant_outputs : tuple of int
        Hidden outputs that are the same whatever the inputs (Dropout's mask, a
        random draw): a higher-order gradient may read them as constants
        (``runtime/autograd_graph.py``).
    """
    name: str
    pattern: str
    lowering: Any
    infer_shape: Callable
    reference: Callable
    arguments: Any = ("data",)
    aux: Any = ()
    outputs: Any = ("output",)
    num_visible: Optional[Callable[[dict], int]] = None
    attrs: Sequence[Attr] = ()
    infer_type: Callable = _same_as_first_type
    gradient: Optional[Callable] = None
    aliases: Sequence[str] = ()
    is_loss: bool = False            # ignores the incoming head gradient
    mode_dependent: Any = False      # behaves differently in training (or callable(attrs))
    variadic: Optional[str] = None   # attribute holding the input count
    key_var_num_args: Optional[str] = None
    needs_random: bool = False
    constant_outputs: tuple = ()
    # attributes mxnet converts to the operator's element type before use
    # (``DType(scalar)``): one beyond the type's range is an infinity there.
    # None: the ``scalar`` attribute of the ``_*_scalar`` family, when the entry has one
    dtype_scalars: Optional[Sequence[str]] = None
    # a Pointwise whose value depends on its own position: the tile IR passes its
    # ``expr`` a ``coords`` keyword (per dim, its coordinate ``ops.coord(P)`` or None)
    needs_coords: bool = False
    dim_links: Optional[Callable] = None
    infer_shape_back: Optional[Callable] = None
    # output i always has input i's shape (casts): a shape a consumer expects of output i
    # is the shape of the variable behind input i (AMP casts parameters:
    # ``fc_weight -> amp_cast -> FullyConnected``; graph.infer_node). An int k instead:
    # output 0 always has input k's shape (``_identity_with_attr_like_rhs``: k = 1)
    passes_shape: Union[bool, int] = False
    # callable(attrs) -> {input name: {key: value}}: attributes set on an input that is a
    # variable when the operator is composed, unless the variable has them (mxnet's
    # FSetInputVarAttrOnCompose: prelu's gamma gets ``__init__`` Constant 0.25).
    var_attrs: Optional[Callable] = None
    # mxnet's FMutateInputs (the optimizer updates, ``optimizer_ops.py``): the aux states
    # are inputs the operator writes in place on every forward, inference too; its
    # ``Decompose`` returns their new values after the outputs
    mutates_inputs: bool = False
    # an operator whose output shape depends on its inputs' values (boolean_mask): shape
    # inference leaves its output unknown, so a symbol holding it does not bind (as in
    # mxnet); an imperative call, which has the values, runs the operator that
    # ``value_shaped(attrs, tensors) -> (name, attrs)`` gives, of a fixed output shape
    value_shaped: Optional[Callable] = None
    # an operator that reads a csr array's stored entries (explicit zeros count: getnnz,
    # edge_id), which the Program's dense view of a sparse array loses: an imperative call
    # runs ``sparse_form(attrs, inputs) -> (name, attrs, inputs)``, an operator over the
    # arrays' parts (data, indices, indptr)
    sparse_form: Optional[Callable] = None
    # an update operator that, given a row_sparse gradient, changes only the gradient's
    # rows, states included (mxnet's lazy sparse kernel; ``runtime/imperative_lazy.py``):
    # the attribute that turns that off (``'lazy_update'``), or True where it is always so
    lazy_rows: Any = None
    # mxnet's order of the inputs (positional symbols and JSON follow it), where it is
    # not the arguments then the auxiliary states (multi_sgd_mom_update's weight_0,
    # grad_0, mom_0, weight_1 ...): a list or callable(attrs) -> list
    input_order: Any = None
    # whether row i of the outputs depends on row i of the batch-carrying inputs alone
    # (axis 0 is the batch: no mixing along it, no random draw, no aux update, no
    # normalization by the batch size): True, False, callable(attrs) -> bool, or None for
    # the default (:meth:`separates_rows`). The runtime's row-split execution
    # (``compiler/row_split.py``) relies on it, with a shape check of its own
    rows_independent: Any = None
    # ``(spelling, name)`` pairs: the operator name mxnet's symbol JSON writes for a
    # spelling of this entry, where it is not ``name``. mxnet writes an alias as the
    # operator it names (``_plus`` -> ``elemwise_add``, this entry's name), but some
    # spellings are operators of their own there (``_equal``, elementwise, beside
    # ``broadcast_equal``; ``make_loss`` beside ``MakeLoss``)
    json_names: Sequence[tuple] = ()
    doc: str = ""
    _attr_index: dict = field(default_factory=dict, repr=False)
    # parse_attrs' results by raw attributes, where every value is immutable: autodiff
    # and decompose build thousands of nodes from a few attribute sets (Inception-BN's
    # 69 BatchNorms, each the same dozen reductions and broadcasts)
    _parsed: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        self._attr_index = {a.name: a for a in self.attrs}
        if self.dtype_scalars is None:
            self.dtype_scalars = ("scalar",) if "scalar" in self._attr_index else ()

    def json_name(self, spelling: str) -> str:
        """The ``op`` mxnet's symbol JSON writes for a node made as ``spelling``
        (this entry's name or one of its aliases)."""
        return dict(self.json_names).get(spelling, self.name)

    def separates_rows(self, attrs: dict) -> bool:
        """Whether this node maps row i of its batch-carrying inputs to row i of its
        outputs and nothing else (``rows_independent``). Unset, only pointwise
        elementwise / broadcast operators without randomness, position, auxiliary
        states or training-mode behaviour qualify: when in doubt, not separable."""
        flag = self.rows_independent
        if callable(flag):
            return bool(flag(attrs))
        if flag is not None:
            return bool(flag)
        return (self.pattern in ("elemwise", "broadcast") and isinstance(self.lowering, Pointwise)
                and not (self.needs_random or self.needs_coords or self.aux
                         or self.mutates_inputs or self.mode_dependent))

    # -- attributes ---------------------------------------------------------
    def parse_attrs(self, raw: dict, node_name: str = "?") -> dict:
        """Parse mxnet string attributes into Python values, with defaults.

        Hidden attributes (``__lr_mult__`` ...) are kept as strings.
        """
        # strings only (as the graph builders and symbol JSON give them): 1 and 1.0, or
        # True and 1, would share a key and parse differently
        key = None
        if all(type(v) is str for v in raw.values()):
            key = tuple(raw.items())
            known = self._parsed.get(key)
            if known is not None:
                return dict(known)
        parsed = self._parse_attrs(raw, node_name)
        if key is not None and all(map(_immutable, parsed.values())):
            if len(self._parsed) >= _PARSED_MAX:
                self._parsed.clear()
            self._parsed[key] = parsed
            return dict(parsed)
        return parsed

    def _parse_attrs(self, raw: dict, node_name: str) -> dict:
        parsed = {}
        for key, value in raw.items():
            if key.startswith("__") and key.endswith("__"):
                continue
            spec = self._attr_index.get(key)
            if spec is None and not self.attrs:
                # mxnet's operators without a parameter struct (broadcast_add, relu ...)
                # keep any attribute in the graph and read none: mxnet's own code passes
                # them (broadcast_add(a, b, axis=0))
                continue
            if spec is None:
                known = ", ".join(sorted(self._attr_index)) or "none"
                raise MXNetError(
                    f"operator {self.name} (node '{node_name}'): unknown attribute "
                    f"'{key}'. Known attributes: {known}.")
            try:
                parsed[key] = spec.parse(value)
            except (ValueError, TypeError) as exc:
                raise MXNetError(
                    f"operator {self.name} (node '{node_name}'): attribute '{key}'="
                    f"{str(value)[:80]!r} is invalid: {exc}") from None
        for spec in self.attrs:
            if spec.name not in parsed:
                if spec.default is REQUIRED:
                    raise MXNetError(
                        f"operator {self.name} (node '{node_name}'): required attribute "
                        f"'{spec.name}' is missing.")
                parsed[spec.name] = spec.default
        return parsed

    # -- signature ----------------------------------------------------------
    def list_arguments(self, attrs: dict) -> list:
        args = self.arguments(attrs) if callable(self.arguments) else self.arguments
        return list(args)

    def list_aux(self, attrs: dict) -> list:
        aux = self.aux(attrs) if callable(self.aux) else self.aux
        return list(aux)

    def list_inputs(self, attrs: dict) -> list:
        """Every input in mxnet's order (``input_order``; else arguments, then aux)."""
        order = self.input_order(attrs) if callable(self.input_order) else self.input_order
        return list(order) if order else self.list_arguments(attrs) + self.list_aux(attrs)

    def list_outputs(self, attrs: dict) -> list:
        outs = self.outputs(attrs) if callable(self.outputs) else self.outputs
        return list(outs)

    def visible_outputs(self, attrs: dict) -> int:
        if self.num_visible is None:
            return len(self.list_outputs(attrs))
        return self.num_visible(attrs)


class ShapeError(MXNetError):
    """Shapes that do not agree; the pass adds the node and input names."""


REGISTRY: dict = {}


def register(opdef: OpDef) -> OpDef:
    for name in (opdef.name, *opdef.aliases):
        if name in REGISTRY:
            raise RuntimeError(f"operator {name} registered twice")
        REGISTRY[name] = opdef
    return opdef


def get_op(name: str, node_name: str = "?") -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise MXNetError(
            f"unknown operator '{name}' (node '{node_name}'). This project implements "
            f"{len(set(map(id, REGISTRY.values())))} mxnet operators: 'symtriton ops' "
            f"(or python -m compiler ops) lists them.") from None


# ---------------------------------------------------------------------------
# Helpers shared by the family files.

def lit(x) -> str:
    """A numeric literal for generated source (either target's): never raw attribute text."""
    f = float(x)
    if math.isnan(f):
        return "float('nan')"
    if math.isinf(f):
        return "float('inf')" if f > 0 else "float('-inf')"
    return repr(f)


def broadcast_shapes(a: tuple, b: tuple, opname: str) -> tuple:
    """numpy broadcasting of two shapes (mxnet's broadcast_* rule)."""
    n = max(len(a), len(b))
    a2 = (1,) * (n - len(a)) + tuple(a)
    b2 = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ShapeError(f"{opname}: shapes {tuple(a)} and {tuple(b)} cannot be broadcast")
    return tuple(out)


def merge_shape(known, other, what: str):
    """Unify two (possibly None) shapes, raising on a conflict."""
    if known is None:
        return other
    if other is None:
        return known
    if tuple(known) != tuple(other):
        raise ShapeError(f"{what}: expected shape {tuple(known)}, got {tuple(other)}")
    return tuple(known)


def normalize_axis(axis: int, ndim: int, opname: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ShapeError(f"{opname}: axis {axis} is out of range for {ndim}-d input")
    return axis % max(ndim, 1)


def prod(xs) -> int:
    r = 1
    for x in xs:
        r *= int(x)
    return r


# mxnet files an operator registered as ``_contrib_X`` under ``mx.sym.contrib.X``
# (and ``mx.nd.contrib.X``), ``_linalg_X`` under ``linalg.X`` and so on
# (mxnet's operator-module setup); top-level spellings such as
# ``linalg_gemm`` or ``CTCLoss`` are aliases of the entry.
NAMESPACE_PREFIXES = {"contrib": "_contrib_", "linalg": "_linalg_", "image": "_image_"}


# ``mx.sym.sparse`` / ``mx.nd.sparse``: mxnet 1.9.1's operators with a sparse kernel, by
# public name -> registry name (most are the same operator; ``adagrad_update`` is the
# sparse-only ``_sparse_adagrad_update``)
SPARSE_NAMESPACE = {name: name for name in (
    "ElementWiseSum Embedding FullyConnected LinearRegressionOutput LogisticRegressionOutput "
    "MAERegressionOutput _contrib_round_ste _contrib_sign_ste abs adam_update add_n arccos "
    "arccosh arcsin arcsinh arctan arctanh broadcast_add broadcast_div broadcast_minus "
    "broadcast_mul broadcast_plus broadcast_sub cast_storage cbrt ceil clip concat cos cosh "
    "degrees dot elemwise_add elemwise_div elemwise_mul elemwise_sub exp expm1 fix floor "
    "ftrl_update gamma gammaln log log10 log1p log2 make_loss mean negative norm radians relu "
    "rint round rsqrt sgd_mom_update sgd_update sigmoid sign sin sinh slice sqrt square "
    "stop_gradient sum tan tanh trunc where zeros_like").split()}
SPARSE_NAMESPACE["adagrad_update"] = "_sparse_adagrad_update"
SPARSE_NAMESPACE["retain"] = "_sparse_retain"


def namespace_members(namespace: str) -> dict:
    """The operators of one of mxnet's operator namespaces.

    Parameters
    ----------
    namespace : str
        A key of ``NAMESPACE_PREFIXES`` (``'contrib'``, ``'linalg'``, ``'image'``).

    Returns
    -------
    dict
        ``{public name: registry name}``, e.g. ``{'gemm2': '_linalg_gemm2'}``.
    """
    prefix = NAMESPACE_PREFIXES[namespace]
    return {name[len(prefix):]: name for name in sorted(REGISTRY)
            if name.startswith(prefix) and len(name) > len(prefix)}
