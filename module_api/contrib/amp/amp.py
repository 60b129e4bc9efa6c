"""``mx.contrib.amp.amp``: mxnet 1.9.1's AMP entry points for Symbol and Module programs.

The conversion is the compiler's pass (``compiler/passes/reduce_precision.py``,
mxnet's ``ReducePrecision``): :func:`convert_symbol` / :func:`convert_model` /
:func:`convert_bucketing_module` insert ``amp_cast`` / ``amp_multicast`` where
mxnet 1.9.1 does, by the operator lists of ``compiler/passes/amp_lists.py`` (here as
:mod:`.lists` and ``list_*``).

:func:`init` differs from mxnet in one documented way. mxnet's ``init`` replaces
the ``mx.sym`` / ``mx.nd`` operator functions by wrappers that cast their inputs as
each symbol is built; symtriton leaves ``mx.sym`` as it is (a global patch would
change every symbol of the process, and the cache keys with them) and gets the same
casts by converting the finished graph: call :func:`convert_symbol` on the symbol
(inside a BucketingModule's ``sym_gen``, or through :func:`convert_bucketing_module`).
:func:`init` checks and records the target dtype and the list overrides, which
:func:`convert_symbol` and friends use when they are called without lists.

Dynamic loss scaling: mxnet 1.9.1's :func:`init_trainer` and :func:`unscale` take
Gluon Trainers only (an ``Optimizer`` is refused with a TypeError); symtriton has no
Gluon, and takes a Module or BucketingModule instead (``module_scaling.py``: the
scale multiplies every head's gradient inside the backward, ``update`` unscales,
skips steps with inf / nan gradients and grows or shrinks the scale as mxnet's
``LossScaler`` does). An ``Optimizer`` is still refused with mxnet's TypeError.
"""
from __future__ import annotations

import logging

import numpy as np

from compiler.passes import amp_lists
from compiler.ir.dtypes import dtype_name
from compiler.errors import MXNetError
from compiler.passes.reduce_precision import param_dtypes, reduce_precision
from compiler.symbol import Symbol

from runtime.optimizer import Optimizer

from . import lists  # noqa: F401
from .loss_scaler import LossScaler
from .module_scaling import ModuleLossScaling

_LOG = logging.getLogger(__name__)

__all__ = ['init', 'init_trainer', 'scale_loss', 'unscale', 'convert_model',
           'convert_hybrid_block', 'list_lp16_ops', 'list_fp32_ops',
           'list_lp16_fp32_ops', 'list_conditional_fp32_ops',
           'list_widest_type_cast', 'list_loss_output_functions', 'list_lp16_use_fp32_params',
           'convert_symbol', 'convert_bucketing_module']

# mxnet's Python name for its bfloat16 (numpy has none)
bfloat16 = np.dtype([('bfloat16', np.uint16)])

_state = {"initialized": False, "target_dtype": None, "target_precision_ops": None,
          "fp32_ops": None, "conditional_fp32_ops": None, "loss_scaler": None}


def _target(target_dtype, what="target_dtype") -> str:
    name = dtype_name(target_dtype)
    if name not in amp_lists.TARGET_DTYPES:
        raise MXNetError(f"AMP {what} must be float16 or bfloat16, got {target_dtype!r}")
    return name


def init(target_dtype='float16', target_precision_ops=None, conditional_fp32_ops=None,
         fp32_ops=None):
    """Initialize AMP: record the target dtype and the operator lists to convert with.

    Unlike mxnet, ``mx.sym`` is not patched (see the module docstring): symbols are
    converted with :func:`convert_symbol`, which uses what is recorded here when it
    is called without lists. Like mxnet, only the first call counts.

    Parameters
    ----------
    target_dtype : {'float16', 'bfloat16'}
        Low-precision type of the operators of :func:`list_lp16_ops`.
    target_precision_ops : list of str, optional
        Override the operators run in ``target_dtype``.
    conditional_fp32_ops : list of (str, str, list of str), optional
        Override ``(operator, attribute, values)`` run in float32 for those values.
    fp32_ops : list of str, optional
        Override the operators run in float32.
    """
    if _state["initialized"]:
        return
    _state.update(initialized=True, target_dtype=_target(target_dtype),
                  target_precision_ops=target_precision_ops, fp32_ops=fp32_ops,
                  conditional_fp32_ops=conditional_fp32_ops, loss_scaler=LossScaler())
    _LOG.info("Using AMP")


