"""The symbolic checks of ``mx.test_utils``, run on this project's own executors.

``simple_forward``, ``check_symbolic_forward``, ``check_symbolic_backward``,
``numeric_grad``, ``check_numeric_gradient``, ``check_consistency`` and
``check_speed`` keep mxnet 1.9.1's signatures and semantics, and draw their
random arrays in the same order, so seeded tests see the same numbers. Import
them from :mod:`module_api.test_utils`. As in mxnet, ``dtype`` (float16,
float32 or float64, or ``"asnumpy"`` for each numpy array's own dtype) is the
dtype numpy inputs are given in; NDArrays keep theirs.
"""
from __future__ import annotations

import time
import traceback

import numpy as np
import torch

from compiler import symbol as _symbol
from compiler.symbol import Symbol
from runtime.context import Context

from . import ndarray as _nd
from .array_checks import (as_numpy, assert_almost_equal, check_stype, default_context,
                           default_dtype, default_numeric_eps, get_tolerance)

# The extra argument check_numeric_gradient multiplies the output by.
_PROJECTION = "__random_proj"


# -- inputs -----------------------------------------------------------------------------

_DTYPES = (np.float16, np.float32, np.float64)


def _check_dtype(dtype, what):
    """mxnet's checks take float16, float32, float64 or ``"asnumpy"``."""
    if isinstance(dtype, str) and dtype == "asnumpy":
        return
    assert np.dtype(dtype) in _DTYPES, (f"{what}: dtype must be one of float16, float32, "
                                        f"float64 or 'asnumpy', got {np.dtype(dtype).name}")


def _as_array(value, ctx, dtype=np.float32):
    """``value`` as mxnet's checks give it to an executor: an NDArray keeps its dtype
    and storage (moved to ``ctx``); anything else becomes an NDArray in ``dtype`` (``"asnumpy"``:
    its own)."""
    if isinstance(value, torch.Tensor) and hasattr(value, "context") or \
            getattr(value, "stype", "default") in ("csr", "row_sparse"):
        # an NDArray, a sparse one too, is bound as it is (its storage decides)
        return value if value.context == ctx else value.as_in_context(ctx)
    value = as_numpy(value)
    kind = value.dtype if isinstance(dtype, str) and dtype == "asnumpy" else dtype
    return _nd.array(value, ctx=ctx, dtype=kind)


def _by_name(values, names, what):
    """``values`` as ``{name: value}``: a dict is returned as is, a list / tuple is
    paired with ``names`` in order."""
    if isinstance(values, dict):
        return values
    assert isinstance(values, (list, tuple)), (
        f"{what} must be a list (in the symbol's order) or a dict by name, "
        f"got {type(values).__name__}")
    return dict(zip(names, values))


# mxnet's messages when a dict's keys are not the symbol's names
_LOCATION_MISMATCH = ("Symbol arguments and keys of the given location do not match."
                      "symbol args:%s, location.keys():%s")
_AUX_MISMATCH = ("Symbol aux_states names and given aux_states do not match."
                 "symbol aux_names:%s, aux_states.keys:%s")


def _named_arrays(values, names, what, mismatch, ctx, dtype):
    """``{name: NDArray}`` from a list paired with ``names`` or a dict that must have
    exactly ``names`` as keys (else ``ValueError`` with ``mismatch``)."""
    if isinstance(values, dict) and set(values) != set(names):
        raise ValueError(mismatch % (str(set(names)), str(set(values.keys()))))
    return {name: _as_array(value, ctx, dtype)
            for name, value in _by_name(values, names, what).items()}


def _parse_location(sym, location, ctx, dtype=default_dtype()):
    """``{argument name: NDArray}``, sorted by name, from a list in
    ``list_arguments()`` order or a dict (numpy values in ``dtype``).

    Raises
    ------
    ValueError
        If a dict's keys are not exactly the symbol's arguments.
    """
    _check_dtype(dtype, "location")
    args = _named_arrays(location, sym.list_arguments(), "location", _LOCATION_MISMATCH, ctx,
                         dtype)
    return dict(sorted(args.items()))


