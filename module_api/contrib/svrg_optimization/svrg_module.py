"""``SVRGModule``: a Module trained with stochastic variance-reduced gradients (mxnet's
``mxnet.contrib.svrg_optimization.svrg_module``; Johnson and Zhang, 2013).

Every ``update_freq`` epochs the module takes a snapshot ``w~`` of its parameters
and the mean gradient over the whole training set at ``w~`` (the full gradient
``mu``, :meth:`SVRGModule.update_full_grads`). Each step then updates with

    g = grad(w; batch) - grad(w~; batch) + mu

computed by running the batch through the module and through an auxiliary Module
holding ``w~`` (``_mod_aux``). With a kvstore (several devices or workers) each
device's mean is summed in the kvstore under ``<name>_full`` keys, which
``_SVRGOptimizer`` assigns rather than updates, and shared out again.

Two places where mxnet 1.9.1's code is not followed, because its answer is wrong:

* mxnet adds each new pass's gradients to the previous full gradient instead of
  starting from zero, so from the second pass on ``mu`` is off by the old ``mu``
  divided by the number of batches; here each pass starts from zero;
* mxnet's ``init_optimizer`` pulls the zeroed ``<name>_full`` keys into the devices'
  parameter arrays when the kvstore updates, so the first step of a multi-device
  run computes its gradients at zero weights; here the parameters stay as
  initialized.
"""
from __future__ import annotations

import logging

from runtime import context as _ctx

from ... import ndarray as nd
from ...model_base import _create_kvstore
from ...module.module import Module, _updater_keys
from .svrg_optimizer import _SVRGOptimizer


