"""The symbolic checks of ``mx.test_utils``, run on this project's own executors.

``simple_forward``, ``check_symbolic_forward``, ``check_symbolic_backward``,
``numeric_grad``, ``check_numeric_gradient``, ``check_consistency`` and
``check_speed`` with mxnet 1.9.1's signatures and semantics; import them
from :mod:`module_api.test_utils` (this file only keeps that one short).
Executors compute in float32: other dtypes raise (see test_utils).
"""
from __future__ import annotations

import time
import traceback

import numpy as np
import torch

from compiler.errors import MXNetError
from compiler.symbol import Symbol
from runtime.context import Context

from . import ndarray as _nd
from .array_checks import (as_numpy, assert_almost_equal, check_stype, default_context,
                           default_dtype, default_numeric_eps, get_tolerance)
from runtime.ndarray import torch_dtype

def _check_dtype(dtype, what):
    if isinstance(dtype, str) and dtype == "asnumpy":
        return
    if np.dtype(dtype) != np.float32:
        raise MXNetError(f"{what}: dtype={np.dtype(dtype).name} is not supported; symtriton "
                         f"executors compute in float32 (pass dtype=np.float32, the default)")


def _f32(v, ctx):
    """A float32 NDArray of ``v`` on ``ctx`` (NDArrays already there are kept)."""
    if isinstance(v, torch.Tensor) and torch_dtype(v) == torch.float32 and \
            getattr(v, "context", None) == ctx:
        return v
    return _nd.array(as_numpy(v), ctx=ctx, dtype=np.float32)


def _parse_location(sym, location, ctx, dtype=default_dtype()):
    """``{argument name: float32 NDArray}`` from a list (argument order) or dict.

    Raises
    ------
    ValueError
        If a dict's keys are not exactly the symbol's arguments.
    """
    _check_dtype(dtype, "location")
    assert isinstance(location, (dict, list, tuple))
    if isinstance(location, dict):
        if set(location.keys()) != set(sym.list_arguments()):
            raise ValueError("Symbol arguments and keys of the given location do not match."
                             "symbol args:%s, location.keys():%s"
                             % (str(set(sym.list_arguments())), str(set(location.keys()))))
    else:
        location = dict(zip(sym.list_arguments(), location))
    return {k: _f32(location[k], ctx) for k in sorted(location)}


def _parse_aux_states(sym, aux_states, ctx, dtype=default_dtype()):
    """``{aux name: float32 NDArray}`` from a list or dict, or ``None``."""
    _check_dtype(dtype, "aux_states")
    if aux_states is None:
        return None
    if isinstance(aux_states, dict):
        if set(aux_states.keys()) != set(sym.list_auxiliary_states()):
            raise ValueError("Symbol aux_states names and given aux_states do not match."
                             "symbol aux_names:%s, aux_states.keys:%s"
                             % (str(set(sym.list_auxiliary_states())),
                                str(set(aux_states.keys()))))
    else:
        aux_states = dict(zip(sym.list_auxiliary_states(), aux_states))
    return {k: _f32(v, ctx) for k, v in aux_states.items()}


def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """Bind ``sym`` to the numpy ``inputs``, run forward, return numpy output(s).

    Returns
    -------
    np.ndarray, or a list of them when the symbol has several outputs.
    """
    ctx = ctx or default_context()
    inputs = {k: _nd.array(v, ctx=ctx) for k, v in inputs.items()}
    exe = sym.bind(ctx, args=inputs, grad_req="null")
    exe.forward(is_train=is_train)
    outputs = [x.asnumpy() for x in exe.outputs]
    return outputs[0] if len(outputs) == 1 else outputs