def _parse_aux_states(sym, aux_states, ctx, dtype=default_dtype()):
    """``{aux name: NDArray}`` from a list or dict, or ``None`` for ``None``."""
    _check_dtype(dtype, "aux_states")
    if aux_states is None:
        return None
    return _named_arrays(aux_states, sym.list_auxiliary_states(), "aux_states",
                         _AUX_MISMATCH, ctx, dtype)


def _numpy_values(arrays):
    """``{name: numpy copy}`` of a dict of NDArrays (``None`` stays ``None``)."""
    if arrays is None:
        return None
    return {name: array.asnumpy() for name, array in arrays.items()}


def _head_grads(out_grads, ctx, dtype):
    """The head gradients for ``backward``: NDArrays in a list or dict, or ``None``."""
    if out_grads is None:
        return None
    if isinstance(out_grads, dict):
        return {name: _as_array(grad, ctx, dtype) for name, grad in out_grads.items()}
    assert isinstance(out_grads, (list, tuple)), \
        f"out_grads must be None, a list or a dict, got {type(out_grads).__name__}"
    return [_as_array(grad, ctx, dtype) for grad in out_grads]


# -- forward ----------------------------------------------------------------------------

def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """Bind ``sym`` to the numpy ``inputs``, run forward, return numpy output(s).

    Returns
    -------
    np.ndarray, or a list of them when the symbol has several outputs.
    """
    ctx = ctx or default_context()
    args = {name: _nd.array(value, ctx=ctx) for name, value in inputs.items()}
    executor = sym.bind(ctx, args=args, grad_req="null")
    executor.forward(is_train=is_train)
    results = [out.asnumpy() for out in executor.outputs]
    return results if len(results) != 1 else results[0]


def check_symbolic_forward(sym, location, expected, rtol=None, atol=None, aux_states=None,
                           ctx=None, equal_nan=False, dtype=default_dtype()):
    """Compare the forward outputs of ``sym`` at ``location`` with ``expected``.

    Parameters
    ----------
    sym : Symbol
    location : list or dict of np.ndarray
        Every argument's value.
    expected : list or dict of np.ndarray
        Per output (list in output order, or by output name).
    rtol, atol : float, optional
    aux_states : list or dict of np.ndarray, optional
    ctx : Context, optional
    equal_nan : bool
    dtype : np.float16, np.float32, np.float64 or "asnumpy"
        The dtype of the numpy values of ``location`` (``"asnumpy"``: their own).

    Returns
    -------
    list of NDArray
        The executor's outputs.
    """
    ctx = ctx or default_context()
    args = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    out_names = sym.list_outputs()
    if isinstance(expected, dict):
        expected = [expected[name] for name in out_names]
    executor = sym.bind(ctx=ctx, args=args, grad_req="null", aux_states=aux)
    executor.forward(is_train=False)
    for name, want, got in zip(out_names, expected, executor.outputs):
        assert_almost_equal(want, got, rtol, atol, ("EXPECTED_%s" % name, "FORWARD_%s" % name),
                            equal_nan=equal_nan)
    return executor.outputs


# -- gradients --------------------------------------------------------------------------

def _grad_array(value, stype, ctx, dtype, what):
    """A gradient array to bind: ``value`` in dense storage, or, for ``stype`` csr /
    row_sparse, an empty sparse array (nothing stored), as mxnet's checks bind them."""
    if stype in (None, "default"):
        return _nd.array(value, ctx=ctx, dtype=dtype)
    if stype not in ("csr", "row_sparse"):
        check_stype(stype, what)
    return _nd.zeros(np.shape(value), ctx=ctx, dtype=dtype, stype=stype)


def _compare_grad(req, name, fd_or_expected, got, before, rtol, atol, names, equal_nan=False):
    """Check one argument's gradient array as its ``grad_req`` left it.

    ``write``: it equals the reference; ``add``: it grew by the reference from
    ``before``; ``null``: it still equals ``before``.
    """
    got = as_numpy(got)
    if req == "write":
        assert_almost_equal(fd_or_expected, got, rtol, atol, names, equal_nan=equal_nan)
    elif req == "add":
        assert_almost_equal(fd_or_expected, got - before, rtol, atol, names,
                            equal_nan=equal_nan)
    elif req == "null":
        assert_almost_equal(before, got, rtol, atol, names, equal_nan=equal_nan)
    else:
        raise ValueError("Invalid grad_req %s for argument %s" % (req, name)
                         + "; use 'write', 'add' or 'null'")