class SVRGModule(Module):
    """A Module whose updates use the SVRG rule (module docstring).

    Parameters
    ----------
    symbol, data_names, label_names, logger, context, work_load_list, fixed_param_names,
    state_names, group2ctxs, compression_params
        As :class:`~module_api.module.Module`.
    update_freq : int
        How often, in epochs, :meth:`fit` computes the full gradients again (2: every
        other epoch).

    Raises
    ------
    TypeError
        ``update_freq`` is not an int.
    ValueError
        ``update_freq`` is not positive.
    """

    def __init__(self, symbol, data_names=('data',), label_names=('softmax_label',),
                 logger=logging, context=_ctx.cpu(), work_load_list=None,
                 fixed_param_names=None, state_names=None, group2ctxs=None,
                 compression_params=None, update_freq=None):
        super().__init__(symbol, data_names=data_names, label_names=label_names,
                         logger=logger, context=context, work_load_list=work_load_list,
                         fixed_param_names=fixed_param_names, state_names=state_names,
                         group2ctxs=group2ctxs, compression_params=compression_params)
        if not isinstance(update_freq, int) or isinstance(update_freq, bool):
            raise TypeError("update_freq in SVRGModule must be an integer to represent the "
                            "frequency for calculating full gradients")
        if update_freq <= 0:
            raise ValueError("update_freq in SVRGModule must be a positive integer to "
                             "represent the frequency for calculating full gradients")
        self.update_freq = update_freq
        self._mod_aux = Module(symbol, data_names, label_names, logger, context,
                               work_load_list, fixed_param_names, state_names, group2ctxs,
                               compression_params)
        self._param_dict = None         # per device: name -> the full gradient there
        self._ctx_len = len(self._context)

    # -- binding -------------------------------------------------------------------------
    def _reset_bind(self):
        super()._reset_bind()
        self._mod_aux._reset_bind()

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind the module and, for training, its auxiliary module (see ``Module.bind``)."""
        super().bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind,
                     shared_module, grad_req)
        if for_training:
            self._mod_aux.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                               force_rebind, shared_module, grad_req)

    def reshape(self, data_shapes, label_shapes=None):
        """Reshape both modules (see ``Module.reshape``)."""
        super().reshape(data_shapes, label_shapes=label_shapes)
        self._mod_aux.reshape(data_shapes, label_shapes=label_shapes)

    # -- the optimizer -------------------------------------------------------------------
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install ``_SVRGOptimizer`` around ``optimizer``, and with a kvstore its
        ``<name>_full`` keys, where the full gradients are summed.

        Parameters
        ----------
        kvstore : str or KVStore
        optimizer : str or Optimizer
            The optimizer that updates the parameters.
        optimizer_params : dict or sequence of pairs
        force_init : bool
        """
        params = self.get_params()[0]
        self._param_dict = [{name: nd.zeros(value.shape, ctx=c) for name, value in params.items()}
                            for c in self._context]
        wrapper = self._create_optimizer(_SVRGOptimizer.__name__, optimizer, kvstore,
                                         optimizer_params)
        super().init_optimizer(kvstore=kvstore, optimizer=wrapper,
                               optimizer_params=optimizer_params, force_init=force_init)
        if self._kvstore:
            for name in self._exec_group.param_names:
                self._kvstore.init(name + "_full", nd.zeros(self._arg_params[name].shape))

    def _create_optimizer(self, optimizer, default_opt, kvstore, optimizer_params):
        """The ``_SVRGOptimizer``: Module's ``rescale_grad`` and ``idx2name``, with one
        more index per parameter for its ``_full`` key."""
        batch_size = self._exec_group.batch_size
        kv, on_kvstore = _create_kvstore(kvstore, self._ctx_len, self._arg_params)
        if kv and "dist" in kv.type and "_sync" in kv.type:
            batch_size *= kv.num_workers
        idx2name = _updater_keys(self._exec_group.param_names, self._ctx_len, on_kvstore)
        for name in self._param_dict[0]:
            idx2name[max(idx2name) + 1] = name + "_full"
        params = dict(optimizer_params)
        params.setdefault("rescale_grad", 1.0 / batch_size)
        params["default_optimizer"] = default_opt
        params["param_idx2name"] = idx2name
        from runtime import optimizer as opt
        return opt.create(optimizer, **params)

    # -- computation ---------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        """Forward the batch; in training, through the auxiliary module too."""
        super().forward(data_batch, is_train)
        if is_train:
            self._mod_aux.forward(data_batch, is_train)

    def backward(self, out_grads=None):
        """Backward through the module and, once bound, the auxiliary module."""
        super().backward(out_grads)
        if self._mod_aux.binded:
            self._mod_aux.backward(out_grads)

    def update(self):
        """Rewrite the gradients by the SVRG rule, then update as ``Module.update``."""
        self._update_svrg_gradients()
        super().update()

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Prepare both modules for ``data_batch`` (see ``Module.prepare``)."""
        super().prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self._mod_aux.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)

    def update_full_grads(self, train_data):
        """Snapshot the parameters into the auxiliary module and compute, on each device,
        the mean over ``train_data``'s batches of their gradient there (the last batch
        counted by the part of it that is not padding); with a kvstore, summed over
        devices and workers in it.

        Parameters
        ----------
        train_data : DataIter
            Reset first; read to its end.
        """
        names = self._exec_group.param_names
        arg, aux = self.get_params()
        self._mod_aux.set_params(arg_params=arg, aux_params=aux)
        sums = [{name: nd.zeros(self._param_dict[i][name].shape, ctx=c)
                 for name in names} for i, c in enumerate(self._context)]
        train_data.reset()
        nbatch = padding = 0
        for batch in train_data:
            self._mod_aux.forward(batch, is_train=True)
            self._mod_aux.backward()
            nbatch += 1
            for i in range(self._ctx_len):
                for index, name in enumerate(names):
                    sums[i][name] += self._mod_aux._exec_group.grad_arrays[index][i]
            padding = batch.pad
        batches = nbatch - padding / train_data.batch_size
        for name in names:
            means = [sums[i][name] / batches for i in range(self._ctx_len)]
            for i, mean in enumerate(means):
                self._param_dict[i][name] = mean
            if self._kvstore:
                self._accumulate_kvstore(name, means)

    def _accumulate_kvstore(self, key, value):
        """Sum the devices' (and workers') full gradients of ``key`` in the kvstore and
        share the mean out to the devices."""
        self._kvstore.push(key + "_full", value)
        self._kvstore._barrier()
        self._kvstore.pull(key + "_full", value)
        self._allocate_gradients(key, value)

    def _allocate_gradients(self, key, value):
        """Each device's full gradient of ``key``: the kvstore's sum over the devices."""
        for i in range(self._ctx_len):
            self._param_dict[i][key] = value[i] / self._ctx_len

    @staticmethod
    def _svrg_grads_update_rule(g_curr_batch_curr_weight, g_curr_batch_special_weight,
                                g_special_weight_all_batch):
        """``g(w; batch) - g(w~; batch) + mu``, written into the first array (returned)."""
        g_curr_batch_curr_weight -= g_curr_batch_special_weight
        g_curr_batch_curr_weight += g_special_weight_all_batch
        return g_curr_batch_curr_weight

    def _update_svrg_gradients(self):
        """Apply the SVRG rule to every parameter's gradient on every device."""
        for i in range(self._ctx_len):
            for index, name in enumerate(self._exec_group.param_names):
                self._svrg_grads_update_rule(self._exec_group.grad_arrays[index][i],
                                             self._mod_aux._exec_group.grad_arrays[index][i],
                                             self._param_dict[i][name])

    # -- training ------------------------------------------------------------------------
    def _fit_epoch(self, train_data, epoch, begin_epoch, eval_metric, monitor,
                   batch_end_callback, sparse_row_id_fn):
        """``Module.fit``'s epoch, after the full gradients every ``update_freq`` epochs."""
        if epoch % self.update_freq == 0:
            self.update_full_grads(train_data)
            train_data.reset()
        return super()._fit_epoch(train_data, epoch, begin_epoch, eval_metric, monitor,
                                  batch_end_callback, sparse_row_id_fn)
