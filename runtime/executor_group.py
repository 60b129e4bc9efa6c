"""``DataParallelExecutorGroup``: one executor per context, a batch split between them.

The class mxnet 1.9.1's Module drives (``mxnet.module.executor_group``), with its
constructor, attributes and methods. Each context gets its own :class:`Executor`
(``[cpu(0), cpu(1)]`` are two executors); a batch is cut along each input's batch
axis by ``split_input_slice`` and the outputs are joined back along each output's
batch axis (its ``__layout__``, ``N`` by default); the copies both ways are in
``device_batches.py``.

Parameters (weights, gradients, auxiliary states) are matched by name, never by
position. With ``shared_group`` (bucketing) every executor reuses the shared
group's parameter tensors (the *same* tensor objects), takes its internal buffers
from the shared executor's pool, and takes its data arrays from
``shared_data_arrays`` when one of the same name is large enough.
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
from .device_batches import (as_plain_tensor, copy_into, copy_per_device, load_batch_field,
                             merge_per_device)
from .ndarray import as_ndarray, empty, torch_dtype
from .executor_sparse import array_nbytes, is_sparse, new_array
from .kvstore_overlap import eligible_owner, mark_eligible

_LOG = logging.getLogger(__name__)


def _as_desc(x):
    """A DataDesc from a DataDesc, a descriptor-like object or a ``(name, shape)`` pair."""
    if isinstance(x, DataDesc):
        return x
    if hasattr(x, "name") and hasattr(x, "shape") and hasattr(x, "layout"):
        return DataDesc(x.name, tuple(x.shape), getattr(x, "dtype", np.float32), x.layout)
    return DataDesc(*x)


def _contexts_per_device(group2ctxs, n_devices):
    """mxnet's ``group2ctxs`` as one ``{ctx_group: Context}`` (or None) per device.

    A list already has one dict per device. A dict maps each group to one context
    (every device's), a list of one context, or a list of one context per device.
    """
    if group2ctxs is None:
        return [None] * n_devices
    if isinstance(group2ctxs, list):
        if len(group2ctxs) != n_devices:
            raise AssertionError(f"length of group2ctxs should be {n_devices} (one dict per "
                                 f"context), got {len(group2ctxs)}")
        return group2ctxs
    if not isinstance(group2ctxs, dict):
        raise AssertionError("group2ctxs should be list of dict of str to context, "
                             "or dict of str to context or list of context")
    per_device = [{} for _ in range(n_devices)]
    for group, where in group2ctxs.items():
        if isinstance(where, Context):
            where = [where]
        where = list(where)
        if len(where) == 1:
            where = where * n_devices
        if len(where) != n_devices:
            raise AssertionError(f"length of group2ctxs[{group}] should be {n_devices} or 1, "
                                 f"got {len(where)}")
        for device, ctx in enumerate(where):
            per_device[device][group] = ctx
    return per_device


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
        self.group2ctxs = _contexts_per_device(group2ctxs, len(contexts))
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
        self.output_layouts = [DataDesc.get_batch_axis(self.symbol[k].attr('__layout__'))
                               for k in range(self.num_outputs)]
        self.bind_exec(data_shapes, label_shapes, shared_group)

    def _grad_req_dict(self, grad_req, data_names):
        """``grad_req`` as ``{argument: req}``. A string is the request of every
        trainable parameter (and of the data with ``inputs_need_grad``); a dict
        overrides the default ``'write'`` name by name; a list gives every argument's."""
        if isinstance(grad_req, (list, tuple)):
            assert len(grad_req) == len(self.arg_names), \
                f"grad_req has {len(grad_req)} entries for {len(self.arg_names)} arguments"
            return dict(zip(self.arg_names, grad_req))
        if isinstance(grad_req, str):
            default, named = grad_req, {}
        elif isinstance(grad_req, dict):
            default, named = 'write', grad_req
        else:
            raise ValueError("grad_req must be one of str, list, tuple, or dict.")

        def request(name):
            if name in self.param_names:
                return 'null' if name in self.fixed_param_names else default
            if name in data_names and self.inputs_need_grad:
                return default
            return 'null'
        return {**{name: request(name) for name in self.arg_names}, **named}

    # -- slicing and binding ----------------------------------------------------------
    def decide_slices(self, data_shapes):
        """Fix the batch size from ``data_shapes`` and cut it by the workload.

        The first input with a batch axis sets ``batch_size`` and ``slices`` (one
        slice of the batch per context); every later one must agree.

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
        axes = [DataDesc.get_batch_axis(getattr(d, "layout", None)) for d in data_shapes]
        for desc, axis in zip(data_shapes, axes):
            if axis < 0:
                continue
            name, shape = desc[0], desc[1]
            if self.batch_size is None:
                self.batch_size = shape[axis]
                self.slices = split_input_slice(self.batch_size, self.workload)
            elif shape[axis] != self.batch_size:
                raise AssertionError(
                    f"all data must have the same batch size: batch_size = {self.batch_size}, "
                    f"but {name} has shape {shape}")
        return axes

    def _per_device(self, where, names):
        """``[[exe.<where>[name] for each executor] for each name]``; a gradient may be
        absent (None), an argument or auxiliary state may not."""
        if where == "grad_dict":
            return [[exe.grad_dict.get(name) for exe in self.execs] for name in names]
        return [[getattr(exe, where)[name] for exe in self.execs] for name in names]

    def _sliced_targets(self, descs):
        """Per input name, ``(batch slice, device array)`` for each executor."""
        parts = self.slices or [slice(k, k + 1) for k in range(len(self.execs))]
        return [list(zip(parts, per_device))
                for per_device in self._per_device("arg_dict", [d[0] for d in descs])]

    def _collect_arrays(self):
        """Gather the executors' arrays per name and device, in mxnet's attribute names
        (``data_arrays``, ``param_arrays``, ``grad_arrays`` ...), which the Module and the
        kvstore read."""
        params = [name for name in self.arg_names if name in self.param_names]
        data_names = [d[0] for d in self.data_shapes]
        self.data_arrays = self._sliced_targets(self.data_shapes)
        self.label_arrays = (None if self.label_shapes is None
                             else self._sliced_targets(self.label_shapes))
        self.state_arrays = self._per_device("arg_dict", self.state_names)
        self.param_arrays = self._per_device("arg_dict", params)
        self.aux_arrays = self._per_device("aux_dict", self.aux_names)
        self.grad_arrays = self._per_device("grad_dict", params) if self.for_training else None
        self.input_grad_arrays = (
            self._per_device("grad_dict", [n for n in data_names if n in self.arg_names])
            if self.inputs_need_grad else None)
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
        self._dtypes = all_dtypes(self.symbol, self._declared_dtypes(data_shapes, label_shapes))
        self._stypes = infer_storage(self.symbol)
        self.batch_size = None
        self.data_layouts = self.decide_slices(data_shapes)
        if label_shapes is not None:
            self.label_layouts = self.decide_slices(label_shapes)
        key = self._shape_key(data_shapes, label_shapes)
        with threads.chosen_count():        # zeroing the arrays: a busy machine's count
            for device in range(len(self.contexts)):
                inputs = self._sliced_shape(data_shapes, device, self.data_layouts)
                labels = ([] if label_shapes is None else
                          self._sliced_shape(label_shapes, device, self.label_layouts))
                if not reshape:
                    exe = self._bind_ith_exec(device, inputs, labels, shared_group)
                    self.execs.append(exe)
                elif (key, device) in self._exec_cache:
                    exe = self.execs[device] = self._exec_cache[(key, device)]
                else:
                    exe = self.execs[device] = self._reshape_ith_exec(device, inputs + labels)
                self._exec_cache[(key, device)] = exe
        self.data_shapes = data_shapes
        self.label_shapes = label_shapes
        self.data_names = [d.name for d in data_shapes]
        if label_shapes is not None:
            self.label_names = [d.name for d in label_shapes]
        self._collect_arrays()

    @staticmethod
    def _declared_dtypes(data_shapes, label_shapes):
        """``{input name: dtype}`` the descriptors declare (mxnet binds with them as
        its ``type_dict``), each checked to be a dtype the targets have."""
        declared = {}
        for desc in list(data_shapes) + list(label_shapes or []):
            dtype = getattr(desc, "dtype", None)
            if dtype is not None:
                name = getattr(desc, "name", desc[0])
                declared[name] = check_dtype(name, dtype, "bind: DataDesc")
        return declared

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
        """The descriptors of executor ``i``'s part of the batch: each batch axis cut to
        the length of its slice, dtype and layout kept."""
        rows = self.slices[i].stop - self.slices[i].start if self.slices else None
        part = []
        for desc, axis in zip(shapes, major_axis):
            shape = tuple(rows if k == axis else d for k, d in enumerate(desc.shape))
            part.append(DataDesc(desc.name, shape, getattr(desc, "dtype", np.float32),
                                 getattr(desc, "layout", None)))
        return part

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
        if not allow_extra:
            stray = [n for n in arg_params if n not in self.execs[0].arg_dict]
            if stray:
                raise ValueError(f'Find name "{stray[0]}" that is not in the arguments '
                                 f'(the symbol\'s arguments: {sorted(self.execs[0].arg_dict)}); '
                                 f'pass allow_extra=True to skip such names')
            stray = [n for n in (aux_params or {}) if n not in self.execs[0].aux_dict]
            if stray:
                raise ValueError(f"Find name {stray[0]} that is not in the auxiliary states "
                                 f"({sorted(self.execs[0].aux_dict)}); pass allow_extra=True "
                                 f"to skip such names")
        for exe in self.execs:
            for given, bound in ((arg_params, exe.arg_dict), (aux_params or {}, exe.aux_dict)):
                for name, value in given.items():
                    if name in bound:
                        copy_into(value, bound[name])

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
        """Copy the batch's data, and its labels where it has them, into the executors'
        input arrays (``data_batch`` may be a list of batches, one per device)."""
        load_batch_field(data_batch, "data", self.data_arrays, self.data_layouts)
        first = data_batch[0] if isinstance(data_batch, list) else data_batch
        if self.label_arrays is not None and first is not None and first.label:
            load_batch_field(data_batch, "label", self.label_arrays, self.label_layouts)

    def get_output_shapes(self):
        """``[(name, shape)]`` of the merged outputs (batch axes at the whole batch)."""
        shapes = []
        for name, out, axis in zip(self.output_names, self.execs[0].outputs,
                                   self.output_layouts):
            shape = tuple(self.batch_size if k == axis else d for k, d in enumerate(out.shape))
            shapes.append((name, shape))
        return shapes

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        """Outputs of the last forward, ``[begin, end)``.

        Returns ``[out1, out2]`` merged along each output's batch axis, or
        ``[[out1_dev1, out1_dev2], [out2_dev1, out2_dev2]]`` without merging.
        """
        picked = range(begin, self.num_outputs if end is None else end)
        per_device = [[exe.outputs[k] for exe in self.execs] for k in picked]
        if not merge_multi_context:
            return per_device
        return merge_per_device(per_device, [self.output_layouts[k] for k in picked])

    def get_states(self, merge_multi_context=True):
        """State arrays, ``[[state1_dev1, state1_dev2], ...]`` (merging is not supported)."""
        assert not merge_multi_context, \
            "merge_multi_context=True is not supported for get_states yet."
        return self.state_arrays

    def set_states(self, states=None, value=None):
        """Set the states from per-device arrays, or fill every state with one scalar.

        Parameters
        ----------
        states : list of list of NDArray, optional
            Per state name, one array per device.
        value : number, optional
        """
        if (states is None) == (value is None):
            raise AssertionError("Only one of states & value can be specified."
                                 if states is not None else
                                 "At least one of states & value must be specified.")
        if states is None:
            with torch.no_grad():
                for per_device in self.state_arrays:
                    for array in per_device:
                        array.fill_(float(value))
            return
        for k, per_device in enumerate(states):
            if not isinstance(per_device, (list, tuple)):
                raise ValueError(f"set_states: states[{k}] ({self.state_names[k]}) must be a "
                                 f"list with one array per device ({len(self.execs)}), got "
                                 f"{type(per_device).__name__}")
        copy_per_device(states, self.state_arrays)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients with respect to the data inputs (needs ``inputs_need_grad``)."""
        assert self.inputs_need_grad
        if not merge_multi_context:
            return self.input_grad_arrays
        return merge_per_device(self.input_grad_arrays, self.data_layouts)

    def backward(self, out_grads=None):
        """Run backward on every device; ``out_grads`` are sliced like the batch."""
        assert self.for_training, 're-bind with for_training=True to run backward'
        if isinstance(out_grads, torch.Tensor):
            out_grads = [out_grads]
        heads = [as_plain_tensor(g) for g in out_grads or []]
        if len(self.execs) == 1:
            self._arm_overlap(self.execs[0])
        for exe, part, ctx in zip(self.execs, self.slices, self.contexts):
            mine = [self._rows_of(head, axis, part).to(ctx.torch_device)
                    for head, axis in zip(heads, self.output_layouts)]
            exe.backward(out_grads=mine or None)

    @staticmethod
    def _rows_of(array, axis, part):
        """The slice ``part`` of ``array`` along ``axis``; all of it where ``axis`` < 0."""
        return array if axis < 0 else array.narrow(axis, part.start, part.stop - part.start)

    def _labels_of_device(self, labels, part):
        """Each label cut to one device's slice of the batch (NDArrays for the metric);
        a device holding the whole batch gets the labels themselves."""
        cut = []
        for label, axis in zip(labels, self.label_layouts):
            if axis < 0 or (axis == 0 and part.start == 0 and part.stop == len(label)):
                cut.append(label)
            elif axis == 0:
                cut.append(label[part])
            else:
                cut.append(as_ndarray(self._rows_of(as_plain_tensor(label), axis, part)))
        return cut

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with each device's outputs and its part of ``labels``.

        Parameters
        ----------
        eval_metric : EvalMetric
        labels : list of NDArray
            The whole batch's labels, or with ``pre_sliced`` one list per device.
        pre_sliced : bool
        """
        for device, (exe, part) in enumerate(zip(self.execs, self.slices)):
            mine = labels[device] if pre_sliced else self._labels_of_device(labels, part)
            eval_metric.update_dict(OrderedDict(zip(self.label_names or [], mine)),
                                    OrderedDict(zip(self.output_names, exe.outputs)))

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
    copy_into(mean.to(torch_dtype(dst)), dst)