def _central_difference(point, eps, evaluate):
    """``d sum(f) / d point`` element by element: ``(f(x + eps/2) - f(x - eps/2)) / eps``.

    ``point`` (a C-ordered array in the argument's dtype, as mxnet perturbs it) is
    perturbed in place and restored;
    ``evaluate(point)`` returns the outputs at it in float64.
    """
    grad = np.zeros(point.shape, dtype=point.dtype)
    flat_point, flat_grad = point.reshape(-1), grad.reshape(-1)
    unperturbed = point.copy().reshape(-1)
    for i, centre in enumerate(unperturbed):
        flat_point[i] = centre + eps / 2.0
        upper = evaluate(point)
        flat_point[i] = centre - eps / 2.0
        lower = evaluate(point)
        flat_grad[i] = (upper - lower).sum() / eps
        flat_point[i] = centre
    return grad


def numeric_grad(executor, location, aux_states=None, eps=1e-4, use_forward_train=True,
                 dtype=default_dtype()):
    """Central finite differences of ``sum(outputs[0])`` w.r.t. every argument given.

    Parameters
    ----------
    executor : Executor
        Bound to the symbol; its ``arg_dict`` is overwritten and restored.
    location : dict of str -> np.ndarray
        Where to differentiate.
    aux_states : dict of str -> np.ndarray, optional
        Restored before every forward.
    eps : float
        The step: ``(f(x + eps/2) - f(x - eps/2)) / eps``.

    Returns
    -------
    dict of str -> np.ndarray
    """
    _check_dtype(dtype, "numeric_grad")
    kind = np.float32 if isinstance(dtype, str) else dtype
    points = {name: np.array(value, order="C", dtype=kind) for name, value in location.items()}

    def assign(name, point):
        arr = executor.arg_dict[name]
        stype = getattr(arr, "stype", "default")
        # a sparse argument takes the point in its own storage, as mxnet's as_stype
        arr[:] = point if stype == "default" else _nd.array(point, dtype=kind).tostype(stype)

    for name, point in points.items():
        assign(name, point)

    def outputs_with(name):
        def evaluate(point):
            assign(name, point)
            for aux_name, aux_value in (aux_states or {}).items():
                executor.aux_dict[aux_name][:] = np.asarray(aux_value)
            executor.forward(is_train=use_forward_train)
            return executor.outputs[0].asnumpy().astype(np.float64)
        return evaluate

    grads = {}
    for name, point in points.items():
        unperturbed = point.copy()
        grads[name] = _central_difference(point, eps, outputs_with(name))
        assign(name, unperturbed)
    return grads


def _grad_req_of(grad_nodes, arg_names):
    """``(names to check, {name: grad_req})`` from ``check_numeric_gradient``'s ``grad_nodes``."""
    if grad_nodes is None:
        grad_nodes = list(arg_names)
    if isinstance(grad_nodes, (list, tuple)):
        return list(grad_nodes), dict.fromkeys(grad_nodes, "write")
    if isinstance(grad_nodes, dict):
        return list(grad_nodes), dict(grad_nodes)
    raise ValueError(f"grad_nodes must be None, a list of argument names or a dict name -> "
                     f"grad_req, got {type(grad_nodes).__name__}")


