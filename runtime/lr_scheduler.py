"""Learning-rate schedules with mxnet 1.9.1's names, arguments and semantics.

``scheduler(num_update)`` returns the learning rate after ``num_update`` updates
(``num_update`` is the largest per-weight update count, as the optimizer keeps it).
They keep state as mxnet's do: Factor and MultiFactor lower ``base_lr`` in place as
``num_update`` passes their steps, Poly and Cosine write the current rate into it.
Attribute names are mxnet's too: an optimizer sets ``base_lr``, and optimizer states
pickled by mxnet carry a scheduler's attributes by name.
"""
from __future__ import annotations

import logging
from math import cos, pi

log = logging.getLogger("symtriton")

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


def _check_max_update(max_update):
    if not isinstance(max_update, int) or max_update < 1:
        raise ValueError(f"max_update must be a positive int, got {max_update!r}")


def _check_factor(factor):
    if factor > 1.0:
        raise ValueError(f"factor must be at most 1 (the rate only decreases), got {factor}")


class LRScheduler:
    """The base of the schedules: ``base_lr``, reached after ``warmup_steps`` updates
    that start at ``warmup_begin_lr`` and rise linearly (``warmup_mode='linear'``) or
    stay there (``'constant'``)."""

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an int of 0 or more, got {warmup_steps!r}")
        if warmup_begin_lr > base_lr:
            raise ValueError(f"warmup_begin_lr ({warmup_begin_lr}) is above base_lr "
                             f"({base_lr}): a warmup rises to the base rate")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError(f"warmup_mode must be 'linear' or 'constant', got "
                             f"{warmup_mode!r}")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_final_lr = base_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        """The rate at update ``num_update`` of the warmup (below ``warmup_steps``)."""
        if num_update >= self.warmup_steps:
            raise ValueError(f"update {num_update} is past the {self.warmup_steps} warmup "
                             f"steps")
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        rise = self.warmup_final_lr - self.warmup_begin_lr
        return self.warmup_begin_lr + rise * float(num_update) / float(self.warmup_steps)

    def __call__(self, num_update):
        raise NotImplementedError(f"{type(self).__name__} defines no schedule: subclass "
                                  f"LRScheduler and define __call__(num_update)")


class FactorScheduler(LRScheduler):
    """``base_lr`` times ``factor`` once for every ``step`` updates passed, never below
    ``stop_factor_lr``."""

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError(f"step must be at least 1 update, got {step}")
        _check_factor(factor)
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr
        self.count = 0              # the updates the decays so far account for

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
                log.info("Update[%d]: now learning rate arrived at %0.5e, will not change in "
                         "the future", num_update, self.base_lr)
            else:
                log.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """``base_lr`` times ``factor`` at each update count of ``step`` (a strictly
    increasing list) that ``num_update`` has passed."""

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, list) or not step:
            raise ValueError(f"step must be a non-empty list of update counts, got {step!r}")
        if min(step) < 1 or any(b <= a for a, b in zip(step, step[1:])):
            raise ValueError(f"step must be update counts of 1 or more, strictly "
                             f"increasing, got {step}")
        _check_factor(factor)
        self.step = step
        self.factor = factor
        self.cur_step_ind = 0       # the next entry of step to pass
        self.count = 0              # the last entry passed

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
            log.info("Update[%d]: Change learning rate to %0.5e", num_update, self.base_lr)
        return self.base_lr


class PolyScheduler(LRScheduler):
    """From ``base_lr`` down to ``final_lr`` along ``(1 - t) ** pwr``, ``t`` the share
    of the ``max_update - warmup_steps`` updates after the warmup done; ``final_lr``
    after ``max_update``."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_max_update(max_update)
        self.power = pwr
        self.base_lr_orig = self.base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = max_update - self.warmup_steps

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            done = float(num_update - self.warmup_steps) / float(self.max_steps)
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * \
                pow(1 - done, self.power)
        return self.base_lr


class CosineScheduler(LRScheduler):
    """From ``base_lr`` down to ``final_lr`` along half a cosine over the
    ``max_update - warmup_steps`` updates after the warmup; ``final_lr`` after."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_max_update(max_update)
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr
        self.max_steps = max_update - self.warmup_steps

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            angle = pi * (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * \
                (1 + cos(angle)) / 2
        return self.base_lr


SCHEDULERS = {c.__name__: c for c in (LRScheduler, FactorScheduler, MultiFactorScheduler,
                                      PolyScheduler, CosineScheduler)}