def numeric_grad(executor, location, aux_states=None, eps=1e-4, use_forward_train=True,
                 dtype=default_dtype()):
    """Central finite differences of ``sum(outputs[0])`` w.r.t. every float argument.

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
    approx_grads = {k: np.zeros(v.shape, dtype=np.float32) for k, v in location.items()}
    for k, v in location.items():
        executor.arg_dict[k][:] = _nd.array(v)
    location = {k: np.array(v, order="C", dtype=np.float32) for k, v in location.items()}

    def f():
        if aux_states is not None:
            for key, val in aux_states.items():
                executor.aux_dict[key][:] = _nd.array(val)
        executor.forward(is_train=use_forward_train)
        return executor.outputs[0].asnumpy().astype(np.float64)

    for k, v in location.items():
        old_value = v.copy()
        flat = v.ravel()
        for i in range(v.size):
            flat[i] = old_value.ravel()[i] + eps / 2.0
            executor.arg_dict[k][:] = _nd.array(v)
            f_peps = f()
            flat[i] = old_value.ravel()[i] - eps / 2.0
            executor.arg_dict[k][:] = _nd.array(v)
            f_neps = f()
            approx_grads[k].ravel()[i] = (f_peps - f_neps).sum() / eps
            flat[i] = old_value.ravel()[i]
        executor.arg_dict[k][:] = _nd.array(old_value)
    return approx_grads


def _grad_req_of(grad_nodes, arg_names):
    if grad_nodes is None:
        return list(arg_names), {k: "write" for k in arg_names}
    if isinstance(grad_nodes, (list, tuple)):
        return list(grad_nodes), {k: "write" for k in grad_nodes}
    if isinstance(grad_nodes, dict):
        return list(grad_nodes.keys()), dict(grad_nodes)
    raise ValueError(f"grad_nodes must be None, a list of argument names or a dict name -> "
                     f"grad_req, got {type(grad_nodes).__name__}")


def _compare_grad(req, name, fd_or_expected, got, before, rtol, atol, names, equal_nan=False):
    got = as_numpy(got)
    if req == "write":
        assert_almost_equal(fd_or_expected, got, rtol, atol, names, equal_nan=equal_nan)
    elif req == "add":
        assert_almost_equal(fd_or_expected, got - before, rtol, atol, names,
                            equal_nan=equal_nan)
    elif req == "null":
        assert_almost_equal(before, got, rtol, atol, names, equal_nan=equal_nan)
    else:
        raise ValueError("Invalid grad_req %s for argument %s" % (req, name))


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
        Finite-difference step (float32 default ``2**-9``).
    rtol, atol : float, optional
        Tolerances (``None``: float32 defaults).
    grad_nodes : None, list or dict, optional
        The arguments to check (all by default); a dict gives each one's
        ``grad_req`` (``write``, ``add`` or ``null``).
    use_forward_train : bool
        Run the finite-difference forwards with ``is_train=True``.
    ctx : Context, optional
    grad_stype_dict : dict, optional
        Only ``'default'`` storage is supported.
    dtype : np.float32
        The only supported dtype (module docstring).

    Raises
    ------
    AssertionError
        Naming ``NUMERICAL_<arg>`` / ``BACKWARD_<arg>`` where they differ.
    """
    _check_dtype(dtype, "check_numeric_gradient")
    for k, v in (grad_stype_dict or {}).items():
        check_stype(v, f"check_numeric_gradient grad_stype_dict['{k}']")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx)
    location_npy = {k: v.asnumpy() for k, v in location.items()}
    aux_states = _parse_aux_states(sym, aux_states, ctx)
    aux_states_npy = None if aux_states is None else \
        {k: v.asnumpy() for k, v in aux_states.items()}
    grad_nodes, grad_req = _grad_req_of(grad_nodes, sym.list_arguments())
    _, out_shape, _ = sym.infer_shape(**{k: v.shape for k, v in location.items()})
    from compiler import symbol as _sym
    out = _sym.make_loss(sym * _sym.Variable("__random_proj"))
    location = dict(location)
    location["__random_proj"] = _nd.array(np.random.rand(*out_shape[0]) + 0.1, ctx=ctx)
    args_grad_npy = {k: np.random.normal(0, 0.01, size=location[k].shape) for k in grad_nodes}
    args_grad_npy["__random_proj"] = np.random.normal(0, 0.01, size=out_shape[0])
    args_grad = {k: _nd.array(v, ctx=ctx) for k, v in args_grad_npy.items()}
    executor = out.bind(ctx, grad_req=grad_req, args=location, args_grad=args_grad,
                        aux_states=aux_states)
    if len(executor.arg_arrays) != len(location):
        raise ValueError("Executor arg_arrays and and location len do not match."
                         "Got %d inputs and %d locations" % (len(executor.arg_arrays),
                                                             len(location)))
    assert len(executor.outputs) == 1
    executor.forward(is_train=True)
    eps = get_tolerance(executor.outputs[0], numeric_eps, default_numeric_eps())
    assert eps >= 1e-5, "float32 finite differences need numeric_eps >= 1e-5"
    executor.backward()
    symbolic = {k: as_numpy(v) for k, v in executor.grad_dict.items()}
    numeric = numeric_grad(executor, location_npy, aux_states_npy, eps=eps,
                           use_forward_train=use_forward_train)
    for name in grad_nodes:
        _compare_grad(grad_req[name], name, numeric[name],
                      symbolic.get(name, args_grad_npy[name]), args_grad_npy[name], rtol, atol,
                      ("NUMERICAL_%s" % name, "BACKWARD_%s" % name))


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
    dtype : np.float32 or "asnumpy"

    Returns
    -------
    list of NDArray
        The executor's outputs.
    """
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    aux_states = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    executor = sym.bind(ctx=ctx, args=location, grad_req="null", aux_states=aux_states)
    executor.forward(is_train=False)
    for output_name, expect, output in zip(sym.list_outputs(), expected, executor.outputs):
        assert_almost_equal(expect, output, rtol, atol,
                            ("EXPECTED_%s" % output_name, "FORWARD_%s" % output_name),
                            equal_nan=equal_nan)
    return executor.outputs


def _out_grads(out_grads, ctx):
    if isinstance(out_grads, (tuple, list)):
        return [_f32(a, ctx) for a in out_grads]
    if isinstance(out_grads, dict):
        return {k: _f32(v, ctx) for k, v in out_grads.items()}
    assert out_grads is None
    return None


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
        Only ``'default'`` storage is supported.

    Returns
    -------
    dict of str -> NDArray
        The gradient arrays.
    """
    ctx = ctx or default_context()
    for k, v in (grad_stypes or {}).items():
        check_stype(v, f"check_symbolic_backward grad_stypes['{k}']")
    location = _parse_location(sym, location, ctx, dtype)
    aux_states = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected))
    args_grad_npy = {k: np.random.normal(size=np.shape(v)) for k, v in sorted(expected.items())}
    args_grad = {k: _nd.array(v, ctx=ctx) for k, v in args_grad_npy.items()}
    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in sym.list_arguments()}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(sym.list_arguments(), grad_req))
    req = {k: grad_req.get(k, "null") if k in args_grad else "null"
           for k in sym.list_arguments()}
    executor = sym.bind(ctx=ctx, args=location, args_grad=args_grad, aux_states=aux_states,
                        grad_req=req)
    executor.forward(is_train=True)
    executor.backward(_out_grads(out_grads, ctx))
    grads = {k: executor.grad_dict.get(k, args_grad[k]) for k in args_grad}
    for name in expected:
        _compare_grad(req[name], name, expected[name], grads[name],
                      args_grad_npy[name].astype(np.float32), rtol, atol,
                      ("EXPECTED_%s" % name, "BACKWARD_%s" % name), equal_nan)
    return grads