def _bind_projected(sym, args, aux, checked, grad_req, ctx, dtype, grad_stypes=None):
    """Bind ``make_loss(sym * P)`` for a random projection ``P`` of ``sym``'s output.

    Returns the executor and the random initial gradient arrays (numpy), drawn
    in mxnet's order: ``P``, then each checked argument's, then ``P``'s.
    """
    _, out_shapes, _ = sym.infer_shape(**{name: value.shape for name, value in args.items()})
    loss = _symbol.make_loss(sym * _symbol.Variable(_PROJECTION))
    args = dict(args)
    args[_PROJECTION] = _nd.array(np.random.rand(*out_shapes[0]) + 0.1, ctx=ctx, dtype=dtype)
    initial = {name: np.random.normal(0, 0.01, size=args[name].shape) for name in checked}
    initial[_PROJECTION] = np.random.normal(0, 0.01, size=out_shapes[0])
    grad_stypes = grad_stypes or {}
    grad_arrays = {name: _grad_array(value, grad_stypes.get(name), ctx, dtype,
                                     f"check_numeric_gradient grad_stype_dict['{name}']")
                   for name, value in initial.items()}
    initial = {name: as_numpy(arr) for name, arr in grad_arrays.items()}
    executor = loss.bind(ctx, grad_req=grad_req, args=args, args_grad=grad_arrays,
                         aux_states=aux)
    if len(executor.arg_arrays) != len(args):
        raise ValueError("Executor arg_arrays and and location len do not match."
                         "Got %d inputs and %d locations" % (len(executor.arg_arrays),
                                                             len(args)))
    assert len(executor.outputs) == 1, "check_numeric_gradient takes a symbol of one output"
    return executor, initial


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=None, rtol=None,
                           atol=None, grad_nodes=None, use_forward_train=True, ctx=None,
                           grad_stype_dict=None, dtype=default_dtype()):
    """Check the backward pass of ``sym`` against finite differences.

    The check differentiates ``sum(sym * P)`` for a random projection ``P``
    (``make_loss`` over the product), so every output element is weighted.

    Parameters
    ----------
    sym : Symbol
        One output.
    location : list or dict of np.ndarray
        The value of every argument (list in ``list_arguments`` order).
    aux_states : list or dict of np.ndarray, optional
    numeric_eps : float, optional
        Finite-difference step (default by the output's dtype: ``2**-6`` for
        float16, ``2**-9`` for float32, ``2**-14`` for float64).
    rtol, atol : float, optional
        Tolerances (``None``: the defaults of the dtypes compared).
    grad_nodes : None, list or dict, optional
        The arguments to check (all by default); a dict gives each one's
        ``grad_req`` (``write``, ``add`` or ``null``).
    use_forward_train : bool
        Run the finite-difference forwards with ``is_train=True``.
    ctx : Context, optional
    grad_stype_dict : dict, optional
        The storage of an argument's gradient array: ``'default'``, ``'csr'`` or
        ``'row_sparse'`` (bound with nothing stored; the executor stores what mxnet
        stores, or casts the dense gradient: its storage fallback).
    dtype : np.float16, np.float32 or np.float64
        The dtype of the numpy values of ``location``, of the projection and of
        the gradient arrays; the finite differences perturb values in it.

    Raises
    ------
    AssertionError
        Naming ``NUMERICAL_<arg>`` / ``BACKWARD_<arg>`` where they differ.
    """
    assert not isinstance(dtype, str) and np.dtype(dtype) in _DTYPES, \
        f"check_numeric_gradient: dtype must be float16, float32 or float64, got {dtype}"
    assert grad_stype_dict is None or isinstance(grad_stype_dict, dict), \
        "grad_stype_dict must be a dict"
    ctx = ctx or default_context()
    args = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    args_np, aux_np = _numpy_values(args), _numpy_values(aux)
    checked, grad_req = _grad_req_of(grad_nodes, sym.list_arguments())
    executor, initial = _bind_projected(sym, args, aux, checked, grad_req, ctx, dtype,
                                        grad_stype_dict)
    executor.forward(is_train=True)
    eps = get_tolerance(executor.outputs[0], numeric_eps, default_numeric_eps())
    if np.dtype(dtype) == np.float32:
        assert eps >= 1e-5, f"numeric_eps={eps} is too small for float32 finite " \
                            f"differences (use 1e-5 or more)"
    executor.backward()
    backward = {name: as_numpy(grad) for name, grad in executor.grad_dict.items()}
    numeric = numeric_grad(executor, args_np, aux_np, eps=eps,
                           use_forward_train=use_forward_train, dtype=dtype)
    for name in checked:
        _compare_grad(grad_req[name], name, numeric[name], backward.get(name, initial[name]),
                      initial[name], rtol, atol, ("NUMERICAL_%s" % name, "BACKWARD_%s" % name))


