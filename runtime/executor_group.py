"""``DataParallelExecutorGroup``: one executor per context, a batch split between them.

mxnet 1.9.1's ``mxnet.module.executor_group`` with the same constructor,
attributes and methods. Each context gets its own :class:`Executor`
(``[cpu(0), cpu(1)]`` are two executors); a batch is cut along each input's
batch axis with mxnet's ``_split_input_slice`` and outputs are concatenated
back along each output's batch axis (its ``__layout__``, ``N`` by default).

Parameters (weights, gradients, auxiliary states) are matched by name, never
by position. With ``shared_group`` (bucketing) every executor reuses the
shared group's parameter tensors (the *same* tensor objects), takes its
internal buffers from the shared executor's pool, and takes its data arrays
from ``shared_data_arrays`` when one of the same name is large enough.
"""
from __future__ import annotations

import logging
from collections import OrderedDict

import numpy as np
import torch

from compiler.frontend.batch_slices import split_input_slice
from compiler.artifacts.compile import all_dtypes
from compiler.ir.dtypes import check_dtype
from compiler.errors import MXNetError
from compiler.passes.storage_type import infer_storage

from . import threads
from .context import Context
from .data_desc import DataDesc
from .binding import bind
from .executor import placement
from .ndarray import as_ndarray, empty
from .ndarray_sparse import BaseSparseNDArray
from .executor_sparse import array_nbytes, is_sparse, new_array
from .kvstore_overlap import eligible_owner, mark_eligible
from .ndarray import torch_dtype

_LOG = logging.getLogger(__name__)


def _as_desc(x):
    cls = DataDesc
    if isinstance(x, cls):
        return x
    if hasattr(x, "name") and hasattr(x, "shape") and hasattr(x, "layout"):
        return cls(x.name, tuple(x.shape), getattr(x, "dtype", np.float32), x.layout)
    return cls(*x)


def _batch_axis(layout):
    """``DataDesc.get_batch_axis``: 0 without a layout, else the index of ``N`` (-1 if none)."""
    return 0 if layout is None else layout.find("N")


def _to_tensor(src):
    if isinstance(src, BaseSparseNDArray):     # csr data: executors bind dense inputs
        return src.tostype("default")
    if isinstance(src, torch.Tensor):
        return src.detach() if src.requires_grad else src
    return torch.as_tensor(np.asarray(src, dtype=np.float32))


def _copy_into(src, dst):
    """``src.copyto(dst)`` with mxnet's shape check (same number of elements)."""
    if is_sparse(dst):          # a csr / row_sparse array bound in an executor
        if is_sparse(src) and src.stype == dst.stype:
            if src is not dst:
                src.copyto(dst)
            return
        dst[:] = _to_tensor(src).to(device=dst.device, dtype=dst.dtype).reshape(dst.shape)
        return
    src = _to_tensor(src)
    # plain tensor ops: NDArray's __torch_function__ costs more than a batch's copy
    with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
        if tuple(src.shape) != tuple(dst.shape):
            if src.numel() != dst.numel():
                raise MXNetError(f"cannot copy an array of shape {tuple(src.shape)} into "
                                 f"one of shape {tuple(dst.shape)}")
            src = src.reshape(dst.shape)
        dst.copy_(src.to(device=dst.device, dtype=torch_dtype(dst)))


def _load_general(data, targets, major_axis):
    """Load a list of arrays into a list of arrays specified by slices."""
    for d_src, d_targets, axis in zip(data, targets, major_axis):
        if isinstance(d_targets, torch.Tensor):
            _copy_into(d_src, d_targets)
        elif isinstance(d_src, (list, tuple)):
            for src, dst in zip(d_src, d_targets):
                _copy_into(src, dst)
        else:
            # a csr batch stays csr (its rows sliced as csr): made dense here, a LibSVM batch
            # of a million features would cost a (batch, 1e6) array and its conversion back
            csr = is_sparse(d_src) and d_src.stype == "csr"
            src = d_src if csr else _to_tensor(d_src)
            for slice_idx, d_dst in d_targets:
                if axis >= 0 and (slice_idx.start != 0 or src.shape[axis] != slice_idx.stop):
                    if csr and axis == 0:
                        part = src.slice(slice_idx.start, slice_idx.stop)
                    else:
                        part = _to_tensor(src).narrow(axis, slice_idx.start,
                                                      slice_idx.stop - slice_idx.start)
                    _copy_into(part, d_dst)
                else:
                    _copy_into(src, d_dst)