def _is_module(obj):
    from ...module.base_module import BaseModule
    return isinstance(obj, BaseModule)


def _refuse(optimizer_or_trainer, what):
    if type(optimizer_or_trainer).__name__ == "Trainer" or hasattr(optimizer_or_trainer,
                                                                   "_amp_original_scale"):
        raise TypeError(f"amp.{what}: symtriton has no Gluon Trainer; pass the Module")
    if isinstance(optimizer_or_trainer, Optimizer):
        raise TypeError(f"amp.{what}: AMP is currently only compatible with Gluon Trainer "
                        f"(mxnet 1.9.1) or, in symtriton, a Module / BucketingModule: pass "
                        f"the module whose optimizer this is")
    raise TypeError(f"amp.{what}: optimizer_or_trainer should be a Module or "
                    f"BucketingModule here, instead is {type(optimizer_or_trainer)}")


def init_trainer(optimizer_or_trainer):
    """Attach dynamic loss scaling to a Module or BucketingModule (mxnet 1.9.1 takes a
    Gluon Trainer, which symtriton does not have).

    Call it after ``bind``, ``init_params`` and ``init_optimizer`` and before training
    (``fit`` skips the steps already done). Every head's gradient is then multiplied
    by the loss scale in the backward pass, and ``update`` divides the parameter
    gradients by it, skipping the step when they hold inf or nan
    (``module_scaling.py`` has the design).

    Parameters
    ----------
    optimizer_or_trainer : Module or BucketingModule
    """
    if not _state["initialized"]:
        raise MXNetError("AMP not initialized, did you forget to call amp.init()?")
    if not _is_module(optimizer_or_trainer):
        _refuse(optimizer_or_trainer, "init_trainer")
    if _state["loss_scaler"] is None:        # mxnet: the first trainer gets amp's scaler
        _state["loss_scaler"] = scaler = LossScaler()
    else:
        scaler = LossScaler()
    ModuleLossScaling(optimizer_or_trainer, scaler)


def _scaling(module, what):
    if not _is_module(module):
        _refuse(module, what)
    scaling = getattr(module, "_amp_loss_scaling", None)
    if scaling is None:
        raise MXNetError(f"amp.{what}: loss scaler is not initialized, did you forget to "
                         f"call amp.init_trainer(module)?")
    return scaling


def scale_loss(loss, optimizer_or_trainer):
    """mxnet's ``scale_loss`` multiplies a Gluon loss; a Module's loss operators are
    scaled inside its backward once :func:`init_trainer` ran, so there is nothing to
    scale here: always raises (TypeError for anything but a module)."""
    _scaling(optimizer_or_trainer, "scale_loss")
    raise MXNetError("amp.scale_loss: a Module's loss is scaled in its backward after "
                     "amp.init_trainer(module); call forward_backward / fit as usual")


def unscale(optimizer_or_trainer):
    """Check the last backward's parameter gradients for inf / nan and divide them by the
    loss scale now, as mxnet's ``unscale`` does, e.g. to clip them before ``update``.

    Parameters
    ----------
    optimizer_or_trainer : Module or BucketingModule
        A module given to :func:`init_trainer`.
    """
    _scaling(optimizer_or_trainer, "unscale").unscale()


def _defaults(target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops):
    """Lists recorded by :func:`init` (for its target dtype) where none are given."""
    if _state["initialized"] and _state["target_dtype"] == target_dtype:
        if target_dtype_ops is None:
            target_dtype_ops = _state["target_precision_ops"]
        if fp32_ops is None:
            fp32_ops = _state["fp32_ops"]
        if conditional_fp32_ops is None:
            conditional_fp32_ops = _state["conditional_fp32_ops"]
    return target_dtype_ops, fp32_ops, conditional_fp32_ops