def _backward_reqs(grad_req, arg_names, with_grad):
    """``{argument: grad_req}`` for every argument: ``grad_req`` (a string, a list in
    argument order or a dict) where a gradient is expected, ``'null'`` elsewhere."""
    if isinstance(grad_req, str):
        grad_req = dict.fromkeys(arg_names, grad_req)
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(arg_names, grad_req))
    return {name: grad_req.get(name, "null") if name in with_grad else "null"
            for name in arg_names}


def check_symbolic_backward(sym, location, out_grads, expected, rtol=None, atol=None,
                            aux_states=None, grad_req="write", ctx=None, grad_stypes=None,
                            equal_nan=False, dtype=default_dtype()):
    """Compare the gradients ``sym`` computes at ``location`` with ``expected``.

    Parameters
    ----------
    sym : Symbol
    location : list or dict of np.ndarray
    out_grads : None, list or dict of np.ndarray
        Head gradients (``None`` for loss outputs).
    expected : list or dict of np.ndarray
        Expected gradient per argument (list in argument order, or by name);
        only the arguments named are checked.
    grad_req : str, list or dict
        ``write``, ``add`` (the check subtracts the random initial gradient)
        or ``null`` (the gradient array must be left unchanged).
    grad_stypes : dict, optional
        The storage of an argument's gradient array (``'default'``, ``'csr'`` or
        ``'row_sparse'``); a sparse one is bound with nothing stored.
    dtype : np.float16, np.float32, np.float64 or "asnumpy"
        The dtype of the numpy values of ``location`` and ``out_grads``; each
        gradient array has its argument's dtype.

    Returns
    -------
    dict of str -> NDArray
        The gradient arrays.
    """
    ctx = ctx or default_context()
    grad_stypes = grad_stypes or {}
    args = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    arg_names = sym.list_arguments()
    expected = _by_name(expected, arg_names, "expected")
    # random initial gradients (drawn by sorted name), so 'add' and 'null' are seen
    initial = {name: np.random.normal(size=np.shape(expected[name])) for name in sorted(expected)}
    # each gradient array in its argument's dtype
    grad_arrays = {name: _grad_array(value, grad_stypes.get(name), ctx, args[name].dtype,
                                     f"check_symbolic_backward grad_stypes['{name}']")
                   for name, value in initial.items()}
    # what each array holds before the backward (a sparse one: nothing)
    initial = {name: as_numpy(arr) for name, arr in grad_arrays.items()}
    reqs = _backward_reqs(grad_req, arg_names, grad_arrays)
    executor = sym.bind(ctx=ctx, args=args, args_grad=grad_arrays, aux_states=aux,
                        grad_req=reqs)
    executor.forward(is_train=True)
    executor.backward(_head_grads(out_grads, ctx, dtype))
    grads = {name: executor.grad_dict.get(name, grad_arrays[name]) for name in grad_arrays}
    for name, want in expected.items():
        before = initial[name].astype(grad_arrays[name].dtype)
        _compare_grad(reqs[name], name, want, grads[name], before, rtol, atol,
                      ("EXPECTED_%s" % name, "BACKWARD_%s" % name), equal_nan)
    return grads


# -- consistency across contexts --------------------------------------------------------

def _bind_spec(entry, index, arg_params):
    """``simple_bind`` keywords from one ``ctx_list`` entry (a dict or a Context)."""
    if isinstance(entry, Context):
        shapes = {name: np.shape(value) for name, value in (arg_params or {}).items()}
        entry = dict(ctx=entry, **shapes)
    spec = dict(entry)
    spec.pop("stype_dict", None)
    return spec