def _load_data(batch, targets, major_axis):
    """Load data into sliced arrays (a batch, or a list of pre-sliced batches)."""
    if isinstance(batch, list):
        new_batch = [[b.data[i] for b in batch] for i in range(len(targets))]
        new_targets = [[dst for _, dst in d_target] for d_target in targets]
        _load_general(new_batch, new_targets, major_axis)
    else:
        _load_general(batch.data, targets, major_axis)


def _load_label(batch, targets, major_axis):
    """Load labels into sliced arrays."""
    if isinstance(batch, list):
        new_batch = [[b.label[i] for b in batch] for i in range(len(targets))]
        new_targets = [[dst for _, dst in d_target] for d_target in targets]
        _load_general(new_batch, new_targets, major_axis)
    else:
        _load_general(batch.label, targets, major_axis)


def _merge_multi_context(outputs, major_axis):
    """Concatenate per-device arrays along each one's batch axis (first copy if none)."""
    rets = []
    for tensors, axis in zip(outputs, major_axis):
        if axis >= 0 and len(tensors) > 1:
            dev = tensors[0].device
            ctx = getattr(tensors[0], "context", None)
            merged = torch.cat([t.to(dev) for t in tensors], dim=axis)
            rets.append(as_ndarray(merged, ctx))
        else:
            rets.append(tensors[0])
    return rets


def _prepare_group2ctxs(group2ctxs, ctx_len):
    """One ``{ctx_group: Context}`` dict (or None) per device, as mxnet prepares it."""
    if group2ctxs is None:
        return [None] * ctx_len
    if isinstance(group2ctxs, list):
        assert len(group2ctxs) == ctx_len, "length of group2ctxs should be %d" % ctx_len
        return group2ctxs
    if isinstance(group2ctxs, dict):
        ret = [{} for _ in range(ctx_len)]
        for k, v in group2ctxs.items():
            if isinstance(v, Context):
                ctxs = [v] * ctx_len
            elif len(v) == 1:
                ctxs = list(v) * ctx_len
            else:
                assert len(v) == ctx_len, "length of group2ctxs[%s] should be %d or 1" % (k, ctx_len)
                ctxs = v
            for i in range(ctx_len):
                ret[i][k] = ctxs[i]
        return ret
    raise AssertionError("group2ctxs should be list of dict of str to context, "
                         "or dict of str to context or list of context")


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