def convert_symbol(sym, target_dtype="float16", target_dtype_ops=None, fp32_ops=None,
                   conditional_fp32_ops=None, excluded_sym_names=None, data_names=None,
                   cast_optional_params=False):
    """The mixed-precision version of the float32 symbol ``sym``, as mxnet 1.9.1 builds it.

    Parameters
    ----------
    sym : Symbol
        A float32 network.
    target_dtype : {'float16', 'bfloat16'}
        The low-precision type.
    target_dtype_ops : list of str, optional
        Override the operators cast to ``target_dtype`` (default :func:`list_lp16_ops`).
    fp32_ops : list of str, optional
        Override the operators cast to float32 (default :func:`list_fp32_ops`).
    conditional_fp32_ops : list of (str, str, list of str), optional
        Override ``(operator, attribute, values)`` cast to float32 for those values.
    excluded_sym_names : list of str, optional
        Nodes kept in float32.
    data_names : list of str, optional
        The data inputs (default: every input without a ``__dtype__`` attribute).
    cast_optional_params : bool, default False
        Leave parameters that feed low-precision operators uncast, to be stored in
        ``target_dtype`` (``convert_model`` casts them).

    Returns
    -------
    Symbol
    """
    target = _target(target_dtype)
    target_dtype_ops, fp32_ops, conditional_fp32_ops = _defaults(
        target, target_dtype_ops, fp32_ops, conditional_fp32_ops)
    return reduce_precision(sym, target, target_dtype_ops, fp32_ops, conditional_fp32_ops,
                            excluded_sym_names, data_names, cast_optional_params)


def _cast_params(params, dtypes):
    for name in list(params):
        want = dtypes.get(name)
        if want is not None and dtype_name(params[name].dtype) != want:
            params[name] = params[name].astype(want)


def convert_model(sym, arg_params, aux_params, target_dtype="float16", target_dtype_ops=None,
                  fp32_ops=None, conditional_fp32_ops=None, excluded_sym_names=None,
                  cast_optional_params=False):
    """Convert a float32 model (symbol and parameters) to mixed precision.

    The inputs that are not parameters are the data (float32); every parameter
    gets the dtype the converted graph needs of it: float32, or ``target_dtype``
    with ``cast_optional_params`` where only low-precision operators read it.

    Parameters
    ----------
    sym : Symbol
    arg_params, aux_params : dict of str to NDArray
        Changed in place (cast parameters replace the originals) and returned.
    target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops, excluded_sym_names, \
cast_optional_params
        As :func:`convert_symbol`.

    Returns
    -------
    (Symbol, dict, dict)
        The converted symbol, ``arg_params`` and ``aux_params``.
    """
    if excluded_sym_names is not None and not isinstance(excluded_sym_names, list):
        raise MXNetError(f"convert_model: excluded_sym_names must be a list of symbol names, "
                         f"got {type(excluded_sym_names).__name__}")
    if not isinstance(sym, Symbol):
        raise MXNetError(f"convert_model: sym must be a Symbol, got {type(sym).__name__}")
    for what, params in (("arg_params", arg_params), ("aux_params", aux_params)):
        if not isinstance(params, dict):
            raise MXNetError(f"convert_model: {what} must be a dict of name to NDArray, got "
                             f"{type(params).__name__}")
    param_names = set(arg_params) | set(aux_params)
    data_names = [n for n in sym.list_inputs() if n not in param_names]
    sym = convert_symbol(sym, target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops,
                         excluded_sym_names, data_names, cast_optional_params)
    dtypes = param_dtypes(sym)
    _cast_params(arg_params, {n: dtypes.get(n) for n in sym.list_arguments()})
    _cast_params(aux_params, {n: dtypes.get(n) for n in sym.list_auxiliary_states()})
    return sym, arg_params, aux_params


def convert_hybrid_block(block, target_dtype="float16", target_dtype_ops=None, fp32_ops=None,
                         conditional_fp32_ops=None, excluded_sym_names=None, ctx=None,
                         cast_optional_params=False):
    """mxnet's Gluon conversion; symtriton has no Gluon, so this always raises.

    Raises
    ------
    MXNetError
        Naming what to use instead: :func:`convert_symbol` / :func:`convert_model`
        for a symbol and its parameters, :func:`convert_bucketing_module` for a
        BucketingModule.
    """
    raise MXNetError(
        f"amp.convert_hybrid_block: symtriton runs Symbol/Module programs and has no Gluon "
        f"HybridBlock (got {type(block).__name__}); convert the symbol with "
        f"amp.convert_symbol(sym) or amp.convert_model(sym, arg_params, aux_params), or a "
        f"BucketingModule with amp.convert_bucketing_module(mod)")