def _consistency_executors(sym, ctx_list, grad_req, arg_params):
    """One executor per entry: ``{'ctx': ..., shapes..., 'type_dict': ...}`` or a Context."""
    syms = [sym] * len(ctx_list) if isinstance(sym, Symbol) else list(sym)
    assert len(syms) == len(ctx_list), "give one symbol per context, or one symbol"
    first = syms[0]
    executors = []
    for index, (each, entry) in enumerate(zip(syms, ctx_list)):
        assert each.list_arguments() == first.list_arguments(), \
            f"symbol {index} has other arguments than symbol 0"
        assert each.list_outputs() == first.list_outputs(), \
            f"symbol {index} has other outputs than symbol 0"
        spec = _bind_spec(entry, index, arg_params)
        executors.append(each.simple_bind(grad_req=grad_req, **spec))
    return executors


def _random_params(executor, arg_params, scale, use_uniform, rand_type):
    """Add a random value (by sorted name) for every argument ``arg_params`` lacks."""
    for name, array in sorted(executor.arg_dict.items()):
        if name in arg_params:
            continue
        shape = tuple(array.shape)
        if use_uniform:
            value = np.random.uniform(-0.92 * scale, 0.92 * scale, size=shape)
        else:
            value = np.random.normal(size=shape, scale=scale)
        arg_params[name] = value.astype(rand_type)


def _load_params(executor, arg_params, aux_params, grad_req):
    """Copy the parameters into ``executor``, each cast to its array's dtype; zero its
    gradients for ``grad_req='add'``."""
    for name, array in executor.arg_dict.items():
        array[:] = as_numpy(arg_params[name])
    for name, array in executor.aux_dict.items():
        value = aux_params[name]
        array[:] = float(value) if np.ndim(value) == 0 else as_numpy(value)
    if grad_req == "add":
        for grad in executor.grad_arrays:
            if grad is not None:
                grad[:] = 0


def _placed(array, index, stage):
    """How mxnet names an executor's array in a mismatch line: ``'ctx 1'`` when
    predicting, ``'float32 cpu(1) ctx 1'`` when training."""
    if stage != "Train":
        return "ctx %d" % index
    where = [np.dtype(array.dtype).name, getattr(array, "context", None), "ctx %d" % index]
    return " ".join(str(part) for part in where if part is not None)


def _consistency_comparer(gt, ref_index, rtol, atol, equal_nan, raise_on_err):
    """``compare(index, name, array, stage)``: check ``array`` against ``gt[name]``,
    print where they differ, and raise unless ``raise_on_err`` is false."""
    def compare(index, name, array, stage):
        reference = gt[name]
        try:
            assert_almost_equal(array, reference, rtol=rtol, atol=atol, equal_nan=equal_nan)
        except AssertionError as err:
            print("%s Err: %s vs %s at %s" % (stage, _placed(array, index, stage),
                                              _placed(reference, ref_index, stage), name))
            traceback.print_exc()
            if raise_on_err:
                raise err
            print(str(err))
    return compare


def _least_precise_heads(executors):
    """The head gradients every executor gets, as mxnet gives them: the first
    executor's outputs, each rounded to the narrowest dtype any executor has there."""
    heads = []
    for k, out in enumerate(executors[0].outputs):
        narrow = min((ex.outputs[k].dtype for ex in executors),
                     key=lambda dt: np.dtype(dt).itemsize)
        heads.append(out.asnumpy().astype(narrow))
    return heads