def _consistency_executors(sym, ctx_list, grad_req, arg_params):
    """One executor per entry: ``{'ctx': ..., shapes..., 'type_dict': ...}`` or a Context."""
    syms = [sym] * len(ctx_list) if isinstance(sym, Symbol) else list(sym)
    assert len(syms) == len(ctx_list), "give one symbol per context, or one symbol"
    exes = []
    for i, (s, entry) in enumerate(zip(syms, ctx_list)):
        assert s.list_arguments() == syms[0].list_arguments()
        assert s.list_outputs() == syms[0].list_outputs()
        if isinstance(entry, Context):
            shapes = {k: np.shape(v) for k, v in (arg_params or {}).items()}
            entry = dict(ctx=entry, **shapes)
        entry = dict(entry)
        for name, dt in (entry.pop("type_dict", None) or {}).items():
            if np.dtype(dt) != np.float32:
                raise MXNetError(f"check_consistency: ctx_list[{i}] asks for {name} in "
                                 f"{np.dtype(dt).name}; symtriton executors compute in float32 "
                                 f"only, so give float32 entries (or none)")
        entry.pop("stype_dict", None)
        exes.append(s.simple_bind(grad_req=grad_req, **entry))
    return exes


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
        {'data': np.float32}}`` passed to ``simple_bind``; or plain Contexts
        (``[mx.cpu(0), mx.cpu(1)]``), whose shapes then come from
        ``arg_params`` (which must then give every argument).
    scale : float
        Standard deviation (or, with ``use_uniform``, the half-range / 0.92)
        of the random arguments not in ``arg_params``.
    grad_req : str
        ``write``, ``add`` or ``null`` (forward only).
    arg_params, aux_params : dict, optional
        Values of arguments / auxiliary states (aux default 0).
    rtol, atol : float, optional
    raise_on_err : bool
        Raise on the first mismatch (else print it).
    ground_truth : dict, optional
        Output and gradient values to compare with instead of the first
        executor's.

    Returns
    -------
    dict
        The ground truth (output and gradient arrays by name).
    """
    assert len(ctx_list) > 1
    exe_list = _consistency_executors(sym, ctx_list, grad_req, arg_params)
    first = sym if isinstance(sym, Symbol) else sym[0]
    output_names, arg_names = first.list_outputs(), first.list_arguments()
    arg_params = {} if arg_params is None else arg_params
    aux_params = {} if aux_params is None else aux_params
    for n, arr in sorted(exe_list[0].arg_dict.items()):
        if n not in arg_params:
            shape = tuple(arr.shape)
            arg_params[n] = (np.random.uniform(-0.92 * scale, 0.92 * scale, size=shape)
                             if use_uniform else np.random.normal(size=shape, scale=scale)
                             ).astype(rand_type)
    for n in exe_list[0].aux_dict:
        aux_params.setdefault(n, 0)
    for exe in exe_list:
        for name, arr in exe.arg_dict.items():
            arr[:] = _f32(arg_params[name], exe._ctx)
        for name, arr in exe.aux_dict.items():
            arr[:] = float(aux_params[name]) if np.ndim(aux_params[name]) == 0 else \
                _f32(aux_params[name], exe._ctx)
        if grad_req == "add":
            for arr in exe.grad_arrays:
                if arr is not None:
                    arr[:] = 0
    gt_idx = 0                      # every executor is float32: the first is the reference
    gt = ground_truth
    if gt is None:
        gt = dict(exe_list[gt_idx].output_dict)
        if grad_req != "null":
            gt.update(exe_list[gt_idx].grad_dict)

    def compare(i, name, arr, what):
        try:
            assert_almost_equal(arr, gt[name], rtol=rtol, atol=atol, equal_nan=equal_nan)
        except AssertionError as e:
            print("%s Err: ctx %d vs ctx %d at %s" % (what, i, gt_idx, name))
            traceback.print_exc()
            if raise_on_err:
                raise e
            print(str(e))

    for exe in exe_list:
        exe.forward(is_train=False)
    for i, exe in enumerate(exe_list):
        if i != gt_idx:
            for name, arr in zip(output_names, exe.outputs):
                compare(i, name, arr, "Predict")
    if grad_req == "null":
        return gt
    for exe in exe_list:
        exe.forward(is_train=True)
    golden = [out.asnumpy() for out in exe_list[0].outputs]
    for exe in exe_list:
        exe.backward([_nd.array(g, ctx=exe._ctx) for g in golden])
    for i, exe in enumerate(exe_list):
        if i == gt_idx:
            continue
        for name, arr in zip(output_names + arg_names, exe.outputs + exe.grad_arrays):
            if gt.get(name) is None:
                assert arr is None, f"{name}: ctx {i} has a gradient, the reference has none"
                continue
            compare(i, name, arr, "Train")
    return gt


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
    grad_req = grad_req or "write"
    exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **kwargs)
    if location is None:
        location = {k: np.random.normal(size=arr.shape, scale=1.0)
                    for k, arr in exe.arg_dict.items()}
    for name, value in location.items():
        exe.arg_dict[name][:] = _f32(value, ctx)
    if typ not in ("whole", "forward"):
        raise ValueError('typ can only be "whole" or "forward".')

    def run():
        if typ == "whole":
            exe.forward(is_train=True)
            exe.backward(out_grads=[_nd.ones(o.shape, ctx=ctx) for o in exe.outputs])
        else:
            exe.forward(is_train=False)
        for o in exe.outputs:
            o.wait_to_read()
    run()
    tic = time.time()
    for _ in range(N):
        run()
    return (time.time() - tic) / N