def convert_bucketing_module(bucketing_mod, target_dtype="float16", target_dtype_ops=None,
                             fp32_ops=None, conditional_fp32_ops=None,
                             excluded_sym_names=None, cast_optional_params=False):
    """A new BucketingModule running ``bucketing_mod``'s network in mixed precision.

    Every bound bucket's symbol is converted with :func:`convert_model` (the
    parameters cast as it says), and the new module's ``sym_gen`` converts what the
    original ``sym_gen`` returns, so buckets first seen later are converted too
    (mxnet 1.9.1 leaves those unconverted). The result is not bound.

    Parameters
    ----------
    bucketing_mod : BucketingModule
        With parameters initialized.
    target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops, excluded_sym_names, \
cast_optional_params
        As :func:`convert_symbol`.

    Returns
    -------
    BucketingModule
    """
    from ...module import BucketingModule
    if not isinstance(bucketing_mod, BucketingModule):
        raise MXNetError(f"convert_bucketing_module: expected a BucketingModule, got "
                         f"{type(bucketing_mod).__name__}")
    if not bucketing_mod._buckets:
        raise MXNetError("convert_bucketing_module: the BucketingModule has no bucket; bind it")
    if not bucketing_mod.params_initialized:
        raise MXNetError("convert_bucketing_module: the BucketingModule's parameters must be "
                         "initialized for mixed precision conversion")
    arg_params, aux_params = bucketing_mod.get_params()
    arg_params, aux_params = dict(arg_params), dict(aux_params)
    opts = dict(target_dtype=target_dtype, target_dtype_ops=target_dtype_ops,
                fp32_ops=fp32_ops, conditional_fp32_ops=conditional_fp32_ops,
                excluded_sym_names=excluded_sym_names, cast_optional_params=cast_optional_params)
    sym_dict = {}
    for key, mod in bucketing_mod._buckets.items():
        sym_dict[key], arg_params, aux_params = convert_model(mod._symbol, arg_params,
                                                              aux_params, **opts)
    names = set(arg_params) | set(aux_params)
    original = bucketing_mod._sym_gen

    def sym_gen(bucket_key):
        sym, data_names, label_names = original(bucket_key)
        data = [n for n in sym.list_inputs() if n not in names]
        sym = convert_symbol(sym, data_names=data, **opts)
        return sym, data_names, label_names

    return BucketingModule.load_dict(
        sym_dict, sym_gen=sym_gen, arg_params=arg_params, aux_params=aux_params,
        default_bucket_key=bucketing_mod._default_bucket_key, logger=bucketing_mod.logger,
        context=bucketing_mod._context, work_load_list=bucketing_mod._work_load_list,
        fixed_param_names=bucketing_mod._fixed_param_names,
        state_names=bucketing_mod._state_names, group2ctxs=bucketing_mod._group2ctxs,
        compression_params=bucketing_mod._compression_params)


def _lists(target_dtype):
    return amp_lists.op_lists(_target(target_dtype))


def list_lp16_ops(target_dtype):
    """The default operators run in ``target_dtype`` (float16 or bfloat16)."""
    return list(_lists(target_dtype)["lp16"])


def list_fp32_ops(target_dtype):
    """The default operators run in float32."""
    return list(_lists(target_dtype)["fp32"])


def list_lp16_fp32_ops(target_dtype):
    """The default operators that run in either type (left as they are)."""
    return list(_lists(target_dtype)["lp16_fp32"])


def list_conditional_fp32_ops(target_dtype):
    """``(operator, attribute, values)`` run in float32 for those attribute values."""
    return [(op, attr, list(values))
            for op, attr, values in _lists(target_dtype)["conditional_fp32"]]


def list_widest_type_cast(target_dtype):
    """The operators whose inputs are cast to their widest type."""
    return list(_lists(target_dtype)["widest_type_cast"])


def list_loss_output_functions(target_dtype):
    """The loss output operators."""
    return list(_lists(target_dtype)["loss_output"])


def list_lp16_use_fp32_params(target_dtype):
    """Per operator, the parameters kept in float32 (None for float16, as mxnet)."""
    conv = _lists(target_dtype)["use_fp32_params"]
    return None if conv is None else {op: list(names) for op, names in conv.items()}