def check_consistency(sym, ctx_list, scale=1.0, grad_req="write", arg_params=None,
                      aux_params=None, rtol=None, atol=None, raise_on_err=True,
                      ground_truth=None, equal_nan=False, use_uniform=False,
                      rand_type=np.float64):
    """Check that ``sym`` gives the same outputs and gradients on every context.

    Parameters
    ----------
    sym : Symbol or list of Symbol
        One symbol for all, or one per context.
    ctx_list : list
        mxnet's form, dicts ``{'ctx': mx.cpu(0), 'data': (2, 3), 'type_dict':
        {'data': np.float16}}`` passed to ``simple_bind``; or plain Contexts
        (``[mx.cpu(0), mx.cpu(1)]``), whose shapes then come from
        ``arg_params`` (which must then give every argument). The executor
        whose first output has the widest dtype is the reference; every
        executor's backward gets the first one's outputs, rounded to the
        narrowest dtype among them, as head gradients; comparisons take the
        tolerance of the less precise dtype of each pair (mxnet's defaults).
    scale : float
        Standard deviation (or, with ``use_uniform``, the half-range / 0.92)
        of the random arguments not in ``arg_params``.
    grad_req : str
        ``write``, ``add`` or ``null`` (forward only).
    arg_params, aux_params : dict, optional
        Values of arguments / auxiliary states (aux default 0). Random values
        drawn for missing arguments are added to a dict given here.
    rtol, atol : float, optional
    raise_on_err : bool
        Raise on the first mismatch (else print it).
    ground_truth : dict, optional
        Output and gradient values to compare with instead of the reference
        executor's.

    Returns
    -------
    dict
        The ground truth (output and gradient arrays by name).
    """
    assert len(ctx_list) > 1, "check_consistency compares two contexts or more"
    executors = _consistency_executors(sym, ctx_list, grad_req, arg_params)
    first = sym if isinstance(sym, Symbol) else sym[0]
    out_names, arg_names = first.list_outputs(), first.list_arguments()
    arg_params = {} if arg_params is None else arg_params
    aux_params = {} if aux_params is None else aux_params
    _random_params(executors[0], arg_params, scale, use_uniform, rand_type)
    for name in executors[0].aux_dict:
        aux_params.setdefault(name, 0)
    for executor in executors:
        _load_params(executor, arg_params, aux_params, grad_req)
    # the reference: the first executor whose first output has the widest dtype
    ref_index = int(np.argmax([np.dtype(ex.outputs[0].dtype).itemsize for ex in executors]))
    gt = ground_truth
    if gt is None:
        gt = dict(executors[ref_index].output_dict)
        if grad_req != "null":
            gt.update(executors[ref_index].grad_dict)
    compare = _consistency_comparer(gt, ref_index, rtol, atol, equal_nan, raise_on_err)

    for executor in executors:
        executor.forward(is_train=False)
    for index, executor in enumerate(executors):
        if index == ref_index:
            continue
        for name, array in zip(out_names, executor.outputs):
            compare(index, name, array, "Predict")
    if grad_req == "null":
        return gt

    for executor in executors:
        executor.forward(is_train=True)
    heads = _least_precise_heads(executors)
    for executor in executors:
        executor.backward([_nd.array(grad, ctx=executor._ctx, dtype=out.dtype)
                           for grad, out in zip(heads, executor.outputs)])
    for index, executor in enumerate(executors):
        if index == ref_index:
            continue
        names = out_names + arg_names
        for name, array in zip(names, executor.outputs + executor.grad_arrays):
            if gt.get(name) is None:
                assert array is None, f"{name}: ctx {index} has a gradient, the reference has none"
                continue
            compare(index, name, array, "Train")
    return gt


# -- speed ------------------------------------------------------------------------------

def check_speed(sym, location=None, ctx=None, N=20, grad_req=None, typ="whole", **kwargs):
    """Seconds per run of ``sym``: forward+backward (``typ='whole'``) or forward only.

    Parameters
    ----------
    location : dict of str -> np.ndarray, optional
        Argument values (random normal of the ``kwargs`` shapes when not given).
    N : int
        Timed runs (after one warm-up run).
    grad_req : str or dict, optional
        ``write`` for every argument by default.
    typ : str
        ``'whole'`` or ``'forward'``.
    """
    ctx = ctx or default_context()
    executor = sym.simple_bind(grad_req=grad_req or "write", ctx=ctx, **kwargs)
    if location is None:
        location = {name: np.random.normal(size=array.shape, scale=1.0)
                    for name, array in executor.arg_dict.items()}
    for name, value in location.items():
        executor.arg_dict[name][:] = as_numpy(value)
    if typ not in ("whole", "forward"):
        raise ValueError('typ can only be "whole" or "forward".' + f" Got {typ!r}.")

    def one_run():
        training = typ == "whole"
        executor.forward(is_train=training)
        if training:
            executor.backward(out_grads=[_nd.ones(out.shape, ctx=ctx)
                                         for out in executor.outputs])
        for out in executor.outputs:
            out.wait_to_read()

    one_run()                   # warm-up: compiles the kernels
    start = time.time()
    for _ in range(N):
        one_run()
    return (time.time() - start) / N