class DataParallelExecutorGroup:
    """A group of executors that lives on a group of devices (mxnet 1.9.1 signature).

    Parameters
    ----------
    symbol : Symbol
        The common computation graph of all executors.
    contexts : list of Context
    workload : list of number
        Relative share of the batch per context.
    data_shapes, label_shapes : list of DataDesc or (name, shape)
        ``label_shapes`` may be None.
    param_names : list of str
    for_training : bool
        Without it no gradient memory is allocated and ``grad_req`` is ``null``.
    inputs_need_grad : bool
        Gradients with respect to the data inputs.
    shared_group : DataParallelExecutorGroup, optional
        Another bucket's group: parameters, auxiliary states and internal
        memory are shared with it.
    logger : Logger
    fixed_param_names : list of str
        Parameters with ``grad_req='null'``.
    grad_req : str, list of str or dict of str to str
    state_names : list of str
    group2ctxs : dict or list, optional
        mxnet's ``ctx_group`` placement: per data-parallel slice, the
        context of each group (a dict of lists gives one context per
        slice). A slice whose nodes land on several contexts runs as a
        ``PartitionedExecutor`` (runtime/executor_partitioned.py).
    """

    def __init__(self, symbol, contexts, workload, data_shapes, label_shapes, param_names,
                 for_training, inputs_need_grad, shared_group=None, logger=_LOG,
                 fixed_param_names=None, grad_req='write', state_names=None, group2ctxs=None):
        self.param_names = param_names
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.symbol = symbol
        self.contexts = contexts
        self.workload = workload if workload is not None else [1] * len(contexts)
        self.group2ctxs = _prepare_group2ctxs(group2ctxs, len(contexts))
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = logger
        self._total_exec_bytes = 0
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        if not for_training:
            grad_req = 'null'
        data_shapes = [_as_desc(x) for x in data_shapes]
        if label_shapes is not None:
            label_shapes = [_as_desc(x) for x in label_shapes]
        self.grad_req = self._grad_req_dict(grad_req, [x.name for x in data_shapes])

        if shared_group is not None:
            self.shared_data_arrays = shared_group.shared_data_arrays
        else:
            self.shared_data_arrays = [{} for _ in contexts]

        self.batch_size = None
        self.slices = None
        self.execs = []
        self._default_execs = None
        self._exec_cache = {}
        self._monitors = []
        self._armed = {}      # id(executor) -> (executor, the overlap plan it is marked for)
        self.data_arrays = None
        self.label_arrays = None
        self.param_arrays = None
        self.state_arrays = None
        self.grad_arrays = None
        self.aux_arrays = None
        self.input_grad_arrays = None
        self.data_shapes = None
        self.label_shapes = None
        self.data_names = None
        self.label_names = None
        self.data_layouts = None
        self.label_layouts = None
        self.output_names = self.symbol.list_outputs()
        self.num_outputs = len(self.output_names)
        self.output_layouts = [_batch_axis(self.symbol[index].attr('__layout__'))
                               for index in range(self.num_outputs)]
        self.bind_exec(data_shapes, label_shapes, shared_group)

    def _grad_req_dict(self, grad_req, data_names):
        if isinstance(grad_req, str):
            out = {}
            for k in self.arg_names:
                if k in self.param_names:
                    out[k] = 'null' if k in self.fixed_param_names else grad_req
                elif k in data_names:
                    out[k] = grad_req if self.inputs_need_grad else 'null'
                else:
                    out[k] = 'null'
            return out
        if isinstance(grad_req, (list, tuple)):
            assert len(grad_req) == len(self.arg_names)
            return dict(zip(self.arg_names, grad_req))
        if isinstance(grad_req, dict):
            out = {}
            for k in self.arg_names:
                if k in self.param_names:
                    out[k] = 'null' if k in self.fixed_param_names else 'write'
                elif k in data_names:
                    out[k] = 'write' if self.inputs_need_grad else 'null'
                else:
                    out[k] = 'null'
            out.update(grad_req)
            return out
        raise ValueError("grad_req must be one of str, list, tuple, or dict.")

    # -- slicing and binding ----------------------------------------------------------
    def decide_slices(self, data_shapes):
        """Decide the slices for each context according to the workload.

        Parameters
        ----------
        data_shapes : list of DataDesc
            Shapes of the data or the labels.

        Returns
        -------
        list of int
            The batch axis of each input (-1 where it has none).
        """
        assert len(data_shapes) > 0
        major_axis = [_batch_axis(getattr(x, "layout", None)) for x in data_shapes]
        for (name, shape), axis in zip(data_shapes, major_axis):
            if axis == -1:
                continue
            batch_size = shape[axis]
            if self.batch_size is not None:
                assert batch_size == self.batch_size, (
                    "all data must have the same batch size: "
                    + ("batch_size = %d, but " % self.batch_size)
                    + ("%s has shape %s" % (name, shape)))
            else:
                self.batch_size = batch_size
                self.slices = split_input_slice(self.batch_size, self.workload)
        return major_axis

    def _collect_arrays(self):
        """Collect the executors' arrays into mxnet's per-name, per-device lists."""
        if self.slices:
            self.data_arrays = [[(self.slices[i], e.arg_dict[name])
                                 for i, e in enumerate(self.execs)]
                                for name, _ in self.data_shapes]
        else:
            self.data_arrays = [[(slice(i, i + 1), e.arg_dict[name])
                                 for i, e in enumerate(self.execs)]
                                for name, _ in self.data_shapes]
        self.state_arrays = [[e.arg_dict[name] for e in self.execs] for name in self.state_names]
        if self.label_shapes is not None:
            self.label_arrays = [[(self.slices[i], e.arg_dict[name])
                                  for i, e in enumerate(self.execs)]
                                 for name, _ in self.label_shapes]
        else:
            self.label_arrays = None
        self.param_arrays = [[e.arg_dict[name] for e in self.execs]
                             for name in self.arg_names if name in self.param_names]
        if self.for_training:
            self.grad_arrays = [[e.grad_dict.get(name) for e in self.execs]
                                for name in self.arg_names if name in self.param_names]
        else:
            self.grad_arrays = None
        data_names = [x[0] for x in self.data_shapes]
        if self.inputs_need_grad:
            self.input_grad_arrays = [[e.grad_dict.get(name) for e in self.execs]
                                      for name in data_names if name in self.arg_names]
        else:
            self.input_grad_arrays = None
        self.aux_arrays = [[e.aux_dict[name] for e in self.execs] for name in self.aux_names]
        self._mark_overlap_eligible()

    # -- gradients a distributed kvstore reduces during backward (kvstore_overlap) -----
    def _mark_overlap_eligible(self):
        """Tag the gradients a dist_sync push may reduce while the backward runs: one
        executor, ``grad_req='write'``, dense, computed by the executor's own launches.
        Arrays shared with a group bound before (bucketing) keep that group's tag."""
        if not self.for_training or len(self.execs) != 1:
            return
        exe = self.execs[0]
        if getattr(exe, "_rows", None) or getattr(exe, "_shadows", None) or \
                not hasattr(exe, "set_backward_marks"):
            return
        for name, grads in zip([n for n in self.arg_names if n in self.param_names],
                               self.grad_arrays):
            g = grads[0]
            if g is not None and self.grad_req.get(name) == 'write' and not is_sparse(g) \
                    and eligible_owner(g) is None:
                mark_eligible(g, self)

    @staticmethod
    def _last_touch(exe):
        """Gradient name -> position of the last backward launch that touches it."""
        prog = getattr(exe, "_train_prog", None)
        if prog is None:
            return None
        last = {}
        for pos, ln in enumerate(prog.launches_in("bwd")):
            for arg in ln.args:
                if arg[0] == "grad":
                    last[arg[1]] = pos
        return last

    def gradient_finish(self, grads):
        """Per array of ``grads`` (this group's gradients), the backward launch after
        which it is final (-1: no launch writes it); None where that is not known."""
        if len(self.execs) != 1:
            return None
        exe = self.execs[0]
        last = self._last_touch(exe)
        if last is None:
            return None
        names = {id(g): n for n, g in exe.grad_dict.items()}
        if any(id(g) not in names for g in grads):
            return None
        return [last.get(names[id(g)], -1) for g in grads]

    def _arm_overlap(self, exe):
        """Mark ``exe``'s backward launches for the overlap plan its gradients carry."""
        first = next((g[0] for g in self.grad_arrays or [] if g[0] is not None), None)
        plan = getattr(first, "_overlap_plan", None)
        armed = self._armed.get(id(exe))
        if (armed[1] if armed else None) is plan or not hasattr(exe, "set_backward_marks"):
            return
        last = self._last_touch(exe) if plan is not None else None
        exe.set_backward_marks(plan.marks_for(exe.grad_dict, last) if last else None)
        self._armed[id(exe)] = (exe, plan)

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        """Bind executors on their respective devices.

        Parameters
        ----------
        data_shapes : list of DataDesc
        label_shapes : list of DataDesc or None
        shared_group : DataParallelExecutorGroup, optional
        reshape : bool
            Re-bind existing executors for new shapes, sharing parameters,
            gradients, auxiliary states and internal memory with the first
            binding.
        """
        assert reshape or not self.execs
        # mxnet's executor group binds with type_dict = the descriptors' dtypes
        given = {}
        for desc in list(data_shapes) + list(label_shapes or []):
            dtype = getattr(desc, "dtype", None)
            if dtype is not None:
                name = getattr(desc, "name", desc[0])
                given[name] = check_dtype(name, dtype, "bind: DataDesc")
        self._dtypes = all_dtypes(self.symbol, given)
        self._stypes = infer_storage(self.symbol)
        self.batch_size = None
        self.data_layouts = self.decide_slices(data_shapes)
        if label_shapes is not None:
            self.label_layouts = self.decide_slices(label_shapes)
        key = self._shape_key(data_shapes, label_shapes)
        with threads.chosen_count():        # zeroing the arrays: a busy machine's count
            for i in range(len(self.contexts)):
                data_shapes_i = self._sliced_shape(data_shapes, i, self.data_layouts)
                if label_shapes is not None:
                    label_shapes_i = self._sliced_shape(label_shapes, i, self.label_layouts)
                else:
                    label_shapes_i = []
                if reshape:
                    cached = self._exec_cache.get((key, i))
                    if cached is None:
                        cached = self._reshape_ith_exec(i, data_shapes_i + label_shapes_i)
                        self._exec_cache[(key, i)] = cached
                    self.execs[i] = cached
                else:
                    exe = self._bind_ith_exec(i, data_shapes_i, label_shapes_i, shared_group)
                    self._exec_cache[(key, i)] = exe
                    self.execs.append(exe)
        self.data_shapes = data_shapes
        self.label_shapes = label_shapes
        self.data_names = [i.name for i in self.data_shapes]
        if label_shapes is not None:
            self.label_names = [i.name for i in self.label_shapes]
        self._collect_arrays()

    @staticmethod
    def _shape_key(data_shapes, label_shapes):
        return (tuple((d.name, tuple(d.shape)) for d in data_shapes),
                None if label_shapes is None else
                tuple((d.name, tuple(d.shape)) for d in label_shapes))

    def reshape(self, data_shapes, label_shapes):
        """Reshape executors for new input shapes.

        Shapes seen before reuse their executors (and compiled Programs);
        new shapes compile a Program and share every parameter, gradient and
        auxiliary array with the first binding.

        Parameters
        ----------
        data_shapes : list of DataDesc
        label_shapes : list of DataDesc or None
        """
        if data_shapes == self.data_shapes and label_shapes == self.label_shapes:
            return
        if self._default_execs is None:
            self._default_execs = list(self.execs)
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def _infer_arg_shapes(self, i, input_shapes):
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**input_shapes)
        if arg_shapes is None:
            raise MXNetError(f"cannot infer the shapes of every argument on {self.contexts[i]} "
                             f"from the per-device input shapes {input_shapes}")
        return arg_shapes, aux_shapes

    def _bind_ith_exec(self, i, data_shapes, label_shapes, shared_group):
        """Bind the i-th executor, sharing with ``shared_group.execs[i]`` where given."""
        shared_exec = None if shared_group is None else shared_group.execs[i]
        context = self.contexts[i]
        shared_data_arrays = self.shared_data_arrays[i]
        input_shapes = {d.name: tuple(d.shape) for d in data_shapes}
        if label_shapes is not None:
            input_shapes.update({d.name: tuple(d.shape) for d in label_shapes})
        arg_shapes, aux_shapes = self._infer_arg_shapes(i, input_shapes)
        place = placement(self.symbol, context, self.group2ctxs[i])
        args, grads, aux = {}, {}, {}
        for name, shape in zip(self.arg_names, arg_shapes):
            shape, at = tuple(shape), place.get(name, context)
            need_grad = self.grad_req[name] != 'null'
            if name in self.param_names:
                args[name] = self._shared_or_new(shared_exec, "arg_dict", name, shape, at)
                if need_grad:
                    grads[name] = self._shared_or_new(shared_exec, "grad_dict", name, shape, at)
            else:
                args[name] = self._get_or_reshape(name, shared_data_arrays, shape, at,
                                                  self._dtypes[name],
                                                  self._stypes["args"].get(name, "default"))
                if need_grad:
                    grads[name] = new_array(self._stypes["grads"].get(name, "default"),
                                            shape, at, self._dtypes[name])
        for name, shape in zip(self.aux_names, aux_shapes):
            aux[name] = self._shared_or_new(shared_exec, "aux_dict", name, tuple(shape),
                                            place.get(name, context))
        exe = bind(self.symbol, context, args, grads, self.grad_req, aux,
                   shared_exec=shared_exec, group2ctx=self.group2ctxs[i])
        self._account(exe)
        return exe

    def _reshape_ith_exec(self, i, shapes_i):
        """A new executor for new shapes that shares arrays with the default one."""
        base = self._default_execs[i]
        context = self.contexts[i]
        input_shapes = {d.name: tuple(d.shape) for d in shapes_i}
        arg_shapes, aux_shapes = self._infer_arg_shapes(i, input_shapes)
        place = placement(self.symbol, context, self.group2ctxs[i])
        args, grads, aux = {}, {}, {}
        for name, shape in zip(self.arg_names, arg_shapes):
            shape, at = tuple(shape), place.get(name, context)
            args[name] = self._shared_or_new(base, "arg_dict", name, shape, at)
            if self.grad_req[name] != 'null':
                grads[name] = self._shared_or_new(base, "grad_dict", name, shape, at)
        for name, shape in zip(self.aux_names, aux_shapes):
            aux[name] = self._shared_or_new(base, "aux_dict", name, tuple(shape),
                                            place.get(name, context))
        exe = bind(self.symbol, context, args, grads, self.grad_req, aux, shared_exec=base,
                   group2ctx=self.group2ctxs[i])
        for mon in self._monitors:
            mon.install(exe)
        return exe

    def _shared_or_new(self, shared_exec, which, name, shape, context):
        if shared_exec is not None:
            arr = getattr(shared_exec, which).get(name)
            if arr is not None and tuple(arr.shape) == shape:
                return arr
            if arr is not None and (name in self.param_names or which == "aux_dict"):
                # parameters are shared, never silently re-allocated (mxnet refuses too)
                raise MXNetError(
                    f"parameter '{name}' has shape {tuple(arr.shape)}, but the input shapes "
                    f"now given imply {shape}; only data and label shapes may change "
                    f"between batches or buckets")
        stype = "default" if which == "aux_dict" else \
            self._stypes["grads" if which == "grad_dict" else "args"].get(name, "default")
        return new_array(stype, shape, context, self._dtypes[name])

    @staticmethod
    def _get_or_reshape(name, shared_data_arrays, shape, context, dtype, stype="default"):
        """An input array from the shared pool: reused (as a view) when large enough;
        a csr input is its own array (of this shape)."""
        arr = shared_data_arrays.get(name)
        if stype != "default":
            if not (is_sparse(arr) and tuple(arr.shape) == tuple(shape)):
                arr = new_array(stype, shape, context, dtype)
                shared_data_arrays[name] = arr
            return arr
        if is_sparse(arr):
            arr = None
        if arr is not None and arr.numel() >= _numel(shape) and \
                arr.device == context.torch_device and str(torch_dtype(arr)) == f"torch.{dtype}":
            return as_ndarray(arr.reshape(-1)[:_numel(shape)].view(shape), context)
        arr = empty(shape, context, dtype)
        shared_data_arrays[name] = arr
        return arr

    def _account(self, exe):
        nbytes = 0
        for d in (exe.arg_dict, exe.grad_dict, exe.aux_dict):
            nbytes += sum(array_nbytes(a) for a in d.values() if a is not None)
        nbytes += sum(o.element_size() * o.numel() for o in exe.outputs)
        nbytes += int(getattr(exe, "_total_exec_bytes", 0) or 0)
        self._total_exec_bytes += nbytes

    def _sliced_shape(self, shapes, i, major_axis):
        """The (name, shape) descriptors of the i-th executor's part of the batch."""
        cls = DataDesc
        sliced_shapes = []
        for desc, axis in zip(shapes, major_axis):
            shape = list(desc.shape)
            if axis >= 0:
                shape[axis] = self.slices[i].stop - self.slices[i].start
            sliced_shapes.append(cls(desc.name, tuple(shape), getattr(desc, "dtype", np.float32),
                                     getattr(desc, "layout", None)))
        return sliced_shapes

    # -- parameters -------------------------------------------------------------------
    def set_params(self, arg_params, aux_params, allow_extra=False):
        """Copy parameters into every executor.

        Parameters
        ----------
        arg_params : dict of str to NDArray
        aux_params : dict of str to NDArray
        allow_extra : bool
            Ignore names the symbol does not have instead of raising.
        """
        for exec_ in self.execs:
            for name, array in arg_params.items():
                if name in exec_.arg_dict:
                    _copy_into(array, exec_.arg_dict[name])
                elif not allow_extra:
                    raise ValueError('Find name "%s" that is not in the arguments' % name)
            if aux_params is None:
                continue
            for name, array in aux_params.items():
                if name in exec_.aux_dict:
                    _copy_into(array, exec_.aux_dict[name])
                elif not allow_extra:
                    raise ValueError('Find name %s that is not in the auxiliary states' % name)

    def get_params(self, arg_params, aux_params):
        """Copy the device parameters (averaged over devices) into ``arg_params`` / ``aux_params``.

        The dicts' NDArrays are updated in place.
        """
        for name, block in zip(self.param_names, self.param_arrays):
            self._average_into(block, arg_params[name])
        for name, block in zip(self.aux_names, self.aux_arrays):
            self._average_into(block, aux_params[name])

    @staticmethod
    def _average_into(block, dst):
        if any(is_sparse(w) for w in block) or is_sparse(dst):
            _average_sparse_into(block, dst)
            return
        with torch.no_grad():
            if len(block) == 1:
                weight = block[0]
            else:
                weight = sum(w.to(dst.device) for w in block) / len(block)
            dst.copy_(weight.to(device=dst.device, dtype=torch_dtype(dst)))

    # -- computation --------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Split ``data_batch`` according to the workload and run forward on each device.

        Parameters
        ----------
        data_batch : DataBatch or list of DataBatch
            A list holds one pre-sliced batch per device.
        is_train : bool, optional
            Defaults to ``for_training``.
        """
        # the copies are ATen calls too: the launches' thread count (runtime.threads)
        threads.run(None, self._load_batch, data_batch)
        if is_train is None:
            is_train = self.for_training
        for exec_ in self.execs:
            exec_.forward(is_train=is_train)

    def _load_batch(self, data_batch):
        """Copy the batch's data and labels into the executors' input arrays."""
        _load_data(data_batch, self.data_arrays, self.data_layouts)
        if isinstance(data_batch, list):
            if self.label_arrays is not None and data_batch is not None and data_batch[0].label:
                _load_label(data_batch, self.label_arrays, self.label_layouts)
        else:
            if self.label_arrays is not None and data_batch.label:
                _load_label(data_batch, self.label_arrays, self.label_layouts)

    def get_output_shapes(self):
        """``[(name, shape)]`` of the merged outputs."""
        outputs = self.execs[0].outputs
        concat_shapes = []
        for key, out, axis in zip(self.symbol.list_outputs(), outputs, self.output_layouts):
            the_shape = list(out.shape)
            if axis >= 0:
                the_shape[axis] = self.batch_size
            concat_shapes.append((key, tuple(the_shape)))
        return concat_shapes

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        """Outputs of the last forward, ``[begin, end)``.

        Returns ``[out1, out2]`` merged along each output's batch axis, or
        ``[[out1_dev1, out1_dev2], [out2_dev1, out2_dev2]]`` without merging.
        """
        if end is None:
            end = self.num_outputs
        outputs = [[exec_.outputs[i] for exec_ in self.execs] for i in range(begin, end)]
        if merge_multi_context:
            outputs = _merge_multi_context(outputs, self.output_layouts[begin:end])
        return outputs

    def get_states(self, merge_multi_context=True):
        """State arrays, ``[[state1_dev1, state1_dev2], ...]`` (merging is not supported)."""
        assert not merge_multi_context, \
            "merge_multi_context=True is not supported for get_states yet."
        return self.state_arrays

    def set_states(self, states=None, value=None):
        """Set the states from per-device arrays or fill them with one scalar."""
        if states is not None:
            assert value is None, "Only one of states & value can be specified."
            _load_general(states, self.state_arrays, (0,) * len(states))
        else:
            assert value is not None, "At least one of states & value must be specified."
            assert states is None, "Only one of states & value can be specified."
            for d_dst in self.state_arrays:
                for dst in d_dst:
                    with torch.no_grad():
                        dst.fill_(float(value))

    def get_input_grads(self, merge_multi_context=True):
        """Gradients with respect to the data inputs (needs ``inputs_need_grad``)."""
        assert self.inputs_need_grad
        if merge_multi_context:
            return _merge_multi_context(self.input_grad_arrays, self.data_layouts)
        return self.input_grad_arrays

    def backward(self, out_grads=None):
        """Run backward on every device; ``out_grads`` are sliced like the batch."""
        assert self.for_training, 're-bind with for_training=True to run backward'
        if out_grads is None:
            out_grads = []
        elif isinstance(out_grads, torch.Tensor):
            out_grads = [out_grads]
        if len(self.execs) == 1:
            self._arm_overlap(self.execs[0])
        for i, (exec_, islice) in enumerate(zip(self.execs, self.slices)):
            out_grads_slice = []
            for grad, axis in zip(out_grads, self.output_layouts):
                grad = _to_tensor(grad)
                if axis >= 0:
                    part = grad.narrow(axis, islice.start, islice.stop - islice.start)
                    out_grads_slice.append(part.to(self.contexts[i].torch_device))
                else:
                    out_grads_slice.append(grad.to(self.contexts[i].torch_device))
            exec_.backward(out_grads=out_grads_slice or None)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with each device's outputs and its slice of ``labels``."""
        for current_exec, (texec, islice) in enumerate(zip(self.execs, self.slices)):
            if not pre_sliced:
                labels_slice = []
                for label, axis in zip(labels, self.label_layouts):
                    if axis == 0 and islice.start == 0 and islice.stop == len(label):
                        labels_slice.append(label)          # one device: the whole batch
                    elif axis == 0:
                        labels_slice.append(label[islice])
                    elif axis > 0:
                        labels_slice.append(as_ndarray(_to_tensor(label).narrow(
                            axis, islice.start, islice.stop - islice.start)))
                    else:
                        labels_slice.append(label)
            else:
                labels_slice = labels[current_exec]
            labels_ = OrderedDict(zip(self.label_names or [], labels_slice))
            preds = OrderedDict(zip(self.output_names, texec.outputs))
            eval_metric.update_dict(labels_, preds)

    def install_monitor(self, mon):
        """Install a monitor on every executor (and on executors made by later reshapes)."""
        self._monitors.append(mon)
        for exe in self.execs:
            mon.install(exe)


def _average_sparse_into(block, dst):
    """``_average_into`` where the device arrays or ``dst`` are sparse: one device's
    array is copied as it is; several are averaged through their dense values."""
    if len(block) == 1 and is_sparse(block[0]) and getattr(dst, "stype", None) == block[0].stype:
        if block[0] is not dst:
            block[0].copyto(dst)
        return
    dense = [w._dense() if is_sparse(w) else w.as_subclass(torch.Tensor) for w in block]
    mean = sum(d.to(dst.device) for d in dense) / len(dense)
    _copy_into(mean.to(dst.dtype), dst)
