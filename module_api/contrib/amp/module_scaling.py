"""Dynamic loss scaling for a Module or BucketingModule: ``amp.init_trainer(module)``.

mxnet 1.9.1 scales the loss for Gluon Trainers only (``scale_loss`` multiplies a loss
NDArray). A Module's loss is an operator of its graph (SoftmaxOutput and the other
loss outputs take no head gradient), so the scale goes into the graph instead: each
executor compiles its training Program with a one-element ``loss_scale`` input that
multiplies every head's starting gradient (``Executor.set_loss_scale``;
``compiler/passes/autodiff.py``). Changing the value recompiles nothing. A step:

- ``backward``: the executors' scale is the scaler's current one;
- ``update``: per device one fused pass checks the parameter gradients for inf / nan
  and divides them by that scale; a step with an overflow is skipped and halves the
  scale, 2000 clean steps in a row double it (mxnet's ``LossScaler``). The optimizer
  then sees the gradients it would without scaling.

Executors that share memory (a BucketingModule's buckets, reshapes) share the scale
and compile with it, so buckets bound later are scaled too. Input gradients
(``inputs_need_grad``) come out multiplied by the scale, as a scaled loss's do in
mxnet, unless :func:`unscale` ran first.
"""
from __future__ import annotations

import logging

import torch

from compiler.errors import MXNetError
from runtime.ndarray import torch_dtype

log = logging.getLogger("symtriton")


def _current(module):
    """The Module whose executors ran the last forward (a bucket's, for bucketing)."""
    return getattr(module, "_curr_module", None) or module


def _all_modules(module):
    buckets = getattr(module, "_buckets", None)
    return list(buckets.values()) if buckets is not None else [module]


class ModuleLossScaling:
    """What :func:`~module_api.contrib.amp.amp.init_trainer` attaches to a module (as
    ``module._amp_loss_scaling``): the scaler, and the module's ``backward`` / ``update``
    wrapped on the instance."""

    def __init__(self, module, scaler):
        if not (module.binded and module.for_training and module.optimizer_initialized):
            raise MXNetError(
                f"amp.init_trainer: {type(module).__name__} must be bound for training "
                f"with its optimizer initialized (bind, init_params, init_optimizer), "
                f"then init_trainer, then fit / forward_backward / update")
        if getattr(module, "_amp_loss_scaling", None) is not None:
            raise MXNetError("amp.init_trainer: this module already has a loss scaler")
        self.module, self.scaler = module, scaler
        self._used = None          # the scale of the last backward (None: unscaled)
        self._overflow = False
        self._set_scale(scaler.loss_scale)      # compiles the scaled Programs
        self._backward, self._update = module.backward, module.update
        module.backward, module.update = self.backward, self.update
        module._amp_loss_scaling = self

    def _set_scale(self, value):
        for m in _all_modules(self.module):
            for exe in m._exec_group.execs:
                if not hasattr(exe, "set_loss_scale"):
                    raise MXNetError(
                        "amp.init_trainer: loss scaling is not built for executors "
                        "partitioned over contexts (group2ctx)")
                exe.set_loss_scale(value)

    def backward(self, out_grads=None):
        """The module's backward, with every head's gradient times the loss scale."""
        scale = self.scaler.loss_scale
        for exe in _current(self.module)._exec_group.execs:
            exe.set_loss_scale(scale)
        self._backward(out_grads=out_grads)
        self._used, self._overflow = scale, False

    def unscale(self):
        """Check the last backward's parameter gradients for inf / nan and divide them
        by its loss scale, in place (once per backward)."""
        if self._used is None:
            return
        grads = [g for per_param in _current(self.module)._exec_group.grad_arrays
                 for g in per_param if g is not None]
        by_device = {}
        for g in grads:
            t = g.as_subclass(torch.Tensor)
            by_device.setdefault((t.device, torch_dtype(t)), []).append(t)
        found = False
        for (device, _), ts in by_device.items():
            found_inf = torch.zeros(1, dtype=torch.float32, device=device)
            inv = torch.full((1,), 1.0 / self._used, dtype=torch.float32, device=device)
            torch._amp_foreach_non_finite_check_and_unscale_(ts, found_inf, inv)
            found = found or bool(found_inf.item())
        self._overflow = found
        self._used = None

    def update(self):
        """The module's update on unscaled gradients, skipped after an overflow."""
        self.unscale()
        overflow = self._overflow
        self.scaler.update_scale(overflow)
        if overflow:
            log.info("AMP: skipped an update (inf / nan gradients); loss scale now %g",
                     self.scaler.loss_scale)
            return
        self._update()
