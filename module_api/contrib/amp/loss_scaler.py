"""mxnet's dynamic loss scaler for AMP, over plain gradient arrays."""
from __future__ import annotations

import logging

import torch

_LOG = logging.getLogger(__name__)


class LossScaler:
    """Dynamic loss scaler, with mxnet 1.9.1's constants.

    The scale starts at 2**16, halves after a step whose gradients overflow
    (that step is skipped) and doubles after 2000 steps in a row without one,
    up to 2**24.

    Properties
    ----------
    loss_scale : float
        The current loss scale.
    """

    def __init__(self):
        self._loss_scale = 2. ** 16
        self._next_loss_scale = self._loss_scale
        self._max_loss_scale = 2. ** 24
        self._scale_seq_len = 2000
        self._unskipped = 0

    @property
    def loss_scale(self):
        return self._loss_scale

    def has_overflow(self, params):
        """Whether any gradient holds inf or nan; updates the scale as mxnet does.

        Parameters
        ----------
        params : list
            Gradient arrays (NDArray / torch tensors), or objects with a
            ``_grad`` list as gluon parameters have (its first array is read).
        """
        grads = []
        for p in params:
            g = getattr(p, "_grad", p)
            if isinstance(g, (list, tuple)):
                g = g[0] if g else None
            if g is not None:
                grads.append(g.as_subclass(torch.Tensor) if isinstance(g, torch.Tensor) else g)
        overflow = any(not bool(torch.isfinite(g).all()) for g in grads)
        self.update_scale(overflow)
        return overflow

    def update_scale(self, overflow):
        """Count one step: ``overflow`` (its gradients held inf or nan) halves the
        scale the next step uses; 2000 steps in a row without one double it."""
        self._loss_scale = self._next_loss_scale
        if overflow:
            self._next_loss_scale = self._loss_scale / 2.
            self._unskipped = 0
            _LOG.info("AMP: decreasing loss scale to %f", self._next_loss_scale)
        else:
            self._unskipped += 1
        if self._unskipped == self._scale_seq_len:
            self._unskipped = 0
            self._next_loss_scale = min(self._max_loss_scale, self._loss_scale * 2.)
            _LOG.info("AMP: increasing loss scale to %f", self._next_loss_scale)
